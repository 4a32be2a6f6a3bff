"""A crash loop is the same failure again before progress; independent faults that each land
before an attempt's first checkpoint are not one (domain/loops.py)."""

from __future__ import annotations

import dataclasses

from sagewarden.domain.classifier import Classification, EndingClass
from sagewarden.domain.endings import LOG_SETTLE_MS
from sagewarden.domain.events import LaunchAccepted, Observations
from sagewarden.domain.loops import SIGNATURE_MAX_CHARS, checkpoint_overdue, ending_signature
from sagewarden.domain.models import RunStatus
from sagewarden.domain.policy import RunPolicy
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


def test_the_same_failure_three_times_without_progress_is_a_loop_whatever_its_numbers():
    run = training_run(RunPolicy(max_no_progress_restarts=3), resume=ckpt(100))
    t = 2 * HOUR
    streaks = []
    for n in (3, 17, 250):  # another host each time: the same failure
        run, t = _fail_and_relaunch(run, HARDWARE.format(n=n), t)
        streaks.append(run.no_progress_streak if not run.status.terminal else "FAILED")
    assert streaks == [1, 2, "FAILED"]
    assert run.status == RunStatus.FAILED and "crash loop: 3 consecutive" in (run.outcome or "")


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
    assert outcomes[2] == RunStatus.FAILED and "3 attempts in a row" in (run.outcome or "")


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
