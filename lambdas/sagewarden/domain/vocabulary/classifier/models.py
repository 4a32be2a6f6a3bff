"""What the classifier takes and gives: the ending of one attempt, its class and the verdict. Pure
data."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Classification", "Ending", "EndingClass", "QuotaInfo"]


class EndingClass(StrEnum):
    """What kind of ending an attempt had; decides what the supervisor does next."""

    SUCCEEDED = "SUCCEEDED"
    INFRASTRUCTURE = "INFRASTRUCTURE"
    SPOT_INTERRUPTED = "SPOT_INTERRUPTED"
    USER_ERROR = "USER_ERROR"
    UNKNOWN = "UNKNOWN"
    CAPACITY = "CAPACITY"
    QUOTA = "QUOTA"
    THROTTLED = "THROTTLED"
    SEGMENT_DONE = "SEGMENT_DONE"
    SUPERVISOR_STOP = "SUPERVISOR_STOP"
    USER_STOPPED = "USER_STOPPED"
    CLIENT_ERROR = "CLIENT_ERROR"
    WINDOW_END = "WINDOW_END"  # a training plan's window ended (domain/capacity/training_plans.py)
    # the job was deleted outside sagewarden before its ending was seen (domain/endings/attempt_ended.py)
    DELETED = "DELETED"


@dataclass(frozen=True)
class QuotaInfo:
    """A parsed ResourceLimitExceeded message (or one saying the resource is not offered at all)."""

    quota_name: str
    limit: int
    used: int
    delta: int
    # "The requested resource training-job/ml.p2.xlarge is not available in this region": no
    # quota to raise, the instance type is not offered here (quota_name is the resource named)
    unavailable: bool = False

    @property
    def can_ever_fit(self) -> bool:
        """False when the request alone is larger than the quota (only a quota increase helps), or
        when the resource is not offered in the region at all."""
        return not self.unavailable and self.delta <= self.limit


@dataclass(frozen=True)
class Ending:
    """Everything known about how an attempt ended (or why it could not start)."""

    status: str | None = None
    secondary_status: str | None = None
    failure_reason: str | None = None
    api_error_code: str | None = None
    api_error_message: str | None = None
    log_tail: tuple[str, ...] = ()
    stop_intent: str | None = None
    reached_training: bool = False
    training_seconds: float = 0.0
    pending_seconds: float = 0.0
    max_pending_seconds: int | None = None
    # the highest MemoryUtilization (percent) a host reached in the minutes before the job ended, and
    # which host: read for an ending a kill explains (None: not read, or unknown -- never "low")
    host_memory: tuple[str, float] | None = None
    # the request sets EnableNetworkIsolation: no route out of the container, to a model hub or else
    network_isolated: bool = False


@dataclass(frozen=True)
class Classification:
    """The verdict: a class, one readable line for humans, and the texts it rests on."""

    kind: EndingClass
    reason: str
    evidence: tuple[str, ...]
    quota: QuotaInfo | None = None
    hardware: bool = False  # an instance or GPU failed: restart cold, never on a warm pool
    # the class is a guess (UNKNOWN): what would change it, for the alert and `get` (None: not a guess)
    guess: str | None = None
    # the texts repeat on every attempt when the cause is the code, its data or its configuration:
    # a repeat at the same step after a resume from the same checkpoint is a loop (domain/endings/loops.py).
    # False for transient faults (a collective timeout, a service error), which recur by chance
    confirmable: bool = False
    # advice for the owner (the memory fault's, the full disk's), or None
    advice: str | None = None
