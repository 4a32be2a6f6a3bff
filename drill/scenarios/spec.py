"""Drill scenarios are data: a JSON file describing the account, runs, faults and actions.

Format (all times are virtual minutes from the scenario start unless named otherwise):
{
  "name": "default", "description": "...", "seed": 7,
  "max_days": 60,                                  # stop the drill after this much virtual time
  "account": {"quotas": {"ml.p4d.24xlarge": 4},    # per instance type, across non-terminal jobs
              "total_instance_quota": null,
              "spot_quotas": {"ml.p4d.24xlarge": 4},  # managed spot training's own quotas
              "total_spot_instance_quota": null,      # (a spot job counts against these only)
              "startup": {"provision_s": 360, "download_s": 120, ...},   # StartupTimes fields
              "timestamp_form": "millis" | "string",                   # event detail timestamps
              "reconcile_interval_min": 10,
              "log_subscription": true,                # false: the deployment without the log
                                                       # subscription (-c logSubscription=false)
              "heartbeat_outages": [[60, 240]],        # minutes in which the heartbeat pipeline
                                                       # delivers nothing for any job (until null:
                                                       # never heals); the logs are written as always
              "metric_delay": {"gpu": {"base_s": 30, "jitter_s": 60, "late_rate": 0.05, "late_s": 180},
                               "progress": {...}, "heartbeat": {...},   # when datapoints arrive
                               "logs": {"base_s": 1, "jitter_s": 14, "late_rate": 0.05, "late_s": 180}},
                                                       # and log lines (drill/alarms/metric_delay.py); defaults
              "warm_pools": {"quotas": {"ml.p4d.24xlarge": 8},   # warm-pool quota per type (AWS's
                                                                 # default: 0, no pool is kept)
                             "available_after_s": [0, 600],      # end -> pool Available (drawn)
                             "bad_host_refire_min": 5},          # a bad host kept in a pool fails
                                                                 # the next job this long in
              "api_rates": {"sagemaker.DescribeTrainingJob": 2},  # calls/s per operation over the
                                                       # defaults (drill/sim/rate_limits.py); null: unlimited
              "api_retry_wait_s": 35.5,                # how long retries wait for a throttled call
              "describe_after_create_s": [0, 10],      # a new job is missing from DescribeTrainingJob
                                                       # (and Stop/Update) this long, drawn per job
              "training_plans": [{"name": "reserved", "instance_type": "ml.p5.48xlarge", "count": 8,
                                  "windows": [[0, 10], [16, 24]]}],   # SageMaker Training Plans,
                                                       # windows in hours from the start (a run names
                                                       # one: training_job.ResourceConfig.TrainingPlanArn
                                                       # arn:aws:sagemaker:us-east-1:123456789012:training-plan/<name>)
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
  "expect": {"llama-8b": {"status": "SUCCEEDED", "attempts": 2}}   # optional; see EXPECT_FIELDS
}

Fault kinds (``Fault`` in drill/sim/model.py has every field):
  crashes         internal_error, hardware, algorithm_error (log_lines), spot_interruption; any crash
                  may set half_written_checkpoint
  at launch       capacity (Pending for duration_min, then CapacityError), throttle
                  (ThrottlingException), quota (ResourceLimitExceeded naming a limit of quota_limit
                  instances, all in use; default the request's own count: wait and retry; below it: fail);
                  ``attempt`` picks the launch, ``instance_type`` limits it
  hangs           hang_spin, dead_host, stuck_dataloader, hang_spin_logging; during_save starts one
                  half-way through a checkpoint save
  benign phases   checkpoint_save_long, eval_phase, and the silent all-GPUs-idle compile (30 min),
                  nccl_init (8 min), dataloader_pause (4 min); duration_min sets their length
  slow hosts      slow_host: the host's compute per step is slowdown (e.g. 0.15) longer, so the
                  whole job's step rate is 1/(1 + slowdown); for duration_min, or lasting
  ``once: false`` repeats a fault on every matching attempt.

Everything is checked before anything runs (:func:`parse` raises :class:`ScenarioError`, one line
per problem naming its path in the file). See docs/drill.md.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drill.alarms.metric_delay import ALL_SOURCES, DEFAULT_LOG_DELAY, LOG_SOURCE, SourceDelay
from drill.scenarios.check import (
    _Checker,
    _list,
    _tuples,
)
from drill.scenarios.fields import (
    ACCOUNT_FIELDS,
    ACTION_FIELDS,
    DELAY_FIELDS,
    DELIVERY_FIELDS,
    EXPECT_SPECS,
    FAULT_FIELDS,
    PROFILE_FIELDS,
    RUN_FIELDS,
    STARTUP_FIELDS,
    TOP_FIELDS,
    Spec,
    _at_least,
    _did_you_mean,
)
from drill.scenarios.problems import (
    _api_rates,
    _expect_problems,
    _fault_problems,
    _order,
    _outages,
    _policy,
    _RunLimits,
    _span,
    _submit_problems,
    _warm_pools,
)
from drill.sim.model import Fault, JobProfile, StartupTimes
from drill.sim.rate_limits import DEFAULT_RETRY_WAIT_S
from drill.sim.read_after_create import DEFAULT_WINDOW_S, MAX_WINDOW_S
from drill.sim.training_plans import PlanSpec, parse_plans
from drill.sim.warm_pools import WarmPoolSettings

SCENARIO_DIR = Path(__file__).parent


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
    log_subscription: bool
    warm_pools: WarmPoolSettings
    delivery: dict[str, Any]
    policy_defaults: dict[str, Any]
    runs: list[RunSpec]
    faults: list[Fault]
    actions: list[dict[str, Any]]
    expect: dict[str, dict[str, Any]] = field(default_factory=dict)
    source: str = ""
    metric_delay: dict[str, dict[str, Any]] = field(default_factory=dict)  # per source, over the defaults
    api_rates: dict[str, float | None] = field(default_factory=dict)  # over drill.sim.rate_limits' defaults
    api_retry_wait_s: float = DEFAULT_RETRY_WAIT_S
    describe_after_create_s: tuple[float, float] = DEFAULT_WINDOW_S
    training_plans: list[PlanSpec] = field(default_factory=list)  # drill/sim/training_plans.py
    # managed spot training's quotas, per instance type and in all (None: no limit)
    spot_quotas: dict[str, int] = field(default_factory=dict)
    total_spot_instance_quota: int | None = None
    # minutes from the start in which the heartbeat pipeline delivers nothing (until None: never heals)
    heartbeat_outages: list[tuple[float, float | None]] = field(default_factory=list)


class ScenarioError(ValueError):
    """The scenario cannot run; ``problems`` holds one ``path: message`` line per mistake."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__("\n".join(self.lines()))

    def lines(self) -> list[str]:
        return [f"{self.source}: {p}" for p in self.problems]


