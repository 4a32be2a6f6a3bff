"""Handlers with real-shaped payloads (tests/events/), routed by the synthesized template's rules."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

import pytest

from drill.account.local import BUCKET, EXECUTION_ROLE, LocalAccount
from drill.scenarios.spec import default_training_job
from sagewarden.handlers.on_alarm_state_change import hang_signal_from_event
from sagewarden.handlers.on_training_logs import heartbeat_records

EVENTS = Path(__file__).parent.parent / "events"


def load_event(name: str, job: str = "", run_id: str = "") -> dict:
    text = (EVENTS / name).read_text().replace("__JOB__", job).replace("__RUN__", run_id)
    return json.loads(text)


@pytest.fixture
def acct(template):
    with LocalAccount(template, store="memory") as account:
        yield account


@pytest.fixture
def submitted(acct):
    status, run = acct.api(
        "POST",
        "/runs",
        body={"name": "llama-8b", "training_job": default_training_job("llama-8b", BUCKET, EXECUTION_ROLE)},
    )
    assert status == 201
    return run


def test_handler_state_change_with_millisecond_timestamps_and_tag_map(acct, submitted):
    job = submitted["attempts"][0]["job_name"]
    event = load_event("sagemaker_training_state_change_millis.json", job, submitted["run_id"])
    assert acct.router.handlers_for_event(event) == [
        "sagewarden.handlers.on_training_job_state_change.handler"
    ]
    acct.router.deliver(event)
    _, run = acct.api("GET", f"/runs/{submitted['run_id']}")
    assert run["status"] == "TRAINING"
    assert run["attempts"][0]["training_started_at"] == "2026-01-05T10:08:51Z"


def test_handler_state_change_with_string_timestamps_resumes(acct, submitted):
    job = submitted["attempts"][0]["job_name"]
    acct.router.deliver(load_event("sagemaker_training_state_change_millis.json", job, submitted["run_id"]))
    failed = load_event("sagemaker_training_failed_string_timestamps.json", job, submitted["run_id"])
    acct.router.deliver(failed)
    _, run = acct.api("GET", f"/runs/{submitted['run_id']}")
    assert [a["end_class"] for a in run["attempts"]] == ["INFRASTRUCTURE", None]
    assert run["attempts"][0]["ended_at"] == "2026-01-05T12:29:58Z"
    acct.router.deliver(failed)  # a duplicate delivery changes nothing
    _, again = acct.api("GET", f"/runs/{submitted['run_id']}")
    assert again["version"] == run["version"] and len(again["attempts"]) == 2


@pytest.mark.claim(
    "Every event reaches a handler only through the synthesized template's own EventBridge rules, matched by moto's pattern matcher"
)
def test_handler_foreign_jobs_do_not_match_the_rule(acct):
    event = load_event("sagemaker_foreign_job_state_change.json")
    assert acct.router.handlers_for_event(event) == []


def test_handler_tags_identify_the_run_when_the_name_is_not_parseable(acct, submitted):
    from sagewarden import composition

    detail = load_event(
        "sagemaker_training_state_change_millis.json",
        submitted["attempts"][0]["job_name"],
        submitted["run_id"],
    )["detail"]
    detail = {**detail, "TrainingJobName": "sw-renamed-job"}
    run = composition.supervisor().aws.on_job_state_change(detail)
    assert run is not None and run.run_id == submitted["run_id"]


@pytest.mark.claim(
    "Every event reaches a handler only through the synthesized template's own EventBridge rules, matched by moto's pattern matcher"
)
def test_handler_alarm_event_routes_and_parses(acct, submitted):
    job = submitted["attempts"][0]["job_name"]
    event = load_event("cloudwatch_alarm_state_change.json", job)
    assert acct.router.handlers_for_event(event) == ["sagewarden.handlers.on_alarm_state_change.handler"]
    signal = hang_signal_from_event(event, "sagewarden-sw-hang-")
    assert signal is not None
    assert (signal.job_name, signal.signal, signal.state) == (job, "log_silence", "ALARM")
    assert signal.since_ms == 1767618000000
    foreign = json.loads(json.dumps(event))
    foreign["detail"]["alarmName"] = "team-alarm-cpu-high"
    assert acct.router.handlers_for_event(foreign) == []


@pytest.mark.claim("Signals of attempts that already ended or are not training are recorded and ignored")
def test_handler_alarm_for_attempt_not_training_is_counted_not_acted_on(acct, submitted):
    job = submitted["attempts"][0]["job_name"]
    _, before = acct.api("GET", f"/runs/{submitted['run_id']}/events", query={"limit": "100"})
    results = acct.router.deliver(load_event("cloudwatch_alarm_state_change.json", job))
    assert results[0][1]["status"] == "STARTING"
    _, after = acct.api("GET", f"/runs/{submitted['run_id']}/events", query={"limit": "100"})
    # ignored: nothing written (a stale or early signal costs one read), only counted
    assert after["events"] == before["events"]
    assert acct.counters.values.get("EventsIgnored", 0) >= 1
    assert acct.supervisor.store.get(submitted["run_id"]).version == submitted["version"]


def _awslogs(payload: dict) -> dict:
    return {"awslogs": {"data": base64.b64encode(gzip.compress(json.dumps(payload).encode())).decode()}}


def test_handler_heartbeat_counts_log_events_per_job_minute():
    payload = {
        "messageType": "DATA_MESSAGE",
        "owner": "123456789012",
        "logGroup": "/aws/sagemaker/TrainingJobs",
        "logStream": "sw-llama-8b-01KE5Q86000DNQ47GXEV9VZMPH-a001/algo-1-1767607200",
        "subscriptionFilters": ["sagewarden-heartbeat"],
        "logEvents": [
            {"id": "1", "timestamp": 1767607260001, "message": "step 10"},
            {"id": "2", "timestamp": 1767607261000, "message": "step 11"},
            {"id": "3", "timestamp": 1767607325000, "message": "step 12"},
        ],
    }
    records = heartbeat_records(_awslogs(payload), "sw")
    assert [(r["_aws"]["Timestamp"], r["LogEvents"]) for r in records] == [
        (1767607260000, 2),
        (1767607320000, 1),
    ]
    assert records[0]["TrainingJobName"] == "sw-llama-8b-01KE5Q86000DNQ47GXEV9VZMPH-a001"
    assert records[0]["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "Sagewarden/Heartbeat"
    assert heartbeat_records(_awslogs({**payload, "logStream": "other-job/algo-1-1"}), "sw") == []
    assert heartbeat_records(_awslogs({"messageType": "CONTROL_MESSAGE", "logEvents": []}), "sw") == []


@pytest.mark.claim("Only a job's training streams (`<job>/algo-<n>-<epoch>`) count")
def test_handler_heartbeat_counts_only_training_streams_not_the_ssm_agents():
    """Item 13 of issue 32: with remote debugging on, SageMaker writes the SSM agent's stream
    `<job>/algo-<n>-<ts>/ssm` into the training log group, and the agent keeps writing while the
    training script hangs. Its events are not training activity: no heartbeat from them."""
    job = "sw-llama-8b-01KE5Q86000DNQ47GXEV9VZMPH-a001"
    payload = load_event("cloudwatch_logs_subscription_ssm_stream.json", job)
    assert payload["logStream"] == f"{job}/algo-1-1767607200/ssm"
    assert heartbeat_records(_awslogs(payload), "sw") == []
    training = {**payload, "logStream": f"{job}/algo-1-1767607200"}  # the same lines, a training stream
    assert [r["TrainingJobName"] for r in heartbeat_records(_awslogs(training), "sw")] == [job, job]


@pytest.mark.claim("llama-8b: attempt 1 infrastructure, resuming as attempt 2")
def test_handler_alerts_reach_subscribers_with_filterable_attributes(acct, submitted):
    msgs = acct.alerts_received()
    assert msgs, "no alert published"
    first = msgs[0]
    assert first["Subject"].startswith("[sagewarden] llama-8b")
    attrs = first["MessageAttributes"]
    assert attrs["event"]["Value"] == "run.submitted"
    assert attrs["severity"]["Value"] == "info"
    assert attrs["run_id"]["Value"] == submitted["run_id"]


def test_handler_heartbeat_declared_phase_keeps_its_minutes_active():
    from sagewarden.domain.hangs.cadence import phase_marker
    from sagewarden.handlers.on_training_logs import heartbeat_records

    t0 = 1_767_571_200_000
    payload = {
        "messageType": "DATA_MESSAGE",
        "logStream": "sw-llama-01KE5Q86000DNQ47GXEV9VZMPH-a001/algo-1-1767571200",
        "logEvents": [{"id": "1", "timestamp": t0 + 5_000, "message": phase_marker("checkpoint_save", 12)}],
    }
    records = heartbeat_records(_awslogs(payload), "sw")
    minutes = [r["_aws"]["Timestamp"] for r in records]
    assert minutes == [t0 + i * 60_000 for i in range(12)]
    assert all(r["LogEvents"] >= 1 for r in records)


def test_handler_a_subscription_filtered_on_critical_gets_only_critical_alerts(acct, submitted):
    """README: to page only on critical, add an SNS subscription filter policy
    {"severity": ["critical"]}. A code bug fails the run (critical run.failed) after its info
    alerts; the filtered subscriber gets that one alert and nothing else."""
    from drill.sim.model import Fault

    queue_url = acct.sqs.create_queue(QueueName="pager")["QueueUrl"]
    queue_arn = acct.sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    acct.sns.subscribe(
        TopicArn=acct.topic_arn,
        Protocol="sqs",
        Endpoint=queue_arn,
        Attributes={"FilterPolicy": json.dumps({"severity": ["critical"]})},
    )
    crash = ("Traceback (most recent call last):", "ModuleNotFoundError: No module named 'flash_attn'")
    acct.sagemaker.inject(
        Fault(kind="algorithm_error", run="llama-8b", attempt=1, after_training_min=0.5, log_lines=crash)
    )
    for _ in range(4):
        acct.sagemaker.advance(acct.clock.now_ms + 10 * 60_000)
        acct.deliver_due()

    everything = [m["MessageAttributes"]["event"]["Value"] for m in acct.alerts_received()]
    paged = []
    while msgs := acct.sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", []):
        for m in msgs:
            paged.append(json.loads(m["Body"])["MessageAttributes"])
            acct.sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])

    assert "attempt.training" in everything and everything[-1] == "run.failed"
    assert [(a["event"]["Value"], a["severity"]["Value"]) for a in paged] == [("run.failed", "critical")]
