"""Step and compute times: CUDA events where the script already runs CUDA with torch, wall time
otherwise.

torch is never imported here: it is used only when the script has imported it and CUDA is
initialized (`torch.cuda.is_initialized()`), so a CPU job pays nothing and a job that forks its
workers before touching CUDA is not made to initialize it. An event pair is recorded around each
timed span (the step, or each `job.compute()` section); only a step that gets a printed line is
read (`elapsed_time` after the end event has completed), so the GPU is drained at most once per
step line, never once per step.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

WALL = "wall"
CUDA = "cuda"


def _torch_cuda() -> Any | None:
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        cuda = torch.cuda
        if cuda.is_available() and cuda.is_initialized():
            return cuda
    except Exception:
        return None
    return None


class Span:
    """One timed span: wall time always, a CUDA event pair where available."""

    __slots__ = ("_clock", "_cuda_end", "_cuda_start", "_wall_end", "_wall_start")

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._wall_start = clock()
        self._wall_end: float | None = None
        self._cuda_start: Any | None = None
        self._cuda_end: Any | None = None
        cuda = _torch_cuda()
        if cuda is not None:
            try:
                self._cuda_start = cuda.Event(enable_timing=True)
                self._cuda_start.record()
            except Exception:
                self._cuda_start = None

    def end(self) -> None:
        self._wall_end = self._clock()
        if self._cuda_start is not None:
            cuda = _torch_cuda()
            try:
                assert cuda is not None
                self._cuda_end = cuda.Event(enable_timing=True)
                self._cuda_end.record()
            except Exception:
                self._cuda_start = self._cuda_end = None

    @property
    def wall_ms(self) -> float:
        end = self._wall_end if self._wall_end is not None else self._clock()
        return (end - self._wall_start) * 1000.0

    def measured_ms(self) -> tuple[float, str]:
        """(milliseconds, timer): the GPU's own measure when both events completed, else wall."""
        if self._cuda_start is not None and self._cuda_end is not None:
            try:
                self._cuda_end.synchronize()
                return float(self._cuda_start.elapsed_time(self._cuda_end)), CUDA
            except Exception:
                pass
        return self.wall_ms, WALL
