"""Faults of the simulated SageMaker: which jobs a fault matches, when it fires, what it does, and
recurring crashes (`fix_recurring`). See docs/drill.md (fault kinds)."""

from __future__ import annotations

from typing import Any, Protocol

from drill.clock import VirtualClock
from drill.sim import stragglers
from drill.sim.checkpoints import CheckpointWriter
from drill.sim.hosts import HostsSim, host_address, remember_lemon
from drill.sim.logs import SimLogs
from drill.sim.model import Fault, FaultRecord, FaultState, SimJob, int_tag, stepf_at
from drill.sim.texts import (
    ALGORITHM_ERROR_REASON,
    BAD_HOST_KINDS,
    CRASH_KINDS,
    DEFAULT_ALGORITHM_LOG_LINE,
    DEFAULT_EVAL_MIN,
    DEFAULT_SAVE_LONG_MIN,
    FAILURE_REASON_MAX_CHARS,
    HANG_KINDS,
    HANG_PHASES,
    HARDWARE_FAILURE_REASON,
    IDLE_PAUSE_MIN,
    IDLE_PAUSE_PHASE,
    INTERNAL_ERROR_REASON,
    MINUTE_MS,
    PAUSE_KINDS,
    SLOW_KINDS,
    TIMED_PHASES,
    client_error,
    command_args,
    limit_error,
)
from sagewarden.domain.capacity.quotas import training_quota
from sagewarden.keys import TAG_ATTEMPT, TAG_RUN_NAME


class FaultsSim(stragglers.StragglerSim, HostsSim, Protocol):
    """What faults need of the simulation (drill.sim.lifecycle.SimCore has it, and passes itself):
    its state, its clock, logs and checkpoint writer, and the lifecycle steps a fault sets off.
    Declared here, below the lifecycle, so that this module never imports it (the lifecycle
    imports this one)."""

    clock: VirtualClock
    logs: SimLogs
    checkpoint_writer: CheckpointWriter
    fault_records: list[FaultRecord]
    _faults: list[FaultState]
    _jobs: dict[str, SimJob]

    def arm(self, fault: Fault) -> FaultState: ...

    def run_healthy_ms(self, run_name: str | None, now_ms: int) -> int: ...

    def _open_segment(self, job: SimJob, t: int, kind: str) -> None: ...

    def _set_timer(self, job: SimJob, at: int | None, kind: str) -> None: ...

    def _begin_stop(self, job: SimJob, t: int, final: str, reason: str) -> None: ...

    def _retries_left(self, job: SimJob) -> int: ...

    def _retry(self, job: SimJob, t: int, reason: str) -> None: ...

    def _fail(self, job: SimJob, t: int, reason: str) -> None: ...


def matches_tags(f: Fault, tags: dict[str, str], itype: str | None) -> bool:
    if f.run is not None and tags.get(TAG_RUN_NAME) != f.run:
        return False
    if f.attempt is not None and int_tag(tags.get(TAG_ATTEMPT)) != f.attempt:
        return False
    return not (f.instance_type is not None and itype != f.instance_type)


def matches(f: Fault, job: SimJob) -> bool:
    return matches_tags(f, job.tags, job.instance_type)


def refuse_throttled(sim: FaultsSim, tags: dict[str, str], request: dict[str, Any]) -> None:
    """An armed throttle fault matching this CreateTrainingJob: ThrottlingException."""
    rc = request.get("ResourceConfig") or {}
    for state in sim._faults:
        f = state.fault
        if f.kind != "throttle" or state.consumed:
            continue
        if not matches_tags(f, tags, rc.get("InstanceType")):
            continue
        if f.once:
            state.consumed = True
        name = str(request.get("TrainingJobName", ""))
        sim.fault_log.append((sim.clock.now_ms, name, "throttle", f.host))
        raise client_error("ThrottlingException", "Rate exceeded", "CreateTrainingJob")


def refuse_over_quota(
    sim: FaultsSim, tags: dict[str, str], itype: str, count: int, name: str, op: str, *, spot: bool = False
) -> None:
    """An armed quota fault matching this launch: ResourceLimitExceeded, as the real quota check
    words it (aws-facts), with the limit's instances all in use -- the spot quota of the type for
    a managed spot job."""
    for state in sim._faults:
        f = state.fault
        if f.kind != "quota" or state.consumed or not matches_tags(f, tags, itype):
            continue
        if f.once:
            state.consumed = True
        sim.fault_log.append((sim.clock.now_ms, name, "quota", f.host))
        limit = count if f.quota_limit is None else f.quota_limit
        raise limit_error(training_quota(itype, spot=spot), limit, limit, count, op)


def take_capacity_fault(sim: FaultsSim, job: SimJob) -> FaultState | None:
    """The first armed capacity fault matching a new job (consumed when ``once``)."""
    for state in sim._faults:
        if state.fault.kind == "capacity" and not state.consumed and matches(state.fault, job):
            if state.fault.once:
                state.consumed = True
            job.faults_fired.append("capacity")
            sim.fault_log.append((job.created_ms, job.name, "capacity", state.fault.host))
            return state
    return None


