"""The drill scenario format's field specifications: each object's fields, their types and checks
(:mod:`drill.scenarios.spec` parses with them, :mod:`drill.scenarios.check` walks them)."""

from __future__ import annotations

import dataclasses
import difflib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from drill.account.local import Delivery
from drill.alarms.metric_delay import MAX_DELAY_S, SourceDelay
from drill.sim.model import Fault, JobProfile, StartupTimes
from drill.sim.rate_limits import MAX_RETRY_WAIT_S
from drill.sim.texts import FAULT_KINDS

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

# What an `expect` entry may check, per run (see drill.reports.report.check_expectations).
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


def _show(v: Any) -> str:
    text = json.dumps(v, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _did_you_mean(word: str, options: list[str] | tuple[str, ...]) -> str:
    lowered = {o.lower(): o for o in options}
    if word.lower() in lowered and lowered[word.lower()] != word:
        return f' (did you mean "{lowered[word.lower()]}"?)'
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f' (did you mean "{close[0]}"?)' if close else ""


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
        "nccl_socket_host": _at_least(0),
        "checkpoint_write_seconds": _time,
        "checkpoint_bytes": _at_least(0),
        "gpus_per_host": _at_least(0),  # 0: a CPU instance (no GPUUtilization metric)
        "gpu_util_per_host": _at_least(0),
        "log_lines_per_minute": _at_least(0),
        "uneven_host": _at_least(0),
        "uneven_fraction": _at_least(0),
    },
)
STARTUP_FIELDS = _from_dataclass(
    StartupTimes,
    {"infra_check_on_bad_host": _one_of(("replace", "fail")), "infra_check_miss_rate": _rate},
)
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
        "infra_check_on_bad_host": _one_of(("replace", "fail")),
    },
)
ACCOUNT_FIELDS = {
    "quotas": Spec("object"),
    "total_instance_quota": Spec("int|null", check=_at_least(0)),
    "spot_quotas": Spec("object"),
    "total_spot_instance_quota": Spec("int|null", check=_at_least(0)),
    "startup": Spec("object"),
    "timestamp_form": Spec("str", check=_one_of(("millis", "string"))),
    "reconcile_interval_min": Spec("number", check=_positive),
    "store": Spec("str", check=_one_of(("dynamodb", "memory"))),
    "log_subscription": Spec("bool"),
    "heartbeat_outages": Spec("list"),
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
