"""The sweep finishes what a crashed function left undone, on the local account."""

from __future__ import annotations

import dataclasses

import pytest

from drill.account.local import BUCKET, EXECUTION_ROLE, LocalAccount
from drill.scenarios.spec import default_training_job
from drill.sim.model import Fault
from sagewarden.domain.vocabulary.actions import EnsureHangAlarms
from sagewarden.domain.vocabulary.models import LaunchState, RunStatus

MIN = 60_000


@pytest.fixture
def acct(template):
    with LocalAccount(template, store="memory") as account:
        yield account


def _submit(acct, name="llama-8b"):
    status, run = acct.api(
        "POST",
        "/runs",
        body={"name": name, "training_job": default_training_job(name, BUCKET, EXECUTION_ROLE)},
    )
    assert status == 201, run
    return run


class _DyingLauncher:
    """CreateTrainingJob never answers (the function died / timed out after saving the intent)."""

    def __init__(self, inner):
        self.inner = inner
        self.calls = 0

    def launch(self, attempt, request):
        self.calls += 1
        return None

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.mark.claim(
    'a launch still PENDING after 2 minutes (its deterministic name makes a duplicate answer `ResourceInUse`, which counts as "already submitted"), or a stop not confirmed after 5 minutes'
)
@pytest.mark.claim("If a function dies between saving and acting, the sweep re-issues what is missing")
def test_sweep_reissues_a_launch_that_never_happened(acct):
    real = acct.supervisor.launcher
    acct.supervisor.launcher = _DyingLauncher(real)
    run = _submit(acct)
    assert run["attempts"][0]["launch"] == "PENDING" and acct.sagemaker.jobs() == []
    acct.supervisor.launcher = real
    acct.clock.advance_to(acct.clock.now_ms + MIN)
    acct.run_sweep()
    assert acct.sagemaker.jobs() == []  # not yet: the intent is recent
    acct.clock.advance_to(acct.clock.now_ms + 2 * MIN)
    acct.run_sweep()
    jobs = acct.sagemaker.jobs()
    assert [j.name for j in jobs] == [run["attempts"][0]["job_name"]]  # same name: no second job possible
    stored = acct.supervisor.store.get(run["run_id"])
    assert stored.current.launch == LaunchState.SUBMITTED and stored.current.number == 1


@pytest.mark.claim("never launches two jobs for one run")
@pytest.mark.claim("CreateTrainingJob (deterministic name)")
@pytest.mark.claim(
    'a launch still PENDING after 2 minutes (its deterministic name makes a duplicate answer `ResourceInUse`, which counts as "already submitted"), or a stop not confirmed after 5 minutes'
)
@pytest.mark.claim(
    "This mechanism covers timers, lost events and lost actions, needs no extra IAM role or per-run schedule to clean up, and is idempotent."
)
def test_sweep_relaunch_of_an_existing_job_is_idempotent(acct):
    run = _submit(acct)
    stored = acct.supervisor.store.get(run["run_id"])
    # pretend the acceptance was never recorded: the job exists, the run still says PENDING
    pending = dataclasses.replace(
        stored, attempts=(dataclasses.replace(stored.current, launch=LaunchState.PENDING),)
    )
    acct.supervisor.store.save(pending, stored, [], due_ms=0)
    acct.clock.advance_to(acct.clock.now_ms + 3 * MIN)
    acct.run_sweep()
    assert len(acct.sagemaker.jobs()) == 1
    # the reconciler's DescribeTrainingJob finds the job: recorded as submitted, nothing relaunched
    assert acct.supervisor.store.get(run["run_id"]).current.launch == LaunchState.SUBMITTED
    _, events = acct.api("GET", f"/runs/{run['run_id']}/events", query={"limit": "100"})
    assert any("(from describe)" in e["summary"] for e in events["events"])
    assert sum("LaunchAttempt" in e["summary"] for e in events["events"]) == 1


