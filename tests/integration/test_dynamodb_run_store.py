"""RunStore contract: DynamoDbRunStore (on moto) and the drill's InMemoryRunStore must behave alike.

Conditional writes, indexes, audit pagination, idempotency.
"""

from __future__ import annotations

import dataclasses

import boto3
import pytest
from moto import mock_aws

from drill.account.memory_store import InMemoryRunStore
from sagewarden import keys
from sagewarden.adapters.dynamodb_run_store import DynamoDbRunStore
from sagewarden.domain.hangs.heartbeat import PipelineHealth
from sagewarden.domain.vocabulary.actions import Notify
from sagewarden.domain.vocabulary.events import LaunchAccepted, Submitted
from sagewarden.domain.vocabulary.models import RunStatus
from sagewarden.domain.vocabulary.policy import RunPolicy
from sagewarden.ports.aws import AuditEntry, ClaimConflict, ConcurrentUpdate, IdempotentReplay, OutboxMessage
from tests.builders import RUN_ID, ckpt, make_run, step
from tests.integration.builders import TABLE, _create_table


@pytest.fixture(params=["dynamodb", "memory"])
def store(request):
    if request.param == "memory":
        yield InMemoryRunStore()
        return
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        _create_table(ddb)
        yield DynamoDbRunStore(ddb, TABLE)


def _entry(text: str, at: int = 0) -> AuditEntry:
    return AuditEntry(at, "event", text, {"n": 1})


@pytest.mark.claim(
    "One table holds runs, attempts (one item each) and the audit trail (one item per entry, in its own partition, never one growing item)."
)
def test_store_round_trips_a_run_with_attempts(store):
    run = make_run(last_checkpoint=ckpt(5, 1000))
    store.create(run, [_entry("created")])
    decided = step(step(run, Submitted(), 0).run, LaunchAccepted(1), 1).run
    saved = store.save(decided, run, [_entry("launched", 1)], due_ms=500)
    loaded = store.get(run.run_id, all_attempts=True)
    assert saved.version == 1 and loaded.version == 1
    assert loaded == dataclasses.replace(decided, version=1)
    assert loaded.policy == run.policy and loaded.request == run.request


@pytest.mark.claim("DynamoDB (runs, attempts, audit; conditional on version)")
@pytest.mark.claim(
    "saves the new run conditionally on its version (and retries on conflict), then carries out the actions"
)
def test_store_save_is_conditional_on_version(store):
    run = make_run()
    store.create(run, [])
    first = step(run, Submitted(), 0).run
    store.save(first, run, [], due_ms=1)
    with pytest.raises(ConcurrentUpdate):
        store.save(first, run, [], due_ms=1)  # based on version 0, which is gone


@pytest.mark.claim(
    "One table holds runs, attempts (one item each) and the audit trail (one item per entry, in its own partition, never one growing item)."
)
def test_store_get_loads_only_latest_attempt_by_default(store):
    run = make_run()
    store.create(run, [])
    r1 = step(run, Submitted(), 0).run
    r1s = store.save(r1, run, [], None)
    assert [a.number for a in store.get(run.run_id).attempts] == [1]
    assert store.get("NOPE") is None
    assert r1s.version == 1


def _due(store, now_ms):
    return [
        (i.kind, i.run_id, i.key) for shard in range(keys.DUE_SHARDS) for i in store.iter_due(now_ms, shard)
    ]


@pytest.mark.claim("Every non-terminal run carries `due_at`, kept in a sparse GSI sharded 4 ways.")
@pytest.mark.claim("A timer cannot be lost: it is part of the run item that the decision wrote.")
def test_store_due_index_holds_only_runs_with_work(store):
    run = make_run()
    store.create(run, [])
    active = step(run, Submitted(), 0).run
    saved = store.save(active, run, [], due_ms=1_000)
    assert _due(store, 999) == []
    assert _due(store, 1_000) == [("run", run.run_id, "")]
    store.set_due(saved, 5_000)
    assert _due(store, 1_000) == []
    done = dataclasses.replace(saved, status=RunStatus.CANCELLED)
    store.save(done, saved, [], due_ms=None)
    assert _due(store, 10**13) == []


