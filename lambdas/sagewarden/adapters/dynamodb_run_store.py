"""DynamoDB run store: runs, attempts, audit trail, idempotency, owed alerts, lease and claims in one table.

The item shapes table below is the only place they are spelled out; every write is conditional
and planned by `adapters/dynamodb_limits.py`. Why: docs/reliability.md (*Storage*, *Every write
survives its own retry*).

Item shapes (key names come from `sagewarden.keys`):
  run      pk=RUN#<id>  sk=RUN                 data (JSON, with the current attempt embedded), version,
                                               status, run_id, entity=RUN, write_token, priority,
                                               due_shard/due_at while the run needs the sweep
  attempt  pk=RUN#<id>  sk=ATTEMPT#<000001>    data (JSON)  every attempt, for GET /runs/{id}
  outbox   pk=RUN#<id>  sk=OUTBOX#<dedupe id>  data (JSON: the alert), tries, due_shard/due_at while owed
  audit    pk=AUDIT#<id> sk=AUDIT#<ms>#<ver>#<..> at_ms, kind, summary, detail (JSON)  append-only
  idempotency pk=IDEMP#<sha256(owner, key)> sk=IDEMP  run_id, body_hash
  lease    pk=LEASE#<name> sk=LEASE            owner, expires_ms (and expires_at for TTL)
  pipeline pk=DEPLOYMENT#heartbeat sk=STATE    data (JSON: PipelineHealth), version
  claim    pk=CLAIM#<...>  sk=CLAIM            see adapters/dynamodb_claims.py"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
import random
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sagewarden import keys
from sagewarden.adapters import dynamodb_claims as claim_items
from sagewarden.adapters.dynamodb_cursors import (
    AUDIT_PREFIX,
    RUN_SK,
    audit_pk,
    audit_start_key,
    encode_cursor,
    run_pk,
    runs_start_key,
)
from sagewarden.adapters.dynamodb_limits import split_transaction
from sagewarden.adapters.dynamodb_outbox_lease import OUTBOX_PREFIX, OutboxAndLease
from sagewarden.adapters.dynamodb_outbox_lease import due_shard as _shard
from sagewarden.adapters.run_codec import (
    attempt_from_dict,
    attempt_to_dict,
    compact_json,
    run_from_dict,
    run_to_dict,
)
from sagewarden.domain.vocabulary.bounded import bounded_json, clip_text
from sagewarden.domain.vocabulary.models import Attempt, Run, RunStatus
from sagewarden.ports.aws import (
    AuditEntry,
    ClaimConflict,
    ConcurrentUpdate,
    DueItem,
    IdempotentReplay,
    OutboxMessage,
    Page,
    WriteTooLarge,
)

ATTEMPT_PREFIX = "ATTEMPT#"
DUE_PAGE = 100
AUDIT_SUMMARY_BYTES = 2048  # audit texts are bounded by bytes (an item is at most 400 KB)
AUDIT_DETAIL_BYTES = 64 * 1024  # valid JSON whatever is cut (bounded_json)
AUDIT_WRITE_ATTEMPTS = 8  # BatchWriteItem tries for one batch before the write fails loudly
_sleep = time.sleep  # the backoff between tries (tests replace it)


MAX_AUDIT_PER_WRITE = 1000  # a write's own audit keys are A000..A999 (sorted as written)


@dataclasses.dataclass(frozen=True)
class SavePlan:
    """One save, planned within DynamoDB's limits: the run as saved, the transaction's actions,
    the audit puts that follow its commit, whether it takes the run's claims, and the stored JSON
    of the run and of each changed attempt (the in-memory store keeps the same text)."""

    run: Run
    transaction: list[dict[str, Any]]
    after: list[dict[str, Any]]
    taking: bool
    run_data: str
    attempt_data: dict[int, str]


def idempotency_pk(owner: str, key: str) -> str:
    return "IDEMP#" + hashlib.sha256(f"{owner}\n{key}".encode()).hexdigest()


def write_token(items: Sequence[Mapping[str, Any]]) -> str:
    """A ClientRequestToken (<= 36 chars) for one write: the SDK's retries of it carry the same
    token (DynamoDB then answers success instead of failing its own condition), while another
    invocation writing identical content gets a different one (random salt), so only the
    writer that committed reads the commit as its own."""
    return hashlib.sha256(compact_json(list(items)).encode() + os.urandom(16)).hexdigest()[:36]


# --- store -----------------------------------------------------------------------------------


class DynamoDbRunStore(OutboxAndLease):
    def __init__(self, client: Any, table_name: str) -> None:
        self._ddb = client
        self._table = table_name
        self._seq = itertools.count()

    # -- writes -----------------------------------------------------------------------------
    def plan_create(
        self,
        run: Run,
        audit: Sequence[AuditEntry],
        body_hash: str | None = None,
        *,
        take_held: bool = False,
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(The transaction, the audit puts after it) that create `run`, within DynamoDB's limits
        (WriteTooLarge otherwise); pure, like `plan_save`. `take_held`: the run may take a prefix
        another principal's resumable run holds (an admin's run; domain.claims)."""
        required: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": self._run_item(run, due_ms=run.created_ms),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            }
        ]
        if run.idempotency_key:
            required.append(
                {
                    "Put": {
                        "TableName": self._table,
                        "ConditionExpression": "attribute_not_exists(pk)",
                        "Item": {
                            keys.PK: {"S": idempotency_pk(run.owner, run.idempotency_key)},
                            keys.SK: {"S": "IDEMP"},
                            "run_id": {"S": run.run_id},
                            "body_hash": {"S": body_hash or ""},
                        },
                    }
                }
            )
        if not run.status.terminal:
            required += claim_items.take(self._table, run, run.created_ms, take_held=take_held)
        return self._split(required, self._audit_puts(run.run_id, run.version, audit), run.run_id)

    def create(
        self,
        run: Run,
        audit: Sequence[AuditEntry],
        body_hash: str | None = None,
        *,
        take_held: bool = False,
    ) -> Run:
        items, after = self.plan_create(run, audit, body_hash, take_held=take_held)
        token = write_token(items)
        items[0]["Put"]["Item"]["write_token"] = {"S": token}
        try:
            self._ddb.transact_write_items(TransactItems=items, ClientRequestToken=token)
        except (ClientError, BotoCoreError) as exc:
            if self._committed(run.run_id, run.version, token):
                self._put_after_commit(run.run_id, after)
                return run  # an earlier try committed; its answer was lost
            if not isinstance(exc, ClientError):
                raise
            if exc.response["Error"]["Code"] != "TransactionCanceledException":
                raise
            if run.idempotency_key:  # a replay wins over a conflict: it answers with its own run
                existing = self._ddb.get_item(
                    TableName=self._table,
                    Key={
                        keys.PK: {"S": idempotency_pk(run.owner, run.idempotency_key)},
                        keys.SK: {"S": "IDEMP"},
                    },
                    ConsistentRead=True,
                ).get("Item")
                if existing:
                    raise IdempotentReplay(
                        existing["run_id"]["S"],
                        existing.get("body_hash", {}).get("S", "") == (body_hash or ""),
                    ) from exc
            self._raise_claim_conflict(run, run.created_ms, exc, take_held=take_held)
            raise
        self._put_after_commit(run.run_id, after)
        return run

    def _split(
        self, required: list[dict[str, Any]], audit: list[dict[str, Any]], run_id: str
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """One write of `run_id` planned within DynamoDB's limits (adapters/dynamodb_limits.py):
        `required` commits together or not at all (WriteTooLarge before anything is sent when it
        cannot); audit items fill the room left, the rest follow the commit. The run item (first)
        is measured with its write token in place."""
        required[0]["Put"]["Item"]["write_token"] = {"S": "0" * 36}
        transaction, after = split_transaction(
            required, audit, key_names=(keys.PK, keys.SK), what=f"write of run {run_id}"
        )
        return [dict(a) for a in transaction], [dict(a) for a in after]

    def _put_after_commit(self, run_id: str, after: Sequence[Mapping[str, Any]]) -> None:
        """Audit items that did not fit the transaction, written once it committed. Their keys
        are deterministic (version and position), so a retried write puts the same items again.
        A failure is loud (RuntimeError after AUDIT_WRITE_ATTEMPTS tries): the decision is saved,
        the invocation fails like one that crashed after its write, and the sweep carries on."""
        if after:
            self._batch_put(run_id, [a["Put"]["Item"] for a in after])

    def _raise_claim_conflict(
        self, run: Run, now_ms: int, exc: Exception, *, take_held: bool = False
    ) -> None:
        held = (
            claim_items.holder(self._ddb, self._table, run, now_ms, take_held=take_held)
            if run.claims
            else None
        )
        if held is not None:
            raise ClaimConflict(*held) from exc

    def plan_save(
        self,
        run: Run,
        previous: Run,
        audit: Sequence[AuditEntry],
        due_ms: int | None,
        outbox: Sequence[OutboxMessage] = (),
    ) -> SavePlan:
        """What `save` writes, planned within DynamoDB's limits without calling DynamoDB (the
        in-memory store plans every save through it too, so a save too large for DynamoDB fails
        there as well). Raises WriteTooLarge when the run, its claims, changed attempts and owed
        alerts cannot commit in one transaction."""
        saved = dataclasses.replace(run, version=previous.version + 1)
        before = {a.number: a for a in previous.attempts}
        run_put: dict[str, Any] = {
            "TableName": self._table,
            "Item": self._run_item(saved, due_ms),
            "ConditionExpression": "#v = :v",
            "ExpressionAttributeNames": {"#v": "version"},
            "ExpressionAttributeValues": {":v": {"N": str(previous.version)}},
        }
        required: list[dict[str, Any]] = [{"Put": run_put}]
        taking = bool(run.claims) and previous.status.terminal and not run.status.terminal
        if taking:  # a resume reopens the run: it takes its name and prefix again, or fails
            required += claim_items.take(self._table, run, run.updated_ms)
        elif run.claims and not previous.status.terminal and run.status.terminal:
            # ended: its claims go back; a resumable run's prefix stays held (domain/resuming.py)
            required += claim_items.release(self._table, run)
        attempts: dict[int, str] = {}
        for att in run.attempts:
            if before.get(att.number) != att:
                item = self._attempt_item(run.run_id, att)
                attempts[att.number] = item["data"]["S"]
                required.append({"Put": {"TableName": self._table, "Item": item}})
        required += [{"Put": self._outbox_put(m)} for m in outbox]
        transaction, after = self._split(
            required, self._audit_puts(run.run_id, saved.version, audit), run.run_id
        )
        return SavePlan(saved, transaction, after, taking, run_put["Item"]["data"]["S"], attempts)

    def save(
        self,
        run: Run,
        previous: Run,
        audit: Sequence[AuditEntry],
        due_ms: int | None,
        outbox: Sequence[OutboxMessage] = (),
    ) -> Run:
        plan = self.plan_save(run, previous, audit, due_ms, outbox)
        saved, items = plan.run, plan.transaction
        token = write_token(items)
        items[0]["Put"]["Item"]["write_token"] = {"S": token}
        try:
            self._ddb.transact_write_items(TransactItems=items, ClientRequestToken=token)
        except ClientError as exc:
            code = exc.response["Error"]["Code"]
            if code not in ("TransactionCanceledException", "IdempotentParameterMismatchException"):
                raise
            if not self._committed(run.run_id, saved.version, token):
                if plan.taking:
                    self._raise_claim_conflict(run, run.updated_ms, exc)
                raise ConcurrentUpdate(run.run_id) from exc
            # our own write, committed by an earlier try whose answer was lost
        except BotoCoreError as exc:  # timeout / connection reset: did it commit?
            if not self._committed(run.run_id, saved.version, token):
                raise ConcurrentUpdate(run.run_id) from exc
        self._put_after_commit(run.run_id, plan.after)
        return saved

    def _committed(self, run_id: str, version: int, token: str) -> bool:
        item = self._ddb.get_item(
            TableName=self._table,
            Key={keys.PK: {"S": run_pk(run_id)}, keys.SK: {"S": RUN_SK}},
            ConsistentRead=True,
            ProjectionExpression="#v, #w",
            ExpressionAttributeNames={"#v": "version", "#w": "write_token"},
        ).get("Item")
        return bool(
            item and int(item["version"]["N"]) == version and item.get("write_token", {}).get("S") == token
        )

    def append_audit(self, run_id: str, version: int, entries: Sequence[AuditEntry]) -> None:
        """Write audit entries in batches of 25 (see `_batch_put`)."""
        puts = self._audit_puts(run_id, version, entries, salt=True)
        self._batch_put(run_id, [p["Put"]["Item"] for p in puts])

    def _batch_put(self, run_id: str, items: Sequence[Mapping[str, Any]]) -> None:
        """Put audit items in batches of 25. Items DynamoDB leaves unprocessed (throttling,
        partition limits) are sent again with exponential backoff and jitter; after
        AUDIT_WRITE_ATTEMPTS tries the write fails loudly (RuntimeError): an entry is never
        dropped silently."""
        for i in range(0, len(items), 25):
            pending: Mapping[str, Any] = {
                self._table: [{"PutRequest": {"Item": p}} for p in items[i : i + 25]]
            }
            for attempt in range(AUDIT_WRITE_ATTEMPTS):
                if attempt:
                    _sleep(random.uniform(0, min(1.0, 0.05 * 2**attempt)))
                pending = self._ddb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
                if not pending:
                    break
            else:
                left = sum(len(v) for v in pending.values())
                raise RuntimeError(
                    f"audit of {run_id}: {left} items still unprocessed after {AUDIT_WRITE_ATTEMPTS} attempts"
                )

    def set_due(self, run: Run, due_ms: int | None) -> None:
        """Move a run's next sweep time without changing its version (no-op decisions)."""
        key = {keys.PK: {"S": run_pk(run.run_id)}, keys.SK: {"S": RUN_SK}}
        values: dict[str, Any] = {":v": {"N": str(run.version)}}
        if due_ms is None:
            update = "REMOVE #s, #d"
        else:
            update = "SET #s = :s, #d = :d"
            values |= {":s": {"S": _shard(run.run_id)}, ":d": {"N": str(due_ms)}}
        try:
            self._ddb.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression=update,
                ConditionExpression="#v = :v",
                ExpressionAttributeNames={"#s": keys.GSI_DUE_PK, "#d": keys.GSI_DUE_SK, "#v": "version"},
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise  # a newer version already set its own due time

    # -- reads ------------------------------------------------------------------------------
    def get(self, run_id: str, *, all_attempts: bool = False) -> Run | None:
        item = self._ddb.get_item(
            TableName=self._table,
            Key={keys.PK: {"S": run_pk(run_id)}, keys.SK: {"S": RUN_SK}},
            ConsistentRead=True,
        ).get("Item")
        if not item:
            return None
        data = json.loads(item["data"]["S"])
        attempts: list[Attempt] | None = None
        if all_attempts:
            attempts = []
            for page in self._ddb.get_paginator("query").paginate(**self._attempts_query(run_id)):
                attempts += [attempt_from_dict(json.loads(i["data"]["S"])) for i in page["Items"]]
        run = run_from_dict(data, attempts)
        return dataclasses.replace(run, version=int(item["version"]["N"]))

    def _attempts_query(self, run_id: str) -> dict[str, Any]:
        return {
            "TableName": self._table,
            "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :a)",
            "ExpressionAttributeNames": {"#pk": keys.PK, "#sk": keys.SK},
            "ExpressionAttributeValues": {":pk": {"S": run_pk(run_id)}, ":a": {"S": ATTEMPT_PREFIX}},
            "ConsistentRead": True,
        }

    def list_runs(self, status: str | None, limit: int, cursor: str | None) -> Page:
        if status:
            index, pk_name, pk_value = keys.GSI_STATUS, keys.GSI_STATUS_PK, status
        else:
            index, pk_name, pk_value = keys.GSI_RUNS, keys.GSI_RUNS_PK, "RUN"
        query: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": index,
            "KeyConditionExpression": "#p = :p",
            "ExpressionAttributeNames": {"#p": pk_name},
            "ExpressionAttributeValues": {":p": {"S": pk_value}},
            "ScanIndexForward": False,
            "Limit": limit,
        }
        if cursor:
            query["ExclusiveStartKey"] = runs_start_key(cursor, pk_name, pk_value)
        resp = self._ddb.query(**query)
        runs = [run_from_dict(json.loads(i["data"]["S"])) for i in resp["Items"]]
        runs = [
            dataclasses.replace(r, version=int(i["version"]["N"]))
            for r, i in zip(runs, resp["Items"], strict=True)
        ]
        return Page(runs, encode_cursor(resp.get("LastEvaluatedKey")))

    def list_audit(self, run_id: str, limit: int, cursor: str | None) -> Page:
        query: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :a)",
            "ExpressionAttributeNames": {"#pk": keys.PK, "#sk": keys.SK},
            "ExpressionAttributeValues": {":pk": {"S": audit_pk(run_id)}, ":a": {"S": AUDIT_PREFIX}},
            "Limit": limit,
        }
        if cursor:
            query["ExclusiveStartKey"] = audit_start_key(cursor, run_id)
        resp = self._ddb.query(**query)
        entries = [
            AuditEntry(
                int(i["at_ms"]["N"]), i["kind"]["S"], i["summary"]["S"], _audit_detail(i["detail"]["S"])
            )
            for i in resp["Items"]
        ]
        return Page(entries, encode_cursor(resp.get("LastEvaluatedKey")))

    def iter_due(self, now_ms: int, shard: int) -> Iterator[DueItem]:
        """What is due in one shard, oldest first, fetched a page at a time as it is consumed."""
        query: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": keys.GSI_DUE,
            "KeyConditionExpression": "#s = :s AND #d <= :now",
            "ExpressionAttributeNames": {"#s": keys.GSI_DUE_PK, "#d": keys.GSI_DUE_SK},
            "ExpressionAttributeValues": {":s": {"S": str(shard)}, ":now": {"N": str(now_ms)}},
            "ProjectionExpression": "pk, sk, #d",
            "Limit": DUE_PAGE,
        }
        while True:
            resp = self._ddb.query(**query)
            for i in resp["Items"]:
                pk, sk = i[keys.PK]["S"], i[keys.SK]["S"]
                if not pk.startswith("RUN#"):
                    continue
                run_id = pk[len("RUN#") :]
                due = int(i[keys.GSI_DUE_SK]["N"])
                if sk == RUN_SK:
                    yield DueItem("run", run_id, due)
                elif sk.startswith(OUTBOX_PREFIX):
                    yield DueItem("outbox", run_id, due, sk[len(OUTBOX_PREFIX) :])
            if not resp.get("LastEvaluatedKey"):
                return
            query["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    def runs_waiting_for(self, reason: str, instance_type: str) -> list[str]:
        """Runs in RETRY_WAIT for `reason` on `instance_type`, in the order they get capacity:
        highest policy `priority` first, then oldest (run ids are time-ordered ULIDs)."""
        found: list[tuple[int, str]] = []
        paginator = self._ddb.get_paginator("query")
        for page in paginator.paginate(
            TableName=self._table,
            IndexName=keys.GSI_STATUS,
            KeyConditionExpression="#p = :p",
            FilterExpression="wait_reason = :r AND (wait_instance_type = :t OR attribute_not_exists(wait_instance_type))",
            ExpressionAttributeNames={"#p": keys.GSI_STATUS_PK, "#id": "run_id", "#pr": "priority"},
            ExpressionAttributeValues={
                ":p": {"S": RunStatus.RETRY_WAIT.value},
                ":r": {"S": reason},
                ":t": {"S": instance_type},
            },
            ProjectionExpression="#id, #pr",
        ):
            found += [(-int(i.get("priority", {}).get("N", "0")), i["run_id"]["S"]) for i in page["Items"]]
        return [run_id for _, run_id in sorted(found)]

    # -- items ------------------------------------------------------------------------------
    def _run_item(self, run: Run, due_ms: int | None) -> dict[str, Any]:
        item: dict[str, Any] = {
            keys.PK: {"S": run_pk(run.run_id)},
            keys.SK: {"S": RUN_SK},
            keys.GSI_RUNS_PK: {"S": "RUN"},
            keys.GSI_RUNS_SK: {"S": run.run_id},
            keys.GSI_STATUS_PK: {"S": run.status.value},
            "version": {"N": str(run.version)},
            "priority": {"N": str(run.policy.priority)},
            "data": {"S": compact_json(run_to_dict(run))},
        }
        if run.wait_reason:
            item["wait_reason"] = {"S": run.wait_reason}
        if run.wait_instance_type:
            item["wait_instance_type"] = {"S": run.wait_instance_type}
        if due_ms is not None:
            item[keys.GSI_DUE_PK] = {"S": _shard(run.run_id)}
            item[keys.GSI_DUE_SK] = {"N": str(due_ms)}
        return item

    def _attempt_item(self, run_id: str, att: Attempt) -> dict[str, Any]:
        return {
            keys.PK: {"S": run_pk(run_id)},
            keys.SK: {"S": f"{ATTEMPT_PREFIX}{att.number:06d}"},
            "data": {"S": compact_json(attempt_to_dict(att))},
        }

    def _audit_puts(
        self, run_id: str, version: int, entries: Sequence[AuditEntry], salt: bool = False
    ) -> list[dict[str, Any]]:
        if not salt and len(entries) > MAX_AUDIT_PER_WRITE:
            raise WriteTooLarge(
                f"write of run {run_id}: {len(entries)} audit entries; one write keys at most {MAX_AUDIT_PER_WRITE}"
            )
        puts = []
        for i, e in enumerate(entries):
            # Entries of a versioned save sort first ("A"); entries appended later under the same
            # version (ignored events, action results) follow ("B") in per-writer sequence, with
            # random bytes so writers in different containers never overwrite each other.
            tail = f"B{next(self._seq):08d}{os.urandom(3).hex()}#{i:03d}" if salt else f"A{i:03d}"
            sk = f"{AUDIT_PREFIX}{e.at_ms:013d}#{version:06d}#{tail}"
            puts.append(
                {
                    "Put": {
                        "TableName": self._table,
                        "ConditionExpression": "attribute_not_exists(pk)",
                        "Item": {
                            keys.PK: {"S": audit_pk(run_id)},
                            keys.SK: {"S": sk},
                            "at_ms": {"N": str(e.at_ms)},
                            "kind": {"S": e.kind},
                            "summary": {"S": clip_text(e.summary, AUDIT_SUMMARY_BYTES)},
                            "detail": {"S": bounded_json(dict(e.detail), AUDIT_DETAIL_BYTES)},
                        },
                    }
                }
            )
        return puts


def _audit_detail(text: str) -> Mapping[str, Any]:
    """An audit item's detail; items written before details were bounded by bytes may hold
    JSON cut mid-string: their raw text is returned under `detail_text` so the page stays
    readable."""
    try:
        value = json.loads(text)
    except ValueError:
        return {"detail_text": text}
    return value if isinstance(value, dict) else {"detail_text": text}
