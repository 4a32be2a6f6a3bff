"""Issue 9's mechanisms at the level of the pure decision: start-up allowance, lone idle hosts,
windows learned from the attempt's cadence, checkpoint-interval advice (warm pools:
test_decide_warm_pools.py)."""

from __future__ import annotations

import dataclasses

import pytest

from sagewarden.domain.due import next_due_ms
from sagewarden.domain.hangs.quiet import quiet_due_ms
from sagewarden.domain.vocabulary.actions import EnsureHangAlarms, StopJob
from sagewarden.domain.vocabulary.advice import checkpoint_advice
from sagewarden.domain.vocabulary.checkpoint_interval import observed_interval_min
from sagewarden.domain.vocabulary.events import (
    AlarmsObserved,
    LaunchAccepted,
    Observations,
    Tick,
)
from sagewarden.domain.vocabulary.models import RunStatus, startup_kind
from sagewarden.domain.vocabulary.policy import RunPolicy
from sagewarden.domain.vocabulary.reasons import LogCheck, StopIntent
from tests.builders import HOUR, MIN, ckpt, observed, step, training_run

INTERNAL = "InternalServerError: We encountered an internal error.  Please try again."
HARDWARE = "HardwareError: Instance algo-2 failed its health checks (unhealthy instance)."


def _alarms(run, *rows):
    return AlarmsObserved(run.current.job_name, run.current.number, tuple(rows))


# --- a checkpoint save under way is not a hang ---------------------------------------------------


@pytest.mark.claim("or a checkpoint object written in the last 5 minutes")
def test_quiet_signals_wait_while_checkpoint_objects_are_still_landing():
    run = training_run()
    t0 = run.current.training_started_ms
    now = t0 + 200 * MIN
    silent = _alarms(run, ("log_silence", "ALARM", now - MIN))
    saving = step(run, silent, now, Observations(save_activity_ms=now - 2 * MIN))
    assert saving.run.status == RunStatus.TRAINING and not any(isinstance(a, StopJob) for a in saving.actions)
    assert "checkpoint save is under way" in (saving.ignored or " ".join(saving.notes))
    # a hung save lands nothing more: 5 minutes after its last object the signal acts
    hung = step(
        run, silent, now, Observations(save_activity_ms=now - 5 * MIN, heartbeat_check=LogCheck.SILENT)
    )
    assert StopJob(run.current.job_name, StopIntent.HANG) in hung.actions
    # a dead host among busy ones is not a save: the asymmetric signal never waits for S3
    lone = step(
        run, _alarms(run, ("gpu_lone_idle", "ALARM", now - MIN)), now, Observations(save_activity_ms=now)
    )
    assert StopJob(run.current.job_name, StopIntent.HANG) in lone.actions


@pytest.mark.claim("If the bucket cannot be read, the decision is deferred, not guessed")
@pytest.mark.claim(
    'a directory too large for that (100,000 shards is 100 pages) is "unknown", and deferred the same way'
)
@pytest.mark.claim(
    'An S3, Logs or CloudWatch error defers the judgement (retried each minute, an alert after 10 minutes), never "no checkpoint", "silence" or "no progress".'
)
def test_an_unreadable_bucket_defers_the_hang_judgement_and_never_reads_as_no_save():
    run = training_run()
    t0 = run.current.training_started_ms
    now = t0 + 200 * MIN
    silent = _alarms(run, ("gpu_idle", "ALARM", now - MIN))
    unknown = step(run, silent, now, Observations(save_activity_error="SlowDown: reduce your request rate"))
    assert unknown.run.status == RunStatus.TRAINING and not any(
        isinstance(a, StopJob) for a in unknown.actions
    )
    assert unknown.run.deferred_since_ms == now and "SlowDown" in unknown.run.deferred_reason
    later = step(unknown.run, silent, now + MIN, Observations(save_activity_ms=now - 30 * MIN))
    assert (
        StopJob(run.current.job_name, StopIntent.HANG) in later.actions
        and later.run.deferred_since_ms is None
    )


# --- start-up allowance and the lone idle host -----------------------------------------------------


