"""The supervisor's decision: `decide(run, event, now_ms, policy, obs) -> Decision`.

Pure. The stored run is the desired state; every action is an idempotent "make it so". If
the function carrying out the actions dies after the run is saved, the sweep's next `Tick`
re-issues what is missing (a launch still PENDING, a stop not yet confirmed).
"""

from __future__ import annotations

import dataclasses
import zlib
from dataclasses import dataclass, field
from typing import Any

from sagewarden.domain.actions import (
    Action,
    AnnounceCapacityReleased,
    DeleteHangAlarms,
    EnsureHangAlarms,
    LaunchAttempt,
    Notify,
    StopJob,
)
from sagewarden.domain.checkpoints import Checkpoint
from sagewarden.domain.classifier import Classification, Ending, EndingClass, classify
from sagewarden.domain.events import (
    CancelRequested,
    CapacityReleased,
    Event,
    HangSignal,
    JobMissing,
    JobObserved,
    LaunchAccepted,
    LaunchRejected,
    Observations,
    Submitted,
    Tick,
)
from sagewarden.domain.launch import MIN_SEGMENT_S, build_request, wall_clock_remaining_s
from sagewarden.domain.models import SM_STATUS_RANK, SM_TERMINAL, Attempt, LaunchState, Run, RunStatus
from sagewarden.domain.names import job_name
from sagewarden.domain.policy import InstanceChoice, RunPolicy
from sagewarden.domain.pricing import gpus_per_instance, price_per_instance_hour

RECONCILE_INTERVAL_MS = 10 * 60_000  # how often the sweep re-observes a live job
LAUNCH_RETRY_AFTER_MS = 2 * 60_000  # a launch intent still unconfirmed after this is re-issued
STOP_RETRY_AFTER_MS = 5 * 60_000  # a stop still not observed after this is re-issued

INTENT_CANCEL = "cancel"
INTENT_HANG = "hang"
INTENT_WALL_CLOCK = "wall_clock"
INTENT_COST = "cost_budget"
INTENT_ORPHAN = "orphan"

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


@dataclass
class _Draft:
    run: Run
    now: int
    policy: RunPolicy
    obs: Observations
    actions: list[Action] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def set(self, **changes: Any) -> None:
        self.run = dataclasses.replace(self.run, **changes)

    def put_attempt(self, attempt: Attempt) -> None:
        self.run = dataclasses.replace(self.run, attempts=self.run.with_attempt(attempt))

    def note(self, text: str) -> None:
        self.notes.append(text)

    def act(self, action: Action) -> None:
        self.actions.append(action)


def decide(
    run: Run, event: Event, now_ms: int, policy: RunPolicy, obs: Observations = NO_OBSERVATIONS
) -> Decision:
    d = _Draft(run, now_ms, policy, obs)
    if run.status.terminal:  # terminal runs never change; a stray live job is still stopped
        late = _on_terminal(d, event)
        return Decision(run=run, actions=tuple(d.actions), notes=(*d.notes, late), ignored=late)
    reason = _dispatch(d, event)
    if reason is not None and not d.actions:
        return Decision(run=run, ignored=reason, notes=(reason,))
    d.set(updated_ms=now_ms)
    return Decision(run=d.run, actions=tuple(d.actions), notes=tuple(d.notes))


def _dispatch(d: _Draft, event: Event) -> str | None:
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
    return _on_hang_signal(d, event)


# --------------------------------------------------------------------------------------------
# what `decide` needs looked up first (the service does the I/O)


def wants_checkpoint(run: Run, event: Event) -> bool:
    """True when this event may lead to a launch (or an ending), so the newest checkpoint matters."""
    if run.status.terminal:
        return False
    if isinstance(event, JobObserved):
        return event.status in SM_TERMINAL
    if isinstance(event, (Submitted, CapacityReleased)):
        return True
    if isinstance(event, Tick):
        cur = run.current
        stale_check = run.policy.checkpoint_stale_minutes is not None and cur is not None and cur.in_training
        return run.status == RunStatus.RETRY_WAIT or stale_check
    return False


def wants_log_tail(run: Run, event: Event) -> bool:
    if run.status.terminal:
        return False
    if isinstance(event, JobObserved):
        return event.status == "Failed"
    if isinstance(event, HangSignal):
        return event.state == "ALARM"
    return False


