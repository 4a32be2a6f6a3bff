"""Builders for domain values used across unit tests."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from sagewarden.domain.checkpoints import Checkpoint
from sagewarden.domain.decide import Decision, decide
from sagewarden.domain.events import Event, JobObserved, LaunchAccepted, Observations, Submitted
from sagewarden.domain.models import Run, RunStatus
from sagewarden.domain.policy import RunPolicy

RUN_ID = "01JC0FFEE0BADC0DE000000000"
ROLE = "arn:aws:iam::123456789012:role/SageMakerTrainingRole"
REQUEST: dict[str, Any] = {
    "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"},
    "RoleArn": ROLE,
    "OutputDataConfig": {"S3OutputPath": "s3://bucket/out/"},
    "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 100},
    "StoppingCondition": {"MaxRuntimeInSeconds": 86_400},
    "CheckpointConfig": {"S3Uri": "s3://bucket/ckpt/", "LocalPath": "/opt/ml/checkpoints"},
    "Environment": {"USER_VAR": "1"},
    "Tags": [{"Key": "team", "Value": "llm"}],
}
HOUR = 3_600_000
MIN = 60_000


def make_run(policy: RunPolicy | None = None, **changes: Any) -> Run:
    run = Run(
        run_id=RUN_ID,
        name="llama",
        owner="arn:aws:iam::123456789012:role/ml-engineer",
        request=copy.deepcopy(REQUEST),
        policy=policy or RunPolicy(),
        status=RunStatus.SUBMITTED,
        created_ms=0,
    )
    return dataclasses.replace(run, **changes)


def ckpt(step: int, at_ms: int | None = None) -> Checkpoint:
    return Checkpoint(f"s3://bucket/ckpt/checkpoint-{step}/", step, "hf", at_ms)


def step(run: Run, event: Event, now: int, obs: Observations | None = None) -> Decision:
    return decide(run, event, now, run.policy, obs or Observations())


def observed(run: Run, status: str, secondary: str, at: int, reason: str | None = None) -> JobObserved:
    cur = run.current
    assert cur is not None
    return JobObserved(cur.job_name, cur.number, status, secondary, at, failure_reason=reason)


def training_run(
    policy: RunPolicy | None = None,
    resume: Checkpoint | None = None,
    at: int = 10 * MIN,
    *,
    instance_count: int = 2,
    obs: Observations | None = None,
) -> Run:
    """A run whose first attempt is launched, accepted and in Training since `at` (`obs`: the
    deployment facts every step sees, e.g. no log subscription)."""
    request = copy.deepcopy(REQUEST)
    request["ResourceConfig"]["InstanceCount"] = instance_count
    base = obs or Observations()
    run = step(
        make_run(policy, request=request), Submitted(), 0, dataclasses.replace(base, checkpoint=resume)
    ).run
    run = step(run, LaunchAccepted(1), 1, base).run
    run = step(run, observed(run, "InProgress", "Starting", 2), 2, base).run
    return step(run, observed(run, "InProgress", "Training", at), at, base).run


def action_types(d: Decision) -> list[str]:
    return [type(a).__name__ for a in d.actions]
