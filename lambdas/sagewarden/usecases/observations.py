"""The service's "observe" step: the look-ups a decision needs before `decide` takes it.

Newest verified checkpoint, log tail and host triage of a hang, cadence, log silence, heartbeat
confirmation and checkpoint saves; a failed look-up is passed on as unknown.
Why: docs/reliability.md (*Unknown is not empty*)."""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

from sagewarden import keys
from sagewarden.domain.capacity.training_plans import wants_plan
from sagewarden.domain.checkpoints.retention import MAX_RETIRE_DIRS, PROBE_SLACK, wants_retention
from sagewarden.domain.endings.attempt_ended import job_end_ms
from sagewarden.domain.endings.deletions import lookup_event
from sagewarden.domain.hangs.alarms import SIGNAL_LOG_SILENCE, silence_window_min
from sagewarden.domain.hangs.cadence import HORIZON_MIN, MAX_PHASE_MINUTES, wants_cadence
from sagewarden.domain.hangs.heartbeat import ConfirmWindows
from sagewarden.domain.hangs.quiet import (
    SAVE_ACTIVE_MS,
    quiet_signals_wait,
    silence_from_logs,
    silence_to_confirm,
    wants_save_activity,
)
from sagewarden.domain.hangs.windows import signal_window, startup_allowance
from sagewarden.domain.lookups import (
    wants_checkpoint,
    wants_fingerprints,
    wants_late_hardware_lines,
    wants_log_silence_check,
    wants_log_tail,
)
from sagewarden.domain.vocabulary.classifier.classify import shows_kill
from sagewarden.domain.vocabulary.events import (
    AlarmsObserved,
    Event,
    HangSignal,
    JobObserved,
    Observations,
    Tick,
)
from sagewarden.domain.vocabulary.evidence import HostMetrics
from sagewarden.domain.vocabulary.layouts import Checkpoint, CheckpointLayout, LayoutKind, RetentionView
from sagewarden.domain.vocabulary.models import Run, startup_kind
from sagewarden.domain.vocabulary.plan_windows import PlanView, plan_arn
from sagewarden.domain.vocabulary.reasons import LogCheck
from sagewarden.ports.aws import ReadFailed, Series
from sagewarden.usecases.audit_text import error_text, run_secrets
from sagewarden.usecases.observe_hosts import (
    read_addresses,
    read_fingerprints,
    read_hardware_printers,
    read_scan,
    read_steps,
)

if TYPE_CHECKING:
    from sagewarden.usecases.supervisor import Supervisor

log = logging.getLogger("sagewarden.usecases.supervisor")

OBSERVATION_FAILURES = keys.METRIC_OBSERVATION_FAILURES
LOG_TAIL_LINES = 40
MEMORY_WINDOW_MS = 10 * 60_000  # a kill's host memory is read over the minutes before the job's end


