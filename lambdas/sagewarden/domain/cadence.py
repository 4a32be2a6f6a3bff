"""Hang windows learned from the attempt's own cadence (pure).

A fixed log-silence window has to be longer than the slowest benign silence of *any* job, so a
spinning NCCL collective burns that long on every job. Like NVIDIA's resiliency extension, which
derives its heartbeat timeouts from observed intervals times a safety factor, the supervisor
reads the attempt's per-minute activity (the heartbeat metric for log lines, the progress
metric's reports) and sets the window to the safety factor times the longest *completed* quiet
stretch it has seen, never below a floor and never above the policy's window (which stays in
force until enough training has been observed).

Declared long phases (a training script prints `[sagewarden] phase=<name> max_minutes=<n>`)
never count as quiet: the heartbeat function marks their minutes as active (see
`handlers/on_training_logs.py`), so a 12-minute checkpoint save neither trips the alarm nor
widens the window.

The quiet stretch still under way is not learned from: a job that is hanging right now must not
teach the supervisor to wait longer.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sagewarden.domain.hang_alarms import METRIC_LAG_MIN

MINUTE_MS = 60_000
LEARN_AFTER_MIN = 120  # minutes of observed training before a window is learned
HORIZON_MIN = 360  # the activity looked at (the newest six hours)
SAFETY_FACTOR = 3.0
FLOOR_MIN = 5
# the newest minutes may still lack datapoints: a GetMetricData read sees a minute only once its
# datapoint has arrived, up to METRIC_LAG_MIN minutes after the minute ended (AWS publishes no
# bound; drill/metric_delay.py models up to 3 minutes); so only minutes ended that long ago are read
SETTLE_MIN = METRIC_LAG_MIN


@dataclass(frozen=True)
class Cadence:
    window_min: int | None  # None: not enough observed yet (the policy's window stays in force)
    longest_quiet_min: int  # the longest completed stretch without activity
    observed_min: int  # minutes of activity data the verdict rests on


def observation_span(start_ms: int, now_ms: int) -> tuple[int, int]:
    """The [first, end) minutes to look at: the horizon, after `start_ms`, without the newest
    (still settling) minutes."""
    end = (now_ms // MINUTE_MS - SETTLE_MIN) * MINUTE_MS
    first = max(-(-start_ms // MINUTE_MS) * MINUTE_MS, end - HORIZON_MIN * MINUTE_MS)
    return first, end


def learn_window(
    series: Sequence[tuple[int, float]], *, start_ms: int, now_ms: int, ceiling_min: int
) -> Cadence:
    """`series`: (minute start ms, value) of the minutes that had data; a value > 0 is activity.
    `start_ms`: where learning may begin (after Training started and its start-up allowance)."""
    first, end = observation_span(start_ms, now_ms)
    observed = max(0, (end - first) // MINUTE_MS)
    active = sorted({t - t % MINUTE_MS for t, v in series if v > 0 and first <= t < end})
    if observed < LEARN_AFTER_MIN or len(active) < 2:
        return Cadence(None, 0, observed)
    longest = max((b - a) // MINUTE_MS - 1 for a, b in itertools.pairwise(active))
    window = max(FLOOR_MIN, math.ceil(SAFETY_FACTOR * (longest + 1)))
    return Cadence(min(ceiling_min, window), longest, observed)


STARTUP_FLOOR_MIN = 10


def learn_startup(
    series: Sequence[tuple[int, float]], *, started_ms: int, allowance_min: int, now_ms: int
) -> int | None:
    """The start-up allowance the run's next attempts need, from this attempt's first
    `allowance_min` minutes of Training: SAFETY_FACTOR x its longest quiet stretch there (a
    first-step compile, NCCL init), at least STARTUP_FLOOR_MIN, at most `allowance_min`. A job
    that trains within a minute of starting then lets a hang early in a resumed attempt be acted
    on in minutes instead of waiting out the whole allowance. None: that span is not fully
    observed yet."""
    first = -(-started_ms // MINUTE_MS) * MINUTE_MS
    end = first + allowance_min * MINUTE_MS
    if allowance_min <= 0 or (now_ms // MINUTE_MS - SETTLE_MIN) * MINUTE_MS < end:
        return None
    if now_ms - first > HORIZON_MIN * MINUTE_MS:
        return None  # no longer within the activity read
    active = sorted({t - t % MINUTE_MS for t, v in series if v > 0 and first <= t < end})
    points = [first - MINUTE_MS, *active, end]
    longest = max((b - a) // MINUTE_MS - 1 for a, b in itertools.pairwise(points))
    return min(allowance_min, max(STARTUP_FLOOR_MIN, math.ceil(SAFETY_FACTOR * (longest + 1))))


def wants_cadence(
    started_ms: int | None, now_ms: int, startup_min: int, *, startup_known: bool = True
) -> bool:
    """Whether reading the activity can teach anything yet: a window (after LEARN_AFTER_MIN of
    training past start-up) or, when the start-up allowance is not yet known for this kind of
    attempt, the allowance (as soon as the start-up span is observed)."""
    if started_ms is None:
        return False
    past_startup = now_ms - (started_ms + startup_min * MINUTE_MS)
    if (
        not startup_known
        and past_startup >= SETTLE_MIN * MINUTE_MS
        and now_ms - started_ms <= HORIZON_MIN * MINUTE_MS
    ):
        return True
    return past_startup >= (LEARN_AFTER_MIN + SETTLE_MIN) * MINUTE_MS


# --- the training-script contract's phase marker ------------------------------------------------

PHASE_RE = re.compile(r"\[sagewarden\]\s+phase=(?P<name>[\w.-]{1,64})\s+max_minutes=(?P<minutes>\d{1,4})\b")
MAX_PHASE_MINUTES = 120  # EMF (like PutMetricData) takes datapoints up to two hours in the future


def phase_marker(name: str, max_minutes: int) -> str:
    """The line a training script prints before a long silent phase."""
    return f"[sagewarden] phase={name} max_minutes={max_minutes}"


def phase_cover(message: str, timestamp_ms: int) -> list[int]:
    """The minutes (start ms) a declared-phase marker line keeps active, the marker's own minute
    first; empty for any other line."""
    found = PHASE_RE.search(message)
    if found is None:
        return []
    minutes = max(1, min(int(found.group("minutes")), MAX_PHASE_MINUTES))
    first = timestamp_ms // MINUTE_MS * MINUTE_MS
    return [first + i * MINUTE_MS for i in range(minutes)]


def activity_per_minute(events: Iterable[tuple[int, str]]) -> Counter[int]:
    """What the heartbeat metric counts, per minute start (ms): log events (timestamp ms,
    message), and one more for each later minute a phase marker among them declares active.
    The heartbeat function publishes exactly this; without a log subscription the sweep computes
    it from the logs themselves."""
    per_minute: Counter[int] = Counter()
    for ts, message in events:
        per_minute[ts // MINUTE_MS * MINUTE_MS] += 1
        for minute in phase_cover(message, ts)[1:]:
            per_minute[minute] += 1
    return per_minute
