"""A deployment without the log subscription (logSubscription=false, issue 16): nothing publishes
the heartbeat metric, so no attempt may get a log-silence alarm (missing data counts as breaching:
it would be in ALARM from its first minute and stop every healthy job once start-up is over). The
sweep's own check carries log silence instead, with the window in force."""

from __future__ import annotations

import dataclasses

import pytest

from sagewarden.adapters.cloudwatch_hang_alarms import alarm_specs
from sagewarden.domain.hangs.alarms import alarm_keys
from sagewarden.domain.vocabulary.actions import EnsureHangAlarms, StopJob
from sagewarden.domain.vocabulary.events import AlarmsObserved, HangSignal, Observations, Tick
from sagewarden.domain.vocabulary.models import RunStatus
from sagewarden.domain.vocabulary.policy import RunPolicy
from sagewarden.domain.vocabulary.reasons import StopIntent
from tests.builders import HOUR, MIN, observed, step, training_run

NO_SUB = Observations(log_subscription=False)


def _alarms(run, *rows):
    return AlarmsObserved(run.current.job_name, run.current.number, tuple(rows))


def _activity(t0: int, minutes: int, every: int = 1) -> tuple[tuple[int, float], ...]:
    return tuple((t0 + m * MIN, 3.0) for m in range(0, minutes, every))


def _expected_keys(run, obs):
    """The alarm keys the sweep re-creates for an attempt when CloudWatch holds none of them."""
    d = step(run, _alarms(run), run.current.training_started_ms + MIN, obs)
    (ensure,) = [a for a in d.actions if isinstance(a, EnsureHangAlarms)]
    return set(alarm_keys(ensure))


@pytest.mark.claim("In that mode no heartbeat metric exists, so no attempt gets a log-silence alarm")
def test_training_without_a_subscription_creates_no_log_silence_alarm():
    started = training_run(obs=NO_SUB)
    (ensure,) = [a for a in _training_actions(NO_SUB) if isinstance(a, EnsureHangAlarms)]
    assert "log_silence" not in alarm_keys(ensure) and "gpu_idle" in alarm_keys(ensure)
    assert "log_silence" not in _expected_keys(started, NO_SUB)
    # with the subscription the heartbeat alarm is part of the set
    assert "log_silence" in _expected_keys(training_run(), Observations())


def _training_actions(obs):
    run = training_run(obs=obs, at=10 * MIN)
    before = dataclasses.replace(
        run,
        status=RunStatus.STARTING,
        attempts=(
            dataclasses.replace(
                run.current, sm_secondary="Starting", training_started_ms=None, alarms_active=False
            ),
        ),
    )
    return step(before, observed(before, "InProgress", "Training", 20 * MIN), 20 * MIN, obs).actions


def test_a_leftover_log_silence_alarm_in_alarm_is_not_evidence_without_a_subscription():
    # e.g. an attempt that started before the deployment dropped its subscription: the alarm's
    # metric is no longer fed, so it breaches; stopping on it would stop a healthy job
    run = training_run(obs=NO_SUB)
    t0 = run.current.training_started_ms
    now = t0 + 3 * HOUR
    rows = [("log_silence", "ALARM", now - 30 * MIN), ("gpu_idle", "OK", t0), ("gpu_lone_idle", "OK", t0)]
    d = step(run, _alarms(run, *rows), now, NO_SUB)
    assert not any(isinstance(a, StopJob) for a in d.actions)
    assert d.run.status == RunStatus.TRAINING
    edge = HangSignal(run.current.job_name, 1, "log_silence", "ALARM", now - MIN, source="event")
    e = step(run, edge, now, NO_SUB)
    assert e.ignored is not None and "not watched by an alarm" in e.ignored
    # with a subscription the same alarm is the log-silence signal and acts
    sub = training_run()
    acted = step(sub, _alarms(sub, *rows), now, Observations())
    assert StopJob(sub.current.job_name, StopIntent.HANG) in acted.actions


@pytest.mark.claim(
    "subscribe the heartbeat function to `/aws/sagemaker/TrainingJobs`. Set `false` if the group's two subscription-filter slots are taken; the sweep then checks log silence itself."
)
def test_the_sweeps_silence_check_still_stops_a_silent_job_without_a_subscription():
    run = training_run(obs=NO_SUB)
    t0 = run.current.training_started_ms
    now = t0 + 3 * HOUR
    d = step(run, Tick(), now, Observations(log_subscription=False, logs_silent=True))
    assert StopJob(run.current.job_name, StopIntent.HANG) in d.actions
    assert "log_silence" in d.run.current.hang_signals


def test_a_learned_window_without_a_subscription_re_puts_no_alarm():
    # before: the re-put carried only_keys=() -- which means *every* alarm -- and a log-silence
    # alarm on an unfed metric along with them
    run = training_run(obs=NO_SUB)
    t0 = run.current.training_started_ms
    d = step(run, Tick(), t0 + 4 * HOUR, Observations(log_subscription=False, heartbeat=_activity(t0, 240)))
    assert d.run.current.log_window_min == 4  # learned from the logs' per-minute activity
    assert not any(isinstance(a, EnsureHangAlarms) for a in d.actions)


@pytest.mark.claim("In that mode no heartbeat metric exists, so no attempt gets a log-silence alarm")
def test_no_subscription_spec_has_no_heartbeat_alarm_request():
    run = training_run(RunPolicy(progress_metric="train:step"), obs=NO_SUB)
    d = step(run, _alarms(run), run.current.training_started_ms + MIN, NO_SUB)
    (ensure,) = [a for a in d.actions if isinstance(a, EnsureHangAlarms)]
    assert ensure.log_silence_alarm is False
    requests = alarm_specs(ensure, "sw-hang-", run.run_id)
    assert requests and all(r.get("MetricName") != "LogEvents" for r in requests)
    assert any("progress-stall" in r["AlarmName"] for r in requests)
