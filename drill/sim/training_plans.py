"""SageMaker Training Plans in the simulated account: reserved capacity in discontinuous windows.

Why: docs/fidelity.md (a row per behaviour)."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any

from drill.clock import from_ms
from drill.sim.texts import client_error

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
TERMINATION_LEAD_MS = 30 * MINUTE_MS  # "full access ... until 30 minutes before the end time"
MAX_PENDING_MS = 2 * 24 * HOUR_MS  # Pending this long: InsufficientCapacityError
FULL_RECHECK_MS = MINUTE_MS  # a window full of other jobs is looked at again this often
EXPIRATION_ENV = "SAGEMAKER_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP"
# DescribeTrainingPlan's TrainingPlanName in the API Reference: "The name of the training plan to
# describe", length 1-64, this pattern (botocore's TrainingPlanNameOrArn also allows an ARN prefix)
PLAN_NAME_PATTERN = "[a-zA-Z0-9](-*[a-zA-Z0-9]){0,63}"
PLAN_NAME_RE = re.compile(PLAN_NAME_PATTERN)
PLAN_STATUS_MESSAGE = "Waiting for capacity from the training plan"  # the simulator's wording
PLAN_TERMINATED_REASON = (
    "InternalServerError: Instance algo-1 was terminated (reserved capacity ended). "
    "Please retry the training job."
)  # the simulator's wording: AWS documents no FailureReason for it
INSUFFICIENT_CAPACITY_REASON = (
    "InsufficientCapacityError: The training job was pending for 2 days without capacity "
    "available from its training plan."
)  # the simulator's wording


@dataclass(frozen=True, order=True)
class Window:
    start_ms: int
    end_ms: int

    @property
    def termination_ms(self) -> int:
        """When SageMaker begins terminating the window's instances."""
        return self.end_ms - TERMINATION_LEAD_MS


@dataclass
class SimPlan:
    name: str
    arn: str
    instance_type: str
    count: int
    windows: tuple[Window, ...]

    def window_at(self, t: int) -> Window | None:
        return next((w for w in self.windows if w.start_ms <= t < w.end_ms), None)

    def status(self, t: int) -> str:
        if t >= self.windows[-1].end_ms:
            return "Expired"
        return "Active" if self.window_at(t) is not None else "Scheduled"


@dataclass
class PlanJob:
    plan: str
    started_window: Window | None = None  # the window the job left Pending in
    env: dict[str, str] = field(default_factory=dict)
    pending_since_ms: int | None = None  # when it began waiting Pending (a retry waits afresh)