def next_due_ms(run: Run, now_ms: int, reconcile_interval_ms: int = RECONCILE_INTERVAL_MS) -> int | None:
    """When the sweep must next look at this run (None: never again)."""
    if run.status.terminal:
        return None
    current = run.current
    if run.status == RunStatus.RETRY_WAIT and run.wake_at_ms is not None:
        return run.wake_at_ms
    if current is None:
        return now_ms
    if current.launch == LaunchState.PENDING:
        return current.requested_at_ms + LAUNCH_RETRY_AFTER_MS
    if current.stop_requested_ms is not None and current.live:
        return current.stop_requested_ms + STOP_RETRY_AFTER_MS
    return now_ms + reconcile_interval_ms


# --------------------------------------------------------------------------------------------
# event handlers; each returns None when it acted, or the reason it ignored the event


def _on_terminal(d: _Draft, event: Event) -> str:
    reason = f"run is {d.run.status.value}; late event recorded, not acted on"
    if isinstance(event, JobObserved) and event.status not in SM_TERMINAL and event.status != "Stopping":
        known = next((a for a in d.run.attempts if a.number == event.attempt), None)
        if known is None or not known.ended:
            d.act(StopJob(event.job_name, INTENT_ORPHAN))
            d.note(f"job {event.job_name} is running for a {d.run.status.value} run: stopping it")
    return reason


def _on_submitted(d: _Draft) -> str | None:
    if d.run.status != RunStatus.SUBMITTED or d.run.attempts:
        return "first attempt already launched"
    d.act(
        _notify(
            d,
            "info",
            "run.submitted",
            f"{d.run.name}: submitted",
            [f"Owner: {d.run.owner}", f"Instances: {_choice(d).instance_count} x {_choice(d).instance_type}"],
        )
    )
    _start_attempt(d, reuse_current=False)
    return None


def _on_launch_accepted(d: _Draft, e: LaunchAccepted) -> str | None:
    cur = d.run.current
    if cur is None or cur.number != e.attempt or cur.launch != LaunchState.PENDING:
        return "launch confirmation for an attempt that is not pending"
    d.put_attempt(dataclasses.replace(cur, launch=LaunchState.SUBMITTED))
    d.note(
        f"attempt {cur.number} ({cur.job_name}) "
        + ("already existed: submission is idempotent" if e.already_existed else "accepted by SageMaker")
    )
    return None


def _on_launch_rejected(d: _Draft, e: LaunchRejected) -> str | None:
    cur = d.run.current
    if cur is None or cur.number != e.attempt or cur.launch != LaunchState.PENDING:
        return "launch rejection for an attempt that is not pending"
    cls = classify(Ending(api_error_code=e.code, api_error_message=e.message))
    d.put_attempt(
        dataclasses.replace(cur, launch=LaunchState.WAITING, end_class=cls.kind.value, evidence=cls.evidence)
    )
    d.note(f"CreateTrainingJob rejected {cur.job_name}: {cls.kind.value}: {e.code}: {e.message}")
    if cls.kind == EndingClass.QUOTA:
        q = cls.quota
        if q is not None and not q.can_ever_fit:
            _fail(
                d,
                f"quota '{q.quota_name}' is {q.limit} instances but one attempt needs {q.delta}: "
                f"ask AWS to raise it to at least {q.delta} (this can never fit as it is)",
                evidence=cls.evidence,
            )
            return None
        _wait(d, "quota", _backoff_ms(d), d.policy.quota_wait_max_hours, cls, instance_type=cur.instance_type)
        return None
    if cls.kind == EndingClass.THROTTLED:
        _wait(d, "throttle", _throttle_ms(d), d.policy.quota_wait_max_hours, cls)
        return None
    _fail(d, f"SageMaker rejected the training job request: {e.code}: {e.message}", evidence=cls.evidence)
    return None


