"""What the look-ups before a decision (`sagewarden.observations`, `sagewarden.observe_hosts`) need
of the supervisor: its read ports and settings. `sagewarden.service.Supervisor` is one; typed here
so those modules do not import the service that uses them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from sagewarden.domain.vocabulary.events import Observations
from sagewarden.ports import (
    CheckpointFinder,
    CheckpointRetirer,
    Counters,
    LogReader,
    MetricsReader,
    TrainingPlanReader,
)
from sagewarden.settings import SupervisorSettings


class ObserverHost(Protocol):
    checkpoints: CheckpointFinder
    retirer: CheckpointRetirer | None
    logs: LogReader
    metrics: MetricsReader | None
    plans: TrainingPlanReader | None
    counters: Counters
    clock: Callable[[], int]
    settings: SupervisorSettings

    @property
    def deployment_facts(self) -> Observations: ...
