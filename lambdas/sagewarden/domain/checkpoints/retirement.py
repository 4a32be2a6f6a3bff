"""Retirement's bookkeeping: what each retirer pass answered, the directories that cannot be
retired, and whether retention can free storage on a versioned bucket.

Pure. Why: docs/checkpoints.md (*The rules*, *Where the rules live*)."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from dataclasses import dataclass

from sagewarden.domain.decision.pending import PendingDecision
from sagewarden.domain.vocabulary.events import RetirementReported
from sagewarden.domain.vocabulary.layouts import parse_s3_uri
from sagewarden.domain.vocabulary.models import RetireProgress, Run

__all__ = [
    "MAX_STUCK",
    "STUCK_AFTER_PASSES",
    "BucketVersioning",
    "LifecycleRule",
    "forget_stuck",
    "on_retire_reported",
    "progress_text",
    "stuck_names",
    "versioning_warning",
]

# passes in a row that reach a directory and cannot advance it before it counts as one that
# cannot be retired (a pass runs every reconcile interval while the attempt trains)
STUCK_AFTER_PASSES = 3
# directories the run remembers as impossible to retire (the newest); an older one dropped from
# the list is tried again, and comes back after STUCK_AFTER_PASSES more passes
MAX_STUCK = 16
REASON_MAX = 300


def stuck_names(run: Run) -> set[str]:
    return {name for name, _, _ in run.retire_stuck}


def forget_stuck(d: PendingDecision, present: Collection[str]) -> bool:
    """Drop the stuck directories the synced prefix no longer holds (someone moved or deleted
    them); True when the run changed."""
    kept = tuple(s for s in d.run.retire_stuck if s[0] in present)
    gone = [s[0] for s in d.run.retire_stuck if s[0] not in present]
    if not gone:
        return False
    d.set(retire_stuck=kept)
    d.note(f"{', '.join(gone)}: no longer in the synced prefix (could not be retired)")
    return True


def progress_text(p: RetireProgress) -> str:
    """One directory's progress as the audit and ``GET /runs/{id}`` say it."""
    if p.phase == "delete":
        text = f"{p.name}: every object copied, {p.verified:,} left to delete"
    else:
        text = f"{p.name}: {p.verified:,} objects proven copied"
        if p.upload is not None:
            text += f", {p.parts:,} parts of {p.upload[0]} copied"
    if p.stalled:
        text += f" ({p.stalled} {'pass' if p.stalled == 1 else 'passes'} without progress)"
    return text


def on_retire_reported(d: PendingDecision, e: RetirementReported) -> str | None:
    """Record what a retirement pass answered (see the module docstring); None when the run
    changed, else why the report changed nothing."""
    run = d.run
    if e.s3_uri != run.checkpoint_uri:
        return "retirement report for another checkpoint prefix"
    progress = {p.name: p for p in run.retire_progress}
    retiring = list(run.retiring)
    stuck = list(run.retire_stuck)
    notes: list[str] = []
    for outcome in e.outcomes:
        if outcome.name not in retiring:
            continue  # no longer chosen (retired meanwhile, or the report is late)
        before = progress.get(outcome.name)
        if outcome.done:
            progress.pop(outcome.name, None)  # the next look at the prefix forgets the name
            continue
        stalled = 0 if outcome.progressed else (before.stalled if before else 0) + bool(outcome.blocked)
        if outcome.blocked and stalled >= STUCK_AFTER_PASSES:
            reason = outcome.blocked[:REASON_MAX]
            progress.pop(outcome.name, None)
            retiring.remove(outcome.name)
            stuck = [s for s in stuck if s[0] != outcome.name] + [(outcome.name, reason, d.now)]
            notes.append(
                f"{outcome.name} cannot be retired: {reason} ({stalled} passes without progress); "
                "retention no longer tries it and the directories behind it proceed"
            )
            continue
        progress[outcome.name] = dataclasses.replace(outcome.state, name=outcome.name, stalled=stalled)
    recorded = tuple(progress[n] for n in retiring if n in progress)
    stuck_now = tuple(stuck[-MAX_STUCK:])
    if recorded == run.retire_progress and tuple(retiring) == run.retiring and stuck_now == run.retire_stuck:
        return "retirement pass changed nothing recorded"
    d.set(retire_progress=recorded, retiring=tuple(retiring), retire_stuck=stuck_now)
    for note in notes:
        d.note(note)
    if recorded and not notes:
        d.note("retirement continues next pass: " + "; ".join(progress_text(p) for p in recorded))
    elif not notes:
        d.note("retirement pass recorded")
    return None


# --- versioned buckets ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LifecycleRule:
    """One rule of a bucket's lifecycle configuration, as far as retention cares: ``prefix`` the
    rule's filter when it is a key prefix alone ("" for the whole bucket; None when it also
    filters on tags or object sizes, so it may not cover every checkpoint object)."""

    prefix: str | None
    enabled: bool
    noncurrent_expiration: bool  # NoncurrentVersionExpiration is set


@dataclass(frozen=True)
class BucketVersioning:
    """A bucket's versioning status (GetBucketVersioning: "Enabled", "Suspended", or None for a
    bucket that never had versioning) and its lifecycle rules (GetBucketLifecycleConfiguration)."""

    bucket: str
    status: str | None
    rules: tuple[LifecycleRule, ...] = ()


def versioning_warning(s3_uri: str, facts: BucketVersioning) -> str | None:
    """Why checkpoint retention frees no storage under ``s3_uri``, or None. On a bucket whose
    versioning is (or was, and is now suspended) enabled, DeleteObject adds a delete marker and
    the deleted object stays as a noncurrent version, billed as before; only a lifecycle rule
    with NoncurrentVersionExpiration whose filter covers the prefix removes those versions."""
    if facts.status not in ("Enabled", "Suspended"):
        return None
    _, prefix = parse_s3_uri(s3_uri)
    for rule in facts.rules:
        if (
            rule.enabled
            and rule.noncurrent_expiration
            and rule.prefix is not None
            and prefix.startswith(rule.prefix)
        ):
            return None
    where = f"s3://{facts.bucket}/{prefix}"
    return (
        f"the checkpoint bucket {facts.bucket} has versioning {facts.status.lower()} and no enabled "
        f"lifecycle rule expiring noncurrent versions under {where}: every checkpoint retention "
        "deletes stays there as a noncurrent version, so retention frees no storage (archive mode "
        "adds the archive copy). Add a lifecycle rule with NoncurrentVersionExpiration for that prefix"
    )
