"""Run policy: the budgets and knobs a user sets per run (defaults from deploy context), parsed and
validated with the standard library only. Why: docs/recovery.md (*Policy fields*)."""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

HANG_CONFIRMATIONS = ("any", "2-of-3")
STRAGGLER_ACTIONS = ("alert", "restart")
TRAINING_PLAN_FALLBACKS = ("none", "on_demand")
CHECKPOINT_LAYOUTS = ("auto", "hf", "megatron", "dcp", "regex")
CHECKPOINT_RETIRED = ("archive", "delete")
MAX_CHECKPOINT_KEEP = 1000
MAX_TEXT = 256  # checkpoint_dir_regex, checkpoint_marker, progress_metric
MAX_FALLBACKS = 10
# Instances of one training job (the request's InstanceCount and every fallback's): SageMaker's
# field is a 32-bit integer with no documented maximum, and its per-type quotas are far lower (the
# largest published runs used ~2,000 instances), so a count above this is a typo, not a plan.
MAX_INSTANCES = 10_000
MAX_FALLBACK_INSTANCES = MAX_INSTANCES
MAX_ENVIRONMENT_DEFAULTS = 50
# checkpoint_keep_dirs: names or fnmatch patterns of checkpoint directories retention never retires
MAX_KEEP_DIRS = 20
MAX_KEEP_DIR_TEXT = 128


class PolicyError(ValueError):
    """A policy field is invalid. `field` names it for a field-level API error."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.message = message


@dataclass(frozen=True)
class Range:
    """Allowed values of one numeric policy field: low..high, each end open or closed."""

    low: float
    high: float
    low_open: bool = False
    high_open: bool = False

    def contains(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    def describe(self) -> str:
        """`1 ≤ x ≤ 1,440`, `0 < x ≤ 100`, `0 ≤ x < 1`: the README's range column quotes this."""
        return f"{_num(self.low)} {'<' if self.low_open else '≤'} x {'<' if self.high_open else '≤'} {_num(self.high)}"


def _num(x: float) -> str:
    if x >= 1e6 and float(x).is_integer() and f"{x:.0e}".startswith("1e"):
        return f"1e{len(str(int(x))) - 1}"
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


HOUR_S, DAY_MIN, WEEK_H = 3600, 24 * 60, 24 * 7

