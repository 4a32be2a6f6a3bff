"""Checkpoint-interval advice (Young/Daly) from the run's own write times and faults, with a fleet
prior. Pure. Why: docs/recovery.md (*Where the rules live*)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from sagewarden.domain.vocabulary.checkpoint_interval import observed_interval_min
from sagewarden.domain.vocabulary.models import Run
from sagewarden.domain.vocabulary.pricing import gpus_per_instance

FLEET_FAULTS_PER_GPU_HOUR = 1.97e-5
# restarts that were faults (MaxRuntime segments and capacity are not)
FAULT_CLASSES = ("INFRASTRUCTURE", "UNKNOWN", "HANG", "SPOT_INTERRUPTED")
MIN_SAVING_TO_ADVISE = 1.0  # GPU-hours per day
# the interval a new attempt is told (policy apply_checkpoint_advice): whole minutes, within bounds
APPLY_MIN_MINUTES = 5
APPLY_MAX_MINUTES = 24 * 60


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


def advised_minutes(run: Run, now_ms: int) -> int | None:
    """The checkpoint interval a new attempt of ``run`` is told (SAGEWARDEN_CHECKPOINT_MINUTES,
    policy ``apply_checkpoint_advice``): the Young/Daly optimum in whole minutes, within
    APPLY_MIN_MINUTES..APPLY_MAX_MINUTES; None until a checkpoint's write time was measured."""
    advice = checkpoint_advice(run, now_ms)
    if advice is None or advice.optimal_min is None:
        return None
    return max(APPLY_MIN_MINUTES, min(APPLY_MAX_MINUTES, round(advice.optimal_min)))
