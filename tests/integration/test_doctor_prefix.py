"""The preflight's prefix check (sagewarden_cli/deployments.py, run by `make doctor` and `make deploy`): two
deployments may share an account and region, never a job prefix; re-deploying a stack passes.

moto serves CloudFormation (stacks with outputs and descriptions) and CloudWatch; the older stacks
without a JobPrefix output, several DescribeStacks pages and access-denied answers come from a
botocore Stubber on the CloudFormation client.
"""

from __future__ import annotations

import io
import json
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from infra import constants
from infra.config import SupervisorConfig
from sagewarden import keys
from sagewarden_cli import doctor
from sagewarden_cli.doctor import Preflight
from sagewarden_cli.findings import FAIL, OK, WARN, Finding
from tests.integration.builders import ACCOUNT, REGION, ROLE, StubbedSession

SIDE = "SagewardenTeamB"


@pytest.fixture
def session(aws: None) -> boto3.Session:
    return boto3.Session(region_name=REGION)


def deploy(session: boto3.Session, name: str, prefix: str | None, *, sagewarden: bool = True) -> None:
    """A stack as `cdk deploy` leaves it: sagewarden's description and JobPrefix output."""
    template: dict[str, Any] = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}}
    if sagewarden:
        template["Description"] = constants.STACK_DESCRIPTION
    if prefix is not None:
        template["Outputs"] = {constants.OUTPUT_JOB_PREFIX: {"Value": prefix}}
    session.client("cloudformation").create_stack(StackName=name, TemplateBody=json.dumps(template))


def hang_alarm(session: boto3.Session, prefix: str) -> None:
    session.client("cloudwatch").put_metric_alarm(
        AlarmName=f"{keys.alarm_prefix(prefix)}{prefix}-llama-01KE5Q86000000000000000000-a001--log-silence",
        Namespace=keys.HEARTBEAT_NAMESPACE,
        MetricName=keys.HEARTBEAT_METRIC,
        Statistic="Sum",
        Period=60,
        EvaluationPeriods=5,
        Threshold=1,
        ComparisonOperator="LessThanThreshold",
    )


def check(session: Any, **context: str) -> list[Finding]:
    pf = Preflight(session, REGION, SupervisorConfig.from_mapping({"allowedRoleArns": [ROLE], **context}))
    assert pf.check_identity().level == OK
    return pf.check_prefix()


def failures(findings: list[Finding]) -> list[str]:
    return [f.message for f in findings if f.level == FAIL]


@pytest.mark.claim(
    "another stack of the region already uses `jobPrefix` (its `JobPrefix` output, or for a stack deployed before that output, its template)"
)
@pytest.mark.claim(
    "The EventBridge rules, the IAM policies, the hang alarms (`sagewarden-<prefix>-hang-*`) and the dashboard are scoped to it; no two deployments of a region may share one."
)
@pytest.mark.claim(
    "so the preflight refuses a prefix another stack uses, a stack name that is not a sagewarden stack, and a new prefix for a deployed stack; re-deploying the same stack passes"
)
@pytest.mark.claim(
    "so two deployments in one account, whose prefixes differ (the preflight sees to it), never touch each other's alarms"
)
def test_prefix_of_another_stack_is_refused_with_a_free_one_suggested(session: boto3.Session) -> None:
    deploy(session, constants.STACK_ID, "sw")

    (problem,) = failures(check(session, stackName=SIDE))  # a second stack, the default prefix

    assert f"jobPrefix 'sw' is already used by stack {constants.STACK_ID} in {REGION}" in problem
    assert "delete each other's hang alarms" in problem and "JOB_PREFIX=sw2" in problem


@pytest.mark.claim(
    "so the preflight refuses a prefix another stack uses, a stack name that is not a sagewarden stack, and a new prefix for a deployed stack; re-deploying the same stack passes"
)
def test_redeploying_the_same_stack_with_its_prefix_passes(session: boto3.Session) -> None:
    deploy(session, constants.STACK_ID, "sw")
    hang_alarm(session, "sw")  # its own alarms: no warning

    findings = check(session)

    assert [f.level for f in findings] == [OK]
    assert "jobPrefix 'sw', stack Sagewarden: no other deployment" in findings[0].message


def test_a_second_deployment_with_its_own_stack_and_prefix_passes(session: boto3.Session) -> None:
    deploy(session, constants.STACK_ID, "sw")
    deploy(session, "Unrelated", None, sagewarden=False)
    hang_alarm(session, "sw")

    findings = check(session, stackName=SIDE, jobPrefix="tb")

    assert [f.level for f in findings] == [OK]
    assert findings[0].message.endswith(f"other deployments: {constants.STACK_ID} (sw)")


