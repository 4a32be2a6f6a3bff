"""`sagewarden selftest`'s plan: what its training job does, the run's policy, and the image it runs in.

The training script (examples/selftest/train.py) takes the plan as hyperparameters; the steps
(sagewarden_cli/selftest_steps.py), the request and the drill scenario
(sagewarden_cli/selftest_job.py) and the cost (sagewarden_cli/selftest_cost.py) derive from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagewarden_cli.errors import USAGE, CliError

RUN_NAME = "sagewarden-selftest"
SCENARIO_NAME = "selftest"  # drill/scenarios/selftest.json, what a local server must run
DEFAULT_PREFIX = "sagewarden-selftest"
DEFAULT_INSTANCE_TYPE = "ml.m5.large"
SCRIPT = "train.py"
SOURCE_TARBALL = "sourcedir.tar.gz"
REPO = Path(__file__).resolve().parents[1]
SOURCE_DIR = Path("examples") / "selftest"  # relative to the repository (or the current directory)

# -- the training job's plan -----------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What examples/selftest/train.py does (passed to it as hyperparameters)."""

    total_steps: int = 40
    checkpoint_every: int = 10
    seconds_per_step: float = 6.0
    crash_attempt: int = 1
    crash_at_step: int = 25
    hang_attempt: int = 2
    hang_after_step: int = 32

    def hyperparameters(self) -> dict[str, str]:
        return {
            "total-steps": str(self.total_steps),
            "checkpoint-every": str(self.checkpoint_every),
            "seconds-per-step": f"{self.seconds_per_step:g}",
            "crash-attempt": str(self.crash_attempt),
            "crash-at-step": str(self.crash_at_step),
            "hang-attempt": str(self.hang_attempt),
            "hang-after-step": str(self.hang_after_step),
        }

    def last_checkpoint(self, step: int) -> int:
        """The newest checkpoint the script has written once it reached ``step``."""
        return step // self.checkpoint_every * self.checkpoint_every

    @property
    def resume_2(self) -> int:
        return self.last_checkpoint(self.crash_at_step)

    @property
    def resume_3(self) -> int:
        return self.last_checkpoint(self.hang_after_step)

    def minutes(self, steps: int) -> float:
        return steps * self.seconds_per_step / 60

    @property
    def crash_after_min(self) -> float:
        """Training minutes of attempt 1 until it crashes."""
        return self.minutes(self.crash_at_step)

    @property
    def hang_after_min(self) -> float:
        """Training minutes of attempt 2 until it falls silent."""
        return self.minutes(self.hang_after_step - self.resume_2)

    @property
    def finish_after_min(self) -> float:
        return self.minutes(self.total_steps - self.resume_3)


PLAN = Plan()

# -- the run's policy --------------------------------------------------------------------------------
# Hang detection tuned for the test: 5 silent minutes are a hang; short grace after Training starts.
# Budgets bound what a misbehaving self-test can cost even if this command dies: 3 restarts, 2 hours.
POLICY: dict[str, Any] = {
    "hang_detection": True,
    "log_silence_minutes": 5,
    "hang_grace_minutes": 1,
    "hang_confirmation": "any",
    "checkpoint_layout": "hf",
    "max_restarts": 3,
    "max_no_progress_restarts": 2,
    "max_wall_clock_hours": 2,
    "keep_alive_seconds": 0,  # no warm pool: nothing billed between attempts
}
# Fields a newer API knows (a start-up allowance, windows learned from the job's cadence, lone-idle
# GPU alarms). They are sent, and dropped one by one when the deployed API answers "unknown policy
# field", so the self-test works with deployments from before and after them.
NEWER_POLICY: dict[str, Any] = {
    "startup_silence_minutes": 1,
    "adaptive_windows": False,
    "gpu_lone_idle_minutes": 0,
}
MAX_RUNTIME_S = 40 * 60  # per job: beyond the hang step's deadline (about 25 min of Training)

# -- images ------------------------------------------------------------------------------------------
# The public SageMaker PyTorch training images ("Deep Learning Containers"): the registry account
# differs by region. Account IDs as AWS publishes them for pytorch-training 2.5.1 (the SageMaker
# Python SDK's image_uri_config/pytorch.json), read 2026-08. --image overrides.
PYTORCH_IMAGE_REPOSITORY = "pytorch-training"
PYTORCH_IMAGE_TAG = "2.5.1-cpu-py311"
PYTORCH_TRAINING_ACCOUNTS: dict[str, str] = {
    "af-south-1": "626614931356",
    "ap-east-1": "871362719292",
    "ap-east-2": "975050140332",
    "ap-northeast-1": "763104351884",
    "ap-northeast-2": "763104351884",
    "ap-northeast-3": "364406365360",
    "ap-south-1": "763104351884",
    "ap-south-2": "772153158452",
    "ap-southeast-1": "763104351884",
    "ap-southeast-2": "763104351884",
    "ap-southeast-3": "907027046896",
    "ap-southeast-4": "457447274322",
    "ap-southeast-5": "550225433462",
    "ap-southeast-7": "590183813437",
    "ca-central-1": "763104351884",
    "ca-west-1": "204538143572",
    "cn-north-1": "727897471807",
    "cn-northwest-1": "727897471807",
    "eu-central-1": "763104351884",
    "eu-central-2": "380420809688",
    "eu-north-1": "763104351884",
    "eu-south-1": "692866216735",
    "eu-south-2": "503227376785",
    "eu-west-1": "763104351884",
    "eu-west-2": "763104351884",
    "eu-west-3": "763104351884",
    "il-central-1": "780543022126",
    "me-central-1": "914824155844",
    "me-south-1": "217643126080",
    "mx-central-1": "637423239942",
    "sa-east-1": "763104351884",
    "us-east-1": "763104351884",
    "us-east-2": "763104351884",
    "us-gov-east-1": "446045086412",
    "us-gov-west-1": "442386744353",
    "us-west-1": "763104351884",
    "us-west-2": "763104351884",
}


def image_uri(region: str) -> str:
    account = PYTORCH_TRAINING_ACCOUNTS.get(region)
    if account is None:
        raise CliError(
            f"no public SageMaker PyTorch training image is known for region {region}: pass --image "
            f"<account>.dkr.ecr.{region}.amazonaws.com/{PYTORCH_IMAGE_REPOSITORY}:{PYTORCH_IMAGE_TAG}",
            USAGE,
        )
    domain = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"{account}.dkr.ecr.{region}.{domain}/{PYTORCH_IMAGE_REPOSITORY}:{PYTORCH_IMAGE_TAG}"