def test_store_lists_runs_by_status_with_pagination(store):
    ids = []
    for i in range(5):
        run = make_run(
            run_id=f"01JC0FFEE0BADC0DE00000000{i}", status=RunStatus.SUBMITTED if i % 2 else RunStatus.FAILED
        )
        store.create(run, [])
        ids.append(run.run_id)
    page1 = store.list_runs(None, 2, None)
    page2 = store.list_runs(None, 2, page1.cursor)
    page3 = store.list_runs(None, 2, page2.cursor)
    listed = [r.run_id for p in (page1, page2, page3) for r in p.items]
    assert listed == sorted(ids, reverse=True)  # newest first
    failed = store.list_runs("FAILED", 10, None)
    assert {r.run_id for r in failed.items} == {ids[0], ids[2], ids[4]}
    with pytest.raises(ValueError):
        store.list_runs(None, 2, "not-a-cursor!")


@pytest.mark.claim("Every decision goes into an audit trail")
@pytest.mark.claim("the audit trail: every event, decision and action, in order")
@pytest.mark.claim(
    "One table holds runs, attempts (one item each) and the audit trail (one item per entry, in its own partition, never one growing item)."
)
def test_store_audit_is_append_only_and_paginated(store):
    run = make_run()
    store.create(run, [_entry("a", 1)])
    store.append_audit(run.run_id, 0, [_entry("b", 2), _entry("c", 3)])
    store.append_audit(run.run_id, 0, [_entry("b", 2)])  # same text and time again: a second record
    p1 = store.list_audit(run.run_id, 2, None)
    p2 = store.list_audit(run.run_id, 10, p1.cursor)
    summaries = [e.summary for e in [*p1.items, *p2.items]]
    assert summaries == ["a", "b", "b", "c"]


@pytest.mark.claim(
    "Header `Idempotency-Key` makes a repeat return the same run (200); the same key with a different body gets 409"
)
@pytest.mark.claim(
    "`Idempotency-Key` is scoped to the caller's identity and written in the same transaction as the run."
)
def test_store_idempotency_key_returns_the_first_run(store):
    run = make_run(idempotency_key="k-1")
    store.create(run, [], body_hash="h1")
    again = make_run(run_id="01JC0FFEE0BADC0DE000000009", idempotency_key="k-1")
    with pytest.raises(IdempotentReplay) as same:
        store.create(again, [], body_hash="h1")
    assert same.value.run_id == run.run_id and same.value.same_body
    with pytest.raises(IdempotentReplay) as different:
        store.create(again, [], body_hash="h2")
    assert not different.value.same_body
    assert store.get(again.run_id) is None  # nothing stored for the replay


def test_store_finds_runs_waiting_for_quota_on_an_instance_type(store):
    run = make_run()
    store.create(run, [])
    waiting = dataclasses.replace(
        run,
        status=RunStatus.RETRY_WAIT,
        wait_reason="quota",
        wait_instance_type="ml.p5.48xlarge",
        wake_at_ms=5,
    )
    store.save(waiting, run, [], due_ms=5)
    assert store.runs_waiting_for("quota", "ml.p5.48xlarge") == [run.run_id]
    assert store.runs_waiting_for("quota", "ml.p4d.24xlarge") == []


# --- outbox, lease, waiting order, strays (issue 7 items 8, 9, 11) ------------------------------


def _notify(event: str = "run.failed") -> Notify:
    return Notify("critical", event, f"[sagewarden] x: {event}", "body ü", {"run_id": "r", "event": event})


