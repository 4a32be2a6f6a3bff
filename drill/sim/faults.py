"""Faults of the simulated SageMaker: which jobs a fault matches, when it fires, what it does.

A training fault is bound to a matching job when the job enters Training (or when the fault is
injected while the job trains) at ``after_training_min``; it then fires as one of the job's
events. Crashes end the job Failed, spot interruptions Stopped/Interrupted, hangs change the open
phase for good, benign phases pause progress. Start-time faults act on CreateTrainingJob.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from drill.sim.model import Fault, FaultState, SimJob, int_tag
from drill.sim.texts import (
    ALGORITHM_ERROR_REASON,
    CRASH_KINDS,
    DEFAULT_ALGORITHM_LOG_LINE,
    DEFAULT_EVAL_MIN,
    DEFAULT_SAVE_LONG_MIN,
    HANG_KINDS,
    HANG_PHASES,
    HARDWARE_FAILURE_REASON,
    INTERNAL_ERROR_REASON,
    MINUTE_MS,
    PAUSE_KINDS,
)
from sagewarden.keys import TAG_ATTEMPT, TAG_RUN_NAME

if TYPE_CHECKING:
    from drill.sim.lifecycle import SimCore


def matches_tags(f: Fault, tags: dict[str, str], itype: str | None) -> bool:
    if f.run is not None and tags.get(TAG_RUN_NAME) != f.run:
        return False
    if f.attempt is not None and int_tag(tags.get(TAG_ATTEMPT)) != f.attempt:
        return False
    return not (f.instance_type is not None and itype != f.instance_type)


def matches(f: Fault, job: SimJob) -> bool:
    return matches_tags(f, job.tags, job.instance_type)


def take_capacity_fault(sim: SimCore, job: SimJob) -> FaultState | None:
    """The first armed capacity fault matching a new job (consumed when ``once``)."""
    for state in sim._faults:
        if state.fault.kind == "capacity" and not state.consumed and matches(state.fault, job):
            if state.fault.once:
                state.consumed = True
            job.faults_fired.append("capacity")
            sim.fault_log.append((job.created_ms, job.name, "capacity", state.fault.host))
            return state
    return None


def bind(job: SimJob, state: FaultState, now: int) -> None:
    assert job.training_started_ms is not None
    at = max(now, job.training_started_ms + round(state.fault.after_training_min * MINUTE_MS))
    job._bound.append((at, state.seq, state))
    job._bound.sort(key=lambda b: (b[0], b[1]))


def fire(sim: SimCore, job: SimJob, state: FaultState, t: int) -> None:
    """A bound fault's time has come: apply it to the job (or defer it, or drop it)."""
    f = state.fault
    if (state.consumed and f.once) or job.secondary != "Training" or job._phase is None:
        return
    if f.kind in HANG_KINDS or f.kind in PAUSE_KINDS:
        if job._phase in HANG_PHASES:
            return  # nothing more happens to a hung job
        if job._phase in ("save", "eval"):
            assert job._timer_at is not None
            job._bound.append((job._timer_at, state.seq, state))  # defer to the end of the phase
            job._bound.sort(key=lambda b: (b[0], b[1]))
            return
    if f.once:
        state.consumed = True
    job.faults_fired.append(f.kind)
    host = min(max(f.host, 1), job.instance_count)
    sim.fault_log.append((t, job.name, f.kind, host))
    lines = f.log_lines
    if f.kind == "algorithm_error" and not lines:
        lines = (DEFAULT_ALGORITHM_LOG_LINE,)
    for line in lines:
        sim.logs.write_line(job, host, t, line)

    if f.kind in CRASH_KINDS:
        if f.half_written_checkpoint:
            sim.checkpoint_writer.write_half(job)
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
            )
        sim._fail(job, t, reason)
    elif f.kind == "spot_interruption":
        sim._begin_stop(job, t, "Interrupted", "spot_interruption")
    elif f.kind in HANG_KINDS:
        sim._close_segment(job, t)
        job._dead_host = host if f.kind == "dead_host" else 0
        phase = {"stuck_dataloader": "stuck", "hang_spin_logging": "spin_logging"}.get(f.kind, f.kind)
        sim._open_segment(job, t, phase)
        sim._set_timer(job, None, "")
    elif f.kind == "checkpoint_save_long":
        sim._close_segment(job, t)
        minutes = f.duration_min if f.duration_min is not None else DEFAULT_SAVE_LONG_MIN
        job._after_save = "train"
        sim.checkpoint_writer.begin_save(job, t, int(job._stepf), round(minutes * MINUTE_MS), "long")
        sim._open_segment(job, t, "save")
        sim._set_timer(job, job._save.end_ms if job._save else t, "phase_end")
    elif f.kind == "eval_phase":
        sim._close_segment(job, t)
        minutes = f.duration_min if f.duration_min is not None else DEFAULT_EVAL_MIN
        sim._open_segment(job, t, "eval")
        sim._set_timer(job, t + round(minutes * MINUTE_MS), "phase_end")
