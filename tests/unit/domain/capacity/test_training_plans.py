"""Supervising a run across the windows of its SageMaker Training Plan (domain/capacity/training_plans.py):
the stop before a window's end, a window's end that is never a failure, the resume at the next
window, the short-plan alert, the fallback after the last window."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from sagewarden.domain.capacity.training_plans import plan_due_ms
from sagewarden.domain.due import next_due_ms
from sagewarden.domain.vocabulary.actions import LaunchAttempt, Notify, StopJob
from sagewarden.domain.vocabulary.events import CancelRequested, LaunchAccepted, Observations, Submitted, Tick
from sagewarden.domain.vocabulary.layouts import Checkpoint
from sagewarden.domain.vocabulary.models import Run, RunStatus
from sagewarden.domain.vocabulary.plan_windows import PlanView, stop_deadline_ms
from sagewarden.domain.vocabulary.policy import RunPolicy
from sagewarden.domain.vocabulary.reasons import StopIntent
from tests.builders import HOUR, MIN, REQUEST, make_run, observed, step

ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/reserved-p4d"
W1, W2 = (0, 10 * HOUR), (16 * HOUR, 24 * HOUR)
DEADLINE = stop_deadline_ms(W1)  # 9 h 27 min: termination (9 h 30) - 120 s - 60 s
TERMINATED = "InternalServerError: Instance algo-1 was terminated (reserved capacity ended)."
POLICY = RunPolicy(keep_alive_seconds=0)


def plan(*windows: tuple[int, int], status: str = "Active") -> PlanView:
    return PlanView(ARN, status, tuple(windows), "ml.p4d.24xlarge", 2)


def plan_request() -> dict[str, Any]:
    request = copy.deepcopy(REQUEST)
    request["ResourceConfig"]["TrainingPlanArn"] = ARN
    return request


def submitted(
    policy: RunPolicy = POLICY, at: int = 0, windows: tuple[tuple[int, int], ...] = (W1, W2)
) -> Run:
    run = make_run(policy, request=plan_request(), created_ms=at)
    return step(run, Submitted(), at, Observations(plan=plan(*windows))).run


def training(policy: RunPolicy = POLICY, windows: tuple[tuple[int, int], ...] = (W1, W2)) -> Run:
    run = submitted(policy, windows=windows)
    run = step(run, LaunchAccepted(1), 1).run
    return step(run, observed(run, "InProgress", "Training", 10 * MIN), 10 * MIN).run


def ckpt(n: int, at: int) -> Checkpoint:
    return Checkpoint(f"s3://bucket/ckpt/checkpoint-{n}/", n, "hf", at, 60.0, n - 60 if n > 60 else None)


def saves(run: Run, *minutes: int) -> Run:
    """The sweep sees checkpoints completing at these minutes (every 30 min: 60 steps)."""
    for m in minutes:
        run = step(run, Tick(), m * MIN + 1, Observations(checkpoint=ckpt(2 * (m - 10), m * MIN))).run
    return run


def stops(d: Any) -> list[StopJob]:
    return [a for a in d.actions if isinstance(a, StopJob)]


def alerts(d: Any, event: str) -> list[Notify]:
    return [a for a in d.actions if isinstance(a, Notify) and a.event == event]


def launch(d: Any) -> LaunchAttempt:
    return next(a for a in d.actions if isinstance(a, LaunchAttempt))


# --- stopping in good time ---------------------------------------------------------------------


@pytest.mark.claim("stops the attempt (intent `window_end`) once that checkpoint is in S3")
def test_training_plan_stop_comes_right_after_the_last_checkpoint_before_termination():
    run = saves(training(), 40, 70)
    last = 550 * MIN  # 10 + 30 k <= 567 min: the last completion before the stop deadline
    assert plan_due_ms(run, 71 * MIN) == last + 30_000
    assert next_due_ms(run, 71 * MIN) <= last + 30_000
    run = saves(run, 520)
    early = step(run, Tick(), last + 30_000, Observations(checkpoint=ckpt(1020, 520 * MIN)))
    assert stops(early) == []  # the checkpoint at 550 min is not seen yet: wait for it
    assert plan_due_ms(early.run, last + 30_000) == last + 60_000  # ... looking every 30 s
    d = step(run, Tick(), last + 30_000, Observations(checkpoint=ckpt(1080, last)))
    assert stops(d) == [StopJob(run.current.job_name, StopIntent.WINDOW_END)]
    assert d.run.status == RunStatus.STOPPING


@pytest.mark.claim(
    "The stop is never later than termination − 120 s (SIGTERM to SIGKILL) − 60 s, checkpoint or not"
)
def test_training_plan_stops_at_the_deadline_without_a_checkpoint_cadence():
    run = training()
    assert plan_due_ms(run, 20 * MIN) == DEADLINE
    assert stops(step(run, Tick(), DEADLINE - 1_000)) == []
    d = step(run, Tick(), DEADLINE)
    assert stops(d) == [StopJob(run.current.job_name, StopIntent.WINDOW_END)]
    assert W1[1] - 30 * MIN - 120_000 - 60_000 == DEADLINE  # SIGTERM's 120 s end before termination


@pytest.mark.claim(
    "The stop is never later than termination − 120 s (SIGTERM to SIGKILL) − 60 s, checkpoint or not"
)
def test_training_plan_a_late_last_checkpoint_never_pushes_the_stop_past_the_deadline():
    run = saves(training(), 40, 70, 520)
    assert stops(step(run, Tick(), DEADLINE - 1_000)) == []
    assert stops(step(run, Tick(), DEADLINE))  # the 550-min checkpoint never came: stop anyway


# --- a window's end is not a failure ------------------------------------------------------------


def stopped_at_window_end(run: Run) -> Any:
    d = step(run, Tick(), 550 * MIN + 30_000, Observations(checkpoint=ckpt(1080, 550 * MIN)))
    run = d.run
    end = 552 * MIN
    return step(run, observed(run, "Stopped", "Stopped", end), end, Observations(checkpoint=ckpt(1084, end)))


@pytest.mark.claim(
    "is class `WINDOW_END`: no restart counted, no crash-loop streak, an info alert `run.waiting_for_window`"
)
@pytest.mark.claim("launches 5 minutes before the next window opens")
def test_training_plan_window_end_waits_for_the_next_window_without_counting_a_restart():
    run = saves(training(), 40, 70, 520)
    d = stopped_at_window_end(run)
    assert d.run.current.end_class == "WINDOW_END"
    assert d.run.status == RunStatus.RETRY_WAIT and d.run.wait_reason == "window"
    assert d.run.wake_at_ms == W2[0] - 5 * MIN
    assert d.run.restarts == 0 and d.run.no_progress_streak == 0
    assert [a.severity for a in alerts(d, "run.waiting_for_window")] == ["info"]
    assert not any(isinstance(a, LaunchAttempt) for a in d.actions)
    assert step(d.run, Tick(), W2[0] - 6 * MIN).ignored is not None  # not yet
    woke = step(d.run, Tick(), W2[0] - 5 * MIN, Observations(checkpoint=ckpt(1084, 552 * MIN)))
    nxt = launch(woke)
    assert nxt.request["ResourceConfig"]["TrainingPlanArn"] == ARN
    assert nxt.request["Environment"]["SAGEWARDEN_RESUME_STEP"] == "1084"
    assert woke.run.restarts == 0


@pytest.mark.claim(
    "is class `WINDOW_END`: no restart counted, no crash-loop streak, an info alert `run.waiting_for_window`"
)
def test_training_plan_termination_in_the_last_30_minutes_is_the_windows_end_not_a_crash():
    run = training()
    at = W1[1] - 30 * MIN + 5_000
    d = step(
        run,
        observed(run, "Failed", "Failed", at, TERMINATED),
        at,
        Observations(checkpoint=ckpt(1080, at - HOUR)),
    )
    assert d.run.current.end_class == "WINDOW_END"
    assert d.run.restarts == 0 and d.run.restarts_by_class == {}
    assert d.run.status == RunStatus.RETRY_WAIT and d.run.wait_reason == "window"


def test_training_plan_a_retry_strategy_retry_of_the_windows_end_is_stopped_and_resumed_next_window():
    """Issue 32 item 15: AWS does not say that a window's end skips the job's own RetryStrategy.
    The unkind reading: SageMaker retries the InternalServerError within the same job, which goes
    back to Starting and would wait Pending for the next window, outside the window handling (no
    ending, the wait counted on the wall clock). It is stopped (intent window_end), and its
    ending is the window's end, not a crash."""
    run = training()
    at = W1[1] - 30 * MIN + 5_000
    d = step(run, observed(run, "InProgress", "Starting", at), at)
    assert stops(d) == [StopJob(run.current.job_name, StopIntent.WINDOW_END)]
    assert d.run.status == RunStatus.STOPPING and not any(isinstance(a, LaunchAttempt) for a in d.actions)
    later = step(d.run, observed(d.run, "InProgress", "Pending", at + 30_000), at + 30_000)
    assert stops(later) == [] and later.run.status == RunStatus.STOPPING  # the stop is under way
    end = at + 2 * MIN
    done = step(
        d.run, observed(d.run, "Stopped", "Stopped", end), end, Observations(checkpoint=ckpt(1080, at - HOUR))
    )
    assert done.run.attempts[0].end_class == "WINDOW_END" and done.run.restarts == 0
    assert done.run.status == RunStatus.RETRY_WAIT and done.run.wait_reason == "window"
    # a retry of an internal error earlier in the window provisions inside it: left to SageMaker
    mid = step(run, observed(run, "InProgress", "Starting", 5 * HOUR), 5 * HOUR)
    assert stops(mid) == [] and mid.run.status == RunStatus.TRAINING


