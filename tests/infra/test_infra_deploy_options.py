"""Opt-in deployment settings: the account-wide API Gateway role, API logging, SSE-KMS checkpoints."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cfnlint.api import ManualArgs, lint
from infra_synth import KMS_KEY, SynthResult, as_list

from infra.constructs.permissions import S3_VIA_SERVICE
from sagewarden import keys

# The opt-in configurations synthesize once, on one worker.
pytestmark = pytest.mark.xdist_group("infra-deploy-options")

CONTROL_HANDLERS = (keys.HANDLER_API, keys.HANDLER_JOB_STATE, keys.HANDLER_ALARM_STATE, keys.HANDLER_SWEEP)


@pytest.fixture(scope="module", params=["opt_in", "no_api_logs"])
def synth_option(request: pytest.FixtureRequest) -> SynthResult:
    return request.getfixturevalue(f"synth_{request.param}")


def test_deploy_options_synthesize_clean_under_cdk_nag_and_cfn_lint(synth_option: SynthResult) -> None:
    assert synth_option.synth_error is None, synth_option.synth_error
    assert synth_option.violations == []
    matches = lint(
        json.dumps(synth_option.raw), config=ManualArgs(ignore_checks=["W3005"], regions=["us-east-1"])
    )
    assert matches == [], "\n".join(str(m) for m in matches)


@pytest.mark.claim(
    "`-c apiGatewayAccountRole=true` lets the stack create a role for API Gateway (with AWS's `AmazonAPIGatewayPushToCloudWatchLogs` policy) and set it"
)
@pytest.mark.claim(
    "It replaces any role already set, and both the role and the setting **stay after `make destroy`**"
)
@pytest.mark.claim("a stack that sets it does not undo it on delete")
@pytest.mark.claim(
    "The region has no API Gateway logging role. Redeploy with `CONTEXT='-c apiGatewayAccountRole=true'` (an account-wide setting, kept after destroy) or `CONTEXT='-c apiLogging=false'`."
)
def test_deploy_options_account_role_is_set_only_when_opted_in_and_outlives_the_stack(
    synth_opt_in: SynthResult,
) -> None:
    account_id, account = synth_opt_in.one("AWS::ApiGateway::Account")
    role_id = account["Properties"]["CloudWatchRoleArn"]["Fn::GetAtt"][0]
    role = synth_opt_in.raw["Resources"][role_id]

    assert account["DeletionPolicy"] == "Retain" and role["DeletionPolicy"] == "Retain"
    trust = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert [s["Principal"] for s in trust] == [{"Service": "apigateway.amazonaws.com"}]
    assert account_id  # and the stage still logs (the role is what makes that possible)
    _, stage = synth_opt_in.one("AWS::ApiGateway::Stage")
    assert "AccessLogSetting" in stage["Properties"]


@pytest.mark.claim("`-c apiLogging=false` deploys without API Gateway access and execution logs")
@pytest.mark.claim(
    "The API function still logs every request it serves; requests that IAM rejects are then not logged."
)
def test_deploy_options_api_logging_off_drops_access_and_execution_logs(
    synth_no_api_logs: SynthResult,
) -> None:
    _, stage = synth_no_api_logs.one("AWS::ApiGateway::Stage")
    props = stage["Properties"]

    assert "AccessLogSetting" not in props
    assert all(s.get("LoggingLevel") in (None, "OFF") for s in props.get("MethodSettings", []))
    assert props["TracingEnabled"] is False  # X-Ray is opt-in (tracing=true); metrics stay
    assert synth_no_api_logs.resources("AWS::ApiGateway::Account") == {}
    assert "AccessLogs" not in json.dumps(list(synth_no_api_logs.resources("AWS::Logs::LogGroup")))


def _kms_statements(synth: SynthResult) -> list[dict[str, Any]]:
    return [s for s in synth.all_statements() if "kms:Decrypt" in as_list(s["Action"])]


@pytest.mark.claim(
    "The functions get `kms:Decrypt` on exactly those keys, only through S3 (`kms:ViaService`)"
)
def test_deploy_options_checkpoint_kms_keys_grant_decrypt_through_s3_to_the_control_functions(
    synth_opt_in: SynthResult,
) -> None:
    decrypt = [
        s for s in _kms_statements(synth_opt_in) if s.get("Sid") == "DecryptCheckpointObjectsThroughS3"
    ]

    assert len(decrypt) == 1
    (statement,) = decrypt
    assert statement["Effect"] == "Allow"
    assert as_list(statement["Action"]) == ["kms:Decrypt"]
    assert as_list(statement["Resource"]) == [KMS_KEY]
    assert statement["Condition"] == {"StringLike": {"kms:ViaService": S3_VIA_SERVICE}}
    for handler in CONTROL_HANDLERS:
        _, function = synth_opt_in.function_by_handler(handler)
        assert statement in synth_opt_in.statements_of_role(synth_opt_in.role_of(function)), handler
    _, heartbeat = synth_opt_in.function_by_handler(keys.HANDLER_HEARTBEAT)
    assert statement not in synth_opt_in.statements_of_role(synth_opt_in.role_of(heartbeat))


@pytest.mark.claim(
    "The functions get `kms:Decrypt` on exactly those keys, only through S3 (`kms:ViaService`)"
)
def test_deploy_options_no_checkpoint_key_no_decrypt_grant(
    synth_full: SynthResult, synth_default: SynthResult
) -> None:
    for synth in (synth_full, synth_default):
        assert not [s for s in _kms_statements(synth) if s.get("Sid") == "DecryptCheckpointObjectsThroughS3"]