# THE table of numeric ranges: validation uses it, the README's "Policy fields" table quotes it
# (a test keeps them equal). Every int/float field of RunPolicy has an entry (a test checks that).
RANGES: Mapping[str, Range] = {
    "max_restarts": Range(0, 1000),
    "max_no_progress_restarts": Range(1, 100),
    "max_wall_clock_hours": Range(0, 24 * 365, low_open=True),  # a year
    "max_cost_usd": Range(0, 1e9, low_open=True),
    "instance_hour_price_usd": Range(0, 10_000, low_open=True),
    "backoff_base_seconds": Range(1, 24 * HOUR_S),
    "backoff_cap_seconds": Range(1, 24 * HOUR_S),
    "backoff_jitter": Range(0, 1, high_open=True),
    "throttle_backoff_seconds": Range(1, 24 * HOUR_S),
    "quota_wait_max_hours": Range(0, 4 * WEEK_H, low_open=True),
    "capacity_wait_max_hours": Range(0, 4 * WEEK_H, low_open=True),
    "keep_alive_seconds": Range(0, HOUR_S),  # an idle warm pool is billed; SageMaker itself allows 6 h
    "log_silence_minutes": Range(1, DAY_MIN),
    "gpu_idle_percent": Range(0, 100, low_open=True),
    "gpu_idle_minutes": Range(1, DAY_MIN),
    "checkpoint_stale_minutes": Range(1, 7 * DAY_MIN),
    "progress_stall_minutes": Range(1, DAY_MIN),
    "hang_grace_minutes": Range(0, DAY_MIN),
    "gpu_lone_idle_minutes": Range(0, DAY_MIN),
    "gpu_busy_percent": Range(0, 100, low_open=True),
    "startup_silence_minutes": Range(0, DAY_MIN),
    "benign_phase_max_minutes": Range(1, DAY_MIN),
    "priority": Range(-1000, 1000),
    "checkpoint_keep": Range(1, MAX_CHECKPOINT_KEEP),
    "straggler_threshold": Range(0.05, 1),
    "straggler_window_minutes": Range(1, DAY_MIN),
    "total_steps": Range(1, 1e12),
}


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
    # SageMaker warm pool (ResourceConfig.KeepAlivePeriodInSeconds): a resume after a non-hardware
    # ending reuses the instances; the pool is terminated at once when nothing will reuse it
    keep_alive_seconds: int = 600
    environment_defaults: tuple[tuple[str, str], ...] = ()  # added to every attempt, user values win
    # --- classification ---------------------------------------------------------------------
    oom_is_user_error: bool = True
    # --- checkpoints ------------------------------------------------------------------------
    checkpoint_layout: str = "auto"
    checkpoint_dir_regex: str | None = None
    checkpoint_marker: str | None = None
    # retention (domain/checkpoints/retention.py), opt-in: keep this many newest complete checkpoints in the
    # synced prefix (SageMaker downloads all of it at every start); older ones are moved to the
    # archive prefix (default "<S3Uri>-archive/", outside the synced one) or deleted
    checkpoint_keep: int | None = None
    checkpoint_retired: str = "archive"  # "archive" | "delete"
    checkpoint_archive_uri: str | None = None
    # directory names, or fnmatch patterns ("best*", "eval-*"), that retention never retires
    checkpoint_keep_dirs: tuple[str, ...] = ()
    # --- hang detection ---------------------------------------------------------------------
    hang_detection: bool = True
    # log silence: the window in force until the attempt's own cadence is learned, and the
    # ceiling of a learned window (adaptive_windows)
    log_silence_minutes: int = 30
    gpu_idle_percent: float = 1.0  # per GPU; alarms scale it by GPUs per host
    gpu_idle_minutes: int = 20  # every host idle (hosts 1-2 watched) for this long
    gpu_lone_idle_minutes: int = 3  # one host idle while a peer is busy, for this long (0: off)
    gpu_busy_percent: float = 50.0  # per GPU: a peer above this counts as busy
    checkpoint_stale_minutes: int | None = None
    progress_metric: str | None = None  # a MetricDefinitions name (e.g. "train:throughput")
    progress_stall_minutes: int = 30  # ... not reported, or reported unchanged, for this long
    adaptive_windows: bool = True  # learn the log-silence / progress windows from the attempt's cadence
    startup_silence_minutes: int = 45  # after Training starts: first-step compile, NCCL init
    # a quiet stretch while the hosts' metrics show work (CPU busy, disk space growing) or
    # checkpoint objects land is a benign phase for at most this long (domain/vocabulary/evidence.py)
    benign_phase_max_minutes: int = 90
    hang_confirmation: str = "any"
    hang_grace_minutes: int = 15
    # --- bad hosts and slow fabric (domain/hosts/bad_hosts.py, domain/hosts/fabric.py) ---------------------------
    # after a fault that singles out a host, the next attempts ask SageMaker to check their
    # instances first (CreateTrainingJob InfraCheckConfig.EnableInfraCheck)
    infra_check_after_bad_host: bool = True
    # ... unless every such host printed the contract's fingerprint line: a bad host that comes back
    # on new instances is then stopped at its fingerprint line, and the check follows only if it did
    infra_check_unless_fingerprinted: bool = True
    # --- checkpoints -----------------------------------------------------------------------------
    # tell every new attempt the Young/Daly checkpoint interval (SAGEWARDEN_CHECKPOINT_MINUTES) once
    # a checkpoint's write time was measured; a script that follows the contract checkpoints at it
    apply_checkpoint_advice: bool = False
    # a multi-node job on EFA instances whose NCCL selects sockets is flagged (needs NCCL_DEBUG=INFO)
    slow_fabric_check: bool = True
    # --- stragglers: a host alive but slow (domain/hosts/stragglers.py) ------------------------------
    # the training script prints the contract's step lines ([sagewarden] host=<n> step=<s>
    # step_ms=<ms> compute_ms=<ms>): the sweep reads them and scores each host
    step_lines: bool = False
    straggler_threshold: float = 0.15  # a host this much slower than its own baseline vs its peers
    straggler_window_minutes: int = 6  # ... for at least this long is a straggler
    straggler_action: str = (
        "alert"  # "alert" | "restart" (when the projected loss exceeds the restart's cost)
    )
    # --- Training Plans (domain/capacity/training_plans.py) ---------------------------------------------
    # after the plan's last window: "none" (the run ends FAILED, saying so) or "on_demand"
    # (launch without ResourceConfig.TrainingPlanArn)
    training_plan_fallback: str = "none"
    # the run's last step: with it the supervisor warns when the plan's windows cannot finish
    # the run at its measured pace
    total_steps: int | None = None
    # --- sharing the account's quota ------------------------------------------------------------
    priority: int = 0  # runs waiting for quota get released instances highest priority first
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    # ----------------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Mapping[str, Any], base: RunPolicy | None = None) -> RunPolicy:
        """Apply `data` (JSON-shaped overrides) on top of `base` (or the defaults)."""
        policy = cls._apply(data, base, stored=False)
        policy.validate()
        return policy

    @classmethod
    def from_stored(cls, data: Mapping[str, Any]) -> RunPolicy:
        """The policy of a stored run, as it was accepted: not re-validated against today's
        ranges (a run accepted before a range was narrowed must still load), and fields this
        version does not know are kept aside in `extra` instead of failing the load."""
        return cls._apply(data, None, stored=True)

    @classmethod
    def _apply(cls, data: Mapping[str, Any], base: RunPolicy | None, *, stored: bool) -> RunPolicy:
        if not isinstance(data, Mapping):
            raise PolicyError("policy", "must be an object")
        current = base or cls()
        known = _field_types()
        changes: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in data.items():
            if key not in known:
                if stored:
                    extra[key] = value
                    continue
                raise PolicyError(key, "unknown policy field")
            changes[key] = _coerce(key, value)
        if extra:
            changes["extra"] = extra
        return dataclasses.replace(current, **changes)

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
            elif f.name == "checkpoint_keep_dirs":
                value = list(value)
            out[f.name] = value
        return out

    def validate(self) -> None:
        for name, allowed in RANGES.items():
            value = getattr(self, name)
            if value is not None and not allowed.contains(value):
                raise PolicyError(name, f"out of range: allowed {allowed.describe()}")
        if self.backoff_cap_seconds < self.backoff_base_seconds:
            raise PolicyError("backoff_cap_seconds", "must be >= backoff_base_seconds")
        if self.checkpoint_layout not in CHECKPOINT_LAYOUTS:
            raise PolicyError("checkpoint_layout", f"must be one of {', '.join(CHECKPOINT_LAYOUTS)}")
        if self.checkpoint_layout == "regex" and not (self.checkpoint_dir_regex and self.checkpoint_marker):
            raise PolicyError(
                "checkpoint_dir_regex", "regex layout needs checkpoint_dir_regex and checkpoint_marker"
            )
        for name in ("checkpoint_dir_regex", "checkpoint_marker", "progress_metric"):
            text = getattr(self, name)
            if text is not None and not 1 <= len(text) <= MAX_TEXT:
                raise PolicyError(name, f"must be 1 to {MAX_TEXT} characters")
        if self.checkpoint_dir_regex is not None:
            try:
                re.compile(self.checkpoint_dir_regex)
            except re.error as exc:
                raise PolicyError("checkpoint_dir_regex", f"not a valid regular expression: {exc}") from exc
        if self.checkpoint_retired not in CHECKPOINT_RETIRED:
            raise PolicyError("checkpoint_retired", f"must be one of {', '.join(CHECKPOINT_RETIRED)}")
        if self.checkpoint_retired == "delete" and self.checkpoint_keep is None:
            raise PolicyError(
                "checkpoint_retired", "delete needs checkpoint_keep (retention is off without it)"
            )
        archive = self.checkpoint_archive_uri
        if archive is not None:
            if self.checkpoint_retired == "delete":
                raise PolicyError("checkpoint_archive_uri", "not used when checkpoint_retired is delete")
            if not archive.startswith("s3://") or len(archive) > 1024 or archive[5:6] in ("", "/"):
                raise PolicyError(
                    "checkpoint_archive_uri", "must be an s3:// URI of at most 1,024 characters"
                )
        if self.hang_confirmation not in HANG_CONFIRMATIONS:
            raise PolicyError("hang_confirmation", f"must be one of {', '.join(HANG_CONFIRMATIONS)}")
        if self.training_plan_fallback not in TRAINING_PLAN_FALLBACKS:
            raise PolicyError(
                "training_plan_fallback", f"must be one of {', '.join(TRAINING_PLAN_FALLBACKS)}"
            )
        if self.straggler_action not in STRAGGLER_ACTIONS:
            raise PolicyError("straggler_action", f"must be one of {', '.join(STRAGGLER_ACTIONS)}")


