"""EventBridge: SageMaker Training Job State Change -> the supervisor's decision loop."""

from __future__ import annotations

from typing import Any

from sagewarden import composition
from sagewarden.observability import logger, metrics, tracer


@logger.inject_lambda_context(correlation_id_path="detail.TrainingJobName", clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    detail = event.get("detail") or {}
    run = composition.supervisor().aws.on_job_state_change(detail, event_id=event.get("id"))
    if run is not None:
        logger.info(
            "run updated", extra={"run_id": run.run_id, "status": run.status.value, "version": run.version}
        )
    return {"run_id": run.run_id if run else None, "status": run.status.value if run else None}
