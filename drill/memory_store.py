"""An in-memory RunStore with the DynamoDB store's semantics (same contract tests).

moto's DynamoDB scans and sorts the whole table on every query, which makes months of virtual
time slow; long scenarios and benchmarks can run on this store instead. Runs and attempts are
kept in the same serialised form the DynamoDB store writes (the shared codec), so a value
that would not survive DynamoDB does not survive here either.
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import json
import zlib
from collections.abc import Sequence
from typing import Any

from sagewarden import keys
from sagewarden.adapters.dynamodb_run_store import (
    attempt_from_dict,
    attempt_to_dict,
    decode_cursor,
    encode_cursor,
    idempotency_pk,
    run_from_dict,
    run_to_dict,
)
from sagewarden.domain.models import Run, RunStatus
from sagewarden.ports import AuditEntry, ConcurrentUpdate, IdempotentReplay, Page


class InMemoryRunStore:
    def __init__(self) -> None:
        self._runs: dict[str, tuple[int, str]] = {}  # run id -> (version, JSON)
        self._attempts: dict[str, dict[int, str]] = {}
        self._audit: dict[str, list[tuple[tuple[Any, ...], AuditEntry]]] = {}
        self._due: dict[str, int] = {}
        self._idem: dict[str, tuple[str, str]] = {}
        self._seq = 0
        # indexes, so that no lookup reads every run (drill speed with many runs)
        self._due_heap: list[tuple[int, str]] = []  # (due, run id), stale entries skipped
        self._waiting: dict[str, tuple[str | None, str | None]] = {}  # RETRY_WAIT runs: (reason, type)

    # -- writes -----------------------------------------------------------------------------
    def create(self, run: Run, audit: Sequence[AuditEntry], body_hash: str | None = None) -> Run:
        if run.idempotency_key:
            key = idempotency_pk(run.owner, run.idempotency_key)
            if key in self._idem:
                rid, h = self._idem[key]
                raise IdempotentReplay(rid, h == (body_hash or ""))
            self._idem[key] = (run.run_id, body_hash or "")
        if run.run_id in self._runs:
            raise ConcurrentUpdate(run.run_id)
        self._runs[run.run_id] = (run.version, json.dumps(run_to_dict(run), sort_keys=True))
        self._attempts[run.run_id] = {}
        self._set_due(run, run.created_ms)
        self._index_waiting(run)
        self._append(run.run_id, run.version, audit, salt=False)
        return run

    def save(self, run: Run, previous: Run, audit: Sequence[AuditEntry], due_ms: int | None) -> Run:
        stored = self._runs.get(run.run_id)
        if stored is None or stored[0] != previous.version:
            raise ConcurrentUpdate(run.run_id)
        saved = dataclasses.replace(run, version=previous.version + 1)
        self._runs[run.run_id] = (saved.version, json.dumps(run_to_dict(saved), sort_keys=True))
        before = {a.number: a for a in previous.attempts}
        for att in run.attempts:
            if before.get(att.number) != att:
                self._attempts[run.run_id][att.number] = json.dumps(attempt_to_dict(att), sort_keys=True)
        self._set_due(saved, due_ms)
        self._index_waiting(saved)
        self._append(run.run_id, saved.version, audit, salt=False)
        return saved

    def append_audit(self, run_id: str, version: int, entries: Sequence[AuditEntry]) -> None:
        self._append(run_id, version, entries, salt=True)

    def set_due(self, run: Run, due_ms: int | None) -> None:
        stored = self._runs.get(run.run_id)
        if stored is None or stored[0] != run.version:
            return  # a newer version already set its own due time
        self._set_due(run, due_ms)

    def _set_due(self, run: Run, due_ms: int | None) -> None:
        if due_ms is None or run.status.terminal:
            self._due.pop(run.run_id, None)
        else:
            self._due[run.run_id] = due_ms
            heapq.heappush(self._due_heap, (due_ms, run.run_id))

    def _index_waiting(self, run: Run) -> None:
        if run.status == RunStatus.RETRY_WAIT:
            data = run_to_dict(run)
            self._waiting[run.run_id] = (data.get("wait_reason"), data.get("wait_instance_type"))
        else:
            self._waiting.pop(run.run_id, None)

    def _append(self, run_id: str, version: int, entries: Sequence[AuditEntry], *, salt: bool) -> None:
        log = self._audit.setdefault(run_id, [])
        for i, e in enumerate(entries):
            self._seq += 1
            key = (e.at_ms, version, "B" if salt else "A", self._seq if salt else 0, i)
            bisect.insort(log, (key, e), key=lambda t: t[0])  # keeps the order, no re-sort

    # -- reads ------------------------------------------------------------------------------
    def get(self, run_id: str, *, all_attempts: bool = False) -> Run | None:
        stored = self._runs.get(run_id)
        if stored is None:
            return None
        attempts = self._attempts[run_id]
        numbers = sorted(attempts) if all_attempts else sorted(attempts)[-1:]
        loaded = [attempt_from_dict(json.loads(attempts[n])) for n in numbers]
        run = run_from_dict(json.loads(stored[1]), loaded)
        return dataclasses.replace(run, version=stored[0])

    def list_runs(self, status: str | None, limit: int, cursor: str | None) -> Page:
        ids = sorted(self._runs, reverse=True)
        if status:
            ids = [i for i in ids if json.loads(self._runs[i][1])["status"] == status]
        start = decode_cursor(cursor, str) if cursor else None
        ids = [i for i in ids if start is None or i < start]
        page = ids[:limit]
        runs = [self.get(i) for i in page]
        more = len(ids) > limit
        return Page([r for r in runs if r is not None], encode_cursor(page[-1]) if more and page else None)

    def list_audit(self, run_id: str, limit: int, cursor: str | None) -> Page:
        log = self._audit.get(run_id, [])
        start = int(decode_cursor(cursor, str)) if cursor else 0
        items = [e for _, e in log[start : start + limit]]
        nxt = start + limit
        return Page(items, encode_cursor(str(nxt)) if nxt < len(log) else None)

    def due_run_ids(self, now_ms: int, limit: int) -> list[str]:
        by_shard = sorted(
            (str(zlib.crc32(r.encode()) % keys.DUE_SHARDS), due, r)
            for r, due in self._due.items()
            if due <= now_ms
        )
        return [r for _, _, r in by_shard][:limit]

    def runs_waiting_for(self, reason: str, instance_type: str) -> list[str]:
        out = []
        for rid in sorted(self._waiting, reverse=True):
            wait_reason, wait_type = self._waiting[rid]
            if wait_reason == reason and wait_type in (None, instance_type):
                out.append(rid)
        return out

    def earliest_due(self) -> int | None:
        heap = self._due_heap
        while heap and self._due.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)  # superseded or removed
        return heap[0][0] if heap else None
