"""Real processes for the companion's tests (the fixtures are in conftest.py): a child Python (the project's, or 3.9 where it is
installed) running a script of tests/companion/scripts with the companion on its path, fake
`nvidia-smi` and `py-spy` on its PATH, and its output read line by line as it comes.

Waits are on content (a line appearing), with generous timeouts: the machine may be loaded, and
a test never asserts a tight time.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMPANION = ROOT / "companion"
SCRIPTS = Path(__file__).resolve().parent / "scripts"
PYTHON39 = Path("/root/.pyenv/versions/3.9.18/bin/python")
WAIT_S = 90.0  # generous: two cores shared by several test runs

# Serials as nvidia-smi prints them on an 8-GPU host, one GPU that reports none
SERIALS = ["1650123456789", "1650123456790", "[N/A]", "1650123456791"]
FAKE_NVIDIA_SMI = """#!/bin/sh
case "$1" in
  --query-gpu=serial) printf '%s\\n' {serials} ;;
  --query-gpu=*) echo 'index, pci.bus_id, serial, utilization.gpu [%], memory.used [MiB], memory.total [MiB], temperature.gpu, power.draw [W], clocks.sm [MHz]'
                 echo '0, 00000000:10:1C.0, 1650123456789, 100 %, 71234 MiB, 81559 MiB, 61, 402.17 W, 1980 MHz' ;;
  --query-compute-apps=*) echo 'pid, process_name, used_memory [MiB]'; echo "$PPID, python, 71000 MiB" ;;
esac
"""
FAKE_PY_SPY = """#!/bin/sh
echo "Process $4: python loop.py"
echo "Thread 0x7F00 (active): \\"MainThread\\""
echo "    stuck_in_collective (loop.py:31)"
"""


class Child:
    """A running child process whose output lines are collected as they come."""

    def __init__(self, argv: Sequence[str], env: dict[str, str]) -> None:
        self.argv = list(argv)
        self.proc = subprocess.Popen(
            self.argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            start_new_session=True,  # its group can be killed whole (pgid = its pid)
        )
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._lock:
                self.lines.append(line.rstrip("\n"))

    def output(self) -> list[str]:
        with self._lock:
            return list(self.lines)

    def wait_for(
        self, predicate: Callable[[str], bool], timeout: float = WAIT_S, count: int = 1
    ) -> list[str]:
        """The lines so far, once `count` of them match (fails with the output otherwise)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lines = self.output()
            if sum(1 for line in lines if predicate(line)) >= count:
                return lines
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.05)
        raise AssertionError(f"no such line within {timeout} s; output:\n" + "\n".join(self.output()))

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait(self, timeout: float = WAIT_S) -> int:
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return code

    def kill(self) -> None:
        """Kill the child's group and, for a launcher, its command's group (pgid in its start line)."""
        groups = [self.proc.pid]
        groups += [
            int(m.group(1)) for line in self.output() if (m := re.search(r"launcher start pid=(\d+)", line))
        ]
        for group in groups:
            with contextlib.suppress(OSError):
                os.killpg(group, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)


def interpreters() -> list[object]:
    """The project's Python, and 3.9 (the oldest the companion supports) where it is installed."""
    return [
        pytest.param(sys.executable, id="python3.11"),
        pytest.param(
            str(PYTHON39),
            id="python3.9",
            marks=pytest.mark.skipif(not PYTHON39.exists(), reason=f"{PYTHON39} is not installed here"),
        ),
    ]


def loop(python: str, *args: str) -> list[str]:
    """argv of the training loop script under `python`."""
    return [python, str(SCRIPTS / "loop.py"), *args]


def launcher(python: str, *args: str, grace_s: float = 30.0) -> list[str]:
    return [python, "-m", "sagewarden_companion", "--grace-s", f"{grace_s:g}", "--", *args]


def index_of(lines: Sequence[str], predicate: Callable[[str], bool]) -> int:
    return next(i for i, line in enumerate(lines) if predicate(line))