def _on_job_observed(d: _Draft, e: JobObserved) -> str | None:
    cur = d.run.current
    if cur is None or e.attempt > d.run.attempt_count:
        return f"job {e.job_name} is not an attempt of this run"
    if e.attempt != cur.number:
        return f"event for earlier attempt {e.attempt} (current is {cur.number})"
    if cur.job_name != e.job_name:
        return f"job name {e.job_name} does not match attempt {cur.number}"
    if cur.ended:
        return f"attempt {cur.number} already ended ({cur.sm_status}/{cur.sm_secondary})"
    new_key = (e.modified_ms, SM_STATUS_RANK.get(e.status, 0))
    old_key = (cur.sm_modified_ms, SM_STATUS_RANK.get(cur.sm_status or "", 0))
    if new_key < old_key:
        return f"stale state {e.status}/{e.secondary} (older than {cur.sm_status}/{cur.sm_secondary})"
    if new_key == old_key and (e.status, e.secondary) == (cur.sm_status, cur.sm_secondary):
        return "duplicate state change"
    att = dataclasses.replace(
        cur,
        launch=LaunchState.SUBMITTED,
        sm_status=e.status,
        sm_secondary=e.secondary,
        sm_modified_ms=e.modified_ms,
        created_ms=cur.created_ms or e.created_ms,
        failure_reason=e.failure_reason or cur.failure_reason,
    )
    d.note(f"attempt {cur.number}: {e.status}/{e.secondary} (from {e.source})")
    if e.status in SM_TERMINAL:
        _on_attempt_ended(d, att, e)
        return None
    if e.status == "InProgress" and e.secondary == "Training" and att.training_started_ms is None:
        started = e.modified_ms
        att = dataclasses.replace(att, training_started_ms=started)
        if d.policy.hang_detection and att.stop_intent is None:
            att = dataclasses.replace(att, alarms_active=True)
            d.act(_hang_alarms(d, att))
        d.put_attempt(att)
        if d.run.status != RunStatus.STOPPING:
            d.set(status=RunStatus.TRAINING)
        d.set(wait_started_ms=None, wait_count=0)
        step = att.resume_from.step if att.resume_from else None
        d.act(
            _notify(
                d,
                "info",
                "attempt.training",
                f"{d.run.name}: attempt {att.number} training"
                + (f" from step {step}" if step is not None else ""),
                [
                    f"Job: {att.job_name}",
                    f"Instances: {att.instance_count} x {att.instance_type}",
                    f"Resumed from: {_ckpt_text(att.resume_from)}",
                ],
            )
        )
        return None
    d.put_attempt(att)
    if e.status == "InProgress" and d.run.status not in (RunStatus.STOPPING,):
        d.set(status=RunStatus.TRAINING if e.secondary == "Training" else RunStatus.STARTING)
    elif e.status == "Stopping" and att.stop_intent is None:
        d.note("job is stopping without a sagewarden intent (MaxRuntime, spot or a person); its end decides")
    return None


def _on_job_missing(d: _Draft, e: JobMissing) -> str | None:
    cur = d.run.current
    if cur is None or cur.number != e.attempt or cur.launch != LaunchState.PENDING:
        return "missing job is not a pending launch"
    if d.now - cur.requested_at_ms < LAUNCH_RETRY_AFTER_MS:
        return "launch is recent; waiting for it to appear"
    _relaunch_same(d, cur, "the job was never created")
    return None


def _on_tick(d: _Draft) -> str | None:
    run, cur = d.run, d.run.current
    if run.status == RunStatus.RETRY_WAIT:
        if run.wake_at_ms is not None and run.wake_at_ms > d.now:
            return "waiting; wake-up not due"
        d.note(f"wake-up after {run.wait_reason} wait")
        _start_attempt(d, reuse_current=cur is not None and cur.launch == LaunchState.WAITING)
        return None
    if cur is None:
        if run.status == RunStatus.SUBMITTED:
            return _on_submitted(d)
        return "no attempt"
    if cur.launch == LaunchState.PENDING and d.now - cur.requested_at_ms >= LAUNCH_RETRY_AFTER_MS:
        _relaunch_same(d, cur, "launch not confirmed")
        return None
    if cur.live and cur.stop_intent is not None:
        if cur.stop_requested_ms is not None and d.now - cur.stop_requested_ms >= STOP_RETRY_AFTER_MS:
            d.put_attempt(dataclasses.replace(cur, stop_requested_ms=d.now))
            d.act(StopJob(cur.job_name, cur.stop_intent))
            d.note(f"stop of {cur.job_name} not observed yet: asking again")
            return None
        return "stop in progress"
    if cur.live:
        if wall_clock_remaining_s(run, d.now) <= 0:
            _request_stop(d, cur, INTENT_WALL_CLOCK, "wall-clock budget exhausted")
            return None
        limit = d.policy.max_cost_usd
        if limit is not None and run.cost_usd + _running_cost(d, cur) >= limit:
            _request_stop(d, cur, INTENT_COST, f"cost budget ${limit:,.0f} reached")
            return None
        stale = _checkpoint_stale_signal(d, cur)
        if stale is not None:
            return _on_hang_signal(d, stale)
        if cur.in_training and d.policy.hang_detection and not cur.alarms_active and cur.stop_intent is None:
            d.put_attempt(dataclasses.replace(cur, alarms_active=True))
            d.act(_hang_alarms(d, cur))
            d.note("hang alarms were missing: created")
            return None
    return "nothing due"


