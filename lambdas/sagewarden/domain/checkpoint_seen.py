"""The checkpoints a run has seen: its bounded history (step, written at, write seconds, previous
step) for the interval advice, and per attempt the saves it measured for goodput. Pure."""

from __future__ import annotations

import dataclasses

from sagewarden.domain.checkpoints import Checkpoint
from sagewarden.domain.draft import Draft
from sagewarden.domain.models import CHECKPOINT_HISTORY


def record_checkpoint(d: Draft) -> bool:
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
