"""Hang windows learned from the attempt's own cadence: a safety factor times its typical quiet
stretch, between a floor and the policy's window, once the cadence is established. Pure. Why:
docs/hang-detection.md (*Learned windows*)."""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sagewarden.domain.hangs.alarms import METRIC_LAG_MIN

MINUTE_MS = 60_000
LEARN_MIN_OBSERVED = 20  # minutes of observed training (past start-up) before a window is learned
MIN_INTERVALS = 10  # ... and at least this many typical intervals
QUANTILE = 0.9  # the typical quiet stretch: the longest of the shortest 90 % of them
HORIZON_MIN = 360  # the activity looked at (the newest six hours)
SAFETY_FACTOR = 3.0
# the silence alarms cannot be shorter (late datapoints alone would fill a shorter window:
# adapters/cloudwatch_hang_alarms.py); a benign phase longer than it is the evidence's to judge
FLOOR_MIN = METRIC_LAG_MIN + 1
# the newest minutes may still lack datapoints: a GetMetricData read sees a minute only once its
# datapoint has arrived, up to METRIC_LAG_MIN minutes after the minute ended (AWS publishes no
# bound; drill/alarms/metric_delay.py models up to 3 minutes); so only minutes ended that long ago are read
SETTLE_MIN = METRIC_LAG_MIN


@dataclass(frozen=True)
class Cadence:
    window_min: int | None  # None: not enough observed yet (the policy's window stays in force)
    typical_quiet_min: int  # the QUANTILE quiet stretch (0 for a job active every minute)
    observed_min: int  # minutes of activity data the verdict rests on
    intervals: int = 0  # completed quiet stretches seen (0-minute ones included)

    @property
    def quantile_pct(self) -> int:
        return round(QUANTILE * 100)


def observation_span(start_ms: int, now_ms: int) -> tuple[int, int]:
    """The [first, end) minutes to look at: the horizon, after `start_ms`, without the newest
    (still settling) minutes."""
    end = (now_ms // MINUTE_MS - SETTLE_MIN) * MINUTE_MS
    first = max(-(-start_ms // MINUTE_MS) * MINUTE_MS, end - HORIZON_MIN * MINUTE_MS)
    return first, end


def typical_quiet(gaps: Sequence[int]) -> int:
    """The QUANTILE of the quiet stretches (minutes): the longest of the shortest 90 %."""
    ordered = sorted(gaps)
    return ordered[max(0, math.ceil(QUANTILE * len(ordered)) - 1)]


def learn_window(
    series: Sequence[tuple[int, float]], *, start_ms: int, now_ms: int, ceiling_min: int
) -> Cadence:
    """`series`: (minute start ms, value) of the minutes that had data; a value > 0 is activity.
    `start_ms`: where learning may begin (after Training started and its start-up allowance)."""
    first, end = observation_span(start_ms, now_ms)
    observed = max(0, (end - first) // MINUTE_MS)
    active = sorted({t - t % MINUTE_MS for t, v in series if v > 0 and first <= t < end})
    if len(active) < 2:
        return Cadence(None, 0, observed)
    gaps = [(b - a) // MINUTE_MS - 1 for a, b in itertools.pairwise(active)]
    typical = typical_quiet(gaps)
    if observed < max(LEARN_MIN_OBSERVED, MIN_INTERVALS * (typical + 1)) or len(gaps) < MIN_INTERVALS:
        return Cadence(None, typical, observed, len(gaps))
    window = max(FLOOR_MIN, math.ceil(SAFETY_FACTOR * (typical + 1)))
    return Cadence(min(ceiling_min, window), typical, observed, len(gaps))


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


def learnable_at(started_ms: int, startup_min: int) -> int:
    """The earliest moment a window can be learned (`learn_window` for a job active every
    minute): LEARN_MIN_OBSERVED settled minutes past the start-up allowance."""
    return started_ms + (startup_min + LEARN_MIN_OBSERVED + SETTLE_MIN) * MINUTE_MS


def wants_cadence(
    started_ms: int | None, now_ms: int, startup_min: int, *, startup_known: bool = True
) -> bool:
    """Whether reading the activity can teach anything yet: a window (after LEARN_MIN_OBSERVED of
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
    return now_ms >= learnable_at(started_ms, startup_min)


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
