"""The sweep, every minute: lease, alarm levels and heartbeat-pipeline health, due runs and owed
alerts round-robin over shards within a time budget, and stale-alarm cleanup.

Why: docs/reliability.md (*Levels, not edges*, *Durable timers*, *The sweep's lease*)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sagewarden import keys
from sagewarden.domain.decide import decide
from sagewarden.domain.hangs.alarms import SIGNAL_LOG_SILENCE, key_signal
from sagewarden.domain.hangs.heartbeat import DEPLOYMENT_ALERTS, PipelineLevel, judge_pipeline
from sagewarden.domain.vocabulary.events import AlarmsObserved, JobMissing, JobObserved, Tick
from sagewarden.domain.vocabulary.models import Run, RunStatus
from sagewarden.domain.vocabulary.names import parse_job_name
from sagewarden.ports.aws import OUTBOX_GRACE_MS, AlarmInventory, ConcurrentUpdate, DueItem, OutboxMessage

if TYPE_CHECKING:
    from sagewarden.usecases.supervisor import Supervisor


log = logging.getLogger("sagewarden.sweep")

SWEEP_RESERVE_MS = 10_000  # leave this much of the invocation's time unused
LEASE_NAME = "sweep"


@dataclass
class SweepReport:
    due: int = 0
    observed: int = 0
    acted: int = 0
    alarms_in_alarm: int = 0
    alarms_deleted: int = 0
    alerts_published: int = 0
    heartbeat_broken: bool | None = None  # the pipeline as judged at this pass (None: not judged)
    out_of_time: bool = False  # the time budget ran out; what is left stays due for the next pass
    skipped: bool = False  # another sweep holds the lease
    errors: list[str] = field(default_factory=list)


class Sweep:
    def __init__(self, sup: Supervisor, *, time_left_ms: Callable[[], int] | None, owner: str) -> None:
        self.sup = sup
        self.time_left_ms = time_left_ms
        self.owner = owner
        self.report = SweepReport()
        self.inventory: AlarmInventory | None = None
        self.doubted: set[str] = set()  # training jobs whose heartbeat their logs contradicted

    def _out_of_time(self) -> bool:
        if self.time_left_ms is not None and self.time_left_ms() < SWEEP_RESERVE_MS:
            self.report.out_of_time = True
            return True
        return False

    def run(self, *, cleanup_alarms: bool = False) -> SweepReport:
        sup = self.sup
        now = sup.clock()
        if not sup.store.acquire_lease(LEASE_NAME, self.owner, now, sup.settings.sweep_lease_ms):
            self.report.skipped = True
            return self.report
        try:
            self._read_pipeline()
            self._read_alarms()
            self._feed_alarms_in_alarm()
            self._judge_pipeline(now)
            self._serve_due(now)
            if cleanup_alarms and not self._out_of_time():
                self._cleanup_alarms()
        finally:
            try:
                sup.store.release_lease(LEASE_NAME, self.owner)
            except Exception:  # the lease expires on its own
                log.exception("releasing the sweep lease failed")
        return self.report

    # -- alarms ---------------------------------------------------------------------------------
    def _read_alarms(self) -> None:
        try:
            self.inventory = self.sup.alarms.inventory()
            # gauges for the dashboard's supervision-cost estimate
            self.sup.counters.add(keys.METRIC_HANG_ALARMS, float(self.inventory.metrics))
            self.sup.counters.add(keys.METRIC_WATCHED_JOBS, float(len(self.inventory)))
        except Exception as exc:  # unknown, not "no alarms": nothing alarm-related is judged
            log.exception("reading the hang alarms failed")
            self.sup.counters.add(keys.METRIC_OBSERVATION_FAILURES)
            self.report.errors.append(f"DescribeAlarms: {exc}")
            self.inventory = None

    def _feed_alarms_in_alarm(self) -> None:
        for job, states in sorted((self.inventory or {}).items()):
            if not any(state == "ALARM" for _, state, _ in states):
                continue
            parsed = parse_job_name(job)
            if parsed is None:
                continue
            self.report.alarms_in_alarm += 1
            if self._out_of_time():
                return
            event = AlarmsObserved(job, parsed[1], states)
            self._guarded(parsed[0], functools.partial(self._feed, parsed[0], event))

    # -- the heartbeat pipeline (domain/hangs/heartbeat.py) -------------------------------------------
    def _read_pipeline(self) -> None:
        """The pipeline as last judged, before anything is decided this pass. Unknown (a failed
        read) is not "delivering": this pass judges nothing about it, and its decisions rely on
        each attempt's own confirmation."""
        try:
            self.sup.pipeline = self.sup.store.get_pipeline()
        except Exception as exc:
            log.exception("reading the heartbeat pipeline's state failed")
            self.sup.counters.add(keys.METRIC_OBSERVATION_FAILURES)
            self.report.errors.append(f"heartbeat pipeline: {exc}")
            self.sup.pipeline = None

    def _judge_pipeline(self, now: int) -> None:
        """Judge the pipeline from this pass's levels: the deployment's log-silence alarms (the
        inventory, every page) and the training attempts fed this pass whose heartbeat is doubted.
        A change is saved with the alert it owes (conditional on the state's version: a concurrent
        judge wins, nothing is said twice), and the alert published at once (the outbox retries)."""
        before = self.sup.pipeline
        if self.inventory is None or before is None:
            return  # unknown: nothing judged
        flowing = silent = 0
        for states in self.inventory.values():
            for key, state, _ in states:
                if key_signal(key) == SIGNAL_LOG_SILENCE:
                    flowing += state == "OK"
                    silent += state == "ALARM"
        after, alert = judge_pipeline(
            before, PipelineLevel(flowing, silent, tuple(sorted(self.doubted))), now
        )
        self.report.heartbeat_broken = after.broken
        if after == before:
            return
        version = before.version + 1
        outbox = (
            [
                OutboxMessage(
                    DEPLOYMENT_ALERTS,
                    f"{DEPLOYMENT_ALERTS}-heartbeat-{version:06d}",
                    now,
                    alert,
                    due_ms=now + OUTBOX_GRACE_MS,
                )
            ]
            if alert is not None
            else []
        )
        try:
            self.sup.pipeline = self.sup.store.save_pipeline(after, before, outbox)
        except ConcurrentUpdate:  # another sweep judged it: its state stands
            self._read_pipeline()
            return
        except Exception as exc:
            log.exception("saving the heartbeat pipeline's state failed")
            self.report.errors.append(f"heartbeat pipeline: {exc}")
            return
        log.warning("heartbeat pipeline %s", "broken" if after.broken else "restored")
        for message in outbox:
            self._guarded(DEPLOYMENT_ALERTS, functools.partial(self._publish_now, message))

    def _publish_now(self, message: OutboxMessage) -> None:
        self.sup.publish(message)
        self.report.alerts_published += 1

    def _cleanup_alarms(self) -> None:
        for job in sorted(self.inventory or {}):
            if self._out_of_time():
                return
            parsed = parse_job_name(job)
            run = self.sup.store.get(parsed[0]) if parsed else None
            cur = run.current if run else None
            if run is None or run.status.terminal or cur is None or cur.job_name != job or not cur.live:
                try:
                    self.report.alarms_deleted += len(self.sup.alarms.delete(job))
                except Exception as exc:
                    self.sup.counters.add(keys.METRIC_FAILED_ACTIONS)
                    self.report.errors.append(f"delete alarms of {job}: {exc}")

    # -- due items, round-robin over shards ---------------------------------------------------
    def _serve_due(self, now: int) -> None:
        iterators: list[Iterator[DueItem]] = [self.sup.store.iter_due(now, s) for s in range(keys.DUE_SHARDS)]
        seen: set[tuple[str, str, str]] = set()
        while iterators:
            for it in list(iterators):
                if self._out_of_time():
                    self.report.out_of_time = True
                    return
                item = next(it, None)
                if item is None:
                    iterators.remove(it)
                    continue
                ident = (item.kind, item.run_id, item.key)
                if ident in seen:
                    continue
                seen.add(ident)
                self.report.due += 1
                if item.kind == "outbox":
                    self._guarded(item.run_id, functools.partial(self._publish, item))
                else:
                    self._guarded(item.run_id, functools.partial(self._sweep_run, item.run_id))

    def _guarded(self, run_id: str, work: Callable[[], None]) -> None:
        try:
            work()
        except Exception as exc:  # one broken run must not stop the others
            log.exception("sweep of %s failed", run_id)
            self.report.errors.append(f"{run_id}: {exc}")

    def _publish(self, item: DueItem) -> None:
        message = self.sup.store.get_outbox(item.run_id, item.key)
        if message is None:
            return
        self.sup.publish(message)
        self.report.alerts_published += 1

    def _feed(self, run_id: str, event: AlarmsObserved) -> None:
        run = self.sup.handle(run_id, event)
        cur = run.current if run is not None else None
        if (
            cur is not None
            and cur.job_name == event.job_name
            and cur.in_training
            and cur.heartbeat_doubted_ms is not None
        ):
            self.doubted.add(event.job_name)

    def _sweep_run(self, run_id: str) -> None:
        """One due run: read once, then each step hands the run it saved (or read) to the next,
        so a pass costs one read of the run (more only when another writer got there first)."""
        sup = self.sup
        run = sup.store.get(run_id)
        if run is None:
            return
        version = run.version
        if run.status.terminal:
            for job, _ in run.strays:  # stray jobs of a finished run: stopped until confirmed
                parsed = parse_job_name(job)
                if parsed is not None:
                    self.report.observed += 1
                    run = sup.handle(run_id, sup.launcher.observe(job, parsed[1]), known=run) or run
            run = self._observe_pools(run)
            self._tick(run, version)
            return
        cur = run.current
        if cur is not None and cur.live and run.status != RunStatus.RETRY_WAIT:
            seen: JobObserved | JobMissing = sup.launcher.observe(cur.job_name, cur.number)
            self.report.observed += 1
            run = sup.handle(run_id, seen, known=run) or run
            cur = run.current
        run = self._observe_pools(run)
        cur = run.current
        if cur is not None and cur.in_training and self.inventory is not None:
            states = self.inventory.get(cur.job_name, ())
            event = AlarmsObserved(cur.job_name, cur.number, states)
            if not decide(
                run, event, sup.clock(), run.policy, sup.deployment_facts
            ).ignored:  # as expected: nothing to save
                run = sup.handle(run_id, event, known=run) or run
        self._tick(run, version)

    def _observe_pools(self, run: Run) -> Run:
        """Describe the jobs whose warm pools the run still watches (WarmPoolStatus is in no
        event): the level a release, a resume waiting for its pool and the quota check act on.
        A failed look-up is unknown, not "no pool": that watch waits for the next pass."""
        for watch in run.warm_pools:
            if self._out_of_time():
                break
            try:
                seen = self.sup.launcher.observe(watch.job_name, watch.attempt)
            except Exception as exc:
                log.warning("could not describe %s for its warm pool: %s", watch.job_name, exc)
                self.sup.counters.add(keys.METRIC_OBSERVATION_FAILURES)
                self.report.errors.append(f"DescribeTrainingJob {watch.job_name}: {exc}")
                continue
            self.report.observed += 1
            run = self.sup.handle(run.run_id, seen, known=run) or run
        return run

    def _tick(self, run: Run, version: int) -> None:
        after = self.sup.handle(run.run_id, Tick(), known=run)
        if after is not None and after.version != version:
            self.report.acted += 1