@pytest.mark.claim(
    "Alerts are written in the same DynamoDB transaction as the decision that owes them and published (with a dedupe id) until confirmed"
)
def test_store_outbox_is_written_with_the_run_and_due_until_done(store):
    run = make_run()
    store.create(run, [])
    decided = step(run, Submitted(), 0).run
    msg = OutboxMessage(run.run_id, f"{run.run_id}-000001-00", 10, _notify(), due_ms=120_010)
    store.save(decided, run, [], due_ms=None, outbox=[msg])
    assert _due(store, 120_009) == []
    assert _due(store, 120_010) == [("outbox", run.run_id, msg.dedupe_id)]
    got = store.get_outbox(run.run_id, msg.dedupe_id)
    assert got is not None and got.notify == msg.notify and got.tries == 0
    store.outbox_retry(run.run_id, msg.dedupe_id, 500_000, 1, "KMS throttled")
    assert _due(store, 400_000) == []
    assert store.get_outbox(run.run_id, msg.dedupe_id).tries == 1
    store.outbox_done(run.run_id, msg.dedupe_id, 500_001)
    assert _due(store, 10**13) == [] and store.get_outbox(run.run_id, msg.dedupe_id) is None


@pytest.mark.claim(
    "stops stray jobs of any earlier attempt of a finished run (judged against every known attempt, once)"
)
def test_store_terminal_run_with_stray_jobs_stays_due(store):
    run = make_run()
    store.create(run, [])
    done = dataclasses.replace(run, status=RunStatus.CANCELLED, strays=(("sw-llama-x-a002", 5),))
    saved = store.save(done, run, [], due_ms=300_005)
    assert store.get(run.run_id).strays == (("sw-llama-x-a002", 5),)
    assert _due(store, 300_005) == [("run", run.run_id, "")]
    store.save(dataclasses.replace(saved, strays=()), saved, [], due_ms=None)
    assert _due(store, 10**13) == []


def test_store_lease_is_held_by_one_owner_until_it_expires(store):
    assert store.acquire_lease("sweep", "a", 1_000, 60_000)
    assert store.acquire_lease("sweep", "a", 2_000, 60_000)  # the holder may renew
    assert not store.acquire_lease("sweep", "b", 30_000, 60_000)
    assert store.acquire_lease("sweep", "b", 62_001, 60_000)  # a's lease expired
    store.release_lease("sweep", "a")  # not a's any more: no effect
    assert not store.acquire_lease("sweep", "c", 70_000, 60_000)
    store.release_lease("sweep", "b")
    assert store.acquire_lease("sweep", "c", 70_000, 60_000)


@pytest.mark.claim(
    "The state table keeps it (one item, written conditionally on its version, with its alert in the same transaction)"
)
def test_store_keeps_the_heartbeat_pipeline_state_with_its_alert_conditional_on_its_version(store):
    """The deployment's heartbeat pipeline (domain/hangs/heartbeat.py): delivering at version 0 before
    any write; a change is written with the alert it owes, conditional on the version it was
    judged from, so two sweeps judging at once say it once."""
    assert store.get_pipeline() == PipelineHealth()
    alert = Notify("warning", "heartbeat.broken", "[sagewarden] heartbeat pipeline broken", "body", {})
    owed = OutboxMessage("deployment", "deployment-heartbeat-000001", 5_000, alert, due_ms=125_000)
    broken = PipelineHealth(5_000, ("sw-a-01JC0FFEE0BADC0DE000000000-a001",), 5_000)
    saved = store.save_pipeline(broken, PipelineHealth(), [owed])
    assert saved == dataclasses.replace(broken, version=1) == store.get_pipeline()
    assert _due(store, 125_000) == [("outbox", "deployment", "deployment-heartbeat-000001")]
    assert store.get_outbox("deployment", "deployment-heartbeat-000001").notify == alert
    with pytest.raises(ConcurrentUpdate):  # judged from the state before: another sweep's write won
        store.save_pipeline(broken, PipelineHealth(), [dataclasses.replace(owed, dedupe_id="other")])
    assert _due(store, 10**13) == [("outbox", "deployment", "deployment-heartbeat-000001")]
    healed = store.save_pipeline(PipelineHealth(None, (), 9_000), saved)
    assert healed.version == 2 and not store.get_pipeline().broken
    assert store.get("deployment") is None  # the deployment's alerts belong to no run


