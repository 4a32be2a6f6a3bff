"""DynamoDB run store: runs, attempts, the audit trail, owed alerts and the sweep lease in one table.

Item shapes (the only place they exist; key names come from `sagewarden.keys`):
  run      pk=RUN#<id>  sk=RUN                 data (JSON, with the current attempt embedded), version,
                                               status, run_id, entity=RUN, write_token, priority,
                                               due_shard/due_at while the run needs the sweep
  attempt  pk=RUN#<id>  sk=ATTEMPT#<000001>    data (JSON)  every attempt, for GET /runs/{id}
  outbox   pk=RUN#<id>  sk=OUTBOX#<dedupe id>  data (JSON: the alert), tries, due_shard/due_at while owed
  audit    pk=AUDIT#<id> sk=AUDIT#<ms>#<ver>#<..> at_ms, kind, summary, detail (JSON)  append-only
           (its own partition: reading a run never touches its thousands of audit items)
  idempotency pk=IDEMP#<sha256(owner, key)> sk=IDEMP  run_id, body_hash
  lease    pk=LEASE#<name> sk=LEASE            owner, expires_ms (and expires_at for TTL)
Every write is conditional: a run item on its version, attempts/audit/outbox on not existing yet
(attempts are rewritten only under the same transaction as the run's version check).

Reading a run is one GetItem (the current attempt rides in the run item), so a duplicate or
stale event costs one read. A run write carries a ClientRequestToken derived from its content
and records it as `write_token`: a retried write that already committed (its response lost)
is recognised as ours instead of being read as a concurrent update.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import itertools
import json
import os
import random
import re
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sagewarden import keys
from sagewarden.domain.actions import Notify
from sagewarden.domain.bounded import bounded_json, clip_text
from sagewarden.domain.checkpoints import Checkpoint
from sagewarden.domain.models import Attempt, LaunchState, PoolWatch, Run, RunStatus
from sagewarden.domain.policy import RunPolicy
from sagewarden.ports import AuditEntry, ConcurrentUpdate, DueItem, IdempotentReplay, OutboxMessage, Page

RUN_SK = "RUN"
ATTEMPT_PREFIX = "ATTEMPT#"
AUDIT_PREFIX = "AUDIT#"
OUTBOX_PREFIX = "OUTBOX#"
LEASE_SK = "LEASE"
DUE_PAGE = 100
AUDIT_SUMMARY_BYTES = 2048  # audit texts are bounded by bytes (an item is at most 400 KB)
AUDIT_DETAIL_BYTES = 64 * 1024  # valid JSON whatever is cut (bounded_json)
AUDIT_WRITE_ATTEMPTS = 8  # BatchWriteItem tries for one batch before the write fails loudly
_sleep = time.sleep  # the backoff between tries (tests replace it)


def run_pk(run_id: str) -> str:
    return f"RUN#{run_id}"


def audit_pk(run_id: str) -> str:
    return f"AUDIT#{run_id}"


def idempotency_pk(owner: str, key: str) -> str:
    return "IDEMP#" + hashlib.sha256(f"{owner}\n{key}".encode()).hexdigest()


# --- codec -----------------------------------------------------------------------------------


def _ckpt_to(c: Checkpoint | None) -> dict[str, Any] | None:
    if c is None:
        return None
    out = {"uri": c.uri, "step": c.step, "layout": c.layout.value, "at": c.written_at_ms}
    if c.write_seconds is not None:
        out["write_s"] = c.write_seconds
    if c.previous_step is not None:
        out["prev"] = c.previous_step
    return out


def _ckpt_from(d: Mapping[str, Any] | None) -> Checkpoint | None:
    if not d:
        return None
    prev = d.get("prev")
    return Checkpoint(
        d["uri"],
        int(d["step"]),
        d["layout"],
        d.get("at"),
        d.get("write_s"),
        None if prev is None else int(prev),
    )


def attempt_to_dict(a: Attempt) -> dict[str, Any]:
    out = dataclasses.asdict(a)
    out["launch"] = a.launch.value
    out["resume_from"] = _ckpt_to(a.resume_from)
    out["checkpoint_at_end"] = _ckpt_to(a.checkpoint_at_end)
    out["evidence"] = list(a.evidence)
    out["hang_signals"] = list(a.hang_signals)
    out["suspect_hosts"] = list(a.suspect_hosts)
    return out


def attempt_from_dict(d: Mapping[str, Any]) -> Attempt:
    fields = {f.name for f in dataclasses.fields(Attempt)}
    data = {k: v for k, v in d.items() if k in fields}
    data["launch"] = LaunchState(d["launch"])
    data["resume_from"] = _ckpt_from(d.get("resume_from"))
    data["checkpoint_at_end"] = _ckpt_from(d.get("checkpoint_at_end"))
    data["evidence"] = tuple(d.get("evidence", ()))
    data["hang_signals"] = tuple(d.get("hang_signals", ()))
    data["suspect_hosts"] = tuple(d.get("suspect_hosts", ()))
    return Attempt(**data)


def run_to_dict(r: Run) -> dict[str, Any]:
    out = {
        f.name: getattr(r, f.name) for f in dataclasses.fields(Run) if f.name not in ("attempts", "policy")
    }
    out["status"] = r.status.value
    out["request"] = dict(r.request)
    out["policy"] = r.policy.to_dict()
    out["restarts_by_class"] = dict(r.restarts_by_class)
    out["last_checkpoint"] = _ckpt_to(r.last_checkpoint)
    out["skipped_choices"] = list(r.skipped_choices)
    out["strays"] = [list(s) for s in r.strays]
    out["warm_pools"] = [dataclasses.asdict(w) for w in r.warm_pools]
    out["checkpoint_history"] = [list(h) for h in r.checkpoint_history]
    out["current"] = attempt_to_dict(r.current) if r.current is not None else None
    return out


def run_from_dict(d: Mapping[str, Any], attempts: Sequence[Attempt] | None = None) -> Run:
    """The run; its attempts are `attempts` when given, else the current one embedded in it."""
    fields = {f.name for f in dataclasses.fields(Run)}
    data = {k: v for k, v in d.items() if k in fields}
    data["status"] = RunStatus(d["status"])
    data["policy"] = RunPolicy.from_stored(d.get("policy", {}))
    data["last_checkpoint"] = _ckpt_from(d.get("last_checkpoint"))
    data["skipped_choices"] = tuple(d.get("skipped_choices", ()))
    data["strays"] = tuple((str(job), int(at)) for job, at in d.get("strays", ()))
    pool_fields = {f.name for f in dataclasses.fields(PoolWatch)}
    data["warm_pools"] = tuple(
        PoolWatch(**{k: v for k, v in w.items() if k in pool_fields}) for w in d.get("warm_pools", ())
    )
    data["checkpoint_history"] = tuple(
        # (step, written at, write seconds or -1, previous step or -1); older items lack the last
        (int(h[0]), int(h[1]), float(h[2]), int(h[3]) if len(h) > 3 else -1)
        for h in d.get("checkpoint_history", ())
    )
    if attempts is None:
        current = d.get("current")
        attempts = [attempt_from_dict(current)] if current else []
    data["attempts"] = tuple(sorted(attempts, key=lambda a: a.number))
    return Run(**data)


def notify_to_dict(n: Notify) -> dict[str, Any]:
    return {
        "severity": n.severity,
        "event": n.event,
        "subject": n.subject,
        "body": n.body,
        "attributes": dict(n.attributes),
    }


def notify_from_dict(d: Mapping[str, Any]) -> Notify:
    return Notify(d["severity"], d["event"], d["subject"], d["body"], dict(d.get("attributes", {})))


def write_token(items: Sequence[Mapping[str, Any]]) -> str:
    """A ClientRequestToken (<= 36 chars) for one write: the SDK's retries of it carry the same
    token (DynamoDB then answers success instead of failing its own condition), while another
    invocation writing identical content gets a different one (random salt), so only the
    writer that committed reads the commit as its own."""
    return hashlib.sha256(_dumps(list(items)).encode() + os.urandom(16)).hexdigest()[:36]


def _dumps(value: Any) -> str:
    # UTF-8 as is: escaping non-ASCII text as \uXXXX would make it up to 3x larger (6 bytes for a
    # 2-byte character) and push items past DynamoDB's 400 KB limit.
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str, ensure_ascii=False)


# --- store -----------------------------------------------------------------------------------


class DynamoDbRunStore:
    def __init__(self, client: Any, table_name: str) -> None:
        self._ddb = client
        self._table = table_name
        self._seq = itertools.count()

    # -- writes -----------------------------------------------------------------------------
    def create(self, run: Run, audit: Sequence[AuditEntry], body_hash: str | None = None) -> Run:
        items: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": self._run_item(run, due_ms=run.created_ms),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            }
        ]
        if run.idempotency_key:
            items.append(
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
        items += self._audit_puts(run.run_id, run.version, audit)
        token = write_token(items)
        items[0]["Put"]["Item"]["write_token"] = {"S": token}
        try:
            self._ddb.transact_write_items(TransactItems=items, ClientRequestToken=token)
        except (ClientError, BotoCoreError) as exc:
            if self._committed(run.run_id, run.version, token):
                return run  # an earlier try committed; its answer was lost
            if not isinstance(exc, ClientError):
                raise
            if exc.response["Error"]["Code"] != "TransactionCanceledException" or not run.idempotency_key:
                raise
            existing = self._ddb.get_item(
                TableName=self._table,
                Key={keys.PK: {"S": idempotency_pk(run.owner, run.idempotency_key)}, keys.SK: {"S": "IDEMP"}},
                ConsistentRead=True,
            ).get("Item")
            if not existing:
                raise
            raise IdempotentReplay(
                existing["run_id"]["S"], existing.get("body_hash", {}).get("S", "") == (body_hash or "")
            ) from exc
        return run

    def save(
        self,
        run: Run,
        previous: Run,
        audit: Sequence[AuditEntry],
        due_ms: int | None,
        outbox: Sequence[OutboxMessage] = (),
    ) -> Run:
        saved = dataclasses.replace(run, version=previous.version + 1)
        before = {a.number: a for a in previous.attempts}
        run_put: dict[str, Any] = {
            "TableName": self._table,
            "Item": self._run_item(saved, due_ms),
            "ConditionExpression": "#v = :v",
            "ExpressionAttributeNames": {"#v": "version"},
            "ExpressionAttributeValues": {":v": {"N": str(previous.version)}},
        }
        items: list[dict[str, Any]] = [{"Put": run_put}]
        for att in run.attempts:
            if before.get(att.number) != att:
                items.append({"Put": {"TableName": self._table, "Item": self._attempt_item(run.run_id, att)}})
        items += [{"Put": self._outbox_put(m)} for m in outbox]
        items += self._audit_puts(run.run_id, saved.version, audit)
        token = write_token(items)
        run_put["Item"]["write_token"] = {"S": token}
        try:
            self._ddb.transact_write_items(TransactItems=items[:100], ClientRequestToken=token)
        except ClientError as exc:
            code = exc.response["Error"]["Code"]
            if code not in ("TransactionCanceledException", "IdempotentParameterMismatchException"):
                raise
            if self._committed(run.run_id, saved.version, token):
                return saved  # our own write, committed by an earlier try whose answer was lost
            raise ConcurrentUpdate(run.run_id) from exc
        except BotoCoreError as exc:  # timeout / connection reset: did it commit?
            if self._committed(run.run_id, saved.version, token):
                return saved
            raise ConcurrentUpdate(run.run_id) from exc
        if len(items) > 100:  # pragma: no cover - a decision writes a handful of items
            self.append_audit(run.run_id, saved.version, [])
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
        """Write audit entries in batches of 25. Items DynamoDB leaves unprocessed (throttling,
        partition limits) are sent again with exponential backoff and jitter; after
        AUDIT_WRITE_ATTEMPTS tries the write fails loudly (RuntimeError): an entry is never
        dropped silently."""
        puts = self._audit_puts(run_id, version, entries, salt=True)
        for i in range(0, len(puts), 25):
            pending: Mapping[str, Any] = {
                self._table: [{"PutRequest": {"Item": p["Put"]["Item"]}} for p in puts[i : i + 25]]
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

    # -- owed alerts (the outbox) ---------------------------------------------------------------
    def _outbox_put(self, m: OutboxMessage) -> dict[str, Any]:
        return {
            "TableName": self._table,
            "ConditionExpression": "attribute_not_exists(pk)",
            "Item": {
                keys.PK: {"S": run_pk(m.run_id)},
                keys.SK: {"S": f"{OUTBOX_PREFIX}{m.dedupe_id}"},
                "run_id": {"S": m.run_id},
                "created_ms": {"N": str(m.created_ms)},
                "tries": {"N": str(m.tries)},
                "data": {"S": _dumps(notify_to_dict(m.notify))},
                keys.GSI_DUE_PK: {"S": _shard(m.run_id)},
                keys.GSI_DUE_SK: {"N": str(m.due_ms or m.created_ms)},
            },
        }

    def get_outbox(self, run_id: str, dedupe_id: str) -> OutboxMessage | None:
        item = self._ddb.get_item(
            TableName=self._table,
            Key={keys.PK: {"S": run_pk(run_id)}, keys.SK: {"S": f"{OUTBOX_PREFIX}{dedupe_id}"}},
            ConsistentRead=True,
        ).get("Item")
        if not item:
            return None
        return OutboxMessage(
            run_id=run_id,
            dedupe_id=dedupe_id,
            created_ms=int(item["created_ms"]["N"]),
            notify=notify_from_dict(json.loads(item["data"]["S"])),
            due_ms=int(item.get(keys.GSI_DUE_SK, {}).get("N", "0")),
            tries=int(item.get("tries", {}).get("N", "0")),
            last_error=item.get("last_error", {}).get("S"),
        )

    def outbox_done(self, run_id: str, dedupe_id: str, at_ms: int) -> None:
        self._ddb.delete_item(
            TableName=self._table,
            Key={keys.PK: {"S": run_pk(run_id)}, keys.SK: {"S": f"{OUTBOX_PREFIX}{dedupe_id}"}},
        )

    def outbox_retry(self, run_id: str, dedupe_id: str, due_ms: int, tries: int, error: str) -> None:
        try:
            self._ddb.update_item(
                TableName=self._table,
                Key={keys.PK: {"S": run_pk(run_id)}, keys.SK: {"S": f"{OUTBOX_PREFIX}{dedupe_id}"}},
                UpdateExpression="SET #d = :d, #t = :t, #e = :e",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeNames={"#d": keys.GSI_DUE_SK, "#t": "tries", "#e": "last_error"},
                ExpressionAttributeValues={
                    ":d": {"N": str(due_ms)},
                    ":t": {"N": str(tries)},
                    ":e": {"S": error[:1000]},
                },
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise  # already published by someone else

    # -- the sweep's lease ------------------------------------------------------------------------
    def acquire_lease(self, name: str, owner: str, now_ms: int, ttl_ms: int) -> bool:
        try:
            self._ddb.put_item(
                TableName=self._table,
                Item={
                    keys.PK: {"S": f"{keys.LEASE_PK_PREFIX}{name}"},
                    keys.SK: {"S": LEASE_SK},
                    "owner": {"S": owner},
                    "expires_ms": {"N": str(now_ms + ttl_ms)},
                    "expires_at": {"N": str((now_ms + ttl_ms) // 1000 + 3600)},
                },
                ConditionExpression="attribute_not_exists(pk) OR expires_ms < :now OR #o = :me",
                ExpressionAttributeNames={"#o": "owner"},
                ExpressionAttributeValues={":now": {"N": str(now_ms)}, ":me": {"S": owner}},
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def release_lease(self, name: str, owner: str) -> None:
        try:
            self._ddb.delete_item(
                TableName=self._table,
                Key={keys.PK: {"S": f"{keys.LEASE_PK_PREFIX}{name}"}, keys.SK: {"S": LEASE_SK}},
                ConditionExpression="#o = :me",
                ExpressionAttributeNames={"#o": "owner"},
                ExpressionAttributeValues={":me": {"S": owner}},
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise

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
            "data": {"S": _dumps(run_to_dict(run))},
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
            "data": {"S": _dumps(attempt_to_dict(att))},
        }

    def _audit_puts(
        self, run_id: str, version: int, entries: Sequence[AuditEntry], salt: bool = False
    ) -> list[dict[str, Any]]:
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


def _shard(run_id: str) -> str:
    return str(zlib.crc32(run_id.encode()) % keys.DUE_SHARDS)


MAX_CURSOR_CHARS = 1024  # a real cursor is a few hundred characters


def encode_cursor(value: Any) -> str | None:
    """An opaque pagination cursor (base64 JSON); None when there is nothing more."""
    return None if not value else base64.urlsafe_b64encode(_dumps(value).encode()).decode()


def _not_json_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def decode_cursor(cursor: str) -> Any:
    """The JSON value inside a cursor; ValueError for anything that is not one of our encodings."""
    if not isinstance(cursor, str) or not 0 < len(cursor) <= MAX_CURSOR_CHARS:
        raise ValueError("invalid cursor")
    try:
        raw = base64.urlsafe_b64decode(cursor.encode("ascii"))
        return json.loads(raw.decode("utf-8"), parse_constant=_not_json_constant)
    except (ValueError, RecursionError) as exc:  # binascii.Error and UnicodeError are ValueErrors
        raise ValueError("invalid cursor") from exc


def _string_key(cursor: str, names: Sequence[str]) -> dict[str, str]:
    """The cursor's key as {attribute: string value}: exactly `names`, each {"S": <non-empty string>}."""
    value = decode_cursor(cursor)
    if not isinstance(value, dict) or set(value) != set(names):
        raise ValueError("invalid cursor")
    out: dict[str, str] = {}
    for name in names:
        attr = value[name]
        if (
            not isinstance(attr, dict)
            or set(attr) != {"S"}
            or not isinstance(attr["S"], str)
            or not attr["S"]
        ):
            raise ValueError("invalid cursor")
        out[name] = attr["S"]
    return out


