"""The run API as users meet it: through the template's IAM-authorised routes, with bad input."""

from __future__ import annotations

import base64
import copy
import json

import pytest
from botocore.exceptions import ClientError

from drill.account.local import BUCKET, EXECUTION_ROLE, LocalAccount
from drill.scenarios.spec import default_training_job
from sagewarden.domain.vocabulary.models import RunStatus
from tests.fuzz.harness import raw_call


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


@pytest.mark.claim(
    "Returns 201 with the run: its first attempt was asked of SageMaker, or, when a look-up it needs failed (S3 throttled), its launch waits and the run's `deferred` says why"
)
def test_api_submit_creates_run_launches_attempt_and_records_owner(acct):
    status, run = acct.api("POST", "/runs", body=_body(), caller_arn="arn:aws:iam::123456789012:role/alice")
    assert status == 201
    assert run["owner"] == "arn:aws:iam::123456789012:role/alice"
    assert run["status"] == RunStatus.STARTING.value
    assert len(run["attempts"]) == 1 and run["attempts"][0]["launch"] == "SUBMITTED"
    job = acct.sagemaker.describe_training_job(TrainingJobName=run["attempts"][0]["job_name"])
    assert job["CheckpointConfig"]["S3Uri"] == f"s3://{BUCKET}/llama-8b/checkpoints/"


@pytest.mark.claim(
    "Header `Idempotency-Key` makes a repeat return the same run (200); the same key with a different body gets 409"
)
@pytest.mark.claim(
    "`Idempotency-Key` is scoped to the caller's identity and written in the same transaction as the run."
)
def test_api_idempotency_key_returns_same_run(acct):
    headers = {"Idempotency-Key": "submit-42"}
    s1, r1 = acct.api("POST", "/runs", body=_body(), headers=headers)
    s2, r2 = acct.api("POST", "/runs", body=_body(), headers=headers)
    assert (s1, s2) == (201, 200) and r1["run_id"] == r2["run_id"]
    assert len(acct.sagemaker.jobs()) == 1  # no second launch
    s3, err = acct.api("POST", "/runs", body=_body(name="other"), headers=headers)
    assert s3 == 409 and "different request body" in err["message"]


@pytest.mark.claim(
    'the body as JSON: malformed JSON, not an object, over 256 KiB (413), `NaN`/`Infinity`/`1e400` anywhere, integers of more than 30 digits, lone surrogates (`"\\ud800"`), repeated keys, and nesting deeper than 16 levels'
)
@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ("{not json", "body"),
        ("[]", "body"),
        ("", "body"),
    ],
    ids=[
        "unclosed json",
        "a json list",
        "an empty body",
    ],
)
def test_api_malformed_body_is_400(acct, raw, field):
    status, body = acct.api("POST", "/runs", raw_body=raw)
    assert status == 400 and field in _fields(body)
    assert acct.api("GET", "/runs")[1]["runs"] == []