@pytest.mark.claim(
    "after Training starts, log silence, a stalled progress metric and the whole job idle (`gpu_idle`) are not acted on (first-step compile, NCCL init); a lone idle host must hold 10 minutes; learned shorter from comparable attempts"
)
@pytest.mark.claim("NCCL init is as idle as a stuck job (only the start-up allowance holds it)")
@pytest.mark.claim(
    "For `startup_silence_minutes` (45) after Training starts, log silence, a stalled progress metric and the whole job idle (`gpu_idle`) are not acted on"
)
@pytest.mark.claim("during start-up a lone-idle alarm must hold 10 minutes before it acts")
@pytest.mark.claim(
    "An alarm still in ALARM when the allowance ends is acted on then (the sweep looks at that moment, and at the grace period's end: an alarm already in ALARM sends no new state change)."
)
@pytest.mark.claim(
    "The decision guards against it (a lone idle host during start-up must hold 10 minutes; unit-tested), but no drill shows a skew longer than that."
)
def test_log_silence_waits_for_the_start_up_allowance_gpu_asymmetry_does_not():
    run = training_run()
    t0 = run.current.training_started_ms
    compile_silence = step(run, _alarms(run, ("log_silence", "ALARM", t0 + 31 * MIN)), t0 + 32 * MIN)
    assert compile_silence.run.status == RunStatus.TRAINING  # a first-step compile is silent
    # a lone idle host during start-up may be a host still compiling while its peers spin in the
    # first collective: it must hold 10 minutes (a dead host does)
    skew = step(run, _alarms(run, ("gpu_lone_idle", "ALARM", t0 + 18 * MIN)), t0 + 19 * MIN)
    assert skew.run.status == RunStatus.TRAINING and not any(isinstance(a, StopJob) for a in skew.actions)
    lone = step(run, _alarms(run, ("gpu_lone_idle", "ALARM", t0 + 18 * MIN)), t0 + 28 * MIN)
    assert lone.run.status == RunStatus.STOPPING  # still alone and idle: a dead host
    assert StopJob(run.current.job_name, StopIntent.HANG) in lone.actions
    # after start-up a lone idle host acts at once
    late = step(run, _alarms(run, ("gpu_lone_idle", "ALARM", t0 + 60 * MIN)), t0 + 60 * MIN)
    assert StopJob(run.current.job_name, StopIntent.HANG) in late.actions
    still_silent = step(run, _alarms(run, ("log_silence", "ALARM", t0 + 31 * MIN)), t0 + 46 * MIN)
    assert still_silent.run.status == RunStatus.STOPPING  # level re-read after start-up: acted on


@pytest.mark.claim(
    "An alarm still in ALARM when the allowance ends is acted on then (the sweep looks at that moment, and at the grace period's end: an alarm already in ALARM sends no new state change)."
)
@pytest.mark.claim(
    "it is judged only once Training has lasted its window, or the allowance plus the 3 late minutes, whichever comes first (with a 1-minute allowance and a 5-minute window: from minute 4; with the default 45 and 30: from minute 45, as before). Judged earlier, the self-test's 1-minute allowance stopped its job, which logs every 6 seconds, 2.3 minutes into Training."
)
def test_a_silence_alarm_is_not_judged_before_training_has_lasted_what_it_can_see():
    """The log-silence alarm counts a minute without data as silent, and the minutes before
    Training have none while the first minutes' datapoints may still be on their way: 2 minutes
    into Training a 5-minute window is in ALARM on a job that logs all the time. With a 1-minute
    start-up allowance (the self-test's policy) the alarm is judged from 4 minutes on (the
    allowance plus the 3 late minutes: no datapoint by then means the job wrote nothing), and the
    sweep looks again at that moment, since an alarm already in ALARM sends no new change."""
    policy = RunPolicy(
        hang_confirmation="any", startup_silence_minutes=1, hang_grace_minutes=1, log_silence_minutes=5
    )
    run = training_run(policy)
    t0 = run.current.training_started_ms
    early = step(run, _alarms(run, ("log_silence", "ALARM", t0 + 2 * MIN)), t0 + 2 * MIN + 20_000)
    assert early.run.status == RunStatus.TRAINING and not any(isinstance(a, StopJob) for a in early.actions)
    assert quiet_due_ms(early.run, t0 + 2 * MIN + 20_000) == t0 + 4 * MIN
    assert next_due_ms(early.run, t0 + 2 * MIN + 20_000) <= t0 + 4 * MIN
    judged = step(early.run, _alarms(run, ("log_silence", "ALARM", t0 + 2 * MIN)), t0 + 4 * MIN)
    assert StopJob(run.current.job_name, StopIntent.HANG) in judged.actions
    # the policy's 45-minute allowance is longer than any window: judged when it ends, as before
    default = training_run()
    late = step(default, _alarms(default, ("log_silence", "ALARM", t0 + 44 * MIN)), t0 + 45 * MIN)
    assert StopJob(default.current.job_name, StopIntent.HANG) in late.actions


