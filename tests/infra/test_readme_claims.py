"""docs/claims.md lists every claim README makes and what proves it. This keeps the list honest:
each row's quote is really in README (or a docs/ page), under the heading the row names; every
test it cites exists; every `make bench:` reference names a table BENCHMARKS.md has; no row twice.
Static: nothing cited is run here."""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass
from functools import cache

import pytest

from infra import REPO_ROOT
from tests.doc_pages import pages

CLAIMS = REPO_ROOT / "docs" / "claims.md"
README = REPO_ROOT / "README.md"
BENCHMARKS = REPO_ROOT / "BENCHMARKS.md"
HEADER = ["claim", "section", "proved by"]
README_BENCH_SECTION = "Benchmark results"
NODE_ID = re.compile(r"^(tests/[\w/]+\.py)::(\w+(?:::\w+)?)(?:\[.*\])?$")


@dataclass(frozen=True)
class Row:
    line: int
    claim: str
    section: str
    proofs: tuple[str, ...]  # each `...` span of the "proved by" cell

    def __str__(self) -> str:
        return f"docs/claims.md:{self.line} (claim {self.claim[:70]!r})"


def flat(text: str) -> str:
    return " ".join(text.split())


def cells(line: str) -> list[str]:
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", inner)]


def parse(text: str) -> tuple[list[Row], list[str]]:
    """The rows of every table, and what is wrong with the page's shape."""
    rows: list[Row] = []
    problems: list[str] = []
    lines = text.splitlines()
    in_table = False
    for number, line in enumerate(lines, start=1):
        if not line.startswith("|"):
            in_table = False
            continue
        parts = cells(line)
        if not in_table:
            in_table = True
            if parts != HEADER:
                problems.append(f"docs/claims.md:{number}: a table whose header is not {HEADER}: {parts}")
            continue
        if set(line.replace("|", "").strip()) <= set("-: "):
            continue  # the header's separator row
        if len(parts) != 3:
            problems.append(
                f"docs/claims.md:{number}: {len(parts)} cells, not 3 (escape a | in a quote as \\|)"
            )
            continue
        claim, section, proved_by = parts
        rows.append(Row(number, claim, section, tuple(re.findall(r"`([^`]+)`", proved_by))))
    return rows, problems


ROWS, SHAPE_PROBLEMS = parse(CLAIMS.read_text(encoding="utf-8"))


