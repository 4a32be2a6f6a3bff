"""The package declares ranges and the set-up installs the lock (issue 21: a package that installs
cleanly beside the SageMaker Python SDK, reproducible set-up from a checked-in lock file)."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]


def declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in project["optional-dependencies"].values():
        reqs += [Requirement(r) for r in extra]
    return reqs


def locked() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;#]+)", line)
        if m:
            name = canonicalize_name(m.group(1))
            assert name not in pins, f"{name} is pinned twice in requirements.lock"
            pins[name] = Version(m.group(2))
    return pins


@pytest.mark.claim("the package declares compatible ranges, not exact pins")
def test_runtime_dependencies_are_ranges_not_exact_pins() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for raw in project["dependencies"]:
        spec = Requirement(raw).specifier
        assert spec, f"{raw}: no range at all"
        assert not any(s.operator in ("==", "===") for s in spec), (
            f"{raw}: an exact pin downgrades other tools"
        )
        assert any(s.operator == "<" for s in spec), f"{raw}: no upper bound on the next major version"


def test_every_declared_dependency_is_locked_within_its_range() -> None:
    pins = locked()
    for req in declared():
        name = canonicalize_name(req.name)
        assert name in pins, (
            f"{req} is declared in pyproject.toml but missing from requirements.lock (make lock)"
        )
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"requirements.lock pins {name}=={pins[name]}, outside pyproject.toml's {req.specifier} (make lock)"
        )


def test_the_environment_running_the_tests_is_the_lock() -> None:
    """`make setup` (and so CI) installs requirements.lock: every locked version is the installed one."""
    wrong = []
    for name, version in locked().items():
        try:
            installed = Version(metadata.version(name))
        except metadata.PackageNotFoundError:
            wrong.append(f"{name}: not installed")
            continue
        if installed != version:
            wrong.append(f"{name}: {installed} installed, {version} locked")
    assert not wrong, "the environment differs from requirements.lock (make setup): " + "; ".join(wrong)