def _checkpoint_stale_signal(d: _Draft, cur: Attempt) -> HangSignal | None:
    """No new complete checkpoint for `checkpoint_stale_minutes` of training (S3 sync can stop
    silently too). Judged on ticks from the newest verified checkpoint the sweep looked up."""
    limit = d.policy.checkpoint_stale_minutes
    if limit is None or not cur.in_training or cur.training_started_ms is None:
        return None
    newest = d.obs.checkpoint
    written = newest.written_at_ms if newest is not None and newest.written_at_ms is not None else None
    fresh_since = max(cur.training_started_ms, written or 0)
    if d.now - fresh_since < limit * 60_000:
        return None
    step = f"step {newest.step}" if newest is not None else "none"
    return HangSignal(
        job_name=cur.job_name,
        attempt=cur.number,
        signal="checkpoint_stale",
        state="ALARM",
        since_ms=d.now,
        reason=f"no new complete checkpoint for {(d.now - fresh_since) / 60_000:.0f} min (newest: {step})",
    )


def _on_cancel(d: _Draft, e: CancelRequested) -> str | None:
    cur = d.run.current
    d.set(cancel_requested_by=e.by)
    if cur is not None and cur.live:
        if cur.stop_intent == INTENT_CANCEL:
            return "cancel already in progress"
        _request_stop(d, cur, INTENT_CANCEL, f"cancel requested by {e.by}")
        return None
    _finish(d, RunStatus.CANCELLED, f"cancelled by {e.by}", "warning", "run.cancelled")
    return None


def _on_capacity_released(d: _Draft, e: CapacityReleased) -> str | None:
    run = d.run
    if run.status != RunStatus.RETRY_WAIT or run.wait_reason != "quota":
        return "not waiting for quota"
    if run.wait_instance_type not in (None, e.instance_type):
        return f"waiting for {run.wait_instance_type}, not {e.instance_type}"
    d.note(f"{e.count} x {e.instance_type} released by another supervised job: retrying now")
    cur = run.current
    _start_attempt(d, reuse_current=cur is not None and cur.launch == LaunchState.WAITING)
    return None


def _on_hang_signal(d: _Draft, e: HangSignal) -> str | None:
    cur = d.run.current
    if cur is None or cur.number != e.attempt or cur.job_name != e.job_name:
        return f"alarm for {e.job_name}, which is not the current attempt"
    if not cur.in_training:
        return f"attempt {cur.number} is not training ({cur.sm_status}/{cur.sm_secondary})"
    if cur.stop_intent is not None:
        return f"already stopping ({cur.stop_intent})"
    signals = set(cur.hang_signals)
    if e.state != "ALARM":
        if e.signal not in signals:
            return f"{e.signal} is {e.state}; nothing to clear"
        signals.discard(e.signal)
        d.put_attempt(dataclasses.replace(cur, hang_signals=tuple(sorted(signals))))
        d.note(f"{e.signal} cleared ({e.state})")
        return None
    started = cur.training_started_ms or d.now
    grace_ms = d.policy.hang_grace_minutes * 60_000
    if d.now - started < grace_ms:
        return (
            f"{e.signal} within the {d.policy.hang_grace_minutes}-minute grace period after training started"
        )
    if e.signal in signals:
        return f"{e.signal} already in ALARM; waiting for a second signal"
    signals.add(e.signal)
    cur = dataclasses.replace(cur, hang_signals=tuple(sorted(signals)))
    needed = 1 if d.policy.hang_confirmation == "any" else 2
    if len(signals) < needed:
        d.put_attempt(cur)
        d.note(f"{e.signal} in ALARM; waiting for a second signal ({d.policy.hang_confirmation})")
        return None
    window = {
        "log_silence": d.policy.log_silence_minutes,
        "gpu_idle": d.policy.gpu_idle_minutes,
        "checkpoint_stale": d.policy.checkpoint_stale_minutes or 0,
        "progress_stalled": d.policy.progress_stall_minutes,
    }.get(e.signal, 0)
    silent_for = max(0.0, (d.now - (e.since_ms - window * 60_000)) / 60_000)  # onset = alarm time - window
    evidence = (
        f"signal: {', '.join(sorted(signals))}",
        f"host: {e.host or 'see triage'}; for {silent_for:.0f} min",
        f"alarm reason: {e.reason[:200]}",
        *d.obs.hosts_triage,
        *d.obs.log_tail[-10:],
    )
    cur = dataclasses.replace(cur, evidence=evidence)
    _request_stop(d, cur, INTENT_HANG, f"hang confirmed ({', '.join(sorted(signals))})")
    d.act(
        _notify(
            d,
            "critical",
            "hang.detected",
            f"{d.run.name}: hang on attempt {cur.number} ({e.signal}), stopping",
            [
                f"Signal: {e.signal} on {e.host or 'the job (see host triage)'} for {silent_for:.0f} min",
                f"Alarm: {e.reason[:200]}",
                f"Restarts used: {d.run.restarts} of {d.policy.max_restarts}",
                "Host triage:",
                *d.obs.hosts_triage,
                "Log tail:",
                *d.obs.log_tail[-20:],
            ],
        )
    )
    return None


