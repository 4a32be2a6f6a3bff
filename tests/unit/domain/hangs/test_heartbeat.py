"""A broken heartbeat must not stop healthy jobs (issue 32; domain/hangs/heartbeat.py, domain/hangs/confirm.py).

The heartbeat metric is derived, the job's logs are the truth: a stop on the heartbeat's log
silence alone is confirmed in the job's training streams first; logs that contradict the silence
doubt the attempt's heartbeat (its log silence is then judged from its logs until its alarm is OK
again); and the deployment's pipeline is judged from levels -- broken when no log-silence alarm is
OK while some attempt's logs contradict its heartbeat, healed by the first OK."""

from __future__ import annotations

import dataclasses

import pytest

from sagewarden.domain.hangs.heartbeat import (
    SETTLE_MS,
    PipelineHealth,
    PipelineLevel,
    confirm_windows,
    judge_pipeline,
)
from sagewarden.domain.hangs.quiet import quiet_signals_wait, silence_from_logs, silence_to_confirm
from sagewarden.domain.vocabulary.actions import Notify, StopJob
from sagewarden.domain.vocabulary.events import AlarmsObserved, HangSignal, Observations, Tick
from sagewarden.domain.vocabulary.evidence import HostMetrics
from sagewarden.domain.vocabulary.models import RunStatus
from sagewarden.domain.vocabulary.reasons import LogCheck, StopIntent
from tests.builders import HOUR, MIN, step, training_run

GPUS = 8


def _spin(start: int, end: int, n: int = 4) -> tuple[HostMetrics, ...]:
    """Every host's GPUs busy with a core per GPU: what a spinning collective -- and, as the issue
    saw it, a healthy job whose evidence reads like one -- shows."""
    minutes = range(start - start % MIN, end - MIN, MIN)
    return tuple(
        HostMetrics(
            f"algo-{h}",
            gpu=tuple((t, 99.5 * GPUS) for t in minutes),
            cpu=tuple((t, 110.0 * GPUS) for t in minutes),
            disk=tuple((t, 25.0) for t in minutes),
        )
        for h in range(1, n + 1)
    )


def _training(**attempt):
    run = training_run(instance_count=4)
    cur = dataclasses.replace(run.current, alarms_confirmed=True, log_window_min=4, **attempt)
    return dataclasses.replace(run, attempts=run.with_attempt(cur))


def _alarms(run, log_silence_state: str, since: int) -> AlarmsObserved:
    return AlarmsObserved(
        run.current.job_name,
        run.current.number,
        (("log_silence", log_silence_state, since), ("gpu_idle", "OK", 0), ("gpu_lone_idle", "OK", 0)),
    )


def _stopped(d) -> bool:
    return StopJob(d.run.current.job_name, StopIntent.HANG) in d.actions


@pytest.fixture
def quiet():
    """A training attempt 3 hours in, its 4-minute heartbeat alarm in ALARM for 2 minutes, its
    hosts reading like a spin: (run, event, now, the evidence as the service read it)."""
    run = _training()
    onset = run.current.training_started_ms + 3 * HOUR
    since = onset + 5 * MIN
    now = since + 2 * MIN
    return run, _alarms(run, "ALARM", since), now, Observations(host_metrics=_spin(onset, now))


def test_a_stop_on_the_heartbeats_silence_needs_the_jobs_logs_to_confirm_it(quiet):
    run, event, now, evidence = quiet
    silent = step(run, event, now, dataclasses.replace(evidence, heartbeat_check=LogCheck.SILENT))
    assert _stopped(silent) and silent.run.status == RunStatus.STOPPING
    assert any("its logs confirm it: no line for 4 min" in line for line in silent.run.current.evidence)

    recent = step(run, event, now, dataclasses.replace(evidence, heartbeat_check=LogCheck.RECENT))
    assert not _stopped(recent) and "not silent" in (recent.ignored or "")
    assert recent.run.current.heartbeat_doubted_ms is None  # lines the heartbeat may not show yet


@pytest.mark.claim(
    "its heartbeat is *doubted*, and its log silence is judged from its logs by the sweep, as without a subscription, until its log-silence alarm is OK again"
)
@pytest.mark.parametrize("doubted_before", [False, True], ids=["first contradiction", "already doubted"])
def test_logs_with_lines_the_heartbeat_never_showed_doubt_it_and_stop_nothing(quiet, doubted_before):
    run, event, now, evidence = quiet
    contradicted = step(run, event, now, dataclasses.replace(evidence, heartbeat_check=LogCheck.CONTRADICTED))
    assert not _stopped(contradicted) and contradicted.run.status == RunStatus.TRAINING
    assert contradicted.run.current.heartbeat_doubted_ms == now
    assert any("heartbeat pipeline failed this job" in n for n in contradicted.notes)
    assert silence_from_logs(contradicted.run.current, Observations())
    if doubted_before:  # the alarm's ALARM is no evidence any more: one look-up-free decision
        again = step(contradicted.run, event, now + MIN, Observations())
        assert again.ignored is not None and not again.actions


