"""Build the CreateTrainingJob request of an attempt from the run's stored request.

Pure and deterministic: a retried launch of the same attempt rebuilds exactly the same
request, so CreateTrainingJob either creates the job or answers ResourceInUse.

Training-script contract (also in the README): every attempt gets the same
CheckpointConfig (SageMaker restores S3Uri into LocalPath before the script starts) and
these environment variables:
  SAGEWARDEN_RUN_ID, SAGEWARDEN_ATTEMPT        which run / attempt this job is
  SAGEWARDEN_RESUME_STEP                       step of the newest verified checkpoint ("" if none)
  SAGEWARDEN_RESUME_CHECKPOINT                 its S3 URI
  SAGEWARDEN_RESUME_DIR                        its local path under CheckpointConfig.LocalPath
"""

from __future__ import annotations

import copy
from typing import Any

from sagewarden.domain.models import Attempt, Run

MAX_RUNTIME_API_LIMIT_S = 28 * 24 * 3600
DEFAULT_MAX_RUNTIME_S = 24 * 3600
DEFAULT_LOCAL_PATH = "/opt/ml/checkpoints"
MIN_SEGMENT_S = 600
OUR_TAG_PREFIX = "sagewarden:"


def wall_clock_remaining_s(run: Run, at_ms: int) -> float:
    return run.policy.max_wall_clock_hours * 3600 - (at_ms - run.budget_origin_ms) / 1000


def warm_pool_wanted(run: Run) -> bool:
    """Attempts keep their instances warm after they end (unless the account has no warm-pool
    quota for them), so a resume after a non-hardware ending starts in seconds."""
    return run.policy.keep_alive_seconds > 0 and not run.warm_pool_off


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
    if warm_pool_wanted(run):
        resources["KeepAlivePeriodInSeconds"] = run.policy.keep_alive_seconds
    req["ResourceConfig"] = resources

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
