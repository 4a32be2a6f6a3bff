"""A run's Training Plan as the supervisor knows it: the plan read (`PlanView`), its windows and
when to launch into them. Pure, a leaf (the decisions: domain/capacity/training_plans.py). Why:
docs/recovery.md (*Training Plans (reserved capacity)*)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sagewarden.domain.vocabulary.checkpoint_interval import observed_interval_min
from sagewarden.domain.vocabulary.models import Run

MINUTE_MS = 60_000
TERMINATION_LEAD_MS = 30 * MINUTE_MS  # SageMaker begins terminating this long before a window's end
KILL_AFTER_MS = 120_000  # StopTrainingJob: SIGTERM, SIGKILL 120 s later
STOP_MARGIN_MS = 60_000  # the supervisor's own margin (a sweep's lateness, an API call's)
# a launch is made this long before a window opens: the job waits Pending and SageMaker starts
# it as the window opens, instead of after the supervisor's next look
LAUNCH_LEAD_MS = 5 * MINUTE_MS
# a window with less than this left before its stop deadline is never launched into (an attempt
# would spend it starting up); with a known checkpoint interval, start-up + one interval
MIN_USABLE_MS = 20 * MINUTE_MS
DEFAULT_STARTUP_MS = 10 * MINUTE_MS  # an attempt's start-up until one is measured

Window = tuple[int, int]  # (start ms, end ms) of one reserved capacity


@dataclass(frozen=True)
class PlanView:
    """DescribeTrainingPlan as the supervisor needs it."""

    arn: str
    status: str  # Pending | Active | Scheduled | Expired | Failed
    windows: tuple[Window, ...]  # every reserved capacity, oldest first
    instance_type: str | None = None
    total_count: int | None = None


def plan_arn(request: Mapping[str, Any]) -> str | None:
    """The TrainingPlanArn of a CreateTrainingJob request (None: not on a plan)."""
    rc = request.get("ResourceConfig")
    arn = rc.get("TrainingPlanArn") if isinstance(rc, Mapping) else None
    return str(arn) if arn else None


def plan_name(arn: str) -> str:
    """The plan's name from its ARN (``arn:aws:sagemaker:<region>:<account>:training-plan/<name>``);
    a name is returned as it is."""
    return arn.rsplit(":training-plan/", 1)[-1]


def on_plan(run: Run) -> bool:
    """The run's next attempt launches on its training plan."""
    return plan_arn(run.request) is not None and not run.plan_off


def termination_ms(window: Window) -> int:
    return window[1] - TERMINATION_LEAD_MS


def stop_deadline_ms(window: Window) -> int:
    """The latest a stop may be asked for: its SIGTERM save ends before termination begins."""
    return termination_ms(window) - KILL_AFTER_MS - STOP_MARGIN_MS


def window_at(run: Run, t: int) -> Window | None:
    return next((w for w in run.plan_windows if w[0] <= t < w[1]), None)


def startup_ms(run: Run) -> int:
    """An attempt's start-up on the plan: the newest attempt's request-to-Training (measured),
    else DEFAULT_STARTUP_MS."""
    for att in reversed(run.attempts):
        if att.training_started_ms is not None:
            return max(0, att.training_started_ms - max(att.requested_at_ms, att.created_ms or 0))
    return DEFAULT_STARTUP_MS


def launch_need_ms(run: Run) -> int:
    """How long before its stop deadline a window must still be open for a launch into it to pay:
    the start-up plus one checkpoint interval (an attempt that cannot write a checkpoint before it
    must stop only redoes work), at least MIN_USABLE_MS."""
    minutes = observed_interval_min(run.checkpoint_history)
    interval = int(minutes * MINUTE_MS) if minutes else 0
    return max(MIN_USABLE_MS, startup_ms(run) + interval)


def usable_window(run: Run, t: int) -> Window | None:
    """The first window an attempt launched at `t` can still train in and checkpoint before its
    stop deadline (None: none, or unknown)."""
    need = launch_need_ms(run)
    return next((w for w in run.plan_windows if max(t, w[0]) + need <= stop_deadline_ms(w)), None)


def plan_known(run: Run) -> bool:
    return run.plan_read_ms is not None and bool(run.plan_windows)


def plan_exhausted(run: Run, t: int) -> bool:
    """The plan is known to have no window left to train in (unknown is never exhausted)."""
    if run.plan_read_ms is None:
        return False
    if run.plan_status in ("Expired", "Failed"):
        return True
    return bool(run.plan_windows) and usable_window(run, t) is None


def launch_at(run: Run, t: int) -> int | None:
    """When the next attempt should be launched on the plan; None: now (inside a usable window,
    within LAUNCH_LEAD_MS of one, or the windows are unknown -- SageMaker then keeps the job
    Pending until one opens)."""
    if not on_plan(run) or not plan_known(run):
        return None
    w = usable_window(run, t)
    if w is None or w[0] - LAUNCH_LEAD_MS <= t:
        return None
    return w[0] - LAUNCH_LEAD_MS
