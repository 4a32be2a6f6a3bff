"""Run policy: the budgets and knobs a user sets per run (defaults from deploy context).

Pure: parsing and validation here use only the standard library so the API layer, the
domain and the tests agree on one definition of every field and its default.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

HANG_CONFIRMATIONS = ("any", "2-of-3")
CHECKPOINT_LAYOUTS = ("auto", "hf", "megatron", "dcp", "regex")


class PolicyError(ValueError):
    """A policy field is invalid. `field` names it for a field-level API error."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.message = message


@dataclass(frozen=True)
class InstanceChoice:
    instance_type: str
    instance_count: int


@dataclass(frozen=True)
class RunPolicy:
    # --- restart budgets -------------------------------------------------------------------
    max_restarts: int = 10  # infrastructure-class resumes (hardware, NCCL, hang, unknown)
    max_no_progress_restarts: int = 3  # consecutive endings whose checkpoint step did not advance
    max_wall_clock_hours: float = 24.0 * 90  # whole run, across all attempts and waits
    max_cost_usd: float | None = None  # optional, uses instance_hour_price_usd or the estimates table
    instance_hour_price_usd: float | None = None
    # --- waiting ------------------------------------------------------------------------------
    backoff_base_seconds: int = 120
    backoff_cap_seconds: int = 1800
    backoff_jitter: float = 0.2  # +/- fraction, deterministic per run and try
    throttle_backoff_seconds: int = 30
    quota_wait_max_hours: float = 24.0
    capacity_wait_max_hours: float = 12.0
    instance_fallbacks: tuple[InstanceChoice, ...] = ()
    # --- faster restarts ------------------------------------------------------------------------
    keep_alive_seconds: int = 0  # SageMaker warm pool (ResourceConfig.KeepAlivePeriodInSeconds)
    environment_defaults: tuple[tuple[str, str], ...] = ()  # added to every attempt, user values win
    # --- classification ---------------------------------------------------------------------
    oom_is_user_error: bool = True
    # --- checkpoints ------------------------------------------------------------------------
    checkpoint_layout: str = "auto"
    checkpoint_dir_regex: str | None = None
    checkpoint_marker: str | None = None
    # --- hang detection ---------------------------------------------------------------------
    hang_detection: bool = True
    log_silence_minutes: int = 30
    gpu_idle_percent: float = 1.0  # per GPU; alarms scale it by GPUs per host
    gpu_idle_minutes: int = 20
    checkpoint_stale_minutes: int | None = None
    progress_metric: str | None = None  # a MetricDefinitions name (e.g. "train:throughput")
    progress_stall_minutes: int = 30  # ... that reported nothing for this long
    hang_confirmation: str = "any"
    hang_grace_minutes: int = 15
    # --- sharing the account's quota ------------------------------------------------------------
    priority: int = 0  # runs waiting for quota get released instances highest priority first
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    # ----------------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Mapping[str, Any], base: RunPolicy | None = None) -> RunPolicy:
        """Apply `data` (JSON-shaped overrides) on top of `base` (or the defaults)."""
        if not isinstance(data, Mapping):
            raise PolicyError("policy", "must be an object")
        current = base or cls()
        known = {f.name: f for f in dataclasses.fields(cls) if f.name != "extra"}
        changes: dict[str, Any] = {}
        for key, value in data.items():
            if key not in known:
                raise PolicyError(key, "unknown policy field")
            changes[key] = _coerce(key, value)
        policy = dataclasses.replace(current, **changes)
        policy.validate()
        return policy

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            if f.name == "instance_fallbacks":
                value = [
                    {"instance_type": c.instance_type, "instance_count": c.instance_count} for c in value
                ]
            elif f.name == "environment_defaults":
                value = dict(value)
            out[f.name] = value
        return out

    def validate(self) -> None:
        _positive_int("max_restarts", self.max_restarts, allow_zero=True)
        _positive_int("max_no_progress_restarts", self.max_no_progress_restarts)
        _positive_number("max_wall_clock_hours", self.max_wall_clock_hours)
        if self.max_cost_usd is not None:
            _positive_number("max_cost_usd", self.max_cost_usd)
        if self.instance_hour_price_usd is not None:
            _positive_number("instance_hour_price_usd", self.instance_hour_price_usd)
        _positive_int("backoff_base_seconds", self.backoff_base_seconds)
        _positive_int("backoff_cap_seconds", self.backoff_cap_seconds)
        if self.backoff_cap_seconds < self.backoff_base_seconds:
            raise PolicyError("backoff_cap_seconds", "must be >= backoff_base_seconds")
        if not 0 <= self.backoff_jitter < 1:
            raise PolicyError("backoff_jitter", "must be in [0, 1)")
        _positive_int("throttle_backoff_seconds", self.throttle_backoff_seconds)
        _positive_number("quota_wait_max_hours", self.quota_wait_max_hours)
        _positive_number("capacity_wait_max_hours", self.capacity_wait_max_hours)
        _positive_int("keep_alive_seconds", self.keep_alive_seconds, allow_zero=True)
        if self.keep_alive_seconds > 3600:
            raise PolicyError("keep_alive_seconds", "SageMaker allows at most 3600")
        if self.checkpoint_layout not in CHECKPOINT_LAYOUTS:
            raise PolicyError("checkpoint_layout", f"must be one of {', '.join(CHECKPOINT_LAYOUTS)}")
        if self.checkpoint_layout == "regex" and not (self.checkpoint_dir_regex and self.checkpoint_marker):
            raise PolicyError(
                "checkpoint_dir_regex", "regex layout needs checkpoint_dir_regex and checkpoint_marker"
            )
        _positive_int("log_silence_minutes", self.log_silence_minutes)
        _positive_number("gpu_idle_percent", self.gpu_idle_percent)
        _positive_int("gpu_idle_minutes", self.gpu_idle_minutes)
        if self.checkpoint_stale_minutes is not None:
            _positive_int("checkpoint_stale_minutes", self.checkpoint_stale_minutes)
        if self.progress_metric is not None and not 1 <= len(self.progress_metric) <= 255:
            raise PolicyError("progress_metric", "must be the Name of one of the job's MetricDefinitions")
        _positive_int("progress_stall_minutes", self.progress_stall_minutes)
        if self.hang_confirmation not in HANG_CONFIRMATIONS:
            raise PolicyError("hang_confirmation", f"must be one of {', '.join(HANG_CONFIRMATIONS)}")
        _positive_int("hang_grace_minutes", self.hang_grace_minutes, allow_zero=True)
        if not -1000 <= self.priority <= 1000:
            raise PolicyError("priority", "must be an integer from -1000 to 1000")


