"""The alarm evaluator's fast path on the simulated SageMaker (bounded series, promises kept
until a phase change) must decide exactly what the plain path decides minute by minute: the
same transitions at the same minutes, with the same reasons and reason data, with datapoints
arriving the instant their period ends and with datapoints arriving late (drill/alarms/metric_delay.py)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from drill.alarms.evaluator import AlarmEvaluator
from drill.alarms.metric_delay import MetricDelays, SourceDelay
from drill.clock import VirtualClock
from drill.sim.model import Fault, JobProfile
from drill.sim.sagemaker import SimSageMaker
from sagewarden import keys
from tests.drill.alarms.builders import (
    GPU,
    HB,
    MIN,
    PREFIX,
    REGION,
    FakeAccount,
    _sim_request,
    clear_alarms,
    hang_spec,
    put_alarm,
    put_hang_alarms,
)

HOSTS = 12  # two GPU-idle alarms (hosts 1-10, 11-12)


class ExactOnly:
    """The simulator seen through ``metric_datapoints`` only: the evaluator's plain path."""

    def __init__(self, sim: SimSageMaker) -> None:
        self._sim = sim

    def metric_datapoints(self, *args: Any) -> list[tuple[int, float]]:
        return self._sim.metric_datapoints(*args)


def _alarms(cw: Any, job: str) -> None:
    put_hang_alarms(cw, hang_spec(job=job, hosts=HOSTS, silence=10, idle=5))
    host = {"Namespace": GPU[0], "MetricName": GPU[1], "Statistic": "Average"}
    put_alarm(  # a spinning host: near 100 % on all 8 GPUs, 3 of 5 minutes
        cw,
        f"{job}-spin",
        **host,
        Dimensions=[{"Name": "Host", "Value": f"{job}/algo-1"}],
        ComparisonOperator="GreaterThanOrEqualToThreshold",
        Threshold=790.0,
        EvaluationPeriods=5,
        DatapointsToAlarm=3,
        TreatMissingData="notBreaching",
    )
    put_alarm(  # busy: straddles the training band (760 +/- 2 %) so values must be computed
        cw,
        f"{job}-busy",
        **host,
        Dimensions=[{"Name": "Host", "Value": f"{job}/algo-2"}],
        ComparisonOperator="LessThanThreshold",
        Threshold=765.0,
        EvaluationPeriods=4,
        DatapointsToAlarm=2,
        TreatMissingData="ignore",
    )
    metrics: list[dict[str, Any]] = [
        {
            "Id": f"h{h}",
            "MetricStat": {
                "Metric": {
                    "Namespace": GPU[0],
                    "MetricName": GPU[1],
                    "Dimensions": [{"Name": "Host", "Value": f"{job}/algo-{h}"}],
                },
                "Period": 60,
                "Stat": "Average",
            },
            "ReturnData": False,
        }
        for h in (3, 4, 5)
    ]
    metrics.append({"Id": "avg", "Expression": "AVG([h3,h4,h5])", "ReturnData": False})
    metrics.append({"Id": "top", "Expression": "MAX([avg,h3])", "ReturnData": True})
    cw.put_metric_alarm(
        AlarmName=f"{PREFIX}{job}-math",
        Metrics=metrics,
        EvaluationPeriods=3,
        DatapointsToAlarm=3,
        Threshold=100.0,
        ComparisonOperator="LessThanThreshold",
        TreatMissingData="missing",
        ActionsEnabled=False,
    )
    put_alarm(  # the heartbeat, not bounded: the plain path inside the fast one
        cw,
        f"{job}-beats",
        Dimensions=[{"Name": keys.HEARTBEAT_DIMENSION, "Value": job}],
        ComparisonOperator="LessThanThreshold",
        Threshold=20.0,
        EvaluationPeriods=3,
        DatapointsToAlarm=2,
        TreatMissingData="breaching",
    )


LATE = MetricDelays(3)  # the drill's defaults: 30-90 s, 5 % of datapoints 3 minutes late
VERY_LATE = MetricDelays(
    4, SourceDelay(0, 240, 0.2, 300), SourceDelay(60, 60, 0, 0), SourceDelay(10, 170, 0.1, 600)
)


