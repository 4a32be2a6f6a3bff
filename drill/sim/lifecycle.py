"""The simulated job lifecycle (`SimCore`): the event loop over virtual time, timers, Training phases,
endings, state transitions and events; `advance` owns the clock.

Why: docs/fidelity.md, docs/drill.md (*The simulated services*)."""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable, Iterator
from typing import Any

from drill.clock import VirtualClock
from drill.sim import faults
from drill.sim.checkpoints import CheckpointWriter
from drill.sim.events import SimEvents
from drill.sim.hosts import INFRA_CHECK_FAILURE_REASON, Lemon, training_start_lines
from drill.sim.logs import SimLogs
from drill.sim.model import (
    Fault,
    FaultRecord,
    FaultState,
    JobProfile,
    SimJob,
    StartupTimes,
    spm,
    stepf_at,
)
from drill.sim.texts import (
    CAPACITY_FAILURE_REASON,
    CAPACITY_STATUS_MESSAGE,
    DEFAULT_CAPACITY_WAIT_MIN,
    DEFAULT_MAX_RUNTIME_S,
    HANG_PHASES,
    HEALTHY_PHASES,
    KILL_AFTER_MS,
    MINUTE_MS,
    RETRY_STARTING_MESSAGE,
    STATUS_MESSAGES,
    TERMINAL,
    TIMED_PHASES,
    TRAINING_FAULTS,
)
from drill.sim.training_plans import TrainingPlans
from drill.sim.warm_pools import WarmPools, WarmPoolSettings


