"""Warm pools: each ended attempt's pool watched level-triggered until it is gone.

Releasing a pool nothing will reuse, waiting for a resume's pool, steering past a bad host's pool,
and learning that no warm-pool quota exists. Pure. Why: docs/hang-detection.md (*Warm restarts*)."""

from __future__ import annotations

import dataclasses

from sagewarden.domain.capacity.launching import bad_pool_sizes, start_attempt
from sagewarden.domain.decision.alerts import notify
from sagewarden.domain.decision.pending import PendingDecision, choice, waiting_launch
from sagewarden.domain.hangs.alarms import SIGNAL_GPU_LONE_IDLE
from sagewarden.domain.vocabulary.actions import ReleaseWarmPool
from sagewarden.domain.vocabulary.classifier.models import Classification, EndingClass
from sagewarden.domain.vocabulary.events import JobMissing, JobObserved
from sagewarden.domain.vocabulary.launch import steered_volume_gb
from sagewarden.domain.vocabulary.models import SM_DELETING, Attempt, PoolWatch, Run, RunStatus
from sagewarden.domain.vocabulary.pricing import price_per_instance_hour
from sagewarden.domain.vocabulary.reasons import EventSource, StopIntent, WaitReason

POOL_LOOK_MS = 60_000  # a watched pool's job is described this often
POOL_WAIT_MS = 5 * 60_000  # a resume waits this long for its pool (a cold start takes ~8 min)
# a pool not seen by then was not kept (AWS does not say what DescribeTrainingJob shows before)
POOL_SETTLE_MAX_MS = 10 * 60_000
RELEASE_EVERY_MS = 60_000  # an Available pool still there is released again after this
MAX_POOL_WATCHES = 8  # per run (one per ended attempt; each lasts minutes)
GONE = frozenset({"Terminated", "Reused"})


# --------------------------------------------------------------------------------------------
# which endings keep a pool, and which pools must never be reused


def ending_keeps_pool(status: str, failure_reason: str | None) -> bool:
    """SageMaker guide, "Warm pool creation": completed, stopped (once the cluster is up), or
    failed with an algorithm or client error; "any other reason that might compromise the health
    of the cluster" keeps none."""
    if status in ("Completed", "Stopped"):
        return True
    return status == "Failed" and (failure_reason or "").startswith(("AlgorithmError", "ClientError"))


def singles_out_host(att: Attempt, cls: Classification) -> bool:
    """The ending points at one bad instance: a hardware fault (also one that surfaced as an
    AlgorithmError: Xid, ECC), or a hang with one host idle among busy ones or without metrics."""
    return (
        cls.hardware
        or SIGNAL_GPU_LONE_IDLE in att.hang_signals
        or bool(att.suspect_hosts)
        or att.pool_suspect
    )


# crash classes whose repeat on the same instances makes them suspect (domain/hosts/bad_hosts.py)
REPEAT_CLASSES = frozenset({EndingClass.INFRASTRUCTURE.value, EndingClass.UNKNOWN.value})


def fault_key(end_class: str | None, stop_intent: str | None) -> str | None:
    """What "the same fault" means for a repeat on the same instances: a crash of the same class
    (an infrastructure error, or one nothing explains) or a hang (None: not a fault)."""
    if end_class in REPEAT_CLASSES:
        return end_class
    if end_class == EndingClass.SUPERVISOR_STOP and stop_intent == StopIntent.HANG:
        return StopIntent.HANG
    return None


def watch_of(run: Run, job_name: str) -> PoolWatch | None:
    return next((w for w in run.warm_pools if w.job_name == job_name), None)


def _put(d: PendingDecision, watch: PoolWatch | None, *, drop: str | None = None) -> None:
    name = drop or (watch.job_name if watch is not None else "")
    kept = tuple(w for w in d.run.warm_pools if w.job_name != name)
    d.set(warm_pools=kept if watch is None else (*kept, watch))