@pytest.mark.claim("The same `Failed` ending outside those 30 minutes is a crash, counted.")
def test_training_plan_the_same_failure_mid_window_is_a_counted_crash():
    run = training()
    at = 5 * HOUR
    d = step(
        run,
        observed(run, "Failed", "Failed", at, TERMINATED),
        at,
        Observations(checkpoint=ckpt(580, at - MIN)),
    )
    assert d.run.attempts[0].end_class == "INFRASTRUCTURE"
    assert d.run.restarts == 1
    assert launch(d).request["ResourceConfig"]["TrainingPlanArn"] == ARN  # resumed in the same window


@pytest.mark.claim("A cancel wins over a pending resume.")
def test_training_plan_cancel_wins_over_the_pending_window_resume():
    d = stopped_at_window_end(saves(training(), 40, 70, 520))
    cancelled = step(d.run, CancelRequested("alice"), 12 * HOUR)
    assert cancelled.run.status == RunStatus.CANCELLED
    later = step(cancelled.run, Tick(), W2[0])
    assert not any(isinstance(a, LaunchAttempt) for a in later.actions)


# --- launching into windows ------------------------------------------------------------------------


@pytest.mark.claim("launches 5 minutes before the next window opens")
def test_training_plan_first_launch_waits_until_five_minutes_before_the_first_window():
    run = submitted(windows=((2 * HOUR, 12 * HOUR),))
    assert run.status == RunStatus.RETRY_WAIT and run.wake_at_ms == 2 * HOUR - 5 * MIN
    assert run.current is None
    d = step(run, Tick(), 2 * HOUR - 5 * MIN)
    assert launch(d).request["ResourceConfig"]["TrainingPlanArn"] == ARN