def _run(
    cw: Any, *, fast: bool, straggler: int = 0, delays: MetricDelays | None = None
) -> tuple[list[Any], list[Any], AlarmEvaluator]:
    clear_alarms(cw)
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="sim-ckpt-bucket")
    clock = VirtualClock()
    sim = SimSageMaker(clock, s3_client=s3, seed=3)
    sim.set_profile(  # a straggler host has its own bounds, apart from the other hosts'
        "r1",
        JobProfile(
            total_steps=10**9, steps_per_minute=1, checkpoint_every_steps=30, straggler_host=straggler
        ),
    )
    sim.inject(Fault(kind="dataloader_pause", attempt=1, after_training_min=100, duration_min=6))
    # job 1: an eval, a long save, then a dead host that stays until the job is stopped
    sim.inject(Fault(kind="eval_phase", attempt=1, after_training_min=50, duration_min=15))
    sim.inject(Fault(kind="checkpoint_save_long", attempt=1, after_training_min=130, duration_min=12))
    sim.inject(Fault(kind="dead_host", attempt=1, after_training_min=200, host=11))
    # job 2: a NCCL spin that becomes a crash, job 3: a stuck loader stopped by hand
    sim.inject(Fault(kind="algorithm_error", attempt=2, after_training_min=40, hang_before_crash_min=10))
    sim.inject(Fault(kind="stuck_dataloader", attempt=3, after_training_min=25))
    acct = FakeAccount(clock=clock, cloudwatch=cw, sagemaker=sim if fast else ExactOnly(sim))
    ev = AlarmEvaluator(acct, delays=delays)
    scripted = [
        (clock.now_ms, "create", "job-a01", 1),
        (clock.now_ms + 300 * MIN, "stop", "job-a01", 0),
        (clock.now_ms + 320 * MIN, "create", "job-a02", 2),
        (clock.now_ms + 480 * MIN, "create", "job-a03", 3),
        (clock.now_ms + 560 * MIN, "stop", "job-a03", 0),
    ]
    end = clock.now_ms + 700 * MIN
    while True:
        candidates = [sim.next_event_time(), scripted[0][0] if scripted else None]
        candidates.append(ev.next_time() if fast else (clock.now_ms // MIN + 1) * MIN)
        t = max(min(c for c in candidates if c is not None), clock.now_ms)
        if t > end:
            break
        sim.advance(t)
        while scripted and scripted[0][0] <= clock.now_ms:
            _, what, job, attempt = scripted.pop(0)
            if what == "create":
                request = _sim_request(job, HOSTS, 5 * 24 * 3600)
                request["Tags"] = [
                    {"Key": keys.TAG_RUN_NAME, "Value": "r1"},
                    {"Key": keys.TAG_ATTEMPT, "Value": str(attempt)},
                ]
                sim.create_training_job(**request)
                _alarms(cw, job)
            else:
                sim.stop_training_job(TrainingJobName=job)
        ev.evaluate_due()
    return ev.transitions, [e["detail"] for e in ev.events], ev


@pytest.mark.parametrize(
    ("straggler", "delays"),
    [(0, None), (12, None), (0, LATE), (12, LATE), (0, VERY_LATE)],
    ids=[
        "no straggler, on time",
        "host 12 straggling, on time",
        "no straggler, late datapoints",
        "host 12 straggling, late datapoints",
        "no straggler, very late datapoints",
    ],
)
def test_fast_path_decides_like_the_plain_path(
    aws: None, straggler: int, delays: MetricDelays | None
) -> None:
    cw = boto3.client("cloudwatch", region_name=REGION)
    plain_transitions, plain_events, plain = _run(cw, fast=False, straggler=straggler, delays=delays)
    fast_transitions, fast_events, fast = _run(cw, fast=True, straggler=straggler, delays=delays)
    assert fast_transitions == plain_transitions
    assert fast_events == plain_events
    assert fast.late_transitions == 0 and plain.late_transitions == 0
    kinds = {
        (name.rsplit("-", 1)[-1] if "--" not in name else name.rsplit("--", 1)[-1], new)
        for _, name, _, new in plain_transitions
    }
    # the scenario exercises what it is meant to: idle, spin, silence and the straddling alarm
    assert ("gpu-lone-idle-g02", "ALARM") in kinds and ("spin", "ALARM") in kinds
    assert ("log-silence", "ALARM") in kinds and ("busy", "ALARM") in kinds and ("math", "OK") in kinds
    if delays is not VERY_LATE:  # up to 5 late minutes, from 0 s: a lone-idle alarm can change any minute
        assert fast.fetches < plain.fetches / 3  # and it is the cheap one


@pytest.mark.parametrize("hb", [HB], ids=["the heartbeat metric"])
def test_heartbeat_is_not_bounded(aws: None, hb: tuple[str, str]) -> None:
    sim = SimSageMaker(VirtualClock(), s3_client=boto3.client("s3", region_name=REGION))
    assert sim.metric_bounds(hb[0], hb[1], {keys.HEARTBEAT_DIMENSION: "j"}, 0, MIN, 60, "Sum") is None
    assert sim.metric_bound_now(hb[0], hb[1], {keys.HEARTBEAT_DIMENSION: "j"}, 60, "Sum") == (False, None)
