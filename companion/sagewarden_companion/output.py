"""Where the lines go: one writer per process, whole lines at once, flushed, never raising.

A block of lines (an evidence dump) is written with one `write` call, so lines of another
thread do not land inside it. A stream that is closed or broken loses the line; training goes
on. Signal handlers never print (they only record and wake a thread): writing from a handler
that interrupted a write of the same stream would fail or deadlock.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable
from typing import TextIO


class Printer:
    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stdout

    def line(self, text: str) -> None:
        self.lines((text,))

    def lines(self, texts: Iterable[str]) -> None:
        block = "".join(f"{t}\n" for t in texts)
        if not block:
            return
        with self._lock:
            try:
                self.stream.write(block)
                self.stream.flush()
            except (OSError, ValueError, RuntimeError):
                pass  # a closed or broken stream: the line is lost, training goes on

    def fileno(self) -> int | None:
        try:
            return self.stream.fileno()
        except (OSError, ValueError, AttributeError):
            return None
