"""When the sweep must next look at a run (pure): timers, re-issues of lost actions, watched warm
pools, the moment a hang window can be learned, else the routine reconcile look (jittered).
Why: docs/reliability.md (*Durable timers*)."""

from __future__ import annotations

from sagewarden.domain.capacity.training_plans import plan_due_ms
from sagewarden.domain.capacity.warm_pools import pool_due_ms
from sagewarden.domain.decision.deferrals import DEFER_RETRY_MS
from sagewarden.domain.decision.pending import (
    ALARM_VERIFY_AFTER_MS,
    LAUNCH_RETRY_AFTER_MS,
    RECONCILE_INTERVAL_MS,
    STOP_RETRY_AFTER_MS,
    jitter,
)
from sagewarden.domain.hangs.cadence import learnable_at
from sagewarden.domain.hangs.quiet import quiet_due_ms
from sagewarden.domain.hangs.windows import startup_allowance
from sagewarden.domain.hosts.fabric import scan_due_ms
from sagewarden.domain.hosts.stragglers import read_due_ms
from sagewarden.domain.vocabulary.models import LaunchState, Run, RunStatus

DUE_JITTER = 0.2


def next_due_ms(run: Run, now_ms: int, reconcile_interval_ms: int = RECONCILE_INTERVAL_MS) -> int | None:
    """When the sweep must next look at this run (None: never again)."""
    due = _next_due_ms(run, now_ms, reconcile_interval_ms)
    scan = scan_due_ms(run, now_ms)  # a training attempt's start-up log scan (domain/hosts/fabric.py)
    if scan is not None and due is not None:
        due = min(due, scan)
    steps = read_due_ms(run, now_ms)  # a training attempt's step lines (domain/hosts/stragglers.py)
    if steps is not None and due is not None:
        due = min(due, steps)
    stop = plan_due_ms(run, now_ms)  # a training plan's window ends (domain/capacity/training_plans.py)
    if stop is not None and due is not None:
        due = min(due, stop)
    ready = quiet_due_ms(run, now_ms)  # when a quiet alarm's level first speaks of Training
    if ready is not None and due is not None:
        due = min(due, ready)
    pools = pool_due_ms(run, now_ms)  # watched warm pools: terminal runs too
    if pools is None:
        return due
    return pools if due is None else min(due, pools)


def _next_due_ms(run: Run, now_ms: int, reconcile_interval_ms: int) -> int | None:
    if run.status.terminal:
        if not run.strays:
            return None
        return min(at for _, at in run.strays) + STOP_RETRY_AFTER_MS
    current = run.current
    if run.deferred_since_ms is not None:
        return now_ms + DEFER_RETRY_MS
    if run.status == RunStatus.RETRY_WAIT and run.wake_at_ms is not None:
        return run.wake_at_ms
    if current is None:
        return now_ms
    if current.launch == LaunchState.PENDING:
        return current.requested_at_ms + LAUNCH_RETRY_AFTER_MS
    if current.stop_requested_ms is not None and current.live:
        return current.stop_requested_ms + STOP_RETRY_AFTER_MS
    if current.in_training and current.alarms_active and not current.alarms_confirmed:
        return now_ms + ALARM_VERIFY_AFTER_MS
    # the routine look is jittered (+/- 20 %, per run and pass): runs that a backlog served in the
    # same minute drift apart instead of staying bunched into one minute every interval for ever
    spread = jitter(run.run_id, now_ms // 60_000, DUE_JITTER)
    routine = now_ms + int(reconcile_interval_ms * spread)
    learn = _learn_due_ms(run, now_ms)
    return routine if learn is None else min(routine, learn)


def _learn_due_ms(run: Run, now_ms: int) -> int | None:
    """A training attempt whose log-silence window is not learned yet is looked at the moment one
    can be (`cadence.learnable_at`), not up to a reconcile interval later: until then a hang
    waits out the policy's window."""
    cur, pol = run.current, run.policy
    if (
        cur is None
        or not cur.in_training
        or cur.training_started_ms is None
        or cur.log_window_min is not None
        or not (pol.adaptive_windows and pol.hang_detection)
    ):
        return None
    at = learnable_at(cur.training_started_ms, startup_allowance(run, pol, cur))
    return at if at > now_ms else None
