"""What `decide` does when an attempt ended: classify the ending, then finish the run, resume it,
fall back to another instance type, or wait. A cancel wins over every classification. Pure.
Why: docs/recovery.md (*How an attempt's ending is handled*)."""

from __future__ import annotations

import dataclasses

from sagewarden.domain.capacity.launching import next_usable_choice, start_attempt
from sagewarden.domain.capacity.training_plans import after_window, plan_ending
from sagewarden.domain.capacity.warm_pools import (
    ending_keeps_pool,
    on_pool_observed,
    start_or_wait,
    watch_ended,
)
from sagewarden.domain.decision.alerts import bounded_evidence, notify
from sagewarden.domain.decision.deferrals import clear_deferral, defer, deferral_expired, give_up
from sagewarden.domain.decision.outcomes import fail, finish, finish_cancelled, wait
from sagewarden.domain.decision.pending import (
    PendingDecision,
    backoff_ms,
    cancel_pending,
    choices,
    ckpt_text,
    lost_work,
    step_of,
)
from sagewarden.domain.endings.deletions import deleted_classification
from sagewarden.domain.endings.loops import (
    ending_signature,
    no_progress_streak,
    previous_ending,
    repeats_previous,
)
from sagewarden.domain.hosts.bad_hosts import address_book, note_ending, peer_addresses, singled_out
from sagewarden.domain.vocabulary.actions import (
    AnnounceCapacityReleased,
    DeleteHangAlarms,
)
from sagewarden.domain.vocabulary.advice import checkpoint_advice
from sagewarden.domain.vocabulary.classifier.classify import classify, shows_kill
from sagewarden.domain.vocabulary.classifier.models import Classification, Ending, EndingClass
from sagewarden.domain.vocabulary.events import JobObserved
from sagewarden.domain.vocabulary.launch import MIN_SEGMENT_S, wall_clock_remaining_s
from sagewarden.domain.vocabulary.models import Attempt, LaunchState, RunStatus
from sagewarden.domain.vocabulary.pricing import price_per_instance_hour
from sagewarden.domain.vocabulary.reasons import EventSource, StopIntent, WaitReason

# A failure's last log lines get this long after the job's end to reach CloudWatch Logs before a
# crash that names no host is decided (lines_may_be_on_their_way). AWS publishes no ingestion
# delay; a line usually lands within seconds, and the sweep looks again every minute.
LOG_SETTLE_MS = 60_000
# A read the ending depends on that failed (a throttled FilterLogEvents when many runs end at
# once: the failed host's fingerprint, or which host printed a hardware line) is made again on the
# sweep's next looks for this long after the job's end before the ending is decided with it
# unknown (evidence_unread)
UNREAD_RETRY_MS = 3 * 60_000

# Endings whose outcome does not depend on the newest checkpoint (nothing resumes).
_FINAL_CLASSES = frozenset(
    {EndingClass.SUCCEEDED, EndingClass.USER_STOPPED, EndingClass.USER_ERROR, EndingClass.CLIENT_ERROR}
)


def job_end_ms(e: JobObserved) -> int:
    """When the job ended: TrainingEndTime, or (a describe without it) LastModifiedTime."""
    return e.ended_ms or e.modified_ms


