"""CloudWatch in the simulated account: moto for alarms, the simulator for metric data; training logs
through moto (`FlushOnReadLogs`) or from memory (`SimulatedLogs`).

Why: docs/drill.md (*The simulated services*)."""

from __future__ import annotations

import bisect
import heapq
import itertools
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from drill.alarms.metric_delay import MetricDelays
from drill.clock import VirtualClock
from drill.sim import series
from drill.sim.logs import SimLogs
from drill.sim.model import SimJob
from drill.sim.sagemaker import SimSageMaker
from drill.sim.texts import MINUTE_MS, client_error
from sagewarden.keys import TRAINING_LOG_GROUP


class SimulatedCloudWatch:
    def __init__(
        self,
        moto_client: Any,
        sim: SimSageMaker,
        delays: MetricDelays | None = None,
        clock: VirtualClock | None = None,
    ) -> None:
        self._moto = moto_client
        self._sim = sim
        self._delays = delays if delays is not None else MetricDelays.none()
        self._clock = clock if clock is not None else sim.clock

    def get_metric_data(
        self, *, MetricDataQueries: list[dict[str, Any]], StartTime: datetime, EndTime: datetime, **_: Any
    ) -> dict[str, Any]:
        start, end = int(StartTime.timestamp() * 1000), int(EndTime.timestamp() * 1000)
        results = []
        for q in MetricDataQueries:
            stat = q["MetricStat"]
            metric = stat["Metric"]
            dims = {d["Name"]: d["Value"] for d in metric.get("Dimensions", [])}
            period = int(stat["Period"])
            points = self._sim.metric_datapoints(
                metric["Namespace"], metric["MetricName"], dims, start, end, period, stat["Stat"]
            )
            now = self._clock.now_ms
            arrival = self._delays.series(metric["Namespace"], metric["MetricName"], dims)
            points = [(t, v) for t, v in points if arrival.visible_at(t, period * 1000) <= now]
            results.append(
                {
                    "Id": q["Id"],
                    "Label": metric["MetricName"],
                    "Timestamps": [datetime.fromtimestamp(t / 1000, tz=UTC) for t, _ in reversed(points)],
                    "Values": [v for _, v in reversed(points)],
                    "StatusCode": "Complete",
                }
            )
        return {"MetricDataResults": results, "Messages": []}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._moto, name)


class FlushOnReadLogs:
    """CloudWatch Logs for the supervisor: the simulator's buffered log lines are written to moto
    right before anything reads them, so reads are always current and quiet stretches of
    virtual time cost no log writes.

    FilterLogEvents filters by ``logStreamNamePrefix`` as CloudWatch does: moto ignores the
    prefix and answers every stream of the group, so a read of one job, one event a page
    (``limit=1``), would page through every other job's lines. The prefix is given to moto as the
    names of the streams the simulator wrote under it (one page of a job's own events, as AWS
    would answer)."""

    READS = frozenset({"get_log_events", "filter_log_events", "describe_log_streams"})

    def __init__(self, moto_client: Any, sim: SimSageMaker) -> None:
        self._moto = moto_client
        self._sim = sim

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._moto, name)
        if name in self.READS:
            self._sim.flush_logs()
        return attr

    def filter_log_events(self, **kwargs: Any) -> Any:
        self._sim.flush_logs()
        prefix = kwargs.pop("logStreamNamePrefix", None)
        if prefix is not None and "logStreamNames" not in kwargs:
            names = sorted(n for n in self._sim.logs.stream_names() if n.startswith(prefix))
            if not names:  # no stream under the prefix: CloudWatch answers no event
                return {"events": [], "searchedLogStreams": []}
            kwargs["logStreamNames"] = names
        return self._moto.filter_log_events(**kwargs)


