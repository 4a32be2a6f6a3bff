"""Shared builders of the scenario-format tests: a minimal scenario and its problems."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from drill.account.local import BUCKET, EXECUTION_ROLE
from drill.scenarios.spec import ScenarioError, parse

PROFILE = {"total_steps": 1200, "steps_per_minute": 10, "checkpoint_every_steps": 300}  # 2 h of training


def scenario(**over: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "t",
        "policy_defaults": {"max_restarts": 3},
        "runs": [
            {
                "name": "llama-8b",
                "instance_type": "ml.p4d.24xlarge",
                "instance_count": 2,
                "profile": dict(PROFILE),
            },
            {"name": "qwen-sft", "submit_at_min": 10, "instance_count": 1, "profile": dict(PROFILE)},
        ],
        "faults": [{"kind": "hardware", "run": "llama-8b", "attempt": 1, "after_training_min": 30}],
        "actions": [],
        "expect": {"llama-8b": {"status": "SUCCEEDED", "attempts": 2}},
    }
    data.update(over)
    return copy.deepcopy(data)


def problems(data: Any) -> list[str]:
    with pytest.raises(ScenarioError) as err:
        parse(data, bucket=BUCKET, role_arn=EXECUTION_ROLE, source="s.json")
    assert all(line.startswith("s.json: ") for line in err.value.lines())
    return err.value.problems
