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
              "log_subscription": true,                # false: the deployment without the log
                                                       # subscription (-c logSubscription=false)
              "metric_delay": {"gpu": {"base_s": 30, "jitter_s": 60, "late_rate": 0.05, "late_s": 180},
                               "progress": {...}, "heartbeat": {...}},  # when datapoints arrive
                                                       # (drill/metric_delay.py); these are the defaults
              "warm_pools": {"quotas": {"ml.p4d.24xlarge": 8},   # warm-pool quota per type (AWS's
                                                                 # default: 0, no pool is kept)
                             "available_after_s": [0, 300],      # end -> pool Available (drawn)
                             "bad_host_refire_min": 5},          # a bad host kept in a pool fails
                                                                 # the next job this long in
              "api_rates": {"sagemaker.DescribeTrainingJob": 2},  # calls/s per operation over the
                                                       # defaults (drill/rate_limits.py); null: unlimited
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

Everything is checked before anything runs (:func:`parse` raises :class:`ScenarioError` with one
line per problem, each naming its path in the file, e.g. ``faults[2].run: no run named
"lama-8b" (did you mean "llama-8b"?)``): JSON syntax, unknown fields (with a did-you-mean),
missing required fields, types, negative times, references to runs, the runs' requests and
policies as the API would check them, expectations, and faults that can never fire.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from drill.account import Delivery
from drill.metric_delay import MAX_DELAY_S, SOURCES, SourceDelay
from drill.rate_limits import DEFAULT_RETRY_WAIT_S, MAX_RETRY_WAIT_S, known_operations
from drill.sim.read_after_create import DEFAULT_WINDOW_S, MAX_WINDOW_S
from drill.sim.texts import CRASH_KINDS, PAUSE_KINDS, START_FAULTS
from drill.sim.training_plans import PlanSpec, parse_plans
from drill.sim.warm_pools import WarmPoolSettings
from drill.sim_sagemaker import FAULT_KINDS, Fault, JobProfile, StartupTimes

SCENARIO_DIR = Path(__file__).parent / "scenarios"

RUN_STATUSES = (
    "SUBMITTED",
    "STARTING",
    "TRAINING",
    "RETRY_WAIT",
    "STOPPING",
    "SUCCEEDED",
    "FAILED",
    "CANCELLED",
)
CHECKPOINT_LAYOUTS = ("hf", "megatron", "dcp")
DEFAULT_MAX_RESTARTS = 10  # RunPolicy's default, when neither the run nor policy_defaults sets one

# What an `expect` entry may check, per run (see drill.report.check_expectations).
EXPECT_FIELDS: dict[str, str] = {
    "status": "the run's final status",
    "attempts": "how many attempts (SageMaker jobs) the run had",
    "restarts": "restarts counted against max_restarts",
    "restarts_by_class": 'restarts by class, e.g. {"HANG": 1}',
    "end_classes": "each attempt's end class, in order (null for an attempt still live)",
    "resumed_from_steps": "each attempt's resumed checkpoint step, in order (null for a fresh start)",
    "max_gpu_hours_lost": "an upper bound on the GPU-hours the run's faults cost",
    "alerts_include": 'alert events that must have been published for the run, e.g. ["hang.detected"]',
    "hangs_detected_by": (
        'hang signals any of which may catch the run\'s hangs, e.g. ["log_silence"]: the supervisor stopped '
        "at least one attempt as hung, and each such stop names one of them"
    ),
}


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
    api_rates: dict[str, float | None] = field(default_factory=dict)  # over drill.rate_limits' defaults
    api_retry_wait_s: float = DEFAULT_RETRY_WAIT_S
    describe_after_create_s: tuple[float, float] = DEFAULT_WINDOW_S
    training_plans: list[PlanSpec] = field(default_factory=list)  # drill/sim/training_plans.py


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
# Field specifications
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """One field: its JSON type(s), whether it is required, and a check of its value."""

    types: str  # "int", "number", "str", "bool", "object", "list", "str[]", "int|null", ...
    required: bool = False
    check: Callable[[Any], str | None] | None = None


def _at_least(low: float, what: str = "") -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        if v < low:
            return f"must be at least {low:g}{what}, got {_show(v)}"
        return None

    return check


def _positive(v: Any) -> str | None:
    return None if v > 0 else f"must be greater than 0, got {_show(v)}"


def _time(v: Any) -> str | None:
    return None if v >= 0 else f"negative time {_show(v)}: times count from the scenario start (or the event)"


