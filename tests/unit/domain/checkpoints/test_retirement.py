"""Checkpoint retirement's bookkeeping (domain/checkpoints/retirement.py): each pass's answer is recorded and
given to the next pass, a directory no pass can advance is shown and no longer tried, and a
versioned bucket without a noncurrent-version rule is warned about."""

from __future__ import annotations

import dataclasses

import pytest

from sagewarden.domain.checkpoints.retirement import (
    MAX_STUCK,
    STUCK_AFTER_PASSES,
    BucketVersioning,
    LifecycleRule,
    versioning_warning,
)
from sagewarden.domain.vocabulary.actions import RetireCheckpoints
from sagewarden.domain.vocabulary.events import Observations, RetirementReported, RetireOutcome, Tick
from sagewarden.domain.vocabulary.layouts import RetentionView
from sagewarden.domain.vocabulary.models import RetireProgress, Run, RunStatus
from sagewarden.domain.vocabulary.policy import RunPolicy
from tests.builders import HOUR, ckpt, step, training_run
from tests.builders import retention_view as view

KEEP1 = RunPolicy(checkpoint_keep=1)
NOW = 5 * HOUR
URI = "s3://bucket/ckpt/"


def tick(run: Run, v: RetentionView, at: int = NOW) -> tuple[Run, RetireCheckpoints | None]:
    d = step(run, Tick(), at, Observations(checkpoint=ckpt(900, at - HOUR), retention=v))
    found = [a for a in d.actions if isinstance(a, RetireCheckpoints)]
    return d.run, (found[0] if found else None)


def answer(*outcomes: RetireOutcome, error: str | None = None) -> RetirementReported:
    return RetirementReported(URI, outcomes, error)


def copying(name: str, verified: int, **changes: object) -> RetireOutcome:
    state = RetireProgress(name, verified=verified, digest=f"d{verified}")
    return dataclasses.replace(RetireOutcome(name, state, progressed=True), **changes)


@pytest.mark.claim("objects an earlier pass proved are not charged again, and the next pass continues")
def test_retirement_records_each_pass_and_the_next_pass_continues_from_it() -> None:
    run, action = tick(training_run(KEEP1), view(100, 900))
    assert action is not None and action.names == ("checkpoint-100",) and action.progress == ()
    upload = ("optimizer.pt", "upload-1", '"etag"')
    cut = copying(
        "checkpoint-100",
        1_024,
        state=RetireProgress("checkpoint-100", verified=1_024, upload=upload, parts=3),
    )
    d = step(run, answer(cut), NOW + 1)
    (recorded,) = d.run.retire_progress
    assert (recorded.verified, recorded.upload, recorded.parts) == (1_024, upload, 3)
    assert any("1,024 objects proven copied, 3 parts of optimizer.pt copied" in n for n in d.notes)
    # the next pass is given what this one proved: it continues instead of proving it again
    _, again = tick(d.run, view(900, extra=("checkpoint-100",)), NOW + HOUR)
    assert again is not None and again.progress == (recorded,)
    # done: the progress goes, and the next look at the prefix forgets the name
    done = step(d.run, answer(copying("checkpoint-100", 2_048, done=True)), NOW + 2)
    assert done.run.retire_progress == () and done.run.retiring == ("checkpoint-100",)
    after, none = tick(done.run, view(900), NOW + HOUR)
    assert none is None and after.retiring == ()


@pytest.mark.claim("A directory that cannot finish is shown, not retried for ever.")
def test_retirement_a_directory_no_pass_can_advance_is_shown_and_no_longer_tried() -> None:
    run, _ = tick(training_run(KEEP1), view(100, 200, 900))
    blocked = RetireOutcome(
        "checkpoint-100",
        RetireProgress("checkpoint-100"),
        blocked="listing s3://bucket/ckpt/checkpoint-100/ (1,000+ objects) takes longer than a pass (15 s)",
    )
    for n in range(1, STUCK_AFTER_PASSES):
        run = step(run, answer(blocked), NOW + n).run
        assert run.retire_progress[0].stalled == n and run.retire_stuck == ()
    d = step(run, answer(blocked), NOW + STUCK_AFTER_PASSES)
    assert d.run.retire_stuck == (("checkpoint-100", blocked.blocked, NOW + STUCK_AFTER_PASSES),)
    assert "checkpoint-100" not in d.run.retiring
    assert any("checkpoint-100 cannot be retired: listing" in n for n in d.notes)  # the audit says why
    # it is not chosen again: the directory behind it is
    _, action = tick(d.run, view(100, 200, 900), NOW + HOUR)
    assert action is not None and "checkpoint-100" not in action.names and "checkpoint-200" in action.names
    # once the synced prefix no longer holds it (moved by hand), the run forgets it
    gone = step(d.run, Tick(), NOW + 2 * HOUR, Observations(checkpoint=ckpt(900, NOW), retention=view(900)))
    assert gone.run.retire_stuck == ()