def bind(sim: FaultsSim, job: SimJob, state: FaultState, now: int, *, sort: bool = True) -> None:
    """Schedule a training fault on a job in Training (see :class:`Fault` for the two clocks);
    with ``sort=False`` the caller sorts ``job._bound`` once after binding several."""
    f = state.fault
    if f.recur_after_training_min is not None and (state.fired or f.recur_from_next_start):
        # a deterministic failure: met again at the same point of every later job's Training
        start = job._try_started_ms if job._try_started_ms is not None else job.training_started_ms
        assert start is not None
        # not met yet: only a job that enters Training once it is due meets it
        due_min = f.after_run_training_min
        early = due_min is not None and round(due_min * MINUTE_MS) > sim.run_healthy_ms(job.run_name, start)
        if not state.fired and early:
            return
        at = max(now, start + round(f.recur_after_training_min * MINUTE_MS))
    elif f.after_run_training_min is not None:
        # healthy time passes at the wall clock's rate while the job trains; a hang unbinds it
        left = round(f.after_run_training_min * MINUTE_MS) - sim.run_healthy_ms(job.run_name, now)
        at = now + max(left, 0)
    else:
        start = job._try_started_ms if job._try_started_ms is not None else job.training_started_ms
        assert start is not None
        at = max(now, start + round(f.after_training_min * MINUTE_MS))
    job._bound.append((at, state.seq, state))
    if sort:
        job._bound.sort(key=lambda b: (b[0], b[1]))


def _unbind_run_clock(job: SimJob) -> None:
    """A hung job's healthy clock stops: trace faults wait for the run's next job in Training."""
    job._bound = [b for b in job._bound if b[2].fault.after_run_training_min is None]


def _record(sim: FaultsSim, job: SimJob, f: Fault, host: int, t: int) -> None:
    same_run = [j for j in sim._jobs.values() if j.run_name == job.run_name] if job.run_name else [job]
    checkpoint = max((max(j.checkpoints, default=0) for j in same_run), default=0)
    progress = min(stepf_at(job, t), job._phase_target) if job._phase == "train" else job._stepf
    sim.fault_records.append(
        FaultRecord(
            t, job.name, job.run_name, f.kind, host, f.label, job.current_step(t), checkpoint, progress
        )
    )


def fire(sim: FaultsSim, job: SimJob, state: FaultState, t: int) -> None:
    """A bound fault's time has come: apply it to the job (or defer it, or drop it)."""
    f = state.fault
    if state.ends and job.secondary == "Training" and job._phase is not None:
        stragglers.fire(sim, job, state, min(max(f.host, 1), job.instance_count), t)
        return
    recurring = f.recur_after_training_min is not None
    if (state.consumed and (f.once or recurring)) or job.secondary != "Training" or job._phase is None:
        return
    if f.during_save and f.kind in CRASH_KINDS and job._phase != "save":
        job._await_save.append(state)  # a crash in a save (a full disk): bound half-way through the next
        return
    if f.kind in HANG_KINDS or f.kind in PAUSE_KINDS:
        if job._phase in HANG_PHASES:
            return  # nothing more happens to a hung job
        if f.during_save and job._phase != "save":
            job._await_save.append(state)  # bound again half-way through the job's next save
            return
        if (job._phase == "save" or job._phase in TIMED_PHASES) and not (
            f.during_save and job._phase == "save"
        ):
            assert job._timer_at is not None
            job._bound.append((job._timer_at, state.seq, state))  # defer to the end of the phase
            job._bound.sort(key=lambda b: (b[0], b[1]))
            return
    if f.once and not recurring:
        state.consumed = True
    state.fired = True
    job.faults_fired.append(f.kind)
    host = min(max(f.host, 1), job.instance_count)
    sim.fault_log.append((t, job.name, f.kind, host))
    if f.kind not in PAUSE_KINDS:
        _record(sim, job, f, host, t)
    if f.bad_host or f.kind in BAD_HOST_KINDS:
        job._bad_hosts[host] = f  # bad hardware: it stays bad in a warm pool the job leaves
    if f.returns_cold > 0:
        remember_lemon(sim, job, host, f)
    if f.restart_capacity_min is not None and job.run_name is not None:
        sim.arm(
            Fault(
                kind="capacity",
                run=job.run_name,
                after_training_min=2.0,
                duration_min=f.restart_capacity_min,
                label=f.label,
            )
        )

    if f.kind in CRASH_KINDS and f.hang_before_crash_min is not None:
        job._save = None  # a spin in a checkpoint save: its remaining objects and marker never appear
        sim._close_segment(job, t)
        job._dead_host = 0
        sim._open_segment(job, t, "hang_spin")
        _unbind_run_clock(job)
        job._pending_crash = state
        sim._set_timer(job, t + round(f.hang_before_crash_min * MINUTE_MS), "fault_crash")
        return
    if f.kind in CRASH_KINDS:
        crash(sim, job, state, t)
        return
    if f.kind in SLOW_KINDS:
        for line in f.log_lines:
            sim.logs.write_line(job, host, t, line)
        stragglers.fire(sim, job, state, host, t)
        return
    for line in f.log_lines:
        sim.logs.write_line(job, host, t, line)
    if f.kind == "spot_interruption":
        sim._begin_stop(job, t, "Interrupted", "spot_interruption")
    elif f.kind in HANG_KINDS:
        job._save = None  # a hang in a checkpoint save: its remaining objects and marker never appear
        sim._close_segment(job, t)
        job._dead_host = host if f.kind == "dead_host" else 0
        phase = {"stuck_dataloader": "stuck", "hang_spin_logging": "spin_logging"}.get(f.kind, f.kind)
        sim._open_segment(job, t, phase)
        sim._set_timer(job, None, "")
        _unbind_run_clock(job)
    elif f.kind == "checkpoint_save_long":
        sim._close_segment(job, t)
        minutes = f.duration_min if f.duration_min is not None else DEFAULT_SAVE_LONG_MIN
        job._after_save = "train"
        sim.checkpoint_writer.begin_save(job, t, int(job._stepf), round(minutes * MINUTE_MS), "long")
        _pin(job, t, f)
        sim._open_segment(job, t, "save")
        sim._set_timer(job, job._save.end_ms if job._save else t, "phase_end")
        save_started(job, t)
    elif f.kind == "eval_phase":
        sim._close_segment(job, t)
        minutes = f.duration_min if f.duration_min is not None else DEFAULT_EVAL_MIN
        _pin(job, t, f)
        sim._open_segment(job, t, "eval_silent" if f.silent else "eval")
        sim._set_timer(job, t + round(minutes * MINUTE_MS), "phase_end")
    elif f.kind in IDLE_PAUSE_MIN:  # silent, every GPU idle, then training goes on
        sim._close_segment(job, t)
        minutes = f.duration_min if f.duration_min is not None else IDLE_PAUSE_MIN[f.kind]
        _pin(job, t, f)
        sim._open_segment(job, t, IDLE_PAUSE_PHASE[f.kind])
        sim._set_timer(job, t + round(minutes * MINUTE_MS), "phase_end")