@pytest.mark.claim("a plan it cannot read is *unknown*: the windows last read stay in force")
def test_training_plan_unread_plan_launches_at_once_and_is_never_taken_as_exhausted():
    run = make_run(POLICY, request=plan_request())
    d = step(run, Submitted(), 0, Observations(plan_error="AccessDeniedException: not authorized"))
    assert d.run.plan_error and d.run.plan_read_ms is None
    assert launch(d).request["ResourceConfig"]["TrainingPlanArn"] == ARN  # SageMaker keeps it Pending
    # a failed refresh keeps the windows last read: unknown is never "no windows"
    known = training()
    again = step(known, Tick(), 2 * HOUR, Observations(plan_error="ThrottlingException"))
    assert again.run.plan_windows == (W1, W2) and again.run.plan_error == "ThrottlingException"


def ended_in_last_window(policy: RunPolicy) -> Any:
    run = training(policy, windows=(W1,))
    at = W1[1] - 30 * MIN
    return step(
        run,
        observed(run, "Failed", "Failed", at, TERMINATED),
        at,
        Observations(checkpoint=ckpt(1080, at - HOUR)),
    )


@pytest.mark.claim("the run ends `FAILED`, saying the plan has no window left")
def test_training_plan_after_the_last_window_fails_clearly_without_a_fallback():
    d = ended_in_last_window(POLICY)
    assert d.run.status == RunStatus.FAILED
    assert "no window left" in (d.run.outcome or "") and "on_demand" in (d.run.outcome or "")
    assert d.run.restarts == 0


def test_training_plan_after_the_last_window_continues_on_demand_when_allowed():
    d = ended_in_last_window(dataclasses.replace(POLICY, training_plan_fallback="on_demand"))
    assert d.run.plan_off
    req = launch(d).request
    assert "TrainingPlanArn" not in req["ResourceConfig"]
    assert req["ResourceConfig"]["InstanceType"] == "ml.p4d.24xlarge"
    assert alerts(d, "run.plan_fallback")


# --- is the plan long enough? ------------------------------------------------------------------------


@pytest.mark.claim("a warning `run.plan_short`, once per window")
def test_training_plan_warns_once_per_window_when_it_cannot_finish_the_run():
    # 2 steps a minute, 1080 steps a window: 5,000 steps cannot fit in two windows
    short = training(dataclasses.replace(POLICY, total_steps=5_000))
    d = step(short, Tick(), 40 * MIN + 1, Observations(checkpoint=ckpt(60, 40 * MIN)))
    d = step(d.run, Tick(), 70 * MIN + 1, Observations(checkpoint=ckpt(120, 70 * MIN)))
    (warning,) = alerts(d, "run.plan_short")
    assert warning.severity == "warning" and "ends FAILED" in warning.body
    again = step(d.run, Tick(), 100 * MIN + 1, Observations(checkpoint=ckpt(180, 100 * MIN)))
    assert alerts(again, "run.plan_short") == []  # once per window
    enough = training(dataclasses.replace(POLICY, total_steps=1_500))
    d = step(enough, Tick(), 40 * MIN + 1, Observations(checkpoint=ckpt(60, 40 * MIN)))
    d = step(d.run, Tick(), 70 * MIN + 1, Observations(checkpoint=ckpt(120, 70 * MIN)))
    assert alerts(d, "run.plan_short") == []


