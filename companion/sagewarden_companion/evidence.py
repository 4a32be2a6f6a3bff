"""A stall's evidence block: every thread's Python stack, the GPUs' state, py-spy's view.

The block (docs/companion.md, *Evidence*):

    [sagewarden] evidence begin host=<n> rank=<r> stall=<k> pid=<pid> last_step=<s> in_phase=<p> quiet_s=<s> window_s=<s> reason=<why>
    [sagewarden] evidence host=<n> rank=<r> stall=<k> | section=python-stacks status=ok
    [sagewarden] evidence host=<n> rank=<r> stall=<k> | thread 0x00007f... name=MainThread daemon=no
    [sagewarden] evidence host=<n> rank=<r> stall=<k> | Thread 0x00007f... (most recent call first):
    [sagewarden] evidence host=<n> rank=<r> stall=<k> |   File "train.py", line 12 in main
    ...
    [sagewarden] evidence host=<n> rank=<r> stall=<k> | section=nvidia-smi status=ok          (local rank 0)
    [sagewarden] evidence host=<n> rank=<r> stall=<k> | section=py-spy status=not-installed
    [sagewarden] evidence end host=<n> rank=<r> stall=<k> lines=<L> truncated=<yes|no> took_ms=<ms>

The stacks come from `faulthandler.dump_traceback(all_threads=True)` (written to a temporary
file, then prefixed), so they show what every thread runs without running any of the script's
code. Bounded: at most MAX_SECTION_LINES lines a section, MAX_BLOCK_LINES a block, each line
clipped to lines.MAX_LINE_CHARS; every outside command has a timeout (probes.py). Nothing in it
is a value of the script's: file names, line numbers, function names, GPU readings.
"""

from __future__ import annotations

import faulthandler
import os
import tempfile
import threading
import time
from typing import Callable

from sagewarden_companion import lines, probes

MAX_SECTION_LINES = 300
MAX_BLOCK_LINES = 800
STACK_BYTES = 128 * 1024


def python_stacks() -> tuple[str, list[str]]:
    """(status, lines): the thread table, then faulthandler's dump of every thread."""
    table = [
        f"thread 0x{t.ident:016x} name={lines.token(t.name)} daemon={'yes' if t.daemon else 'no'}"
        for t in threading.enumerate()
        if t.ident is not None
    ]
    try:
        with tempfile.TemporaryFile() as f:
            faulthandler.dump_traceback(file=f, all_threads=True)
            f.seek(0)
            raw = f.read(STACK_BYTES)
    except (OSError, ValueError, RuntimeError) as exc:
        return f"error-{type(exc).__name__}", table
    return "ok", table + raw.decode("utf-8", "replace").splitlines()


def block(
    *,
    host: int | None,
    rank: int | None,
    stall: int,
    last_step: int | None,
    in_phase: str | None,
    quiet_s: float,
    window_s: float,
    reason: str,
    gpu: bool,
    outside_commands: bool,
    pid: int | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> list[str]:
    """The whole block, ready to be written at once. `gpu`: ask nvidia-smi (local rank 0, once a
    host); `outside_commands`: nvidia-smi and py-spy at all (not when the process must exit)."""
    started = clock()
    pid = os.getpid() if pid is None else pid
    prefix = lines.evidence_prefix(host, rank, stall)
    body: list[str] = []
    truncated = False

    def section(name: str, status: str, content: list[str], cut: bool = False) -> None:
        nonlocal truncated
        keep = content[:MAX_SECTION_LINES]
        truncated = truncated or cut or len(content) > len(keep)
        body.append(lines.evidence_section(prefix, name, status))
        body.extend(prefix + lines.clip(text) for text in keep)

    status, stacks = python_stacks()
    section("python-stacks", status, stacks)
    if outside_commands and gpu:
        for name, result in probes.gpu_state():
            section(name, result.status, list(result.lines), result.truncated)
    if outside_commands:
        spy = probes.py_spy(pid)
        section("py-spy", spy.status, list(spy.lines), spy.truncated)
    if len(body) > MAX_BLOCK_LINES:
        body = [
            *body[: MAX_BLOCK_LINES - 1],
            prefix + f"... {len(body) - MAX_BLOCK_LINES + 1} lines left out",
        ]
        truncated = True
    took_ms = (clock() - started) * 1000.0
    return [
        lines.evidence_begin(host, rank, stall, pid, last_step, in_phase, quiet_s, window_s, reason),
        *body,
        lines.evidence_end(host, rank, stall, len(body), truncated, took_ms),
    ]