def _pin(job: SimJob, t: int, f: Fault) -> None:
    """A fault that opens a benign phase at ``t`` may pin how it looks in the instance metrics."""
    if f.variant is not None:
        job._variants[t] = f.variant


def save_started(job: SimJob, t: int) -> None:
    """A checkpoint save began at ``t``: hangs waiting for one (``during_save``) are bound half-way
    through its write."""
    if not job._await_save or job._save is None:
        return
    mid = t + (job._save.end_ms - t) // 2
    for state in job._await_save:
        job._bound.append((mid, state.seq, state))
    job._await_save = []
    job._bound.sort(key=lambda b: (b[0], b[1]))


def crash(sim: FaultsSim, job: SimJob, state: FaultState, t: int) -> None:
    """The crash of a crash fault: its log lines, then Failed (or a RetryStrategy retry)."""
    f = state.fault
    host = min(max(f.host, 1), job.instance_count)
    lines = f.log_lines
    if f.kind == "algorithm_error" and not lines:
        lines = (DEFAULT_ALGORITHM_LOG_LINE,)
    printer = min(max(f.log_host, 1), job.instance_count) if f.log_host is not None else host
    for line in lines:
        sim.logs.write_line(job, printer, t, line.replace("{host_ip}", host_address(job, host)))
    if f.half_written_checkpoint:
        sim.checkpoint_writer.write_half(job)
    if f.memory_full:
        job._memory_full = (host, t)
    job._save = None
    job.ended_reason = f.kind
    if f.kind == "internal_error":
        reason = f.failure_reason or INTERNAL_ERROR_REASON
    elif f.kind == "hardware":
        reason = f.failure_reason or HARDWARE_FAILURE_REASON.format(host=host)
    else:
        reason = f.failure_reason or ALGORITHM_ERROR_REASON.format(
            message=lines[-1].replace('"', "'"),
            nodes=job.instance_count,
            gpus=job.profile.gpus_per_host,
            args=command_args(job.request.get("HyperParameters")),
        )
    # SageMaker answers at most 1,024 characters; AWS does not say how it shortens a longer one:
    # cut with no marker (the unkind case: a value across the cut leaves its head at the end)
    reason = reason[:FAILURE_REASON_MAX_CHARS]
    if f.kind == "internal_error" and sim._retries_left(job) > 0:
        sim._retry(job, t, reason)
    else:
        sim._fail(job, t, reason)


def fix_recurring(sim: FaultsSim, run: str | None) -> list[str]:
    """The person fixed what the run's recurring crashes that have fired showed them: those stop
    firing (also in a job already bound to them). Returns their labels."""
    fixed = []
    for state in sim._faults:
        f = state.fault
        if f.recur_after_training_min is None or not state.fired or state.consumed:
            continue
        if run is not None and f.run not in (None, run):
            continue
        state.consumed = True
        fixed.append(f.label or f.kind)
    return fixed
