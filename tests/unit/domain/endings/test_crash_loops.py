"""A crash loop is the same failure again before progress; independent faults that each land
before an attempt's first checkpoint are not one (domain/endings/loops.py)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from sagewarden.adapters.run_codec import compact_json, run_from_dict, run_to_dict
from sagewarden.domain.endings.attempt_ended import LOG_SETTLE_MS
from sagewarden.domain.endings.loops import (
    SIGNATURE_MAX_CHARS,
    checkpoint_overdue,
    ending_signature,
    step_marks,
)
from sagewarden.domain.vocabulary.actions import Notify
from sagewarden.domain.vocabulary.classifier.models import Classification, EndingClass
from sagewarden.domain.vocabulary.events import LaunchAccepted, Observations
from sagewarden.domain.vocabulary.models import RunStatus
from sagewarden.domain.vocabulary.policy import RunPolicy
from tests.builders import HOUR, MIN, ckpt, observed, on_pool, step, training_run

INTERNAL = "InternalServerError: We encountered an internal error.  Please try again."
HARDWARE = "ClientError: Please reach out to AWS support: an unhealthy instance was detected (algo-{n})"
UNKNOWN = 'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage "{msg}"'


def _fail_and_relaunch(run, reason, t, trained_min=20):
    """Attempt `run.current` fails with `reason` at `t` (no checkpoint newer than step 100);
    if the run resumes, its next attempt is accepted and in Training `trained_min` before the
    next failure."""
    seen = t + LOG_SETTLE_MS  # observed once its last log lines have had time to land
    d = step(run, observed(run, "Failed", "Failed", t, reason), seen, Observations(checkpoint=ckpt(100)))
    run = on_pool(d, seen).run  # an ending that keeps a warm pool: the resume waits for it
    if run.status.terminal:
        return run, t
    run = step(run, LaunchAccepted(run.current.number), seen + 1).run
    start = t + 10 * MIN
    run = step(run, observed(run, "InProgress", "Training", start), start).run
    return run, start + trained_min * MIN


@pytest.mark.claim("Any other ending without progress starts the streak again at 1")
@pytest.mark.claim(
    "at 16x the Llama 3 fault rate the old rule, which counted every ending without progress, paged the person 29 times in one benchmark run"
)
def test_different_failures_before_the_first_checkpoint_are_not_a_loop():
    run = training_run(RunPolicy(max_no_progress_restarts=3), resume=ckpt(100))
    t = 2 * HOUR
    reasons = [
        INTERNAL,
        HARDWARE.format(n=3),
        UNKNOWN.format(msg="Segmentation fault (core dumped)"),
        INTERNAL,
        UNKNOWN.format(msg="loss is NaN at step 123, refusing to continue"),
        HARDWARE.format(n=7),
    ]
    for reason in reasons:
        run, t = _fail_and_relaunch(run, reason, t)
        assert not run.status.terminal, (reason, run.outcome)
        assert run.no_progress_streak == 1
    assert run.restarts == len(reasons)


@pytest.mark.claim(
    "`max_no_progress_restarts` consecutive endings without a newer checkpoint *that are repeats* make the run FAILED"
)
def test_the_same_failure_three_times_without_progress_is_a_loop_whatever_its_numbers():
    run = training_run(RunPolicy(max_no_progress_restarts=3), resume=ckpt(100))
    t = 2 * HOUR
    streaks = []
    for n in (3, 17, 250):  # another host each time: the same failure
        run, t = _fail_and_relaunch(run, HARDWARE.format(n=n), t)
        streaks.append(run.no_progress_streak if not run.status.terminal else "FAILED")
    assert streaks == [1, 2, "FAILED"]
    assert run.status == RunStatus.FAILED and "crash loop: 3 consecutive" in (run.outcome or "")


@pytest.mark.claim("Any other ending without progress starts the streak again at 1")
def test_a_different_failure_restarts_the_streak():
    run = training_run(RunPolicy(max_no_progress_restarts=3), resume=ckpt(100))
    t = 2 * HOUR
    for reason in (INTERNAL, INTERNAL, HARDWARE.format(n=1), INTERNAL, INTERNAL):
        run, t = _fail_and_relaunch(run, reason, t)
    assert not run.status.terminal and run.no_progress_streak == 2
    run, t = _fail_and_relaunch(run, INTERNAL, t)
    assert run.status == RunStatus.FAILED


def test_progress_resets_the_streak_and_the_signature():
    run = training_run(RunPolicy(max_no_progress_restarts=2), resume=ckpt(100))
    run, t = _fail_and_relaunch(run, INTERNAL, 2 * HOUR)
    assert run.no_progress_streak == 1 and run.no_progress_signature
    d = step(run, observed(run, "Failed", "Failed", t, INTERNAL), t, Observations(checkpoint=ckpt(300)))
    assert d.run.status == RunStatus.STARTING
    assert d.run.no_progress_streak == 0 and d.run.no_progress_signature is None


@pytest.mark.claim(
    "A repeat fails the same way as the ending before it (the same class, reason and evidence once step numbers, ranks, host indices, ids and addresses are taken out), or comes from an attempt that trained for more than twice the run's observed checkpoint interval without saving one."
)
def test_attempts_that_train_past_a_due_checkpoint_count_whatever_ends_them():
    # the run saw checkpoints 30 minutes apart; these attempts train 90 minutes and save none
    history = ((100, 0, 60.0, 50), (150, 30 * MIN, 60.0, 100))
    run = dataclasses.replace(
        training_run(RunPolicy(max_no_progress_restarts=3), resume=ckpt(100)), checkpoint_history=history
    )
    t = 2 * HOUR
    outcomes = []
    for reason in (INTERNAL, HARDWARE.format(n=2), UNKNOWN.format(msg="Segmentation fault")):
        run, t = _fail_and_relaunch(run, reason, t, trained_min=90)
        outcomes.append(run.status)
    assert outcomes[:2] == [RunStatus.TRAINING, RunStatus.TRAINING]
    assert outcomes[2] == RunStatus.FAILED and "crash loop: 3 consecutive" in (run.outcome or "")


@pytest.mark.claim(
    "A repeat fails the same way as the ending before it (the same class, reason and evidence once step numbers, ranks, host indices, ids and addresses are taken out), or comes from an attempt that trained for more than twice the run's observed checkpoint interval without saving one."
)
def test_checkpoint_overdue_needs_an_observed_interval_and_a_long_attempt():
    run = training_run(resume=ckpt(100))
    cur = dataclasses.replace(run.current, ended_ms=run.current.training_started_ms + 5 * HOUR)
    assert not checkpoint_overdue(run, cur)  # no interval observed yet
    run = dataclasses.replace(run, checkpoint_history=((100, 0, 60.0, 50), (150, 30 * MIN, 60.0, 100)))
    assert checkpoint_overdue(run, cur)
    short = dataclasses.replace(cur, ended_ms=cur.training_started_ms + 50 * MIN)
    assert not checkpoint_overdue(run, short)
    never_trained = dataclasses.replace(cur, training_started_ms=None)
    assert not checkpoint_overdue(run, never_trained)


@pytest.mark.claim(
    "A repeat fails the same way as the ending before it (the same class, reason and evidence once step numbers, ranks, host indices, ids and addresses are taken out), or comes from an attempt that trained for more than twice the run's observed checkpoint interval without saving one."
)
def test_signature_takes_out_numbers_and_is_bounded():
    a = Classification(EndingClass.UNKNOWN, "x", ("rank 3 at 0x7f3a: step 1200 loss 2.31",))
    b = Classification(EndingClass.UNKNOWN, "x", ("rank 12 at 0x10: step 99 loss 7.5",))
    c = Classification(EndingClass.UNKNOWN, "x", ("loss is NaN",))
    assert ending_signature(a, "UNKNOWN") == ending_signature(b, "UNKNOWN")
    assert ending_signature(a, "UNKNOWN") != ending_signature(c, "UNKNOWN")
    assert ending_signature(a, "UNKNOWN") != ending_signature(a, "HANG")
    uuid_a = Classification(
        EndingClass.UNKNOWN, "x", ("NCCL error: unique id 3f9a2c1e-8b7d-4e21-9c0f-a1b2c3d4e5f6",)
    )
    uuid_b = Classification(
        EndingClass.UNKNOWN, "x", ("NCCL error: unique id 0d1e2f3a-4b5c-4d6e-8f70-112233445566",)
    )
    assert ending_signature(uuid_a, "UNKNOWN") == ending_signature(uuid_b, "UNKNOWN")
    tmp_a = Classification(EndingClass.UNKNOWN, "x", ("cannot open /tmp/tmpk3x9q2zl/shard.bin",))
    tmp_b = Classification(EndingClass.UNKNOWN, "x", ("cannot open /tmp/tmpw7pj4m0c/shard.bin",))
    assert ending_signature(tmp_a, "UNKNOWN") == ending_signature(tmp_b, "UNKNOWN")
    words = Classification(EndingClass.UNKNOWN, "x", ("deadbeef faded facade",))  # hex letters, no digit
    assert "deadbeef faded facade" in ending_signature(words, "UNKNOWN")
    huge = Classification(EndingClass.UNKNOWN, "y" * 10_000, ("z" * 10_000,))
    assert len(ending_signature(huge, "UNKNOWN")) == SIGNATURE_MAX_CHARS


# --- a deterministic failure costs at most one confirming restart (loops.repeats_previous) --------


def _fail(run, reason, t, checkpoint, tail=()):
    """Attempt `run.current` fails with `reason` at `t`, the newest checkpoint `checkpoint`."""
    seen = t + LOG_SETTLE_MS
    d = step(
        run,
        observed(run, "Failed", "Failed", t, reason),
        seen,
        Observations(checkpoint=checkpoint, log_tail=tail),
    )
    return on_pool(d, seen)


def _relaunch(run, t):
    run = step(run, LaunchAccepted(run.current.number), t + 1).run
    start = t + 10 * MIN
    return step(run, observed(run, "InProgress", "Training", start), start).run, start + 20 * MIN


SEGV = UNKNOWN.format(msg="Segmentation fault (core dumped)")


@pytest.mark.claim("A deterministic failure costs at most one confirming restart")
def test_the_same_unexplained_crash_after_a_resume_from_the_checkpoint_it_left_stops_the_run():
    run = training_run(RunPolicy(max_no_progress_restarts=3))  # a fresh start that saves step 100
    d = _fail(run, SEGV, 2 * HOUR, ckpt(100))
    assert d.run.status == RunStatus.STARTING and d.run.last_ending.step == 100
    run, t = _relaunch(d.run, 2 * HOUR + LOG_SETTLE_MS)
    assert run.current.resume_from.step == 100
    d = _fail(run, SEGV, t, ckpt(100))  # the same crash before the next checkpoint
    assert d.run.status == RunStatus.FAILED and d.run.restarts == 1
    assert "deterministic failure: attempt 2 ended as attempt 1 did" in (d.run.outcome or "")
    (alert,) = [a for a in d.actions if isinstance(a, Notify)]
    assert alert.body.count("Segmentation fault") >= 2  # both attempts' lines


def test_the_same_failure_at_another_step_is_no_loop():
    nan = "RuntimeError: loss is NaN at step {n} (found inf in gradients)"
    run = training_run(RunPolicy(max_no_progress_restarts=3))
    d = _fail(run, UNKNOWN.format(msg="x"), 2 * HOUR, ckpt(100), tail=(nan.format(n=120),))
    run, t = _relaunch(d.run, 2 * HOUR + LOG_SETTLE_MS)
    d = _fail(run, UNKNOWN.format(msg="x"), t, ckpt(100), tail=(nan.format(n=140),))
    assert not d.run.status.terminal, d.run.outcome
    run, t = _relaunch(d.run, t + LOG_SETTLE_MS)
    d = _fail(run, UNKNOWN.format(msg="x"), t, ckpt(100), tail=(nan.format(n=140),))
    assert d.run.status == RunStatus.FAILED and "deterministic failure: attempt 3" in (d.run.outcome or "")


def test_progress_between_two_identical_crashes_is_no_loop():
    run = training_run(RunPolicy(max_no_progress_restarts=3))
    d = _fail(run, SEGV, 2 * HOUR, ckpt(100))
    run, t = _relaunch(d.run, 2 * HOUR + LOG_SETTLE_MS)
    d = _fail(run, SEGV, t, ckpt(200))  # it saved step 200 before crashing the same way
    assert d.run.status == RunStatus.STARTING


def test_a_crash_that_points_at_hardware_is_never_a_loop_of_the_code():
    xid = ("[algo-2] NVRM: Xid (PCI:0000:10:1c): 79, GPU has fallen off the bus.",)
    run = training_run(RunPolicy(max_no_progress_restarts=3))
    d = _fail(run, SEGV, 2 * HOUR, ckpt(100), tail=xid)
    assert d.run.last_ending.singled_out
    run, t = _relaunch(d.run, 2 * HOUR + LOG_SETTLE_MS)
    d = _fail(run, SEGV, t, ckpt(100), tail=xid)
    assert not d.run.status.terminal


def test_transient_faults_that_repeat_keep_the_streak_rule():
    run = training_run(RunPolicy(max_no_progress_restarts=3))
    d = _fail(run, INTERNAL, 2 * HOUR, ckpt(100))
    run, t = _relaunch(d.run, 2 * HOUR + LOG_SETTLE_MS)
    d = _fail(run, INTERNAL, t, ckpt(100))
    assert not d.run.status.terminal and d.run.no_progress_streak == 1


def test_the_previous_ending_survives_the_stored_form():
    run = training_run()
    d = _fail(run, SEGV, 2 * HOUR, ckpt(100))
    assert d.run.last_ending is not None
    back = run_from_dict(json.loads(compact_json(run_to_dict(d.run))))
    assert back.last_ending == d.run.last_ending
    old = run_to_dict(d.run)
    del old["last_ending"]  # an item stored before the field existed
    assert run_from_dict(old).last_ending is None


def test_step_marks_read_the_step_a_line_prints():
    cls = Classification(
        EndingClass.UNKNOWN,
        "x",
        ("FloatingPointError: Loss became infinite or NaN at iteration=166!", "Epoch 5/5", "pid 4242"),
    )
    assert step_marks(cls) == "epoch=5,iteration=166"
    assert step_marks(Classification(EndingClass.UNKNOWN, "x", ("Killed",))) == ""