def _rate(v: Any) -> str | None:
    return None if 0 <= v <= 1 else f"must be between 0 and 1, got {_show(v)}"


def _one_of(options: tuple[str, ...] | frozenset[str]) -> Callable[[Any], str | None]:
    ordered = sorted(options)

    def check(v: Any) -> str | None:
        if v in options:
            return None
        hint = _did_you_mean(str(v), ordered)
        return f"unknown value {_show(v)}{hint}" if hint else f"{_show(v)} is not one of {', '.join(ordered)}"

    return check


def _is_time_field(name: str) -> bool:
    return name.endswith(("_min", "_s", "_hours", "_days"))


def _from_dataclass(cls: Any, checks: Mapping[str, Callable[[Any], str | None]]) -> dict[str, Spec]:
    """Field specs from a dataclass's annotations (``int``, ``float | None``, ``tuple[str, ...]``)."""
    out: dict[str, Spec] = {}
    for f in fields(cls):
        if f.name.startswith("_"):
            continue
        annotation = (f.type if isinstance(f.type, str) else f.type.__name__).replace(" ", "")
        parts = annotation.split("|")
        names = []
        for part in parts:
            names.append({"float": "number", "tuple[str,...]": "str[]", "None": "null"}.get(part, part))
        check = checks.get(f.name)
        if check is None and _is_time_field(f.name) and ("number" in names or "int" in names):
            check = _time
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        out[f.name] = Spec("|".join(names), required=required, check=check)
    return out


PROFILE_FIELDS = _from_dataclass(
    JobProfile,
    {
        "total_steps": _at_least(1),
        "steps_per_minute": _at_least(0),
        "checkpoint_every_steps": _at_least(0),
        "checkpoint_layout": _one_of(CHECKPOINT_LAYOUTS),
        "nccl_transport": _one_of(("efa", "socket")),
        "checkpoint_write_seconds": _time,
        "checkpoint_bytes": _at_least(0),
        "gpus_per_host": _at_least(0),  # 0: a CPU instance (no GPUUtilization metric)
        "gpu_util_per_host": _at_least(0),
        "log_lines_per_minute": _at_least(0),
        "uneven_host": _at_least(0),
        "uneven_fraction": _at_least(0),
    },
)
STARTUP_FIELDS = _from_dataclass(StartupTimes, {"infra_check_on_bad_host": _one_of(("replace", "fail"))})
DELIVERY_FIELDS = _from_dataclass(
    Delivery, {"duplicate_rate": _rate, "drop_rate": _rate, "min_delay_s": _time, "max_delay_s": _time}
)


def _within(v: Any, high: float) -> str | None:
    if v < 0 or v > high:
        return f"must be within 0..{high:g} seconds, got {_show(v)}"
    return None


def _delay(v: Any) -> str | None:
    if v < 0 or v > MAX_DELAY_S:
        return f"must be within 0..{MAX_DELAY_S:g} seconds, got {_show(v)}"
    return None