def on_attempt_ended(d: PendingDecision, att: Attempt, e: JobObserved, *, deleted: str | None = None) -> None:
    """Decide on an attempt's ending: SageMaker's terminal state `e`, or -- `deleted`, why -- its
    job deleted outside sagewarden before the ending was seen (`e` from deletions.deletion_seen)."""
    if e.status == "Failed" and d.obs.log_error:
        _defer_ending(d, att, f"cannot read the job's logs to classify its failure: {d.obs.log_error}")
        return
    end = job_end_ms(e)
    started = att.training_started_ms
    training_s = max(0.0, (end - started) / 1000) if started else 0.0
    created = att.created_ms or att.requested_at_ms
    pending_s = max(0.0, ((started or end) - created) / 1000)
    max_pending = d.run.request.get("StoppingCondition", {}).get("MaxPendingTimeInSeconds")
    if deleted is not None:
        cls = deleted_classification(att, deleted)
    else:
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
                host_memory=d.obs.host_memory,
                network_isolated=d.run.request.get("EnableNetworkIsolation") is True,
            ),
            oom_is_user_error=d.policy.oom_is_user_error,
        )
    cls = plan_ending(d.run, att, e.status, end, cls)  # a training plan's window ended
    if lines_may_be_on_their_way(d, att, e, cls):
        _defer_ending(
            d,
            att,
            f"its last log lines may still be on their way to CloudWatch Logs (it ended "
            f"{(d.now - end) / 1000:.0f} s ago, and no line names the failed host yet): read again "
            f"{LOG_SETTLE_MS // 1000} s after its end",
        )
        return
    unread = evidence_unread(d, att, e, cls)
    if unread is not None:
        _defer_ending(
            d, att, f"{unread}: read again for up to {UNREAD_RETRY_MS // 60_000} minutes after its end"
        )
        return
    final = (
        cancel_pending(d)
        or cls.kind in _FINAL_CLASSES
        or (
            cls.kind == EndingClass.SUPERVISOR_STOP
            and att.stop_intent not in (StopIntent.HANG, StopIntent.BAD_HOST, StopIntent.STRAGGLER)
        )
    )
    gave_up: str | None = None
    if d.obs.checkpoint_error and not final:
        why = f"cannot read the checkpoints to decide how to resume: {d.obs.checkpoint_error}"
        if not deferral_expired(d, d.obs.checkpoint_error_permanent):
            _defer_ending(d, att, why, permanent=d.obs.checkpoint_error_permanent)
            return
        gave_up = why  # the ending is recorded below; the run fails instead of resuming
    if gave_up is None:
        clear_deferral(d)
    ckpt = d.run.last_checkpoint if d.obs.checkpoint_error else d.obs.checkpoint
    price = price_per_instance_hour(att.instance_type, d.policy.instance_hour_price_usd)
    cost = price * att.instance_count * training_s / 3600
    evidence = cls.evidence if cls.kind != EndingClass.SUPERVISOR_STOP else att.evidence + cls.evidence
    ended = dataclasses.replace(
        att,
        ended_ms=end,
        end_class=cls.kind.value,
        end_reason=explained(cls),
        evidence=bounded_evidence(evidence),
        checkpoint_at_end=ckpt,
        alarms_active=False,
        hang_signals=(),
        cost_usd=round(cost, 2),
    )
    d.put_attempt(ended)
    d.set(
        cost_usd=round(d.run.cost_usd + cost, 2),
        last_checkpoint=ckpt or d.run.last_checkpoint,
        training_ms=d.run.training_ms + int(training_s * 1000),
    )
    if att.alarms_active:
        d.act(DeleteHangAlarms(att.job_name))
    d.note(f"attempt {att.number} ended: {cls.kind.value}: {cls.reason}")
    att, ended = note_ending(d, att, ended, cls)  # a host singled out (domain/hosts/bad_hosts.py)
    # a deleted job's pool is gone or unknown: nothing to watch (it kept no Available one)
    watch = watch_ended(d, att, e, cls) if deleted is None else None
    if gave_up is not None:
        give_up(d, gave_up)
    else:
        _next_step(d, ended, cls)
    if (
        watch is not None and e.source == EventSource.DESCRIBE
    ):  # the look-up that saw the end saw the pool too
        on_pool_observed(d, e)
    _announce_release(d, ended)


