"""Training-job logs from CloudWatch Logs, read with your own credentials.

SageMaker writes one stream per host and job to `/aws/sagemaker/TrainingJobs`, named
`<job>/algo-<n>-<epoch seconds>`. A reader keeps each stream's forward token, so a follow
reads only what is new; hosts are ordered by number (algo-2 before algo-10).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sagewarden_cli.errors import API_ERROR, NOT_FOUND, CliError

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
# how long a reader keeps looking for a line that may still be on its way: CloudWatch Logs
# ingests a line some time after it is written (AWS publishes no bound)
LATE_LINES_MS = 180_000
_STREAM = re.compile(r"^(?P<job>.+)/algo-(?P<host>\d+)-(?P<epoch>\d+)$")


@dataclass(frozen=True)
class LogLine:
    timestamp_ms: int
    host: int
    message: str


@dataclass
class _Stream:
    name: str
    host: int
    token: str | None = None


@dataclass
class JobLogReader:
    client: Any  # a boto3 `logs` client
    job_name: str
    host: int | None = None  # only this host (algo-<host>)
    tail: int | None = None  # start with the last N lines of each host instead of the beginning
    _streams: dict[str, _Stream] = field(default_factory=dict)

    def hosts(self) -> list[int]:
        return sorted({s.host for s in self._streams.values()})

    def refresh_streams(self) -> list[int]:
        """Find the job's streams (new hosts appear while a job starts); returns all hosts seen."""
        from botocore.exceptions import ClientError

        seen: list[tuple[int, int, str]] = []
        try:
            pages = self.client.get_paginator("describe_log_streams").paginate(
                logGroupName=LOG_GROUP, logStreamNamePrefix=f"{self.job_name}/"
            )
            for page in pages:
                for s in page.get("logStreams", []):
                    m = _STREAM.match(s["logStreamName"])
                    if m and m.group("job") == self.job_name:
                        seen.append((int(m.group("host")), int(m.group("epoch")), s["logStreamName"]))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                return self.hosts()  # no training log group yet: no job has logged in this region
            raise _logs_error(exc) from exc
        for host, _, name in sorted(seen):
            if name not in self._streams:
                self._streams[name] = _Stream(name, host)
        return self.hosts()

    def read_new(self) -> list[LogLine]:
        """Every line not read yet, of every (selected) host, in time order."""
        from botocore.exceptions import ClientError

        lines: list[LogLine] = []
        for stream in sorted(self._streams.values(), key=lambda s: (s.host, s.name)):
            if self.host is not None and stream.host != self.host:
                continue
            try:
                lines += self._read(stream)
            except ClientError as exc:
                raise _logs_error(exc) from exc
        lines.sort(key=lambda line: (line.timestamp_ms, line.host))
        return lines

    def _read(self, stream: _Stream) -> list[LogLine]:
        out: list[LogLine] = []
        args: dict[str, Any] = {"logGroupName": LOG_GROUP, "logStreamName": stream.name}
        if stream.token is None:
            if self.tail is not None:
                args.update(startFromHead=False, limit=max(1, self.tail))
                resp = self.client.get_log_events(**args)
                events = resp.get("events", [])[-self.tail :] if self.tail else []
                out += [LogLine(e["timestamp"], stream.host, e["message"]) for e in events]
                stream.token = resp.get("nextForwardToken")
                args.pop("limit")
            args["startFromHead"] = True
        while True:
            if stream.token is not None:
                args["nextToken"] = stream.token
            resp = self.client.get_log_events(**args)
            events = resp.get("events", [])
            out += [LogLine(e["timestamp"], stream.host, e["message"]) for e in events]
            token = resp.get("nextForwardToken")
            done = not events or token is None or token == stream.token
            stream.token = token or stream.token
            if done:
                return out


def _logs_error(exc: Any) -> CliError:
    err = exc.response.get("Error", {})
    code = err.get("Code", "error")
    status = NOT_FOUND if code == "ResourceNotFoundException" else API_ERROR
    hint = (
        " (your IAM identity needs logs:DescribeLogStreams and logs:GetLogEvents)"
        if "AccessDenied" in code
        else ""
    )
    return CliError(f"CloudWatch Logs: {code}: {err.get('Message', '')}{hint}", status)


def format_lines(lines: Iterable[LogLine], *, timestamps: bool) -> list[str]:
    from sagewarden_cli.render import iso

    out = []
    for line in lines:
        prefix = f"{iso(line.timestamp_ms)} " if timestamps else ""
        for part in line.message.rstrip("\n").split("\n"):
            out.append(f"{prefix}(algo-{line.host}) {part}")
    return out
