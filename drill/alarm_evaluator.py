"""CloudWatch metric-alarm evaluation for the drill (moto stores alarms but never evaluates them).

:class:`AlarmEvaluator` reads the alarms the supervisor created in moto (``describe_alarms``),
evaluates them every minute against the simulated SageMaker's metrics
(``SimSageMaker.metric_datapoints``), mirrors each state into moto (``set_alarm_state``) and, on
every state change, puts a real-shaped "CloudWatch Alarm State Change" event on the drill's
EventBridge bus (``acct.publish_event``).

Semantics implemented (AWS CloudWatch User Guide, "Configuring how CloudWatch alarms treat
missing data", and the PutMetricAlarm reference):

- A new alarm starts in INSUFFICIENT_DATA ("Unchecked: Initial alarm creation"; no event) and is
  first evaluated at the first minute boundary after it was found. Updating an alarm (a second
  PutMetricAlarm with the same name) keeps its state. A deleted alarm is forgotten (no event).
- Every minute boundary ``T``, the alarm looks at the complete periods of ``Period`` seconds that
  end at or before ``T`` (periods are aligned to multiples of ``Period``). CloudWatch retrieves an
  *evaluation range* wider than ``EvaluationPeriods`` (N); AWS does not publish its width (the
  documentation's only example uses 5 for N = 3), so the range here is ``N + evaluation_range_extra``
  periods (default 2; 0 evaluates exactly N periods).
- Each period's value: a single-metric alarm asks for its metric with ``Statistic``; a
  metric-math alarm asks for every ``MetricStat`` and evaluates the returned ``Expression`` (the
  subset of metric math in ``drill/metric_math.py``: MIN/MAX/SUM/AVG of arrays, IF, comparisons,
  AND/OR/NOT, arithmetic, FILL, DIFF, ABS). Where some series are missing the
  present ones are used; where all are missing the period is missing. A value is *breaching* when
  ``value <op> Threshold`` holds.
- With r real (non-missing) periods in the range and M = ``DatapointsToAlarm`` (default N):
  * r >= N: the N most recent real periods are evaluated (older ones in the range stand in for
    missing recent ones); TreatMissingData is not used. ALARM if at least M breach, else OK.
  * 0 < r < N: every real period of the range is evaluated and N - r missing periods are filled
    as TreatMissingData says: ``breaching`` counts them as breaching, ``notBreaching`` as not
    breaching, ``missing``/``ignore`` leave them out. ALARM if at least M breach, else OK, with the
    documented "premature alarm" rule for ``missing``/``ignore``: when the range holds no
    non-breaching datapoint and its oldest breaching one is at least M periods old, ``missing``
    goes to ALARM and ``ignore`` keeps the current state (the page's sentences are ambiguous about
    which periods this rule looks at; this reading is the one that matches its tables).
  * r == 0: ``breaching`` -> ALARM, ``notBreaching`` -> OK, ``ignore`` -> keep the current state,
    ``missing`` -> INSUFFICIENT_DATA.
  This reproduces both tables of the AWS page, and its consequence for a silence alarm: with
  ``breaching``, a silent metric alarms once no non-breaching datapoint is left in the range.
- Operators: GreaterThanOrEqualToThreshold, GreaterThanThreshold, LessThanThreshold,
  LessThanOrEqualToThreshold. Not supported (ValueError): percentiles (ExtendedStatistic),
  anomaly-detection bands (ThresholdMetricId), metric-math functions outside that subset, periods that are not a
  multiple of 60 s, composite alarms (not read).

Simplified: metrics have no ingestion delay (a period is final once it ended), the evaluation
happens exactly on the minute, reasons and reasonData follow CloudWatch's layout but not its exact
wording, and ``EvaluateLowSampleCountPercentile`` is ignored.

Speed: a datapoint of a past period never changes, so each series is fetched once per new period
and classified once per alarm. From the data already seen, the evaluator computes for each alarm
the first minute at which any data could change its state (a healthy N-minute silence alarm cannot
fire for N minutes; an ALARM can end any minute); ``next_time`` wakes the drill then, not every
minute. An alarm is evaluated when that minute has come: every boundary since its last evaluation,
exactly, with one ``metric_datapoints`` call per series for all of them. Its state in between is
the one it had (``late_transitions`` counts transitions found after their minute: 0 unless that
bound were wrong; the unit tests check it against exhaustive futures). New, changed and deleted
alarms are noticed cheaply through moto's in-memory backend, and only those are read again with
``describe_alarms``; without a moto backend the evaluator re-reads once per virtual minute and
wakes every minute.

With the simulated SageMaker it goes further (hundreds of hosts over weeks): per-minute GPU series
are *bounded* (``metric_bounds``: stretches of minutes whose values lie in a known range, one per
Training phase), so a stretch far from the threshold is classified at once and values are
computed only where a stretch straddles the threshold or a transition reports them; and the
simulator says which range a series keeps until its job's next phase change
(``metric_bound_now``, ``add_phase_listener``), so an alarm whose state cannot change while the
phases last is not looked at again until one changes the class of its data. A unit test checks
that this decides exactly what the plain path decides minute by minute.
"""

from __future__ import annotations

import bisect
import hashlib
import heapq
import itertools
import json
import math
import operator
import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from drill import metric_math
from sagewarden import keys

__all__ = [
    "ALARM",
    "INSUFFICIENT_DATA",
    "OK",
    "AlarmEvaluator",
    "evaluate_periods",
]

OK = "OK"
ALARM = "ALARM"
INSUFFICIENT_DATA = "INSUFFICIENT_DATA"
INITIAL_REASON = "Unchecked: Initial alarm creation"
MINUTE_MS = 60_000
MAX_MS = 1 << 62
PROMISE_FOREVER = 1 << 40  # periods: the state cannot change until a phase change re-checks it
DEFAULT_ACCOUNT = "123456789012"
DEFAULT_EVALUATION_RANGE_EXTRA = 2

# period classes, stored one byte per period
_GOOD = ord("G")
_BREACH = ord("B")
_MISSING = ord("M")

