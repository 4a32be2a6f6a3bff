"""cdk-nag (AwsSolutions): no unacknowledged finding, errors and warnings alike."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack, Validations
from aws_cdk import aws_sqs as sqs
from cdk_nag import AwsSolutionsChecks
from infra_synth import SynthResult


def _describe(violations: list[dict[str, Any]]) -> str:
    lines = []
    for violation in violations:
        for construct in violation["violatingConstructs"]:
            lines.append(f"{violation['ruleName']} ({violation['severity']}) at {construct['constructPath']}")
    return "\n".join(lines)


def test_cdk_nag_finds_nothing_unacknowledged_in_any_configuration(synth_any: SynthResult) -> None:
    assert synth_any.violations == [], "unacknowledged cdk-nag findings:\n" + _describe(synth_any.violations)
    assert synth_any.synth_error is None, synth_any.synth_error
    report = json.loads((synth_any.outdir / "validation-report.json").read_text())
    assert report["pluginReports"] == []


def test_cdk_nag_plugin_fails_synth_on_a_finding(tmp_path: Path) -> None:
    # Canary: proves the plugin wiring used by build_app reports through synth in this cdk-nag
    # version, so the zero-findings test above cannot pass because nothing ran.
    app = App(outdir=str(tmp_path))
    stack = Stack(app, "Canary")
    sqs.Queue(stack, "PlainQueue")  # no SSL enforcement, no DLQ
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))

    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    rules = {v["ruleName"] for p in report["pluginReports"] for v in p["violations"]}
    assert {"AwsSolutions-SQS3", "AwsSolutions-SQS4"} <= rules
