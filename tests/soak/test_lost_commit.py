"""Issue 11, retried writes: a `TransactWriteItems` that commits but whose response is lost
(read timeout, connection reset) must not lose the decision's actions, and must not be read as
a concurrent update -- on the real DynamoDbRunStore over moto, driven by the supervisor in the
soak's world. A second writer with identical content is still a conflict (tokens are salted
per write, so only the writer that committed recognises the commit as its own)."""

from __future__ import annotations

import dataclasses
from typing import Any

import boto3
import pytest
from botocore.exceptions import ConnectionClosedError, ReadTimeoutError

from drill.account.deployment import create_table_from_template
from sagewarden.adapters.dynamodb_run_store import DynamoDbRunStore
from sagewarden.domain.vocabulary.models import RunStatus
from sagewarden.ports.aws import ConcurrentUpdate
from tests.soak.world import ALARM_PREFIX, World

TABLE = "sagewarden-lost-commit"


class LosingClient:
    """A DynamoDB client whose chosen TransactWriteItems calls commit and then lose their
    response: `mode="raise"` raises the transport error the SDK would give up with;
    `mode="retry"` sends the same request again (what the SDK's own retry does) and returns
    that second answer."""

    def __init__(self, inner: Any, lose: set[int], mode: str, error: type) -> None:
        self.inner = inner
        self.lose = lose
        self.mode = mode
        self.error = error
        self.transactions = 0
        self.lost = 0

    def transact_write_items(self, **kwargs: Any) -> Any:
        self.transactions += 1
        answer = self.inner.transact_write_items(**kwargs)  # commits
        if self.transactions not in self.lose:
            return answer
        self.lost += 1
        if self.mode == "retry":
            return self.inner.transact_write_items(**kwargs)
        raise self.error(endpoint_url="https://dynamodb.us-east-1.amazonaws.com/")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture
def ddb(aws, template):
    client = boto3.client("dynamodb", region_name="us-east-1")
    create_table_from_template(client, template, TABLE)
    return client


def _world(ddb, lose: set[int], mode: str, error: type = ReadTimeoutError) -> tuple[World, LosingClient]:
    client = LosingClient(ddb, lose, mode, error)
    return World(store=DynamoDbRunStore(client, TABLE)), client


def _drive_to_success(world: World) -> str:
    outcome, result = world.submit("lost", overrides={})
    assert outcome == "ok", result  # no exception escaped, no ConcurrentUpdate
    run_id = result[0].run_id
    world.deliver_all()
    job = next(iter(world.sagemaker.jobs.values()))
    world.progress(job, "advance")
    world.progress(job, "advance")  # Training: hang alarms + attempt.training
    world.deliver_all()
    world.progress(job, "complete")
    world.deliver_all()
    return run_id


def _published(world: World) -> list[str]:
    return [p.event for p in world.sns.published]


@pytest.mark.claim(
    'Transactions carry a `ClientRequestToken` derived from the decision, and "my own write already committed" is told apart from "someone else\'s"'
)
@pytest.mark.claim("a committed transaction whose response is lost, retried by the SDK | no lost action")
@pytest.mark.parametrize("error", [ReadTimeoutError, ConnectionClosedError])
@pytest.mark.parametrize("mode", ["raise", "retry"])
def test_lost_commit_response_loses_no_action(ddb, template, mode, error):
    # baseline: which transactions the story makes, and what it does
    world, client = _world(ddb, set(), mode, error)
    _drive_to_success(world)
    story = client.transactions
    expected_alerts = _published(world)
    assert expected_alerts == ["run.submitted", "attempt.training", "run.succeeded"]
    # every transactional write of the story, one at a time, commits and loses its response
    for lost in range(1, story + 1):
        table = f"{TABLE}-{mode}-{error.__name__}-{lost}"
        create_table_from_template(ddb, template, table)
        client = LosingClient(ddb, {lost}, mode, error)
        world = World(store=DynamoDbRunStore(client, table))
        run_id = _drive_to_success(world)
        assert client.lost == 1
        run = world.raw_store.get(run_id, all_attempts=True)
        assert run.status == RunStatus.SUCCEEDED, f"write {lost}: {run.status} ({run.outcome})"
        assert [j.attempt for j in world.sagemaker.jobs.values()] == [1]  # launched, once
        assert _published(world) == expected_alerts, f"write {lost}: alerts {_published(world)}"
        # the hang alarms of the Training decision were created (and deleted when it ended)
        created = world.calls.counts["cloudwatch.put_metric_alarm"]
        assert created >= 2, f"write {lost}: hang alarms never created"
        assert not any(n.startswith(ALARM_PREFIX) for n in world.cloudwatch.alarms)
        audit = [e.summary for e in world.raw_store.list_audit(run_id, 200, None).items]
        assert not any("changed concurrently" in s for s in audit)


@pytest.mark.claim("a committed transaction whose response is lost, retried by the SDK | no lost action")
def test_without_recognising_its_own_commit_the_decision_is_lost(ddb, monkeypatch):
    """Control: the test above can fail. A store that reads its own committed write as someone
    else's (the behaviour before write tokens) re-decides, finds nothing new, and the launch
    and the alert of the lost write are not carried out."""
    monkeypatch.setattr(DynamoDbRunStore, "_committed", lambda self, run_id, version, token: False)
    world, client = _world(ddb, {2}, "raise")  # write 1 creates the run, write 2 saves the launch
    outcome, _ = world.submit("lost", overrides={})
    assert outcome == "ok"
    assert client.lost == 1
    assert world.sagemaker.jobs == {} and _published(world) == []


@pytest.mark.claim(
    'Transactions carry a `ClientRequestToken` derived from the decision, and "my own write already committed" is told apart from "someone else\'s"'
)
@pytest.mark.claim(
    "saves the new run conditionally on its version (and retries on conflict), then carries out the actions"
)
def test_identical_content_from_another_writer_is_a_conflict(ddb):
    store = DynamoDbRunStore(ddb, TABLE)
    world = World(store=store)
    outcome, result = world.submit("twin", overrides={})
    assert outcome == "ok"
    run = store.get(result[0].run_id)
    changed = dataclasses.replace(run, outcome="same content from two writers")
    store.save(changed, run, [], None)  # writer A commits
    other = DynamoDbRunStore(ddb, TABLE)  # writer B, same previous version, identical content
    with pytest.raises(ConcurrentUpdate):
        other.save(changed, run, [], None)
    with pytest.raises(ConcurrentUpdate):  # the same store object retrying someone else's write
        store.save(changed, run, [], None)


def test_identical_content_from_another_writer_with_a_lost_response_is_a_conflict(ddb):
    store = DynamoDbRunStore(ddb, TABLE)
    world = World(store=store)
    outcome, result = world.submit("twin2", overrides={})
    assert outcome == "ok"
    run = store.get(result[0].run_id)
    changed = dataclasses.replace(run, outcome="identical")
    store.save(changed, run, [], None)
    # B's transaction fails its condition, and its transport also drops the answer
    losing = LosingClient(ddb, {1}, "raise", ReadTimeoutError)
    losing.inner = _FailingTransact(ddb)
    with pytest.raises(ConcurrentUpdate):
        DynamoDbRunStore(losing, TABLE).save(changed, run, [], None)


class _FailingTransact:
    """Passes everything through; its transactions are sent (and fail their condition)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def transact_write_items(self, **kwargs: Any) -> Any:
        try:
            return self.inner.transact_write_items(**kwargs)
        except Exception:
            return None  # the failure's answer is lost too; LosingClient raises the timeout

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