@pytest.mark.claim(
    "This mechanism covers timers, lost events and lost actions, needs no extra IAM role or per-run schedule to clean up, and is idempotent."
)
@pytest.mark.claim(
    "Events that failed 8 deliveries. The sweep reconciles every live attempt about every 10 minutes anyway"
)
def test_sweep_reobserves_lost_events_and_resumes(acct):
    acct.delivery = dataclasses.replace(acct.delivery, drop_rate=1.0)  # EventBridge loses everything
    run = _submit(acct)
    acct.sagemaker.advance(acct.clock.now_ms + 15 * MIN)
    acct.run_sweep()
    stored = acct.supervisor.store.get(run["run_id"])
    assert stored.status == RunStatus.TRAINING  # learnt from DescribeTrainingJob, not from events


@pytest.mark.claim(
    "the sweep works through due runs in round-robin shards under a time budget, and every AWS list call follows its token"
)
def test_sweep_stops_taking_work_before_its_timeout(acct):
    for i in range(3):
        _submit(acct, f"run-{i}")
    acct.clock.advance_to(acct.clock.now_ms + 20 * MIN)
    report = acct.supervisor.sweep(time_left_ms=lambda: 5_000)
    assert report.due == 0 and report.out_of_time and report.observed == 0
    report = acct.supervisor.sweep(time_left_ms=lambda: 50_000)
    assert report.due == 3 and not report.out_of_time and report.observed == 3


@pytest.mark.claim("the sweep deletes those of no run it knows")
def test_sweep_cleanup_deletes_alarms_of_ended_attempts_only(acct):
    live = _submit(acct, "live")
    spec = EnsureHangAlarms("sw-gone-01KE5Q86000DNQ47GXEV9VZMPH-a001", 1, 2, 8, 30, 1.0, 20)
    acct.supervisor.alarms.ensure(spec, "01KE5Q86000DNQ47GXEV9VZMPH")
    job = live["attempts"][0]["job_name"]
    acct.supervisor.alarms.ensure(dataclasses.replace(spec, job_name=job), live["run_id"])
    report = acct.supervisor.sweep(cleanup_alarms=True)
    assert report.alarms_deleted == 3  # log silence, whole-job idle and lone idle of the unknown job
    assert sorted(acct.supervisor.alarms.inventory()) == [job]


@pytest.mark.claim(
    "subscribe the heartbeat function to `/aws/sagemaker/TrainingJobs`. Set `false` if the group's two subscription-filter slots are taken; the sweep then checks log silence itself."
)
@pytest.mark.claim(
    "If that is too much, deploy with `CONTEXT='-c logSubscription=false'` (the sweep then checks log silence itself)"
)
def test_sweep_log_silence_fallback_without_subscription(template):
    # every progress line reaches CloudWatch Logs (the default writes one per 10 minutes for speed)
    with LocalAccount(template, store="memory", progress_log_interval_s=60) as acct:
        acct.supervisor.settings = dataclasses.replace(acct.supervisor.settings, log_silence_fallback=True)
        run = _submit(acct)
        acct.sagemaker.inject(Fault(kind="stuck_dataloader", run="llama-8b", after_training_min=20))
        acct.sagemaker.advance(acct.clock.now_ms + 15 * MIN)
        acct.deliver_due()
        started = acct.supervisor.store.get(run["run_id"]).current.training_started_ms
        assert started is not None
        acct.sagemaker.advance(started + (20 + 25) * MIN)  # silent for 25 min
        acct.run_sweep()
        assert acct.supervisor.store.get(run["run_id"]).status == RunStatus.TRAINING
        acct.sagemaker.advance(started + (20 + 36) * MIN)  # silent for 36 min, and due again (10-min cadence)
        acct.run_sweep()
        stored = acct.supervisor.store.get(run["run_id"])
        assert stored.status == RunStatus.STOPPING and stored.current.stop_intent == "hang"
        assert any("sweep check" in line for line in stored.current.evidence)


