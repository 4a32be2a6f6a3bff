"""Issue 18 at the level of the pure decision: quiet signals are judged on the evidence of what
the hosts are doing; a spin or a stuck job is stopped at once, a benign phase waits up to its
ceiling, and no evidence falls back to the policy's window (never to "idle")."""

from __future__ import annotations

import dataclasses

import pytest

from sagewarden.domain.due import next_due_ms
from sagewarden.domain.hangs.quiet import quiet_signals_wait
from sagewarden.domain.vocabulary.actions import StopJob
from sagewarden.domain.vocabulary.events import AlarmsObserved, HangSignal, Observations, Tick
from sagewarden.domain.vocabulary.evidence import HostMetrics
from sagewarden.domain.vocabulary.models import RunStatus
from sagewarden.domain.vocabulary.policy import RunPolicy
from sagewarden.domain.vocabulary.reasons import LogCheck, StopIntent
from tests.builders import HOUR, MIN, step, training_run

GPUS = 8
SILENT = LogCheck.SILENT  # the job's own logs confirm its heartbeat's silence (domain/hangs/heartbeat.py)


def _hosts(
    start: int, end: int, gpu_pct: float, cpu_per_gpu: float, *, n: int = 2
) -> tuple[HostMetrics, ...]:
    minutes = range(start - start % MIN, end - MIN, MIN)
    return tuple(
        HostMetrics(
            f"algo-{h}",
            gpu=tuple((t, gpu_pct * GPUS) for t in minutes),
            cpu=tuple((t, 100 * cpu_per_gpu * GPUS) for t in minutes),
            disk=tuple((t, 25.0) for t in minutes),
        )
        for h in range(1, n + 1)
    )


def _attempt(run, **changes):
    return dataclasses.replace(run, attempts=run.with_attempt(dataclasses.replace(run.current, **changes)))


def _confirmed(run):
    """Its hang alarms seen in CloudWatch (the sweep's first look confirms them)."""
    return _attempt(run, alarms_confirmed=True)


def _learned(window: int = 4, policy: RunPolicy | None = None):
    """A training run whose log-silence window was learned short."""
    return _attempt(_confirmed(training_run(policy)), log_window_min=window)


def _states(run, *alarmed):
    """Every alarm the attempt has, OK but those given as (key, since) in ALARM."""
    rows = dict.fromkeys(("log_silence", "gpu_idle", "gpu_lone_idle"))
    rows.update(dict(alarmed))
    return AlarmsObserved(
        run.current.job_name,
        run.current.number,
        tuple((k, "OK" if since is None else "ALARM", since or 0) for k, since in rows.items()),
    )


def _silent(run, since):
    return _states(run, ("log_silence", since))


def _stopped(d) -> bool:
    return StopJob(d.run.current.job_name, StopIntent.HANG) in d.actions


@pytest.mark.claim("a collective spinning. Stopped at once.")
@pytest.mark.claim(
    "A spinning NCCL hang keeps GPUs at 100 %, so log silence (with the evidence of a spin) is its only fast signal"
)
def test_a_spin_is_stopped_as_soon_as_the_short_window_fires():
    run = _learned()
    t0 = run.current.training_started_ms
    onset = t0 + 2 * HOUR
    since = onset + 6 * MIN  # 4-minute window, plus the late minutes CloudWatch waits out
    now = since + MIN
    d = step(
        run,
        _silent(run, since),
        now,
        Observations(host_metrics=_hosts(onset, now, 99.5, 1.1), heartbeat_check=SILENT),
    )
    assert _stopped(d) and d.run.status == RunStatus.STOPPING
    assert any(line.startswith("evidence: spin: GPUs busy on 2 of 2") for line in d.run.current.evidence)


@pytest.mark.claim("a stuck host among spinning ones too). Stopped at once.")
def test_a_stuck_data_loader_is_stopped_at_once_too():
    run = _learned()
    onset = run.current.training_started_ms + 2 * HOUR
    now = onset + 7 * MIN
    stuck = Observations(host_metrics=_hosts(onset, now, 2.0, 0.1), heartbeat_check=SILENT)
    d = step(run, _silent(run, onset + 6 * MIN), now, stuck)
    assert _stopped(d) and any(line.startswith("evidence: stuck") for line in d.run.current.evidence)