def watch_ended(d: PendingDecision, att: Attempt, e: JobObserved, cls: Classification) -> PoolWatch | None:
    """Start watching the pool an attempt that just ended may have left."""
    reached = att.training_started_ms is not None or e.training_started_ms is not None
    if att.keep_alive_s <= 0 or not reached:
        return None
    watch = PoolWatch(
        job_name=att.job_name,
        attempt=att.number,
        instance_type=att.instance_type,
        instance_count=att.instance_count,
        ended_ms=e.ended_ms or e.modified_ms,
        keep_alive_s=att.keep_alive_s,
        kept_by_ending=ending_keeps_pool(e.status, att.failure_reason),
        bad_host=singles_out_host(att, cls),
        fault=fault_key(cls.kind, att.stop_intent),
    )
    watches = [w for w in d.run.warm_pools if w.job_name != watch.job_name]
    while len(watches) >= MAX_POOL_WATCHES:
        old = watches.pop(0)
        d.note(f"no longer watching the warm pool of {old.job_name} (at most {MAX_POOL_WATCHES} at once)")
    d.set(warm_pools=(*watches, watch))
    if watch.bad_host:
        hosts = ", ".join(att.suspect_hosts) or "a host"
        d.note(f"{att.job_name} singled out {hosts}: its warm pool must not be reused")
    return watch


# --------------------------------------------------------------------------------------------
# the next launch: at once, or once the pool is Available (reuse) / gone (bad host)


def start_or_wait(d: PendingDecision, ended: Attempt) -> None:
    """Launch the attempt after `ended`, or wait for its pool first (see the module docstring)."""
    watch = watch_of(d.run, ended.job_name)
    if watch is None or not watch.kept_by_ending:
        start_attempt(d, reuse_current=False)
        return
    pick = choice(d)
    if not watch.bad_host and (pick.instance_type, pick.instance_count) != (
        ended.instance_type,
        ended.instance_count,
    ):
        start_attempt(d, reuse_current=False)  # other instances: the pool is released
        return
    if watch.bad_host and can_steer(d):
        d.note(
            f"the warm pool of {ended.job_name} holds a bad host: the replacement starts now on new "
            "instances, asking for a volume size 1 GB off its, so SageMaker cannot match that pool"
        )
        start_attempt(d, reuse_current=False)
        return
    if watch.bad_host:
        until = _gone_by_ms(watch)
        why = "its warm pool holds the bad host: the replacement starts once the pool is gone"
    else:
        until = watch.ended_ms + POOL_WAIT_MS
        why = "the replacement runs on its warm pool once SageMaker reports it Available"
    d.set(
        status=RunStatus.RETRY_WAIT,
        wake_at_ms=max(until, d.now),
        wait_reason=WaitReason.WARM_POOL,
        wait_instance_type=None,
    )
    d.note(f"waiting (warm pool) for the pool of {ended.job_name}: {why}")


def mark_bad_host(d: PendingDecision, watch: PoolWatch) -> None:
    """A host of the pool's attempt was singled out after its ending was decided: the pool must not
    be reused, and a run waiting to resume on it waits no more than the pool takes to be gone."""
    _put(d, dataclasses.replace(watch, bad_host=True))
    if waits_for(d.run, watch):
        d.set(wake_at_ms=max(_gone_by_ms(watch), d.now))


def _gone_by_ms(watch: PoolWatch) -> int:
    """By when a watched pool is gone whatever happens (never seen, or expired)."""
    return watch.ended_ms + POOL_SETTLE_MAX_MS + watch.keep_alive_s * 1000


def can_steer(d: PendingDecision) -> bool:
    """The next attempt can start at once and still never run on a pool holding a bad host: the
    request names a volume size, and one of the two sizes (draft.bad_pool_sizes) is on no such
    pool it could match."""
    if steered_volume_gb(d.run.request) is None:
        return False
    pick = choice(d)
    return len(bad_pool_sizes(d.run, pick.instance_type, pick.instance_count)) < 2


def wait_for_bad_pool(d: PendingDecision, cur: Attempt) -> bool:
    """A launch of `cur` refused for quota while a pool of the run holding a bad host, of the same
    instance type, is still kept: its idle instances count towards the quota, so the launch
    waits until the pool is gone (released as soon as it is Available) -- True if it waits."""
    pools = [
        w
        for w in d.run.warm_pools
        if w.bad_host and w.kept_by_ending and w.instance_type == cur.instance_type
    ]
    if not pools:
        return False
    until = max(_gone_by_ms(w) for w in pools)
    d.set(
        status=RunStatus.RETRY_WAIT,
        wake_at_ms=max(until, d.now),
        wait_reason=WaitReason.WARM_POOL,
        wait_instance_type=None,
    )
    names = ", ".join(w.job_name for w in pools)
    d.note(f"waiting (warm pool): the warm pool of {names} holds a bad host and counts towards the quota")
    return True