@pytest.mark.claim(
    "SageMaker execution roles runs may use. The only roles `iam:PassRole` is granted on. **Empty means every run is rejected.** JSON list or comma-separated."
)
@pytest.mark.claim(
    "Bad input gets **400** (**413** when too large) with field-level messages, and **nothing is stored or launched**"
)
@pytest.mark.claim(
    "Then sagewarden's own rules: a `RoleArn` in `allowedRoleArns`, a `CheckpointConfig.S3Uri` (no checkpoints means nothing to resume from), no `TrainingJobName` (sagewarden names attempts itself), no `SAGEWARDEN_*` environment variables, no `InstanceGroups`, MaxRuntime at most 28 days (longer runs are chained)"
)
@pytest.mark.claim("a `name` that cannot form a valid job name, and a malformed `Idempotency-Key`")
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
        (  # issue 16 item 11: SageMaker's field is a 32-bit integer
            lambda b: b["training_job"]["ResourceConfig"].update(InstanceCount=10**30),
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
    ids=[
        "no name",
        "a name with a space",
        "a name too long",
        "a name with a leading dash",
        "an unknown field",
        "a role not allowed",
        "a job name of its own",
        "an unknown job field",
        "no checkpoint config",
        "a local checkpoint path",
        "no resource config",
        "zero instances",
        "an instance count of 10 to the 30",
        "a max runtime of 30 days",
        "an environment key the supervisor sets",
        "a negative max restarts",
        "an unknown policy knob",
        "a malformed hang confirmation",
        "a malformed instance fallback",
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


@pytest.mark.claim(
    "Every problem is reported at once (up to 50), each with the full path of the offending value"
)
def test_api_reports_every_problem_at_once(acct):
    body = _body(name="bad name")
    body["training_job"]["RoleArn"] = "arn:aws:iam::1:role/x"
    del body["training_job"]["CheckpointConfig"]
    status, resp = acct.api("POST", "/runs", body=body)
    assert status == 400
    assert {"name", "training_job.RoleArn", "training_job.CheckpointConfig.S3Uri"} <= _fields(resp)


@pytest.mark.claim("a `name` that cannot form a valid job name, and a malformed `Idempotency-Key`")
def test_api_bad_idempotency_key_is_400(acct):
    status, resp = acct.api("POST", "/runs", body=_body(), headers={"Idempotency-Key": "has spaces in it"})
    assert status == 400 and "Idempotency-Key" in _fields(resp)


@pytest.mark.claim("An unknown or malformed run id gets 404.")
def test_api_unknown_run_is_404_and_unknown_route_403(acct):
    assert acct.api("GET", "/runs/01JNOPE0000000000000000000")[0] == 404
    assert acct.api("GET", "/runs/01JNOPE0000000000000000000/events")[0] == 404
    assert acct.api("POST", "/runs/01JNOPE0000000000000000000/cancel")[0] == 404
    assert acct.api("DELETE", "/runs")[0] == 403


def _until_settled(acct, run_id: str) -> dict:
    """Five simulated minutes at a time, for at most 30, until the run leaves STOPPING. A stop asked
    for the moment after CreateTrainingJob may meet a job SageMaker does not know yet ('not found',
    as the simulated account models): the supervisor asks again once it sees the job running."""
    run: dict = {}
    for _ in range(6):
        acct.sagemaker.advance(acct.clock.now_ms + 5 * 60_000)
        acct.deliver_due()
        _, run = acct.api("GET", f"/runs/{run_id}")
        if run["status"] != "STOPPING":
            break
    return run


@pytest.mark.claim(
    "records the intent, stops the live job (202), and the run becomes CANCELLED when SageMaker confirms. 409 if the run already finished."
)
def test_api_cancel_then_cancel_again_is_409(acct):
    _, run = acct.api("POST", "/runs", body=_body())
    status, cancelled = acct.api("POST", f"/runs/{run['run_id']}/cancel")
    assert status == 202 and cancelled["status"] == "STOPPING"
    final = _until_settled(acct, run["run_id"])
    assert final["status"] == "CANCELLED"
    status, resp = acct.api("POST", f"/runs/{run['run_id']}/cancel")
    assert status == 409 and resp["status"] == "CANCELLED"


@pytest.mark.claim(
    "a FAILED or CANCELLED run continues (202): a new attempt from the newest verified checkpoint, with fresh restart and wall-clock budgets"
)
def test_api_resume_reopens_a_cancelled_run_and_is_audited(acct):
    _, run = acct.api("POST", "/runs", body=_body())
    rid = run["run_id"]
    assert acct.api("POST", f"/runs/{rid}/resume")[0] == 409  # still running
    assert acct.api("POST", "/runs/01KE5Q86000DNQ47GXEV9VZMPH/resume")[0] == 404
    acct.api("POST", f"/runs/{rid}/cancel")
    assert _until_settled(acct, rid)["status"] == "CANCELLED"
    status, resumed = acct.api("POST", f"/runs/{rid}/resume")
    assert status == 202 and resumed["status"] == "STARTING" and resumed["attempt_count"] == 2
    assert [a["launch"] for a in resumed["attempts"]][-1] in ("PENDING", "SUBMITTED")
    _, events = acct.api("GET", f"/runs/{rid}/events", query={"limit": "100"})
    assert any("resume requested by" in e["summary"] for e in events["events"])
    assert len(acct.sagemaker.jobs()) == 2


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


@pytest.mark.claim("Every decision goes into an audit trail")
@pytest.mark.claim("the audit trail: every event, decision and action, in order")
def test_api_events_return_the_audit_trail(acct):
    _, run = acct.api("POST", "/runs", body=_body())
    status, body = acct.api("GET", f"/runs/{run['run_id']}/events")
    assert status == 200
    kinds = [e["kind"] for e in body["events"]]
    assert kinds[0] == "event" and "decision" in kinds and "action" in kinds
    assert any("LaunchAttempt" in e["summary"] for e in body["events"])


# --- hostile input (issue 11): every shape a 400/413 with a field, nothing stored, strict JSON out ----


def _stored(acct):
    """Everything the account holds for runs: list (all pages) and every run's audit trail."""
    runs, cursor = [], None
    while True:
        page = raw_call(
            acct, "GET", "/runs", query={"limit": "100", **({"cursor": cursor} if cursor else {})}
        )
        body = page.json()
        runs += body["runs"]
        cursor = body["next_cursor"]
        if not cursor:
            return runs, acct.sagemaker.jobs()


def _splice_policy(field_name: str, value: str) -> str:
    body = _body()
    body["policy"] = {field_name: "__VALUE__"}
    return json.dumps(body).replace('"__VALUE__"', value)


def _splice_job(path: list[str], value: str) -> str:
    body = _body()
    node = body["training_job"]
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = "__VALUE__"
    return json.dumps(body).replace('"__VALUE__"', value)


NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"]
NON_FINITE_WORDS = {
    "NaN": "NaN",
    "Infinity": "Infinity",
    "-Infinity": "minus Infinity",
    "1e400": "an overflowing float",
    "-1e400": "an overflowing negative float",
}
HOSTILE = [
    ("deep-list", '{"name": "x", "training_job": ' + "[" * 5000 + "]" * 5000 + "}", 400, "body"),
    ("deep-object", '{"a": ' * 5000 + "1" + "}" * 5000, 400, "body"),
    ("deep-but-parseable", '{"name": "x", "training_job": ' + "[" * 200 + "]" * 200 + "}", 400, "body"),
    ("long-int-policy", _splice_policy("max_restarts", "9" * 5000), 400, "policy.max_restarts"),
    (
        "long-int-job",
        _splice_job(["ResourceConfig", "InstanceCount"], "1" * 4301),
        400,
        "training_job.ResourceConfig.InstanceCount",
    ),
    ("a bare NaN body", "NaN", 400, "body"),
    ("surrogate-name", json.dumps(_body()).replace('"llama-8b"', '"\\ud800"', 1), 400, "name"),
    (
        "surrogate-hyperparameter",
        _splice_job(["HyperParameters", "epochs"], '"1\\udfff"'),
        400,
        "training_job.HyperParameters.epochs",
    ),
    ("surrogate-key", _splice_job(["HyperParameters", "__KEY__"], '"1"').replace("__KEY__", "\\ud83d"), 400, "training_job.HyperParameters"),
    ("literal-surrogate", json.dumps(_body()).replace("llama-8b", "llama\ud800", 1), 400, "name"),
    ("an absurd wall clock", _splice_policy("max_wall_clock_hours", "1e306"), 400, "policy.max_wall_clock_hours"),
] + [
    (f"{NON_FINITE_WORDS[v]} in {f}", _splice_policy(f, v), 400, f"policy.{f}")
    for f in ("max_cost_usd", "quota_wait_max_hours", "gpu_idle_percent", "max_wall_clock_hours")
    for v in NON_FINITE
] + [
    (f"{NON_FINITE_WORDS[v]} as the volume size", _splice_job(["ResourceConfig", "VolumeSizeInGB"], v), 400, "training_job.ResourceConfig.VolumeSizeInGB")
    for v in NON_FINITE
]  # fmt: skip


@pytest.mark.claim(
    'the body as JSON: malformed JSON, not an object, over 256 KiB (413), `NaN`/`Infinity`/`1e400` anywhere, integers of more than 30 digits, lone surrogates (`"\\ud800"`), repeated keys, and nesting deeper than 16 levels'
)
@pytest.mark.claim(
    "A value outside it, or a non-finite number, is a 400 on `policy.<field>` and nothing is stored."
)
@pytest.mark.parametrize(("text", "status", "field"), [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_api_hostile_body_is_rejected_with_field_and_nothing_stored(acct, text, status, field):
    resp = raw_call(acct, "POST", "/runs", body=text)
    body = resp.json()  # strict: no NaN/Infinity in any response
    assert resp.status == status, body
    assert field in _fields(body), body
    assert _stored(acct) == ([], [])


@pytest.mark.claim(
    "`policy`: unknown fields, types, the ranges in the table below, a `progress_metric` that is not the `Name` of one of `AlgorithmSpecification.MetricDefinitions`, fallback instance types SageMaker does not know, and environment defaults that SageMaker would refuse"
)
def test_api_progress_metric_must_name_a_metric_definition(acct):
    body = _body()
    body["training_job"]["AlgorithmSpecification"]["MetricDefinitions"] = [
        {"Name": "train:loss", "Regex": "loss=([0-9.]+)"}
    ]
    body["policy"] = {"progress_metric": "train:throughput"}
    status, resp = acct.api("POST", "/runs", body=body)
    assert status == 400 and "policy.progress_metric" in _fields(resp), resp
    assert "train:loss" in next(
        e["message"] for e in resp["errors"] if e["field"] == "policy.progress_metric"
    )
    body["policy"] = {"progress_metric": "train:loss"}
    assert acct.api("POST", "/runs", body=body)[0] == 201


@pytest.mark.claim(
    "Bad input gets **400** (**413** when too large) with field-level messages, and **nothing is stored or launched**"
)
def test_api_oversized_body_is_413_with_field_and_nothing_stored(acct):
    body = _body()
    body["training_job"]["HyperParameters"] = {f"k{i}": "v" * 2500 for i in range(100)}
    body["policy"] = {"environment_defaults": {"PAD": "p" * 20_000}}
    resp = raw_call(acct, "POST", "/runs", body=json.dumps(body))
    assert resp.status == 413 and "body" in _fields(resp.json())
    assert _stored(acct) == ([], [])


@pytest.fixture
def ddb_acct(template):
    with LocalAccount(template, store="dynamodb") as account:
        yield account


@pytest.mark.claim("Text is stored as UTF-8, so 250 KB of non-ASCII hyperparameters stay 250 KB")
def test_api_250kb_of_non_ascii_text_is_stored_without_inflation(ddb_acct):
    body = _body()
    # 100 values of 1,250 two-byte characters: 250 KB of UTF-8, under the 256 KiB body limit; stored
    # with \\u escapes it would be 750 KB, far past DynamoDB's 400 KB item limit.
    body["training_job"]["HyperParameters"] = {f"h{i:02d}": "é" * 1250 for i in range(100)}
    text = json.dumps(body, ensure_ascii=False)
    assert 240_000 < len(text.encode()) < 256 * 1024
    resp = raw_call(ddb_acct, "POST", "/runs", body=text)
    assert resp.status == 201, resp.text[:500]
    run = ddb_acct.api("GET", f"/runs/{resp.json()['run_id']}")[1]
    assert run["training_job"]["HyperParameters"] == body["training_job"]["HyperParameters"]


# --- forged cursors: 400 on `cursor`, and an audit cursor is bound to its run --------------------


def _b64(value) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode()


FORGED_CURSORS = [
    ("empty-object", _b64({})),
    ("stray-key", _b64({"a": 1})),
    ("list", _b64([1, 2])),
    ("string", _b64("01JAAAAAAAAAAAAAAAAAAAAAAA")),
    ("number", _b64(7)),
    ("null", _b64(None)),
    ("wrong-key-type", _b64({"pk": {"N": "1"}, "sk": {"S": "RUN"}, "entity": {"S": "RUN"}, "run_id": {"S": "x"}})),
    ("key-not-string", _b64({"pk": 5, "sk": "RUN"})),
    ("not-base64", "%%%not-base64%%%"),
    ("not-json", base64.urlsafe_b64encode(b"\xff\xfe garbage").decode()),
    ("deep", base64.urlsafe_b64encode(b"[" * 3000).decode()),
    ("a NaN inside", base64.urlsafe_b64encode(b'{"pk": NaN}').decode()),
    ("surrogate", "\ud800abc"),
    ("huge", "A" * 100_000),
]  # fmt: skip


@pytest.fixture(params=["memory", "dynamodb"])
def any_acct(request, template):
    with LocalAccount(template, store=request.param) as account:
        yield account


@pytest.mark.claim(
    "`limit` outside 1–100, an unknown `status`, and any `cursor` that is not the `next_cursor` of the same listing (a cursor of another run's events, or of another status filter, is refused)"
)
@pytest.mark.claim(
    "The API's JSON parser rejects deep nesting, huge integers, non-finite numbers, lone surrogates and forged cursors with a 400 naming the field (413 for size); the stored item is checked against DynamoDB's size as stored before anything is written."
)
@pytest.mark.parametrize("cursor", [c[1] for c in FORGED_CURSORS], ids=[c[0] for c in FORGED_CURSORS])
def test_api_forged_cursor_is_400_on_cursor(any_acct, cursor):
    run_id = any_acct.api("POST", "/runs", body=_body())[1]["run_id"]
    for path in ("/runs", f"/runs/{run_id}/events"):
        resp = raw_call(any_acct, "GET", path, query={"cursor": cursor})
        assert resp.status == 400, (path, resp.text)
        assert _fields(resp.json()) == {"cursor"}


@pytest.mark.claim(
    "`limit` outside 1–100, an unknown `status`, and any `cursor` that is not the `next_cursor` of the same listing (a cursor of another run's events, or of another status filter, is refused)"
)
def test_api_cursor_of_another_runs_events_is_rejected(any_acct):
    a = any_acct.api("POST", "/runs", body=_body(name="run-a"))[1]["run_id"]
    b = any_acct.api("POST", "/runs", body=_body(name="run-b"))[1]["run_id"]
    status, page = any_acct.api("GET", f"/runs/{a}/events", query={"limit": "1"})
    assert status == 200 and page["next_cursor"]
    resp = raw_call(any_acct, "GET", f"/runs/{b}/events", query={"limit": "1", "cursor": page["next_cursor"]})
    assert resp.status == 400 and _fields(resp.json()) == {"cursor"}, resp.text


@pytest.mark.claim(
    "`limit` outside 1–100, an unknown `status`, and any `cursor` that is not the `next_cursor` of the same listing (a cursor of another run's events, or of another status filter, is refused)"
)
def test_api_cursor_of_another_listing_is_rejected(any_acct):
    ids = [any_acct.api("POST", "/runs", body=_body(name=f"r-{i}"))[1]["run_id"] for i in range(3)]
    _, page = any_acct.api("GET", "/runs", query={"limit": "1"})
    assert page["next_cursor"]
    resp = raw_call(any_acct, "GET", "/runs", query={"status": "STARTING", "cursor": page["next_cursor"]})
    assert resp.status == 400 and _fields(resp.json()) == {"cursor"}, resp.text
    _, by_status = any_acct.api("GET", "/runs", query={"status": "STARTING", "limit": "1"})
    resp = raw_call(any_acct, "GET", "/runs", query={"cursor": by_status["next_cursor"]})
    assert resp.status == 400 and _fields(resp.json()) == {"cursor"}, resp.text
    assert len(ids) == 3


def test_api_real_cursors_still_page_through_everything(any_acct):
    ids = [any_acct.api("POST", "/runs", body=_body(name=f"r-{i}"))[1]["run_id"] for i in range(3)]
    for query in ({}, {"status": "STARTING"}):
        seen, cursor = [], None
        while True:
            _, page = any_acct.api(
                "GET", "/runs", query={**query, "limit": "2", **({"cursor": cursor} if cursor else {})}
            )
            seen += [r["run_id"] for r in page["runs"]]
            cursor = page["next_cursor"]
            if not cursor:
                break
        assert seen == sorted(ids, reverse=True)
    _, everything = any_acct.api("GET", f"/runs/{ids[0]}/events", query={"limit": "100"})
    paged, cursor = [], None
    while True:
        _, page = any_acct.api(
            "GET", f"/runs/{ids[0]}/events", query={"limit": "2", **({"cursor": cursor} if cursor else {})}
        )
        paged += page["events"]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert paged == everything["events"] and len(paged) > 2


# --- last resort: an unforeseen error is a JSON 500 with a request id, never an exception (502) ------


@pytest.mark.claim(
    "Every response body is strict JSON (never `NaN`), and an unforeseen error is a JSON 500 with a `request_id` rather than API Gateway's 502."
)
def test_api_unforeseen_error_in_a_route_is_a_json_500_with_request_id(acct, monkeypatch):
    run_id = acct.api("POST", "/runs", body=_body())[1]["run_id"]

    def broken(*args, **kwargs):
        raise RuntimeError("a bug nobody foresaw")

    monkeypatch.setattr(acct.supervisor.requests, "get", broken)
    resp = raw_call(acct, "GET", f"/runs/{run_id}")
    body = resp.json()
    assert resp.status == 500 and body["request_id"] and "bug" not in resp.text


@pytest.mark.claim(
    "Every response body is strict JSON (never `NaN`), and an unforeseen error is a JSON 500 with a `request_id` rather than API Gateway's 502."
)
def test_api_non_finite_number_in_a_response_is_a_json_500_not_invalid_json(acct, monkeypatch):
    import sagewarden.handlers.api as api_handler

    run_id = acct.api("POST", "/runs", body=_body())[1]["run_id"]
    monkeypatch.setattr(api_handler, "run_json", lambda run, **_: {"estimated_cost_usd": float("nan")})
    resp = raw_call(acct, "GET", f"/runs/{run_id}")
    assert resp.status == 500 and "NaN" not in resp.text and resp.json()["request_id"]


@pytest.mark.claim(
    "Every response body is strict JSON (never `NaN`), and an unforeseen error is a JSON 500 with a `request_id` rather than API Gateway's 502."
)
def test_api_error_outside_the_routes_is_still_a_json_500(acct, monkeypatch):
    import sagewarden.handlers.api as api_handler

    def broken(event, context):
        raise RecursionError("resolver blew up")

    monkeypatch.setattr(api_handler.app, "resolve", broken)
    resp = raw_call(acct, "GET", "/runs")
    assert resp.status == 500 and resp.json()["request_id"]


@pytest.mark.claim(
    "`limit` outside 1–100, an unknown `status`, and any `cursor` that is not the `next_cursor` of the same listing (a cursor of another run's events, or of another status filter, is refused)"
)
@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"limit": "²"}, "limit"),  # str.isdigit() is true for it, int() is not
        ({"limit": "٣"}, "limit"),
        ({"limit": "0"}, "limit"),
        ({"limit": "1e2"}, "limit"),
        ({"status": "running"}, "status"),
        ({"cursor": ""}, "cursor"),
    ],
    ids=[
        "a superscript digit as limit",
        "an arabic digit as limit",
        "a zero limit",
        "a limit in exponent form",
        "a status in lower case",
        "an empty cursor",
    ],
)
def test_api_bad_query_parameters_are_400_on_the_parameter(acct, query, field):
    resp = raw_call(acct, "GET", "/runs", query=query)
    assert resp.status == 400 and _fields(resp.json()) == {field}, resp.text


