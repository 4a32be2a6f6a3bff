"""What the straggler escalation saves, net of its restarts: measured, not estimated.

The side-by-side's 2,048-GPU runs do not print the training-script contract's step lines (at 256
hosts the drill would spend most of its time writing them), so there sagewarden sees slow hosts
as every peer does: not at all. This section runs a 16 x ml.p5.48xlarge job whose script prints
them, through the real drill, twice per seed with the same fail-slow episodes (drawn as the
side-by-side's trace draws them, at its per-host rate, :func:`benchmarks.trace.draw_slow`):
``straggler_action`` "alert" (the default: flag, keep training) and "restart" (stop and resume cold,
with the infra check, when the projected loss exceeds the restart's cost). The same work meets the
same episodes after the same healthy minutes, so the difference of the two runs' wall-clock
GPU-hours is what the escalation saved net of its restarts (negative: it cost).
"""

from __future__ import annotations

import contextlib
import io
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.accounting import Slowness, slowness
from benchmarks.trace import Trace, draw_slow
from drill.account.local import BUCKET, EXECUTION_ROLE
from drill.alarms.evaluator import AlarmEvaluator
from drill.reports.history import MINUTE_MS
from drill.scenarios.runner import DrillRunner
from drill.scenarios.spec import parse

HOSTS, GPUS_PER_HOST = 16, 8
DAYS = 3.0
RUN = "slow"
ACTIONS = ("alert", "restart")


@dataclass(frozen=True)
class StragglerRun:
    seed: int
    action: str
    wall_min: float
    restarts: int  # attempts stopped for a straggler
    alerts: int
    slowness: Slowness

    @property
    def gpu_hours(self) -> float:
        return HOSTS * GPUS_PER_HOST * self.wall_min / 60.0


def trace(seed: int, days: float = DAYS) -> Trace:
    """The seed's slow episodes over twice the work (a slowed run needs more healthy minutes)."""
    slows = draw_slow(seed, HOSTS, 2 * days * 24)
    return Trace(seed, HOSTS * GPUS_PER_HOST, HOSTS, 1.0, 2 * days * 24, slows=slows)


def scenario(seed: int, action: str, days: float = DAYS) -> Any:
    tr = trace(seed, days)
    data = {
        "name": f"stragglers-{action}-{seed}",
        "seed": seed,
        "max_days": days * 3,
        "account": {"store": "memory", "quotas": {"ml.p5.48xlarge": HOSTS}, "reconcile_interval_min": 120},
        "delivery": {"min_delay_s": 1, "max_delay_s": 20},
        "runs": [
            {
                "name": RUN,
                "instance_type": "ml.p5.48xlarge",
                "instance_count": HOSTS,
                "max_runtime_hours": 24 * days * 3,
                "policy": {"step_lines": True, "straggler_action": action, "max_restarts": 100},
                "profile": {
                    "total_steps": round(days * 24 * 60),
                    "steps_per_minute": 1,
                    "checkpoint_every_steps": 60,
                    "step_lines": True,
                },
            }
        ],
        "faults": tr.scenario_faults(RUN),
    }
    return parse(data, bucket=BUCKET, role_arn=EXECUTION_ROLE), tr


def run(seed: int, action: str, template: dict[str, Any], days: float = DAYS) -> StragglerRun:
    sc, tr = scenario(seed, action, days)
    # log reads answered by the simulator, as the side-by-side's (benchmarks/supervised.py)
    runner = DrillRunner(
        sc,
        template,
        evaluator_factory=AlarmEvaluator,
        account_options={"logs": "simulated", "backend_reads": True},
    )
    with contextlib.redirect_stdout(io.StringIO()):  # the handlers' EMF metric lines
        result = runner.run()
    if result.invariant_violations:
        raise SystemExit(f"invariant violated: {result.invariant_violations}")
    status = result.runs[RUN]["status"]
    if status != "SUCCEEDED":
        raise SystemExit(f"straggler run {seed}/{action} ended {status}")
    jobs = [j for j in result.jobs if j.run_name == RUN]
    start = min(j.created_ms for j in jobs)
    end = max(j.ended_ms or result.end_ms for j in jobs)
    records = runner.acct.sagemaker.fault_records
    alerts = sum(1 for a in result.alert_rows() if a["event"] == "attempt.straggler")
    restarts = sum(1 for j in jobs if j.stop_requested_ms is not None)
    return StragglerRun(
        seed,
        action,
        (end - start) / MINUTE_MS,
        restarts,
        alerts,
        slowness(tr, jobs, records, HOSTS * GPUS_PER_HOST, end),
    )


def _seeds(n: int) -> str:
    return f"{n} seed" if n == 1 else f"{n} seeds"


def _med(values: Sequence[float], fmt: str) -> str:
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))} to {fmt.format(max(values))})"


def table(runs: Sequence[StragglerRun], days: float = DAYS) -> list[str]:
    """Per seed and summarised: the escalation's net saving (alert run minus restart run)."""
    by = {(r.seed, r.action): r for r in runs}
    seeds = sorted({r.seed for r in runs})
    out = [
        f"### Straggler escalation, measured: {HOSTS} x ml.p5.48xlarge, {days:g} days of work, step lines",
        "",
        "| seed | slow episodes met | flagged (alerts) | restarts for a straggler | GPU-h lost to slowness: alert / restart "
        "| run GPU-h: alert / restart | saved net of restarts |",
        "|---|---|---|---|---|---|---|",
    ]
    net: list[float] = []
    for s in seeds:
        a, r = by[(s, "alert")], by[(s, "restart")]
        net.append(a.gpu_hours - r.gpu_hours)
        out.append(
            f"| {s} | {a.slowness.met} | {a.alerts} | {r.restarts} "
            f"| {a.slowness.gpu_hours:,.0f} / {r.slowness.gpu_hours:,.0f} "
            f"| {a.gpu_hours:,.0f} / {r.gpu_hours:,.0f} | {net[-1]:+,.0f} |"
        )
    out.append("")
    out.append(
        f"Median (lowest to highest) over {len(seeds)} seeds: the escalation saved {_med(net, '{:+,.0f}')} GPU-hours "
        f"net of its restarts ({sum(net):+,.0f} over all {len(seeds)}; it cost more than it saved in "
        f"{_seeds(sum(1 for x in net if x < 0))}), of a run of "
        f"{_med([by[(s, 'alert')].gpu_hours for s in seeds], '{:,.0f}')} GPU-hours. A restart is decided once "
        "the slowdown has cost as much as a restart (docs/recovery.md, *Escalation*): most episodes pass "
        "before that and cost nothing more; restarting at the first flag instead, measured on these seeds "
        "before the rule changed, cost more than it saved in 6 of 10 (-130 GPU-hours over all 10)."
    )
    return out


def measure(
    seeds: Sequence[int], template: dict[str, Any], progress: Callable[[str], None] | None = None
) -> list[StragglerRun]:
    out = []
    for seed in seeds:
        for action in ACTIONS:
            out.append(run(seed, action, template))
            if progress is not None:
                progress(f"stragglers: seed {seed} {action} done")
    return out
