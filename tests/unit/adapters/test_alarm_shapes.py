"""The deploy-time alarm-shape check (sagewarden.adapters.alarm_shapes and its custom-resource handler):
CloudWatch's PutMetricAlarm judges one alarm of every shape; a refusal fails the deploy with the
shape, the expression and CloudWatch's message; nothing is left behind either way."""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ReadTimeoutError
from botocore.stub import Stubber

from sagewarden import composition, keys
from sagewarden.adapters import alarm_shapes
from sagewarden.adapters.cloudwatch_hang_alarms import alarm_specs, parse_alarm_key
from sagewarden.domain.vocabulary.policy import RunPolicy
from sagewarden.handlers import check_alarm_shapes

EVENTS = Path(__file__).resolve().parents[2] / "events"
PREFIX = "sagewarden-sw-hang-"


def _event(name: str = "cloudformation_custom_resource_create.json", **props: str) -> dict[str, Any]:
    event = json.loads((EVENTS / name).read_text())
    rp = event["ResourceProperties"]
    if rp.get("Fingerprint") == "__FINGERPRINT__":
        rp["Fingerprint"] = alarm_shapes.fingerprint(
            rp["AlarmPrefix"], alarm_shapes.policy_from_json(rp["PolicyDefaults"])
        )
    rp.update(props)
    return dict(event)


def _requests(event: dict[str, Any]) -> tuple[alarm_shapes.ShapeRequest, ...]:
    _, requests = alarm_shapes.shape_requests(PREFIX, RunPolicy(), event["RequestId"])
    return requests


def _client() -> Any:
    return boto3.client("cloudwatch", region_name="us-east-1")


# -- the shapes -------------------------------------------------------------------------------------


@pytest.mark.claim(
    "builds the alarms of seven representative attempts with the supervisor's own code: one host, two, ten (the most metrics one alarm may watch), eleven (two lone-idle groups), a progress metric (`IF`/`FILL`/`DIFF`), no log subscription, and every window at the policy's maximum (1,440 one-minute periods)"
)
@pytest.mark.claim(
    "The first deploy proves them: the stack's alarm-shape check ([docs/deploy.md](docs/deploy.md)) puts one alarm of every shape with `PutMetricAlarm` and fails the deploy if CloudWatch refuses one."
)
def test_alarm_shapes_cover_every_form_the_supervisor_creates() -> None:
    shapes = {s.name: s for s in alarm_shapes.representative_shapes(RunPolicy())}
    _, requests = alarm_shapes.shape_requests(PREFIX, RunPolicy(), "t")

    def alarms(shape: str) -> dict[str, dict[str, Any]]:
        return {r.alarm: dict(r.request) for r in requests if shape in r.shapes}

    def metrics(request: dict[str, Any]) -> int:
        return len([m for m in request.get("Metrics", []) if "MetricStat" in m])

    assert list(shapes) == [  # the seven the README names
        "one-host",
        "two-hosts",
        "ten-hosts",
        "eleven-hosts",
        "progress-metric",
        "no-log-subscription",
        "longest-windows",
    ]
    hosts = [shapes[n].spec.instance_count for n in ("one-host", "two-hosts", "ten-hosts", "eleven-hosts")]
    assert hosts == [1, 2, 10, 11]
    assert set(alarms("one-host")) == {"log-silence", "gpu-idle"}
    assert metrics(alarms("ten-hosts")["gpu-lone-idle"]) == 10  # the most one alarm may watch
    assert {a: metrics(r) for a, r in alarms("eleven-hosts").items() if a.startswith("gpu-lone")} == {
        "gpu-lone-idle-g01": 6,
        "gpu-lone-idle-g02": 5,
    }
    progress = alarms("progress-metric")["progress-stall"]
    assert any("DIFF(" in m.get("Expression", "") for m in progress["Metrics"])
    assert "log-silence" in alarms("two-hosts") and "log-silence" not in alarms("no-log-subscription")
    assert {r["EvaluationPeriods"] for r in alarms("longest-windows").values()} == {1440}
    # every alarm of every shape is the supervisor's own request, renamed
    for shape in shapes.values():
        own = {
            str(r["AlarmName"]).rsplit("--", 1)[-1] for r in alarm_specs(shape.spec, PREFIX, "shape-check")
        }
        assert own == set(alarms(shape.name))


