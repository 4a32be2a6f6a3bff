"""Scale: 10, 100 and 1,000 concurrent runs over one virtual day on the drill (issue 9, section 4).

Each size is one drill: the real handlers, service and adapters on the simulated account, state in
the in-memory store (moto DynamoDB is too slow for 1,000 runs a day here), log reads answered by
the simulator (``logs="simulated"``) and moto's heaviest calls answered from its backends
(``backend_reads``: alarm puts and reads, checkpoint objects, alerts; tested to give the same day). Runs are small (2-16 hosts, p4d/p5), submitted over the
first hour, train about 19 hours and meet a few faults each (crashes, hangs, a long benign save),
so the sweep always has due runs.

Measured, from the calls the supervisor's functions make (``drill.iam.CallRecorder`` listeners,
the same hook the IAM replay uses, each call stamped with the virtual minute):

- sweep wall time per due item (runs and owed alerts the sweep served) -- must stay flat;
- AWS calls per minute per operation, peak and mean over the day, against the documented quotas;
- live hang alarms (peak per run and in total), from PutMetricAlarm/DeleteAlarms;
- supervision cost per run-day: alarm metric-hours, heartbeat metric-hours and EMF lines, at the
  list prices in ``infra/constants.py`` (the README's cost paragraph);
- the drill's own wall time per virtual hour.

Plus one 250-host job with a dead host: its alarm creation (PutMetricAlarm calls, metrics per
alarm) and its triage reads, set against the same quotas.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from benchmarks.scale_costs import (
    MINUTE_MS,
    CallCounter,
    Cost,
    billed_hours,
    supervision_cost,
)
from drill.account.local import BUCKET, EXECUTION_ROLE, LocalAccount
from drill.alarms.evaluator import AlarmEvaluator
from drill.scenarios.runner import DrillResult, DrillRunner
from drill.scenarios.spec import Scenario, parse
from drill.sim.rate_limits import DEFAULT_RATES
from sagewarden import keys

SIZES = (10, 100, 1000)
# what `make bench` drives (the largest in a worker process, next to the rest); a 1,000-run day
# takes the drill about 6 minutes alone here since its heavy moto calls go to moto's backends
# (drill/account/backend_clients.py)
BENCH_SIZES = SIZES

# Documented default quotas, per account and Region (transactions per second): the rates the
# simulated account throttles at (drill/sim/rate_limits.py, which cites the pages; the lower figure
# where AWS's pages differ). SageMaker publishes none: its modelled rates are not listed here.
QUOTA_TPS: dict[str, float] = {
    op: rate for op, rate in DEFAULT_RATES.items() if not op.startswith("sagemaker.") and rate is not None
}
# the operations the table always lists (with 0 if never called), in this order
REPORTED = (
    "cloudwatch.DescribeAlarms",
    "cloudwatch.PutMetricAlarm",
    "cloudwatch.DeleteAlarms",
    "cloudwatch.GetMetricData",
    "sagemaker.CreateTrainingJob",
    "sagemaker.DescribeTrainingJob",
    "sagemaker.StopTrainingJob",
)

HOST_MIX = (2, 2, 4, 4, 8, 16)
INSTANCE_TYPES = ("ml.p4d.24xlarge", "ml.p5.48xlarge")
# faults spread over the day (kind, extra fields); every run meets one or two
FAULT_MIX: tuple[tuple[str, dict[str, Any]], ...] = (
    ("hardware", {"host": 2}),
    (
        "algorithm_error",
        {"log_lines": ["[E ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout"]},
    ),
    ("dead_host", {"host": 2}),
    ("hang_spin", {}),
    ("internal_error", {}),
    ("stuck_dataloader", {}),
    ("checkpoint_save_long", {"duration_min": 12}),
)
RECONCILE_MIN = 60  # the side-by-side benchmark's too; the default 10 would serve 6x the ticks
TRAINING_STEPS = 1140  # 19 h at one step a minute
CHECKPOINT_EVERY = 30


# ----------------------------------------------------------------------------------------------
# The scenario and one measured drill
# ----------------------------------------------------------------------------------------------


def scenario(runs: int, *, seed: int = 1, hours: float = 24.0, steps: int = TRAINING_STEPS) -> Scenario:
    rng = random.Random(seed)
    specs: list[dict[str, Any]] = []
    faults: list[dict[str, Any]] = []
    for i in range(runs):
        name = f"r{i:04d}"
        hosts = HOST_MIX[i % len(HOST_MIX)]
        specs.append(
            {
                "name": name,
                "submit_at_min": round(60 * i / runs, 2),
                "instance_type": INSTANCE_TYPES[i % 2],
                "instance_count": hosts,
                "max_runtime_hours": 30,
                "profile": {
                    "total_steps": steps,
                    "steps_per_minute": 1,
                    "checkpoint_every_steps": CHECKPOINT_EVERY,
                },
            }
        )
        count = 1 + (rng.random() < 0.5)
        at = sorted(rng.uniform(60, max(steps - 90, 61)) for _ in range(count))
        for k, minute in enumerate(at):
            kind, extra = FAULT_MIX[rng.randrange(len(FAULT_MIX))]
            if kind in ("dead_host", "hardware") and hosts < 2:
                extra = {**extra, "host": 1}
            faults.append(
                {"kind": kind, "run": name, "after_run_training_min": round(minute + k, 1), **extra}
            )
    return parse(
        {
            "name": f"scale-{runs}",
            "seed": seed,
            "max_days": hours / 24,
            "account": {"store": "memory", "reconcile_interval_min": RECONCILE_MIN},
            "delivery": {"min_delay_s": 1, "max_delay_s": 20},
            "runs": specs,
            "faults": faults,
        },
        bucket=BUCKET,
        role_arn=EXECUTION_ROLE,
    )


# log reads from the simulator; alarm puts and reads, checkpoint objects and listings, and alerts
# through moto's in-memory backends (drill/account/backend_clients.py)
ACCOUNT_OPTIONS: dict[str, Any] = {"logs": "simulated", "backend_reads": True}


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Powertools prints an EMF record whenever 100 metric values pile up across invocations."""
    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
        yield


