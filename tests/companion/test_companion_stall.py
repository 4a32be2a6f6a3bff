"""Evidence when steps stop, with real processes: a stalled loop prints every thread's stack within
its window, once, between its markers; a declared phase within its budget is not a stall; the
heartbeat stops with the loop; a loop holding the GIL still leaves faulthandler's dump."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest

from tests.companion.processes import Child, index_of, interpreters, loop

BEGIN = "[sagewarden] evidence begin "
END = "[sagewarden] evidence end "


def field(line: str, name: str) -> str:
    found = re.search(rf"\b{name}=(\S+)", line)
    assert found, (name, line)
    return found.group(1)


@pytest.mark.parametrize("python", interpreters())
def test_a_stalled_loop_prints_every_threads_stack_once_within_its_window(
    python: str, child_env: dict[str, str], spawn: Callable[..., Child]
) -> None:
    child = spawn(loop(python, "--steps", "40", "--stall-after", "15", "--floor-s", "1"), child_env)

    lines = child.wait_for(lambda line: line.startswith(END))
    begin, end = index_of(lines, lambda s: s.startswith(BEGIN)), index_of(lines, lambda s: s.startswith(END))
    block = lines[begin : end + 1]
    last_step = max(i for i, line in enumerate(lines) if " step=" in line and "step_ms=" in line)
    time.sleep(3 * float(field(lines[begin], "window_s")))  # long enough for a second block, were there one

    assert last_step < begin  # the evidence follows the last step, within the same run
    assert field(lines[begin], "last_step") == "15" and field(lines[begin], "reason") == "no-step"
    assert float(field(lines[begin], "quiet_s")) >= float(field(lines[begin], "window_s"))
    assert all(line.startswith("[sagewarden] evidence host=3 rank=none stall=1 | ") for line in block[1:-1])
    stacks = "\n".join(block)
    assert "in stuck_in_collective" in stacks  # the main thread, where it is stuck
    assert "in prefetch_forever" in stacks and "name=data-prefetch" in stacks  # every other thread
    assert "section=nvidia-smi status=ok" in stacks and "section=py-spy status=ok" in stacks
    assert int(field(lines[end], "lines")) == len(block) - 2
    assert sum(line.startswith(BEGIN) for line in child.output()) == 1  # once per stall


def test_a_declared_phase_within_its_budget_is_not_a_stall(
    child_env: dict[str, str], spawn: Callable[..., Child]
) -> None:
    """A 4-second save after steps of 20 ms, with a 1-second stall window: no evidence."""
    child = spawn(
        loop(interpreters()[0].values[0], "--steps", "20", "--phase-after", "10", "--phase-s", "4"), child_env
    )

    assert child.wait() == 0
    lines = child.output()
    assert not [line for line in lines if line.startswith(BEGIN)]
    marker = index_of(lines, lambda s: s == "[sagewarden] phase=save max_minutes=1")
    ended = index_of(lines, lambda s: s.startswith("[sagewarden] phase_end=save "))
    assert float(field(lines[ended], "elapsed_s")) >= 4.0 and marker < ended
    beats = [line for line in lines[marker:ended] if line.startswith("[sagewarden] heartbeat ")]
    assert beats and all(field(b, "in_phase") == "save" for b in beats)  # alive, in its phase


def test_the_heartbeat_stops_while_the_loop_is_stalled(
    child_env: dict[str, str], spawn: Callable[..., Child]
) -> None:
    """Every log line is activity to the supervisor's log-silence alarm: a heartbeat through a
    stall would hide it. Heartbeats come while steps advance and stop with them."""
    child = spawn(
        loop(
            interpreters()[0].values[0],
            "--steps",
            "60",
            "--step-s",
            "0.05",
            "--stall-after",
            "40",
            "--heartbeat-s",
            "0.3",
        ),
        child_env,
    )

    lines = child.wait_for(lambda line: line.startswith(END))
    time.sleep(2.0)
    lines = child.output()
    last_step = max(i for i, line in enumerate(lines) if "step_ms=" in line)
    beats = [i for i, line in enumerate(lines) if line.startswith("[sagewarden] heartbeat ")]

    assert [i for i in beats if i < last_step]  # while it trains
    after = [i for i in beats if i > last_step]
    assert len(after) <= 1  # at most the one due for the last steps
    assert all(field(lines[i], "last_step") == "40" for i in after)
    assert not [i for i in beats if i > index_of(lines, lambda s: s.startswith(BEGIN))]


def test_a_loop_holding_the_gil_still_leaves_its_stack(
    child_env: dict[str, str], spawn: Callable[..., Child]
) -> None:
    """A C call that never releases the GIL stops the watchdog thread too: faulthandler's own
    watchdog (a C thread) dumps the stacks a margin past the deadline."""
    child = spawn(
        loop(
            interpreters()[0].values[0],
            "--steps",
            "40",
            "--gil-stall-after",
            "12",
            "--backstop-margin-s",
            "2",
        ),
        child_env,
    )

    lines = child.wait_for(lambda line: "in holding_the_gil" in line)
    start = index_of(lines, lambda s: s.startswith("Timeout ("))

    timeout = re.fullmatch(r"Timeout \((\d+):(\d\d):(\d\d)(?:\.\d+)?\)!", lines[start])
    assert timeout, lines[start]
    hours, minutes, seconds = (int(g) for g in timeout.groups())
    # armed from the learned 1-second window, not from the 30-second first-step allowance it began with
    assert hours * 3600 + minutes * 60 + seconds < 30
    assert max(i for i, line in enumerate(lines) if "step=12 " in line) < start
    assert not [line for line in lines if line.startswith(BEGIN)]  # the Python watchdog could not run
