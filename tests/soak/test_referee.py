"""The soak's checks can fail: each known way to break the supervisor (sabotaged here on
purpose) is reported by the referee, and the same history without the sabotage is clean."""

from __future__ import annotations

import dataclasses

import pytest

from sagewarden.domain import decide as decide_module
from sagewarden.domain.capacity import launching as launching_module
from sagewarden.domain.vocabulary.models import RunStatus
from sagewarden.usecases.sweep import Sweep
from tests.soak.crash import Driver
from tests.soak.referee import MIN, make_world, settle
from tests.soak.world import Hook, aws_error


def _driver(**kwargs):
    world, referee = make_world(**kwargs)
    return Driver(world, referee)


def _cancel_after_a_lost_launch(d: Driver) -> list[str]:
    d.world.calls.hooks.append(Hook("Launcher.launch", "before"))  # killed before CreateTrainingJob
    d.submit("lost")
    d.cancel("lost")
    d.sweep(minutes=3)  # the launch intent is older than LAUNCH_RETRY_AFTER_MS
    return d.referee.check_step()


def test_referee_clean_when_a_cancel_follows_a_lost_launch():
    d = _driver()
    assert _cancel_after_a_lost_launch(d) == []
    assert settle(d.world, d.referee) == [] and d.referee.check_quiesced() == []
    assert d.world.raw_store.get(d.names["lost"]).status == RunStatus.CANCELLED


@pytest.mark.claim(
    "never two live jobs of a run, no job that is not a recorded attempt, nothing launched after a cancel, terminal runs never change, every owed alert published exactly once, nothing non-terminal without a due time, every hang acted on once quiesced"
)
def test_referee_reports_a_launch_decided_after_a_cancel(monkeypatch):
    never = lambda d: False  # noqa: E731 - sabotage: the cancel is forgotten when relaunching
    monkeypatch.setattr(decide_module, "cancel_pending", never)
    monkeypatch.setattr(launching_module, "cancel_pending", never)
    problems = _cancel_after_a_lost_launch(_driver())
    assert any("decided after the cancel" in p for p in problems), problems


def _alert_whose_publish_fails(d: Driver) -> list[str]:
    d.world.calls.inject("sns.publish", aws_error("sns", "throttle", "Publish"))
    d.submit("quiet")
    return settle(d.world, d.referee) + d.referee.check_quiesced()


def test_referee_clean_when_the_sweep_republishes_a_failed_alert():
    assert _alert_whose_publish_fails(_driver()) == []


@pytest.mark.claim(
    "never two live jobs of a run, no job that is not a recorded attempt, nothing launched after a cancel, terminal runs never change, every owed alert published exactly once, nothing non-terminal without a due time, every hang acted on once quiesced"
)
def test_referee_reports_an_owed_alert_never_published(monkeypatch):
    monkeypatch.setattr(Sweep, "_publish", lambda self, item: None)  # sabotage: no outbox publisher
    problems = _alert_whose_publish_fails(_driver())
    assert any("owed but never published" in p for p in problems), problems


def _training_with_alarms(d: Driver) -> list[str]:
    d.submit("train")
    d.progress("train", 1, "advance", "advance")
    served = d.referee.due_runs() | {d.names["train"]}
    d.world.advance(11 * MIN)
    d.world.sweep()
    return d.referee.check_alarms_after_sweep(served)


def test_referee_clean_when_hang_alarms_exist():
    assert _training_with_alarms(_driver()) == []


def test_referee_reports_hang_alarms_missing_after_a_sweep(monkeypatch):
    d = _driver()
    monkeypatch.setattr(type(d.world.cloudwatch), "put_metric_alarm", lambda self, **kw: None)
    problems = _training_with_alarms(d)
    assert any("misses hang alarms" in p for p in problems), problems


@pytest.mark.claim("never launches two jobs for one run")
@pytest.mark.claim(
    "never two live jobs of a run, no job that is not a recorded attempt, nothing launched after a cancel, terminal runs never change, every owed alert published exactly once, nothing non-terminal without a due time, every hang acted on once quiesced"
)
def test_referee_reports_two_live_jobs_and_a_duplicate_alert():
    d = _driver()
    d.submit("twice")
    job = d.job("twice", 1)
    d.world.sagemaker.jobs["extra"] = dataclasses.replace(job, name="extra")  # a second live job
    first = d.world.sns.published[0]
    d.world.sns.published.append(first)  # the same alert delivered twice
    problems = d.referee.check_step()
    assert any("2 live SageMaker jobs" in p for p in problems), problems
    assert any(f"alert {first.dedupe_id} published 2 times" in p for p in problems), problems


@pytest.mark.claim(
    "A terminal run never changes again, except for the bookkeeping of jobs still to stop and warm pools still to release (their billed time is added to its cost)"
)
@pytest.mark.claim(
    "never two live jobs of a run, no job that is not a recorded attempt, nothing launched after a cancel, terminal runs never change, every owed alert published exactly once, nothing non-terminal without a due time, every hang acted on once quiesced"
)
def test_referee_reports_a_terminal_run_that_changes():
    d = _driver()
    d.submit("done")
    d.cancel("done")
    d.stopped("done", 1)
    store = d.world.store_view
    run = store.get(d.names["done"])
    assert run.status == RunStatus.CANCELLED
    store.save(dataclasses.replace(run, status=RunStatus.TRAINING), run, [], None)
    assert any("terminal run changed" in p for p in d.referee.check_step())


@pytest.mark.parametrize("kind", ["throttle", "5xx", "denied"])
def test_world_injected_errors_happen_before_the_effect(kind):
    d = _driver()
    d.world.calls.inject("sagemaker.create_training_job", aws_error("sagemaker", kind, "CreateTrainingJob"))
    d.submit("x")
    assert d.world.sagemaker.jobs == {}  # the failed call created nothing
    assert d.world.calls.fired and d.world.calls.fired[0][0] == "sagemaker.create_training_job"


def _alarm_whose_edge_is_lost(d: Driver) -> list[str]:
    d.submit("hung")
    d.progress("hung", 1, "advance", "advance")  # Training, hang alarms created
    d.sweep(minutes=50)  # past the grace period and the start-up allowance for silence
    name = next(n for n in d.world.cloudwatch.alarms if n.endswith("--log-silence"))
    alarm = d.world.cloudwatch.alarms[name]
    alarm["StateValue"], alarm["StateUpdatedTimestamp"] = "ALARM", d.world.now()  # event lost
    return settle(d.world, d.referee) + d.referee.check_quiesced()


def test_referee_clean_when_the_sweep_acts_on_an_alarm_state():
    d = _driver()
    assert _alarm_whose_edge_is_lost(d) == []
    run = d.world.raw_store.get(d.names["hung"], all_attempts=True)
    assert run.attempts[0].end_class == "SUPERVISOR_STOP" and run.attempt_count == 2


@pytest.mark.claim(
    "never two live jobs of a run, no job that is not a recorded attempt, nothing launched after a cancel, terminal runs never change, every owed alert published exactly once, nothing non-terminal without a due time, every hang acted on once quiesced"
)
def test_referee_reports_an_alarm_state_nobody_acts_on(monkeypatch):
    monkeypatch.setattr(decide_module, "on_alarms_observed", lambda d, e: "sabotaged: levels ignored")
    problems = _alarm_whose_edge_is_lost(_driver())
    assert any("in ALARM" in p and "nothing was done" in p for p in problems), problems