@pytest.mark.claim(
    "the stack name belongs to a stack that is not sagewarden; the stack is deployed with another prefix"
)
@pytest.mark.claim(
    "so the preflight refuses a prefix another stack uses, a stack name that is not a sagewarden stack, and a new prefix for a deployed stack; re-deploying the same stack passes"
)
def test_changing_the_prefix_of_a_deployed_stack_is_refused(session: boto3.Session) -> None:
    deploy(session, SIDE, "tb")

    (problem,) = failures(check(session, stackName=SIDE, jobPrefix="tc"))

    assert f"stack {SIDE} runs with jobPrefix 'tb'" in problem
    assert "stop supervising its runs (their jobs are named tb-*)" in problem
    assert "JOB_PREFIX=tb" in problem and "STACK=<name>" in problem


@pytest.mark.claim(
    "the stack name belongs to a stack that is not sagewarden; the stack is deployed with another prefix"
)
@pytest.mark.claim(
    "so the preflight refuses a prefix another stack uses, a stack name that is not a sagewarden stack, and a new prefix for a deployed stack; re-deploying the same stack passes"
)
def test_a_stack_name_taken_by_something_else_is_refused(session: boto3.Session) -> None:
    deploy(session, "Training", None, sagewarden=False)

    (problem,) = failures(check(session, stackName="Training", jobPrefix="tr"))

    assert "stack Training" in problem and "is not a sagewarden deployment" in problem


@pytest.mark.claim("Hang alarms under the prefix that no stack claims are a warning")
def test_hang_alarms_no_stack_claims_are_a_warning(session: boto3.Session) -> None:
    hang_alarm(session, "sw")  # left by a destroyed deployment, or one this identity cannot see

    findings = check(session)

    assert [f.level for f in findings] == [WARN, OK]
    assert "1 hang alarm(s) named sagewarden-sw-hang-* exist" in findings[0].message
    assert "no stack claims jobPrefix 'sw'" in findings[0].message


def _stack(name: str, **fields: Any) -> dict[str, Any]:
    return {
        "StackName": name,
        "CreationTime": "2026-01-01T00:00:00Z",
        "StackStatus": "UPDATE_COMPLETE",
        **fields,
    }


def _older_template(prefix: str) -> str:
    env = {"Variables": {keys.ENV_JOB_PREFIX: prefix, keys.ENV_TABLE_NAME: {"Ref": "Table"}}}
    return json.dumps(
        {
            "Description": constants.STACK_DESCRIPTION,
            "Resources": {"Fn": {"Type": "AWS::Lambda::Function", "Properties": {"Environment": env}}},
        }
    )


@pytest.mark.claim(
    "another stack of the region already uses `jobPrefix` (its `JobPrefix` output, or for a stack deployed before that output, its template)"
)
def test_an_older_stack_without_the_output_is_read_from_its_template(session: boto3.Session) -> None:
    cfn = session.client("cloudformation", region_name=REGION)
    stubber = Stubber(cfn)
    stubber.add_response(
        "describe_stacks", {"Stacks": [_stack("Sagewarden", Description=constants.STACK_DESCRIPTION)]}
    )
    stubber.add_response("get_template", {"TemplateBody": _older_template("sw")}, {"StackName": "Sagewarden"})

    with stubber:
        (problem,) = failures(check(StubbedSession(session, cloudformation=cfn), stackName=SIDE))

    assert "jobPrefix 'sw' is already used by stack Sagewarden" in problem


def test_an_older_stack_whose_template_cannot_be_read_is_a_warning(session: boto3.Session) -> None:
    cfn = session.client("cloudformation", region_name=REGION)
    stubber = Stubber(cfn)
    stubber.add_response(
        "describe_stacks", {"Stacks": [_stack("Sagewarden", Description=constants.STACK_DESCRIPTION)]}
    )
    stubber.add_client_error(
        "get_template", "AccessDenied", "not authorized to perform: cloudformation:GetTemplate"
    )

    with stubber:
        findings = check(StubbedSession(session, cloudformation=cfn), stackName=SIDE, jobPrefix="tb")

    assert [f.level for f in findings] == [WARN, OK]
    assert "stack Sagewarden is a sagewarden deployment whose job prefix is unknown" in findings[0].message
    assert "make sure it does not use 'tb'" in findings[0].message


