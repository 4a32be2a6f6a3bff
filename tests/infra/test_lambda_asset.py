"""The Lambda asset is self-contained: in Lambda only boto3 (runtime) and Powertools + pydantic
(the public layer) exist, so importing every handler from lambdas/ must not pull in anything
that only the repository has (drill, infra, moto, hypothesis, CDK, the CLI)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HANDLERS = [
    "sagewarden.handlers.api",
    "sagewarden.handlers.on_training_job_state_change",
    "sagewarden.handlers.on_alarm_state_change",
    "sagewarden.handlers.sweep",
    "sagewarden.handlers.on_training_logs",
    "sagewarden.handlers.check_alarm_shapes",  # the deploy-time alarm-shape check (custom resource)
]
FORBIDDEN = (
    "drill",
    "infra",
    "moto",
    "hypothesis",
    "aws_cdk",
    "cdk_nag",
    "constructs",
    "cli",
    "tests",
    "pytest",
)


def test_lambda_asset_handlers_import_with_runtime_packages_only():
    script = f"""
import json, sys
repo, venv = {str(REPO)!r}, {str(REPO / ".venv")!r}
sys.path = [p for p in sys.path if p and (not p.startswith(repo) or p.startswith(venv))]
sys.path.insert(0, {str(REPO / "lambdas")!r})
import importlib
handlers = {HANDLERS!r}
for name in handlers:
    module = importlib.import_module(name)
    assert callable(module.handler), name
print(json.dumps(sorted({{m.split(".")[0] for m in sys.modules}})))
"""
    env = {"PATH": "/usr/bin:/bin", "AWS_DEFAULT_REGION": "us-east-1", "POWERTOOLS_TRACE_DISABLED": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd="/", env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    loaded = set(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert not loaded & set(FORBIDDEN), sorted(loaded & set(FORBIDDEN))
    assert "sagewarden" in loaded and "aws_lambda_powertools" in loaded


def test_lambda_asset_has_no_test_or_tooling_files():
    files = [p.relative_to(REPO / "lambdas") for p in (REPO / "lambdas").rglob("*") if p.is_file()]
    assert files, "empty asset"
    assert all(p.parts[0] == "sagewarden" for p in files), files
    assert not [p for p in files if p.suffix not in (".py", ".pyc", ".typed")], files


def test_lambda_asset_only_adapters_and_composition_import_boto3() -> None:
    """README's layout: adapters/ are the only boto3 users, composition.py the one place that
    builds clients, the domain pure (no boto3 or botocore at all)."""
    import ast

    package = REPO / "lambdas" / "sagewarden"
    importers: dict[str, set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for name in names:
                top = name.split(".")[0]
                if top in ("boto3", "botocore"):
                    importers.setdefault(top, set()).add(str(path.relative_to(package)))

    assert importers["boto3"] and all(
        p.startswith("adapters/") or p == "composition.py" for p in importers["boto3"]
    ), importers["boto3"]
    assert not [p for p in importers["boto3"] | importers["botocore"] if p.startswith("domain/")]