class SimulatedLogs:
    """The CloudWatch Logs reads the supervisor makes, answered from the simulator's own lines.

    Supports DescribeLogStreams (by name prefix, ordered by name), GetLogEvents (from the end or
    the head, with a limit and a time window) and FilterLogEvents (by stream prefix, time window
    and one quoted term, paged), in the API's response shapes. Each host's newest 2,000 lines are kept; a
    read reaching further back sees only those. A read sees the lines that have reached CloudWatch
    Logs by now (``drill/alarms/metric_delay.py``, the ``logs`` source). Anything else is not supported.
    """

    def __init__(self, sim: SimSageMaker, group: str = TRAINING_LOG_GROUP) -> None:
        self._sim = sim
        self._group = group

    def _arrived(self, name: str, job: SimJob, host: int) -> tuple[list[int], list[tuple[int, str]]]:
        """The stream's lines that have reached CloudWatch Logs by now (the simulator's
        ``logs.arrival``; every line written when it has none): their times and (time, text)."""
        events = self._sim.log_events(job, host)
        times = [t for t, _ in events]
        arrival = self._sim.logs.arrival
        if arrival is None:
            return times, events
        n = arrival.readable(name, times, self._sim.clock.now_ms)
        return times[:n], events[:n]

    def _check_group(self, group: str, operation: str) -> None:
        if group != self._group or not self._sim.has_logs():
            raise client_error(
                "ResourceNotFoundException", "The specified log group does not exist.", operation
            )

    def describe_log_streams(
        self,
        *,
        logGroupName: str,
        logStreamNamePrefix: str = "",
        orderBy: str = "LogStreamName",
        descending: bool = False,
        limit: int = 50,
        nextToken: str | None = None,
    ) -> dict[str, Any]:
        self._check_group(logGroupName, "DescribeLogStreams")
        if orderBy != "LogStreamName" or descending:
            raise NotImplementedError("SimulatedLogs lists streams by name, ascending")
        streams = self._sim.log_streams(logStreamNamePrefix)
        if nextToken is not None:
            streams = [s for s in streams if s[0] > nextToken]
        page = streams[:limit]
        out: list[dict[str, Any]] = []
        for name, job, host in page:
            _, events = self._arrived(name, job, host)
            entry: dict[str, Any] = {
                "logStreamName": name,
                "creationTime": events[0][0] if events else job.created_ms,
                "arn": f"arn:aws:logs:{self._sim.region}:{self._sim.account_id}:log-group:{self._group}:log-stream:{name}",
                "storedBytes": 0,
            }
            if events:
                entry["firstEventTimestamp"] = events[0][0]
                entry["lastEventTimestamp"] = events[-1][0]
                entry["lastIngestionTime"] = events[-1][0]
            out.append(entry)
        resp: dict[str, Any] = {"logStreams": out}
        if len(streams) > limit and page:
            resp["nextToken"] = page[-1][0]
        return resp

    def get_log_events(
        self,
        *,
        logGroupName: str,
        logStreamName: str,
        startTime: int | None = None,
        endTime: int | None = None,
        limit: int = 10_000,
        startFromHead: bool = False,
        **_: Any,
    ) -> dict[str, Any]:
        self._check_group(logGroupName, "GetLogEvents")
        match = self._sim.log_stream(logStreamName)
        if match is None:
            raise client_error(
                "ResourceNotFoundException", "The specified log stream does not exist.", "GetLogEvents"
            )
        job, host = match
        events = [
            (t, m)
            for t, m in self._arrived(logStreamName, job, host)[1]
            if (startTime is None or t >= startTime) and (endTime is None or t < endTime)
        ]
        events = events[:limit] if startFromHead else events[-limit:]
        return {
            "events": [{"timestamp": t, "message": m, "ingestionTime": t} for t, m in events],
            "nextForwardToken": f"f/{events[-1][0] if events else 0:020d}",
            "nextBackwardToken": f"b/{events[0][0] if events else 0:020d}",
        }

    def filter_log_events(
        self,
        *,
        logGroupName: str,
        logStreamNamePrefix: str = "",
        startTime: int | None = None,
        endTime: int | None = None,
        limit: int = 10_000,
        filterPattern: str = "",
        nextToken: str | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Events by stream prefix and time window, oldest first, at most `limit` (10,000) a page,
        with a `nextToken` to the rest. The API reference says a page may come back empty while
        more events remain behind its token, and not how a call divides its search: here each
        call searches the next SCAN_SLICE_MS of the window (every stream, in time order), so a
        long window is many pages and a quiet slice an empty one. `filterPattern`: see
        :func:`phrase_matcher`."""
        self._check_group(logGroupName, "FilterLogEvents")
        matches = phrase_matcher(filterPattern)
        streams = self._sim.log_streams(logStreamNamePrefix)
        lines = {name: self._arrived(name, job, host) for name, job, host in streams}
        if nextToken:
            at, _, skip = nextToken.partition(":")
            lo, offset = int(at), int(skip or 0)
        else:  # the window's start, or the oldest line when it names none
            lo = (
                startTime
                if startTime is not None
                else min((times[0] for times, _ in lines.values() if times), default=0)
            )
            offset = 0
        stop = endTime if endTime is not None else self._sim.clock.now_ms + 1
        hi = min(lo + SCAN_SLICE_MS, stop)
        found: list[tuple[int, str, str]] = []
        for name, (times, events) in lines.items():
            for t, m in events[bisect.bisect_left(times, lo) : bisect.bisect_left(times, hi)]:
                if matches(m):
                    found.append((t, name, m))
        found.sort(key=lambda e: (e[0], e[1]))
        page = found[offset : offset + min(limit, 10_000)]
        out: dict[str, Any] = {
            "events": [
                {
                    "logStreamName": name,
                    "timestamp": t,
                    "message": m,
                    "ingestionTime": t,
                    "eventId": f"{t}-{lo}-{offset + i}",
                }
                for i, (t, name, m) in enumerate(page)
            ],
            "searchedLogStreams": [],
        }
        if offset + len(page) < len(found):
            out["nextToken"] = f"{lo}:{offset + len(page)}"
        elif hi < stop:
            out["nextToken"] = f"{hi}:0"
        return out


# how much of its time window one simulated FilterLogEvents call searches: AWS publishes nothing of
# how a call divides its search, and may answer empty pages; slices of a few minutes are the unkind case
SCAN_SLICE_MS = 10 * MINUTE_MS


_OR_TERM = re.compile(r'\?"([^"]+)"')


def phrase_matcher(pattern: str) -> Callable[[str], bool]:
    """A CloudWatch Logs filter pattern of the forms the service writes: none (every event), one
    quoted phrase (``"..."``, matched as written: case counts) or quoted phrases each marked with
    ``?`` (``?"a" ?"b"``: events holding any of them, as the filter-pattern syntax documents).
    Other forms raise NotImplementedError rather than match what AWS would not."""
    if not pattern:
        return lambda _: True
    if len(pattern) >= 2 and pattern[0] == pattern[-1] == '"' and '"' not in pattern[1:-1]:
        phrase = pattern[1:-1]
        return lambda m: phrase in m
    terms = _OR_TERM.findall(pattern)
    if terms and _OR_TERM.sub("", pattern).strip() == "":
        return lambda m: any(t in m for t in terms)
    raise NotImplementedError(
        f"the simulated logs match a quoted phrase or ?-marked phrases, not {pattern!r}"
    )


class ScriptLogs:
    """FilterLogEvents over the training script's log as the script writes it, for a reader that
    polls the log itself (the benchmark's polling scripts): every host writes
    ``log_lines_per_minute`` lines in each minute of a logging phase (or one line every
    ``log_every_minutes`` minutes), plus every discrete line (start-up, checkpoint saves, the lines a
    fault writes). The minutes are those of the heartbeat metric (``drill.sim.series``), computed
    from the job's phases, so weeks of hundreds of hosts cost nothing to keep; the simulator's
    in-memory tails (:class:`SimulatedLogs`) hold the periodic lines only every
    ``progress_log_interval_s`` (10 minutes by default). Lines are readable as soon as written
    (CloudWatch Logs publishes no ingestion delay). Only FilterLogEvents is answered.
    """

    def __init__(self, sim: SimSageMaker, group: str = TRAINING_LOG_GROUP) -> None:
        self._sim = sim
        self._group = group
        self._order: dict[str, list[tuple[str, int]]] = {}  # job -> (stream, host) by stream name

    def _streams(self, job: SimJob) -> list[tuple[str, int]]:
        order = self._order.get(job.name)
        if order is None:
            order = sorted((SimLogs.stream(job, h), h) for h in range(1, job.instance_count + 1))
            self._order[job.name] = order
        return order

    def _events(self, job: SimJob, start: int, end: int) -> Iterator[tuple[int, str, str]]:
        """(ms, stream, text) of the job's lines in [start, end), up to now, oldest first."""
        now = self._sim.clock.now_ms
        end = min(end, now + 1)
        streams = self._streams(job)
        names = dict((h, name) for name, h in streams)
        i = bisect.bisect_left(job._lines, (start,))
        discrete = ((t, names[h], text) for t, h, text in itertools.islice(job._lines, i, None))
        per_minute = max(job.profile.log_lines_per_minute, 1)
        gap = MINUTE_MS // per_minute

        def periodic() -> Iterator[tuple[int, str, str]]:
            first = start // MINUTE_MS * MINUTE_MS
            for m, kind in series.logging_minutes(job, first, end, now):
                text = PERIODIC_TEXT.get(kind, kind)
                for k in range(per_minute):
                    t = m + k * gap
                    if start <= t < end:
                        for name, _ in streams:
                            yield t, name, text

        for event in heapq.merge(discrete, periodic()):
            if event[0] >= end:
                return
            yield event

    def filter_log_events(
        self,
        *,
        logGroupName: str,
        logStreamNamePrefix: str = "",
        startTime: int | None = None,
        endTime: int | None = None,
        limit: int = 10_000,
        filterPattern: str = "",
        nextToken: str | None = None,
        **_: Any,
    ) -> dict[str, Any]:
        """As :meth:`SimulatedLogs.filter_log_events` (stream prefix, time window, a filter pattern
        of :func:`phrase_matcher`'s forms, pages of at most 10,000 events, oldest first)."""
        if logGroupName != self._group or not self._sim.jobs():
            raise client_error(
                "ResourceNotFoundException", "The specified log group does not exist.", "FilterLogEvents"
            )
        matches = phrase_matcher(filterPattern)
        job_part = logStreamNamePrefix.split("/", 1)[0]
        jobs = sorted(
            (
                j
                for j in self._sim.jobs()
                if j.name.startswith(job_part) and j.training_started_ms is not None
            ),
            key=lambda j: j.name,
        )
        start = startTime if startTime is not None else 0
        end = endTime if endTime is not None else self._sim.clock.now_ms + 1
        merged = heapq.merge(*(self._events(j, start, end) for j in jobs))
        found = (e for e in merged if e[1].startswith(logStreamNamePrefix) and matches(e[2]))
        offset = int(nextToken) if nextToken else 0
        size = min(limit, 10_000)
        page = list(itertools.islice(found, offset, offset + size + 1))
        more, page = len(page) > size, page[:size]
        out: dict[str, Any] = {
            "events": [
                {
                    "logStreamName": name,
                    "timestamp": t,
                    "message": text,
                    "ingestionTime": t,
                    "eventId": f"{t}-{offset + i}",
                }
                for i, (t, name, text) in enumerate(page)
            ],
            "searchedLogStreams": [],
        }
        if more:
            out["nextToken"] = str(offset + len(page))
        return out


PERIODIC_TEXT = {
    "train": "train step done (loss logged)",
    "eval": "eval batch done",
    "spin_logging": "[watchdog] rank alive, waiting in a collective",
}