@pytest.mark.claim(
    "If the read keeps failing for hours, the heartbeat alone never stops the job (the GPU signals still act on their own)"
)
@pytest.mark.parametrize(
    "evidence",
    [
        Observations(heartbeat_check_error="ThrottlingException: Rate exceeded"),
        Observations(),  # evidence read, the logs not: unknown as well
    ],
    ids=["the confirming read failed", "the confirming read was not made"],
)
def test_an_unconfirmed_silence_is_unknown_deferred_and_told_after_ten_minutes(quiet, evidence):
    run, event, now, spin = quiet
    obs = dataclasses.replace(
        spin, heartbeat_check=None, heartbeat_check_error=evidence.heartbeat_check_error
    )
    first = step(run, event, now, obs)
    assert not _stopped(first) and first.run.deferred_since_ms == now
    assert "cannot be confirmed in the job's logs" in (first.run.deferred_reason or "")
    # the read keeps failing: never a stop on it; a person is told once, ten minutes on
    later = step(first.run, event, now + 10 * MIN, obs)
    assert not _stopped(later)
    assert [a.event for a in later.actions if isinstance(a, Notify)] == ["run.deferred"]
    # the read heals: the stop the logs confirm clears the deferral
    healed = step(
        later.run, event, now + 11 * MIN, dataclasses.replace(spin, heartbeat_check=LogCheck.SILENT)
    )
    assert _stopped(healed) and healed.run.deferred_since_ms is None


@pytest.mark.claim(
    "its heartbeat is *doubted*, and its log silence is judged from its logs by the sweep, as without a subscription, until its log-silence alarm is OK again"
)
def test_a_doubted_heartbeat_is_trusted_again_once_its_alarm_is_ok(quiet):
    run, event, now, evidence = quiet
    doubted = step(run, event, now, dataclasses.replace(evidence, heartbeat_check=LogCheck.CONTRADICTED)).run
    back = step(doubted, _alarms(doubted, "OK", now + 20 * MIN), now + 21 * MIN, Observations())
    assert back.run.current.heartbeat_doubted_ms is None
    assert any("log silence is judged on the heartbeat again" in n for n in back.notes)
    # an OK edge from EventBridge heals it too
    edge = HangSignal(doubted.current.job_name, 1, "log_silence", "OK", now + 20 * MIN)
    assert step(doubted, edge, now + 21 * MIN, Observations()).run.current.heartbeat_doubted_ms is None


@pytest.mark.claim(
    "its heartbeat is *doubted*, and its log silence is judged from its logs by the sweep, as without a subscription, until its log-silence alarm is OK again"
)
def test_a_doubted_attempt_is_still_stopped_when_its_logs_go_silent(quiet):
    """Judged from its logs (the sweep's own check), a hang after the contradiction is caught."""
    run, event, now, evidence = quiet
    doubted = step(run, event, now, dataclasses.replace(evidence, heartbeat_check=LogCheck.CONTRADICTED)).run
    later = now + HOUR
    tick = Observations(logs_silent=True, logs_silent_min=4, host_metrics=_spin(later - 10 * MIN, later))
    d = step(doubted, Tick(), later, tick)
    assert _stopped(d)
    assert any(
        "sweep check: its heartbeat contradicted by its logs" in line for line in d.run.current.evidence
    )


def test_while_the_pipeline_is_broken_no_heartbeat_alarm_is_evidence_and_the_logs_decide(quiet):
    run, event, now, evidence = quiet
    broken = Observations(heartbeat_broken=True)
    assert silence_from_logs(run.current, broken)
    d = step(run, event, now, dataclasses.replace(broken, host_metrics=evidence.host_metrics))
    assert not _stopped(d) and d.ignored == "alarms as expected"  # its ALARM is no signal
    assert (
        silence_to_confirm(run, event, dataclasses.replace(broken, host_metrics=evidence.host_metrics), now)
        is None
    )
    tick = dataclasses.replace(
        broken, logs_silent=True, logs_silent_min=4, host_metrics=evidence.host_metrics
    )
    assert _stopped(step(run, Tick(), now, tick))


