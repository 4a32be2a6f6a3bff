"""SIGTERM lands, with real processes: through the launcher the child's save runs once, between
its markers, and everything exits in time; ranks under an agent that kills its workers soon after
its own SIGTERM (torchrun: 30 s) still save; a child that ignores SIGTERM is reported; without a
step boundary the in-process handler still exits within its budget."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.companion.processes import SCRIPTS, Child, index_of, interpreters, launcher, loop

PYTHON = interpreters()[0].values[0]


def is_step(line: str) -> bool:
    return line.startswith("[sagewarden] host=") and " step_ms=" in line


@pytest.mark.parametrize("python", interpreters())
def test_sigterm_to_the_launcher_runs_the_childs_save_once_and_exits_in_time(
    python: str, child_env: dict[str, str], spawn: Callable[..., Child], tmp_path: Path
) -> None:
    child = spawn(
        launcher(
            python, *loop(python, "--forever", "--sigterm-save", str(tmp_path), "--save-s", "1"), grace_s=60
        ),
        child_env,
    )
    child.wait_for(is_step, count=5)

    sent = time.monotonic()
    child.signal(signal.SIGTERM)
    code = child.wait()
    took = time.monotonic() - sent
    lines = child.output()

    assert code == 0 and took < 60
    saved = [json.loads((d / "state.json").read_text()) for d in tmp_path.glob("checkpoint-*")]
    assert len(saved) == 1 and saved[0]["step"] >= 5  # once, at a step boundary, marker last
    order = [
        "[sagewarden] launcher signal signal=SIGTERM to=ranks ",
        "[sagewarden] sigterm received host=3 rank=none ",
        "[sagewarden] sigterm save_start ",
        "[sagewarden] phase=save max_minutes=2",
        "[sagewarden] phase_end=save ",
        "[sagewarden] sigterm save_done ",
        "[sagewarden] sigterm exit host=3 rank=none code=0",
        "[sagewarden] launcher exit code=0 ",
    ]
    at = [index_of(lines, lambda s, p=prefix: s.startswith(p)) for prefix in order]
    assert at == sorted(at), "\n".join(lines)
    assert f"step={saved[0]['step']}" in lines[at[2]]
    assert sum(line.startswith("[sagewarden] sigterm save_start") for line in lines) == 1


def test_ranks_save_before_their_agent_kills_them_and_the_agent_exits_by_itself(
    child_env: dict[str, str], spawn: Callable[..., Child], tmp_path: Path
) -> None:
    """Two ranks whose save takes 3 s, under an agent that SIGKILLs its workers 1 s after its own
    SIGTERM: the launcher signals the registered ranks first and the agent only once they are done."""
    agent = [PYTHON, str(SCRIPTS / "agent.py"), "--kill-after-s", "1", "--"]
    ranks = ["--forever", "--sigterm-save", str(tmp_path), "--save-s", "3"]
    child = spawn(launcher(PYTHON, *agent, *loop("", *ranks)[2:], grace_s=60), child_env)
    child.wait_for(is_step, count=5)
    time.sleep(0.5)  # both ranks registered (the second prints no step line: local rank 1)

    child.signal(signal.SIGTERM)
    code = child.wait()
    lines = child.output()

    assert code == 0, "\n".join(lines)
    assert len(list(tmp_path.glob("checkpoint-*/state.json"))) >= 1
    done = [line for line in lines if line.startswith("[sagewarden] sigterm save_done ")]
    assert sorted(line.split()[4] for line in done) == ["rank=0", "rank=1"]
    to_ranks = index_of(lines, lambda s: "launcher signal signal=SIGTERM to=ranks" in s)
    to_group = [i for i, line in enumerate(lines) if "launcher signal signal=SIGTERM to=group" in line]
    assert to_ranks < min(lines.index(d) for d in done)
    assert all(
        i > max(lines.index(d) for d in done) for i in to_group
    )  # the agent: after the ranks, if at all
    assert len(lines[to_ranks].split("pids=")[1].split(",")) == 2
    assert not [line for line in lines if line.startswith("agent: SIGKILL")]


def test_signalled_through_its_agent_alone_a_rank_is_killed_before_its_save_lands(
    child_env: dict[str, str], spawn: Callable[..., Child], tmp_path: Path
) -> None:
    """Why the launcher signals ranks first: SIGTERM to the same agent directly, as SageMaker sends
    it to a container's first process, leaves the ranks 1 s and no checkpoint."""
    child = spawn(
        [
            PYTHON,
            str(SCRIPTS / "agent.py"),
            "--kill-after-s",
            "1",
            "--",
            *loop("", "--forever", "--sigterm-save", str(tmp_path), "--save-s", "3")[2:],
        ],
        child_env,
    )
    child.wait_for(is_step, count=5)

    child.signal(signal.SIGTERM)
    child.wait()
    lines = child.output()

    assert [line for line in lines if line.startswith("agent: SIGKILL")]
    assert not list(tmp_path.glob("checkpoint-*/state.json"))
    assert not [line for line in lines if line.startswith("[sagewarden] sigterm save_done ")]