DELAY_FIELDS = _from_dataclass(
    SourceDelay, {"base_s": _delay, "jitter_s": _delay, "late_rate": _rate, "late_s": _delay}
)
FAULT_FIELDS = _from_dataclass(
    Fault,
    {
        "kind": _one_of(FAULT_KINDS),
        "attempt": _at_least(1),
        "host": _at_least(1),
        "duration_min": _time,
        "quota_limit": _at_least(0),
        "slowdown": _positive,
    },
)
ACCOUNT_FIELDS = {
    "quotas": Spec("object"),
    "total_instance_quota": Spec("int|null", check=_at_least(0)),
    "startup": Spec("object"),
    "timestamp_form": Spec("str", check=_one_of(("millis", "string"))),
    "reconcile_interval_min": Spec("number", check=_positive),
    "store": Spec("str", check=_one_of(("dynamodb", "memory"))),
    "log_subscription": Spec("bool"),
    "metric_delay": Spec("object"),
    "warm_pools": Spec("object"),
    "api_rates": Spec("object"),
    "api_retry_wait_s": Spec("number", check=lambda v: _within(v, MAX_RETRY_WAIT_S)),
    "describe_after_create_s": Spec("list"),
    "training_plans": Spec("list"),
}
WARM_POOL_FIELDS = {
    "quotas": Spec("object"),
    "available_after_s": Spec("list"),
    "bad_host_refire_min": Spec("number", check=_time),
}
RUN_FIELDS = {
    "name": Spec("str", required=True),
    "submit_at_min": Spec("number", check=_time),
    "instance_type": Spec("str"),
    "instance_count": Spec("int", check=_at_least(1)),
    "max_runtime_hours": Spec("number", check=_positive),
    "training_job": Spec("object"),
    "policy": Spec("object"),
    "profile": Spec("object"),
    "idempotency_key": Spec("str"),
}
ACTION_FIELDS = {"at_min": Spec("number", required=True, check=_time), "cancel": Spec("str", required=True)}
TOP_FIELDS = {
    "name": Spec("str"),
    "description": Spec("str"),
    "seed": Spec("int"),
    "max_days": Spec("number", check=_positive),
    "account": Spec("object"),
    "delivery": Spec("object"),
    "policy_defaults": Spec("object"),
    "runs": Spec("list"),
    "faults": Spec("list"),
    "actions": Spec("list"),
    "expect": Spec("object"),
}
EXPECT_SPECS = {
    "status": Spec("str", check=_one_of(RUN_STATUSES)),
    "attempts": Spec("int", check=_at_least(1)),
    "restarts": Spec("int", check=_at_least(0)),
    "restarts_by_class": Spec("object"),
    "end_classes": Spec("list"),
    "resumed_from_steps": Spec("list"),
    "max_gpu_hours_lost": Spec("number", check=_at_least(0)),
    "alerts_include": Spec("str[]"),
    "hangs_detected_by": Spec("str[]"),
}
assert set(EXPECT_SPECS) == set(EXPECT_FIELDS)


# ------------------------------------------------------------------------------------------------
# Validation
# ------------------------------------------------------------------------------------------------


def _show(v: Any) -> str:
    text = json.dumps(v, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _did_you_mean(word: str, options: list[str] | tuple[str, ...]) -> str:
    lowered = {o.lower(): o for o in options}
    if word.lower() in lowered and lowered[word.lower()] != word:
        return f' (did you mean "{lowered[word.lower()]}"?)'
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f' (did you mean "{close[0]}"?)' if close else ""


def _type_name(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int):
        return "an integer"
    if isinstance(v, float):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list | tuple):
        return "a list"
    return "an object"


_EXPECTED = {
    "int": "an integer",
    "number": "a number",
    "str": "a string",
    "bool": "true or false",
    "object": "an object",
    "list": "a list",
    "str[]": "a list of strings",
    "null": "null",
}


def _matches(v: Any, t: str) -> bool:
    if t == "null":
        return v is None
    if t == "int":
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "number":
        return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    if t == "str":
        return isinstance(v, str)
    if t == "bool":
        return isinstance(v, bool)
    if t == "object":
        return isinstance(v, dict)
    if t == "list":  # a tuple too: Python callers build scenarios from dataclasses.asdict
        return isinstance(v, list | tuple)
    if t == "str[]":
        return isinstance(v, list | tuple) and all(isinstance(x, str) for x in v)
    raise AssertionError(f"unknown spec type {t}")


class _Checker:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def add(self, path: str, message: str) -> None:
        line = f"{path}: {message}" if path else message
        if line not in self.problems:
            self.problems.append(line)

    def obj(self, path: str, value: Any, specs: Mapping[str, Spec]) -> dict[str, Any]:
        """Check an object against ``specs``; returns its fields that passed (others dropped)."""
        if not isinstance(value, dict):
            self.add(path, f"expected an object, got {_type_name(value)}")
            return {}
        for key in getattr(value, "repeated", ()):
            self.add(_join(path, key), "appears more than once in the object")
        good: dict[str, Any] = {}
        for key, v in value.items():
            spec = specs.get(key)
            where = _join(path, key)
            if spec is None:
                self.add(where, "unknown field" + _did_you_mean(key, list(specs)))
                continue
            if self.value(where, v, spec):
                good[key] = v
        for key, spec in specs.items():
            if spec.required and key not in value:
                self.add(_join(path, key), "required field missing")
        return good

    def value(self, path: str, v: Any, spec: Spec) -> bool:
        types = spec.types.split("|")
        if not any(_matches(v, t) for t in types):
            want = " or ".join(_EXPECTED[t] for t in types)
            shown = "" if isinstance(v, dict | list | tuple) else f" ({_show(v)})"
            self.add(path, f"expected {want}, got {_type_name(v)}{shown}")
            return False
        if v is not None and spec.check is not None and not isinstance(v, dict | list | tuple):
            problem = spec.check(v)
            if problem:
                self.add(path, problem)
                return False
        return True