@pytest.mark.claim(
    "An alarm still in ALARM when the allowance ends is acted on then (the sweep looks at that moment, and at the grace period's end: an alarm already in ALARM sends no new state change)."
)
def test_a_silence_alarm_held_by_the_grace_period_is_looked_at_when_it_ends():
    """An allowance learned shorter (10 minutes) than the grace period (15): an alarm in ALARM
    from minute 12 sends no new change at minute 15, so the sweep looks at minute 15 and acts."""
    run = _learned(training_run(), 10)
    t0 = run.current.training_started_ms
    held = step(run, _alarms(run, ("log_silence", "ALARM", t0 + 12 * MIN)), t0 + 12 * MIN)
    assert any("grace" in n for n in held.notes) and held.run.status == RunStatus.TRAINING
    assert quiet_due_ms(held.run, t0 + 12 * MIN) == t0 + 15 * MIN
    acted = step(held.run, _alarms(run, ("log_silence", "ALARM", t0 + 12 * MIN)), t0 + 15 * MIN)
    assert StopJob(run.current.job_name, StopIntent.HANG) in acted.actions


def _learned(run, minutes, kind=None):
    return dataclasses.replace(
        run, startup_learned_min=minutes, startup_learned_on=kind or startup_kind(run.current)
    )


@pytest.mark.claim(
    "after Training starts, log silence, a stalled progress metric and the whole job idle (`gpu_idle`) are not acted on (first-step compile, NCCL init); a lone idle host must hold 10 minutes; learned shorter from comparable attempts"
)
@pytest.mark.claim(
    "a hang early in its next resumed attempt acted on after the 15-minute grace period instead of after 45 minutes"
)
def test_a_start_up_allowance_learned_from_an_earlier_attempt_shortens_the_wait():
    t0 = training_run().current.training_started_ms
    for learned, acts in ((10, True), (None, False)):  # learned 10 min vs the policy's 45
        run = _learned(training_run(), learned)
        silent = step(run, _alarms(run, ("log_silence", "ALARM", t0 + 16 * MIN)), t0 + 16 * MIN)
        assert (StopJob(run.current.job_name, StopIntent.HANG) in silent.actions) is acts
    run = _learned(training_run(), 20)
    inside = step(run, _alarms(run, ("log_silence", "ALARM", t0 + 16 * MIN)), t0 + 16 * MIN)
    assert "20-minute start-up allowance" in (inside.ignored or " ".join(inside.notes))


def test_a_start_up_allowance_learned_from_a_fresh_start_does_not_apply_to_a_resume():
    """Issue 16 item 10: a resumed attempt that spends 20 silent minutes loading its checkpoint
    was stopped 16 minutes into Training on an allowance learned from the fresh first attempt."""
    fresh = training_run()
    resumed = training_run(resume=ckpt(300, at_ms=0))
    t0 = resumed.current.training_started_ms
    run = _learned(resumed, 10, kind=startup_kind(fresh.current))  # learned on the fresh start
    loading = step(run, _alarms(run, ("log_silence", "ALARM", t0 + 16 * MIN)), t0 + 16 * MIN)
    assert not any(isinstance(a, StopJob) for a in loading.actions)
    assert "45-minute start-up allowance" in (loading.ignored or " ".join(loading.notes))
    # learned on a comparable (resumed, same instances) attempt, it applies
    same = _learned(resumed, 10)
    acted = step(same, _alarms(same, ("log_silence", "ALARM", t0 + 16 * MIN)), t0 + 16 * MIN)
    assert StopJob(same.current.job_name, StopIntent.HANG) in acted.actions
    # other instances are not comparable either
    other = _learned(
        training_run(resume=ckpt(300, at_ms=0), instance_count=8), 10, kind=startup_kind(resumed.current)
    )
    waits = step(other, _alarms(other, ("log_silence", "ALARM", t0 + 16 * MIN)), t0 + 16 * MIN)
    assert not any(isinstance(a, StopJob) for a in waits.actions)


