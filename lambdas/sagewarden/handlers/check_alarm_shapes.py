"""CloudFormation custom resource `Custom::SagewardenAlarmShapeCheck`: runs `adapters/alarm_shapes.py`.

Always answers at the `ResponseURL`; a Delete always answers SUCCESS.
Why: docs/deploy.md (*CloudWatch judges the alarm shapes*)."""

from __future__ import annotations

from typing import Any

from sagewarden import composition
from sagewarden.adapters import alarm_shapes
from sagewarden.adapters.cfn_response import put_response
from sagewarden.observability import logger


@logger.inject_lambda_context(correlation_id_path="RequestId", clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    deleting = event.get("RequestType") == "Delete"
    try:
        answer = alarm_shapes.on_event(
            event,
            None if deleting else composition.cloudwatch_client(),  # a Delete calls nothing
            now_ms=composition.now_ms,
            time_left_ms=getattr(context, "get_remaining_time_in_millis", None),
        )
    except Exception as exc:  # answer rather than leave CloudFormation waiting
        logger.exception("alarm-shape check failed")
        if deleting:  # nothing to delete: a FAILED answer would only block the stack's delete
            answer = alarm_shapes.Answer(alarm_shapes.response(event, alarm_shapes.SUCCESS))
        else:
            reason = f"the alarm-shape check failed: {type(exc).__name__}: {exc}"
            answer = alarm_shapes.Answer(
                alarm_shapes.response(event, alarm_shapes.FAILED, reason=reason), reason
            )
    body = answer.body
    logger.info(
        "answering CloudFormation",
        extra={"status": answer.status, "reason": answer.detail or body["Reason"], "report": answer.report},
    )
    put_response(str(event["ResponseURL"]), alarm_shapes.encode(body))
    return {"Status": answer.status, "Reason": body["Reason"]}
