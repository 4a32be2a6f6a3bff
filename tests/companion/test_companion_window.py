"""The stall window, on a clock the test moves (the watchdog's look, `Job.check`, called by hand):
learned from the run's own step times, never during a declared phase within its budget, a phase
past its budget is a stall, once per stall. No thread, no backstop: only the decision."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from sagewarden_companion.job import Job


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def job(clock: Clock) -> Iterator[tuple[Job, io.StringIO]]:
    out = io.StringIO()
    j = Job(
        100,
        stall_floor_s=60,
        stall_factor=5,
        first_step_s=600,
        heartbeat_s=3600,
        watchdog=False,
        backstop=False,
        stream=out,
        env={"SM_CURRENT_HOST": "algo-1"},
        clock=clock,
    )
    yield j, out
    j.close()


def blocks(out: io.StringIO) -> list[str]:
    return [line for line in out.getvalue().splitlines() if line.startswith("[sagewarden] evidence begin ")]


def train(j: Job, clock: Clock, steps: int, step_s: float) -> None:
    for _ in range(steps):
        clock.now += step_s
        j.step()


@pytest.mark.parametrize(
    ("step_s", "window_s"),
    [
        pytest.param(2.0, 60.0, id="short steps: the floor"),
        pytest.param(30.0, 150.0, id="30-second steps: 5 x their p99"),
    ],
)
def test_the_window_is_learned_from_the_runs_own_step_times(
    job: tuple[Job, io.StringIO], clock: Clock, step_s: float, window_s: float
) -> None:
    j, out = job
    train(j, clock, 50, step_s)

    clock.now += window_s - 1
    j.check()
    quiet_just_under = blocks(out)
    clock.now += 2
    j.check()

    assert j.window_s() == pytest.approx(window_s)
    assert quiet_just_under == []
    assert len(blocks(out)) == 1 and "reason=no-step" in blocks(out)[0]


@pytest.mark.parametrize(
    ("every", "window_s"),
    [
        pytest.param(50, 600.0, id="a 2-minute step every 50: 5 x 2 minutes"),
        pytest.param(200, 60.0, id="a 2-minute step every 200: the floor (declare such a save)"),
    ],
)
def test_slow_steps_widen_the_window_once_they_are_more_than_one_in_a_hundred(
    job: tuple[Job, io.StringIO], clock: Clock, every: int, window_s: float
) -> None:
    """An undeclared save inside a step: the p99 is that step when it comes more often than one
    step in a hundred, the typical step otherwise (then that save is a stall: declare it)."""
    j, _ = job
    for i in range(600):
        clock.now += 120.0 if i % every == every - 1 else 1.0
        j.step()

    assert j.window_s() == pytest.approx(window_s)


def test_before_its_first_step_the_job_gets_the_first_step_allowance(
    job: tuple[Job, io.StringIO], clock: Clock
) -> None:
    j, out = job
    clock.now += 599
    j.check()
    before = blocks(out)
    clock.now += 2
    j.check()

    assert before == [] and "reason=no-first-step" in blocks(out)[0]


def test_a_declared_phase_holds_the_watchdog_for_its_budget_then_is_a_stall(
    job: tuple[Job, io.StringIO], clock: Clock
) -> None:
    j, out = job
    train(j, clock, 20, 1.0)
    j.begin_phase("save", 15)

    clock.now += 15 * 60 - 1
    j.check()
    within = blocks(out)
    clock.now += 2
    j.check()

    assert within == []
    assert len(blocks(out)) == 1
    assert "in_phase=save" in blocks(out)[0] and "reason=phase-over-budget" in blocks(out)[0]


def test_a_stall_is_reported_once_and_not_learned_as_a_step(
    job: tuple[Job, io.StringIO], clock: Clock
) -> None:
    j, out = job
    train(j, clock, 20, 1.0)
    for _ in range(10):
        clock.now += 61
        j.check()
    once = len(blocks(out))
    train(j, clock, 5, 1.0)
    clock.now += 61
    j.check()

    assert once == 1
    assert [b.split()[5] for b in blocks(out)] == ["stall=1", "stall=2"]
    assert j.window_s() == pytest.approx(60.0)  # the 10-minute stall is not learned as a step


def test_the_phase_time_is_not_the_next_steps_time(job: tuple[Job, io.StringIO], clock: Clock) -> None:
    j, out = job
    train(j, clock, 3, 1.0)
    with j.phase("eval", 30):
        clock.now += 600
    clock.now += 1.0
    j.step()

    last = [line for line in out.getvalue().splitlines() if " step=4 " in line]
    assert len(last) == 1 and " step_ms=" in last[0]
    assert j.window_s() == pytest.approx(60.0)  # the 10-minute eval taught it nothing