@pytest.mark.claim(
    "within 10 minutes of minute 48), 3 × the longest quiet stretch of its first 45 minutes (at least 10, at most 45) becomes the allowance of the run's next *comparable* attempts"
)
def test_the_start_up_allowance_is_learned_with_the_windows():
    run = training_run()
    t0 = run.current.training_started_ms
    now = t0 + 200 * MIN
    heartbeat = tuple((t0 + m * MIN, 5.0) for m in range(0, 199))  # trains (and logs) from its start
    d = step(run, Tick(), now, Observations(heartbeat=heartbeat))
    assert d.run.startup_learned_min == 10 and d.run.startup_learned_on == "ml.p4d.24xlarge x 2 fresh"
    assert any(
        "start-up allowance for the next attempts on ml.p4d.24xlarge x 2 fresh: 10 min" in n for n in d.notes
    )


@pytest.mark.claim(
    "after Training starts, log silence, a stalled progress metric and the whole job idle (`gpu_idle`) are not acted on (first-step compile, NCCL init); a lone idle host must hold 10 minutes; learned shorter from comparable attempts"
)
@pytest.mark.claim("NCCL init is as idle as a stuck job (only the start-up allowance holds it)")
@pytest.mark.claim(
    "For `startup_silence_minutes` (45) after Training starts, log silence, a stalled progress metric and the whole job idle (`gpu_idle`) are not acted on"
)
def test_whole_job_idle_waits_for_the_start_up_allowance():
    # a 30-minute first-step compile (or NCCL init on 256 hosts) leaves every GPU idle: gpu_idle
    # (20 min) enters ALARM inside the allowance and must not stop the job; it is read again after
    run = training_run()
    t0 = run.current.training_started_ms
    compiling = step(run, _alarms(run, ("gpu_idle", "ALARM", t0 + 20 * MIN)), t0 + 21 * MIN)
    assert compiling.run.status == RunStatus.TRAINING
    assert not any(isinstance(a, StopJob) for a in compiling.actions)
    still_idle = step(run, _alarms(run, ("gpu_idle", "ALARM", t0 + 20 * MIN)), t0 + 46 * MIN)
    assert still_idle.run.status == RunStatus.STOPPING  # idle past the allowance: a hang
    assert StopJob(run.current.job_name, StopIntent.HANG) in still_idle.actions
    # the asymmetric signal next to it acts once it has held 10 minutes, inside the allowance
    lone = step(
        run,
        _alarms(run, ("gpu_idle", "ALARM", t0 + 20 * MIN), ("gpu_lone_idle", "ALARM", t0 + 20 * MIN)),
        t0 + 30 * MIN,
    )
    assert lone.run.status == RunStatus.STOPPING and "gpu_lone_idle" in lone.run.current.evidence[0]


def test_lone_idle_hang_names_its_window_in_the_evidence():
    run = training_run(instance_count=16)  # two lone-idle groups: algo-1..8 and algo-9..16
    t0 = run.current.training_started_ms
    d = step(
        run,
        _alarms(run, ("gpu_lone_idle#2", "ALARM", t0 + HOUR)),
        t0 + HOUR + MIN,
        Observations(hosts_triage=("algo-12: GPUUtilization avg 0 (min 0)  <- idle",)),
    )
    assert any("algo-12" in line for line in d.run.current.evidence)
    assert "gpu_lone_idle" in d.run.current.evidence[0]


# --- windows learned from the attempt's cadence ----------------------------------------------------


