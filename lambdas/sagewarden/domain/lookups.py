"""What ``decide`` needs looked up before it decides (the service does the I/O): the newest
checkpoint, the log tail, a log-silence check. Pure."""

from __future__ import annotations

from sagewarden.domain.capacity.warm_pools import (
    is_pool_job_missing,
    is_pool_observation,
    waits_for,
    watch_of,
)
from sagewarden.domain.endings.deletions import deleted_by_observation
from sagewarden.domain.vocabulary.events import (
    AlarmsObserved,
    CapacityReleased,
    Event,
    HangSignal,
    JobMissing,
    JobObserved,
    ResumeRequested,
    Submitted,
    Tick,
)
from sagewarden.domain.vocabulary.models import SM_TERMINAL, LaunchState, Run, RunStatus

RESUMABLE = frozenset({RunStatus.FAILED, RunStatus.CANCELLED})

__all__ = [
    "RESUMABLE",
    "wants_checkpoint",
    "wants_fingerprints",
    "wants_late_hardware_lines",
    "wants_log_silence_check",
    "wants_log_tail",
]


def wants_checkpoint(run: Run, event: Event) -> bool:
    """True when this event may lead to a launch (or an ending), so the newest checkpoint matters."""
    if isinstance(event, ResumeRequested):
        return run.status in RESUMABLE
    if run.status.terminal:
        return False
    cur = run.current
    if isinstance(event, (JobObserved, JobMissing)) and (
        is_pool_observation(run, event) if isinstance(event, JobObserved) else is_pool_job_missing(run, event)
    ):  # a watched pool: only a launch waiting for it matters
        watch = watch_of(run, event.job_name)
        return watch is not None and waits_for(run, watch)
    if isinstance(event, JobMissing):  # an accepted job gone: deleted outside sagewarden
        return cur is not None and cur.job_name == event.job_name and cur.launch == LaunchState.SUBMITTED
    if isinstance(event, JobObserved):  # an ending, or the job deleted (Deleting, its name reused)
        deleted = cur is not None and cur.job_name == event.job_name and deleted_by_observation(cur, event)
        return event.status in SM_TERMINAL or bool(deleted)
    if isinstance(event, (Submitted, CapacityReleased)):
        return True
    if isinstance(event, Tick):
        # a training attempt's checkpoints: freshness (checkpoint_stale_minutes) and the
        # checkpoint-interval advice; a first launch re-issued by the sweep resumes from
        # checkpoints that may already exist
        training = cur is not None and cur.in_training
        first_launch = cur is None and run.status == RunStatus.SUBMITTED
        return run.status == RunStatus.RETRY_WAIT or training or first_launch
    return False


def wants_log_tail(run: Run, event: Event) -> bool:
    if run.status.terminal:
        return False
    if isinstance(event, JobObserved):
        return event.status == "Failed" and not is_pool_observation(run, event)
    if isinstance(event, HangSignal):
        return event.state == "ALARM"
    if isinstance(event, AlarmsObserved):
        return any(state == "ALARM" for _, state, _ in event.states)
    return False


def wants_late_hardware_lines(run: Run, event: Event) -> bool:
    """The run waits to resume on the warm pool of an ending that named no host, and the pool is
    Available: the hosts that printed a GPU hardware line are looked up once more, with their
    fingerprints, before a job runs on those instances (domain/hosts/bad_hosts.py late_hardware_line)."""
    if run.status.terminal or not isinstance(event, JobObserved) or event.warm_pool_status != "Available":
        return False
    if not is_pool_observation(run, event):
        return False
    watch = watch_of(run, event.job_name)
    cur = run.current
    return (
        watch is not None
        and not watch.bad_host
        and waits_for(run, watch)
        and cur is not None
        and cur.job_name == event.job_name
        and cur.instance_count >= 2
    )


def wants_fingerprints(run: Run, event: Event) -> bool:
    """The contract's fingerprint lines are read where an attempt may single out a host: with the
    log tail (a failure, a hang), and at the end of an attempt the supervisor stopped with hosts
    already singled out (a hang's idle host: its fingerprint is remembered at the ending, and the
    ending of a stop reads no log tail)."""
    if wants_log_tail(run, event) or wants_late_hardware_lines(run, event):
        return True
    cur = run.current
    return (
        isinstance(event, JobObserved)
        and not run.status.terminal
        and event.status in SM_TERMINAL
        and cur is not None
        and cur.job_name == event.job_name
        and bool(cur.suspect_hosts)
        and not is_pool_observation(run, event)
    )


def wants_log_silence_check(run: Run, event: Event) -> bool:
    """The sweep judges log silence itself when there is no log subscription (the service
    knows whether there is one)."""
    cur = run.current
    return (
        isinstance(event, Tick)
        and not run.status.terminal
        and run.policy.hang_detection
        and cur is not None
        and cur.in_training
        and cur.stop_intent is None
    )
