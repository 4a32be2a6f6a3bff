"""The bench's table of deterministic failures (benchmarks/user_bugs.py): per supervisor, the
attempts each bug ended and the GPU-hours lost to them, from the side-by-side's accounts.

``python -m benchmarks.bugs_report --seeds 3`` runs only what this table needs (every supervisor
on seeds 1..n of the side-by-side) and prints it; ``make bench`` renders it from its own runs.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import multiprocessing
import statistics
import sys
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor

from benchmarks.accounting import Account
from benchmarks.person import Person
from benchmarks.sidebyside import LABELS, SUPERVISORS, run_one, setup
from benchmarks.user_bugs import BUG_KINDS, RATE_PER_HEALTHY_HOUR

HEADING = "### Deterministic failures: GPU-hours lost to them"


def _span(values: Sequence[float], fmt: str) -> str:
    if not values:
        return "-"
    mid = fmt.format(statistics.median(values))
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return mid if lo == hi else f"{mid} ({lo}-{hi})"


def table(per_seed: Sequence[Mapping[str, Account]]) -> list[str]:
    """Per supervisor: bugs met and the attempts they ended over the seeds, attempts per bug
    (median, lowest-highest), GPU-hours lost to them per seed (median, lowest-highest) and in all."""
    kinds = ", ".join(k.what for k in BUG_KINDS.values())
    out = [
        HEADING,
        "",
        f"Every seed's trace has deterministic failures (a user's bug; about one per "
        f"{1 / RATE_PER_HEALTHY_HOUR:g} healthy hours: {kinds}), each quoting a real ending of the "
        "corpus (benchmarks/user_bugs.py names the case in its label). The bug ends every attempt "
        "the same way, from the same checkpoint, until the person fixes it -- when they resubmit "
        "after a page, or when they see the loop after their hang-notice delay. Lost: from its first "
        "ending to the run training again after the fix (the compile included), plus the work since "
        "the checkpoint at the first ending. Scored apart from the fault classes above.",
        "",
        "| supervisor | bugs met | attempts ended | attempts per bug | GPU-hours per seed | GPU-hours in all |",
        "|---|---|---|---|---|---|",
    ]
    for key in SUPERVISORS:
        accounts = [a[key] for a in per_seed if key in a]
        if not accounts:
            continue
        bugs = [b for a in accounts for b in a.bugs]
        hours = [a.bug_gpu_hours for a in accounts]
        out.append(
            f"| {LABELS[key]} | {len(bugs)} | {sum(b.endings for b in bugs)} "
            f"| {_span([b.endings for b in bugs], '{:g}')} | {_span(hours, '{:,.0f}')} | {sum(hours):,.0f} |"
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bugs_report", description=__doc__)
    parser.add_argument("--seeds", type=int, default=3, help="trace seeds 1..n")
    parser.add_argument("--days", type=float, default=7.5, help="days of work of each run")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--keys", default=",".join(SUPERVISORS), help="supervisors, comma-separated")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    from drill.account.local import drill_template

    with contextlib.redirect_stdout(io.StringIO()):
        template = drill_template()
    keys = [k for k in args.keys.split(",") if k]
    runs = {seed: setup(seed, args.days) for seed in range(1, args.seeds + 1)}
    with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {
            (seed, key): pool.submit(
                run_one, key, sbs.workload, sbs.trace, Person(seed=seed), template, seed, sbs.faultfree_min
            )
            for seed, sbs in runs.items()
            for key in keys
        }
        per_seed: dict[int, dict[str, Account]] = {seed: {} for seed in runs}
        for (seed, key), future in futures.items():
            per_seed[seed][key] = future.result().account
            print(f"seed {seed}: {LABELS[key]} done", file=sys.stderr)
    lines = table([per_seed[s] for s in sorted(per_seed)])
    lines += [
        "",
        "Per seed: each bug met, the attempts it ended (its GPU-hours) -> the seed's GPU-hours:",
        "",
    ]
    for seed in sorted(per_seed):
        for key in keys:
            a = per_seed[seed][key]
            cells = ", ".join(f"{b.bug.kind} {b.endings} ({b.gpu_hours(a.gpus):,.0f})" for b in a.bugs)
            lines.append(f"- seed {seed} {LABELS[key].split(' ', 1)[0]}: {cells} -> {a.bug_gpu_hours:,.0f}")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