@pytest.mark.claim(
    "a quiet stretch (log silence, a stalled progress metric, the whole job idle) while the hosts' metrics show work (CPU busy, disk space growing) or checkpoint objects land is a benign phase for at most this long"
)
@pytest.mark.claim(
    "waited for up to `benign_phase_max_minutes` (90) of quiet, so a compile that never ends or a save that keeps writing is still stopped"
)
def test_a_compile_waits_while_the_hosts_work_up_to_the_benign_ceiling():
    """A 45- or 60-minute first-step compile was stopped when the start-up allowance ended."""
    run = _confirmed(training_run())
    t0 = run.current.training_started_ms
    since = t0 + 30 * MIN  # the policy's 30-minute window, in ALARM since minute 30
    for minute in (46, 60, 89):
        now = t0 + minute * MIN
        d = step(run, _silent(run, since), now, Observations(host_metrics=_hosts(t0, now, 0.3, 1.0)))
        assert not _stopped(d) and "a benign phase" in (d.ignored or ""), minute
    end = t0 + 91 * MIN  # quiet since Training started, 91 min: past benign_phase_max_minutes (90)
    d = step(
        run,
        _silent(run, since),
        end,
        Observations(host_metrics=_hosts(t0, end, 0.3, 1.0), heartbeat_check=SILENT),
    )
    assert _stopped(d)
    assert any("past the 90-minute ceiling of a benign phase" in line for line in d.run.current.evidence)


@pytest.mark.claim(
    "a quiet stretch (log silence, a stalled progress metric, the whole job idle) while the hosts' metrics show work (CPU busy, disk space growing) or checkpoint objects land is a benign phase for at most this long"
)
@pytest.mark.claim("or a checkpoint object written in the last 5 minutes")
@pytest.mark.claim(
    "waited for up to `benign_phase_max_minutes` (90) of quiet, so a compile that never ends or a save that keeps writing is still stopped"
)
def test_a_checkpoint_save_landing_objects_waits_up_to_the_ceiling():
    run = _learned()
    onset = run.current.training_started_ms + 2 * HOUR
    idle = _hosts(onset, onset + 120 * MIN, 5.0, 0.3)  # a light save: hosts as idle as a stuck job
    now = onset + 20 * MIN
    d = step(
        run, _silent(run, onset + 6 * MIN), now, Observations(host_metrics=idle, save_activity_ms=now - MIN)
    )
    assert not _stopped(d) and "checkpoint save is under way" in d.ignored
    later = onset + 95 * MIN
    d = step(
        run,
        _silent(run, onset + 6 * MIN),
        later,
        Observations(host_metrics=idle, save_activity_ms=later - MIN, heartbeat_check=SILENT),
    )
    assert _stopped(d)


@pytest.mark.claim(
    "so the silence alone decides, on the policy's window (`log_silence_minutes`, 30), as before a window is learned"
)
@pytest.mark.claim(
    'Host metrics that cannot be read, or have not arrived, are unknown evidence, never "idle"'
)
def test_without_evidence_a_short_window_waits_for_the_policys_window():
    run = _learned()
    onset = run.current.training_started_ms + 2 * HOUR
    since = onset + 6 * MIN
    unread = Observations(host_metrics_error="ThrottlingException: Rate exceeded")
    early = step(run, _silent(run, since), onset + 10 * MIN, unread)
    assert not _stopped(early) and "policy's 30 min" in early.ignored  # unknown is not idle
    # quiet counted from the alarm's time less its window (2 minutes after the true onset here)
    assert not _stopped(step(run, _silent(run, since), onset + 31 * MIN, unread))
    late = step(
        run, _silent(run, since), onset + 32 * MIN, dataclasses.replace(unread, heartbeat_check=SILENT)
    )
    assert _stopped(late)
    assert any("no usable evidence" in line for line in late.run.current.evidence)
    # a host whose datapoints have not arrived is unknown too, not idle
    partial = _hosts(onset, onset + 10 * MIN, 2.0, 0.1)[:1]
    d = step(run, _silent(run, since), onset + 10 * MIN, Observations(host_metrics=partial))
    assert not _stopped(d) and "algo-2" in d.ignored


def test_the_whole_job_idle_still_acts_on_its_own_window_without_evidence():
    run = _learned()
    t0 = run.current.training_started_ms
    gpu_idle = _states(run, ("gpu_idle", t0 + 2 * HOUR))
    d = step(run, gpu_idle, t0 + 2 * HOUR + MIN, Observations(host_metrics_error="AccessDenied"))
    assert _stopped(d)


