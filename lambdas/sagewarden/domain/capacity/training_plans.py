"""Supervising a run across the windows of its SageMaker Training Plan (reserved capacity).

Stopping in good time before a window's end, classing that ending WINDOW_END, resuming at the next
window, warning when the plan is short. Pure. Why: docs/recovery.md (*Training Plans (reserved
capacity)*)."""

from __future__ import annotations

import dataclasses
import itertools
import statistics

from sagewarden.domain.capacity.launching import start_attempt
from sagewarden.domain.decision.alerts import notify
from sagewarden.domain.decision.pending import PendingDecision, request_stop
from sagewarden.domain.vocabulary.checkpoint_interval import observed_interval_min
from sagewarden.domain.vocabulary.classifier.models import Classification, EndingClass
from sagewarden.domain.vocabulary.events import Event, JobObserved, ResumeRequested, Submitted, Tick
from sagewarden.domain.vocabulary.models import Attempt, Run
from sagewarden.domain.vocabulary.plan_windows import (
    MINUTE_MS,
    TERMINATION_LEAD_MS,
    Window,
    on_plan,
    plan_arn,
    plan_name,
    startup_ms,
    stop_deadline_ms,
    termination_ms,
    usable_window,
    window_at,
)
from sagewarden.domain.vocabulary.reasons import StopIntent

PLAN_REFRESH_MS = 30 * MINUTE_MS  # the sweep reads the plan again this often
STOP_GRACE_MS = 30_000  # after the last checkpoint's expected completion, to see it in S3
STOP_POLL_MS = 30_000  # a last checkpoint later than expected is looked for this often
# a Failed ending this close to a window's termination (before: clocks; after: until its end and
# the event's delivery) is the window's end, not a crash
ENDING_SLACK_BEFORE_MS = 2 * MINUTE_MS
ENDING_SLACK_AFTER_MS = 10 * MINUTE_MS

History = tuple[tuple[int, int, float, int], ...]


# --------------------------------------------------------------------------------------------
# reading the plan


def wants_plan(run: Run, event: Event, now_ms: int) -> bool:
    """The service reads the plan before deciding: at submit, on a resume, and on the sweep's
    pass when the last read is older than PLAN_REFRESH_MS or failed."""
    if plan_arn(run.request) is None or (run.status.terminal and not isinstance(event, ResumeRequested)):
        return False
    if isinstance(event, (Submitted, ResumeRequested)):
        return True
    if not isinstance(event, Tick):
        return False
    return (
        run.plan_read_ms is None or run.plan_error is not None or now_ms - run.plan_read_ms >= PLAN_REFRESH_MS
    )


def record_plan(d: PendingDecision) -> bool:
    """Keep what the plan read said (or that it failed); True when the run changed."""
    plan, error = d.obs.plan, d.obs.plan_error
    if plan is None and error is None:
        return False
    if plan is None:
        if d.run.plan_error == error:
            return False
        d.set(plan_error=error)
        d.note(f"training plan unknown (the windows last read stay in force): {error}")
        return True
    windows = tuple(sorted(plan.windows))
    if windows != d.run.plan_windows or plan.status != d.run.plan_status:
        d.note(f"training plan {plan_name(plan.arn)}: {plan.status}, {len(windows)} window(s)")
    d.set(plan_windows=windows, plan_status=plan.status, plan_read_ms=d.now, plan_error=None)
    return True


# --------------------------------------------------------------------------------------------
# stopping in good time


def _history(d: PendingDecision) -> History:
    """The run's checkpoint history with the checkpoint this decision observed (recorded after
    the dispatch)."""
    history, ckpt = d.run.checkpoint_history, d.obs.checkpoint
    if ckpt is None or ckpt.written_at_ms is None or (history and ckpt.step <= history[-1][0]):
        return history
    write = ckpt.write_seconds if ckpt.write_seconds is not None else -1.0
    prev = ckpt.previous_step if ckpt.previous_step is not None else -1
    return (*history, (ckpt.step, ckpt.written_at_ms, write, prev))


@dataclasses.dataclass(frozen=True)
class StopPlan:
    deadline_ms: int  # the latest stop: termination - SIGTERM-to-kill - margin
    anchor_ms: int | None  # the newest checkpoint of this attempt (completion time)
    interval_ms: int | None  # the observed checkpoint interval
    last_ms: int | None  # when the last checkpoint before the deadline should complete

    @property
    def target_ms(self) -> int:
        """When to stop if the last checkpoint shows up as expected."""
        if self.last_ms is None:
            return self.deadline_ms
        return min(self.last_ms + STOP_GRACE_MS, self.deadline_ms)

    @property
    def last_seen(self) -> bool:
        """The newest checkpoint is the last one before the deadline."""
        return self.anchor_ms is not None and self.anchor_ms == self.last_ms


