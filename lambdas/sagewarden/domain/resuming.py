"""How long a FAILED or CANCELLED run may be resumed, and what a resume may continue from. Pure.
Why: docs/recovery.md (*Resuming a run*)."""

from __future__ import annotations

from datetime import UTC, datetime

from sagewarden.domain.lookups import RESUMABLE
from sagewarden.domain.vocabulary.layouts import Checkpoint
from sagewarden.domain.vocabulary.models import Run

RESUME_WINDOW_DAYS = 30
RESUME_WINDOW_MS = RESUME_WINDOW_DAYS * 24 * 3_600_000

__all__ = ["RESUME_WINDOW_DAYS", "RESUME_WINDOW_MS", "expired", "foreign_checkpoint", "resumable_until"]


def _utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def finished_at(run: Run) -> int:
    """When the run ended (its last update for a run stored before ``finished_ms`` existed)."""
    return run.finished_ms if run.finished_ms is not None else run.updated_ms


def resumable_until(run: Run) -> int | None:
    """Until when a FAILED or CANCELLED run may be resumed (None: it is not resumable)."""
    if run.status not in RESUMABLE:
        return None
    return finished_at(run) + RESUME_WINDOW_MS


def expired(run: Run, now_ms: int) -> str | None:
    """Why the run may no longer be resumed (None: it may be, as far as its age goes)."""
    until = resumable_until(run)
    if until is None or now_ms <= until:
        return None
    return (
        f"it ended at {_utc(finished_at(run))}, more than {RESUME_WINDOW_DAYS} days ago: a run is "
        "resumable for that long, and its checkpoint prefix is no longer held for it. Submit a new "
        "run on the same CheckpointConfig.S3Uri to continue from its checkpoints"
    )


def run_ended_ms(run: Run) -> int:
    """The last moment one of the run's jobs could have written a checkpoint."""
    out = run.created_ms
    cur = run.current
    if cur is not None:
        out = max(out, cur.sm_modified_ms, cur.ended_ms or 0)
    last = run.last_checkpoint
    if last is not None and last.written_at_ms is not None:
        out = max(out, last.written_at_ms)
    return out


def foreign_checkpoint(run: Run, newest: Checkpoint | None) -> str | None:
    """Why the newest complete checkpoint is not one a resume of ``run`` may continue from (None:
    it may): it was written after the run ended, or it is not the one the run knew and its write
    time is unknown."""
    if newest is None:
        return None
    last = run.last_checkpoint
    if last is not None and newest.uri == last.uri and newest.written_at_ms == last.written_at_ms:
        return None  # the checkpoint the run ended with, untouched
    ended = run_ended_ms(run)
    where = f"its newest checkpoint {newest.uri} (step {newest.step})"
    if newest.written_at_ms is None:
        if last is not None and newest.step <= last.step:
            return None  # older than the one it knew: its own, or what it started from
        return (
            f"{where} is not the one it ended with and when it was written is unknown: it may be "
            "another run's, and a resume never continues from another run's training"
        )
    if newest.written_at_ms <= ended:
        return None
    return (
        f"{where} was written at {_utc(newest.written_at_ms)}, after the run ended at {_utc(ended)}: "
        "another run or job wrote it, and a resume never continues from another run's training. "
        "Move it out of the prefix to resume from this run's own checkpoints, or submit a new run "
        "to continue from it"
    )
