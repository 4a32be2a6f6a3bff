"""CloudWatch's alarm decision, pure: one evaluation range of period classes to the alarm state.

Both tables of the missing-data page are unit tests. Why: docs/drill.md (*The alarm evaluator*),
docs/fidelity.md (TreatMissingData, M out of N)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

__all__ = ["ALARM", "INSUFFICIENT_DATA", "OK", "evaluate_periods"]

OK = "OK"
ALARM = "ALARM"
INSUFFICIENT_DATA = "INSUFFICIENT_DATA"

# period classes, stored one byte per period
_GOOD = ord("G")
_BREACH = ord("B")
_MISSING = ord("M")

_TREATMENTS = ("breaching", "notBreaching", "ignore", "missing")

# outcome kinds
_ALL_REAL = "all_real"  # >= N real datapoints in the range
_FILLED = "filled"  # some real, fewer than N
_PREMATURE = "premature"  # filled, premature-alarm rule
_NO_DATA = "no_data"  # nothing in the range


def _decide(window: bytes | bytearray, n: int, m: int, treat: str, current: str) -> tuple[str, str]:
    """(new state, outcome kind) for one evaluation; ``window`` is the range, oldest first."""
    rng = len(window)
    missing = window.count(_MISSING)
    real = rng - missing
    if real >= n:
        last = window[-n:]
        if _MISSING not in last:
            breaching = last.count(_BREACH)
        else:
            breaching = bytes(window).replace(b"M", b"")[-n:].count(_BREACH)
        return (ALARM if breaching >= m else OK), _ALL_REAL
    if real == 0:
        if treat == "breaching":
            return ALARM, _NO_DATA
        if treat == "notBreaching":
            return OK, _NO_DATA
        if treat == "ignore":
            return current, _NO_DATA
        return INSUFFICIENT_DATA, _NO_DATA
    breaching = window.count(_BREACH)
    if treat == "breaching":
        breaching += n - real
    elif treat in ("missing", "ignore") and _GOOD not in window and rng - window.index(_BREACH) >= m:
        return (ALARM if treat == "missing" else current), _PREMATURE
    return (ALARM if breaching >= m else OK), _FILLED


def _evaluated(window: bytes | bytearray, n: int, kind: str) -> list[tuple[int, bool]]:
    """Indexes in ``window`` of the periods the outcome used, newest first: (index, filled)."""
    rng = len(window)
    if kind == _ALL_REAL:
        idx = [i for i in range(rng - 1, -1, -1) if window[i] != _MISSING]
        return [(i, False) for i in idx[:n]]
    if kind == _NO_DATA:
        return [(i, True) for i in range(rng - 1, rng - 1 - n, -1)]
    real = [i for i in range(rng - 1, -1, -1) if window[i] != _MISSING]
    fills = [i for i in range(rng - 1, -1, -1) if window[i] == _MISSING][: max(n - len(real), 0)]
    return sorted([(i, False) for i in real] + [(i, True) for i in fills], reverse=True)


def _stable_periods(
    window: bytes | bytearray, n: int, m: int, treat: str, state: str, unsure: int = 0
) -> int:
    """How many periods from now the state may first change, whatever data arrives (>= 1).

    Only an OK state is proven stable. ``window``: the final classes of the last evaluation's
    range; ``unsure``: how many of the newest periods of any evaluation may still lack datapoints
    (late ones, ``drill/alarms/metric_delay.py``), so that they may read as anything. At j periods ahead
    the range holds the known periods ``window[j:]`` followed by j new ones, and its newest
    u = max(j, unsure) periods are unknown; the ``len(window) - u`` before them are certain. It
    stays OK when (1) the certain newest N - u periods hold more than N - M non-breaching
    datapoints (they are always evaluated, so at most M - 1 can breach; any of them also rules out
    "no data" and the premature-alarm rule), or, for ``notBreaching``/``ignore``, (2)
    u + (breaching datapoints among the certain ones) < M.
    """
    if state != OK:
        return 1
    rng = len(window)
    j = 1
    while True:
        u = min(rng, max(j, unsure))
        certain = window[j : j + rng - u]
        known_last = n - u
        if known_last >= 1 and certain[len(certain) - known_last :].count(_GOOD) > n - m:
            j += 1
            continue
        if treat in ("notBreaching", "ignore") and u + certain.count(_BREACH) < m:
            j += 1
            continue
        return j


ANY_CLASS = b"GBM"
MAX_UNSURE_VARIANTS = 729  # 3^6: beyond that no promise is computed (the alarm is looked at every minute)


def _promise_periods(
    window: bytes | bytearray,
    future: int,
    n: int,
    m: int,
    treat: str,
    state: str,
    *,
    unsure: int = 0,
    empty: int = 0,
    empty_class: int | None = None,
) -> int | None:
    """Periods until the state may change if every period to come has the class ``future`` once
    its datapoints have arrived (a bounded series keeps its class until its job's next phase
    change): the newest ``unsure`` periods of each evaluation may still lack datapoints and read
    as anything, except that a period missing once every datapoint arrived stays missing with
    fewer (metric math makes no value out of less data, FILL aside, and FILL is never missing),
    and the newest ``empty`` ones, which surely have no datapoint yet, read as ``empty_class``
    (None: as anything). A very large number when the state never changes; None when too many
    periods are unsure to tell."""
    rng = len(window)
    unsure = min(unsure, rng)
    empty = min(empty, unsure)
    win = bytes(window)
    for j in range(1, rng + 2):
        win = win[1:] + bytes([future])
        head = win[: rng - unsure]
        choices: list[bytes] = []
        for k, c in enumerate(win[rng - unsure :]):
            if k >= unsure - empty and empty_class is not None:
                choices.append(bytes([empty_class]))
            else:
                choices.append(b"M" if c == _MISSING else ANY_CLASS)
        variants = 1
        for options in choices:
            variants *= len(options)
        if variants > MAX_UNSURE_VARIANTS:
            return None
        for tail in itertools.product(*choices):
            if _decide(head + bytes(tail), n, m, treat, state)[0] != state:
                return j
    return PROMISE_FOREVER


PROMISE_FOREVER = 1 << 40  # periods: the state cannot change until a phase change re-checks it


def evaluate_periods(
    periods: Sequence[bool | None],
    *,
    evaluation_periods: int,
    datapoints_to_alarm: int | None = None,
    treat_missing_data: str = "missing",
    current_state: str = INSUFFICIENT_DATA,
) -> str:
    """The state CloudWatch sets for an evaluation range, given oldest first as True (breaching),
    False (not breaching) or None (missing). The range may be longer than ``evaluation_periods``.
    """
    if treat_missing_data not in _TREATMENTS:
        raise ValueError(f"unknown TreatMissingData {treat_missing_data!r}")
    if len(periods) < evaluation_periods:
        raise ValueError("the evaluation range is shorter than EvaluationPeriods")
    window = bytes(_MISSING if p is None else (_BREACH if p else _GOOD) for p in periods)
    m = datapoints_to_alarm or evaluation_periods
    return _decide(window, evaluation_periods, m, treat_missing_data, current_state)[0]
