"""The supervisor's view of the simulated SageMaker: a new job is missing from reads for a drawn delay.

Why: docs/drill.md (`describe_after_create_s`), docs/fidelity.md."""

from __future__ import annotations

import random
from typing import Any

from drill.sim.texts import client_error

DEFAULT_WINDOW_S = (0.0, 10.0)
MAX_WINDOW_S = 600.0


class ReadAfterCreate:
    def __init__(self, sim: Any, window_s: tuple[float, float] = DEFAULT_WINDOW_S, *, seed: int = 0) -> None:
        low, high = window_s
        if not 0 <= low <= high <= MAX_WINDOW_S:
            raise ValueError(f"window_s must be [low, high] with 0 <= low <= high <= {MAX_WINDOW_S:g}")
        self._sim = sim
        self.window_s = (float(low), float(high))
        self._seed = seed
        self.hidden_answers = 0  # reads answered "not found" for a job that exists

    def delay_ms(self, name: str) -> int:
        """How long after its creation the job `name` stays invisible (drawn per job, replayable)."""
        low, high = self.window_s
        return int(random.Random(f"{self._seed}|read-after-create|{name}").uniform(low, high) * 1000)

    def visible(self, name: str) -> bool:
        try:
            job = self._sim.job(name)
        except KeyError:
            return True  # unknown everywhere: the simulator answers for itself
        return bool(self._sim.clock.now_ms >= job.created_ms + self.delay_ms(name))

    def _hidden(self, name: str, op: str) -> None:
        if not self.visible(name):
            self.hidden_answers += 1
            raise client_error("ValidationException", "Requested resource not found.", op)

    # -- the boto3-shaped API the supervisor's launcher calls -----------------------------------
    def create_training_job(self, **request: Any) -> dict[str, Any]:
        return dict(self._sim.create_training_job(**request))

    def describe_training_job(self, *, TrainingJobName: str) -> dict[str, Any]:
        self._hidden(TrainingJobName, "DescribeTrainingJob")
        return dict(self._sim.describe_training_job(TrainingJobName=TrainingJobName))

    def stop_training_job(self, *, TrainingJobName: str) -> dict[str, Any]:
        self._hidden(TrainingJobName, "StopTrainingJob")
        return dict(self._sim.stop_training_job(TrainingJobName=TrainingJobName))

    def update_training_job(self, *, TrainingJobName: str, **params: Any) -> dict[str, Any]:
        self._hidden(TrainingJobName, "UpdateTrainingJob")
        return dict(self._sim.update_training_job(TrainingJobName=TrainingJobName, **params))

    def describe_training_plan(self, *, TrainingPlanName: str) -> dict[str, Any]:
        # not a job: no read-after-create delay; defined here so the IAM replay records it
        return dict(self._sim.describe_training_plan(TrainingPlanName=TrainingPlanName))

    def __getattr__(self, name: str) -> Any:
        if name == "_sim":
            raise AttributeError(name)
        return getattr(self._sim, name)
