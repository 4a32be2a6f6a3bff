"""The supervisor's decision: `decide(run, event, now_ms, policy, obs) -> Decision`.

Dispatches each event to its concern package (capacity, checkpoints, hangs, hosts, endings) and
handles the small ones; every action can be re-derived from the stored run. Pure. Why:
docs/reliability.md (*Design choices*)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from sagewarden.domain.capacity.launching import (
    next_usable_choice,
    no_warm_pool_lines,
    relaunch_same,
    start_attempt,
)
from sagewarden.domain.capacity.training_plans import on_plan_tick, record_plan, stop_retry_past_window
from sagewarden.domain.capacity.warm_pools import (
    is_pool_job_missing,
    is_pool_observation,
    on_pool_job_gone,
    on_pool_observed,
    on_pool_tick,
    wait_for_bad_pool,
)
from sagewarden.domain.checkpoints.history import record_checkpoint, record_writing_span
from sagewarden.domain.checkpoints.retention import on_retention
from sagewarden.domain.checkpoints.retirement import on_retire_reported
from sagewarden.domain.decision.alerts import notify
from sagewarden.domain.decision.outcomes import fail, finish_cancelled, wait
from sagewarden.domain.decision.pending import (
    LAUNCH_RETRY_AFTER_MS,
    LAUNCH_SETTLE_MS,
    STOP_REASK_ON_EVIDENCE_MS,
    STOP_RETRY_AFTER_MS,
    PendingDecision,
    backoff_ms,
    cancel_pending,
    choices,
    jitter,
    request_stop,
    running_cost,
    stop_stray,
    throttle_ms,
    waiting_launch,
)
from sagewarden.domain.endings.attempt_ended import on_attempt_ended
from sagewarden.domain.endings.deletions import (
    deleted_by_absence,
    deleted_by_observation,
    deletion_seen,
    recorded_ending,
)
from sagewarden.domain.goodput import after_decision
from sagewarden.domain.hangs.confirm import adapt_windows, on_alarms_observed, on_hang_signal, on_tick_signals
from sagewarden.domain.hangs.windows import hang_alarms
from sagewarden.domain.hosts.bad_hosts import late_hardware_line, on_training
from sagewarden.domain.hosts.fabric import on_scan, submit_lines
from sagewarden.domain.hosts.stragglers import on_steps
from sagewarden.domain.lookups import RESUMABLE
from sagewarden.domain.resuming import expired, foreign_checkpoint
from sagewarden.domain.vocabulary.actions import Action, StopJob
from sagewarden.domain.vocabulary.classifier.classify import classify
from sagewarden.domain.vocabulary.classifier.models import Classification, Ending, EndingClass
from sagewarden.domain.vocabulary.classifier.signatures import API_SERVER_ERROR_LABELS
from sagewarden.domain.vocabulary.events import (
    AlarmsObserved,
    CancelRequested,
    CapacityReleased,
    Event,
    JobMissing,
    JobObserved,
    LaunchAccepted,
    LaunchRejected,
    Observations,
    ResumeRequested,
    RetirementReported,
    Submitted,
    Tick,
)
from sagewarden.domain.vocabulary.launch import wall_clock_remaining_s
from sagewarden.domain.vocabulary.models import (
    SM_DELETING,
    SM_STATUS_RANK,
    SM_TERMINAL,
    Attempt,
    LaunchState,
    Run,
    RunStatus,
)
from sagewarden.domain.vocabulary.policy import RunPolicy
from sagewarden.domain.vocabulary.reasons import StopIntent, WaitReason

__all__ = ["Decision", "decide"]

NO_OBSERVATIONS = Observations()


@dataclass(frozen=True)
class Decision:
    run: Run
    actions: tuple[Action, ...] = ()
    notes: tuple[str, ...] = ()
    ignored: str | None = None  # set when the event changed nothing (duplicate, stale, late)

    @property
    def changed(self) -> bool:
        return self.ignored is None


def decide(
    run: Run, event: Event, now_ms: int, policy: RunPolicy, obs: Observations = NO_OBSERVATIONS
) -> Decision:
    d = PendingDecision(run, now_ms, policy, obs)
    if isinstance(event, ResumeRequested):
        record_plan(d)  # a run on a training plan resumes into its windows as read now
        reason = _on_resume(d, event)
        if reason is not None and not d.actions:
            return Decision(run=run, ignored=reason, notes=(reason,))
        d.set(updated_ms=now_ms)
        return _accounted(run, d, event)
    if run.status.terminal:
        # terminal runs never change (status, outcome, attempts); the only bookkeeping left is
        # stopping stray jobs until SageMaker confirms they ended
        reason = _on_terminal(d, event)
        if reason is not None and d.run == run and not d.actions:
            return Decision(run=run, ignored=reason, notes=(reason,))
        return Decision(run=d.run, actions=tuple(d.actions), notes=tuple(d.notes) or (reason or "",))
    planned = record_plan(d)  # the training plan's windows, read before this decision
    reason = _dispatch(d, event)
    spans = record_writing_span(d, run)  # an attempt that ended: when it could write checkpoints
    seen = record_checkpoint(d) or planned or spans
    if reason is not None and not d.actions and not seen:
        return Decision(run=run, ignored=reason, notes=(reason,))
    if d.run.status.terminal:  # it was not before this decision: it ended now
        d.set(finished_ms=now_ms)
    d.set(updated_ms=now_ms)
    return _accounted(run, d, event)


def _accounted(before: Run, d: PendingDecision, event: Event) -> Decision:
    """The decision with the run's goodput ledger kept (domain/goodput.py)."""
    after, actions = after_decision(before, d.run, event, d.actions, d.now)
    return Decision(run=after, actions=actions, notes=tuple(d.notes))