@pytest.mark.claim("learned, else 30 min; never below 4; judged on the evidence")
def test_a_loop_stuck_while_a_thread_logs_is_stopped_on_spin_evidence():
    run = _learned(policy=RunPolicy(progress_metric="train:step"))
    run = _attempt(run, progress_window_min=6)
    onset = run.current.training_started_ms + 2 * HOUR
    now = onset + 9 * MIN
    stalled = AlarmsObserved(
        run.current.job_name,
        1,
        (
            ("log_silence", "OK", 0),
            ("progress_stalled", "ALARM", onset + 8 * MIN),
            ("gpu_idle", "OK", 0),
            ("gpu_lone_idle", "OK", 0),
        ),
    )
    assert _stopped(step(run, stalled, now, Observations(host_metrics=_hosts(onset, now, 99.0, 1.1))))
    # an eval pauses the progress metric too, with its hosts loading data: benign
    assert not _stopped(step(run, stalled, now, Observations(host_metrics=_hosts(onset, now, 72.0, 3.0))))


@pytest.mark.claim("The evidence is read only while a quiet signal is in ALARM")
def test_the_first_pass_without_any_look_up_never_ignores_what_the_evidence_may_decide():
    """The service decides an alarm event once without look-ups (a duplicate costs one read): that
    pass must not take "nothing to do", or the evidence would never be read."""
    run = _learned()
    onset = run.current.training_started_ms + 2 * HOUR
    d = step(run, _silent(run, onset + 6 * MIN), onset + 7 * MIN, Observations())
    assert d.ignored is None


@pytest.mark.claim(
    "While every alarmed signal waits for a benign phase, the log tail and per-host log triage (which only a hang's alert needs) are not read"
)
def test_the_log_tail_is_skipped_only_while_every_alarmed_signal_waits_for_a_benign_phase():
    run = _learned()
    onset = run.current.training_started_ms + 2 * HOUR
    now = onset + 10 * MIN
    compile_ = Observations(host_metrics=_hosts(onset, now, 0.3, 3.0))
    spin = Observations(host_metrics=_hosts(onset, now, 99.0, 1.1), heartbeat_check=SILENT)
    assert quiet_signals_wait(run, _silent(run, onset + 6 * MIN), compile_, now)
    assert not quiet_signals_wait(run, _silent(run, onset + 6 * MIN), spin, now)
    # a spin whose silence its logs contradict (or could not confirm) is no stop: no tail either
    for check in (LogCheck.RECENT, LogCheck.CONTRADICTED, None):
        unconfirmed = dataclasses.replace(spin, heartbeat_check=check)
        assert quiet_signals_wait(run, _silent(run, onset + 6 * MIN), unconfirmed, now), check
    both = AlarmsObserved(
        run.current.job_name, 1, (("log_silence", "ALARM", onset + 6 * MIN), ("gpu_lone_idle", "ALARM", now))
    )
    assert not quiet_signals_wait(run, both, compile_, now)  # a dead host's alert needs its logs
    edge = HangSignal(run.current.job_name, 1, "log_silence", "ALARM", onset + 6 * MIN)
    assert quiet_signals_wait(run, edge, compile_, now)


@pytest.mark.claim(
    "20 minutes of training past the start-up allowance and at least ten of its intervals (the sweep looks at that moment)"
)
def test_the_sweep_looks_at_a_training_attempt_as_soon_as_its_window_can_be_learned():
    run = _confirmed(training_run())
    t0 = run.current.training_started_ms
    learnable = t0 + (45 + 20 + 3) * MIN
    assert next_due_ms(run, t0 + 60 * MIN) == learnable  # not a reconcile interval later
    assert next_due_ms(run, learnable) > learnable  # once due, the routine look
    learned = step(
        run, Tick(), learnable, Observations(heartbeat=tuple((t0 + m * MIN, 6.0) for m in range(68)))
    ).run
    assert learned.current.log_window_min == 4
    assert next_due_ms(learned, t0 + 60 * MIN) > learnable  # nothing left to learn early


def test_without_a_log_subscription_the_sweeps_silence_check_is_judged_on_the_same_evidence():
    """No heartbeat metric: the sweep finds the silence itself (FilterLogEvents) and says for how
    long; the evidence, the policy's window and the benign ceiling apply as to an alarm."""
    no_sub = Observations(log_subscription=False)
    run = _attempt(_confirmed(training_run(obs=no_sub)), log_window_min=4)
    now = run.current.training_started_ms + 3 * HOUR

    def tick(silent_min: int, **evidence):
        obs = dataclasses.replace(no_sub, logs_silent=True, logs_silent_min=silent_min, **evidence)
        return step(run, Tick(), now, obs)

    assert _stopped(tick(4, host_metrics=_hosts(now - 4 * MIN, now, 99.0, 1.1)))  # spin
    assert not _stopped(tick(4, host_metrics=_hosts(now - 4 * MIN, now, 0.3, 3.0)))  # compile
    assert not _stopped(tick(30, host_metrics=_hosts(now - 30 * MIN, now, 0.3, 3.0)))
    assert _stopped(tick(90, host_metrics=_hosts(now - 90 * MIN, now, 0.3, 3.0)))  # the ceiling
    assert not _stopped(tick(4, host_metrics_error="AccessDenied"))  # unknown: the policy's window
    assert _stopped(tick(30, host_metrics_error="AccessDenied"))


