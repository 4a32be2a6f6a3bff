"""Behaviour of the pure decision function, one situation at a time."""

from __future__ import annotations

import collections
import dataclasses

import pytest

from sagewarden.domain.decide import SERVER_ERROR_GIVE_UP_MS
from sagewarden.domain.due import next_due_ms
from sagewarden.domain.endings.attempt_ended import LOG_SETTLE_MS
from sagewarden.domain.vocabulary.actions import LaunchAttempt, Notify, StopJob
from sagewarden.domain.vocabulary.events import (
    CancelRequested,
    CapacityReleased,
    HangSignal,
    JobMissing,
    LaunchAccepted,
    LaunchRejected,
    Observations,
    Submitted,
    Tick,
)
from sagewarden.domain.vocabulary.models import LaunchState, RunStatus
from sagewarden.domain.vocabulary.policy import InstanceChoice, RunPolicy
from sagewarden.domain.vocabulary.reasons import StopIntent
from tests.builders import HOUR, MIN, action_types, ckpt, make_run, observed, on_pool, step, training_run

QUOTA_MSG = (
    "The account-level service limit 'ml.p4d.24xlarge for training job usage' is {limit} Instances, with current "
    "utilization of {used} Instances and a request delta of {delta} Instances. Please contact AWS support to "
    "request an increase for this limit."
)
INTERNAL = "InternalServerError: We encountered an internal error.  Please try again."


@pytest.mark.claim(
    "Run statuses: `SUBMITTED → STARTING → TRAINING → SUCCEEDED`, with `RETRY_WAIT` (quota, capacity, throttling, a warm pool), `STOPPING` (hang, budget, cancel), and the terminal states `SUCCEEDED`, `FAILED` and `CANCELLED`"
)
@pytest.mark.claim("added to every attempt; your own `Environment` wins")
def test_decide_submitted_launches_attempt_one_with_contract_environment():
    d = step(make_run(), Submitted(), 0)
    assert d.run.status == RunStatus.STARTING
    launch = next(a for a in d.actions if isinstance(a, LaunchAttempt))
    assert launch.attempt == 1 and launch.job_name.endswith("-a001")
    req = launch.request
    assert req["TrainingJobName"] == launch.job_name
    assert req["Environment"]["USER_VAR"] == "1"
    assert req["Environment"]["SAGEWARDEN_ATTEMPT"] == "1"
    assert req["Environment"]["SAGEWARDEN_RESUME_STEP"] == ""
    assert {"Key": "team", "Value": "llm"} in req["Tags"]
    assert {"Key": "sagewarden:attempt", "Value": "1"} in req["Tags"]
    assert req["CheckpointConfig"]["S3Uri"] == "s3://bucket/ckpt/"
    assert any(isinstance(a, Notify) and a.event == "run.submitted" for a in d.actions)


@pytest.mark.claim("CreateTrainingJob (deterministic name)")
def test_decide_job_name_is_valid_and_short_enough():
    d = step(make_run(name="a" * 27), Submitted(), 0)
    name = d.run.current.job_name
    assert len(name) <= 63


def test_decide_training_creates_hang_alarms_and_notifies():
    run = step(make_run(), Submitted(), 0).run
    run = step(run, LaunchAccepted(1), 1).run
    d = step(run, observed(run, "InProgress", "Training", 5 * MIN), 5 * MIN)
    assert d.run.status == RunStatus.TRAINING
    assert action_types(d) == ["EnsureHangAlarms", "Notify"]
    assert d.run.current.training_started_ms == 5 * MIN and d.run.current.alarms_active


@pytest.mark.claim("Events arrive late, duplicated and out of order.")
@pytest.mark.claim(
    "An attempt's recorded state only moves forward, keyed on (LastModifiedTime, status rank)."
)
@pytest.mark.claim("Duplicate and stale events are counted (`EventsIgnored`) and logged, not acted on")
def test_decide_duplicate_and_stale_events_are_ignored():
    run = training_run()
    dup = step(run, observed(run, "InProgress", "Training", 10 * MIN), 11 * MIN)
    assert dup.ignored == "duplicate state change" and dup.run == run and not dup.actions
    stale = step(run, observed(run, "InProgress", "Downloading", 5 * MIN), 11 * MIN)
    assert stale.ignored is not None and "stale" in stale.ignored and stale.run == run


def test_decide_completed_succeeds_and_deletes_alarms():
    run = training_run()
    d = step(
        run, observed(run, "Completed", "Completed", 5 * HOUR), 5 * HOUR, Observations(checkpoint=ckpt(900))
    )
    assert d.run.status == RunStatus.SUCCEEDED
    assert "DeleteHangAlarms" in action_types(d)
    assert d.run.last_checkpoint == ckpt(900)
    assert d.run.cost_usd > 0


@pytest.mark.claim(
    "resume from the newest verified checkpoint, at once (or once the attempt's warm pool is `Available`; after a bad host at once, on another volume size so as never to match that pool: *Warm restarts*) | `max_restarts`"
)
@pytest.mark.claim("its local path, e.g. `/opt/ml/checkpoints/checkpoint-1200`")
def test_decide_internal_error_resumes_from_latest_checkpoint():
    run = training_run()
    obs = Observations(checkpoint=ckpt(500, at_ms=HOUR))
    d = step(run, observed(run, "Failed", "Failed", 2 * HOUR, INTERNAL), 2 * HOUR, obs)
    assert d.run.status == RunStatus.STARTING and d.run.restarts == 1
    launch = next(a for a in d.actions if isinstance(a, LaunchAttempt))
    assert launch.attempt == 2
    env = launch.request["Environment"]
    assert env["SAGEWARDEN_RESUME_STEP"] == "500"
    assert env["SAGEWARDEN_RESUME_CHECKPOINT"] == "s3://bucket/ckpt/checkpoint-500/"
    assert env["SAGEWARDEN_RESUME_DIR"] == "/opt/ml/checkpoints/checkpoint-500"
    assert d.run.attempts[0].end_class == "INFRASTRUCTURE"
    notify = next(a for a in d.actions if isinstance(a, Notify) and a.event == "attempt.resumed")
    assert "step 500" in notify.body and "1 of 10" in notify.body and "Work lost" in notify.body