def _dispatch(d: PendingDecision, event: Event) -> str | None:
    if isinstance(event, JobObserved) and is_pool_observation(d.run, event):
        late_hardware_line(d, event)  # a host named by a line that landed while the run waited
        return on_pool_observed(d, event)
    if isinstance(event, JobMissing) and is_pool_job_missing(d.run, event):
        return on_pool_job_gone(d, event.job_name, "its job no longer exists (deleted outside sagewarden)")
    if isinstance(event, Submitted):
        return _on_submitted(d)
    if isinstance(event, LaunchAccepted):
        return _on_launch_accepted(d, event)
    if isinstance(event, LaunchRejected):
        return _on_launch_rejected(d, event)
    if isinstance(event, JobObserved):
        return _on_job_observed(d, event)
    if isinstance(event, JobMissing):
        return _on_job_missing(d, event)
    if isinstance(event, Tick):
        return _on_tick(d)
    if isinstance(event, CancelRequested):
        return _on_cancel(d, event)
    if isinstance(event, CapacityReleased):
        return _on_capacity_released(d, event)
    if isinstance(event, AlarmsObserved):
        return on_alarms_observed(d, event)
    if isinstance(event, ResumeRequested):
        return _on_resume(d, event)
    if isinstance(event, RetirementReported):
        return on_retire_reported(d, event)
    return on_hang_signal(d, event)


# --------------------------------------------------------------------------------------------
# event handlers; each returns None when it acted, or the reason it ignored the event


