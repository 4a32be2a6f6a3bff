"""Telling a crash loop from independent faults. Pure.

An ending *without progress* is one whose checkpoint step did not advance past the attempt's
resume point. On its own that proves little: at 2,048 GPUs a fault arrives every few hours, and
one that lands before the attempt's first checkpoint is bad luck, not a loop (at 16x the Llama 3
fault rate, three in a row happened 11 times in a 42-day benchmark run and the old rule paged a
person each time). A loop repeats itself: the same failure, again before progress. So an ending
without progress extends the no-progress streak only when

- it failed the same way as the previous ending without progress (its *signature*: the ending
  class and its reason and evidence with numbers, ids, addresses and host indices taken out), or
- the attempt trained well past a checkpoint that was due (twice the run's observed checkpoint
  interval) and none landed: whatever ends such attempts, the run is burning GPU-hours without
  keeping any of them.

Any other ending without progress starts a new streak of 1. Budgets (`max_restarts`, the wall
clock, `max_cost_usd`) still bound a run whatever its faults are.
"""

from __future__ import annotations

import re

from sagewarden.domain.checkpoint_interval import observed_interval_min
from sagewarden.domain.classifier import Classification
from sagewarden.domain.models import Attempt, Run

SIGNATURE_MAX_CHARS = 240  # stored on the run item: bounded
OVERDUE_FACTOR = 2.0  # trained this many checkpoint intervals without one: not bad luck

# what differs between repeats of one failure: addresses; ids (UUIDs and hashes: a hex token of
# 6+ characters with a digit; temp names: a word of 8+ letters and digits with a digit); numbers
_VARIABLE = re.compile(
    r"0x[0-9a-f]+"
    r"|\b(?=[0-9a-f-]*\d)[0-9a-f][0-9a-f-]{5,}\b"
    r"|\b(?=[a-z_]*\d)[a-z0-9_]{8,}\b"
    r"|\d+(?:\.\d+)?"
)
_SPACE = re.compile(r"\s+")


def _normalise(text: str) -> str:
    return _SPACE.sub(" ", _VARIABLE.sub("#", text.casefold())).strip()


def ending_signature(cls: Classification, label: str) -> str:
    """How the attempt failed, with what varies between repeats of one failure taken out (step
    numbers, ranks, host indices, timestamps, addresses)."""
    parts = [label, _normalise(cls.reason), *(_normalise(e) for e in cls.evidence)]
    return "|".join(parts)[:SIGNATURE_MAX_CHARS]


def checkpoint_overdue(run: Run, ended: Attempt) -> bool:
    """The attempt trained for more than OVERDUE_FACTOR observed checkpoint intervals."""
    if ended.training_started_ms is None or ended.ended_ms is None:
        return False
    interval = observed_interval_min(run.checkpoint_history)
    if interval is None or interval <= 0:
        return False
    trained_min = (ended.ended_ms - ended.training_started_ms) / 60_000
    return trained_min > OVERDUE_FACTOR * interval


def no_progress_streak(run: Run, ended: Attempt, *, progressed: bool, signature: str) -> int:
    """The run's no-progress streak after this ending (see the module docstring)."""
    if progressed:
        return 0
    repeats = run.no_progress_streak > 0 and (
        signature == run.no_progress_signature or checkpoint_overdue(run, ended)
    )
    return run.no_progress_streak + 1 if repeats else 1