_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "GreaterThanOrEqualToThreshold": operator.ge,
    "GreaterThanThreshold": operator.gt,
    "LessThanThreshold": operator.lt,
    "LessThanOrEqualToThreshold": operator.le,
}
_OPERATOR_TEXT = {
    "GreaterThanOrEqualToThreshold": "greater than or equal to",
    "GreaterThanThreshold": "greater than",
    "LessThanThreshold": "less than",
    "LessThanOrEqualToThreshold": "less than or equal to",
}
_TREATMENTS = ("breaching", "notBreaching", "ignore", "missing")

# outcome kinds
_ALL_REAL = "all_real"  # >= N real datapoints in the range
_FILLED = "filled"  # some real, fewer than N
_PREMATURE = "premature"  # filled, premature-alarm rule
_NO_DATA = "no_data"  # nothing in the range


class _Clock(Protocol):
    now_ms: int


class _Account(Protocol):
    """What the evaluator needs from the drill account (``drill.account.LocalAccount``)."""

    clock: Any
    cloudwatch: Any
    sagemaker: Any

    def publish_event(self, event: dict[str, Any]) -> None: ...


# ----------------------------------------------------------------------------------------------
# The decision (pure)
# ----------------------------------------------------------------------------------------------


def _decide(window: bytes | bytearray, n: int, m: int, treat: str, current: str) -> tuple[str, str]:
    """(new state, outcome kind) for one evaluation; ``window`` is the range, oldest first."""
    rng = len(window)
    missing = window.count(_MISSING)
    real = rng - missing
    if real >= n:
        last = window[-n:]
        if _MISSING not in last:
            breaching = last.count(_BREACH)
        else:
            breaching = bytes(window).replace(b"M", b"")[-n:].count(_BREACH)
        return (ALARM if breaching >= m else OK), _ALL_REAL
    if real == 0:
        if treat == "breaching":
            return ALARM, _NO_DATA
        if treat == "notBreaching":
            return OK, _NO_DATA
        if treat == "ignore":
            return current, _NO_DATA
        return INSUFFICIENT_DATA, _NO_DATA
    breaching = window.count(_BREACH)
    if treat == "breaching":
        breaching += n - real
    elif treat in ("missing", "ignore") and _GOOD not in window and rng - window.index(_BREACH) >= m:
        return (ALARM if treat == "missing" else current), _PREMATURE
    return (ALARM if breaching >= m else OK), _FILLED


def _evaluated(window: bytes | bytearray, n: int, kind: str) -> list[tuple[int, bool]]:
    """Indexes in ``window`` of the periods the outcome used, newest first: (index, filled)."""
    rng = len(window)
    if kind == _ALL_REAL:
        idx = [i for i in range(rng - 1, -1, -1) if window[i] != _MISSING]
        return [(i, False) for i in idx[:n]]
    if kind == _NO_DATA:
        return [(i, True) for i in range(rng - 1, rng - 1 - n, -1)]
    real = [i for i in range(rng - 1, -1, -1) if window[i] != _MISSING]
    fills = [i for i in range(rng - 1, -1, -1) if window[i] == _MISSING][: max(n - len(real), 0)]
    return sorted([(i, False) for i in real] + [(i, True) for i in fills], reverse=True)


def _stable_periods(window: bytes | bytearray, n: int, m: int, treat: str, state: str) -> int:
    """How many periods from now the state may first change, whatever data arrives (>= 1).

    Only an OK state is proven stable: at j periods ahead the range holds j unknown periods
    followed by the newest ``len(window) - j`` known ones. It stays OK when (1) the known newest
    N - j periods hold more than N - M non-breaching datapoints (they are always evaluated, so at
    most M - 1 can breach; any of them also rules out "no data" and the premature-alarm rule), or, for
    ``notBreaching``/``ignore``, (2) j + (breaching datapoints among the known ones) < M.
    """
    if state != OK:
        return 1
    rng = len(window)
    j = 1
    while True:
        known_last = n - j
        if known_last >= 1 and window[rng - known_last :].count(_GOOD) > n - m:
            j += 1
            continue
        if treat in ("notBreaching", "ignore"):
            known = rng - j
            breaching = window[rng - known :].count(_BREACH) if known > 0 else 0
            if j + breaching < m:
                j += 1
                continue
        return j


def evaluate_periods(
    periods: Sequence[bool | None],
    *,
    evaluation_periods: int,
    datapoints_to_alarm: int | None = None,
    treat_missing_data: str = "missing",
    current_state: str = INSUFFICIENT_DATA,
) -> str:
    """The state CloudWatch sets for an evaluation range, given oldest first as True (breaching),
    False (not breaching) or None (missing). The range may be longer than ``evaluation_periods``.
    """
    if treat_missing_data not in _TREATMENTS:
        raise ValueError(f"unknown TreatMissingData {treat_missing_data!r}")
    if len(periods) < evaluation_periods:
        raise ValueError("the evaluation range is shorter than EvaluationPeriods")
    window = bytes(_MISSING if p is None else (_BREACH if p else _GOOD) for p in periods)
    m = datapoints_to_alarm or evaluation_periods
    return _decide(window, evaluation_periods, m, treat_missing_data, current_state)[0]


# ----------------------------------------------------------------------------------------------
# Alarm configuration (parsed from describe_alarms)
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SeriesKey:
    namespace: str
    metric: str
    dimensions: tuple[tuple[str, str], ...]
    period_s: int
    stat: str


@dataclass(frozen=True)
class _Query:
    id: str
    series: SeriesKey | None  # a MetricStat
    node: metric_math.Node | None  # a math expression (drill/metric_math.py)
    args: tuple[str, ...]  # the ids the expression refers to
    label: str | None
    return_data: bool
    expression: str | None = None  # as configured


@dataclass(frozen=True)
class AlarmConfig:
    name: str
    description: str
    period_s: int
    evaluation_periods: int
    datapoints_to_alarm: int
    threshold: float
    comparison: str
    treat_missing: str
    queries: tuple[_Query, ...]
    return_id: str
    statistic: str | None  # single-metric alarms only
    series: tuple[SeriesKey, ...] = ()  # the MetricStats, in order


def _state_of(entry: dict[str, Any]) -> tuple[Any, Any]:
    return entry.get("StateValue"), entry.get("StateReason")


