"""DynamoDB run store: runs, attempts and the audit trail in one table.

Item shapes (the only place they exist; key names come from `sagewarden.keys`):
  run      pk=RUN#<id>  sk=RUN                 data (JSON), version, status, run_id, entity=RUN,
                                               due_shard/due_at while the run is not terminal
  attempt  pk=RUN#<id>  sk=ATTEMPT#<000001>    data (JSON)
  audit    pk=AUDIT#<id> sk=AUDIT#<ms>#<ver>#<..> at_ms, kind, summary, detail (JSON)  append-only
           (its own partition: reading a run never touches its thousands of audit items)
  idempotency pk=IDEMP#<sha256(owner, key)> sk=IDEMP  run_id, body_hash
Every write is conditional: a run item on its version, attempts/audit on not existing yet
(attempts are rewritten only under the same transaction as the run's version check).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import itertools
import json
import os
import re
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from botocore.exceptions import ClientError

from sagewarden import keys
from sagewarden.domain.checkpoints import Checkpoint
from sagewarden.domain.models import Attempt, LaunchState, Run, RunStatus
from sagewarden.domain.policy import RunPolicy
from sagewarden.ports import AuditEntry, ConcurrentUpdate, IdempotentReplay, Page

RUN_SK = "RUN"
ATTEMPT_PREFIX = "ATTEMPT#"
AUDIT_PREFIX = "AUDIT#"


def run_pk(run_id: str) -> str:
    return f"RUN#{run_id}"


def audit_pk(run_id: str) -> str:
    return f"AUDIT#{run_id}"


def idempotency_pk(owner: str, key: str) -> str:
    return "IDEMP#" + hashlib.sha256(f"{owner}\n{key}".encode()).hexdigest()


# --- codec -----------------------------------------------------------------------------------


def _ckpt_to(c: Checkpoint | None) -> dict[str, Any] | None:
    return (
        None if c is None else {"uri": c.uri, "step": c.step, "layout": c.layout.value, "at": c.written_at_ms}
    )


def _ckpt_from(d: Mapping[str, Any] | None) -> Checkpoint | None:
    return None if not d else Checkpoint(d["uri"], int(d["step"]), d["layout"], d.get("at"))


def attempt_to_dict(a: Attempt) -> dict[str, Any]:
    out = dataclasses.asdict(a)
    out["launch"] = a.launch.value
    out["resume_from"] = _ckpt_to(a.resume_from)
    out["checkpoint_at_end"] = _ckpt_to(a.checkpoint_at_end)
    out["evidence"] = list(a.evidence)
    out["hang_signals"] = list(a.hang_signals)
    return out


def attempt_from_dict(d: Mapping[str, Any]) -> Attempt:
    fields = {f.name for f in dataclasses.fields(Attempt)}
    data = {k: v for k, v in d.items() if k in fields}
    data["launch"] = LaunchState(d["launch"])
    data["resume_from"] = _ckpt_from(d.get("resume_from"))
    data["checkpoint_at_end"] = _ckpt_from(d.get("checkpoint_at_end"))
    data["evidence"] = tuple(d.get("evidence", ()))
    data["hang_signals"] = tuple(d.get("hang_signals", ()))
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
    return out


def run_from_dict(d: Mapping[str, Any], attempts: Sequence[Attempt] = ()) -> Run:
    fields = {f.name for f in dataclasses.fields(Run)}
    data = {k: v for k, v in d.items() if k in fields}
    data["status"] = RunStatus(d["status"])
    data["policy"] = RunPolicy.from_dict(d.get("policy", {}))
    data["last_checkpoint"] = _ckpt_from(d.get("last_checkpoint"))
    data["attempts"] = tuple(sorted(attempts, key=lambda a: a.number))
    return Run(**data)


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
        try:
            self._ddb.transact_write_items(TransactItems=items)
        except ClientError as exc:
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

    def save(self, run: Run, previous: Run, audit: Sequence[AuditEntry], due_ms: int | None) -> Run:
        saved = dataclasses.replace(run, version=previous.version + 1)
        before = {a.number: a for a in previous.attempts}
        items: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": self._run_item(saved, due_ms),
                    "ConditionExpression": "#v = :v",
                    "ExpressionAttributeNames": {"#v": "version"},
                    "ExpressionAttributeValues": {":v": {"N": str(previous.version)}},
                }
            }
        ]
        for att in run.attempts:
            if before.get(att.number) != att:
                items.append({"Put": {"TableName": self._table, "Item": self._attempt_item(run.run_id, att)}})
        items += self._audit_puts(run.run_id, saved.version, audit)
        try:
            self._ddb.transact_write_items(TransactItems=items[:100])
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "TransactionCanceledException":
                raise ConcurrentUpdate(run.run_id) from exc
            raise
        if len(items) > 100:  # pragma: no cover - a decision writes a handful of items
            self.append_audit(run.run_id, saved.version, [])
        return saved

    def append_audit(self, run_id: str, version: int, entries: Sequence[AuditEntry]) -> None:
        puts = self._audit_puts(run_id, version, entries, salt=True)
        for i in range(0, len(puts), 25):
            self._ddb.batch_write_item(
                RequestItems={
                    self._table: [{"PutRequest": {"Item": p["Put"]["Item"]}} for p in puts[i : i + 25]]
                }
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
        query: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :a)",
            "ExpressionAttributeNames": {"#pk": keys.PK, "#sk": keys.SK},
            "ExpressionAttributeValues": {":pk": {"S": run_pk(run_id)}, ":a": {"S": ATTEMPT_PREFIX}},
            "ScanIndexForward": False,
            "ConsistentRead": True,
        }
        attempts: list[Attempt] = []
        if all_attempts:
            for page in self._ddb.get_paginator("query").paginate(**query):
                attempts += [attempt_from_dict(json.loads(i["data"]["S"])) for i in page["Items"]]
        else:
            page = self._ddb.query(**query, Limit=1)
            attempts = [attempt_from_dict(json.loads(i["data"]["S"])) for i in page["Items"]]
        run = run_from_dict(json.loads(item["data"]["S"]), attempts)
        return dataclasses.replace(run, version=int(item["version"]["N"]))

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
            AuditEntry(int(i["at_ms"]["N"]), i["kind"]["S"], i["summary"]["S"], json.loads(i["detail"]["S"]))
            for i in resp["Items"]
        ]
        return Page(entries, encode_cursor(resp.get("LastEvaluatedKey")))

    def due_run_ids(self, now_ms: int, limit: int) -> list[str]:
        out: list[str] = []
        for shard in range(keys.DUE_SHARDS):
            paginator = self._ddb.get_paginator("query")
            for page in paginator.paginate(
                TableName=self._table,
                IndexName=keys.GSI_DUE,
                KeyConditionExpression="#s = :s AND #d <= :now",
                ExpressionAttributeNames={"#s": keys.GSI_DUE_PK, "#d": keys.GSI_DUE_SK},
                ExpressionAttributeValues={":s": {"S": str(shard)}, ":now": {"N": str(now_ms)}},
                ProjectionExpression="run_id",
            ):
                out += [i["run_id"]["S"] for i in page["Items"]]
                if len(out) >= limit:
                    return out[:limit]
        return out

    def runs_waiting_for(self, reason: str, instance_type: str) -> list[str]:
        """Runs in RETRY_WAIT for `reason` on `instance_type`, oldest first (they get capacity first)."""
        resp_ids: list[str] = []
        paginator = self._ddb.get_paginator("query")
        for page in paginator.paginate(
            TableName=self._table,
            IndexName=keys.GSI_STATUS,
            KeyConditionExpression="#p = :p",
            FilterExpression="wait_reason = :r AND (wait_instance_type = :t OR attribute_not_exists(wait_instance_type))",
            ExpressionAttributeNames={"#p": keys.GSI_STATUS_PK},
            ExpressionAttributeValues={
                ":p": {"S": RunStatus.RETRY_WAIT.value},
                ":r": {"S": reason},
                ":t": {"S": instance_type},
            },
            ProjectionExpression="run_id",
        ):
            resp_ids += [i["run_id"]["S"] for i in page["Items"]]
        return resp_ids

    # -- items ------------------------------------------------------------------------------
    def _run_item(self, run: Run, due_ms: int | None) -> dict[str, Any]:
        item: dict[str, Any] = {
            keys.PK: {"S": run_pk(run.run_id)},
            keys.SK: {"S": RUN_SK},
            keys.GSI_RUNS_PK: {"S": "RUN"},
            keys.GSI_RUNS_SK: {"S": run.run_id},
            keys.GSI_STATUS_PK: {"S": run.status.value},
            "version": {"N": str(run.version)},
            "data": {"S": _dumps(run_to_dict(run))},
        }
        if run.wait_reason:
            item["wait_reason"] = {"S": run.wait_reason}
        if run.wait_instance_type:
            item["wait_instance_type"] = {"S": run.wait_instance_type}
        if due_ms is not None and not run.status.terminal:
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
                            "summary": {"S": e.summary[:2000]},
                            "detail": {"S": _dumps(dict(e.detail))[:50_000]},
                        },
                    }
                }
            )
        return puts


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