@pytest.mark.claim("An unknown or malformed run id gets 404.")
@pytest.mark.parametrize(
    "run_id",
    ["x", "01jnope", "A" * 5000, "\ud800" * 26, "01KE5Q86000DNQ47GXEV9VZMP%"],
    ids=["one letter", "lower case", "5000 letters", "26 lone surrogates", "a percent sign at the end"],
)
def test_api_malformed_run_id_is_404_without_touching_the_store(acct, monkeypatch, run_id):
    def never(*args, **kwargs):
        raise AssertionError("the store was asked about a malformed id")

    monkeypatch.setattr(acct.supervisor.store, "get", never)
    for method, path in (
        ("GET", f"/runs/{run_id}"),
        ("GET", f"/runs/{run_id}/events"),
        ("POST", f"/runs/{run_id}/cancel"),
    ):
        resp = raw_call(acct, method, path)
        assert resp.status == 404 and resp.json()["message"] in ("no such run", "not found"), resp.text


def test_api_a_resume_that_fails_again_at_once_is_carried_out_not_refused(template):
    """A run whose quota can never fit fails again right after its resume: the resume happened
    (audited, alerted), so the answer is 202 with the run FAILED and why, never a 409 that has
    stored something anyway. (The quota is unknown at submit -- Service Quotas cannot be read --
    or the submit would have been refused.)"""
    with LocalAccount(
        template, store="memory", quotas={"ml.p4d.24xlarge": 1}, service_quotas="denied"
    ) as acct:
        _, run = acct.api("POST", "/runs", body=_body())
        rid = run["run_id"]
        acct.deliver_due()
        failed = acct.api("GET", f"/runs/{rid}")[1]
        assert failed["status"] == "FAILED" and "quota" in failed["outcome"]
        status, resumed = acct.api("POST", f"/runs/{rid}/resume")
        assert status == 202 and resumed["status"] == "FAILED" and "quota" in resumed["outcome"]
        _, events = acct.api("GET", f"/runs/{rid}/events", query={"limit": "100"})
        assert any("resume requested by" in e["summary"] for e in events["events"])


