"""The scale benchmark's bookkeeping (pure, tested with known input): a drill's AWS calls counted
by virtual minute and operation, the live hang alarms, and what supervision costs at list prices
(:mod:`benchmarks.scale` drives the drills, :mod:`benchmarks.scale_report` renders the section)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from drill.account.local import ALARM_PREFIX
from infra.constants import (
    CW_ALARM_METRIC_MONTH_USD,
    CW_CUSTOM_METRIC_MONTH_USD,
    DAYS_PER_BILLING_MONTH,
)
from sagewarden.adapters.cloudwatch_hang_alarms import alarm_specs, parse_alarm_key
from sagewarden.domain.vocabulary.actions import EnsureHangAlarms
from sagewarden.domain.vocabulary.names import parse_job_name

MINUTE_MS = 60_000
HOURS_PER_MONTH = DAYS_PER_BILLING_MONTH * 24
# EMF: the README's "1.4 M lines per day (~0.3 GB, ~$0.15)" for 1,000 jobs: ~214 bytes a line
EMF_BYTES_PER_LINE = 0.3e9 / 1.4e6
EMF_USD_PER_GB = 0.50
TARGET_USD_PER_RUN_DAY = 0.05

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