@pytest.mark.claim(
    "It puts each distinct request once with `PutMetricAlarm`, under a throwaway name `sagewarden-<prefix>-hang-shape-check-<shape>-<alarm>-<request id>`, without actions"
)
def test_alarm_shapes_put_each_distinct_request_once_under_a_name_the_supervisor_ignores() -> None:
    shapes, requests = alarm_shapes.shape_requests(
        PREFIX, RunPolicy(), "8d1a3f52-6c0e-4d3b-9a51-2f4e7c9b0a11"
    )
    every = [r for s in shapes for r in alarm_specs(s.spec, PREFIX, "shape-check")]

    assert len(requests) < len(every)  # e.g. one log-silence request serves five shapes
    bodies = [
        json.dumps({k: v for k, v in r.request.items() if k != "AlarmName"}, sort_keys=True) for r in requests
    ]
    assert len(set(bodies)) == len(bodies)
    for r in requests:
        assert r.name.startswith(f"{PREFIX}{keys.SHAPE_CHECK_NAME_PART}") and r.name.endswith(
            "-8d1a3f52-6c0e-4d3b-9a51-2f4e7c9b0a11"
        )
        assert "--" not in r.name and parse_alarm_key(PREFIX, r.name) is None  # never taken for a hang alarm
        assert len(r.name) <= 255 and r.request["ActionsEnabled"] is False


@pytest.mark.claim(
    "It runs again on any deploy that changes a shape, the job prefix or `policyDefaults`, because the resource's properties carry a fingerprint of every request"
)
@pytest.mark.claim("A deploy that changes none of them does not run it.")
def test_alarm_shapes_fingerprint_follows_the_requests() -> None:
    base = alarm_shapes.fingerprint(PREFIX, RunPolicy())

    assert alarm_shapes.fingerprint(PREFIX, RunPolicy()) == base
    assert alarm_shapes.fingerprint("sagewarden-tb-hang-", RunPolicy()) != base
    assert alarm_shapes.fingerprint(PREFIX, RunPolicy.from_dict({"gpu_idle_minutes": 25})) != base
    # a policy default that no alarm reads leaves the shapes, and the fingerprint, alone
    assert alarm_shapes.fingerprint(PREFIX, RunPolicy.from_dict({"max_restarts": 5})) == base


# -- the check against CloudWatch (moto) --------------------------------------------------------------


@pytest.mark.claim("and then deletes every alarm it put, whatever happened")
def test_alarm_shape_check_puts_every_shape_then_deletes_it(aws: None) -> None:
    cw = _client()
    calls: list[tuple[str, dict[str, Any]]] = []
    cw.meta.events.register(
        "provide-client-params", lambda params, model, **_: calls.append((model.name, dict(params)))
    )
    event = _event()

    answer = alarm_shapes.on_event(event, cw, now_ms=lambda: 1_796_220_000_000)

    requests = _requests(event)
    puts = [p for op, p in calls if op == "PutMetricAlarm"]
    deletes = [n for op, p in calls if op == "DeleteAlarms" for n in p["AlarmNames"]]
    assert [p["AlarmName"] for p in puts] == [r.name for r in requests]
    assert puts == [dict(r.request) for r in requests]
    assert sorted(deletes) == sorted(r.name for r in requests)
    assert cw.describe_alarms()["MetricAlarms"] == []  # nothing left behind
    assert answer.status == "SUCCESS" and answer.body["PhysicalResourceId"] == f"{PREFIX}shape-check"
    report = answer.report
    assert report is not None
    assert report["result"] == "accepted" and report["checked_at"] == "2026-12-02T14:00:00Z"
    assert report["alarms"] == len(requests)
    assert list(report["shapes"]) == [s.name for s in alarm_shapes.representative_shapes(RunPolicy())]
    assert report["shapes"]["eleven-hosts"] == [
        "log-silence",
        "gpu-idle",
        "gpu-lone-idle-g01",
        "gpu-lone-idle-g02",
    ]
    assert len(alarm_shapes.encode(answer.body)) <= alarm_shapes.RESPONSE_MAX_BYTES


# -- refusals (botocore Stubber: moto accepts every expression) ----------------------------------------


def _stub_puts(stub: Stubber, requests: Any, refuse: set[str], message: str = "") -> list[str]:
    """Queue one PutMetricAlarm answer per request (a ValidationError for the refused names);
    returns the names accepted."""
    accepted = []
    for r in requests:
        if r.name in refuse:
            stub.add_client_error(
                "put_metric_alarm",
                service_error_code="ValidationError",
                service_message=message or f"Invalid metrics list: bad expression in {r.alarm}",
                http_status_code=400,
                expected_params=dict(r.request),
            )
        else:
            stub.add_response("put_metric_alarm", {}, dict(r.request))
            accepted.append(r.name)
    return accepted