@pytest.mark.claim(
    "like the alarm, never fewer than 4 minutes, since log lines land late too and the newest 3 minutes alone must not read as silence"
)
def test_sweep_log_silence_fallback_judges_no_fewer_minutes_than_lines_may_be_late(template):
    """Log lines land late (here every line 150 s after it is written). A 2-minute window read as
    "no line since 2 minutes ago" would find a job that logs every minute silent at every sweep;
    like the alarm, the sweep's check judges at least the late minutes plus one (4)."""
    late_lines = {"logs": {"base_s": 150, "jitter_s": 0, "late_rate": 0}}
    with LocalAccount(template, store="memory", progress_log_interval_s=60, metric_delay=late_lines) as acct:
        acct.supervisor.settings = dataclasses.replace(acct.supervisor.settings, log_silence_fallback=True)
        policy = {"log_silence_minutes": 2, "startup_silence_minutes": 10, "adaptive_windows": False}
        status, run = acct.api(
            "POST",
            "/runs",
            body={
                "name": "llama-8b",
                "training_job": default_training_job("llama-8b", BUCKET, EXECUTION_ROLE),
                "policy": policy,
            },
        )
        assert status == 201, run
        acct.sagemaker.advance(acct.clock.now_ms + 15 * MIN)
        acct.deliver_due()
        started = acct.supervisor.store.get(run["run_id"]).current.training_started_ms
        assert started is not None
        for minute in range(12, 40, 2):
            acct.sagemaker.advance(started + minute * MIN)
            acct.run_sweep()
            stored = acct.supervisor.store.get(run["run_id"])
            assert stored.status == RunStatus.TRAINING, (minute, stored.current.evidence)


@pytest.mark.claim('The sweep\'s routine "still fine" look-ups are not audited')
def test_sweep_reads_a_due_run_once_per_pass(acct, monkeypatch):
    """Issue 18 (cheaper per call): the sweep's pass over a training run read it three to four
    times (the job observed, the alarms compared, the tick); each step now hands on the run it
    read or saved."""
    run_id = _submit(acct)["run_id"]
    for _ in range(40):  # into Training, alarms confirmed
        acct.clock.advance_to(acct.clock.now_ms + MIN)
        acct.sagemaker.advance(acct.clock.now_ms)
        acct.deliver_due()
        acct.run_sweep()
    assert acct.api("GET", f"/runs/{run_id}")[1]["status"] == "TRAINING"
    reads: list[str] = []
    real_get = acct.supervisor.store.get

    def counted(rid, **kwargs):
        reads.append(rid)
        return real_get(rid, **kwargs)

    monkeypatch.setattr(acct.supervisor.store, "get", counted)
    acct.clock.advance_to(acct.clock.now_ms + 11 * MIN)  # due again (the reconcile interval)
    acct.sagemaker.advance(acct.clock.now_ms)
    report = acct.supervisor.sweep()
    assert report.due >= 1 and report.observed == 1
    assert reads.count(run_id) == 1, reads


@pytest.mark.claim('The sweep\'s routine "still fine" look-ups are not audited')
def test_a_routine_sweep_look_up_writes_no_audit_entry(acct):
    """README: the sweep's routine "still fine" look-ups are not audited, so a months-long run's
    trail holds what happened."""
    from drill.sim.model import JobProfile

    acct.sagemaker.set_profile("llama-8b", JobProfile(total_steps=10**7, checkpoint_every_steps=10**6))
    run_id = _submit(acct)["run_id"]
    for _ in range(75):  # into Training, alarms confirmed, the start-up allowance learned (45 min)
        acct.clock.advance_to(acct.clock.now_ms + MIN)
        acct.sagemaker.advance(acct.clock.now_ms)
        acct.deliver_due()
        acct.run_sweep()
    assert acct.api("GET", f"/runs/{run_id}")[1]["status"] == "TRAINING"

    def trail() -> list[str]:
        return [
            e["summary"]
            for e in acct.api("GET", f"/runs/{run_id}/events", query={"limit": "100"})[1]["events"]
        ]

    before = trail()
    looked = 0
    for _ in range(3):  # three reconcile intervals: each pass describes the job and finds it fine
        acct.clock.advance_to(acct.clock.now_ms + 11 * MIN)
        acct.sagemaker.advance(acct.clock.now_ms)
        looked += acct.supervisor.sweep().observed
    assert looked >= 3 and acct.api("GET", f"/runs/{run_id}")[1]["status"] == "TRAINING"
    after = trail()
    assert after == before, after[len(before) :]  # nothing changed, so nothing was written