# ------------------------------------------------------------------------------------------------
# Loading
# ------------------------------------------------------------------------------------------------


def shipped() -> list[str]:
    """The names of the scenarios in drill/scenarios/ (runnable by name)."""
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.json"))


def resolve(path_or_name: str | Path) -> Path:
    """A scenario file: an existing path, or the name of a shipped scenario."""
    path = Path(path_or_name)
    if path.is_file():
        return path
    candidate = SCENARIO_DIR / f"{path_or_name}.json"
    if candidate.is_file():
        return candidate
    names = shipped()
    hint = _did_you_mean(str(path_or_name), names)
    raise ScenarioError(
        str(path_or_name),
        [f"no such file, and no shipped scenario by that name{hint}; shipped: {', '.join(names)}"],
    )


class _Repeated(dict[str, Any]):
    """A JSON object in which a key appeared more than once (``repeated`` names them)."""

    repeated: list[str]


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    if not repeated:
        return dict(pairs)
    out = _Repeated(pairs)
    out.repeated = repeated
    return out


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def load(path_or_name: str | Path, *, bucket: str, role_arn: str) -> Scenario:
    path = resolve(path_or_name)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(str(path), [f"cannot read: {exc}"]) from None
    try:
        data = json.loads(text, object_pairs_hook=_pairs, parse_constant=_constant)
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"{path}:{exc.lineno}:{exc.colno}", [f"invalid JSON: {exc.msg}"]) from None
    except ValueError as exc:  # NaN / Infinity
        raise ScenarioError(str(path), [f"invalid JSON: {exc}"]) from None
    return parse(data, bucket=bucket, role_arn=role_arn, source=str(path))


