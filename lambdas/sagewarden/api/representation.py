"""JSON shapes the API returns (and the CLI prints), every one redacted (`domain/vocabulary/redaction.py`).

Why: docs/api.md."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sagewarden.domain.checkpoints.retention import archive_uri, run_archive_prefix
from sagewarden.domain.checkpoints.retirement import progress_text
from sagewarden.domain.decision.deferrals import DEFER_FAIL_AFTER_MS
from sagewarden.domain.goodput import run_goodput
from sagewarden.domain.hangs.windows import window_in_force
from sagewarden.domain.vocabulary.advice import checkpoint_advice
from sagewarden.domain.vocabulary.costs import attempt_cost_usd, run_cost_usd
from sagewarden.domain.vocabulary.launch import warm_pool_request
from sagewarden.domain.vocabulary.layouts import Checkpoint
from sagewarden.domain.vocabulary.models import Attempt, Run
from sagewarden.domain.vocabulary.plan_windows import plan_arn, termination_ms, usable_window
from sagewarden.domain.vocabulary.policy import RunPolicy
from sagewarden.domain.vocabulary.redaction import redact, secret_values
from sagewarden.ports.aws import AuditEntry


def iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def checkpoint_json(c: Checkpoint | None) -> dict[str, Any] | None:
    if c is None:
        return None
    return {"uri": c.uri, "step": c.step, "layout": c.layout.value, "written_at": iso(c.written_at_ms)}


def newest_checkpoint_json(r: Run) -> dict[str, Any] | None:
    """The newest verified checkpoint the supervisor has seen (it looks at every reconcile tick and
    at each attempt's end): how far the training has come, however long since the last state change."""
    newest: dict[str, Any] | None = None
    if r.checkpoint_history:
        step, written_ms, write_s, _ = r.checkpoint_history[-1]
        newest = {
            "step": step,
            "written_at": iso(written_ms),
            "write_seconds": write_s if write_s >= 0 else None,
        }
    last = r.last_checkpoint
    if last is not None and (newest is None or last.step > newest["step"]):
        newest = {
            "step": last.step,
            "written_at": iso(last.written_at_ms),
            "write_seconds": last.write_seconds,
        }
    return newest


def attempt_json(a: Attempt, policy: RunPolicy, now_ms: int) -> dict[str, Any]:
    return {
        "number": a.number,
        "job_name": a.job_name,
        "instance_type": a.instance_type,
        "instance_count": a.instance_count,
        "launch": a.launch.value,
        "sagemaker_status": a.sm_status,
        "secondary_status": a.sm_secondary,
        "requested_at": iso(a.requested_at_ms),
        "training_started_at": iso(a.training_started_ms),
        "ended_at": iso(a.ended_ms),
        "resumed_from": checkpoint_json(a.resume_from),
        "resumed_checkpoint_age_s": (
            round((a.requested_at_ms - a.resume_from.written_at_ms) / 1000)
            if a.resume_from is not None and a.resume_from.written_at_ms is not None
            else None
        ),
        "checkpoint_at_end": checkpoint_json(a.checkpoint_at_end),
        "end_class": a.end_class,
        "end_reason": a.end_reason,
        "failure_reason": a.failure_reason,
        "evidence": list(a.evidence),
        "stop_intent": a.stop_intent,
        "hang_signals": list(a.hang_signals),
        "suspect_hosts": list(a.suspect_hosts),
        "infra_check": a.infra_check,
        "volume_steered": a.volume_steer,
        "fabric": a.fabric,
        "fabric_evidence": list(a.fabric_evidence),
        "straggler_host": a.straggler_host,
        "straggler_slowdown": a.straggler_shift,
        "learned_windows_min": {
            k: v
            for k, v in (("log_silence", a.log_window_min), ("progress_stalled", a.progress_window_min))
            if v is not None
        },
        # fixed once it ended; a live attempt's cost so far (the same figure the budget counts)
        "estimated_cost_usd": round(attempt_cost_usd(a, policy, now_ms), 2),
    }


def advice_json(r: Run, now_ms: int) -> dict[str, Any] | None:
    advice = checkpoint_advice(r, now_ms)
    if advice is None:
        return None
    return {
        "observed_interval_min": _round(advice.interval_min),
        "write_seconds": _round(advice.write_s),
        "mtbf_hours": _round(advice.mtbf_h),
        "faults": advice.faults,
        "training_hours": _round(advice.training_h),
        "optimal_interval_min": _round(advice.optimal_min),
        "gpu_hours_per_day_saved": _round(advice.gpu_hours_per_day_saved),
        "summary": advice.line(),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def hang_windows_json(r: Run) -> dict[str, Any] | None:
    """The latest attempt's log-silence (and, with a progress_metric, progress) window in
    minutes and where it comes from: learned (its own cadence), carried (an earlier attempt on
    the same instances), policy."""
    cur = r.current
    if cur is None or not r.policy.hang_detection:
        return None
    out: dict[str, Any] = {}
    for key, progress in (("log_silence", False), ("progress_stalled", True)):
        if progress and not r.policy.progress_metric:
            continue
        minutes, source = window_in_force(r, r.policy, cur, progress=progress)
        out[key] = {"minutes": minutes, "source": source}
    return out


def deferral_json(r: Run) -> dict[str, Any] | None:
    if r.deferred_since_ms is None:
        return None
    permanent = r.deferred_permanent_since_ms
    return {
        "reason": r.deferred_reason or "",
        "since": iso(r.deferred_since_ms),
        "permanent": permanent is not None,
        "fails_at": iso(permanent + DEFER_FAIL_AFTER_MS) if permanent is not None else None,
    }


def warm_pool_json(r: Run) -> dict[str, Any]:
    """What the run's next attempt asks SageMaker to keep warm and why (none for managed spot,
    with the policy's keep_alive_seconds 0, or once SageMaker kept none: no warm-pool quota),
    and the pools of ended attempts still watched until they are gone."""
    seconds, note = warm_pool_request(r.request, r.policy, warm_pool_off=r.warm_pool_off)
    return {
        "keep_alive_seconds": seconds,
        "note": note,
        "pools": [
            {"job_name": w.job_name, "status": w.status, "releases": w.releases, "bad_host": w.bad_host}
            for w in r.warm_pools
        ],
    }


def training_plan_json(r: Run, now_ms: int) -> dict[str, Any] | None:
    """The run's Training Plan as last read (domain/capacity/training_plans.py): its windows, when SageMaker
    begins terminating each, the next one to train in, and whether the run went on demand."""
    arn = plan_arn(r.request)
    if arn is None:
        return None
    nxt = usable_window(r, now_ms)
    return {
        "arn": arn,
        "status": r.plan_status,
        "read_at": iso(r.plan_read_ms),
        "read_error": r.plan_error,
        "windows": [
            {"start": iso(w[0]), "end": iso(w[1]), "termination_starts": iso(termination_ms(w))}
            for w in r.plan_windows
        ],
        "next_window_start": iso(nxt[0]) if nxt is not None and nxt[0] > now_ms else None,
        "on_demand": r.plan_off,
        "hours_waited_for_windows": round(
            (r.plan_waited_ms + (max(0, now_ms - r.plan_wait_since_ms) if r.plan_wait_since_ms else 0))
            / 3_600_000,
            2,
        ),
    }


def retention_json(r: Run) -> dict[str, Any] | None:
    """Checkpoint retention of a run that asked for it (docs/checkpoints.md): where its retired
    checkpoints go, the directories being retired and how far each got, the ones that cannot be
    retired and why, and the submit-time warning about the checkpoint bucket's versioning."""
    policy = r.policy
    if policy.checkpoint_keep is None:
        return None
    archive = (
        run_archive_prefix(archive_uri(r.checkpoint_uri, policy), r.run_id)
        if policy.checkpoint_retired == "archive" and r.checkpoint_uri
        else None
    )
    progress = {p.name: p for p in r.retire_progress}
    return {
        "archive_prefix": archive,
        "retiring": [
            {
                "name": name,
                "phase": progress[name].phase if name in progress else "copy",
                "objects_proven": progress[name].verified if name in progress else 0,
                "multipart_parts_copied": progress[name].parts if name in progress else 0,
                "passes_without_progress": progress[name].stalled if name in progress else 0,
                "summary": progress_text(progress[name]) if name in progress else f"{name}: not started",
            }
            for name in r.retiring
        ],
        "cannot_retire": [{"name": n, "reason": why, "since": iso(at)} for n, why, at in r.retire_stuck],
        "storage_warning": r.storage_warning,
    }


def run_json(r: Run, *, with_attempts: bool = True, now_ms: int | None = None) -> dict[str, Any]:
    now = now_ms if now_ms is not None else r.updated_ms
    out: dict[str, Any] = {
        "run_id": r.run_id,
        "name": r.name,
        "owner": r.owner,
        "status": r.status.value,
        "outcome": r.outcome,
        "created_at": iso(r.created_ms),
        "updated_at": iso(r.updated_ms),
        "attempt_count": r.attempt_count,
        "restarts": r.restarts,
        "restarts_by_class": dict(r.restarts_by_class),
        "no_progress_streak": r.no_progress_streak,
        "segments": r.segments,
        "wait": {"reason": r.wait_reason, "until": iso(r.wake_at_ms), "instance_type": r.wait_instance_type}
        if r.wait_reason
        else None,
        "deferred": deferral_json(r),
        "checkpoint_uri": r.checkpoint_uri,
        "last_checkpoint": checkpoint_json(r.last_checkpoint),
        # ended attempts plus the live one so far: the one cost figure, everywhere
        "estimated_cost_usd": round(run_cost_usd(r, now), 2),
        "policy": r.policy.to_dict(),
        "version": r.version,
        # from the run item alone (its goodput ledger and current attempt): the same in lists
        "ettr": run_goodput(r, now).to_dict(),
    }
    if with_attempts:
        out["checkpoint_advice"] = advice_json(r, now)
        out["hang_windows"] = hang_windows_json(r)
        out["newest_checkpoint"] = newest_checkpoint_json(r)
        out["warm_pool"] = warm_pool_json(r)
        out["training_plan"] = training_plan_json(r, now)
        out["retention"] = retention_json(r)
        out["attempts"] = [attempt_json(a, r.policy, now) for a in r.attempts]
        out["training_job"] = dict(r.request)
    redacted: dict[str, Any] = redact(out, secret_values(r.request, r.policy.environment_defaults))
    return redacted


def audit_json(e: AuditEntry) -> dict[str, Any]:
    return {
        "at": iso(e.at_ms),
        "at_ms": e.at_ms,
        "kind": e.kind,
        "summary": e.summary,
        # the service scrubbed the run's secret values; this keeps secret-looking keys out too
        "detail": redact(dict(e.detail)),
    }