def test_store_runs_waiting_for_quota_highest_priority_then_oldest_first(store):
    ids = []
    for i, priority in enumerate([0, 5, 0, 5, -1]):
        run = make_run(run_id=f"01JC0FFEE0BADC0DE00000000{i}", policy=RunPolicy(priority=priority))
        store.create(run, [])
        waiting = dataclasses.replace(
            run, status=RunStatus.RETRY_WAIT, wait_reason="quota", wait_instance_type="ml.p4d.24xlarge"
        )
        store.save(waiting, run, [], due_ms=10)
        ids.append(run.run_id)
    assert store.runs_waiting_for("quota", "ml.p4d.24xlarge") == [ids[1], ids[3], ids[0], ids[2], ids[4]]
    assert store.runs_waiting_for("quota", "ml.p5.48xlarge") == []


def test_store_loads_a_run_whose_policy_predates_todays_ranges_and_fields():
    from sagewarden.adapters.run_codec import run_from_dict, run_to_dict

    data = run_to_dict(make_run())
    data["policy"] = {
        **data["policy"],
        "log_silence_minutes": 5000,
        "retired_field": 1,
    }  # out of today's range
    run = run_from_dict(data)
    assert run.policy.log_silence_minutes == 5000 and run.policy.extra == {"retired_field": 1}


def test_store_keeps_retirement_progress_and_loads_items_from_before_it(store):
    """Checkpoint retirement's per-directory progress, the directories it cannot retire and the
    submit-time storage warning survive the store; an item written before they existed loads
    with none (every pass then proves its objects)."""
    from sagewarden.adapters.run_codec import run_from_dict, run_to_dict
    from sagewarden.domain.vocabulary.models import RetireProgress

    run = make_run()
    store.create(run, [])
    progress = RetireProgress(
        "checkpoint-100",
        verified=1_024,
        digest="ab" * 16,
        upload=("optimizer.pt", "up-1", '"e"'),
        parts=3,
        stalled=1,
    )
    retiring = dataclasses.replace(
        run,
        retiring=("checkpoint-100",),
        retire_progress=(progress,),
        retire_stuck=(("checkpoint-50", "AccessDenied", 1_000),),
        storage_warning="versioned",
    )
    store.save(retiring, run, [], due_ms=10)
    back = store.get(run.run_id)
    assert back is not None
    assert (back.retire_progress, back.retire_stuck, back.storage_warning) == (
        (progress,),
        (("checkpoint-50", "AccessDenied", 1_000),),
        "versioned",
    )
    old = {
        k: v
        for k, v in run_to_dict(retiring).items()
        if k not in ("retire_progress", "retire_stuck", "storage_warning")
    }
    before = run_from_dict(old)
    assert (before.retire_progress, before.retire_stuck, before.storage_warning) == ((), (), None)


# -- claims: a live run's name and checkpoint prefix (issue 16 items 8 and 9) -----------------------
OTHER_ID = "01JC0FFEE0BADC0DE000000009"
THIRD_ID = "01JC0FFEE0BADC0DE00000000A"


def _claiming(run_id: str, name: str, uri: str, **changes):
    from sagewarden.domain.vocabulary.claims import claim_keys

    request = {**make_run().request, "CheckpointConfig": {"S3Uri": uri}}
    return make_run(run_id=run_id, name=name, request=request, claims=claim_keys(name, uri), **changes)


def _ended(store, run, status=RunStatus.CANCELLED):
    loaded = store.get(run.run_id)
    return store.save(dataclasses.replace(loaded, status=status), loaded, [], None)