@pytest.mark.claim(
    "FAILED at once, with the matched lines in the alert and advice for a full disk (`VolumeSizeInGB`, checkpoint size) or host RAM (loader workers, shard loading, a larger instance)"
)
def test_decide_user_error_fails_fast_with_log_tail():
    run = training_run()
    tail = ("Traceback (most recent call last):", "ModuleNotFoundError: No module named 'flash_attn'")
    reason = "AlgorithmError: ExecuteUserScriptError:\nExitCode 1"
    d = step(run, observed(run, "Failed", "Failed", 12 * MIN, reason), 12 * MIN, Observations(log_tail=tail))
    assert d.run.status == RunStatus.FAILED
    assert not any(isinstance(a, LaunchAttempt) for a in d.actions)
    alert = next(a for a in d.actions if isinstance(a, Notify) and a.event == "run.failed")
    assert alert.severity == "critical" and "flash_attn" in alert.body


@pytest.mark.claim(
    "resume once to confirm; FAILED when the next attempt ends the same way at the same step after resuming from the checkpoint this one left, on whatever instances (see *Deterministic failure*), or at once when the run never wrote a checkpoint"
)
def test_decide_unknown_algorithm_error_without_progress_resumes_once_then_fails_on_the_repeat():
    run = training_run(resume=ckpt(100))
    reason = "AlgorithmError: ExecuteUserScriptError:\nExitCode 1"
    progressed = on_pool(
        step(
            run,
            observed(run, "Failed", "Failed", 3 * HOUR, reason),
            3 * HOUR + LOG_SETTLE_MS,
            Observations(checkpoint=ckpt(400)),
        )
    )
    assert progressed.run.status == RunStatus.STARTING
    once = on_pool(
        step(
            run,
            observed(run, "Failed", "Failed", 3 * HOUR, reason),
            3 * HOUR + LOG_SETTLE_MS,
            Observations(checkpoint=ckpt(100)),
        )
    )
    assert once.run.status == RunStatus.STARTING and once.run.no_progress_streak == 1
    run = step(once.run, LaunchAccepted(2), 3 * HOUR + LOG_SETTLE_MS + 1).run
    run = step(run, observed(run, "InProgress", "Training", 3 * HOUR + 10 * MIN), 3 * HOUR + 10 * MIN).run
    again = step(
        run,
        observed(run, "Failed", "Failed", 3 * HOUR + 20 * MIN, reason),
        3 * HOUR + 20 * MIN + LOG_SETTLE_MS,
        Observations(checkpoint=ckpt(100)),
    )
    assert again.run.status == RunStatus.FAILED
    assert "deterministic failure: attempt 2 ended as attempt 1 did, at the same step" in (
        again.run.outcome or ""
    )


@pytest.mark.claim(
    "resume once to confirm; FAILED when the next attempt ends the same way at the same step after resuming from the checkpoint this one left, on whatever instances (see *Deterministic failure*), or at once when the run never wrote a checkpoint"
)
def test_decide_unknown_algorithm_error_fails_at_once_when_no_checkpoint_was_ever_written():
    run = training_run()
    reason = "AlgorithmError: ExecuteUserScriptError:\nExitCode 1"
    d = step(run, observed(run, "Failed", "Failed", 3 * HOUR, reason), 3 * HOUR + LOG_SETTLE_MS)
    assert d.run.status == RunStatus.FAILED
    assert "no checkpoint progress, before any checkpoint was written" in (d.run.outcome or "")


@pytest.mark.claim(
    "`max_no_progress_restarts` consecutive endings without a newer checkpoint *that are repeats* make the run FAILED"
)
@pytest.mark.claim("`max_no_progress_restarts` | 3 | 1 ≤ x ≤ 100 | crash-loop stop")
def test_decide_crash_loop_stops_after_max_no_progress_restarts():
    run = training_run(RunPolicy(max_no_progress_restarts=3), resume=ckpt(100))
    t = 2 * HOUR
    statuses = []
    for _ in range(3):
        d = step(run, observed(run, "Failed", "Failed", t, INTERNAL), t, Observations(checkpoint=ckpt(100)))
        run = d.run
        statuses.append(run.status)
        if run.status.terminal:
            break
        run = step(run, LaunchAccepted(run.current.number), t + 1).run
        run = step(run, observed(run, "InProgress", "Training", t + 10 * MIN), t + 10 * MIN).run
        t += HOUR
    assert statuses == [RunStatus.STARTING, RunStatus.STARTING, RunStatus.FAILED]
    assert "crash loop" in (run.outcome or "")


@pytest.mark.claim(
    "resume from the newest verified checkpoint, at once (or once the attempt's warm pool is `Available`; after a bad host at once, on another volume size so as never to match that pool: *Warm restarts*) | `max_restarts`"
)
@pytest.mark.claim("**Restart budget.** Resumes beyond `max_restarts` are refused.")
def test_decide_restart_budget_is_enforced():
    run = training_run(RunPolicy(max_restarts=1))
    run = step(
        run, observed(run, "Failed", "Failed", HOUR, INTERNAL), HOUR, Observations(checkpoint=ckpt(10))
    ).run
    run = step(run, LaunchAccepted(2), HOUR + 1).run
    run = step(run, observed(run, "InProgress", "Training", HOUR + 5 * MIN), HOUR + 5 * MIN).run
    d = step(
        run,
        observed(run, "Failed", "Failed", 3 * HOUR, INTERNAL),
        3 * HOUR,
        Observations(checkpoint=ckpt(20)),
    )
    assert d.run.status == RunStatus.FAILED and "restart budget" in (d.run.outcome or "")


