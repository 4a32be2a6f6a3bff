"""Shared builders of the simulated SageMaker's tests: requests, jobs, draining the clock."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from drill.sim.sagemaker import SimSageMaker

REGION = "us-east-1"


BUCKET = "sim-ckpt-bucket"


CKPT_URI = f"s3://{BUCKET}/runs/r1"


ITYPE = "ml.p4d.24xlarge"


MIN = 60_000


GPU_NS = "/aws/sagemaker/TrainingJobs"


HB_NS = "Sagewarden/Heartbeat"


class Recorder:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def __call__(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def states(self, job: str | None = None) -> list[tuple[str, str]]:
        return [
            (e["detail"]["TrainingJobStatus"], e["detail"]["SecondaryStatus"])
            for e in self.events
            if job is None or e["detail"]["TrainingJobName"] == job
        ]

    def last(self, job: str) -> dict[str, Any]:
        return [e for e in self.events if e["detail"]["TrainingJobName"] == job][-1]


def request(
    name: str,
    *,
    run: str = "r1",
    attempt: int = 1,
    run_id: str = "01RUNID",
    count: int = 2,
    itype: str = ITYPE,
    max_runtime: int | None = 86_400,
    max_pending: int | None = None,
    keep_alive: int = 0,
    resume: int | None = None,
    checkpoint_uri: str | None = CKPT_URI,
    retries: int | None = None,
) -> dict[str, Any]:
    stopping: dict[str, Any] = {}
    if max_runtime is not None:
        stopping["MaxRuntimeInSeconds"] = max_runtime
    if max_pending is not None:
        stopping["MaxPendingTimeInSeconds"] = max_pending
    resources: dict[str, Any] = {"InstanceType": itype, "InstanceCount": count, "VolumeSizeInGB": 100}
    if keep_alive:
        resources["KeepAlivePeriodInSeconds"] = keep_alive
    req: dict[str, Any] = {
        "TrainingJobName": name,
        "RoleArn": "arn:aws:iam::123456789012:role/sim-training",
        "AlgorithmSpecification": {"TrainingImage": "img:latest", "TrainingInputMode": "File"},
        "OutputDataConfig": {"S3OutputPath": f"s3://{BUCKET}/output"},
        "ResourceConfig": resources,
        "StoppingCondition": stopping,
        "HyperParameters": {"lr": "0.001"},
        "Environment": {} if resume is None else {"SAGEWARDEN_RESUME_STEP": str(resume)},
        "Tags": [
            {"Key": "sagewarden:run-name", "Value": run},
            {"Key": "sagewarden:attempt", "Value": str(attempt)},
            {"Key": "sagewarden:run-id", "Value": run_id},
            {"Key": "team", "Value": "ml"},
        ],
    }
    if retries is not None:
        req["RetryStrategy"] = {"MaximumRetryAttempts": retries}
    if checkpoint_uri is not None:
        req["CheckpointConfig"] = {"S3Uri": checkpoint_uri, "LocalPath": "/opt/ml/checkpoints"}
    return req


def drain(sim: SimSageMaker, until_ms: int | None = None, max_steps: int = 100_000) -> None:
    """Jump from change to change until idle (or until ``until_ms``)."""
    for _ in range(max_steps):
        t = sim.next_event_time()
        if t is None or (until_ms is not None and t > until_ms):
            break
        sim.advance(t)
    if until_ms is not None and until_ms > sim.clock.now_ms:
        sim.advance(until_ms)


def run_until(sim: SimSageMaker, pred: Callable[[], bool], max_steps: int = 100_000) -> None:
    for _ in range(max_steps):
        if pred():
            return
        t = sim.next_event_time()
        assert t is not None, "simulation went idle before the condition held"
        sim.advance(t)
    raise AssertionError("condition never held")


def code_of(err: pytest.ExceptionInfo[ClientError]) -> tuple[str, str]:
    e = err.value.response["Error"]
    return str(e["Code"]), str(e["Message"])


def training_job(sim: SimSageMaker, name: str, **kw: Any) -> int:
    """Create a job and run it into Training; returns the Training start (ms)."""
    sim.create_training_job(**request(name, **kw))
    run_until(sim, lambda: sim.job(name).training_started_ms is not None)
    started = sim.job(name).training_started_ms
    assert started is not None
    return started