def _on_terminal(d: PendingDecision, event: Event) -> str | None:
    run = d.run
    reason = f"run is {run.status.value}; late event recorded, not acted on"
    if isinstance(event, JobObserved) and is_pool_observation(run, event):
        return on_pool_observed(d, event)  # an idle pool is billed after the run ended too
    if isinstance(event, JobMissing) and is_pool_job_missing(run, event):
        return on_pool_job_gone(d, event.job_name, "its job no longer exists (deleted outside sagewarden)")
    if isinstance(event, Tick) and on_pool_tick(d) and not run.strays:
        return None
    strays = dict(run.strays)
    if isinstance(event, JobObserved):
        if event.job_name in strays and (event.status in SM_TERMINAL or event.status == SM_DELETING):
            del strays[event.job_name]
            d.set(strays=tuple(sorted(strays.items())))
            d.note(f"stray job {event.job_name} ended ({event.status})")
            return None
        if event.status not in SM_STATUS_RANK:
            return f"{reason} (unknown TrainingJobStatus {event.status!r}: not acted on)"
        if (
            event.status in SM_TERMINAL
            or event.status in ("Stopping", SM_DELETING)
            or event.job_name in strays
        ):
            return reason
        cur = run.current
        # attempts before the current one are known ended (a new attempt is launched only after
        # the previous one ended): a late event of theirs is stale, not a running job
        if cur is not None and (event.attempt < cur.number or (event.attempt == cur.number and cur.ended)):
            return f"{reason} (attempt {event.attempt} is known to have ended)"
        stop_stray(d, event.job_name, f"job {event.job_name} is running for a {run.status.value} run")
        return None
    if isinstance(event, LaunchAccepted):
        cur = run.current
        job = cur.job_name if cur is not None and cur.number == event.attempt else None
        if job is not None and job not in strays and not (cur is not None and cur.ended):
            stop_stray(d, job, f"launch of {job} landed after the run became {run.status.value}")
            return None
        return reason
    if isinstance(event, JobMissing) and event.job_name in strays:
        del strays[event.job_name]
        d.set(strays=tuple(sorted(strays.items())))
        d.note(f"stray job {event.job_name} does not exist")
        return None
    if isinstance(event, Tick) and strays:
        due = [job for job, at in strays.items() if d.now - at >= STOP_RETRY_AFTER_MS]
        for job in due:
            stop_stray(d, job, "stray job not confirmed stopped: asking again")
        return None if due else "stray stops in progress"
    return reason


def _on_submitted(d: PendingDecision) -> str | None:
    if d.run.status != RunStatus.SUBMITTED or d.run.attempts:
        return "first attempt already launched"
    first = d.run.deferred_since_ms is None
    if first:
        pick = choices(d)[d.run.fallback_index]
        d.act(
            notify(
                d,
                "info",
                "run.submitted",
                f"{d.run.name}: submitted",
                [
                    f"Owner: {d.run.owner}",
                    f"Instances: {pick.instance_count} x {pick.instance_type}",
                    *(no_warm_pool_lines(pick) if d.run.warm_pool_off else ()),
                    *((f"Checkpoint retention: {d.run.storage_warning}",) if d.run.storage_warning else ()),
                    *submit_lines(d.run, pick.instance_type, pick.instance_count),
                ],
            )
        )
    before = d.run
    start_attempt(d, reuse_current=False)
    if not first and d.run == before and not d.actions:
        return f"deferred: {d.run.deferred_reason}"
    return None


def _on_launch_accepted(d: PendingDecision, e: LaunchAccepted) -> str | None:
    cur = d.run.current
    if cur is None or cur.number != e.attempt or cur.launch != LaunchState.PENDING:
        return "launch confirmation for an attempt that is not pending"
    d.put_attempt(dataclasses.replace(cur, launch=LaunchState.SUBMITTED))
    d.note(
        f"attempt {cur.number} ({cur.job_name}) "
        + ("already existed: submission is idempotent" if e.already_existed else "accepted by SageMaker")
    )
    if cur.stop_intent == StopIntent.CANCEL:  # the cancel's first stop may have found no job yet
        d.act(StopJob(cur.job_name, StopIntent.CANCEL))
        d.note("cancel recorded while the launch was in flight: stopping the job it created")
    return None