@dataclass
class SweepTimes:
    passes: int = 0
    due: int = 0
    wall_s: float = 0.0
    per_due_s: list[float] = field(default_factory=list)  # per pass with due items
    out_of_time: int = 0  # passes whose time budget ran out (what was left stayed due)


@dataclass
class ScaleResult:
    runs: int
    drill: DrillResult
    counter: CallCounter
    sweeps: SweepTimes
    wall_s: float
    virtual_hours: float
    statuses: Counter[str]
    heartbeat_hours: int
    emf_lines: int
    live_jobs_at_end: int
    alarms_left: int  # hang alarms still in CloudWatch at the end
    evaluator_wall_s: float
    observation_failures: int = 0  # reads that failed (the supervisor's own counter)

    @property
    def cost(self) -> Cost:
        return supervision_cost(
            self.counter.alarm_metric_hours(self.drill.end_ms), self.heartbeat_hours, self.emf_lines
        )

    @property
    def run_days(self) -> float:
        return self.runs * self.virtual_hours / 24


def _instrument(
    acct: LocalAccount, counter_box: list[CallCounter], sweeps: SweepTimes, ev_wall: list[float]
) -> Any:
    counter = CallCounter(lambda: acct.clock.now_ms, acct.clock.now_ms)
    counter_box.append(counter)
    acct.recorder.listeners.append(counter.record)
    sweep = acct.run_sweep

    def timed_sweep() -> Any:
        # CPU time of this (single-threaded) process: a shared machine's load does not count
        t0 = time.process_time()
        out = sweep()
        wall = time.process_time() - t0
        due = sum(int(r.get("due", 0)) for r in out if isinstance(r, dict))
        sweeps.out_of_time += any(isinstance(r, dict) and r.get("out_of_time") for r in out)
        sweeps.passes += 1
        sweeps.due += due
        sweeps.wall_s += wall
        if due:
            sweeps.per_due_s.append(wall / due)
        return out

    acct.run_sweep = timed_sweep  # type: ignore[method-assign]
    evaluator = AlarmEvaluator(acct)
    evaluate = evaluator.evaluate_due

    def timed_evaluate() -> list[dict[str, Any]]:
        t0 = time.perf_counter()
        try:
            return evaluate()
        finally:
            ev_wall[0] += time.perf_counter() - t0

    evaluator.evaluate_due = timed_evaluate  # type: ignore[method-assign]
    return evaluator


def _training_intervals(jobs: Iterable[Any], end_ms: int) -> list[tuple[int, int]]:
    out = []
    for j in jobs:
        start = j.training_started_ms
        if start is not None:
            out.append((start, j.ended_ms if j.ended_ms is not None else end_ms))
    return out