def lines_may_be_on_their_way(d: PendingDecision, att: Attempt, e: JobObserved, cls: Classification) -> bool:
    """A crash whose failed host is not named yet, seen within LOG_SETTLE_MS of the job's end:
    the lines that would name it (an Xid, an NCCL error) may not have reached CloudWatch Logs --
    the API shows each event's ingestion time apart from its timestamp, and AWS publishes no
    bound. Two decisions depend on the name, so they wait until the lines have had time to land:
    - nothing singles out a host yet: decided now, the resume would run on the same warm pool and
      meet the bad host again minutes later (only when the job leaves a pool to reuse);
    - a bad instance without its name (a hardware error naming no host): a named host whose
      fingerprint is known spares the next attempt SageMaker's infra check (5-30 minutes), which
      an unnamed one cannot (only when the policy skips the check for fingerprinted hosts).
    Every other ending -- a host named, a pending cancel, a user error -- is decided at once."""
    if e.status != "Failed" or cancel_pending(d):
        return False
    if cls.kind not in (EndingClass.INFRASTRUCTURE, EndingClass.UNKNOWN):
        return False
    bad = singled_out(att, cls, d.obs.log_tail, address_book(d.obs.address_lines))
    if bad is not None and bad.hosts:
        return False
    if bad is not None:
        pol = d.policy
        if not (pol.infra_check_after_bad_host and pol.infra_check_unless_fingerprinted):
            return False
    elif att.keep_alive_s <= 0 or d.run.warm_pool_off or not ending_keeps_pool(e.status, att.failure_reason):
        return False
    return d.now - job_end_ms(e) < LOG_SETTLE_MS


def evidence_unread(d: PendingDecision, att: Attempt, e: JobObserved, cls: Classification) -> str | None:
    """Why the ending waits for a read that failed (None: it does not), up to UNREAD_RETRY_MS after
    the job's end -- unknown is not "none printed", and the next attempt's launch waiting a minute
    or two costs less than what each read spares:
    - the ending singles out a host whose fingerprint, once remembered, spares the next attempt
      SageMaker's infra check (5-30 minutes), but the fingerprint read failed (only when the
      policy skips the check for fingerprinted hosts and the next attempt is not checked anyway);
    - a crash of a job of 2+ hosts that names no host, and the look-up of the hosts that printed a
      GPU hardware line failed: the log tail reads hosts in order and may not have reached the
      failed one, whose name keeps its warm pool from being reused and its fingerprint remembered;
    - a failure whose NCCL lines name a peer by address, and the look-up of which host declared that
      address failed (domain/hosts/bad_hosts.py: peers by address);
    - a kill (SIGKILL, exitcode -9) whose hosts' MemoryUtilization could not be read, or has not
      reached CloudWatch up to the job's end (datapoints arrive minutes late): near 100 % makes it a
      memory fault that fails at once, instead of a confirming restart.
    Never while a cancel is pending."""
    if cancel_pending(d) or att.stop_intent == StopIntent.BAD_HOST:
        return None
    if d.now - job_end_ms(e) >= UNREAD_RETRY_MS:
        return None
    bad = singled_out(att, cls, d.obs.log_tail, address_book(d.obs.address_lines))
    named = bad is not None and bool(bad.hosts)
    pol = d.policy
    if (
        named
        and d.obs.fingerprint_error is not None
        and pol.infra_check_after_bad_host
        and pol.infra_check_unless_fingerprinted
        and not d.run.infra_check_pending
    ):
        return f"the failed host's fingerprint could not be read ({d.obs.fingerprint_error})"
    if (
        not named
        and d.obs.hardware_printers_error is not None
        and e.status == "Failed"
        and cls.kind in (EndingClass.INFRASTRUCTURE, EndingClass.UNKNOWN)
    ):
        return f"which host printed a GPU hardware line is unknown ({d.obs.hardware_printers_error})"
    if (
        not named
        and d.obs.address_error is not None
        and e.status == "Failed"
        and peer_addresses(d.obs.log_tail)
    ):
        return f"which host has the peer address an NCCL line names is unknown ({d.obs.address_error})"
    if (
        d.obs.host_memory_error is not None
        and e.status == "Failed"
        and cls.kind == EndingClass.UNKNOWN
        and shows_kill(d.obs.log_tail)
    ):
        return f"the hosts' memory before the kill is unknown ({d.obs.host_memory_error})"
    return None


