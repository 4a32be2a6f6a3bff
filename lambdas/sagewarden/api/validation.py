"""Validation of API input: field-level problems, nothing stored when any exist."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sagewarden.domain.names import run_name_problem
from sagewarden.domain.policy import PolicyError, RunPolicy

MAX_BODY_BYTES = 256 * 1024
MAX_IDEMPOTENCY_KEY = 128
IDEMPOTENCY_KEY_RE = re.compile(r"^[\x21-\x7e]{1,128}$")

# Top-level keys of CreateTrainingJob a run may set (TrainingJobName is the supervisor's).
TRAINING_JOB_KEYS = frozenset(
    {
        "AlgorithmSpecification", "RoleArn", "HyperParameters", "InputDataConfig", "OutputDataConfig",
        "ResourceConfig", "VpcConfig", "StoppingCondition", "Tags", "EnableNetworkIsolation",
        "EnableInterContainerTrafficEncryption", "EnableManagedSpotTraining", "CheckpointConfig",
        "DebugHookConfig", "DebugRuleConfigurations", "TensorBoardOutputConfig", "ExperimentConfig",
        "ProfilerConfig", "ProfilerRuleConfigurations", "Environment", "RetryStrategy",
        "RemoteDebugConfig", "InfraCheckConfig", "SessionChainingConfig",
    }
)  # fmt: skip
REQUIRED_TRAINING_JOB_KEYS = ("AlgorithmSpecification", "RoleArn", "OutputDataConfig", "ResourceConfig")
RUN_BODY_KEYS = frozenset({"name", "training_job", "policy"})


@dataclass(frozen=True)
class FieldError:
    field: str
    message: str


class InvalidRequest(Exception):
    def __init__(self, errors: list[FieldError]) -> None:
        super().__init__("; ".join(f"{e.field}: {e.message}" for e in errors))
        self.errors = errors


@dataclass(frozen=True)
class SubmitRun:
    name: str
    training_job: dict[str, Any]
    policy: RunPolicy


def validate_submit(
    body: Any, *, allowed_roles: frozenset[str], job_prefix: str, policy_defaults: RunPolicy
) -> SubmitRun:
    errors: list[FieldError] = []
    if not isinstance(body, Mapping):
        raise InvalidRequest([FieldError("body", "must be a JSON object")])
    errors += [FieldError(k, "unknown field") for k in sorted(set(body) - RUN_BODY_KEYS)]

    name = body.get("name")
    if not isinstance(name, str):
        errors.append(FieldError("name", "required string"))
    elif problem := run_name_problem(name, job_prefix):
        errors.append(FieldError("name", problem))

    job = body.get("training_job")
    if not isinstance(job, Mapping):
        errors.append(
            FieldError("training_job", "required object: a CreateTrainingJob request without TrainingJobName")
        )
        job = {}
    else:
        errors += _training_job_errors(job, allowed_roles)

    policy = policy_defaults
    raw_policy = body.get("policy", {})
    try:
        policy = RunPolicy.from_dict(raw_policy if raw_policy is not None else {}, base=policy_defaults)
    except PolicyError as exc:
        errors.append(FieldError(f"policy.{exc.field}" if exc.field != "policy" else "policy", exc.message))
    if errors:
        raise InvalidRequest(errors)
    return SubmitRun(name=str(name), training_job=dict(job), policy=policy)


def _training_job_errors(job: Mapping[str, Any], allowed_roles: frozenset[str]) -> list[FieldError]:
    errors: list[FieldError] = []
    p = "training_job"
    if "TrainingJobName" in job:
        errors.append(FieldError(f"{p}.TrainingJobName", "must not be set: sagewarden names every attempt"))
    errors += [
        FieldError(f"{p}.{k}", "unknown CreateTrainingJob field")
        for k in sorted(set(job) - TRAINING_JOB_KEYS - {"TrainingJobName"})
    ]
    errors += [FieldError(f"{p}.{k}", "required") for k in REQUIRED_TRAINING_JOB_KEYS if k not in job]

    role = job.get("RoleArn")
    if "RoleArn" in job and (not isinstance(role, str) or role not in allowed_roles):
        errors.append(
            FieldError(
                f"{p}.RoleArn", "not one of the execution roles this deployment allows (allowedRoleArns)"
            )
        )

    algo = job.get("AlgorithmSpecification")
    if "AlgorithmSpecification" in job and (
        not isinstance(algo, Mapping) or not (algo.get("TrainingImage") or algo.get("AlgorithmName"))
    ):
        errors.append(FieldError(f"{p}.AlgorithmSpecification", "needs TrainingImage or AlgorithmName"))

    out = job.get("OutputDataConfig")
    if "OutputDataConfig" in job and (not isinstance(out, Mapping) or not _is_s3(out.get("S3OutputPath"))):
        errors.append(FieldError(f"{p}.OutputDataConfig.S3OutputPath", "required s3:// URI"))

    rc = job.get("ResourceConfig")
    if "ResourceConfig" in job:
        if not isinstance(rc, Mapping):
            errors.append(FieldError(f"{p}.ResourceConfig", "must be an object"))
        else:
            itype, count = rc.get("InstanceType"), rc.get("InstanceCount")
            if not isinstance(itype, str) or not itype.startswith("ml."):
                errors.append(FieldError(f"{p}.ResourceConfig.InstanceType", "required, like ml.p5.48xlarge"))
            if not isinstance(count, int) or isinstance(count, bool) or count < 1:
                errors.append(FieldError(f"{p}.ResourceConfig.InstanceCount", "required positive integer"))
            vol = rc.get("VolumeSizeInGB", 1)
            if not isinstance(vol, int) or isinstance(vol, bool) or vol < 1:
                errors.append(FieldError(f"{p}.ResourceConfig.VolumeSizeInGB", "must be a positive integer"))

    ckpt = job.get("CheckpointConfig")
    if not isinstance(ckpt, Mapping) or not _is_s3(ckpt.get("S3Uri")):
        errors.append(
            FieldError(
                f"{p}.CheckpointConfig.S3Uri",
                "required s3:// URI: without checkpoints there is nothing to resume from",
            )
        )

    stop = job.get("StoppingCondition", {})
    if not isinstance(stop, Mapping):
        errors.append(FieldError(f"{p}.StoppingCondition", "must be an object"))
    else:
        for key in ("MaxRuntimeInSeconds", "MaxWaitTimeInSeconds", "MaxPendingTimeInSeconds"):
            v = stop.get(key)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                errors.append(FieldError(f"{p}.StoppingCondition.{key}", "must be a positive integer"))
        mrt = stop.get("MaxRuntimeInSeconds")
        if isinstance(mrt, int) and mrt > 28 * 24 * 3600:
            errors.append(
                FieldError(
                    f"{p}.StoppingCondition.MaxRuntimeInSeconds",
                    "SageMaker allows at most 28 days per job; sagewarden chains longer runs",
                )
            )

    env = job.get("Environment", {})
    if not isinstance(env, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        errors.append(FieldError(f"{p}.Environment", "must be an object of string to string"))
    elif any(k.startswith("SAGEWARDEN_") for k in env):
        errors.append(FieldError(f"{p}.Environment", "SAGEWARDEN_* variables are set by the supervisor"))

    tags = job.get("Tags", [])
    if not isinstance(tags, list) or not all(
        isinstance(t, Mapping) and set(t) == {"Key", "Value"} for t in tags
    ):
        errors.append(FieldError(f"{p}.Tags", "must be a list of {Key, Value}"))
    return errors


def _is_s3(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("s3://") and len(value) > 5 and value[5:6] != "/"


def idempotency_key_problem(key: str) -> str | None:
    if not IDEMPOTENCY_KEY_RE.match(key):
        return f"must be 1-{MAX_IDEMPOTENCY_KEY} printable ASCII characters without spaces"
    return None
