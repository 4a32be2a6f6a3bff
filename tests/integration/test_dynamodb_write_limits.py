"""A save is written whole or refused whole, never in part (issue 17 item 8).

DynamoDB's TransactWriteItems takes at most 100 actions and 4 MB in all (400 KB an item). The
store used to send the first 100 actions and drop the rest silently (audit entries, attempts, owed
alerts). Both stores are held to the limits: the DynamoDB store on moto with the 4 MB check moto
lacks (drill/sim/dynamodb_limits.py), the in-memory store through the same planner.
"""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

from drill.account.memory_store import InMemoryRunStore
from drill.sim.dynamodb_limits import enforce_transaction_limits
from sagewarden.adapters.dynamodb_limits import item_size, split_transaction
from sagewarden.adapters.dynamodb_run_store import DynamoDbRunStore
from sagewarden.domain.vocabulary.actions import Notify
from sagewarden.domain.vocabulary.events import Submitted
from sagewarden.ports.aws import AuditEntry, OutboxMessage, WriteTooLarge
from tests.builders import make_run, step
from tests.integration.builders import TABLE, _create_table


@pytest.fixture(params=["dynamodb", "memory"])
def store(request):
    if request.param == "memory":
        yield InMemoryRunStore()
        return
    with mock_aws():
        ddb = enforce_transaction_limits(boto3.client("dynamodb", region_name="us-east-1"))
        _create_table(ddb)
        yield DynamoDbRunStore(ddb, TABLE)


def _all_audit(store, run_id):
    entries, cursor = [], None
    while True:
        page = store.list_audit(run_id, 100, cursor)
        entries += page.items
        cursor = page.cursor
        if cursor is None:
            return entries


def _alerts(run_id: str, n: int, body_bytes: int) -> list[OutboxMessage]:
    body = "x" * body_bytes
    return [
        OutboxMessage(
            run_id, f"{run_id}-000001-{i:02d}", 10, Notify("warning", "run.note", f"alert {i}", body, {})
        )
        for i in range(n)
    ]


def test_store_saves_a_decision_with_150_audit_entries_completely(store):
    run = make_run()
    store.create(run, [AuditEntry(0, "event", "created")])
    decided = step(run, Submitted(), 0).run
    entries = [AuditEntry(1, "decision", f"entry {i:03d}", {"i": i}) for i in range(150)]

    saved = store.save(decided, run, entries, due_ms=None)

    assert saved.version == 1
    summaries = [e.summary for e in _all_audit(store, run.run_id)]
    assert summaries == ["created", *[f"entry {i:03d}" for i in range(150)]]  # none dropped, in order


def test_store_writes_the_audit_that_follows_a_commit_under_deterministic_keys():
    """The audit items that do not fit the transaction are written after it under keys fixed by
    the run's version and their position: writing them again (a retry) stores nothing twice."""
    with mock_aws():
        ddb = enforce_transaction_limits(boto3.client("dynamodb", region_name="us-east-1"))
        _create_table(ddb)
        store = DynamoDbRunStore(ddb, TABLE)
        run = make_run()
        store.create(run, [])
        decided = step(run, Submitted(), 0).run
        entries = [AuditEntry(1, "decision", f"entry {i:03d}") for i in range(150)]
        plan = store.plan_save(decided, run, entries, None)
        assert len(plan.transaction) == 100 and len(plan.after) == 150 - 98  # run, attempt, 98 entries
        assert plan.after == store.plan_save(decided, run, entries, None).after  # same keys, same items

        store.save(decided, run, entries, None)
        store._put_after_commit(run.run_id, plan.after)  # the follow-up written a second time

        assert len(_all_audit(store, run.run_id)) == 150


def test_store_refuses_a_save_whose_alerts_exceed_4_mb_and_writes_nothing(store):
    run = make_run()
    store.create(run, [])
    decided = step(run, Submitted(), 0).run
    alerts = _alerts(run.run_id, 12, 350 * 1024)  # each item under 400 KB, 4.1 MB together

    with pytest.raises(WriteTooLarge, match="4,194,304 bytes"):
        store.save(decided, run, [AuditEntry(1, "decision", "d")], due_ms=1, outbox=alerts)

    assert store.get(run.run_id).version == 0  # the run is as it was
    assert all(store.get_outbox(run.run_id, m.dedupe_id) is None for m in alerts)
    assert _all_audit(store, run.run_id) == []
    store.save(decided, run, [], due_ms=1, outbox=alerts[:2])  # a save that fits goes through


def test_store_refuses_more_than_100_actions_that_must_commit_together(store):
    run = make_run()
    store.create(run, [])
    decided = step(run, Submitted(), 0).run
    alerts = _alerts(run.run_id, 120, 10)

    with pytest.raises(WriteTooLarge, match="122 actions"):
        store.save(decided, run, [AuditEntry(1, "decision", "d")], due_ms=1, outbox=alerts)

    assert store.get(run.run_id).version == 0
    assert all(store.get_outbox(run.run_id, m.dedupe_id) is None for m in alerts)


def test_store_refuses_an_item_over_400_kb_before_sending_it(store):
    run = make_run()
    store.create(run, [])
    decided = step(run, Submitted(), 0).run

    with pytest.raises(WriteTooLarge, match="409,600-byte item limit"):
        store.save(decided, run, [], due_ms=1, outbox=_alerts(run.run_id, 1, 410 * 1024))

    assert store.get(run.run_id).version == 0


def test_item_size_follows_dynamodbs_documented_rules():
    # names and strings in UTF-8 bytes; a number 1 byte per two significant digits plus 1; a map
    # or list 3 bytes plus 1 per element
    assert item_size({"pk": {"S": "é"}}) == 2 + 2
    assert item_size({"n": {"N": "12345"}}) == 1 + 4
    assert item_size({"n": {"N": "1000"}}) == 1 + 2  # trailing zeros trimmed
    assert item_size({"m": {"M": {"a": {"S": "xy"}}}}) == 1 + 3 + 1 + 1 + 2
    assert item_size({"l": {"L": [{"BOOL": True}, {"NULL": True}]}}) == 1 + 3 + 2 * (1 + 1)


def test_split_transaction_refuses_two_actions_on_one_item():
    put = {"Put": {"TableName": "t", "Item": {"pk": {"S": "a"}, "sk": {"S": "b"}}}}
    check = {"ConditionCheck": {"TableName": "t", "Key": {"pk": {"S": "a"}, "sk": {"S": "b"}}}}
    with pytest.raises(WriteTooLarge, match="two actions on one item"):
        split_transaction([put, check], [], key_names=("pk", "sk"), what="test")