class TrainingPlans:
    """The account's training plans and the jobs that run on them (see module docstring)."""

    def __init__(self, region: str, account_id: str) -> None:
        self.region = region
        self.account_id = account_id
        self._plans: dict[str, SimPlan] = {}
        self._jobs: dict[str, PlanJob] = {}
        self.terminated: list[tuple[int, str]] = []  # (ms, job name) ended by a window's end

    # -- setup ---------------------------------------------------------------------------------
    def add(self, name: str, instance_type: str, count: int, windows: list[tuple[int, int]]) -> SimPlan:
        """A plan with its windows as (start ms, end ms), sorted and not overlapping."""
        spans = sorted(Window(int(s), int(e)) for s, e in windows)
        if not spans or count < 1:
            raise ValueError("a training plan needs at least one window and one instance")
        for a, b in itertools.pairwise(spans):
            if b.start_ms < a.end_ms:
                raise ValueError("a training plan's windows must not overlap")
        if any(w.end_ms - w.start_ms <= TERMINATION_LEAD_MS for w in spans):
            raise ValueError("each window must be longer than 30 minutes")
        arn = f"arn:aws:sagemaker:{self.region}:{self.account_id}:training-plan/{name}"
        plan = SimPlan(name, arn, instance_type, count, tuple(spans))
        self._plans[name] = plan
        return plan

    def plans(self) -> list[SimPlan]:
        return list(self._plans.values())

    # -- the API ---------------------------------------------------------------------------------
    def describe(self, name: str, now: int, live: dict[str, Any]) -> dict[str, Any]:
        op = "DescribeTrainingPlan"
        if not 1 <= len(name) <= 64 or PLAN_NAME_RE.fullmatch(name) is None:
            raise client_error(
                "ValidationException",
                f"1 validation error detected: Value '{name}' at 'trainingPlanName' failed to satisfy "
                f"constraint: Member must satisfy regular expression pattern: {PLAN_NAME_PATTERN}",
                op,
            )
        plan = self._plans.get(name)
        if plan is None:
            raise client_error("ResourceNotFound", f"Training plan {name} not found.", op)
        in_use = self.in_use(plan, live)
        first, last = plan.windows[0], plan.windows[-1]
        minutes = sum(w.end_ms - w.start_ms for w in plan.windows) // MINUTE_MS
        status = plan.status(now)
        return {
            "TrainingPlanArn": plan.arn,
            "TrainingPlanName": plan.name,
            "Status": status,
            "DurationHours": minutes // 60,
            "DurationMinutes": minutes % 60,
            "StartTime": from_ms(first.start_ms),
            "EndTime": from_ms(last.end_ms),
            "TotalInstanceCount": plan.count,
            "AvailableInstanceCount": plan.count - in_use if status == "Active" else 0,
            "InUseInstanceCount": in_use,
            "TargetResources": ["training-job"],
            "ReservedCapacitySummaries": [self._summary(plan, i, w, now) for i, w in enumerate(plan.windows)],
        }

    def _summary(self, plan: SimPlan, i: int, w: Window, now: int) -> dict[str, Any]:
        minutes = (w.end_ms - w.start_ms) // MINUTE_MS
        status = "Expired" if now >= w.end_ms else "Active" if now >= w.start_ms else "Scheduled"
        return {
            "ReservedCapacityArn": (
                f"arn:aws:sagemaker:{self.region}:{self.account_id}:reserved-capacity/{plan.name}-{i + 1}"
            ),
            "ReservedCapacityType": "Instance",
            "InstanceType": plan.instance_type,
            "TotalInstanceCount": plan.count,
            "Status": status,
            "DurationHours": minutes // 60,
            "DurationMinutes": minutes % 60,
            "StartTime": from_ms(w.start_ms),
            "EndTime": from_ms(w.end_ms),
        }

    def _by_arn(self, arn: str) -> SimPlan | None:
        return next((p for p in self._plans.values() if p.arn == arn), None)

    def admit(self, request: dict[str, Any], now: int, op: str) -> SimPlan | None:
        """The plan a CreateTrainingJob request names (None: none), or a ValidationException."""
        rc = request.get("ResourceConfig") or {}
        arn = rc.get("TrainingPlanArn")
        if not arn:
            return None
        plan = self._by_arn(str(arn))
        if plan is None:
            raise client_error("ValidationException", f"Training plan {arn} does not exist.", op)
        if plan.status(now) not in ("Scheduled", "Active"):
            raise client_error(
                "ValidationException", f"Training plan {arn} is {plan.status(now)}: it cannot be used.", op
            )
        if rc.get("InstanceType") != plan.instance_type or int(rc.get("InstanceCount", 0)) > plan.count:
            raise client_error(
                "ValidationException",
                f"Training plan {arn} reserves {plan.count} x {plan.instance_type}; the job asks for "
                f"{rc.get('InstanceCount')} x {rc.get('InstanceType')}.",
                op,
            )
        return plan

    # -- the lifecycle (called by drill.sim.lifecycle) ----------------------------------------------
    def in_use(self, plan: SimPlan, live: dict[str, Any]) -> int:
        """Instances of the plan held by live jobs that left Pending."""
        return sum(
            job.instance_count
            for name, pj in self._jobs.items()
            if pj.plan == plan.name and pj.started_window is not None and (job := live.get(name)) is not None
        )

    def hold(self, sim: Any, job: Any, plan: SimPlan, now: int) -> None:
        """A new job on `plan`: it provisions at once when a window is active with room, else it
        waits Pending."""
        self._jobs[job.name] = PlanJob(plan.name, pending_since_ms=now)
        self._try_start(sim, job, now, pending=False)

    def holds(self, job_name: str) -> bool:
        """The job runs on a training plan."""
        return job_name in self._jobs

    def retry(self, sim: Any, job: Any, t: int) -> None:
        """SageMaker's RetryStrategy tries the job again (it went back to Starting): on a plan it
        needs the plan's capacity again, Pending until a window has room."""
        pj = self._jobs[job.name]
        pj.started_window, pj.env, pj.pending_since_ms = None, {}, t
        self._try_start(sim, job, t, pending=False)

    def on_timer(self, sim: Any, job: Any, timer: str, t: int) -> None:
        if timer == "plan_fail":
            job.ended_reason = "capacity"
            sim._fail(job, t, INSUFFICIENT_CAPACITY_REASON)
            return
        self._try_start(sim, job, t, pending=True)

    def _try_start(self, sim: Any, job: Any, t: int, *, pending: bool) -> None:
        pj = self._jobs[job.name]
        plan = self._plans[pj.plan]
        window = plan.window_at(t)
        if (
            window is not None
            and t < window.termination_ms
            and self.in_use(plan, sim._live) + job.instance_count <= plan.count
        ):
            pj.started_window = window
            pj.env = {EXPIRATION_ENV: str(window.end_ms)}
            if pending:
                sim._transition(job, t, "InProgress", "Starting")
            sim._set_timer(job, t + sim.startup.provision_s * 1000, "downloading")
            return
        if not pending:
            sim._transition(job, t, "InProgress", "Pending", PLAN_STATUS_MESSAGE)
        give_up = (
            pj.pending_since_ms if pj.pending_since_ms is not None else job.created_ms
        ) + MAX_PENDING_MS
        nxt = self._next_chance(plan, t, window)
        if nxt is None or nxt >= give_up:
            sim._set_timer(job, max(give_up, t + 1), "plan_fail")
        else:
            sim._set_timer(job, nxt, "plan_start")

    @staticmethod
    def _next_chance(plan: SimPlan, t: int, window: Window | None) -> int | None:
        if window is not None and t < window.termination_ms:
            return t + FULL_RECHECK_MS  # active but full: another job may end
        return next((w.start_ms for w in plan.windows if w.start_ms > t), None)

    def kill_at(self, job_name: str) -> int | None:
        """When the job's instances are terminated (its window's end - 30 min); None: not on a plan
        or still Pending."""
        pj = self._jobs.get(job_name)
        if pj is None or pj.started_window is None:
            return None
        return pj.started_window.termination_ms

    def terminate(self, sim: Any, job: Any, t: int) -> None:
        """The window's termination reached a running job: it ends Failed (the unkind case), or
        -- with a RetryStrategy try left -- SageMaker retries it and it waits for the plan."""
        if job.status != "InProgress":
            return
        self.terminated.append((t, job.name))
        if sim._retries_left(job) > 0:
            sim._retry(job, t, PLAN_TERMINATED_REASON)  # back to Starting, then Pending on the plan
            return
        job.ended_reason = "plan_window_end"
        sim._fail(job, t, PLAN_TERMINATED_REASON)

    def environment(self, job_name: str) -> dict[str, str]:
        """What SageMaker adds to the job's environment (empty until it leaves Pending)."""
        pj = self._jobs.get(job_name)
        return dict(pj.env) if pj is not None else {}

    def window_of(self, job_name: str) -> Window | None:
        pj = self._jobs.get(job_name)
        return pj.started_window if pj is not None else None


