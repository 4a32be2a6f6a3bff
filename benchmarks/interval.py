"""Checkpoint-interval advice, applied.

During supervisor (d)'s drill sagewarden computes the Young/Daly interval from what it observed
(checkpoint write times, faults per training hour; :mod:`sagewarden.domain.vocabulary.advice`), reports it in
``GET /runs/{id}`` and, with the recommended policy's ``apply_checkpoint_advice``, tells every new
attempt (``SAGEWARDEN_CHECKPOINT_MINUTES``), which the script follows. Here the same trace and
work run again with that policy off -- the script's own interval throughout -- and the two are
compared on wall clock: a longer interval writes fewer checkpoints (each blocks training for the
write time) but redoes more work after each fault. The difference in wall clock times the run's
GPUs is the saving.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.accounting import Account
from benchmarks.workload import Workload
from sagewarden.domain.vocabulary.advice import CheckpointAdvice


@dataclass(frozen=True)
class IntervalComparison:
    advice: CheckpointAdvice  # what GET /runs/{id} advised at the end of (d)'s run
    workload: Workload
    told: tuple[int, ...]  # the intervals (d)'s attempts were told, in minutes
    plain_account: Account  # (d) with apply_checkpoint_advice off
    applied_account: Account  # (d) as run

    @property
    def saved_gpu_hours(self) -> float:
        return self.plain_account.gpu_hours(self.plain_account.wall_min - self.applied_account.wall_min)

    @property
    def saved_per_day(self) -> float:
        return self.saved_gpu_hours / (self.plain_account.wall_min / 1440)


def told_text(told: tuple[int, ...]) -> str:
    if not told:
        return "none told"
    low, high = min(told), max(told)
    span = f"{low} min" if low == high else f"{low}-{high} min"
    return f"{span} to {len(told)} of its attempts"


def render(cmp: IntervalComparison) -> list[str]:
    a, w = cmp.advice, cmp.workload
    rows = [
        "",
        "### Checkpoint interval: the advice, applied",
        "",
        f"(d) tells every new attempt the Young/Daly interval (`apply_checkpoint_advice`; the script follows "
        f"`SAGEWARDEN_CHECKPOINT_MINUTES`): on seed 1 {told_text(cmp.told)}, its first attempt at the script's "
        f"own {w.checkpoint_minutes:g} min. At the end `GET /runs/{{id}}` advised: *{a.line()}* (from {a.faults} "
        f"faults in {a.training_h:,.0f} training hours, blended with the fleet prior). The same trace and work "
        f"({w.total_steps:,} steps) with the policy off:",
        "",
        "| checkpoint interval | faults | work lost to faults | total lost to faults | run took | effective training |",
        "|---|---|---|---|---|---|",
    ]
    for label, acc in (
        (f"every {w.checkpoint_minutes:g} min throughout (policy off)", cmp.plain_account),
        ("as told (d, as run)", cmp.applied_account),
    ):
        rows.append(
            f"| {label} | {acc.fault_count()} | {acc.bucket_gpu_hours()[3]:,.0f} GPU-h | "
            f"{acc.total_gpu_hours():,.0f} GPU-h | {acc.wall_min / 1440:.2f} d | "
            f"{100 * acc.effective_training:.1f} % |"
        )
    predicted = (
        ""
        if a.gpu_hours_per_day_saved is None
        else f" (at the end the advice predicted {a.gpu_hours_per_day_saved:,.0f} for moving from the observed interval)"
    )
    rows += [
        "",
        f"Measured saving: **{cmp.saved_gpu_hours:,.0f} GPU-hours** over the run, {cmp.saved_per_day:,.0f} "
        f"GPU-hours per day{predicted}. The model behind the advice (lost fraction = write/interval + "
        "interval/(2 MTBF)) ignores restarts' own cost, which does not depend on the interval.",
    ]
    return rows
