"""EventBridge: CloudWatch Alarm State Change of a sagewarden hang alarm -> HangSignal."""

from __future__ import annotations

from typing import Any

from sagewarden import composition
from sagewarden.adapters.cloudwatch_hang_alarms import parse_alarm_name
from sagewarden.domain.vocabulary.events import HangSignal
from sagewarden.observability import logger, metrics, tracer
from sagewarden.usecases.aws_events import to_ms


def hang_signal_from_event(event: dict[str, Any], prefix: str) -> HangSignal | None:
    detail = event.get("detail") or {}
    parsed = parse_alarm_name(prefix, str(detail.get("alarmName", "")))
    if parsed is None:
        return None
    job, signal = parsed
    state = detail.get("state") or {}
    return HangSignal(
        job_name=job,
        attempt=0,  # filled in from the job name by the service
        signal=signal,
        state=str(state.get("value", "")),
        since_ms=to_ms(state.get("timestamp")) or to_ms(event.get("time")) or 0,
        reason=str(state.get("reason", ""))[:500],
    )


@logger.inject_lambda_context(correlation_id_path="detail.alarmName", clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    signal = hang_signal_from_event(event, composition.alarm_prefix())
    if signal is None:
        logger.info("not a sagewarden hang alarm")
        return {"run_id": None}
    run = composition.supervisor().aws.on_hang_signal(signal)
    return {"run_id": run.run_id if run else None, "status": run.status.value if run else None}