def _flag(value: Any) -> bool:
    """A ReturnData flag as moto may keep it (bool, or the query protocol's string)."""
    if isinstance(value, str):
        return value.strip().lower() != "false"
    return True if value is None else bool(value)


def _entry_from_backend(alarm: Any) -> dict[str, Any]:
    """A describe_alarms MetricAlarms entry built from moto's stored alarm (see _read_changed)."""
    entry: dict[str, Any] = {
        "AlarmName": alarm.name,
        "AlarmDescription": alarm.description,
        "ComparisonOperator": alarm.comparison_operator,
        "EvaluationPeriods": alarm.evaluation_periods,
        "Threshold": alarm.threshold,
        "StateValue": alarm.state_value,
        "StateReason": alarm.state_reason,
    }
    for key, attr in (
        ("DatapointsToAlarm", "datapoints_to_alarm"),
        ("TreatMissingData", "treat_missing_data"),
        ("ExtendedStatistic", "extended_statistic"),
        ("ThresholdMetricId", "threshold_metric_id"),
    ):
        value = getattr(alarm, attr, None)
        if value is not None:
            entry[key] = value
    if alarm.metric_data_queries:
        metrics: list[dict[str, Any]] = []
        for q in alarm.metric_data_queries:
            query: dict[str, Any] = {"Id": q.id, "ReturnData": _flag(q.return_data)}
            if q.metric_stat is not None:
                ms = q.metric_stat
                query["MetricStat"] = {
                    "Metric": {
                        "Namespace": ms.metric.namespace,
                        "MetricName": ms.metric.metric_name,
                        "Dimensions": [{"Name": d.name, "Value": d.value} for d in ms.metric.dimensions],
                    },
                    "Period": int(ms.period),
                    "Stat": ms.stat,
                }
            if q.expression is not None:
                query["Expression"] = q.expression
            if q.label is not None:
                query["Label"] = q.label
            metrics.append(query)
        entry["Metrics"] = metrics
    else:
        entry["Namespace"] = alarm.namespace
        entry["MetricName"] = alarm.metric_name
        entry["Dimensions"] = [{"Name": d.name, "Value": d.value} for d in alarm.dimensions]
        entry["Period"] = alarm.period
        entry["Statistic"] = alarm.statistic
    return entry


def _job_of(key: SeriesKey) -> str:
    """The training job a series belongs to (its Host or job-name dimension)."""
    for name, value in key.dimensions:
        return value.rpartition("/")[0] if name == "Host" else value
    return ""


def _dims(raw: Sequence[dict[str, str]] | None) -> tuple[tuple[str, str], ...]:
    return tuple((d["Name"], d["Value"]) for d in raw or ())


def _period(value: Any, name: str) -> int:
    period = int(value or 0)
    if period <= 0 or period % 60:
        raise ValueError(f"alarm {name}: period {period!r} s is not supported (multiples of 60 s only)")
    return period


def parse_alarm(raw: dict[str, Any]) -> AlarmConfig:
    """An ``AlarmConfig`` from one ``describe_alarms`` MetricAlarms entry (ValueError if unsupported)."""
    name = str(raw["AlarmName"])
    if raw.get("ExtendedStatistic"):
        raise ValueError(f"alarm {name}: percentile statistics are not supported")
    if raw.get("ThresholdMetricId"):
        raise ValueError(f"alarm {name}: anomaly-detection alarms are not supported")
    comparison = str(raw.get("ComparisonOperator", ""))
    if comparison not in _OPERATORS:
        raise ValueError(f"alarm {name}: comparison operator {comparison!r} is not supported")
    treat = str(raw.get("TreatMissingData") or "missing")
    if treat not in _TREATMENTS:
        raise ValueError(f"alarm {name}: TreatMissingData {treat!r} is not supported")
    n = int(raw["EvaluationPeriods"])
    m = int(raw.get("DatapointsToAlarm") or n)
    if not 1 <= m <= n:
        raise ValueError(f"alarm {name}: DatapointsToAlarm {m} is not within 1..{n}")
    queries: list[_Query] = []
    statistic: str | None = None
    metrics = raw.get("Metrics") or []
    if metrics:
        periods: set[int] = set()
        for q in metrics:
            qid = str(q["Id"])
            if "MetricStat" in q:
                ms = q["MetricStat"]
                metric = ms["Metric"]
                period = _period(ms.get("Period"), name)
                periods.add(period)
                key = SeriesKey(
                    metric["Namespace"],
                    metric["MetricName"],
                    _dims(metric.get("Dimensions")),
                    period,
                    ms["Stat"],
                )
                queries.append(_Query(qid, key, None, (), q.get("Label"), bool(q.get("ReturnData", True))))
            elif "Expression" in q:
                node, args = _parse_expression(str(q["Expression"]), name)
                queries.append(
                    _Query(
                        qid,
                        None,
                        node,
                        args,
                        q.get("Label"),
                        bool(q.get("ReturnData", True)),
                        str(q["Expression"]),
                    )
                )
            else:
                raise ValueError(f"alarm {name}: metric query {qid} has neither MetricStat nor Expression")
        if len(periods) != 1:
            raise ValueError(f"alarm {name}: every metric of a math alarm must use the same period")
        period_s = periods.pop()
        returned = [q.id for q in queries if q.return_data]
        if len(returned) != 1:
            raise ValueError(f"alarm {name}: exactly one metric query must return data")
        return_id = returned[0]
        _check_references(queries, return_id, name)
    else:
        period_s = _period(raw.get("Period"), name)
        statistic = str(raw.get("Statistic") or "")
        if not statistic:
            raise ValueError(f"alarm {name}: no Statistic")
        key = SeriesKey(
            raw["Namespace"], raw["MetricName"], _dims(raw.get("Dimensions")), period_s, statistic
        )
        return_id = "m1"
        queries.append(_Query(return_id, key, None, (), None, True))
    return AlarmConfig(
        name=name,
        description=str(raw.get("AlarmDescription") or ""),
        period_s=period_s,
        evaluation_periods=n,
        datapoints_to_alarm=m,
        threshold=float(raw["Threshold"]),
        comparison=comparison,
        treat_missing=treat,
        queries=tuple(queries),
        return_id=return_id,
        statistic=statistic,
        series=tuple(q.series for q in queries if q.series is not None),
    )


