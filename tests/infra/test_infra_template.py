"""infra.template: the synthesized template, cached on disk by source hash."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from infra_synth import SynthResult

from infra import REPO_ROOT
from infra import template as template_module


def test_synthesized_template_synthesizes_once_then_reuses_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, synth_default: SynthResult
) -> None:
    monkeypatch.setattr(template_module, "CACHE_DIR", tmp_path / "synth")
    calls: list[Path] = []
    real_run_app = template_module.run_app

    def counting_run_app(outdir: Path, **kwargs: Any) -> Any:
        calls.append(outdir)
        return real_run_app(outdir, **kwargs)

    monkeypatch.setattr(template_module, "run_app", counting_run_app)

    first = template_module.synthesized_template()
    second = template_module.synthesized_template()

    assert len(calls) == 1
    assert first == second
    cached = template_module.cache_path() / template_module.TEMPLATE_FILE
    assert cached.is_file()
    assert cached.parent.parent == tmp_path / "synth"
    # The subprocess synthesizes exactly what the in-process app does with cdk.json defaults.
    assert first["Resources"] == synth_default.raw["Resources"]


def test_synthesized_template_cache_key_follows_sources_and_context() -> None:
    default_key = template_module.cache_key()

    assert template_module.cache_key() == default_key
    assert template_module.cache_key({"logSubscription": False}) != default_key
    names = {p.relative_to(REPO_ROOT).as_posix() for p in template_module.source_files()}
    assert {
        "app.py",
        "cdk.json",
        "lambdas/sagewarden/keys.py",
        "infra/stack.py",
        "infra/template.py",
    } <= names
    assert any(n.startswith("infra/constructs/") for n in names)


def test_synthesized_template_reports_a_failed_synth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(template_module, "CACHE_DIR", tmp_path / "synth")

    with pytest.raises(template_module.SynthError, match="jobPrefix"):
        template_module.synthesized_template(context={"jobPrefix": "NOT VALID"})
    assert not template_module.cache_path({"jobPrefix": "NOT VALID"}).exists()
