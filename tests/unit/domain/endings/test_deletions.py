"""Jobs deleted outside sagewarden (domain/endings/deletions.py), at the level of the pure decision: an
attempt whose job is Deleting, missing after SageMaker accepted it, or replaced by another job of
the same name ends as DELETED and resumes under a new name; an unknown TrainingJobStatus is never
read as InProgress."""

from __future__ import annotations

import dataclasses

from sagewarden.domain.endings.attempt_ended import LOG_SETTLE_MS
from sagewarden.domain.endings.deletions import DELETED_AFTER_MS
from sagewarden.domain.vocabulary.actions import DeleteHangAlarms, LaunchAttempt, Notify, StopJob
from sagewarden.domain.vocabulary.events import (
    CancelRequested,
    HangSignal,
    JobMissing,
    JobObserved,
    LaunchAccepted,
    Observations,
    Submitted,
)
from sagewarden.domain.vocabulary.models import LaunchState, RunStatus
from tests.builders import HOUR, MIN, ckpt, make_run, observed, pool_seen, step, training_run

INTERNAL = "InternalServerError: We encountered an internal error.  Please try again."
NCCL = 'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage "Watchdog caught collective operation timeout"'


def launches(d):
    return [a for a in d.actions if isinstance(a, LaunchAttempt)]


def alert(d, event):
    (n,) = [a for a in d.actions if isinstance(a, Notify) and a.event == event]
    return n


def test_a_job_seen_deleting_ends_as_deleted_and_resumes_under_a_new_name():
    run = training_run()
    first = run.current
    deleting = observed(run, "Deleting", "Failed", 3 * HOUR)
    d = step(
        run, dataclasses.replace(deleting, source="describe"), 3 * HOUR, Observations(checkpoint=ckpt(900))
    )
    ended = d.run.attempts[0]
    assert ended.end_class == "DELETED" and "deleted outside sagewarden" in (ended.end_reason or "")
    (launch,) = launches(d)
    assert launch.attempt == 2 and launch.job_name != first.job_name  # never the deleted name again
    assert launch.request["Environment"]["SAGEWARDEN_RESUME_STEP"] == "900"
    assert DeleteHangAlarms(first.job_name) in d.actions
    assert not any(isinstance(a, StopJob) for a in d.actions)  # nothing to wait on or stop
    assert d.run.restarts == 1 and d.run.restarts_by_class == {"DELETED": 1}
    body = alert(d, "attempt.resumed").body
    assert "Class: DELETED" in body and "deleted outside sagewarden" in body


def test_a_job_missing_after_sagemaker_accepted_it_is_deleted_once_it_cannot_be_a_slow_read():
    """A new job may be missing from reads for a while (read-after-create): only after
    DELETED_AFTER_MS is "not found" taken for a deletion."""
    run = training_run()
    job = run.current.job_name
    early = step(run, JobMissing(job, 1), DELETED_AFTER_MS - 1)
    assert early.ignored is not None and "waiting for it to appear" in early.ignored
    d = step(run, JobMissing(job, 1), 2 * HOUR, Observations(checkpoint=ckpt(600)))
    assert d.run.attempts[0].end_class == "DELETED"
    assert (
        "no job" in d.run.attempts[0].evidence[0] and "InProgress/Training" in d.run.attempts[0].evidence[0]
    )
    (launch,) = launches(d)
    assert launch.attempt == 2 and launch.job_name != job
    assert d.run.status == RunStatus.STARTING