def _activity(start: int, minutes: int, every: int = 1) -> tuple[tuple[int, float], ...]:
    return tuple((start + m * MIN, 6.0) for m in range(0, minutes, every))


@pytest.mark.claim("learned, else 30 min; never below 4; judged on the evidence")
@pytest.mark.claim("The log-silence and progress windows become 3 × the attempt's")
@pytest.mark.claim("Only alarms whose window changed are re-put")
def test_tick_learns_a_short_log_silence_window_and_re_puts_only_that_alarm():
    run = training_run(RunPolicy(progress_metric="train:step"))
    t0 = run.current.training_started_ms
    now = t0 + 4 * HOUR
    obs = Observations(heartbeat=_activity(t0, 240), progress=_activity(t0, 240, every=2))
    d = step(run, Tick(), now, obs)
    (ensure,) = [a for a in d.actions if isinstance(a, EnsureHangAlarms)]
    assert ensure.log_silence_minutes == 4 and ensure.progress_stall_minutes == 6
    assert set(ensure.only_keys) == {"log_silence", "progress_stalled"}
    assert d.run.current.log_window_min == 4 and d.run.current.progress_window_min == 6
    assert "learned from the attempt's cadence" in "; ".join(d.notes)
    again = step(d.run, Tick(), now + 10 * MIN, obs)
    assert not any(isinstance(a, EnsureHangAlarms) for a in again.actions)


@pytest.mark.claim("a job that logs every 10 minutes keeps a 30-minute one after 100")
def test_tick_keeps_the_window_long_for_a_job_that_logs_every_ten_minutes():
    run = training_run()
    t0 = run.current.training_started_ms
    d = step(run, Tick(), t0 + 5 * HOUR, Observations(heartbeat=_activity(t0, 300, every=10)))
    assert not any(isinstance(a, EnsureHangAlarms) for a in d.actions)  # learned 30 = the policy's
    assert d.run.current.log_window_min is None


@pytest.mark.claim(
    "learn the log-silence and progress windows from the attempt's own cadence (3 × its typical quiet stretch, at least 4 min, once 20 minutes past start-up show it)"
)
@pytest.mark.claim("A job that logs every minute gets a 4-minute window 68 minutes into its first attempt")
@pytest.mark.claim("`adaptive_windows: false` keeps the fixed windows")
def test_no_window_is_learned_without_adaptive_windows_or_before_enough_training():
    run = training_run(RunPolicy(adaptive_windows=False))
    t0 = run.current.training_started_ms
    d = step(run, Tick(), t0 + 5 * HOUR, Observations(heartbeat=_activity(t0, 300)))
    assert not any(isinstance(a, EnsureHangAlarms) for a in d.actions)
    early = training_run()  # 45-minute start-up allowance, then 20 settled minutes of cadence
    d = step(early, Tick(), t0 + 67 * MIN, Observations(heartbeat=_activity(t0, 67)))
    assert not any(isinstance(a, EnsureHangAlarms) for a in d.actions)
    d = step(early, Tick(), t0 + 68 * MIN, Observations(heartbeat=_activity(t0, 68)))
    assert d.run.current.log_window_min == 4


# --- checkpoint-interval advice (Young/Daly) -----------------------------------------------------


@pytest.mark.claim(
    "give the Young/Daly interval √(2 × write time × MTBF) and the GPU-hours per day it would save over the current interval"
)
def test_checkpoint_advice_from_the_runs_own_checkpoints_and_faults():
    run = training_run()
    t0 = run.current.training_started_ms
    history = tuple((100 * i, t0 + i * 30 * MIN, 120.0, 100 * i - 100) for i in range(1, 7))  # every 30 min
    run = dataclasses.replace(
        run, checkpoint_history=history, restarts_by_class={"INFRASTRUCTURE": 3}, training_ms=20 * HOUR
    )
    advice = checkpoint_advice(run, t0 + 4 * HOUR)
    assert advice is not None and advice.gpus == 16 and advice.faults == 3
    assert advice.interval_min == 30 and advice.write_s == 120
    # M = (24 h + prior) / 4 with prior = 1 / (1.97e-5 x 16) h
    prior = 1 / (1.97e-5 * 16)
    assert advice.mtbf_h == pytest.approx((24 + prior) / 4)
    assert advice.optimal_min == pytest.approx((2 * (120 / 3600) * advice.mtbf_h) ** 0.5 * 60)
    assert advice.gpu_hours_per_day_saved is not None and advice.gpu_hours_per_day_saved >= 0
    assert "Young/Daly" in advice.line()


