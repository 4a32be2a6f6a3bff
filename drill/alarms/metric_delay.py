"""Metric ingestion delay: when a datapoint, or a log line, becomes visible to CloudWatch's readers.

`MetricDelays` draws each delay from the seed per source (`account.metric_delay`);
`MetricDelays.none()` is the kind model. Why: docs/fidelity.md (late datapoints, log lines)."""

from __future__ import annotations

import bisect
import dataclasses
import functools
import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from drill.sim.series import mix64
from drill.sim.texts import MASK64
from sagewarden.keys import HEARTBEAT_NAMESPACE, TRAINING_METRIC_NAMESPACE

MINUTE_MS = 60_000
MAX_DELAY_S = 3600.0  # a scenario's bound on any one delay
SOURCES = ("gpu", "progress", "heartbeat")  # metric sources (``max_ms``/``min_ms`` are theirs)
LOG_SOURCE = "logs"  # a training job's log lines in CloudWatch Logs (not a metric)
ALL_SOURCES = (*SOURCES, LOG_SOURCE)
SOURCE_TEXT = {
    "gpu": "SageMaker instance metrics (/aws/sagemaker/TrainingJobs GPU, CPU, memory and disk utilization, per Host)",
    "progress": "the job's MetricDefinitions metric (/aws/sagemaker/TrainingJobs, per TrainingJobName)",
    "heartbeat": "the heartbeat metric (embedded metric format from the log-subscription function)",
    LOG_SOURCE: "the training job's log lines (CloudWatch Logs ingestion)",
}
_UNIT = float(1 << 53)


@dataclass(frozen=True)
class SourceDelay:
    """How late one source's datapoints arrive (seconds after their period ends)."""

    base_s: float = 30.0
    jitter_s: float = 60.0
    late_rate: float = 0.05  # the share of datapoints that arrive late_s late instead
    late_s: float = 180.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
                raise ValueError(f"{f.name} must be a number")
            if value < 0:
                raise ValueError(f"{f.name} must be >= 0")
        if self.late_rate > 1:
            raise ValueError("late_rate must be within 0..1")
        if self.max_s > MAX_DELAY_S:
            raise ValueError(f"a delay must not exceed {MAX_DELAY_S:g} s")

    @property
    def min_s(self) -> float:
        if self.late_rate >= 1:
            return self.late_s
        return self.base_s if self.late_rate <= 0 else min(self.base_s, self.late_s)

    @property
    def max_s(self) -> float:
        if self.late_rate >= 1:
            return self.late_s
        top = self.base_s + self.jitter_s
        return max(top, self.late_s) if self.late_rate > 0 else top

    def delay_ms(self, u_late: float, u_jitter: float) -> int:
        if u_late < self.late_rate:
            return round(self.late_s * 1000)
        return round((self.base_s + self.jitter_s * u_jitter) * 1000)


NO_DELAY = SourceDelay(0.0, 0.0, 0.0, 0.0)
# a log line: 1-15 s after it is written, 5 % of a stream's minutes 180 s (AWS publishes no figure)
DEFAULT_LOG_DELAY = SourceDelay(base_s=1.0, jitter_s=14.0, late_rate=0.05, late_s=180.0)


