"""Scheduled every minute: the reconciler and the durable timers (due index), plus alarm cleanup."""

from __future__ import annotations

from typing import Any

from sagewarden import composition
from sagewarden.observability import logger, metrics, tracer

CLEANUP_EVERY_MINUTES = 15


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    sup = composition.supervisor()
    minute = sup.clock() // 60_000
    time_left = getattr(context, "get_remaining_time_in_millis", None)
    report = sup.sweep(cleanup_alarms=minute % CLEANUP_EVERY_MINUTES == 0, time_left_ms=time_left)
    metrics.add_metric(name="SweepDueRuns", unit="Count", value=report.due)
    metrics.add_metric(name="SweepErrors", unit="Count", value=len(report.errors))
    logger.info(
        "sweep done",
        extra={
            "due": report.due,
            "observed": report.observed,
            "acted": report.acted,
            "alarms_deleted": report.alarms_deleted,
            "errors": report.errors[:10],
        },
    )
    return {
        "due": report.due,
        "observed": report.observed,
        "acted": report.acted,
        "errors": len(report.errors),
    }
