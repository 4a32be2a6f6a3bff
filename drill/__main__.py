"""`python -m drill [SCENARIO] [--json] [--seed N] [--verbose]`: run a drill on a simulated account.

SCENARIO is a path to a scenario JSON file or the name of one in drill/scenarios/ (default:
"default"). Prints a timeline (virtual time, run, kind, what happened) and a per-run summary;
with --json prints only the JSON summary. Exits 1 if an invariant or an `expect` failed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys

from drill.account import BUCKET, EXECUTION_ROLE
from drill.runner import DrillResult, run_scenario
from drill.scenario import load


def _clock(ms: int, start: int) -> str:
    s = (ms - start) // 1000
    days, rem = divmod(s, 86_400)
    h, rem = divmod(rem, 3600)
    m, sec = divmod(rem, 60)
    return f"{days:>2}d {h:02d}:{m:02d}:{sec:02d}"


_JOB = re.compile(r"\bsw-[a-z0-9-]+?-[0-9a-z]{26}-a(\d+)\b", re.IGNORECASE)


def _short(text: str) -> str:
    """`sw-llama-8b-01KE...-a002` -> `job a002` (the run column already names the run)."""
    return " ".join(_JOB.sub(r"job a\1", text).split())


def render(result: DrillResult, *, verbose: bool = False) -> str:
    lines = [f"sagewarden drill: scenario '{result.scenario}' (seed {result.seed})", ""]
    lines.append(f"{'virtual time':<13} {'run':<14} {'kind':<9} what happened")
    lines.append("-" * 110)
    for row in result.timeline:
        if row.routine and not verbose:
            continue
        text = row.text if verbose else _short(row.text)
        text = text if verbose or len(text) <= 150 else text[:147] + "..."
        lines.append(f"{_clock(row.at_ms, result.start_ms):<13} {row.run[:14]:<14} {row.kind:<9} {text}")
    lines += ["", "Summary", "-" * 110]
    for name, run in result.runs.items():
        lines.append(
            f"{name}: {run['status']} after {len(run['attempts'])} attempt(s), restarts {run['restarts']} "
            f"{run['restarts_by_class']}, MaxRuntime segments {run['segments']}, last checkpoint step "
            f"{run['last_checkpoint_step']}, est. cost ${run['estimated_cost_usd']:,.0f} - {run['outcome']}"
        )
        for a in run["attempts"]:
            lines.append(
                f"    attempt {a['number']}: {a['instances']}, from step {a['resumed_from_step']}, "
                f"{a['sagemaker']} -> {a['end_class'] or 'live'}"
            )
    if result.faults:
        lines += ["", "Faults: time to the supervisor's action / to a healthy replacement (virtual)"]
        for f in result.faults:
            lines.append(
                f"    {f['kind']:<22} {f['run'] or '-':<14} action {_secs(f['to_action_s'])}  "
                f"replacement training {_secs(f['to_healthy_replacement_s'])}"
            )
    virtual_h = (result.end_ms - result.start_ms) / 3_600_000
    lines += [
        "",
        f"{virtual_h:,.1f} virtual hours in {result.wall_seconds:.1f} s; {result.events_delivered} events "
        f"delivered; {result.alerts} alerts published",
    ]
    if result.invariant_violations:
        lines += ["", "VIOLATIONS:", *[f"    {v}" for v in result.invariant_violations]]
    else:
        lines.append("Invariants held: at most one live job per run; every expectation met.")
    return "\n".join(lines)


def _secs(v: float | None) -> str:
    if v is None:
        return "   n/a"
    return f"{v / 60:6.1f} min"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m drill", description=__doc__.split("\n")[0])
    parser.add_argument("scenario", nargs="?", default="default")
    parser.add_argument("--json", action="store_true", help="print the JSON summary only")
    parser.add_argument("--seed", type=int, default=None, help="override the scenario's seed")
    parser.add_argument("--verbose", action="store_true", help="show routine sweep look-ups too")
    args = parser.parse_args(argv)

    from drill.account import drill_template

    scenario = load(args.scenario, bucket=BUCKET, role_arn=EXECUTION_ROLE)
    if args.seed is not None:
        scenario.seed = args.seed
    result = run_scenario(scenario, drill_template())
    if args.json:
        print(json.dumps(result.summary(), indent=2, default=str))
    else:
        print(render(result, verbose=args.verbose))
    return 1 if result.invariant_violations else 0


if __name__ == "__main__":
    sys.exit(main())