def _coerce(key: str, value: Any) -> Any:
    if key == "instance_fallbacks":
        if not isinstance(value, list):
            raise PolicyError(key, "must be a list of {instance_type, instance_count}")
        choices = []
        for i, item in enumerate(value):
            if not isinstance(item, Mapping) or set(item) != {"instance_type", "instance_count"}:
                raise PolicyError(f"{key}[{i}]", "needs exactly instance_type and instance_count")
            itype, count = item["instance_type"], item["instance_count"]
            if not isinstance(itype, str) or not itype.startswith("ml."):
                raise PolicyError(f"{key}[{i}].instance_type", "must look like ml.<family>.<size>")
            if not isinstance(count, int) or isinstance(count, bool) or count < 1:
                raise PolicyError(f"{key}[{i}].instance_count", "must be a positive integer")
            choices.append(InstanceChoice(itype, count))
        return tuple(choices)
    if key == "environment_defaults":
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise PolicyError(key, "must be an object of string to string")
        return tuple(sorted(value.items()))
    default = dataclasses.fields(RunPolicy)
    annotation = next(f.type for f in default if f.name == key)
    text = str(annotation)
    if value is None:
        if "None" in text:
            return None
        raise PolicyError(key, "must not be null")
    if text.startswith("bool"):
        if not isinstance(value, bool):
            raise PolicyError(key, "must be a boolean")
        return value
    if text.startswith("int"):
        if not isinstance(value, int) or isinstance(value, bool):
            raise PolicyError(key, "must be an integer")
        return value
    if text.startswith("float"):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise PolicyError(key, "must be a number")
        return float(value)
    if text.startswith("str"):
        if not isinstance(value, str):
            raise PolicyError(key, "must be a string")
        return value
    raise PolicyError(key, "unsupported field")  # pragma: no cover - every field is handled above


def _positive_int(name: str, value: int, *, allow_zero: bool = False) -> None:
    if value < 0 or (value == 0 and not allow_zero):
        raise PolicyError(name, "must be a positive integer" if not allow_zero else "must be >= 0")


def _positive_number(name: str, value: float) -> None:
    if value <= 0:
        raise PolicyError(name, "must be a positive number")