def _on_launch_rejected(d: PendingDecision, e: LaunchRejected) -> str | None:
    cur = d.run.current
    if cur is None or cur.number != e.attempt or cur.launch != LaunchState.PENDING:
        return "launch rejection for an attempt that is not pending"
    cls = classify(Ending(api_error_code=e.code, api_error_message=e.message))
    rejection = f"{cur.instance_type}|{e.code}|{' '.join(e.message.split())}"[:REJECTION_MAX_CHARS]
    again = d.run.last_rejection == rejection
    d.set(last_rejection=rejection)
    d.put_attempt(
        dataclasses.replace(cur, launch=LaunchState.WAITING, end_class=cls.kind.value, evidence=cls.evidence)
    )
    d.note(f"CreateTrainingJob rejected {cur.job_name}: {cls.kind.value}: {e.code}: {e.message}")
    if cancel_pending(d):
        finish_cancelled(d, f"the launch in flight was rejected ({cls.kind.value}); nothing runs")
        return None
    if cls.kind == EndingClass.QUOTA:
        # (no warm-pool quota is no rejection: SageMaker runs the job and keeps no pool; the
        # pool's watch tells the user -- domain/capacity/warm_pools.py)
        q = cls.quota
        if q is not None and not q.can_ever_fit:
            never = (
                f"{q.quota_name} is not available in this region"
                if q.unavailable
                else f"quota '{q.quota_name}' is {q.limit} instances but one attempt needs {q.delta}"
            )
            nxt = next_usable_choice(d, d.run.fallback_index)
            skipped = d.run.fallback_index
            if nxt is not None and nxt != skipped:
                pick = choices(d)[nxt]
                d.set(skipped_choices=tuple(sorted({*d.run.skipped_choices, skipped})), fallback_index=nxt)
                d.act(
                    notify(
                        d,
                        "warning",
                        "attempt.fallback",
                        f"{d.run.name}: {cur.instance_type} can never fit the quota, trying {pick.instance_type}",
                        [
                            f"{never[0].upper()}{never[1:]}: {cur.instance_type} is skipped for this run"
                            + (
                                "" if q.unavailable else f" (raise the quota to at least {q.delta} to use it)"
                            ),
                            f"Next: {pick.instance_count} x {pick.instance_type}",
                        ],
                    )
                )
                start_attempt(d, reuse_current=True)
                return None
            fail(
                d,
                f"{never}: pick another instance type or region (waiting never helps)"
                if q.unavailable
                else f"{never}: ask AWS to raise it to at least {q.delta} (this can never fit as it is)",
                evidence=cls.evidence,
            )
            return None
        if wait_for_bad_pool(d, cur):  # our own bad pool holds the quota: not a backoff
            return None
        wait(
            d,
            WaitReason.QUOTA,
            backoff_ms(d),
            d.policy.quota_wait_max_hours,
            cls,
            instance_type=cur.instance_type,
        )
        return None
    if cls.kind == EndingClass.THROTTLED:
        if again and cls.reason.startswith(SERVER_ERROR_REASONS):
            _server_error_again(d, cls)
            return None
        wait(d, WaitReason.THROTTLE, throttle_ms(d), d.policy.quota_wait_max_hours, cls)
        return None
    fail(d, f"SageMaker rejected the training job request: {e.code}: {e.message}", evidence=cls.evidence)
    return None


# A 5xx that CreateTrainingJob answers word for word to the same request is retried with an
# exponential backoff for this long, then the run fails (docs/recovery.md)
SERVER_ERROR_GIVE_UP_MS = 2 * 3_600_000
SERVER_ERROR_REASONS = tuple(f"API error {label}" for label in sorted(API_SERVER_ERROR_LABELS))
REJECTION_MAX_CHARS = 300  # Run.last_rejection is stored on the run item: bounded


def _server_error_again(d: PendingDecision, cls: Classification) -> None:
    """The same request met the same 5xx again: back off exponentially (from the throttle retry up
    to the backoff cap) instead of every 30 s, and fail once it has repeated for
    SERVER_ERROR_GIVE_UP_MS -- a request the service cannot take is the request's problem (before:
    2,882 calls over 24 hours)."""
    pol, run = d.policy, d.run
    started = run.wait_started_ms if run.wait_started_ms is not None else d.now
    if d.now - started >= SERVER_ERROR_GIVE_UP_MS:
        fail(
            d,
            f"CreateTrainingJob answered the same server error for {SERVER_ERROR_GIVE_UP_MS // 60_000} min "
            f"({run.wait_count + 1} tries): the request itself likely causes it -- check it, then resume the run",
            cls.evidence,
        )
        return
    base = min(pol.backoff_cap_seconds, pol.throttle_backoff_seconds * 2 ** min(run.wait_count, 20))
    delay = int(base * 1000 * jitter(run.run_id, run.wait_count, pol.backoff_jitter))
    wait(d, WaitReason.THROTTLE, delay, pol.quota_wait_max_hours, cls)


