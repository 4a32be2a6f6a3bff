"""IAM proven by replay: the shipped drill scenarios' AWS calls against the synthesized template.

Every drill run and every LocalAccount already checks its calls (DrillRunner reports findings
as invariant violations; LocalAccount raises on close). This module runs the shipped scenarios
and proves the check itself: mutations of the template that must be caught, and the report.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import drill.iam.__main__ as iam_cli
from drill.account.local import ACCOUNT, BUCKET, EXECUTION_ROLE, REGION, TABLE, LocalAccount
from drill.iam import IamReplayError
from drill.iam.replay import ReplayReport, account_iam, check
from drill.scenarios.runner import DrillResult, run_scenario
from drill.scenarios.spec import default_training_job, load
from sagewarden import keys
from tests.scenarios.helpers import run_spec

pytestmark = pytest.mark.xdist_group("iam_replay")  # one worker runs the shipped scenarios once

TOPIC = f"arn:aws:sns:{REGION}:{ACCOUNT}:sagewarden-alerts"
ALARMS = f"arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm:"
SHIPPED = iam_cli.shipped_scenarios()


@pytest.fixture(scope="module")
def shipped(template: dict[str, Any]) -> dict[str, DrillResult]:
    return {p.stem: run_scenario(load(p, bucket=BUCKET, role_arn=EXECUTION_ROLE), template) for p in SHIPPED}


@pytest.fixture(scope="module")
def default_report(shipped: dict[str, DrillResult]) -> ReplayReport:
    report: ReplayReport = shipped["default"].iam
    return report


def recheck(report: ReplayReport, template: dict[str, Any]) -> ReplayReport:
    """The recorded calls of ``report``, checked against another template."""
    iam, _ = account_iam(template, region=REGION, account=ACCOUNT, table=TABLE, topic_arn=TOPIC)
    first, *rest = report.recorders
    return check(first, iam, recorders=rest)


def mutated(template: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    copy_ = copy.deepcopy(template)
    change(copy_["Resources"])
    return copy_


def policy(resources: dict[str, Any], prefix: str) -> dict[str, Any]:
    (found,) = [r for k, r in resources.items() if k.startswith(prefix) and r["Type"] == "AWS::IAM::Policy"]
    return dict(found["Properties"]["PolicyDocument"])


def statements(resources: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    return list(policy(resources, prefix)["Statement"])


def set_statements(resources: dict[str, Any], prefix: str, new: list[dict[str, Any]]) -> None:
    (key,) = [k for k, r in resources.items() if k.startswith(prefix) and r["Type"] == "AWS::IAM::Policy"]
    resources[key]["Properties"]["PolicyDocument"]["Statement"] = new


def actions_of(findings: list[Any]) -> set[str]:
    return {f.verdict.request.action for f in findings if f.verdict is not None}


# -- the shipped scenarios ------------------------------------------------------------------------


def test_iam_replay_shipped_scenarios_exist() -> None:
    assert [p.name for p in SHIPPED] == sorted(p.name for p in Path("drill/scenarios").glob("*.json"))
    assert SHIPPED, "no shipped scenario to replay"


@pytest.mark.parametrize("name", [p.stem for p in SHIPPED])
def test_iam_replay_shipped_scenario_makes_only_allowed_calls(
    shipped: dict[str, DrillResult], name: str
) -> None:
    report: ReplayReport = shipped[name].iam

    assert report.denied == [] and report.unknown == [] and report.unmapped == [], report.render()
    assert shipped[name].invariant_violations == []
    assert report.calls > 0 and report.allowed == report.distinct_requests > 0


def test_iam_replay_default_scenario_covers_the_calls_that_matter(default_report: ReplayReport) -> None:
    # The check is only as good as what was recorded: these requests must have been seen.
    seen = {(r.action, r.resource) for rec in default_report.recorders for _, r in rec.requests}
    actions = {a for a, _ in seen}

    assert ("cloudwatch:DescribeAlarms", f"{ALARMS}*") in seen
    assert ("iam:PassRole", EXECUTION_ROLE) in seen
    assert {
        "sagemaker:CreateTrainingJob",
        "sagemaker:AddTags",
        "sagemaker:DescribeTrainingJob",
        "sagemaker:StopTrainingJob",
        "cloudwatch:PutMetricAlarm",
        "cloudwatch:TagResource",
        "cloudwatch:DeleteAlarms",
        "cloudwatch:GetMetricData",
        "kms:GenerateDataKey",
        "kms:Decrypt",
        "sns:Publish",
        "dynamodb:PutItem",
        "dynamodb:Query",
        "dynamodb:BatchWriteItem",
        "logs:GetLogEvents",
        "logs:DescribeLogStreams",
        "s3:ListBucket",
        "s3:GetObject",
    } <= actions
    assert any(a == "dynamodb:Query" and "/index/" in r for a, r in seen)
    # the simulator's own writes (checkpoints, training logs) are not the supervisor's calls
    assert "s3:PutObject" not in actions and "logs:PutLogEvents" not in actions


@pytest.mark.claim("Its role may put, tag and delete only those throwaway names.")
def test_iam_replay_checkpoint_retention_moves_are_seen_and_allowed(shipped: dict[str, DrillResult]) -> None:
    """The retention scenario's copies and deletes reach the replay (the sweep's calls), and it
    allows them: the opt-in grant is what retention needs, not more."""
    report: ReplayReport = shipped["checkpoint-retention"].iam
    seen = {(r.action, r.resource) for rec in report.recorders for _, r in rec.requests}
    actions = {a for a, _ in seen}
    assert {"s3:PutObject", "s3:DeleteObject", "s3:GetObject", "s3:ListBucket"} <= actions
    assert any(a == "s3:PutObject" and "/keep-2/checkpoints-archive/" in r for a, r in seen)
    assert report.denied == [] and report.unknown == [] and report.unmapped == [], report.render()


def test_iam_replay_team_archive_reads_versioning_at_submit_and_deletes_in_batches(
    shipped: dict[str, DrillResult],
) -> None:
    """The two-runs-one-archive scenario's submit reads the bucket's versioning (the API's role),
    its copies land under each run's id and its batched deletes are authorised per key."""
    report: ReplayReport = shipped["team-archive"].iam
    seen = {(r.action, r.resource) for rec in report.recorders for _, r in rec.requests}
    actions = {a for a, _ in seen}
    assert {"s3:GetBucketVersioning", "s3:PutObject", "s3:DeleteObject"} <= actions
    assert any(a == "s3:PutObject" and "/team-archive/" in r for a, r in seen)
    assert any(a == "s3:DeleteObject" and r.endswith("/trainer_state.json") for a, r in seen)
    assert report.denied == [] and report.unknown == [] and report.unmapped == [], report.render()


# -- mutations the check must catch ---------------------------------------------------------------


@pytest.mark.claim(
    "A denied, unknown or unmapped call fails the test (or the drill) and names the call, the request and the statement that came closest."
)
@pytest.mark.claim(
    "`DescribeAlarms` with `AlarmNamePrefix` is authorized against `alarm:*`, not against the alarm-name prefix"
)
@pytest.mark.claim(
    "proves the checker with template mutations: revert that fix, remove a grant, add an explicit deny, widen a grant, use `NotAction`/`NotResource`, add an unmodelled condition"
)
def test_iam_replay_catches_the_describe_alarms_prefix_grant(
    template: dict[str, Any], default_report: ReplayReport
) -> None:
    def revert_fix(resources: dict[str, Any]) -> None:
        stmts = statements(resources, "SupervisorPermissionsHangAlarms")
        scoped = next(s for s in stmts if s.get("Sid") == "SupervisorAlarmsOnly")
        scoped = {**scoped, "Action": [*scoped["Action"], "cloudwatch:DescribeAlarms"]}
        set_statements(resources, "SupervisorPermissionsHangAlarms", [scoped])

    report = recheck(default_report, mutated(template, revert_fix))

    assert actions_of(report.denied) == {"cloudwatch:DescribeAlarms"}
    assert report.unknown == []
    text = "\n".join(report.failures())
    assert "DENIED" in text and "cloudwatch.DescribeAlarms(AlarmNamePrefix=" in text
    assert f"cloudwatch:DescribeAlarms on {ALARMS}*" in text
    assert "closest:" in text and "SupervisorAlarmsOnly" in text


@pytest.mark.claim(
    "proves the checker with template mutations: revert that fix, remove a grant, add an explicit deny, widen a grant, use `NotAction`/`NotResource`, add an unmodelled condition"
)
def test_iam_replay_removing_a_grant_is_a_deny(
    template: dict[str, Any], default_report: ReplayReport
) -> None:
    def drop_pass_role(resources: dict[str, Any]) -> None:
        (key,) = [k for k in resources if k.startswith("SupervisorPermissionsPassTrainingRoles")]
        del resources[key]

    report = recheck(default_report, mutated(template, drop_pass_role))

    assert actions_of(report.denied) == {"iam:PassRole"}
    assert "allowedRoleArns" in report.denied[0].render()


def test_iam_replay_removing_the_kms_grant_denies_publishing(
    template: dict[str, Any], default_report: ReplayReport
) -> None:
    def drop_kms(resources: dict[str, Any]) -> None:
        for key, res in resources.items():
            if res["Type"] == "AWS::IAM::Policy" and "DefaultPolicy" in key:
                doc = res["Properties"]["PolicyDocument"]
                doc["Statement"] = [
                    s for s in doc["Statement"] if "kms:Decrypt" not in json.dumps(s["Action"])
                ]

    report = recheck(default_report, mutated(template, drop_kms))

    assert actions_of(report.denied) == {"kms:GenerateDataKey", "kms:Decrypt"}


def test_iam_replay_checks_what_the_lambda_service_does_with_each_role(
    template: dict[str, Any], default_report: ReplayReport
) -> None:
    """README: each role is also checked for what the Lambda service does with it: writing the
    function's logs and sending failed events to the dead-letter queue (no recorded call makes
    these requests: the service does)."""

    def drop(*actions: str) -> Callable[[dict[str, Any]], None]:
        def change(resources: dict[str, Any]) -> None:
            for res in resources.values():
                if res["Type"] != "AWS::IAM::Policy":
                    continue
                doc = res["Properties"]["PolicyDocument"]
                for st in doc["Statement"]:
                    listed = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
                    st["Action"] = [a for a in listed if a not in actions] or ["none:None"]

        return change

    logs = recheck(default_report, mutated(template, drop("logs:CreateLogStream", "logs:PutLogEvents")))
    dlq = recheck(default_report, mutated(template, drop("sqs:SendMessage")))

    assert {"logs:CreateLogStream", "logs:PutLogEvents"} <= actions_of(logs.denied)
    assert all("the Lambda service" in f.render() for f in logs.denied)
    assert "sqs:SendMessage" in actions_of(dlq.denied)
    assert not recheck(default_report, template).denied  # the template as synthesized allows them


@pytest.mark.claim(
    "proves the checker with template mutations: revert that fix, remove a grant, add an explicit deny, widen a grant, use `NotAction`/`NotResource`, add an unmodelled condition"
)
def test_iam_replay_an_explicit_deny_wins(template: dict[str, Any], default_report: ReplayReport) -> None:
    def deny_stop(resources: dict[str, Any]) -> None:
        stmts = statements(resources, "SupervisorPermissionsSageMakerTrainingJobs")
        stmts.append(
            {"Effect": "Deny", "Action": "sagemaker:StopTrainingJob", "Resource": "*", "Sid": "NoStops"}
        )
        set_statements(resources, "SupervisorPermissionsSageMakerTrainingJobs", stmts)

    report = recheck(default_report, mutated(template, deny_stop))

    assert actions_of(report.denied) == {"sagemaker:StopTrainingJob"}
    assert all(f.verdict and f.verdict.reason == "explicit Deny" for f in report.denied)
    assert "NoStops" in report.denied[0].render()


@pytest.mark.claim(
    "proves the checker with template mutations: revert that fix, remove a grant, add an explicit deny, widen a grant, use `NotAction`/`NotResource`, add an unmodelled condition"
)
def test_iam_replay_a_wildcard_grant_allows(template: dict[str, Any], default_report: ReplayReport) -> None:
    def wildcard(resources: dict[str, Any]) -> None:
        set_statements(
            resources,
            "SupervisorPermissionsHangAlarms",
            [
                {"Effect": "Allow", "Action": "cloudwatch:*Alarm*", "Resource": f"{ALARMS}*"},
                {"Effect": "Allow", "Action": "cloudwatch:TagResource", "Resource": "*"},
            ],
        )

    report = recheck(default_report, mutated(template, wildcard))

    assert report.findings == []


@pytest.mark.claim(
    "proves the checker with template mutations: revert that fix, remove a grant, add an explicit deny, widen a grant, use `NotAction`/`NotResource`, add an unmodelled condition"
)
def test_iam_replay_not_action_and_not_resource(
    template: dict[str, Any], default_report: ReplayReport
) -> None:
    def not_action(resources: dict[str, Any]) -> None:
        set_statements(
            resources,
            "SupervisorPermissionsHangAlarms",
            [
                {
                    "Effect": "Allow",
                    "NotAction": ["cloudwatch:DeleteAlarms", "iam:*"],
                    "Resource": f"{ALARMS}*",
                }
            ],
        )

    def not_resource(resources: dict[str, Any]) -> None:
        set_statements(
            resources,
            "SupervisorPermissionsHangAlarms",
            [{"Effect": "Allow", "Action": "cloudwatch:*", "NotResource": f"{ALARMS}*"}],
        )

    assert actions_of(recheck(default_report, mutated(template, not_action)).denied) == {
        "cloudwatch:DeleteAlarms"
    }
    assert actions_of(recheck(default_report, mutated(template, not_resource)).denied) == {
        "cloudwatch:PutMetricAlarm",
        "cloudwatch:TagResource",
        "cloudwatch:DeleteAlarms",
        "cloudwatch:DescribeAlarms",
    }


@pytest.mark.claim("A condition or value the checker does not model is *unknown*, never allowed.")
@pytest.mark.claim(
    "proves the checker with template mutations: revert that fix, remove a grant, add an explicit deny, widen a grant, use `NotAction`/`NotResource`, add an unmodelled condition"
)
def test_iam_replay_an_unmodelled_condition_is_unknown(
    template: dict[str, Any], default_report: ReplayReport
) -> None:
    def time_bound(resources: dict[str, Any]) -> None:
        (stmt,) = statements(resources, "SupervisorPermissionsTrainingLogsRead")
        stmt = {**stmt, "Condition": {"DateLessThan": {"aws:CurrentTime": "2030-01-01T00:00:00Z"}}}
        set_statements(resources, "SupervisorPermissionsTrainingLogsRead", [stmt])

    report = recheck(default_report, mutated(template, time_bound))

    logs_reads = {
        r.action for rec in default_report.recorders for _, r in rec.requests if r.action.startswith("logs:")
    }
    assert report.denied == []
    assert actions_of(report.unknown) == logs_reads >= {"logs:GetLogEvents", "logs:DescribeLogStreams"}
    assert "DateLessThan is not modelled" in report.unknown[0].render()


@pytest.mark.claim(
    "A denied, unknown or unmapped call fails the test (or the drill) and names the call, the request and the statement that came closest."
)
def test_iam_replay_fails_a_local_account_on_close(template: dict[str, Any]) -> None:
    def drop_pass_role(resources: dict[str, Any]) -> None:
        (key,) = [k for k in resources if k.startswith("SupervisorPermissionsPassTrainingRoles")]
        del resources[key]

    body = {"name": "llama", "training_job": default_training_job("llama", BUCKET, EXECUTION_ROLE)}
    denied = r"(?s)DENIED: sagewarden\.handlers\.api\.handler: sagemaker\.CreateTrainingJob.*iam:PassRole"
    with (
        pytest.raises(IamReplayError, match=denied),
        LocalAccount(mutated(template, drop_pass_role), store="memory") as acct,
    ):
        status, _ = acct.api("POST", "/runs", body=body)
        assert status == 201  # the simulated SageMaker does not check IAM; the replay does


# -- the deploy-time alarm-shape check (a custom resource: it runs when the account is created) ---


SHAPE_CHECK = keys.HANDLER_ALARM_SHAPE_CHECK
THROWAWAY = f"{ALARMS}{keys.DEFAULT_ALARM_PREFIX}{keys.SHAPE_CHECK_NAME_PART}"


@pytest.mark.claim(
    "the sweep's role alone (the only function that decides retention) also gets `s3:PutObject`"
)
def test_iam_replay_checks_the_alarm_shape_checks_calls_against_its_role(template: dict[str, Any]) -> None:
    with LocalAccount(template, store="memory") as acct:
        report = acct.take_iam_report()
        answer = acct.alarm_shapes

    seen = {
        (r.action, r.resource) for rec in report.recorders for (fn, r) in rec.requests if fn == SHAPE_CHECK
    }
    assert answer is not None and answer.status == "SUCCESS"
    assert {a for a, _ in seen} == {
        "cloudwatch:PutMetricAlarm",
        "cloudwatch:TagResource",
        "cloudwatch:DeleteAlarms",
    }
    assert all(res.startswith(THROWAWAY) for _, res in seen)
    assert len({res for a, res in seen if a == "cloudwatch:PutMetricAlarm"}) == answer.report["alarms"]
    assert report.findings == [], report.render()
    # least privilege: every grant of the check's role is used, by its calls or by Lambda for it
    (role,) = [r for r, handlers in report.roles.items() if SHAPE_CHECK in handlers]
    assert report.roles[role] == [SHAPE_CHECK]
    assert [g.render() for g in report.grants if g.role == role and not g.used_by] == []


def test_iam_replay_denies_the_alarm_shape_check_without_its_grant(template: dict[str, Any]) -> None:
    def narrow_the_grant(resources: dict[str, Any]) -> None:
        (st,) = statements(resources, "SupervisorAlarmShapeCheckPolicy")
        joined = st["Resource"]["Fn::Join"][1]
        joined[-1] = joined[-1].replace("shape-check-*", "shape-check-one-host-*")
        set_statements(resources, "SupervisorAlarmShapeCheckPolicy", [st])

    denied = r"(?s)DENIED: sagewarden\.handlers\.check_alarm_shapes\.handler: cloudwatch\.PutMetricAlarm"
    with (
        pytest.raises(IamReplayError, match=denied),
        LocalAccount(mutated(template, narrow_the_grant), store="memory"),
    ):
        pass


@pytest.mark.claim(
    "A denied, unknown or unmapped call fails the test (or the drill) and names the call, the request and the statement that came closest."
)
def test_iam_replay_findings_are_drill_violations(template: dict[str, Any]) -> None:
    def drop_alarm_listing(resources: dict[str, Any]) -> None:
        stmts = statements(resources, "SupervisorPermissionsHangAlarms")
        set_statements(
            resources,
            "SupervisorPermissionsHangAlarms",
            [s for s in stmts if s.get("Sid") != "ListAlarmsByPrefix"],
        )

    from drill.scenarios.spec import parse

    scenario = parse(
        {"seed": 3, "runs": [run_spec("llama", instance_count=1)]}, bucket=BUCKET, role_arn=EXECUTION_ROLE
    )
    result = run_scenario(scenario, mutated(template, drop_alarm_listing))

    assert [v for v in result.invariant_violations if "cloudwatch:DescribeAlarms" in v]
    assert all(v.startswith("IAM replay: DENIED") for v in result.invariant_violations)


# -- least privilege: the report ------------------------------------------------------------------


def test_iam_replay_report_lists_grants_no_call_needed(default_report: ReplayReport) -> None:
    candidates = {(g.role, g.action, g.resource) for g in default_report.candidates_for_removal}
    needed = {(g.role, g.action) for g in default_report.grants if g.used_by == "code"}
    api_role = next(
        role
        for role, handlers in default_report.roles.items()
        if "sagewarden.handlers.api.handler" in handlers
    )
    table = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{TABLE}"

    # certain by AWS semantics: item writes are authorised on the table, never on an index ARN
    # (grant_read_write grants them on the indexes too)
    assert (api_role, "dynamodb:PutItem", f"{table}/index/due") in candidates
    # certain for this code base: no adapter calls BatchGetItem
    assert (api_role, "dynamodb:BatchGetItem", table) in candidates
    # certain: submitting a run creates a job and passes the role
    assert (api_role, "sagemaker:CreateTrainingJob") in needed and (api_role, "iam:PassRole") in needed
    assert not any(
        g.action == "iam:PassRole" for g in default_report.candidates_for_removal if g.role == api_role
    )


def test_iam_replay_report_command_prints_the_report(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], shipped: dict[str, DrillResult]
) -> None:
    monkeypatch.setattr(
        iam_cli, "run_scenario", lambda scenario, template: shipped[Path(scenario.source).stem]
    )

    assert iam_cli.main(["--table"]) == 0
    out = capsys.readouterr().out
    assert "0 denied, 0 unknown, 0 unmapped" in out
    assert "candidates for removal (no recorded call needed them):" in out
    assert "dynamodb.TransactWriteItems" in out  # the mapping table