def _tuples(data: dict[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list | tuple) else v for k, v in data.items()}


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _list(check: _Checker, path: str, value: Any) -> list[Any]:
    if not isinstance(value, list | tuple):
        return []  # the type is reported by the top-level check
    return list(value)


def parse(data: Any, *, bucket: str, role_arn: str, source: str = "<inline>") -> Scenario:
    """Validate a scenario's JSON (every problem at once, see the module docstring) and build it."""
    check = _Checker()
    top = check.obj("", data, TOP_FIELDS)
    account = check.obj("account", top.get("account", {}), ACCOUNT_FIELDS)
    quotas: dict[str, int] = {}
    for itype, n in account.get("quotas", {}).items():
        if check.value(f"account.quotas.{itype}", n, Spec("int", check=_at_least(0))):
            quotas[itype] = n
    startup = check.obj("account.startup", account.get("startup", {}), STARTUP_FIELDS)
    metric_delay: dict[str, dict[str, Any]] = {}
    delays = check.obj(
        "account.metric_delay", account.get("metric_delay", {}), dict.fromkeys(SOURCES, Spec("object"))
    )
    for name, raw in delays.items():
        where = f"account.metric_delay.{name}"
        fields_ok = len(check.problems)
        entry = check.obj(where, raw, DELAY_FIELDS)
        if len(check.problems) == fields_ok:
            try:
                SourceDelay(**entry)
            except ValueError as exc:
                check.add(where, str(exc))
                continue
            metric_delay[name] = dict(entry)
    warm_pools = _warm_pools(check, account.get("warm_pools", {}))
    api_rates = _api_rates(check, account.get("api_rates", {}))
    describe_after_create = _span(
        check, "account.describe_after_create_s", account.get("describe_after_create_s"), MAX_WINDOW_S
    )
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
        policy_defaults=dict(policy_defaults),
        runs=runs,
        faults=faults,
        actions=actions,
        expect=expect,
        source=source,
    )


def _api_rates(check: _Checker, raw: Any) -> dict[str, float | None]:
    """``account.api_rates``: calls per second per operation ("service.Operation", one the model
    limits), a positive number or null (not limited)."""
    ops = known_operations()
    data = check.obj("account.api_rates", raw, dict.fromkeys(ops, Spec("number|null")))
    out: dict[str, float | None] = {}
    for op, rate in data.items():
        if rate is not None and rate <= 0:
            check.add(
                f"account.api_rates.{op}", f"must be a positive number of calls per second, got {_show(rate)}"
            )
            continue
        out[op] = None if rate is None else float(rate)
    return out


def _span(check: _Checker, where: str, raw: Any, high: float) -> tuple[float, float] | None:
    """A ``[low, high]`` range of seconds with 0 <= low <= high <= ``high`` (None when absent)."""
    if raw is None:
        return None
    if (
        isinstance(raw, list)
        and len(raw) == 2
        and all(_matches(v, "number") for v in raw)
        and 0 <= raw[0] <= raw[1] <= high
    ):
        return (float(raw[0]), float(raw[1]))
    check.add(where, f"expected [low, high] in seconds with 0 <= low <= high <= {high:g}, got {_show(raw)}")
    return None


def _warm_pools(check: _Checker, raw: Any) -> WarmPoolSettings:
    """``account.warm_pools`` (every field optional; AWS's defaults otherwise)."""
    where = "account.warm_pools"
    data = check.obj(where, raw, WARM_POOL_FIELDS)
    quotas: dict[str, int] = {}
    for itype, n in data.get("quotas", {}).items():
        if check.value(f"{where}.quotas.{itype}", n, Spec("int", check=_at_least(0))):
            quotas[itype] = n
    span = WarmPoolSettings().available_after_s
    if "available_after_s" in data:
        raw_span = data["available_after_s"]
        if (
            len(raw_span) == 2
            and all(_matches(v, "int") for v in raw_span)
            and 0 <= raw_span[0] <= raw_span[1]
        ):
            span = (raw_span[0], raw_span[1])
        else:
            check.add(
                f"{where}.available_after_s",
                f"expected [low, high] in whole seconds with 0 <= low <= high, got {_show(raw_span)}",
            )
    refire = float(data.get("bad_host_refire_min", WarmPoolSettings().bad_host_refire_min))
    return WarmPoolSettings(quotas=quotas, available_after_s=span, bad_host_refire_min=refire)