def _parse_expression(expr: str, alarm: str) -> tuple[metric_math.Node, tuple[str, ...]]:
    try:
        node = metric_math.parse(expr)
    except metric_math.MathError as exc:
        raise ValueError(f"alarm {alarm}: expression {expr!r} is not supported: {exc}") from exc
    return node, tuple(dict.fromkeys(metric_math.references(node)))


def _check_references(queries: list[_Query], root: str, alarm: str) -> None:
    by_id = {q.id: q for q in queries}
    visiting: set[str] = set()

    def visit(qid: str) -> None:
        if qid not in by_id:
            raise ValueError(f"alarm {alarm}: expression refers to unknown id {qid!r}")
        if qid in visiting:
            raise ValueError(f"alarm {alarm}: expressions refer to each other in a cycle at {qid!r}")
        visiting.add(qid)
        for arg in by_id[qid].args:
            visit(arg)
        visiting.discard(qid)

    visit(root)


def _value_function(
    config: AlarmConfig, points: dict[SeriesKey, dict[int, float]]
) -> Callable[[int], float | None]:
    """bucket start (ms) -> the alarm's value for that period (None = missing)."""
    by_id = {q.id: q for q in config.queries}
    period_ms = config.period_s * 1000
    built: dict[str, Callable[[int], float | None]] = {}

    def build(qid: str) -> Callable[[int], float | None]:
        if qid not in built:
            q = by_id[qid]
            if q.series is not None:
                built[qid] = points[q.series].get
            else:
                assert q.node is not None
                refs = {a: build(a) for a in q.args}
                built[qid] = metric_math.value_function(q.node, refs, period_ms)
        return built[qid]

    return build(config.return_id)


Bound = tuple[float, float]


def _bound_function(config: AlarmConfig) -> Callable[[dict[SeriesKey, Bound | None]], Bound | None]:
    """Each series' (lo, hi) over a stretch (None = no datapoint) -> the alarm value's (lo, hi)
    (metric_math.UNBOUNDED when it cannot be told: the stretch is then computed exactly)."""
    by_id = {q.id: q for q in config.queries}

    def build(qid: str) -> Callable[[dict[SeriesKey, Bound | None]], Bound | None]:
        q = by_id[qid]
        if q.series is not None:
            key = q.series
            return lambda states: states[key]
        assert q.node is not None
        refs = {a: build(a) for a in q.args}
        inner = metric_math.bound_function(q.node, refs)  # type: ignore[arg-type]
        return lambda states: inner(states)  # type: ignore[arg-type]

    return build(config.return_id)


# ----------------------------------------------------------------------------------------------
# Formatting
# ----------------------------------------------------------------------------------------------


def _dt(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def iso_event_time(ms: int) -> str:
    """EventBridge envelope ``time``: ``2026-01-05T10:00:00Z``."""
    return _dt(ms).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_state_time(ms: int) -> str:
    """CloudWatch state timestamps: ``2026-01-05T10:00:00.000+0000``."""
    return _dt(ms).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}+0000"


def _reason_time(ms: int) -> str:
    return _dt(ms).strftime("%d/%m/%y %H:%M:%S")


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _was(count: int) -> str:
    return "was" if count == 1 else "were"


def _stable_uuid(*parts: object) -> str:
    digest = hashlib.sha256("|".join(str(p) for p in parts).encode()).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


# ----------------------------------------------------------------------------------------------
# Runtime state
# ----------------------------------------------------------------------------------------------


@dataclass
class _SeriesData:
    points: dict[int, float] = field(default_factory=dict)
    lo: int = 0  # fetched range [lo, hi)
    hi: int = 0
    # bounded series (see "Speed" in the module docstring): stretches (first, end, lo, hi) of the
    # fetched range, sorted; ``points`` then holds only the values computed on demand
    bounded: bool | None = None  # None until the first fetch decides
    bounds: list[tuple[int, int, float, float]] = field(default_factory=list)


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

    @property
    def period_ms(self) -> int:
        return self.config.period_s * 1000

    @property
    def filled_to(self) -> int:
        return self.base + len(self.classes) * self.period_ms


@dataclass(frozen=True)
class _Transition:
    at_ms: int
    alarm: _AlarmState
    old: str
    new: str
    reason: str
    reason_data: str
    previous: tuple[str, str, int]  # reason, reason data, timestamp of the old state