def _defer_ending(d: PendingDecision, att: Attempt, reason: str, *, permanent: bool = False) -> None:
    """Record what SageMaker reported (the attempt is no longer training, so its hang signals
    are moot) but take no decision: the sweep re-observes the ended job and decides then."""
    d.put_attempt(att)
    defer(d, reason, permanent=permanent)


def _next_step(d: PendingDecision, ended: Attempt, cls: Classification) -> None:
    kind = cls.kind
    if cancel_pending(d):
        if kind == EndingClass.SUCCEEDED:
            finish(
                d,
                RunStatus.SUCCEEDED,
                f"training completed before the cancel requested by {d.run.cancel_requested_by} took effect",
                "info",
                "run.succeeded",
            )
        else:
            finish_cancelled(d, f"the job ended {ended.sm_status}/{ended.sm_secondary}: {kind.value}")
        return
    if kind == EndingClass.SUCCEEDED:
        finish(d, RunStatus.SUCCEEDED, "training completed", "info", "run.succeeded")
    elif kind == EndingClass.USER_STOPPED:
        finish(d, RunStatus.CANCELLED, "the job was stopped outside sagewarden", "warning", "run.cancelled")
    elif kind in (EndingClass.USER_ERROR, EndingClass.CLIENT_ERROR):
        fail(
            d,
            f"{kind.value.lower().replace('_', ' ')}: {cls.reason}",
            evidence=cls.evidence,
            details=why_lines(cls),
        )
    elif kind == EndingClass.CAPACITY:
        _capacity(d, ended, cls)
    elif kind == EndingClass.WINDOW_END:
        after_window(d, ended, cls)
    elif kind == EndingClass.SUPERVISOR_STOP:
        intent = ended.stop_intent
        if intent == StopIntent.CANCEL:  # pragma: no cover - cancel_pending() handled it above
            finish_cancelled(d, "stopped")
        elif intent == StopIntent.HANG:
            _resume(d, ended, cls, label="HANG", counted=True)
        elif intent == StopIntent.BAD_HOST:
            _resume(d, ended, cls, label="BAD_HOST", counted=True)
        elif intent == StopIntent.STRAGGLER:
            _resume(d, ended, cls, label="STRAGGLER", counted=True)
        elif intent == StopIntent.WALL_CLOCK:
            fail(d, "wall-clock budget exhausted", evidence=cls.evidence)
        else:
            fail(d, f"stopped by sagewarden: {intent}", evidence=cls.evidence)
    elif kind == EndingClass.SEGMENT_DONE:
        d.set(segments=d.run.segments + 1)
        _resume(d, ended, cls, label=kind.value, counted=False)
    elif kind == EndingClass.DELETED:  # how it ended is unknown: a counted resume, new name
        _resume(d, ended, cls, label=kind.value, counted=True)
    elif kind == EndingClass.SPOT_INTERRUPTED:
        _resume(d, ended, cls, label=kind.value, counted=False)
    else:  # INFRASTRUCTURE, UNKNOWN (and anything new defaults to a counted resume)
        _resume(d, ended, cls, label=kind.value, counted=True)


def _announce_release(d: PendingDecision, ended: Attempt) -> None:
    """Tell runs waiting for quota that instances were released -- minus what this run is
    about to take again itself (a resume must not lose its instances to runs submitted later)."""
    if ended.launch == LaunchState.WAITING:
        return  # no job was created, nothing was held
    released = ended.instance_count
    if d.run.status == RunStatus.RETRY_WAIT and d.run.wait_reason == WaitReason.WARM_POOL:
        return  # the instances stay in the run's warm pool: the next attempt takes them again
    nxt = d.run.current
    if (
        nxt is not None
        and nxt.number != ended.number
        and nxt.live
        and nxt.instance_type == ended.instance_type
    ):
        released -= nxt.instance_count
    if released > 0:
        d.act(AnnounceCapacityReleased(ended.instance_type, released))