@pytest.mark.parametrize("seen", [(), ((300, 0, 80.0, 200),)], ids=["no-checkpoint", "one-checkpoint"])
def test_checkpoint_advice_says_the_interval_is_not_measured_yet_never_a_question_mark(seen):
    run = training_run()
    t0 = run.current.training_started_ms
    history = tuple((s, t0 + 30 * MIN, w, p) for s, _, w, p in seen)
    advice = checkpoint_advice(dataclasses.replace(run, checkpoint_history=history), t0 + HOUR)
    assert advice is not None and advice.interval_min is None
    line = advice.line()
    assert line.startswith("Checkpoint interval: not measured yet") and "?" not in line
    assert ("optimal ~" in line) == bool(seen)  # one write time measured is enough for the optimum


@pytest.mark.claim(
    "give the Young/Daly interval √(2 × write time × MTBF) and the GPU-hours per day it would save over the current interval"
)
def test_a_resume_alert_gives_the_checkpoint_interval_advice_when_it_would_save():
    """docs/hang-detection.md: the resume alerts give the Young/Daly interval and what it saves."""
    from sagewarden.domain.vocabulary.actions import Notify

    def resumed(history):
        run = training_run()
        t0 = run.current.training_started_ms
        run = dataclasses.replace(
            run, checkpoint_history=history, restarts_by_class={"INFRASTRUCTURE": 3}, training_ms=20 * HOUR
        )
        end = t0 + 4 * HOUR
        d = step(
            run, observed(run, "Failed", "Failed", end, INTERNAL), end, Observations(checkpoint=ckpt(600))
        )
        (alert,) = [a for a in d.actions if isinstance(a, Notify) and a.event == "attempt.resumed"]
        return alert.body.splitlines(), checkpoint_advice(d.run, end)

    t0 = training_run().current.training_started_ms
    every_30 = tuple((100 * i, t0 + i * 30 * MIN, 120.0, 100 * i - 100) for i in range(1, 7))
    lines, advice = resumed(every_30)
    assert advice is not None and advice.worth_telling and advice.line() in lines
    (line,) = [x for x in lines if x.startswith("Checkpoint interval:")]
    assert "every 30 min, write 120 s" in line and "(Young/Daly), saving ~" in line
    # nothing measured yet: no saving to tell, so no line in the alert
    lines, advice = resumed(())
    assert advice is not None and not advice.worth_telling
    assert not [x for x in lines if x.startswith("Checkpoint interval")]


def test_the_interval_is_told_from_the_steps_between_checkpoints_when_sightings_skip_some():
    """Ticks every hour see every other 30-minute checkpoint: the gap between sightings is 60 min,
    the interval is 30 (one step a minute; each checkpoint's next older directory is 30 steps back)."""
    t0 = 1_000 * HOUR
    seen = tuple((60 * i, t0 + 60 * i * MIN, 120.0, 60 * i - 30) for i in range(1, 6))
    assert observed_interval_min(seen) == 30
    unknown = tuple((s, at, w, -1) for s, at, w, _ in seen)  # older items: no previous step stored
    assert observed_interval_min(unknown) == 60
    assert observed_interval_min(seen[:1]) is None


def test_a_new_checkpoint_seen_on_a_tick_is_recorded_for_the_advice():
    run = training_run()
    t0 = run.current.training_started_ms
    seen = dataclasses.replace(ckpt(300, t0 + 30 * MIN), write_seconds=95.0, previous_step=200)
    d = step(run, Tick(), t0 + 35 * MIN, Observations(checkpoint=seen))
    assert d.run.checkpoint_history == ((300, t0 + 30 * MIN, 95.0, 200),)
    same = step(d.run, Tick(), t0 + 45 * MIN, Observations(checkpoint=seen))
    assert same.ignored is not None  # nothing new


