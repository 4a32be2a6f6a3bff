"""The tests' own layout (docs/development.md, *Testing*): no test module imports another, and the
product's unit tests never import the drill or the benchmarks."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def imported_modules(path: Path) -> Iterator[tuple[int, str]]:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.lineno, node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name


def test_no_test_module_imports_another() -> None:
    found = [
        f"{path.relative_to(TESTS)}:{line} imports {module}"
        for path in TESTS.rglob("*.py")
        for line, module in imported_modules(path)
        if module.startswith("tests.") and module.rsplit(".", 1)[-1].startswith("test_")
    ]
    assert found == []


def test_the_product_unit_tests_never_import_the_drill_or_the_benchmarks() -> None:
    found = [
        f"{path.relative_to(TESTS)}:{line} imports {module}"
        for path in (TESTS / "unit").rglob("*.py")
        for line, module in imported_modules(path)
        if module.split(".")[0] in ("drill", "benchmarks")
    ]
    assert found == []
