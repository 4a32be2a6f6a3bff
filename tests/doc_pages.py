"""README and the reference pages it links in docs/: where the documentation's sentences, commands
and tables now live (tests that check what the documentation says read all of it)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOT_PROSE = {"claims.md"}  # the claims list quotes the pages; it is checked on its own


@cache
def pages() -> dict[str, str]:
    """README.md, then every docs/*.md page but the claims list, in name order: name -> text."""
    found = {"README.md": (ROOT / "README.md").read_text(encoding="utf-8")}
    for page in sorted((ROOT / "docs").glob("*.md")):
        if page.name not in NOT_PROSE:
            found[f"docs/{page.name}"] = page.read_text(encoding="utf-8")
    return found


@cache
def documentation() -> str:
    """All of :func:`pages` as one text."""
    return "\n\n".join(pages().values())
