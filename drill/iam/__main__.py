"""`python -m drill.iam [--table] [SCENARIO ...]` (`make iam-report`): the IAM replay report.

Exits 1 if any call is denied, unknown or unmapped. Why: docs/deploy.md (*IAM proven by replay*)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from drill.account.local import BUCKET, EXECUTION_ROLE, drill_template
from drill.iam.replay import ReplayReport, check
from drill.iam.requests import render_table
from drill.scenarios.runner import run_scenario
from drill.scenarios.spec import load

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


def shipped_scenarios() -> list[Path]:
    return sorted(SCENARIOS.glob("*.json"))


def replay(scenarios: list[str | Path]) -> ReplayReport:
    """Run each scenario and check the pooled calls against the drill's template."""
    template = drill_template()
    reports = []
    for path in scenarios:
        result = run_scenario(load(path, bucket=BUCKET, role_arn=EXECUTION_ROLE), template)
        reports.append(result.iam)
    first, *rest = reports
    assert first.template_iam is not None
    return check(first.recorders[0], first.template_iam, recorders=[r for rep in rest for r in rep.recorders])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m drill.iam", description=__doc__.split("\n")[0])
    parser.add_argument("scenarios", nargs="*", help="scenario files or names (default: all shipped)")
    parser.add_argument("--table", action="store_true", help="also print the call -> request mapping table")
    args = parser.parse_args(argv)
    scenarios: list[str | Path] = list(args.scenarios) or list(shipped_scenarios())
    report = replay(scenarios)
    print(f"Scenarios: {', '.join(Path(s).stem for s in scenarios)}")
    print(report.render())
    if args.table:
        print("\nMapping table (drill/iam/requests.py)\n")
        print(render_table())
    return 1 if report.findings else 0


if __name__ == "__main__":
    sys.exit(main())
