"""`pip install ./companion` pulls nothing else, and the package imports only the standard library
(its Hugging Face and Lightning modules import theirs, and only those two)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.companion.processes import COMPANION

PACKAGE = COMPANION / "sagewarden_companion"
OPTIONAL = {"hf.py": {"transformers"}, "lightning.py": {"lightning", "pytorch_lightning"}}


def test_pip_would_install_the_companion_and_nothing_else(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-index",
         "--no-build-isolation", "--quiet", "--report", str(report), str(COMPANION)],
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    installs = json.loads(report.read_text())["install"]
    assert [item["metadata"]["name"] for item in installs] == ["sagewarden-companion"]
    assert not installs[0]["metadata"].get("requires_dist")
    assert installs[0]["metadata"]["requires_python"] == ">=3.9"


def test_the_distribution_declares_no_dependency() -> None:
    project = tomllib.loads((COMPANION / "pyproject.toml").read_text())["project"]

    assert project["dependencies"] == [] and "optional-dependencies" not in project


@pytest.mark.parametrize("module", sorted(p.name for p in PACKAGE.glob("*.py")))
def test_the_package_imports_only_the_standard_library(module: str) -> None:
    tree = ast.parse((PACKAGE / module).read_text())
    imported = {
        (node.module if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        and not (isinstance(node, ast.ImportFrom) and node.level)
        for alias in node.names
    }
    outside = imported - set(sys.stdlib_module_names) - {"sagewarden_companion", "__future__"}

    assert outside == OPTIONAL.get(module, set())


def test_importing_the_companion_imports_no_framework() -> None:
    """torch is read from sys.modules only when the script imported it; the core never imports it."""
    code = "import sys, sagewarden_companion, sagewarden_companion.launcher; print(sorted(m for m in ('torch', 'transformers', 'lightning') if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True,
        env={"PYTHONPATH": str(COMPANION), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip

    assert out.stdout.strip() == "[]"
