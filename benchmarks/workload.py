"""The training run of the side-by-side benchmark: 30 days of work for 256 x ml.p5.48xlarge.

The script makes one step per minute and checkpoints every 30 steps (30 minutes of training,
then a 2-minute blocking write), so 30 days of fault-free wall clock hold 30 x 24 x 60 x 30/32
steps. Every supervisor submits this same CreateTrainingJob request (their own job names and
tags aside); MaxRuntimeInSeconds is the 28-day API maximum, so no job ends by it in practice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from drill.scenarios.spec import default_training_job
from drill.sim.model import JobProfile, StartupTimes
from sagewarden.keys import TAG_ATTEMPT, TAG_RUN_ID, TAG_RUN_NAME


@dataclass(frozen=True)
class Workload:
    name: str = "llm-30d"
    hosts: int = 256
    gpus_per_host: int = 8
    instance_type: str = "ml.p5.48xlarge"
    days: float = 30.0  # fault-free wall clock of the whole run
    steps_per_minute: float = 1.0
    checkpoint_every_steps: int = 30  # every 30 minutes of training
    checkpoint_write_seconds: int = 120
    max_runtime_days: int = 28  # the API maximum
    work_steps: int | None = None  # fixed work (e.g. to compare checkpoint intervals); else from `days`
    log_lines_per_minute: int = 6  # per host while training (the trace sets the script's cadence)
    log_every_minutes: int = 1
    startup: StartupTimes = field(
        default_factory=StartupTimes
    )  # 6 min provisioning + 2 min download; warm 20 s + 15 s

    @property
    def gpus(self) -> int:
        return self.hosts * self.gpus_per_host

    @property
    def checkpoint_minutes(self) -> float:
        return self.checkpoint_every_steps / self.steps_per_minute

    @property
    def total_steps(self) -> int:
        if self.work_steps is not None:
            return self.work_steps
        cycle_min = self.checkpoint_minutes + self.checkpoint_write_seconds / 60.0
        cycles = int(self.days * 24 * 60 / cycle_min)
        return cycles * self.checkpoint_every_steps

    @property
    def useful_minutes(self) -> float:
        """Training time the work needs with no fault and no overhead (steps / rate)."""
        return self.total_steps / self.steps_per_minute

    @property
    def faultfree_minutes(self) -> float:
        """Wall clock of the whole run with no fault: start, training, checkpoint writes, upload."""
        st = self.startup
        saves = self.total_steps // self.checkpoint_every_steps * self.checkpoint_write_seconds / 60.0
        return (st.provision_s + st.download_s + st.upload_s) / 60.0 + self.useful_minutes + saves

    def profile(self) -> JobProfile:
        return JobProfile(
            total_steps=self.total_steps,
            steps_per_minute=self.steps_per_minute,
            checkpoint_every_steps=self.checkpoint_every_steps,
            checkpoint_write_seconds=self.checkpoint_write_seconds,
            log_lines_per_minute=self.log_lines_per_minute,
            log_every_minutes=self.log_every_minutes,
        )

    def training_job(self, bucket: str, role_arn: str) -> dict[str, Any]:
        """The CreateTrainingJob request every supervisor starts from (no name, no tags)."""
        job = default_training_job(self.name, bucket, role_arn)
        job["ResourceConfig"]["InstanceType"] = self.instance_type
        job["ResourceConfig"]["InstanceCount"] = self.hosts
        job["StoppingCondition"]["MaxRuntimeInSeconds"] = self.max_runtime_days * 86_400
        return job

    def warm_pool_quotas(self) -> dict[str, int]:
        """The account's warm-pool quota, per instance type, for every supervisor: enough for this
        job's instances (AWS's default is 0: a job asking for a pool would run and keep none)."""
        return {self.instance_type: self.hosts}

    def tags(self, run_id: str, attempt: int) -> list[dict[str, str]]:
        """Tags the simulator matches profiles and faults on (sagewarden sets the same ones)."""
        return [
            {"Key": TAG_RUN_NAME, "Value": self.name},
            {"Key": TAG_RUN_ID, "Value": run_id},
            {"Key": TAG_ATTEMPT, "Value": str(attempt)},
        ]
