"""Shared builders of the drill's alarm tests: a fake account and metrics, hang alarms, drives."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from drill.alarms.evaluator import AlarmEvaluator
from drill.alarms.metric_delay import MetricDelays
from drill.clock import VirtualClock
from sagewarden import keys
from sagewarden.adapters.cloudwatch_hang_alarms import alarm_specs
from sagewarden.domain.vocabulary.actions import EnsureHangAlarms

REGION = "us-east-1"


MIN = 60_000


PREFIX = keys.DEFAULT_ALARM_PREFIX


JOB = "sw-llama-a01"


HB = (keys.HEARTBEAT_NAMESPACE, keys.HEARTBEAT_METRIC)


GPU = (keys.TRAINING_METRIC_NAMESPACE, "GPUUtilization")


Values = Callable[[int], float | None]  # minute start (ms) -> value (None = no datapoint)


class FakeMetrics:
    """Per-minute values the test controls; answers ``metric_datapoints`` like the simulator."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.series: dict[tuple[str, str, tuple[tuple[str, str], ...]], Values] = {}
        self.calls = 0

    def set(self, metric: tuple[str, str], dims: dict[str, str], values: Values) -> None:
        self.series[(metric[0], metric[1], tuple(sorted(dims.items())))] = values

    def metric_datapoints(
        self,
        namespace: str,
        metric: str,
        dimensions: dict[str, str],
        start_ms: int,
        end_ms: int,
        period_s: int,
        stat: str,
    ) -> list[tuple[int, float]]:
        assert period_s == 60 and start_ms % MIN == 0
        self.calls += 1
        values = self.series.get((namespace, metric, tuple(sorted(dimensions.items()))))
        if values is None:
            return []
        out = []
        for minute in range(start_ms, min(end_ms, self.clock.now_ms + 1), MIN):
            value = values(minute)
            if value is not None:
                out.append((minute, float(value)))
        return out


@dataclass
class FakeAccount:
    clock: VirtualClock
    cloudwatch: Any
    sagemaker: Any
    published: list[dict[str, Any]] = field(default_factory=list)

    def publish_event(self, event: dict[str, Any]) -> None:
        self.published.append(event)


def hang_spec(
    *,
    hosts: int = 2,
    silence: int = 5,
    idle: int = 4,
    idle_percent: float = 1.0,
    lone: int = 3,
    job: str = JOB,
) -> EnsureHangAlarms:
    return EnsureHangAlarms(
        job_name=job,
        attempt=1,
        instance_count=hosts,
        gpus_per_host=8,
        log_silence_minutes=silence,
        gpu_idle_percent=idle_percent,
        gpu_idle_minutes=idle,
        gpu_lone_idle_minutes=lone,
    )


def put_hang_alarms(cw: Any, spec: EnsureHangAlarms) -> list[str]:
    names = []
    for request in alarm_specs(spec, PREFIX, "01RUN"):
        cw.put_metric_alarm(**request)
        names.append(request["AlarmName"])
    return names


def put_alarm(cw: Any, name: str, **overrides: Any) -> str:
    """A single-metric alarm on the heartbeat metric of JOB (1 of 1, threshold 50)."""
    request: dict[str, Any] = {
        "AlarmName": PREFIX + name,
        "AlarmDescription": f"test alarm {name}",
        "Namespace": HB[0],
        "MetricName": HB[1],
        "Dimensions": [{"Name": keys.HEARTBEAT_DIMENSION, "Value": JOB}],
        "Statistic": "Sum",
        "Period": 60,
        "EvaluationPeriods": 1,
        "DatapointsToAlarm": 1,
        "Threshold": 50.0,
        "ComparisonOperator": "GreaterThanThreshold",
        "TreatMissingData": "missing",
        "ActionsEnabled": False,
    }
    request.update(overrides)
    cw.put_metric_alarm(**request)
    return str(request["AlarmName"])


def heartbeat(acct: FakeAccount, values: Values, job: str = JOB) -> None:
    acct.sagemaker.set(HB, {keys.HEARTBEAT_DIMENSION: job}, values)


def gpu(acct: FakeAccount, host: int, values: Values, job: str = JOB) -> None:
    acct.sagemaker.set(GPU, {"Host": f"{job}/algo-{host}"}, values)


def drive(ev: AlarmEvaluator, clock: VirtualClock, until_ms: int) -> int:
    """Wake the evaluator only when it asks (as the drill runner does); returns the wake count."""
    wakes = 0
    while True:
        t = ev.next_time()
        if t is None or t > until_ms:
            break
        clock.advance_to(max(t, clock.now_ms))
        ev.evaluate_due()
        wakes += 1
    clock.advance_to(until_ms)
    ev.evaluate_due()
    return wakes


def changes(ev: AlarmEvaluator, name: str) -> list[tuple[int, str, str]]:
    return [(t, old, new) for t, n, old, new in ev.transitions if n == name]


def clear_alarms(cw: Any) -> None:
    names = [a["AlarmName"] for a in cw.describe_alarms()["MetricAlarms"]]
    if names:
        cw.delete_alarms(AlarmNames=names)


def _sim_request(name: str, hosts: int, max_runtime_s: int) -> dict[str, Any]:
    return {
        "TrainingJobName": name,
        "RoleArn": "arn:aws:iam::123456789012:role/sim-training",
        "AlgorithmSpecification": {"TrainingImage": "img:latest", "TrainingInputMode": "File"},
        "OutputDataConfig": {"S3OutputPath": "s3://sim-ckpt-bucket/output"},
        "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": hosts, "VolumeSizeInGB": 100},
        "StoppingCondition": {"MaxRuntimeInSeconds": max_runtime_s},
        "CheckpointConfig": {"S3Uri": "s3://sim-ckpt-bucket/runs/r1", "LocalPath": "/opt/ml/checkpoints"},
        "Tags": [{"Key": keys.TAG_RUN_NAME, "Value": "r1"}, {"Key": keys.TAG_ATTEMPT, "Value": "1"}],
    }


class SimOfLogs:
    """What SimulatedLogs asks of the simulator: one job, its hosts' lines (``{host: [(ms, text)]}``,
    oldest first), a log-arrival model or None, a virtual clock at ``now``. Streams are named as
    the simulator names them (``<job>/algo-<n>-<created s>``)."""

    def __init__(
        self,
        lines: dict[int, list[tuple[int, str]]],
        arrival: MetricDelays | None,
        *,
        job: str = "job-1",
        created_ms: int = 1_700_000_000_000,
        now: int = 0,
    ) -> None:
        self.clock = VirtualClock(now)
        self.job = SimpleNamespace(name=job, created_ms=created_ms)
        self.lines = lines
        self.logs = SimpleNamespace(arrival=arrival)
        self.region, self.account_id = "us-east-1", "123456789012"

    def stream(self, host: int) -> str:
        return f"{self.job.name}/algo-{host}-{self.job.created_ms // 1000}"

    def has_logs(self) -> bool:
        return True

    def log_streams(self, prefix: str) -> list[tuple[str, Any, int]]:
        names = sorted((self.stream(h), h) for h in self.lines)
        return [(name, self.job, h) for name, h in names if name.startswith(prefix)]

    def log_stream(self, name: str) -> tuple[Any, int] | None:
        return next(((self.job, h) for h in self.lines if self.stream(h) == name), None)

    def log_events(self, job: Any, host: int) -> list[tuple[int, str]]:
        return [(t, m) for t, m in self.lines[host] if t <= self.clock.now_ms]