def _on_job_observed(d: PendingDecision, e: JobObserved) -> str | None:
    cur = d.run.current
    if cur is None or e.attempt > d.run.attempt_count:
        return f"job {e.job_name} is not an attempt of this run"
    if e.attempt != cur.number:
        return f"event for earlier attempt {e.attempt} (current is {cur.number})"
    if cur.job_name != e.job_name:
        return f"job name {e.job_name} does not match attempt {cur.number}"
    if cur.ended:
        return f"attempt {cur.number} already ended ({cur.sm_status}/{cur.sm_secondary})"
    if cur.launch == LaunchState.ABANDONED:
        return f"attempt {cur.number} was abandoned"
    if e.status not in SM_STATUS_RANK:  # unknown is not InProgress (nor any other known state)
        return (
            f"unknown TrainingJobStatus {e.status!r} for {e.job_name}: not acted on; the attempt keeps "
            f"{cur.sm_status}/{cur.sm_secondary} and the sweep keeps looking"
        )
    deleted = deleted_by_observation(cur, e)
    if deleted is not None:  # never waited on, nor its name launched again (domain/endings/deletions.py)
        return _on_deleted(d, cur, deleted, e)
    new_key = (e.modified_ms, SM_STATUS_RANK[e.status])
    old_key = (cur.sm_modified_ms, SM_STATUS_RANK.get(cur.sm_status or "", -1))
    if new_key < old_key:
        return f"stale state {e.status}/{e.secondary} (older than {cur.sm_status}/{cur.sm_secondary})"
    if (
        new_key == old_key
        and (e.status, e.secondary) == (cur.sm_status, cur.sm_secondary)
        and not cur.end_pending
    ):
        return "duplicate state change"
    att = dataclasses.replace(
        cur,
        launch=LaunchState.SUBMITTED,
        sm_status=e.status,
        sm_secondary=e.secondary,
        sm_modified_ms=max(e.modified_ms, cur.sm_modified_ms),
        created_ms=cur.created_ms or e.created_ms,
        failure_reason=e.failure_reason or cur.failure_reason,
    )
    if not cur.end_pending:
        d.note(f"attempt {cur.number}: {e.status}/{e.secondary} (from {e.source})")
    att = _restop_running(d, att, e)
    if e.status in SM_TERMINAL:
        before = d.run
        on_attempt_ended(d, att, e)
        if (
            cur.end_pending
            and d.run.current == att
            and not d.actions
            and d.run.deferred_reason == before.deferred_reason
        ):
            return f"deferred: {d.run.deferred_reason}"  # still deferred; nothing new to save
        return None
    if e.status == "InProgress" and e.secondary == "Training" and att.training_started_ms is None:
        att = dataclasses.replace(att, training_started_ms=e.modified_ms)
        if d.policy.hang_detection and att.stop_intent is None:
            att = dataclasses.replace(att, alarms_active=True, alarms_confirmed=False)
            d.act(hang_alarms(d, att))
        d.put_attempt(att)
        on_training(d, att)  # an infra check passed (domain/hosts/bad_hosts.py)
        if d.run.status != RunStatus.STOPPING:
            d.set(status=RunStatus.TRAINING)
        d.set(wait_started_ms=None, wait_count=0, recovering_since_ms=None, last_rejection=None)
        step = att.resume_from.step if att.resume_from else None
        d.act(
            notify(
                d,
                "info",
                "attempt.training",
                f"{d.run.name}: attempt {att.number} training"
                + (f" from step {step}" if step is not None else ""),
                [
                    f"Job: {att.job_name}",
                    f"Instances: {att.instance_count} x {att.instance_type}",
                    f"Resumed from: {att.resume_from.uri if att.resume_from else 'no checkpoint (fresh start)'}",
                ],
            )
        )
        return None
    d.put_attempt(att)
    if stop_retry_past_window(d, att, e):  # SageMaker's own retry of a window's end
        return None
    if e.status == "InProgress" and d.run.status != RunStatus.STOPPING:
        # a job past Training (Uploading its model) has not gone back to starting
        trained = e.secondary == "Training" or att.training_started_ms is not None
        d.set(status=RunStatus.TRAINING if trained else RunStatus.STARTING)
    elif e.status == "Stopping" and att.stop_intent is None:
        d.note("job is stopping without a sagewarden intent (MaxRuntime, spot or a person); its end decides")
    return None


def _restop_running(d: PendingDecision, att: Attempt, e: JobObserved) -> Attempt:
    """Intent is final: a job seen running after its stop was asked for (SageMaker may not know a
    job for a moment after CreateTrainingJob, so an early StopTrainingJob can answer 'not found')
    is asked again at once, not only when the sweep's retry comes due."""
    intent = att.stop_intent
    if (
        e.status != "InProgress"
        or intent is None
        or att.stop_requested_ms is None
        or d.now - att.stop_requested_ms < STOP_REASK_ON_EVIDENCE_MS
    ):
        return att
    return _ask_stop_again(d, att, intent, "still running after it was asked for")


