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
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from drill.account import ALARM_PREFIX, BUCKET, EXECUTION_ROLE, LocalAccount
from drill.alarm_evaluator import AlarmEvaluator
from drill.rate_limits import DEFAULT_RATES
from drill.runner import DrillResult, DrillRunner
from drill.scenario import Scenario, parse
from infra.constants import (
    CW_ALARM_METRIC_MONTH_USD,
    CW_CUSTOM_METRIC_MONTH_USD,
    DAYS_PER_BILLING_MONTH,
)
from sagewarden import keys
from sagewarden.adapters.cloudwatch_hang_alarms import alarm_specs, parse_alarm_key
from sagewarden.domain.actions import EnsureHangAlarms
from sagewarden.domain.names import parse_job_name

SIZES = (10, 100, 1000)
# what `make bench` drives (the largest in a worker process, next to the rest); a 1,000-run day
# takes the drill about 6 minutes alone here since its heavy moto calls go to moto's backends
# (drill/backend_clients.py)
BENCH_SIZES = SIZES
MINUTE_MS = 60_000
HOURS_PER_MONTH = DAYS_PER_BILLING_MONTH * 24
# EMF: the README's "1.4 M lines per day (~0.3 GB, ~$0.15)" for 1,000 jobs: ~214 bytes a line
EMF_BYTES_PER_LINE = 0.3e9 / 1.4e6
EMF_USD_PER_GB = 0.50
TARGET_USD_PER_RUN_DAY = 0.05

# Documented default quotas, per account and Region (transactions per second): the rates the
# simulated account throttles at (drill/rate_limits.py, which cites the pages; the lower figure
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
# The call counter (pure bookkeeping; tested with known input)
# ----------------------------------------------------------------------------------------------


def op_key(service: str, operation: str) -> str:
    return f"{service}.{operation}"


@dataclass
class Rate:
    peak_per_min: int
    mean_per_min: float
    burst: int  # most calls at one virtual instant (one handler invocation's back-to-back calls)

    @property
    def peak_tps(self) -> float:
        """The busiest minute's calls spread evenly over it."""
        return self.peak_per_min / 60


def per_minute_rates(
    counts: Mapping[tuple[int, str], int], minutes: int, bursts: Mapping[str, int] | None = None
) -> dict[str, Rate]:
    """Per operation: the busiest minute's count and the mean per minute over ``minutes`` minutes
    (minutes without a call count as 0). ``counts`` maps (minute index, operation) -> calls."""
    if minutes <= 0:
        raise ValueError("minutes must be positive")
    peak: dict[str, int] = {}
    total: Counter[str] = Counter()
    for (_, op), n in counts.items():
        total[op] += n
        peak[op] = max(peak.get(op, 0), n)
    return {op: Rate(peak[op], total[op] / minutes, (bursts or {}).get(op, 0)) for op in sorted(total)}


@dataclass
class AlarmSpan:
    name: str
    run_id: str
    metrics: int
    put_ms: int
    end_ms: int | None = None


def alarm_metrics(params: Mapping[str, Any]) -> int:
    """Metrics an alarm is billed for: 1 for a single-metric alarm, else one per MetricStat."""
    queries = params.get("Metrics") or []
    if not queries:
        return 1
    return sum(1 for q in queries if "MetricStat" in q)


