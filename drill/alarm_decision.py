"""CloudWatch's alarm decision, pure: one evaluation range of period classes -> the alarm state.

From the AWS CloudWatch User Guide, "Configuring how CloudWatch alarms treat missing data" (both
tables of that page are unit tests) and "Evaluating an alarm" (M out of N). Used by the drill's
alarm evaluator (``drill/alarm_evaluator.py``); nothing here knows about metrics or time.

- With r real (non-missing) periods in the range and M = ``DatapointsToAlarm`` (default N):
  * r >= N: the N most recent real periods are evaluated (older ones in the range stand in for
    missing recent ones); TreatMissingData is not used. ALARM if at least M breach, else OK.
  * 0 < r < N: every real period of the range is evaluated and N - r missing periods are filled
    as TreatMissingData says: ``breaching`` counts them as breaching, ``notBreaching`` as not
    breaching, ``missing``/``ignore`` leave them out. ALARM if at least M breach, else OK, with the
    documented "premature alarm" rule for ``missing``/``ignore``: when the range holds no
    non-breaching datapoint and its oldest breaching one is at least M periods old, ``missing``
    goes to ALARM and ``ignore`` keeps the current state (the page's sentences are ambiguous about
    which periods this rule looks at; this reading is the one that matches its tables).
  * r == 0: ``breaching`` -> ALARM, ``notBreaching`` -> OK, ``ignore`` -> keep the current state,
    ``missing`` -> INSUFFICIENT_DATA.
"""

from __future__ import annotations

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


def _stable_periods(window: bytes | bytearray, n: int, m: int, treat: str, state: str) -> int:
    """How many periods from now the state may first change, whatever data arrives (>= 1).

    Only an OK state is proven stable: at j periods ahead the range holds j unknown periods
    followed by the newest ``len(window) - j`` known ones. It stays OK when (1) the known newest
    N - j periods hold more than N - M non-breaching datapoints (they are always evaluated, so at
    most M - 1 can breach; any of them also rules out "no data" and the premature-alarm rule), or, for
    ``notBreaching``/``ignore``, (2) j + (breaching datapoints among the known ones) < M.
    """
    if state != OK:
        return 1
    rng = len(window)
    j = 1
    while True:
        known_last = n - j
        if known_last >= 1 and window[rng - known_last :].count(_GOOD) > n - m:
            j += 1
            continue
        if treat in ("notBreaching", "ignore"):
            known = rng - j
            breaching = window[rng - known :].count(_BREACH) if known > 0 else 0
            if j + breaching < m:
                j += 1
                continue
        return j


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
