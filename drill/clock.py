"""A virtual clock (epoch milliseconds) that only moves forwards."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime

DEFAULT_START = datetime(2026, 1, 5, tzinfo=UTC)


def to_ms(value: datetime) -> int:
    """Epoch milliseconds of a datetime (naive datetimes are taken as UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return round(value.timestamp() * 1000)


def from_ms(ms: int) -> datetime:
    """Tz-aware UTC datetime of epoch milliseconds."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


class VirtualClock:
    """Virtual time for the drill. ``now_ms`` is epoch milliseconds; time never goes backwards."""

    def __init__(self, start: datetime | int | None = None) -> None:
        if start is None:
            start = DEFAULT_START
        self.now_ms: int = start if isinstance(start, int) else to_ms(start)

    def now(self) -> datetime:
        """The current virtual time as a tz-aware UTC datetime."""
        return from_ms(self.now_ms)

    def advance_to(self, ms: int) -> None:
        """Move the clock to ``ms`` (equal is allowed; earlier raises ValueError)."""
        if ms < self.now_ms:
            raise ValueError(f"virtual clock cannot go backwards: {ms} < {self.now_ms}")
        self.now_ms = ms

    def advance_by(self, ms: int) -> None:
        """Move the clock forwards by ``ms`` milliseconds."""
        self.advance_to(self.now_ms + ms)

    def __repr__(self) -> str:
        return f"VirtualClock({self.now().isoformat()})"


@contextmanager
def _moto_now(module_name: str, clock: VirtualClock) -> Iterator[None]:
    """Make a moto service module take the virtual clock as "now" inside the block."""
    import importlib  # local: the clock itself must not need moto

    module = importlib.import_module(module_name)
    saved = getattr(module, "utcnow")  # noqa: B009 - moto does not export it
    setattr(module, "utcnow", lambda: clock.now().replace(tzinfo=None))  # noqa: B010
    try:
        yield
    finally:
        setattr(module, "utcnow", saved)  # noqa: B010


def moto_logs_follow(clock: VirtualClock) -> AbstractContextManager[None]:
    """Let moto's CloudWatch Logs take the virtual clock as "now" inside the block.

    moto rejects log events stamped more than 14 days before (or 2 hours after) its own clock,
    which is the wall clock; virtual time is usually far from it. Use inside ``mock_aws()``.
    """
    return _moto_now("moto.logs.models", clock)


def moto_s3_follow(clock: VirtualClock) -> AbstractContextManager[None]:
    """Let moto's S3 stamp LastModified with virtual time (checkpoint age is a health signal)."""
    return _moto_now("moto.s3.models", clock)


def moto_cloudwatch_follow(clock: VirtualClock) -> AbstractContextManager[None]:
    """Let moto's CloudWatch stamp alarms (configuration and state timestamps) with virtual time:
    the supervisor measures how long an alarm has been in ALARM from them."""
    return _moto_now("moto.cloudwatch.models", clock)
