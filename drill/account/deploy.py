"""What a deploy does in the simulated account besides creating resources: runs the template's
custom resources (the alarm-shape check against moto) and gives the stack outputs (`stack_outputs`).

Why: docs/drill.md (*The account*: deploy-time custom resources)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from drill.iam.recorder import invoked_as
from infra import constants
from sagewarden import keys
from sagewarden.adapters import alarm_shapes

DEPLOY_REQUEST_ID = "00000000-0000-4000-8000-00000000d711"  # fixed: a drill is reproducible


class DeployFailed(RuntimeError):
    """A custom resource answered FAILED: the stack would not deploy."""


@dataclass(frozen=True)
class CustomResource:
    logical_id: str
    resource_type: str
    handler: str  # the dotted Handler of the function its ServiceToken names
    properties: Mapping[str, Any]


def custom_resources(template: Mapping[str, Any], resource_type: str) -> list[CustomResource]:
    """The template's custom resources of ``resource_type`` backed by one of its functions."""
    resources = template.get("Resources", {})
    found = []
    for logical, res in resources.items():
        if res.get("Type") != resource_type:
            continue
        props = dict(res.get("Properties") or {})
        token = props.pop("ServiceToken", None)
        props.pop("ServiceTimeout", None)
        target = (
            resources.get(token["Fn::GetAtt"][0], {})
            if isinstance(token, Mapping) and "Fn::GetAtt" in token
            else {}
        )
        if target.get("Type") != "AWS::Lambda::Function":
            continue
        found.append(CustomResource(logical, resource_type, str(target["Properties"]["Handler"]), props))
    return found


def run_alarm_shape_check(
    template: Mapping[str, Any],
    cloudwatch: Any,
    *,
    stack_id: str,
    now_ms: Callable[[], int],
) -> alarm_shapes.Answer | None:
    """Invoke the alarm-shape check as CloudFormation does on a stack's creation; its answer (None
    when the template has no such resource). Raises :class:`DeployFailed` when it answers FAILED."""
    answer = None
    for cr in custom_resources(template, keys.SHAPE_CHECK_RESOURCE_TYPE):
        event = {
            "RequestType": "Create",
            "RequestId": DEPLOY_REQUEST_ID,
            "StackId": stack_id,
            "LogicalResourceId": cr.logical_id,
            "ResourceType": cr.resource_type,
            "ResponseURL": "",  # the answer is read here, not sent
            "ResourceProperties": dict(cr.properties),
        }
        with invoked_as(cr.handler):
            answer = alarm_shapes.on_event(event, cloudwatch, now_ms=now_ms)
        if answer.status != alarm_shapes.SUCCESS:
            raise DeployFailed(
                f"{cr.logical_id} ({cr.resource_type}): {answer.detail or answer.body['Reason']}"
            )
    return answer


def stack_outputs(
    template: Mapping[str, Any], *, api_url: str, job_prefix: str, shapes: alarm_shapes.Answer | None
) -> dict[str, str]:
    """The outputs of the deployed stack that the simulated account can give values to."""
    declared = set(template.get("Outputs", {}))
    values = {constants.OUTPUT_API_URL: api_url, constants.OUTPUT_JOB_PREFIX: job_prefix}
    report = shapes.report if shapes is not None else None
    if report is not None:
        values[constants.OUTPUT_ALARM_SHAPES] = json.dumps(report, separators=(",", ":"))
    return {k: v for k, v in values.items() if k in declared}