def _coerce(key: str, value: Any) -> Any:
    if key == "instance_fallbacks":
        if not isinstance(value, list) or len(value) > MAX_FALLBACKS:
            raise PolicyError(
                key, f"must be a list of at most {MAX_FALLBACKS} {{instance_type, instance_count}}"
            )
        choices = []
        for i, item in enumerate(value):
            if not isinstance(item, Mapping) or set(item) != {"instance_type", "instance_count"}:
                raise PolicyError(f"{key}[{i}]", "needs exactly instance_type and instance_count")
            itype, count = item["instance_type"], item["instance_count"]
            if not isinstance(itype, str) or not itype.startswith("ml."):
                raise PolicyError(f"{key}[{i}].instance_type", "must look like ml.<family>.<size>")
            if (
                not isinstance(count, int)
                or isinstance(count, bool)
                or not 1 <= count <= MAX_FALLBACK_INSTANCES
            ):
                raise PolicyError(
                    f"{key}[{i}].instance_count", f"must be an integer from 1 to {MAX_FALLBACK_INSTANCES:,}"
                )
            choices.append(InstanceChoice(itype, count))
        return tuple(choices)
    if key == "environment_defaults":
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise PolicyError(key, "must be an object of string to string")
        if len(value) > MAX_ENVIRONMENT_DEFAULTS:
            raise PolicyError(key, f"at most {MAX_ENVIRONMENT_DEFAULTS} variables")
        return tuple(sorted(value.items()))
    if key == "checkpoint_keep_dirs":
        if not isinstance(value, list) or len(value) > MAX_KEEP_DIRS:
            raise PolicyError(key, f"must be a list of at most {MAX_KEEP_DIRS} directory names or patterns")
        for i, item in enumerate(value):
            if not isinstance(item, str) or not 1 <= len(item) <= MAX_KEEP_DIR_TEXT or "/" in item:
                raise PolicyError(
                    f"{key}[{i}]",
                    f"must be a directory name or pattern of 1 to {MAX_KEEP_DIR_TEXT} characters, without '/'",
                )
        return tuple(dict.fromkeys(value))
    text = _field_types()[key]
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
        try:
            number = float(value)
        except OverflowError:  # an int too large for a float
            number = math.inf
        if not math.isfinite(number):
            raise PolicyError(key, "must be a finite number")
        return number
    if text.startswith("str"):
        if not isinstance(value, str):
            raise PolicyError(key, "must be a string")
        return value
    raise PolicyError(key, "unsupported field")  # pragma: no cover - every field is handled above


@functools.cache
def _field_types() -> dict[str, str]:
    """Each policy field (but ``extra``) and its annotation's text, read once: a stored run's
    policy is parsed on every load, and ``dataclasses.fields`` per field made that the store's
    most expensive step."""
    return {f.name: str(f.type) for f in dataclasses.fields(RunPolicy) if f.name != "extra"}