# -- scenarios (drill/scenarios/spec.py) -------------------------------------------------------------------


@dataclass(frozen=True)
class PlanSpec:
    """``account.training_plans[]`` of a scenario: windows in hours from the drill's start."""

    name: str
    instance_type: str
    count: int
    windows: tuple[tuple[float, float], ...]

    def arn(self, region: str, account_id: str) -> str:
        return f"arn:aws:sagemaker:{region}:{account_id}:training-plan/{self.name}"


PLAN_FIELDS = ("name", "instance_type", "count", "windows")


def parse_plans(raw: Any, where: str = "account.training_plans") -> tuple[list[PlanSpec], list[str]]:
    """The scenario's plans and its problems (``path: message`` lines)."""
    plans: list[PlanSpec] = []
    problems: list[str] = []
    if not isinstance(raw, list):
        return plans, [f"{where}: must be a list"]
    names: set[str] = set()
    for i, item in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(item, dict):
            problems.append(f"{at}: must be an object")
            continue
        unknown = sorted(set(item) - set(PLAN_FIELDS))
        problems += [f"{at}.{k}: unknown field (known: {', '.join(PLAN_FIELDS)})" for k in unknown]
        missing = [k for k in PLAN_FIELDS if k not in item]
        problems += [f"{at}.{k}: required" for k in missing]
        if unknown or missing:
            continue
        name, itype, count, windows = (item[k] for k in PLAN_FIELDS)
        if not isinstance(name, str) or not PLAN_NAME_RE.fullmatch(name):
            problems.append(f"{at}.name: a training plan name (letters, digits, hyphens; at most 64)")
        elif name in names:
            problems.append(f'{at}.name: "{name}" is already a plan of this scenario')
        if not isinstance(itype, str) or not itype.startswith("ml."):
            problems.append(f"{at}.instance_type: must look like ml.<family>.<size>")
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            problems.append(f"{at}.count: an integer of at least 1")
        spans: list[tuple[float, float]] = []
        ok = isinstance(windows, list) and bool(windows)
        for w in windows if isinstance(windows, list) else []:
            if (
                not isinstance(w, list)
                or len(w) != 2
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in w)
                or not 0 <= w[0] < w[1] - TERMINATION_LEAD_MS / HOUR_MS
            ):
                ok = False
                break
            spans.append((float(w[0]), float(w[1])))
        if ok and any(b[0] < a[1] for a, b in itertools.pairwise(sorted(spans))):
            ok = False
        if not ok:
            problems.append(
                f"{at}.windows: a list of [start_h, end_h] from the drill's start, each longer than "
                "30 minutes, not overlapping"
            )
        if isinstance(name, str):
            names.add(name)
        if not any(p.startswith(at) for p in problems):
            plans.append(PlanSpec(name, itype, count, tuple(sorted(spans))))
    return plans, problems


def install(plans: TrainingPlans, specs: list[PlanSpec], start_ms: int) -> None:
    """Add a scenario's plans to the simulated account, windows from ``start_ms``."""
    for spec in specs:
        plans.add(
            spec.name,
            spec.instance_type,
            spec.count,
            [(start_ms + round(a * HOUR_MS), start_ms + round(b * HOUR_MS)) for a, b in spec.windows],
        )
