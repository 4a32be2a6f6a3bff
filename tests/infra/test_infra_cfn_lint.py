"""cfn-lint on the synthesized templates (W3005 -- redundant DependsOn -- is CDK's style)."""

from __future__ import annotations

import json

from cfnlint.api import ManualArgs, lint
from infra_synth import SynthResult

REGIONS = ["us-east-1", "eu-west-1"]


def test_cfn_lint_reports_no_error_or_warning(synth_any: SynthResult) -> None:
    matches = lint(
        json.dumps(synth_any.raw),
        config=ManualArgs(ignore_checks=["W3005"], regions=REGIONS),
    )

    assert matches == [], "\n".join(str(m) for m in matches)
