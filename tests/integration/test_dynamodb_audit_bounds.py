"""Audit items bounded by bytes with valid JSON, old cut items still readable, and
BatchWriteItem's UnprocessedItems retried, never dropped (issue 7 items 6 and 11)."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.stub import ANY, Stubber

from sagewarden import keys
from sagewarden.adapters import dynamodb_run_store
from sagewarden.adapters.dynamodb_cursors import audit_pk
from sagewarden.adapters.dynamodb_run_store import (
    AUDIT_DETAIL_BYTES,
    AUDIT_SUMMARY_BYTES,
    AUDIT_WRITE_ATTEMPTS,
    DynamoDbRunStore,
)
from sagewarden.api.representation import audit_json
from sagewarden.domain.vocabulary.bounded import utf8_len
from sagewarden.ports.aws import AuditEntry

TABLE = "runs"
RUN_ID = "01KE5Q86000DNQ47GXEV9VZMPH"


@pytest.fixture
def ddb(aws):
    client = boto3.client("dynamodb", region_name="us-east-1")
    client.create_table(
        TableName=TABLE,
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[
            {"AttributeName": keys.PK, "KeyType": "HASH"},
            {"AttributeName": keys.SK, "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": keys.PK, "AttributeType": "S"},
            {"AttributeName": keys.SK, "AttributeType": "S"},
        ],
    )
    return client


@pytest.mark.claim(
    "Texts stored on items or published are capped by bytes with valid JSON and a note of what was cut (400 KB items, 256 KB messages)"
)
def test_a_huge_audit_entry_is_stored_within_bounds_as_valid_json(ddb):
    store = DynamoDbRunStore(ddb, TABLE)
    detail = {
        "type": "JobObserved",
        "failure_reason": 'AlgorithmError: "quoted" \\ ' + "é" * 100_000,
        "log_tail": [f"[algo-{h}] NCCL WARN " + "x" * 3000 for h in range(1, 65)],
    }
    store.append_audit(RUN_ID, 3, [AuditEntry(1000, "event", "😀" * 5000, detail)])

    item = ddb.query(
        TableName=TABLE,
        KeyConditionExpression="#pk = :pk",
        ExpressionAttributeNames={"#pk": keys.PK},
        ExpressionAttributeValues={":pk": {"S": audit_pk(RUN_ID)}},
    )["Items"][0]
    assert utf8_len(item["summary"]["S"]) <= AUDIT_SUMMARY_BYTES
    assert utf8_len(item["detail"]["S"]) <= AUDIT_DETAIL_BYTES
    stored = json.loads(item["detail"]["S"])  # the old [:50_000] cut left invalid JSON here
    assert stored["type"] == "JobObserved"
    assert "[cut " in stored["failure_reason"]

    page = store.list_audit(RUN_ID, 10, None)
    assert page.items[0].detail == stored
    assert "[cut " in page.items[0].summary


def test_an_old_audit_item_with_cut_json_is_still_readable(ddb):
    raw = '{"log_tail":["[algo-1] step 1","[algo-2] NCCL WARN socket: connection clo'
    ddb.put_item(
        TableName=TABLE,
        Item={
            keys.PK: {"S": audit_pk(RUN_ID)},
            keys.SK: {"S": "AUDIT#0000000001000#000001#A000"},
            "at_ms": {"N": "1000"},
            "kind": {"S": "event"},
            "summary": {"S": "JobObserved: Failed"},
            "detail": {"S": raw},
        },
    )

    page = DynamoDbRunStore(ddb, TABLE).list_audit(RUN_ID, 10, None)

    assert page.items[0].detail == {"detail_text": raw}
    assert audit_json(page.items[0])["detail"] == {"detail_text": raw}


def _batch(item: dict) -> dict:
    return {TABLE: [{"PutRequest": {"Item": item}}]}


LEFT_OVER = {
    keys.PK: {"S": audit_pk(RUN_ID)},
    keys.SK: {"S": "AUDIT#0000000001000#000003#B00000000abcdef#000"},
    "at_ms": {"N": "1000"},
    "kind": {"S": "action"},
    "summary": {"S": "StopJob: stopped"},
    "detail": {"S": "{}"},
}


def test_unprocessed_audit_items_are_sent_again(aws, monkeypatch):
    sleeps: list[float] = []
    monkeypatch.setattr(dynamodb_run_store, "_sleep", sleeps.append)
    client = boto3.client("dynamodb", region_name="us-east-1")
    stub = Stubber(client)
    stub.add_response("batch_write_item", {"UnprocessedItems": _batch(LEFT_OVER)}, {"RequestItems": ANY})
    stub.add_response("batch_write_item", {"UnprocessedItems": {}}, {"RequestItems": _batch(LEFT_OVER)})

    with stub:
        DynamoDbRunStore(client, TABLE).append_audit(
            RUN_ID,
            3,
            [AuditEntry(1000, "action", "LaunchAttempt: ok"), AuditEntry(1000, "action", "StopJob: stopped")],
        )

    stub.assert_no_pending_responses()
    assert len(sleeps) == 1 and 0 <= sleeps[0] <= 1.0


def test_audit_items_left_unprocessed_every_time_fail_loudly(aws, monkeypatch):
    monkeypatch.setattr(dynamodb_run_store, "_sleep", lambda s: None)
    client = boto3.client("dynamodb", region_name="us-east-1")
    stub = Stubber(client)
    for _ in range(AUDIT_WRITE_ATTEMPTS):
        stub.add_response("batch_write_item", {"UnprocessedItems": _batch(LEFT_OVER)}, {"RequestItems": ANY})

    with stub, pytest.raises(RuntimeError, match="1 items still unprocessed"):
        DynamoDbRunStore(client, TABLE).append_audit(
            RUN_ID, 3, [AuditEntry(1000, "action", "StopJob: stopped")]
        )
    stub.assert_no_pending_responses()