@pytest.mark.claim(
    "The run holds them as claim items written in the same DynamoDB transaction that creates it (so two concurrent submits cannot both win), released in the one that makes it terminal, and taken again by a resume"
)
@pytest.mark.claim(
    "An exact name or prefix is one item; a nested prefix is caught by the run's claim on every folder above its prefix (a string set of the live runs below each), so it is race-free too. Runs stored before claims existed hold none."
)
@pytest.mark.parametrize(
    ("name", "uri", "claim"),
    [
        ("llama", "s3://b/other/", "name#llama"),  # the same name
        ("qwen", "s3://b/ckpt", "ckpt#s3://b/ckpt/"),  # the same prefix, spelled without the slash
        ("qwen", "s3://b/ckpt/sub/", "ckpt#s3://b/ckpt/"),  # inside the live run's prefix
        ("qwen", "s3://b/", "under#s3://b/"),  # containing it
    ],
)
def test_store_refuses_a_second_live_run_on_a_held_name_or_prefix(store, name, uri, claim):
    first = _claiming(RUN_ID, "llama", "s3://b/ckpt/")
    store.create(first, [])
    with pytest.raises(ClaimConflict) as taken:
        store.create(_claiming(OTHER_ID, name, uri), [])
    assert (taken.value.holder_run_id, taken.value.claim) == (RUN_ID, claim)
    assert store.get(OTHER_ID) is None  # nothing of the refused run is stored
    store.create(_claiming(THIRD_ID, "mistral", "s3://b/ckpt2/"), [])  # a sibling prefix is free


@pytest.mark.claim("Once that run has ended both are free again")
@pytest.mark.claim(
    "The run holds them as claim items written in the same DynamoDB transaction that creates it (so two concurrent submits cannot both win), released in the one that makes it terminal, and taken again by a resume"
)
def test_store_releases_claims_when_the_run_ends_and_takes_them_again_on_resume(store):
    first = _claiming(RUN_ID, "llama", "s3://b/ckpt/")
    store.create(first, [])
    ended = _ended(store, first)
    second = _claiming(OTHER_ID, "llama", "s3://b/ckpt/sub/")
    store.create(second, [])  # name and prefix are free once the first run ended
    # resuming the first run would take them back: refused while the second is live
    with pytest.raises(ClaimConflict) as taken:
        store.save(dataclasses.replace(ended, status=RunStatus.SUBMITTED), ended, [], 0)
    assert taken.value.holder_run_id == OTHER_ID
    assert store.get(RUN_ID).status == RunStatus.CANCELLED  # the refused resume stored nothing
    _ended(store, second, RunStatus.FAILED)
    reopened = store.save(dataclasses.replace(ended, status=RunStatus.SUBMITTED), ended, [], 0)
    assert reopened.status == RunStatus.SUBMITTED
    with pytest.raises(ClaimConflict):  # held again by the resumed run
        store.create(_claiming(THIRD_ID, "llama", "s3://b/x/"), [])


ALICE = "arn:aws:iam::123456789012:role/alice"
ALICE_SESSION = "arn:aws:sts::123456789012:assumed-role/alice/laptop"
BOB = "arn:aws:iam::123456789012:role/bob"


def _owned(run_id: str, owner: str, uri: str, name: str | None = None, archive: str | None = None, **changes):
    from sagewarden.domain.vocabulary.claims import claim_keys

    name = name or run_id[-4:].lower()
    request = {**make_run().request, "CheckpointConfig": {"S3Uri": uri}}
    return make_run(
        run_id=run_id,
        name=name,
        owner=owner,
        request=request,
        claims=claim_keys(name, uri, archive),
        **changes,
    )


@pytest.mark.claim(
    "a FAILED or CANCELLED run that may still be resumed (30 days, [Resuming a run](recovery.md#resuming-a-run)) holds its checkpoint prefix against runs of other principals, at the prefix and inside it (409 naming it, not its owner); runs of the same principal and an admin's may take it"
)
@pytest.mark.parametrize(
    ("uri", "claim"),
    [("s3://b/ckpt/", "hold#s3://b/ckpt/"), ("s3://b/ckpt/sub/", "hold#s3://b/ckpt/")],
    ids=["the same prefix", "a prefix inside it"],
)
def test_store_a_resumable_run_holds_its_prefix_against_another_principal(store, uri, claim):
    """Issue 32 item 5: a cancelled (resumable) run's prefix was free for anyone; another
    principal's run took it and its retention deleted the first run's checkpoints."""
    first = _owned(RUN_ID, ALICE, "s3://b/ckpt/")
    store.create(first, [])
    _ended(store, first, RunStatus.CANCELLED)
    with pytest.raises(ClaimConflict) as taken:
        store.create(_owned(OTHER_ID, BOB, uri), [])
    assert (taken.value.holder_run_id, taken.value.claim) == (RUN_ID, claim)
    assert store.get(OTHER_ID) is None
    # the same principal (any session of its role) may, and so may an admin's run
    store.create(_owned(OTHER_ID, ALICE_SESSION, uri), [])
    _ended(store, store.get(OTHER_ID), RunStatus.SUCCEEDED)


