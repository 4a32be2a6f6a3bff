"""`sagewarden selftest`'s training job: where it runs, the CreateTrainingJob request, the source
tarball, and the same plan as a drill scenario (drill/scenarios/selftest.json)."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagewarden_cli.errors import USAGE, CliError
from sagewarden_cli.selftest_plan import (
    DEFAULT_INSTANCE_TYPE,
    MAX_RUNTIME_S,
    NEWER_POLICY,
    PLAN,
    POLICY,
    REPO,
    RUN_NAME,
    SCENARIO_NAME,
    SCRIPT,
    SOURCE_DIR,
    SOURCE_TARBALL,
    Plan,
)

# -- the request ---------------------------------------------------------------------------------------


@dataclass
class Target:
    """Where the self-test runs and what it needs there."""

    region: str
    role: str
    bucket: str
    root: str  # the S3 prefix of everything this self-test writes: <prefix>/<stamp>
    image: str
    instance_type: str
    s3_endpoint: str | None = None  # local mode: the local server's AWS endpoint

    @property
    def source_key(self) -> str:
        return f"{self.root}/source/{SOURCE_TARBALL}"

    def uri(self, suffix: str) -> str:
        return f"s3://{self.bucket}/{self.root}/{suffix}"


def training_job(t: Target, plan: Plan = PLAN) -> dict[str, Any]:
    """The CreateTrainingJob request (without TrainingJobName) of the self-test's run."""
    return {
        "AlgorithmSpecification": {"TrainingImage": t.image, "TrainingInputMode": "File"},
        "RoleArn": t.role,
        "OutputDataConfig": {"S3OutputPath": t.uri("output/")},
        "ResourceConfig": {"InstanceType": t.instance_type, "InstanceCount": 1, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": MAX_RUNTIME_S},
        "CheckpointConfig": {"S3Uri": t.uri("checkpoints/"), "LocalPath": "/opt/ml/checkpoints"},
        # the framework image's script mode: fetch the source tarball, run the program with the rest
        # of the hyperparameters as --name value arguments
        "HyperParameters": {
            "sagemaker_program": SCRIPT,
            "sagemaker_submit_directory": f"s3://{t.bucket}/{t.source_key}",
            "sagemaker_region": t.region,
            **plan.hyperparameters(),
        },
        "Environment": {"PYTHONUNBUFFERED": "1"},
        "Tags": [{"Key": "purpose", "Value": RUN_NAME}],
    }


def source_tarball(source_dir: Path) -> bytes:
    """The source directory as SageMaker's script mode takes it: a gzipped tar of its files."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path in sorted(source_dir.iterdir()):
            if path.is_file() and path.suffix == ".py":
                info = tar.gettarinfo(str(path), arcname=path.name)
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                with path.open("rb") as f:
                    tar.addfile(info, f)
    return buf.getvalue()


def find_source_dir(given: str | None) -> Path:
    candidates = [Path(given)] if given else [Path.cwd() / SOURCE_DIR, REPO / SOURCE_DIR]
    for c in candidates:
        if (c / SCRIPT).is_file():
            return c
    where = " or ".join(str(c) for c in candidates)
    raise CliError(
        f"the self-test's training script {SCRIPT} is not in {where}: run from the sagewarden repository "
        "or pass --source-dir",
        USAGE,
    )


# -- the scenario: the same plan for the drill -----------------------------------------------------------


def scenario_document(plan: Plan = PLAN, policy: Mapping[str, Any] = POLICY) -> dict[str, Any]:
    """drill/scenarios/selftest.json: the account, the job profile and the faults that do in the
    simulated account what examples/selftest/train.py does in a real one (same log lines, same
    checkpoints, same moments), for ``python -m drill serve --scenario selftest``. The run's policy
    (used by ``python -m drill selftest``) has the NEWER_POLICY fields this code's API knows.

    Rewrite the file with ``PYTHONPATH=lambdas:. python -m sagewarden_cli.selftest > drill/scenarios/selftest.json``."""
    from sagewarden.domain.vocabulary.policy import RunPolicy

    known = set(RunPolicy().to_dict())
    policy = {**{k: v for k, v in NEWER_POLICY.items() if k in known}, **policy}
    script = _load_script()
    args = script.parse_args([f"--{k}={v}" for k, v in plan.hyperparameters().items()])
    write_s = 1  # a checkpoint of a few bytes
    saves_before_crash = plan.crash_at_step // plan.checkpoint_every
    saves_before_hang = plan.hang_after_step // plan.checkpoint_every - plan.resume_2 // plan.checkpoint_every
    return {
        "name": SCENARIO_NAME,
        "description": (
            "What `sagewarden selftest` rehearses, on the simulated account: one ml.m5.large job "
            "(examples/selftest/train.py) that dies of a NCCL watchdog timeout on attempt 1, hangs "
            "silently on attempt 2 and completes on attempt 3. Serve it with `python -m drill serve "
            "--scenario selftest` and run `sagewarden --local selftest --yes`. Generated by "
            "sagewarden_cli.selftest.scenario_document (a test keeps this file equal to it)."
        ),
        "seed": 11,
        "max_days": 0.1,
        "account": {
            "startup": {"provision_s": 120, "download_s": 90, "upload_s": 30, "stop_s": 30},
            "store": "memory",
        },
        "runs": [
            {
                "name": RUN_NAME,
                "submit_at_min": 0,
                "instance_type": DEFAULT_INSTANCE_TYPE,
                "instance_count": 1,
                "training_job": {"StoppingCondition": {"MaxRuntimeInSeconds": MAX_RUNTIME_S}},
                "policy": dict(policy),
                "profile": {
                    "total_steps": plan.total_steps,
                    "steps_per_minute": round(60 / plan.seconds_per_step, 6),
                    "checkpoint_every_steps": plan.checkpoint_every,
                    "checkpoint_layout": "hf",
                    "checkpoint_write_seconds": write_s,
                    "checkpoint_on_sigterm": False,
                    "gpus_per_host": 0,
                    "gpu_util_per_host": 0.0,
                    "log_lines_per_minute": round(60 / plan.seconds_per_step),
                    "startup_log_lines": [script.banner(args)],
                },
            }
        ],
        "faults": [
            {
                "kind": "algorithm_error",
                "run": RUN_NAME,
                "attempt": plan.crash_attempt,
                "after_training_min": round(plan.crash_after_min + saves_before_crash * write_s / 60, 4),
                "log_lines": script.crash_lines(plan.crash_at_step),
                "once": False,  # every self-test's attempt 1, however often it runs on one server
                "label": "the self-test script's NCCL watchdog timeout",
            },
            {
                "kind": "stuck_dataloader",
                "run": RUN_NAME,
                "attempt": plan.hang_attempt,
                "after_training_min": round(plan.hang_after_min + saves_before_hang * write_s / 60, 4),
                "log_lines": [script.hang_line(plan.hang_after_step)],
                "once": False,
                "label": "the self-test script's silent hang",
            },
        ],
        "expect": {RUN_NAME: {"status": "SUCCEEDED", "attempts": 3}},
    }


def _load_script() -> Any:
    import importlib.util

    path = REPO / SOURCE_DIR / SCRIPT
    spec = importlib.util.spec_from_file_location("sagewarden_selftest_train", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
