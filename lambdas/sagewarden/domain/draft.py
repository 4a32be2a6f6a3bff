"""The decision being drafted and the building blocks every event handler of `decide` shares:
starting, re-issuing and stopping attempts, waiting, deferring, finishing, alerting.

Pure, like the rest of the domain. Two rules live here so no handler can get them wrong:
- **Intent is final.** Once a cancel is recorded nothing launches again (`start_attempt` and
  `relaunch_same` refuse, and a run with no live job becomes CANCELLED).
- **Unknown is not empty.** A launch needs the newest verified checkpoint; when the lookup
  failed the launch is deferred (`defer`), never made from "no checkpoint".
"""

from __future__ import annotations

import dataclasses
import zlib
from dataclasses import dataclass, field
from typing import Any

from sagewarden.domain.actions import Action, EnsureHangAlarms, LaunchAttempt, Notify, StopJob
from sagewarden.domain.advice import advised_minutes
from sagewarden.domain.bounded import clip_lines, clip_text
from sagewarden.domain.checkpoints import Checkpoint
from sagewarden.domain.classifier import Classification
from sagewarden.domain.costs import live_cost_usd
from sagewarden.domain.events import Observations
from sagewarden.domain.launch import (
    MIN_SEGMENT_S,
    build_request,
    infra_check_for,
    keep_alive_for,
    wall_clock_remaining_s,
)
from sagewarden.domain.models import Attempt, LaunchState, Run, RunStatus, startup_kind
from sagewarden.domain.names import job_name
from sagewarden.domain.plan_windows import (
    LAUNCH_LEAD_MS,
    WAIT_WINDOW,
    launch_at,
    on_plan,
    plan_arn,
    plan_exhausted,
    plan_name,
)
from sagewarden.domain.policy import InstanceChoice, RunPolicy
from sagewarden.domain.pricing import gpus_per_instance, price_per_instance_hour

RECONCILE_INTERVAL_MS = 10 * 60_000  # how often the sweep re-observes a live job
LAUNCH_RETRY_AFTER_MS = 2 * 60_000  # a launch intent still unconfirmed after this is re-issued
# A cancelled run's unconfirmed launch counts as never created once SageMaker has had no such job
# for this long after the request: longer than any function that could still be issuing it.
LAUNCH_SETTLE_MS = 5 * 60_000
STOP_RETRY_AFTER_MS = 5 * 60_000  # a stop still not observed after this is re-issued
STOP_REASK_ON_EVIDENCE_MS = 60_000  # a job seen running this long after its stop is asked again at once
DEFER_RETRY_MS = 60_000  # a deferred decision is retried on the next sweep
DEFER_ALERT_AFTER_MS = 10 * 60_000  # ... and a person is told when it stays deferred this long
# ... and when the reason is an error that cannot heal by itself (no such bucket, access denied),
# the run fails after this long instead of waiting for ever: long enough for a person told at
# DEFER_ALERT_AFTER_MS to fix a bucket policy or a typo, and for IAM changes to propagate
DEFER_FAIL_AFTER_MS = 30 * 60_000
ALARM_VERIFY_AFTER_MS = 60_000  # hang alarms not yet seen in CloudWatch are checked this soon

INTENT_CANCEL = "cancel"
INTENT_HANG = "hang"
INTENT_WALL_CLOCK = "wall_clock"
INTENT_COST = "cost_budget"
INTENT_ORPHAN = "orphan"

ALERT_BODY_MAX_BYTES = 64 * 1024  # stored in the outbox (DynamoDB) and published (SNS, 256 KiB)
EVIDENCE_MAX_BYTES = 16 * 1024  # per attempt item (DynamoDB 400 KB per item)


@dataclass
class Draft:
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


# --------------------------------------------------------------------------------------------
# instance choices


def choices(d: Draft) -> list[InstanceChoice]:
    rc = d.run.request.get("ResourceConfig", {})
    primary = InstanceChoice(str(rc.get("InstanceType", "")), int(rc.get("InstanceCount", 1)))
    return [primary, *d.policy.instance_fallbacks]


