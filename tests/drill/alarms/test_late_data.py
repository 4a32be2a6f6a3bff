"""The supervisor's alarm shapes keep their meaning when datapoints arrive late.

Evaluated by the drill's CloudWatch evaluator with the simulated account's default ingestion
delays (drill/alarms/metric_delay.py: 30-90 s, 5 % of datapoints 3 minutes late, drawn per datapoint):
a dead host is caught in minutes, a healthy job never alarms, a silence or a stall is judged over
its whole window, not over the minutes whose datapoints are still on their way.
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from drill.alarms.decision import ALARM
from drill.alarms.evaluator import AlarmEvaluator
from drill.alarms.metric_delay import MetricDelays
from drill.clock import VirtualClock
from sagewarden import keys
from sagewarden.adapters.cloudwatch_hang_alarms import alarm_name
from tests.drill.alarms.builders import (
    JOB,
    MIN,
    PREFIX,
    REGION,
    FakeAccount,
    FakeMetrics,
    changes,
    drive,
    gpu,
    hang_spec,
    heartbeat,
    put_hang_alarms,
)

LONE = alarm_name(PREFIX, JOB, "gpu_lone_idle")
IDLE = alarm_name(PREFIX, JOB, "gpu_idle")
SILENCE = alarm_name(PREFIX, JOB, "log_silence")
PROGRESS = alarm_name(PREFIX, JOB, "progress_stalled")
BUSY, IDLE_GPU, SAVING = 760.0, 2.4, 40.0  # summed over 8 GPUs; idle below 8, busy above 400
SEEDS = range(6)
SEED_IDS = [f"delays drawn from seed {seed}" for seed in SEEDS]


@pytest.fixture
def cw(aws: None) -> Any:
    return boto3.client("cloudwatch", region_name=REGION)


@pytest.fixture
def acct(cw: Any) -> FakeAccount:
    clock = VirtualClock()
    return FakeAccount(clock=clock, cloudwatch=cw, sagemaker=FakeMetrics(clock))


def _evaluator(acct: FakeAccount, seed: int, extra: int = 2) -> AlarmEvaluator:
    ev = AlarmEvaluator(acct, delays=MetricDelays(seed), evaluation_range_extra=extra)
    ev.evaluate_due()
    return ev


def _alarmed(ev: AlarmEvaluator, name: str) -> list[int]:
    return [t for t, _, new in changes(ev, name) if new == ALARM]


@pytest.mark.claim("missing = not breaching, 3 breaching minutes of the last 6")
@pytest.mark.claim("so late minutes neither block a catch nor make one")
@pytest.mark.claim(
    "one idle host next to a busy peer for 3 minutes is a strong signal (acted on about 4 to 5 minutes after it started"
)
@pytest.mark.claim(
    "how late metric datapoints arrive (the drill: up to 3 minutes; the alarms keep their meaning up to that, later datapoints delay a catch)"
)
@pytest.mark.parametrize("extra", [0, 2], ids=["a range of exactly n periods", "a range two periods longer"])
@pytest.mark.parametrize("seed", SEEDS, ids=SEED_IDS)
def test_a_dead_host_is_caught_within_five_minutes_when_datapoints_arrive_late(
    acct: FakeAccount, cw: Any, seed: int, extra: int
) -> None:
    t0 = acct.clock.now_ms
    dead_from = t0 + 60 * MIN
    for host in (1, 2, 4):
        gpu(acct, host, lambda t: BUSY)
    gpu(acct, 3, lambda t: 0.0 if t >= dead_from else BUSY)
    put_hang_alarms(cw, hang_spec(hosts=4, idle=20, lone=3))
    ev = _evaluator(acct, seed, extra)
    drive(ev, acct.clock, t0 + 90 * MIN)
    fired = _alarmed(ev, LONE)
    assert fired, "the lone-idle alarm never fired"
    assert dead_from + 3 * MIN <= fired[0] <= dead_from + 5 * MIN, (fired[0] - dead_from) / MIN
    assert ev.late_transitions == 0


def _healthy(t: int, t0: int) -> float:
    """A healthy 4-host job: training, every host idle together for 4-minute data-loader pauses
    and 8 minutes of NCCL init, low for 12-minute saves."""
    minute = (t - t0) // MIN
    if minute % 97 in range(30, 34) or minute % 211 in range(100, 108):
        return IDLE_GPU
    if minute % 60 in range(40, 52):
        return SAVING
    return BUSY


@pytest.mark.claim("so late minutes neither block a catch nor make one")
@pytest.mark.claim(
    "a partly arrived minute may read lone-idle, but at most 2 of them at an evaluation, fewer than the 3 needed"
)
@pytest.mark.claim(
    "how late metric datapoints arrive (the drill: up to 3 minutes; the alarms keep their meaning up to that, later datapoints delay a catch)"
)
@pytest.mark.claim(
    "were CloudWatch to evaluate later in the minute while one host's datapoints lag another's by 2 minutes or more, a healthy job could show 3 partly arrived minutes and a lone-idle window of 3 could fire"
)
@pytest.mark.parametrize("extra", [0, 2], ids=["a range of exactly n periods", "a range two periods longer"])
@pytest.mark.parametrize("seed", SEEDS, ids=SEED_IDS)
def test_a_healthy_job_never_looks_idle_when_datapoints_arrive_late(
    acct: FakeAccount, cw: Any, seed: int, extra: int
) -> None:
    t0 = acct.clock.now_ms
    for host in (1, 2, 3, 4):
        gpu(acct, host, lambda t: _healthy(t, t0))
    put_hang_alarms(cw, hang_spec(hosts=4, idle=20, lone=3))
    ev = _evaluator(acct, seed, extra)
    drive(ev, acct.clock, t0 + 8 * 60 * MIN)
    assert _alarmed(ev, LONE) == [] and _alarmed(ev, IDLE) == []


@pytest.mark.claim("missing = not breaching, 20 of the last 23 minutes")
@pytest.mark.parametrize("extra", [0, 2], ids=["a range of exactly n periods", "a range two periods longer"])
@pytest.mark.parametrize("seed", SEEDS, ids=SEED_IDS)
def test_a_whole_job_idle_is_caught_when_datapoints_arrive_late(
    acct: FakeAccount, cw: Any, seed: int, extra: int
) -> None:
    """gpu-idle treats missing data as not breaching: N of N stayed in OK while the newest minutes
    had not arrived (with a range of exactly N periods, for ever)."""
    t0 = acct.clock.now_ms
    idle_from = t0 + 60 * MIN
    for host in (1, 2):
        gpu(acct, host, lambda t: IDLE_GPU if t >= idle_from else BUSY)
    put_hang_alarms(cw, hang_spec(hosts=2, idle=20, lone=3))
    ev = _evaluator(acct, seed, extra)
    drive(ev, acct.clock, t0 + 120 * MIN)
    fired = _alarmed(ev, IDLE)
    assert fired, "the whole-job idle alarm never fired"
    assert idle_from + 20 * MIN <= fired[0] <= idle_from + 23 * MIN, (fired[0] - idle_from) / MIN


@pytest.mark.claim("Their windows are at least 4 minutes (3 late minutes plus one)")
@pytest.mark.claim("how wide an alarm's evaluation range is (the shapes are tested with N and N + 2 periods)")
@pytest.mark.parametrize("seed", SEEDS, ids=SEED_IDS)
def test_a_short_log_silence_window_does_not_fill_with_late_minutes(
    acct: FakeAccount, cw: Any, seed: int
) -> None:
    """Missing data is breaching: with a 1-minute window the late newest minutes alone alarmed
    a job that logs every minute."""
    t0 = acct.clock.now_ms
    heartbeat(acct, lambda t: 12.0)
    put_hang_alarms(cw, hang_spec(hosts=2, silence=1))
    ev = _evaluator(acct, seed)
    drive(ev, acct.clock, t0 + 6 * 60 * MIN)
    assert _alarmed(ev, SILENCE) == []


@pytest.mark.claim("The silence alarms (missing data breaching) stay N of N")
@pytest.mark.claim(
    "CloudWatch then alarms only once no datapoint is left in its evaluation range, which late minutes cannot cause while older datapoints remain"
)
@pytest.mark.parametrize("seed", SEEDS, ids=SEED_IDS)
def test_log_silence_is_judged_over_its_whole_window_when_heartbeats_arrive_late(
    acct: FakeAccount, cw: Any, seed: int
) -> None:
    """A late heartbeat is missing like a silent minute, but the older ones in the range keep the
    alarm OK: it fires once the range holds no datapoint, as without delays."""
    t0 = acct.clock.now_ms
    silent_from = t0 + 90 * MIN
    heartbeat(acct, lambda t: 12.0 if t < silent_from else None)
    put_hang_alarms(cw, hang_spec(hosts=2, silence=6))
    ev = _evaluator(acct, seed)
    drive(ev, acct.clock, t0 + 120 * MIN)
    assert _alarmed(ev, SILENCE) == [silent_from + (6 + 2) * MIN]


def _progress(acct: FakeAccount, values: Any) -> None:
    acct.sagemaker.set((keys.TRAINING_METRIC_NAMESPACE, "train:step"), {"TrainingJobName": JOB}, values)


@pytest.mark.claim("or not reported (missing = breaching), N of N")
@pytest.mark.parametrize("seed", SEEDS, ids=SEED_IDS)
def test_the_progress_alarm_does_not_read_late_reports_as_a_stall(
    acct: FakeAccount, cw: Any, seed: int
) -> None:
    """Reports pause 2 minutes at each save; with a 5-minute window the old shape (unreported
    minutes filled as stalled) read the 3 late newest minutes as stalled too and fired."""
    t0 = acct.clock.now_ms
    _progress(acct, lambda t: None if (t - t0) // MIN % 30 in (20, 21) else float((t - t0) // MIN))
    spec = hang_spec(hosts=2)
    put_hang_alarms(
        cw, type(spec)(**{**spec.__dict__, "progress_metric": "train:step", "progress_stall_minutes": 5})
    )
    ev = _evaluator(acct, seed)
    drive(ev, acct.clock, t0 + 6 * 60 * MIN)
    assert _alarmed(ev, PROGRESS) == []


@pytest.mark.claim(
    "optional signal: the named metric (the `Name` of one of the job's `MetricDefinitions`) not reported, or reported with the same value, for this long (learned like log silence)"
)
@pytest.mark.claim("the `progress_metric` reported unchanged")
@pytest.mark.parametrize("seed", SEEDS, ids=SEED_IDS)
def test_a_progress_stall_is_caught_after_its_window_not_before(
    acct: FakeAccount, cw: Any, seed: int
) -> None:
    t0 = acct.clock.now_ms
    stall_from = t0 + 60 * MIN
    # the step counter stops advancing (still printed): reported, unchanged
    _progress(acct, lambda t: float(min(t, stall_from) - t0) // MIN)
    spec = hang_spec(hosts=2)
    put_hang_alarms(
        cw, type(spec)(**{**spec.__dict__, "progress_metric": "train:step", "progress_stall_minutes": 5})
    )
    ev = _evaluator(acct, seed)
    drive(ev, acct.clock, t0 + 90 * MIN)
    fired = _alarmed(ev, PROGRESS)
    assert fired and stall_from + 5 * MIN <= fired[0] <= stall_from + 9 * MIN, [
        (t - stall_from) / MIN for t in fired
    ]
