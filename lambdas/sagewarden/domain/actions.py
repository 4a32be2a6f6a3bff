"""Actions returned by `decide`. Data only; adapters carry them out idempotently."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


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


@dataclass(frozen=True)
class DeleteHangAlarms:
    job_name: str


@dataclass(frozen=True)
class AnnounceCapacityReleased:
    instance_type: str
    count: int


@dataclass(frozen=True)
class Notify:
    severity: str  # info | warning | critical
    event: str  # run.submitted, attempt.training, attempt.resumed, run.waiting, run.succeeded, ...
    subject: str
    body: str
    attributes: Mapping[str, str] = field(default_factory=dict)


Action = LaunchAttempt | StopJob | EnsureHangAlarms | DeleteHangAlarms | AnnounceCapacityReleased | Notify
