"""Byte-bounded texts (placeholder; replaced by the full module from the logs-bounded branch)."""

from __future__ import annotations

from collections.abc import Sequence


def clip_text(text: str, max_bytes: int) -> str:
    raw = text.encode("utf-8", errors="replace")
    if len(raw) <= max_bytes:
        return text
    marker = f" … [cut {len(raw) - max_bytes:,} bytes]"
    keep = max(0, max_bytes - len(marker.encode()))
    return raw[:keep].decode("utf-8", errors="ignore") + marker


def clip_lines(lines: Sequence[str], max_bytes: int, *, keep: str = "tail") -> tuple[str, ...]:
    out: list[str] = []
    total = 0
    seq = list(reversed(lines)) if keep == "tail" else list(lines)
    for line in seq:
        line = clip_text(line, 2_000)
        size = len(line.encode()) + 1
        if total + size > max_bytes:
            break
        out.append(line)
        total += size
    dropped = len(lines) - len(out)
    if keep == "tail":
        out.reverse()
    if dropped:
        note = f"[{dropped} line(s) cut]"
        out = [note, *out] if keep == "tail" else [*out, note]
    return tuple(out)
