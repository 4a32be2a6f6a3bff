"""The time one handler invocation spends beyond the virtual instant it started at.

The drill runs a handler at one virtual instant: its AWS calls take no virtual time. What a call
does cost is the wait its client makes when the account throttles it (drill/sim/rate_limits.py: the
retries botocore would make, slot by slot). That wait is charged to the invocation that made the
call, so the invocation's calls are sequential in time (the tenth call of a sweep comes after the
first nine and their waits), its remaining time shrinks (the router's LambdaContext answers
``get_remaining_time_in_millis`` from it, which is what the sweep's time budget reads), and the
log reader's budgets see it (the account's reader clock adds it).

The router opens an invocation around every handler call (:func:`invocation`); outside one
(tests calling the service directly, the drill's own reads) nothing is charged.
"""

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