class Observer:
    """The supervisor's look-ups through its ports (read at call time: tests swap adapters)."""

    def __init__(self, sup: Supervisor) -> None:
        self.sup = sup

    def observe(self, run: Run, event: Event) -> Observations:
        """Look up what deciding on `event` needs (a failed lookup is passed on as unknown). Every
        text is scrubbed of the run's secrets before anything cuts it (the log reader clips its
        lines, error texts are bounded). Each step adds what it looked up, in this order."""
        secrets = run_secrets(run)
        event = lookup_event(run, event, self.sup.clock())  # a deleted job's recorded ending
        facts = self.sup.deployment_facts
        found = Observations(log_subscription=facts.log_subscription, heartbeat_broken=facts.heartbeat_broken)
        found = self._with_scan_and_steps(run, event, found)
        found = self._with_checkpoint(run, event, secrets, found)
        found = self._with_retention(run, event, found)
        found = self._with_log_evidence(run, event, facts, secrets, found)
        found = self._with_fingerprints(run, event, found)
        found = self._with_cadence(run, event, found)
        found = self._with_log_silence(run, event, facts, found)
        found = self._with_silence_evidence(run, found)
        return self._with_plan(run, event, found)

    def _with_scan_and_steps(self, run: Run, event: Event, found: Observations) -> Observations:
        """The start-up scan (domain/hosts/fabric.py) and the step lines (domain/hosts/stragglers.py)."""
        scan_lines, scan_error = read_scan(self.sup, run, event, OBSERVATION_FAILURES)
        step_lines, step_error = read_steps(self.sup, run, event, self.sup.clock(), OBSERVATION_FAILURES)
        return dataclasses.replace(
            found, scan_lines=scan_lines, scan_error=scan_error, step_lines=step_lines, step_error=step_error
        )

    def _with_checkpoint(
        self, run: Run, event: Event, secrets: tuple[str, ...], found: Observations
    ) -> Observations:
        """The newest verified checkpoint, with its write time when it is new to the run."""
        if not (wants_checkpoint(run, event) and run.checkpoint_uri):
            return found
        checkpoint, ckpt_error, ckpt_permanent = None, None, False
        pol = run.policy
        try:
            layout = CheckpointLayout(
                LayoutKind(pol.checkpoint_layout), pol.checkpoint_dir_regex, pol.checkpoint_marker
            )
            checkpoint = self.sup.checkpoints.latest(run.checkpoint_uri, layout)
        except Exception as exc:  # unknown, not "no checkpoint": decide defers what depends on it
            log.warning("checkpoint lookup under %s failed: %s", run.checkpoint_uri, exc)
            self.sup.counters.add(OBSERVATION_FAILURES)
            ckpt_error = error_text(exc, secrets)
            # the adapter says whether it can heal by itself; decide gives up on one that cannot
            ckpt_permanent = isinstance(exc, ReadFailed) and exc.permanent
        return dataclasses.replace(
            found,
            checkpoint=self._measure_write_time(run, checkpoint),
            checkpoint_error=ckpt_error,
            checkpoint_error_permanent=ckpt_permanent,
        )

    def _with_retention(self, run: Run, event: Event, found: Observations) -> Observations:
        retention, retention_error = self._retention(run, event)
        return dataclasses.replace(found, retention=retention, retention_error=retention_error)

    def _with_log_evidence(
        self, run: Run, event: Event, facts: Observations, secrets: tuple[str, ...], found: Observations
    ) -> Observations:
        """The log tail and what is read with it: a hang's host metrics first (the hosts they single
        out are the logs read first), its save activity and heartbeat confirmation, the per-host
        triage; at a failure the hosts that printed a hardware line, peers by address and a kill's
        memory. Without a tail wanted: only a late look for hardware lines."""
        if not wants_log_tail(run, event):
            if wants_late_hardware_lines(run, event) and isinstance(event, JobObserved):
                # before a job runs on the pool of an ending that named no host (domain/hosts/bad_hosts.py)
                suspects, printers_error = read_hardware_printers(self.sup, run, event, OBSERVATION_FAILURES)
                return dataclasses.replace(
                    found, suspect_hosts=suspects, hardware_printers_error=printers_error
                )
            return found
        found, gpu_lines = self._with_hosts_first(run, event, found)
        found, benign_wait = self._with_quiet_signals(run, event, facts, found)
        if not benign_wait:  # the tail and per-host triage serve a hang's alert only
            found = self._with_tail(run, event, secrets, found)
        found = dataclasses.replace(found, hosts_triage=gpu_lines + found.hosts_triage)
        if isinstance(event, JobObserved) and found.log_tail:  # peers by address, a kill's memory
            address_lines, address_error = read_addresses(
                self.sup, run, event, found.log_tail, OBSERVATION_FAILURES
            )
            memory, memory_error = self._read_memory(run, event, found.log_tail)
            found = dataclasses.replace(
                found,
                address_lines=address_lines,
                address_error=address_error,
                host_memory=memory,
                host_memory_error=memory_error,
            )
        return found

    def _with_hosts_first(
        self, run: Run, event: Event, found: Observations
    ) -> tuple[Observations, tuple[str, ...]]:
        """(With the hosts to read first, the GPU triage lines): a hang's host metrics (one
        GetMetricData per 500 series), the evidence of what the job is doing, and the hosts they
        single out, so a time budget cut on a large job never loses them; at a failed attempt the
        host a hardware line names."""
        if isinstance(event, (HangSignal, AlarmsObserved)):
            if self.sup.metrics is not None and run.current:
                hosts, hosts_error, gpu_lines, suspects = self._read_hosts(run)
                found = dataclasses.replace(
                    found, host_metrics=hosts, host_metrics_error=hosts_error, suspect_hosts=suspects
                )
                return found, gpu_lines
            return dataclasses.replace(found, host_metrics_error="no metrics reader in this deployment"), ()
        if isinstance(event, JobObserved):
            suspects, printers_error = read_hardware_printers(self.sup, run, event, OBSERVATION_FAILURES)
            return dataclasses.replace(
                found, suspect_hosts=suspects, hardware_printers_error=printers_error
            ), ()
        return found, ()

    def _with_quiet_signals(
        self, run: Run, event: Event, facts: Observations, found: Observations
    ) -> tuple[Observations, bool]:
        """(With a hang's save activity and heartbeat confirmation, whether the quiet signals are a
        benign wait): a heartbeat's silence is confirmed in the job's own logs before it may stop
        it."""
        if not (isinstance(event, (HangSignal, AlarmsObserved)) and wants_save_activity(event)):
            return found, False
        if run.checkpoint_uri:
            save_ms, save_error = self._save_activity(run)
            found = dataclasses.replace(found, save_activity_ms=save_ms, save_activity_error=save_error)
        partial = dataclasses.replace(
            facts,
            host_metrics=found.host_metrics,
            host_metrics_error=found.host_metrics_error,
            save_activity_ms=found.save_activity_ms,
            save_activity_error=found.save_activity_error,
        )
        windows = silence_to_confirm(run, event, partial, self.sup.clock())
        if windows is not None:
            heard, heard_error = self._confirm_silence(run, windows)
            found = dataclasses.replace(found, heartbeat_check=heard, heartbeat_check_error=heard_error)
            partial = dataclasses.replace(partial, heartbeat_check=heard, heartbeat_check_error=heard_error)
        return found, quiet_signals_wait(run, event, partial, self.sup.clock())

    def _with_tail(
        self, run: Run, event: Event, secrets: tuple[str, ...], found: Observations
    ) -> Observations:
        """The log tail (the suspect hosts' logs first) and, at a hang, the per-host triage and
        when the job last wrote a line. A failed read keeps what was read before it."""
        job = event.job_name if isinstance(event, (JobObserved, HangSignal, AlarmsObserved)) else ""
        tail: tuple[str, ...] = ()
        triage: tuple[str, ...] = ()
        log_newest: int | None = None
        log_error: str | None = None
        try:
            tail = self.sup.logs.tail(job, LOG_TAIL_LINES, first=found.suspect_hosts, secrets=secrets)
            if isinstance(event, (HangSignal, AlarmsObserved)):
                triage = self.sup.logs.host_triage(
                    job, self.sup.clock(), first=found.suspect_hosts, secrets=secrets
                )
                log_newest = self.sup.logs.newest_event_ms(job)
        except Exception as exc:
            log.warning("could not read logs of %s: %s", job, exc)
            self.sup.counters.add(OBSERVATION_FAILURES)
            log_error = error_text(exc, secrets)
        return dataclasses.replace(
            found, log_tail=tail, hosts_triage=triage, log_newest_ms=log_newest, log_error=log_error
        )

    def _with_fingerprints(self, run: Run, event: Event, found: Observations) -> Observations:
        """The contract's fingerprint lines of the attempt, at an ending or a hang (domain/hosts/bad_hosts.py)."""
        if not (
            wants_fingerprints(run, event) and isinstance(event, (JobObserved, HangSignal, AlarmsObserved))
        ):
            return found
        lines, error = read_fingerprints(self.sup, run, event.job_name, OBSERVATION_FAILURES)
        return dataclasses.replace(found, fingerprint_lines=lines, fingerprint_error=error)

    def _with_cadence(self, run: Run, event: Event, found: Observations) -> Observations:
        """The training attempt's per-minute heartbeat and progress, to learn its hang windows from
        (read from the logs themselves without a log subscription). A failed read: nothing learned."""
        cur, metrics = run.current, self.sup.metrics
        if cur is None or metrics is None or not self._wants_cadence(run, event):
            return found
        heartbeat: Series | None = None
        progress: Series | None = None
        now = self.sup.clock()
        start = now - HORIZON_MIN * 60_000
        try:
            heartbeat, progress = metrics.activity(cur.job_name, run.policy.progress_metric, start, now)
        except Exception as exc:  # unknown cadence: nothing is learned, nothing is judged
            log.warning("could not read the activity of %s: %s", cur.job_name, exc)
            self.sup.counters.add(OBSERVATION_FAILURES)
        if self.sup.settings.log_silence_fallback:
            # no heartbeat metric exists without the log subscription: the same per-minute
            # activity is read from the logs themselves (bounded; incomplete = unknown)
            try:
                heartbeat = self.sup.logs.activity(
                    cur.job_name, max(start, cur.training_started_ms or start), now
                )
            except Exception as exc:
                log.warning("could not read the log activity of %s: %s", cur.job_name, exc)
                self.sup.counters.add(OBSERVATION_FAILURES)
                heartbeat = None
        return dataclasses.replace(found, heartbeat=heartbeat, progress=progress)

    def _wants_cadence(self, run: Run, event: Event) -> bool:
        """A tick of a training attempt whose hang windows are still being learned."""
        cur = run.current
        return (
            isinstance(event, Tick)
            and self.sup.metrics is not None
            and cur is not None
            and cur.in_training
            and run.policy.adaptive_windows
            and run.policy.hang_detection
            and wants_cadence(
                cur.training_started_ms,
                self.sup.clock(),
                startup_allowance(run, run.policy, cur),
                startup_known=run.startup_learned_on == startup_kind(cur),
            )
        )

    def _with_log_silence(
        self, run: Run, event: Event, facts: Observations, found: Observations
    ) -> Observations:
        """The sweep's own log-silence check, where log silence is judged from the logs."""
        cur = run.current
        if not (cur is not None and silence_from_logs(cur, facts) and wants_log_silence_check(run, event)):
            return found
        silent, silent_for, silence_error = self._log_silence(run)
        return dataclasses.replace(
            found, logs_silent=silent, logs_silent_min=silent_for, log_error=found.log_error or silence_error
        )

    def _with_silence_evidence(self, run: Run, found: Observations) -> Observations:
        """Logs found silent: judged on the same evidence as an alarm (save activity, host metrics)
        where the tail's step did not read it already."""
        if not found.logs_silent:
            return found
        if run.checkpoint_uri and found.save_activity_ms is None and found.save_activity_error is None:
            save_ms, save_error = self._save_activity(run)
            found = dataclasses.replace(found, save_activity_ms=save_ms, save_activity_error=save_error)
        if found.host_metrics is None and found.host_metrics_error is None:
            if self.sup.metrics is not None:
                hosts, hosts_error, gpu_lines, suspects = self._read_hosts(run)
                found = dataclasses.replace(
                    found,
                    host_metrics=hosts,
                    host_metrics_error=hosts_error,
                    suspect_hosts=suspects,
                    hosts_triage=gpu_lines + found.hosts_triage,
                )
            else:
                found = dataclasses.replace(found, host_metrics_error="no metrics reader in this deployment")
        return found

    def _with_plan(self, run: Run, event: Event, found: Observations) -> Observations:
        plan, plan_error = self._read_plan(run, event)
        return dataclasses.replace(found, plan=plan, plan_error=plan_error)

    def _read_memory(
        self, run: Run, event: JobObserved, tail: tuple[str, ...]
    ) -> tuple[tuple[str, float] | None, str | None]:
        """At a failure whose tail shows a kill (SIGKILL, exitcode -9): the highest MemoryUtilization
        any host reached in the MEMORY_WINDOW_MS before the job's end (one bounded GetMetricData),
        so the classifier can tell the OOM killer from another kill. None when not wanted; the
        error when the read failed (unknown: not shown to be memory, never "low")."""
        cur = run.current
        if cur is None or cur.job_name != event.job_name or event.status != "Failed" or not shows_kill(tail):
            return None, None
        if self.sup.metrics is None:
            return None, None  # (no reader: the classifier says the memory could not be read)
        end = job_end_ms(event) or self.sup.clock()
        try:
            peaks = self.sup.metrics.host_memory(
                cur.job_name, cur.instance_count, end - MEMORY_WINDOW_MS, end
            )
        except Exception as exc:
            log.warning("could not read the memory of %s: %s", cur.job_name, exc)
            self.sup.counters.add(OBSERVATION_FAILURES)
            return None, error_text(exc)
        through = min((t for _, _, t in peaks), default=None)
        if through is None or through < end - 60_000 - end % 60_000:
            # datapoints arrive minutes late: the minute of the kill is not in CloudWatch yet
            return None, "MemoryUtilization up to the job's end has not reached CloudWatch yet"
        host, percent, _ = max(peaks, key=lambda p: p[1])
        return (host, percent), None

    def _retention(self, run: Run, event: Event) -> tuple[RetentionView | None, str | None]:
        """The synced prefix for checkpoint retention, on a training attempt's tick when the run
        keeps a number of checkpoints (domain/checkpoints/retention.py). A failed read is unknown: nothing is
        retired on it."""
        retirer, keep = self.sup.retirer, run.policy.checkpoint_keep
        if retirer is None or keep is None or not isinstance(event, Tick) or not run.checkpoint_uri:
            return None, None
        if not wants_retention(run, run.policy):
            return None, None
        pol = run.policy
        try:
            layout = CheckpointLayout(
                LayoutKind(pol.checkpoint_layout), pol.checkpoint_dir_regex, pol.checkpoint_marker
            )
            return retirer.view(run.checkpoint_uri, layout, limit=keep + MAX_RETIRE_DIRS + PROBE_SLACK), None
        except Exception as exc:
            log.warning("retention read of %s failed: %s", run.checkpoint_uri, exc)
            self.sup.counters.add(OBSERVATION_FAILURES)
            return None, error_text(exc, run_secrets(run))

    def _read_plan(self, run: Run, event: Event) -> tuple[PlanView | None, str | None]:
        """The run's training plan (domain/capacity/training_plans.py), when the decision wants it; a
        failed read is unknown (an error text), never "no windows"."""
        arn = plan_arn(run.request)
        if arn is None or not wants_plan(run, event, self.sup.clock()):
            return None, None
        if self.sup.plans is None:
            return None, "no training plan reader in this deployment"
        try:
            return self.sup.plans.describe_plan(arn), None
        except Exception as exc:
            log.warning("could not read training plan %s: %s", arn, exc)
            self.sup.counters.add(OBSERVATION_FAILURES)
            return None, error_text(exc, run_secrets(run))

    def _log_silence(self, run: Run) -> tuple[bool | None, int | None, str | None]:
        """Without a log subscription: (whether the training attempt wrote no log line for its
        log-silence window in force -- learned, carried or the policy's, as an alarm would use --
        and declared no silent phase that still covers now; for how many minutes at least: the
        window, or the policy's window or the benign-phase ceiling when silent that long too, so
        the decision knows how long the quiet stretch has lasted; the error when that is unknown).
        None: not judged yet (the attempt has not trained for a window)."""
        cur, now = run.current, self.sup.clock()
        if cur is None or cur.training_started_ms is None:
            return None, None, None
        # as the alarm would: lines land late too, so the newest minutes alone never fill the window
        window = silence_window_min(signal_window(run, run.policy, cur, SIGNAL_LOG_SILENCE))
        if now - cur.training_started_ms < window * 60_000:
            return None, None, None
        try:
            if self.sup.logs.has_events_since(cur.job_name, now - window * 60_000):
                return False, None, None
            # a declared silent phase (phase marker) is not silence, as with the heartbeat metric
            until = self.sup.logs.declared_phase_until(
                cur.job_name, max(cur.training_started_ms, now - MAX_PHASE_MINUTES * 60_000)
            )
            if until is not None and until > now:
                return False, None, None
            silent_for = window
            for longer in sorted({run.policy.log_silence_minutes, run.policy.benign_phase_max_minutes}):
                if longer <= silent_for or now - cur.training_started_ms < longer * 60_000:
                    continue
                if self.sup.logs.has_events_since(cur.job_name, now - longer * 60_000):
                    break
                silent_for = longer
            return True, silent_for, None
        except Exception as exc:  # an error is not silence
            log.warning("log-silence check of %s failed: %s", cur.job_name, exc)
            self.sup.counters.add(OBSERVATION_FAILURES)
            return None, None, error_text(exc, run_secrets(run))

    def _confirm_silence(self, run: Run, windows: ConfirmWindows) -> tuple[LogCheck | None, str | None]:
        """What the job's training streams say about its heartbeat's silence (domain/hangs/heartbeat.py):
        one bounded FilterLogEvents for a line in the silence window, and only when there is one, a
        second for a line old enough that a delivering heartbeat would have shown it. An error is
        unknown (None and the error), never silence."""
        cur = run.current
        if cur is None:
            return None, None
        try:
            if not self.sup.logs.has_events_since(cur.job_name, windows.recent_ms):
                return LogCheck.SILENT, None
            if windows.stale_until_ms is not None and self.sup.logs.has_events_since(
                cur.job_name, windows.stale_ms, until_ms=windows.stale_until_ms
            ):
                return LogCheck.CONTRADICTED, None
            return LogCheck.RECENT, None
        except Exception as exc:  # unknown is not silence: no stop on it this time
            log.warning("confirming the log silence of %s failed: %s", cur.job_name, exc)
            self.sup.counters.add(OBSERVATION_FAILURES)
            return None, error_text(exc)

    def _save_activity(self, run: Run) -> tuple[int | None, str | None]:
        """When the newest checkpoint directory last received an object: a silent, idle job may be
        saving, not hung. An error is reported as such (unknown), never as "no save"."""
        pol = run.policy
        try:
            layout = CheckpointLayout(
                LayoutKind(pol.checkpoint_layout), pol.checkpoint_dir_regex, pol.checkpoint_marker
            )
            # a write since this moment is enough to know a save is under way (fewer pages read)
            since = self.sup.clock() - SAVE_ACTIVE_MS
            return self.sup.checkpoints.save_activity(run.checkpoint_uri, layout, active_since_ms=since), None
        except Exception as exc:
            log.warning("checkpoint activity under %s unknown: %s", run.checkpoint_uri, exc)
            self.sup.counters.add(OBSERVATION_FAILURES)
            return None, error_text(exc, run_secrets(run))

    def _measure_write_time(self, run: Run, checkpoint: Checkpoint | None) -> Checkpoint | None:
        """A checkpoint the run has not seen before gets its write time measured (one listing),
        for the checkpoint-interval advice. Best effort: a failure leaves it unmeasured."""
        history = run.checkpoint_history
        if checkpoint is None or checkpoint.write_seconds is not None or run.status.terminal:
            return checkpoint
        if history and checkpoint.step <= history[-1][0]:
            return checkpoint
        try:
            return dataclasses.replace(
                checkpoint, write_seconds=self.sup.checkpoints.write_seconds(checkpoint)
            )
        except Exception as exc:
            log.info("could not measure how long %s took to write: %s", checkpoint.uri, exc)
            return checkpoint

    def _read_hosts(
        self, run: Run
    ) -> tuple[tuple[HostMetrics, ...] | None, str | None, tuple[str, ...], tuple[str, ...]]:
        """(Each host's recent GPU, CPU and disk metrics, the read's error, triage lines of the
        hosts' GPU utilization, the suspect hosts: idle now or without metrics, idlest first).
        Unreadable metrics: unknown (an error and a line saying so), no suspects."""
        from sagewarden.domain.vocabulary.evidence import gpu_summary, gpu_suspects, gpu_triage_lines
        from sagewarden.domain.vocabulary.pricing import gpus_per_instance

        cur = run.current
        if cur is None or self.sup.metrics is None:
            return None, None, (), ()
        now = self.sup.clock()
        window = max(run.policy.gpu_idle_minutes, 10) * 60_000
        try:
            hosts = self.sup.metrics.host_metrics(cur.job_name, cur.instance_count, now - window, now)
        except Exception as exc:
            log.warning("could not read the host metrics of %s: %s", cur.job_name, exc)
            self.sup.counters.add(OBSERVATION_FAILURES)
            error = error_text(exc, run_secrets(run))
            return None, error, (f"GPU metrics unavailable: {error}",), ()
        by_host = gpu_summary(hosts)
        cpu_now = {m.host: max(m.cpu)[1] for m in hosts if m.cpu}
        threshold = run.policy.gpu_idle_percent * gpus_per_instance(cur.instance_type)
        return (
            hosts,
            None,
            gpu_triage_lines(by_host, threshold, cur.instance_count, cpu_now),
            gpu_suspects(by_host, threshold, cur.instance_count),
        )