@pytest.mark.claim("the wait is not counted against `max_wall_clock_hours`")
def test_training_plan_waiting_for_a_window_is_not_counted_against_the_wall_clock():
    policy = dataclasses.replace(POLICY, max_wall_clock_hours=12.0)
    d = stopped_at_window_end(saves(training(policy), 40, 70, 520))
    assert d.run.plan_wait_since_ms == 552 * MIN
    woke = step(d.run, Tick(), W2[0] - 5 * MIN, Observations(checkpoint=ckpt(1084, 552 * MIN)))
    assert woke.run.status == RunStatus.STARTING  # 15.9 h after submission, 9.2 h of it counted
    assert woke.run.plan_waited_ms == W2[0] - 5 * MIN - 552 * MIN and woke.run.plan_wait_since_ms is None
    max_runtime = launch(woke).request["StoppingCondition"]["MaxRuntimeInSeconds"]
    assert max_runtime == (12 * HOUR - 552 * MIN) // 1000  # the budget left after the first window


@pytest.mark.claim(
    "an attempt that has not reached Training by then (it started late in the window) is stopped at the same deadline"
)
def test_training_plan_an_attempt_still_starting_at_the_deadline_is_stopped_not_left_to_termination():
    run = submitted()
    run = step(run, LaunchAccepted(1), 1).run
    run = step(run, observed(run, "InProgress", "Downloading", DEADLINE - 2 * MIN), DEADLINE - 2 * MIN).run
    assert plan_due_ms(run, DEADLINE - 2 * MIN) == DEADLINE
    assert stops(step(run, Tick(), DEADLINE - 1_000)) == []
    assert stops(step(run, Tick(), DEADLINE)) == [StopJob(run.current.job_name, StopIntent.WINDOW_END)]
    pending = step(submitted(), LaunchAccepted(1), 1).run
    pending = step(pending, observed(pending, "InProgress", "Pending", 2), 2).run
    assert stops(step(pending, Tick(), DEADLINE)) == []  # Pending: SageMaker keeps it for the next window


@pytest.mark.claim(
    "A window is launched into only while the run's start-up plus one checkpoint interval (as measured; at least 20 minutes) still fits before its stop deadline"
)
def test_training_plan_a_window_is_launched_into_only_if_a_checkpoint_fits_before_its_deadline():
    from sagewarden.domain.vocabulary.plan_windows import launch_need_ms, usable_window

    fresh = submitted()
    assert launch_need_ms(fresh) == 20 * MIN  # nothing measured yet: the floor
    assert usable_window(fresh, 9 * HOUR + 5 * MIN) == W1  # 22 min left before the deadline
    run = saves(training(), 40, 70)  # start-up 10 min, a checkpoint every 30 min
    assert launch_need_ms(run) == 40 * MIN
    assert usable_window(run, 8 * HOUR + 47 * MIN) == W1  # 40 min left: one checkpoint fits
    assert usable_window(run, 8 * HOUR + 48 * MIN) == W2  # 39 min: it would only redo work


def test_training_plan_a_resume_reads_the_plan_again_and_waits_for_its_new_window():
    from sagewarden.domain.vocabulary.events import ResumeRequested

    failed = ended_in_last_window(POLICY).run
    assert failed.status == RunStatus.FAILED
    later = (30 * HOUR, 40 * HOUR)  # capacity added to the plan
    d = step(failed, ResumeRequested("alice"), 20 * HOUR, Observations(plan=plan(W1, later)))
    assert d.run.plan_windows == (W1, later)
    assert d.run.status == RunStatus.RETRY_WAIT and d.run.wake_at_ms == later[0] - 5 * MIN


def test_training_plan_state_survives_the_stored_form():
    import json

    from sagewarden.adapters.run_codec import compact_json, run_from_dict, run_to_dict

    run = dataclasses.replace(
        stopped_at_window_end(saves(training(), 40, 70, 520)).run, plan_warned=(0,), plan_error="x"
    )
    stored = json.loads(compact_json(run_to_dict(run)))
    back = run_from_dict(stored, attempts=run.attempts)
    assert back == run
    assert back.plan_windows == (W1, W2) and back.plan_wait_since_ms == 552 * MIN
