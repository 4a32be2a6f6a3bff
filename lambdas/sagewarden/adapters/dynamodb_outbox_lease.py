"""The DynamoDB run store's owed alerts (the outbox), the sweep's lease and the heartbeat-pipeline state.

Item shapes of those three and their reads and writes; the deployment's own alerts are owed under
the run id `deployment`. Why: docs/reliability.md (*Effects through an outbox*, *Owed alerts of the deployment*)."""

from __future__ import annotations

import dataclasses
import json
import zlib
from collections.abc import Sequence
from typing import Any

from botocore.exceptions import ClientError

from sagewarden import keys
from sagewarden.adapters.dynamodb_cursors import run_pk
from sagewarden.adapters.run_codec import compact_json, notify_from_dict, notify_to_dict
from sagewarden.domain.hangs.heartbeat import PipelineHealth
from sagewarden.ports.aws import ConcurrentUpdate, OutboxMessage

OUTBOX_PREFIX = "OUTBOX#"
LEASE_SK = "LEASE"
PIPELINE_PK = f"{keys.DEPLOYMENT_PK_PREFIX}heartbeat"
STATE_SK = "STATE"


def pipeline_to_dict(h: PipelineHealth) -> dict[str, Any]:
    return {"broken_since_ms": h.broken_since_ms, "jobs": list(h.jobs), "changed_ms": h.changed_ms}


def pipeline_from_dict(d: dict[str, Any], version: int) -> PipelineHealth:
    since = d.get("broken_since_ms")
    return PipelineHealth(
        None if since is None else int(since),
        tuple(str(j) for j in d.get("jobs", ())),
        int(d.get("changed_ms", 0)),
        version,
    )


def due_shard(run_id: str) -> str:
    """The due index's partition of a run's items (keys.DUE_SHARDS of them)."""
    return str(zlib.crc32(run_id.encode()) % keys.DUE_SHARDS)


class OutboxAndLease:
    """Part of DynamoDbRunStore (which sets `_ddb`, the client, and `_table`)."""

    _ddb: Any
    _table: str

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
                "data": {"S": compact_json(notify_to_dict(m.notify))},
                keys.GSI_DUE_PK: {"S": due_shard(m.run_id)},
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

    # -- the deployment's heartbeat pipeline ------------------------------------------------------
    def get_pipeline(self) -> PipelineHealth:
        """The heartbeat pipeline's health as last judged; delivering at version 0 when never written."""
        item = self._ddb.get_item(
            TableName=self._table,
            Key={keys.PK: {"S": PIPELINE_PK}, keys.SK: {"S": STATE_SK}},
            ConsistentRead=True,
        ).get("Item")
        if not item:
            return PipelineHealth()
        return pipeline_from_dict(json.loads(item["data"]["S"]), int(item["version"]["N"]))

    def save_pipeline(
        self, health: PipelineHealth, previous: PipelineHealth, outbox: Sequence[OutboxMessage] = ()
    ) -> PipelineHealth:
        """Write `health` at `previous.version + 1` with the alerts it owes, in one transaction
        conditional on the stored version being `previous.version` (not there at 0): ConcurrentUpdate
        when another sweep got there first (nothing written)."""
        saved = dataclasses.replace(health, version=previous.version + 1)
        put: dict[str, Any] = {
            "TableName": self._table,
            "Item": {
                keys.PK: {"S": PIPELINE_PK},
                keys.SK: {"S": STATE_SK},
                "version": {"N": str(saved.version)},
                "data": {"S": compact_json(pipeline_to_dict(saved))},
            },
        }
        if previous.version == 0:
            put["ConditionExpression"] = "attribute_not_exists(pk)"
        else:
            put["ConditionExpression"] = "#v = :v"
            put["ExpressionAttributeNames"] = {"#v": "version"}
            put["ExpressionAttributeValues"] = {":v": {"N": str(previous.version)}}
        items = [{"Put": put}, *({"Put": self._outbox_put(m)} for m in outbox)]
        try:
            self._ddb.transact_write_items(TransactItems=items)
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "TransactionCanceledException":
                raise ConcurrentUpdate(PIPELINE_PK) from exc
            raise
        return saved

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