def _failed_run(acct, monkeypatch) -> str:
    """A run that has FAILED (a quota that can never fit, unreadable at submit so the API accepts
    it), ready to be resumed."""
    acct.sagemaker.quotas["ml.p4d.24xlarge"] = 1
    monkeypatch.setattr(acct.supervisor, "quotas", None, raising=False)
    _, run = acct.api("POST", "/runs", body=_body())
    acct.deliver_due()
    assert acct.api("GET", f"/runs/{run['run_id']}")[1]["status"] == "FAILED"
    del acct.sagemaker.quotas["ml.p4d.24xlarge"]
    return str(run["run_id"])


@pytest.mark.claim(
    "409 with the reason if the run is not FAILED or CANCELLED, it ended more than 30 days ago, its checkpoints cannot be read right now, its newest checkpoint was written after it ended (by another run or job: a resume never continues another run's training), or another live run took its name or checkpoint prefix meanwhile; nothing is stored then"
)
def test_api_a_resume_whose_checkpoints_cannot_be_read_is_a_409_with_the_reason(acct, monkeypatch):
    """Issue 16 item 1: the refused decision used to answer 202 with the unchanged FAILED run."""
    rid = _failed_run(acct, monkeypatch)
    before = acct.api("GET", f"/runs/{rid}")[1]

    def unreadable(*_args, **_kwargs):
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, "ListObjectsV2")

    monkeypatch.setattr(acct.supervisor.checkpoints, "latest", unreadable)
    status, body = acct.api("POST", f"/runs/{rid}/resume")
    assert status == 409, body
    assert "cannot read the checkpoints" in body["message"] and "AccessDenied" in body["message"]
    assert body["message"].count("only a FAILED or CANCELLED") == 0
    after = acct.api("GET", f"/runs/{rid}")[1]
    assert after["status"] == "FAILED" and after["version"] == before["version"]  # nothing stored


