"""Checkpoint-interval advice, tried on the trace.

During supervisor (d)'s drill sagewarden computes the Young/Daly interval from what it observed
(checkpoint write times, faults per training hour; :mod:`sagewarden.domain.advice`) and reports it
in ``GET /runs/{id}``. Here the same trace, policy and *work* (the same number of steps) run again
with the checkpoint interval it advised, and the two runs are compared on wall clock: a longer
interval writes fewer checkpoints (each blocks training for the write time) but redoes more work
after each fault. The difference in wall clock times the run's GPUs is the saving.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from benchmarks.accounting import Account
from benchmarks.workload import Workload
from sagewarden.domain.advice import CheckpointAdvice


@dataclass(frozen=True)
class IntervalComparison:
    advice: CheckpointAdvice
    base: Workload
    advised: Workload
    base_account: Account
    advised_account: Account

    @property
    def saved_gpu_hours(self) -> float:
        return self.base_account.gpu_hours(self.base_account.wall_min - self.advised_account.wall_min)

    @property
    def saved_per_day(self) -> float:
        return self.saved_gpu_hours / (self.base_account.wall_min / 1440)


def advised_workload(base: Workload, advice: CheckpointAdvice) -> Workload | None:
    """The same work with the advised interval (None when there is no advice to try)."""
    if advice.optimal_min is None:
        return None
    every = max(1, round(advice.optimal_min * base.steps_per_minute))
    if every == base.checkpoint_every_steps:
        return None
    return dataclasses.replace(base, checkpoint_every_steps=every, work_steps=base.total_steps)


def write_gpu_hours(workload: Workload, account: Account) -> float:
    """GPU-hours spent writing the checkpoints the work needs (saves redone after faults aside)."""
    saves = workload.total_steps // workload.checkpoint_every_steps
    return account.gpu_hours(saves * workload.checkpoint_write_seconds / 60.0)


def render(cmp: IntervalComparison) -> list[str]:
    a = cmp.advice
    rows = [
        "",
        "### Checkpoint interval: the advice, tried on the trace",
        "",
        f"At the end of (d)'s run, `GET /runs/{{id}}` advised: *{a.line()}* (from {a.faults} faults in "
        f"{a.training_h:,.0f} training hours, blended with the fleet prior). The same trace, policy and work "
        f"({cmp.base.total_steps:,} steps) again with the advised interval:",
        "",
        "| checkpoint interval | faults | checkpoint writes | work lost to faults | total lost to faults "
        "| run took | effective training |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, w, acc in (
        ("as run", cmp.base, cmp.base_account),
        ("advised, Young/Daly", cmp.advised, cmp.advised_account),
    ):
        rows.append(
            f"| every {w.checkpoint_minutes:.0f} min ({label}) | {acc.fault_count()} | "
            f"{write_gpu_hours(w, acc):,.0f} GPU-h | {acc.bucket_gpu_hours()[3]:,.0f} GPU-h | "
            f"{acc.total_gpu_hours():,.0f} GPU-h | {acc.wall_min / 1440:.2f} d | "
            f"{100 * acc.effective_training:.1f} % |"
        )
    predicted = (
        ""
        if a.gpu_hours_per_day_saved is None
        else f" (the advice predicted {a.gpu_hours_per_day_saved:,.0f})"
    )
    rows += [
        "",
        f"Measured saving: **{cmp.saved_gpu_hours:,.0f} GPU-hours** over the run, {cmp.saved_per_day:,.0f} "
        f"GPU-hours per day{predicted}. The model behind the advice (lost fraction = write/interval + "
        "interval/(2 MTBF)) ignores restarts' own cost, which does not depend on the interval.",
    ]
    return rows
