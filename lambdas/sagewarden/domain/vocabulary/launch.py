"""Build the CreateTrainingJob request of an attempt from the run's stored request, deterministically:
CheckpointConfig and the SAGEWARDEN_* variables. Pure. Why: docs/recovery.md
(*Training-script contract*, *Where the rules live*)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from sagewarden.domain.vocabulary.models import Attempt, Run
from sagewarden.domain.vocabulary.policy import RunPolicy

MAX_RUNTIME_API_LIMIT_S = 28 * 24 * 3600
DEFAULT_MAX_RUNTIME_S = 24 * 3600
DEFAULT_LOCAL_PATH = "/opt/ml/checkpoints"
MIN_SEGMENT_S = 600
OUR_TAG_PREFIX = "sagewarden:"
# CreateTrainingJob: an Environment value is at most 512 characters (TrainingEnvironmentValue);
# the API refuses a longer LocalPath so LocalPath + "/" + a 255-byte directory name still fits
ENV_VALUE_MAX = 512
CHECKPOINT_MINUTES_ENV = "SAGEWARDEN_CHECKPOINT_MINUTES"
LOCAL_PATH_MAX = 256


def wall_clock_remaining_s(run: Run, at_ms: int) -> float:
    """The wall-clock budget left; time spent waiting for a Training Plan's next window is not
    counted (domain/capacity/training_plans.py: a window's end is no fault of the run's)."""
    waited = run.plan_waited_ms
    if run.plan_wait_since_ms is not None:
        waited += max(0, at_ms - max(run.plan_wait_since_ms, run.budget_origin_ms))
    return run.policy.max_wall_clock_hours * 3600 - (at_ms - run.budget_origin_ms - waited) / 1000


def warm_pool_request(
    request: Mapping[str, Any], policy: RunPolicy, *, warm_pool_off: bool = False
) -> tuple[int, str]:
    """ResourceConfig.KeepAlivePeriodInSeconds every attempt asks for, and why, in one line.

    The policy governs it: managed spot training keeps no warm pools ("SageMaker Managed Warm
    Pools cannot be used with spot instances": asking would fail every launch), the policy's
    `keep_alive_seconds` 0 turns pools off (also a value the request carries itself), any other
    policy value caps the request's own; once SageMaker kept no pool for the run (no warm-pool
    quota, 0 by default), none is asked for again."""
    own = (request.get("ResourceConfig") or {}).get("KeepAlivePeriodInSeconds")
    cap = policy.keep_alive_seconds
    if request.get("EnableManagedSpotTraining"):
        return 0, (
            "no warm pool: managed spot training (SageMaker keeps no warm pools for spot instances, "
            "and refuses a spot job that asks for one); restarts start cold"
        )
    if cap <= 0:
        return 0, "no warm pool: the policy's keep_alive_seconds is 0; restarts start cold"
    if own is not None and int(own) <= 0:
        return 0, "no warm pool: the request's KeepAlivePeriodInSeconds is 0; restarts start cold"
    if warm_pool_off:
        return 0, (
            "no warm pool: the account's warm-pool quota for the instance type is 0 (AWS's default; "
            "read at submit, or SageMaker kept none for an earlier attempt); restarts start cold"
        )
    seconds = cap if own is None else min(int(own), cap)
    capped = (
        f" (the request's {int(own)} s capped by keep_alive_seconds)"
        if own is not None and int(own) > cap
        else ""
    )
    return seconds, (
        f"warm pool: each attempt's instances are kept {seconds} s after it ends{capped}, so a "
        "resume on the same instances starts in seconds (needs warm-pool quota)"
    )


def keep_alive_for(run: Run) -> int:
    """The KeepAlivePeriodInSeconds the run's next attempt asks for (0: none)."""
    return warm_pool_request(run.request, run.policy, warm_pool_off=run.warm_pool_off)[0]


def infra_check_for(run: Run) -> bool:
    """Whether the run's next attempt asks SageMaker to check its instances first
    (domain/hosts/bad_hosts.py: after a fault that singled out a host, until an attempt trains with it)."""
    return run.infra_check_pending and run.policy.infra_check_after_bad_host


def steered_volume_gb(request: Mapping[str, Any]) -> int | None:
    """The VolumeSizeInGB a steered attempt asks for: the request's own less 1 GB (1 GB more
    when it asks for 1), so that SageMaker cannot match it with a warm pool of an attempt that
    asked for the request's own size -- the volume size is one of the values a warm pool's
    matching job must share ("Matching training jobs"). Less, not more: a smaller volume is
    always valid, a larger one can exceed an NVMe instance's local storage. None: the request
    names no size, and nothing is steered."""
    size = (request.get("ResourceConfig") or {}).get("VolumeSizeInGB")
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        return None
    return size - 1 if size > 1 else size + 1


