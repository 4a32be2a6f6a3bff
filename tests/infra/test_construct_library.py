"""The construct is a library (issue 21): a platform team's CDK app that `pip install`s sagewarden
adds `SagewardenSupervisor(self, "Supervisor", allowed_role_arns=[...])` to its own stack, and the
Lambda asset comes from the installed package, not from a checkout of this repository."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "platform-app"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project built as a wheel and installed (without dependencies: those are the test
    environment's) into a directory of its own."""
    work = tmp_path_factory.mktemp("library")
    source = work / "source"  # a copy of what the package is built from: no stale build/ of the repository
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("pyproject.toml", "README.md"):
        source.mkdir(exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    for tree in ("sagewarden_cli", "infra", "lambdas/sagewarden"):
        shutil.copytree(ROOT / tree, source / tree, ignore=skip)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(work / "dist"), str(source)],
        check=True, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    (wheel,) = (work / "dist").glob("sagewarden-*.whl")
    site = work / "site"
    with zipfile.ZipFile(wheel) as z:
        top = {name.split("/", 1)[0] for name in z.namelist()}
        z.extractall(site)  # a wheel is a zip laid out as site-packages
    assert {t for t in top if not t.endswith(".dist-info")} == {
        "sagewarden",
        "sagewarden_cdk",
        "sagewarden_cli",
    }
    return site


def test_the_wheel_installs_no_generic_top_level_name(installed: Path) -> None:
    # `infra`, `drill`, `benchmarks` stay in the repository; the CLI is `sagewarden_cli`
    for generic in ("cli", "infra", "drill", "benchmarks", "tests"):
        assert not (installed / generic).exists(), generic


@pytest.mark.claim(
    "the Lambda asset is the installed `sagewarden` package, so no checkout of this repository is needed"
)
def test_the_example_app_synthesizes_with_the_installed_construct(installed: Path, tmp_path: Path) -> None:
    out = tmp_path / "cdk.out"
    env = {
        **os.environ,
        "PYTHONPATH": str(installed),  # before site-packages: the installed copy, not the repository
        "CDK_OUTDIR": str(out),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    probe = subprocess.run(
        [sys.executable, "-c", "import sagewarden_cdk, sagewarden; print(sagewarden_cdk.__file__); print(sagewarden.__file__); print(sagewarden_cdk.IN_REPOSITORY)"],
        cwd=EXAMPLE, env=env, check=True, capture_output=True, text=True,
    )  # fmt: skip
    cdk_file, lambda_file, in_repo = probe.stdout.split()
    assert (
        cdk_file.startswith(str(installed)) and lambda_file.startswith(str(installed)) and in_repo == "False"
    )

    result = subprocess.run(
        [sys.executable, "app.py"], cwd=EXAMPLE, env=env, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stderr[-3000:]
    template = json.loads((out / "TrainingPlatform.template.json").read_text())
    resources = template["Resources"]
    handlers = sorted(
        r["Properties"]["Handler"] for r in resources.values() if r["Type"] == "AWS::Lambda::Function"
    )
    assert "sagewarden.handlers.api.handler" in handlers and "sagewarden.handlers.sweep.handler" in handlers
    assert {"SagewardenApiUrl", "SagewardenAlertsTopic"} <= set(template["Outputs"])
    # the job prefix the platform team chose scopes the event rules
    rules = [r for r in resources.values() if r["Type"] == "AWS::Events::Rule"]
    assert any("plat-" in json.dumps(r["Properties"].get("EventPattern", {})) for r in rules)
    # two supervisors in the one stack: each heartbeat subscription carries its job prefix
    filters = sorted(
        r["Properties"]["FilterName"]
        for r in resources.values()
        if r["Type"] == "AWS::Logs::SubscriptionFilter"
    )
    assert filters == ["TrainingPlatform-plat-heartbeat", "TrainingPlatform-rsch-heartbeat"]

    # the Lambda asset is the installed package: the same modules as the repository's, nothing else
    assets = [p for p in out.glob("asset.*") if (p / "sagewarden").is_dir()]
    assert len(assets) == 1
    (asset,) = assets
    assert sorted(p.name for p in asset.iterdir()) == ["sagewarden"]
    shipped = {p.relative_to(asset).as_posix(): p.read_bytes() for p in asset.rglob("*.py")}
    repo = {
        p.relative_to(ROOT / "lambdas").as_posix(): p.read_bytes() for p in (ROOT / "lambdas").rglob("*.py")
    }
    assert shipped == repo
    assert not list(asset.rglob("*.pyc"))


def test_a_wrong_setting_fails_the_synth_with_its_name(installed: Path) -> None:
    code = (
        "from aws_cdk import App, Stack\n"
        "from sagewarden_cdk import SagewardenSupervisor\n"
        "from sagewarden_cdk.config import ConfigError\n"
        "stack = Stack(App(), 'S')\n"
        "try:\n"
        "    SagewardenSupervisor(stack, 'Sup', allowed_role_arns=['not-a-role'])\n"
        "except ConfigError as exc:\n"
        "    print(exc)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(installed), "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=EXAMPLE, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "not an IAM role ARN: 'not-a-role'" in result.stdout