@pytest.mark.claim(
    "If CloudWatch refuses a shape, the custom resource answers FAILED and `cdk deploy` fails and rolls back before any run depends on that alarm"
)
@pytest.mark.claim(
    "The resource's failure reason names every refused shape, the alarm, its expression and CloudWatch's message"
)
@pytest.mark.claim(
    "The first deploy proves them: the stack's alarm-shape check ([docs/deploy.md](docs/deploy.md)) puts one alarm of every shape with `PutMetricAlarm` and fails the deploy if CloudWatch refuses one."
)
def test_alarm_shape_check_refusal_fails_the_deploy_naming_shape_expression_and_message() -> None:
    event = _event()
    requests = _requests(event)
    refused = next(r for r in requests if "Metrics" in r.request)  # the first metric-math alarm
    cw = _client()
    message = "The expression is not valid: MAX of a single time series returns a scalar"
    with Stubber(cw) as stub:
        accepted = _stub_puts(stub, requests, {refused.name}, message)
        stub.add_response("delete_alarms", {}, {"AlarmNames": accepted})  # what was put, and only that
        answer = alarm_shapes.on_event(event, cw)
        stub.assert_no_pending_responses()

    assert answer.status == "FAILED"
    reason = answer.body["Reason"]
    assert f"CloudWatch refused 1 of {len(requests)}" in reason
    assert f"[{'/'.join(refused.shapes)} {refused.alarm}]" in reason
    assert f"expression {refused.expressions()}" in reason
    assert f"ValidationError: {message}" in reason
    assert "Every alarm the check put was deleted." in reason
    assert answer.detail == reason and answer.report is None


def test_alarm_shape_check_calls_a_throttled_put_unjudged_not_refused() -> None:
    """PutMetricAlarm is 3 per second per account, shared with other tools: a put throttled past
    the SDK's retries says nothing about its expression. The deploy still fails (nothing proven),
    but says why and that deploying again helps, instead of 'CloudWatch refused' the shape."""
    event = _event()
    requests = _requests(event)
    throttled = requests[1]
    cw = _client()
    with Stubber(cw) as stub:
        accepted = []
        for r in requests:
            if r is throttled:
                stub.add_client_error(
                    "put_metric_alarm",
                    service_error_code="Throttling",
                    service_message="Rate exceeded",
                    http_status_code=400,
                    expected_params=dict(r.request),
                )
            else:
                stub.add_response("put_metric_alarm", {}, dict(r.request))
                accepted.append(r.name)
        stub.add_response("delete_alarms", {}, {"AlarmNames": accepted})
        answer = alarm_shapes.on_event(event, cw)
        stub.assert_no_pending_responses()

    assert answer.status == "FAILED"
    reason = answer.body["Reason"]
    assert f"CloudWatch throttled 1 of {len(requests)} requests" in reason and "deploy again" in reason
    assert throttled.label() in reason
    assert "refused" not in reason


@pytest.mark.claim("and then deletes every alarm it put, whatever happened")
def test_alarm_shape_check_deletes_what_it_put_when_the_time_runs_out() -> None:
    event = _event()
    requests = _requests(event)
    budget = iter([60_000, 60_000] + [1_000] * len(requests))
    cw = _client()
    with Stubber(cw) as stub:
        for r in requests[:2]:
            stub.add_response("put_metric_alarm", {}, dict(r.request))
        stub.add_response("delete_alarms", {}, {"AlarmNames": [r.name for r in requests[:2]]})
        answer = alarm_shapes.on_event(event, cw, time_left_ms=lambda: next(budget))
        stub.assert_no_pending_responses()

    assert answer.status == "FAILED"
    assert (
        f"Out of time before {len(requests) - 2} of {len(requests)} requests could be put"
        in answer.body["Reason"]
    )


@pytest.mark.claim(
    "If something could not be deleted, the reason says so and gives the `aws cloudwatch delete-alarms` command"
)
def test_alarm_shape_check_names_what_it_could_not_delete() -> None:
    event = _event()
    requests = _requests(event)
    cw = _client()
    with Stubber(cw) as stub:
        _stub_puts(stub, requests, set())
        stub.add_client_error(
            "delete_alarms", "AccessDenied", "not authorized to perform cloudwatch:DeleteAlarms"
        )
        answer = alarm_shapes.on_event(event, cw)

    reason = answer.detail
    assert answer.status == "FAILED"
    assert "AccessDenied: not authorized to perform cloudwatch:DeleteAlarms" in reason
    assert f"aws cloudwatch delete-alarms --alarm-names {' '.join(r.name for r in requests)}" in reason


