"""Hang windows learned from an attempt's own cadence, and the declared-phase marker."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sagewarden.domain.hangs.alarms import METRIC_LAG_MIN
from sagewarden.domain.hangs.cadence import (
    FLOOR_MIN,
    HORIZON_MIN,
    LEARN_MIN_OBSERVED,
    MAX_PHASE_MINUTES,
    MIN_INTERVALS,
    SETTLE_MIN,
    learn_startup,
    learn_window,
    learnable_at,
    phase_cover,
    phase_marker,
    typical_quiet,
    wants_cadence,
)

MIN = 60_000
T0 = 1_000 * MIN


def _every(k: int, minutes: int, *, start: int = T0, skip: range = range(0)) -> list[tuple[int, float]]:
    return [(start + m * MIN, 6.0) for m in range(0, minutes, k) if m not in skip]


@pytest.mark.claim(
    "learned (≥ 4 min, 20 min past start-up for a job logging every minute; carried to the next attempts on the same instances), else 30 min; never below 4"
)
@pytest.mark.claim(
    "20 minutes of training past the start-up allowance and at least ten of its intervals (the sweep looks at that moment)"
)
def test_a_job_logging_every_minute_has_its_window_learned_after_twenty_minutes_not_two_hours():
    """Issue 18: a window was learned only after 120 minutes of training past start-up, so a spin
    2.4 h into a 16-host run's first attempt took 29 minutes. A job active every minute has shown
    its cadence after tens of minutes; the evidence (domain/vocabulary/evidence.py) guards what is longer."""
    series = _every(1, 200)
    early = LEARN_MIN_OBSERVED + SETTLE_MIN
    assert learn_window(series, start_ms=T0, now_ms=T0 + (early - 1) * MIN, ceiling_min=30).window_min is None
    got = learn_window(series, start_ms=T0, now_ms=T0 + early * MIN, ceiling_min=30)
    assert (
        got.window_min == FLOOR_MIN and got.typical_quiet_min == 0 and got.observed_min == LEARN_MIN_OBSERVED
    )
    assert learnable_at(T0, 45) == T0 + (45 + early) * MIN


@pytest.mark.claim(
    "learn the log-silence and progress windows from the attempt's own cadence (3 × its typical quiet stretch, at least 4 min, once 20 minutes past start-up show it)"
)
@pytest.mark.claim(
    "the longest of the shortest 90 % of the completed quiet stretches it has shown in the last 6 hours (never below 4 minutes, never above the policy's window)"
)
def test_cadence_of_a_job_logging_every_minute_is_the_floor():
    series = _every(1, 200)
    got = learn_window(series, start_ms=T0, now_ms=T0 + 200 * MIN, ceiling_min=30)
    assert got.window_min == FLOOR_MIN == 4 and got.typical_quiet_min == 0


@pytest.mark.claim(
    "learn the log-silence and progress windows from the attempt's own cadence (3 × its typical quiet stretch, at least 4 min, once 20 minutes past start-up show it)"
)
@pytest.mark.claim("The log-silence and progress windows become 3 × the attempt's")
@pytest.mark.claim(
    "20 minutes of training past the start-up allowance and at least ten of its intervals (the sweep looks at that moment)"
)
@pytest.mark.claim("a job that logs every 10 minutes keeps a 30-minute one after 100")
def test_a_slow_cadence_needs_as_many_of_its_intervals_observed():
    series = _every(10, 300)
    needed = MIN_INTERVALS * 10  # ten of its 10-minute intervals
    assert (
        learn_window(series, start_ms=T0, now_ms=T0 + (needed + 2) * MIN, ceiling_min=30).window_min is None
    )
    got = learn_window(series, start_ms=T0, now_ms=T0 + 300 * MIN, ceiling_min=30)
    assert got.typical_quiet_min == 9 and got.window_min == 30  # 3 x 10 min, at the policy's ceiling


@pytest.mark.claim(
    "learn the log-silence and progress windows from the attempt's own cadence (3 × its typical quiet stretch, at least 4 min, once 20 minutes past start-up show it)"
)
@pytest.mark.claim(
    "the longest of the shortest 90 % of the completed quiet stretches it has shown in the last 6 hours (never below 4 minutes, never above the policy's window)"
)
def test_the_window_follows_the_typical_quiet_stretch_not_a_rare_benign_phase():
    """A 2-minute checkpoint save every 30 minutes no longer widens the window: a phase longer than
    it is told apart by the evidence of what the hosts are doing, read when the alarm fires."""
    saves = [m for m in range(150) if m % 30 in (28, 29)]
    series = _every(1, 150, skip=saves)
    got = learn_window(series, start_ms=T0, now_ms=T0 + 150 * MIN, ceiling_min=30)
    assert got.typical_quiet_min == 0 and got.window_min == FLOOR_MIN
    assert typical_quiet([0] * 9 + [12]) == 0 and typical_quiet([0] * 8 + [12, 12]) == 12


@pytest.mark.claim(
    "The quiet stretch still under way is never learned from, so a hang cannot teach the supervisor to wait"
)
def test_cadence_counts_completed_quiet_stretches_but_not_the_one_under_way():
    quiet = [m for m in range(150) if m % 3 != 0]  # active every third minute: quiet stretches of 2
    series = _every(1, 150, skip=quiet)
    got = learn_window(series, start_ms=T0, now_ms=T0 + 150 * MIN, ceiling_min=30)
    assert got.typical_quiet_min == 2 and got.window_min == 9
    hanging = _every(1, 140)  # silent since minute 140, now minute 170: not learned from
    got = learn_window(hanging, start_ms=T0, now_ms=T0 + 170 * MIN, ceiling_min=30)
    assert got.window_min == FLOOR_MIN


@pytest.mark.claim(
    "the longest of the shortest 90 % of the completed quiet stretches it has shown in the last 6 hours (never below 4 minutes, never above the policy's window)"
)
@settings(max_examples=200, deadline=None)
@given(gaps=st.lists(st.integers(0, 40), min_size=3, max_size=60), ceiling=st.integers(5, 60))
def test_cadence_window_is_bounded_and_covers_nine_in_ten_quiet_stretches_it_saw(gaps, ceiling):
    t, series = T0, []
    for g in gaps:
        series.append((t, 1.0))
        t += (g + 1) * MIN
    series.append((t, 1.0))
    now = t + (SETTLE_MIN + 1) * MIN
    got = learn_window(series, start_ms=T0, now_ms=now, ceiling_min=ceiling)
    if got.window_min is not None:
        assert FLOOR_MIN <= got.window_min <= max(FLOOR_MIN, ceiling)
        covered = sum(1 for g in gaps if g < got.window_min)
        assert got.window_min == ceiling or covered >= 0.9 * len(gaps)
        assert got.intervals >= MIN_INTERVALS and got.observed_min >= LEARN_MIN_OBSERVED


@pytest.mark.claim("`[sagewarden] phase=<name> max_minutes=<n>` (n ≤ 120) before a long silent phase")
def test_phase_marker_keeps_its_minutes_active_up_to_two_hours():
    line = phase_marker("checkpoint_save", 15)
    assert line == "[sagewarden] phase=checkpoint_save max_minutes=15"
    cover = phase_cover(f"2026-12-01 10:00:00 INFO {line}", T0 + 30_000)
    assert cover == [T0 + i * MIN for i in range(15)]
    assert len(phase_cover(phase_marker("eval", 9999), T0)) == MAX_PHASE_MINUTES
    assert phase_cover("phase=checkpoint_save max_minutes=15", T0) == []  # not the marker
    assert phase_cover("step 100 loss 1.2", T0) == []


# --- the start-up allowance learned for the next attempts -----------------------------------------


@pytest.mark.claim(
    "within 10 minutes of minute 48), 3 × the longest quiet stretch of its first 45 minutes (at least 10, at most 45) becomes the allowance of the run's next *comparable* attempts"
)
def test_a_job_that_trains_at_once_gets_the_floor_allowance_for_its_next_attempts():
    series = _every(1, 200)
    assert learn_startup(series, started_ms=T0, allowance_min=45, now_ms=T0 + 200 * MIN) == 10


@pytest.mark.claim(
    "within 10 minutes of minute 48), 3 × the longest quiet stretch of its first 45 minutes (at least 10, at most 45) becomes the allowance of the run's next *comparable* attempts"
)
def test_a_30_minute_compile_keeps_the_whole_allowance():
    # config lines at start, then 30 silent minutes of compile, then steps every minute
    series = [(T0, 40.0), *_every(1, 200, skip=range(0, 31))]
    assert learn_startup(series, started_ms=T0, allowance_min=45, now_ms=T0 + 200 * MIN) == 45


@pytest.mark.claim(
    "within 10 minutes of minute 48), 3 × the longest quiet stretch of its first 45 minutes (at least 10, at most 45) becomes the allowance of the run's next *comparable* attempts"
)
def test_a_5_minute_nccl_init_gets_three_times_its_length():
    series = _every(1, 200, skip=range(1, 6))  # minutes 1-5 silent
    assert learn_startup(series, started_ms=T0, allowance_min=45, now_ms=T0 + 200 * MIN) == 18


def test_the_allowance_is_not_learned_before_its_span_is_over_or_once_it_left_the_horizon():
    series = _every(1, 40)
    assert learn_startup(series, started_ms=T0, allowance_min=45, now_ms=T0 + 40 * MIN) is None
    assert learn_startup(series, started_ms=T0, allowance_min=45, now_ms=T0 + 7 * 60 * MIN) is None
    assert learn_startup(series, started_ms=T0, allowance_min=0, now_ms=T0 + 200 * MIN) is None


def test_an_attempt_silent_from_its_start_keeps_the_whole_allowance():
    assert learn_startup([], started_ms=T0, allowance_min=45, now_ms=T0 + 200 * MIN) == 45


@pytest.mark.claim(
    "within 10 minutes of minute 48), 3 × the longest quiet stretch of its first 45 minutes (at least 10, at most 45) becomes the allowance of the run's next *comparable* attempts"
)
def test_the_start_up_allowance_is_read_as_soon_as_its_span_is_observed():
    """Issue 16 item 6: the learned allowance needed ~167 minutes of training (the window's
    learning span then) plus a sweep tick, while its own span is 45 minutes."""
    t0 = 1_000 * MIN
    settled = 45 + SETTLE_MIN  # the span's last minutes have their datapoints (METRIC_LAG_MIN late)
    assert not wants_cadence(t0, t0 + (settled - 1) * MIN, 45, startup_known=False)  # span still settling
    assert wants_cadence(t0, t0 + settled * MIN, 45, startup_known=False)
    assert not wants_cadence(t0, t0 + settled * MIN, 45, startup_known=True)  # known: only windows
    assert not wants_cadence(
        t0, t0 + (45 + LEARN_MIN_OBSERVED + SETTLE_MIN - 1) * MIN, 45, startup_known=True
    )
    assert wants_cadence(t0, t0 + (45 + LEARN_MIN_OBSERVED + SETTLE_MIN) * MIN, 45, startup_known=True)
    # past the activity horizon the span can no longer be read
    assert not wants_cadence(t0, t0 + (HORIZON_MIN + 1) * MIN, 500, startup_known=False)


def _arrived(series: list[tuple[int, float]], now_ms: int, delays_s: list[int]) -> list[tuple[int, float]]:
    """The minutes a GetMetricData at ``now_ms`` returns when each datapoint arrives its own delay
    (<= METRIC_LAG_MIN minutes) after its minute ends."""
    return [
        (t, v) for i, (t, v) in enumerate(series) if t + MIN + delays_s[i % len(delays_s)] * 1000 <= now_ms
    ]


@pytest.mark.claim("The cadence is read only from minutes at least 3 minutes old")
@settings(max_examples=200, deadline=None)
# a 5-minute quiet stretch ending one minute before the start-up span does, that minute's datapoint
# 3 minutes late: read too early, the stretch looks 6 minutes long
@example(quiet=[0] * 38 + [5] + [0] * 30, delays_s=[179], now_offset_s=0, extra_min=0)
@given(
    quiet=st.lists(st.integers(0, 6), min_size=20, max_size=80),
    delays_s=st.lists(st.integers(1, METRIC_LAG_MIN * 60), min_size=1, max_size=30),
    now_offset_s=st.integers(0, 59),
    extra_min=st.integers(0, 200),
)
def test_what_is_learned_does_not_depend_on_datapoints_still_on_their_way(
    quiet, delays_s, now_offset_s, extra_min
):
    """The supervisor reads the activity with GetMetricData, which answers only the datapoints that
    have arrived; a datapoint may arrive up to METRIC_LAG_MIN minutes late (drill/alarms/metric_delay.py).
    The minutes the learning looks at are settled, so what it learns is what the complete series
    would teach."""
    series, t = [], T0
    for gap in quiet:
        series.append((t, 6.0))
        t += (gap + 1) * MIN
    allowance = 45
    for span in (allowance + SETTLE_MIN, LEARN_MIN_OBSERVED + allowance + SETTLE_MIN + extra_min):
        now = T0 + span * MIN + now_offset_s * 1000
        seen = _arrived(series, now, delays_s)
        full = [(m, v) for m, v in series if m < now]
        assert learn_startup(seen, started_ms=T0, allowance_min=allowance, now_ms=now) == learn_startup(
            full, started_ms=T0, allowance_min=allowance, now_ms=now
        )
        assert learn_window(seen, start_ms=T0 + allowance * MIN, now_ms=now, ceiling_min=30) == learn_window(
            full, start_ms=T0 + allowance * MIN, now_ms=now, ceiling_min=30
        )
