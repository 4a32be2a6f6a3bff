"""Bounded outside commands: GPU serials and state (`nvidia-smi`), a stack dump (`py-spy dump`).

Every command runs in its own session (a hung `nvidia-smi`, which a GPU that fell off the bus
can cause, is killed with everything it started), with a timeout, its output written to a
temporary file of which at most `max_bytes` are read: nothing here can block the caller longer
than its timeout or fill its memory. A command that is not installed, fails or times out is
said so, never read as "nothing to report".
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

NVIDIA_SMI = "nvidia-smi"
PY_SPY = "py-spy"
SERIALS_TIMEOUT_S = 15.0
STATE_TIMEOUT_S = 10.0
PY_SPY_TIMEOUT_S = 20.0
MAX_BYTES = 64 * 1024
# what a stall's evidence asks nvidia-smi (one CSV row per GPU, then one per compute process);
# no ECC or Xid fields: their names would read as a hardware fault to a log classifier
GPU_STATE_QUERY = (
    "index,pci.bus_id,serial,utilization.gpu,memory.used,memory.total,temperature.gpu,power.draw,clocks.sm"
)
APPS_QUERY = "pid,process_name,used_memory"


@dataclass(frozen=True)
class Result:
    status: str  # ok | not-installed | failed-<code> | timeout-<s>s | error-<what>
    lines: tuple[str, ...]
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def run(argv: Sequence[str], timeout_s: float, max_bytes: int = MAX_BYTES) -> Result:
    """Run `argv` (argv[0] looked up on PATH) within `timeout_s`; at most `max_bytes` of output."""
    exe = shutil.which(argv[0])
    if exe is None:
        return Result("not-installed", ())
    with tempfile.TemporaryFile() as out:
        try:
            proc = subprocess.Popen(
                [exe, *argv[1:]],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            return Result(f"error-{type(exc).__name__}", ())
        try:
            code: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            code = None
            _kill_session(proc)
        out.seek(0)
        raw = out.read(max_bytes + 1)
    truncated = len(raw) > max_bytes
    lines = tuple(raw[:max_bytes].decode("utf-8", "replace").splitlines())
    if code is None:
        return Result(f"timeout-{timeout_s:g}s", lines, truncated)
    return Result("ok" if code == 0 else f"failed-{code}", lines, truncated)


def _kill_session(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        proc.kill()
    # an unkillable one (uninterruptible sleep) is left to the OS, not waited for
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


def gpu_serials() -> tuple[list[str] | None, str]:
    """(the raw serials nvidia-smi printed, or None; why not)."""
    result = run([NVIDIA_SMI, "--query-gpu=serial", "--format=csv,noheader"], SERIALS_TIMEOUT_S, 16 * 1024)
    if result.status == "not-installed":
        return None, "no-nvidia-smi"
    if not result.ok:
        return None, f"nvidia-smi-{result.status}"
    return [line.strip() for line in result.lines if line.strip()], "ok"


def gpu_state() -> list[tuple[str, Result]]:
    return [
        ("nvidia-smi", run([NVIDIA_SMI, f"--query-gpu={GPU_STATE_QUERY}", "--format=csv"], STATE_TIMEOUT_S)),
        (
            "nvidia-smi-apps",
            run([NVIDIA_SMI, f"--query-compute-apps={APPS_QUERY}", "--format=csv"], STATE_TIMEOUT_S),
        ),
    ]


def py_spy(pid: int) -> Result:
    """`py-spy dump --nonblocking --pid <pid>`: --nonblocking, since py-spy would otherwise pause
    the process it reads, and here that is the process waiting for it."""
    return run([PY_SPY, "dump", "--nonblocking", "--pid", str(pid)], PY_SPY_TIMEOUT_S)
