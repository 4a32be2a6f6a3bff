"""Checkpoint-interval advice (Young/Daly), pure.

Checkpointing more often costs write time; less often, more work redone after each fault. For
write time C and mean time between failures M (C << M) the interval that loses least is about
sqrt(2 C M) (Young 1974, Daly 2006). The run's own history gives both: C from how long its
checkpoints took to write (estimated from their objects in S3: domain/checkpoints.py, save_seconds), M from its faults per training
hour -- blended with the fleet rate of large GPU jobs (Llama 3: 419 unexpected interruptions in
54 days on 16,384 H100, about 1.97e-5 per GPU-hour) as a prior worth one fault, so a run with
few hours or no fault yet still gets a sane figure.

The fraction of GPU time lost at interval T is about C/T (writing; blocking saves) + T/(2M)
(work redone after a fault); the advice reports what moving to the optimum saves per day.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass

from sagewarden.domain.checkpoint_interval import observed_interval_min
from sagewarden.domain.checkpoints import Checkpoint
from sagewarden.domain.draft import Draft
from sagewarden.domain.models import CHECKPOINT_HISTORY, Run
from sagewarden.domain.pricing import gpus_per_instance

FLEET_FAULTS_PER_GPU_HOUR = 1.97e-5
# restarts that were faults (MaxRuntime segments and capacity are not)
FAULT_CLASSES = ("INFRASTRUCTURE", "UNKNOWN", "HANG", "SPOT_INTERRUPTED")
MIN_SAVING_TO_ADVISE = 1.0  # GPU-hours per day


@dataclass(frozen=True)
class CheckpointAdvice:
    gpus: int
    interval_min: float | None  # observed between the run's recent checkpoints
    write_s: float | None  # observed write time (median)
    mtbf_h: float  # mean time between faults, run history blended with the fleet prior
    faults: int
    training_h: float
    optimal_min: float | None  # sqrt(2 C M); None without a measured write time
    lost_fraction_now: float | None
    lost_fraction_optimal: float | None
    gpu_hours_per_day_saved: float | None

    @property
    def worth_telling(self) -> bool:
        return (
            self.gpu_hours_per_day_saved is not None and self.gpu_hours_per_day_saved >= MIN_SAVING_TO_ADVISE
        )

    def line(self) -> str:
        interval = _interval_text(self.interval_min)
        if self.optimal_min is None:
            return (
                f"Checkpoint interval: {interval}; the optimum needs a measured write time "
                f"(MTBF ~{self.mtbf_h:,.1f} h)"
            )
        text = (
            f"Checkpoint interval: {interval}, write {self.write_s:.0f} s, "
            f"MTBF ~{self.mtbf_h:,.1f} h -> optimal ~{self.optimal_min:.0f} min (Young/Daly)"
        )
        if self.gpu_hours_per_day_saved is not None:
            text += f", saving ~{self.gpu_hours_per_day_saved:,.1f} GPU-hours/day"
        return text


def _interval_text(minutes: float | None) -> str:
    # measured from two checkpoints the supervisor saw; until then it says so (never "? min")
    return "not measured yet" if minutes is None else f"every {minutes:.0f} min"


def record_checkpoint(d: Draft) -> bool:
    """Append a newly seen checkpoint to the run's history; True when it changed."""
    ckpt: Checkpoint | None = d.obs.checkpoint
    if ckpt is None or ckpt.written_at_ms is None or d.run.status.terminal:
        return False
    history = d.run.checkpoint_history
    if history and ckpt.step <= history[-1][0]:
        return False
    entry = (
        ckpt.step,
        ckpt.written_at_ms,
        ckpt.write_seconds if ckpt.write_seconds is not None else -1.0,
        ckpt.previous_step if ckpt.previous_step is not None else -1,
    )
    d.set(checkpoint_history=(*history, entry)[-CHECKPOINT_HISTORY:])
    cur = d.run.current
    if (
        cur is not None
        and ckpt.write_seconds is not None
        and cur.training_started_ms is not None
        and ckpt.written_at_ms >= cur.training_started_ms
        and (cur.stop_requested_ms is None or ckpt.written_at_ms < cur.stop_requested_ms)
    ):  # this attempt's own save while training, measured: goodput counts it at its own length
        d.put_attempt(
            dataclasses.replace(
                cur,
                saves_seen=cur.saves_seen + 1,
                saves_seen_ms=cur.saves_seen_ms + round(ckpt.write_seconds * 1000),
            )
        )
    took = f", written in {ckpt.write_seconds:.0f} s" if ckpt.write_seconds is not None else ""
    d.note(f"newest checkpoint: step {ckpt.step}{took}")
    return True


def checkpoint_advice(run: Run, now_ms: int) -> CheckpointAdvice | None:
    cur = run.current
    if cur is None:
        return None
    gpus = cur.instance_count * gpus_per_instance(cur.instance_type)
    training_ms = run.training_ms
    if cur.training_started_ms is not None and not cur.ended:
        training_ms += max(0, now_ms - cur.training_started_ms)
    training_h = training_ms / 3_600_000
    faults = sum(int(run.restarts_by_class.get(c, 0)) for c in FAULT_CLASSES)
    prior_h = 1 / (FLEET_FAULTS_PER_GPU_HOUR * max(1, gpus))
    mtbf_h = (training_h + prior_h) / (faults + 1)
    history = run.checkpoint_history
    interval = observed_interval_min(history)
    writes = [h[2] for h in history if h[2] >= 0]
    write_s = statistics.median(writes) if writes else None
    optimal = lost_now = lost_opt = saved = None
    if write_s is not None and write_s > 0:
        c_h = write_s / 3600
        optimal_h = math.sqrt(2 * c_h * mtbf_h)
        optimal = optimal_h * 60
        lost_opt = c_h / optimal_h + optimal_h / (2 * mtbf_h)
        if interval is not None and interval > 0:
            t_h = interval / 60
            lost_now = c_h / t_h + t_h / (2 * mtbf_h)
            saved = max(0.0, (lost_now - lost_opt) * gpus * 24)
    return CheckpointAdvice(
        gpus=gpus,
        interval_min=interval,
        write_s=write_s,
        mtbf_h=mtbf_h,
        faults=faults,
        training_h=training_h,
        optimal_min=optimal,
        lost_fraction_now=lost_now,
        lost_fraction_optimal=lost_opt,
        gpu_hours_per_day_saved=saved,
    )