class SimCore(SimEvents):
    """The simulation's state and lifecycle (see the module docstring)."""

    def __init__(
        self,
        clock: VirtualClock,
        *,
        s3_client: Any,
        logs_client: Any | None,
        account_id: str,
        region: str,
        startup: StartupTimes | None,
        seed: int,
        emit: Callable[[dict[str, Any]], None] | None,
        timestamp_form: str,
        progress_log_interval_s: int,
        log_flush_interval_s: int,
        warm_pools: WarmPoolSettings | None = None,
    ) -> None:
        if timestamp_form not in ("millis", "string"):
            raise ValueError("timestamp_form must be 'millis' or 'string'")
        if progress_log_interval_s < 60:
            raise ValueError("progress_log_interval_s must be at least 60")
        self.clock = clock
        self.account_id = account_id
        self.region = region
        self.startup = startup or StartupTimes()
        self.emit = emit
        self.timestamp_form = timestamp_form
        self.events: list[dict[str, Any]] = []  # every event emitted, in order
        self.fault_log: list[tuple[int, str, str, int]] = []  # (at ms, job name, fault kind, host)
        self.logs = SimLogs(
            logs_client,
            clock,
            progress_ms=progress_log_interval_s * 1000,
            flush_ms=log_flush_interval_s * 1000,
        )
        self.checkpoint_writer = CheckpointWriter(s3_client, self.logs, clock)
        self._rng = random.Random(seed)
        self._jobs: dict[str, SimJob] = {}
        self._live: dict[str, SimJob] = {}
        self._profiles: dict[str, JobProfile] = {}
        self._faults: list[FaultState] = []
        self._fault_seq = 0
        self.fault_records: list[FaultRecord] = []  # every training fault that fired, in order
        self._run_healthy_ms: dict[str, int] = {}  # per run name: healthy Training ms of ended phases
        # goodput ground truth per run name: ms spent training steps no job of the run had trained
        # before (closed train phases), and the highest step any of its jobs reached
        self._run_new_ms: dict[str, float] = {}
        self._run_high_step: dict[str, float] = {}
        self.warm_pools = WarmPools(warm_pools or WarmPoolSettings())
        self.training_plans = TrainingPlans(region, account_id)
        self.lemons: list[Lemon] = []  # bad hosts that come back on new instances (drill/sim/hosts.py)
        self._outbox: list[tuple[int, int, dict[str, Any]]] = []
        self._out_seq = 0
        self._advancing = False
        # the event queue: per live job its earliest item, (t, prio, seq, stamp, kind, job name);
        # an entry whose stamp is not the job's current one is stale and skipped
        self._sched: list[tuple[int, int, int, int, str, str]] = []
        self._stamps: dict[str, int] = {}
        # live jobs per run id and instances per type, kept as jobs start and end
        self._live_by_run: dict[str | None, set[str]] = {}
        self._crowded: set[str] = set()  # run ids with more than one live job
        # instances of live jobs per type, on-demand and managed spot apart (separate quotas)
        self._live_instances: dict[str, int] = {}
        self._live_spot_instances: dict[str, int] = {}
        self._phase_listeners: list[Callable[[str, int], None]] = []

    # ------------------------------------------------------------------------------------------
    # Simulation control
    # ------------------------------------------------------------------------------------------

    def flush_logs(self) -> None:
        """Write buffered log lines to CloudWatch Logs now (one put_log_events per stream)."""
        self.logs.flush()

    @property
    def log_events_rejected(self) -> int:
        """Events moto CloudWatch Logs refused (outside its time window)."""
        return self.logs.events_rejected

    def add_phase_listener(self, listener: Callable[[str, int], None]) -> None:
        """Call ``listener(job name, ms)`` whenever a job's Training phase opens or closes (the
        only moments its metric series change character)."""
        self._phase_listeners.append(listener)

    def arm(self, fault: Fault) -> FaultState:
        """Register a fault (binding to jobs already in Training is the caller's business)."""
        state = FaultState(fault=fault, seq=self._fault_seq)
        self._fault_seq += 1
        self._faults.append(state)
        return state

    def run_healthy_ms(self, run_name: str | None, now_ms: int) -> int:
        """How long the run's jobs have been in Training healthy (train, save, eval phases) by now."""
        if run_name is None:
            return 0
        total = self._run_healthy_ms.get(run_name, 0)
        for job in self._live.values():
            if job.run_name == run_name and job._phase in HEALTHY_PHASES:
                total += max(0, now_ms - job._phase_start)
        return total

    def run_productive_ms(self, run_name: str | None, now_ms: int) -> float:
        """Ground truth for goodput: how long the run's jobs spent training steps none of them had
        trained before (work redone after a resume, saves, pauses and hangs do not count), by now."""
        if run_name is None:
            return 0.0
        total = self._run_new_ms.get(run_name, 0.0)
        high = self._run_high_step.get(run_name)
        for job in self._live.values():
            if job.run_name == run_name and job._phase == "train" and job.profile.steps_per_minute > 0:
                s1 = min(job._phase_target, stepf_at(job, now_ms))
                new, _ = self._new_steps(job._seg_step0, s1, high)
                total += new * MINUTE_MS / job.profile.steps_per_minute
        return total

    @staticmethod
    def _new_steps(s0: float, s1: float, high: float | None) -> tuple[float, float]:
        floor = s0 if high is None else max(s0, high)
        return max(0.0, s1 - floor), s1 if high is None else max(high, s1)

    def next_event_time(self) -> int | None:
        """Earliest virtual time at which something is pending, never earlier than now; None if idle.

        It equals ``clock.now_ms`` when an API call left an event to deliver: call ``advance(now)``.
        """
        best: int | None = self._outbox[0][0] if self._outbox else None
        item = self._earliest_item()
        if item is not None and (best is None or item[0] < best):
            best = item[0]
        return None if best is None else max(best, self.clock.now_ms)

    def advance(self, to_ms: int) -> None:
        """Process everything up to ``to_ms`` in time order; moves the clock (see module docstring)."""
        if to_ms < self.clock.now_ms:
            raise ValueError(f"cannot advance backwards: {to_ms} < {self.clock.now_ms}")
        if self._advancing:
            raise RuntimeError("advance() is not re-entrant (called from an emit callback?)")
        self._advancing = True
        try:
            while True:
                item = self._earliest_item()
                t_out = self._outbox[0][0] if self._outbox else None
                if t_out is not None and t_out <= to_ms and (item is None or t_out <= item[0]):
                    t, _, event = self._outbox.pop(0)
                    self._move_clock(t)
                    self.flush_logs()  # a handler may read the log tail on this event
                    self.events.append(event)
                    if self.emit is not None:
                        self.emit(event)
                    continue
                if item is None or item[0] > to_ms:
                    break
                self._move_clock(item[0])
                self._fire(item[3], item[4], item[0])
                self._reschedule(item[3])
            self._move_clock(to_ms)
            if self.logs.client is not None:  # lines go to CloudWatch Logs: write them out now
                for job in list(self._live.values()):
                    self.logs.progress_lines(job, to_ms)
            self.logs.flush_if_due()
        finally:
            self._advancing = False

    # ------------------------------------------------------------------------------------------
    # The event loop
    # ------------------------------------------------------------------------------------------

    def _move_clock(self, t: int) -> None:
        if t > self.clock.now_ms:
            self.clock.advance_to(t)

    def _earliest_item(self) -> tuple[int, int, int, SimJob, str] | None:
        sched = self._sched
        while sched:
            t, prio, seq, stamp, kind, name = sched[0]
            job = self._live.get(name)
            if job is None or self._stamps.get(name) != stamp:
                heapq.heappop(sched)  # the job ended, or its items changed since
                continue
            return t, prio, seq, job, kind
        return None

    def _reschedule(self, job: SimJob) -> None:
        """Queue the job's earliest item again after anything that may have changed its items
        (an item fired, an API call, a fault bound); older queue entries become stale."""
        stamp = self._stamps.get(job.name, 0) + 1
        self._stamps[job.name] = stamp
        if job.name not in self._live:
            return
        best = min(self._job_items(job), default=None)
        if best is not None:
            t, prio, kind = best
            heapq.heappush(self._sched, (t, prio, job.seq, stamp, kind, job.name))

    def _go_live(self, job: SimJob) -> None:
        self._live[job.name] = job
        names = self._live_by_run.setdefault(job.run_id, set())
        names.add(job.name)
        if len(names) > 1 and job.run_id is not None:
            self._crowded.add(job.run_id)
        counts = self._instance_counts(job)
        counts[job.instance_type] = counts.get(job.instance_type, 0) + job.instance_count

    def _leave_live(self, job: SimJob) -> None:
        if self._live.pop(job.name, None) is None:
            return
        names = self._live_by_run.get(job.run_id)
        if names is not None:
            names.discard(job.name)
            if len(names) <= 1 and job.run_id is not None:
                self._crowded.discard(job.run_id)
            if not names:
                del self._live_by_run[job.run_id]
        self._instance_counts(job)[job.instance_type] -= job.instance_count

    def _instance_counts(self, job: SimJob) -> dict[str, int]:
        """The live-instance counts a job's instances belong to: managed spot's or on-demand's."""
        spot = bool(job.request.get("EnableManagedSpotTraining"))
        return self._live_spot_instances if spot else self._live_instances

    def _job_items(self, job: SimJob) -> Iterator[tuple[int, int, str]]:
        if job._save is not None:
            t = job._save.next_time()
            if t is not None:
                yield t, 0, "file"
        if job._timer_at is not None:
            yield job._timer_at, 1, "timer"
        if job._phase is not None and job.status == "InProgress":
            assert job._try_started_ms is not None
            # with RetryStrategy, MaxRuntimeInSeconds bounds all the tries together
            yield job._try_started_ms + self._max_runtime_ms(job) - job._runtime_used_ms, 2, "max_runtime"
        if job._bound and job._phase is not None:
            yield job._bound[0][0], 3, "fault"
        kill = self.training_plans.kill_at(job.name) if job.status == "InProgress" else None
        if kill is not None:  # a training plan's window ends (drill/sim/training_plans.py)
            yield kill, 2, "plan_end"

    def _max_runtime_ms(self, job: SimJob) -> int:
        sc = job.request.get("StoppingCondition") or {}
        return int(sc.get("MaxRuntimeInSeconds", DEFAULT_MAX_RUNTIME_S)) * 1000

    def _fire(self, job: SimJob, kind: str, t: int) -> None:
        if kind == "file":
            self.checkpoint_writer.write_next_file(job, t)
        elif kind == "timer":
            timer = job._timer_kind
            job._timer_at, job._timer_kind = None, ""
            self._on_timer(job, timer, t)
        elif kind == "max_runtime":
            self._begin_stop(job, t, "MaxRuntimeExceeded", "max_runtime")
        elif kind == "fault":
            _, _, state = job._bound.pop(0)
            faults.fire(self, job, state, t)
        elif kind == "plan_end":
            self.training_plans.terminate(self, job, t)

    def _set_timer(self, job: SimJob, at: int | None, kind: str) -> None:
        job._timer_at, job._timer_kind = at, kind

    def _on_timer(self, job: SimJob, timer: str, t: int) -> None:
        st = self.startup
        if timer == "downloading":
            if job.provisioned_ms is None:  # a retry keeps the first TrainingStartTime
                job.provisioned_ms = t
            self._transition(job, t, "InProgress", "Downloading")
            download = (st.warm_download_s if job.warm_pool_used else st.download_s) * 1000
            restore = self.checkpoint_writer.restore(job)  # the synced checkpoints, per instance
            self._set_timer(job, t + download + restore, "training")
        elif timer == "training":
            self._enter_training(job, t)
        elif timer == "pending":
            self._transition(job, t, "InProgress", "Pending", CAPACITY_STATUS_MESSAGE)
            fault = job._capacity.fault if job._capacity else None
            duration = DEFAULT_CAPACITY_WAIT_MIN
            if fault is not None and fault.duration_min is not None:
                duration = fault.duration_min
            wait_ms = round(duration * MINUTE_MS)
            fail_at = t + max(wait_ms, 1)
            max_pending = (job.request.get("StoppingCondition") or {}).get("MaxPendingTimeInSeconds")
            if max_pending is not None and job.created_ms + max_pending * 1000 < fail_at:
                self._set_timer(job, max(job.created_ms + max_pending * 1000, t + 1), "max_pending")
            else:
                self._set_timer(job, fail_at, "capacity_fail")
        elif timer == "capacity_fail":
            reason = job._capacity.fault.failure_reason if job._capacity else None
            job.ended_reason = "capacity"
            self._fail(job, t, reason or CAPACITY_FAILURE_REASON)
        elif timer == "max_pending":
            job.ended_reason = "max_pending"
            self._transition(job, t, "Stopped", "Stopped")
            self._finish(job, t)
        elif timer == "phase_end":
            self._on_phase_end(job, t)
        elif timer == "completed":
            job.ended_reason = "completed"
            self._transition(job, t, "Completed", "Completed")
            self._finish(job, t)
        elif timer == "infra_check_fail":
            job.ended_reason = "infra_check"
            self._fail(job, t, INFRA_CHECK_FAILURE_REASON.format(host=job._infra_check_host))
        elif timer == "fault_crash":
            state, job._pending_crash = job._pending_crash, None
            assert state is not None
            faults.crash(self, job, state, t)
        elif timer.startswith("plan_"):  # Pending on a training plan (drill/sim/training_plans.py)
            self.training_plans.on_timer(self, job, timer, t)
        elif timer == "stopped":
            job._save = None
            self._transition(job, t, "Stopped", job._stop_final)
            self._finish(job, t)
        else:  # pragma: no cover - programming error
            raise AssertionError(f"unknown timer {timer}")

    def _enter_training(self, job: SimJob, t: int) -> None:
        job._bound = []
        job._await_save = []
        if job.training_started_ms is None:  # a retry keeps the first one
            job.training_started_ms = t
        job._try_started_ms = t
        job.training_ended_ms = None
        if job.retries:
            job.retries[-1]["training_ms"] = t
        job._lines_until = t
        self._transition(job, t, "InProgress", "Training")
        resume = int(job._stepf)
        for host in range(1, job.instance_count + 1):
            for line in job.profile.startup_log_lines:
                self.logs.write_line(job, host, t, line)
            if resume > 0:
                self.logs.write_line(job, host, t, f"Resuming training from global step {resume}")
            for line in training_start_lines(job, host):
                self.logs.write_line(job, host, t, line)
        for state in self._faults:
            f = state.fault
            if f.kind in TRAINING_FAULTS and not state.consumed and faults.matches(f, job):
                faults.bind(self, job, state, t, sort=False)
        if not job.retries:  # a retry provisions new instances: the pool's bad hosts stay behind
            for fault in self.warm_pools.refires(job):  # bad hosts of the pool it runs on
                state = FaultState(fault=fault, seq=self._fault_seq)
                self._fault_seq += 1
                faults.bind(self, job, state, t, sort=False)
        job._bound.sort(key=lambda b: (b[0], b[1]))
        self._start_train(job, t)

    # --- Training phases --------------------------------------------------------------------------

    def _open_segment(self, job: SimJob, t: int, kind: str) -> None:
        job._phase = kind
        job._phase_start = t
        job._seg_step0 = job._stepf
        job._seg_starts.append(t)
        job._segs.append((t, None, kind, job._dead_host))
        for listener in self._phase_listeners:
            listener(job.name, t)

    def _close_segment(self, job: SimJob, t: int) -> None:
        """Freeze progress at ``t`` and close the open Training segment."""
        if job._phase is None:
            return
        self.logs.progress_lines(job, t)
        if job._phase == "train" and job.profile.steps_per_minute > 0:
            job._stepf = min(job._phase_target, stepf_at(job, t))
            if job.run_name is not None:
                high = self._run_high_step.get(job.run_name)
                new, self._run_high_step[job.run_name] = self._new_steps(job._seg_step0, job._stepf, high)
                ms = new * MINUTE_MS / job.profile.steps_per_minute
                self._run_new_ms[job.run_name] = self._run_new_ms.get(job.run_name, 0.0) + ms
        job.step = int(job._stepf)
        start, _, kind, dead = job._segs[-1]
        job._segs[-1] = (start, t, kind, dead)
        job._phase = None
        if kind in HEALTHY_PHASES and job.run_name is not None:
            self._run_healthy_ms[job.run_name] = self._run_healthy_ms.get(job.run_name, 0) + t - start
        for listener in self._phase_listeners:
            listener(job.name, t)

    def _start_train(self, job: SimJob, t: int) -> None:
        p = job.profile
        s = job._stepf
        if s >= p.total_steps:
            job._phase_target = s
            self._open_segment(job, t, "train")
            self._set_timer(job, t + 1000, "phase_end")
            return
        every = p.checkpoint_every_steps
        target = float(p.total_steps)
        if every > 0:
            target = min(target, float((math.floor(s / every) + 1) * every))
        job._phase_target = target
        self._open_segment(job, t, "train")
        if p.steps_per_minute <= 0:
            self._set_timer(job, None, "")
        else:
            self._set_timer(job, t + math.ceil((target - s) * MINUTE_MS / spm(job)), "phase_end")

    def _on_phase_end(self, job: SimJob, t: int) -> None:
        phase = job._phase
        p = job.profile
        if phase == "train":
            target = job._phase_target
            self._close_segment(job, t)
            job._stepf = target
            job.step = int(target)
            step = int(target)
            every = p.checkpoint_every_steps
            if every > 0 and step % every == 0 and step > job._last_saved_step:
                job._after_save = "upload" if step >= p.total_steps else "train"
                self.checkpoint_writer.begin_save(job, t, step, p.checkpoint_write_seconds * 1000, "periodic")
                self._open_segment(job, t, "save")
                self._set_timer(job, job._save.end_ms if job._save else t, "phase_end")
                faults.save_started(job, t)
            elif step >= p.total_steps:
                self._begin_upload(job, t)
            else:
                self._start_train(job, t)
        elif phase == "save":
            self._close_segment(job, t)
            if job._after_save == "upload" or job._stepf >= p.total_steps:
                self._begin_upload(job, t)
            else:
                self._start_train(job, t)
        elif phase in TIMED_PHASES:
            self._close_segment(job, t)
            self._start_train(job, t)
        else:  # pragma: no cover - hangs have no end timer
            raise AssertionError(f"phase {phase} has no end")

    def _begin_upload(self, job: SimJob, t: int) -> None:
        self._leave_training(job, t)
        self._transition(job, t, "InProgress", "Uploading")
        self._set_timer(job, t + self.startup.upload_s * 1000, "completed")

    def _leave_training(self, job: SimJob, t: int) -> None:
        self._close_segment(job, t)
        if job.training_started_ms is not None and job.training_ended_ms is None:
            job.training_ended_ms = t
        job._bound = []
        job._await_save = []

    # --- Endings ------------------------------------------------------------------------------------

    def _begin_stop(self, job: SimJob, t: int, final: str, reason: str) -> None:
        if job.status != "InProgress":
            return
        job._stop_final = final
        job.ended_reason = reason
        job.stop_requested_ms = t
        stop_ms = self.startup.stop_s * 1000
        stopped_at = t + stop_ms
        phase = job._phase
        self._leave_training(job, t)
        if phase is not None:
            if phase in HANG_PHASES:
                stopped_at = t + max(stop_ms, KILL_AFTER_MS)  # a hung script ignores SIGTERM
            else:
                if job._save is None:
                    step = int(job._stepf)
                    if job.profile.checkpoint_on_sigterm and step > job._last_saved_step:
                        self.logs.write_line(job, 1, t, "Received SIGTERM: saving a final checkpoint")
                        self.checkpoint_writer.begin_save(
                            job, t, step, job.profile.checkpoint_write_seconds * 1000, "sigterm"
                        )
                if job._save is not None:
                    job._save.kill_ms = t + KILL_AFTER_MS
                    stopped_at = max(t + stop_ms, min(job._save.end_ms, t + KILL_AFTER_MS))
        self._transition(job, t, "Stopping", "Stopping")
        self._set_timer(job, stopped_at, "stopped")

    def _retries_left(self, job: SimJob) -> int:
        limit = int((job.request.get("RetryStrategy") or {}).get("MaximumRetryAttempts") or 0)
        return limit - len(job.retries)

    def _retry(self, job: SimJob, t: int, reason: str) -> None:
        """SageMaker's RetryStrategy after an InternalServerError, within the same job.

        Documented: only InternalServerError is retried; "when the job is retried, its
        SecondaryStatus is changed to STARTING"; with a RetryStrategy, MaxRuntimeInSeconds is "the
        maximum time for all of the attempts in total". Assumed (not documented): the status stays
        InProgress and no Failed event is emitted in between; the retry provisions instances again
        (cold: provision + download, no warm pool); TrainingStartTime keeps the first try's value;
        the script resumes from the newest complete checkpoint in CheckpointConfig (SageMaker
        restores S3Uri into LocalPath); MaxRuntime counts Training time of all the tries.
        """
        step = job.current_step(t)
        self._leave_training(job, t)
        assert job._try_started_ms is not None
        job._runtime_used_ms += t - job._try_started_ms
        job._save = None
        job.ended_reason = None
        resume = max([job.start_step, *job.checkpoints])
        limit = len(job.retries) + self._retries_left(job)
        job.retries.append(
            {"failed_ms": t, "reason": reason, "step": step, "start_step": resume, "training_ms": None}
        )
        job._stepf, job.step, job._last_saved_step = float(resume), resume, resume
        on_plan = self.training_plans.holds(job.name)
        capacity = None if on_plan else faults.take_capacity_fault(self, job)
        self._transition(
            job, t, "InProgress", "Starting", RETRY_STARTING_MESSAGE.format(n=len(job.retries), limit=limit)
        )
        if on_plan:  # the plan's capacity again: Pending until a window has room
            self.training_plans.retry(self, job, t)
        elif capacity is not None:
            job.capacity_wait = True
            job._capacity = capacity
            self._set_timer(
                job, t + max(round(capacity.fault.after_training_min * MINUTE_MS), 1000), "pending"
            )
        else:
            self._set_timer(job, t + self.startup.provision_s * 1000, "downloading")

    def _fail(self, job: SimJob, t: int, reason: str) -> None:
        self._leave_training(job, t)
        job.failure_reason = reason
        self._transition(job, t, "Failed", "Failed")
        self._finish(job, t)

    def _finish(self, job: SimJob, t: int) -> None:
        self._leave_training(job, t)
        job.ended_ms = t
        job._timer_at = None
        job._save = None
        job._bound = []
        job.step = int(job._stepf)
        self._leave_live(job)
        self.warm_pools.leave(job, t)

    # --- State changes and events -------------------------------------------------------------

    def _transition(
        self, job: SimJob, t: int, status: str, secondary: str, message: str | None = None
    ) -> None:
        msg = message if message is not None else STATUS_MESSAGES.get(secondary, secondary)
        if job.transitions:
            job.transitions[-1]["EndTime"] = t
        entry: dict[str, Any] = {"Status": secondary, "StartTime": t, "EndTime": None, "StatusMessage": msg}
        if status in TERMINAL:
            entry["EndTime"] = t
        job.transitions.append(entry)
        job.status, job.secondary, job.status_message = status, secondary, msg
        job.last_modified_ms = t
        self._queue_event(job, t)
