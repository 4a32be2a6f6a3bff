"""Reads the tail of a training job's logs (all hosts) for classification and hang triage.

Streams are `<job>/algo-<n>-<epoch>`; they are found by prefix (DescribeLogStreams) and read
from the end (GetLogEvents startFromHead=False). Stream timestamps from DescribeLogStreams are
eventually consistent, so they are never used to judge silence; triage reports the time of
each host's newest event as returned by GetLogEvents.
"""

from __future__ import annotations

import logging
from typing import Any

from botocore.exceptions import ClientError

from sagewarden import keys

log = logging.getLogger(__name__)
MAX_STREAMS = 16


class CloudWatchLogsReader:
    def __init__(self, client: Any, group: str = keys.TRAINING_LOG_GROUP) -> None:
        self._logs = client
        self._group = group

    def _streams(self, job_name: str) -> list[str]:
        try:
            resp = self._logs.describe_log_streams(
                logGroupName=self._group, logStreamNamePrefix=f"{job_name}/", limit=50
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ResourceNotFoundException":
                return []
            raise
        return sorted(s["logStreamName"] for s in resp.get("logStreams", []))[:MAX_STREAMS]

    def _events(self, stream: str, limit: int) -> list[dict[str, Any]]:
        resp = self._logs.get_log_events(
            logGroupName=self._group, logStreamName=stream, limit=limit, startFromHead=False
        )
        return list(resp.get("events", []))

    def tail(self, job_name: str, lines: int) -> tuple[str, ...]:
        out: list[tuple[int, str]] = []
        for stream in self._streams(job_name):
            host = stream.split("/", 1)[-1].rsplit("-", 1)[0]
            out += [
                (e["timestamp"], f"[{host}] {e['message'].rstrip()}") for e in self._events(stream, lines)
            ]
        out.sort(key=lambda t: t[0])
        return tuple(text for _, text in out[-lines:])

    def has_events_since(self, job_name: str, since_ms: int) -> bool:
        try:
            resp = self._logs.filter_log_events(
                logGroupName=self._group, logStreamNamePrefix=f"{job_name}/", startTime=since_ms, limit=1
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ResourceNotFoundException":
                return False
            raise
        return bool(resp.get("events"))

    def host_triage(self, job_name: str, now_ms: int) -> tuple[str, ...]:
        rows: list[tuple[int, str]] = []
        for stream in self._streams(job_name):
            host = stream.split("/", 1)[-1].rsplit("-", 1)[0]
            events = self._events(stream, 1)
            if not events:
                rows.append((0, f"{host}: no log events"))
                continue
            last = events[-1]
            age = (now_ms - int(last["timestamp"])) / 60_000
            rows.append(
                (
                    int(last["timestamp"]),
                    f"{host}: last log {age:.0f} min ago: {last['message'].strip()[:160]}",
                )
            )
        rows.sort(key=lambda r: r[0])  # the host that went quiet first comes first
        return tuple(text for _, text in rows)
