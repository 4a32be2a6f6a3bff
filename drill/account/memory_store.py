"""An in-memory RunStore with the DynamoDB store's semantics (same contract tests), for long drills.

Stores the shared codec's form and plans writes with the DynamoDB store's planner.
Why: docs/drill.md (*The account*: shortcuts for scale)."""

from __future__ import annotations

import bisect
import dataclasses
import json
import re
import zlib
from collections.abc import Iterator, Sequence
from typing import Any

from sagewarden import keys
from sagewarden.adapters.dynamodb_cursors import decode_cursor, encode_cursor
from sagewarden.adapters.dynamodb_run_store import (
    AUDIT_DETAIL_BYTES,
    AUDIT_SUMMARY_BYTES,
    DynamoDbRunStore,
    idempotency_pk,
)
from sagewarden.adapters.run_codec import (
    attempt_from_dict,
    notify_from_dict,
    notify_to_dict,
    run_from_dict,
    run_to_dict,
)
from sagewarden.domain.hangs.heartbeat import PipelineHealth
from sagewarden.domain.resuming import resumable_until
from sagewarden.domain.vocabulary import claims as claim_rules
from sagewarden.domain.vocabulary.bounded import bounded_json, clip_text
from sagewarden.domain.vocabulary.models import Run, RunStatus
from sagewarden.domain.vocabulary.ownership import principal
from sagewarden.ports.aws import (
    AuditEntry,
    ClaimConflict,
    ConcurrentUpdate,
    DueItem,
    IdempotentReplay,
    OutboxMessage,
    Page,
)


def _shard(run_id: str) -> int:
    return zlib.crc32(run_id.encode()) % keys.DUE_SHARDS


