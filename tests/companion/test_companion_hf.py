"""The Hugging Face callback against transformers' own TrainerCallback, TrainerState, TrainerControl
and CallbackHandler (transformers installs without torch), in a subprocess driven in Trainer's
order (scripts/hf_loop.py): total steps from `state.max_steps`, eval and save declared before they
start, and on SIGTERM the Trainer's own checkpoint, then the exit."""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from sagewarden.domain.hangs import cadence
from sagewarden.domain.hosts import stragglers
from tests.companion.processes import SCRIPTS, Child, index_of

pytest.importorskip("transformers")


def hf_loop(out: Path, *args: str) -> list[str]:
    return [sys.executable, str(SCRIPTS / "hf_loop.py"), "--output-dir", str(out), *args]


def test_the_callback_prints_the_contract_from_the_trainers_own_state(
    child_env: dict[str, str], spawn: Callable[..., Child], tmp_path: Path
) -> None:
    child = spawn(
        hf_loop(tmp_path, "--max-steps", "20", "--eval-steps", "5", "--save-steps", "10"), child_env
    )

    assert child.wait() == 0
    lines = child.output()
    samples = stragglers.parse(f"[algo-3] {line}" for line in lines)
    assert [s.step for s in samples] == list(range(1, 21)) and {s.total for s in samples} == {20}
    markers = [line for line in lines if cadence.phase_cover(line, 0)]
    evals, saves = "[sagewarden] phase=eval max_minutes=30", "[sagewarden] phase=save max_minutes=15"
    assert markers == [evals, evals, saves, evals, evals, saves]  # evals at 5, 10, 15, 20; saves at 10, 20
    # at step 10: eval declared, ended, then the save declared, ended, before step 11
    at = [
        index_of(lines, lambda s, p=prefix: s.startswith(p))
        for prefix in (
            "[sagewarden] host=3 step=10 ",
            "[sagewarden] phase=save ",
            "[sagewarden] host=3 step=11 ",
        )
    ]
    assert at == sorted(at)
    assert lines[at[1] - 1].startswith("[sagewarden] phase_end=eval ")
    assert lines[at[1] + 1].startswith("[sagewarden] phase_end=save ")
    assert not [line for line in lines if line.startswith("[sagewarden] evidence ")]


def test_on_sigterm_the_trainer_saves_its_own_checkpoint_then_the_process_exits(
    child_env: dict[str, str], spawn: Callable[..., Child], tmp_path: Path
) -> None:
    child = spawn(
        hf_loop(tmp_path, "--max-steps", "100000", "--eval-steps", "7", "--save-steps", "100000"), child_env
    )
    child.wait_for(lambda line: " step=" in line and "step_ms=" in line, count=20)

    child.signal(signal.SIGTERM)
    code = child.wait()
    lines = child.output()

    assert code == 0
    saved = sorted(tmp_path.glob("checkpoint-*/trainer_state.json"))
    assert len(saved) == 1
    step = json.loads(saved[0].read_text())["global_step"]
    order = [
        f"[sagewarden] host=3 step={step} ",
        f"[sagewarden] sigterm save_start host=3 rank=none step={step}",
        "[sagewarden] phase=save max_minutes=2",
        "[sagewarden] phase_end=save ",
        "[sagewarden] sigterm save_done ",
        "[sagewarden] sigterm exit host=3 rank=none code=0",
    ]
    at = [index_of(lines, lambda s, p=prefix: s.startswith(p)) for prefix in order]
    assert at == sorted(at)
    assert not [line for line in lines[at[1] :] if line.startswith("[sagewarden] phase=eval ")]
    assert not [line for line in lines if line.startswith("trained ")]  # it exited at the save
