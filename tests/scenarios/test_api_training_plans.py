"""POST /runs with a Training Plan (`training_job.ResourceConfig.TrainingPlanArn`): validated like
every other field (SageMaker's pattern), then against the plan itself (DescribeTrainingPlan)."""

from __future__ import annotations

from typing import Any

import pytest

from drill.account.local import BUCKET, EXECUTION_ROLE, LocalAccount
from drill.scenarios.spec import default_training_job
from sagewarden.api.representation import iso
from sagewarden.domain.vocabulary.models import RunStatus
from sagewarden_cli.render import plan_text

HOUR = 3_600_000
ITYPE = "ml.p5.48xlarge"


@pytest.fixture
def acct(template: dict[str, Any]) -> Any:
    with LocalAccount(template, store="memory") as account:
        t0 = account.clock.now_ms
        account.sagemaker.training_plans.add("reserved-p5", ITYPE, 2, [(t0 + 2 * HOUR, t0 + 12 * HOUR)])
        yield account


def arn(acct: Any) -> str:
    return str(acct.sagemaker.training_plans.plans()[0].arn)


def body(plan: str, count: int = 2, itype: str = ITYPE, **policy: Any) -> dict[str, Any]:
    job = default_training_job("llama-plan", BUCKET, EXECUTION_ROLE)
    job["ResourceConfig"].update({"InstanceType": itype, "InstanceCount": count, "TrainingPlanArn": plan})
    return {"name": "llama-plan", "training_job": job, "policy": policy}


def errors(resp: dict[str, Any]) -> dict[str, str]:
    return {e["field"]: e["message"] for e in resp["errors"]}


def test_api_training_plan_submit_waits_for_the_first_window_and_reads_the_plan(acct: Any) -> None:
    status, run = acct.api("POST", "/runs", body=body(arn(acct)))
    assert status == 201, run
    assert run["status"] == RunStatus.RETRY_WAIT.value and run["attempts"] == []
    assert acct.sagemaker.jobs() == []  # launched 5 minutes before the window opens, not now
    plan = run["training_plan"]
    t0 = acct.clock.now_ms
    assert plan["arn"] == arn(acct) and plan["status"] == "Scheduled" and plan["read_error"] is None
    (window,) = plan["windows"]
    assert window["termination_starts"] == iso(t0 + 12 * HOUR - 30 * 60_000)
    assert plan["next_window_start"] == iso(t0 + 2 * HOUR) and plan["on_demand"] is False
    assert (
        plan_text(plan)
        == f"reserved-p5 (Scheduled), 1 window(s); next opens {iso(t0 + 2 * HOUR)}; 0 h waited for windows"
    )
    report = acct.take_iam_report()
    assert report.findings == [], report.failures()  # DescribeTrainingPlan granted, nothing unmapped
    used = {g.action for g in report.grants if g.used_by == "code"}
    assert "sagemaker:DescribeTrainingPlan" in used


@pytest.mark.claim(
    "its instance type and count against the plan itself, and an Expired or Failed plan is refused"
)
@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"count": 3}, "training_job.ResourceConfig.InstanceCount", "reserves 2 instances"),
        ({"itype": "ml.p4d.24xlarge"}, "training_job.ResourceConfig.InstanceType", "reserves ml.p5.48xlarge"),
        (
            {"instance_fallbacks": [{"instance_type": ITYPE, "instance_count": 1}]},
            "policy.instance_fallbacks",
            "not with a training plan",
        ),
    ],
    ids=[
        "more instances than reserved",
        "another instance type",
        "instance fallbacks with a plan",
    ],
)
def test_api_training_plan_a_run_that_does_not_fit_its_plan_is_400(
    acct: Any, change: dict[str, Any], field: str, words: str
) -> None:
    status, resp = acct.api("POST", "/runs", body=body(arn(acct), **change))
    assert status == 400, resp
    assert words in errors(resp)[field]
    assert acct.sagemaker.jobs() == []


@pytest.mark.claim(
    "its instance type and count against the plan itself, and an Expired or Failed plan is refused"
)
def test_api_training_plan_arn_is_checked_against_sagemakers_pattern(acct: Any) -> None:
    status, resp = acct.api(
        "POST", "/runs", body=body("arn:aws:sagemaker:us-east-1:123456789012:trainingplan/x-y-z-w")
    )
    assert status == 400, resp
    assert "training_job.ResourceConfig.TrainingPlanArn" in errors(resp)


@pytest.mark.claim(
    "its instance type and count against the plan itself, and an Expired or Failed plan is refused"
)
def test_api_training_plan_expired_plan_is_400(acct: Any) -> None:
    acct.sagemaker.advance(acct.clock.now_ms + 13 * HOUR)
    status, resp = acct.api("POST", "/runs", body=body(arn(acct)))
    assert status == 400, resp
    assert "Expired" in errors(resp)["training_job.ResourceConfig.TrainingPlanArn"]