@pytest.mark.claim(
    "chain the next segment from the newest checkpoint. Runs longer than SageMaker's 28-day cap work; each segment's MaxRuntime is capped by the run's remaining wall clock."
)
def test_decide_max_runtime_chains_without_counting_a_restart():
    run = training_run()
    d = step(
        run,
        observed(run, "Stopped", "MaxRuntimeExceeded", 25 * HOUR),
        25 * HOUR,
        Observations(checkpoint=ckpt(9000)),
    )
    assert any(isinstance(a, Notify) and a.event == "attempt.segment" for a in d.actions)
    d = on_pool(d)  # the next segment runs on the same instances (warm pool)
    assert d.run.status == RunStatus.STARTING
    assert d.run.restarts == 0 and d.run.segments == 1


@pytest.mark.claim(
    "chain the next segment from the newest checkpoint. Runs longer than SageMaker's 28-day cap work; each segment's MaxRuntime is capped by the run's remaining wall clock."
)
@pytest.mark.claim("`max_wall_clock_hours` is enforced by capping MaxRuntime and by the sweep's tick")
def test_decide_segment_runtime_is_capped_by_wall_clock_budget():
    run = training_run(RunPolicy(max_wall_clock_hours=30))
    d = step(
        run,
        observed(run, "Stopped", "MaxRuntimeExceeded", 24 * HOUR),
        24 * HOUR,
        Observations(checkpoint=ckpt(9000)),
    )
    d = on_pool(d, 24 * HOUR)
    launch = next(a for a in d.actions if isinstance(a, LaunchAttempt))
    assert launch.request["StoppingCondition"]["MaxRuntimeInSeconds"] == 6 * 3600


def test_decide_user_stop_cancels_but_supervisor_stop_acts_on_intent():
    run = training_run()
    user = step(run, observed(run, "Stopped", "Stopped", HOUR), HOUR)
    assert user.run.status == RunStatus.CANCELLED
    stopping = step(run, CancelRequested("alice"), HOUR)
    assert stopping.run.status == RunStatus.STOPPING
    assert stopping.actions == (StopJob(run.current.job_name, StopIntent.CANCEL),)
    done = step(stopping.run, observed(stopping.run, "Stopped", "Stopped", HOUR + MIN), HOUR + MIN)
    assert done.run.status == RunStatus.CANCELLED and "alice" in (done.run.outcome or "")


def test_decide_cancel_while_waiting_cancels_immediately():
    run = step(make_run(), Submitted(), 0).run
    run = step(
        run, LaunchRejected(1, "ResourceLimitExceeded", QUOTA_MSG.format(limit=2, used=2, delta=2)), 1
    ).run
    assert run.status == RunStatus.RETRY_WAIT
    d = step(run, CancelRequested("bob"), 2)
    assert d.run.status == RunStatus.CANCELLED and not any(isinstance(a, StopJob) for a in d.actions)


def test_decide_quota_that_can_never_fit_fails_with_the_number_to_ask_for():
    run = step(make_run(), Submitted(), 0).run
    d = step(run, LaunchRejected(1, "ResourceLimitExceeded", QUOTA_MSG.format(limit=1, used=0, delta=2)), 1)
    assert d.run.status == RunStatus.FAILED
    assert "at least 2" in (d.run.outcome or "") and "ml.p4d.24xlarge for training job usage" in (
        d.run.outcome or ""
    )


@pytest.mark.claim(
    "Run statuses: `SUBMITTED → STARTING → TRAINING → SUCCEEDED`, with `RETRY_WAIT` (quota, capacity, throttling, a warm pool), `STOPPING` (hang, budget, cancel), and the terminal states `SUCCEEDED`, `FAILED` and `CANCELLED`"
)
@pytest.mark.claim(
    "A quota- or throttle-rejected launch keeps its number. No job was created, so the name is free. Numbers stay contiguous, and no number is ever used for two jobs."
)
@pytest.mark.claim("Nothing to do: it retries when capacity is released or on backoff.")
def test_decide_quota_wait_wakes_on_capacity_release_with_same_attempt_number():
    run = step(make_run(), Submitted(), 0).run
    d = step(run, LaunchRejected(1, "ResourceLimitExceeded", QUOTA_MSG.format(limit=4, used=4, delta=2)), 1)
    run = d.run
    assert run.status == RunStatus.RETRY_WAIT and run.wait_reason == "quota" and run.wake_at_ms is not None
    assert run.current.launch == LaunchState.WAITING
    other = step(run, CapacityReleased("ml.p5.48xlarge", 2), 10)
    assert other.ignored is not None
    woke = step(run, CapacityReleased("ml.p4d.24xlarge", 2), 10)
    launch = next(a for a in woke.actions if isinstance(a, LaunchAttempt))
    assert launch.attempt == 1 and woke.run.current.launch_tries == 2


@pytest.mark.claim("`quota_wait_max_hours` / `capacity_wait_max_hours` | 24 / 12")
@pytest.mark.claim("Nothing to do: it retries when capacity is released or on backoff.")
def test_decide_quota_wait_retries_when_backoff_fires_and_gives_up_after_max():
    pol = RunPolicy(quota_wait_max_hours=1)
    run = step(make_run(pol), Submitted(), 0).run
    msg = QUOTA_MSG.format(limit=4, used=4, delta=2)
    run = step(run, LaunchRejected(1, "ResourceLimitExceeded", msg), 0).run
    early = step(run, Tick(), run.wake_at_ms - 1)
    assert early.ignored is not None
    woke = step(run, Tick(), run.wake_at_ms)
    assert any(isinstance(a, LaunchAttempt) for a in woke.actions)
    late = step(woke.run, LaunchRejected(1, "ResourceLimitExceeded", msg), 2 * HOUR)
    assert late.run.status == RunStatus.FAILED and "gave up" in (late.run.outcome or "")


