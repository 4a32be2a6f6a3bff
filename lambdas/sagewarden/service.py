"""Use cases: apply `decide` to runs and carry out its actions through the ports.

The loop for one event: load the run -> look up what the decision needs (newest verified
checkpoint, log tail) -> decide -> save the new run and its audit entries conditionally on
the version (retry on a concurrent update) -> carry out the actions -> feed their results
(launch accepted/rejected) back in as events. Decision first, action second: if the process
dies in between, the stored run is the desired state and the sweep finishes the job.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
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
from sagewarden.domain.checkpoints import CheckpointLayout, LayoutKind
from sagewarden.domain.decide import Decision, decide, next_due_ms, wants_checkpoint, wants_log_tail
from sagewarden.domain.events import (
    CancelRequested,
    CapacityReleased,
    Event,
    HangSignal,
    JobMissing,
    JobObserved,
    Observations,
    Submitted,
    Tick,
    event_name,
)
from sagewarden.domain.models import Run, RunStatus
from sagewarden.domain.names import parse_job_name
from sagewarden.domain.policy import RunPolicy
from sagewarden.ports import (
    AuditEntry,
    CheckpointFinder,
    ConcurrentUpdate,
    HangAlarms,
    IdempotentReplay,
    Launcher,
    LogReader,
    MetricsReader,
    Notifier,
    Page,
    RunStore,
)

log = logging.getLogger("sagewarden.service")

MAX_SAVE_RETRIES = 5
SWEEP_RESERVE_MS = 10_000  # leave this much of the sweep's timeout unused
MAX_FOLLOW_UPS = 20
LOG_TAIL_LINES = 40


class RunNotFound(Exception):
    pass


class RunFinished(Exception):
    def __init__(self, run: Run) -> None:
        super().__init__(run.run_id)
        self.run = run


@dataclass(frozen=True)
class SupervisorSettings:
    job_prefix: str = "sw"
    policy_defaults: RunPolicy = field(default_factory=RunPolicy)
    reconcile_interval_ms: int = 10 * 60_000
    sweep_batch: int = 200
    log_silence_fallback: bool = False  # no log subscription: the sweep checks log silence itself


@dataclass
class SweepReport:
    due: int = 0
    observed: int = 0
    acted: int = 0
    alarms_deleted: int = 0
    deferred: int = 0
    errors: list[str] = field(default_factory=list)


class Supervisor:
    def __init__(
        self,
        *,
        store: RunStore,
        launcher: Launcher,
        checkpoints: CheckpointFinder,
        notifier: Notifier,
        alarms: HangAlarms,
        logs: LogReader,
        clock: Callable[[], int],
        metrics: MetricsReader | None = None,
        new_id: Callable[[], str],
        settings: SupervisorSettings | None = None,
    ) -> None:
        self.store = store
        self.launcher = launcher
        self.checkpoints = checkpoints
        self.notifier = notifier
        self.alarms = alarms
        self.logs = logs
        self.metrics = metrics
        self.clock = clock
        self.new_id = new_id
        self.settings = settings or SupervisorSettings()

    # -- API use cases ------------------------------------------------------------------------
    def submit(
        self,
        *,
        name: str,
        owner: str,
        training_job: Mapping[str, Any],
        policy: RunPolicy,
        idempotency_key: str | None = None,
    ) -> tuple[Run, bool]:
        """Store a new run and launch its first attempt. Returns (run, created)."""
        now = self.clock()
        body_hash = hashlib.sha256(
            json.dumps(
                {"name": name, "training_job": training_job, "policy": policy.to_dict()}, sort_keys=True
            ).encode()
        ).hexdigest()
        run = Run(
            run_id=self.new_id(),
            name=name,
            owner=owner,
            request=dict(training_job),
            policy=policy,
            status=RunStatus.SUBMITTED,
            created_ms=now,
            updated_ms=now,
            job_prefix=self.settings.job_prefix,
            idempotency_key=idempotency_key,
        )
        try:
            self.store.create(
                run, [AuditEntry(now, "event", f"run submitted by {owner}", {"name": name})], body_hash
            )
        except IdempotentReplay as replay:
            if not replay.same_body:
                raise
            existing = self.store.get(replay.run_id, all_attempts=True)
            if existing is None:  # pragma: no cover - the idempotency item points at a stored run
                raise RunNotFound(replay.run_id) from replay
            return existing, False
        self.handle(run.run_id, Submitted())
        return self.store.get(run.run_id, all_attempts=True) or run, True

    def cancel(self, run_id: str, by: str) -> Run:
        run = self.store.get(run_id)
        if run is None:
            raise RunNotFound(run_id)
        if run.status.terminal:
            raise RunFinished(run)
        self.handle(run_id, CancelRequested(by))
        return self.store.get(run_id, all_attempts=True) or run

    def get(self, run_id: str) -> Run:
        run = self.store.get(run_id, all_attempts=True)
        if run is None:
            raise RunNotFound(run_id)
        return run

    def list_runs(self, status: str | None, limit: int, cursor: str | None) -> Page:
        return self.store.list_runs(status, limit, cursor)

    def events(self, run_id: str, limit: int, cursor: str | None) -> Page:
        if self.store.get(run_id) is None:
            raise RunNotFound(run_id)
        return self.store.list_audit(run_id, limit, cursor)

    # -- EventBridge use cases ----------------------------------------------------------------
    def on_job_state_change(self, detail: Mapping[str, Any], event_id: str | None = None) -> Run | None:
        from sagewarden.adapters.sagemaker_launcher import job_observed_from_description

        name = str(detail.get("TrainingJobName", ""))
        parsed = parse_job_name(name)
        tags = detail.get("Tags") or {}
        if isinstance(tags, list):  # API shape, in case a caller forwards DescribeTrainingJob output
            tags = {t.get("Key"): t.get("Value") for t in tags}
        if parsed is None:
            from sagewarden import keys

            run_id, attempt = tags.get(keys.TAG_RUN_ID), tags.get(keys.TAG_ATTEMPT)
            if not run_id or not str(attempt or "").isdigit():
                log.info("ignoring state change of %s: not a sagewarden job", name)
                return None
            parsed = (str(run_id), int(str(attempt)))
        run_id, attempt = parsed
        observed = job_observed_from_description(detail, attempt, source="event", event_id=event_id)
        return self.handle(run_id, observed)

    def on_hang_signal(self, signal: HangSignal) -> Run | None:
        parsed = parse_job_name(signal.job_name)
        if parsed is None:
            log.info("alarm for unknown job %s", signal.job_name)
            return None
        return self.handle(parsed[0], dataclasses.replace(signal, attempt=parsed[1]))

    # -- the sweep (reconciler + durable timers) ----------------------------------------------
    def sweep(
        self, *, cleanup_alarms: bool = False, time_left_ms: Callable[[], int] | None = None
    ) -> SweepReport:
        """One pass over the runs that are due. Stops taking work when the invocation is about to
        time out (what is left stays due and is taken by the next minute's sweep)."""
        report = SweepReport()
        now = self.clock()
        ids = self.store.due_run_ids(now, self.settings.sweep_batch)
        report.due = len(ids)
        for run_id in ids:
            if time_left_ms is not None and time_left_ms() < SWEEP_RESERVE_MS:
                report.deferred = report.due - ids.index(run_id)
                break
            try:
                self._sweep_one(run_id, now, report)
            except Exception as exc:  # one broken run must not stop the others
                log.exception("sweep of %s failed", run_id)
                report.errors.append(f"{run_id}: {exc}")
        if cleanup_alarms:
            report.alarms_deleted = self.cleanup_alarms()
        return report

    def _sweep_one(self, run_id: str, now: int, report: SweepReport) -> None:
        run = self.store.get(run_id)
        if run is None:
            return
        cur = run.current
        if cur is not None and cur.live and not run.status.terminal and run.status != RunStatus.RETRY_WAIT:
            seen: JobObserved | JobMissing = self.launcher.observe(cur.job_name, cur.number)
            report.observed += 1
            run = self.handle(run_id, seen) or run
            silent = self._log_silence_fallback(run, now)
            if silent is not None:
                run = self.handle(run_id, silent) or run
        before = run.version
        after = self.handle(run_id, Tick())
        if after is not None and after.version != before:
            report.acted += 1

    def _log_silence_fallback(self, run: Run, now: int) -> HangSignal | None:
        """Without the log subscription, ask CloudWatch Logs whether the job wrote anything in
        the last `log_silence_minutes` (FilterLogEvents with a startTime window sees events as
        they are ingested; stream timestamps would lag by up to an hour)."""
        cur = run.current
        pol = run.policy
        if not (
            self.settings.log_silence_fallback and pol.hang_detection and cur is not None and cur.in_training
        ):
            return None
        started = cur.training_started_ms or now
        window_ms = pol.log_silence_minutes * 60_000
        if now - started < window_ms or cur.stop_intent is not None:
            return None
        if self.logs.has_events_since(cur.job_name, now - window_ms):
            return None
        return HangSignal(
            job_name=cur.job_name,
            attempt=cur.number,
            signal="log_silence",
            state="ALARM",
            since_ms=now,
            reason=f"no log events in the last {pol.log_silence_minutes} min (sweep check, no log subscription)",
        )

    def cleanup_alarms(self) -> int:
        """Delete hang alarms whose attempt is no longer live (missed deletes, crashed handlers)."""
        deleted = 0
        for job in self.alarms.list_job_names():
            parsed = parse_job_name(job)
            run = self.store.get(parsed[0]) if parsed else None
            cur = run.current if run else None
            if run is None or run.status.terminal or cur is None or cur.job_name != job or not cur.live:
                deleted += len(self.alarms.delete(job))
        return deleted

    # -- the loop -----------------------------------------------------------------------------
    def handle(self, run_id: str, event: Event) -> Run | None:
        queue: list[Event] = [event]
        run: Run | None = None
        for _ in range(MAX_FOLLOW_UPS):
            if not queue:
                break
            ev = queue.pop(0)
            outcome = self._decide_and_save(run_id, ev)
            if outcome is None:
                return None
            run, decision = outcome
            queue += self._carry_out(run, decision.actions)
        return run

    def _decide_and_save(self, run_id: str, event: Event) -> tuple[Run, Decision] | None:
        for _ in range(MAX_SAVE_RETRIES):
            run = self.store.get(run_id)
            if run is None:
                log.warning("event %s for unknown run %s", event_name(event), run_id)
                return None
            obs = self._observe(run, event)
            now = self.clock()
            decision = decide(run, event, now, run.policy, obs)
            entries = [AuditEntry(now, "event", _describe_event(event), _event_detail(event, obs))]
            due = next_due_ms(decision.run, now, self.settings.reconcile_interval_ms)
            if decision.ignored is not None:
                if decision.actions or not _routine(event):
                    entries.append(AuditEntry(now, "decision", f"ignored: {decision.ignored}", {}))
                    if decision.actions:
                        entries.append(AuditEntry(now, "decision", "; ".join(decision.notes), {}))
                    self.store.append_audit(run_id, run.version, entries)
                if isinstance(event, Tick):
                    self.store.set_due(run, due)
                return run, decision
            entries.append(
                AuditEntry(
                    now,
                    "decision",
                    "; ".join(decision.notes) or f"{run.status.value} -> {decision.run.status.value}",
                    {
                        "from": run.status.value,
                        "to": decision.run.status.value,
                        "actions": [type(a).__name__ for a in decision.actions],
                    },
                )
            )
            try:
                saved = self.store.save(decision.run, run, entries, due)
            except ConcurrentUpdate:
                log.info("run %s changed concurrently; deciding again", run_id)
                continue
            return saved, decision
        raise ConcurrentUpdate(run_id)

    def _observe(self, run: Run, event: Event) -> Observations:
        checkpoint, error = None, None
        tail: tuple[str, ...] = ()
        triage: tuple[str, ...] = ()
        if wants_checkpoint(run, event) and run.checkpoint_uri:
            pol = run.policy
            try:
                layout = CheckpointLayout(
                    LayoutKind(pol.checkpoint_layout), pol.checkpoint_dir_regex, pol.checkpoint_marker
                )
                checkpoint = self.checkpoints.latest(run.checkpoint_uri, layout)
            except Exception as exc:  # S3 access problems must not stop a resume
                log.warning("checkpoint lookup under %s failed: %s", run.checkpoint_uri, exc)
                error = str(exc)
        if wants_log_tail(run, event):
            job = event.job_name if isinstance(event, (JobObserved, HangSignal)) else ""
            try:
                tail = self.logs.tail(job, LOG_TAIL_LINES)
                if isinstance(event, HangSignal):
                    triage = self.logs.host_triage(job, self.clock())
            except Exception as exc:
                log.warning("could not read logs of %s: %s", job, exc)
            if isinstance(event, HangSignal) and self.metrics is not None and run.current is not None:
                triage = self._gpu_triage(run) + triage
        return Observations(checkpoint=checkpoint, checkpoint_error=error, log_tail=tail, hosts_triage=triage)

    def _gpu_triage(self, run: Run) -> tuple[str, ...]:
        from sagewarden.adapters.cloudwatch_metrics_reader import gpu_triage_lines
        from sagewarden.domain.pricing import gpus_per_instance

        cur = run.current
        if cur is None or self.metrics is None:
            return ()
        now = self.clock()
        window = max(run.policy.gpu_idle_minutes, 10) * 60_000
        try:
            by_host = self.metrics.gpu_by_host(cur.job_name, cur.instance_count, now - window, now)
        except Exception as exc:
            log.warning("could not read GPU metrics of %s: %s", cur.job_name, exc)
            return ()
        threshold = run.policy.gpu_idle_percent * gpus_per_instance(cur.instance_type)
        return gpu_triage_lines(by_host, threshold, cur.instance_count)

    def _carry_out(self, run: Run, actions: Sequence[Action]) -> list[Event]:
        follow_ups: list[Event] = []
        entries: list[AuditEntry] = []
        released: list[AnnounceCapacityReleased] = []
        for action in actions:
            now = self.clock()
            try:
                result = self._do(run, action, follow_ups, released)
                entries.append(
                    AuditEntry(now, "action", f"{type(action).__name__}: {result}", _action_detail(action))
                )
            except Exception as exc:
                log.exception("action %s failed", type(action).__name__)
                entries.append(
                    AuditEntry(now, "error", f"{type(action).__name__} failed: {exc}", _action_detail(action))
                )
        if entries:
            self.store.append_audit(run.run_id, run.version, entries)
        for rel in released:
            self._release_capacity(run.run_id, rel)
        return follow_ups

    def _do(
        self, run: Run, action: Action, follow_ups: list[Event], released: list[AnnounceCapacityReleased]
    ) -> str:
        if isinstance(action, LaunchAttempt):
            result = self.launcher.launch(action.attempt, action.request)
            if result is None:
                return f"{action.job_name}: no answer; the sweep will retry"
            follow_ups.append(result)
            return f"{action.job_name}: {type(result).__name__}"
        if isinstance(action, StopJob):
            return f"{action.job_name}: {self.launcher.stop(action.job_name)}"
        if isinstance(action, EnsureHangAlarms):
            return f"created {', '.join(self.alarms.ensure(action, run.run_id))}"
        if isinstance(action, DeleteHangAlarms):
            return f"deleted {len(self.alarms.delete(action.job_name))} alarms"
        if isinstance(action, Notify):
            self.notifier.publish(action)
            return f"{action.severity} {action.event}: {action.subject}"
        released.append(action)
        return f"{action.count} x {action.instance_type} released"

    def _release_capacity(self, source_run_id: str, rel: AnnounceCapacityReleased) -> None:
        for other in self.store.runs_waiting_for("quota", rel.instance_type):
            if other == source_run_id:
                continue
            try:
                self.handle(other, CapacityReleased(rel.instance_type, rel.count))
            except Exception:
                log.exception("waking %s after capacity release failed", other)


# --- audit helpers ----------------------------------------------------------------------------


def _routine(event: Event) -> bool:
    """The sweep's own looks (timers, describe): when they change nothing they are not audited,
    so a months-long run's trail holds what happened, not tens of thousands of 'still fine'."""
    return isinstance(event, Tick) or (isinstance(event, JobObserved) and event.source == "describe")


def _describe_event(event: Event) -> str:
    if isinstance(event, JobObserved):
        text = f"{event.job_name}: {event.status}/{event.secondary} ({event.source})"
        return text + (f": {event.failure_reason}" if event.failure_reason else "")
    if isinstance(event, HangSignal):
        return f"{event.job_name}: {event.signal} {event.state}"
    if isinstance(event, CapacityReleased):
        return f"capacity released: {event.count} x {event.instance_type}"
    if isinstance(event, CancelRequested):
        return f"cancel requested by {event.by}"
    fields = ", ".join(f"{k}={v}" for k, v in dataclasses.asdict(event).items())
    return f"{event_name(event)}({fields})"


def _event_detail(event: Event, obs: Observations) -> dict[str, Any]:
    detail: dict[str, Any] = {"type": event_name(event), **dataclasses.asdict(event)}
    if obs.checkpoint is not None:
        detail["checkpoint"] = {"uri": obs.checkpoint.uri, "step": obs.checkpoint.step}
    if obs.checkpoint_error:
        detail["checkpoint_error"] = obs.checkpoint_error
    if obs.log_tail:
        detail["log_tail"] = list(obs.log_tail[-20:])
    if obs.hosts_triage:
        detail["hosts_triage"] = list(obs.hosts_triage)
    return detail


def _action_detail(action: Action) -> dict[str, Any]:
    data = dataclasses.asdict(action)
    if isinstance(action, LaunchAttempt):
        req = dict(action.request)
        data = {
            "attempt": action.attempt,
            "job_name": action.job_name,
            "environment": {
                k: v for k, v in req.get("Environment", {}).items() if k.startswith("SAGEWARDEN_")
            },
            "resource_config": req.get("ResourceConfig", {}),
        }
    return data