# --------------------------------------------------------------------------------------------
# an attempt ended


def _on_attempt_ended(d: _Draft, att: Attempt, e: JobObserved) -> None:
    end = e.ended_ms or e.modified_ms
    started = att.training_started_ms
    training_s = max(0.0, (end - started) / 1000) if started else 0.0
    created = att.created_ms or att.requested_at_ms
    pending_s = max(0.0, ((started or end) - created) / 1000)
    max_pending = d.run.request.get("StoppingCondition", {}).get("MaxPendingTimeInSeconds")
    if d.obs.checkpoint_error:
        d.note(f"checkpoint lookup failed ({d.obs.checkpoint_error}); using last known checkpoint")
        ckpt = d.run.last_checkpoint
    else:
        ckpt = d.obs.checkpoint
    cls = classify(
        Ending(
            status=e.status,
            secondary_status=e.secondary,
            failure_reason=att.failure_reason,
            log_tail=d.obs.log_tail,
            stop_intent=att.stop_intent,
            reached_training=started is not None,
            training_seconds=training_s,
            pending_seconds=pending_s,
            max_pending_seconds=int(max_pending) if max_pending else None,
        ),
        oom_is_user_error=d.policy.oom_is_user_error,
    )
    price = price_per_instance_hour(att.instance_type, d.policy.instance_hour_price_usd)
    cost = price * att.instance_count * training_s / 3600
    evidence = cls.evidence if cls.kind != EndingClass.SUPERVISOR_STOP else att.evidence + cls.evidence
    ended = dataclasses.replace(
        att,
        ended_ms=end,
        end_class=cls.kind.value,
        end_reason=cls.reason,
        evidence=evidence,
        checkpoint_at_end=ckpt,
        alarms_active=False,
        hang_signals=(),
        cost_usd=round(cost, 2),
    )
    d.put_attempt(ended)
    d.set(cost_usd=round(d.run.cost_usd + cost, 2), last_checkpoint=ckpt or d.run.last_checkpoint)
    if att.alarms_active:
        d.act(DeleteHangAlarms(att.job_name))
    if att.launch != LaunchState.WAITING:
        d.act(AnnounceCapacityReleased(att.instance_type, att.instance_count))
    d.note(f"attempt {att.number} ended: {cls.kind.value}: {cls.reason}")

    kind = cls.kind
    if kind == EndingClass.SUCCEEDED:
        _finish(d, RunStatus.SUCCEEDED, "training completed", "info", "run.succeeded")
    elif kind == EndingClass.USER_STOPPED:
        _finish(d, RunStatus.CANCELLED, "the job was stopped outside sagewarden", "warning", "run.cancelled")
    elif kind in (EndingClass.USER_ERROR, EndingClass.CLIENT_ERROR):
        _fail(d, f"{kind.value.lower().replace('_', ' ')}: {cls.reason}", evidence=cls.evidence)
    elif kind == EndingClass.CAPACITY:
        _capacity(d, ended, cls)
    elif kind == EndingClass.SUPERVISOR_STOP:
        intent = att.stop_intent
        if intent == INTENT_CANCEL:
            _finish(
                d,
                RunStatus.CANCELLED,
                f"cancelled by {d.run.cancel_requested_by}",
                "warning",
                "run.cancelled",
            )
        elif intent == INTENT_HANG:
            _resume(d, ended, cls, label="HANG", counted=True)
        elif intent == INTENT_WALL_CLOCK:
            _fail(d, "wall-clock budget exhausted", evidence=cls.evidence)
        else:
            _fail(d, f"stopped by sagewarden: {intent}", evidence=cls.evidence)
    elif kind == EndingClass.SEGMENT_DONE:
        d.set(segments=d.run.segments + 1)
        _resume(d, ended, cls, label=kind.value, counted=False)
    elif kind == EndingClass.SPOT_INTERRUPTED:
        _resume(d, ended, cls, label=kind.value, counted=False)
    else:  # INFRASTRUCTURE, UNKNOWN (and anything new defaults to a counted resume)
        _resume(d, ended, cls, label=kind.value, counted=True)


