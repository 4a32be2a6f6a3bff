"""The time one handler invocation spends beyond its virtual start: throttling waits charged to it.

The router opens one around every handler call (`invocation`); outside one nothing is charged.
Why: docs/drill.md (*The account*: time spent in an invocation)."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

_SPENT: contextvars.ContextVar[list[float] | None] = contextvars.ContextVar(
    "sagewarden_invocation_spent_ms", default=None
)


@contextlib.contextmanager
def invocation() -> Iterator[None]:
    """A handler invocation: what it is charged is counted from 0 inside the block."""
    token = _SPENT.set([0.0])
    try:
        yield
    finally:
        _SPENT.reset(token)


def spent_ms() -> float:
    """Milliseconds the current invocation has been charged (0 outside an invocation)."""
    box = _SPENT.get()
    return box[0] if box is not None else 0.0


def charge(ms: float) -> None:
    """Add ``ms`` to the current invocation's time (nothing outside an invocation)."""
    box = _SPENT.get()
    if box is not None:
        box[0] += ms
