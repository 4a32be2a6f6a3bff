"""The supervisor's alarms as the evaluator reads them: `describe_alarms` entries as `AlarmConfig`,
and each alarm's value per period.

Percentiles, anomaly bands and composite alarms raise ValueError. Why: docs/fidelity.md."""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from drill.alarms import metric_math
from drill.alarms.decision import _TREATMENTS

_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "GreaterThanOrEqualToThreshold": operator.ge,
    "GreaterThanThreshold": operator.gt,
    "LessThanThreshold": operator.lt,
    "LessThanOrEqualToThreshold": operator.le,
}
MAX_METRICS = 10  # MetricStat queries per metric-math alarm (a hard CloudWatch limit)
DAY_S = 86_400  # EvaluationPeriods x Period may not exceed one day


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
    node: metric_math.Node | None  # a math expression (drill/alarms/metric_math.py)
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
        stats = sum(1 for q in queries if q.series is not None)
        if stats > MAX_METRICS:  # "a math expression used for an alarm can include as many as 10 metrics"
            raise ValueError(
                f"alarm {name}: {stats} metrics; an alarm's metric math may use at most {MAX_METRICS}"
            )
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
    if n * period_s > DAY_S:  # "Evaluation Periods multiplied by the period cannot exceed one day"
        raise ValueError(f"alarm {name}: {n} periods of {period_s} s exceed one day")
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


def _repeats(node: metric_math.Node) -> bool:
    """Whether the expression fills with earlier values (FILL(x, REPEAT))."""
    if isinstance(node, metric_math.Repeat):
        return True
    children: tuple[metric_math.Node, ...] = ()
    if isinstance(node, metric_math.Arr):
        children = node.items
    elif isinstance(node, metric_math.Call):
        children = node.args
    elif isinstance(node, metric_math.Bin):
        children = (node.left, node.right)
    elif isinstance(node, metric_math.Not | metric_math.Neg):
        children = (node.operand,)
    return any(_repeats(c) for c in children)


def empty_value(config: AlarmConfig) -> tuple[bool, float | None]:
    """(known, value) of a period in which no datapoint of any series has arrived: missing for a
    metric, a constant for an expression that fills (``FILL(x, 0)``); unknown (False) when the
    expression repeats earlier values, which depend on the datapoints before it."""
    if any(q.node is not None and _repeats(q.node) for q in config.queries):
        return False, None
    nothing: dict[SeriesKey, dict[int, float]] = {key: {} for key in config.series}
    return True, _value_function(config, nothing)(0)
