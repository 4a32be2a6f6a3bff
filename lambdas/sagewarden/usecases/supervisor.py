"""The Supervisor: the loop for one event, load, decide, save with the outbox, carry out, follow up.

Look-ups are `usecases/observations.py`'s; what a crash loses is re-issued by `usecases/sweep.py`.
Why: docs/reliability.md (*The loop for one event*)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any

from sagewarden import keys
from sagewarden.domain.decide import Decision, decide
from sagewarden.domain.due import next_due_ms
from sagewarden.domain.goodput import run_goodput
from sagewarden.domain.hangs.alarms import SIGNAL_LOG_SILENCE
from sagewarden.domain.hangs.heartbeat import PipelineHealth
from sagewarden.domain.hangs.quiet import silence_from_logs
from sagewarden.domain.hangs.windows import signal_window
from sagewarden.domain.vocabulary.actions import (
    Action,
    AnnounceCapacityReleased,
    DeleteHangAlarms,
    EnsureHangAlarms,
    LaunchAttempt,
    Notify,
    ReleaseWarmPool,
    RetireCheckpoints,
    StopJob,
)
from sagewarden.domain.vocabulary.events import (
    AlarmsObserved,
    CancelRequested,
    CapacityReleased,
    Event,
    HangSignal,
    JobMissing,
    JobObserved,
    LaunchAccepted,
    LaunchRejected,
    Observations,
    RetirementReported,
    Tick,
    event_name,
)
from sagewarden.domain.vocabulary.links import link_lines
from sagewarden.domain.vocabulary.models import LaunchState, Run, RunStatus
from sagewarden.domain.vocabulary.names import parse_job_name
from sagewarden.domain.vocabulary.reasons import StopIntent, WaitReason
from sagewarden.ports.aws import (
    OUTBOX_GRACE_MS,
    AuditEntry,
    CheckpointFinder,
    CheckpointRetirer,
    ConcurrentUpdate,
    Counters,
    HangAlarms,
    Launcher,
    LogReader,
    MetricsReader,
    NoCounters,
    Notifier,
    OutboxMessage,
    QuotaReader,
    RetirementFailed,
    RunStore,
    TrainingPlanReader,
    VersioningReader,
)
from sagewarden.settings import SupervisorSettings
from sagewarden.usecases.audit_text import (
    action_detail,
    describe_event,
    error_text,
    event_detail,
    redacted_alert,
    redacted_entry,
    redacted_event,
    redacted_observations,
    run_secrets,
)
from sagewarden.usecases.aws_events import AwsEvents
from sagewarden.usecases.observations import Observer
from sagewarden.usecases.run_requests import (  # the refusals, re-exported for the API handler
    RunRequests,
)
from sagewarden.usecases.sweep import Sweep

log = logging.getLogger("sagewarden.service")

MAX_SAVE_RETRIES = 5
MAX_FOLLOW_UPS = 20
LOG_CHECK_MIN_MS = 2 * 60_000  # no log subscription: a training attempt is looked at this often at most
OUTBOX_RETRY_MS = 60_000
OUTBOX_RETRY_CAP_MS = 30 * 60_000
# events whose "nothing new" verdict never depends on observations: decided once without any
# look-up first, so a duplicate or stale delivery costs one read
_CHEAP_FIRST = (
    JobObserved,
    HangSignal,
    AlarmsObserved,
    LaunchAccepted,
    LaunchRejected,
    JobMissing,
    CancelRequested,
    RetirementReported,
)

# counter names (CloudWatch metrics in the Sagewarden namespace; alarms in infra watch them)
FAILED_ACTIONS = keys.METRIC_FAILED_ACTIONS
ALERTS_PUBLISHED = keys.METRIC_ALERTS_PUBLISHED
ALERT_PUBLISH_FAILURES = keys.METRIC_ALERT_PUBLISH_FAILURES
EVENTS_IGNORED = keys.METRIC_EVENTS_IGNORED

__all__ = ["Supervisor"]


class Supervisor:
    """The use cases (API requests: `sagewarden.usecases.run_requests`; job and alarm events:
    `sagewarden.usecases.aws_events`; the sweep's entry) around one shared loop: decide, save, carry out."""

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
        quotas: QuotaReader | None = None,
        retirer: CheckpointRetirer | None = None,
        plans: TrainingPlanReader | None = None,
        versioning: VersioningReader | None = None,
        counters: Counters | None = None,
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
        self.quotas = quotas
        self.retirer = retirer  # checkpoint retention; None where the deployment does not grant it
        self.plans = plans
        self.versioning = versioning  # the checkpoint bucket's versioning, read at a retention run's submit
        self.counters: Counters = counters or NoCounters()
        self.clock = clock
        self.new_id = new_id
        self.settings = settings or SupervisorSettings()
        # the deployment's heartbeat pipeline as the sweep last read or judged it (None: not read
        # by this invocation; domain/hangs/heartbeat.py)
        self.pipeline: PipelineHealth | None = None
        self.observer = Observer(self)
        self.requests = RunRequests(self)
        self.aws = AwsEvents(self)

    # -- the sweep (reconciler + durable timers + outbox) --------------------------------------
    def sweep(
        self,
        *,
        cleanup_alarms: bool = False,
        time_left_ms: Callable[[], int] | None = None,
        owner: str = "sweep",
    ) -> Any:
        return Sweep(self, time_left_ms=time_left_ms, owner=owner).run(cleanup_alarms=cleanup_alarms)

    # -- the loop -----------------------------------------------------------------------------
    def handle(self, run_id: str, event: Event, *, known: Run | None = None) -> Run | None:
        """Decide on `event`, save, carry out; returns the run as it now stands. `known`: the run
        as the caller just read or saved it (the sweep's pass), used instead of reading it again;
        a stale one costs a ConcurrentUpdate and a fresh read, never a wrong decision."""
        outcome = self._decide_and_save(run_id, event, known=known)
        if outcome is None:
            return None
        return self._follow_up(*outcome)

    def _follow_up(self, run: Run, decision: Decision, outbox: list[OutboxMessage]) -> Run | None:
        """Carry out a saved decision's actions, then decide on what they answered (a launch
        accepted or rejected, a refused stop's job observed), up to MAX_FOLLOW_UPS decisions."""
        queue: list[Event] = self._carry_out(run, decision.actions, outbox)
        latest: Run | None = run
        for _ in range(MAX_FOLLOW_UPS - 1):
            if not queue:
                break
            outcome = self._decide_and_save(run.run_id, queue.pop(0), known=latest)
            if outcome is None:
                return None
            latest, decision, outbox = outcome
            queue += self._carry_out(latest, decision.actions, outbox)
        return latest

    def _decide_and_save(
        self, run_id: str, event: Event, *, known: Run | None = None
    ) -> tuple[Run, Decision, list[OutboxMessage]] | None:
        for _ in range(MAX_SAVE_RETRIES):
            run, known = (known, None) if known is not None else (self.store.get(run_id), None)
            if run is None:
                log.warning("event %s for unknown run %s", event_name(event), run_id)
                return None
            now = self.clock()
            # scrubbed before anything cuts it: decide quotes, bounds and stores what it is given
            secrets = run_secrets(run)
            event = redacted_event(event, secrets)
            if isinstance(event, _CHEAP_FIRST):
                first = decide(run, event, now, run.policy, self.deployment_facts)
                if first.ignored is not None and not first.actions:
                    self.counters.add(EVENTS_IGNORED)
                    log.info("%s for %s ignored: %s", event_name(event), run_id, first.ignored)
                    return run, first, []
            obs = redacted_observations(self.observer.observe(run, event), secrets)
            decision = decide(run, event, now, run.policy, obs)
            due = next_due_ms(decision.run, now, self.reconcile_interval_ms(decision.run))
            if decision.ignored is not None and not decision.actions:
                if isinstance(event, Tick):
                    self.store.set_due(run, due)
                else:
                    self.counters.add(EVENTS_IGNORED)
                return run, decision, []
            entries = [
                AuditEntry(now, "event", describe_event(event), event_detail(event, obs)),
                AuditEntry(
                    now,
                    "decision",
                    "; ".join(n for n in decision.notes if n)
                    or f"{run.status.value} -> {decision.run.status.value}",
                    {
                        "from": run.status.value,
                        "to": decision.run.status.value,
                        "actions": [type(a).__name__ for a in decision.actions],
                    },
                ),
            ]
            entries = [redacted_entry(e, secrets) for e in entries]
            version = run.version + 1
            outbox = [
                OutboxMessage(
                    run_id,
                    f"{run_id}-{version:06d}-{i:02d}",
                    now,
                    redacted_alert(self._with_links(decision.run, action), secrets),
                    due_ms=now + OUTBOX_GRACE_MS,
                )
                for i, action in enumerate(a for a in decision.actions if isinstance(a, Notify))
            ]
            try:
                saved = self.store.save(decision.run, run, entries, due, outbox)
            except ConcurrentUpdate:
                log.info("run %s changed concurrently; deciding again", run_id)
                continue
            self._measure(run, saved)
            return saved, decision, outbox
        raise ConcurrentUpdate(run_id)

    @property
    def deployment_facts(self) -> Observations:
        """What every decision knows about this deployment before any look-up: whether a log
        subscription feeds the heartbeat (else the sweep judges log silence itself), and whether
        its heartbeat pipeline is judged broken (`pipeline`: read by the sweep at every pass; not
        known elsewhere, where each attempt's own confirmation guards every stop)."""
        pipeline = self.pipeline
        return Observations(
            log_subscription=not self.settings.log_silence_fallback,
            heartbeat_broken=pipeline is not None and pipeline.broken,
        )

    def reconcile_interval_ms(self, run: Run) -> int:
        """How soon the sweep looks at a live run again. Where log silence is judged from the logs
        (no log subscription, or a heartbeat not to be trusted: domain/hangs/heartbeat.py) the sweep's
        own check is the only watch on it, so a training attempt is looked at every third of its
        log-silence window (at least every LOG_CHECK_MIN_MS): silence is acted on at most a third of
        the window late, not a whole reconcile interval."""
        interval = self.settings.reconcile_interval_ms
        cur = run.current
        if (
            cur is not None
            and silence_from_logs(cur, self.deployment_facts)
            and cur.in_training
            and run.policy.hang_detection
        ):
            window_ms = signal_window(run, run.policy, cur, SIGNAL_LOG_SILENCE) * 60_000
            interval = min(interval, max(LOG_CHECK_MIN_MS, window_ms // 3))
        return interval

    def _with_links(self, run: Run, message: Notify) -> Notify:
        """Alerts about a run carry where to look closer: the console pages of its current job
        (the job, its log streams, its metrics) and the CLI commands."""
        cur = run.current
        if not self.settings.region or cur is None:
            return message
        lines = link_lines(self.settings.region, run.run_id, cur.job_name)
        return dataclasses.replace(message, body="\n".join([message.body, "", *lines]))

    def _measure(self, before: Run, after: Run) -> None:
        """The dashboard's domain metrics, from what a saved decision changed."""
        try:
            if after.status != before.status:
                self.counters.add(keys.METRIC_RUN_STATUS, dimension=(keys.DIM_STATUS, after.status.value))
                ratio = run_goodput(after, after.updated_ms).ratio
                if after.status.terminal and ratio is not None:
                    self.counters.add(
                        keys.METRIC_ETTR,
                        round(100 * ratio, 2),
                        dimension=(keys.DIM_RUN, after.name),
                        unit="Percent",
                    )
                if after.status == RunStatus.RETRY_WAIT and after.wait_reason:
                    self.counters.add(keys.METRIC_WAITS, dimension=(keys.DIM_REASON, after.wait_reason))
            for cls, n in after.restarts_by_class.items():
                for _ in range(n - int(before.restarts_by_class.get(cls, 0))):
                    self.counters.add(keys.METRIC_RESTARTS, dimension=(keys.DIM_CLASS, cls))
            was, now = before.current, after.current
            if (
                now is not None
                and now.stop_intent == StopIntent.HANG
                and (was is None or was.stop_intent != StopIntent.HANG)
            ):
                for signal in now.hang_signals:
                    self.counters.add(keys.METRIC_HANG_DETECTIONS, dimension=(keys.DIM_SIGNAL, signal))
            if (
                before.recovering_since_ms is not None
                and after.recovering_since_ms is None
                and now is not None
            ):
                started = now.training_started_ms
                if started is not None and started >= before.recovering_since_ms:
                    seconds = (started - before.recovering_since_ms) / 1000
                    self.counters.add(keys.METRIC_RECOVERY_SECONDS, seconds, unit="Seconds")
        except Exception:  # metrics never break a decision that is already saved
            log.exception("could not emit the metrics of %s", after.run_id)

    def _carry_out(self, run: Run, actions: Sequence[Action], outbox: Sequence[OutboxMessage]) -> list[Event]:
        follow_ups: list[Event] = []
        entries: list[AuditEntry] = []
        released: list[AnnounceCapacityReleased] = []
        messages = iter(outbox)
        secrets = run_secrets(run)
        for action in actions:
            now = self.clock()
            try:
                if isinstance(action, Notify):
                    result = self.publish(next(messages))
                else:
                    result = self._do(run, action, follow_ups, released)
                entries.append(
                    AuditEntry(now, "action", f"{type(action).__name__}: {result}", action_detail(action))
                )
            except Exception as exc:
                log.exception("action %s failed", type(action).__name__)
                self.counters.add(FAILED_ACTIONS)
                entries.append(
                    AuditEntry(
                        now,
                        "error",
                        f"{type(action).__name__} failed: {error_text(exc, secrets)}",
                        action_detail(action),
                    )
                )
        if entries:
            try:
                self.store.append_audit(
                    run.run_id, run.version, [redacted_entry(e, secrets) for e in entries]
                )
            except Exception:  # the audit of results is best effort; the state is already saved
                log.exception("audit of %s's action results failed", run.run_id)
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
            outcome = self.launcher.stop(action.job_name)
            if not outcome.accepted:
                # the refusal is evidence ("job is in status Failed"): look at the job now
                parsed = parse_job_name(action.job_name)
                if parsed is not None:
                    follow_ups.append(self.launcher.observe(action.job_name, parsed[1]))
            return f"{action.job_name}: {outcome.message}"
        if isinstance(action, EnsureHangAlarms):
            return f"created {', '.join(self.alarms.ensure(action, run.run_id))}"
        if isinstance(action, DeleteHangAlarms):
            return f"deleted {len(self.alarms.delete(action.job_name))} alarms"
        if isinstance(action, ReleaseWarmPool):
            answer = self.launcher.release_warm_pool(action.job_name)
            # look at the pool now: a replacement waiting for it to be gone starts at once
            parsed = parse_job_name(action.job_name)
            if parsed is not None:
                follow_ups.append(self.launcher.observe(action.job_name, parsed[1]))
            return f"{action.job_name}: {answer}"
        if isinstance(action, RetireCheckpoints):
            if self.retirer is None:
                raise RuntimeError("checkpoint retention is not granted in this deployment")
            report = self.retirer.retire(action)
            follow_ups.append(report)  # the run records where the next pass continues
            if report.error is not None:
                raise RetirementFailed(report.text)
            return report.text
        if isinstance(action, AnnounceCapacityReleased):
            released.append(action)
            return f"{action.count} x {action.instance_type} released"
        raise TypeError(f"unknown action {action!r}")  # pragma: no cover

    # -- alerts: the outbox ---------------------------------------------------------------------
    def publish(self, message: OutboxMessage) -> str:
        """Publish one owed alert; on success the outbox item is done, on failure it is retried
        by the sweep with backoff (and counted, so an alarm can page on it)."""
        notify = dataclasses.replace(
            message.notify, attributes={**message.notify.attributes, "dedupe_id": message.dedupe_id}
        )
        try:
            self.notifier.publish(notify)
        except Exception as exc:
            self.counters.add(ALERT_PUBLISH_FAILURES)
            tries = message.tries + 1
            delay = min(OUTBOX_RETRY_CAP_MS, OUTBOX_RETRY_MS * 2 ** min(tries - 1, 10))
            self.store.outbox_retry(
                message.run_id, message.dedupe_id, self.clock() + delay, tries, error_text(exc)
            )
            raise
        self.store.outbox_done(message.run_id, message.dedupe_id, self.clock())
        self.counters.add(ALERTS_PUBLISHED)  # after the outbox is settled: a crash here cannot re-send
        return f"{message.notify.severity} {message.notify.event}: {message.notify.subject} [{message.dedupe_id}]"

    # -- capacity released: wake runs waiting for it, in a stated order -----------------------
    def _release_capacity(self, source_run_id: str, rel: AnnounceCapacityReleased) -> None:
        """Wake runs waiting for quota on this instance type, highest `priority` first, then in
        submission order, until the released instances are taken."""
        remaining = rel.count
        for other in self.store.runs_waiting_for(WaitReason.QUOTA, rel.instance_type):
            if other == source_run_id:
                continue
            try:
                woken = self.handle(other, CapacityReleased(rel.instance_type, remaining))
            except Exception:
                log.exception("waking %s after capacity release failed", other)
                continue
            cur = woken.current if woken is not None else None
            if (
                cur is not None
                and cur.instance_type == rel.instance_type
                and cur.launch == LaunchState.SUBMITTED
            ):
                remaining -= cur.instance_count
            if remaining <= 0:
                break
