"""Two deployments in one account and region (README "Two deployments side by side"): with their own
`stackName` and `jobPrefix`, neither stack names, routes, scopes or matches anything of the other."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from typing import Any

import pytest
from infra_synth import ROLE_A, SynthResult, as_list, joined, synthesize

from infra import constants
from sagewarden import keys
from sagewarden.domain.vocabulary.names import job_name

SHARED = {"allowedRoleArns": [ROLE_A], "checkpointBuckets": ["team-checkpoints"]}
TEAM_B = {**SHARED, "stackName": "SagewardenTeamB", "jobPrefix": "tb"}
RUN_ID = "01KE5Q86000000000000000000"
# The one resource every deployment of a region shares by design (it is not owned by any stack).
SHARED_NAMES = {keys.TRAINING_LOG_GROUP}


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SynthResult, SynthResult]]:
    a = synthesize(dict(SHARED), tmp_path_factory.mktemp("side-a"))
    b = synthesize(dict(TEAM_B), tmp_path_factory.mktemp("side-b"))
    yield a, b


def _text(value: Any) -> str:
    return joined(value, strict=False)


def _scoped_names(synth: SynthResult, marker: str) -> set[str]:
    """The name patterns of every IAM resource ``...<marker><pattern>`` the stack grants on."""
    return {
        _text(resource).split(marker, 1)[1]
        for statement in synth.all_statements()
        for resource in as_list(statement["Resource"])
        if marker in _text(resource)
    }


def _rule_prefix(synth: SynthResult, source: str, field: str) -> str:
    (rule,) = [
        r["Properties"]["EventPattern"]
        for r in synth.resources("AWS::Events::Rule").values()
        if r["Properties"].get("EventPattern", {}).get("source") == [source]
    ]
    (condition,) = rule["detail"][field]
    return str(condition["prefix"])


# Properties that name a resource uniquely within an account and region (or within the shared log group)
PHYSICAL_NAMES = {
    "AlarmName",
    "DashboardName",
    "FilterName",
    "FunctionName",
    "LogGroupName",
    "QueueName",
    "RoleName",
    "ScheduleName",
    "TableName",
    "TopicName",
}


def _physical_names(synth: SynthResult) -> set[str]:
    """Every physical name the template sets itself (CloudFormation generates the others from the
    stack name)."""
    names: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                text = _text(item) if key in PHYSICAL_NAMES and isinstance(item, str | dict) else ""
                if text and "${" not in text.replace("${AWS::", ""):  # not a reference to a resource
                    names.add(text)
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for resource in synth.raw["Resources"].values():
        walk(resource.get("Properties", {}))
    return names


def _job(prefix: str) -> str:
    return job_name(prefix, "llama-8b", RUN_ID, 1)


def _alarm(prefix: str) -> str:
    return f"{keys.alarm_prefix(prefix)}{_job(prefix)}--log-silence"


def test_two_deployments_have_their_own_stack_names_and_say_their_prefix(
    pair: tuple[SynthResult, SynthResult],
) -> None:
    a, b = pair

    assert a.synth_error is None and b.synth_error is None, (a.synth_error, b.synth_error)
    assert (a.outdir / f"{constants.STACK_ID}.template.json").exists()
    assert (b.outdir / "SagewardenTeamB.template.json").exists()
    assert a.raw["Outputs"][constants.OUTPUT_JOB_PREFIX]["Value"] == keys.DEFAULT_JOB_PREFIX
    assert b.raw["Outputs"][constants.OUTPUT_JOB_PREFIX]["Value"] == "tb"


@pytest.mark.claim(
    "The EventBridge rules, the IAM policies, the hang alarms (`sagewarden-<prefix>-hang-*`) and the dashboard are scoped to it; no two deployments of a region may share one."
)
@pytest.mark.claim("a test synthesizes two stacks and checks that neither matches the other's jobs or alarms")
@pytest.mark.claim(
    "so two deployments in one account, whose prefixes differ (the preflight sees to it), never touch each other's alarms"
)
def test_two_deployments_route_only_their_own_job_and_alarm_events(
    pair: tuple[SynthResult, SynthResult],
) -> None:
    for own, (own_prefix, other_prefix) in ((pair[0], ("sw", "tb")), (pair[1], ("tb", "sw"))):
        job_rule = _rule_prefix(own, "aws.sagemaker", "TrainingJobName")
        alarm_rule = _rule_prefix(own, "aws.cloudwatch", "alarmName")

        assert _job(own_prefix).startswith(job_rule) and not _job(other_prefix).startswith(job_rule)
        assert _alarm(own_prefix).startswith(alarm_rule) and not _alarm(other_prefix).startswith(alarm_rule)


@pytest.mark.claim(
    "The EventBridge rules, the IAM policies, the hang alarms (`sagewarden-<prefix>-hang-*`) and the dashboard are scoped to it; no two deployments of a region may share one."
)
@pytest.mark.claim("a test synthesizes two stacks and checks that neither matches the other's jobs or alarms")
def test_two_deployments_iam_scopes_never_cover_the_others_jobs_or_alarms(
    pair: tuple[SynthResult, SynthResult],
) -> None:
    for own, (own_prefix, other_prefix) in ((pair[0], ("sw", "tb")), (pair[1], ("tb", "sw"))):
        jobs = _scoped_names(own, ":training-job/")
        alarms = _scoped_names(own, ":alarm:") - {"*"}  # DescribeAlarms is authorised on alarm:* only

        assert jobs and alarms
        assert all(fnmatch.fnmatchcase(_job(own_prefix), p) for p in jobs), jobs
        assert not any(fnmatch.fnmatchcase(_job(other_prefix), p) for p in jobs), jobs
        # every alarm grant is under the deployment's own alarm prefix: its hang alarms, and the
        # deploy-time alarm-shape check's throwaway alarms (<prefix>shape-check-*)
        assert all(p.startswith(keys.alarm_prefix(own_prefix)) for p in alarms), alarms
        assert any(fnmatch.fnmatchcase(_alarm(own_prefix), p) for p in alarms), alarms
        assert not any(fnmatch.fnmatchcase(_alarm(other_prefix), p) for p in alarms), alarms
        assert not any(
            fnmatch.fnmatchcase(f"{keys.alarm_prefix(other_prefix)}{keys.SHAPE_CHECK_NAME_PART}x", p)
            for p in alarms
        ), alarms


def test_two_deployments_name_no_resource_alike(pair: tuple[SynthResult, SynthResult]) -> None:
    a, b = pair
    names_a, names_b = _physical_names(a), _physical_names(b)

    assert {f"{constants.STACK_ID}-sw-heartbeat", "sagewarden-sw-${AWS::Region}"} <= names_a
    assert {"SagewardenTeamB-tb-heartbeat", "sagewarden-tb-${AWS::Region}"} <= names_b
    assert (names_a & names_b) - SHARED_NAMES == set()
    for synth, prefix in ((a, "sw"), (b, "tb")):
        for function in synth.resources("AWS::Lambda::Function").values():
            env = function["Properties"].get("Environment", {}).get("Variables", {})
            if keys.ENV_JOB_PREFIX in env:
                assert env[keys.ENV_JOB_PREFIX] == prefix
                assert env[keys.ENV_ALARM_PREFIX] == keys.alarm_prefix(prefix)


def test_the_template_file_is_named_after_the_stack() -> None:
    from infra.template import template_file

    assert template_file(None) == f"{constants.STACK_ID}.template.json"
    assert template_file({"stackName": "SagewardenTeamB"}) == "SagewardenTeamB.template.json"


def test_two_supervisors_in_one_stack_name_no_resource_alike() -> None:
    # the construct library: a platform team's stack with two supervisors (examples/platform-app)
    from aws_cdk import App, Stack
    from aws_cdk.assertions import Template

    from infra.library import SagewardenSupervisor

    stack = Stack(App(), "TrainingPlatform")
    for construct_id, prefix in (("Supervisor", "plat"), ("ResearchSupervisor", "rsch")):
        SagewardenSupervisor(stack, construct_id, allowed_role_arns=[ROLE_A], job_prefix=prefix)
    resources = Template.from_stack(stack).to_json()["Resources"]

    names: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                text = _text(item) if key in PHYSICAL_NAMES and isinstance(item, str | dict) else ""
                if text and "${" not in text.replace("${AWS::", ""):
                    names.append(text)
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for resource in resources.values():
        walk(resource.get("Properties", {}))
    filters = sorted(
        r["Properties"]["FilterName"]
        for r in resources.values()
        if r["Type"] == "AWS::Logs::SubscriptionFilter"
    )
    assert filters == [
        keys.heartbeat_filter_name("TrainingPlatform", "plat"),
        keys.heartbeat_filter_name("TrainingPlatform", "rsch"),
    ]
    repeated = sorted({n for n in names if names.count(n) > 1} - SHARED_NAMES)
    assert repeated == [], repeated
