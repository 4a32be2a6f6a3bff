"""The deploy-time alarm-shape check in the template: the custom resource, its function, its one
least-privilege grant, and the output that carries its report."""

from __future__ import annotations

import json
from typing import Any

import pytest
from infra_synth import SynthResult, as_list

from infra import constants
from sagewarden import keys
from sagewarden.adapters import alarm_shapes


def _check(synth: SynthResult) -> tuple[str, dict[str, Any]]:
    return synth.one(keys.SHAPE_CHECK_RESOURCE_TYPE)


def _joined(value: Any) -> str:
    if isinstance(value, str):
        return value
    parts = value["Fn::Join"][1]
    return "".join(p if isinstance(p, str) else "${" + p["Ref"] + "}" for p in parts)


@pytest.mark.claim(
    "It runs again on any deploy that changes a shape, the job prefix or `policyDefaults`, because the resource's properties carry a fingerprint of every request"
)
def test_alarm_shape_check_resource_runs_the_checks_function_with_the_deployments_shapes(
    synth_any: SynthResult,
) -> None:
    _, resource = _check(synth_any)
    props = dict(resource["Properties"])
    function_id, function = synth_any.function_by_handler(keys.HANDLER_ALARM_SHAPE_CHECK)
    prefix = keys.alarm_prefix(synth_any.context.get("jobPrefix", keys.DEFAULT_JOB_PREFIX))
    defaults = json.dumps(synth_any.context.get("policyDefaults", {}), sort_keys=True, separators=(",", ":"))

    assert props.pop("ServiceToken") == {"Fn::GetAtt": [function_id, "Arn"]}
    assert props.pop("ServiceTimeout") == str(constants.SHAPE_CHECK_SERVICE_TIMEOUT_SECONDS)
    # what the check judges is what this code builds for this deployment: a change of any shape
    # changes the fingerprint, so the next deploy runs the check again
    assert props == alarm_shapes.resource_properties(prefix, defaults)
    assert props[keys.SHAPE_CHECK_PROP_FINGERPRINT] == alarm_shapes.fingerprint(
        prefix, alarm_shapes.policy_from_json(defaults)
    )
    assert function["Properties"]["Timeout"] == constants.SHAPE_CHECK_FUNCTION.timeout_seconds
    assert function["Properties"]["Timeout"] < constants.SHAPE_CHECK_SERVICE_TIMEOUT_SECONDS


@pytest.mark.claim("Its role may put, tag and delete only those throwaway names.")
def test_alarm_shape_check_role_may_only_put_tag_and_delete_its_throwaway_alarms(
    synth_any: SynthResult,
) -> None:
    _, resource = _check(synth_any)
    _, function = synth_any.function_by_handler(keys.HANDLER_ALARM_SHAPE_CHECK)
    role = synth_any.role_of(function)
    prefix = keys.alarm_prefix(synth_any.context.get("jobPrefix", keys.DEFAULT_JOB_PREFIX))
    statements = synth_any.statements_of_role(role)

    alarm_statements = [
        s for s in statements if any(a.startswith("cloudwatch:") for a in as_list(s["Action"]))
    ]
    others = [s for s in statements if s not in alarm_statements]
    (alarm,) = alarm_statements
    assert sorted(as_list(alarm["Action"])) == [
        "cloudwatch:DeleteAlarms",
        "cloudwatch:PutMetricAlarm",
        "cloudwatch:TagResource",
    ]
    assert [_joined(r) for r in as_list(alarm["Resource"])] == [
        "arn:${AWS::Partition}:cloudwatch:${AWS::Region}:${AWS::AccountId}:alarm:"
        f"{prefix}{keys.SHAPE_CHECK_NAME_PART}*"
    ]
    # a failed invocation goes to the stack's dead-letter queue (the queue alone)
    queue_id, _ = synth_any.one("AWS::SQS::Queue")
    dead_letters = [s for s in others if any(a.startswith("sqs:") for a in as_list(s["Action"]))]
    assert [s["Resource"] for s in dead_letters] == [{"Fn::GetAtt": [queue_id, "Arn"]}]
    assert "sqs:SendMessage" in as_list(dead_letters[0]["Action"])
    others = [s for s in others if s not in dead_letters]
    # nothing else but writing its own log group (no X-Ray, no table, no SageMaker)
    assert {a for s in others for a in as_list(s["Action"])} == {"logs:CreateLogStream", "logs:PutLogEvents"}
    (log_group_id,) = [k for k in synth_any.resources("AWS::Logs::LogGroup") if "AlarmShapeCheck" in k]
    assert all(s["Resource"] == {"Fn::GetAtt": [log_group_id, "Arn"]} for s in others)
    assert "TracingConfig" not in function["Properties"] or function["Properties"]["TracingConfig"] == {
        "Mode": "PassThrough"
    }
    # the grant exists before CloudFormation invokes the function
    policy_ids = [
        k
        for k, p in synth_any.resources("AWS::IAM::Policy").items()
        if alarm in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert set(policy_ids) <= set(as_list(resource.get("DependsOn", [])))


@pytest.mark.claim(
    "It puts each distinct request once with `PutMetricAlarm`, under a throwaway name `sagewarden-<prefix>-hang-shape-check-<shape>-<alarm>-<request id>`, without actions"
)
def test_alarm_shape_check_is_invoked_once_per_request(synth_any: SynthResult) -> None:
    # CloudFormation invokes the function asynchronously; Lambda's retry of a failed run would
    # answer a request twice
    function_id, _ = synth_any.function_by_handler(keys.HANDLER_ALARM_SHAPE_CHECK)
    configs = [
        r["Properties"]
        for r in synth_any.resources("AWS::Lambda::EventInvokeConfig").values()
        if r["Properties"]["FunctionName"] == {"Ref": function_id}
    ]
    assert [c["MaximumRetryAttempts"] for c in configs] == [0]


def test_alarm_shape_check_report_is_a_stack_output(synth_any: SynthResult) -> None:
    check_id, _ = _check(synth_any)

    assert synth_any.raw["Outputs"][constants.OUTPUT_ALARM_SHAPES]["Value"] == {
        "Fn::GetAtt": [check_id, keys.SHAPE_CHECK_ATTR_REPORT]
    }
