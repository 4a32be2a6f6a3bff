"""Builders for domain values used across unit tests."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from sagewarden.domain.decide import Decision, decide
from sagewarden.domain.vocabulary.events import Event, JobObserved, LaunchAccepted, Observations, Submitted
from sagewarden.domain.vocabulary.layouts import Checkpoint, RetentionView
from sagewarden.domain.vocabulary.models import Run, RunStatus
from sagewarden.domain.vocabulary.policy import RunPolicy

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


def spot_request() -> dict[str, Any]:
    request = copy.deepcopy(REQUEST)
    request["EnableManagedSpotTraining"] = True
    request["StoppingCondition"]["MaxWaitTimeInSeconds"] = 2 * 86_400
    return request


def training_run(
    policy: RunPolicy | None = None,
    resume: Checkpoint | None = None,
    at: int = 10 * MIN,
    *,
    instance_count: int = 2,
    obs: Observations | None = None,
    spot: bool = False,
) -> Run:
    """A run whose first attempt is launched, accepted and in Training since `at` (`obs`: the
    deployment facts every step sees, e.g. no log subscription; `spot`: managed spot training)."""
    request = spot_request() if spot else copy.deepcopy(REQUEST)
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


def pool_seen(
    run: Run,
    status: str | None,
    *,
    billable_s: int | None = 0,
    reused_by: str | None = None,
    attempt: int | None = None,
) -> JobObserved:
    """DescribeTrainingJob of the run's ended current attempt (or of `attempt`), as the sweep reads
    its warm pool."""
    cur = run.current if attempt is None else next(a for a in run.attempts if a.number == attempt)
    assert cur is not None
    return JobObserved(
        cur.job_name,
        cur.number,
        cur.sm_status or "Stopped",
        cur.sm_secondary,
        cur.sm_modified_ms,
        failure_reason=cur.failure_reason,
        ended_ms=cur.ended_ms,
        source="describe",
        warm_pool_status=status,
        warm_pool_billable_s=billable_s if status is not None else None,
        warm_pool_reused_by=reused_by,
    )


def on_pool(d: Decision, at: int | None = None, obs: Observations | None = None) -> Decision:
    """The resume `d` decided waits for its warm pool (the default policy keeps one, 600 s):
    DescribeTrainingJob then reports the pool Available and the next attempt is launched on it
    -- or, after a bad host, reports it gone (released) and the next attempt starts cold.
    Any other decision is returned as it is."""
    from sagewarden.domain.capacity.warm_pools import watch_of

    run = d.run
    if run.status != RunStatus.RETRY_WAIT or run.wait_reason != "warm_pool":
        return d
    cur = run.current
    assert cur is not None
    watch = watch_of(run, cur.job_name)
    seen = (
        pool_seen(run, "Terminated", billable_s=60)
        if watch and watch.bad_host
        else pool_seen(run, "Available")
    )
    return step(run, seen, at if at is not None else run.updated_ms + MIN, obs)


def retention_view(*steps: int, extra: tuple[str, ...] = (), best: str | None = "") -> RetentionView:
    """What retention reads of a synced prefix: complete HF checkpoints at these steps (any
    order), plus other child directories; each written while `training_run`'s first attempt
    trained (from 10 min), the newest one settled."""
    names = [(f"checkpoint-{s}", s) for s in sorted(steps, reverse=True)]
    written = tuple((n, 20 * MIN + s) for n, s in names)
    return RetentionView(
        tuple(names),
        frozenset([n for n, _ in names] + list(extra)),
        written_ms=written,
        newest_write_ms=max((ms for _, ms in written), default=None),
        best=best,
    )


def training_job(run_name: str, bucket: str, role_arn: str) -> dict[str, Any]:
    """A valid CreateTrainingJob request of a two-node p4d run, as a user sends it."""
    return {
        "AlgorithmSpecification": {
            "TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5-gpu-py311",
            "TrainingInputMode": "FastFile",
        },
        "RoleArn": role_arn,
        "OutputDataConfig": {"S3OutputPath": f"s3://{bucket}/{run_name}/output/"},
        "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 500},
        "StoppingCondition": {"MaxRuntimeInSeconds": 5 * 24 * 3600},
        "CheckpointConfig": {
            "S3Uri": f"s3://{bucket}/{run_name}/checkpoints/",
            "LocalPath": "/opt/ml/checkpoints",
        },
        "HyperParameters": {"epochs": "1"},
        "Environment": {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"},
    }


@dataclass
class RecordedCounters:
    """The supervisor's counters, kept in memory: name -> sum."""

    values: dict[str, float] = field(default_factory=dict)

    def add(
        self, name: str, value: float = 1.0, *, dimension: tuple[str, str] | None = None, unit: str = "Count"
    ) -> None:
        self.values[name] = self.values.get(name, 0.0) + value