def choice(d: Draft) -> InstanceChoice:
    options = choices(d)
    return options[d.run.fallback_index % len(options)]


def next_usable_choice(d: Draft, after: int) -> int | None:
    """The index after `after` (wrapping) whose quota is not known never to fit; None if none."""
    options = choices(d)
    for k in range(1, len(options) + 1):
        idx = (after + k) % len(options)
        if idx not in d.run.skipped_choices:
            return idx
    return None


# --------------------------------------------------------------------------------------------
# launching and stopping


def cancel_pending(d: Draft) -> bool:
    return d.run.cancel_requested_by is not None


def bad_pool_sizes(run: Run, instance_type: str, instance_count: int) -> set[bool]:
    """The volume sizes (Attempt.volume_steer) of the watched pools a job of this instance type
    and count could match that hold a bad host (both when an attempt's record is gone)."""
    by_number = {a.number: a for a in run.attempts}
    sizes: set[bool] = set()
    for w in run.warm_pools:
        if (
            w.bad_host
            and w.kept_by_ending
            and (w.instance_type, w.instance_count) == (instance_type, instance_count)
        ):
            att = by_number.get(w.attempt)
            sizes |= {att.volume_steer} if att is not None else {True, False}
    return sizes


def _volume_steer(run: Run, prefer: bool, instance_type: str, instance_count: int) -> bool:
    """The attempt asks for the size of the attempt before it (`prefer`), so it can run on that
    attempt's pool -- unless a pool holding a bad host has that size and none has the other: then
    the other, so SageMaker cannot match it with the bad host's pool (domain/warm_pools.py)."""
    blocked = bad_pool_sizes(run, instance_type, instance_count)
    return (not prefer) if prefer in blocked and (not prefer) not in blocked else prefer


