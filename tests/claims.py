"""The claims list: docs/claims.toml names each kept README claim (quote and heading), the tests
that prove one carry `@pytest.mark.claim("<quote>")`, and docs/claims.md is rendered from both.
`make claims` (python -m tests.claims) rewrites the page; tests/infra/test_readme_claims.py checks it."""

from __future__ import annotations

import ast
import sys
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "docs" / "claims.toml"
PAGE = ROOT / "docs" / "claims.md"
TESTS = ROOT / "tests"
NON_TEST_PROOF = ("make bench:", "deploy:")


@dataclass(frozen=True)
class Claim:
    section: str  # the README or docs/ heading the quote sits under
    quote: str  # verbatim, a substring of one sentence (line breaks may differ)
    proofs: tuple[str, ...] = ()  # `make bench: <caption>` or `deploy: <what it shows>`


@dataclass(frozen=True)
class Marker:
    node_id: str  # tests/...py::test_name or tests/...py::Class::test_name
    quote: str
    line: int


def flat(text: str) -> str:
    return " ".join(text.split())


def load_claims(text: str | None = None) -> list[Claim]:
    """The claims of docs/claims.toml (or of `text`), in file order."""
    data = tomllib.loads(DATA.read_text(encoding="utf-8") if text is None else text)
    claims = []
    for section in data.get("section", []):
        for entry in section["claims"]:
            if isinstance(entry, str):
                claims.append(Claim(section["name"], entry))
            else:
                claims.append(Claim(section["name"], entry["quote"], tuple(entry.get("proofs", ()))))
    return claims


def _is_claim_mark(node: ast.expr) -> bool:
    """`pytest.mark.claim(...)`."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "claim"
        and isinstance(node.func.value, ast.Attribute)
        and node.func.value.attr == "mark"
        and isinstance(node.func.value.value, ast.Name)
        and node.func.value.value.id == "pytest"
    )


def markers_in(path: str, source: str) -> list[Marker]:
    """The claim markers on the test functions (and class methods) of one test file."""
    found: list[Marker] = []

    def visit(body: Iterable[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}::")
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for decorator in node.decorator_list:
                    if _is_claim_mark(decorator):
                        assert isinstance(decorator, ast.Call)
                        quote = ast.literal_eval(decorator.args[0]) if decorator.args else ""
                        found.append(Marker(f"{path}::{prefix}{node.name}", str(quote), decorator.lineno))

    visit(ast.parse(source).body, "")
    return found


def scan_markers(root: Path = ROOT) -> list[Marker]:
    """Every claim marker under tests/, by file path then line: read, not run."""
    found: list[Marker] = []
    for file in sorted((root / "tests").rglob("test_*.py")):
        source = file.read_text(encoding="utf-8")
        if "mark.claim" in source:
            found += markers_in(file.relative_to(root).as_posix(), source)
    return found


def proofs_of(claims: list[Claim], markers: list[Marker]) -> dict[str, list[str]]:
    """Each claim's quote -> the node ids of the tests marked with it, then its other proofs."""
    proofs: dict[str, list[str]] = {flat(c.quote): [] for c in claims}
    for marker in markers:
        cited = proofs.get(flat(marker.quote))
        if cited is not None and marker.node_id not in cited:
            cited.append(marker.node_id)
    for claim in claims:
        proofs[flat(claim.quote)] += claim.proofs
    return proofs


def _cell(text: str) -> str:
    return flat(text).replace("|", "\\|")


def render(header: str, claims: list[Claim], markers: list[Marker]) -> str:
    """The page: its hand-written header, then per section a table of claim and proof."""
    proofs = proofs_of(claims, markers)
    sections: dict[str, list[Claim]] = {}
    for claim in claims:
        sections.setdefault(claim.section, []).append(claim)
    parts = [header.rstrip("\n")]
    for section, members in sections.items():
        lines = [f"## {section}", "", "| claim | proved by |", "|---|---|"]
        for claim in members:
            cited = ", ".join(f"`{p}`" for p in proofs[flat(claim.quote)])
            lines.append(f"| {_cell(claim.quote)} | {cited} |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def header_of(page: str) -> str:
    """The hand-written prose above the first section."""
    return page.split("\n## ", 1)[0]


def expected_page() -> str:
    return render(header_of(PAGE.read_text(encoding="utf-8")), load_claims(), scan_markers())


def main(argv: list[str]) -> int:
    page = expected_page()
    if "--check" in argv:
        if PAGE.read_text(encoding="utf-8") != page:
            print("docs/claims.md is stale: run make claims", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(page, encoding="utf-8")
    claims = load_claims()
    proven = sum(1 for cited in proofs_of(claims, scan_markers()).values() if cited)
    print(f"docs/claims.md: {len(claims)} claims, {proven} with a proof")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
