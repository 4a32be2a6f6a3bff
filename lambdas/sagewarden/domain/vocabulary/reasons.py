"""The supervisor's closed sets of reasons as `str` enums: `StopIntent`, `WaitReason`,
`EventSource`, `LogCheck`. Why: docs/reliability.md (*Closed sets are `str` enums*)."""

from __future__ import annotations

from enum import StrEnum


class StopIntent(StrEnum):
    """Why the supervisor asked SageMaker to stop an attempt (`Attempt.stop_intent`). An unknown
    stored value is a supervisor stop with no special handling: the ending is classed as
    SUPERVISOR_STOP and the run continues by its ordinary rules."""

    CANCEL = "cancel"
    """A user cancelled the run: the ending finishes it CANCELLED."""
    HANG = "hang"
    """A hang was confirmed: resume, on a warm pool when it is healthy."""
    WALL_CLOCK = "wall_clock"
    """The run's wall-clock budget is spent: the ending fails the run."""
    COST = "cost_budget"
    """The run's cost budget is spent: the ending fails the run."""
    ORPHAN = "orphan"
    """A job of this run that the run no longer counts as its attempt."""
    WINDOW_END = "window_end"
    """The Training Plan's window ends: save and wait for the next window."""
    BAD_HOST = "bad_host"
    """A host was singled out as bad: resume on new instances."""
    STRAGGLER = "straggler"
    """A slow host (fail-slow) was singled out: resume on new instances."""


class WaitReason(StrEnum):
    """Why a RETRY_WAIT run waits to launch (`Run.wait_reason`). An unknown stored value waits its
    timer out like any other and counts against no budget of its own."""

    QUOTA = "quota"
    """The account's quota for the instance type is used up: woken when a run releases it."""
    CAPACITY = "capacity"
    """SageMaker had no capacity (CapacityError, InsufficientCapacity): back off and ask again."""
    THROTTLE = "throttle"
    """CreateTrainingJob was throttled or answered a server error: back off, bounded."""
    WARM_POOL = "warm_pool"
    """The next launch waits for the previous attempt's warm pool to be Available."""
    WINDOW = "window"
    """The Training Plan's next window has not opened yet."""


class EventSource(StrEnum):
    """Where an observation came from (never stored: events are not saved). A value no member
    knows is neither an event's edge nor a Describe's level, so no rule that asks for one applies."""

    EVENT = "event"
    """An EventBridge event: an edge that may be late, duplicated or lost."""
    DESCRIBE = "describe"
    """The supervisor's own DescribeTrainingJob: a level read now."""
    SWEEP = "sweep"
    """The sweep's own look at an alarm's state: a level."""


class LogCheck(StrEnum):
    """What the job's own training streams say about a silence its heartbeat alarm reports."""

    SILENT = "silent"
    """No line in the silence window: the silence is real."""
    RECENT = "recent"
    """Lines, all newer than a delivering heartbeat would show yet: not silent."""
    CONTRADICTED = "contradicted"
    """Lines the heartbeat should have shown: the pipeline failed this job."""
