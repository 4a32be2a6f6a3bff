"""The scale benchmark's section of BENCHMARKS.md: the drills of :mod:`benchmarks.scale`, rendered
(calls per minute against the documented quotas, alarms, cost per run-day, the 250-host job)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable
from typing import Any

from benchmarks.scale import (
    QUOTA_TPS,
    RECONCILE_MIN,
    REPORTED,
    SIZES,
    BigJob,
    ScaleResult,
    measure,
    measure_big_job,
)
from benchmarks.scale_costs import (
    EMF_USD_PER_GB,
    TARGET_USD_PER_RUN_DAY,
    Rate,
    design_alarm_metrics,
    design_cost_per_day,
)
from infra.constants import CW_ALARM_METRIC_MONTH_USD, CW_CUSTOM_METRIC_MONTH_USD, DAYS_PER_BILLING_MONTH


def _fmt_rate(rate: Rate | None) -> str:
    if rate is None:
        return "0 / 0"
    return f"{rate.peak_per_min:,} / {rate.mean_per_min:,.1f}"


def render(results: list[ScaleResult], big: BigJob, total_wall_s: float) -> list[str]:
    names = [f"{r.runs:,}" for r in results]
    sizes = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    out = ["", f"## Scale: {sizes} concurrent runs over one virtual day", ""]
    out.append(
        "Runs of 2-16 hosts (p4d and p5 alternating), submitted over the first hour, about 19 h of "
        "training each, one or two faults per run at random points of its training (hardware, NCCL "
        "watchdog crash, dead host, NCCL spin, internal error, stuck data loader, 12-minute save), "
        f"default policy, reconcile every {RECONCILE_MIN} min. State in the in-memory store, log reads answered by "
        "the simulator, alarm puts and reads, checkpoint objects and alerts through moto's in-memory "
        "backends (moto's API, DynamoDB and Logs are too slow for 1,000 runs a day here; a test holds that "
        "the shortcuts give the same day); AWS calls are the supervisor functions' own, counted per "
        "virtual minute."
    )
    out.append("")
    head = ["", *[f"{r.runs:,} runs" for r in results]]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "---|" * len(head))

    def row(label: str, values: Iterable[str]) -> None:
        out.append("| " + " | ".join([label, *values]) + " |")

    row(
        "runs SUCCEEDED / other",
        (f"{r.statuses.get('SUCCEEDED', 0):,} / {r.runs - r.statuses.get('SUCCEEDED', 0)}" for r in results),
    )
    row("faults met", (f"{len(r.drill.faults):,}" for r in results))
    row("invariant violations", (str(len(r.drill.invariant_violations)) for r in results))
    row("failed reads (ObservationFailures)", (f"{r.observation_failures:,}" for r in results))
    row("virtual time", (f"{r.virtual_hours:.1f} h" for r in results))
    row("sweep passes / due items served", (f"{r.sweeps.passes:,} / {r.sweeps.due:,}" for r in results))
    row(
        "sweep passes out of time; calls throttled / waited for (the account's rates)",
        (
            f"{r.sweeps.out_of_time:,}; {sum(r.drill.api.get('throttled', {}).values()):,} / "
            f"{sum(r.drill.api.get('waited_s', {}).values()):,.0f} s"
            for r in results
        ),
    )
    row(
        "**sweep CPU time per due item** (mean; median of passes)",
        (
            f"**{1000 * r.sweeps.wall_s / max(r.sweeps.due, 1):.2f} ms**; "
            f"{1000 * statistics.median(r.sweeps.per_due_s or [0]):.2f} ms"
            for r in results
        ),
    )
    out.append("| *AWS calls per minute, peak / mean (quota as calls per minute)* |" + " |" * len(results))
    for op in REPORTED:
        quota = QUOTA_TPS.get(op)
        label = f"{op.split('.', 1)[1]}" + (
            f" ({quota:g} TPS = {60 * quota:,.0f}/min)" if quota else " (observed)"
        )
        row(label, (_fmt_rate(r.counter.rates(r.drill.end_ms).get(op)) for r in results))
    others = sorted({op for r in results for op in r.counter.rates(r.drill.end_ms)} - set(REPORTED))
    for op in others:
        quota = QUOTA_TPS.get(op)
        label = op + (f" ({quota:g} TPS = {60 * quota:,.0f}/min)" if quota else "")
        row(label, (_fmt_rate(r.counter.rates(r.drill.end_ms).get(op)) for r in results))
    row(
        "busiest minute against its quota (operation)",
        (_worst(r) for r in results),
    )
    row(
        "peak hang alarms per run (max; median) / in total",
        (
            f"{max(r.counter.peak_by_run.values(), default=0)}; "
            f"{statistics.median(r.counter.peak_by_run.values() or [0]):g} / {r.counter.peak_total:,}"
            for r in results
        ),
    )
    row("most metrics in one alarm", (str(r.counter.max_metrics_per_alarm) for r in results))
    row(
        "hang alarms left at the end / live jobs at the end",
        (f"{r.alarms_left} / {r.live_jobs_at_end}" for r in results),
    )
    row(
        "**supervision cost per run-day** (alarms + heartbeat metric + EMF)",
        (
            f"**${r.cost.total / r.run_days:.4f}** (${r.cost.alarm_usd / r.run_days:.4f} + "
            f"${r.cost.heartbeat_usd / r.run_days:.4f} + ${r.cost.emf_usd / r.run_days:.5f})"
            for r in results
        ),
    )
    row(
        "drill wall time (alarm evaluation) / per virtual hour",
        (
            f"{r.wall_s:.1f} s ({r.evaluator_wall_s:.1f} s) / {r.wall_s / r.virtual_hours:.2f} s"
            for r in results
        ),
    )
    out.append("")
    alarms16, metrics16, _ = design_alarm_metrics(16)
    out.append(
        f"- **Cost of a 16-host job training all day, as built:** {alarms16} alarms with {metrics16} alarm "
        f"metrics (log silence 1, whole-job idle 2, lone-idle 16) plus 1 heartbeat metric and 1,440 EMF "
        f"lines: **${design_cost_per_day(16):.3f} per run-day** (${CW_ALARM_METRIC_MONTH_USD:.2f} per alarm "
        f"metric-month, ${CW_CUSTOM_METRIC_MONTH_USD:.2f} per custom metric-month, {DAYS_PER_BILLING_MONTH}-day "
        f"month, ${EMF_USD_PER_GB:.2f}/GB EMF), above the ${TARGET_USD_PER_RUN_DAY:.2f} target; with a "
        f"progress_metric ${design_cost_per_day(16, progress_metric=True):.3f}. The runs above cost less per "
        "run-day because they are smaller and alarms exist only while an attempt trains."
    )
    out.append(
        f"- **A {big.hosts}-host job** (dead host, default policy; {big.status}): alarm creation is "
        f"{big.put_at_creation} PutMetricAlarm calls ({big.put_at_creation / QUOTA_TPS['cloudwatch.PutMetricAlarm']:.0f} s "
        f"at {QUOTA_TPS['cloudwatch.PutMetricAlarm']:g} TPS), at most {big.max_metrics_per_alarm} metrics per "
        f"alarm (limit 10). Hang detected after "
        f"{'n/a' if big.detect_min is None else f'{big.detect_min:.1f}'} min; the invocation that confirmed "
        "it read "
        + ", ".join(
            f"{n} {op.split('.', 1)[1]} ({n / QUOTA_TPS[op]:.0f} s at {QUOTA_TPS[op]:g} TPS)"
            for op, n in sorted(big.triage.items())
        )
        + "."
    )
    out.append(
        "- Quotas: CloudWatch DescribeAlarms 9, DeleteAlarms 3, PutMetricAlarm 3, GetMetricData 50 TPS; "
        "CloudWatch Logs DescribeLogStreams 5, FilterLogEvents 5, GetLogEvents 10 TPS (per account and "
        "Region, as documented in the AWS user guides' quota pages; the Logs figures are older and may "
        "have been raised). SageMaker's API rates are not documented per operation here: observed only."
    )
    largest = max(results, key=lambda r: r.runs)
    if largest.runs < max(SIZES):
        n = max(SIZES)
        factor = n / largest.runs
        per_run_day = largest.wall_s / largest.run_days
        rates = largest.counter.rates(largest.drill.end_ms)
        scaled = max(
            ((rates[op].peak_tps * factor / q, op) for op, q in QUOTA_TPS.items() if op in rates),
            default=(0.0, "-"),
        )
        out.append(
            f"- **{n:,} runs are not driven by `make bench`**: the drill needs {per_run_day:.1f} s of wall clock "
            f"per run-day here at {largest.runs:,} runs (mostly moto calls: alarms, checkpoint objects, alerts), "
            f"more at {n:,} (a {n:,}-run day ran over 12 min next to the other drills and was cut; "
            f"`python -m benchmarks.scale {n}` runs it alone). Each "
            f"run's calls are its own, so they scale linearly: {factor:g} x the {largest.runs:,}-run peaks would put "
            f"the busiest operation, {scaled[1].split('.', 1)[1]}, at {100 * scaled[0]:.0f} % of its quota in its "
            "busiest minute (an upper bound: peaks of independent runs rarely coincide)."
        )
    out.append(f"- This section took {total_wall_s:.0f} s of wall clock on this machine.")
    return out


def _worst(r: ScaleResult) -> str:
    rates = r.counter.rates(r.drill.end_ms)
    worst = max(
        ((rates[op].peak_tps / q, op) for op, q in QUOTA_TPS.items() if op in rates), default=(0.0, "-")
    )
    return f"{100 * worst[0]:.0f} % ({worst[1].split('.', 1)[1]})"


def run(
    template: dict[str, Any],
    sizes: Iterable[int] = SIZES,
    *,
    progress: Callable[[str], None] | None = None,
    measured: Iterable[ScaleResult] = (),
) -> list[str]:
    """The section for `sizes` drilled here plus `measured` (e.g. drilled in a worker process)."""
    t0 = time.perf_counter()
    results = list(measured)
    for n in sizes:
        r = measure(n, template)
        if progress:
            progress(f"scale: {n} runs in {r.wall_s:.1f} s")
        results.append(r)
    results.sort(key=lambda r: r.runs)
    big = measure_big_job(template)
    return render(results, big, time.perf_counter() - t0)


def main() -> None:  # pragma: no cover - a manual entry point: python -m benchmarks.scale
    import sys

    from drill.account.local import drill_template

    sizes = tuple(int(a) for a in sys.argv[1:]) or SIZES
    print("\n".join(run(drill_template(), sizes, progress=lambda s: print(s, file=sys.stderr, flush=True))))


if __name__ == "__main__":  # pragma: no cover
    main()
