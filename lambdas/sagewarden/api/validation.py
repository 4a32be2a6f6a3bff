"""Validation of API input: field-level problems, nothing stored when any exist.

`training_job` against SageMaker's model (`api/sagemaker_model.py`) and sagewarden's needs;
`policy` by RunPolicy and against the job. Why: docs/api.md."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sagewarden.api import sagemaker_model
from sagewarden.api.json_body import join
from sagewarden.domain.checkpoints.retention import archive_problem, archive_uri
from sagewarden.domain.vocabulary import claims as claim_rules
from sagewarden.domain.vocabulary.launch import (
    ENV_VALUE_MAX,
    LOCAL_PATH_MAX,
    MAX_RUNTIME_API_LIMIT_S,
    OUR_TAG_PREFIX,
)
from sagewarden.domain.vocabulary.layouts import directory_bucket_problem
from sagewarden.domain.vocabulary.names import run_name_problem
from sagewarden.domain.vocabulary.policy import MAX_INSTANCES, PolicyError, RunPolicy
from sagewarden.usecases.errors import FieldError, InvalidRequest, RequestTooLarge, did_you_mean

__all__ = ["MAX_STORED_REQUEST_BYTES", "SubmitRun", "idempotency_key_problem", "validate_submit"]

MAX_IDEMPOTENCY_KEY = 128
IDEMPOTENCY_KEY_RE = re.compile(r"[\x21-\x7e]{1,128}")
RUN_BODY_KEYS = ("name", "training_job", "policy")
# The run item stores name, training_job and policy as UTF-8 JSON next to the run's own state
# (attempt counters, the latest checkpoint, wait reasons: a few KB). DynamoDB's item limit is
# 400 KB; keeping the request part under 350,000 bytes leaves room for that state to grow.
MAX_STORED_REQUEST_BYTES = 350_000
# Tags and environment variables sagewarden adds to every attempt (domain.launch.build_request).
SUPERVISOR_TAGS = 3
SUPERVISOR_ENV_VARS = 5
ROOT = "CreateTrainingJobRequest"


@dataclass(frozen=True)
class SubmitRun:
    name: str
    training_job: dict[str, Any]
    policy: RunPolicy


def validate_submit(
    body: Any,
    *,
    allowed_roles: frozenset[str],
    job_prefix: str,
    policy_defaults: RunPolicy,
    retention_allowed: bool = True,
) -> SubmitRun:
    if not isinstance(body, Mapping):
        raise InvalidRequest([FieldError("body", "must be a JSON object")])
    errors = [
        FieldError(join("", k), "unknown field" + did_you_mean(k, RUN_BODY_KEYS))
        for k in body
        if k not in RUN_BODY_KEYS
    ]

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
        errors += training_job_errors(job, allowed_roles)

    policy = policy_defaults
    raw_policy = body.get("policy", {})
    try:
        policy = RunPolicy.from_dict(raw_policy if raw_policy is not None else {}, base=policy_defaults)
    except PolicyError as exc:
        message = exc.message
        if message == "unknown policy field":
            message += did_you_mean(
                exc.field, [f.name for f in dataclasses.fields(RunPolicy) if f.name != "extra"]
            )
        errors.append(FieldError(join("policy", exc.field) if exc.field != "policy" else "policy", message))
    else:
        errors += policy_errors(policy, job)
        if policy.checkpoint_keep is not None and not retention_allowed:
            errors.append(
                FieldError(
                    "policy.checkpoint_keep",
                    "this deployment does not grant checkpoint retention's S3 writes: deploy it with "
                    "-c checkpointRetention=true (see docs/checkpoints.md)",
                )
            )
    if errors:
        raise InvalidRequest(_unique(errors))
    size = stored_request_bytes(str(name), job, policy)
    if size > MAX_STORED_REQUEST_BYTES:
        raise RequestTooLarge(
            [
                FieldError(
                    "body",
                    f"the run would be stored as {size:,} bytes of JSON; at most "
                    f"{MAX_STORED_REQUEST_BYTES:,} fit in one DynamoDB item next to the run's state",
                )
            ]
        )
    return SubmitRun(name=str(name), training_job=dict(job), policy=policy)


def stored_request_bytes(name: str, job: Mapping[str, Any], policy: RunPolicy) -> int:
    """UTF-8 size of the part of the run item that comes from the request (as the store writes it)."""
    data = {"name": name, "request": job, "policy": policy.to_dict()}
    return len(json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode())


def training_job_errors(job: Mapping[str, Any], allowed_roles: frozenset[str]) -> list[FieldError]:
    p = "training_job"
    errors = sagemaker_model.training_job_problems(job, p)
    known = {e.field for e in errors}

    def add(field: str, message: str) -> None:
        if field not in known:
            known.add(field)
            errors.append(FieldError(field, message))

    if "TrainingJobName" in job:
        add(f"{p}.TrainingJobName", "must not be set: sagewarden names every attempt")

    role = job.get("RoleArn")
    if "RoleArn" in job and (not isinstance(role, str) or role not in allowed_roles):
        add(f"{p}.RoleArn", "not one of the execution roles this deployment allows (allowedRoleArns)")

    algo = job.get("AlgorithmSpecification")
    if isinstance(algo, Mapping) and not (algo.get("TrainingImage") or algo.get("AlgorithmName")):
        add(f"{p}.AlgorithmSpecification", "needs TrainingImage or AlgorithmName")
    elif "AlgorithmSpecification" not in job:
        add(f"{p}.AlgorithmSpecification", "required")

    out = job.get("OutputDataConfig")
    if isinstance(out, Mapping) and not _is_s3(out.get("S3OutputPath")):
        add(f"{p}.OutputDataConfig.S3OutputPath", "required s3:// URI")

    rc = job.get("ResourceConfig")
    if "ResourceConfig" not in job:
        add(
            f"{p}.ResourceConfig",
            "required: sagewarden launches every attempt with InstanceType and InstanceCount",
        )
    elif isinstance(rc, Mapping):
        if not isinstance(rc.get("InstanceType"), str):
            add(f"{p}.ResourceConfig.InstanceType", "required, like ml.p5.48xlarge")
        count = rc.get("InstanceCount")
        if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_INSTANCES:
            add(
                f"{p}.ResourceConfig.InstanceCount",
                f"required integer from 1 to {MAX_INSTANCES:,} (instances of one training job)",
            )
        if "InstanceGroups" in rc:
            add(f"{p}.ResourceConfig.InstanceGroups", "not supported: sagewarden launches one instance group")

    ckpt = job.get("CheckpointConfig")
    if not isinstance(ckpt, Mapping) or not _is_s3(ckpt.get("S3Uri")):
        add(
            f"{p}.CheckpointConfig.S3Uri",
            "required s3:// URI: without checkpoints there is nothing to resume from",
        )
    elif (problem := directory_bucket_problem(str(ckpt["S3Uri"]))) is not None:
        add(f"{p}.CheckpointConfig.S3Uri", problem)
    elif claim_rules.depth(str(ckpt["S3Uri"])) > claim_rules.MAX_PREFIX_DEPTH:
        add(
            f"{p}.CheckpointConfig.S3Uri",
            f"at most {claim_rules.MAX_PREFIX_DEPTH} folders deep (sagewarden keeps two live runs "
            "from writing into each other's prefixes by claiming every folder above it)",
        )

    local = ckpt.get("LocalPath") if isinstance(ckpt, Mapping) else None
    if isinstance(local, str) and len(local.rstrip("/")) > LOCAL_PATH_MAX:
        add(
            f"{p}.CheckpointConfig.LocalPath",
            f"at most {LOCAL_PATH_MAX} characters: a resumed attempt is told its checkpoint's local "
            f"path (LocalPath/<directory>) in SAGEWARDEN_RESUME_DIR, and SageMaker takes at most "
            f"{ENV_VALUE_MAX} characters in an environment value",
        )

    stop = job.get("StoppingCondition")
    mrt = stop.get("MaxRuntimeInSeconds") if isinstance(stop, Mapping) else None
    if isinstance(mrt, int) and mrt > MAX_RUNTIME_API_LIMIT_S:
        add(
            f"{p}.StoppingCondition.MaxRuntimeInSeconds",
            "SageMaker allows at most 28 days per job; sagewarden chains longer runs",
        )

    env = job.get("Environment")
    if isinstance(env, Mapping) and any(isinstance(k, str) and k.startswith("SAGEWARDEN_") for k in env):
        add(f"{p}.Environment", "SAGEWARDEN_* variables are set by the supervisor")

    tags = job.get("Tags")
    max_tags = sagemaker_model.limit(ROOT, "Tags", "max")
    if isinstance(tags, list) and max_tags is not None:
        own = [
            t
            for t in tags
            if not (isinstance(t, Mapping) and str(t.get("Key", "")).startswith(OUR_TAG_PREFIX))
        ]
        if len(own) + SUPERVISOR_TAGS > max_tags:
            add(
                f"{p}.Tags",
                f"at most {max_tags - SUPERVISOR_TAGS} tags: sagewarden adds {SUPERVISOR_TAGS} of its own",
            )
    return errors


def policy_errors(policy: RunPolicy, job: Mapping[str, Any]) -> list[FieldError]:
    """Policy problems that need the job or SageMaker's model (RunPolicy checked the rest)."""
    errors: list[FieldError] = []
    for i, choice in enumerate(policy.instance_fallbacks):
        errors += sagemaker_model.value_problems(
            choice.instance_type,
            "ResourceConfig",
            "InstanceType",
            f"policy.instance_fallbacks[{i}].instance_type",
        )
    defaults = dict(policy.environment_defaults)
    if defaults:
        errors += sagemaker_model.value_problems(defaults, ROOT, "Environment", "policy.environment_defaults")
        if any(k.startswith("SAGEWARDEN_") for k in defaults):
            errors.append(
                FieldError("policy.environment_defaults", "SAGEWARDEN_* variables are set by the supervisor")
            )
    env = job.get("Environment")
    max_env = sagemaker_model.limit(ROOT, "Environment", "max")
    if isinstance(env, Mapping) and max_env is not None:
        ours = SUPERVISOR_ENV_VARS + (1 if policy.apply_checkpoint_advice else 0)
        total = len(set(env) | set(defaults)) + ours
        if total > max_env:
            errors.append(
                FieldError(
                    "training_job.Environment",
                    f"with policy.environment_defaults and the {ours} variables sagewarden "
                    f"sets, an attempt would have {total} variables; SageMaker allows {max_env}",
                )
            )
    ckpt = job.get("CheckpointConfig")
    synced = ckpt.get("S3Uri") if isinstance(ckpt, Mapping) else None
    if _is_s3(synced):
        problem = archive_problem(str(synced), policy)
        if problem is None and policy.checkpoint_keep is not None and policy.checkpoint_retired == "archive":
            problem = directory_bucket_problem(archive_uri(str(synced), policy))
        if problem is not None:
            errors.append(FieldError("policy.checkpoint_archive_uri", problem))
        elif (
            policy.checkpoint_keep is not None
            and policy.checkpoint_retired == "archive"
            and claim_rules.depth(archive_uri(str(synced), policy)) > claim_rules.MAX_PREFIX_DEPTH
        ):
            errors.append(
                FieldError(
                    "policy.checkpoint_archive_uri",
                    f"at most {claim_rules.MAX_PREFIX_DEPTH} folders deep (sagewarden keeps a live run's "
                    "archive out of other runs' checkpoint prefixes by claiming every folder above it)",
                )
            )
    if policy.progress_metric is not None:
        algo = job.get("AlgorithmSpecification")
        algo = algo if isinstance(algo, Mapping) else {}
        if algo.get("TrainingImage"):  # a custom container reports only the metrics it defines
            defs = algo.get("MetricDefinitions")
            names = [d.get("Name") for d in defs if isinstance(d, Mapping)] if isinstance(defs, list) else []
            if policy.progress_metric not in names:
                known = ", ".join(str(n) for n in names if isinstance(n, str)) or "none defined"
                errors.append(
                    FieldError(
                        "policy.progress_metric",
                        "must be the Name of one of training_job.AlgorithmSpecification.MetricDefinitions "
                        f"({known})"
                        + did_you_mean(policy.progress_metric, [n for n in names if isinstance(n, str)]),
                    )
                )
    return errors


def _unique(errors: list[FieldError]) -> list[FieldError]:
    seen: set[FieldError] = set()
    return [e for e in errors if not (e in seen or seen.add(e))]  # type: ignore[func-returns-value]


def _is_s3(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("s3://") and len(value) > 5 and value[5:6] != "/"


def idempotency_key_problem(key: str) -> str | None:
    if not IDEMPOTENCY_KEY_RE.fullmatch(key):
        return f"must be 1-{MAX_IDEMPOTENCY_KEY} printable ASCII characters without spaces"
    return None
