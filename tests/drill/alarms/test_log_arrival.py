"""Log ingestion delay in the simulated account (drill/alarms/metric_delay.py, the ``logs`` source): when a
training job's line becomes readable in CloudWatch Logs, in order per stream, and that both ways
the supervisor reads logs (the simulator's own lines, and moto after a flush) honour it."""

from __future__ import annotations

from collections import deque
from types import SimpleNamespace
from typing import Any

import pytest

from drill.alarms.metric_delay import DEFAULT_LOG_DELAY, MetricDelays, SourceDelay
from drill.clock import VirtualClock
from drill.sim.cloudwatch import SimulatedLogs
from drill.sim.logs import SimLogs
from sagewarden.keys import TRAINING_LOG_GROUP
from tests.drill.alarms.builders import SimOfLogs

MIN = 60_000
STREAM = "job-1/algo-3-1700000000"


@pytest.mark.claim(
    "all under the faithful simulated account: metric datapoints 30 s to 3 min late, log lines 1 s to 3 min late, warm pools that keep their hosts, AWS's rates"
)
def test_each_line_lands_within_the_range_drawn_per_stream_and_minute_and_replays_exactly() -> None:
    delays = MetricDelays(11)
    seen = []
    for stream in (STREAM, "job-1/algo-4-1700000000"):
        for minute in range(400):
            t = minute * MIN + 17_000
            lag = delays.log_line_at(stream, t) - t
            assert 1_000 <= lag <= 15_000 or lag == 180_000
            assert MetricDelays(11).log_line_at(stream, t) == t + lag  # replays from the seed
            assert delays.log_line_at(stream, t + 20_000) - (t + 20_000) == lag  # one draw a minute
            seen.append(lag)
    assert 0.02 < sum(1 for s in seen if s == 180_000) / len(seen) < 0.08  # 5 % of minutes late
    assert len(set(seen)) > 100  # jitter: streams and minutes land at different times
    assert any(
        MetricDelays(12).log_line_at(STREAM, m * MIN) != delays.log_line_at(STREAM, m * MIN)
        for m in range(20)
    )
    assert MetricDelays.none().log_line_at(STREAM, 5) == 5 and MetricDelays().logs == DEFAULT_LOG_DELAY


def test_a_late_line_holds_back_the_later_lines_of_its_stream_and_old_lines_are_all_readable() -> None:
    fixed = MetricDelays(3, logs=SourceDelay(base_s=40, jitter_s=0, late_rate=0))
    times = [0, 10_000, 20_000, 70_000]
    assert fixed.readable(STREAM, times, 39_999) == 0
    assert fixed.readable(STREAM, times, 40_000) == 1
    assert fixed.readable(STREAM, times, 60_000) == 3
    assert fixed.readable(STREAM, times, 109_999) == 3 and fixed.readable(STREAM, times, 110_000) == 4
    # minute 0 late (180 s), minute 1 on time: minute 1's line waits for minute 0's
    late_first = MetricDelays(3, logs=SourceDelay(base_s=5, jitter_s=0, late_rate=1, late_s=180))
    assert late_first.readable(STREAM, [0, 61_000], 179_999) == 0
    assert late_first.readable(STREAM, [0, 61_000], 180_000) == 1
    # lines written after `now` are never readable; lines older than the bound always are
    assert fixed.readable(STREAM, [0, 100_000], 50_000) == 1
    assert MetricDelays(3).readable(STREAM, list(range(0, 3_600_000, 1_000)), 3_600_000 + 180_000) == 3_600