def _resume(d: _Draft, ended: Attempt, cls: Classification, *, label: str, counted: bool) -> None:
    run, pol = d.run, d.policy
    progressed = _step(ended.checkpoint_at_end) > _step(ended.resume_from)
    streak = 0 if progressed else run.no_progress_streak + 1
    budget_line = f"restarts used {run.restarts} of {pol.max_restarts}"
    if cls.kind == EndingClass.UNKNOWN and not progressed:
        _fail(
            d,
            "unexplained failure with no checkpoint progress since the last resume: likely a bug",
            cls.evidence,
        )
        return
    if streak >= pol.max_no_progress_restarts:
        _fail(
            d,
            f"crash loop: {streak} consecutive attempts ended without a newer checkpoint "
            f"(still at {_ckpt_text(ended.checkpoint_at_end)})",
            cls.evidence,
        )
        return
    if counted and run.restarts >= pol.max_restarts:
        _fail(d, f"restart budget exhausted ({budget_line})", cls.evidence)
        return
    if wall_clock_remaining_s(run, d.now) < MIN_SEGMENT_S:
        _fail(d, "wall-clock budget exhausted", cls.evidence)
        return
    if pol.max_cost_usd is not None and run.cost_usd >= pol.max_cost_usd:
        _fail(d, f"cost budget ${pol.max_cost_usd:,.0f} reached (${run.cost_usd:,.0f} spent)", cls.evidence)
        return
    by_class = dict(run.restarts_by_class)
    by_class[label] = by_class.get(label, 0) + 1
    d.set(
        restarts=run.restarts + (1 if counted else 0), restarts_by_class=by_class, no_progress_streak=streak
    )
    lost_s, lost_usd = _lost_work(d, ended)
    nxt = run.attempt_count + 1
    severity = "info" if cls.kind == EndingClass.SEGMENT_DONE else "warning"
    event = "attempt.segment" if cls.kind == EndingClass.SEGMENT_DONE else "attempt.resumed"
    lines = [
        f"Class: {label}" + (" (counted against max_restarts)" if counted else " (not counted)"),
        f"Reason: {cls.reason}",
        f"Restarts: {d.run.restarts} of {pol.max_restarts}; no-progress streak {streak} of {pol.max_no_progress_restarts}",
        f"Resuming from: {_ckpt_text(ended.checkpoint_at_end or run.last_checkpoint)}",
        f"Work lost since that checkpoint: {lost_s / 60:.0f} min (~${lost_usd:,.0f})",
    ]
    if ended.evidence:
        lines += ["Evidence:", *ended.evidence[:12]]
    d.act(
        _notify(
            d,
            severity,
            event,
            f"{run.name}: attempt {ended.number} {label.lower()}, resuming as attempt {nxt}",
            lines,
        )
    )
    _start_attempt(d, reuse_current=False)


def _capacity(d: _Draft, ended: Attempt, cls: Classification) -> None:
    options = _choices(d)
    nxt = (d.run.fallback_index + 1) % len(options)
    by_class = dict(d.run.restarts_by_class)
    by_class["CAPACITY"] = by_class.get("CAPACITY", 0) + 1
    d.set(restarts_by_class=by_class, fallback_index=nxt)
    started = d.run.wait_started_ms or d.now
    if (d.now - started) / 3_600_000 > d.policy.capacity_wait_max_hours:
        _fail(d, f"no capacity for {d.policy.capacity_wait_max_hours:g} h", cls.evidence)
        return
    if nxt != 0:
        choice = options[nxt]
        d.set(wait_started_ms=started)
        d.note(f"capacity: falling back to {choice.instance_count} x {choice.instance_type}")
        d.act(
            _notify(
                d,
                "warning",
                "attempt.fallback",
                f"{d.run.name}: no capacity for {ended.instance_type}, trying {choice.instance_type}",
                [f"Reason: {cls.reason}", *cls.evidence[:3]],
            )
        )
        _start_attempt(d, reuse_current=False)
        return
    _wait(d, "capacity", _backoff_ms(d), d.policy.capacity_wait_max_hours, cls)