# ------------------------------------------------------------------------------------------------
# Validation
# ------------------------------------------------------------------------------------------------
def parse(data: Any, *, bucket: str, role_arn: str, source: str = "<inline>") -> Scenario:
    """Validate a scenario's JSON (every problem at once, see the module docstring) and build it."""
    check = _Checker()
    top = check.obj("", data, TOP_FIELDS)
    account = check.obj("account", top.get("account", {}), ACCOUNT_FIELDS)
    quotas: dict[str, int] = {}
    for itype, n in account.get("quotas", {}).items():
        if check.value(f"account.quotas.{itype}", n, Spec("int", check=_at_least(0))):
            quotas[itype] = n
    spot_quotas: dict[str, int] = {}
    for itype, n in account.get("spot_quotas", {}).items():
        if check.value(f"account.spot_quotas.{itype}", n, Spec("int", check=_at_least(0))):
            spot_quotas[itype] = n
    startup = check.obj("account.startup", account.get("startup", {}), STARTUP_FIELDS)
    metric_delay: dict[str, dict[str, Any]] = {}
    delays = check.obj(
        "account.metric_delay", account.get("metric_delay", {}), dict.fromkeys(ALL_SOURCES, Spec("object"))
    )
    for name, raw in delays.items():
        where = f"account.metric_delay.{name}"
        fields_ok = len(check.problems)
        entry = check.obj(where, raw, DELAY_FIELDS)
        if len(check.problems) == fields_ok:
            try:
                base = DEFAULT_LOG_DELAY if name == LOG_SOURCE else SourceDelay()
                dataclasses.replace(base, **entry)
            except ValueError as exc:
                check.add(where, str(exc))
                continue
            metric_delay[name] = dict(entry)
    warm_pools = _warm_pools(check, account.get("warm_pools", {}))
    api_rates = _api_rates(check, account.get("api_rates", {}))
    describe_after_create = _span(
        check, "account.describe_after_create_s", account.get("describe_after_create_s"), MAX_WINDOW_S
    )
    outages = _outages(check, "account.heartbeat_outages", account.get("heartbeat_outages"))
    if outages and not bool(account.get("log_subscription", True)):
        check.add("account.heartbeat_outages", "needs the log subscription (log_subscription: true)")
    plans, plan_problems = parse_plans(account.get("training_plans", []))  # drill/sim/training_plans.py
    for problem in plan_problems:
        check.add(*problem.split(": ", 1))
    delivery = check.obj("delivery", top.get("delivery", {}), DELIVERY_FIELDS)
    if delivery.get("min_delay_s", 0) > delivery.get("max_delay_s", math.inf):
        check.add("delivery.min_delay_s", "must not exceed max_delay_s")
    policy_defaults = top.get("policy_defaults", {})
    defaults_policy = _policy(check, "policy_defaults", policy_defaults, None)
    max_days = float(top.get("max_days", 60))

    runs: list[RunSpec] = []
    run_paths: dict[str, str] = {}
    run_limits: dict[str, _RunLimits] = {}
    for i, raw in enumerate(_list(check, "runs", top.get("runs", []))):
        where = f"runs[{i}]"
        r = check.obj(where, raw, RUN_FIELDS)
        if "name" not in r:
            continue
        name = r["name"]
        if name in run_paths:
            check.add(f"{where}.name", f'"{name}" is already the name of {run_paths[name]}')
            continue
        run_paths[name] = where
        profile_data = check.obj(f"{where}.profile", r.get("profile", {}), PROFILE_FIELDS)
        profile = JobProfile(**_tuples(profile_data))
        job = default_training_job(name, bucket, role_arn)
        if "instance_type" in r:
            job["ResourceConfig"]["InstanceType"] = r["instance_type"]
        if "instance_count" in r:
            job["ResourceConfig"]["InstanceCount"] = r["instance_count"]
        if "max_runtime_hours" in r:
            job["StoppingCondition"]["MaxRuntimeInSeconds"] = int(r["max_runtime_hours"] * 3600)
        job = _merge(job, r.get("training_job", {}))
        body = {"name": name, "training_job": job, "policy": r.get("policy", {})}
        policy = _submit_problems(check, where, r, body, role_arn, defaults_policy)
        runs.append(RunSpec(name, float(r.get("submit_at_min", 0)), body, profile, r.get("idempotency_key")))
        run_limits[name] = _RunLimits.of(job, profile, policy)
        if runs[-1].submit_at_min > max_days * 1440:
            check.add(
                f"{where}.submit_at_min",
                f"{runs[-1].submit_at_min:g} min is after the drill stops (max_days {max_days:g})",
            )

    runs_known = "runs" in top or "runs" not in (data if isinstance(data, dict) else {})
    faults: list[Fault] = []
    fault_paths: list[str] = []
    for i, raw in enumerate(_list(check, "faults", top.get("faults", []))):
        where = f"faults[{i}]"
        f = check.obj(where, raw, FAULT_FIELDS)
        if "kind" not in f or (isinstance(raw, dict) and set(raw) - set(f)):
            continue  # already reported
        if not runs_known:
            continue  # the runs are wrong: no reference to them can be checked
        if "run" in f and f["run"] is not None and f["run"] not in run_paths:
            check.add(f"{where}.run", f'no run named "{f["run"]}"' + _did_you_mean(f["run"], list(run_paths)))
            continue
        try:
            fault = Fault(**_tuples(f))
        except ValueError as exc:
            check.add(where, str(exc))
            continue
        faults.append(fault)
        fault_paths.append(where)
    for fault, where in zip(faults, fault_paths, strict=True):
        _fault_problems(check, where, fault, faults, run_limits)

    actions: list[dict[str, Any]] = []
    submit_at = {r.name: r.submit_at_min for r in runs}
    for i, raw in enumerate(_list(check, "actions", top.get("actions", []))):
        where = f"actions[{i}]"
        a = check.obj(where, raw, ACTION_FIELDS)
        if "cancel" not in a or "at_min" not in a:
            continue
        target = a["cancel"]
        if not runs_known:
            continue
        if target not in run_paths:
            check.add(f"{where}.cancel", f'no run named "{target}"' + _did_you_mean(target, list(run_paths)))
        elif a["at_min"] <= submit_at[target]:
            check.add(
                f"{where}.at_min",
                f"cancels {target} at {a['at_min']:g} min, but it is submitted at {submit_at[target]:g} min",
            )
        elif a["at_min"] > max_days * 1440:
            check.add(
                f"{where}.at_min", f"{a['at_min']:g} min is after the drill stops (max_days {max_days:g})"
            )
        actions.append(a)

    expect: dict[str, dict[str, Any]] = {}
    for run_name, raw in top.get("expect", {}).items():
        where = f"expect.{run_name}"
        if not runs_known:
            continue
        if run_name not in run_paths:
            check.add(where, f'no run named "{run_name}"' + _did_you_mean(run_name, list(run_paths)))
            continue
        e = check.obj(where, raw, EXPECT_SPECS)
        _expect_problems(check, where, e)
        expect[run_name] = e

    if check.problems:
        raise ScenarioError(source, sorted(check.problems, key=_order))
    return Scenario(
        name=top.get("name", Path(source).stem),
        description=top.get("description", ""),
        seed=int(top.get("seed", 0)),
        max_days=max_days,
        quotas=quotas,
        total_instance_quota=account.get("total_instance_quota"),
        spot_quotas=spot_quotas,
        total_spot_instance_quota=account.get("total_spot_instance_quota"),
        startup=StartupTimes(**startup),
        warm_pools=warm_pools,
        timestamp_form=account.get("timestamp_form", "millis"),
        reconcile_interval_min=float(account.get("reconcile_interval_min", 10)),
        store=str(account.get("store", "dynamodb")),
        log_subscription=bool(account.get("log_subscription", True)),
        delivery=dict(delivery),
        metric_delay=metric_delay,
        api_rates=api_rates,
        api_retry_wait_s=float(account.get("api_retry_wait_s", DEFAULT_RETRY_WAIT_S)),
        describe_after_create_s=describe_after_create or DEFAULT_WINDOW_S,
        training_plans=plans,
        heartbeat_outages=outages,
        policy_defaults=dict(policy_defaults),
        runs=runs,
        faults=faults,
        actions=actions,
        expect=expect,
        source=source,
    )