def measure(
    runs: int, template: dict[str, Any], *, seed: int = 1, hours: float = 24.0, steps: int = TRAINING_STEPS
) -> ScaleResult:
    sc = scenario(runs, seed=seed, hours=hours, steps=steps)
    counters: list[CallCounter] = []
    sweeps = SweepTimes()
    ev_wall = [0.0]
    runner = DrillRunner(
        sc,
        template,
        evaluator_factory=lambda acct: _instrument(acct, counters, sweeps, ev_wall),
        account_options=ACCOUNT_OPTIONS,
    )
    t0 = time.perf_counter()
    with _quiet():
        result = runner.run()
    wall = time.perf_counter() - t0
    counter = counters[0]
    jobs = result.jobs
    intervals = _training_intervals(jobs, result.end_ms)
    hours_run = (result.end_ms - result.start_ms) / 3_600_000
    return ScaleResult(
        runs=runs,
        drill=result,
        counter=counter,
        sweeps=sweeps,
        wall_s=wall,
        virtual_hours=hours_run,
        statuses=Counter(r["status"] for r in result.runs.values()),
        heartbeat_hours=billed_hours(intervals),
        emf_lines=sum(-(-(e - s) // MINUTE_MS) for s, e in intervals),
        live_jobs_at_end=sum(1 for j in jobs if not j.is_terminal),
        alarms_left=len(counter.live),
        evaluator_wall_s=ev_wall[0],
        observation_failures=int(runner.acct.counters.values.get(keys.METRIC_OBSERVATION_FAILURES, 0)),
    )


# ----------------------------------------------------------------------------------------------
# The 250-host job
# ----------------------------------------------------------------------------------------------

BIG_HOSTS = 250


@dataclass
class BigJob:
    hosts: int
    put_at_creation: int  # PutMetricAlarm calls when the first attempt's alarms were created
    alarms: int
    max_metrics_per_alarm: int
    triage: dict[str, int]  # op -> calls of the invocation that confirmed the hang
    detect_min: float | None
    status: str


def measure_big_job(template: dict[str, Any], *, hosts: int = BIG_HOSTS, seed: int = 1) -> BigJob:
    sc = parse(
        {
            "name": "scale-250",
            "seed": seed,
            "max_days": 1,
            "account": {"store": "memory"},
            "runs": [
                {
                    "name": "big",
                    "instance_type": "ml.p5.48xlarge",
                    "instance_count": hosts,
                    "profile": {"total_steps": 240, "steps_per_minute": 1, "checkpoint_every_steps": 30},
                }
            ],
            "faults": [
                {"kind": "dead_host", "run": "big", "attempt": 1, "after_training_min": 90, "host": 137}
            ],
        },
        bucket=BUCKET,
        role_arn=EXECUTION_ROLE,
    )
    counters: list[CallCounter] = []

    def factory(acct: LocalAccount) -> Any:
        evaluator = _instrument(acct, counters, SweepTimes(), [0.0])
        counters[0].calls = []
        return evaluator

    runner = DrillRunner(sc, template, evaluator_factory=factory, account_options=ACCOUNT_OPTIONS)
    with _quiet():
        result = runner.run()
    calls = counters[0].calls or []
    puts = [t for t, _, op in calls if op == "cloudwatch.PutMetricAlarm"]
    first = Counter(puts)[puts[0]] if puts else 0
    stops = [t for t, _, op in calls if op == "sagemaker.StopTrainingJob"]
    triage: Counter[str] = Counter()
    if stops:
        # the invocation that stopped the job: its calls share the virtual instant
        for t, _, op in calls:
            if t == stops[0] and op.startswith(("logs.", "cloudwatch.GetMetricData")):
                triage[op] += 1
    fault = result.faults[0] if result.faults else {}
    detect = fault.get("to_action_s")
    return BigJob(
        hosts=hosts,
        put_at_creation=first,
        alarms=len({s.name for s in counters[0].spans if s.put_ms == (puts[0] if puts else -1)}),
        max_metrics_per_alarm=counters[0].max_metrics_per_alarm,
        triage=dict(triage),
        detect_min=None if detect is None else detect / 60,
        status=next(iter(result.runs.values()))["status"],
    )


# ----------------------------------------------------------------------------------------------
# The report
# ----------------------------------------------------------------------------------------------


def _no_clock() -> int:
    return 0


def measure_detached(runs: int, template: dict[str, Any]) -> ScaleResult:
    """`measure`, without what only lives in the drill's process (the virtual clock, the jobs, the
    IAM report), so a process pool can hand it back to `run`."""
    r = measure(runs, template)
    r.counter.clock = _no_clock
    r.drill = dataclasses.replace(r.drill, jobs=[], iam=None, timeline=[], alerts_sent=[], api_calls=[])
    return r


__all__ = [
    "QUOTA_TPS",
    "REPORTED",
    "SIZES",
    "BigJob",
    "ScaleResult",
    "measure",
    "measure_big_job",
    "measure_detached",
    "scenario",
]