def test_a_log_silence_hang_dates_from_the_jobs_newest_log_line_when_it_was_read():
    run = _learned()
    t0 = run.current.training_started_ms
    onset = t0 + 2 * HOUR
    since = onset + 6 * MIN  # the alarm changes state minutes after its 4-minute window began
    now = since + MIN
    hosts = _hosts(onset, now, 99.5, 1.1)
    read = Observations(host_metrics=hosts, log_newest_ms=onset - 20_000, heartbeat_check=SILENT)
    d = step(run, _silent(run, since), now, read)
    assert _stopped(d) and d.run.current.hang_onset_ms == onset - 20_000
    # the newest line unknown (a host unread): the alarm's state change minus its window
    d = step(run, _silent(run, since), now, Observations(host_metrics=hosts, heartbeat_check=SILENT))
    assert _stopped(d) and d.run.current.hang_onset_ms == since - 4 * MIN


# --- no false stop loop after a hang stop (hangs.warming_up_after_hang) --------------------------------


def _resumed_after_a_hang():
    """Attempt 1 (learned a 4-minute window) is stopped for a hang and resumed from step 500 as
    attempt 2, which reaches Training and inherits the window."""
    from sagewarden.domain.vocabulary.events import LaunchAccepted
    from tests.builders import ckpt, observed, on_pool

    run = _learned()
    onset = run.current.training_started_ms + 2 * HOUR
    now = onset + 7 * MIN
    d = step(
        run,
        _silent(run, onset + 6 * MIN),
        now,
        Observations(host_metrics=_hosts(onset, now, 2.0, 0.1), heartbeat_check=SILENT),
    )
    assert _stopped(d)
    run = d.run
    end = now + 2 * MIN
    run = on_pool(
        step(run, observed(run, "Stopped", "Stopped", end), end, Observations(checkpoint=ckpt(500)))
    ).run
    assert run.current.number == 2
    run = step(run, LaunchAccepted(2), end + 2 * MIN).run
    t0 = end + 10 * MIN
    run = step(run, observed(run, "InProgress", "Training", t0), t0).run
    assert run.current.in_training
    return _confirmed(_attempt(run, log_window_min=4)), t0


def test_a_resumed_attempts_stuck_looking_warm_up_after_a_hang_stop_is_not_stopped_again():
    """Its restore and first steps are quiet with the GPUs idle: the evidence a stuck job gives, and
    the stop of attempt 1 rested on it too. Stopped again, every resume would meet the same restore
    (before: a false stop loop)."""
    run, t0 = _resumed_after_a_hang()
    assert run.current.number == 2 and run.current.resume_from.step == 500
    onset = t0 + 46 * MIN  # past the start-up allowance: a restore of a large checkpoint, silent
    now = onset + 7 * MIN
    d = step(
        run,
        _silent(run, onset + 6 * MIN),
        now,
        Observations(host_metrics=_hosts(onset, now, 2.0, 0.1), heartbeat_check=SILENT),
    )
    assert not _stopped(d), d.notes
    assert "warm-up of an attempt resumed after a hang stop" in " ".join((*d.notes, d.ignored or ""))
    # a spin is new evidence: acted on at once
    spin = step(
        run,
        _silent(run, onset + 6 * MIN),
        now,
        Observations(host_metrics=_hosts(onset, now, 99.5, 1.1), heartbeat_check=SILENT),
    )
    assert _stopped(spin)
    # quiet for the policy's window (30 min): a warm-up that never ends is a hang
    late = onset + 33 * MIN
    d = step(
        run,
        _silent(run, onset + 6 * MIN),
        late,
        Observations(host_metrics=_hosts(onset, late, 2.0, 0.1), heartbeat_check=SILENT),
    )
    assert _stopped(d), d.notes


def test_once_the_resumed_attempt_saved_a_checkpoint_stuck_is_evidence_again():
    from tests.builders import ckpt

    run, t0 = _resumed_after_a_hang()
    run = dataclasses.replace(run, last_checkpoint=ckpt(600))  # its first save after the resume
    onset = t0 + 2 * HOUR
    now = onset + 7 * MIN
    d = step(
        run,
        _silent(run, onset + 6 * MIN),
        now,
        Observations(host_metrics=_hosts(onset, now, 2.0, 0.1), heartbeat_check=SILENT),
    )
    assert _stopped(d)