def runs_start_key(cursor: str, pk_name: str, pk_value: str) -> dict[str, Any]:
    """ExclusiveStartKey for a listing on the runs or by_status index, from a cursor it produced.

    The key must be a run item's: pk RUN#<id>, sk RUN, the index's sort key the same run id, and
    the index's partition key the partition being listed (a cursor of another listing is refused).
    """
    key = _string_key(cursor, [keys.PK, keys.SK, pk_name, keys.GSI_RUNS_SK])
    run_id = key[keys.GSI_RUNS_SK]
    if not (
        _RUN_ID.fullmatch(run_id)
        and key[keys.PK] == run_pk(run_id)
        and key[keys.SK] == RUN_SK
        and key[pk_name] == pk_value
    ):
        raise ValueError("invalid cursor: not a cursor of this listing")
    return {name: {"S": value} for name, value in key.items()}


def audit_start_key(cursor: str, run_id: str) -> dict[str, Any]:
    """ExclusiveStartKey for a run's audit trail; a cursor of another run's trail is refused."""
    key = _string_key(cursor, [keys.PK, keys.SK])
    if key[keys.PK] != audit_pk(run_id):
        raise ValueError("invalid cursor: not a cursor of this run's events")
    if not key[keys.SK].startswith(AUDIT_PREFIX) or len(key[keys.SK]) > 256:
        raise ValueError("invalid cursor")
    return {name: {"S": value} for name, value in key.items()}


_RUN_ID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")