def _resume(d: PendingDecision, ended: Attempt, cls: Classification, *, label: str, counted: bool) -> None:
    run, pol = d.run, d.policy
    progressed = step_of(ended.checkpoint_at_end) > step_of(ended.resume_from)
    signature = ending_signature(cls, label)
    streak = no_progress_streak(run, ended, progressed=progressed, signature=signature)
    budget_line = f"restarts used {run.restarts} of {pol.max_restarts}"
    # the ending points at hardware or a host: a repeat on other instances is no loop of the code
    singled = cls.hardware or bool(ended.suspect_hosts)
    loop = repeats_previous(run, ended, cls, signature, singled_out=singled)
    if loop is not None:
        # the same failure at the same step after a resume from the checkpoint it left: the code,
        # its data or its configuration fails, on whatever instances (domain/endings/loops.py)
        fail(
            d,
            f"deterministic failure: attempt {ended.number} ended as attempt {loop.attempt} did, at the "
            f"same step after resuming from {ckpt_text(ended.resume_from)}: {cls.reason}",
            (f"Attempt {loop.attempt}:", *loop.lines, f"Attempt {ended.number}:", *cls.evidence),
            why_lines(cls, confirmed=True),
        )
        return
    never_saved = ended.checkpoint_at_end is None and run.last_checkpoint is None
    if cls.kind == EndingClass.UNKNOWN and not progressed and never_saved:
        # a run that never saved a checkpoint: likely a bug, and nothing to resume from
        fail(
            d,
            "unexplained failure with no checkpoint progress, before any checkpoint was written: likely a bug",
            cls.evidence,
            why_lines(cls),
        )
        return
    if streak >= pol.max_no_progress_restarts:
        fail(
            d,
            f"crash loop: {streak} consecutive attempts ended the same way without a newer checkpoint "
            f"(still at {ckpt_text(ended.checkpoint_at_end)})",
            cls.evidence,
        )
        return
    if counted and run.restarts >= pol.max_restarts:
        fail(d, f"restart budget exhausted ({budget_line})", cls.evidence)
        return
    if wall_clock_remaining_s(run, d.now) < MIN_SEGMENT_S:
        fail(d, "wall-clock budget exhausted", cls.evidence)
        return
    if pol.max_cost_usd is not None and run.cost_usd >= pol.max_cost_usd:
        fail(d, f"cost budget ${pol.max_cost_usd:,.0f} reached (${run.cost_usd:,.0f} spent)", cls.evidence)
        return
    by_class = dict(run.restarts_by_class)
    by_class[label] = by_class.get(label, 0) + 1
    d.set(
        restarts=run.restarts + (1 if counted else 0),
        restarts_by_class=by_class,
        no_progress_streak=streak,
        no_progress_signature=None if progressed else signature,
        last_ending=previous_ending(ended, cls, signature, singled_out=singled),
        recovering_since_ms=ended.ended_ms if cls.kind != EndingClass.SEGMENT_DONE else None,
    )
    lost_s, lost_usd = lost_work(d, ended)
    nxt = run.attempt_count + 1
    severity = "info" if cls.kind == EndingClass.SEGMENT_DONE else "warning"
    event = "attempt.segment" if cls.kind == EndingClass.SEGMENT_DONE else "attempt.resumed"
    lines = [
        f"Class: {label}" + (" (counted against max_restarts)" if counted else " (not counted)"),
        f"Reason: {cls.reason}",
        *why_lines(cls)[1:],
        f"Restarts: {d.run.restarts} of {pol.max_restarts}; no-progress streak {streak} of {pol.max_no_progress_restarts}",
        f"Resuming from: {ckpt_text(ended.checkpoint_at_end or run.last_checkpoint)}",
        f"Work lost since that checkpoint: {lost_s / 60:.0f} min (~${lost_usd:,.0f})",
    ]
    advice = checkpoint_advice(d.run, d.now)
    if advice is not None and advice.worth_telling:
        lines.append(advice.line())
    if ended.evidence:
        lines += ["Evidence:", *ended.evidence[:12]]
    d.act(
        notify(
            d,
            severity,
            event,
            f"{run.name}: attempt {ended.number} {label.lower()}, resuming as attempt {nxt}",
            lines,
        )
    )
    start_or_wait(d, ended)