@pytest.mark.claim(
    "a crash that names no host yet is decided a minute after the job's end, so a late Xid line can still name the bad host"
)
def test_the_supervisors_reads_see_only_the_lines_that_have_landed() -> None:
    xid = "NVRM: Xid (PCI:0000:53:00): 79, pid=1234, GPU has fallen off the bus."
    lines = [(0, "step 100 loss 2.1"), (60_000, xid)]
    sim = SimOfLogs({3: lines}, MetricDelays(1, logs=SourceDelay(base_s=40, jitter_s=0, late_rate=0)))
    assert sim.stream(3) == STREAM
    logs = SimulatedLogs(sim)  # type: ignore[arg-type]
    sim.clock.advance_to(61_000)  # the crash a second ago: its Xid line is still on its way
    got = logs.filter_log_events(logGroupName=TRAINING_LOG_GROUP, logStreamNamePrefix="job-1/")
    assert [e["message"] for e in got["events"]] == ["step 100 loss 2.1"]
    tail = logs.get_log_events(logGroupName=TRAINING_LOG_GROUP, logStreamName=STREAM, limit=5)
    assert [e["message"] for e in tail["events"]] == ["step 100 loss 2.1"]
    (stream,) = logs.describe_log_streams(logGroupName=TRAINING_LOG_GROUP, logStreamNamePrefix="job-1/")[
        "logStreams"
    ]
    assert stream["lastEventTimestamp"] == 0
    sim.clock.advance_to(100_000)  # landed
    got = logs.filter_log_events(
        logGroupName=TRAINING_LOG_GROUP, logStreamNamePrefix="job-1/", filterPattern='"Xid"'
    )
    assert [e["message"] for e in got["events"]] == [xid]
    kind = SimOfLogs({3: lines}, None)  # no model: every line at once
    kind.clock.advance_to(61_000)
    got = SimulatedLogs(kind).filter_log_events(logGroupName=TRAINING_LOG_GROUP)  # type: ignore[arg-type]
    assert len(got["events"]) == 2


class _Client:
    def __init__(self) -> None:
        self.put: list[tuple[str, list[int]]] = []

    def create_log_group(self, **_: Any) -> None: ...

    def create_log_stream(self, **_: Any) -> None: ...

    def put_log_events(
        self, *, logStreamName: str, logEvents: list[dict[str, Any]], **_: Any
    ) -> dict[str, Any]:
        self.put.append((logStreamName, [e["timestamp"] for e in logEvents]))
        return {}


def test_the_flush_to_moto_holds_back_lines_that_have_not_landed_and_writes_them_in_order_later() -> None:
    clock = VirtualClock(0)
    client = _Client()
    logs = SimLogs(client, clock, progress_ms=600_000, flush_ms=60_000)
    logs.arrival = MetricDelays(1, logs=SourceDelay(base_s=40, jitter_s=0, late_rate=0))
    job = SimpleNamespace(
        name="job-1",
        created_ms=0,
        _tails={},
        _declared=set(),
        _line_times=[],
        _lines=[],
        _lines_until=10**12,  # no periodic lines
        _phase="idle",
        remote_debug=False,
    )
    job._tails = {3: deque(maxlen=2000)}
    for t in (0, 30_000, 60_000):
        clock.advance_to(t)
        logs.write_line(job, 3, t, f"line at {t}")  # type: ignore[arg-type]
    clock.advance_to(75_000)
    logs.flush()
    assert client.put == [(SimLogs.stream(job, 3), [0, 30_000])]  # type: ignore[arg-type]
    clock.advance_to(100_000)
    logs.flush()
    assert client.put[-1] == (SimLogs.stream(job, 3), [60_000])  # type: ignore[arg-type]
    logs.flush()
    assert len(client.put) == 2  # nothing left


def test_a_scenario_sets_the_log_delay_over_its_defaults_and_mistakes_are_reported() -> None:
    from drill.account.local import BUCKET, EXECUTION_ROLE
    from drill.scenarios.spec import parse
    from tests.drill.scenarios.builders import problems, scenario

    sc = parse(
        scenario(account={"metric_delay": {"logs": {"base_s": 40, "late_rate": 0}}}),
        bucket=BUCKET,
        role_arn=EXECUTION_ROLE,
    )
    logs = MetricDelays.from_dict(sc.metric_delay, seed=sc.seed).logs
    assert (logs.base_s, logs.jitter_s, logs.late_rate) == (40, DEFAULT_LOG_DELAY.jitter_s, 0)
    assert problems(scenario(account={"metric_delay": {"logs": {"late_rate": 2}}})) == [
        "account.metric_delay.logs.late_rate: must be between 0 and 1, got 2"
    ]
