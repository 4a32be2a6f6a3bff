"""The evaluator's data: each series fetched from the simulated SageMaker once per period, and each
alarm's periods classified (good, breaching, missing) by their final class.

Why: docs/drill.md (*The alarm evaluator*: speed)."""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from drill.alarms.config import _OPERATORS, AlarmConfig, Bound, SeriesKey, _value_function, empty_value
from drill.alarms.decision import _BREACH, _GOOD, _MISSING

MINUTE_MS = 60_000
MAX_MS = 1 << 62


@dataclass
class _SeriesData:
    points: dict[int, float] = field(default_factory=dict)
    lo: int = 0  # fetched range [lo, hi)
    hi: int = 0
    # bounded series (see "Speed" in the module docstring): stretches (first, end, lo, hi) of the
    # fetched range, sorted; ``points`` then holds only the values computed on demand
    bounded: bool | None = None  # None until the first fetch decides
    bounds: list[tuple[int, int, float, float]] = field(default_factory=list)
    exact: set[int] = field(default_factory=set)  # bounded: buckets whose values were computed


@dataclass
class _AlarmState:
    config: AlarmConfig
    state: str
    reason: str
    reason_data: str
    state_ms: int
    evaluated_to: int  # last evaluation boundary (ms)
    next_check: int  # first boundary at which the state may change
    value_of: Callable[[int], float | None]
    bound_of: Callable[[dict[SeriesKey, Bound | None]], Bound | None]
    base: int = 0  # bucket start of classes[0]
    queued: bool = False  # its next_check is in the evaluator's queue
    promise: int | None = None  # the class the last evaluation assumed every later period has
    changed_ms: int | None = None  # the last phase change of its jobs that broke that promise
    classes: bytearray = field(default_factory=bytearray)
    values: list[float | None] = field(default_factory=list)
    last_end: int | None = None  # window end of the last evaluation
    # late datapoints (drill/alarms/metric_delay.py): each series' delays, in ``config.series`` order
    arrivals: tuple[Any, ...] = ()
    unsure: int = 0  # the newest periods of an evaluation that may lack datapoints
    empty: int = 0  # ... of which the newest surely have none yet
    empty_class: int | None = None  # the class of a period without any datapoint (None: unknown)
    masked_value_of: Callable[[int], float | None] | None = None  # values from visible datapoints
    arrived: dict[int, int] = field(default_factory=dict)  # bucket -> when its last datapoint arrives

    @property
    def period_ms(self) -> int:
        return self.config.period_s * 1000

    @property
    def filled_to(self) -> int:
        return self.base + len(self.classes) * self.period_ms


