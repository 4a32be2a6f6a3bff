"""Telling a crash loop from independent faults: the no-progress streak counts only repeats, and a
deterministic failure costs at most one confirming restart (`repeats_previous`). Pure. Why:
docs/recovery.md (*Crash loop*, *Deterministic failure*)."""

from __future__ import annotations

import re

from sagewarden.domain.vocabulary.checkpoint_interval import observed_interval_min
from sagewarden.domain.vocabulary.classifier.models import Classification
from sagewarden.domain.vocabulary.models import Attempt, PreviousEnding, Run

SIGNATURE_MAX_CHARS = 240  # stored on the run item: bounded
MARKS_MAX_CHARS = 120
LOOP_LINES = 3  # the previous ending's evidence lines kept for the alert that stops a loop
# the step a line prints: "iteration=166", "step 35012", "Epoch 5/5", "global_step: 1200"
_MARK = re.compile(r"\b(global_step|step|iteration|iter|epoch)\b\s*[=:]?\s*\[?\s*(\d+)", re.IGNORECASE)
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


def step_marks(cls: Classification) -> str:
    """The step numbers the ending's lines print (e.g. "iteration=166"), sorted, bounded; "" when
    they print none."""
    found = {
        f"{m.group(1).casefold()}={int(m.group(2))}" for text in cls.evidence for m in _MARK.finditer(text)
    }
    return ",".join(sorted(found))[:MARKS_MAX_CHARS]


def _step(ckpt_step: int | None) -> int:
    return -1 if ckpt_step is None else ckpt_step


def previous_ending(
    ended: Attempt, cls: Classification, signature: str, *, singled_out: bool
) -> PreviousEnding:
    """What the next ending is compared with (stored on the run when the run resumes)."""
    at_end = ended.checkpoint_at_end.step if ended.checkpoint_at_end is not None else None
    return PreviousEnding(
        attempt=ended.number,
        signature=signature,
        step=_step(at_end),
        marks=step_marks(cls),
        singled_out=singled_out,
        lines=tuple(cls.evidence[:LOOP_LINES]),
    )


def repeats_previous(
    run: Run, ended: Attempt, cls: Classification, signature: str, *, singled_out: bool
) -> PreviousEnding | None:
    """The previous ending this one repeats, making the run a loop (see the module docstring);
    None when it is no loop."""
    prev = run.last_ending
    if prev is None or not cls.confirmable or singled_out or prev.singled_out:
        return None
    resumed = _step(ended.resume_from.step if ended.resume_from is not None else None)
    at_end = _step(ended.checkpoint_at_end.step if ended.checkpoint_at_end is not None else None)
    if at_end > resumed or prev.step != resumed or prev.signature != signature:
        return None  # progress, not resumed from where it ended, or another failure
    marks = step_marks(cls)
    if marks and prev.marks and marks != prev.marks:
        return None  # the same failure at another step: not the code at one point of the data
    return prev