@dataclass
class CallCounter:
    """Counts a drill's AWS calls by virtual minute and operation, and tracks live hang alarms.

    ``record`` is a :class:`drill.iam.CallRecorder` listener: (function, service, operation,
    params), stamped with ``clock()`` (virtual ms)."""

    clock: Callable[[], int]
    start_ms: int
    prefix: str = ALARM_PREFIX
    counts: Counter[tuple[int, str]] = field(default_factory=Counter)
    by_function: Counter[tuple[str, str]] = field(default_factory=Counter)
    _instant: dict[str, tuple[int, int]] = field(default_factory=dict)  # op -> (ms, calls at that ms)
    bursts: dict[str, int] = field(default_factory=dict)
    live: dict[str, AlarmSpan] = field(default_factory=dict)
    spans: list[AlarmSpan] = field(default_factory=list)
    live_by_run: Counter[str] = field(default_factory=Counter)
    peak_by_run: dict[str, int] = field(default_factory=dict)
    peak_total: int = 0
    max_metrics_per_alarm: int = 0
    calls: list[tuple[int, str, str]] | None = None  # (ms, function, op) when keep_calls

    def record(self, function: str, service: str, operation: str, params: Mapping[str, Any]) -> None:
        now = self.clock()
        op = op_key(service, operation)
        self.counts[((now - self.start_ms) // MINUTE_MS, op)] += 1
        self.by_function[(function.rsplit(".", 2)[-2] if "." in function else function, op)] += 1
        at, n = self._instant.get(op, (-1, 0))
        n = n + 1 if at == now else 1
        self._instant[op] = (now, n)
        if n > self.bursts.get(op, 0):
            self.bursts[op] = n
        if self.calls is not None:
            self.calls.append((now, function, op))
        if op == "cloudwatch.PutMetricAlarm":
            self._put(str(params.get("AlarmName", "")), alarm_metrics(params), now)
        elif op == "cloudwatch.DeleteAlarms":
            for name in params.get("AlarmNames", []):
                self._delete(str(name), now)

    def _run_of(self, name: str) -> str:
        parsed = parse_alarm_key(self.prefix, name)
        job = parse_job_name(parsed[0]) if parsed else None
        return job[0] if job else ""

    def _put(self, name: str, metrics: int, now: int) -> None:
        self.max_metrics_per_alarm = max(self.max_metrics_per_alarm, metrics)
        span = self.live.get(name)
        if span is not None:  # a re-put (learned window): the same alarm, billed without a break
            span.metrics = metrics
            return
        span = AlarmSpan(name, self._run_of(name), metrics, now)
        self.live[name] = span
        self.spans.append(span)
        self.live_by_run[span.run_id] += 1
        self.peak_by_run[span.run_id] = max(
            self.peak_by_run.get(span.run_id, 0), self.live_by_run[span.run_id]
        )
        self.peak_total = max(self.peak_total, len(self.live))

    def _delete(self, name: str, now: int) -> None:
        span = self.live.pop(name, None)
        if span is None:
            return
        span.end_ms = now
        self.live_by_run[span.run_id] -= 1

    def minutes(self, end_ms: int) -> int:
        return max(1, -(-(end_ms - self.start_ms) // MINUTE_MS))

    def rates(self, end_ms: int) -> dict[str, Rate]:
        return per_minute_rates(self.counts, self.minutes(end_ms), self.bursts)

    def alarm_metric_hours(self, end_ms: int) -> float:
        return sum(s.metrics * ((s.end_ms or end_ms) - s.put_ms) for s in self.spans) / 3_600_000


# ----------------------------------------------------------------------------------------------
# Cost
# ----------------------------------------------------------------------------------------------


def billed_hours(intervals: Iterable[tuple[int, int]]) -> int:
    """Clock hours in which a metric is published (CloudWatch prorates metrics by the hour)."""
    hours = 0
    for start, end in intervals:
        if end > start:
            hours += (end - 1) // 3_600_000 - start // 3_600_000 + 1
    return hours


@dataclass
class Cost:
    alarm_usd: float
    heartbeat_usd: float
    emf_usd: float

    @property
    def total(self) -> float:
        return self.alarm_usd + self.heartbeat_usd + self.emf_usd


def supervision_cost(alarm_metric_hours: float, heartbeat_hours: int, emf_lines: int) -> Cost:
    return Cost(
        alarm_usd=alarm_metric_hours * CW_ALARM_METRIC_MONTH_USD / HOURS_PER_MONTH,
        heartbeat_usd=heartbeat_hours * CW_CUSTOM_METRIC_MONTH_USD / HOURS_PER_MONTH,
        emf_usd=emf_lines * EMF_BYTES_PER_LINE / 1e9 * EMF_USD_PER_GB,
    )


def design_alarm_metrics(hosts: int, *, progress_metric: bool = False) -> tuple[int, int, int]:
    """(alarms, alarm metrics, most metrics in one alarm) the adapter creates for a job of
    ``hosts`` hosts with the default policy windows (from ``alarm_specs`` itself)."""
    spec = EnsureHangAlarms(
        job_name="sw-run-a1",
        attempt=1,
        instance_count=hosts,
        gpus_per_host=8,
        log_silence_minutes=30,
        gpu_idle_percent=5.0,
        gpu_idle_minutes=20,
        progress_metric="train:throughput" if progress_metric else None,
    )
    specs = alarm_specs(spec, ALARM_PREFIX, "run")
    metrics = [alarm_metrics(s) for s in specs]
    return len(specs), sum(metrics), max(metrics)


def design_cost_per_day(hosts: int, *, progress_metric: bool = False) -> float:
    """A job training all day with the default alarms: the README's formula, from the specs."""
    _, metrics, _ = design_alarm_metrics(hosts, progress_metric=progress_metric)
    return supervision_cost(24.0 * metrics, 24, 1440).total


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
# through moto's in-memory backends (drill/backend_clients.py)
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


def _no_clock() -> int:
    return 0


def measure_detached(runs: int, template: dict[str, Any]) -> ScaleResult:
    """`measure`, without what only lives in the drill's process (the virtual clock, the jobs, the
    IAM report), so a process pool can hand it back to `run`."""
    r = measure(runs, template)
    r.counter.clock = _no_clock
    r.drill = dataclasses.replace(r.drill, jobs=[], iam=None, timeline=[], alerts_sent=[], api_calls=[])
    return r


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

    from drill.account import drill_template

    sizes = tuple(int(a) for a in sys.argv[1:]) or SIZES
    print("\n".join(run(drill_template(), sizes, progress=lambda s: print(s, file=sys.stderr, flush=True))))


if __name__ == "__main__":  # pragma: no cover
    main()


__all__ = [
    "CallCounter",
    "Rate",
    "ScaleResult",
    "billed_hours",
    "design_cost_per_day",
    "measure",
    "per_minute_rates",
    "run",
    "scenario",
    "supervision_cost",
]
