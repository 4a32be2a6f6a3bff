"""companion/README.md's plain-loop lines run as written (with the names they assume defined: a
model, its save, a loader), in a real process."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

from sagewarden.domain.hosts import stragglers
from tests.companion.processes import COMPANION, Child

PRELUDE = """
import argparse
args = argparse.Namespace(max_steps=5)
model, optimizer, loader = {}, {}, range(5)
def save(model, optimizer):
    pass
"""


def plain_loop() -> str:
    text = (COMPANION / "README.md").read_text()
    section = text.split("## Plain loop", 1)[1]
    return re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)


def test_the_plain_loop_lines_of_the_companions_readme_run_and_print_step_lines(
    child_env: dict[str, str], spawn: Callable[..., Child], tmp_path: Path
) -> None:
    lines = plain_loop().splitlines()
    script = tmp_path / "train.py"
    script.write_text(PRELUDE + "\n".join(lines) + "\n    pass\n")

    child = spawn([sys.executable, str(script)], child_env)

    assert len(lines) == 5
    assert child.wait() == 0, "\n".join(child.output())
    assert [s.step for s in stragglers.parse(f"[algo-3] {line}" for line in child.output())] == [
        1,
        2,
        3,
        4,
        5,
    ]