@pytest.mark.claim("and then deletes every alarm it put, whatever happened")
def test_alarm_shape_check_deletes_an_alarm_whose_put_was_lost_in_transit_on_its_own(aws: None) -> None:
    # A put that timed out may have created its alarm. AWS has documented DeleteAlarms with a name
    # that does not exist both ways ("no alarms are deleted" / "the correct names are still
    # deleted"): the uncertain name is deleted alone, so it cannot spoil the batch.
    event = _event()
    requests = _requests(event)
    lost = requests[1]
    moto = _client()
    deletes: list[list[str]] = []

    class LosesOnePut:
        def put_metric_alarm(self, **request: Any) -> Any:
            moto.put_metric_alarm(**request)  # CloudWatch created it; the answer never came
            if request["AlarmName"] == lost.name:
                raise ReadTimeoutError(endpoint_url="https://monitoring.us-east-1.amazonaws.com/")
            return {}

        def delete_alarms(self, AlarmNames: list[str]) -> Any:
            deletes.append(list(AlarmNames))
            return moto.delete_alarms(AlarmNames=AlarmNames)

    answer = alarm_shapes.on_event(event, LosesOnePut())

    assert answer.status == "FAILED"  # not proven: CloudWatch's answer is unknown
    assert f"[{'/'.join(lost.shapes)} {lost.alarm}]" in answer.detail and "ReadTimeoutError" in answer.detail
    assert deletes == [[r.name for r in requests if r is not lost], [lost.name]]
    assert moto.describe_alarms()["MetricAlarms"] == []


@pytest.mark.claim(
    "builds the alarms of seven representative attempts with the supervisor's own code: one host, two, ten (the most metrics one alarm may watch), eleven (two lone-idle groups), a progress metric (`IF`/`FILL`/`DIFF`), no log subscription, and every window at the policy's maximum (1,440 one-minute periods)"
)
def test_alarm_shapes_stay_within_cloudwatchs_evaluation_range() -> None:
    # PutMetricAlarm: for periods under an hour, Period x EvaluationPeriods may not exceed one day
    # (86,400 s). The longest-windows shape takes every window to the policy's maximum.
    _, requests = alarm_shapes.shape_requests(PREFIX, RunPolicy(), "t")
    for r in requests:
        periods = [q["MetricStat"]["Period"] for q in r.request.get("Metrics", []) if "MetricStat" in q]
        for period in periods or [r.request["Period"]]:
            assert period < 3600 and period * r.request["EvaluationPeriods"] <= 86_400, r.label()
        assert 1 <= r.request["DatapointsToAlarm"] <= r.request["EvaluationPeriods"]
    assert max(r.request["EvaluationPeriods"] for r in requests) == 1440


@pytest.mark.claim("The reason is kept within CloudFormation's 4,096-byte response limit")
def test_alarm_shape_check_answer_fits_cloudformations_4096_bytes() -> None:
    event = _event()
    requests = _requests(event)
    cw = _client()
    with Stubber(cw) as stub:
        _stub_puts(stub, requests, {r.name for r in requests}, "x" * 2_000 + " é")
        answer = alarm_shapes.on_event(event, cw)

    body = alarm_shapes.encode(answer.body)
    assert answer.status == "FAILED"
    assert len(answer.detail.encode()) > alarm_shapes.RESPONSE_MAX_BYTES  # too long to send whole...
    assert len(body) <= alarm_shapes.RESPONSE_MAX_BYTES  # ...so it is shortened, and says so
    assert json.loads(body)["Reason"].endswith("the function's log has it all)")
    assert json.loads(body)["Reason"].startswith(answer.detail[:200])


def test_alarm_shape_check_does_nothing_on_delete() -> None:
    event = _event("cloudformation_custom_resource_delete.json")
    cw = _client()
    with Stubber(cw):  # any call would fail: nothing queued
        answer = alarm_shapes.on_event(event, cw)

    assert answer.status == "SUCCESS" and answer.body["PhysicalResourceId"] == event["PhysicalResourceId"]


def test_alarm_shape_check_skips_a_rollback_to_another_versions_shapes() -> None:
    # CloudFormation rolls a failed update back with the old properties while the function still
    # runs the new code: checking again would fail the rollback on the shape that failed the update
    event = _event(Fingerprint="0" * 32)
    event["RequestType"] = "Update"
    cw = _client()
    with Stubber(cw):
        answer = alarm_shapes.on_event(event, cw)

    assert answer.status == "SUCCESS"
    report = answer.report
    assert report is not None and report["result"] == "not checked" and "rolling back" in report["why"]
    assert set(report["shapes"]) == {s.name for s in alarm_shapes.representative_shapes(RunPolicy())}