def waits_for(run: Run, watch: PoolWatch) -> bool:
    """The run's next launch waits for this pool (Available for a reuse, gone after a bad host;
    or gone because its instances count towards the quota a refused launch needs)."""
    cur = run.current
    if run.status != RunStatus.RETRY_WAIT or run.wait_reason != WaitReason.WARM_POOL or cur is None:
        return False
    if cur.job_name == watch.job_name:
        return True
    return waiting_launch(cur) and watch.bad_host and watch.instance_type == cur.instance_type


def _waits_on_bad_pool(run: Run) -> bool:
    """The run's next launch waits until pools holding a bad host are gone."""
    cur = run.current
    if run.status != RunStatus.RETRY_WAIT or run.wait_reason != WaitReason.WARM_POOL or cur is None:
        return False
    watch = watch_of(run, cur.job_name)
    return waiting_launch(cur) or watch is None or watch.bad_host


def _launch_now(d: PendingDecision, why: str) -> None:
    d.note(why)
    start_attempt(d, reuse_current=waiting_launch(d.run.current))


# --------------------------------------------------------------------------------------------
# what DescribeTrainingJob says about a watched pool


def on_pool_observed(d: PendingDecision, e: JobObserved) -> str | None:
    """Act on a watched pool's WarmPoolStatus; returns None when it acted, else why not."""
    watch = watch_of(d.run, e.job_name)
    if watch is None or e.source != EventSource.DESCRIBE:
        return "not a watched warm pool"
    if e.status == SM_DELETING:
        return on_pool_job_gone(d, e.job_name, "its job is being deleted outside sagewarden")
    status = e.warm_pool_status
    waiting = waits_for(d.run, watch) and not d.run.status.terminal
    if status in GONE:
        bad_wait = waiting or _waits_on_bad_pool(d.run)
        _gone(d, watch, e)
        if waiting:  # (Reused while the run still waits: another job took it)
            _launch_now(d, f"the warm pool of {watch.job_name} is {status}: the next attempt starts cold")
        elif bad_wait and can_steer(d):  # the other size is free again: no need to wait longer
            _launch_now(
                d, f"the warm pool of {watch.job_name} is {status}: the next attempt can avoid the rest"
            )
        return None
    if status == "Available":
        if waiting and not watch.bad_host:
            _put(d, dataclasses.replace(watch, status=status))
            _launch_now(d, f"the warm pool of {watch.job_name} is Available: the next attempt runs on it")
            return None
        last = watch.last_release_ms
        if last is not None and d.now - last < RELEASE_EVERY_MS:
            return f"release of the warm pool of {watch.job_name} asked {(d.now - last) / 1000:.0f} s ago"
        why = "it holds a bad host" if watch.bad_host else "nothing will reuse it"
        _put(d, dataclasses.replace(watch, status=status, releases=watch.releases + 1, last_release_ms=d.now))
        d.act(ReleaseWarmPool(watch.job_name))
        d.note(f"releasing the warm pool of {watch.job_name} ({why})")
        # a bad host named while the run waited to reuse the pool (not a launch the quota refused:
        # that one waits until the pool is gone)
        if waiting and not waiting_launch(d.run.current) and can_steer(d):
            _launch_now(d, "the next attempt starts on new instances, never on that pool")
        return None
    # no status yet (or one that says nothing about an ended job's pool)
    if d.now - watch.ended_ms >= POOL_SETTLE_MAX_MS and watch.status is None:
        _put(d, None, drop=watch.job_name)
        d.note(f"no warm pool reported for {watch.job_name} {POOL_SETTLE_MAX_MS // 60_000} min after its end")
        _not_kept(d, watch)
        if waiting:
            _launch_now(d, f"the next attempt starts cold (no warm pool of {watch.job_name})")
        return None
    if watch.status != status:
        _put(d, dataclasses.replace(watch, status=status))
        return None
    return f"the warm pool of {watch.job_name} is not Available yet"


def on_pool_job_gone(d: PendingDecision, job_name: str, why: str) -> str | None:
    """A watched pool's job was deleted outside sagewarden: it keeps no Available pool (SageMaker
    refuses to delete one that does), and what it kept or cost is unknown -- never read as "no
    warm-pool quota". The watch ends; a launch waiting for the pool starts cold."""
    watch = watch_of(d.run, job_name)
    if watch is None:
        return "not a watched warm pool"
    waiting = waits_for(d.run, watch) and not d.run.status.terminal
    _put(d, None, drop=job_name)
    d.note(f"stopped watching the warm pool of {job_name}: {why}")
    if waiting:
        _launch_now(d, f"the next attempt starts cold (the warm pool of {job_name} is gone with its job)")
    return None