# --------------------------------------------------------------------------------------------
# building blocks


def _choices(d: _Draft) -> list[InstanceChoice]:
    rc = d.run.request.get("ResourceConfig", {})
    primary = InstanceChoice(str(rc.get("InstanceType", "")), int(rc.get("InstanceCount", 1)))
    return [primary, *d.policy.instance_fallbacks]


def _choice(d: _Draft) -> InstanceChoice:
    options = _choices(d)
    return options[d.run.fallback_index % len(options)]


def _start_attempt(d: _Draft, *, reuse_current: bool) -> None:
    run, cur = d.run, d.run.current
    if cur is not None and cur.live and not reuse_current:
        d.note(f"refusing to launch: attempt {cur.number} may still be running")  # invariant guard
        return
    if wall_clock_remaining_s(run, d.now) < MIN_SEGMENT_S:
        _fail(d, "wall-clock budget exhausted", ())
        return
    ckpt = d.run.last_checkpoint if d.obs.checkpoint_error else (d.obs.checkpoint or d.run.last_checkpoint)
    choice = _choice(d)
    if reuse_current and cur is not None:
        number, tries = cur.number, cur.launch_tries + 1
    else:
        number, tries = run.attempt_count + 1, 1
    att = Attempt(
        number=number,
        job_name=job_name(run.job_prefix, run.name, run.run_id, number),
        instance_type=choice.instance_type,
        instance_count=choice.instance_count,
        requested_at_ms=d.now,
        launch_tries=tries,
        resume_from=ckpt,
    )
    d.put_attempt(att)
    d.set(
        status=RunStatus.STARTING,
        attempt_count=max(run.attempt_count, number),
        wake_at_ms=None,
        wait_reason=None,
        wait_instance_type=None,
        last_checkpoint=ckpt,
    )
    d.act(LaunchAttempt(number, att.job_name, build_request(d.run, att)))
    d.note(f"launch attempt {number} as {att.job_name} resuming from {_ckpt_text(ckpt)}")


def _relaunch_same(d: _Draft, cur: Attempt, why: str) -> None:
    att = dataclasses.replace(cur, requested_at_ms=d.now, launch_tries=cur.launch_tries + 1)
    d.put_attempt(att)
    # the request is rebuilt from the attempt as first recorded (deterministic), so a job that
    # was in fact created answers ResourceInUse instead of starting twice
    d.act(LaunchAttempt(cur.number, cur.job_name, build_request(d.run, cur)))
    d.note(f"{why}: re-issuing the launch of {cur.job_name} (try {att.launch_tries})")


def _request_stop(d: _Draft, cur: Attempt, intent: str, why: str) -> None:
    d.put_attempt(dataclasses.replace(cur, stop_intent=intent, stop_requested_ms=d.now))
    d.set(status=RunStatus.STOPPING)
    d.act(StopJob(cur.job_name, intent))
    d.note(f"{why}: intent '{intent}' recorded, stopping {cur.job_name}")


def _wait(
    d: _Draft,
    reason: str,
    delay_ms: int,
    max_hours: float,
    cls: Classification,
    instance_type: str | None = None,
) -> None:
    run = d.run
    started = run.wait_started_ms if run.wait_started_ms is not None else d.now
    if (d.now - started) / 3_600_000 > max_hours:
        _fail(d, f"gave up after waiting {max_hours:g} h ({reason})", cls.evidence)
        return
    first = run.wait_count == 0
    d.set(
        status=RunStatus.RETRY_WAIT,
        wake_at_ms=d.now + delay_ms,
        wait_reason=reason,
        wait_instance_type=instance_type,
        wait_started_ms=started,
        wait_count=run.wait_count + 1,
    )
    d.note(f"waiting ({reason}) {delay_ms / 1000:.0f} s; retry at {d.now + delay_ms}")
    if first and reason != "throttle":
        lines = [
            f"Reason: {cls.reason}",
            f"Next try in {delay_ms / 60_000:.0f} min; gives up after {max_hours:g} h",
        ]
        if reason == "quota":
            lines.append("Also retries as soon as another supervised job releases these instances.")
        d.act(
            _notify(
                d, "warning", "run.waiting", f"{run.name}: waiting for {reason}", [*lines, *cls.evidence[:3]]
            )
        )