def start_attempt(d: Draft, *, reuse_current: bool) -> None:
    """Launch the run's next attempt (or the current one again: ``reuse_current``)."""
    run, cur = d.run, d.run.current
    if cancel_pending(d):  # intent is final: nothing launches after a cancel
        if cur is None or not cur.live:
            finish_cancelled(d, "nothing was running")
        else:
            d.note("cancel recorded: not launching")
        return
    if cur is not None and cur.live and not reuse_current:
        d.note(f"refusing to launch: attempt {cur.number} may still be running")  # invariant guard
        return
    if wall_clock_remaining_s(run, d.now) < MIN_SEGMENT_S:
        fail(d, "wall-clock budget exhausted", ())
        return
    if plan_gate(d):  # a training plan's next window, or its end (domain/training_plans.py)
        return
    if d.run.plan_wait_since_ms is not None:  # the window's wait is over: not on the wall clock
        since = max(d.run.plan_wait_since_ms, d.run.budget_origin_ms)
        d.set(plan_waited_ms=d.run.plan_waited_ms + max(0, d.now - since), plan_wait_since_ms=None)
    run = d.run
    if d.obs.checkpoint_error:
        why = f"cannot read the checkpoints to resume from: {d.obs.checkpoint_error}"
        defer_or_fail(d, why, permanent=d.obs.checkpoint_error_permanent)
        return
    clear_deferral(d)
    ckpt = d.obs.checkpoint or d.run.last_checkpoint
    pick = choice(d)
    if reuse_current and cur is not None:
        number, tries = cur.number, cur.launch_tries + 1
    else:
        number, tries = run.attempt_count + 1, 1
    att = Attempt(
        number=number,
        job_name=job_name(run.job_prefix, run.name, run.run_id, number),
        instance_type=pick.instance_type,
        instance_count=pick.instance_count,
        requested_at_ms=d.now,
        launch_tries=tries,
        resume_from=ckpt,
        keep_alive_s=keep_alive_for(run),
        infra_check=infra_check_for(run),
        volume_steer=_volume_steer(
            run, cur is not None and cur.volume_steer, pick.instance_type, pick.instance_count
        ),
        checkpoint_minutes=(
            (cur.checkpoint_minutes if reuse_current and cur is not None else advised_minutes(run, d.now))
            if d.policy.apply_checkpoint_advice
            else None
        ),
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
    d.note(f"launch attempt {number} as {att.job_name} resuming from {ckpt_text(ckpt)}")


def plan_gate(d: Draft) -> bool:
    """True when the launch must not happen now: the run's training plan has its next window
    later (the run waits for it, RETRY_WAIT "window", woken LAUNCH_LEAD_MS before it opens), or
    has no window left and the policy has no fallback (the run fails, saying so). With the
    "on_demand" fallback the plan is dropped and the launch goes ahead without it."""
    run = d.run
    if not on_plan(run):
        return False
    if plan_exhausted(run, d.now):
        name = plan_name(plan_arn(run.request) or "")
        if d.policy.training_plan_fallback == "on_demand":
            d.set(plan_off=True)
            d.act(
                notify(
                    d,
                    "warning",
                    "run.plan_fallback",
                    f"{run.name}: training plan {name} has no window left, continuing on demand",
                    [
                        f"Plan status: {run.plan_status}; the run continues from {ckpt_text(d.obs.checkpoint or run.last_checkpoint)}",
                        "Next attempts launch without ResourceConfig.TrainingPlanArn "
                        "(training_plan_fallback on_demand): on-demand capacity and prices",
                    ],
                )
            )
            return False
        fail(
            d,
            f"training plan {name} has no window left ({run.plan_status}) and the run is not finished: "
            f"last checkpoint {ckpt_text(d.obs.checkpoint or run.last_checkpoint)}. Submit a new run on another "
            "plan, or with policy training_plan_fallback on_demand: it resumes from the same CheckpointConfig",
        )
        return True
    at = launch_at(run, d.now)
    if at is None:
        return False
    again = run.status == RunStatus.RETRY_WAIT and run.wait_reason == WAIT_WINDOW and run.wake_at_ms == at
    d.set(
        status=RunStatus.RETRY_WAIT,
        wake_at_ms=at,
        wait_reason=WAIT_WINDOW,
        wait_instance_type=None,
        recovering_since_ms=None,
        plan_wait_since_ms=run.plan_wait_since_ms if run.plan_wait_since_ms is not None else d.now,
    )
    d.note(f"waiting for the training plan's next window: launch in {(at - d.now) / 60_000:.0f} min")
    if not again:
        hours = (at + LAUNCH_LEAD_MS - d.now) / 3_600_000
        d.act(
            notify(
                d,
                "info",
                "run.waiting_for_window",
                f"{run.name}: waiting {hours:.1f} h for the training plan's next window",
                [
                    f"Resumes from: {ckpt_text(d.obs.checkpoint or run.last_checkpoint)}",
                    f"Launch {LAUNCH_LEAD_MS // 60_000} min before the window opens; SageMaker keeps the "
                    "job Pending until then",
                    f"Restarts: {run.restarts} of {d.policy.max_restarts} (a window's end is not counted)",
                ],
            )
        )
    return True


def relaunch_same(d: Draft, cur: Attempt, why: str) -> None:
    if cancel_pending(d):
        d.note(f"{why}: not re-issuing the launch of {cur.job_name} (cancel recorded)")
        return
    att = dataclasses.replace(cur, requested_at_ms=d.now, launch_tries=cur.launch_tries + 1)
    d.put_attempt(att)
    # the request is rebuilt from the attempt as first recorded (deterministic), so a job that
    # was in fact created answers ResourceInUse instead of starting twice
    d.act(LaunchAttempt(cur.number, cur.job_name, build_request(d.run, cur)))
    d.note(f"{why}: re-issuing the launch of {cur.job_name} (try {att.launch_tries})")


def request_stop(d: Draft, cur: Attempt, intent: str, why: str) -> None:
    d.put_attempt(dataclasses.replace(cur, stop_intent=intent, stop_requested_ms=d.now))
    d.set(status=RunStatus.STOPPING)
    d.act(StopJob(cur.job_name, intent))
    d.note(f"{why}: intent '{intent}' recorded, stopping {cur.job_name}")


def stop_stray(d: Draft, job: str, why: str) -> None:
    """Stop a job of this run that must not run, and keep asking until SageMaker confirms."""
    strays = dict(d.run.strays)
    strays[job] = d.now
    d.set(strays=tuple(sorted(strays.items())))
    d.act(StopJob(job, INTENT_ORPHAN))
    d.note(f"{why}: stopping {job}")


# --------------------------------------------------------------------------------------------
# waiting, deferring, finishing


def wait(
    d: Draft,
    reason: str,
    delay_ms: int,
    max_hours: float,
    cls: Classification,
    instance_type: str | None = None,
) -> None:
    run = d.run
    started = run.wait_started_ms if run.wait_started_ms is not None else d.now
    if (d.now - started) / 3_600_000 > max_hours:
        fail(d, f"gave up after waiting {max_hours:g} h ({reason})", cls.evidence)
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
    d.note(f"waiting ({reason}) {delay_ms / 1000:.0f} s")
    if first and reason != "throttle":
        lines = [
            f"Reason: {cls.reason}",
            f"Next try {f'in {delay_ms / 60_000:.0f} min' if delay_ms > 0 else 'now'}; gives up after {max_hours:g} h",
        ]
        if reason == "quota":
            lines.append("Also retries as soon as another supervised job releases these instances.")
        d.act(
            notify(
                d, "warning", "run.waiting", f"{run.name}: waiting for {reason}", [*lines, *cls.evidence[:3]]
            )
        )


def defer(d: Draft, reason: str, *, permanent: bool = False) -> None:
    """Take no decision now: an observation it needs is unknown. Retried on the next sweep;
    a person is told once when it stays deferred for DEFER_ALERT_AFTER_MS. `permanent`: the
    observation failed with an error that does not heal by itself (see `defer_or_fail`)."""
    run = d.run
    since = run.deferred_since_ms if run.deferred_since_ms is not None else d.now
    permanent_since = None
    if permanent:
        permanent_since = (
            run.deferred_permanent_since_ms if run.deferred_permanent_since_ms is not None else d.now
        )
    d.set(
        deferred_since_ms=since,
        deferred_reason=clip_text(reason, 1_000),
        deferred_permanent_since_ms=permanent_since,
    )
    d.note(f"decision deferred: {reason}")
    if not run.deferred_alerted and d.now - since >= DEFER_ALERT_AFTER_MS:
        d.set(deferred_alerted=True)
        advice = (
            "sagewarden will not act on a guess: it retries every minute and decides as soon "
            "as the observation can be made. Fix the access or wait for the service to recover."
        )
        if permanent_since is not None:
            fails_in = max(0, permanent_since + DEFER_FAIL_AFTER_MS - d.now) / 60_000
            advice = (
                "This error does not heal by itself: fix the bucket name, the bucket policy or the "
                f"supervisor's access within {fails_in:.0f} min, or the run fails "
                f"({DEFER_FAIL_AFTER_MS // 60_000} min after the error was first seen)."
            )
        d.act(
            notify(
                d,
                "warning",
                "run.deferred",
                f"{run.name}: decision deferred for {(d.now - since) / 60_000:.0f} min",
                [f"Reason: {reason}", advice],
            )
        )


def deferral_expired(d: Draft, permanent: bool) -> bool:
    """An error that cannot heal by itself has been the reason for DEFER_FAIL_AFTER_MS: waiting
    on it would wait for ever. A transient error (throttling, 5xx, a timeout) never expires."""
    since = d.run.deferred_permanent_since_ms
    return permanent and since is not None and d.now - since >= DEFER_FAIL_AFTER_MS


def give_up(d: Draft, reason: str) -> None:
    """Fail the run on an expired deferral (see `deferral_expired`)."""
    since = d.run.deferred_permanent_since_ms
    minutes = (d.now - since) / 60_000 if since is not None else 0
    fail(
        d,
        f"gave up after {minutes:.0f} min of an error that does not heal by itself: {reason}. "
        f"Fix it, then resume the run (sagewarden resume {d.run.run_id})",
    )


def defer_or_fail(d: Draft, reason: str, *, permanent: bool) -> None:
    """Defer, or fail the run once the deferral expired (`deferral_expired`)."""
    if deferral_expired(d, permanent):
        give_up(d, reason)
    else:
        defer(d, reason, permanent=permanent)


def clear_deferral(d: Draft) -> None:
    if d.run.deferred_since_ms is not None:
        d.note(f"deferral resolved after {(d.now - d.run.deferred_since_ms) / 60_000:.0f} min")
        d.set(
            deferred_since_ms=None,
            deferred_reason=None,
            deferred_alerted=False,
            deferred_permanent_since_ms=None,
        )


def fail(d: Draft, why: str, evidence: tuple[str, ...] = (), details: tuple[str, ...] = ()) -> None:
    """End the run FAILED; `details` (the class, why, advice) go between the outcome and the rest."""
    finish(d, RunStatus.FAILED, why, "critical", "run.failed", evidence, details)


def finish_cancelled(d: Draft, detail: str) -> None:
    finish(
        d,
        RunStatus.CANCELLED,
        f"cancelled by {d.run.cancel_requested_by} ({detail})",
        "warning",
        "run.cancelled",
    )


def finish(
    d: Draft,
    status: RunStatus,
    why: str,
    severity: str,
    event: str,
    evidence: tuple[str, ...] = (),
    details: tuple[str, ...] = (),
) -> None:
    run = d.run
    d.set(
        status=status,
        outcome=why,
        wake_at_ms=None,
        wait_reason=None,
        wait_instance_type=None,
        deferred_since_ms=None,
        deferred_reason=None,
        deferred_alerted=False,
        deferred_permanent_since_ms=None,
    )
    lines = [
        f"Outcome: {why}",
        *details,
        f"Attempts: {run.attempt_count}; restarts {run.restarts} of {d.policy.max_restarts}; "
        f"MaxRuntime segments {run.segments}",
        f"Last verified checkpoint: {ckpt_text(run.last_checkpoint)}",
        f"Estimated cost: ${run.cost_usd:,.2f}",
    ]
    if evidence:
        lines += ["Evidence:", *evidence[:10]]
    d.act(notify(d, severity, event, f"{run.name}: {status.value.lower()}", lines))
    d.note(f"run {status.value}: {why}")


# --------------------------------------------------------------------------------------------
# actions as data


def instance_shape(att: Attempt) -> str:
    return f"{att.instance_type} x {att.instance_count}"


# where a hang window in force comes from
WINDOW_LEARNED = "learned"  # the attempt's own cadence
WINDOW_CARRIED = "carried"  # learned by an earlier attempt on the same instances
WINDOW_POLICY = "policy"


def window_in_force(run: Run, policy: RunPolicy, att: Attempt, *, progress: bool = False) -> tuple[int, str]:
    """The log-silence (or progress) window of `att`, and where it comes from: the attempt's own
    learned window, else one an earlier attempt of the run learned on the same instances, else
    the policy's (the ceiling of every learned one)."""
    if progress:
        own, learned, ceiling = (
            att.progress_window_min,
            run.learned_progress_window_min,
            policy.progress_stall_minutes,
        )
    else:
        own, learned, ceiling = att.log_window_min, run.learned_log_window_min, policy.log_silence_minutes
    if own:
        return own, WINDOW_LEARNED
    if learned and run.learned_windows_on == instance_shape(att):
        return min(learned, ceiling), WINDOW_CARRIED
    return ceiling, WINDOW_POLICY


def startup_allowance(run: Run, policy: RunPolicy, att: Attempt) -> int:
    """The policy's start-up allowance, or a shorter one learned from an earlier *comparable*
    attempt (`startup_kind`: a fresh start's minutes say nothing about a resume that loads a
    checkpoint for twenty silent minutes)."""
    learned, pol = run.startup_learned_min, policy.startup_silence_minutes
    if learned is None or run.startup_learned_on != startup_kind(att):
        return pol
    return min(pol, learned)


def log_window(d: Draft, att: Attempt) -> int:
    return window_in_force(d.run, d.policy, att)[0]


def progress_window(d: Draft, att: Attempt) -> int:
    return window_in_force(d.run, d.policy, att, progress=True)[0]


def hang_alarms(d: Draft, att: Attempt, only_keys: tuple[str, ...] = ()) -> EnsureHangAlarms:
    return EnsureHangAlarms(
        job_name=att.job_name,
        attempt=att.number,
        instance_count=att.instance_count,
        gpus_per_host=gpus_per_instance(att.instance_type),
        log_silence_minutes=log_window(d, att),
        gpu_idle_percent=d.policy.gpu_idle_percent,
        gpu_idle_minutes=d.policy.gpu_idle_minutes,
        checkpoint_stale_minutes=d.policy.checkpoint_stale_minutes,
        progress_metric=d.policy.progress_metric,
        progress_stall_minutes=progress_window(d, att),
        gpu_lone_idle_minutes=d.policy.gpu_lone_idle_minutes,
        gpu_busy_percent=d.policy.gpu_busy_percent,
        log_silence_alarm=d.obs.log_subscription,
        only_keys=only_keys,
    )


def no_warm_pool_lines(pick: InstanceChoice) -> list[str]:
    """What the run.submitted alert says when the account's warm-pool quota for the run's
    instances is 0 (AWS's default), known from Service Quotas at submit: the run is told once."""
    quota = f"{pick.instance_type} for training warm pool usage"
    return [
        f"Warm pool: none. The account's quota '{quota}' is 0 (AWS's default): SageMaker would keep "
        "no pool, without an error, so this run's attempts ask for none and restarts start cold "
        f"(new instances: minutes, not seconds). For warm restarts, raise it in Service Quotas "
        f"(Amazon SageMaker) to at least {pick.instance_count}.",
    ]


def notify(d: Draft, severity: str, event: str, subject: str, lines: list[str]) -> Notify:
    run = d.run
    body_lines = clip_lines(
        [*lines, "", f"Run: {run.name} ({run.run_id})"], ALERT_BODY_MAX_BYTES, keep="head"
    )
    return Notify(
        severity=severity,
        event=event,
        subject=clip_text(f"[sagewarden] {subject}", 99),
        body="\n".join(body_lines),
        attributes={"severity": severity, "run_id": run.run_id, "event": event},
    )


def bounded_evidence(lines: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    return clip_lines(list(lines), EVIDENCE_MAX_BYTES, keep="head")


# --------------------------------------------------------------------------------------------
# arithmetic


def backoff_ms(d: Draft) -> int:
    pol, run = d.policy, d.run
    base = min(pol.backoff_cap_seconds, pol.backoff_base_seconds * 2 ** min(run.wait_count, 20))
    return int(base * 1000 * jitter(run.run_id, run.wait_count, pol.backoff_jitter))


def throttle_ms(d: Draft) -> int:
    return int(d.policy.throttle_backoff_seconds * 1000 * jitter(d.run.run_id, d.run.wait_count, 0.5))


def jitter(seed: str, k: int, spread: float) -> float:
    """Deterministic factor in [1 - spread, 1 + spread] (decide stays pure and replayable)."""
    frac = (zlib.crc32(f"{seed}:{k}".encode()) % 10_000) / 10_000
    return 1 + spread * (2 * frac - 1)


def running_cost(d: Draft, cur: Attempt) -> float:
    return live_cost_usd(cur, d.policy, d.now)


def lost_work(d: Draft, ended: Attempt) -> tuple[float, float]:
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


def step_of(ckpt: Checkpoint | None) -> int:
    return ckpt.step if ckpt is not None else -1


def ckpt_text(ckpt: Checkpoint | None) -> str:
    return f"step {ckpt.step} ({ckpt.uri})" if ckpt is not None else "no checkpoint (fresh start)"


def waiting_launch(cur: Attempt | None) -> bool:
    return cur is not None and cur.launch == LaunchState.WAITING
