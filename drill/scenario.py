"""Drill scenarios are data: a JSON file describing the account, runs, faults and actions.

Format (all times are virtual minutes from the scenario start unless named otherwise):
{
  "name": "default", "description": "...", "seed": 7,
  "max_days": 60,                                  # stop the drill after this much virtual time
  "account": {"quotas": {"ml.p4d.24xlarge": 4},    # per instance type, across non-terminal jobs
              "total_instance_quota": null,
              "startup": {"provision_s": 360, "download_s": 120, ...},   # StartupTimes fields
              "timestamp_form": "millis" | "string",                   # event detail timestamps
              "reconcile_interval_min": 10,
              "store": "dynamodb" | "memory"},          # state table on moto (default) or in memory
  "delivery": {"min_delay_s": 1, "max_delay_s": 20, "duplicate_rate": 0.1, "drop_rate": 0.0},
  "policy_defaults": {...RunPolicy fields...},     # the deployment's defaults
  "runs": [{"name": "llama-8b", "submit_at_min": 0,
            "instance_type": "ml.p4d.24xlarge", "instance_count": 2,   # shortcuts into ResourceConfig
            "max_runtime_hours": 24,                                   # StoppingCondition shortcut
            "training_job": {...},                 # merged over the default CreateTrainingJob request
            "policy": {...RunPolicy overrides...},
            "profile": {...JobProfile fields...},  # how the training script behaves
            "idempotency_key": "optional"}],
  "faults": [{"kind": "hardware", "run": "llama-8b", "attempt": 1, "after_training_min": 90,
              "host": 1, "half_written_checkpoint": true, ...Fault fields...}],
  "actions": [{"at_min": 300, "cancel": "llama-8b"}],
  "expect": {"llama-8b": {"status": "SUCCEEDED", "attempts": 2}}   # optional; checked by --check
}
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from drill.sim_sagemaker import Fault, JobProfile, StartupTimes

SCENARIO_DIR = Path(__file__).parent / "scenarios"


def default_training_job(run_name: str, bucket: str, role_arn: str) -> dict[str, Any]:
    return {
        "AlgorithmSpecification": {
            "TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5-gpu-py311",
            "TrainingInputMode": "FastFile",
        },
        "RoleArn": role_arn,
        "OutputDataConfig": {"S3OutputPath": f"s3://{bucket}/{run_name}/output/"},
        "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 500},
        "StoppingCondition": {"MaxRuntimeInSeconds": 5 * 24 * 3600},
        "CheckpointConfig": {
            "S3Uri": f"s3://{bucket}/{run_name}/checkpoints/",
            "LocalPath": "/opt/ml/checkpoints",
        },
        "HyperParameters": {"epochs": "1"},
        "Environment": {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"},
    }


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = (
            _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
        )
    return out


def _dataclass_from(cls: Any, data: dict[str, Any], where: str) -> Any:
    names = {f.name for f in fields(cls)}
    unknown = set(data) - names
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {sorted(unknown)}; allowed: {sorted(names)}")
    data = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    return cls(**data)


@dataclass
class RunSpec:
    name: str
    submit_at_min: float
    body: dict[str, Any]  # POST /runs body (without training_job defaults filled: see build_body)
    profile: JobProfile
    idempotency_key: str | None = None


@dataclass
class Scenario:
    name: str
    description: str
    seed: int
    max_days: float
    quotas: dict[str, int]
    total_instance_quota: int | None
    startup: StartupTimes
    timestamp_form: str
    reconcile_interval_min: float
    store: str
    delivery: dict[str, Any]
    policy_defaults: dict[str, Any]
    runs: list[RunSpec]
    faults: list[Fault]
    actions: list[dict[str, Any]]
    expect: dict[str, dict[str, Any]] = field(default_factory=dict)
    source: str = ""


def load(path_or_name: str | Path, *, bucket: str, role_arn: str) -> Scenario:
    path = Path(path_or_name)
    if not path.exists():
        path = SCENARIO_DIR / f"{path_or_name}.json"
    data = json.loads(path.read_text())
    return parse(data, bucket=bucket, role_arn=role_arn, source=str(path))


def parse(data: dict[str, Any], *, bucket: str, role_arn: str, source: str = "<inline>") -> Scenario:
    allowed = {
        "name",
        "description",
        "seed",
        "max_days",
        "account",
        "delivery",
        "policy_defaults",
        "runs",
        "faults",
        "actions",
        "expect",
    }
    unknown = set(data) - allowed
    if unknown:
        raise ValueError(f"scenario: unknown field(s) {sorted(unknown)}")
    account = data.get("account", {})
    runs = []
    for i, r in enumerate(data.get("runs", [])):
        where = f"runs[{i}]"
        name = r["name"]
        job = default_training_job(name, bucket, role_arn)
        if "instance_type" in r:
            job["ResourceConfig"]["InstanceType"] = r["instance_type"]
        if "instance_count" in r:
            job["ResourceConfig"]["InstanceCount"] = r["instance_count"]
        if "max_runtime_hours" in r:
            job["StoppingCondition"]["MaxRuntimeInSeconds"] = int(r["max_runtime_hours"] * 3600)
        job = _merge(job, r.get("training_job", {}))
        body = {"name": name, "training_job": job, "policy": r.get("policy", {})}
        extra = set(r) - {
            "name",
            "submit_at_min",
            "instance_type",
            "instance_count",
            "max_runtime_hours",
            "training_job",
            "policy",
            "profile",
            "idempotency_key",
        }
        if extra:
            raise ValueError(f"{where}: unknown field(s) {sorted(extra)}")
        runs.append(
            RunSpec(
                name,
                float(r.get("submit_at_min", 0)),
                body,
                _dataclass_from(JobProfile, r.get("profile", {}), f"{where}.profile"),
                r.get("idempotency_key"),
            )
        )
    faults = [_dataclass_from(Fault, f, f"faults[{i}]") for i, f in enumerate(data.get("faults", []))]
    return Scenario(
        name=data.get("name", Path(source).stem),
        description=data.get("description", ""),
        seed=int(data.get("seed", 0)),
        max_days=float(data.get("max_days", 60)),
        quotas=dict(account.get("quotas", {})),
        total_instance_quota=account.get("total_instance_quota"),
        startup=_dataclass_from(StartupTimes, account.get("startup", {}), "account.startup"),
        timestamp_form=account.get("timestamp_form", "millis"),
        reconcile_interval_min=float(account.get("reconcile_interval_min", 10)),
        store=str(account.get("store", "dynamodb")),
        delivery=dict(data.get("delivery", {})),
        policy_defaults=dict(data.get("policy_defaults", {})),
        runs=runs,
        faults=faults,
        actions=list(data.get("actions", [])),
        expect=dict(data.get("expect", {})),
        source=source,
    )