@pytest.mark.claim(
    "409 with the reason if the run is not FAILED or CANCELLED, it ended more than 30 days ago, its checkpoints cannot be read right now, its newest checkpoint was written after it ended (by another run or job: a resume never continues another run's training), or another live run took its name or checkpoint prefix meanwhile; nothing is stored then"
)
def test_api_a_resume_that_loses_the_race_is_a_409(acct, monkeypatch):
    """Two resumes at once: both read the FAILED run; the second's decision finds the run
    reopened by the first and is refused (it used to answer 202 with the run as it was)."""
    rid = _failed_run(acct, monkeypatch)
    stale = acct.supervisor.store.get(rid)
    real_get = acct.supervisor.store.get
    calls = {"n": 0}

    def first_read_is_stale(run_id, **kwargs):
        calls["n"] += 1
        return stale if calls["n"] == 1 else real_get(run_id, **kwargs)

    assert acct.api("POST", f"/runs/{rid}/resume")[0] == 202  # the first resume wins
    monkeypatch.setattr(acct.supervisor.store, "get", first_read_is_stale)
    status, body = acct.api("POST", f"/runs/{rid}/resume")
    assert status == 409 and "only a FAILED or CANCELLED run can be resumed" in body["message"], body
    assert body["status"] in ("STARTING", "TRAINING", "SUBMITTED")


# -- issue 16: submit-time checks ------------------------------------------------------------------
def _advance(acct, minutes):
    """Let the account's world (SageMaker, deliveries, the every-minute sweep) run `minutes`."""
    from drill.scenarios.runner import AccountStepper

    world = AccountStepper(acct)
    target = acct.clock.now_ms + int(minutes * 60_000)
    while (t := world.next_time(sweeping=True)) is not None and t <= target:
        world.step(t, sweeping=lambda: True)
    acct.sagemaker.advance(target)


class _S3Fault:
    """The supervisor's checkpoint finder with S3 answering `error` to the calls in `methods`."""

    def __init__(self, inner, error, methods=("check_access", "latest", "save_activity")):
        self.inner, self.error, self.methods = inner, error, methods

    def __getattr__(self, name):
        method = getattr(self.inner, name)

        def call(*args, **kwargs):
            if self.error is not None:
                raise self.error
            return method(*args, **kwargs)

        return call if name in self.methods else method


def _s3_error(code):
    from sagewarden.adapters.s3_checkpoint_finder import CheckpointLookupError

    return CheckpointLookupError(
        f"cannot list s3://{BUCKET}/llama-8b/checkpoints/: S3 error {code}", code=code
    )


@pytest.mark.claim(
    "a `CheckpointConfig.S3Uri` it cannot list (one `ListObjectsV2` of one key: the bucket does not exist, is in another region, or is denied to the supervisor's role by `checkpointBuckets` or its bucket policy)"
)
def test_api_submit_to_a_bucket_that_does_not_exist_is_400_on_the_checkpoint_uri(acct):
    """Item 2: a typo in the bucket was accepted (201) and left the run SUBMITTED for ever."""
    body = _body()
    body["training_job"]["CheckpointConfig"]["S3Uri"] = "s3://sagewarden-drlil/llama-8b/checkpoints/"
    status, resp = acct.api("POST", "/runs", body=body)
    assert status == 400, resp
    (problem,) = [e for e in resp["errors"] if e["field"] == "training_job.CheckpointConfig.S3Uri"]
    assert "does not exist" in problem["message"] and "sagewarden-drlil" in problem["message"]
    assert acct.api("GET", "/runs")[1]["runs"] == [] and acct.sagemaker.jobs() == []
    # in AWS the supervisor's role may not even list a bucket outside checkpointBuckets: the same
    # ListObjectsV2 is AccessDenied there, and AccessDenied is refused the same way (next test)
    report = acct.take_iam_report()
    denied = {(f.outcome, f.verdict.request.action, f.verdict.request.resource) for f in report.findings}
    assert denied == {("deny", "s3:ListBucket", "arn:aws:s3:::sagewarden-drlil")}, report.failures()


@pytest.mark.claim(
    "refuses a bucket that does not exist or that the supervisor may not list (400 on `policy.checkpoint_archive_uri`)"
)
def test_api_submit_with_checkpoint_retention_checks_the_archive_prefix_too(acct):
    """Checkpoint retention archives into a prefix the supervisor must be able to list (and write):
    one outside checkpointBuckets, or in a missing bucket, is refused at submit, not at the first move."""
    body = _body()
    body["policy"] = {"checkpoint_keep": 2, "checkpoint_archive_uri": "s3://sagewarden-archvie/llama-8b/"}
    status, resp = acct.api("POST", "/runs", body=body)
    assert status == 400, resp
    (problem,) = [e for e in resp["errors"] if e["field"] == "policy.checkpoint_archive_uri"]
    assert "checkpoint retention could never archive there" in problem["message"], problem
    assert acct.api("GET", "/runs")[1]["runs"] == []
    acct.take_iam_report()  # the denied ListBucket on the misspelt bucket, as for the S3Uri above
    body["policy"] = {"checkpoint_keep": 2}  # the default archive, beside the synced prefix
    status, resp = acct.api("POST", "/runs", body=body)
    assert status == 201 and resp["policy"]["checkpoint_keep"] == 2, resp


def test_api_submit_warns_when_retention_would_free_no_storage_on_a_versioned_bucket(acct):
    """On a versioned bucket a delete leaves the object as a noncurrent version: retention frees
    nothing unless a lifecycle rule expires those. Submit warns (never refuses), in its answer,
    the run's GET and the run.submitted alert; a rule covering the prefix silences it."""
    acct.s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    body = _body()
    body["policy"] = {"checkpoint_keep": 2}
    status, resp = acct.api("POST", "/runs", body=body)
    assert status == 201, resp
    warning = resp["retention"]["storage_warning"]
    assert "versioning enabled" in warning and "NoncurrentVersionExpiration" in warning, warning
    assert acct.api("GET", f"/runs/{resp['run_id']}")[1]["retention"]["storage_warning"] == warning
    (told,) = [m.body for _, m in acct.notifier.sent if m.event == "run.submitted"]
    assert f"Checkpoint retention: {warning}" in told
    keep_all = _body("keep-all")  # a run that keeps every checkpoint is not asked about it
    status, plain = acct.api("POST", "/runs", body=keep_all)
    assert status == 201 and plain["retention"] is None, plain
    acct.s3.put_bucket_lifecycle_configuration(
        Bucket=BUCKET,
        LifecycleConfiguration={
            "Rules": [
                {
                    "ID": "ckpt",
                    "Status": "Enabled",
                    "Filter": {},
                    "NoncurrentVersionExpiration": {"NoncurrentDays": 3},
                }
            ]
        },
    )
    other = _body("llama-8b-ruled")
    other["policy"] = {"checkpoint_keep": 2}
    status, ruled = acct.api("POST", "/runs", body=other)
    assert status == 201 and ruled["retention"]["storage_warning"] is None, ruled


