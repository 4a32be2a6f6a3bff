"""Ports the service depends on. Adapters implement them; unit tests use in-memory fakes.

Every call the service makes to the outside world goes through a method of a Protocol here,
so the crash-injection tests can enumerate them from this module (not from a hand-kept list).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from sagewarden.domain.checkpoints.retirement import BucketVersioning
from sagewarden.domain.hangs.heartbeat import PipelineHealth
from sagewarden.domain.vocabulary.actions import EnsureHangAlarms, Notify, RetireCheckpoints
from sagewarden.domain.vocabulary.events import (
    JobMissing,
    JobObserved,
    LaunchAccepted,
    LaunchRejected,
    RetirementReported,
)
from sagewarden.domain.vocabulary.evidence import HostMetrics
from sagewarden.domain.vocabulary.layouts import Checkpoint, CheckpointLayout, RetentionView
from sagewarden.domain.vocabulary.models import Run
from sagewarden.domain.vocabulary.plan_windows import PlanView


class ConcurrentUpdate(Exception):
    """The run changed since it was loaded (conditional write failed) -- by someone else.

    A store raises it only when the write did not commit; a write of ours that committed but
    whose response was lost is recognised and returned as saved."""


class WriteTooLarge(Exception):
    """A decision's write is larger than one atomic write of the store can carry (DynamoDB: 100
    actions, 4 MB, 400 KB an item). Nothing was written: the store refuses it whole rather than
    write part of it. Loud by design (the invocation fails and is counted and alarmed as any
    failure is); no decision writes that much today."""


class ReadFailed(Exception):
    """An observation could not be made: what it would have said is unknown, never "nothing".

    ``permanent`` is True for an error that does not heal by itself (a bucket that does not
    exist, access denied): retrying cannot help until a person fixes something. Throttling, a
    5xx or a timeout are transient (False)."""

    permanent: bool = False


class ClaimConflict(Exception):
    """Another run holds what this run claims (domain.claims: a live run's name, checkpoint or
    archive prefix, or a resumable run's hold on its checkpoint prefix)."""

    def __init__(self, holder_run_id: str, claim: str) -> None:
        super().__init__(f"{claim} is held by run {holder_run_id}")
        self.holder_run_id = holder_run_id
        self.claim = claim


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


# an owed alert is published right after the save; the sweep takes it over only if it is still
# owed this long after (longer than any function's timeout, so the two never race)
OUTBOX_GRACE_MS = 2 * 60_000


@dataclass(frozen=True)
class OutboxMessage:
    """An alert a decision owes, written in the same transaction as the run (transactional
    outbox): published by the service right after the save, re-published by the sweep until
    SNS accepts it. `dedupe_id` is stable, travels as a message attribute, and lets a
    subscriber drop the rare duplicate (a publish whose response was lost)."""

    run_id: str
    dedupe_id: str
    created_ms: int
    notify: Notify
    due_ms: int = 0  # when the sweep may (re)publish it if it is still owed
    tries: int = 0
    last_error: str | None = None


@dataclass(frozen=True)
class DueItem:
    kind: str  # run | outbox
    run_id: str
    due_ms: int
    key: str = ""  # the outbox message's dedupe id


class RunStore(Protocol):
    # take_held: the run may take a prefix another principal's resumable run holds (domain.claims)
    def create(
        self, run: Run, audit: Sequence[AuditEntry], body_hash: str | None = None, *, take_held: bool = False
    ) -> Run: ...
    def get(self, run_id: str, *, all_attempts: bool = False) -> Run | None: ...
    def save(
        self,
        run: Run,
        previous: Run,
        audit: Sequence[AuditEntry],
        due_ms: int | None,
        outbox: Sequence[OutboxMessage] = (),
    ) -> Run: ...
    def append_audit(self, run_id: str, version: int, entries: Sequence[AuditEntry]) -> None: ...
    def set_due(self, run: Run, due_ms: int | None) -> None: ...
    def list_runs(self, status: str | None, limit: int, cursor: str | None) -> Page: ...
    def list_audit(self, run_id: str, limit: int, cursor: str | None) -> Page: ...
    def iter_due(self, now_ms: int, shard: int) -> Iterator[DueItem]: ...
    def runs_waiting_for(self, reason: str, instance_type: str) -> list[str]: ...
    def get_outbox(self, run_id: str, dedupe_id: str) -> OutboxMessage | None: ...
    def outbox_done(self, run_id: str, dedupe_id: str, at_ms: int) -> None: ...
    def outbox_retry(self, run_id: str, dedupe_id: str, due_ms: int, tries: int, error: str) -> None: ...
    def acquire_lease(self, name: str, owner: str, now_ms: int, ttl_ms: int) -> bool: ...
    def release_lease(self, name: str, owner: str) -> None: ...
    # the deployment's heartbeat pipeline (domain/hangs/heartbeat.py): delivering at version 0 when never
    # written; a save is conditional on `previous.version` (ConcurrentUpdate) and carries its alerts
    def get_pipeline(self) -> PipelineHealth: ...
    def save_pipeline(
        self, health: PipelineHealth, previous: PipelineHealth, outbox: Sequence[OutboxMessage] = ()
    ) -> PipelineHealth: ...


@dataclass(frozen=True)
class StopOutcome:
    accepted: bool  # False: SageMaker says the job cannot be stopped (ended, or does not exist)
    message: str


class Launcher(Protocol):
    def launch(self, attempt: int, request: Mapping[str, Any]) -> LaunchAccepted | LaunchRejected | None: ...
    def stop(self, job_name: str) -> StopOutcome: ...
    def observe(self, job_name: str, attempt: int) -> JobObserved | JobMissing: ...
    def release_warm_pool(self, job_name: str) -> str: ...


class TrainingPlanReader(Protocol):
    # DescribeTrainingPlan of a plan given by its ARN or its name (the request names it by its
    # name: domain/capacity/training_plans.py); raises when the plan cannot be read: the caller treats
    # that as unknown, never as "no windows"
    def describe_plan(self, plan: str) -> PlanView: ...


class CheckpointFinder(Protocol):
    # one 1-key listing under `s3_uri`: returns when the supervisor can list it, raises ReadFailed
    # (``permanent`` for no such bucket or access denied) when it cannot
    def check_access(self, s3_uri: str) -> None: ...
    def latest(self, s3_uri: str, layout: CheckpointLayout = ...) -> Checkpoint | None: ...
    def write_seconds(self, checkpoint: Checkpoint) -> float | None: ...
    def save_activity(
        self, s3_uri: str, layout: CheckpointLayout = ..., *, active_since_ms: int | None = ...
    ) -> int | None: ...


class CheckpointRetirer(Protocol):
    """Checkpoint retention (domain/checkpoints/retention.py): reads the synced prefix and moves directories
    out of it. ``view`` raises ReadFailed when S3 cannot be read (unknown, never "none")."""

    def view(self, s3_uri: str, layout: CheckpointLayout, *, limit: int) -> RetentionView: ...
    # carries out one RetireCheckpoints within its bounds: what it did to each directory it
    # reached (where the next pass continues), and the S3 error that ended it, if one did
    def retire(self, action: RetireCheckpoints) -> RetirementReported: ...


class RetirementFailed(Exception):
    """A retirement pass ended in an S3 error (its answer, with the progress made before the
    error, is decided on all the same): the action's error line and the FailedActions metric."""


class VersioningReader(Protocol):
    # a bucket's versioning status and lifecycle rules (domain/checkpoints/retirement.py BucketVersioning);
    # raises ReadFailed when they cannot be read (the caller treats that as unknown)
    def versioning(self, bucket: str) -> BucketVersioning: ...


class QuotaReader(Protocol):
    # the account's SageMaker quotas by name (Service Quotas): applied values, AWS's defaults
    # where none is applied; raises when they cannot be read (the caller treats that as unknown)
    def sagemaker_quotas(self) -> Mapping[str, float]: ...


class Notifier(Protocol):
    def publish(self, message: Notify) -> None: ...


class AlarmInventory(dict[str, tuple[tuple[str, str, int], ...]]):
    """Every hang alarm of the deployment: job -> (key, state, since ms). ``metrics`` counts the
    metrics those alarms watch: CloudWatch bills each metric of a metric-math alarm as one alarm
    metric, so it is what the dashboard's cost estimate multiplies."""

    metrics: int = 0


class HangAlarms(Protocol):
    def ensure(self, spec: EnsureHangAlarms, run_id: str = "") -> list[str]: ...
    def delete(self, job_name: str) -> list[str]: ...
    def inventory(self) -> AlarmInventory: ...


class LogReader(Protocol):
    # `first`: hosts (algo-N) to read before the others, so that a time budget never cuts them;
    # `secrets`: the run's secret values, scrubbed from every line before a line is clipped
    # (domain/vocabulary/redaction.py; the reader scrubs what the patterns find in any case)
    def tail(
        self, job_name: str, lines: int, *, first: Sequence[str] = ..., secrets: Sequence[str] = ...
    ) -> tuple[str, ...]: ...
    # a log event of the job's training streams at or after since_ms (and before until_ms, if given)
    def has_events_since(self, job_name: str, since_ms: int, *, until_ms: int | None = None) -> bool: ...
    # when the job (or one host, algo-<n>) last wrote a log event; None: none, or unknown
    def newest_event_ms(self, job_name: str, host: str | None = None) -> int | None: ...
    # the end of the latest silent phase declared (phase marker) at or after since_ms, else None
    def declared_phase_until(self, job_name: str, since_ms: int) -> int | None: ...
    # per-minute activity read from the logs (what the heartbeat metric would carry)
    def activity(self, job_name: str, start_ms: int, end_ms: int) -> tuple[tuple[int, float], ...]: ...
    def host_triage(
        self, job_name: str, now_ms: int, *, first: Sequence[str] = ..., secrets: Sequence[str] = ...
    ) -> tuple[str, ...]: ...
    # lines matching a filter pattern since a time (and before `until_ms`, if given), `[algo-<n>]
    # ...` (domain/hosts/fabric.py, hosts.py): the first `keep` (None: the reader's own bound), or with
    # `newest` the last (stragglers.py)
    def matching_lines(
        self,
        job_name: str,
        since_ms: int,
        pattern: str,
        *,
        keep: int | None = None,
        newest: bool = False,
        until_ms: int | None = None,
        secrets: Sequence[str] = ...,
    ) -> tuple[str, ...]: ...


Series = tuple[tuple[int, float], ...]  # (minute start ms, value) of the minutes that had data


class MetricsReader(Protocol):
    # each host's GPU, CPU and disk utilization per minute (the datapoints that have arrived)
    def host_metrics(
        self, job_name: str, hosts: int, start_ms: int, end_ms: int
    ) -> tuple[HostMetrics, ...]: ...
    def activity(
        self, job_name: str, progress_metric: str | None, start_ms: int, end_ms: int
    ) -> tuple[Series, Series | None]: ...
    # each host's highest MemoryUtilization (percent) over the window and its newest datapoint's
    # minute, (host, percent, ms); hosts without a datapoint are absent
    def host_memory(
        self, job_name: str, hosts: int, start_ms: int, end_ms: int
    ) -> tuple[tuple[str, float, int], ...]: ...


class Counters(Protocol):
    """Operational metrics (CloudWatch metrics via EMF in Lambda), e.g. FailedActions, and the
    dashboard's domain metrics (RunStatus{status}, Restarts{class}, ...)."""

    def add(
        self, name: str, value: float = 1.0, *, dimension: tuple[str, str] | None = None, unit: str = "Count"
    ) -> None: ...


class NoCounters:
    def add(
        self, name: str, value: float = 1.0, *, dimension: tuple[str, str] | None = None, unit: str = "Count"
    ) -> None:
        return None
