"""The invariants of issue 7, checked against the world (what AWS holds) and the store (what
the supervisor recorded), after every step of a history and once the world has quiesced.

`ObservedStore` sits between the service and the real store and checks every committed write
as it happens (nothing launched after a cancel, terminal runs never change) and remembers every
alert a decision owed (the outbox), so "every owed alert published" has a complete list.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from typing import Any

from drill.account.memory_store import InMemoryRunStore
from sagewarden.adapters.cloudwatch_hang_alarms import parse_alarm_key
from sagewarden.domain.decision.pending import PendingDecision
from sagewarden.domain.hangs.alarms import alarm_keys, key_signal
from sagewarden.domain.hangs.heartbeat import PipelineHealth
from sagewarden.domain.hangs.quiet import SAVE_ACTIVE_MS, STARTUP_LONE_IDLE_MS
from sagewarden.domain.hangs.windows import hang_alarms
from sagewarden.domain.vocabulary.events import Observations
from sagewarden.domain.vocabulary.models import Attempt, LaunchState, Run, RunStatus
from sagewarden.domain.vocabulary.names import job_name
from sagewarden.ports.aws import AuditEntry, OutboxMessage
from tests.soak.world import ALARM_PREFIX, SM_ENDED, World

MIN = 60_000


class ObservedStore:
    """A RunStore that checks every committed save and records every owed alert."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.owed: dict[str, tuple[str, str]] = {}  # dedupe id -> (run id, alert event)
        self.violations: list[str] = []
        self.saves = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def save(
        self,
        run: Run,
        previous: Run,
        audit: Sequence[AuditEntry],
        due_ms: int | None,
        outbox: Sequence[OutboxMessage] = (),
    ) -> Run:
        saved = self.inner.save(run, previous, audit, due_ms, outbox)
        self.saves += 1
        for m in outbox:
            self.owed[m.dedupe_id] = (m.run_id, m.notify.event)
        launched = _launches_decided(previous, run)
        if launched and (previous.cancel_requested_by is not None or run.cancel_requested_by is not None):
            self.violations.append(
                f"{run.run_id}: launch of attempt(s) {launched} decided after the cancel by "
                f"{previous.cancel_requested_by or run.cancel_requested_by} was recorded"
            )
        if previous.status.terminal:
            same = dataclasses.replace(run, strays=previous.strays, version=previous.version)
            if (same.status, same.outcome, same.attempts, same.attempt_count) != (
                previous.status,
                previous.outcome,
                previous.attempts,
                previous.attempt_count,
            ):
                self.violations.append(
                    f"{run.run_id}: terminal run changed: {previous.status.value} ({previous.outcome}) -> "
                    f"{run.status.value} ({run.outcome})"
                )
        return saved

    def save_pipeline(
        self, health: PipelineHealth, previous: PipelineHealth, outbox: Sequence[OutboxMessage] = ()
    ) -> PipelineHealth:
        saved = self.inner.save_pipeline(health, previous, outbox)
        for m in outbox:  # the deployment's own alerts (the heartbeat pipeline's), owed the same way
            self.owed[m.dedupe_id] = (m.run_id, m.notify.event)
        return saved


def _launches_decided(previous: Run, run: Run) -> list[int]:
    before = {a.number: a for a in previous.attempts}
    out = []
    for att in run.attempts:
        old = before.get(att.number)
        if att.launch != LaunchState.PENDING:
            continue
        if old is None or old.launch_tries != att.launch_tries or old.requested_at_ms != att.requested_at_ms:
            out.append(att.number)
    return out


def expected_alarm_keys(run: Run, att: Attempt) -> set[str]:
    d = PendingDecision(run, 0, run.policy, Observations())
    return set(alarm_keys(hang_alarms(d, att)))


def wants_alarms(run: Run, att: Attempt | None) -> bool:
    return (
        att is not None
        and not run.status.terminal
        and run.policy.hang_detection
        and att.in_training
        and att.stop_intent is None
        and run.cancel_requested_by is None
    )