@pytest.mark.claim("A directory that cannot finish is shown, not retried for ever.")
def test_api_get_shows_the_checkpoint_directories_retention_cannot_retire_and_why(acct, monkeypatch):
    """A directory no pass can advance (here: the archive refuses every copy, AccessDenied) was
    retried first at every pass for ever, and the directories behind it waited. After 3 passes
    without progress GET /runs/{id} and the audit say it cannot be retired and why; the next
    directory is tried."""
    body = _body()
    body["policy"] = {"checkpoint_keep": 1}
    status, run = acct.api("POST", "/runs", body=body)
    assert status == 201, run

    def denied(**_):
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "denied"}}, "CopyObject")

    monkeypatch.setattr(acct.supervisor.retirer._s3, "copy_object", denied)
    _advance(acct, 6 * 60)  # checkpoints every 100 minutes; a retention pass every reconcile interval
    _, got = acct.api("GET", f"/runs/{run['run_id']}")
    stuck = got["retention"]["cannot_retire"]
    assert [s["name"] for s in stuck][:2] == ["checkpoint-1000", "checkpoint-2000"], got["retention"]
    assert "AccessDenied" in stuck[0]["reason"] and stuck[0]["since"] is not None
    assert "checkpoint-1000" not in [r["name"] for r in got["retention"]["retiring"]]
    _, events = acct.api("GET", f"/runs/{run['run_id']}/events", query={"limit": "100"})
    said = [e["summary"] for e in events["events"] if e["kind"] == "decision"]
    assert any(line.startswith("checkpoint-1000 cannot be retired: cannot copy") for line in said), said


@pytest.mark.claim(
    "When set, a run whose `CheckpointConfig.S3Uri` is in another bucket is refused at submit (400)"
)
@pytest.mark.claim(
    "a `CheckpointConfig.S3Uri` it cannot list (one `ListObjectsV2` of one key: the bucket does not exist, is in another region, or is denied to the supervisor's role by `checkpointBuckets` or its bucket policy)"
)
def test_api_submit_where_the_supervisor_is_denied_is_400(acct, monkeypatch):
    monkeypatch.setattr(
        acct.supervisor, "checkpoints", _S3Fault(acct.supervisor.checkpoints, _s3_error("AccessDenied"))
    )
    status, resp = acct.api("POST", "/runs", body=_body())
    assert status == 400 and "training_job.CheckpointConfig.S3Uri" in _fields(resp), resp
    assert acct.api("GET", "/runs")[1]["runs"] == []


@pytest.mark.claim(
    "Returns 201 with the run: its first attempt was asked of SageMaker, or, when a look-up it needs failed (S3 throttled), its launch waits and the run's `deferred` says why"
)
@pytest.mark.claim(
    "A throttled or failing S3 or Service Quotas is *unknown*, not a refusal: the run is accepted (its launch then waits for S3, see `deferred`)"
)
def test_api_a_transient_s3_error_at_submit_accepts_and_shows_the_deferral(acct, monkeypatch):
    """Unknown is not empty: S3 throttling at submit is no reason to refuse. The run waits for
    S3, and says so in GET /runs/{id} and in the list rows (the reason was stored, never shown)."""
    fault = _S3Fault(acct.supervisor.checkpoints, _s3_error("SlowDown"))
    monkeypatch.setattr(acct.supervisor, "checkpoints", fault)
    status, run = acct.api("POST", "/runs", body=_body())
    assert status == 201 and run["status"] == "SUBMITTED" and run["attempts"] == []
    deferred = run["deferred"]
    assert (
        "SlowDown" in deferred["reason"] and deferred["permanent"] is False and deferred["fails_at"] is None
    )
    assert deferred["since"] == run["created_at"]
    (row,) = acct.api("GET", "/runs")[1]["runs"]
    assert row["deferred"] == deferred
    fault.error = None  # S3 recovers: the next sweep launches
    _advance(acct, 2)
    later = acct.api("GET", f"/runs/{run['run_id']}")[1]
    assert later["status"] in ("STARTING", "TRAINING") and later["deferred"] is None


@pytest.mark.claim(
    "An error that does not heal by itself (no such bucket, access denied, a bucket in another region) fails the run when it has lasted **30 minutes**"
)
@pytest.mark.claim(
    "with a critical `run.failed` saying what to fix; fix it and `sagewarden resume` the run. Throttling, 5xx and timeouts keep waiting."
)
@pytest.mark.claim(
    "Fix it within the time the alert gives; after 30 minutes the run fails, and `sagewarden resume` continues it once fixed."
)
def test_api_checkpoints_gone_after_submit_fail_the_run_after_30_minutes(acct, monkeypatch):
    """Item 2: an error that cannot heal by itself (the bucket was deleted after the submit)
    fails the run after a bounded, documented time instead of waiting for ever."""
    gone = _S3Fault(acct.supervisor.checkpoints, _s3_error("NoSuchBucket"), methods=("latest",))
    monkeypatch.setattr(acct.supervisor, "checkpoints", gone)  # the check passes, every read after fails
    status, run = acct.api("POST", "/runs", body=_body())
    assert status == 201 and run["deferred"]["permanent"] is True, run
    assert run["deferred"]["fails_at"] is not None
    _advance(acct, 29)
    assert acct.api("GET", f"/runs/{run['run_id']}")[1]["status"] == "SUBMITTED"
    _advance(acct, 2)
    failed = acct.api("GET", f"/runs/{run['run_id']}")[1]
    assert failed["status"] == "FAILED" and "does not heal by itself" in failed["outcome"], failed
    assert failed["deferred"] is None and acct.sagemaker.jobs() == []
    sent = [(m.event, m.severity) for _, m in acct.notifier.sent]
    assert ("run.deferred", "warning") in sent and ("run.failed", "critical") in sent


def _on_prefix(name, uri):
    body = _body(name=name)
    body["training_job"]["CheckpointConfig"]["S3Uri"] = uri
    return body


@pytest.mark.claim(
    "**409** too when another live run holds the name or an overlapping checkpoint prefix, when a retention archive overlaps another live run's checkpoint prefix (or the checkpoint prefix another live run's archive), or when a resumable run of another principal holds the checkpoint prefix (`conflict` names the run, never its owner)"
)
@pytest.mark.claim(
    "A second live run with the same `name`, or with a `CheckpointConfig.S3Uri` that is the same prefix, inside it or around it"
)
@pytest.mark.parametrize(
    "uri",
    [
        f"s3://{BUCKET}/llama-8b/checkpoints/",  # the same prefix
        f"s3://{BUCKET}/llama-8b/checkpoints",  # the same, without the slash
        f"s3://{BUCKET}/llama-8b/checkpoints/rank0/",  # inside it
        f"s3://{BUCKET}/llama-8b/",  # containing it
    ],
)
def test_api_second_live_run_on_the_same_checkpoint_prefix_is_409_naming_the_first(acct, uri):
    """Item 8: two live runs writing one prefix would overwrite each other's checkpoints."""
    _, first = acct.api("POST", "/runs", body=_body())
    status, resp = acct.api("POST", "/runs", body=_on_prefix("llama-8b-copy", uri))
    assert status == 409, resp
    assert f"run {first['run_id']} (llama-8b, STARTING)" in resp["message"]
    assert resp["conflict"] == {
        "run_id": first["run_id"],
        "name": "llama-8b",
        "status": "STARTING",
        "on": "checkpoint_prefix",
    }
    assert len(acct.api("GET", "/runs")[1]["runs"]) == 1 and len(acct.sagemaker.jobs()) == 1


