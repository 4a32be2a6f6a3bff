"""Stragglers in the simulated SageMaker: a slow host, uneven data shards, and the contract's step lines.

Why: docs/fidelity.md (one row each), docs/drill.md (*The simulated services*)."""

from __future__ import annotations

from typing import Protocol

from drill.sim.model import FaultState, SimJob, spm
from drill.sim.series import noise
from drill.sim.texts import MINUTE_MS

COMPUTE_SHARE = 0.85  # of a healthy step: the rest is the collectives' own time
JITTER = 0.01
_STEP_SALT = 0x57E9_11E5_0000_0019


class StragglerSim(Protocol):
    """What a slow host needs of the simulation (drill.sim.lifecycle.SimCore has it): to split the
    open train segment. Declared here so that this module never imports the lifecycle."""

    def _close_segment(self, job: SimJob, t: int) -> None: ...

    def _start_train(self, job: SimJob, t: int) -> None: ...


def set_slowdown(sim: StragglerSim, job: SimJob, host: int, slowdown: float | None, t: int) -> None:
    """The host's slowdown from ``t`` (None: healthy again); the open train segment is split so
    the steps before ``t`` keep the old rate."""
    training = job._phase == "train"
    if training:
        sim._close_segment(job, t)
    if slowdown is None:
        job._slow.pop(host, None)
    else:
        job._slow[host] = slowdown
    if training:
        sim._start_train(job, t)


def fire(sim: StragglerSim, job: SimJob, state: FaultState, host: int, t: int) -> None:
    """A ``slow_host`` fault fires (or, with ``state.ends``, a transient one ends)."""
    f = state.fault
    if state.ends:
        set_slowdown(sim, job, host, None, t)
        return
    set_slowdown(sim, job, host, f.slowdown, t)
    if f.duration_min is not None:
        end = FaultState(f, state.seq, consumed=True, ends=True)
        job._bound.append((t + round(f.duration_min * MINUTE_MS), state.seq, end))
        job._bound.sort(key=lambda b: (b[0], b[1]))


def step_line(job: SimJob, host: int, t: int, step: int) -> str:
    p = job.profile
    healthy_ms = MINUTE_MS / p.steps_per_minute
    wall_ms = MINUTE_MS / spm(job)
    factor = 1.0 + job._slow.get(host, 0.0)
    if p.uneven_host and host == p.uneven_host:
        factor *= 1.0 + p.uneven_fraction
    factor *= 1.0 + JITTER * noise(job._salt ^ _STEP_SALT, host, t // MINUTE_MS)
    compute_ms = COMPUTE_SHARE * healthy_ms * factor
    return (
        f"[sagewarden] host={host} step={step} step_ms={wall_ms:.0f} compute_ms={compute_ms:.0f} "
        f"total={p.total_steps}"
    )