class InMemoryRunStore:
    def __init__(self) -> None:
        self._runs: dict[str, tuple[int, str]] = {}  # run id -> (version, JSON)
        self._parsed: dict[str, tuple[tuple[int, str], Run]] = {}  # run id -> (stored item, its run)
        self._attempts: dict[str, dict[int, str]] = {}
        self._audit: dict[str, list[tuple[tuple[Any, ...], AuditEntry]]] = {}
        # the due index, like the GSI: per shard a sorted list of (due, kind, run id, key)
        self._due: dict[tuple[str, str, str], int] = {}
        self._due_sorted: list[list[tuple[int, str, str, str]]] = [[] for _ in range(keys.DUE_SHARDS)]
        self._outbox: dict[tuple[str, str], tuple[OutboxMessage, str]] = {}
        self._waiting: dict[
            str, tuple[int, str, str | None]
        ] = {}  # RETRY_WAIT runs: (-priority, reason, type)
        self._idem: dict[str, tuple[str, str]] = {}
        self._leases: dict[str, tuple[str, int]] = {}
        self._pipeline = PipelineHealth()  # the deployment's heartbeat pipeline (domain/hangs/heartbeat.py)
        # claims (domain.claims), as the DynamoDB store's claim items: item key -> attributes
        self._claims: dict[str, dict[str, Any]] = {}
        self._seq = 0
        # plans every write as the DynamoDB store would (no client: planning makes no call)
        self._planner = DynamoDbRunStore(None, "sagewarden")

    # -- the due index ---------------------------------------------------------------------------
    def _set_due_entry(self, kind: str, run_id: str, key: str, due_ms: int | None) -> None:
        ident = (kind, run_id, key)
        shard = self._due_sorted[_shard(run_id)]
        old = self._due.pop(ident, None)
        if old is not None:
            idx = bisect.bisect_left(shard, (old, kind, run_id, key))
            if idx < len(shard) and shard[idx] == (old, kind, run_id, key):
                shard.pop(idx)
        if due_ms is not None:
            self._due[ident] = due_ms
            bisect.insort(shard, (due_ms, kind, run_id, key))

    def iter_due(self, now_ms: int, shard: int) -> Iterator[DueItem]:
        entries = self._due_sorted[shard]
        snapshot = entries[: bisect.bisect_right(entries, (now_ms, "~", "~", "~"))]
        for due, kind, run_id, key in snapshot:
            yield DueItem(kind, run_id, due, key)

    def earliest_due(self) -> int | None:
        return min((s[0][0] for s in self._due_sorted if s), default=None)

    # -- writes -----------------------------------------------------------------------------
    def create(
        self,
        run: Run,
        audit: Sequence[AuditEntry],
        body_hash: str | None = None,
        *,
        take_held: bool = False,
    ) -> Run:
        self._planner.plan_create(run, audit, body_hash, take_held=take_held)  # WriteTooLarge first
        key = idempotency_pk(run.owner, run.idempotency_key) if run.idempotency_key else None
        if key is not None and key in self._idem:
            rid, h = self._idem[key]
            raise IdempotentReplay(rid, h == (body_hash or ""))
        if run.run_id in self._runs:
            raise ConcurrentUpdate(run.run_id)
        live = not run.status.terminal
        held = self._claim_holder(run, run.created_ms, take_held) if live else None
        if held is not None:
            raise ClaimConflict(*held)
        if key is not None:
            self._idem[key] = (run.run_id, body_hash or "")
        if live:
            claim_rules.apply_take(self._claims, claim_rules.take_plan(run.claims), run.run_id)
        self._store_run(run)
        self._attempts[run.run_id] = {}
        self._set_due_entry("run", run.run_id, "", run.created_ms)
        self._append(run.run_id, run.version, audit, salt=False)
        return run

    def _store_run(self, run: Run, data: str | None = None) -> None:
        self._runs[run.run_id] = (
            run.version,
            data if data is not None else json.dumps(run_to_dict(run), sort_keys=True, ensure_ascii=False),
        )
        if run.status == RunStatus.RETRY_WAIT and run.wait_reason:
            self._waiting[run.run_id] = (-run.policy.priority, run.wait_reason, run.wait_instance_type)
        else:
            self._waiting.pop(run.run_id, None)

    def save(
        self,
        run: Run,
        previous: Run,
        audit: Sequence[AuditEntry],
        due_ms: int | None,
        outbox: Sequence[OutboxMessage] = (),
    ) -> Run:
        plan = self._planner.plan_save(run, previous, audit, due_ms, outbox)  # WriteTooLarge first
        stored = self._runs.get(run.run_id)
        if stored is None or stored[0] != previous.version:
            raise ConcurrentUpdate(run.run_id)
        if any((m.run_id, m.dedupe_id) in self._outbox for m in outbox):
            raise ConcurrentUpdate(run.run_id)  # the transaction's condition on a new item fails
        taking = bool(run.claims) and previous.status.terminal and not run.status.terminal
        releasing = bool(run.claims) and not previous.status.terminal and run.status.terminal
        held = self._claim_holder(run, run.updated_ms, False) if taking else None
        if held is not None:
            raise ClaimConflict(*held)
        if taking:
            claim_rules.apply_take(self._claims, claim_rules.take_plan(run.claims), run.run_id)
        elif releasing:
            until = resumable_until(run)
            hold = (principal(run.owner), until) if until is not None else None
            claim_rules.apply_release(self._claims, claim_rules.release_plan(run.claims, hold), run.run_id)
        saved = plan.run
        self._store_run(saved, plan.run_data)
        self._attempts[run.run_id].update(plan.attempt_data)
        self._set_due_entry("run", run.run_id, "", due_ms)
        for m in outbox:
            self._outbox[(m.run_id, m.dedupe_id)] = (m, json.dumps(notify_to_dict(m.notify)))
            self._set_due_entry("outbox", m.run_id, m.dedupe_id, m.due_ms or m.created_ms)
        self._append(run.run_id, saved.version, audit, salt=False)
        return saved

    def append_audit(self, run_id: str, version: int, entries: Sequence[AuditEntry]) -> None:
        self._append(run_id, version, entries, salt=True)

    def set_due(self, run: Run, due_ms: int | None) -> None:
        stored = self._runs.get(run.run_id)
        if stored is None or stored[0] != run.version:
            return  # a newer version already set its own due time
        self._set_due_entry("run", run.run_id, "", due_ms)

    def _append(self, run_id: str, version: int, entries: Sequence[AuditEntry], *, salt: bool) -> None:
        log = self._audit.setdefault(run_id, [])
        for i, e in enumerate(entries):
            self._seq += 1
            key = (e.at_ms, version, "B" if salt else "A", self._seq if salt else 0, i)
            # bounded exactly as the DynamoDB store bounds its audit items
            stored = AuditEntry(
                e.at_ms,
                e.kind,
                clip_text(e.summary, AUDIT_SUMMARY_BYTES),
                json.loads(bounded_json(dict(e.detail), AUDIT_DETAIL_BYTES)),
            )
            bisect.insort(log, (key, stored), key=lambda t: t[0])

    # -- claims ------------------------------------------------------------------------------------
    def _claim_holder(self, run: Run, now_ms: int, take_held: bool) -> tuple[str, str] | None:
        plan = claim_rules.take_plan(run.claims)
        return claim_rules.blocking(
            plan, self._claims, run.run_id, principal(run.owner), now_ms, take_held=take_held
        )

    def claims_held(self) -> dict[str, dict[str, Any]]:
        """Every claim item and its attributes (tests and the drill's invariant checks)."""
        return {k: dict(v) for k, v in self._claims.items()}

    # -- outbox ------------------------------------------------------------------------------------
    def get_outbox(self, run_id: str, dedupe_id: str) -> OutboxMessage | None:
        found = self._outbox.get((run_id, dedupe_id))
        if found is None:
            return None
        message, data = found
        due = self._due.get(("outbox", run_id, dedupe_id), message.due_ms)
        return dataclasses.replace(message, notify=notify_from_dict(json.loads(data)), due_ms=due)

    def outbox_done(self, run_id: str, dedupe_id: str, at_ms: int) -> None:
        self._outbox.pop((run_id, dedupe_id), None)
        self._set_due_entry("outbox", run_id, dedupe_id, None)

    def outbox_retry(self, run_id: str, dedupe_id: str, due_ms: int, tries: int, error: str) -> None:
        found = self._outbox.get((run_id, dedupe_id))
        if found is None:
            return
        message, data = found
        self._outbox[(run_id, dedupe_id)] = (
            dataclasses.replace(message, tries=tries, last_error=error),
            data,
        )
        self._set_due_entry("outbox", run_id, dedupe_id, due_ms)

    def pending_outbox(self) -> list[OutboxMessage]:
        """Every alert still owed (tests and the drill's invariant checks)."""
        return [m for m, _ in self._outbox.values()]

    # -- the deployment's heartbeat pipeline -------------------------------------------------------
    def get_pipeline(self) -> PipelineHealth:
        return self._pipeline

    def save_pipeline(
        self, health: PipelineHealth, previous: PipelineHealth, outbox: Sequence[OutboxMessage] = ()
    ) -> PipelineHealth:
        if self._pipeline.version != previous.version or any(
            (m.run_id, m.dedupe_id) in self._outbox for m in outbox
        ):
            raise ConcurrentUpdate("pipeline")
        self._pipeline = dataclasses.replace(health, version=previous.version + 1)
        for m in outbox:
            self._outbox[(m.run_id, m.dedupe_id)] = (m, json.dumps(notify_to_dict(m.notify)))
            self._set_due_entry("outbox", m.run_id, m.dedupe_id, m.due_ms or m.created_ms)
        return self._pipeline

    # -- lease ---------------------------------------------------------------------------------------
    def acquire_lease(self, name: str, owner: str, now_ms: int, ttl_ms: int) -> bool:
        held = self._leases.get(name)
        if held is not None and held[1] >= now_ms and held[0] != owner:
            return False
        self._leases[name] = (owner, now_ms + ttl_ms)
        return True

    def release_lease(self, name: str, owner: str) -> None:
        held = self._leases.get(name)
        if held is not None and held[0] == owner:
            del self._leases[name]

    # -- reads ------------------------------------------------------------------------------
    def get(self, run_id: str, *, all_attempts: bool = False) -> Run | None:
        stored = self._runs.get(run_id)
        if stored is None:
            return None
        if all_attempts:
            attempts = self._attempts[run_id]
            loaded = [attempt_from_dict(json.loads(attempts[n])) for n in sorted(attempts)]
            return dataclasses.replace(run_from_dict(json.loads(stored[1]), loaded), version=stored[0])
        # the same stored item reads as the same (frozen) run: parsed once per write, as a large
        # drill reads each run many times between its writes
        cached = self._parsed.get(run_id)
        if cached is not None and cached[0] is stored:
            return cached[1]
        run = dataclasses.replace(run_from_dict(json.loads(stored[1])), version=stored[0])
        self._parsed[run_id] = (stored, run)
        return run

    def list_runs(self, status: str | None, limit: int, cursor: str | None) -> Page:
        ids = sorted(self._runs, reverse=True)
        if status:
            ids = [i for i in ids if json.loads(self._runs[i][1])["status"] == status]
        start = _runs_cursor(cursor, status or "") if cursor else None
        ids = [i for i in ids if start is None or i < start]
        page = ids[:limit]
        runs = [self.get(i) for i in page]
        more = len(ids) > limit
        nxt = {"run_id": page[-1], "status": status or ""} if more and page else None
        return Page([r for r in runs if r is not None], encode_cursor(nxt))

    def list_audit(self, run_id: str, limit: int, cursor: str | None) -> Page:
        log = self._audit.get(run_id, [])
        start = _audit_cursor(cursor, run_id, len(log)) if cursor else 0
        items = [e for _, e in log[start : start + limit]]
        nxt = start + limit
        return Page(items, encode_cursor({"run_id": run_id, "offset": nxt}) if nxt < len(log) else None)

    def runs_waiting_for(self, reason: str, instance_type: str) -> list[str]:
        """Highest priority first, then oldest (run ids are time-ordered ULIDs)."""
        found = [
            (neg_priority, rid)
            for rid, (neg_priority, why, itype) in self._waiting.items()
            if why == reason and itype in (None, instance_type)
        ]
        return [rid for _, rid in sorted(found)]


# -- cursors: the same rules as the DynamoDB store's (exact keys and types, bound to the listing) --
_RUN_ID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")


def _runs_cursor(cursor: str, status: str) -> str:
    value = decode_cursor(cursor)
    if not isinstance(value, dict) or set(value) != {"run_id", "status"}:
        raise ValueError("invalid cursor")
    run_id, listing = value["run_id"], value["status"]
    if not isinstance(run_id, str) or not _RUN_ID.fullmatch(run_id) or listing != status:
        raise ValueError("invalid cursor: not a cursor of this listing")
    return run_id


def _audit_cursor(cursor: str, run_id: str, length: int) -> int:
    value = decode_cursor(cursor)
    if not isinstance(value, dict) or set(value) != {"run_id", "offset"}:
        raise ValueError("invalid cursor")
    offset = value["offset"]
    if value["run_id"] != run_id:
        raise ValueError("invalid cursor: not a cursor of this run's events")
    if not isinstance(offset, int) or isinstance(offset, bool) or not 0 < offset < length:
        raise ValueError("invalid cursor")
    return offset