def _order(problem: str) -> tuple[int, int]:
    """Problems in the order of the file: by top-level field, then by list index."""
    m = re.match(r"([A-Za-z_]+)(?:\[(\d+)\])?", problem)
    if m is None or m.group(1) not in TOP_FIELDS:
        return (-1, 0)
    return (list(TOP_FIELDS).index(m.group(1)), int(m.group(2) or 0))


def _policy(check: _Checker, path: str, data: Any, base: Any) -> Any:
    """The RunPolicy ``data`` makes over ``base`` (None when it is invalid; the problem is added)."""
    from sagewarden.domain.policy import PolicyError, RunPolicy

    if not isinstance(data, dict):
        check.add(path, f"expected an object, got {_type_name(data)}")
        return None
    try:
        return RunPolicy.from_dict(data, base=base)
    except PolicyError as exc:
        message = exc.message
        if message == "unknown policy field":
            message = "unknown policy field" + _did_you_mean(
                exc.field, [f.name for f in fields(RunPolicy) if f.name != "extra"]
            )
        check.add(_join(path, exc.field) if exc.field != "policy" else path, message)
        return None


# Where a problem the API finds in the request came from, when a run shortcut set it.
_SHORTCUTS = {
    "training_job.ResourceConfig.InstanceType": "instance_type",
    "training_job.ResourceConfig.InstanceCount": "instance_count",
    "training_job.StoppingCondition.MaxRuntimeInSeconds": "max_runtime_hours",
}


def _submit_problems(
    check: _Checker, where: str, r: dict[str, Any], body: dict[str, Any], role_arn: str, defaults: Any
) -> Any:
    """The run's POST /runs body as the API will check it; returns its policy (None if invalid)."""
    from sagewarden.api.errors import InvalidRequest
    from sagewarden.api.validation import validate_submit
    from sagewarden.keys import DEFAULT_JOB_PREFIX

    if defaults is None:  # policy_defaults are wrong: reported already
        return None
    try:
        submit = validate_submit(
            body, allowed_roles=frozenset({role_arn}), job_prefix=DEFAULT_JOB_PREFIX, policy_defaults=defaults
        )
    except InvalidRequest as exc:
        for e in exc.errors:
            shortcut = _SHORTCUTS.get(e.field)
            if shortcut and shortcut in r:
                path = f"{where}.{shortcut}"
            elif e.field == "body":
                path = where
            else:
                path = f"{where}.{e.field}"
            check.add(path, re.sub(r"; did you mean (\S+)\?$", r' (did you mean "\1"?)', e.message))
        return None
    return submit.policy


