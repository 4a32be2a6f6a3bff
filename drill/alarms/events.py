"""The StateReason, StateReasonData and "CloudWatch Alarm State Change" event of a transition,
in CloudWatch's layout (not its exact wording), stamped with virtual time."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from drill.alarms.config import _OPERATORS, AlarmConfig
from drill.alarms.decision import _FILLED, _NO_DATA, ALARM, INSUFFICIENT_DATA

_OPERATOR_TEXT = {
    "GreaterThanOrEqualToThreshold": "greater than or equal to",
    "GreaterThanThreshold": "greater than",
    "LessThanThreshold": "less than",
    "LessThanOrEqualToThreshold": "less than or equal to",
}


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


def transition_reason(
    cfg: AlarmConfig,
    *,
    vals: Sequence[float | None],
    when: Sequence[int],
    kind: str,
    old: str,
    new: str,
    range_len: int,
    at_ms: int,
    start_ms: int,
) -> tuple[str, str]:
    """StateReason and StateReasonData (JSON) of a transition, in CloudWatch's layout.
    ``vals``/``when``: the evaluated periods, newest first (None: a filled missing period)."""
    n, m = cfg.evaluation_periods, cfg.datapoints_to_alarm
    real = [(v, t) for v, t in zip(vals, when, strict=True) if v is not None]
    fills = len(vals) - len(real)
    breaches = _OPERATORS[cfg.comparison]
    treated = {"breaching": "Breaching", "notBreaching": "NonBreaching"}.get(cfg.treat_missing)
    if kind == _NO_DATA and new == INSUFFICIENT_DATA:
        reason = f"Insufficient Data: {_plural(range_len, 'datapoint')} {_was(range_len)} unknown."
    elif kind == _NO_DATA:
        reason = (
            f"Threshold Crossed: no datapoints were received for {_plural(range_len, 'period')} and "
            f"{_plural(n, 'missing datapoint')} {_was(n)} treated as [{treated}]."
        )
    else:
        listed = ", ".join(f"{v!r} ({_reason_time(t)})" for v, t in real)
        real_breaching = sum(1 for v, _ in real if breaches(v, cfg.threshold))
        counted_fills = fills if kind == _FILLED and treated is not None else 0
        if new == ALARM:
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
            f"(minimum {_plural(need, 'datapoint')} for {old} -> {new} transition)."
        )
    data: dict[str, Any] = {
        "version": "1.0",
        "queryDate": iso_state_time(at_ms),
        "startDate": iso_state_time(when[-1] if when else start_ms),
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


def state_change_event(
    cfg: AlarmConfig,
    *,
    account_id: str,
    region: str,
    at_ms: int,
    old: str,
    new: str,
    reason: str,
    reason_data: str,
    previous: tuple[str, str, int],
) -> dict[str, Any]:
    """The "CloudWatch Alarm State Change" event of one transition; ``previous``: the old state's
    (reason, reason data, timestamp)."""
    prev_reason, prev_data, prev_ms = previous
    prior: dict[str, Any] = {"value": old, "reason": prev_reason}
    if prev_data:
        prior["reasonData"] = prev_data
    prior["timestamp"] = iso_state_time(prev_ms)
    return {
        "version": "0",
        "id": _stable_uuid("alarm-state-change", cfg.name, at_ms, old, new),
        "detail-type": "CloudWatch Alarm State Change",
        "source": "aws.cloudwatch",
        "account": account_id,
        "time": iso_event_time(at_ms),
        "region": region,
        "resources": [f"arn:aws:cloudwatch:{region}:{account_id}:alarm:{cfg.name}"],
        "detail": {
            "alarmName": cfg.name,
            "state": {
                "value": new,
                "reason": reason,
                "reasonData": reason_data,
                "timestamp": iso_state_time(at_ms),
            },
            "previousState": prior,
            "configuration": {"description": cfg.description, "metrics": event_metrics(cfg)},
        },
    }


def event_metrics(cfg: AlarmConfig) -> list[dict[str, Any]]:
    """The event's ``configuration.metrics``: the alarm's queries in the event's camelCase shape."""
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
