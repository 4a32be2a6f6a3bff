"""What a submit checks against the account before anything is stored (POST /runs).

The checkpoint prefix can be listed, the instance count fits the quota, no live run holds the
name or prefixes, and a retention bucket's versioning warning; an unreadable answer is unknown.
Why: docs/api.md (*The API*: the refusals)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sagewarden.domain.capacity.quotas import instance_quotas, is_managed_spot, warm_pool_quota
from sagewarden.domain.checkpoints.retention import archive_of
from sagewarden.domain.checkpoints.retirement import versioning_warning
from sagewarden.domain.resuming import resumable_until
from sagewarden.domain.vocabulary import claims as claim_rules
from sagewarden.domain.vocabulary.layouts import parse_s3_uri
from sagewarden.domain.vocabulary.models import Run
from sagewarden.domain.vocabulary.plan_windows import plan_arn
from sagewarden.domain.vocabulary.policy import RunPolicy
from sagewarden.ports.aws import (
    CheckpointFinder,
    ClaimConflict,
    QuotaReader,
    ReadFailed,
    RunStore,
    TrainingPlanReader,
    VersioningReader,
)
from sagewarden.usecases.errors import FieldError

log = logging.getLogger("sagewarden.admission")

CHECKPOINT_FIELD = "training_job.CheckpointConfig.S3Uri"
COUNT_FIELD = "training_job.ResourceConfig.InstanceCount"


def no_warm_pool_quota(reader: QuotaReader | None, training_job: Mapping[str, Any]) -> str | None:
    """The quota name when the account's warm-pool quota for the run's instance type is known to
    be 0 (AWS's default): SageMaker then keeps no pool, without an error, so asking for one only
    makes the first restart wait for a pool that never comes. None: not 0, or unknown."""
    if reader is None:
        return None
    try:
        quotas = reader.sagemaker_quotas()
    except Exception as exc:  # unknown: the run asks, and learns from the first ending
        log.warning("warm-pool quota not checked: %s", exc)
        return None
    itype = str((training_job.get("ResourceConfig") or {}).get("InstanceType", ""))
    name = warm_pool_quota(itype)
    return name if quotas.get(name) == 0 else None


class RunConflict(Exception):
    """Another run holds this run's name, a prefix overlapping its checkpoint or archive prefix, or
    (a resumable run of another principal) its checkpoint prefix (409)."""

    def __init__(self, message: str, holder_run_id: str, holder: Run | None, claim: str, on: str) -> None:
        super().__init__(message)
        self.message = message
        self.holder_run_id = holder_run_id
        self.holder = holder
        self.claim = claim
        # what of this run collides: "name", "checkpoint_prefix" (its synced prefix: the same,
        # nested or enclosing) or "archive_prefix" (its retention archive)
        self.on = on


def checkpoint_problems(
    finder: CheckpointFinder, s3_uri: str, field: str = CHECKPOINT_FIELD
) -> list[FieldError]:
    """Whether the supervisor can list ``s3_uri`` (the checkpoint prefix, or checkpoint
    retention's archive prefix with ``field`` naming it): a permanent refusal is a field error."""
    try:
        finder.check_access(s3_uri)
    except ValueError as exc:
        return [FieldError(field, f"not a usable S3 URI: {exc}")]
    except ReadFailed as exc:
        if exc.permanent:
            return [
                FieldError(
                    field,
                    f"the supervisor {_lowered(str(exc))}: "
                    + (
                        "sagewarden could never find a checkpoint there to resume from"
                        if field == CHECKPOINT_FIELD
                        else "checkpoint retention could never archive there"
                    )
                    + ". Check the bucket name, the deployment's checkpointBuckets and the bucket policy",
                )
            ]
        log.warning("checkpoint prefix %s not checked (transient): %s", s3_uri, exc)
    except Exception as exc:  # unknown is not "missing": the first launch defers until S3 answers
        log.warning("checkpoint prefix %s not checked: %s", s3_uri, exc)
    return []


def storage_warning(reader: VersioningReader | None, s3_uri: str, policy: RunPolicy) -> str | None:
    """Why checkpoint retention would free no storage under ``s3_uri`` (domain/checkpoints/retirement.py
    versioning_warning), for a run that asks for retention; None when nothing is wrong or the run
    keeps everything. Versioning that cannot be read is said to be unknown, not "unversioned"."""
    if reader is None or policy.checkpoint_keep is None:
        return None
    try:
        bucket, _ = parse_s3_uri(s3_uri)
    except ValueError:
        return None  # the checkpoint prefix's own check says what is wrong with it
    try:
        facts = reader.versioning(bucket)
    except Exception as exc:
        log.warning("versioning of %s not checked: %s", bucket, exc)
        return (
            f"could not read whether the checkpoint bucket {bucket} is versioned ({exc}): on a versioned "
            "bucket retention frees no storage unless a lifecycle rule expires noncurrent versions"
        )
    return versioning_warning(s3_uri, facts)


def _lowered(text: str) -> str:
    return text[:1].lower() + text[1:] if text else text


def quota_problems(
    reader: QuotaReader | None, training_job: Mapping[str, Any], policy: RunPolicy
) -> list[FieldError]:
    if reader is None:
        return []
    try:
        quotas = reader.sagemaker_quotas()
    except Exception as exc:  # unknown quota: accept; a launch above it fails with QUOTA
        log.warning("quotas not checked: %s", exc)
        return []
    rc = training_job.get("ResourceConfig") or {}
    primary = (str(rc.get("InstanceType", "")), int(rc.get("InstanceCount", 1)))
    choices = [primary, *((c.instance_type, c.instance_count) for c in policy.instance_fallbacks)]
    spot = is_managed_spot(training_job)  # every attempt of the run asks for the same
    blocked = [_never_fits(quotas, itype, count, spot=spot) for itype, count in choices]
    if any(b is None for b in blocked):
        return []
    itype, count = primary
    name, limit = blocked[0] or ("", 0.0)
    text = (
        f"{count} x {itype} is above the account's quota {name!r} of {limit:g}: no attempt "
        f"could ever launch. Request an increase to at least {count} in Service Quotas"
    )
    if len(choices) > 1:
        text += "; no policy.instance_fallbacks choice fits its quota either"
    return [FieldError(COUNT_FIELD, text)]


PLAN_FIELD = "training_job.ResourceConfig.TrainingPlanArn"


def plan_problems(
    reader: TrainingPlanReader | None, training_job: Mapping[str, Any], policy: RunPolicy
) -> list[FieldError]:
    """A run on a Training Plan (domain/capacity/training_plans.py): its instances must fit the plan, and
    the plan must still have a window (not Expired or Failed). A plan that cannot be read is
    unknown (accept: SageMaker refuses a launch that does not fit, and the run fails saying so)."""
    arn = plan_arn(training_job)
    if arn is None:
        return []
    problems = []
    if policy.instance_fallbacks:
        problems.append(
            FieldError(
                "policy.instance_fallbacks",
                "not with a training plan: the plan reserves one instance type and count "
                "(use training_plan_fallback on_demand for capacity after the plan)",
            )
        )
    if reader is None:
        return problems
    try:
        plan = reader.describe_plan(arn)
    except Exception as exc:
        log.warning("training plan %s not checked: %s", arn, exc)
        return problems
    rc = training_job.get("ResourceConfig") or {}
    itype, count = str(rc.get("InstanceType", "")), int(rc.get("InstanceCount", 1))
    if plan.status in ("Expired", "Failed"):
        problems.append(FieldError(PLAN_FIELD, f"the training plan is {plan.status}: no job can run on it"))
    if plan.instance_type is not None and itype != plan.instance_type:
        problems.append(
            FieldError(
                "training_job.ResourceConfig.InstanceType",
                f"the training plan reserves {plan.instance_type}, not {itype}",
            )
        )
    if plan.total_count is not None and count > plan.total_count:
        problems.append(
            FieldError(COUNT_FIELD, f"the training plan reserves {plan.total_count} instances, not {count}")
        )
    return problems


def _never_fits(
    quotas: Mapping[str, float], itype: str, count: int, *, spot: bool
) -> tuple[str, float] | None:
    """The quota one attempt of `count` x `itype` is above (it can never launch), or None; a
    managed spot attempt counts against the spot training quotas."""
    for name in instance_quotas(itype, spot=spot):
        limit = quotas.get(name)
        if limit is not None and count > limit:
            return name, limit
    return None


def _utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def conflict(store: RunStore, exc: ClaimConflict, run: Run, *, resuming: bool = False) -> RunConflict:
    """The 409 for a claim another run holds: which run (never its owner), and why the two cannot
    both write there."""
    holder = store.get(exc.holder_run_id)
    who = f"run {exc.holder_run_id}" + (f" ({holder.name}, {holder.status.value})" if holder else "")
    mine = claim_rules.checkpoint_prefix(run.checkpoint_uri)
    archive = archive_of(run)
    arch = claim_rules.checkpoint_prefix(archive) if archive else None
    theirs = claim_rules.checkpoint_prefix(holder.checkpoint_uri) if holder else "a prefix"
    their_archive = archive_of(holder) if holder else None
    claim = exc.claim
    at = claim_rules.prefix_of(claim)
    on = "checkpoint_prefix"
    if claim.startswith(claim_rules.NAME):
        on = "name"
        why = (
            f"the name {run.name!r} is used by live {who}: `get` and `cancel` by name would not "
            "know which run you mean. Choose another name, or cancel that run first"
        )
    elif claim.startswith(claim_rules.HOLD):
        until = resumable_until(holder) if holder else None
        inside = "is" if at == mine else "is inside" if mine.startswith(at) else None
        if inside is None and arch is not None:
            on = "archive_prefix"
            inside = "(the archive prefix) is" if arch == at else "(the archive prefix) is inside"
        target = mine if on == "checkpoint_prefix" else arch
        why = (
            f"{target} {inside or 'overlaps'} the checkpoint prefix {at} of {who}, which may still be resumed"
            + (f" until {_utc(until)}" if until else "")
            + ": its checkpoints are there, and a run of another principal may not write there "
            "until then (a run of the same principal, or an admin's, may). Use another prefix"
        )
    elif claim.startswith(claim_rules.ARCHIVE_UNDER):
        where = their_archive or f"a prefix under {mine}"
        why = (
            f"live {who} archives its retired checkpoints to {where}, inside {mine}: every job of "
            "this run would download them. Use a prefix outside it, or cancel that run first"
        )
    elif claim.startswith(claim_rules.ARCHIVE):
        how = "the archive prefix" if at == mine else f"inside the archive prefix {at}"
        why = (
            f"{mine} is {how} of live {who}: its retention copies retired checkpoints there, and "
            "every job of this run would download them. Use another CheckpointConfig.S3Uri, or "
            "cancel that run first"
        )
    elif arch is not None and (
        at == arch or (claim.startswith(claim_rules.CHECKPOINT) and arch.startswith(at))
    ):
        on = "archive_prefix"
        if claim.startswith(claim_rules.UNDER):
            why = (
                f"live {who} writes its checkpoints to {theirs}, inside the archive prefix {arch}: "
                "retention would copy this run's retired checkpoints into the prefix that run's jobs "
                "download. Choose another checkpoint_archive_uri, or cancel that run first"
            )
        else:
            how = "is the checkpoint prefix" if at == arch else f"is inside the checkpoint prefix {at}"
            why = (
                f"the archive prefix {arch} {how} of live {who}: retention would copy this run's "
                "retired checkpoints into what that run's jobs download. Choose another "
                "checkpoint_archive_uri, or cancel that run first"
            )
    elif claim == claim_rules.CHECKPOINT + mine:
        why = (
            f"live {who} writes its checkpoints to the same prefix {mine}: the two runs would "
            "overwrite each other's checkpoints. Use another CheckpointConfig.S3Uri, or cancel that run first"
        )
    elif claim.startswith(claim_rules.CHECKPOINT):
        why = (
            f"{mine} is inside the checkpoint prefix {theirs} of live {who}: SageMaker downloads "
            f"everything under {theirs} into that run's jobs. Use a prefix outside it, or cancel that run first"
        )
    else:
        why = (
            f"live {who} writes its checkpoints to {theirs}, inside {mine}: every job of this run "
            "would download them. Use a prefix outside it, or cancel that run first"
        )
    if resuming:
        why = f"run {run.run_id} cannot be resumed now: {why}"
    return RunConflict(why, exc.holder_run_id, holder, claim, on)