def segment_runtime_s(run: Run, at_ms: int) -> int:
    """MaxRuntimeInSeconds of a new attempt: the user's, capped by the API and the run's budget."""
    requested = int(
        run.request.get("StoppingCondition", {}).get("MaxRuntimeInSeconds", DEFAULT_MAX_RUNTIME_S)
    )
    remaining = int(wall_clock_remaining_s(run, at_ms))
    return max(1, min(requested, MAX_RUNTIME_API_LIMIT_S, remaining))


def build_request(run: Run, attempt: Attempt) -> dict[str, Any]:
    from sagewarden import keys  # names shared with infra; import-free module

    req: dict[str, Any] = copy.deepcopy(dict(run.request))
    req["TrainingJobName"] = attempt.job_name

    resources = dict(req.get("ResourceConfig", {}))
    resources["InstanceType"] = attempt.instance_type
    resources["InstanceCount"] = attempt.instance_count
    # the request's own KeepAlive is the policy's to govern (warm_pool_request): the attempt
    # records what it asked for when it was started, so a re-issued launch asks the same
    resources.pop("KeepAlivePeriodInSeconds", None)
    if run.plan_off:  # the policy's on-demand fallback after the training plan's last window
        resources.pop("TrainingPlanArn", None)
    if attempt.keep_alive_s > 0:
        resources["KeepAlivePeriodInSeconds"] = attempt.keep_alive_s
    steered = steered_volume_gb(run.request) if attempt.volume_steer else None
    if steered is not None:  # domain/capacity/warm_pools.py: never the pool a bad host left
        resources["VolumeSizeInGB"] = steered
    req["ResourceConfig"] = resources

    # after a bad host (domain/hosts/bad_hosts.py): SageMaker checks the instances before the job runs; a
    # request's own InfraCheckConfig is the user's and is kept as it is
    if attempt.infra_check and "InfraCheckConfig" not in req:
        req["InfraCheckConfig"] = {"EnableInfraCheck": True}

    stopping = dict(req.get("StoppingCondition", {}))
    stopping["MaxRuntimeInSeconds"] = segment_runtime_s(run, attempt.requested_at_ms)
    req["StoppingCondition"] = stopping

    env: dict[str, str] = dict(run.policy.environment_defaults)
    env.update({str(k): str(v) for k, v in dict(req.get("Environment", {})).items()})
    ckpt = attempt.resume_from
    local_root = str(req.get("CheckpointConfig", {}).get("LocalPath") or DEFAULT_LOCAL_PATH).rstrip("/")
    env["SAGEWARDEN_RUN_ID"] = run.run_id
    env["SAGEWARDEN_ATTEMPT"] = str(attempt.number)
    env["SAGEWARDEN_RESUME_STEP"] = str(ckpt.step) if ckpt else ""
    env["SAGEWARDEN_RESUME_CHECKPOINT"] = ckpt.uri if ckpt else ""
    env["SAGEWARDEN_RESUME_DIR"] = (
        f"{local_root}/{_relative_dir(run.checkpoint_uri, ckpt.uri)}" if ckpt else ""
    )
    if attempt.checkpoint_minutes is not None:  # policy apply_checkpoint_advice (domain/vocabulary/advice.py)
        env[CHECKPOINT_MINUTES_ENV] = str(attempt.checkpoint_minutes)
    for name in ("SAGEWARDEN_RESUME_CHECKPOINT", "SAGEWARDEN_RESUME_DIR"):
        if len(env[name]) > ENV_VALUE_MAX:  # SageMaker would refuse the whole launch
            del env[name]
    req["Environment"] = env

    tags = [t for t in req.get("Tags", []) if not str(t.get("Key", "")).startswith(OUR_TAG_PREFIX)]
    tags += [
        {"Key": keys.TAG_RUN_ID, "Value": run.run_id},
        {"Key": keys.TAG_ATTEMPT, "Value": str(attempt.number)},
        {"Key": keys.TAG_RUN_NAME, "Value": run.name},
    ]
    req["Tags"] = tags
    return req


def _relative_dir(root_uri: str, checkpoint_uri: str) -> str:
    root = root_uri.rstrip("/") + "/"
    rel = (
        checkpoint_uri[len(root) :] if checkpoint_uri.startswith(root) else checkpoint_uri.rsplit("/", 2)[-2]
    )
    return rel.rstrip("/")