class Referee:
    def __init__(self, world: World, observed: ObservedStore) -> None:
        self.world = world
        self.observed = observed
        self.terminal: dict[str, tuple[Any, ...]] = {}
        self.allowed_duplicates: set[str] = set()  # see `note_faults`
        self.checks = 0

    # -- helpers -----------------------------------------------------------------------------
    @property
    def store(self) -> Any:  # InMemoryRunStore or InspectableDynamoDbRunStore
        return self.world.raw_store

    def runs(self) -> list[Run]:
        out = []
        for rid in self.world.run_ids():
            run = self.store.get(rid, all_attempts=True)
            assert run is not None
            out.append(run)
        return out

    def note_faults(self) -> None:
        """An alert whose publish succeeded but whose `outbox_done` failed stays owed and is
        published again by the sweep: the one duplicate an outbox cannot avoid (SNS has no
        idempotent publish). Only that case is allowed a second delivery of a dedupe id."""
        for key, _, args in self.world.calls.fired:
            if key == "RunStore.outbox_done" and len(args) >= 2:
                self.allowed_duplicates.add(str(args[1]))

    def due_runs(self) -> set[str]:
        from sagewarden import keys

        now = self.world.now()
        return {
            item.run_id
            for shard in range(keys.DUE_SHARDS)
            for item in self.store.iter_due(now, shard)
            if item.kind == "run"
        }

    # -- after every step ----------------------------------------------------------------------
    def check_step(self) -> list[str]:
        self.checks += 1
        self.note_faults()
        problems = list(self.observed.violations)
        world, sm = self.world, self.world.sagemaker
        runs = {r.run_id: r for r in self.runs()}
        live_by_run: Counter[str] = Counter(j.run_id for j in sm.jobs.values() if j.live)
        for rid, n in live_by_run.items():
            if n > 1:
                names = [j.name for j in sm.jobs.values() if j.live and j.run_id == rid]
                problems.append(f"{rid}: {n} live SageMaker jobs at once: {names}")
        seen: dict[tuple[str, int], str] = {}
        for job in sm.jobs.values():
            key = (job.run_id, job.attempt)
            if key in seen:
                problems.append(
                    f"{job.run_id}: attempt {job.attempt} launched twice ({seen[key]}, {job.name})"
                )
            seen[key] = job.name
            run = runs.get(job.run_id)
            if run is None:
                problems.append(f"job {job.name} exists for a run the store does not have")
                continue
            att = next((a for a in run.attempts if a.number == job.attempt), None)
            if att is None or att.job_name != job.name:
                problems.append(f"{job.run_id}: job {job.name} is not a recorded attempt")
        for rid, run in runs.items():
            numbers = [a.number for a in run.attempts]
            if numbers != list(range(1, len(numbers) + 1)):
                problems.append(f"{rid}: attempt numbers {numbers} are not contiguous")
            for a in run.attempts:
                if a.job_name != job_name(run.job_prefix, run.name, rid, a.number):
                    problems.append(f"{rid}: attempt {a.number} has job name {a.job_name}")
            snap = (run.status, run.outcome, run.attempts, run.attempt_count)
            if rid in self.terminal and self.terminal[rid] != snap:
                problems.append(
                    f"{rid}: terminal run changed: {self.terminal[rid][0].value} -> {run.status.value}"
                )
            if run.status.terminal:
                self.terminal.setdefault(rid, snap)
            due = (
                self.store._due.get(("run", rid, ""))
                if isinstance(self.store, InMemoryRunStore)
                else self.store.due_of(rid)
            )
            if not run.status.terminal and due is None:
                problems.append(f"{rid}: {run.status.value} run has no due time (nothing will look at it)")
            if run.status.terminal and run.strays and due is None:
                problems.append(f"{rid}: stray jobs {run.strays} to stop but no due time")
        counts = Counter(p.dedupe_id for p in world.sns.published)
        for dedupe, n in counts.items():
            if n > 1 and dedupe not in self.allowed_duplicates:
                problems.append(f"alert {dedupe} published {n} times")
            if dedupe not in self.observed.owed:
                problems.append(f"alert {dedupe} published but never owed by a decision")
        return problems

    def check_alarms_after_sweep(self, served: set[str]) -> list[str]:
        """Every run the sweep looked at whose attempt is training has all its hang alarms."""
        problems = []
        for rid in sorted(served):
            run = self.store.get(rid, all_attempts=True)
            if run is None:
                continue
            cur = run.current
            if not wants_alarms(run, cur):
                continue
            assert cur is not None
            missing = expected_alarm_keys(run, cur) - self.world.alarm_keys_of(cur.job_name)
            if missing:
                problems.append(
                    f"{rid}: training attempt {cur.number} misses hang alarms {sorted(missing)} after a sweep"
                )
        return problems

    # -- once the world has quiesced ------------------------------------------------------------
    def steady(self) -> list[str]:
        """Why the world is not at rest yet (empty: at rest)."""
        world, sm = self.world, self.world.sagemaker
        why = []
        if world.pending:
            why.append(f"{len(world.pending)} events pending")
        if self.store.pending_outbox():
            why.append(f"{len(self.store.pending_outbox())} alerts owed")
        for job in sm.jobs.values():
            if job.status == "Stopping":
                why.append(f"{job.name} is stopping")
        for run in self.runs():
            rid, cur = run.run_id, run.current
            live = sm.live_jobs(rid)
            if run.status.terminal:
                if run.strays or live:
                    why.append(
                        f"{rid}: {run.status.value} with strays {run.strays} / live jobs {[j.name for j in live]}"
                    )
                continue
            if run.deferred_since_ms is not None:
                why.append(f"{rid}: deferred ({run.deferred_reason})")
                continue
            if run.status == RunStatus.RETRY_WAIT:
                if run.wake_at_ms is None or live:
                    why.append(f"{rid}: RETRY_WAIT without a wake-up or with a live job")
                continue
            found = sm.jobs.get(cur.job_name) if cur is not None else None
            if cur is None or found is None or not found.live or cur.launch != LaunchState.SUBMITTED:
                why.append(
                    f"{rid}: {run.status.value}, current attempt "
                    f"{(cur.number, cur.launch.value, cur.sm_status) if cur else None}, job "
                    f"{(found.status, found.secondary) if found else None}"
                )
                continue
            job = found
            if (
                cur.ended
                or cur.stop_intent is not None
                or (cur.sm_status, cur.sm_secondary)
                != (
                    job.status,
                    job.secondary,
                )
            ):
                why.append(
                    f"{rid}: recorded {cur.sm_status}/{cur.sm_secondary}, SageMaker {job.status}/{job.secondary}"
                )
                continue
            if wants_alarms(run, cur) and expected_alarm_keys(run, cur) - world.alarm_keys_of(cur.job_name):
                why.append(f"{rid}: training without all its hang alarms")
        why += [
            f"hang grace period still running: {w}" for w, in_grace in self._alarms_in_alarm() if in_grace
        ]
        return why

    def check_quiesced(self) -> list[str]:
        """Nothing lost: every run finished or has a way forward, every owed alert went out
        (exactly once, unless `note_faults` allowed a second), every finished run said so, no
        hang alarm left behind for a job that is not a training attempt."""
        self.note_faults()
        problems = self.check_step()
        problems += self.steady()
        counts = Counter(p.dedupe_id for p in self.world.sns.published)
        for dedupe, (rid, event) in sorted(self.observed.owed.items()):
            if counts[dedupe] == 0:
                problems.append(f"{rid}: alert {event} ({dedupe}) owed but never published")
        published_events = {(p.run_id, p.event) for p in self.world.sns.published}
        wanted = {
            RunStatus.SUCCEEDED: "run.succeeded",
            RunStatus.FAILED: "run.failed",
            RunStatus.CANCELLED: "run.cancelled",
        }
        training_jobs = set()
        for run in self.runs():
            if run.status in wanted and (run.run_id, wanted[run.status]) not in published_events:
                problems.append(
                    f"{run.run_id}: {run.status.value} but no {wanted[run.status]} alert was published"
                )
            if wants_alarms(run, run.current):
                assert run.current is not None
                training_jobs.add(run.current.job_name)
        problems += self._hangs_ignored()
        for job in sorted(self.world.alarm_jobs()):
            if job not in training_jobs:
                problems.append(f"hang alarms of {job} left behind (not a training attempt)")
        ended_but_recorded_live = [
            j.name
            for j in self.world.sagemaker.jobs.values()
            if j.status in SM_ENDED and self._recorded_live(j.run_id, j.name)
        ]
        for name in ended_but_recorded_live:
            problems.append(f"{name} ended in SageMaker but its attempt is still recorded live")
        return problems

    def _hangs_ignored(self) -> list[str]:
        """Level-triggered hang detection: at rest, no training attempt past its grace period
        has alarms in ALARM that its policy's confirmation rule would act on (the sweep reads
        the alarm states every pass, so a lost or early ALARM edge does not matter)."""
        return [why for why, in_grace in self._alarms_in_alarm() if not in_grace]

    def _alarms_in_alarm(self) -> list[tuple[str, bool]]:
        problems = []
        now = self.world.now()
        for run in self.runs():
            cur = run.current
            if not wants_alarms(run, cur):
                continue
            assert cur is not None and cur.training_started_ms is not None
            since_start = now - cur.training_started_ms
            in_grace = since_start < (run.policy.hang_grace_minutes + 4) * MIN
            # log silence, a stalled progress metric and the whole job idle also wait out the
            # start-up allowance, and while checkpoint objects are still landing (a save); a lone
            # idle host during start-up must hold STARTUP_LONE_IDLE_MS (compile skew)
            startup = since_start < (run.policy.startup_silence_minutes + 4) * MIN
            written = self.world.checkpoints.save_activity(run.checkpoint_uri or "")
            saving = written is not None and now - written < SAVE_ACTIVE_MS + 4 * MIN
            quiet_ok = startup or saving
            in_alarm = set()
            for name, alarm in self.world.cloudwatch.alarms.items():
                parsed = parse_alarm_key(ALARM_PREFIX, name)
                if parsed and parsed[0] == cur.job_name and alarm["StateValue"] == "ALARM":
                    signal = key_signal(parsed[1])
                    if quiet_ok and signal in ("log_silence", "progress_stalled", "gpu_idle"):
                        continue
                    held = now - int(alarm["StateUpdatedTimestamp"])
                    if startup and signal == "gpu_lone_idle" and held < STARTUP_LONE_IDLE_MS + 4 * MIN:
                        continue
                    in_alarm.add(signal)
            needed = 1 if run.policy.hang_confirmation == "any" else 2
            if len(in_alarm) >= needed:
                problems.append(
                    (
                        f"{run.run_id}: attempt {cur.number} is training with {sorted(in_alarm)} in ALARM "
                        f"({run.policy.hang_confirmation}) and nothing was done",
                        in_grace,
                    )
                )
        return problems

    def _recorded_live(self, run_id: str, name: str) -> bool:
        run = self.store.get(run_id, all_attempts=True)
        if run is None or run.status.terminal:
            return False
        att = next((a for a in run.attempts if a.job_name == name), None)
        return att is not None and att.live and run.status != RunStatus.RETRY_WAIT


def settle(world: World, referee: Referee, rounds: int = 60) -> list[str]:
    """Let the world come to rest: no more faults, every event delivered, stops take effect,
    sweeps every few minutes (alarm cleanup included) until nothing is left to do. Returns why
    it is not at rest after `rounds` (empty when it is)."""
    world.calls.quiet()
    why: list[str] = []
    for i in range(rounds):
        world.deliver_all()
        for job in list(world.sagemaker.jobs.values()):
            if job.status == "Stopping":
                world.progress(job, "advance")
        world.deliver_all()
        world.advance(3 * MIN)
        world.sweep(cleanup=i % 3 == 2)
        world.deliver_all()
        why = referee.steady()
        if not why and i >= 2:
            world.sweep(cleanup=True)
            world.deliver_all()
            why = referee.steady()
            if not why:
                return []
    return why


def make_world(**kwargs: Any) -> tuple[World, Referee]:
    world = World(store_wrapper=ObservedStore, **kwargs)
    assert isinstance(world.store_view, ObservedStore)
    return world, Referee(world, world.store_view)
