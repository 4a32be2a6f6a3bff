"""`python -m drill [SCENARIO] [--alerts] [--plot FILE] [--json] [--seed N] [--verbose]`: run a drill.

`python -m drill serve ...` serves the API on a simulated account instead (drill/account/server.py).
Exit codes: 2 for a bad scenario or plot path, 1 for a failed invariant or `expect`.
See docs/drill.md."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import warnings
from pathlib import Path

from drill.account.local import BUCKET, EXECUTION_ROLE
from drill.reports.render import render
from drill.scenarios.runner import DrillResult
from drill.scenarios.spec import ScenarioError, load, shipped

EPILOG = """examples:
  python -m drill                          the demo (drill/scenarios/default.json)
  python -m drill hang-nccl-spin --alerts  a shipped scenario by name, with every alert in full
  python -m drill my.json --plot run.png   your own scenario, and a picture of its attempts
  python -m drill default --json           the JSON summary only

shipped scenarios: """


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve"]:
        from drill.account.server import main as serve

        return serve(argv[1:])
    parser = argparse.ArgumentParser(
        prog="python -m drill",
        description=(__doc__ or "").split("\n\n")[0].replace("\n", " "),
        epilog=EPILOG + ", ".join(shipped()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("scenario", nargs="?", default="default", help="a scenario file or a shipped name")
    parser.add_argument("--json", action="store_true", help="print the JSON summary only")
    parser.add_argument("--alerts", action="store_true", help="also print every alert published, in full")
    parser.add_argument(
        "--plot",
        metavar="FILE",
        type=Path,
        help="draw the runs' attempts on a time axis (.png, or .html/.svg)",
    )
    parser.add_argument("--seed", type=int, default=None, help="override the scenario's seed")
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="also show the raw events behind decisions (each submit, each accepted launch) and full job names",
    )
    args = parser.parse_args(argv)
    if args.plot is not None:
        problem = plot_path_problem(args.plot)
        if problem:  # checked before the drill runs, not after minutes of it
            print(f"python -m drill: --plot {args.plot}: {problem}", file=sys.stderr)
            return 2

    try:
        scenario = load(args.scenario, bucket=BUCKET, role_arn=EXECUTION_ROLE)
    except ScenarioError as exc:
        for line in exc.lines():
            print(line, file=sys.stderr)
        return 2
    if args.seed is not None:
        scenario.seed = args.seed

    from drill.account.local import drill_template
    from drill.scenarios.runner import run_scenario

    # the handlers' Powertools metrics warn when an invocation published none (routine in a drill)
    warnings.filterwarnings("ignore", message="No application metrics to publish")

    # Powertools writes a metric batch to stdout when a metric reaches 100 values, even with
    # POWERTOOLS_METRICS_DISABLED: in a long drill those raw EMF lines would bury the output
    with contextlib.redirect_stdout(io.StringIO()):
        result = run_scenario(scenario, drill_template())
    if args.json:
        print(json.dumps(result.summary(), indent=2, ensure_ascii=False))
    else:
        print(render(result, verbose=args.verbose, show_alerts=args.alerts))
    if args.plot is not None and _plot(result, args.plot):
        return 2
    return 1 if result.invariant_violations else 0


PLOT_SUFFIXES = (".png", ".svg", ".html")


def plot_path_problem(path: Path) -> str | None:
    """Why the drill could not write its plot to ``path`` (None when it can): asked before the
    drill runs, so a typo costs a second, not the drill and a traceback."""
    if path.is_dir():
        return "is a directory; name a file in it, e.g. run.png"
    if path.suffix.lower() not in PLOT_SUFFIXES:
        return "the file must end in .png, .svg or .html"
    parent = path.parent
    if not parent.is_dir():
        return f"no directory {parent}" if not parent.exists() else f"{parent} is not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot write in {parent}"
    return None


def _plot(result: DrillResult, path: Path) -> int:
    from drill.reports.plot import write

    try:
        write(result, path)
    except OSError as exc:
        print(f"python -m drill: --plot {path}: cannot write: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"plot written to {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