def headings(text: str) -> dict[str, str]:
    """Each markdown heading's title -> its text up to the next heading (fenced code skipped)."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            current = found.setdefault(line.lstrip("#").strip(), [])
            continue
        if current is not None:
            current.append(line)
    return {title: "\n".join(body) for title, body in found.items()}


@cache
def sources() -> dict[str, str]:
    """README and every docs/ page but this list itself: where a quote may come from."""
    return pages()


@cache
def defined_tests(path: str) -> frozenset[str]:
    """`name` and `Class::name` of every test function a test file defines."""
    tree = ast.parse((REPO_ROOT / path).read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.update(
                f"{node.name}::{item.name}"
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
            )
    return frozenset(names)


def table_captions(text: str) -> set[str]:
    """Headings, and the line just above each table (blank lines skipped): what a bench reference names."""
    found = {flat(title) for title in headings(text)}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|") and (i == 0 or not lines[i - 1].startswith("|")):
            above = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            if above and not above.startswith("|"):
                found.add(flat(above))
    return {caption.rstrip(":").strip() for caption in found}


@cache
def bench_captions() -> frozenset[str]:
    readme_bench = headings(sources()["README.md"]).get(README_BENCH_SECTION, "")
    return frozenset(table_captions(BENCHMARKS.read_text(encoding="utf-8")) | table_captions(readme_bench))


def proof_problems(proof: str) -> list[str]:
    if proof.startswith("make bench:"):
        caption = flat(proof.removeprefix("make bench:")).rstrip(":").strip()
        if caption not in bench_captions():
            return [f"`{proof}`: BENCHMARKS.md has no heading or table caption {caption!r}"]
        return []
    if proof.startswith("deploy:"):
        return [] if proof.removeprefix("deploy:").strip() else [f"`{proof}`: say what the deploy shows"]
    match = NODE_ID.match(proof)
    if match is None:
        return [
            f"`{proof}`: not a test node id (tests/...py::test_name), `make bench: <caption>` "
            "or `deploy: <what it shows>`"
        ]
    path, name = match.groups()
    if not (REPO_ROOT / path).is_file():
        return [f"`{proof}`: no file {path}"]
    if name not in defined_tests(path):
        return [f"`{proof}`: {path} defines no test {name}"]
    return []


def quote_problems(row: Row) -> list[str]:
    quote = flat(row.claim)
    if not quote:
        return ["the claim is empty"]
    pages = [name for name, text in sources().items() if quote in flat(text)]
    if not pages:
        return [f"the quote is in neither README.md nor a docs/ page: {row.claim!r}"]
    for name in pages:
        sections = headings(sources()[name])
        if row.section in sections and quote in flat(sections[row.section]):
            return []
    return [f"the quote is in {', '.join(pages)} but not under a heading {row.section!r}"]


def row_problems(row: Row) -> list[str]:
    problems = quote_problems(row)
    if not row.proofs:
        problems.append(
            "nothing in `proved by` (cite tests, `make bench: ...` or `deploy: ...`, each in backticks)"
        )
    for proof in row.proofs:
        problems += proof_problems(proof)
    return problems


def test_the_claims_page_is_tables_of_claim_section_and_proof() -> None:
    assert SHAPE_PROBLEMS == []
    assert len(ROWS) >= 300, f"only {len(ROWS)} rows parsed from docs/claims.md"


@pytest.mark.parametrize("row", ROWS, ids=[f"line{r.line}" for r in ROWS])
def test_every_claim_row_is_found_and_proven(row: Row) -> None:
    problems = row_problems(row)
    assert not problems, f"{row}:\n  " + "\n  ".join(problems)


def test_no_claim_row_is_listed_twice() -> None:
    seen = Counter(flat(row.claim) for row in ROWS)
    twice = [f"{row}: also on another row" for row in ROWS if seen[flat(row.claim)] > 1]
    assert not twice, "\n".join(twice)


def test_the_sections_left_out_are_named_and_exist() -> None:
    """The page's opening names (in bold) the README sections it leaves out for now: they exist and
    no row is filed under them (drop the name from the opening when their rows are added)."""
    page = CLAIMS.read_text(encoding="utf-8")
    left_out = re.findall(r"\*\*([^*]+)\*\*", page.split("\n## ", 1)[0])
    sections = {title for text in sources().values() for title in headings(text)}
    assert all(name in sections for name in left_out), left_out
    assert not [row for row in ROWS if row.section in left_out]


# -- the checker's own behaviour: it must be able to fail -------------------------------------------


def test_the_checker_reports_a_misquote_a_missing_test_and_an_unknown_bench_table() -> None:
    page = "\n".join(
        [
            "| claim | section | proved by |",
            "|---|---|---|",
            "| every minute ─────────────────────────────▶ EventBridge schedule | sagewarden | "
            "`tests/infra/test_readme_claims.py::test_no_claim_row_is_listed_twice` |",
            "| a quote README never makes | sagewarden | `tests/infra/test_readme_claims.py::test_missing` |",
            "| Every decision goes into an audit trail | Two commands | `make bench: No such table` |",
            "| It waits \\| it escapes | sagewarden | |",
        ]
    )
    rows, shape = parse(page)

    assert shape == [] and [len(r.proofs) for r in rows] == [1, 1, 1, 0]
    assert rows[3].claim == "It waits | it escapes"
    assert row_problems(rows[0]) == []
    first, second = row_problems(rows[1])
    assert "neither README.md nor a docs/ page" in first and "defines no test test_missing" in second
    wrong_section, bench = row_problems(rows[2])
    assert "not under a heading 'Two commands'" in wrong_section
    assert "no heading or table caption 'No such table'" in bench
    assert any("nothing in `proved by`" in p for p in row_problems(rows[3]))
    assert parse("| claim | proof |\n|---|---|\n| x | y |")[1]  # a table of another shape is reported
