"""How long a FAILED or CANCELLED run may be resumed, and what it may continue from
(domain/resuming.py; issue 32 item 5)."""

from __future__ import annotations

import dataclasses

import pytest

from sagewarden.domain.decide import Decision
from sagewarden.domain.resuming import RESUME_WINDOW_MS, foreign_checkpoint, resumable_until
from sagewarden.domain.vocabulary.events import CancelRequested, Observations, ResumeRequested
from sagewarden.domain.vocabulary.layouts import Checkpoint
from sagewarden.domain.vocabulary.models import Run, RunStatus
from tests.builders import HOUR, MIN, ckpt, observed, step, training_run

END = 2 * HOUR


def _cancelled() -> Run:
    """A run cancelled at END, whose last checkpoint (step 300) was written 30 minutes before."""
    run = training_run()
    run = step(run, CancelRequested("alice"), END - MIN).run
    stopped = dataclasses.replace(observed(run, "Stopped", "Stopped", END), ended_ms=END - 10_000)
    run = step(run, stopped, END, Observations(checkpoint=ckpt(300, END - 30 * MIN))).run
    assert run.status == RunStatus.CANCELLED and run.last_checkpoint == ckpt(300, END - 30 * MIN)
    return run


def _resume(run: Run, newest: Checkpoint | None, at: int = END + HOUR) -> Decision:
    return step(run, ResumeRequested("alice"), at, Observations(checkpoint=newest))


@pytest.mark.claim("A run may be resumed for 30 days after it ended")
def test_a_run_records_when_it_ended_and_a_resume_clears_it() -> None:
    run = _cancelled()
    assert run.finished_ms == END and resumable_until(run) == END + RESUME_WINDOW_MS
    resumed = _resume(run, ckpt(300, END - 30 * MIN)).run
    assert resumed.status == RunStatus.STARTING and resumed.finished_ms is None
    assert resumable_until(resumed) is None  # live: nothing to hold for a resume


@pytest.mark.claim(
    "409 with the reason if the run is not FAILED or CANCELLED, it ended more than 30 days ago, its checkpoints cannot be read right now, its newest checkpoint was written after it ended (by another run or job: a resume never continues another run's training), or another live run took its name or checkpoint prefix meanwhile; nothing is stored then"
)
@pytest.mark.claim("A run may be resumed for 30 days after it ended")
def test_a_run_is_resumable_for_thirty_days_after_it_ended() -> None:
    run = _cancelled()
    assert not _resume(run, ckpt(300, END - 30 * MIN), at=END + RESUME_WINDOW_MS).ignored
    late = _resume(run, ckpt(300, END - 30 * MIN), at=END + RESUME_WINDOW_MS + 1)
    assert late.ignored is not None and "more than 30 days ago" in late.ignored and not late.actions
    # a run stored before finished_ms existed counts from its last update
    legacy = dataclasses.replace(run, finished_ms=None, updated_ms=END + 5 * MIN)
    assert resumable_until(legacy) == END + 5 * MIN + RESUME_WINDOW_MS


@pytest.mark.claim(
    "A checkpoint written since, by another run or by a job that is not one of the run's, makes the resume a 409 that names it and when it was written"
)
def test_a_resume_never_continues_from_a_checkpoint_written_after_the_run_ended() -> None:
    """Issue 32 item 5: A's resume answered 202 and silently continued from B's checkpoint."""
    run = _cancelled()
    theirs = ckpt(700, END + 20 * MIN)  # another run's job wrote it since
    d = _resume(run, theirs)
    assert d.ignored is not None and not d.actions
    assert "checkpoint-700" in d.ignored and "after the run ended" in d.ignored
    # the same name overwritten by another run's job is not the run's either
    assert _resume(run, ckpt(300, END + 20 * MIN)).ignored is not None
    # the one it ended with, or one its own last attempt wrote before its end: resumed from
    assert not _resume(run, ckpt(300, END - 30 * MIN)).ignored
    assert not _resume(run, ckpt(350, END - 20_000)).ignored
    # one that was there before the run was submitted is what its first launch would resume from
    assert foreign_checkpoint(run, ckpt(100, run.created_ms - HOUR)) is None


@pytest.mark.claim(
    "A checkpoint written since, by another run or by a job that is not one of the run's, makes the resume a 409 that names it and when it was written"
)
def test_a_resume_refuses_a_different_checkpoint_written_at_an_unknown_time() -> None:
    run = _cancelled()
    d = _resume(run, ckpt(900, None))
    assert d.ignored is not None and "unknown" in d.ignored
    assert foreign_checkpoint(run, ckpt(200, None)) is None  # older than the one it knew
