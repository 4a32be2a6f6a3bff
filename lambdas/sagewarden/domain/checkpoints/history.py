"""The checkpoints a run has seen: its bounded history for the interval advice, per attempt the
saves measured for goodput, and when ended attempts could write (retention retires only that).
Pure. Why: docs/checkpoints.md (*Where the rules live*)."""

from __future__ import annotations

import dataclasses

from sagewarden.domain.decision.pending import PendingDecision
from sagewarden.domain.vocabulary.layouts import Checkpoint
from sagewarden.domain.vocabulary.models import CHECKPOINT_HISTORY, MAX_WRITING_SPANS, Attempt, Run


def record_checkpoint(d: PendingDecision) -> bool:
    """Append a newly seen checkpoint to the run's history; True when it changed."""
    ckpt: Checkpoint | None = d.obs.checkpoint
    if ckpt is None or ckpt.written_at_ms is None or d.run.status.terminal:
        return False
    history = d.run.checkpoint_history
    if history and ckpt.step <= history[-1][0]:
        return False
    entry = (
        ckpt.step,
        ckpt.written_at_ms,
        ckpt.write_seconds if ckpt.write_seconds is not None else -1.0,
        ckpt.previous_step if ckpt.previous_step is not None else -1,
    )
    d.set(checkpoint_history=(*history, entry)[-CHECKPOINT_HISTORY:])
    cur = d.run.current
    if (
        cur is not None
        and ckpt.write_seconds is not None
        and cur.training_started_ms is not None
        and ckpt.written_at_ms >= cur.training_started_ms
        and (cur.stop_requested_ms is None or ckpt.written_at_ms < cur.stop_requested_ms)
    ):  # this attempt's own save while training, measured: goodput counts it at its own length
        d.put_attempt(
            dataclasses.replace(
                cur,
                saves_seen=cur.saves_seen + 1,
                saves_seen_ms=cur.saves_seen_ms + round(ckpt.write_seconds * 1000),
            )
        )
    took = f", written in {ckpt.write_seconds:.0f} s" if ckpt.write_seconds is not None else ""
    d.note(f"newest checkpoint: step {ckpt.step}{took}")
    return True


def writing_span(att: Attempt, now_ms: int | None = None) -> tuple[int, int, int] | None:
    """When ``att``'s job could write checkpoints: (the step it resumed from, or -1; its Training
    start; its end -- the later of TrainingEndTime and its final status change, which follows the
    last upload -- or ``now_ms`` while it is live). None: it never trained."""
    if att.training_started_ms is None:
        return None
    if att.ended_ms is not None:
        end = max(att.ended_ms, att.sm_modified_ms)
    elif now_ms is not None:
        end = now_ms
    else:
        return None
    after = att.resume_from.step if att.resume_from is not None else -1
    return (after, att.training_started_ms, end)


def record_writing_span(d: PendingDecision, before: Run) -> bool:
    """An attempt that ended in this decision adds its writing span to the run (bounded: the
    oldest spans are dropped, and the directories only they vouch for are never retired)."""
    cur = before.current
    if cur is None or cur.ended:
        return False
    after = next((a for a in d.run.attempts if a.number == cur.number), None)
    span = writing_span(after) if after is not None and after.ended else None
    if span is None:
        return False
    d.set(checkpoint_spans=(*d.run.checkpoint_spans, span)[-MAX_WRITING_SPANS:])
    return True