def _ask_stop_again(d: PendingDecision, att: Attempt, intent: str, why: str) -> Attempt:
    """StopTrainingJob again for a recorded intent (idempotent at SageMaker); the attempt with the
    new request time, for the caller to store."""
    d.act(StopJob(att.job_name, intent))
    d.note(f"stop of {att.job_name} {why}: asking again")
    return dataclasses.replace(att, stop_requested_ms=d.now)


def _on_deleted(d: PendingDecision, cur: Attempt, why: str, e: JobObserved | None) -> str | None:
    """The attempt's job was deleted outside sagewarden (domain/endings/deletions.py): an ending. One whose
    end SageMaker reported and whose decision was deferred is decided as reported."""
    if cur.end_pending:
        d.note(f"{cur.job_name} was deleted outside sagewarden ({why}): its recorded ending decides")
        on_attempt_ended(d, cur, recorded_ending(cur))
        return None
    d.note(f"attempt {cur.number}: {why}")
    on_attempt_ended(d, cur, deletion_seen(cur, d.now, e), deleted=why)
    return None


def _on_job_missing(d: PendingDecision, e: JobMissing) -> str | None:
    cur = d.run.current
    if (
        cur is not None
        and cur.number == e.attempt
        and cur.job_name == e.job_name
        and cur.launch == LaunchState.SUBMITTED
        and not cur.ended
    ):
        why = deleted_by_absence(cur, d.now)
        if why is None:  # a new job may be missing from reads for a while
            return "SageMaker accepted the job, which reads do not show (yet): waiting for it to appear"
        return _on_deleted(d, cur, why, None)
    if cur is None or cur.number != e.attempt or cur.launch != LaunchState.PENDING:
        return "missing job is not a pending launch"
    if cancel_pending(d):
        if d.now - cur.requested_at_ms < LAUNCH_SETTLE_MS:
            return "cancel recorded; waiting to be sure the launch never happened"
        d.put_attempt(dataclasses.replace(cur, launch=LaunchState.ABANDONED))
        finish_cancelled(d, f"the launch of {cur.job_name} never reached SageMaker")
        return None
    if d.now - cur.requested_at_ms < LAUNCH_RETRY_AFTER_MS:
        return "launch is recent; waiting for it to appear"
    relaunch_same(d, cur, "the job was never created")
    return None


def _on_tick(d: PendingDecision) -> str | None:
    # A tick's side steps, each run on every tick in this order and each saying whether it acted,
    # around the run's own tick. Named here, not bound at import: a test may replace one.
    before_tick: tuple[Callable[[PendingDecision], bool], ...] = (
        on_pool_tick,  # warm-pool watches past their bound
        on_scan,  # the start-up log scan: fabric, known-bad hosts (domain/hosts/fabric.py)
        on_steps,  # the step lines: stragglers (domain/hosts/stragglers.py)
        on_plan_tick,  # a training plan's window ends (domain/capacity/training_plans.py)
    )
    after_tick: tuple[Callable[[PendingDecision], bool], ...] = (
        on_retention,  # after _tick: a stop it asks for blocks retention
    )
    acted = [step(d) for step in before_tick]  # every step runs: none short-circuits another
    reason = _tick(d)
    acted += [step(d) for step in after_tick]
    return None if any(acted) else reason