def stop_plan(window: Window, att: Attempt, history: History) -> StopPlan:
    deadline = stop_deadline_ms(window)
    started = att.training_started_ms
    if started is None:  # not training yet: no checkpoint of its own to wait for
        return StopPlan(deadline, None, None, None)
    minutes = observed_interval_min(history)
    interval = int(minutes * MINUTE_MS) if minutes else None
    anchor = next((h[1] for h in reversed(history) if h[1] >= started), None)
    if interval is None or anchor is None or anchor > deadline:
        return StopPlan(deadline, anchor, interval, None)
    k = (deadline - anchor) // interval
    return StopPlan(deadline, anchor, interval, anchor + k * interval)


def _training_window(run: Run, att: Attempt, now_ms: int) -> Window | None:
    """The window a live attempt on the plan runs in, once it left Pending (starting,
    downloading or training: an attempt that started late in a window is stopped at the deadline
    too, never left to the termination); None otherwise."""
    if (
        att.stop_intent is not None
        or not on_plan(run)
        or not att.live
        or att.sm_status != "InProgress"
        or att.sm_secondary in (None, "Pending")
    ):
        return None
    if att.in_training and att.training_started_ms is not None:
        return window_at(run, now_ms) or window_at(run, att.training_started_ms)
    return window_at(run, now_ms)


def on_plan_tick(d: PendingDecision) -> bool:
    """The sweep's pass: stop a training attempt before its window ends; warn once per window
    when the plan cannot finish the run. True when it acted."""
    warned = _short_plan_alert(d)
    cur = d.run.current
    window = _training_window(d.run, cur, d.now) if cur is not None else None
    if cur is None or window is None:
        return warned
    plan = stop_plan(window, cur, _history(d))
    if d.now >= plan.deadline_ms:
        why = "no checkpoint is expected before it" if plan.last_ms is None else "the last checkpoint is late"
        request_stop(d, cur, StopIntent.WINDOW_END, f"the training plan's window ends ({why})")
        return True
    if plan.last_seen and d.now >= plan.target_ms:
        request_stop(
            d,
            cur,
            StopIntent.WINDOW_END,
            "the last checkpoint before the training plan's window ends is written "
            f"({(d.now - (plan.anchor_ms or d.now)) / 1000:.0f} s ago)",
        )
        return True
    return warned


def plan_due_ms(run: Run, now_ms: int) -> int | None:
    """When the sweep must look at a training attempt on a plan: the last checkpoint's expected
    completion plus a grace, polled while it is late, never after the stop deadline."""
    cur = run.current
    window = _training_window(run, cur, now_ms) if cur is not None else None
    if cur is None or window is None:
        return None
    plan = stop_plan(window, cur, run.checkpoint_history)
    target = plan.target_ms
    if target <= now_ms:
        return min(now_ms + STOP_POLL_MS, max(plan.deadline_ms, now_ms))
    return target


# --------------------------------------------------------------------------------------------
# endings


def plan_ending(run: Run, att: Attempt, status: str, end_ms: int, cls: Classification) -> Classification:
    """The class of an attempt's ending with the plan's windows in mind: the supervisor's
    window-end stop, and a Failed ending inside a window's last 30 minutes (SageMaker terminating
    the instances), are WINDOW_END, not a crash."""
    if att.stop_intent == StopIntent.WINDOW_END and cls.kind == EndingClass.SUPERVISOR_STOP:
        return dataclasses.replace(
            cls, kind=EndingClass.WINDOW_END, reason="stopped before the training plan's window ended"
        )
    if (
        status != "Failed"
        or not on_plan(run)
        or cls.kind not in (EndingClass.INFRASTRUCTURE, EndingClass.UNKNOWN)
        or att.stop_intent not in (None, StopIntent.WINDOW_END)
    ):
        return cls
    for w in run.plan_windows:
        if termination_ms(w) - ENDING_SLACK_BEFORE_MS <= end_ms <= w[1] + ENDING_SLACK_AFTER_MS:
            return Classification(
                kind=EndingClass.WINDOW_END,
                reason=(
                    "SageMaker terminated the instances as the training plan's window ended "
                    f"(termination begins {TERMINATION_LEAD_MS // MINUTE_MS} min before its end): not a crash"
                ),
                evidence=cls.evidence,
            )
    return cls


