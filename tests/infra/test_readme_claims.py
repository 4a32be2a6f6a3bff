"""docs/claims.md lists the numbers, limits, defaults and guarantees README and its docs/ pages
promise, and what proves each; it is generated (tests/claims.py, `make claims`) from docs/claims.toml
and the tests' `@pytest.mark.claim` markers. This keeps it honest: the page is what would be
generated, every claim has a proof, every marker names a listed claim, each quote is in README or a
docs/ page under its heading, every `make bench:` reference names a BENCHMARKS.md table.
Static: nothing cited is run here."""

from __future__ import annotations

import re
from collections import Counter
from functools import cache

from infra import REPO_ROOT
from tests.claims import (
    PAGE,
    Claim,
    Marker,
    flat,
    header_of,
    load_claims,
    markers_in,
    proofs_of,
    render,
    scan_markers,
)
from tests.doc_pages import pages

BENCHMARKS = REPO_ROOT / "BENCHMARKS.md"
README_BENCH_SECTION = "Benchmark results"

CLAIMS = load_claims()
MARKERS = scan_markers()


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
    """README and every docs/ page but the claims list itself: where a quote may come from."""
    return pages()


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
    """A proof claims.toml names itself: a benchmark table or a deploy."""
    if proof.startswith("make bench:"):
        caption = flat(proof.removeprefix("make bench:")).rstrip(":").strip()
        if caption not in bench_captions():
            return [f"`{proof}`: BENCHMARKS.md has no heading or table caption {caption!r}"]
        return []
    if proof.startswith("deploy:"):
        return [] if proof.removeprefix("deploy:").strip() else [f"`{proof}`: say what the deploy shows"]
    return [f"`{proof}`: not `make bench: <caption>` or `deploy: <what it shows>` (mark a test instead)"]


def quote_problems(claim: Claim) -> list[str]:
    quote = flat(claim.quote)
    if not quote:
        return ["the claim is empty"]
    found = [name for name, text in sources().items() if quote in flat(text)]
    if not found:
        return [f"the quote is in neither README.md nor a docs/ page: {claim.quote!r}"]
    for name in found:
        sections = headings(sources()[name])
        if claim.section in sections and quote in flat(sections[claim.section]):
            return []
    return [f"the quote is in {', '.join(found)} but not under a heading {claim.section!r}"]


def claim_problems(claim: Claim, proofs: list[str]) -> list[str]:
    problems = quote_problems(claim)
    if not proofs:
        problems.append('no proof: mark a test @pytest.mark.claim("<quote>") or add `proofs` in claims.toml')
    for proof in claim.proofs:
        problems += proof_problems(proof)
    return [f"claim {claim.quote[:70]!r} ({claim.section}): {p}" for p in problems]


def unknown_markers(claims: list[Claim], markers: list[Marker]) -> list[str]:
    listed = {flat(c.quote) for c in claims}
    return [
        f"{m.node_id} (line {m.line}): @pytest.mark.claim names no claim of docs/claims.toml: {m.quote[:70]!r}"
        for m in markers
        if flat(m.quote) not in listed
    ]


def test_the_claims_page_is_what_make_claims_generates() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert page == render(header_of(page), CLAIMS, MARKERS), "docs/claims.md is stale: run make claims"


def test_every_claim_is_quoted_under_its_heading_and_proven() -> None:
    assert len(CLAIMS) >= 300, f"only {len(CLAIMS)} claims in docs/claims.toml"
    proofs = proofs_of(CLAIMS, MARKERS)
    problems = [p for c in CLAIMS for p in claim_problems(c, proofs[flat(c.quote)])]
    assert not problems, "\n".join(problems)


def test_every_claim_marker_names_a_listed_claim() -> None:
    assert MARKERS, "no @pytest.mark.claim found under tests/"
    problems = unknown_markers(CLAIMS, MARKERS)
    assert not problems, "\n".join(problems)


def test_claim_markers_sit_on_tests() -> None:
    """A marker on a helper would prove nothing: pytest only collects test_* functions."""
    helpers = [m.node_id for m in MARKERS if not m.node_id.rsplit("::", 1)[1].startswith("test")]
    assert not helpers, helpers


def test_no_claim_is_listed_twice() -> None:
    seen = Counter(flat(c.quote) for c in CLAIMS)
    assert not [quote for quote, count in seen.items() if count > 1]


def test_no_test_carries_the_same_claim_twice() -> None:
    seen = Counter((m.node_id, flat(m.quote)) for m in MARKERS)
    assert not [key for key, count in seen.items() if count > 1]


# -- the checker's own behaviour: it must be able to fail -------------------------------------------


def test_the_checker_reports_a_misquote_a_missing_proof_an_unknown_marker_and_bench_table() -> None:
    claims = [
        Claim("sagewarden", "never launches two jobs for one run"),
        Claim("sagewarden", "a quote README never makes"),
        Claim("Two commands", "Every decision goes into an audit trail", ("make bench: No such table",)),
        Claim("sagewarden", "It waits | it escapes", ("deploy: a real account",)),
    ]
    source = "\n".join(
        [
            "import pytest",
            "class TestX:",
            "    @pytest.mark.claim('never launches two jobs for one run')",
            "    @pytest.mark.claim('a claim nobody listed')",
            "    def test_a(self): ...",
            "@pytest.mark.claim('It waits | it escapes')",
            "def test_b(): ...",
        ]
    )
    markers = markers_in("tests/test_x.py", source)
    assert [m.node_id for m in markers] == ["tests/test_x.py::TestX::test_a"] * 2 + [
        "tests/test_x.py::test_b"
    ]
    proofs = proofs_of(claims, markers)

    assert claim_problems(claims[0], proofs[flat(claims[0].quote)]) == []
    misquote, unproven = claim_problems(claims[1], proofs[flat(claims[1].quote)])
    assert "neither README.md nor a docs/ page" in misquote and "no proof" in unproven
    wrong_section, bench = claim_problems(claims[2], proofs[flat(claims[2].quote)])
    assert "not under a heading 'Two commands'" in wrong_section
    assert "no heading or table caption 'No such table'" in bench
    assert proofs[flat(claims[3].quote)] == ["tests/test_x.py::test_b", "deploy: a real account"]
    assert unknown_markers(claims, markers) == [
        "tests/test_x.py::TestX::test_a (line 4): @pytest.mark.claim names no claim of docs/claims.toml: "
        "'a claim nobody listed'"
    ]
    page = render("# Title\n\nProse.\n", claims, markers)
    assert "| It waits \\| it escapes | `tests/test_x.py::test_b`, `deploy: a real account` |" in page
    assert page.startswith("# Title\n\nProse.\n\n## sagewarden\n") and "\n## Two commands\n" in page