def _archiving(name, uri, archive):
    body = _on_prefix(name, uri)
    body["policy"] = {"checkpoint_keep": 2, "checkpoint_archive_uri": archive}
    return body


@pytest.mark.claim(
    "**409** too when another live run holds the name or an overlapping checkpoint prefix, when a retention archive overlaps another live run's checkpoint prefix (or the checkpoint prefix another live run's archive), or when a resumable run of another principal holds the checkpoint prefix (`conflict` names the run, never its owner)"
)
@pytest.mark.claim(
    'gets the same 409 (`"on": "archive_prefix"`) when its archive is another live run\'s checkpoint prefix, inside it or around it, and a run whose checkpoint prefix is another live run\'s archive, inside it or around it, gets it on `checkpoint_prefix`'
)
@pytest.mark.claim(
    "Like checkpoint prefixes, an archive may not be, hold, or lie inside another live run's checkpoint prefix, nor a checkpoint prefix another live run's archive"
)
@pytest.mark.parametrize(
    "archive",
    [
        f"s3://{BUCKET}/llama-8b/checkpoints/",  # the other run's synced prefix
        f"s3://{BUCKET}/llama-8b/checkpoints/old/",  # inside it
        f"s3://{BUCKET}/llama-8b/",  # holding it
    ],
    ids=["the same prefix", "inside it", "around it"],
)
def test_api_an_archive_prefix_overlapping_a_live_runs_checkpoint_prefix_is_409_naming_it(acct, archive):
    """Issue 32 item 1: retention would copy retired checkpoints into what another live run's jobs
    download (or its archive would hold that run's prefix): refused like synced prefixes."""
    _, first = acct.api("POST", "/runs", body=_body())
    body = _archiving("qwen", f"s3://{BUCKET}/qwen/checkpoints/", archive)
    status, resp = acct.api("POST", "/runs", body=body)
    assert status == 409, resp
    assert resp["conflict"] == {
        "run_id": first["run_id"],
        "name": "llama-8b",
        "status": "STARTING",
        "on": "archive_prefix",
    }
    assert "archive prefix" in resp["message"] and len(acct.sagemaker.jobs()) == 1


@pytest.mark.claim(
    'gets the same 409 (`"on": "archive_prefix"`) when its archive is another live run\'s checkpoint prefix, inside it or around it, and a run whose checkpoint prefix is another live run\'s archive, inside it or around it, gets it on `checkpoint_prefix`'
)
@pytest.mark.claim("Two live runs may share one archive prefix.")
@pytest.mark.claim(
    "Like checkpoint prefixes, an archive may not be, hold, or lie inside another live run's checkpoint prefix, nor a checkpoint prefix another live run's archive"
)
@pytest.mark.parametrize(
    "uri",
    [f"s3://{BUCKET}/team-archive/", f"s3://{BUCKET}/team-archive/qwen/", f"s3://{BUCKET}/"],
    ids=["the same prefix", "inside it", "around it"],
)
def test_api_a_checkpoint_prefix_overlapping_a_live_runs_archive_is_409_naming_it(acct, uri):
    """The other direction: another live run's retention archives into (or under) this prefix."""
    archive = f"s3://{BUCKET}/team-archive/"
    _, first = acct.api("POST", "/runs", body=_archiving("llama-8b", f"s3://{BUCKET}/llama/ckpt/", archive))
    status, resp = acct.api("POST", "/runs", body=_on_prefix("qwen", uri))
    assert status == 409, resp
    assert resp["conflict"]["run_id"] == first["run_id"] and resp["conflict"]["on"] == "checkpoint_prefix"
    assert "archive" in resp["message"]
    # two runs may share one archive: the archive key names the run
    shared = _archiving("mistral", f"s3://{BUCKET}/mistral/ckpt/", archive)
    assert acct.api("POST", "/runs", body=shared)[0] == 201


@pytest.mark.claim("Once that run has ended both are free again")
def test_api_a_prefix_is_free_again_once_its_run_ended(acct):
    _, first = acct.api("POST", "/runs", body=_body())
    acct.api("POST", f"/runs/{first['run_id']}/cancel")
    _advance(acct, 10)
    assert acct.api("GET", f"/runs/{first['run_id']}")[1]["status"] == "CANCELLED"
    status, second = acct.api(
        "POST", "/runs", body=_on_prefix("llama-8b-v2", f"s3://{BUCKET}/llama-8b/checkpoints/")
    )
    assert status == 201, second


@pytest.mark.claim(
    "**409** too when another live run holds the name or an overlapping checkpoint prefix, when a retention archive overlaps another live run's checkpoint prefix (or the checkpoint prefix another live run's archive), or when a resumable run of another principal holds the checkpoint prefix (`conflict` names the run, never its owner)"
)
@pytest.mark.claim("A replay with the same `Idempotency-Key` and body still answers 200 with its run.")
def test_api_second_live_run_with_the_same_name_is_409_and_a_replay_is_still_200(acct):
    """Item 9: a repeated name was accepted, and from then on every get/cancel by name demanded
    the id. A replay of the first submit (same Idempotency-Key, same body) is not a conflict."""
    headers = {"Idempotency-Key": "llama-8b-1"}
    s1, first = acct.api("POST", "/runs", body=_body(), headers=headers)
    other = _body()
    other["training_job"]["CheckpointConfig"]["S3Uri"] = f"s3://{BUCKET}/elsewhere/checkpoints/"
    status, resp = acct.api("POST", "/runs", body=other)
    assert (s1, status) == (201, 409), resp
    assert (
        f"run {first['run_id']} (llama-8b, STARTING)" in resp["message"] and resp["conflict"]["on"] == "name"
    )
    s2, replay = acct.api("POST", "/runs", body=_body(), headers=headers)
    assert s2 == 200 and replay["run_id"] == first["run_id"]


