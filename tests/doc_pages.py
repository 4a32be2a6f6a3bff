"""README and the reference pages it links in docs/: where the documentation's sentences, commands
and tables now live (tests that check what the documentation says read all of it)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOT_PROSE = {"claims.md"}  # the claims list quotes the pages; it is checked on its own


@cache
def documentation() -> str:
    """README.md, then every docs/*.md page but the claims list, in name order."""
    pages = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name not in NOT_PROSE)]
    return "\n\n".join(p.read_text(encoding="utf-8") for p in pages)
