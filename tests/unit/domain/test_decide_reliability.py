"""The reliability defects of issues 7 and 11, one test each, at the level of the pure decision.

Each test names the defect it pins down; every one of them failed on the supervisor before the
level-triggered rework (intent is final, unknown is not empty, levels over edges, strays).
"""

from __future__ import annotations

import dataclasses

import pytest

from sagewarden.domain.decision.alerts import EVIDENCE_MAX_BYTES
from sagewarden.domain.decision.deferrals import DEFER_ALERT_AFTER_MS, DEFER_FAIL_AFTER_MS
from sagewarden.domain.decision.pending import LAUNCH_SETTLE_MS
from sagewarden.domain.due import next_due_ms
from sagewarden.domain.endings.attempt_ended import LOG_SETTLE_MS
from sagewarden.domain.vocabulary.actions import (
    AnnounceCapacityReleased,
    EnsureHangAlarms,
    LaunchAttempt,
    Notify,
    StopJob,
)
from sagewarden.domain.vocabulary.events import (
    AlarmsObserved,
    CancelRequested,
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
from tests.builders import HOUR, MIN, ckpt, make_run, observed, on_pool, step, training_run

QUOTA_MSG = (
    "The account-level service limit '{itype} for training job usage' is {limit} Instances, with current "
    "utilization of {used} Instances and a request delta of {delta} Instances. Please contact AWS support to "
    "request an increase for this limit."
)
UNKNOWN_FAILURE = "AlgorithmError: ExecuteUserScriptError:\nExitCode 1"
S3_DOWN = "CheckpointLookupError: cannot list s3://bucket/ckpt/: S3 error SlowDown"


def _launches(d) -> list[LaunchAttempt]:
    return [a for a in d.actions if isinstance(a, LaunchAttempt)]


def _notifies(d, event: str | None = None) -> list[Notify]:
    return [a for a in d.actions if isinstance(a, Notify) and (event is None or a.event == event)]


# ------------------------------------------------------------------------------------------------
# 1. a cancel is final on every path


@pytest.mark.claim("a launch rejected after the cancel is not retried, an unsent launch intent is dropped")
def test_cancel_then_inflight_launch_rejected_for_quota_ends_cancelled_not_waiting():
    run = step(make_run(), Submitted(), 0).run
    cancelling = step(run, CancelRequested("alice"), MIN).run
    msg = QUOTA_MSG.format(itype="ml.p4d.24xlarge", limit=4, used=4, delta=2)
    d = step(cancelling, LaunchRejected(1, "ResourceLimitExceeded", msg), MIN + 1)
    assert d.run.status == RunStatus.CANCELLED and d.run.wake_at_ms is None
    assert _launches(d) == []
    # and no timer can bring it back
    assert next_due_ms(d.run, 2 * HOUR) is None
    assert _launches(step(d.run, Tick(), 2 * HOUR)) == []


@pytest.mark.claim("a launch rejected after the cancel is not retried, an unsent launch intent is dropped")
def test_cancel_then_inflight_launch_throttled_ends_cancelled():
    run = step(make_run(), Submitted(), 0).run
    cancelling = step(run, CancelRequested("alice"), MIN).run
    d = step(cancelling, LaunchRejected(1, "ThrottlingException", "Rate exceeded"), MIN + 1)
    assert d.run.status == RunStatus.CANCELLED and _launches(d) == []


def test_cancel_whose_stop_met_a_job_sagemaker_did_not_know_yet_asks_again_when_it_is_seen_running():
    """StopTrainingJob the moment after CreateTrainingJob may answer 'not found' (read after
    create); the job then shows up running. The recorded cancel asks again at once, not only
    when the sweep's 5-minute retry comes due."""
    run = step(make_run(), Submitted(), 0).run
    run = step(run, LaunchAccepted(1, "arn:aws:sagemaker:us-east-1:123456789012:training-job/x"), 1).run
    cancelling = step(run, CancelRequested("alice"), 2)
    assert [a for a in cancelling.actions if isinstance(a, StopJob)]
    # the stop met 'not found'; within a minute a running job is not asked again (one stop in flight)
    early = step(cancelling.run, observed(cancelling.run, "InProgress", "Starting", 30_000), 30_000)
    assert not [a for a in early.actions if isinstance(a, StopJob)]
    seen = step(early.run, observed(early.run, "InProgress", "Downloading", 2 * MIN), 2 * MIN)
    stops = [a for a in seen.actions if isinstance(a, StopJob)]
    assert [(s.job_name, s.intent) for s in stops] == [(seen.run.current.job_name, StopIntent.CANCEL)]
    assert seen.run.status == RunStatus.STOPPING and seen.run.current.stop_requested_ms == 2 * MIN


@pytest.mark.claim("a launch rejected after the cancel is not retried, an unsent launch intent is dropped")
def test_cancel_with_unconfirmed_launch_is_never_reissued_and_ends_cancelled_once_settled():
    run = step(make_run(), Submitted(), 0).run  # launch intent recorded, never confirmed
    cancelling = step(run, CancelRequested("alice"), 30_000).run
    later = step(cancelling, Tick(), 10 * MIN)
    assert _launches(later) == []  # the sweep does not re-issue a launch of a cancelled run
    early = step(cancelling, JobMissing(run.current.job_name, 1), LAUNCH_SETTLE_MS - 1)
    assert early.ignored is not None  # an invocation could still be issuing it: wait
    settled = step(cancelling, JobMissing(run.current.job_name, 1), LAUNCH_SETTLE_MS)
    assert settled.run.status == RunStatus.CANCELLED
    assert settled.run.current.launch == LaunchState.ABANDONED and not settled.run.current.live
    assert _launches(settled) == []


def test_launch_accepted_after_cancel_stops_the_job_it_created():
    run = step(make_run(), Submitted(), 0).run
    cancelling = step(run, CancelRequested("alice"), 1_000).run
    d = step(cancelling, LaunchAccepted(1), 2_000)
    assert StopJob(run.current.job_name, StopIntent.CANCEL) in d.actions


def test_launch_landing_after_the_run_was_cancelled_is_a_stray_stopped_until_confirmed():
    run = step(make_run(), Submitted(), 0).run
    cancelling = step(run, CancelRequested("alice"), 1_000).run
    done = step(cancelling, JobMissing(run.current.job_name, 1), LAUNCH_SETTLE_MS).run
    assert done.status == RunStatus.CANCELLED
    late = step(done, LaunchAccepted(1), LAUNCH_SETTLE_MS + 1)  # a slow invocation's answer
    assert StopJob(run.current.job_name, "orphan") in late.actions
    assert dict(late.run.strays) == {run.current.job_name: LAUNCH_SETTLE_MS + 1}
    assert next_due_ms(late.run, LAUNCH_SETTLE_MS + 1) is not None  # the sweep keeps asking
    again = step(late.run, Tick(), LAUNCH_SETTLE_MS + 1 + 5 * MIN)
    assert StopJob(run.current.job_name, "orphan") in again.actions
    ended = step(
        again.run, observed(run, "Stopped", "Stopped", LAUNCH_SETTLE_MS + 7 * MIN), LAUNCH_SETTLE_MS + 7 * MIN
    )
    assert ended.run.strays == () and next_due_ms(ended.run, LAUNCH_SETTLE_MS + 7 * MIN) is None
    assert dataclasses.replace(ended.run, strays=()) == done


@pytest.mark.claim(
    'a job that ends `Failed` while being stopped for a cancel is not resumed, and a stop answered "job is in status Failed" counts as evidence'
)
def test_job_failing_while_stopped_for_cancel_ends_cancelled_not_resumed():
    run = training_run()
    stopping = step(run, CancelRequested("alice"), HOUR).run
    d = step(
        stopping,
        observed(
            stopping, "Failed", "Failed", HOUR + MIN, "InternalServerError: We encountered an internal error."
        ),
        HOUR + MIN,
        Observations(checkpoint=ckpt(600)),
    )
    assert d.run.status == RunStatus.CANCELLED and _launches(d) == []
    assert "alice" in (d.run.outcome or "") and "INFRASTRUCTURE" in (d.run.outcome or "")


@pytest.mark.claim(
    "The audit says whether a run ended CANCELLED or SUCCEEDED because SageMaker reported `Completed` before the stop took effect."
)
def test_job_completing_before_the_cancel_took_effect_succeeds_and_says_so():
    run = training_run()
    stopping = step(run, CancelRequested("alice"), HOUR).run
    d = step(stopping, observed(stopping, "Completed", "Completed", HOUR + MIN), HOUR + MIN)
    assert d.run.status == RunStatus.SUCCEEDED
    assert "before the cancel" in (d.run.outcome or "")


def test_cancel_wins_over_a_hang_stop_in_flight():
    run = training_run()
    now = run.current.training_started_ms + HOUR
    hung = step(run, HangSignal(run.current.job_name, 1, "gpu_idle", "ALARM", now), now).run
    assert hung.current.stop_intent == StopIntent.HANG
    cancelling = step(hung, CancelRequested("alice"), now + MIN).run
    d = step(cancelling, observed(cancelling, "Stopped", "Stopped", now + 2 * MIN), now + 2 * MIN)
    assert d.run.status == RunStatus.CANCELLED and _launches(d) == []


# ------------------------------------------------------------------------------------------------
# 2. alarm signals are edges; the supervisor acts on the level


def _states(run, *rows):
    return AlarmsObserved(run.current.job_name, run.current.number, tuple(rows))


@pytest.mark.claim("`hang_grace_minutes` | 15 | 0 ≤ x ≤ 1,440 | after Training starts")
@pytest.mark.claim(
    "An alarm that fired inside the grace period, before `Training` was recorded, or whose event was lost is acted on at the next pass once its reason for waiting has passed"
)
def test_alarm_that_fired_inside_the_grace_period_is_acted_on_once_grace_has_passed():
    # (a dead host among busy ones: gpu_lone_idle is not held back by the start-up allowance)
    run = training_run()
    t0 = run.current.training_started_ms
    lone = "gpu_lone_idle"
    edge = step(run, HangSignal(run.current.job_name, 1, lone, "ALARM", t0 + 6 * MIN), t0 + 6 * MIN)
    assert edge.ignored is not None and "grace" in edge.ignored  # no further event will ever come
    level = step(run, _states(run, (lone, "ALARM", t0 + 6 * MIN), ("log_silence", "OK", t0)), t0 + 16 * MIN)
    assert level.run.status == RunStatus.STOPPING
    assert StopJob(run.current.job_name, StopIntent.HANG) in level.actions
    assert any("(sweep)" in line for line in level.run.current.evidence)


def test_alarm_that_fired_before_training_was_recorded_is_acted_on_later():
    run = step(make_run(), Submitted(), 0).run
    run = step(run, LaunchAccepted(1), 1).run
    run = step(run, observed(run, "InProgress", "Downloading", 2 * MIN), 2 * MIN).run
    early = step(run, HangSignal(run.current.job_name, 1, "log_silence", "ALARM", 3 * MIN), 3 * MIN)
    assert early.ignored is not None and "not training" in early.ignored
    training = step(run, observed(run, "InProgress", "Training", 4 * MIN), 4 * MIN).run
    later = step(training, _states(training, ("log_silence", "ALARM", 3 * MIN)), 50 * MIN)  # after start-up
    assert later.run.status == RunStatus.STOPPING


def test_a_lost_ok_edge_does_not_count_towards_two_of_three():
    run = training_run(RunPolicy(hang_confirmation="2-of-3"))
    now = run.current.training_started_ms + HOUR
    first = step(run, HangSignal(run.current.job_name, 1, "gpu_idle", "ALARM", now), now).run
    assert first.current.hang_signals == ("gpu_idle",)
    # the OK event was lost; the sweep sees the level: gpu_idle is OK again
    level = step(
        first, _states(first, ("gpu_idle", "OK", now + 5 * MIN), ("log_silence", "OK", now)), now + 10 * MIN
    )
    assert level.run.current.hang_signals == ()
    second = step(
        level.run, HangSignal(run.current.job_name, 1, "log_silence", "ALARM", now + HOUR), now + HOUR
    )
    assert second.run.status == RunStatus.TRAINING  # one signal, not two


# ------------------------------------------------------------------------------------------------
# 3. hang alarms are repaired from what CloudWatch holds, not from a flag


@pytest.mark.claim(
    "a missing alarm (a failed or throttled `PutMetricAlarm`) is re-created from what CloudWatch holds, not from a flag"
)
def test_missing_alarms_are_recreated_even_though_the_attempt_says_they_are_active():
    run = training_run()
    assert run.current.alarms_active and not run.current.alarms_confirmed
    assert next_due_ms(run, run.current.training_started_ms) == run.current.training_started_ms + MIN
    now = run.current.training_started_ms + 2 * MIN
    missing = step(
        run, _states(run, ("log_silence", "INSUFFICIENT_DATA", now)), now
    )  # GPU alarms never created
    assert any(isinstance(a, EnsureHangAlarms) for a in missing.actions)
    all_three = (("log_silence", "OK", now), ("gpu_idle", "OK", now), ("gpu_lone_idle", "OK", now))
    present = step(missing.run, _states(run, *all_three), now + MIN)
    assert present.run.current.alarms_confirmed and present.actions == ()
    assert step(present.run, _states(run, *all_three), now + 2 * MIN).ignored


# ------------------------------------------------------------------------------------------------
# 4. unknown is not empty


@pytest.mark.claim(
    "An error reading logs or S3 defers the judgement to the next tick (and alerts if it persists for 10 minutes)"
)
@pytest.mark.claim(
    'An S3, Logs or CloudWatch error defers the judgement (retried each minute, an alert after 10 minutes), never "no checkpoint", "silence" or "no progress".'
)
def test_s3_error_never_reads_as_a_stale_checkpoint():
    run = training_run(RunPolicy(checkpoint_stale_minutes=60))
    now = run.current.training_started_ms + 3 * HOUR
    d = step(run, Tick(), now, Observations(checkpoint_error=S3_DOWN))
    assert d.run.status == RunStatus.TRAINING and not any(isinstance(a, StopJob) for a in d.actions)
    assert d.run.deferred_since_ms == now and "SlowDown" in (d.run.deferred_reason or "")
    quiet = step(d.run, Tick(), now + 5 * MIN, Observations(checkpoint_error=S3_DOWN))
    assert quiet.ignored is not None  # still deferred: nothing new to save
    loud = step(d.run, Tick(), now + DEFER_ALERT_AFTER_MS, Observations(checkpoint_error=S3_DOWN))
    assert [n.event for n in _notifies(loud)] == ["run.deferred"] and loud.run.deferred_alerted
    once = step(loud.run, Tick(), now + DEFER_ALERT_AFTER_MS + MIN, Observations(checkpoint_error=S3_DOWN))
    assert _notifies(once) == []  # told once
    fine = step(loud.run, Tick(), now + HOUR, Observations(checkpoint=ckpt(900, now + HOUR - MIN)))
    assert fine.run.deferred_since_ms is None and fine.run.status == RunStatus.TRAINING


def test_s3_error_after_an_unrecognised_failure_defers_instead_of_failing_as_a_bug():
    run = training_run(resume=ckpt(300))
    end = run.current.training_started_ms + HOUR
    failed = observed(run, "Failed", "Failed", end, UNKNOWN_FAILURE)
    d = step(run, failed, end, Observations(checkpoint_error=S3_DOWN))
    assert d.run.status != RunStatus.FAILED and not d.run.current.ended
    assert d.run.current.end_pending and d.run.deferred_since_ms == end
    assert next_due_ms(d.run, end) == end + MIN
    # the sweep looks again (DescribeTrainingJob): same terminal state, S3 readable now
    again = on_pool(step(d.run, failed, end + MIN, Observations(checkpoint=ckpt(900))))
    assert again.run.attempts[0].ended and again.run.status == RunStatus.STARTING
    assert again.run.deferred_since_ms is None and again.run.current.resume_from.step == 900


@pytest.mark.claim(
    'An S3, Logs or CloudWatch error defers the judgement (retried each minute, an alert after 10 minutes), never "no checkpoint", "silence" or "no progress".'
)
def test_log_read_error_defers_the_classification_of_a_failure():
    run = training_run()
    end = run.current.training_started_ms + HOUR
    failed = observed(run, "Failed", "Failed", end, UNKNOWN_FAILURE)
    d = step(
        run, failed, end, Observations(checkpoint=ckpt(900), log_error="ThrottlingException: Rate exceeded")
    )
    assert not d.run.current.ended and d.run.deferred_reason and "logs" in d.run.deferred_reason
    assert not any(isinstance(a, StopJob) for a in d.actions) and _launches(d) == []


@pytest.mark.claim(
    "An error reading logs or S3 defers the judgement to the next tick (and alerts if it persists for 10 minutes)"
)
@pytest.mark.claim(
    'An S3, Logs or CloudWatch error defers the judgement (retried each minute, an alert after 10 minutes), never "no checkpoint", "silence" or "no progress".'
)
def test_failed_log_silence_check_is_not_silence():
    run = training_run()
    now = run.current.training_started_ms + 2 * HOUR
    d = step(run, Tick(), now, Observations(log_error="AccessDeniedException: logs:FilterLogEvents"))
    assert d.run.status == RunStatus.TRAINING and not any(isinstance(a, StopJob) for a in d.actions)
    assert d.run.deferred_since_ms == now
    silent = step(run, Tick(), now, Observations(logs_silent=True))
    assert silent.run.status == RunStatus.STOPPING


def test_checkpoint_error_defers_a_launch_instead_of_starting_from_scratch():
    run = make_run()
    d = step(run, Submitted(), 0, Observations(checkpoint_error=S3_DOWN))
    assert _launches(d) == [] and d.run.deferred_since_ms == 0 and d.run.status == RunStatus.SUBMITTED
    assert [n.event for n in _notifies(d)] == ["run.submitted"]
    retry = step(d.run, Tick(), MIN, Observations(checkpoint=ckpt(1200)))
    (launch,) = _launches(retry)
    assert launch.request["Environment"]["SAGEWARDEN_RESUME_STEP"] == "1200"


NO_BUCKET = "CheckpointLookupError: cannot list s3://bukcet/ckpt/: the bucket does not exist"


def _gone(permanent: bool = True) -> Observations:
    return Observations(checkpoint_error=NO_BUCKET, checkpoint_error_permanent=permanent)


@pytest.mark.claim(
    "An error that does not heal by itself (no such bucket, access denied, a bucket in another region) fails the run when it has lasted **30 minutes**"
)
def test_an_error_that_cannot_heal_fails_the_launch_after_a_bounded_time():
    """Issue 16 item 2: a checkpoint bucket that does not exist left the run SUBMITTED for ever,
    retried every minute. It still defers (someone may fix the typo or the policy), warns at 10
    min saying when it will fail, and fails at DEFER_FAIL_AFTER_MS with a critical run.failed."""
    run = make_run()
    d = step(run, Submitted(), 0, _gone())
    assert d.run.status == RunStatus.SUBMITTED and d.run.deferred_permanent_since_ms == 0
    warned = step(d.run, Tick(), DEFER_ALERT_AFTER_MS, _gone())
    (warning,) = _notifies(warned, "run.deferred")
    assert "does not heal by itself" in warning.body and "20 min" in warning.body
    still = step(warned.run, Tick(), DEFER_FAIL_AFTER_MS - 1, _gone())
    assert still.ignored is not None and still.run.status == RunStatus.SUBMITTED
    failed = step(still.run, Tick(), DEFER_FAIL_AFTER_MS, _gone())
    assert failed.run.status == RunStatus.FAILED and _launches(failed) == []
    assert "does not exist" in failed.run.outcome and "30 min" in failed.run.outcome
    (alert,) = _notifies(failed, "run.failed")
    assert alert.severity == "critical"
    assert failed.run.deferred_since_ms is None and failed.run.deferred_permanent_since_ms is None


@pytest.mark.claim(
    "with a critical `run.failed` saying what to fix; fix it and `sagewarden resume` the run. Throttling, 5xx and timeouts keep waiting."
)
def test_a_transient_error_keeps_deferring_and_resets_the_permanent_clock():
    run = step(make_run(), Submitted(), 0, _gone(permanent=False)).run
    late = step(run, Tick(), 5 * HOUR, _gone(permanent=False))
    assert late.run.status == RunStatus.SUBMITTED  # throttling, 5xx: waits as long as it takes
    first = step(late.run, Tick(), 5 * HOUR + MIN, _gone()).run
    assert first.deferred_permanent_since_ms == 5 * HOUR + MIN
    blip = step(first, Tick(), 5 * HOUR + 20 * MIN, _gone(permanent=False)).run
    assert blip.deferred_permanent_since_ms is None
    again = step(blip, Tick(), 5 * HOUR + 40 * MIN, _gone())
    assert again.run.status == RunStatus.SUBMITTED  # 30 min counts from the error's return


@pytest.mark.claim(
    "with a critical `run.failed` saying what to fix; fix it and `sagewarden resume` the run. Throttling, 5xx and timeouts keep waiting."
)
def test_a_bucket_fixed_in_time_launches_and_clears_the_permanent_clock():
    run = step(make_run(), Submitted(), 0, _gone()).run
    fixed = step(run, Tick(), 29 * MIN, Observations())
    assert len(_launches(fixed)) == 1 and fixed.run.deferred_permanent_since_ms is None


@pytest.mark.claim(
    "An error that does not heal by itself (no such bucket, access denied, a bucket in another region) fails the run when it has lasted **30 minutes**"
)
def test_an_ended_attempt_whose_checkpoints_stay_unreadable_fails_after_the_bound():
    run = training_run(resume=ckpt(300))
    end = run.current.training_started_ms + HOUR
    failed = observed(run, "Failed", "Failed", end, UNKNOWN_FAILURE)
    d = step(run, failed, end + LOG_SETTLE_MS, _gone())  # (its last log lines have had time to land)
    assert d.run.current.end_pending and d.run.status != RunStatus.FAILED
    later = step(d.run, failed, end + LOG_SETTLE_MS + DEFER_FAIL_AFTER_MS, _gone())
    assert later.run.status == RunStatus.FAILED and _launches(later) == []
    assert later.run.current.ended and "does not exist" in later.run.outcome


# ------------------------------------------------------------------------------------------------
# 6. bounded sizes


@pytest.mark.claim(
    "Texts stored on items or published are capped by bytes with valid JSON and a note of what was cut (400 KB items, 256 KB messages)"
)
def test_evidence_and_alert_bodies_are_bounded_by_bytes():
    run = training_run()
    now = run.current.training_started_ms + HOUR
    huge = tuple(f"[algo-{h}] " + "ü" * 5_000 for h in range(1, 200))
    d = step(
        run,
        HangSignal(run.current.job_name, 1, "gpu_idle", "ALARM", now),
        now,
        Observations(log_tail=huge, hosts_triage=huge),
    )
    evidence = "\n".join(d.run.current.evidence).encode()
    assert len(evidence) <= EVIDENCE_MAX_BYTES
    (alert,) = _notifies(d, "hang.detected")
    assert len(alert.body.encode()) <= 64 * 1024 and "cut" in alert.body


# ------------------------------------------------------------------------------------------------
# 8. quota and capacity


def test_fallback_whose_quota_can_never_fit_is_skipped_not_fatal():
    pol = RunPolicy(
        instance_fallbacks=(InstanceChoice("ml.p4de.24xlarge", 8), InstanceChoice("ml.p5.48xlarge", 2))
    )
    run = training_run(pol)
    end = run.current.training_started_ms + HOUR
    cap = "CapacityError: Unable to provision requested ML compute capacity."
    fell_back = step(
        run, observed(run, "Failed", "Failed", end, cap), end, Observations(checkpoint=ckpt(100))
    ).run
    assert fell_back.current.instance_type == "ml.p4de.24xlarge"
    never = QUOTA_MSG.format(itype="ml.p4de.24xlarge", limit=4, used=0, delta=8)
    d = step(fell_back, LaunchRejected(fell_back.current.number, "ResourceLimitExceeded", never), end + 1)
    assert d.run.status == RunStatus.STARTING and 1 in d.run.skipped_choices
    (launch,) = _launches(d)
    assert launch.request["ResourceConfig"]["InstanceType"] == "ml.p5.48xlarge"
    assert launch.attempt == fell_back.current.number  # no job was created: the number is reused
    assert any("skipped" in n.body for n in _notifies(d, "attempt.fallback"))


def test_resuming_run_does_not_announce_the_instances_it_takes_back():
    run = training_run()
    end = run.current.training_started_ms + HOUR
    internal = "InternalServerError: We encountered an internal error.  Please try again."
    d = step(run, observed(run, "Failed", "Failed", end, internal), end, Observations(checkpoint=ckpt(100)))
    assert d.run.status == RunStatus.STARTING
    assert not any(isinstance(a, AnnounceCapacityReleased) for a in d.actions)
    done = step(run, observed(run, "Completed", "Completed", end), end)
    assert AnnounceCapacityReleased("ml.p4d.24xlarge", 2) in done.actions


# ------------------------------------------------------------------------------------------------
# 9 / issue 11. the sweep's first launch, strays of earlier attempts


def test_first_launch_reissued_by_the_sweep_wants_the_newest_checkpoint():
    from sagewarden.domain.lookups import wants_checkpoint

    run = make_run()
    assert wants_checkpoint(run, Tick())
    d = step(run, Tick(), MIN, Observations(checkpoint=ckpt(4_000)))
    (launch,) = _launches(d)
    assert launch.request["Environment"]["SAGEWARDEN_RESUME_STEP"] == "4000"


@pytest.mark.claim(
    "stops stray jobs of any earlier attempt of a finished run (judged against every known attempt, once)"
)
def test_late_events_of_earlier_attempts_of_a_finished_run_stop_nothing():
    run = training_run()
    end = run.current.training_started_ms + HOUR
    internal = "InternalServerError: We encountered an internal error.  Please try again."
    first = run.current
    resumed = step(
        run, observed(run, "Failed", "Failed", end, internal), end, Observations(checkpoint=ckpt(1))
    ).run
    resumed = step(resumed, LaunchAccepted(2), end + 1).run
    resumed = step(resumed, observed(resumed, "InProgress", "Training", end + 10 * MIN), end + 10 * MIN).run
    done = step(resumed, observed(resumed, "Completed", "Completed", end + HOUR), end + HOUR).run
    assert done.status == RunStatus.SUCCEEDED
    # the store loads only the current attempt: attempt 1's late InProgress must not look stray
    only_current = dataclasses.replace(done, attempts=(done.current,))
    late = dataclasses.replace(
        observed(run, "InProgress", "Training", end - MIN), job_name=first.job_name, attempt=1
    )
    d = step(only_current, late, end + 2 * HOUR)
    assert d.ignored is not None and d.actions == () and d.run.strays == ()


# ------------------------------------------------------------------------------------------------
# issue 10: resume a FAILED or CANCELLED run


def _failed_by_crash_loop():
    pol = RunPolicy(max_no_progress_restarts=1)
    run = training_run(pol, resume=ckpt(300))
    end = run.current.training_started_ms + HOUR
    internal = "InternalServerError: We encountered an internal error.  Please try again."
    d = step(run, observed(run, "Failed", "Failed", end, internal), end, Observations(checkpoint=ckpt(300)))
    assert d.run.status == RunStatus.FAILED
    return d.run, end


@pytest.mark.claim(
    "a FAILED or CANCELLED run continues (202): a new attempt from the newest verified checkpoint, with fresh restart and wall-clock budgets"
)
@pytest.mark.claim(
    "Fix it within the time the alert gives; after 30 minutes the run fails, and `sagewarden resume` continues it once fixed."
)
def test_resume_reopens_a_failed_run_with_fresh_budgets_from_the_newest_checkpoint():
    from sagewarden.domain.vocabulary.events import ResumeRequested

    failed, end = _failed_by_crash_loop()
    # its last attempt wrote step 450 before it ended (a checkpoint written since is another
    # run's: tests/unit/domain/test_resuming.py)
    newest = ckpt(450, end - MIN)
    d = step(failed, ResumeRequested("carol"), end + 2 * HOUR, Observations(checkpoint=newest))
    assert d.run.status == RunStatus.STARTING and d.run.outcome is None
    assert d.run.restarts == 0 and d.run.no_progress_streak == 0 and d.run.resumes == 1
    assert d.run.budget_started_ms == end + 2 * HOUR and d.run.resumed_by == "carol"
    (launch,) = _launches(d)
    assert launch.attempt == failed.attempt_count + 1
    assert launch.request["Environment"]["SAGEWARDEN_RESUME_STEP"] == "450"
    assert [n.event for n in _notifies(d)] == ["run.resumed"]


@pytest.mark.claim(
    "409 with the reason if the run is not FAILED or CANCELLED, it ended more than 30 days ago, its checkpoints cannot be read right now, its newest checkpoint was written after it ended (by another run or job: a resume never continues another run's training), or another live run took its name or checkpoint prefix meanwhile; nothing is stored then"
)
def test_resume_refuses_succeeded_and_running_runs_and_unreadable_checkpoints():
    from sagewarden.domain.vocabulary.events import ResumeRequested

    run = training_run()
    assert step(run, ResumeRequested("carol"), HOUR).ignored  # still running
    done = step(run, observed(run, "Completed", "Completed", HOUR), HOUR).run
    assert step(done, ResumeRequested("carol"), 2 * HOUR).ignored  # succeeded: nothing to resume
    failed, end = _failed_by_crash_loop()
    blind = step(failed, ResumeRequested("carol"), end + HOUR, Observations(checkpoint_error=S3_DOWN))
    assert blind.ignored is not None and "checkpoints" in blind.ignored  # never from "no checkpoint"
