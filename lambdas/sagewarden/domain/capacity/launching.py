"""Starting an attempt (domain/capacity/launching.py): the next usable instance choice, the
Training Plan gate, volume steering away from bad warm pools, and relaunching the same request.
Why: docs/hang-detection.md (*Warm restarts*)."""

from __future__ import annotations

import dataclasses

from sagewarden.domain.decision.alerts import notify
from sagewarden.domain.decision.deferrals import clear_deferral, defer_or_fail
from sagewarden.domain.decision.outcomes import fail, finish_cancelled
from sagewarden.domain.decision.pending import PendingDecision, cancel_pending, choice, choices, ckpt_text
from sagewarden.domain.vocabulary.actions import LaunchAttempt
from sagewarden.domain.vocabulary.advice import advised_minutes
from sagewarden.domain.vocabulary.launch import (
    MIN_SEGMENT_S,
    build_request,
    infra_check_for,
    keep_alive_for,
    wall_clock_remaining_s,
)
from sagewarden.domain.vocabulary.models import Attempt, Run, RunStatus
from sagewarden.domain.vocabulary.names import job_name
from sagewarden.domain.vocabulary.plan_windows import (
    LAUNCH_LEAD_MS,
    launch_at,
    on_plan,
    plan_arn,
    plan_exhausted,
    plan_name,
)
from sagewarden.domain.vocabulary.policy import InstanceChoice
from sagewarden.domain.vocabulary.reasons import WaitReason


def next_usable_choice(d: PendingDecision, after: int) -> int | None:
    """The index after `after` (wrapping) whose quota is not known never to fit; None if none."""
    options = choices(d)
    for k in range(1, len(options) + 1):
        idx = (after + k) % len(options)
        if idx not in d.run.skipped_choices:
            return idx
    return None


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
    the other, so SageMaker cannot match it with the bad host's pool (domain/capacity/warm_pools.py)."""
    blocked = bad_pool_sizes(run, instance_type, instance_count)
    return (not prefer) if prefer in blocked and (not prefer) not in blocked else prefer


def start_attempt(d: PendingDecision, *, reuse_current: bool) -> None:
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
    if plan_gate(d):  # a training plan's next window, or its end (domain/capacity/training_plans.py)
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


def plan_gate(d: PendingDecision) -> bool:
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
    again = (
        run.status == RunStatus.RETRY_WAIT and run.wait_reason == WaitReason.WINDOW and run.wake_at_ms == at
    )
    d.set(
        status=RunStatus.RETRY_WAIT,
        wake_at_ms=at,
        wait_reason=WaitReason.WINDOW,
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


def relaunch_same(d: PendingDecision, cur: Attempt, why: str) -> None:
    if cancel_pending(d):
        d.note(f"{why}: not re-issuing the launch of {cur.job_name} (cancel recorded)")
        return
    att = dataclasses.replace(cur, requested_at_ms=d.now, launch_tries=cur.launch_tries + 1)
    d.put_attempt(att)
    # the request is rebuilt from the attempt as first recorded (deterministic), so a job that
    # was in fact created answers ResourceInUse instead of starting twice
    d.act(LaunchAttempt(cur.number, cur.job_name, build_request(d.run, cur)))
    d.note(f"{why}: re-issuing the launch of {cur.job_name} (try {att.launch_tries})")


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
