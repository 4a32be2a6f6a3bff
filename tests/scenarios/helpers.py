"""Build and run inline drill scenarios in tests."""

from __future__ import annotations

import json
from typing import Any

import pytest

import drill.__main__ as drill_cli
from drill.account.local import BUCKET, EXECUTION_ROLE
from drill.scenarios.runner import DrillResult, run_scenario
from drill.scenarios.spec import parse


def run_drill(template: dict[str, Any], data: dict[str, Any], **kwargs: Any) -> DrillResult:
    scenario = parse(data, bucket=BUCKET, role_arn=EXECUTION_ROLE)
    result = run_scenario(scenario, template, **kwargs)
    assert result.invariant_violations == [], result.invariant_violations
    return result


def decisions(result: DrillResult, run: str) -> str:
    return "\n".join(result.runs[run]["decisions"])


def classes(result: DrillResult, run: str) -> list[str | None]:
    return [a["end_class"] for a in result.runs[run]["attempts"]]


def run_spec(name: str, **kw: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": name,
        "submit_at_min": 0,
        "instance_type": "ml.p4d.24xlarge",
        "instance_count": 2,
        "profile": {"total_steps": 1200, "steps_per_minute": 10, "checkpoint_every_steps": 300},
    }
    spec.update(kw)
    return spec


Summary = dict[str, Any]


def run_by_name(name: str, capsys: pytest.CaptureFixture[str]) -> Summary:
    code = drill_cli.main([name, "--json"])
    out = capsys.readouterr().out
    summary: Summary = json.loads(out)
    assert summary["invariant_violations"] == [], summary["invariant_violations"]
    assert code == 0
    return summary