@pytest.mark.claim("exponential; the cap is at least the base.")
def test_decide_backoff_grows_and_is_capped():
    pol = RunPolicy(backoff_base_seconds=60, backoff_cap_seconds=600, backoff_jitter=0.0)
    run = step(make_run(pol), Submitted(), 0).run
    msg = QUOTA_MSG.format(limit=4, used=4, delta=2)
    delays = []
    now = 0
    for _ in range(6):
        run = step(run, LaunchRejected(1, "ResourceLimitExceeded", msg), now).run
        delays.append((run.wake_at_ms - now) // 1000)
        now = run.wake_at_ms
        run = step(run, Tick(), now).run
    assert delays == [60, 120, 240, 480, 600, 600]


@pytest.mark.claim(
    '`ThrottlingException` / "Rate exceeded" / a 5xx from CreateTrainingJob | short jittered retry'
)
@pytest.mark.claim("`throttle_backoff_seconds` | 30 | 1 ≤ x ≤ 86,400")
def test_decide_throttling_waits_briefly_without_counting_a_restart():
    run = step(make_run(), Submitted(), 0).run
    d = step(run, LaunchRejected(1, "ThrottlingException", "Rate exceeded"), 0)
    assert d.run.status == RunStatus.RETRY_WAIT and d.run.wait_reason == "throttle"
    assert d.run.wake_at_ms <= 45_000 and d.run.restarts == 0
    assert not any(isinstance(a, Notify) for a in d.actions)


@pytest.mark.claim(
    "a 5xx repeated word for word to the same request backs off from `throttle_backoff_seconds` to `backoff_cap_seconds` and fails after 2 hours (10 calls)"
)
def test_decide_a_server_error_repeating_on_the_same_request_backs_off_and_gives_up():
    """CreateTrainingJob answers the same 500 to the same request: the retries back off from 30 s to
    the backoff cap, and the run fails after SERVER_ERROR_GIVE_UP_MS (before: a try every 30 s for
    24 hours, 2,882 calls)."""
    run = step(make_run(RunPolicy(backoff_jitter=0.0)), Submitted(), 0).run
    now, tries, delays = 0, 0, []
    while not run.status.terminal and tries < 100:
        tries += 1
        d = step(run, LaunchRejected(1, "InternalServerError", "We encountered an internal error."), now)
        run = d.run
        if run.status.terminal:
            break
        delays.append((run.wake_at_ms - now) // 1000)
        now = run.wake_at_ms
        run = step(run, Tick(), now).run
    assert run.status == RunStatus.FAILED and "the same server error for 120 min" in (run.outcome or "")
    assert tries <= 12 and now >= SERVER_ERROR_GIVE_UP_MS
    assert delays[1:5] == [60, 120, 240, 480] and max(delays) == 1800


@pytest.mark.claim(
    "a 5xx repeated word for word to the same request backs off from `throttle_backoff_seconds` to `backoff_cap_seconds` and fails after 2 hours (10 calls)"
)
def test_decide_a_different_server_error_is_retried_at_the_throttle_pace():
    run = step(make_run(), Submitted(), 0).run
    run = step(run, LaunchRejected(1, "InternalServerError", "We encountered an internal error."), 0).run
    run = step(run, Tick(), run.wake_at_ms).run
    d = step(run, LaunchRejected(1, "ServiceUnavailable", "Service is unavailable."), run.updated_ms)
    assert d.run.status == RunStatus.RETRY_WAIT and d.run.wake_at_ms - d.run.updated_ms <= 45_000


@pytest.mark.claim(
    "not available in this region: FAILED at once, saying to pick another type or region (either skips to the next `instance_fallbacks` entry first)"
)
@pytest.mark.parametrize(
    ("message", "outcome"),
    [
        (
            "The account-level service limit for training-job/ml.p2.xlarge is 0 Instances, with current "
            "utilization of 0 Instances and a request delta of 2 Instances. Please contact AWS support to "
            "request an increase for this limit.",
            "quota 'training-job/ml.p2.xlarge' is 0 instances but one attempt needs 2",
        ),
        (
            "The requested resource training-job/ml.p2.xlarge is not available in this region",
            "training-job/ml.p2.xlarge is not available in this region: pick another instance type or region",
        ),
    ],
    ids=["the older unquoted quota wording", "an instance type the region does not offer"],
)
def test_decide_a_rejection_that_can_never_succeed_fails_at_once(message: str, outcome: str):
    run = step(make_run(), Submitted(), 0).run
    d = step(run, LaunchRejected(1, "ResourceLimitExceeded", message), 1)
    assert d.run.status == RunStatus.FAILED and outcome in (d.run.outcome or "")


@pytest.mark.claim(
    "not available in this region: FAILED at once, saying to pick another type or region (either skips to the next `instance_fallbacks` entry first)"
)
def test_decide_an_unavailable_instance_type_falls_back_to_the_next_choice():
    pol = RunPolicy(instance_fallbacks=(InstanceChoice("ml.p4de.24xlarge", 2),))
    run = step(make_run(pol), Submitted(), 0).run
    msg = "The requested resource training-job/ml.p4d.24xlarge is not available in this region"
    d = step(run, LaunchRejected(1, "ResourceLimitExceeded", msg), 1)
    (launch,) = [a for a in d.actions if isinstance(a, LaunchAttempt)]
    assert launch.request["ResourceConfig"]["InstanceType"] == "ml.p4de.24xlarge"
    (alert,) = [a for a in d.actions if isinstance(a, Notify)]
    assert "not available in this region" in alert.body and "raise the quota" not in alert.body


def test_decide_validation_rejection_fails_with_message():
    run = step(make_run(), Submitted(), 0).run
    d = step(run, LaunchRejected(1, "ValidationException", "Invalid TrainingImage"), 0)
    assert d.run.status == RunStatus.FAILED and "Invalid TrainingImage" in (d.run.outcome or "")


@pytest.mark.claim(
    "switch to the next `instance_fallbacks` entry at once; after the last one, back off and go round again (the backoff counts from the refused attempt's request: one that sat Pending for capacity longer than the backoff asks again at once) | `capacity_wait_max_hours`"
)
@pytest.mark.claim(
    "`[{instance_type, instance_count}]`, tried in order on capacity errors; each type must be one SageMaker knows"
)
@pytest.mark.claim("Nothing to do: it retries when capacity is released or on backoff.")
def test_decide_capacity_falls_back_then_waits():
    pol = RunPolicy(instance_fallbacks=(InstanceChoice("ml.p4d.24xlarge", 4),))
    run = step(make_run(pol), Submitted(), 0).run
    run = step(run, LaunchAccepted(1), 1).run
    reason = "CapacityError: Unable to provision requested ML compute capacity. Please retry using a different ML instance type."
    d = step(run, observed(run, "Failed", "Failed", 30 * MIN, reason), 30 * MIN)
    launch = next(a for a in d.actions if isinstance(a, LaunchAttempt))
    assert launch.request["ResourceConfig"]["InstanceType"] == "ml.p4d.24xlarge"
    assert launch.request["ResourceConfig"]["InstanceCount"] == 4
    run = step(d.run, LaunchAccepted(2), 30 * MIN).run
    # refused a minute after its request: the rest of the backoff (2 min, +/- 20 %) is waited
    d2 = step(run, observed(run, "Failed", "Failed", 31 * MIN, reason), 31 * MIN)
    assert d2.run.status == RunStatus.RETRY_WAIT and d2.run.wait_reason == "capacity"
    assert d2.run.restarts == 0
    assert 30 * MIN + 0.8 * 2 * MIN <= d2.run.wake_at_ms <= 30 * MIN + 1.2 * 2 * MIN
    assert not any(isinstance(a, LaunchAttempt) for a in d2.actions)


@pytest.mark.claim(
    "switch to the next `instance_fallbacks` entry at once; after the last one, back off and go round again (the backoff counts from the refused attempt's request: one that sat Pending for capacity longer than the backoff asks again at once) | `capacity_wait_max_hours`"
)
def test_decide_capacity_refused_after_a_long_pending_asks_again_at_once():
    """The backoff spaces the requests for capacity: an attempt that sat Pending for 25 minutes
    before SageMaker gave up has spaced them already, so the next request goes at the refusal
    (the give-up clock and the backoff's growth still count it as a wait)."""
    reason = "CapacityError: Unable to provision requested ML compute capacity. Please retry using a different ML instance type."
    run = step(make_run(), Submitted(), 0).run
    run = step(run, LaunchAccepted(1), 1).run
    d = step(run, observed(run, "Failed", "Failed", 25 * MIN, reason), 25 * MIN)
    (launch,) = [a for a in d.actions if isinstance(a, LaunchAttempt)]
    assert launch.attempt == 2 and d.run.status == RunStatus.STARTING
    assert d.run.wait_count == 1 and d.run.wait_started_ms == 25 * MIN and d.run.restarts == 0
    assert any(
        isinstance(a, Notify) and a.event == "run.waiting" and "Next try now" in a.body for a in d.actions
    )
    # the backoff has grown (4 min): a second refusal 3 minutes after its request waits the rest
    run = step(d.run, LaunchAccepted(2), 25 * MIN).run
    d2 = step(run, observed(run, "Failed", "Failed", 28 * MIN, reason), 28 * MIN)
    assert d2.run.status == RunStatus.RETRY_WAIT and not any(isinstance(a, LaunchAttempt) for a in d2.actions)
    assert 25 * MIN + 0.8 * 4 * MIN <= d2.run.wake_at_ms <= 25 * MIN + 1.2 * 4 * MIN


def test_decide_max_pending_stop_is_capacity():
    run = make_run()
    run = dataclasses.replace(
        run,
        request={
            **run.request,
            "StoppingCondition": {"MaxRuntimeInSeconds": 86400, "MaxPendingTimeInSeconds": 1800},
        },
    )
    run = step(run, Submitted(), 0).run
    run = step(run, LaunchAccepted(1), 1).run
    d = step(run, observed(run, "Stopped", "Stopped", 31 * MIN), 31 * MIN)
    assert d.run.attempts[0].end_class == "CAPACITY"
    assert d.run.status in (RunStatus.RETRY_WAIT, RunStatus.STARTING)


@pytest.mark.claim("`Stopped/Interrupted`, `MaxWaitTimeExceeded` | resume | no-progress streak only")
def test_decide_spot_interruption_resumes_uncounted():
    run = training_run(spot=True)  # managed spot training: no warm pool, a new job at once
    d = step(
        run, observed(run, "Stopped", "Interrupted", 2 * HOUR), 2 * HOUR, Observations(checkpoint=ckpt(50))
    )
    assert d.run.status == RunStatus.STARTING and d.run.restarts == 0
    assert d.run.restarts_by_class == {"SPOT_INTERRUPTED": 1}


@pytest.mark.claim(
    "Run statuses: `SUBMITTED → STARTING → TRAINING → SUCCEEDED`, with `RETRY_WAIT` (quota, capacity, throttling, a warm pool), `STOPPING` (hang, budget, cancel), and the terminal states `SUCCEEDED`, `FAILED` and `CANCELLED`"
)
@pytest.mark.claim("`hang_confirmation=any` is the default; `2-of-3` means any two signals")
@pytest.mark.claim(
    "Then the `hang` intent is recorded and the job is stopped. When `Stopped` arrives, the run resumes, counted against `max_restarts`."
)
def test_decide_hang_signal_stops_then_resumes_counted():
    run = training_run()
    now = run.current.training_started_ms + 2 * HOUR
    sig = HangSignal(run.current.job_name, 1, "log_silence", "ALARM", now, "Threshold Crossed")
    d = step(
        run,
        sig,
        now,
        Observations(log_tail=("[algo-1] step 1000",), hosts_triage=("algo-2: last log 31 min ago",)),
    )
    assert d.run.status == RunStatus.STOPPING
    assert StopJob(run.current.job_name, StopIntent.HANG) in d.actions
    alert = next(a for a in d.actions if isinstance(a, Notify))
    assert alert.event == "hang.detected" and "algo-2" in alert.body
    stopped = step(
        d.run,
        observed(d.run, "Stopped", "Stopped", now + 2 * MIN),
        now + 2 * MIN,
        Observations(checkpoint=ckpt(900)),
    )
    stopped = on_pool(stopped)  # no host singled out: the resume runs on the warm pool
    assert stopped.run.status == RunStatus.STARTING and stopped.run.restarts == 1
    assert stopped.run.restarts_by_class == {"HANG": 1}


@pytest.mark.claim("`hang_grace_minutes` | 15 | 0 ≤ x ≤ 1,440 | after Training starts")
@pytest.mark.claim("Signals of attempts that already ended or are not training are recorded and ignored")
def test_decide_hang_signal_ignored_in_grace_period_and_when_not_current():
    run = training_run()
    t0 = run.current.training_started_ms
    early = step(run, HangSignal(run.current.job_name, 1, "gpu_idle", "ALARM", t0 + MIN), t0 + 5 * MIN)
    assert early.ignored is not None and "grace" in early.ignored
    other = step(run, HangSignal("sw-llama-other-a009", 9, "gpu_idle", "ALARM", t0), t0 + HOUR)
    assert other.ignored is not None


@pytest.mark.claim("`hang_confirmation` | `any` | | or `2-of-3`")
@pytest.mark.claim("`hang_confirmation=any` is the default; `2-of-3` means any two signals")
def test_decide_two_of_three_waits_for_a_second_signal():
    run = training_run(RunPolicy(hang_confirmation="2-of-3"))
    now = run.current.training_started_ms + HOUR
    first = step(run, HangSignal(run.current.job_name, 1, "gpu_idle", "ALARM", now), now)
    assert first.run.status == RunStatus.TRAINING and first.run.current.hang_signals == ("gpu_idle",)
    cleared = step(first.run, HangSignal(run.current.job_name, 1, "gpu_idle", "OK", now + MIN), now + MIN)
    assert cleared.run.current.hang_signals == ()
    second = step(
        first.run, HangSignal(run.current.job_name, 1, "log_silence", "ALARM", now + MIN), now + MIN
    )
    assert second.run.status == RunStatus.STOPPING


@pytest.mark.claim(
    "A terminal run never changes again, except for the bookkeeping of jobs still to stop and warm pools still to release (their billed time is added to its cost)"
)
@pytest.mark.claim(
    "stops stray jobs of any earlier attempt of a finished run (judged against every known attempt, once)"
)
@pytest.mark.claim("A terminal run never changes; a stray live job of a terminal run is stopped.")
def test_decide_terminal_run_never_changes_but_stops_stray_jobs():
    run = training_run()
    done = step(run, observed(run, "Completed", "Completed", HOUR), HOUR).run
    late = step(done, observed(run, "InProgress", "Training", 2 * HOUR), 2 * HOUR)
    assert late.run == done and late.ignored is not None
    assert late.actions == ()  # the attempt is recorded as ended: nothing stray to stop
    stray_job = dataclasses.replace(
        observed(run, "InProgress", "Training", 2 * HOUR),
        attempt=2,
        job_name=run.current.job_name.replace("a001", "a002"),
    )
    stray = step(done, stray_job, 2 * HOUR)
    assert dataclasses.replace(stray.run, strays=()) == done  # only the stray bookkeeping changes
    assert any(isinstance(a, StopJob) for a in stray.actions)
    assert dict(stray.run.strays) == {stray_job.job_name: 2 * HOUR}


@pytest.mark.claim(
    'a launch still PENDING after 2 minutes (its deterministic name makes a duplicate answer `ResourceInUse`, which counts as "already submitted"), or a stop not confirmed after 5 minutes'
)
def test_decide_pending_launch_is_reissued_by_tick_and_job_missing():
    run = step(make_run(), Submitted(), 0).run
    assert run.current.launch == LaunchState.PENDING
    assert step(run, Tick(), MIN).ignored is not None
    again = step(run, Tick(), 3 * MIN)
    launch = next(a for a in again.actions if isinstance(a, LaunchAttempt))
    assert launch.attempt == 1 and launch.job_name == run.current.job_name
    missing = step(run, JobMissing(run.current.job_name, 1), 3 * MIN)
    assert any(isinstance(a, LaunchAttempt) and a.attempt == 1 for a in missing.actions)


@pytest.mark.claim(
    'a launch still PENDING after 2 minutes (its deterministic name makes a duplicate answer `ResourceInUse`, which counts as "already submitted"), or a stop not confirmed after 5 minutes'
)
def test_decide_unconfirmed_stop_is_reissued():
    run = step(training_run(), CancelRequested("x"), HOUR).run
    assert step(run, Tick(), HOUR + MIN).ignored == "stop in progress"
    again = step(run, Tick(), HOUR + 6 * MIN)
    assert again.actions == (StopJob(run.current.job_name, StopIntent.CANCEL),)


@pytest.mark.claim(
    "Optional `max_cost_usd`, using `instance_hour_price_usd` or the estimates in `domain/vocabulary/pricing.py`, which are us-east-1 list prices: estimates only."
)
@pytest.mark.claim(
    "`max_cost_usd` / `instance_hour_price_usd` | none | 0 < x ≤ 1e9 / 0 < x ≤ 10,000 | optional cost budget"
)
def test_decide_cost_budget_stops_the_job():
    run = training_run(RunPolicy(max_cost_usd=100.0, instance_hour_price_usd=10.0))
    t0 = run.current.training_started_ms
    assert step(run, Tick(), t0 + 4 * HOUR).ignored == "nothing due"  # 2 x 4 h x $10 = $80
    d = step(run, Tick(), t0 + 6 * HOUR)
    assert d.run.status == RunStatus.STOPPING and d.actions[0] == StopJob(run.current.job_name, "cost_budget")
    end = step(d.run, observed(d.run, "Stopped", "Stopped", t0 + 6 * HOUR + MIN), t0 + 6 * HOUR + MIN)
    assert end.run.status == RunStatus.FAILED


def test_decide_every_attempt_gets_the_training_script_contract_variables():
    """README's training-script contract: which run and attempt, and the resume step, URI and
    local directory (empty on a fresh start), on every attempt."""
    first = next(a for a in step(make_run(), Submitted(), 0).actions if isinstance(a, LaunchAttempt))
    run = training_run()
    obs = Observations(checkpoint=ckpt(1200, at_ms=HOUR))
    resumed = next(
        a
        for a in step(run, observed(run, "Failed", "Failed", 2 * HOUR, INTERNAL), 2 * HOUR, obs).actions
        if isinstance(a, LaunchAttempt)
    )
    contract = (
        "SAGEWARDEN_RUN_ID",
        "SAGEWARDEN_ATTEMPT",
        "SAGEWARDEN_RESUME_STEP",
        "SAGEWARDEN_RESUME_CHECKPOINT",
        "SAGEWARDEN_RESUME_DIR",
    )
    assert {k: first.request["Environment"][k] for k in contract} == {
        "SAGEWARDEN_RUN_ID": run.run_id,
        "SAGEWARDEN_ATTEMPT": "1",
        "SAGEWARDEN_RESUME_STEP": "",
        "SAGEWARDEN_RESUME_CHECKPOINT": "",
        "SAGEWARDEN_RESUME_DIR": "",
    }
    assert {k: resumed.request["Environment"][k] for k in contract} == {
        "SAGEWARDEN_RUN_ID": run.run_id,
        "SAGEWARDEN_ATTEMPT": "2",
        "SAGEWARDEN_RESUME_STEP": "1200",
        "SAGEWARDEN_RESUME_CHECKPOINT": "s3://bucket/ckpt/checkpoint-1200/",
        "SAGEWARDEN_RESUME_DIR": "/opt/ml/checkpoints/checkpoint-1200",
    }
    assert (
        resumed.request["CheckpointConfig"] == first.request["CheckpointConfig"]
    )  # the same on every attempt


@pytest.mark.claim("`max_wall_clock_hours` is enforced by capping MaxRuntime and by the sweep's tick")
@pytest.mark.claim("`max_wall_clock_hours` | 2160 (90 days) | 0 < x ≤ 8,760 | whole run")
def test_decide_wall_clock_budget_stops_the_job_on_a_tick():
    run = training_run(RunPolicy(max_wall_clock_hours=3))
    assert step(run, Tick(), 3 * HOUR - MIN).ignored == "nothing due"
    d = step(run, Tick(), 3 * HOUR + MIN)  # the sweep's tick, past the run's wall clock
    assert d.run.status == RunStatus.STOPPING and d.actions[0] == StopJob(run.current.job_name, "wall_clock")
    end = step(d.run, observed(d.run, "Stopped", "Stopped", 3 * HOUR + 2 * MIN), 3 * HOUR + 2 * MIN)
    assert end.run.status == RunStatus.FAILED and "wall-clock budget" in (end.run.outcome or "")


@pytest.mark.claim(
    "switch to the next `instance_fallbacks` entry at once; after the last one, back off and go round again (the backoff counts from the refused attempt's request: one that sat Pending for capacity longer than the backoff asks again at once) | `capacity_wait_max_hours`"
)
@pytest.mark.claim("`quota_wait_max_hours` / `capacity_wait_max_hours` | 24 / 12")
def test_decide_capacity_wait_fails_after_capacity_wait_max_hours():
    """README: after the last fallback, back off and go round again, within capacity_wait_max_hours."""
    reason = "CapacityError: Unable to provision requested ML compute capacity. Please retry using a different ML instance type."
    run = step(make_run(RunPolicy(capacity_wait_max_hours=2)), Submitted(), 0).run
    now, launches = 0, 1
    waited = 0
    while run.status != RunStatus.FAILED:
        run = step(run, LaunchAccepted(run.current.number), now).run
        now += 20 * MIN  # pending for capacity, then refused
        run = step(run, observed(run, "Failed", "Failed", now, reason), now).run
        if run.status == RunStatus.RETRY_WAIT:  # the backoff (growing to 30 min) outgrew the 20 min
            assert run.wait_reason == "capacity" and run.restarts == 0
            now = run.wake_at_ms
            run = step(run, Tick(), now).run
            waited += 1
        if run.status != RunStatus.FAILED:
            assert run.status == RunStatus.STARTING  # went round again
            launches += 1
        assert now < 5 * HOUR, "never gave up"
    assert 2 * HOUR < now <= 3 * HOUR and launches >= 3 and waited >= 1
    assert "no capacity for 2 h" in (run.outcome or "")


@pytest.mark.claim("The jitter is deterministic per run and try, so replays are exact.")
def test_decide_backoff_jitter_is_deterministic_per_run_and_try():
    pol = RunPolicy(backoff_base_seconds=60, backoff_cap_seconds=600, backoff_jitter=0.2)
    msg = QUOTA_MSG.format(limit=4, used=4, delta=2)

    def delays(run_id: str) -> list[float]:
        run = step(make_run(pol, run_id=run_id), Submitted(), 0).run
        out, now = [], 0
        for _ in range(5):
            run = step(run, LaunchRejected(1, "ResourceLimitExceeded", msg), now).run
            out.append((run.wake_at_ms - now) / 1000)
            now = run.wake_at_ms
            run = step(run, Tick(), now).run
        return out

    first = delays("01JC0FFEE0BADC0DE000000001")
    assert first == delays("01JC0FFEE0BADC0DE000000001")  # a replay waits exactly as long
    other = delays("01JC0FFEE0BADC0DE000000002")
    assert other != first  # another run draws other factors
    for got in (first, other):
        for nominal, delay in zip([60, 120, 240, 480, 600], got, strict=True):
            assert 0.8 * nominal <= delay <= 1.2 * nominal
    assert (
        len(set(round(d / n, 4) for d, n in zip(first, [60, 120, 240, 480, 600], strict=True))) > 1
    )  # per try


@pytest.mark.claim("llama-8b: attempt 1 infrastructure, resuming as attempt 2")
@pytest.mark.claim("restarts *k* of budget and the no-progress streak;")
@pytest.mark.claim("work lost since that checkpoint, in minutes and estimated $;")
def test_decide_resume_alert_reads_at_a_glance():
    """README Alerts: the subject, then class and reason, evidence, restarts k of budget and the
    no-progress streak, the checkpoint resumed from, work lost in minutes and estimated $."""
    run = training_run(RunPolicy(instance_hour_price_usd=30.0))
    end = 2 * HOUR
    obs = Observations(
        checkpoint=ckpt(500, at_ms=end - 30 * MIN),
        log_tail=("[rank3]:[E ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout",),
    )
    reason = "AlgorithmError: ExecuteUserScriptError: ExitCode 1"
    d = step(run, observed(run, "Failed", "Failed", end, reason), end + LOG_SETTLE_MS, obs)

    (alert,) = [a for a in d.actions if isinstance(a, Notify) and a.event == "attempt.resumed"]
    assert alert.subject.endswith("llama: attempt 1 infrastructure, resuming as attempt 2")
    assert alert.severity == "warning"
    body = alert.body
    assert "Class: INFRASTRUCTURE (counted against max_restarts)" in body
    assert "Reason: " in body and "NCCL" in body
    assert "Watchdog caught collective operation timeout" in body.split("Evidence:")[1]
    assert "Restarts: 1 of 10; no-progress streak 0 of 3" in body
    assert "step 500" in body.split("Resuming from:")[1].splitlines()[0]
    # 30 minutes since the checkpoint on 2 instances at $30 an hour
    assert "Work lost since that checkpoint: 30 min (~$30)" in body


@pytest.mark.claim("never forgets a run")
@pytest.mark.claim("Every non-terminal run carries `due_at`, kept in a sparse GSI sharded 4 ways.")
@pytest.mark.parametrize("status", [RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED])
def test_decide_next_due_is_none_only_for_terminal(status):
    assert next_due_ms(make_run(status=status), 0) is None
    assert next_due_ms(training_run(), 0) is not None


def test_decide_stale_checkpoint_is_a_hang_signal_on_tick():
    run = training_run(RunPolicy(checkpoint_stale_minutes=60))
    t0 = run.current.training_started_ms
    fresh = step(run, Tick(), t0 + 90 * MIN, Observations(checkpoint=ckpt(500, at_ms=t0 + 50 * MIN)))
    assert fresh.run.status == RunStatus.TRAINING and not fresh.actions  # only recorded (advice)
    again = step(fresh.run, Tick(), t0 + 100 * MIN, Observations(checkpoint=ckpt(500, at_ms=t0 + 50 * MIN)))
    assert again.ignored == "nothing due"
    stale = step(run, Tick(), t0 + 3 * HOUR, Observations(checkpoint=ckpt(500, at_ms=t0 + 50 * MIN)))
    assert stale.run.status == RunStatus.STOPPING
    assert stale.run.current.stop_intent == StopIntent.HANG
    assert any("no new complete checkpoint for 130 min" in line for line in stale.run.current.evidence)


def test_decide_stale_checkpoint_needs_second_signal_under_two_of_three():
    run = training_run(RunPolicy(checkpoint_stale_minutes=60, hang_confirmation="2-of-3"))
    t0 = run.current.training_started_ms
    d = step(run, Tick(), t0 + 3 * HOUR, Observations(checkpoint=None))
    assert d.run.status == RunStatus.TRAINING and d.run.current.hang_signals == ("checkpoint_stale",)


def test_a_job_uploading_after_training_is_not_reported_as_starting():
    run = training_run()
    d = step(run, observed(run, "InProgress", "Uploading", 5 * HOUR), 5 * HOUR)
    assert d.run.status == RunStatus.TRAINING  # it was STARTING: as if the job had gone back


@pytest.mark.claim(
    "Events that failed 8 deliveries. The sweep reconciles every live attempt about every 10 minutes anyway"
)
def test_routine_due_times_are_jittered_so_a_backlog_does_not_stay_bunched():
    """Issue 18: after a backlog, 181 of 200 runs were due in the same minute every 10 minutes."""

    now = 1_000 * HOUR
    base = training_run()
    confirmed = dataclasses.replace(base.current, alarms_confirmed=True)  # the routine look
    base = dataclasses.replace(base, attempts=(confirmed,))
    runs = [dataclasses.replace(base, run_id=f"01JC0FFEE0BADC0DE{i:09d}") for i in range(200)]
    dues = [next_due_ms(r, now, 10 * MIN) for r in runs]
    assert all(8 * MIN <= d - now <= 12 * MIN for d in dues)  # still about the interval
    by_minute = collections.Counter(d // MIN for d in dues)
    assert max(by_minute.values()) <= 60, by_minute  # spread over 4-5 minutes (181 of 200 in one before)
    # the same run served again a pass later lands elsewhere: bunching dissolves
    later = [next_due_ms(r, d, 10 * MIN) for r, d in zip(runs, dues, strict=True)]
    assert len({d // MIN for d in later}) >= 6