@pytest.mark.claim(
    "409 with the reason if the run is not FAILED or CANCELLED, it ended more than 30 days ago, its checkpoints cannot be read right now, its newest checkpoint was written after it ended (by another run or job: a resume never continues another run's training), or another live run took its name or checkpoint prefix meanwhile; nothing is stored then"
)
@pytest.mark.claim(
    "The run holds them as claim items written in the same DynamoDB transaction that creates it (so two concurrent submits cannot both win), released in the one that makes it terminal, and taken again by a resume"
)
def test_api_resume_is_409_when_another_live_run_took_the_name(acct):
    _, first = acct.api("POST", "/runs", body=_body())
    acct.api("POST", f"/runs/{first['run_id']}/cancel")
    _advance(acct, 10)
    other = _on_prefix("llama-8b", f"s3://{BUCKET}/llama-8b-v2/checkpoints/")
    s_new, second = acct.api("POST", "/runs", body=other)
    assert s_new == 201, second
    status, resp = acct.api("POST", f"/runs/{first['run_id']}/resume")
    assert status == 409 and f"run {second['run_id']} (llama-8b," in resp["message"], resp
    assert resp["conflict"]["run_id"] == second["run_id"]
    assert acct.api("GET", f"/runs/{first['run_id']}")[1]["status"] == "CANCELLED"  # nothing changed


@pytest.mark.claim(
    "an `InstanceCount` above the account's quota for the instance type when Service Quotas can be read (with `instance_fallbacks`, only when no choice fits)"
)
def test_api_instance_count_above_the_known_quota_is_400(template):
    """Item 11: a count above the account's quota can never launch; refused when the quota is known."""
    with LocalAccount(template, store="memory", quotas={"ml.p4d.24xlarge": 1}) as acct:
        status, resp = acct.api("POST", "/runs", body=_body())
        assert status == 400, resp
        (problem,) = [e for e in resp["errors"] if e["field"] == "training_job.ResourceConfig.InstanceCount"]
        assert "'ml.p4d.24xlarge for training job usage' of 1" in problem["message"]
        assert acct.api("GET", "/runs")[1]["runs"] == [] and acct.sagemaker.jobs() == []
        # a fallback that fits is where the run goes at launch: accepted
        body = _body()
        body["policy"] = {"instance_fallbacks": [{"instance_type": "ml.p4de.24xlarge", "instance_count": 2}]}
        assert acct.api("POST", "/runs", body=body)[0] == 201


def _spot_body():
    body = _body()
    body["training_job"]["EnableManagedSpotTraining"] = True
    body["training_job"]["StoppingCondition"]["MaxWaitTimeInSeconds"] = 6 * 86_400
    return body


def test_api_a_spot_run_is_checked_against_the_spot_training_quotas(template):
    """Issue 32 item 14: Service Quotas has separate quotas for managed spot training. A spot run
    above its spot quota can never launch, whatever the on-demand quota; one within it launches,
    even where the on-demand quota could not hold it."""
    with LocalAccount(
        template, store="memory", quotas={"ml.p4d.24xlarge": 8}, spot_quotas={"ml.p4d.24xlarge": 1}
    ) as acct:
        status, resp = acct.api("POST", "/runs", body=_spot_body())
        assert status == 400, resp
        (problem,) = [e for e in resp["errors"] if e["field"] == "training_job.ResourceConfig.InstanceCount"]
        assert "'ml.p4d.24xlarge for spot training job usage' of 1" in problem["message"]
        assert acct.sagemaker.jobs() == []
        assert acct.api("POST", "/runs", body=_body())[0] == 201  # on demand: 2 of 8 fit
    with LocalAccount(
        template, store="memory", quotas={"ml.p4d.24xlarge": 0}, spot_quotas={"ml.p4d.24xlarge": 2}
    ) as acct:
        status, run = acct.api("POST", "/runs", body=_spot_body())
        assert status == 201 and run["attempts"][0]["launch"] == "SUBMITTED", run


@pytest.mark.claim(
    "an `InstanceCount` above the account's quota for the instance type when Service Quotas can be read (with `instance_fallbacks`, only when no choice fits)"
)
@pytest.mark.claim(
    "A throttled or failing S3 or Service Quotas is *unknown*, not a refusal: the run is accepted (its launch then waits for S3, see `deferred`)"
)
def test_api_instance_count_is_accepted_when_the_quota_cannot_be_read(template):
    with LocalAccount(
        template, store="memory", quotas={"ml.p4d.24xlarge": 1}, service_quotas="denied"
    ) as acct:
        assert acct.api("POST", "/runs", body=_body())[0] == 201  # unknown is not "too many"


def test_api_submit_of_a_spot_run_says_no_warm_pool_and_launches_without_one(acct):
    """Item 4: SageMaker refuses a spot job that asks for a warm pool; every launch asked."""
    body = _body()
    body["training_job"]["EnableManagedSpotTraining"] = True
    body["training_job"]["StoppingCondition"]["MaxWaitTimeInSeconds"] = 6 * 86_400
    status, run = acct.api("POST", "/runs", body=body)
    assert status == 201 and run["attempts"][0]["launch"] == "SUBMITTED"
    assert run["warm_pool"]["keep_alive_seconds"] == 0 and "spot" in run["warm_pool"]["note"]
    job = acct.sagemaker.describe_training_job(TrainingJobName=run["attempts"][0]["job_name"])
    assert "KeepAlivePeriodInSeconds" not in job["ResourceConfig"]
    acct.sagemaker.warm_pools.settings.quotas["ml.p4d.24xlarge"] = 8  # a raised warm-pool quota
    acct.supervisor.quotas._cached = None  # (the API reads Service Quotas again after 15 min)
    status, plain = acct.api("POST", "/runs", body=_body(name="plain"))
    assert plain["warm_pool"]["keep_alive_seconds"] == 600 and plain["warm_pool"]["pools"] == []


@pytest.mark.claim(
    "the run asks for no pool from its first attempt and is told once (in its `run.submitted` alert, with the quota to raise)"
)
def test_api_a_warm_pool_quota_known_to_be_0_at_submit_asks_for_no_pool_and_says_so_once(acct):
    """AWS's default warm-pool quota is 0, and then SageMaker keeps no pool without an error: a run
    that asked for one waited up to 5 minutes at its first restart for a pool that never came.
    Read at submit (Service Quotas), the run asks for none and is told once why restarts are cold."""
    status, run = acct.api("POST", "/runs", body=_body(name="cold"))
    assert status == 201
    assert run["warm_pool"]["keep_alive_seconds"] == 0 and "quota" in run["warm_pool"]["note"]
    job = acct.sagemaker.describe_training_job(TrainingJobName=run["attempts"][0]["job_name"])
    assert "KeepAlivePeriodInSeconds" not in job["ResourceConfig"]
    acct.deliver_due()
    told = [m for _, m in acct.notifier.sent if "training warm pool usage" in m.body]
    assert [m.event for m in told] == ["run.submitted"]  # told once, in the submitted alert
    assert "'ml.p4d.24xlarge for training warm pool usage' is 0" in told[0].body
    # with the quota raised the run asks for a pool
    acct.sagemaker.warm_pools.settings.quotas["ml.p4d.24xlarge"] = 8
    acct.supervisor.quotas._cached = None  # (the API reads Service Quotas again after 15 min)
    _, warm = acct.api("POST", "/runs", body=_body(name="warm"))
    assert warm["warm_pool"]["keep_alive_seconds"] == 600