@dataclass(frozen=True)
class MetricDelays:
    """Per-source delays and the seed they are drawn with."""

    seed: int = 0
    gpu: SourceDelay = field(default_factory=SourceDelay)
    progress: SourceDelay = field(default_factory=SourceDelay)
    heartbeat: SourceDelay = field(default_factory=SourceDelay)
    logs: SourceDelay = DEFAULT_LOG_DELAY

    @classmethod
    def none(cls, seed: int = 0) -> MetricDelays:
        """Every datapoint visible the instant its period ends, every log line the instant it is
        written (the kind model)."""
        return cls(seed, NO_DELAY, NO_DELAY, NO_DELAY, NO_DELAY)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, *, seed: int = 0) -> MetricDelays:
        """A scenario's ``account.metric_delay``: per source, fields over the defaults, e.g.
        ``{"gpu": {"base_s": 60, "jitter_s": 120}, "heartbeat": {"late_rate": 0}}``."""
        data = dict(data or {})
        unknown = sorted(set(data) - set(ALL_SOURCES))
        if unknown:
            raise ValueError(f"unknown metric sources {unknown}; known: {', '.join(ALL_SOURCES)}")
        metrics = {name: SourceDelay(**dict(data.get(name) or {})) for name in SOURCES}
        logs = dataclasses.replace(DEFAULT_LOG_DELAY, **dict(data.get(LOG_SOURCE) or {}))
        return cls(seed, **metrics, logs=logs)

    @property
    def enabled(self) -> bool:
        return self.max_ms > 0

    @property
    def max_ms(self) -> int:
        return max(round(self.of(s).max_s * 1000) for s in SOURCES)

    @property
    def min_ms(self) -> int:
        return min(round(self.of(s).min_s * 1000) for s in SOURCES)

    def of(self, source: str) -> SourceDelay:
        delay: SourceDelay = getattr(self, source)
        return delay

    def log_line_at(self, stream: str, t_ms: int) -> int:
        """When a line written at ``t_ms`` to ``stream`` reaches CloudWatch Logs, on its own
        (drawn per stream and minute; :meth:`readable` adds the stream's order)."""
        delay = self.logs
        if delay.max_s <= 0:
            return t_ms
        h = mix64(mix64(self.seed & MASK64) ^ _stream_id(stream) ^ ((t_ms // MINUTE_MS) & MASK64))
        u_late = (h >> 11) / _UNIT
        u_jitter = (mix64(h ^ 0x5851F42D4C957F2D) >> 11) / _UNIT
        return t_ms + delay.delay_ms(u_late, u_jitter)

    def readable(self, stream: str, times: Sequence[int], now_ms: int) -> int:
        """How many of a stream's lines (their times, oldest first) a read at ``now_ms`` sees: a
        line once it and every earlier line of the stream have arrived. Lines older than the
        longest delay have all arrived; only the newest few are drawn."""
        end = bisect.bisect_right(times, now_ms)
        if self.logs.max_s <= 0:
            return end
        i = bisect.bisect_right(times, now_ms - round(self.logs.max_s * 1000), 0, end)
        while i < end and self.log_line_at(stream, times[i]) <= now_ms:
            i += 1  # (every earlier line has arrived by then: older ones by the bound)
        return i

    def series(self, namespace: str, metric: str, dimensions: Mapping[str, str]) -> Series:
        """One series' delays (compute once per series, ask per datapoint)."""
        return Series(self, source_of(namespace, dimensions), series_id(namespace, metric, dimensions))

    def visible_at(
        self, namespace: str, metric: str, dimensions: Mapping[str, str], bucket_ms: int, period_ms: int
    ) -> int:
        """When the datapoint of the period starting at ``bucket_ms`` becomes visible (ms)."""
        return self.series(namespace, metric, dimensions).visible_at(bucket_ms, period_ms)


@dataclass(frozen=True)
class Series:
    delays: MetricDelays
    source: str | None  # None: not a simulated source, never late
    ident: int

    @property
    def max_ms(self) -> int:
        return 0 if self.source is None else round(self.delays.of(self.source).max_s * 1000)

    @property
    def min_ms(self) -> int:
        return 0 if self.source is None else round(self.delays.of(self.source).min_s * 1000)

    def visible_at(self, bucket_ms: int, period_ms: int) -> int:
        """The period's end plus its datapoint's delay (drawn for the period's last minute: a
        longer period's datapoint is complete once its last minute's is)."""
        end = bucket_ms + period_ms
        if self.source is None:
            return end
        delay = self.delays.of(self.source)
        if delay.max_s <= 0:
            return end
        minute = (end - MINUTE_MS) // MINUTE_MS
        h = mix64(mix64(self.delays.seed & MASK64) ^ self.ident ^ (minute & MASK64))
        u_late = (h >> 11) / _UNIT
        u_jitter = (mix64(h ^ 0x5851F42D4C957F2D) >> 11) / _UNIT
        return end + delay.delay_ms(u_late, u_jitter)


def source_of(namespace: str, dimensions: Mapping[str, str]) -> str | None:
    if namespace == TRAINING_METRIC_NAMESPACE:
        if set(dimensions) == {"Host"}:
            return "gpu"
        if set(dimensions) == {"TrainingJobName"}:
            return "progress"
    if namespace == HEARTBEAT_NAMESPACE:
        return "heartbeat"
    return None


@functools.lru_cache(maxsize=65_536)
def _stream_id(stream: str) -> int:
    return int.from_bytes(hashlib.blake2b(stream.encode(), digest_size=8).digest(), "big")


def series_id(namespace: str, metric: str, dimensions: Mapping[str, str]) -> int:
    """A stable 64-bit identity of a series (the datapoints of its statistics arrive together)."""
    text = "|".join([namespace, metric, *(f"{k}={dimensions[k]}" for k in sorted(dimensions))])
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
