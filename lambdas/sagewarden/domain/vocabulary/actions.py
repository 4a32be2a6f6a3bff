"""Actions returned by `decide`. Data only; adapters carry them out idempotently."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sagewarden.domain.vocabulary.models import RetireProgress


@dataclass(frozen=True)
class LaunchAttempt:
    attempt: int
    job_name: str
    request: Mapping[str, Any]  # the complete CreateTrainingJob request


@dataclass(frozen=True)
class StopJob:
    job_name: str
    intent: str


@dataclass(frozen=True)
class EnsureHangAlarms:
    job_name: str
    attempt: int
    instance_count: int
    gpus_per_host: int
    log_silence_minutes: int
    gpu_idle_percent: float
    gpu_idle_minutes: int
    checkpoint_stale_minutes: int | None = None
    progress_metric: str | None = None
    progress_stall_minutes: int = 30
    gpu_lone_idle_minutes: int = 3  # 0: no lone-idle-host alarms
    gpu_busy_percent: float = 50.0
    # False in a deployment without the log subscription: nothing publishes the heartbeat metric,
    # so no log-silence alarm exists and the sweep judges log silence itself
    log_silence_alarm: bool = True
    only_keys: tuple[str, ...] = ()  # re-put just these alarms (a learned window changed); () = all


@dataclass(frozen=True)
class DeleteHangAlarms:
    job_name: str


@dataclass(frozen=True)
class ReleaseWarmPool:
    """Terminate the warm pool an ended job left (UpdateTrainingJob KeepAlivePeriodInSeconds=0):
    nothing will reuse it (the run finished, waits, changes instance type, or restarts cold after
    a hardware fault), and an idle pool is billed."""

    job_name: str


@dataclass(frozen=True)
class AnnounceCapacityReleased:
    instance_type: str
    count: int


@dataclass(frozen=True)
class RetireCheckpoints:
    """Move complete checkpoint directories out of the synced prefix (domain/checkpoints/retention.py): for
    each of ``names`` (under ``s3_uri``), copy every object to ``archive_uri`` (the run's own
    archive prefix, ``run_archive_prefix``; None: mode "delete", no copy) with ``markers`` last,
    verify the copies, then delete the source's markers first and the rest after. Idempotent: a
    re-run proves what is already copied (``progress``: what earlier passes answered, per
    directory) instead of copying it again. The retirer answers RetirementReported."""

    s3_uri: str
    names: tuple[str, ...]
    mode: str  # archive | delete
    archive_uri: str | None
    markers: tuple[str, ...]
    progress: tuple[RetireProgress, ...] = ()


@dataclass(frozen=True)
class Notify:
    severity: str  # info | warning | critical
    event: str  # run.submitted, attempt.training, attempt.resumed, run.waiting, run.succeeded, ...
    subject: str
    body: str
    attributes: Mapping[str, str] = field(default_factory=dict)


Action = (
    LaunchAttempt
    | StopJob
    | EnsureHangAlarms
    | DeleteHangAlarms
    | ReleaseWarmPool
    | AnnounceCapacityReleased
    | RetireCheckpoints
    | Notify
)