def is_pool_job_missing(run: Run, e: JobMissing) -> bool:
    """DescribeTrainingJob found no job for a watched pool of an ended attempt (not the live one)."""
    if watch_of(run, e.job_name) is None:
        return False
    cur = run.current
    return cur is None or cur.job_name != e.job_name or cur.ended


def _gone(d: PendingDecision, watch: PoolWatch, e: JobObserved) -> None:
    _put(d, None, drop=watch.job_name)
    taker = next((a for a in d.run.attempts if a.job_name == e.warm_pool_reused_by), None)
    if e.warm_pool_status == "Reused" and taker is not None and taker.pool_of is None:
        # it runs on those instances: remember how their last attempt ended (domain/hosts/bad_hosts.py)
        d.put_attempt(dataclasses.replace(taker, pool_of=watch.attempt, pool_fault=watch.fault))
    billed_s = e.warm_pool_billable_s or 0
    cost = 0.0
    if billed_s > 0:
        price = price_per_instance_hour(watch.instance_type, d.policy.instance_hour_price_usd)
        cost = price * watch.instance_count * billed_s / 3600
        d.set(cost_usd=round(d.run.cost_usd + cost, 2))
    reused = f" by {e.warm_pool_reused_by}" if e.warm_pool_reused_by else ""
    d.note(
        f"warm pool of {watch.job_name}: {e.warm_pool_status}{reused}; kept {billed_s} s "
        f"({watch.instance_count} instances, ~${cost:,.2f})"
    )
    never_kept = e.warm_pool_status == "Terminated" and billed_s <= 0 and watch.releases == 0
    if never_kept and watch.status is None:
        _not_kept(d, watch)


def _not_kept(d: PendingDecision, watch: PoolWatch) -> None:
    """SageMaker kept no pool after an ending that keeps one: the account has no warm-pool quota
    for these instances (0 by default; AWS then runs the job without a pool and says nothing)."""
    if not watch.kept_by_ending or d.run.warm_pool_off or d.run.status.terminal:
        return  # (a finished run restarts nothing: nothing to tell)
    d.set(warm_pool_off=True)
    quota = f"{watch.instance_type} for training warm pool usage"
    d.act(
        notify(
            d,
            "info",
            "attempt.warm_pool_off",
            f"{d.run.name}: no warm pool kept for {watch.instance_type}; restarts start cold",
            [
                f"Attempt {watch.attempt} asked SageMaker to keep its {watch.instance_count} x "
                f"{watch.instance_type} warm for {watch.keep_alive_s} s, and SageMaker kept none: the "
                f"account's quota '{quota}' is most likely 0 (AWS's default; no error is reported).",
                "This run's restarts now start cold (new instances: minutes, not seconds), and its "
                "attempts no longer ask for a warm pool.",
                f"For warm restarts, raise '{quota}' in Service Quotas (Amazon SageMaker) to at least "
                f"{watch.instance_count}, or set keep_alive_seconds to 0 to stop asking.",
            ],
        )
    )
    d.note(f"no warm-pool quota for {watch.instance_type}: later attempts ask for no warm pool")


# --------------------------------------------------------------------------------------------
# ticks: the waits' and the watches' time bounds


def on_pool_tick(d: PendingDecision) -> bool:
    """Drop watches past their bound (the pool expired by then whatever happened); True if any."""
    changed = False
    for w in d.run.warm_pools:
        bound = w.ended_ms + POOL_SETTLE_MAX_MS + w.keep_alive_s * 1000 + POOL_LOOK_MS
        if d.now >= bound:
            _put(d, None, drop=w.job_name)
            d.note(
                f"stopped watching the warm pool of {w.job_name}: past its keep-alive "
                f"(last seen {w.status or 'never'}, {w.releases} release(s) asked)"
            )
            changed = True
    return changed


def pool_due_ms(run: Run, now_ms: int) -> int | None:
    """When the sweep must next describe a watched pool (None: none watched)."""
    return now_ms + POOL_LOOK_MS if run.warm_pools else None


def is_pool_observation(run: Run, e: JobObserved) -> bool:
    """A DescribeTrainingJob of an ended attempt whose pool is watched (not the live attempt)."""
    if e.source != EventSource.DESCRIBE or watch_of(run, e.job_name) is None:
        return False
    cur = run.current
    return cur is None or cur.job_name != e.job_name or cur.ended
