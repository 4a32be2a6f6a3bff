"""The drill scenario parser's checks beyond field types: the account's rate and delay settings,
warm pools, each run's request and policy as the API would check them (naming the shortcut that
set a field), faults that can never fire, and expectations. :func:`drill.scenarios.spec.parse` calls them."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from drill.scenarios.check import (
    _Checker,
    _join,
    _matches,
    _type_name,
)
from drill.scenarios.fields import (
    DEFAULT_MAX_RESTARTS,
    TOP_FIELDS,
    WARM_POOL_FIELDS,
    Spec,
    _at_least,
    _did_you_mean,
    _show,
)
from drill.sim.model import Fault, JobProfile
from drill.sim.rate_limits import known_operations
from drill.sim.texts import CRASH_KINDS, PAUSE_KINDS, START_FAULTS
from drill.sim.warm_pools import WarmPoolSettings


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


def _outages(check: _Checker, where: str, raw: Any) -> list[tuple[float, float | None]]:
    """``[[from_min, until_min or null], ...]``: stretches of virtual minutes from the scenario's
    start, each from >= 0 and until > from (null: to the end of the drill)."""
    out: list[tuple[float, float | None]] = []
    for i, item in enumerate(raw or []):
        if (
            isinstance(item, list)
            and len(item) == 2
            and _matches(item[0], "number")
            and item[0] >= 0
            and (item[1] is None or (_matches(item[1], "number") and item[1] > item[0]))
        ):
            out.append((float(item[0]), None if item[1] is None else float(item[1])))
        else:
            check.add(
                f"{where}[{i}]",
                f"expected [from_min, until_min] with 0 <= from < until (until null: never ends), got {_show(item)}",
            )
    return out


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
    from sagewarden.domain.vocabulary.policy import PolicyError, RunPolicy

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
    from sagewarden.api.validation import validate_submit
    from sagewarden.keys import DEFAULT_JOB_PREFIX
    from sagewarden.usecases.errors import InvalidRequest

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
    if "memory_full" in explicit and f.kind not in CRASH_KINDS:
        check.add(f"{where}.memory_full", "applies to crashes only (a host that ran out of RAM, then a kill)")
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