def test_a_child_that_ignores_sigterm_is_reported_and_the_launcher_still_exits(
    child_env: dict[str, str], spawn: Callable[..., Child]
) -> None:
    ignores = [
        PYTHON,
        "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('ready', flush=True); time.sleep(600)",
    ]
    child = spawn(launcher(PYTHON, *ignores, grace_s=2), child_env)
    child.wait_for(lambda line: line == "ready")

    child.signal(signal.SIGTERM)
    code = child.wait()
    lines = child.output()

    overdue = [line for line in lines if line.startswith("[sagewarden] launcher overdue ")]
    assert len(overdue) == 1 and " signal=SIGTERM " in overdue[0] and " grace_s=2 " in overdue[0]
    start = next(line for line in lines if line.startswith("[sagewarden] launcher start "))
    assert f"alive={start.split('pid=')[1].split()[0]}" in overdue[0]
    assert code == 128 + signal.SIGKILL
    assert lines[-1].startswith(f"[sagewarden] launcher exit code={128 + signal.SIGKILL} ")


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        pytest.param(["-c", "raise SystemExit(3)"], 3, id="a child that exits 3"),
        pytest.param(
            ["-c", "import os, signal; os.kill(os.getpid(), signal.SIGUSR1)"],
            128 + signal.SIGUSR1,
            id="a child ended by a signal",
        ),
    ],
)
def test_the_launcher_exits_with_the_childs_code(
    command: list[str], expected: int, child_env: dict[str, str], spawn: Callable[..., Child]
) -> None:
    child = spawn(launcher(PYTHON, PYTHON, *command), child_env)

    assert child.wait() == expected
    assert child.output()[-1].startswith(f"[sagewarden] launcher exit code={expected} after_sigterm_s=none")


def test_sigint_reaches_the_whole_group(child_env: dict[str, str], spawn: Callable[..., Child]) -> None:
    waits = [PYTHON, "-c", "import time; print('ready', flush=True); time.sleep(600)"]
    child = spawn(launcher(PYTHON, *waits), child_env)
    child.wait_for(lambda line: line == "ready")

    child.signal(signal.SIGINT)

    assert child.wait() == 128 + signal.SIGINT  # Python ends itself by SIGINT after a KeyboardInterrupt
    assert [
        line
        for line in child.output()
        if line.startswith("[sagewarden] launcher signal signal=SIGINT to=group")
    ]


def test_without_a_step_boundary_the_handler_exits_within_its_budget(
    child_env: dict[str, str], spawn: Callable[..., Child], tmp_path: Path
) -> None:
    """SIGTERM while the loop is stuck (in a collective, say): no save can run at a boundary that
    never comes; the handler says so, dumps the stacks, and the process exits at its budget."""
    child = spawn(
        loop(
            PYTHON,
            "--forever",
            "--stuck-after-sigterm",
            "--sigterm-save",
            str(tmp_path),
            "--sigterm-budget-s",
            "2",
        ),
        child_env,
    )
    child.wait_for(is_step, count=5)

    sent = time.monotonic()
    child.signal(signal.SIGTERM)
    code = child.wait()
    lines = child.output()

    assert code == 143 and time.monotonic() - sent >= 2
    assert not list(tmp_path.glob("checkpoint-*"))  # the save never ran
    skipped = index_of(lines, lambda s: s.startswith("[sagewarden] sigterm save_skipped "))
    begin = index_of(
        lines, lambda s: s.startswith("[sagewarden] evidence begin ") and "reason=sigterm-deadline" in s
    )
    assert "reason=no-step-boundary" in lines[skipped]
    assert skipped < begin and any("in stuck_in_collective" in line for line in lines[begin:])
    assert lines[-1] == "[sagewarden] sigterm exit host=3 rank=none code=143"
