"""The deploy preflight (sagewarden_cli/doctor.py) against a moto account, one test per problem it reports.

moto serves STS, SSM, CloudFormation, IAM, API Gateway, CloudWatch Logs, Lambda, S3 and KMS;
Service Quotas (moto only knows VPC quotas), S3's cross-account answers and access-denied
responses come from a botocore Stubber on that one client.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from infra import REPO_ROOT, constants
from infra.config import SupervisorConfig
from sagewarden import keys
from sagewarden_cli import doctor
from sagewarden_cli.doctor import Preflight
from sagewarden_cli.findings import FAIL, OK, WARN, Finding
from tests.integration.builders import ACCOUNT, REGION, ROLE, ROLE_NAME, StubbedSession


@pytest.fixture
def session(aws: None) -> boto3.Session:
    return boto3.Session(region_name=REGION)


BUCKET = "team-checkpoints"
SAGEMAKER_TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}
    ],
}
LAMBDA_TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
    ],
}
GOOD_CONTEXT = {"allowedRoleArns": [ROLE], "checkpointBuckets": [BUCKET]}


@pytest.fixture
def ready(session: boto3.Session) -> Iterator[boto3.Session]:
    """An account ready for the deploy: bootstrapped, role, API Gateway logging role, bucket."""
    session.client("ssm").put_parameter(Name="/cdk-bootstrap/hnb659fds/version", Value="30", Type="String")
    iam = session.client("iam")
    iam.create_role(RoleName=ROLE_NAME, AssumeRolePolicyDocument=json.dumps(SAGEMAKER_TRUST))
    apigw_role = iam.create_role(RoleName="ApiGatewayLogs", AssumeRolePolicyDocument=json.dumps(LAMBDA_TRUST))
    session.client("apigateway").update_account(
        patchOperations=[{"op": "replace", "path": "/cloudwatchRoleArn", "value": apigw_role["Role"]["Arn"]}]
    )
    session.client("s3").create_bucket(Bucket=BUCKET)
    yield session


def preflight(session: Any, context: dict[str, Any] | None = None, **kwargs: Any) -> Preflight:
    pf = Preflight(
        session, REGION, SupervisorConfig.from_mapping(GOOD_CONTEXT if context is None else context), **kwargs
    )
    identity = pf.check_identity()
    assert identity.level == OK, identity
    return pf


def levels(findings: list[Finding]) -> list[str]:
    return [f.level for f in findings]


def only(findings: list[Finding]) -> Finding:
    assert len(findings) == 1, findings
    return findings[0]


# --- the whole run ----------------------------------------------------------------------------------


@pytest.mark.claim(
    "It prints one line per check (`ok`, `warn`, `FAIL`) and exits 0 when nothing blocks the deploy, 1 when something does, and 2 on a bad option or context value"
)
def test_doctor_ready_account_passes_with_exit_0(ready: boto3.Session) -> None:
    out = io.StringIO()

    code = doctor.run(
        ["-c", f"allowedRoleArns={ROLE}", "-c", f"checkpointBuckets={BUCKET}"], session=ready, out=out
    )

    text = out.getvalue()
    assert code == 0, text
    assert FAIL not in text
    assert text.splitlines()[-1].startswith("preflight: ready to deploy")
    for check in ("credentials", "bootstrap", "roles", "api logs", "log slots", "buckets", "quotas"):
        assert any(line.split()[1:2] == [check.split()[0]] for line in text.splitlines()), check


@pytest.mark.claim(
    "It prints one line per check (`ok`, `warn`, `FAIL`) and exits 0 when nothing blocks the deploy, 1 when something does, and 2 on a bad option or context value"
)
def test_doctor_cdk_json_defaults_block_the_deploy_for_want_of_roles(ready: boto3.Session) -> None:
    out = io.StringIO()

    code = doctor.run([], session=ready, out=out)

    assert code == 1
    failures = [line for line in out.getvalue().splitlines() if line.startswith(FAIL)]
    assert len(failures) == 1
    assert "every run would be rejected" in failures[0] and "ALLOWED_ROLE_ARNS=" in failures[0]


@pytest.mark.claim(
    "It prints one line per check (`ok`, `warn`, `FAIL`) and exits 0 when nothing blocks the deploy, 1 when something does, and 2 on a bad option or context value"
)
def test_doctor_invalid_context_is_a_usage_error(
    ready: boto3.Session, capsys: pytest.CaptureFixture[str]
) -> None:
    code = doctor.run(["-c", "jobPrefix=Not_Valid"], session=ready, out=io.StringIO())

    assert code == 2
    assert "invalid context: jobPrefix" in capsys.readouterr().err
    assert doctor.run(["-c", "noequalsign"], session=ready, out=io.StringIO()) == 2


def test_doctor_json_output_lists_every_finding(ready: boto3.Session) -> None:
    out = io.StringIO()

    code = doctor.run(["--json", "-c", f"allowedRoleArns={ROLE}"], session=ready, out=out)

    findings = json.loads(out.getvalue())
    assert code == 0
    assert {f["check"] for f in findings} >= {"credentials", "bootstrap", "roles", "log slots"}
    assert all(set(f) == {"level", "check", "message", "detail"} for f in findings)


def test_doctor_runs_as_a_module_with_help() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sagewarden_cli.doctor", "--help"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert "--context" in result.stdout and "--instance-type" in result.stdout and "example:" in result.stdout


def test_doctor_names_match_the_infrastructure() -> None:
    assert doctor.STACK_NAME == constants.STACK_ID
    assert doctor.TRAINING_LOG_GROUP == keys.TRAINING_LOG_GROUP
    from sagewarden_cli import doctor_settings

    assert doctor_settings.HEARTBEAT_FILTER.format(stack="S", prefix="tb") == keys.heartbeat_filter_name(
        "S", "tb"
    )
    assert doctor_settings.LEGACY_HEARTBEAT_FILTER.format(stack="S") == keys.legacy_heartbeat_filter_name("S")


# --- credentials and region -------------------------------------------------------------------------


@pytest.fixture
def no_aws_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", raising=False)


def test_doctor_without_credentials_says_to_configure_them_and_stops(aws: None, no_aws_config: None) -> None:
    out = io.StringIO()

    code = doctor.run(["--region", REGION, "-c", f"allowedRoleArns={ROLE}"], out=out)

    lines = out.getvalue().splitlines()
    assert code == 1
    assert len(lines) == 2  # the one problem, then the summary: nothing else can be checked
    assert lines[0].startswith(FAIL) and "aws configure" in lines[0] and "aws sso login" in lines[0]


@pytest.mark.claim(
    "`make bootstrap` first checks that your credentials and region resolve (the preflight's first check, `--credentials-only`)"
)
@pytest.mark.claim(
    "`--credentials-only` runs only the first row (`make bootstrap` runs that, and `make bootstrap PREFLIGHT=0` skips it)"
)
def test_doctor_credentials_only_checks_nothing_but_credentials(ready: boto3.Session) -> None:
    out = io.StringIO()

    # what make bootstrap runs: no deployment settings are read (a bad one does not matter here)
    code = doctor.run(["--credentials-only", "-c", "jobPrefix=Not_Valid"], session=ready, out=out)

    (line, summary) = out.getvalue().splitlines()
    assert code == 0
    assert line.startswith(OK) and line.split()[1] == "credentials" and f"account {ACCOUNT}" in line
    assert summary == "preflight: ready to bootstrap (0 warnings)"


@pytest.mark.claim(
    'so a missing login is one line saying what to run rather than CDK\'s "Unable to resolve AWS account"'
)
def test_doctor_credentials_only_without_credentials_is_the_same_one_line(
    aws: None, no_aws_config: None
) -> None:
    out = io.StringIO()

    code = doctor.run(["--credentials-only", "--region", REGION], out=out)

    (problem, summary) = out.getvalue().splitlines()
    assert code == 1
    assert problem.startswith(FAIL) and "no AWS credentials found" in problem and "aws sso login" in problem
    assert summary == "preflight: 1 problem to fix before bootstrapping, 0 warnings"


def test_doctor_unknown_profile_is_one_line(aws: None, no_aws_config: None) -> None:
    out = io.StringIO()

    code = doctor.run(["--profile", "nope", "--region", REGION], out=out)

    assert code == 1
    (problem, _summary) = out.getvalue().splitlines()
    assert problem.startswith(FAIL) and "nope" in problem and "aws configure" in problem


def test_doctor_without_a_region_says_how_to_set_one(
    aws: None, monkeypatch: pytest.MonkeyPatch, no_aws_config: None
) -> None:
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    out = io.StringIO()

    code = doctor.run([], session=boto3.Session(), out=out)

    assert code == 1
    assert "no AWS region" in out.getvalue() and "--region" in out.getvalue()


def test_doctor_expired_session_says_to_log_in_again(session: boto3.Session) -> None:
    sts = session.client("sts", region_name=REGION)
    stubber = Stubber(sts)
    stubber.add_client_error(
        "get_caller_identity", "ExpiredToken", "The security token included in the request is expired"
    )
    with stubber:
        finding = Preflight(StubbedSession(session, sts=sts), REGION, SupervisorConfig()).check_identity()

    assert finding.level == FAIL and "aws sso login" in finding.message


# --- bootstrap --------------------------------------------------------------------------------------


@pytest.mark.claim("`/cdk-bootstrap/hnb659fds/version` (or the CDKToolkit stack) is missing or older than 6")
def test_doctor_not_bootstrapped_says_make_bootstrap(session: boto3.Session) -> None:
    finding = only(preflight(session).check_bootstrap())

    assert finding.level == FAIL
    assert "not CDK-bootstrapped" in finding.message and "make bootstrap" in finding.message


@pytest.mark.claim("`/cdk-bootstrap/hnb659fds/version` (or the CDKToolkit stack) is missing or older than 6")
def test_doctor_old_bootstrap_version_says_make_bootstrap(session: boto3.Session) -> None:
    session.client("ssm").put_parameter(Name="/cdk-bootstrap/hnb659fds/version", Value="5", Type="String")

    finding = only(preflight(session).check_bootstrap())

    assert finding.level == FAIL and "version 5" in finding.message and "make bootstrap" in finding.message


@pytest.mark.claim("`/cdk-bootstrap/hnb659fds/version` (or the CDKToolkit stack) is missing or older than 6")
def test_doctor_custom_qualifier_is_read_from_context(ready: boto3.Session) -> None:
    ready.client("ssm").put_parameter(Name="/cdk-bootstrap/custom123/version", Value="27", Type="String")
    out = io.StringIO()

    code = doctor.run(
        ["-c", f"allowedRoleArns={ROLE}", "-c", "@aws-cdk/core:bootstrapQualifier=custom123"],
        session=ready,
        out=out,
    )

    assert code == 0
    assert "CDK bootstrap version 27 (qualifier custom123)" in out.getvalue()


def _denied_ssm(session: boto3.Session) -> tuple[Any, Stubber]:
    ssm = session.client("ssm", region_name=REGION)
    stubber = Stubber(ssm)
    stubber.add_client_error(
        "get_parameter", "AccessDeniedException", "not authorized to perform: ssm:GetParameter"
    )
    return ssm, stubber


@pytest.mark.claim("`/cdk-bootstrap/hnb659fds/version` (or the CDKToolkit stack) is missing or older than 6")
def test_doctor_bootstrap_falls_back_to_the_cdktoolkit_stack(session: boto3.Session) -> None:
    template = {
        "Resources": {
            "Marker": {
                "Type": "AWS::SSM::Parameter",
                "Properties": {"Name": "/marker", "Type": "String", "Value": "x"},
            }
        },
        "Outputs": {"BootstrapVersion": {"Value": "21"}},
    }
    session.client("cloudformation").create_stack(StackName="CDKToolkit", TemplateBody=json.dumps(template))
    ssm, stubber = _denied_ssm(session)

    with stubber:
        finding = only(preflight(StubbedSession(session, ssm=ssm)).check_bootstrap())

    assert finding.level == OK and "version 21" in finding.message


def test_doctor_bootstrap_ssm_denied_and_no_stack_is_not_bootstrapped(session: boto3.Session) -> None:
    ssm, stubber = _denied_ssm(session)

    with stubber:
        finding = only(preflight(StubbedSession(session, ssm=ssm)).check_bootstrap())

    assert finding.level == FAIL and "make bootstrap" in finding.message


# --- execution roles --------------------------------------------------------------------------------


@pytest.mark.claim(
    'empty ("every run would be rejected"), a role missing, in another account, named with the wrong path, or not trusting `sagemaker.amazonaws.com`'
)
def test_doctor_no_allowed_roles_means_every_run_rejected(ready: boto3.Session) -> None:
    finding = only(preflight(ready, {}).check_roles())

    assert finding.level == FAIL
    assert "every run would be rejected" in finding.message
    assert f"ALLOWED_ROLE_ARNS='[\"arn:aws:iam::{ACCOUNT}:role/" in finding.message


@pytest.mark.claim(
    'empty ("every run would be rejected"), a role missing, in another account, named with the wrong path, or not trusting `sagemaker.amazonaws.com`'
)
def test_doctor_missing_role(ready: boto3.Session) -> None:
    missing = f"arn:aws:iam::{ACCOUNT}:role/Nope"

    finding = only(preflight(ready, {"allowedRoleArns": [missing]}).check_roles())

    assert finding.level == FAIL and f"{missing} does not exist" in finding.message


@pytest.mark.claim(
    'empty ("every run would be rejected"), a role missing, in another account, named with the wrong path, or not trusting `sagemaker.amazonaws.com`'
)
def test_doctor_role_that_does_not_trust_sagemaker(ready: boto3.Session) -> None:
    ready.client("iam").create_role(RoleName="LambdaOnly", AssumeRolePolicyDocument=json.dumps(LAMBDA_TRUST))
    arn = f"arn:aws:iam::{ACCOUNT}:role/LambdaOnly"

    finding = only(preflight(ready, {"allowedRoleArns": [arn]}).check_roles())

    assert finding.level == FAIL
    assert (
        "does not trust sagemaker.amazonaws.com" in finding.message and '"sts:AssumeRole"' in finding.message
    )


@pytest.mark.claim(
    'empty ("every run would be rejected"), a role missing, in another account, named with the wrong path, or not trusting `sagemaker.amazonaws.com`'
)
def test_doctor_role_of_another_account(ready: boto3.Session) -> None:
    other = "arn:aws:iam::210987654321:role/SageMakerTrainingRole"

    finding = only(preflight(ready, {"allowedRoleArns": [other]}).check_roles())

    assert finding.level == FAIL and "account 210987654321" in finding.message


@pytest.mark.claim(
    'empty ("every run would be rejected"), a role missing, in another account, named with the wrong path, or not trusting `sagemaker.amazonaws.com`'
)
def test_doctor_role_with_another_path_must_be_named_exactly(ready: boto3.Session) -> None:
    ready.client("iam").create_role(
        RoleName="PathRole", Path="/ml/", AssumeRolePolicyDocument=json.dumps(SAGEMAKER_TRUST)
    )
    without_path = f"arn:aws:iam::{ACCOUNT}:role/PathRole"

    finding = only(preflight(ready, {"allowedRoleArns": [without_path]}).check_roles())

    assert finding.level == FAIL and f"arn:aws:iam::{ACCOUNT}:role/ml/PathRole" in finding.message


def test_doctor_roles_each_reported(ready: boto3.Session) -> None:
    roles = [ROLE, f"arn:aws:iam::{ACCOUNT}:role/Nope"]

    findings = preflight(ready, {"allowedRoleArns": roles}).check_roles()

    assert levels(findings) == [OK, FAIL]


TWO_SERVICES = {
    "Statement": {
        "Effect": "Allow",
        "Principal": {"Service": ["lambda.amazonaws.com", "sagemaker.amazonaws.com"]},
        "Action": ["sts:AssumeRole", "sts:TagSession"],
    }
}
DENY_SAGEMAKER = {
    "Statement": [
        {"Effect": "Deny", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}
    ]
}
TAG_ONLY = {
    "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:TagSession"}
    ]
}
URL_ENCODED = json.dumps(SAGEMAKER_TRUST).replace('"', "%22").replace(" ", "%20")  # IAM's raw form


@pytest.mark.parametrize(
    ("document", "trusted"),
    [
        (SAGEMAKER_TRUST, True),
        (URL_ENCODED, True),
        (TWO_SERVICES, True),
        (DENY_SAGEMAKER, False),
        (TAG_ONLY, False),
        (LAMBDA_TRUST, False),
    ],
    ids=["sagemaker", "url-encoded", "two-services", "deny", "other-action", "lambda"],
)
def test_doctor_trust_policy_reading(document: Any, trusted: bool) -> None:
    assert doctor.trusts_sagemaker(document) is trusted


# --- API Gateway account setting --------------------------------------------------------------------


@pytest.mark.claim(
    "the region has no API Gateway CloudWatch Logs role and the deployment neither sets one nor turns API logging off"
)
@pytest.mark.claim("Without one of these in a region that has no role, CloudFormation fails on the API stage")
@pytest.mark.claim(
    "The region has no API Gateway logging role. Redeploy with `CONTEXT='-c apiGatewayAccountRole=true'` (an account-wide setting, kept after destroy) or `CONTEXT='-c apiLogging=false'`."
)
def test_doctor_region_without_api_gateway_logs_role_offers_both_ways_out(session: boto3.Session) -> None:
    finding = only(preflight(session).check_api_logging())

    assert finding.level == FAIL
    assert "-c apiGatewayAccountRole=true" in finding.message and "-c apiLogging=false" in finding.message


@pytest.mark.claim(
    "the region has no API Gateway CloudWatch Logs role and the deployment neither sets one nor turns API logging off"
)
def test_doctor_api_logging_off_or_account_role_opted_in_needs_no_existing_role(
    session: boto3.Session,
) -> None:
    off = only(preflight(session, {**GOOD_CONTEXT, "apiLogging": "false"}).check_api_logging())
    opted_in = only(preflight(session, {**GOOD_CONTEXT, "apiGatewayAccountRole": "true"}).check_api_logging())

    assert off.level == OK and opted_in.level == OK
    assert "stays after" in opted_in.message


@pytest.mark.claim(
    "It replaces any role already set, and both the role and the setting **stay after `make destroy`**"
)
def test_doctor_opting_in_over_an_existing_account_role_warns(ready: boto3.Session) -> None:
    finding = only(preflight(ready, {**GOOD_CONTEXT, "apiGatewayAccountRole": "true"}).check_api_logging())

    assert finding.level == WARN and "replaces" in finding.message and "ApiGatewayLogs" in finding.message


@pytest.mark.claim(
    "If the region already has the role (any API with logging in the account set it), nothing to do; the preflight says which role is used."
)
def test_doctor_existing_account_role_is_used(ready: boto3.Session) -> None:
    finding = only(preflight(ready).check_api_logging())

    assert finding.level == OK and "ApiGatewayLogs" in finding.message


# --- log subscription slots -------------------------------------------------------------------------


def _lambda_arn(session: boto3.Session, name: str) -> str:
    role = session.client("iam").create_role(
        RoleName=f"{name}-role", AssumeRolePolicyDocument=json.dumps(LAMBDA_TRUST)
    )
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("index.py", "def handler(event, context):\n    return None\n")
    return str(
        session.client("lambda").create_function(
            FunctionName=name,
            Runtime="python3.12",
            Role=role["Role"]["Arn"],
            Handler="index.handler",
            Code={"ZipFile": code.getvalue()},
        )["FunctionArn"]
    )


def _subscribe(session: boto3.Session, *names: str) -> None:
    logs = session.client("logs")
    with contextlib.suppress(logs.exceptions.ResourceAlreadyExistsException):
        logs.create_log_group(logGroupName=keys.TRAINING_LOG_GROUP)
    for name in names:
        logs.put_subscription_filter(
            logGroupName=keys.TRAINING_LOG_GROUP,
            filterName=name,
            filterPattern="",
            destinationArn=_lambda_arn(session, name.replace(" ", "-")),
        )


def test_doctor_log_group_absent_is_fine(session: boto3.Session) -> None:
    finding = only(preflight(session).check_log_subscription())

    assert finding.level == OK and "does not exist yet" in finding.message


@pytest.mark.claim(
    "Each deployment's heartbeat takes one of the two subscription-filter slots of `/aws/sagemaker/TrainingJobs`; a third one needs `-c logSubscription=false`"
)
@pytest.mark.claim(
    "Both slots were taken after the preflight ran. Delete the failed stack (ROLLBACK_COMPLETE, `make destroy`) and redeploy with `CONTEXT='-c logSubscription=false'`."
)
def test_doctor_both_subscription_slots_taken_suggests_log_subscription_false(session: boto3.Session) -> None:
    _subscribe(session, "team-datadog", "team-splunk")

    finding = only(preflight(session).check_log_subscription())

    assert finding.level == FAIL
    assert "team-datadog, team-splunk" in finding.message and "-c logSubscription=false" in finding.message


def test_doctor_one_slot_taken_or_our_own_filter_is_fine(session: boto3.Session) -> None:
    _subscribe(session, "team-datadog")
    assert "1 of 2" in only(preflight(session).check_log_subscription()).message

    _subscribe(session, keys.heartbeat_filter_name(constants.STACK_ID, "sw"))  # a redeploy keeps its slot
    finding = only(preflight(session).check_log_subscription())
    assert finding.level == OK and "already in place" in finding.message


def test_doctor_a_renamed_heartbeat_subscription_needs_a_free_slot_for_a_moment(
    session: boto3.Session,
) -> None:
    # a stack deployed before the filter's name carried the job prefix: CloudFormation creates the
    # renamed filter first and deletes the old one after, so both hold a slot for a moment
    legacy = keys.legacy_heartbeat_filter_name(constants.STACK_ID)
    _subscribe(session, legacy)
    finding = only(preflight(session).check_log_subscription())
    assert finding.level == OK and f"{legacy} is renamed" in finding.message

    _subscribe(session, "team-datadog")
    finding = only(preflight(session).check_log_subscription())
    assert finding.level == FAIL
    assert keys.heartbeat_filter_name(constants.STACK_ID, "sw") in finding.message
    assert "team-datadog" in finding.message and "-c logSubscription=false" in finding.message


def test_doctor_full_slots_do_not_matter_without_the_subscription(session: boto3.Session) -> None:
    _subscribe(session, "team-datadog", "team-splunk")

    finding = only(preflight(session, {**GOOD_CONTEXT, "logSubscription": "false"}).check_log_subscription())

    assert finding.level == OK


# --- checkpoint buckets -----------------------------------------------------------------------------


def test_doctor_missing_bucket(session: boto3.Session) -> None:
    finding = only(preflight(session, {"checkpointBuckets": ["no-such-bucket-here"]}).check_buckets())

    assert finding.level == FAIL and "no-such-bucket-here does not exist" in finding.message


def test_doctor_no_buckets_named_is_a_warning(session: boto3.Session) -> None:
    finding = only(preflight(session, {}).check_buckets())

    assert finding.level == WARN and "-c checkpointBuckets=" in finding.message


def _kms_bucket(session: boto3.Session, key_id: str) -> None:
    session.client("s3").create_bucket(Bucket=BUCKET)
    session.client("s3").put_bucket_encryption(
        Bucket=BUCKET,
        ServerSideEncryptionConfiguration={
            "Rules": [
                {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": key_id}}
            ]
        },
    )


def test_doctor_sse_kms_bucket_needs_its_key_named(session: boto3.Session) -> None:
    key = session.client("kms").create_key()["KeyMetadata"]
    _kms_bucket(session, key["KeyId"])

    finding = only(preflight(session).check_buckets())

    assert finding.level == FAIL
    assert f"-c checkpointKmsKeyArns={key['Arn']}" in finding.message


def test_doctor_sse_kms_bucket_with_its_key_granted(session: boto3.Session) -> None:
    key = session.client("kms").create_key()["KeyMetadata"]
    _kms_bucket(session, key["Arn"])

    finding = only(preflight(session, {**GOOD_CONTEXT, "checkpointKmsKeyArns": [key["Arn"]]}).check_buckets())

    assert finding.level == OK and "kms:Decrypt granted" in finding.message


@pytest.mark.claim("SSE-S3 and the AWS managed key `aws/s3` need nothing")
def test_doctor_sse_kms_with_the_aws_managed_key_needs_nothing(session: boto3.Session) -> None:
    _kms_bucket(session, "alias/aws/s3")

    assert only(preflight(session).check_buckets()).level == OK


def _stubbed_s3(session: boto3.Session, *responses: dict[str, Any] | str) -> tuple[Any, Stubber]:
    s3 = session.client("s3", region_name=REGION)
    stubber = Stubber(s3)
    for response in responses:
        if isinstance(response, str):
            stubber.add_client_error("head_bucket", response, "Forbidden", 403)
        else:
            stubber.add_response("head_bucket", response)
    return s3, stubber


def test_doctor_bucket_of_another_account_prints_the_bucket_policy_to_grant(session: boto3.Session) -> None:
    # HeadBucket with ExpectedBucketOwner=<this account> is refused (403), without it allowed
    s3, stubber = _stubbed_s3(session, "403", {})

    with stubber:
        finding = only(preflight(StubbedSession(session, s3=s3)).check_buckets())

    assert finding.level == WARN and "another account" in finding.message
    assert finding.detail is not None
    policy = json.loads(finding.detail.split(": ", 1)[1])
    assert policy["Action"] == ["s3:ListBucket", "s3:GetObject"]
    assert policy["Resource"] == [f"arn:aws:s3:::{BUCKET}", f"arn:aws:s3:::{BUCKET}/*"]
    assert policy["Principal"] == {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}
    assert policy["Condition"] == {
        "ArnLike": {"aws:PrincipalArn": f"arn:aws:iam::{ACCOUNT}:role/{constants.STACK_ID}-*"}
    }


@pytest.mark.claim("A check your identity may not make (access denied) is a warning.")
def test_doctor_unreadable_bucket_warns_with_the_policy(session: boto3.Session) -> None:
    s3, stubber = _stubbed_s3(session, "403", "403")

    with stubber:
        finding = only(preflight(StubbedSession(session, s3=s3)).check_buckets())

    assert finding.level == WARN and "403" in finding.message and finding.detail


# --- quotas -----------------------------------------------------------------------------------------


def _quotas(
    session: boto3.Session, defaults: dict[str, float], applied: dict[str, float]
) -> tuple[Any, Stubber]:
    client = session.client("service-quotas", region_name=REGION)
    stubber = Stubber(client)

    def page(values: dict[str, float]) -> dict[str, Any]:
        return {
            "Quotas": [
                {"ServiceCode": "sagemaker", "QuotaName": name, "QuotaCode": f"L-{i:08d}", "Value": value}
                for i, (name, value) in enumerate(values.items())
            ]
        }

    stubber.add_response("list_aws_default_service_quotas", page(defaults), {"ServiceCode": "sagemaker"})
    stubber.add_response("list_service_quotas", page(applied), {"ServiceCode": "sagemaker"})
    return client, stubber


FALLBACKS = {
    "policyDefaults": {"instance_fallbacks": [{"instance_type": "ml.p4d.24xlarge", "instance_count": 2}]}
}


@pytest.mark.claim(
    "never: a training-job quota of 0 for an instance type in `policyDefaults.instance_fallbacks` (or `--instance-type`), or a warm-pool quota of 0 when `keep_alive_seconds` is set"
)
def test_doctor_quotas_warn_on_zero_and_prefer_applied_values(session: boto3.Session) -> None:
    client, stubber = _quotas(
        session,
        defaults={"ml.p4d.24xlarge for training job usage": 0, "ml.p5.48xlarge for training job usage": 0},
        applied={"ml.p4d.24xlarge for training job usage": 4},
    )

    # warm pools off (they are on by default): only the training-job quotas are looked at
    no_pools = {"policyDefaults": {**FALLBACKS["policyDefaults"], "keep_alive_seconds": 0}}
    with stubber:
        findings = preflight(
            StubbedSession(session, service_quotas=client),
            {**GOOD_CONTEXT, **no_pools},
            instance_types=["ml.p5.48xlarge"],
        ).check_quotas()

    assert levels(findings) == [OK, WARN]
    assert "'ml.p4d.24xlarge for training job usage' is 4" in findings[0].message
    assert "'ml.p5.48xlarge for training job usage' is 0" in findings[1].message
    assert "request an increase" in findings[1].message


def test_doctor_quotas_with_spot_check_the_spot_training_quotas(session: boto3.Session) -> None:
    """Issue 32 item 14: `--spot` (runs on managed spot training) checks the spot training quotas
    and no warm-pool quota (spot keeps no pool), even with keep_alive_seconds set."""
    context = {
        **GOOD_CONTEXT,
        "policyDefaults": {**FALLBACKS["policyDefaults"], "keep_alive_seconds": 600},
    }
    client, stubber = _quotas(
        session,
        defaults={
            "ml.p4d.24xlarge for training job usage": 8,
            "ml.p4d.24xlarge for spot training job usage": 0,
            "ml.p4d.24xlarge for training warm pool usage": 0,
        },
        applied={},
    )

    with stubber:
        findings = preflight(
            StubbedSession(session, service_quotas=client), context, spot=True
        ).check_quotas()

    assert levels(findings) == [WARN]
    assert "'ml.p4d.24xlarge for spot training job usage' is 0" in findings[0].message


@pytest.mark.claim(
    "never: a training-job quota of 0 for an instance type in `policyDefaults.instance_fallbacks` (or `--instance-type`), or a warm-pool quota of 0 when `keep_alive_seconds` is set"
)
def test_doctor_quotas_check_warm_pools_when_keep_alive_is_set(session: boto3.Session) -> None:
    context = {
        **GOOD_CONTEXT,
        "policyDefaults": {**FALLBACKS["policyDefaults"], "keep_alive_seconds": 600},
    }
    client, stubber = _quotas(session, defaults={"ml.p4d.24xlarge for training job usage": 8}, applied={})

    with stubber:
        findings = preflight(StubbedSession(session, service_quotas=client), context).check_quotas()

    assert levels(findings) == [OK, WARN]
    assert "ml.p4d.24xlarge for training warm pool usage" in findings[1].message


@pytest.mark.claim(
    "never: a training-job quota of 0 for an instance type in `policyDefaults.instance_fallbacks` (or `--instance-type`), or a warm-pool quota of 0 when `keep_alive_seconds` is set"
)
def test_doctor_quotas_are_warnings_only(ready: boto3.Session) -> None:
    client, stubber = _quotas(ready, defaults={"ml.p4d.24xlarge for training job usage": 0}, applied={})
    out = io.StringIO()

    with stubber:
        code = doctor.run(
            [
                "-c",
                f"allowedRoleArns={ROLE}",
                "-c",
                json_context("policyDefaults", FALLBACKS["policyDefaults"]),
            ],
            session=StubbedSession(ready, service_quotas=client),
            out=out,
        )

    assert code == 0, out.getvalue()
    assert any(line.startswith(WARN) and "is 0" in line for line in out.getvalue().splitlines())


@pytest.mark.claim("A check your identity may not make (access denied) is a warning.")
def test_doctor_quotas_denied_is_a_warning(session: boto3.Session) -> None:
    client = session.client("service-quotas", region_name=REGION)
    stubber = Stubber(client)
    stubber.add_client_error("list_aws_default_service_quotas", "AccessDeniedException", "denied")
    stubber.add_client_error("list_service_quotas", "AccessDeniedException", "denied")

    with stubber:
        finding = only(
            preflight(
                StubbedSession(session, service_quotas=client), {**GOOD_CONTEXT, **FALLBACKS}
            ).check_quotas()
        )

    assert finding.level == WARN and "servicequotas:ListServiceQuotas" in finding.message


def json_context(key: str, value: Any) -> str:
    return f"{key}={json.dumps(value)}"


def test_doctor_an_unforeseen_error_is_a_warning_not_a_traceback(ready: boto3.Session) -> None:
    # moto has no ListServiceQuotas for SageMaker: the botocore call raises NotImplementedError
    out = io.StringIO()

    code = doctor.run(
        ["-c", f"allowedRoleArns={ROLE}", "-c", json_context("policyDefaults", FALLBACKS["policyDefaults"])],
        session=ready,
        out=out,
    )

    assert code == 0
    (quota_line,) = [line for line in out.getvalue().splitlines() if " quotas " in line]
    assert quota_line.startswith(WARN) and "could not check (NotImplementedError" in quota_line


def test_doctor_summary_says_how_make_deploy_takes_context_flags(session: boto3.Session) -> None:
    out = io.StringIO()

    code = doctor.run(["-c", f"allowedRoleArns={ROLE}"], session=session, out=out)  # no API Gateway role

    assert code == 1
    assert "CONTEXT='-c key=value'" in out.getvalue().splitlines()[-1]


def test_doctor_arguments_plug_into_a_cli_subcommand_with_global_options(ready: boto3.Session) -> None:
    import argparse

    main = argparse.ArgumentParser(prog="sagewarden")
    main.add_argument("--profile")
    main.add_argument("--region")
    main.add_argument("--json", action="store_true")
    sub = main.add_subparsers(dest="command")
    doctor.add_arguments(sub.add_parser("doctor"), include_global=False)
    args = main.parse_args(["--region", REGION, "--json", "doctor", "-c", f"allowedRoleArns={ROLE}"])
    out = io.StringIO()

    code = doctor.run(args, session=ready, out=out)

    assert code == 0
    assert {f["check"] for f in json.loads(out.getvalue())} >= {"credentials", "roles"}


def test_doctor_is_a_sagewarden_subcommand(ready: boto3.Session, capsys: pytest.CaptureFixture[str]) -> None:
    from sagewarden_cli.app_parser import build_parser

    args = build_parser().parse_args(["--json", "doctor", "-c", f"allowedRoleArns={ROLE}"])
    assert args.command == "doctor" and args.json
    out = io.StringIO()
    assert doctor.run(args, session=ready, out=out) == 0
    assert {f["check"] for f in json.loads(out.getvalue())} >= {"credentials", "roles"}
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["doctor", "--help"])
    assert done.value.code == 0 and "--context" in capsys.readouterr().out


# --- checkpoint retention on a versioned bucket (issue 32 item 6) ------------------------------------

RETENTION_CONTEXT = {**GOOD_CONTEXT, "checkpointRetention": "true"}


def test_doctor_warns_of_a_versioned_checkpoint_bucket_without_a_noncurrent_version_rule(
    session: boto3.Session,
) -> None:
    s3 = session.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    assert [f.message for f in preflight(session, RETENTION_CONTEXT).check_buckets()][-1].endswith(
        "not versioned: checkpoint retention's deletes free storage"
    )
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    versioned = preflight(session, RETENTION_CONTEXT).check_buckets()[-1]
    assert versioned.level == WARN and "NoncurrentVersionExpiration" in versioned.message
    assert len(preflight(session).check_buckets()) == 1  # without checkpointRetention: not asked
    rule = {"ID": "ckpt", "Status": "Enabled", "NoncurrentVersionExpiration": {"NoncurrentDays": 7}}
    s3.put_bucket_lifecycle_configuration(
        Bucket=BUCKET, LifecycleConfiguration={"Rules": [{**rule, "Filter": {"Prefix": "runs/"}}]}
    )
    some = preflight(session, RETENTION_CONTEXT).check_buckets()[-1]
    assert some.level == WARN and "only under runs/" in some.message
    s3.put_bucket_lifecycle_configuration(
        Bucket=BUCKET, LifecycleConfiguration={"Rules": [{**rule, "Filter": {}}]}
    )
    assert preflight(session, RETENTION_CONTEXT).check_buckets()[-1].level == OK
