"""The run API as users meet it: through the template's IAM-authorised routes, with bad input."""

from __future__ import annotations

import copy
import json

import pytest

from drill.account import BUCKET, EXECUTION_ROLE, LocalAccount
from drill.scenario import default_training_job
from sagewarden.domain.models import RunStatus


def _body(name="llama-8b", **job_changes):
    job = default_training_job(name, BUCKET, EXECUTION_ROLE)
    job.update(job_changes)
    return {"name": name, "training_job": job}


@pytest.fixture
def acct(template):
    with LocalAccount(template, store="memory") as account:
        yield account


def _fields(body):
    return {e["field"] for e in body["errors"]}


def test_api_submit_creates_run_launches_attempt_and_records_owner(acct):
    status, run = acct.api("POST", "/runs", body=_body(), caller_arn="arn:aws:iam::123456789012:role/alice")
    assert status == 201
    assert run["owner"] == "arn:aws:iam::123456789012:role/alice"
    assert run["status"] == RunStatus.STARTING.value
    assert len(run["attempts"]) == 1 and run["attempts"][0]["launch"] == "SUBMITTED"
    job = acct.sagemaker.describe_training_job(TrainingJobName=run["attempts"][0]["job_name"])
    assert job["CheckpointConfig"]["S3Uri"] == f"s3://{BUCKET}/llama-8b/checkpoints/"


def test_api_idempotency_key_returns_same_run(acct):
    headers = {"Idempotency-Key": "submit-42"}
    s1, r1 = acct.api("POST", "/runs", body=_body(), headers=headers)
    s2, r2 = acct.api("POST", "/runs", body=_body(), headers=headers)
    assert (s1, s2) == (201, 200) and r1["run_id"] == r2["run_id"]
    assert len(acct.sagemaker.jobs()) == 1  # no second launch
    s3, err = acct.api("POST", "/runs", body=_body(name="other"), headers=headers)
    assert s3 == 409 and "different request body" in err["message"]


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ("{not json", "body"),
        ("[]", "body"),
        ("", "body"),
    ],
)
def test_api_malformed_body_is_400(acct, raw, field):
    status, body = acct.api("POST", "/runs", raw_body=raw)
    assert status == 400 and field in _fields(body)
    assert acct.api("GET", "/runs")[1]["runs"] == []


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda b: b.pop("name"), "name"),
        (lambda b: b.update(name="has space"), "name"),
        (lambda b: b.update(name="x" * 40), "name"),
        (lambda b: b.update(name="-leading"), "name"),
        (lambda b: b.update(colour="blue"), "colour"),
        (
            lambda b: b["training_job"].update(RoleArn="arn:aws:iam::123456789012:role/Admin"),
            "training_job.RoleArn",
        ),
        (lambda b: b["training_job"].update(TrainingJobName="mine"), "training_job.TrainingJobName"),
        (lambda b: b["training_job"].update(Bogus=1), "training_job.Bogus"),
        (lambda b: b["training_job"].pop("CheckpointConfig"), "training_job.CheckpointConfig.S3Uri"),
        (
            lambda b: b["training_job"].update(CheckpointConfig={"S3Uri": "/local/path"}),
            "training_job.CheckpointConfig.S3Uri",
        ),
        (lambda b: b["training_job"].pop("ResourceConfig"), "training_job.ResourceConfig"),
        (
            lambda b: b["training_job"]["ResourceConfig"].update(InstanceCount=0),
            "training_job.ResourceConfig.InstanceCount",
        ),
        (
            lambda b: b["training_job"]["StoppingCondition"].update(MaxRuntimeInSeconds=30 * 86400),
            "training_job.StoppingCondition.MaxRuntimeInSeconds",
        ),
        (
            lambda b: b["training_job"].update(Environment={"SAGEWARDEN_RESUME_STEP": "5"}),
            "training_job.Environment",
        ),
        (lambda b: b.update(policy={"max_restarts": -1}), "policy.max_restarts"),
        (lambda b: b.update(policy={"no_such_knob": 1}), "policy.no_such_knob"),
        (lambda b: b.update(policy={"hang_confirmation": "3-of-3"}), "policy.hang_confirmation"),
        (
            lambda b: b.update(policy={"instance_fallbacks": [{"instance_type": "p5"}]}),
            "policy.instance_fallbacks[0]",
        ),
    ],
)
def test_api_bad_submission_is_400_with_field_and_nothing_stored(acct, mutate, field):
    body = copy.deepcopy(_body())
    mutate(body)
    status, resp = acct.api("POST", "/runs", body=body)
    assert status == 400, resp
    assert field in _fields(resp), resp
    assert acct.api("GET", "/runs")[1]["runs"] == []
    assert acct.sagemaker.jobs() == []