def _tick(d: PendingDecision) -> str | None:
    run, cur = d.run, d.run.current
    if run.status == RunStatus.RETRY_WAIT:
        if run.wake_at_ms is not None and run.wake_at_ms > d.now:
            return "waiting; wake-up not due"
        d.note(f"wake-up after {run.wait_reason} wait")
        start_attempt(d, reuse_current=waiting_launch(cur))
        if d.run == run and not d.actions:
            return f"deferred: {d.run.deferred_reason}"
        return None
    if cur is None:
        if run.status == RunStatus.SUBMITTED:
            return _on_submitted(d)
        return "no attempt"
    if cur.launch == LaunchState.PENDING and d.now - cur.requested_at_ms >= LAUNCH_RETRY_AFTER_MS:
        if cancel_pending(d):
            return "cancel recorded; the sweep's look-up decides whether the launch happened"
        relaunch_same(d, cur, "launch not confirmed")
        return None
    if cur.live and cur.stop_intent is not None:
        if cur.sm_status == "Stopping":
            return "SageMaker is stopping the job"  # the sweep's look-up sees it end
        if cur.stop_requested_ms is not None and d.now - cur.stop_requested_ms >= STOP_RETRY_AFTER_MS:
            d.put_attempt(_ask_stop_again(d, cur, cur.stop_intent, "not observed yet"))
            return None
        return "stop in progress"
    if cur.live and not cur.end_pending:
        if wall_clock_remaining_s(run, d.now) <= 0:
            request_stop(d, cur, StopIntent.WALL_CLOCK, "wall-clock budget exhausted")
            return None
        limit = d.policy.max_cost_usd
        if limit is not None and run.cost_usd + running_cost(d, cur) >= limit:
            request_stop(d, cur, StopIntent.COST, f"cost budget ${limit:,.0f} reached")
            return None
        adapted = adapt_windows(d, cur)
        reason = on_tick_signals(d, d.run.current or cur)
        return None if adapted else reason
    return "nothing due"


def _on_cancel(d: PendingDecision, e: CancelRequested) -> str | None:
    cur = d.run.current
    if d.run.cancel_requested_by is None:
        d.set(cancel_requested_by=e.by)
    if cur is not None and cur.live:
        if cur.stop_intent == StopIntent.CANCEL:
            return "cancel already in progress"
        request_stop(d, cur, StopIntent.CANCEL, f"cancel requested by {e.by}")
        return None
    finish_cancelled(d, "nothing was running")
    return None


def _on_resume(d: PendingDecision, e: ResumeRequested) -> str | None:
    run = d.run
    if run.status not in RESUMABLE:
        return f"run is {run.status.value}: only a FAILED or CANCELLED run can be resumed"
    if (too_old := expired(run, d.now)) is not None:
        return too_old
    if d.obs.checkpoint_error:  # resuming from "no checkpoint" would throw the work away
        return f"cannot read the checkpoints to resume from: {d.obs.checkpoint_error}"
    if (foreign := foreign_checkpoint(run, d.obs.checkpoint)) is not None:
        return foreign  # domain/resuming.py: never another run's training
    was = f"{run.status.value}: {run.outcome}" if run.outcome else run.status.value
    d.set(
        status=RunStatus.SUBMITTED,
        outcome=None,
        cancel_requested_by=None,
        restarts=0,
        no_progress_streak=0,
        no_progress_signature=None,
        wait_count=0,
        wait_started_ms=None,
        fallback_index=0 if 0 not in run.skipped_choices else run.fallback_index,
        resumes=run.resumes + 1,
        resumed_by=e.by,
        finished_ms=None,
        budget_started_ms=d.now,
        plan_waited_ms=0,
    )
    d.note(f"resumed by {e.by} (was {was}); fresh restart and wall-clock budgets")
    ckpt = d.obs.checkpoint or run.last_checkpoint
    d.act(
        notify(
            d,
            "info",
            "run.resumed",
            f"{run.name}: resumed by {e.by}",
            [
                f"Was: {was}",
                f"Resuming from: {ckpt.uri if ckpt else 'no checkpoint (fresh start)'}",
                f"Restart budget: {d.policy.max_restarts} (fresh); wall clock: {d.policy.max_wall_clock_hours:g} h from now",
            ],
        )
    )
    start_attempt(d, reuse_current=False)
    return None


def _on_capacity_released(d: PendingDecision, e: CapacityReleased) -> str | None:
    run = d.run
    if run.status != RunStatus.RETRY_WAIT or run.wait_reason != WaitReason.QUOTA:
        return "not waiting for quota"
    if run.wait_instance_type not in (None, e.instance_type):
        return f"waiting for {run.wait_instance_type}, not {e.instance_type}"
    d.note(f"{e.count} x {e.instance_type} released by another supervised job: retrying now")
    start_attempt(d, reuse_current=waiting_launch(run.current))
    return None