def test_every_page_of_stacks_is_read(session: boto3.Session) -> None:
    cfn = session.client("cloudformation", region_name=REGION)
    stubber = Stubber(cfn)
    output = [{"OutputKey": constants.OUTPUT_JOB_PREFIX, "OutputValue": "sw"}]
    stubber.add_response("describe_stacks", {"Stacks": [_stack("Other")], "NextToken": "p2"}, {})
    stubber.add_response(
        "describe_stacks", {"Stacks": [_stack("Sagewarden", Outputs=output)]}, {"NextToken": "p2"}
    )

    with stubber:
        (problem,) = failures(check(StubbedSession(session, cloudformation=cfn), stackName=SIDE))
        stubber.assert_no_pending_responses()

    assert "already used by stack Sagewarden" in problem


def test_listing_stops_after_its_page_bound_and_says_so(session: boto3.Session) -> None:
    from sagewarden_cli.deployments import list_stacks

    cfn = session.client("cloudformation", region_name=REGION)
    stubber = Stubber(cfn)
    stubber.add_response("describe_stacks", {"Stacks": [_stack("A")], "NextToken": "p2"}, {})
    stubber.add_response("describe_stacks", {"Stacks": [_stack("B")], "NextToken": "p3"}, {"NextToken": "p2"})

    with stubber:
        listing = list_stacks(cfn, max_pages=2)

    assert not listing.complete and [s.name for s in listing.stacks] == ["A", "B"]


@pytest.mark.claim("A check your identity may not make (access denied) is a warning.")
def test_stacks_that_cannot_be_listed_are_a_warning_not_a_pass(session: boto3.Session) -> None:
    cfn = session.client("cloudformation", region_name=REGION)
    stubber = Stubber(cfn)
    stubber.add_client_error(
        "describe_stacks", "AccessDenied", "User is not authorized to perform: DescribeStacks"
    )

    with stubber:
        findings = check(StubbedSession(session, cloudformation=cfn))

    assert [f.level for f in findings] == [WARN]
    assert "cannot list the CloudFormation stacks" in findings[0].message


@pytest.mark.claim(
    "`make deploy` runs the whole **preflight** ([docs/deploy.md](docs/deploy.md#the-preflight-make-doctor)) and stops before `cdk deploy` if anything would make the deploy fail"
)
def test_make_doctor_with_a_second_stack_on_the_first_ones_prefix_blocks_the_deploy(
    session: boto3.Session,
) -> None:
    session.client("ssm").put_parameter(Name="/cdk-bootstrap/hnb659fds/version", Value="30", Type="String")
    deploy(session, constants.STACK_ID, "sw")
    out = io.StringIO()

    # what `make doctor STACK=SagewardenTeamB` passes: the stackName context, the default jobPrefix
    code = doctor.run(["-c", f"allowedRoleArns={ROLE}", "-c", f"stackName={SIDE}"], session=session, out=out)

    assert code == 1
    (line,) = [line for line in out.getvalue().splitlines() if line.startswith(FAIL) and " prefix " in line]
    assert "already used by stack Sagewarden" in line


def test_the_bucket_policy_names_the_roles_of_the_configured_stack(session: boto3.Session) -> None:
    s3 = session.client("s3", region_name=REGION)
    stubber = Stubber(s3)
    stubber.add_client_error("head_bucket", "403", "Forbidden", 403)
    stubber.add_response("head_bucket", {})
    config = SupervisorConfig.from_mapping({"stackName": SIDE, "checkpointBuckets": ["team-checkpoints"]})
    pf = Preflight(StubbedSession(session, s3=s3), REGION, config)
    assert pf.check_identity().level == OK

    with stubber:
        (finding,) = pf.check_buckets()

    assert finding.detail is not None
    condition = json.loads(finding.detail.split(": ", 1)[1])["Condition"]
    assert condition == {"ArnLike": {"aws:PrincipalArn": f"arn:aws:iam::{ACCOUNT}:role/{SIDE}-*"}}


def test_prefix_check_names_match_the_infrastructure() -> None:
    from sagewarden_cli import deployments

    assert deployments.OUTPUT_JOB_PREFIX == constants.OUTPUT_JOB_PREFIX
    assert constants.STACK_DESCRIPTION.startswith(deployments.STACK_DESCRIPTION_START)
    assert deployments.ENV_JOB_PREFIX == keys.ENV_JOB_PREFIX
    assert deployments.ALARM_PREFIX.format(prefix="tb") == keys.alarm_prefix("tb")