class AlarmEvaluator:
    """Evaluates the supervisor's CloudWatch alarms in the drill (see the module docstring)."""

    def __init__(
        self,
        acct: _Account,
        *,
        period_ms: int = MINUTE_MS,
        prefix: str | None = None,
        evaluation_range_extra: int = DEFAULT_EVALUATION_RANGE_EXTRA,
        account_id: str = DEFAULT_ACCOUNT,
        region: str | None = None,
    ) -> None:
        if period_ms <= 0 or period_ms % MINUTE_MS:
            raise ValueError("period_ms must be a positive multiple of 60000")
        if evaluation_range_extra < 0:
            raise ValueError("evaluation_range_extra must be >= 0")
        self.acct = acct
        self.clock: _Clock = acct.clock
        self.cloudwatch = acct.cloudwatch
        self.sagemaker = acct.sagemaker
        self.period_ms = period_ms
        self.prefix = keys.DEFAULT_ALARM_PREFIX if prefix is None else prefix
        self.range_extra = evaluation_range_extra
        self.account_id = account_id
        self.region = (
            region or getattr(getattr(self.cloudwatch, "meta", None), "region_name", None) or "us-east-1"
        )
        self.states: dict[str, str] = {}
        self.transitions: list[tuple[int, str, str, str]] = []
        self.events: list[dict[str, Any]] = []
        self.late_transitions = 0
        self.refreshes = 0  # describe_alarms reads (diagnostics)
        self.fetches = 0  # metric_datapoints calls (diagnostics)
        self._alarms: dict[str, _AlarmState] = {}
        self._series: dict[SeriesKey, _SeriesData] = {}
        self._evaluated_to = self._boundary(self.clock.now_ms)
        self._backend = self._moto_backend()
        self._fingerprint: dict[str, tuple[int, Any]] | None = None
        self._backend_reads: bool | None = None  # None until a read through the API has compared
        self._queue: list[tuple[int, str]] = []  # (next_check, alarm name); stale entries skipped
        self._touched: set[str] = set()  # alarm names put or deleted through the client since the last read
        self._backend_size = -1
        self._hooked = self._hook_client()
        self._users: dict[SeriesKey, set[str]] = {}  # series -> names of the alarms reading it
        self._dirty = True
        self._last_refresh_minute: int | None = None
        # phase changes of the simulated jobs (see "Speed" in the module docstring)
        self._job_alarms: dict[str, set[str]] = {}  # job name -> alarms reading one of its series
        self._dirty_jobs: dict[str, list[int]] = {}  # job -> [first, last, unsure] changes not yet settled
        listen = getattr(self.sagemaker, "add_phase_listener", None)
        self._promises = listen is not None and hasattr(self.sagemaker, "metric_bound_now")
        if listen is not None and self._promises:
            listen(self._on_phase_change)

    # -- public ----------------------------------------------------------------------------------
    def next_time(self) -> int | None:
        """The next minute boundary at which an alarm may change state (None without alarms)."""
        self._settle()
        nxt = self._evaluated_to + self.period_ms
        if self._backend is None or self._changed():
            return nxt
        earliest = self._earliest_check()
        if earliest is None:
            return None
        return max(nxt, earliest)

    def evaluate_due(self) -> list[dict[str, Any]]:
        """Evaluate every alarm at every boundary up to now; returns the events published."""
        now = self.clock.now_ms
        target = self._boundary(now)
        self._settle()
        found = self._refresh(now, target)
        # an alarm is evaluated (every boundary since its last evaluation, exactly) once a change
        # has become possible; until then its state provably stays, and its fetches are batched
        pending = self._due_alarms(target)
        if pending:
            self._fetch(pending, target)
            for alarm in pending:
                found += self._evaluate(alarm, target)
        self._evaluated_to = max(self._evaluated_to, target)
        found.sort(key=lambda t: (t.at_ms, t.alarm.config.name))
        published = []
        for tr in found:
            if tr.at_ms < target:
                self.late_transitions += 1
            published.append(self._announce(tr))
        return published

    # -- alarms ----------------------------------------------------------------------------------
    def _boundary(self, ms: int) -> int:
        return ms - ms % self.period_ms

    def _schedule(self, alarm: _AlarmState, at: int) -> None:
        """Set the alarm's next check; the queue keeps the earliest at hand (no scan per step)."""
        if at != alarm.next_check or not alarm.queued:
            alarm.next_check = at
            alarm.queued = True
            heapq.heappush(self._queue, (at, alarm.config.name))

    def _earliest_check(self) -> int | None:
        queue = self._queue
        while queue:
            at, name = queue[0]
            alarm = self._alarms.get(name)
            if alarm is not None and alarm.next_check == at:
                return at
            heapq.heappop(queue)  # stale: the alarm was forgotten or rescheduled
        return None

    def _due_alarms(self, target: int) -> list[_AlarmState]:
        due: dict[str, _AlarmState] = {}
        queue = self._queue
        while queue and queue[0][0] <= target:
            at, name = heapq.heappop(queue)
            alarm = self._alarms.get(name)
            if alarm is not None and alarm.next_check == at:
                alarm.queued = False
                if alarm.evaluated_to < target:
                    due[name] = alarm
                else:  # pragma: no cover - a check is always after the last evaluation
                    self._schedule(alarm, alarm.evaluated_to + self.period_ms)
        return [due[name] for name in sorted(due)]

    def _hook_client(self) -> bool:
        """Note the alarms put or deleted through the account's CloudWatch client, so that a
        change is seen without scanning every alarm at every step."""
        events = getattr(getattr(self.cloudwatch, "meta", None), "events", None)
        if events is None or self._backend is None:
            return False

        def put(params: dict[str, Any], **_: Any) -> None:
            self._touched.add(str(params.get("AlarmName", "")))

        def delete(params: dict[str, Any], **_: Any) -> None:
            self._touched.update(str(n) for n in params.get("AlarmNames", []))

        events.register("before-parameter-build.cloudwatch.PutMetricAlarm", put)
        events.register("before-parameter-build.cloudwatch.DeleteAlarms", delete)
        return True

    def _moto_backend(self) -> Any | None:
        try:
            from moto.cloudwatch.models import cloudwatch_backends
            from moto.core import DEFAULT_ACCOUNT_ID
        except ImportError:  # pragma: no cover - moto is a dev dependency
            return None
        try:
            account = os.environ.get("MOTO_ACCOUNT_ID", DEFAULT_ACCOUNT_ID)
            return cloudwatch_backends[account][self.region]
        except Exception:  # pragma: no cover - not a moto account
            return None

    def _backend_fingerprint(self) -> dict[str, tuple[int, Any]]:
        prefix = self.prefix
        return {
            name: (id(alarm), getattr(alarm, "configuration_updated_timestamp", None))
            for name, alarm in self._backend.alarms.items()  # type: ignore[union-attr]
            if name.startswith(prefix) and getattr(alarm, "rule", None) is None
        }

    def _changed(self) -> bool:
        if self._dirty:
            return True
        if self._hooked:
            # alarms put or deleted through the client are noted; anyone else's creation or
            # deletion shows in the backend's size (a re-put by another client would be missed)
            if self._touched or len(self._backend.alarms) != self._backend_size:  # type: ignore[union-attr]
                self._dirty = True
            return self._dirty
        if self._backend_fingerprint() != self._fingerprint:
            self._dirty = True
        return self._dirty

    def _refresh(self, now: int, target: int) -> list[_Transition]:
        """Re-read the alarms if they may have changed; returns transitions of updated alarms' catch-up."""
        found: list[_Transition] = []
        if self._backend is not None:
            if not self._changed():
                return found
        else:
            minute = now // MINUTE_MS
            if minute == self._last_refresh_minute:
                return found
            self._last_refresh_minute = minute
        self.refreshes += 1
        previous = self._fingerprint
        touched, self._touched = self._touched, set()
        if self._backend is None:
            fingerprint = None
        elif (
            previous is not None
            and self._hooked
            and len(self._backend.alarms)
            == self._backend_size + sum((n in self._backend.alarms) - (n in previous) for n in touched)
        ):
            # only the touched alarms can differ: update their entries, keep the rest
            fingerprint = dict(previous)
            for name in touched:
                alarm = self._backend.alarms.get(name)
                if (
                    alarm is not None
                    and name.startswith(self.prefix)
                    and getattr(alarm, "rule", None) is None
                ):
                    fingerprint[name] = (id(alarm), getattr(alarm, "configuration_updated_timestamp", None))
                else:
                    fingerprint.pop(name, None)
        else:
            fingerprint = self._backend_fingerprint()
        self._backend_size = len(self._backend.alarms) if self._backend is not None else -1
        if previous is not None and fingerprint is not None:
            # read only the alarms that are new or were re-put since the last read
            changed = sorted(n for n, v in fingerprint.items() if previous.get(n) != v)
            raw = self._read_changed(changed) if changed else {}
            gone = [n for n in self._alarms if n not in fingerprint]
            if sorted(raw) != changed:  # not the backend behind this client after all
                fingerprint = None
        if previous is None or fingerprint is None:
            raw = self._describe()
            gone = [n for n in self._alarms if n not in raw]
            if fingerprint is not None and sorted(fingerprint) != sorted(raw):
                fingerprint = None
            if fingerprint is None:
                self._backend = None  # not the backend behind this client: re-read every minute
        self._fingerprint = fingerprint
        self._dirty = False
        for name in gone:
            self._forget(name)  # deleted: forgotten, no event
        for name in sorted(raw):
            entry = raw[name]
            config = parse_alarm(entry)
            alarm = self._alarms.get(name)
            if alarm is None:
                alarm = _AlarmState(
                    config=config,
                    state=INSUFFICIENT_DATA,
                    reason=INITIAL_REASON,
                    reason_data="",
                    state_ms=now,
                    evaluated_to=target,
                    next_check=-1,
                    value_of=self._bind(config),
                    bound_of=_bound_function(config),
                )
                self._alarms[name] = alarm
                self.states[name] = alarm.state
                self._use(name, config)
                self._schedule(alarm, target + self.period_ms)
            elif alarm.config != config:  # updated: same state, new configuration
                # boundaries passed before the update was noticed are evaluated with the old one
                if alarm.evaluated_to < self._evaluated_to:
                    self._fetch([alarm], self._evaluated_to)
                    found += self._evaluate(alarm, self._evaluated_to)
                self._unuse(name, alarm.config)
                alarm.config = config
                self._use(name, config)
                alarm.value_of = self._bind(config)
                alarm.bound_of = _bound_function(config)
                alarm.classes = bytearray()
                alarm.values = []
                alarm.last_end = None
                self._schedule(alarm, alarm.evaluated_to + self.period_ms)
            if (entry.get("StateValue"), entry.get("StateReason")) != (alarm.state, alarm.reason):
                # moto starts a new (or re-put) alarm in OK; CloudWatch in INSUFFICIENT_DATA (or unchanged)
                self._set_moto_state(name, alarm.state, alarm.reason, alarm.reason_data)
        return found

    def _use(self, name: str, config: AlarmConfig) -> None:
        for key in config.series:
            self._users.setdefault(key, set()).add(name)
            self._job_alarms.setdefault(_job_of(key), set()).add(name)

    def _unuse(self, name: str, config: AlarmConfig) -> None:
        for key in config.series:
            users = self._users.get(key)
            if users is None:
                continue
            users.discard(name)
            if not users:  # no alarm reads this series any more
                del self._users[key]
                self._series.pop(key, None)
            job = _job_of(key)
            readers = self._job_alarms.get(job)
            if readers is not None and not any(name in self._users.get(k, ()) for k in config.series):
                readers.discard(name)
                if not readers:
                    del self._job_alarms[job]

    def _on_phase_change(self, job: str, at_ms: int) -> None:
        """A job's phase opened or closed (called by the simulator while it changes the job):
        noted, and settled once the simulator is done (``_settle``)."""
        if job not in self._job_alarms:
            return
        seen = self._dirty_jobs.get(job)
        if seen is None:
            self._dirty_jobs[job] = [at_ms, at_ms, 0]
            return
        if -(-seen[1] // MINUTE_MS) * MINUTE_MS < at_ms:  # a phase in between held a sample
            seen[2] = 1
        seen[1] = at_ms

    def _settle(self) -> None:
        """Alarms reading a job whose phase changed look again from the first minute after the
        change, unless the data they were promised keeps its class (e.g. training -> checkpoint
        save, both far above an idle threshold)."""
        if not self._dirty_jobs:
            return
        dirty, self._dirty_jobs = self._dirty_jobs, {}
        for job, (first, last, unsure) in dirty.items():
            for name in self._job_alarms.get(job, ()):
                alarm = self._alarms.get(name)
                if alarm is None:
                    continue
                if unsure or alarm.promise is None or self._future_class(alarm) != alarm.promise:
                    self._schedule(alarm, min(alarm.next_check, self._first_check_after(alarm, first)))
                    alarm.changed_ms = last

    def _first_check_after(self, alarm: _AlarmState, at_ms: int) -> int:
        bucket = -(-at_ms // MINUTE_MS) * MINUTE_MS  # the first sample of the new phase
        end = -(-(bucket + 1) // alarm.period_ms) * alarm.period_ms  # its period's end
        return max(-(-end // self.period_ms) * self.period_ms, alarm.evaluated_to + self.period_ms)

    def _forget(self, name: str) -> None:
        alarm = self._alarms.pop(name)
        self.states.pop(name, None)
        self._unuse(name, alarm.config)

    def _describe(self, names: list[str] | None = None) -> dict[str, dict[str, Any]]:
        """The alarms under the prefix (all of them, or only ``names``), by name."""
        out: dict[str, dict[str, Any]] = {}
        paginator = self.cloudwatch.get_paginator("describe_alarms")
        if names is None:
            pages = [paginator.paginate(AlarmNamePrefix=self.prefix, AlarmTypes=["MetricAlarm"])]
        else:
            pages = [
                paginator.paginate(AlarmNames=names[i : i + 100], AlarmTypes=["MetricAlarm"])
                for i in range(0, len(names), 100)
            ]
        for pager in pages:
            for page in pager:
                for entry in page.get("MetricAlarms", []):
                    if entry["AlarmName"].startswith(self.prefix):
                        out[entry["AlarmName"]] = entry
        return out

    def _bind(self, config: AlarmConfig) -> Callable[[int], float | None]:
        points = {key: self._series.setdefault(key, _SeriesData()).points for key in config.series}
        return _value_function(config, points)

    def _read_changed(self, names: list[str]) -> dict[str, dict[str, Any]]:
        """New or re-put alarms, by name. The evaluator is CloudWatch's own evaluation engine in
        the drill, so once a read through the API has shown that the backend's alarms convert to
        the same entries, it reads them from moto's backend directly (no API round trip, which
        costs ~50 ms for two dozen 10-metric alarms)."""
        backend = self._backend
        if self._backend_reads and backend is not None:
            found = {n: _entry_from_backend(backend.alarms[n]) for n in names if n in backend.alarms}
            if sorted(found) == names:
                return found
        raw = self._describe(names)
        if self._backend_reads is None and raw and self._backend is not None:
            try:
                same = all(
                    parse_alarm(entry) == parse_alarm(_entry_from_backend(self._backend.alarms[name]))
                    and _state_of(entry) == _state_of(_entry_from_backend(self._backend.alarms[name]))
                    for name, entry in raw.items()
                )
            except Exception:  # an attribute moto renamed: keep reading through the API
                same = False
            self._backend_reads = same
        return raw

    def _set_moto_state(self, name: str, value: str, reason: str, data: str) -> None:
        if self._backend_reads and self._backend is not None:  # the engine writes its own state
            alarm = self._backend.alarms.get(name)
            if alarm is None:
                self._dirty = True  # deleted meanwhile: forgotten at the next refresh
            else:
                alarm.update_state(reason, data or "{}", value)
            return
        try:
            self.cloudwatch.set_alarm_state(
                AlarmName=name, StateValue=value, StateReason=reason, StateReasonData=data or "{}"
            )
        except Exception as exc:  # deleted meanwhile: forgotten at the next refresh
            if "ResourceNotFound" not in str(exc):
                raise
            self._dirty = True

    # -- data ------------------------------------------------------------------------------------
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
        if data.bounds:
            data.bounds = [b for b in data.bounds if b[1] > keep_from]
        data.lo = min(keep_from, data.hi)

    # -- evaluation ------------------------------------------------------------------------------
    def _evaluate(self, alarm: _AlarmState, target: int) -> list[_Transition]:
        cfg = alarm.config
        p = alarm.period_ms
        rng = self._range(alarm)
        n, m, treat = cfg.evaluation_periods, cfg.datapoints_to_alarm, cfg.treat_missing
        found: list[_Transition] = []
        window = alarm.classes
        for boundary in range(alarm.evaluated_to + self.period_ms, target + 1, self.period_ms):
            end = boundary // p * p
            if end == alarm.last_end:
                continue  # same periods as the last evaluation: same outcome
            alarm.last_end = end
            hi = (end - alarm.base) // p
            assert hi >= rng, "the alarm's periods do not cover its evaluation range"
            win = window[hi - rng : hi]
            state, kind = _decide(win, n, m, treat, alarm.state)
            if state != alarm.state:
                reason, data = self._reason(alarm, win, hi - rng, kind, state, boundary)
                found.append(
                    _Transition(
                        boundary,
                        alarm,
                        alarm.state,
                        state,
                        reason,
                        data,
                        (alarm.reason, alarm.reason_data, alarm.state_ms),
                    )
                )
                alarm.state, alarm.reason, alarm.reason_data, alarm.state_ms = state, reason, data, boundary
                self.states[cfg.name] = state
        alarm.evaluated_to = target
        if alarm.last_end is not None:
            hi = (alarm.last_end - alarm.base) // p
            last = window[hi - rng : hi]
            j = _stable_periods(last, n, m, treat, alarm.state)
            changed = alarm.changed_ms
            alarm.promise = None
            if changed is None or changed < alarm.last_end:
                promised = self._promise(alarm, last)
                if promised is not None:  # the data to come is known until a phase change
                    j = max(j, promised)
            change = alarm.last_end + j * p  # first window end whose outcome may differ
            change = -(-change // self.period_ms) * self.period_ms
            at = max(change, target + self.period_ms)
            if changed is not None and changed >= alarm.last_end:  # changed since that window: look again
                at = min(at, self._first_check_after(alarm, changed))
            self._schedule(alarm, at)
        else:
            self._schedule(alarm, target + self.period_ms)
        return found

    def _future_class(self, alarm: _AlarmState) -> int | None:
        """The class every period will have while the alarm's jobs keep their current phases
        (bounded series only; None when it cannot be told)."""
        cfg = alarm.config
        states: dict[SeriesKey, Bound | None] = {}
        for key in cfg.series:
            if key in states:
                continue
            bounded, bound = self.sagemaker.metric_bound_now(
                key.namespace, key.metric, dict(key.dimensions), key.period_s, key.stat
            )
            if not bounded:
                return None
            states[key] = bound
        future = alarm.bound_of(states)
        compare = _OPERATORS[cfg.comparison]
        if future is None:
            return _MISSING
        if compare(future[0], cfg.threshold) == compare(future[1], cfg.threshold):
            return _BREACH if compare(future[0], cfg.threshold) else _GOOD
        return None

    def _promise(self, alarm: _AlarmState, window: bytes | bytearray) -> int | None:
        """Periods until the state may change if every series keeps the datapoints it has now
        (a bounded series does until its job's next phase change, which ``_settle`` looks at):
        None when that cannot be promised; a very large number when it never changes."""
        cfg = alarm.config
        if not self._promises or alarm.last_end is None:
            return None
        c = self._future_class(alarm)
        if c is None:
            return None
        alarm.promise = c
        n, m, treat = cfg.evaluation_periods, cfg.datapoints_to_alarm, cfg.treat_missing
        win, state = bytes(window), alarm.state
        for j in range(1, len(win) + 2):
            win = win[1:] + bytes([c])
            new, _ = _decide(win, n, m, treat, state)
            if new != alarm.state:
                return j
            state = new
        return PROMISE_FOREVER

    def _reason(
        self, alarm: _AlarmState, win: bytearray, offset: int, kind: str, state: str, at_ms: int
    ) -> tuple[str, str]:
        """StateReason and StateReasonData (JSON) of a transition, in CloudWatch's layout."""
        cfg = alarm.config
        p = alarm.period_ms
        n, m = cfg.evaluation_periods, cfg.datapoints_to_alarm
        used = _evaluated(win, n, kind)  # newest first
        when = [alarm.base + (offset + i) * p for i, _ in used]
        for i, filled in used:
            v = alarm.values[offset + i]
            if not filled and v is not None and math.isnan(v):  # a bounded period: compute it now
                alarm.values[offset + i] = self._exact_value(alarm, alarm.base + (offset + i) * p)
        vals = [None if filled else alarm.values[offset + i] for i, filled in used]
        real = [(v, t) for v, t in zip(vals, when, strict=True) if v is not None]
        fills = len(vals) - len(real)
        breaches = _OPERATORS[cfg.comparison]
        treated = {"breaching": "Breaching", "notBreaching": "NonBreaching"}.get(cfg.treat_missing)
        if kind == _NO_DATA and state == INSUFFICIENT_DATA:
            reason = f"Insufficient Data: {_plural(len(win), 'datapoint')} {_was(len(win))} unknown."
        elif kind == _NO_DATA:
            reason = (
                f"Threshold Crossed: no datapoints were received for {_plural(len(win), 'period')} and "
                f"{_plural(n, 'missing datapoint')} {_was(n)} treated as [{treated}]."
            )
        else:
            listed = ", ".join(f"{v!r} ({_reason_time(t)})" for v, t in real)
            real_breaching = sum(1 for v, _ in real if breaches(v, cfg.threshold))
            counted_fills = fills if kind == _FILLED and treated is not None else 0
            if state == ALARM:
                count = real_breaching + (counted_fills if treated == "Breaching" else 0)
                verb, need = _was(count), m
            else:
                count = len(real) - real_breaching + (counted_fills if treated == "NonBreaching" else 0)
                verb, need = f"{_was(count)} not", n - m + 1
            note = ""
            if counted_fills:
                note = f" ({_plural(counted_fills, 'missing datapoint')} treated as [{treated}])"
            elif fills:
                note = f" ({fills} missing)"
            reason = (
                f"Threshold Crossed: {count} out of the last {_plural(n, 'datapoint')} [{listed}]{note} {verb} "
                f"{_OPERATOR_TEXT[cfg.comparison]} the threshold ({cfg.threshold!r}) "
                f"(minimum {_plural(need, 'datapoint')} for {alarm.state} -> {state} transition)."
            )
        data: dict[str, Any] = {
            "version": "1.0",
            "queryDate": iso_state_time(at_ms),
            "startDate": iso_state_time(when[-1] if when else alarm.base + offset * p),
        }
        if cfg.statistic is not None:
            data["statistic"] = cfg.statistic
        data["period"] = cfg.period_s
        data["recentDatapoints"] = [v for v, _ in reversed(real)]
        data["threshold"] = cfg.threshold
        data["evaluatedDatapoints"] = [
            {"timestamp": iso_state_time(t)} if v is None else {"timestamp": iso_state_time(t), "value": v}
            for v, t in zip(vals, when, strict=True)
        ]
        return reason, json.dumps(data, separators=(",", ":"))

    # -- events ----------------------------------------------------------------------------------
    def _announce(self, tr: _Transition) -> dict[str, Any]:
        alarm = tr.alarm
        cfg = alarm.config
        self.transitions.append((tr.at_ms, cfg.name, tr.old, tr.new))
        if cfg.name in self._alarms:
            self._set_moto_state(cfg.name, tr.new, tr.reason, tr.reason_data)
        prev_reason, prev_data, prev_ms = tr.previous
        previous: dict[str, Any] = {"value": tr.old, "reason": prev_reason}
        if prev_data:
            previous["reasonData"] = prev_data
        previous["timestamp"] = iso_state_time(prev_ms)
        event = {
            "version": "0",
            "id": _stable_uuid("alarm-state-change", cfg.name, tr.at_ms, tr.old, tr.new),
            "detail-type": "CloudWatch Alarm State Change",
            "source": "aws.cloudwatch",
            "account": self.account_id,
            "time": iso_event_time(tr.at_ms),
            "region": self.region,
            "resources": [f"arn:aws:cloudwatch:{self.region}:{self.account_id}:alarm:{cfg.name}"],
            "detail": {
                "alarmName": cfg.name,
                "state": {
                    "value": tr.new,
                    "reason": tr.reason,
                    "reasonData": tr.reason_data,
                    "timestamp": iso_state_time(tr.at_ms),
                },
                "previousState": previous,
                "configuration": {"description": cfg.description, "metrics": self._event_metrics(cfg)},
            },
        }
        self.events.append(event)
        self.acct.publish_event(event)
        return event

    @staticmethod
    def _event_metrics(cfg: AlarmConfig) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        single = cfg.statistic is not None
        for q in cfg.queries:
            if q.series is not None:
                s = q.series
                out.append(
                    {
                        "id": _stable_uuid("metric", cfg.name, q.id) if single else q.id,
                        "metricStat": {
                            "metric": {
                                "namespace": s.namespace,
                                "name": s.metric,
                                "dimensions": dict(s.dimensions),
                            },
                            "period": s.period_s,
                            "stat": s.stat,
                        },
                        "returnData": q.return_data,
                    }
                )
            else:
                entry: dict[str, Any] = {"id": q.id, "expression": q.expression}
                if q.label is not None:
                    entry["label"] = q.label
                entry["returnData"] = q.return_data
                out.append(entry)
        return out