def retried_past_window(run: Run, att: Attempt, e: JobObserved) -> bool:
    """SageMaker's RetryStrategy took the window's termination for a failure to retry: an attempt
    on the plan that trained is back in Starting or Pending, at or after the termination of the
    window it trained in (a retry earlier in the window provisions again inside it)."""
    if (
        not on_plan(run)
        or att.stop_intent is not None
        or att.training_started_ms is None
        or e.status != "InProgress"
        or e.secondary not in ("Starting", "Pending")
    ):
        return False
    trained_in = [w for w in run.plan_windows if w[0] <= att.training_started_ms < w[1]]
    if not trained_in:
        return False
    return e.modified_ms >= termination_ms(trained_in[0]) - ENDING_SLACK_BEFORE_MS


def stop_retry_past_window(d: PendingDecision, att: Attempt, e: JobObserved) -> bool:
    """Stop a job SageMaker's RetryStrategy restarted after its window's end (retried_past_window):
    it would wait Pending for the next window in the same attempt, outside the window handling.
    Its ending is WINDOW_END (the `window_end` intent); the next window gets a new attempt."""
    if not retried_past_window(d.run, att, e):
        return False
    request_stop(
        d,
        att,
        StopIntent.WINDOW_END,
        f"SageMaker's RetryStrategy restarted {att.job_name} after its training plan window ended "
        f"({e.status}/{e.secondary}): it would wait for the next window in the same job",
    )
    return True


def after_window(d: PendingDecision, ended: Attempt, cls: Classification) -> None:
    """A window's end: resume at the next window (not counted against any budget)."""
    d.set(recovering_since_ms=None)
    d.note(f"attempt {ended.number} ended with its window ({cls.reason}): not counted")
    start_attempt(d, reuse_current=False)  # waits for the next window (draft.start_attempt)


def window_lines(run: Run, now_ms: int) -> list[str]:
    w = usable_window(run, now_ms)
    if w is None:
        return ["No window of the plan is left."]
    hours = (w[1] - w[0]) / 3_600_000
    return [f"Next window: opens in {(w[0] - now_ms) / 3_600_000:.1f} h, for {hours:.1f} h"]


# --------------------------------------------------------------------------------------------
# is the plan long enough?


def _pace_ms(history: History) -> float | None:
    """Wall milliseconds per step (checkpoint writes included), from the checkpoints seen."""
    pace = [
        (b[1] - a[1]) / (b[0] - a[0]) for a, b in itertools.pairwise(history) if b[1] > a[1] and b[0] > a[0]
    ]
    return statistics.median(pace) if pace else None


def plan_training_ms(run: Run, now_ms: int) -> int:
    """Training time the plan's windows still give from now: each window from its start (or now)
    to its stop deadline, minus a start-up unless an attempt already trains in it."""
    cur = run.current
    training_now = cur is not None and cur.in_training
    total = 0
    for w in run.plan_windows:
        begin = max(now_ms, w[0])
        inside = training_now and w[0] <= now_ms < w[1]
        total += max(0, stop_deadline_ms(w) - begin - (0 if inside else startup_ms(run)))
    return total


def _short_plan_alert(d: PendingDecision) -> bool:
    run, pol = d.run, d.policy
    if pol.total_steps is None or not on_plan(run) or not run.plan_windows:
        return False
    w = window_at(run, d.now) or usable_window(run, d.now)
    history = _history(d)
    pace = _pace_ms(history)
    if w is None or pace is None or w[0] in run.plan_warned:
        return False
    step = history[-1][0]
    need = (pol.total_steps - step) * pace
    have = plan_training_ms(run, d.now)
    if need <= have:
        return False
    d.set(plan_warned=(*run.plan_warned, w[0])[-16:])
    then = (
        "After the plan's last window the run continues on demand (training_plan_fallback on_demand)."
        if pol.training_plan_fallback == "on_demand"
        else "After the plan's last window the run ends FAILED (training_plan_fallback none): extend the "
        "plan, or set on_demand."
    )
    d.act(
        notify(
            d,
            "warning",
            "run.plan_short",
            f"{run.name}: the training plan cannot finish the run at its pace",
            [
                f"Steps left: {pol.total_steps - step:,} (at step {step:,} of {pol.total_steps:,}), "
                f"{pace / 1000:.1f} s a step: ~{need / 3_600_000:.1f} h of training",
                f"The plan's windows give ~{have / 3_600_000:.1f} h more (each window up to its stop "
                f"deadline, minus ~{startup_ms(run) / 60_000:.0f} min of start-up)",
                then,
            ],
        )
    )
    d.note(f"training plan short: ~{need / 3_600_000:.1f} h needed, ~{have / 3_600_000:.1f} h left")
    return True