@pytest.mark.claim(
    "It runs again on any deploy that changes a shape, the job prefix or `policyDefaults`, because the resource's properties carry a fingerprint of every request"
)
def test_alarm_shape_check_judges_the_deployments_policy_defaults() -> None:
    defaults = '{"gpu_idle_minutes":25,"log_silence_minutes":45}'
    policy = alarm_shapes.policy_from_json(defaults)
    event = _event(PolicyDefaults=defaults, Fingerprint=alarm_shapes.fingerprint(PREFIX, policy))
    _, requests = alarm_shapes.shape_requests(PREFIX, policy, event["RequestId"])
    cw = _client()
    with Stubber(cw) as stub:
        accepted = _stub_puts(stub, requests, set())
        stub.add_response("delete_alarms", {}, {"AlarmNames": accepted})
        answer = alarm_shapes.on_event(event, cw)

    assert answer.status == "SUCCESS"
    # the policy's windows are the minutes that must breach (gpu-idle: M of M + 3 late minutes)
    periods = {r.alarm: r.request["DatapointsToAlarm"] for r in requests if r.shapes[0] == "one-host"}
    assert periods == {"log-silence": 45, "gpu-idle": 25}


# -- the handler answers CloudFormation at the response URL ---------------------------------------------


@dataclass
class _Context:
    function_name: str = "shape-check"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:shape-check"
    aws_request_id: str = "9f0e1d2c-3b4a-5968-7a6b-5c4d3e2f1a00"

    def get_remaining_time_in_millis(self) -> int:
        return 100_000


@pytest.fixture
def response_url() -> Iterator[tuple[str, list[tuple[dict[str, str], bytes]]]]:
    """A local stand-in for the pre-signed S3 URL: records every PUT."""
    received: list[tuple[dict[str, str], bytes]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((dict(self.headers), body))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/response?X-Amz-Signature=abc", received
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.claim(
    "If CloudWatch refuses a shape, the custom resource answers FAILED and `cdk deploy` fails and rolls back before any run depends on that alarm"
)
def test_alarm_shape_check_handler_answers_at_the_response_url(aws: None, response_url: Any) -> None:
    url, received = response_url
    event = _event()
    event["ResponseURL"] = url

    result = check_alarm_shapes.handler(event, _Context())

    ((headers, body),) = received
    answer = json.loads(body)
    assert result["Status"] == answer["Status"] == "SUCCESS"
    assert headers["Content-Type"] == "" and int(headers["Content-Length"]) == len(body) <= 4096
    assert (answer["StackId"], answer["RequestId"], answer["LogicalResourceId"]) == (
        event["StackId"],
        event["RequestId"],
        event["LogicalResourceId"],
    )
    assert json.loads(answer["Data"][keys.SHAPE_CHECK_ATTR_REPORT])["result"] == "accepted"


def test_alarm_shape_check_handler_answers_failed_when_the_check_breaks(
    aws: None, response_url: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, received = response_url
    event = copy.deepcopy(_event())
    event["ResponseURL"] = url

    def broken() -> Any:
        raise RuntimeError("no client today")

    monkeypatch.setattr(composition, "cloudwatch_client", broken)
    check_alarm_shapes.handler(event, _Context())

    ((_, body),) = received
    answer = json.loads(body)
    assert answer["Status"] == "FAILED"
    assert answer["Reason"] == "the alarm-shape check failed: RuntimeError: no client today"


@pytest.mark.parametrize(
    "breaks",
    [
        pytest.param("client", id="the CloudWatch client cannot be built"),
        pytest.param("check", id="the check itself raises"),
    ],
)
def test_alarm_shape_check_handler_answers_success_to_a_delete_whatever_breaks(
    aws: None, response_url: Any, monkeypatch: pytest.MonkeyPatch, breaks: str
) -> None:
    # a FAILED delete leaves the stack unable to delete (or to finish an update that replaced the
    # resource); the check keeps nothing that would need deleting
    url, received = response_url
    event = copy.deepcopy(_event("cloudformation_custom_resource_delete.json"))
    event["ResponseURL"] = url

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("no client today")

    monkeypatch.setattr(composition, "cloudwatch_client", broken)
    if breaks == "check":
        monkeypatch.setattr(alarm_shapes, "on_event", broken)
    result = check_alarm_shapes.handler(event, _Context())

    ((_, body),) = received
    answer = json.loads(body)
    assert result["Status"] == answer["Status"] == "SUCCESS"
    assert answer["PhysicalResourceId"] == event["PhysicalResourceId"]
    assert (answer["StackId"], answer["RequestId"]) == (event["StackId"], event["RequestId"])