@pytest.mark.claim("While a benign phase is waited for, the logs are looked up once per ALARM stretch too")
def test_during_a_benign_phase_the_logs_are_looked_up_once_per_alarm_stretch():
    """Healthy training reads as work on its hosts' CPU: without this look-up a job whose heartbeat
    broke was waited for up to the benign ceiling (90 min) before anything knew."""
    run = _training()
    onset = run.current.training_started_ms + 3 * HOUR
    since = onset + 5 * MIN
    now = since + 2 * MIN
    working = tuple(
        dataclasses.replace(h, cpu=tuple((t, 300.0 * GPUS) for t, _ in h.cpu)) for h in _spin(onset, now)
    )
    obs = Observations(host_metrics=working)
    event = _alarms(run, "ALARM", since)
    windows = silence_to_confirm(run, event, obs, now)
    assert windows is not None and windows.stale_until_ms == now - SETTLE_MS
    looked = step(run, event, now, dataclasses.replace(obs, heartbeat_check=LogCheck.SILENT))
    assert not _stopped(looked) and looked.run.current.heartbeat_checked_ms == since
    assert silence_to_confirm(looked.run, event, obs, now + MIN) is None  # not again this stretch
    contradicted = step(run, event, now, dataclasses.replace(obs, heartbeat_check=LogCheck.CONTRADICTED))
    assert not _stopped(contradicted) and contradicted.run.current.heartbeat_doubted_ms == now
    # a new ALARM stretch is looked at again
    assert silence_to_confirm(looked.run, _alarms(run, "ALARM", now + HOUR), obs, now + HOUR + 2 * MIN)


def test_the_confirming_read_is_asked_for_only_where_a_stop_on_the_heartbeat_would_follow(quiet):
    run, event, now, evidence = quiet
    assert silence_to_confirm(run, event, evidence, now) == confirm_windows(4, event.states[0][2], now)
    lone = AlarmsObserved(
        run.current.job_name, 1, (("log_silence", "ALARM", now - MIN), ("gpu_lone_idle", "ALARM", now))
    )
    assert silence_to_confirm(run, lone, evidence, now) is None  # a dead host acts on its own metrics
    no_sub = dataclasses.replace(evidence, log_subscription=False)
    assert silence_to_confirm(run, event, no_sub, now) is None  # log silence comes from the logs already
    # after the read: a confirmed spin acts (the tail is read), an unconfirmed one waits (it is not)
    assert not quiet_signals_wait(
        run, event, dataclasses.replace(evidence, heartbeat_check=LogCheck.SILENT), now
    )
    assert quiet_signals_wait(run, event, dataclasses.replace(evidence, heartbeat_check=LogCheck.RECENT), now)


def test_the_confirming_windows_follow_the_alarm_and_the_late_heartbeat():
    now = 10 * HOUR
    w = confirm_windows(4, now - 2 * MIN, now)
    assert w.recent_ms == now - 4 * MIN  # a line in the silence window: not silent
    # a line written before now - SETTLE_MS and after the alarm's window began would have reached a
    # delivering heartbeat and ended the ALARM by now
    assert (w.stale_ms, w.stale_until_ms) == (now - 6 * MIN, now - SETTLE_MS)
    assert confirm_windows(4, now, now).stale_until_ms is None  # a brand-new ALARM cannot tell yet
    assert confirm_windows(1, now, now).recent_ms == now - 4 * MIN  # never below the alarm's floor


@pytest.mark.claim(
    "No log-silence alarm OK while an attempt is doubted: the heartbeat stopped for every job at once"
)
def test_the_pipeline_is_broken_only_when_no_heartbeat_arrives_for_any_job_and_logs_contradict_it():
    healthy = PipelineHealth()
    now = 5 * HOUR
    broken, alert = judge_pipeline(
        healthy, PipelineLevel(flowing=0, silent=5, doubted=("job-b", "job-a")), now
    )
    assert broken == PipelineHealth(now, ("job-a", "job-b"), now, 1)
    assert alert is not None and alert.event == "heartbeat.broken" and alert.severity == "warning"
    assert "run_id" not in alert.attributes and "job-a, job-b" in alert.body
    # one alarm still sees a heartbeat: not the pipeline (the doubted jobs are judged from their logs)
    assert judge_pipeline(healthy, PipelineLevel(1, 4, ("job-a",)), now) == (healthy, None)
    # silent alarms without a contradiction: quiet jobs, not a broken pipeline
    assert judge_pipeline(healthy, PipelineLevel(0, 5, ()), now) == (healthy, None)
    # broken stays broken (one alert, not one per pass or per job) until a heartbeat arrives
    assert judge_pipeline(broken, PipelineLevel(0, 7, ("job-a", "job-c")), now + HOUR) == (broken, None)
    assert judge_pipeline(broken, PipelineLevel(0, 0, ()), now + HOUR) == (broken, None)
    healed, told = judge_pipeline(broken, PipelineLevel(1, 6, ("job-a",)), now + 2 * HOUR)
    assert healed == PipelineHealth(None, (), now + 2 * HOUR, 2)
    assert told is not None and told.event == "heartbeat.restored" and "after 120 min" in told.subject


def test_the_broken_pipelines_alert_names_at_most_ten_jobs():
    jobs = tuple(f"job-{i:02d}" for i in range(25))
    health, alert = judge_pipeline(PipelineHealth(), PipelineLevel(0, 25, jobs), HOUR)
    assert len(health.jobs) == 10 and alert is not None and "(+15)" in alert.body