@pytest.mark.claim(
    "a FAILED or CANCELLED run that may still be resumed (30 days, [Resuming a run](recovery.md#resuming-a-run)) holds its checkpoint prefix against runs of other principals, at the prefix and inside it (409 naming it, not its owner); runs of the same principal and an admin's may take it"
)
def test_store_a_hold_ends_with_the_resume_window_and_an_admins_run_may_take_it(store):
    from sagewarden.domain.resuming import RESUME_WINDOW_MS

    first = _owned(RUN_ID, ALICE, "s3://b/ckpt/")
    store.create(first, [])
    _ended(store, first, RunStatus.FAILED)  # ended at 0: resumable until RESUME_WINDOW_MS
    store.create(_owned(OTHER_ID, BOB, "s3://b/ckpt/"), [], take_held=True)  # an admin's run
    _ended(store, store.get(OTHER_ID), RunStatus.SUCCEEDED)
    _ended(store, _reopened(store, RUN_ID), RunStatus.FAILED)  # the first run held it again
    with pytest.raises(ClaimConflict):
        store.create(_owned(THIRD_ID, BOB, "s3://b/ckpt/", created_ms=RESUME_WINDOW_MS), [])
    store.create(_owned(THIRD_ID, BOB, "s3://b/ckpt/", created_ms=RESUME_WINDOW_MS + 1), [])  # expired


def test_store_a_succeeded_run_holds_nothing_and_the_held_run_itself_resumes(store):
    first = _owned(RUN_ID, ALICE, "s3://b/ckpt/")
    store.create(first, [])
    _ended(store, first, RunStatus.CANCELLED)
    assert _reopened(store, RUN_ID).status == RunStatus.SUBMITTED  # its own hold lets it back
    _ended(store, store.get(RUN_ID), RunStatus.SUCCEEDED)
    store.create(_owned(OTHER_ID, BOB, "s3://b/ckpt/"), [])  # succeeded: nothing to resume


def _reopened(store, run_id):
    ended = store.get(run_id)
    return store.save(dataclasses.replace(ended, status=RunStatus.SUBMITTED), ended, [], 0)


@pytest.mark.claim(
    'gets the same 409 (`"on": "archive_prefix"`) when its archive is another live run\'s checkpoint prefix, inside it or around it, and a run whose checkpoint prefix is another live run\'s archive, inside it or around it, gets it on `checkpoint_prefix`'
)
@pytest.mark.parametrize(
    ("archive", "claim"),
    [
        ("s3://b/ckpt/", "ckpt#s3://b/ckpt/"),  # my archive is its synced prefix
        ("s3://b/ckpt/old/", "ckpt#s3://b/ckpt/"),  # inside it
        ("s3://b/", "under#s3://b/"),  # holding it
    ],
    ids=["the same prefix", "inside it", "around it"],
)
def test_store_an_archive_may_not_overlap_another_live_runs_checkpoint_prefix(store, archive, claim):
    """Issue 32 item 1: an archive prefix may not be, hold, or lie inside another live run's
    synced prefix (retention would copy into what that run's jobs download)."""
    store.create(_owned(RUN_ID, ALICE, "s3://b/ckpt/"), [])
    with pytest.raises(ClaimConflict) as taken:
        store.create(_owned(OTHER_ID, BOB, "s3://c/mine/", archive=archive), [])
    assert (taken.value.holder_run_id, taken.value.claim) == (RUN_ID, claim)
    assert store.get(OTHER_ID) is None


