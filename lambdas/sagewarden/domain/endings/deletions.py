"""Training jobs deleted outside sagewarden: seen `Deleting`, missing once the launch is old
enough, or the name holding another job. Each ends the attempt as DELETED. Pure. Why:
docs/recovery.md (the DELETED row, *Where the rules live*)."""

from __future__ import annotations

from sagewarden.domain.vocabulary.classifier.models import Classification, EndingClass
from sagewarden.domain.vocabulary.events import Event, JobMissing, JobObserved
from sagewarden.domain.vocabulary.models import SM_DELETING, Attempt, LaunchState, Run

# A job SageMaker accepted is taken for deleted when reads miss it this long after its launch was
# asked for: longer than any read-after-create delay (a job cannot be deleted before it ended).
DELETED_AFTER_MS = 15 * 60_000
# CreationTime as an event (epoch ms) and DescribeTrainingJob (a timestamp) give it may differ by
# rounding: a job created more than this apart from the attempt's is another job
CREATED_SLACK_MS = 1_000
DELETED_REASON = "the job was deleted outside sagewarden (DeleteTrainingJob) before its ending was seen"


def job_replaced(att: Attempt, e: JobObserved) -> bool:
    """The attempt's job name now holds another job: it was created at another time than the job
    the attempt saw (the attempt's job was deleted and the name used again)."""
    return (
        att.created_ms is not None
        and e.created_ms is not None
        and abs(e.created_ms - att.created_ms) > CREATED_SLACK_MS
    )


def deleted_by_observation(att: Attempt, e: JobObserved) -> str | None:
    """Why this observation of the attempt's job means it was deleted (None: it does not)."""
    if e.status == SM_DELETING:
        return f"DescribeTrainingJob answered TrainingJobStatus {SM_DELETING}"
    if job_replaced(att, e):
        return (
            f"the name {att.job_name} now holds another job (created {e.created_ms} ms, not "
            f"{att.created_ms} ms): the attempt's job was deleted and the name used again"
        )
    return None


def deleted_by_absence(att: Attempt, now_ms: int) -> str | None:
    """Why DescribeTrainingJob's "not found" for a job SageMaker accepted means it was deleted;
    None: not yet (it may still be on its way to the reads) or not an accepted launch."""
    if att.launch != LaunchState.SUBMITTED or att.ended:
        return None
    if now_ms - att.requested_at_ms < DELETED_AFTER_MS:
        return None
    seen = f"last seen {att.sm_status}/{att.sm_secondary}" if att.sm_status else "never seen by a read"
    return (
        f"DescribeTrainingJob answered that no job {att.job_name} exists, "
        f"{(now_ms - att.requested_at_ms) // 60_000} min after SageMaker accepted it ({seen})"
    )


def deletion_seen(att: Attempt, now_ms: int, e: JobObserved | None) -> JobObserved:
    """The ending to decide on for a deleted job: when it ended is known only from a `Deleting`
    job's own TrainingEndTime; else the latest it can have been (when the name's new job was
    created, or now)."""
    end = now_ms
    if e is not None and e.status == SM_DELETING and e.ended_ms is not None:
        end = e.ended_ms
    elif e is not None and e.created_ms is not None:
        end = min(now_ms, e.created_ms)
    return JobObserved(
        job_name=att.job_name,
        attempt=att.number,
        status=SM_DELETING,
        secondary=None,
        modified_ms=max(end, att.sm_modified_ms),
        created_ms=att.created_ms,
        ended_ms=end,
        source="deleted",
    )


def recorded_ending(att: Attempt) -> JobObserved:
    """The ending SageMaker reported for an attempt whose decision was deferred, rebuilt from
    what the attempt recorded (its job has since been deleted: no read can show it again)."""
    return JobObserved(
        job_name=att.job_name,
        attempt=att.number,
        status=att.sm_status or "",
        secondary=att.sm_secondary,
        modified_ms=att.sm_modified_ms,
        failure_reason=att.failure_reason,
        created_ms=att.created_ms,
        training_started_ms=att.training_started_ms,
        source="deleted",
    )


def deleted_classification(att: Attempt, why: str) -> Classification:
    """The class of a deleted job's ending: the stop the supervisor asked for, when it did (its
    intent is final), else DELETED."""
    if att.stop_intent is not None:
        return Classification(
            EndingClass.SUPERVISOR_STOP,
            f"stopped by the supervisor ({att.stop_intent}); the job was then deleted outside sagewarden",
            (f"stop intent: {att.stop_intent}", why),
        )
    return Classification(EndingClass.DELETED, DELETED_REASON, (why,))


def deletion_of_current(run: Run, event: Event, now_ms: int) -> str | None:
    """Why `event` says the run's current attempt's job was deleted (None: it does not)."""
    cur = run.current
    if cur is None or run.status.terminal or cur.ended or cur.launch == LaunchState.ABANDONED:
        return None
    if isinstance(event, JobMissing) and (event.job_name, event.attempt) == (cur.job_name, cur.number):
        return deleted_by_absence(cur, now_ms)
    if isinstance(event, JobObserved) and (event.job_name, event.attempt) == (cur.job_name, cur.number):
        return deleted_by_observation(cur, event)
    return None


def lookup_event(run: Run, event: Event, now_ms: int) -> Event:
    """The event whose look-ups (checkpoint, log tail, fingerprints) a decision needs: for a
    deleted job whose ending SageMaker had reported and whose decision was deferred, that recorded
    ending (it decides as reported); every other event as it is."""
    cur = run.current
    if cur is not None and cur.end_pending and deletion_of_current(run, event, now_ms) is not None:
        return recorded_ending(cur)
    return event
