"""Scheduled every minute: the reconciler and the durable timers (due index), plus alarm cleanup."""

from __future__ import annotations

from typing import Any

from sagewarden import composition, keys
from sagewarden.observability import logger, metrics, tracer

CLEANUP_EVERY_MINUTES = 5


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    sup = composition.supervisor()
    minute = sup.clock() // 60_000
    time_left = getattr(context, "get_remaining_time_in_millis", None)
    owner = getattr(context, "aws_request_id", None) or "sweep"
    report = sup.sweep(
        cleanup_alarms=minute % CLEANUP_EVERY_MINUTES == 0, time_left_ms=time_left, owner=owner
    )
    metrics.add_metric(name="SweepDueItems", unit="Count", value=report.due)
    metrics.add_metric(name=keys.METRIC_SWEEP_ERRORS, unit="Count", value=len(report.errors))
    metrics.add_metric(name=keys.METRIC_SWEEP_OUT_OF_TIME, unit="Count", value=1 if report.out_of_time else 0)
    logger.info(
        "sweep done" if not report.skipped else "sweep skipped: another sweep holds the lease",
        extra={
            "due": report.due,
            "observed": report.observed,
            "acted": report.acted,
            "alarms_in_alarm": report.alarms_in_alarm,
            "alarms_deleted": report.alarms_deleted,
            "alerts_published": report.alerts_published,
            "out_of_time": report.out_of_time,
            "errors": report.errors[:10],
        },
    )
    return {
        "due": report.due,
        "observed": report.observed,
        "acted": report.acted,
        "skipped": report.skipped,
        "errors": len(report.errors),
        "out_of_time": report.out_of_time,
    }
