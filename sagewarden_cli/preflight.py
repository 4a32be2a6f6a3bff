"""The preflight review of `submit --dry-run`: warnings from AWS's guidance for large training jobs.

Sources (checked for this review; the review states what to set, not why each knob exists):
- SageMaker Developer Guide, "Enable checkpointing" / "Resume training from a checkpoint":
  SageMaker syncs CheckpointConfig.LocalPath (default /opt/ml/checkpoints) to S3Uri and restores
  it into every new job with the same S3Uri. sagewarden resumes only from a checkpoint directory
  it can recognise as complete, so it needs to know the layout.
- SageMaker API, StoppingCondition: MaxRuntimeInSeconds defaults to 1 day and is at most 28 days;
  a run longer than MaxRuntime is chained by sagewarden (README, "SEGMENT_DONE"). A stop sends
  SIGTERM and kills after 120 s.
- EFA for NCCL on p4d/p5: the EC2 User Guide's "Get started with EFA and NCCL" sets
  FI_PROVIDER=efa and FI_EFA_USE_DEVICE_RDMA=1 (GPUDirect RDMA on p4d/p5); the SageMaker training
  toolkit (aws/sagemaker-training-toolkit, src/sagemaker_training/torch_distributed.py) sets
  FI_EFA_USE_DEVICE_RDMA=1 and RDMAV_FORK_SAFE=1 for EFA RDMA instance types when it launches
  torch_distributed; a custom launcher or container has to set them itself or NCCL falls back to
  TCP sockets. FI_EFA_FORK_SAFE=1 is the libfabric spelling of the fork-safety switch.
  NCCL_DEBUG=WARN (or INFO) puts NCCL's own error lines into the job log, which is what
  sagewarden's classifier reads to tell an NCCL/EFA failure (resume) from a code bug (stop).
- PyTorch "ProcessGroupNCCL environment variables": TORCH_NCCL_ASYNC_ERROR_HANDLING makes the
  watchdog tear the process down when a collective errors or times out (the timeout itself is
  `init_process_group(timeout=...)`), so a dead rank ends the job instead of hanging it.
- SageMaker Developer Guide, "SageMaker AI Managed Warm Pools": "SageMaker Managed Warm Pools
  cannot be used with spot instances"; the warm-pool quota is 0 by default (no pool is kept,
  without an error). The note says what every attempt will ask for (domain/vocabulary/launch.py).
- Service Quotas, service code `sagemaker`: quotas named "<instance type> for training job
  usage", "<instance type> for training warm pool usage" and "Number of instances across all
  training jobs" (the names SageMaker's ResourceLimitExceeded message quotes).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

# GPU instance families with EFA and GPUDirect RDMA, where multi-node NCCL should run over EFA
EFA_GPU_FAMILY = re.compile(r"^ml\.(p4d|p4de|p5|p5e|p5en|p6-[a-z0-9]+)\.")
EFA_ENV = (("FI_PROVIDER", "efa"), ("FI_EFA_USE_DEVICE_RDMA", "1"))
FORK_SAFE = ("RDMAV_FORK_SAFE", "FI_EFA_FORK_SAFE")
ASYNC_ERROR_HANDLING = ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING")
SAGEMAKER_DEFAULT_MAX_RUNTIME_S = 86_400
SIGTERM_GRACE_S = 120


@dataclass(frozen=True)
class Finding:
    level: str  # "warning" | "note"
    check: str  # checkpoint | max-runtime | efa | slow-fabric | warm-pool | collective-timeout | quota
    message: str

    def to_json(self) -> dict[str, str]:
        return asdict(self)


def _duration(seconds: float) -> str:
    if seconds % 86_400 == 0:
        return f"{seconds / 86_400:g} d"
    if seconds % 3600 == 0 or seconds > 86_400:
        return f"{seconds / 3600:g} h"
    return f"{seconds / 60:g} min"


def instance_choices(job: Mapping[str, Any], policy: Mapping[str, Any]) -> list[tuple[str, int]]:
    rc = job.get("ResourceConfig") or {}
    out = [(str(rc.get("InstanceType")), int(rc.get("InstanceCount") or 1))]
    for f in policy.get("instance_fallbacks") or []:
        out.append((str(f["instance_type"]), int(f["instance_count"])))
    return out


def review(job: Mapping[str, Any], policy: Mapping[str, Any]) -> list[Finding]:
    """Findings for a validated request (`job` = training_job, `policy` = the resolved policy)."""
    findings: list[Finding] = []
    env = {**dict(policy.get("environment_defaults") or {}), **dict(job.get("Environment") or {})}
    choices = instance_choices(job, policy)

    # checkpoint layout
    ckpt = job.get("CheckpointConfig") or {}
    local_path = ckpt.get("LocalPath") or "/opt/ml/checkpoints"
    if policy.get("checkpoint_layout", "auto") == "auto":
        findings.append(
            Finding(
                "warning",
                "checkpoint",
                "no checkpoint layout hint (policy.checkpoint_layout is auto): sagewarden resumes only "
                "from a checkpoint it recognises as complete under CheckpointConfig.S3Uri "
                f"{ckpt.get('S3Uri')}: hf checkpoint-<step>/trainer_state.json, megatron "
                "iter_<N>/latest_checkpointed_iteration.txt, dcp <dir><N>/.metadata. Set "
                "checkpoint_layout (or regex with checkpoint_dir_regex and checkpoint_marker) to yours, "
                f"and write checkpoints under {local_path}, the completion marker last",
            )
        )

    # MaxRuntime vs the run's wall clock
    stop = job.get("StoppingCondition") or {}
    max_runtime = stop.get("MaxRuntimeInSeconds")
    wall_s = float(policy.get("max_wall_clock_hours") or 0) * 3600
    if max_runtime is None:
        findings.append(
            Finding(
                "warning",
                "max-runtime",
                "no StoppingCondition.MaxRuntimeInSeconds: SageMaker stops every job after its default "
                "of 1 day, and sagewarden then chains the next one from the newest checkpoint; set it "
                "(up to 28 days) to chain less often",
            )
        )
    runtime_s = float(max_runtime or SAGEMAKER_DEFAULT_MAX_RUNTIME_S)
    if wall_s > runtime_s:
        segments = math.ceil(wall_s / runtime_s)
        findings.append(
            Finding(
                "note",
                "max-runtime",
                f"MaxRuntime {_duration(runtime_s)} is shorter than the run's wall-clock budget "
                f"{_duration(wall_s)} (max_wall_clock_hours): chaining will be used, up to {segments} jobs "
                "each resumed from the newest checkpoint. At each MaxRuntime SageMaker sends SIGTERM "
                f"and kills after {SIGTERM_GRACE_S} s: save a checkpoint on SIGTERM or lose the work "
                "since the last one, once per segment",
            )
        )
    elif wall_s and wall_s < runtime_s:
        findings.append(
            Finding(
                "note",
                "max-runtime",
                f"the wall-clock budget {_duration(wall_s)} caps MaxRuntime {_duration(runtime_s)}: the run "
                "fails when the budget is spent",
            )
        )

    # EFA / NCCL environment for multi-node p4d/p5
    for itype, count in dict.fromkeys(choices):
        if count < 2 or not EFA_GPU_FAMILY.match(itype):
            continue
        missing = [f"{k}={v}" for k, v in EFA_ENV if env.get(k) != v]
        if not any(env.get(k) == "1" for k in FORK_SAFE):
            missing.append("RDMAV_FORK_SAFE=1")
        if "NCCL_DEBUG" not in env:
            missing.append("NCCL_DEBUG=WARN")
        if missing:
            findings.append(
                Finding(
                    "warning",
                    "efa",
                    f"{count} x {itype} runs NCCL across hosts, but Environment (with "
                    f"policy.environment_defaults) lacks {' '.join(missing)}. AWS's EFA guidance sets the "
                    "FI_* ones so NCCL uses EFA with GPUDirect RDMA (the SageMaker training toolkit does "
                    "for torch_distributed; a custom launcher must); without them NCCL may fall back to TCP "
                    "sockets. NCCL_DEBUG puts NCCL's errors into the log tail sagewarden classifies",
                )
            )

    # the run-time fabric check (domain/hosts/fabric.py) reads NCCL's INFO lines
    efa_jobs = [(t, c) for t, c in dict.fromkeys(choices) if c > 1 and EFA_GPU_FAMILY.match(t)]
    if efa_jobs and str(env.get("NCCL_DEBUG", "")).strip().upper() not in ("INFO", "TRACE"):
        findings.append(
            Finding(
                "note",
                "slow-fabric",
                "set NCCL_DEBUG=INFO (Environment or policy.environment_defaults) so sagewarden can see "
                "which network NCCL selects and flag a job that falls back to TCP sockets instead of EFA "
                "(policy.slow_fabric_check)",
            )
        )

    # warm pools: what each attempt asks SageMaker to keep (none for managed spot)
    findings.append(Finding("note", "warm-pool", _warm_pool(job, policy)[1]))

    # collective timeout
    distributed = any(count > 1 for _, count in choices) or any(_gpus(t) > 1 for t, _ in choices)
    handling = next((env[k] for k in ASYNC_ERROR_HANDLING if k in env), None)
    if distributed and handling in (None, "0"):
        why = "is 0" if handling == "0" else "is not set"
        silence = policy.get("log_silence_minutes", 30)
        detection = (
            f"until hang detection stops it ({silence} min of log silence at the least)"
            if policy.get("hang_detection", True)
            else "indefinitely (policy.hang_detection is off)"
        )
        findings.append(
            Finding(
                "warning",
                "collective-timeout",
                f"no collective timeout set: TORCH_NCCL_ASYNC_ERROR_HANDLING {why}. Set it to 1 (Environment or "
                "policy.environment_defaults) and pass timeout= to init_process_group, so a dead rank "
                f"fails the job, which sagewarden resumes at once, instead of hanging it {detection}",
            )
        )
    return findings


def _warm_pool(job: Mapping[str, Any], policy: Mapping[str, Any]) -> tuple[int, str]:
    """The KeepAlivePeriodInSeconds every attempt will ask for, and why (the supervisor's rule)."""
    from sagewarden.domain.vocabulary.launch import warm_pool_request
    from sagewarden.domain.vocabulary.policy import RunPolicy

    return warm_pool_request(job, RunPolicy.from_dict(dict(policy)))


def _gpus(instance_type: str) -> int:
    from sagewarden.domain.vocabulary.pricing import GPUS_PER_INSTANCE

    return GPUS_PER_INSTANCE.get(instance_type, 0)


def quota_findings(quotas: Any, job: Mapping[str, Any], policy: Mapping[str, Any]) -> list[Finding]:
    """Instance counts against the account's SageMaker quotas (Service Quotas): the spot training
    quotas for a managed spot job, the on-demand ones otherwise. Any failure to read them is a
    note: the review never fails because of it."""
    from sagewarden.domain.capacity.quotas import (
        is_managed_spot,
        total_quota,
        training_quota,
        warm_pool_quota,
    )

    try:
        applied = _sagemaker_quotas(quotas)
    except Exception as exc:
        return [Finding("note", "quota", f"quotas not checked: cannot read Service Quotas ({_reason(exc)})")]
    out: list[Finding] = []
    spot = is_managed_spot(job)
    keep_alive = _warm_pool(job, policy)[0] > 0  # none for managed spot training
    for itype, count in dict.fromkeys(instance_choices(job, policy)):
        names = [training_quota(itype, spot=spot)]
        if keep_alive:
            names.append(warm_pool_quota(itype))
        for name in names:
            limit = applied.get(name)
            if limit is None:
                out.append(Finding("note", "quota", f"no quota named {name!r} in this account and region"))
            elif count > limit:
                out.append(
                    Finding(
                        "warning",
                        "quota",
                        f"{count} x {itype} needs {count} instances but the quota {name!r} is {limit:g}: "
                        f"request an increase to at least {count} in Service Quotas, or the run fails with QUOTA",
                    )
                )
            else:
                out.append(Finding("note", "quota", f"{count} x {itype} fits the quota {name!r} ({limit:g})"))
    total_name = total_quota(spot=spot)
    total = applied.get(total_name)
    biggest = max(count for _, count in instance_choices(job, policy))
    if total is not None and biggest > total:
        out.append(Finding("warning", "quota", f"the quota {total_name!r} is {total:g}, below {biggest}"))
    return out


def _sagemaker_quotas(client: Any) -> dict[str, float]:
    """QuotaName -> value: the applied values, with AWS defaults for quotas never changed."""
    values: dict[str, float] = {}
    for operation in ("list_aws_default_service_quotas", "list_service_quotas"):
        for page in client.get_paginator(operation).paginate(ServiceCode="sagemaker"):
            for q in page.get("Quotas", []):
                if "QuotaName" in q and q.get("Value") is not None:
                    values[str(q["QuotaName"])] = float(q["Value"])
    return values


def _reason(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict) and response.get("Error"):
        err = response["Error"]
        return f"{err.get('Code', 'error')}: {err.get('Message', '')}".rstrip(": ")
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