class SeriesFetch:
    """The evaluator's fetching and classifying (a mixin of ``AlarmEvaluator``)."""

    sagemaker: Any
    period_ms: int
    range_extra: int
    fetches: int
    _series: dict[SeriesKey, _SeriesData]
    _alarms: dict[str, _AlarmState]
    _users: dict[SeriesKey, set[str]]

    def _range(self, alarm: _AlarmState) -> int:
        return alarm.config.evaluation_periods + self.range_extra

    def _fetch(self, pending: list[_AlarmState], target: int) -> None:
        """Make every series hold the periods the pending evaluations need, then classify them."""
        needs: dict[SeriesKey, tuple[int, int]] = {}
        starts: dict[str, int] = {}
        for alarm in pending:
            p = alarm.period_ms
            first_end = (alarm.evaluated_to + self.period_ms) // p * p
            start = first_end - self._range(alarm) * p
            end = target // p * p
            starts[alarm.config.name] = start
            if alarm.filled_to >= end and alarm.classes:
                continue
            lo = alarm.filled_to if alarm.classes and alarm.filled_to >= start else start
            for key in alarm.config.series:
                cur = needs.get(key)
                needs[key] = (lo, end) if cur is None else (min(cur[0], lo), max(cur[1], end))
        for key, (start, end) in needs.items():
            self._ensure(key, start, end)
        trimmed: set[SeriesKey] = set()
        for alarm in pending:
            if self._classify(alarm, starts[alarm.config.name], target // alarm.period_ms * alarm.period_ms):
                trimmed.update(alarm.config.series)
        for key in trimmed:
            self._prune(key)

    def _ensure(self, key: SeriesKey, start: int, end: int) -> None:
        data = self._series.setdefault(key, _SeriesData())
        if start >= end:
            return
        if data.hi <= data.lo or start > data.hi:  # empty, or a gap: start over
            data.points.clear()
            data.bounds.clear()
            self._load(key, data, start, end)
            data.lo, data.hi = start, end
            return
        if start < data.lo:
            self._load(key, data, start, data.lo)
            data.lo = start
        if end > data.hi:
            self._load(key, data, data.hi, end)
            data.hi = end

    def _load(self, key: SeriesKey, data: _SeriesData, start: int, end: int) -> None:
        if data.bounded is not False:
            bounds = self._bounds(key, start, end)
            if data.bounded is None:
                data.bounded = bounds is not None
            if bounds is not None:
                self.fetches += 1
                data.bounds.extend(bounds)
                data.bounds.sort()
                return
        self._exact(key, data, start, end)

    def _bounds(self, key: SeriesKey, start: int, end: int) -> list[tuple[int, int, float, float]] | None:
        get = getattr(self.sagemaker, "metric_bounds", None)
        if get is None or key.period_s * 1000 != self.period_ms:
            return None
        found = get(key.namespace, key.metric, dict(key.dimensions), start, end, key.period_s, key.stat)
        return None if found is None else [(int(a), int(b), float(lo), float(hi)) for a, b, lo, hi in found]

    def _exact(self, key: SeriesKey, data: _SeriesData, start: int, end: int) -> None:
        self.fetches += 1
        for bucket, value in self.sagemaker.metric_datapoints(
            key.namespace, key.metric, dict(key.dimensions), start, end, key.period_s, key.stat
        ):
            data.points[int(bucket)] = float(value)
        if data.bounded:
            data.exact.update(range(start, end, key.period_s * 1000))

    def _load_exact(self, alarm: _AlarmState, start: int, end: int) -> None:
        """Every series of the alarm holds exact values for the periods [start, end) (bounded
        series compute them on demand; one call per series for the stretch not yet computed)."""
        p = alarm.period_ms
        for key in dict.fromkeys(alarm.config.series):
            data = self._series[key]
            if data.bounded:
                first = next((b for b in range(start, end, p) if b not in data.exact), None)
                if first is not None:
                    self._exact(key, data, first, end)

    def _exact_value(self, alarm: _AlarmState, bucket: int) -> float | None:
        """The alarm's exact value for one period (bounded series compute it on demand)."""
        p = alarm.period_ms
        for key in alarm.config.series:
            data = self._series[key]
            if data.bounded and bucket not in data.points:
                self._exact(key, data, bucket, bucket + p)
        return alarm.value_of(bucket)

    def _classify(self, alarm: _AlarmState, start: int, end: int) -> bool:
        """Compute and classify the alarm's periods up to ``end``; True if old ones were dropped."""
        p = alarm.period_ms
        if not alarm.classes or alarm.filled_to < start or alarm.base > start:
            alarm.base = start
            alarm.classes = bytearray()
            alarm.values = []
        compare = _OPERATORS[alarm.config.comparison]
        threshold = alarm.config.threshold
        value_of = alarm.value_of
        classes, values = alarm.classes, alarm.values
        if all(self._series[key].bounded for key in alarm.config.series):
            self._classify_bounded(alarm, alarm.filled_to, end)
        else:
            for bucket in range(alarm.filled_to, end, p):
                v = value_of(bucket)
                values.append(v)
                classes.append(_MISSING if v is None else (_BREACH if compare(v, threshold) else _GOOD))
        keep = self._range(alarm)
        drop = (start - alarm.base) // p
        if drop <= 4 * keep + 64:
            return False
        del classes[:drop]  # no evaluation needs them any more
        del values[:drop]
        alarm.base += drop * p
        return True

    def _classify_bounded(self, alarm: _AlarmState, start: int, end: int) -> None:
        """Classify [start, end) stretch by stretch from the series' bounds: a stretch whose value
        bounds lie on one side of the threshold is classified at once (values computed later, only
        if a state change reports them); only a stretch straddling the threshold is computed."""
        if start >= end:
            return
        cfg = alarm.config
        p = alarm.period_ms
        compare = _OPERATORS[cfg.comparison]
        threshold = cfg.threshold
        keys = list(dict.fromkeys(cfg.series))
        cuts = {start, end}
        covering: dict[SeriesKey, list[tuple[int, int, float, float]]] = {}
        for key in keys:
            bounds = self._series[key].bounds
            i = bisect.bisect_right(bounds, (start, MAX_MS)) - 1
            near = [b for b in bounds[max(i, 0) :] if b[0] < end]
            covering[key] = [b for b in near if b[1] > start]
            for a, b, _, _ in covering[key]:
                cuts.update(x for x in (a, b) if start < x < end)
        edges = sorted(cuts)
        cursor = dict.fromkeys(keys, 0)
        bound_of = alarm.bound_of
        for a, b in itertools.pairwise(edges):
            states: dict[SeriesKey, Bound | None] = {}
            for key in keys:
                spans, i = covering[key], cursor[key]
                while i < len(spans) and spans[i][1] <= a:
                    i += 1
                cursor[key] = i
                span = spans[i] if i < len(spans) else None
                states[key] = (span[2], span[3]) if span is not None and span[0] <= a else None
            n = (b - a) // p
            bound = bound_of(states)
            if bound is None:
                alarm.classes.extend(bytes([_MISSING]) * n)
                alarm.values.extend([None] * n)
            elif compare(bound[0], threshold) == compare(bound[1], threshold):  # the operators are monotone
                alarm.classes.extend(bytes([_BREACH if compare(bound[0], threshold) else _GOOD]) * n)
                alarm.values.extend([math.nan] * n)  # computed on demand
            else:
                for key in keys:
                    self._exact(key, self._series[key], a, b)
                for bucket in range(a, b, p):
                    v = alarm.value_of(bucket)
                    alarm.values.append(v)
                    alarm.classes.append(
                        _MISSING if v is None else (_BREACH if compare(v, threshold) else _GOOD)
                    )

    def _prune(self, key: SeriesKey) -> None:
        users = (self._alarms[name] for name in self._users.get(key, ()))
        keep_from = min((a.base for a in users if a.classes), default=None)
        data = self._series.get(key)
        if data is None or keep_from is None or keep_from <= data.lo:
            return
        for bucket in [b for b in data.points if b < keep_from]:
            del data.points[bucket]
        data.exact = {b for b in data.exact if b >= keep_from}
        if data.bounds:
            data.bounds = [b for b in data.bounds if b[1] > keep_from]
        data.lo = min(keep_from, data.hi)


class _Arrived:
    """A series' datapoints as an evaluation at ``evaluator._as_of`` sees them: only those that
    have arrived (``drill/alarms/metric_delay.py``)."""

    __slots__ = ("_arrival", "_evaluator", "_late", "_period_ms", "_points")

    def __init__(self, evaluator: Any, points: dict[int, float], arrival: Any, period_ms: int):
        self._evaluator = evaluator
        self._points = points
        self._arrival = arrival
        self._period_ms = period_ms
        self._late = arrival.max_ms

    def get(self, bucket: int) -> float | None:
        as_of = self._evaluator._as_of
        if (
            bucket + self._period_ms + self._late > as_of
            and self._arrival.visible_at(bucket, self._period_ms) > as_of
        ):
            return None
        return self._points.get(bucket)


class Arrivals:
    """What an evaluation sees of late datapoints (``drill/alarms/metric_delay.py``), a mixin of
    ``AlarmEvaluator``: each alarm's series delays, and values from the datapoints arrived."""

    delays: Any
    period_ms: int
    _as_of: int
    _series: dict[SeriesKey, _SeriesData]

    def _bind_arrivals(self, alarm: _AlarmState) -> None:
        """The alarm's view of late datapoints: each series' delays, how many of the newest
        periods of an evaluation may lack datapoints (``unsure``) or surely lack them all
        (``empty``), and its values computed from the datapoints visible at ``self._as_of``."""
        cfg = alarm.config
        p = alarm.period_ms
        arrivals = tuple(self.delays.series(k.namespace, k.metric, dict(k.dimensions)) for k in cfg.series)
        alarm.arrivals = arrivals
        alarm.arrived = {}
        late = max((a.max_ms for a in arrivals), default=0)
        soon = min((a.min_ms for a in arrivals), default=0)
        # the k-th newest period ends (k - 1) periods before the boundary's period end E; an
        # evaluation happens at a minute boundary T in [E, E + p - 60 s]
        alarm.unsure = -(-late // p) if late > 0 else 0
        alarm.empty = max(0, -(-(soon + self.period_ms) // p) - 1) if soon > 0 else 0
        known, value = empty_value(cfg)
        compare = _OPERATORS[cfg.comparison]
        alarm.empty_class = (
            None
            if not known
            else (_MISSING if value is None else (_BREACH if compare(value, cfg.threshold) else _GOOD))
        )
        if alarm.unsure == 0:
            alarm.masked_value_of = None
            return
        views = {
            key: _Arrived(self, self._series.setdefault(key, _SeriesData()).points, arrival, p)
            for key, arrival in zip(cfg.series, arrivals, strict=True)
        }
        alarm.masked_value_of = _value_function(cfg, views)  # type: ignore[arg-type]

    def _arrived(self, alarm: _AlarmState, bucket: int) -> int:
        """When the last datapoint of a period arrives (cached per period)."""
        when = alarm.arrived.get(bucket)
        if when is None:
            p = alarm.period_ms
            when = max((a.visible_at(bucket, p) for a in alarm.arrivals), default=bucket + p)
            if len(alarm.arrived) > 64:
                alarm.arrived.clear()
            alarm.arrived[bucket] = when
        return when

    def _masked_value(self, alarm: _AlarmState, bucket: int, as_of: int) -> float | None:
        """The alarm's value for one period from the datapoints visible at ``as_of``."""
        assert alarm.masked_value_of is not None  # the caller loaded exact values (_load_exact)
        self._as_of = as_of
        return alarm.masked_value_of(bucket)