def _fail(d: _Draft, why: str, evidence: tuple[str, ...] = ()) -> None:
    _finish(d, RunStatus.FAILED, why, "critical", "run.failed", evidence)


def _finish(
    d: _Draft, status: RunStatus, why: str, severity: str, event: str, evidence: tuple[str, ...] = ()
) -> None:
    run = d.run
    d.set(status=status, outcome=why, wake_at_ms=None, wait_reason=None, wait_instance_type=None)
    lines = [
        f"Outcome: {why}",
        f"Attempts: {run.attempt_count}; restarts {run.restarts} of {d.policy.max_restarts}; "
        f"MaxRuntime segments {run.segments}",
        f"Last verified checkpoint: {_ckpt_text(run.last_checkpoint)}",
        f"Estimated cost: ${run.cost_usd:,.2f}",
    ]
    if evidence:
        lines += ["Evidence:", *evidence[:10]]
    d.act(_notify(d, severity, event, f"{run.name}: {status.value.lower()}", lines))
    d.note(f"run {status.value}: {why}")


def _hang_alarms(d: _Draft, att: Attempt) -> EnsureHangAlarms:
    return EnsureHangAlarms(
        job_name=att.job_name,
        attempt=att.number,
        instance_count=att.instance_count,
        gpus_per_host=gpus_per_instance(att.instance_type),
        log_silence_minutes=d.policy.log_silence_minutes,
        gpu_idle_percent=d.policy.gpu_idle_percent,
        gpu_idle_minutes=d.policy.gpu_idle_minutes,
        checkpoint_stale_minutes=d.policy.checkpoint_stale_minutes,
        progress_metric=d.policy.progress_metric,
        progress_stall_minutes=d.policy.progress_stall_minutes,
    )


def _notify(d: _Draft, severity: str, event: str, subject: str, lines: list[str]) -> Notify:
    run = d.run
    body = "\n".join([*lines, "", f"Run: {run.name} ({run.run_id})"])
    return Notify(
        severity=severity,
        event=event,
        subject=f"[sagewarden] {subject}"[:99],
        body=body,
        attributes={"severity": severity, "run_id": run.run_id, "event": event},
    )


def _backoff_ms(d: _Draft) -> int:
    pol, run = d.policy, d.run
    base = min(pol.backoff_cap_seconds, pol.backoff_base_seconds * 2 ** min(run.wait_count, 20))
    return int(base * 1000 * _jitter(run.run_id, run.wait_count, pol.backoff_jitter))


def _throttle_ms(d: _Draft) -> int:
    return int(d.policy.throttle_backoff_seconds * 1000 * _jitter(d.run.run_id, d.run.wait_count, 0.5))


def _jitter(seed: str, k: int, spread: float) -> float:
    """Deterministic factor in [1 - spread, 1 + spread] (decide stays pure and replayable)."""
    frac = (zlib.crc32(f"{seed}:{k}".encode()) % 10_000) / 10_000
    return 1 + spread * (2 * frac - 1)


def _running_cost(d: _Draft, cur: Attempt) -> float:
    if cur.training_started_ms is None:
        return 0.0
    hours = max(0, d.now - cur.training_started_ms) / 3_600_000
    return (
        hours
        * cur.instance_count
        * price_per_instance_hour(cur.instance_type, d.policy.instance_hour_price_usd)
    )


def _lost_work(d: _Draft, ended: Attempt) -> tuple[float, float]:
    """Training time since the newest checkpoint the next attempt resumes from, and its cost."""
    if ended.training_started_ms is None or ended.ended_ms is None:
        return 0.0, 0.0
    since = ended.training_started_ms
    ck = ended.checkpoint_at_end
    if ck is not None and ck.written_at_ms is not None:
        since = max(since, ck.written_at_ms)
    lost_s = max(0.0, (ended.ended_ms - since) / 1000)
    price = price_per_instance_hour(ended.instance_type, d.policy.instance_hour_price_usd)
    return lost_s, lost_s / 3600 * ended.instance_count * price


def _step(ckpt: Checkpoint | None) -> int:
    return ckpt.step if ckpt is not None else -1


def _ckpt_text(ckpt: Checkpoint | None) -> str:
    return f"step {ckpt.step} ({ckpt.uri})" if ckpt is not None else "no checkpoint (fresh start)"
