"""Ports the service depends on. Adapters implement them; unit tests use in-memory fakes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from sagewarden.domain.actions import EnsureHangAlarms, Notify
from sagewarden.domain.checkpoints import Checkpoint, CheckpointLayout
from sagewarden.domain.events import JobMissing, JobObserved, LaunchAccepted, LaunchRejected
from sagewarden.domain.models import Run


class ConcurrentUpdate(Exception):
    """The run changed since it was loaded (conditional write failed)."""


class IdempotentReplay(Exception):
    """A run with this Idempotency-Key already exists."""

    def __init__(self, run_id: str, same_body: bool) -> None:
        super().__init__(run_id)
        self.run_id = run_id
        self.same_body = same_body


@dataclass(frozen=True)
class AuditEntry:
    at_ms: int
    kind: str  # event | decision | action | error
    summary: str
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Page:
    items: Sequence[Any]
    cursor: str | None


class RunStore(Protocol):
    def create(self, run: Run, audit: Sequence[AuditEntry], body_hash: str | None = None) -> Run: ...
    def get(self, run_id: str, *, all_attempts: bool = False) -> Run | None: ...
    def save(self, run: Run, previous: Run, audit: Sequence[AuditEntry], due_ms: int | None) -> Run: ...
    def append_audit(self, run_id: str, version: int, entries: Sequence[AuditEntry]) -> None: ...
    def set_due(self, run: Run, due_ms: int | None) -> None: ...
    def list_runs(self, status: str | None, limit: int, cursor: str | None) -> Page: ...
    def list_audit(self, run_id: str, limit: int, cursor: str | None) -> Page: ...
    def due_run_ids(self, now_ms: int, limit: int) -> list[str]: ...
    def runs_waiting_for(self, reason: str, instance_type: str) -> list[str]: ...


class Launcher(Protocol):
    def launch(self, attempt: int, request: Mapping[str, Any]) -> LaunchAccepted | LaunchRejected | None: ...
    def stop(self, job_name: str) -> str: ...
    def observe(self, job_name: str, attempt: int) -> JobObserved | JobMissing: ...


class CheckpointFinder(Protocol):
    def latest(self, s3_uri: str, layout: CheckpointLayout = ...) -> Checkpoint | None: ...


class Notifier(Protocol):
    def publish(self, message: Notify) -> None: ...


class HangAlarms(Protocol):
    def ensure(self, spec: EnsureHangAlarms, run_id: str = "") -> list[str]: ...
    def delete(self, job_name: str) -> list[str]: ...
    def list_job_names(self) -> list[str]: ...


class LogReader(Protocol):
    def tail(self, job_name: str, lines: int) -> tuple[str, ...]: ...
    def has_events_since(self, job_name: str, since_ms: int) -> bool: ...
    def host_triage(self, job_name: str, now_ms: int) -> tuple[str, ...]: ...


class MetricsReader(Protocol):
    def gpu_by_host(
        self, job_name: str, hosts: int, start_ms: int, end_ms: int
    ) -> dict[str, tuple[float, float]]: ...