def test_a_name_taken_by_another_job_is_never_stopped_nor_waited_on():
    """The deleted job's name is free: whoever creates a job under it, that job is not the run's."""
    run = step(make_run(), Submitted(), 0).run
    run = step(run, LaunchAccepted(1), 1).run
    ours = JobObserved(run.current.job_name, 1, "InProgress", "Training", 10 * MIN, created_ms=2)
    run = step(run, ours, 10 * MIN).run
    assert run.current.created_ms == 2 and run.current.in_training
    theirs = JobObserved(run.current.job_name, 1, "InProgress", "Starting", 5 * HOUR, created_ms=5 * HOUR)
    d = step(run, theirs, 5 * HOUR + MIN, Observations(checkpoint=ckpt(300)))
    assert d.run.attempts[0].end_class == "DELETED"
    assert not any(isinstance(a, StopJob) for a in d.actions)
    (launch,) = launches(d)
    assert launch.attempt == 2
    run = step(d.run, LaunchAccepted(2), 5 * HOUR + 2 * MIN).run
    later = step(
        run,
        dataclasses.replace(theirs, status="InProgress", secondary="Training", modified_ms=6 * HOUR),
        6 * HOUR,
    )
    assert later.ignored is not None and not later.actions  # the other job's events change nothing
    cancel = step(run, CancelRequested("alice"), 6 * HOUR)
    assert [a.job_name for a in cancel.actions if isinstance(a, StopJob)] == [run.current.job_name]


def test_an_unknown_training_job_status_is_not_read_as_in_progress():
    """A status SageMaker may add later is unknown: the attempt keeps what it knew (here: in
    Training, so a hang is still acted on) and nothing is decided on it."""
    run = training_run()
    d = step(run, observed(run, "Quiescing", "Training", 2 * HOUR), 2 * HOUR)
    assert d.ignored is not None and "unknown TrainingJobStatus 'Quiescing'" in d.ignored
    assert d.run == run and d.run.current.in_training
    hang = step(
        d.run,
        HangSignal(run.current.job_name, 1, "log_silence", "ALARM", 2 * HOUR),
        2 * HOUR + MIN,
        Observations(log_tail=("step 100",)),
    )
    assert any(isinstance(a, StopJob) for a in hang.actions)


def test_a_deferred_ending_whose_job_is_deleted_is_decided_as_sagemaker_reported_it():
    """SageMaker reported the end, the decision waited for the logs, then the job was deleted:
    the ending is known, so it is decided as reported, not as DELETED."""
    run = training_run()
    end = 3 * HOUR
    failed = observed(run, "Failed", "Failed", end, INTERNAL)
    deferred = step(run, failed, end + LOG_SETTLE_MS, Observations(log_error="ThrottlingException"))
    assert deferred.run.current.end_pending
    d = step(
        deferred.run, JobMissing(run.current.job_name, 1), end + HOUR, Observations(checkpoint=ckpt(900))
    )
    assert d.run.attempts[0].end_class == "INFRASTRUCTURE"
    assert [launch.attempt for launch in launches(d)] == [2]


def test_a_stop_intent_survives_the_deletion_of_its_job():
    """A cancel asked the job to stop; before its end was seen the job was deleted: the run is
    CANCELLED (intent is final), nothing is launched."""
    run = step(training_run(), CancelRequested("alice"), HOUR).run
    d = step(run, JobMissing(run.current.job_name, 1), 2 * HOUR)
    assert d.run.status == RunStatus.CANCELLED and not launches(d)
    assert d.run.attempts[0].end_class == "SUPERVISOR_STOP"


def test_a_watched_pools_deleted_job_ends_the_watch_and_is_not_read_as_no_quota():
    """SageMaker deletes only a job without an Available pool; the run waiting to resume on that
    pool starts cold, and learns nothing about the account's warm-pool quota from it."""
    run = training_run()
    end = run.current.training_started_ms + HOUR
    waiting = step(
        run,
        observed(run, "Failed", "Failed", end, NCCL),
        end + LOG_SETTLE_MS,
        Observations(checkpoint=ckpt(500)),
    ).run
    assert waiting.status == RunStatus.RETRY_WAIT and waiting.wait_reason == "warm_pool"
    job = waiting.current.job_name
    d = step(waiting, JobMissing(job, 1), end + 2 * MIN, Observations(checkpoint=ckpt(500)))
    assert d.run.warm_pools == () and not d.run.warm_pool_off
    assert [launch.attempt for launch in launches(d)] == [2]
    deleting = dataclasses.replace(pool_seen(waiting, None), status="Deleting")
    d = step(waiting, deleting, end + 2 * MIN, Observations(checkpoint=ckpt(500)))
    assert d.run.warm_pools == () and not d.run.warm_pool_off and launches(d)
    assert d.run.current.launch == LaunchState.PENDING