def test_api_reports_every_problem_at_once(acct):
    body = _body(name="bad name")
    body["training_job"]["RoleArn"] = "arn:aws:iam::1:role/x"
    del body["training_job"]["CheckpointConfig"]
    status, resp = acct.api("POST", "/runs", body=body)
    assert status == 400
    assert {"name", "training_job.RoleArn", "training_job.CheckpointConfig.S3Uri"} <= _fields(resp)


def test_api_oversized_body_is_400(acct):
    body = _body()
    body["training_job"]["HyperParameters"] = {f"k{i}": "v" * 100 for i in range(3000)}
    status, resp = acct.api("POST", "/runs", raw_body=json.dumps(body))
    assert status == 400 and "body" in _fields(resp)


def test_api_bad_idempotency_key_is_400(acct):
    status, resp = acct.api("POST", "/runs", body=_body(), headers={"Idempotency-Key": "has spaces in it"})
    assert status == 400 and "Idempotency-Key" in _fields(resp)


def test_api_unknown_run_is_404_and_unknown_route_403(acct):
    assert acct.api("GET", "/runs/01JNOPE0000000000000000000")[0] == 404
    assert acct.api("GET", "/runs/01JNOPE0000000000000000000/events")[0] == 404
    assert acct.api("POST", "/runs/01JNOPE0000000000000000000/cancel")[0] == 404
    assert acct.api("DELETE", "/runs")[0] == 403


def test_api_cancel_then_cancel_again_is_409(acct):
    _, run = acct.api("POST", "/runs", body=_body())
    status, cancelled = acct.api("POST", f"/runs/{run['run_id']}/cancel")
    assert status == 202 and cancelled["status"] == "STOPPING"
    acct.sagemaker.advance(acct.clock.now_ms + 10 * 60_000)
    acct.deliver_due()
    acct.clock.advance_to(acct.clock.now_ms + 60_000)
    acct.deliver_due()
    _, final = acct.api("GET", f"/runs/{run['run_id']}")
    assert final["status"] == "CANCELLED"
    status, resp = acct.api("POST", f"/runs/{run['run_id']}/cancel")
    assert status == 409 and resp["status"] == "CANCELLED"


def test_api_lists_filters_and_paginates(acct):
    ids = [acct.api("POST", "/runs", body=_body(name=f"run-{i}"))[1]["run_id"] for i in range(3)]
    acct.api("POST", f"/runs/{ids[0]}/cancel")
    status, page1 = acct.api("GET", "/runs", query={"limit": "2"})
    assert status == 200 and len(page1["runs"]) == 2 and page1["next_cursor"]
    _, page2 = acct.api("GET", "/runs", query={"limit": "2", "cursor": page1["next_cursor"]})
    assert [r["run_id"] for r in page1["runs"] + page2["runs"]] == sorted(ids, reverse=True)
    _, stopping = acct.api("GET", "/runs", query={"status": "STOPPING"})
    assert [r["run_id"] for r in stopping["runs"]] == [ids[0]]
    assert acct.api("GET", "/runs", query={"status": "WHATEVER"})[0] == 400
    assert acct.api("GET", "/runs", query={"limit": "1000"})[0] == 400


def test_api_events_return_the_audit_trail(acct):
    _, run = acct.api("POST", "/runs", body=_body())
    status, body = acct.api("GET", f"/runs/{run['run_id']}/events")
    assert status == 200
    kinds = [e["kind"] for e in body["events"]]
    assert kinds[0] == "event" and "decision" in kinds and "action" in kinds
    assert any("LaunchAttempt" in e["summary"] for e in body["events"])