@dataclass(frozen=True)
class _RunLimits:
    """What bounds when a run's faults can fire."""

    hosts: int  # the most hosts any of its instance choices has
    max_restarts: int
    max_runtime_min: float
    training_min: float  # the whole run's training, start to end, saves included
    checkpoint_every_steps: int
    checkpoint_interval_min: float

    @staticmethod
    def of(job: dict[str, Any], profile: JobProfile, policy: Any) -> _RunLimits:
        counts = [int(job["ResourceConfig"].get("InstanceCount") or 1)]
        if policy is not None:
            counts += [c.instance_count for c in policy.instance_fallbacks]
        spm = profile.steps_per_minute
        every = profile.checkpoint_every_steps
        saves = profile.total_steps // every if every > 0 else 0
        training = (
            profile.total_steps / spm + saves * profile.checkpoint_write_seconds / 60 if spm > 0 else math.inf
        )
        return _RunLimits(
            hosts=max(counts),
            max_restarts=policy.max_restarts if policy is not None else DEFAULT_MAX_RESTARTS,
            max_runtime_min=int((job.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds", 86_400)) / 60,
            training_min=training,
            checkpoint_every_steps=every,
            checkpoint_interval_min=every / spm if spm > 0 and every > 0 else math.inf,
        )


def _fault_problems(
    check: _Checker, where: str, f: Fault, every: list[Fault], runs: Mapping[str, _RunLimits]
) -> None:
    """Fields that do not apply to the fault's kind, and faults that can never fire."""
    explicit = {k for k, v in dataclasses.asdict(f).items() if v != Fault.__dataclass_fields__[k].default}
    if f.kind in START_FAULTS:
        for name in (
            "after_training_min",
            "after_run_training_min",
            "half_written_checkpoint",
            "during_save",
        ):
            if name in explicit:
                check.add(
                    f"{where}.{name}",
                    f"{f.kind} acts when a job is created (CreateTrainingJob), not during training: "
                    f"{name} never applies (pick the launch with attempt)",
                )
    if "duration_min" in explicit and f.kind not in PAUSE_KINDS and f.kind not in ("capacity", "slow_host"):
        check.add(
            f"{where}.duration_min",
            "applies to checkpoint_save_long, eval_phase, slow_host and capacity only",
        )
    if "slowdown" in explicit and f.kind != "slow_host":
        check.add(f"{where}.slowdown", "applies to slow_host only")
    if "half_written_checkpoint" in explicit and f.kind not in CRASH_KINDS:
        check.add(
            f"{where}.half_written_checkpoint",
            "applies to crashes only (internal_error, hardware, "
            "algorithm_error); for a hang in a save, use during_save",
        )
    if "after_training_min" in explicit and "after_run_training_min" in explicit:
        check.add(
            f"{where}.after_run_training_min", "set after_training_min or after_run_training_min, not both"
        )
    limits = runs.get(f.run) if f.run is not None else None
    if limits is None:
        return  # any run's jobs: nothing to bound it by
    if f.host > limits.hosts and f.kind not in START_FAULTS:
        check.add(
            f"{where}.host",
            f"{f.run} has {limits.hosts} host(s) (algo-1..algo-{limits.hosts}); host {f.host} does not exist",
        )
    if f.attempt is not None:
        # attempts beyond the restart budget exist only through endings it does not count: capacity
        # fallbacks, spot interruptions and MaxRuntime segments
        uncounted = 0
        for other in every:
            if other.run == f.run and other.kind in ("capacity", "spot_interruption"):
                uncounted += 1 if other.once else 10**6
        segments = (
            math.ceil(2 * limits.training_min / limits.max_runtime_min) if limits.max_runtime_min else 0
        )
        most = 1 + limits.max_restarts + uncounted + segments
        if f.attempt > most:
            check.add(
                f"{where}.attempt",
                f"{f.run} never reaches attempt {f.attempt}: its restart budget (max_restarts "
                f"{limits.max_restarts}) allows at most {most} attempts here",
            )
    if f.kind in START_FAULTS:
        return
    if "after_training_min" in explicit:
        at = f.after_training_min
        if at >= limits.max_runtime_min:
            check.add(
                f"{where}.after_training_min",
                f"{at:g} min into an attempt never comes: {f.run}'s MaxRuntime stops each attempt after "
                f"{limits.max_runtime_min:g} min",
            )
        else:
            pauses = sum((o.duration_min or 15.0) for o in every if o.run == f.run and o.kind in PAUSE_KINDS)
            done = limits.training_min + pauses
            if at >= done:
                check.add(
                    f"{where}.after_training_min",
                    f"{at:g} min into an attempt never comes: {f.run} finishes its training in about "
                    f"{done:,.0f} min",
                )
    if f.during_save and limits.checkpoint_every_steps <= 0:
        check.add(
            f"{where}.during_save", f"{f.run} never saves a checkpoint (profile.checkpoint_every_steps 0)"
        )


def _expect_problems(check: _Checker, where: str, e: dict[str, Any]) -> None:
    for cls, n in e.get("restarts_by_class", {}).items():
        check.value(f"{where}.restarts_by_class.{cls}", n, Spec("int", check=_at_least(1)))
    for i, v in enumerate(e.get("end_classes", [])):
        check.value(f"{where}.end_classes[{i}]", v, Spec("str|null"))
    for i, v in enumerate(e.get("resumed_from_steps", [])):
        check.value(f"{where}.resumed_from_steps[{i}]", v, Spec("int|null", check=_at_least(0)))
    for i, v in enumerate(e.get("hangs_detected_by", [])):
        if not re.fullmatch(r"[a-z][a-z0-9_]*", v):
            check.add(
                f"{where}.hangs_detected_by[{i}]", f"{_show(v)} is not a signal name (e.g. log_silence)"
            )
    if e.get("hangs_detected_by") == []:
        check.add(f"{where}.hangs_detected_by", "names no signal")
    n = e.get("attempts")
    for key in ("end_classes", "resumed_from_steps"):
        if n is not None and key in e and len(e[key]) != n:
            check.add(f"{where}.{key}", f"lists {len(e[key])} attempt(s), but attempts is {n}")
