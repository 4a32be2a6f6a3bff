"""FilterLogEvents pages in the simulated account (drill/sim/cloudwatch.py): a call searches a
slice of its window, so a long window is many pages and a quiet slice an empty page with a token
-- what the API reference allows. And the read that met it: the fingerprint read at an ending."""

from __future__ import annotations

from types import SimpleNamespace

from drill.account.local import MemoryCounters
from drill.sim.cloudwatch import SCAN_SLICE_MS, SimulatedLogs
from sagewarden.adapters.cloudwatch_logs_reader import CloudWatchLogsReader
from sagewarden.domain.hosts.bad_hosts import FINGERPRINT_PATTERN, FINGERPRINT_WINDOW_MS
from sagewarden.keys import TRAINING_LOG_GROUP
from sagewarden.usecases.observe_hosts import read_fingerprints
from tests.builders import HOUR, training_run
from tests.drill.alarms.builders import SimOfLogs

MIN = 60_000


def test_a_long_window_is_many_pages_in_time_order_and_a_quiet_slice_is_an_empty_page() -> None:
    sim = SimOfLogs(
        {1: [(2 * MIN, "a"), (31 * MIN, "c")], 2: [(3 * MIN, "b")]}, None, job="job", now=40 * MIN
    )
    logs = SimulatedLogs(sim)  # type: ignore[arg-type]
    pages, token = [], None
    while True:
        kw = {"nextToken": token} if token else {}
        resp = logs.filter_log_events(
            logGroupName=TRAINING_LOG_GROUP, logStreamNamePrefix="job/", startTime=0, **kw
        )
        pages.append([e["message"] for e in resp["events"]])
        token = resp.get("nextToken")
        if not token:
            break
    assert SCAN_SLICE_MS == 10 * MIN
    assert pages == [["a", "b"], [], [], ["c"], []]  # slices 0-10, 10-20, 20-30, 30-40, 40-now
    one = logs.filter_log_events(logGroupName=TRAINING_LOG_GROUP, startTime=0, limit=1)
    assert [e["message"] for e in one["events"]] == ["a"] and one["nextToken"]  # a page within a slice


def test_the_fingerprint_read_at_the_end_of_a_long_attempt_searches_only_its_start() -> None:
    """A 4-host job prints 4 fingerprint lines at start and then trains for 3 hours. A read from
    the start to now searches 18 slices, runs out of its 5 pages and is unknown -- before this,
    every long attempt's failed host lost its fingerprint (and its next attempt paid the infra
    check). The read looks FINGERPRINT_WINDOW_MS past Training's start."""
    run = training_run(instance_count=4)
    cur = run.current
    start = cur.training_started_ms
    lines = {
        h: [(start + 30_000, f"[sagewarden] host={h} fingerprint=GPU-{h}1,GPU-{h}2")]
        + [(start + m * MIN, f"step {m * 10} loss 2.0") for m in range(1, 180)]
        for h in range(1, 5)
    }
    sim = SimOfLogs(lines, None, job=cur.job_name, now=start + 3 * HOUR)
    reader = CloudWatchLogsReader(SimulatedLogs(sim), clock=lambda: sim.clock.now_ms / 1000)  # type: ignore[arg-type]
    sup = SimpleNamespace(logs=reader, counters=MemoryCounters(), clock=lambda: sim.clock.now_ms)
    found, error = read_fingerprints(sup, run, cur.job_name, "failures")  # type: ignore[arg-type]
    assert error is None and len(found) == 4 and all("fingerprint=" in line for line in found)
    # the whole attempt, as the read was before: unknown, not "no fingerprint"
    try:
        reader.matching_lines(cur.job_name, start - MIN, FINGERPRINT_PATTERN, keep=200)
    except Exception as exc:
        assert type(exc).__name__ == "LogReadIncomplete"
    else:
        raise AssertionError("a read of 18 slices in 5 pages must be incomplete")
    assert FINGERPRINT_WINDOW_MS == 20 * MIN


def test_the_moto_path_filters_by_the_stream_prefix_as_cloudwatch_does(aws) -> None:
    """moto ignores FilterLogEvents' logStreamNamePrefix and answers every stream of the group: a
    one-event-a-page read of one job (the log-silence check) paged through every other job's
    lines and ran out of its time budget -- unknown -- where CloudWatch answers the job's own
    streams only. The drill's client gives moto the prefix as the streams written under it."""
    import boto3

    from drill.clock import VirtualClock, moto_logs_follow
    from drill.sim.cloudwatch import FlushOnReadLogs
    from drill.sim.sagemaker import SimSageMaker

    clock = VirtualClock()
    with moto_logs_follow(clock):
        logs = boto3.client("logs", region_name="us-east-1")
        s3 = boto3.client("s3", region_name="us-east-1")
        sim = SimSageMaker(clock, s3_client=s3, logs_client=logs)
        for name in ("job-a", "job-b"):
            job = SimpleNamespace(
                name=name,
                created_ms=0,
                _tails={},
                _declared=set(),
                _line_times=[],
                _lines=[],
                _lines_until=10**15,
                _phase="idle",
                remote_debug=False,
            )
            for m in range(30):
                sim.logs.write_line(job, 1, clock.now_ms + m * MIN, f"{name} line {m}")  # type: ignore[arg-type]
        client = FlushOnReadLogs(logs, sim)
        pages, token = 0, None
        seen: list[str] = []
        while True:
            kw = {"nextToken": token} if token else {}
            resp = client.filter_log_events(
                logGroupName=TRAINING_LOG_GROUP, logStreamNamePrefix="job-a/", startTime=0, limit=1, **kw
            )
            pages += 1
            seen += [e["logStreamName"] for e in resp["events"]]
            token = resp.get("nextToken")
            if not token:
                break
        assert pages == 30 and set(seen) == {"job-a/algo-1-0"}
        none = client.filter_log_events(
            logGroupName=TRAINING_LOG_GROUP, logStreamNamePrefix="job-c/", startTime=0
        )
        assert none["events"] == []