@pytest.mark.claim("The evidence is read only while a quiet signal is in ALARM")
def test_only_a_quiet_signal_in_alarm_asks_whether_a_save_is_under_way():
    from sagewarden.domain.hangs.quiet import wants_save_activity
    from sagewarden.domain.vocabulary.events import HangSignal

    run = training_run()
    assert wants_save_activity(_alarms(run, ("log_silence", "ALARM", 0), ("gpu_lone_idle#1", "OK", 0)))
    assert not wants_save_activity(_alarms(run, ("gpu_lone_idle#2", "ALARM", 0), ("log_silence", "OK", 0)))
    job = run.current.job_name
    assert wants_save_activity(HangSignal(job, 1, "gpu_idle", "ALARM", 0))
    assert not wants_save_activity(HangSignal(job, 1, "gpu_lone_idle", "ALARM", 0))
    assert not wants_save_activity(HangSignal(job, 1, "log_silence", "OK", 0))


# --- learned windows carried to the next attempt on the same instances ---------------------------


def _learned_then_resumed(policy: RunPolicy | None = None):
    """Attempt 1 learns 4 / 6-minute windows after 4 h, then ends on an internal error; the run
    resumes as attempt 2, which reaches Training."""
    run = training_run(policy or RunPolicy(progress_metric="train:step"))
    t0 = run.current.training_started_ms
    obs = Observations(heartbeat=_activity(t0, 240), progress=_activity(t0, 240, every=2))
    run = step(run, Tick(), t0 + 4 * HOUR, obs).run
    end = t0 + 5 * HOUR
    run = step(
        run, observed(run, "Failed", "Failed", end, INTERNAL), end, Observations(checkpoint=ckpt(500))
    ).run
    run = step(run, LaunchAccepted(2), end + 1).run
    return step(run, observed(run, "InProgress", "Training", end + 10 * MIN), end + 10 * MIN)


@pytest.mark.claim(
    "learned (≥ 4 min, 20 min past start-up for a job logging every minute; carried to the next attempts on the same instances), else 30 min; never below 4"
)
def test_a_resumed_attempt_on_the_same_instances_starts_with_the_learned_windows():
    d = _learned_then_resumed()
    assert d.run.current.number == 2 and d.run.current.log_window_min is None  # not its own yet
    (ensure,) = [a for a in d.actions if isinstance(a, EnsureHangAlarms)]
    assert ensure.attempt == 2 and ensure.log_silence_minutes == 4 and ensure.progress_stall_minutes == 6
    assert d.run.learned_windows_on == "ml.p4d.24xlarge x 2"


def test_an_attempt_on_other_instances_starts_with_the_policys_windows():
    d = _learned_then_resumed()
    run = dataclasses.replace(d.run, learned_windows_on="ml.p5.48xlarge x 2")  # learned elsewhere
    t = run.current.training_started_ms
    nxt = step(
        run,
        observed(run, "Failed", "Failed", t + HOUR, INTERNAL),
        t + HOUR,
        Observations(checkpoint=ckpt(600)),
    )
    nxt = step(nxt.run, LaunchAccepted(3), t + HOUR + 1).run
    d3 = step(nxt, observed(nxt, "InProgress", "Training", t + HOUR + 10 * MIN), t + HOUR + 10 * MIN)
    (ensure,) = [a for a in d3.actions if isinstance(a, EnsureHangAlarms)]
    assert ensure.attempt == 3 and ensure.log_silence_minutes == 30 and ensure.progress_stall_minutes == 30


def test_relearning_one_window_keeps_the_other_carried_one():
    d = _learned_then_resumed()
    run = d.run
    t0 = run.current.training_started_ms
    # attempt 2 relearns only the progress window (its heartbeat shows the same 4-minute cadence)
    obs = Observations(heartbeat=_activity(t0, 240), progress=_activity(t0, 240, every=4))
    d2 = step(run, Tick(), t0 + 4 * HOUR, obs)
    assert d2.run.current.progress_window_min == 12 and d2.run.current.log_window_min is None
    assert d2.run.learned_log_window_min == 4 and d2.run.learned_progress_window_min == 12
