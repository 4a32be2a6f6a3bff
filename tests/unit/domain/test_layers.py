"""The layer check of `make lint` (scripts/check_layers.py): the tree passes, and a tree that
breaks a layer fails, naming the import."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("check_layers", ROOT / "scripts" / "check_layers.py")
assert spec is not None and spec.loader is not None
check_layers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_layers)


def write(root: Path, module: str, text: str) -> None:
    path = root / "lambdas" / Path(*module.split(".")).with_suffix(".py")
    path.parent.mkdir(parents=True, exist_ok=True)
    for parent in [path.parent, *path.parent.parents]:
        if parent == root / "lambdas":
            break
        (parent / "__init__.py").touch()
    path.write_text(text)


def test_the_product_keeps_its_layers() -> None:
    assert list(check_layers.violations()) == []


def test_a_concern_importing_a_later_concern_is_named(tmp_path: Path) -> None:
    write(tmp_path, "sagewarden.domain.hosts.bad_hosts", "X = 1\n")
    write(tmp_path, "sagewarden.domain.hangs.confirm", "from sagewarden.domain.hosts.bad_hosts import X\n")
    found = list(check_layers.violations(tmp_path / "lambdas" / "sagewarden"))
    assert len(found) == 1
    assert "sagewarden.domain.hangs.confirm" in found[0] and "a layer above it" in found[0]


def test_the_vocabulary_importing_the_decision_is_named(tmp_path: Path) -> None:
    write(tmp_path, "sagewarden.domain.decision.pending", "Y = 1\n")
    write(tmp_path, "sagewarden.domain.vocabulary.models", "from sagewarden.domain.decision import pending\n")
    found = list(check_layers.violations(tmp_path / "lambdas" / "sagewarden"))
    assert any("sagewarden.domain.vocabulary.models" in v for v in found)


def test_the_domain_importing_an_adapter_or_boto3_is_named(tmp_path: Path) -> None:
    write(tmp_path, "sagewarden.adapters.s3", "Z = 1\n")
    write(tmp_path, "sagewarden.domain.decide", "import boto3\nfrom sagewarden.adapters.s3 import Z\n")
    found = list(check_layers.violations(tmp_path / "lambdas" / "sagewarden"))
    assert any("boto3" in v and "stays pure" in v for v in found)
    assert any("sagewarden.adapters.s3" in v and "a layer above it" in v for v in found)


def test_the_same_package_and_lower_layers_are_allowed(tmp_path: Path) -> None:
    write(tmp_path, "sagewarden.domain.vocabulary.models", "A = 1\n")
    write(tmp_path, "sagewarden.domain.hangs.alarms", "B = 1\n")
    write(
        tmp_path,
        "sagewarden.domain.hangs.confirm",
        "from sagewarden.domain.hangs.alarms import B\nfrom sagewarden.domain.vocabulary.models import A\n",
    )
    assert list(check_layers.violations(tmp_path / "lambdas" / "sagewarden")) == []


def test_every_package_of_the_lambda_code_is_installed() -> None:
    """pyproject.toml lists the packages by hand: a new package missing there is missing from the
    construct library's Lambda asset and from `submit --dry-run`."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    lambdas = ROOT / "lambdas"
    found = {
        ".".join(p.parent.relative_to(lambdas).parts) for p in (lambdas / "sagewarden").rglob("__init__.py")
    }
    assert found - listed == set()
