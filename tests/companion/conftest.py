"""Fixtures for the companion's real-process tests (helpers: processes.py)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from tests.companion.processes import COMPANION, FAKE_NVIDIA_SMI, FAKE_PY_SPY, SERIALS, Child


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    """A directory with `nvidia-smi` and `py-spy` stand-ins (this machine has neither)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(FAKE_NVIDIA_SMI.format(serials=" ".join(f"'{s}'" for s in SERIALS)))
    (bin_dir / "py-spy").write_text(FAKE_PY_SPY)
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return bin_dir


@pytest.fixture
def child_env(fake_bin: Path) -> dict[str, str]:
    """What a training container's process sees: the companion importable, SageMaker's host name,
    the fake tools first on PATH; no rank variables, no supervisor variables."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SAGEWARDEN_", "SM_")) and k not in ("RANK", "LOCAL_RANK", "PYTHONPATH")
    }
    env.update(
        PYTHONPATH=str(COMPANION),
        PATH=f"{fake_bin}{os.pathsep}{env.get('PATH', '')}",
        SM_CURRENT_HOST="algo-3",
        PYTHONUNBUFFERED="1",
    )
    return env


@pytest.fixture
def spawn() -> Iterator[Callable[..., Child]]:
    """Start children; every one still running at the end of the test is killed."""
    children: list[Child] = []

    def start(argv: Sequence[str], env: dict[str, str]) -> Child:
        child = Child(argv, env)
        children.append(child)
        return child

    yield start
    for child in children:
        child.kill()