@pytest.mark.claim(
    "A training attempt is looked at every third of its window (at least every 2 minutes, at most every reconcile interval)"
)
@pytest.mark.claim(
    "so silence is acted on at most a third of the window later than an alarm would (with the policy's 30 minutes, up to 10 minutes)"
)
def test_without_a_subscription_a_training_attempt_is_looked_at_every_third_of_its_window(acct):
    """docs/hang-detection.md: without a log subscription the sweep's own silence check looks at a
    training attempt every third of its window, at least every 2 minutes, at most every reconcile
    interval; with a subscription (the alarms watch) every reconcile interval."""
    from sagewarden.domain.vocabulary.policy import RunPolicy
    from tests.builders import training_run

    def learned(run, minutes):
        *older, cur = run.attempts
        return dataclasses.replace(run, attempts=(*older, dataclasses.replace(cur, log_window_min=minutes)))

    sup = acct.supervisor
    hour = 60 * MIN
    sup.settings = dataclasses.replace(sup.settings, reconcile_interval_ms=hour)
    policy_30 = training_run()  # the policy's 30-minute window
    learned_4 = learned(policy_30, 4)
    long_window = training_run(RunPolicy(log_silence_minutes=600))
    assert [sup.reconcile_interval_ms(r) for r in (policy_30, learned_4, long_window)] == [hour] * 3
    sup.settings = dataclasses.replace(sup.settings, log_silence_fallback=True)
    assert sup.reconcile_interval_ms(policy_30) == 10 * MIN
    assert sup.reconcile_interval_ms(learned(policy_30, 12)) == 4 * MIN
    assert sup.reconcile_interval_ms(learned_4) == 2 * MIN  # a third of 4 is 80 s: at least 2 minutes
    assert sup.reconcile_interval_ms(long_window) == hour  # a third of 600 is 200: at most the interval


def test_a_heartbeat_not_to_be_trusted_is_looked_at_every_third_of_its_window_too(acct):
    """domain/hangs/heartbeat.py: an attempt whose logs contradicted its heartbeat, or any training
    attempt while the deployment's pipeline is broken, has its log silence judged from its logs:
    the sweep looks every third of its window, as without a subscription."""
    from sagewarden.domain.hangs.heartbeat import PipelineHealth
    from tests.builders import training_run

    sup = acct.supervisor
    sup.settings = dataclasses.replace(sup.settings, reconcile_interval_ms=60 * MIN)
    run = training_run()
    *older, cur = run.attempts
    learned = dataclasses.replace(cur, log_window_min=12)
    trusted = dataclasses.replace(run, attempts=(*older, learned))
    doubted = dataclasses.replace(
        run, attempts=(*older, dataclasses.replace(learned, heartbeat_doubted_ms=1))
    )
    assert sup.reconcile_interval_ms(trusted) == 60 * MIN
    assert sup.reconcile_interval_ms(doubted) == 4 * MIN
    sup.pipeline = PipelineHealth(broken_since_ms=1, version=1)
    assert sup.reconcile_interval_ms(trusted) == 4 * MIN


def test_an_unreadable_pipeline_state_is_unknown_and_nothing_is_judged_on_it(acct, monkeypatch):
    """The sweep reads the heartbeat pipeline's state before it decides anything; a failed read is
    not "delivering": this pass judges and writes nothing about it (each attempt's own
    confirmation still guards every stop)."""
    store = acct.supervisor.store

    def unreadable():
        raise RuntimeError("ProvisionedThroughputExceededException")

    saved: list[object] = []
    monkeypatch.setattr(store, "get_pipeline", unreadable)
    monkeypatch.setattr(store, "save_pipeline", lambda *a, **k: saved.append(a))
    _submit(acct)
    acct.clock.advance_to(acct.clock.now_ms + MIN)
    (report,) = acct.run_sweep()
    assert report["errors"] >= 1 and saved == [] and acct.supervisor.pipeline is None