def explained(cls: Classification) -> str:
    """The reason line an attempt keeps (`GET /runs/{id}` shows it): the class's reason, and for a
    guess what would change it, and the advice."""
    out = cls.reason
    if cls.guess:
        out += f"; a guess (UNKNOWN) -- what would change it: {cls.guess}"
    if cls.advice:
        out += f"; advice: {cls.advice}"
    return out


def why_lines(cls: Classification, *, confirmed: bool = False) -> tuple[str, ...]:
    """The alert's lines on the class: which class and why, whether it is a guess and what would
    change it, what a confirming restart decides, and the advice."""
    lines = [f"Class: {cls.kind.value} -- {cls.reason}"]
    if cls.guess:
        lines.append(f"A guess (UNKNOWN): what would change it: {cls.guess}")
    if cls.confirmable and not confirmed:
        lines.append("Resumed once to confirm: the next ending the same way, at the same step, stops the run")
    if confirmed:
        lines.append("Confirmed: the same ending at the same step after a resume from the same checkpoint")
    if cls.advice:
        lines.append(f"Advice: {cls.advice}")
    return tuple(lines)


def _capacity(d: PendingDecision, ended: Attempt, cls: Classification) -> None:
    options = choices(d)
    nxt = next_usable_choice(d, d.run.fallback_index)
    by_class = dict(d.run.restarts_by_class)
    by_class["CAPACITY"] = by_class.get("CAPACITY", 0) + 1
    d.set(restarts_by_class=by_class)
    started = d.run.wait_started_ms or d.now
    if (d.now - started) / 3_600_000 > d.policy.capacity_wait_max_hours:
        fail(d, f"no capacity for {d.policy.capacity_wait_max_hours:g} h", cls.evidence)
        return
    if nxt is not None and nxt != 0 and nxt != d.run.fallback_index:
        pick = options[nxt]
        d.set(fallback_index=nxt, wait_started_ms=started)
        d.note(f"capacity: falling back to {pick.instance_count} x {pick.instance_type}")
        d.act(
            notify(
                d,
                "warning",
                "attempt.fallback",
                f"{d.run.name}: no capacity for {ended.instance_type}, trying {pick.instance_type}",
                [f"Reason: {cls.reason}", *cls.evidence[:3]],
            )
        )
        start_attempt(d, reuse_current=False)
        return
    # back to the first usable choice after a backoff
    first = next_usable_choice(d, len(options) - 1)
    d.set(fallback_index=first if first is not None else 0)
    delay = capacity_delay_ms(d, ended)
    wait(d, WaitReason.CAPACITY, delay, d.policy.capacity_wait_max_hours, cls)
    if delay == 0 and d.run.status == RunStatus.RETRY_WAIT:
        d.note("the attempt waited for capacity longer than the backoff: the next request goes now")
        start_attempt(d, reuse_current=False)


def capacity_delay_ms(d: PendingDecision, ended: Attempt) -> int:
    """The backoff before asking for capacity again, counted from the refused attempt's request:
    it spaces CreateTrainingJob calls, and an attempt that sat Pending for capacity (20 minutes or
    more before SageMaker gave up, typically) has spaced them already -- waiting the backoff again
    after it would leave the run idle for nothing (a competent script resubmits at once). A refusal
    that came soon after the request still waits the rest of the backoff."""
    asked = ended.created_ms or ended.requested_at_ms
    return max(0, backoff_ms(d) - max(0, d.now - asked))
