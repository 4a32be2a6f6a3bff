"""Policy apply_checkpoint_advice: every new attempt is told the Young/Daly checkpoint interval
(SAGEWARDEN_CHECKPOINT_MINUTES) once a checkpoint's write time was measured; a script that follows
the contract checkpoints at it (the simulated one does: tests/drill/sim/test_told_interval.py)."""

from __future__ import annotations

import dataclasses

from sagewarden.api.validation import SUPERVISOR_ENV_VARS, policy_errors
from sagewarden.domain.vocabulary.actions import LaunchAttempt
from sagewarden.domain.vocabulary.advice import (
    APPLY_MAX_MINUTES,
    APPLY_MIN_MINUTES,
    advised_minutes,
    checkpoint_advice,
)
from sagewarden.domain.vocabulary.events import Observations
from sagewarden.domain.vocabulary.launch import CHECKPOINT_MINUTES_ENV
from sagewarden.domain.vocabulary.policy import RunPolicy
from tests.builders import HOUR, MIN, ckpt, observed, step, training_run

CRASH = "InternalServerError: the instance went away"


def _with_history(run, write_s: float = 120.0):
    t0 = run.current.training_started_ms
    history = tuple(
        (300 * i, t0 + 30 * i * MIN, write_s, 300 * (i - 1) if i > 1 else -1) for i in range(1, 5)
    )
    return dataclasses.replace(run, checkpoint_history=history)


def _relaunch(run):
    at = run.current.training_started_ms + 3 * HOUR
    d = step(
        run, observed(run, "Failed", "Failed", at, CRASH), at, Observations(checkpoint=ckpt(1200, at - MIN))
    )
    (launch,) = [a for a in d.actions if isinstance(a, LaunchAttempt)]
    return d, launch


def test_a_new_attempt_is_told_the_advised_interval_when_the_policy_asks():
    run = _with_history(training_run(RunPolicy(keep_alive_seconds=0, apply_checkpoint_advice=True)))
    advice = checkpoint_advice(run, run.current.training_started_ms + 3 * HOUR)
    d, launch = _relaunch(run)
    told = launch.request["Environment"][CHECKPOINT_MINUTES_ENV]
    assert advice is not None and advice.optimal_min is not None
    assert int(told) == d.run.current.checkpoint_minutes
    # the fault just met counts: half the MTBF, 1/sqrt(2) of the interval advised before it
    assert abs(int(told) - advice.optimal_min / 2**0.5) <= 1
    assert APPLY_MIN_MINUTES <= int(told) <= APPLY_MAX_MINUTES


def test_nothing_is_told_without_the_policy_or_before_a_write_time_was_measured():
    d, launch = _relaunch(_with_history(training_run(RunPolicy(keep_alive_seconds=0))))
    assert CHECKPOINT_MINUTES_ENV not in launch.request["Environment"]
    d, launch = _relaunch(training_run(RunPolicy(keep_alive_seconds=0, apply_checkpoint_advice=True)))
    assert CHECKPOINT_MINUTES_ENV not in launch.request["Environment"]  # no write time yet
    assert d.run.current.checkpoint_minutes is None


def test_the_told_interval_is_bounded():
    run = training_run(RunPolicy(apply_checkpoint_advice=True))
    assert (
        advised_minutes(_with_history(run, write_s=0.001), run.current.training_started_ms)
        == APPLY_MIN_MINUTES
    )
    assert (
        advised_minutes(_with_history(run, write_s=86_400.0), run.current.training_started_ms)
        == APPLY_MAX_MINUTES
    )


def test_the_variable_counts_against_sagemakers_environment_limit_only_with_the_policy():
    job = {**training_run().request}
    job["Environment"] = {f"V{i}": "x" for i in range(100 - SUPERVISOR_ENV_VARS)}  # exactly at the limit
    assert not [e for e in policy_errors(RunPolicy(), job) if e.field == "training_job.Environment"]
    (err,) = [
        e
        for e in policy_errors(RunPolicy(apply_checkpoint_advice=True), job)
        if e.field == "training_job.Environment"
    ]
    assert "would have 101 variables" in err.message