@pytest.mark.claim(
    'gets the same 409 (`"on": "archive_prefix"`) when its archive is another live run\'s checkpoint prefix, inside it or around it, and a run whose checkpoint prefix is another live run\'s archive, inside it or around it, gets it on `checkpoint_prefix`'
)
@pytest.mark.parametrize(
    ("synced", "claim"),
    [
        ("s3://b/arch/", "arch#s3://b/arch/"),  # my synced prefix is its archive
        ("s3://b/arch/x/", "arch#s3://b/arch/"),  # inside its archive
        ("s3://b/", "archunder#s3://b/"),  # holding its archive
    ],
    ids=["the same prefix", "inside it", "around it"],
)
def test_store_a_checkpoint_prefix_may_not_overlap_another_live_runs_archive(store, synced, claim):
    store.create(_owned(RUN_ID, ALICE, "s3://c/ckpt/", archive="s3://b/arch/"), [])
    with pytest.raises(ClaimConflict) as taken:
        store.create(_owned(OTHER_ID, BOB, synced), [])
    assert (taken.value.holder_run_id, taken.value.claim) == (RUN_ID, claim)


@pytest.mark.claim("Two live runs may share one archive prefix.")
def test_store_two_live_runs_may_share_one_archive_and_ending_frees_it(store):
    store.create(_owned(RUN_ID, ALICE, "s3://c/one/", archive="s3://b/team-archive/"), [])
    store.create(_owned(OTHER_ID, BOB, "s3://c/two/", archive="s3://b/team-archive/"), [])
    with pytest.raises(ClaimConflict):
        store.create(_owned(THIRD_ID, BOB, "s3://b/team-archive/"), [])
    _ended(store, store.get(RUN_ID), RunStatus.SUCCEEDED)
    with pytest.raises(ClaimConflict) as taken:  # the second run still archives there
        store.create(_owned(THIRD_ID, BOB, "s3://b/team-archive/"), [])
    assert taken.value.holder_run_id == OTHER_ID
    _ended(store, store.get(OTHER_ID), RunStatus.SUCCEEDED)
    store.create(_owned(THIRD_ID, BOB, "s3://b/team-archive/"), [])


@pytest.mark.claim(
    "a `policy.checkpoint_archive_uri` more than 20 folders deep, and a `CheckpointConfig.S3Uri` or archive prefix in an S3 directory bucket (a name ending `--x-s3`)"
)
def test_store_the_deepest_prefixes_fit_one_transaction(store):
    """A checkpoint prefix and an archive 20 folders deep each (the limits validation enforces):
    every claim item rides in the one transaction that creates the run."""
    deep = "/".join(f"d{i}" for i in range(20))
    run = _owned(RUN_ID, ALICE, f"s3://b/{deep}/", archive=f"s3://c/{deep}/")
    store.create(run, [])
    assert store.get(RUN_ID) is not None


@pytest.mark.claim("A replay with the same `Idempotency-Key` and body still answers 200 with its run.")
def test_store_idempotent_replay_wins_over_the_claims_its_own_run_holds(store):
    first = _claiming(RUN_ID, "llama", "s3://b/ckpt/", idempotency_key="k-1")
    store.create(first, [], body_hash="h1")
    again = _claiming(OTHER_ID, "llama", "s3://b/ckpt/", idempotency_key="k-1")
    with pytest.raises(IdempotentReplay) as replay:
        store.create(again, [], body_hash="h1")
    assert replay.value.run_id == RUN_ID and replay.value.same_body


@pytest.mark.claim(
    "An exact name or prefix is one item; a nested prefix is caught by the run's claim on every folder above its prefix (a string set of the live runs below each), so it is race-free too. Runs stored before claims existed hold none."
)
def test_store_a_run_without_claims_ends_without_touching_anothers(store):
    """Runs stored before claims existed hold none: ending one never releases a newer run's."""
    legacy = make_run(run_id=RUN_ID, name="llama")
    store.create(legacy, [])
    newer = _claiming(OTHER_ID, "llama", "s3://b/ckpt/")
    store.create(newer, [])
    _ended(store, legacy)
    with pytest.raises(ClaimConflict):
        store.create(_claiming(THIRD_ID, "llama", "s3://b/elsewhere/"), [])