@pytest.mark.claim("A directory that cannot finish is shown, not retried for ever.")
def test_retirement_transient_errors_and_progress_never_count_against_a_directory() -> None:
    run, _ = tick(training_run(KEEP1), view(100, 900))
    throttled = RetireOutcome("checkpoint-100", RetireProgress("checkpoint-100", verified=5))  # blocked=None
    for n in range(STUCK_AFTER_PASSES + 2):
        run = step(run, answer(throttled, error="cannot copy ...: SlowDown"), NOW + n).run
    assert run.retire_stuck == () and run.retire_progress[0].stalled == 0
    # a blocked pass, then one that advanced: the count starts again
    blocked = dataclasses.replace(throttled, blocked="AccessDenied")
    run = step(run, answer(blocked), NOW + 10).run
    run = step(run, answer(copying("checkpoint-100", 6)), NOW + 11).run
    assert run.retire_progress[0].stalled == 0


def test_retirement_ignores_reports_it_cannot_place() -> None:
    run, _ = tick(training_run(KEEP1), view(100, 900))
    stranger = RetirementReported("s3://other/prefix/", (copying("checkpoint-100", 3),))
    assert step(run, stranger, NOW + 1).ignored is not None
    assert step(run, answer(copying("checkpoint-555", 3)), NOW + 1).ignored is not None  # not retiring
    finished = dataclasses.replace(run, status=RunStatus.SUCCEEDED)
    assert step(finished, answer(copying("checkpoint-100", 3)), NOW + 1).ignored is not None


def test_retirement_remembers_a_bounded_number_of_directories_it_cannot_retire() -> None:
    run = training_run(KEEP1)
    names = tuple(f"checkpoint-{s}" for s in range(100, 100 + 100 * (MAX_STUCK + 4), 100))
    run = dataclasses.replace(run, retire_stuck=tuple((n, "AccessDenied", 0) for n in names[:-1]))
    run = dataclasses.replace(run, retiring=(names[-1],))
    stuck = RetireOutcome(
        names[-1], RetireProgress(names[-1], stalled=STUCK_AFTER_PASSES), blocked="AccessDenied"
    )
    run = dataclasses.replace(
        run, retire_progress=(RetireProgress(names[-1], stalled=STUCK_AFTER_PASSES - 1),)
    )
    d = step(run, answer(stuck), NOW)
    assert len(d.run.retire_stuck) == MAX_STUCK and d.run.retire_stuck[-1][0] == names[-1]


# --- versioned buckets (issue 32 item 6) -----------------------------------------------------------


def rule(prefix: str | None, *, enabled: bool = True, noncurrent: bool = True) -> LifecycleRule:
    return LifecycleRule(prefix, enabled, noncurrent)


@pytest.mark.parametrize(
    ("status", "rules", "warned"),
    [
        (None, (), False),
        ("Enabled", (), True),
        ("Suspended", (), True),
        ("Enabled", (rule("runs/"),), False),
        ("Enabled", (rule(""),), False),
        ("Enabled", (rule("other/"),), True),
        ("Enabled", (rule("runs/", enabled=False),), True),
        ("Enabled", (rule("runs/", noncurrent=False),), True),
        ("Enabled", (rule(None),), True),
    ],
    ids=[
        "never versioned: deletes free storage",
        "versioned, no lifecycle rule",
        "suspended: versions written while enabled stay",
        "a noncurrent-version rule covering the prefix",
        "a noncurrent-version rule for the whole bucket",
        "a rule for another prefix",
        "a disabled rule",
        "a rule that expires only current versions",
        "a rule that also filters on tags or sizes may miss checkpoint objects",
    ],
)
def test_retirement_warns_when_retention_can_free_no_storage(
    status: str | None, rules: tuple[LifecycleRule, ...], warned: bool
) -> None:
    text = versioning_warning("s3://ckpt-bucket/runs/llama/", BucketVersioning("ckpt-bucket", status, rules))
    assert (text is not None) == warned
    if text is not None:
        assert "noncurrent" in text and "s3://ckpt-bucket/runs/llama/" in text
