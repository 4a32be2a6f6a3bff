"""`make bench`: measure what users judge sagewarden by, on the local drill (virtual time).

First the side-by-side benchmark over many trace seeds (:mod:`benchmarks.seeds`,
:mod:`benchmarks.sidebyside`): per seed a fault trace (7.5 days of work by default) for a 2,048-GPU run with its benign
phases, driven through six supervisors -- SageMaker's RetryStrategy + a person, a polling script +
the same person, a competent polling script (e) and the same every minute with sagewarden's GPU
rules (e2), and sagewarden (default and recommended policy) --, lost GPU-hours by cause against the
physical floor, the ratio to the best peer per seed, the person's notice delay as a sensitivity
axis; one seed's full tables and a shorter 16x-stress run as illustrations, and the chart
docs/bench-lost-gpu-hours.png.

Then (:mod:`benchmarks.small_job`), for each fault kind on a small job, over several seeds:
  detect   = fault onset -> the supervisor's action (stop or relaunch)
  recover  = fault onset -> a replacement attempt in Training
  GPU-h lost per fault = GPUs x (recover + work since the checkpoint the replacement resumed from)
Plus false positives on benign slow phases, warm-pool vs cold restarts, and drill speed
(virtual hours per wall second); the deterministic failures of the trace and what they cost each
supervisor (:mod:`benchmarks.bugs_report`); the real endings of the corpus against the pure domain
(:mod:`benchmarks.corpus_eval`). Writes BENCHMARKS.md with --write.
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks import bugs_report, corpus_eval, interval, retention, seeds, sidebyside, stragglers
from benchmarks.method import method_lines
from benchmarks.person import Person
from benchmarks.sidebyside import setup
from benchmarks.small_job import progress, small_job_sections
from benchmarks.supervised import RECOMMENDED_POLICY

STRESS_MULTIPLIER = sidebyside.STRESS_MULTIPLIER


def _interval_advice(
    pool: ProcessPoolExecutor,
    normal: sidebyside.SideBySide,
    person: Person,
    template: dict[str, Any],
    seed: int,
) -> list[str]:
    """(d) again without applying the checkpoint advice (the script's own interval throughout),
    same work and trace."""
    advice = normal.advice.get("d")
    if advice is None:
        return ["", "### Checkpoint interval", "", "No advice at the end of (d)'s run."]
    plain = {**RECOMMENDED_POLICY, "apply_checkpoint_advice": False}
    w, tr, ff = normal.workload, normal.trace, normal.faultfree_min
    result = pool.submit(sidebyside.run_one, "d", w, tr, person, template, seed, ff, plain).result()
    progress(f"checkpoint advice not applied: (d) done in {result.wall_s:.1f} s")
    cmp = interval.IntervalComparison(
        advice, w, normal.told.get("d", ()), result.account, normal.accounts["d"]
    )
    return interval.render(cmp)


def side_by_side(
    pool: ProcessPoolExecutor,
    template: dict[str, Any],
    trace_seeds: list[int],
    days: float,
    stress_days: float,
    main_work: Any,
) -> tuple[list[seeds.SeedResult], sidebyside.SideBySide, Any]:
    """Every supervisor on every seed (and the stress run) in the pool, the longest first; the
    person-delay variants once the main results say which runs needed the person. ``main_work``
    runs in this process meanwhile; its result is handed back."""
    runs = {seed: setup(seed, days) for seed in trace_seeds}
    stress = setup(trace_seeds[0], stress_days, STRESS_MULTIPLIER)
    order = [(stress, k) for k in ("d", "c")] + [(runs[s], k) for k in ("d", "c", "e2") for s in trace_seeds]
    order += [(runs[s], k) for k in ("e", "b", "a") for s in trace_seeds] + [
        (stress, k) for k in ("e2", "e", "b", "a")
    ]
    futures = [
        (
            sbs,
            pool.submit(
                sidebyside.run_one,
                key,
                sbs.workload,
                sbs.trace,
                Person(seed=sbs.trace.seed),
                template,
                sbs.trace.seed,
                sbs.faultfree_min,
            ),
        )
        for sbs, key in order
    ]
    handed_back = main_work()
    for sbs, future in futures:
        result = future.result()
        sidebyside.add(sbs, result)
        progress(f"{sbs.title}: {sidebyside.LABELS[result.key]} done in {result.wall_s:.1f} s")
    results = [seeds.SeedResult(seed, runs[seed]) for seed in trace_seeds]
    variants = []
    for r in results:
        sidebyside.order(r.sbs)
        for h in seeds.PERSON_NOTICE_H:
            if h == seeds.MAIN_NOTICE_H:
                continue
            r.variants[h] = {}
            person = Person(seed=r.seed, hang_notice_median_h=h)
            for key in sidebyside.SUPERVISORS:
                if key in ("c", "d") or not seeds.person_matters(
                    r.sbs.accounts[key], r.sbs.noticed.get(key, 0), person
                ):
                    # sagewarden's person acts on pages only; a peer's run the person never had to
                    # look at in time: the notice delay changes nothing, the run is the same
                    r.variants[h][key] = r.sbs.accounts[key]
                    continue
                w, tr = r.sbs.workload, r.sbs.trace
                f = pool.submit(sidebyside.run_one, key, w, tr, person, template, r.seed, r.sbs.faultfree_min)
                variants.append((r, h, key, f))
    for r, h, key, f in variants:
        r.variants[h][key] = f.result().account
    progress(f"person-delay variants: {len(variants)} runs")
    sidebyside.order(stress)
    return results, stress, handed_back


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("--seeds", type=int, default=3, help="seeds of the small-job tables")
    parser.add_argument("--trace-seeds", type=int, default=10, help="trace seeds of the side-by-side (1..n)")
    parser.add_argument("--days", type=float, default=7.5, help="days of work of each side-by-side run")
    parser.add_argument("--stress-days", type=float, default=2.5, help="days of work of the 16x stress run")
    parser.add_argument("--write", action="store_true", help="write BENCHMARKS.md and the chart")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes for the side-by-side runs")
    parser.add_argument("--no-small", action="store_true", help="skip everything but the side-by-side")
    parser.add_argument(
        "--straggler-seeds", type=int, default=10, help="seeds of the measured straggler escalation (0: none)"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    # the handlers' Powertools metrics warn when an invocation published none (routine in a drill)
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    from drill.account.local import drill_template

    template = drill_template()
    small_seeds = list(range(1, args.seeds + 1))
    trace_seeds = list(range(1, args.trace_seeds + 1))
    pool = ProcessPoolExecutor(max_workers=args.jobs, mp_context=multiprocessing.get_context("spawn"))
    from benchmarks import scale, scale_report  # 10, 100 and 1,000 concurrent runs over a virtual day

    largest = None if args.no_small else pool.submit(scale.measure_detached, max(scale.BENCH_SIZES), template)

    straggler_futures: list[Any] = []

    def small_job() -> list[str]:
        # queued behind the side-by-side's runs (short ones: they fill the pool's tail)
        straggler_futures.extend(
            pool.submit(stragglers.run, seed, action, template)
            for seed in range(1, args.straggler_seeds + 1)
            for action in stragglers.ACTIONS
        )
        return [] if args.no_small else small_job_sections(small_seeds, template)

    results, stress, small = side_by_side(pool, template, trace_seeds, args.days, args.stress_days, small_job)
    straggler_runs = [f.result() for f in straggler_futures]
    progress(f"stragglers: {len(straggler_runs)} runs")
    straggler_lines = stragglers.table(straggler_runs) if straggler_runs else []
    illustration = results[0].sbs
    tried = _interval_advice(
        pool, illustration, Person(seed=illustration.trace.seed), template, results[0].seed
    )
    if args.write:
        sidebyside.chart([illustration, stress])
        progress(f"wrote {sidebyside.CHART}")
    out: list[str] = []
    if not args.no_small:
        out += small
        out += sidebyside.drill_speed_rows(illustration, stress)
        biggest = largest.result() if largest is not None else None
        if biggest is not None:
            progress(f"scale: {biggest.runs} runs in {biggest.wall_s:.1f} s (worker)")
            out += scale_report.run(
                template,
                [n for n in scale.BENCH_SIZES if n != biggest.runs],
                progress=progress,
                measured=[biggest],
            )
    pool.shutdown()
    out += ["", *retention.table()]  # arithmetic on the simulator's restore model: no drill run
    out += ["", *corpus_eval.bench_section(corpus_eval.load())]  # the pure domain: no drill run
    out.append("")
    total = time.perf_counter() - started
    cpu = sum(
        getattr(resource.getrusage(who), field)
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
        for field in ("ru_utime", "ru_stime")
    )
    out.append(
        f"This file and the chart took {total / 60:.1f} min of wall clock to regenerate (`make bench`: "
        f"{len(trace_seeds)} trace seeds x 6 supervisors, the person-delay variants, the stress run, every "
        f"table above, the chart; the side-by-side runs in {args.jobs} worker process(es) next to the rest, "
        f"so their wall times above overlap) on this machine, and {cpu / 60:.1f} min of CPU time over its "
        "processes (on a machine shared with other work the wall clock is longer than its cores alone "
        "would take; the wall times above are then stretched the same way)."
    )
    head = [
        f"## Side by side: six supervisors, {len(results)} trace seeds",
        "",
        f"Each seed is a {args.days:g}-day run of 256 x ml.p5.48xlarge (2,048 GPUs, a checkpoint every 30 min) "
        "with its own faults (the Llama 3 table's causes at its rate), capacity errors and benign phases "
        "(compile, long saves, data pauses, evals, log cadence; drawn from wide ranges), driven through "
        "every supervisor; one function scores them all. Medians (lowest-highest) over the seeds; the "
        "person notices an unpaged hang after a median of 4 h unless the sensitivity table says otherwise.",
        "",
        *seeds.overview_table(results),
        "",
        *seeds.ratio_table(results),
        "",
        "Per seed:",
        "",
        *seeds.per_seed_table(results),
        "",
        "Per fault class, pooled over the seeds: total lost / physical floor (1.00 = nothing lost that "
        "physics did not force):",
        "",
        *seeds.class_floor_table(results),
        "",
        *seeds.breakdown_table(results),
        "",
        *seeds.person_table(results),
        "",
        *seeds.hosts_table(results),
        "",
        *seeds.ettr_table(results),
        "",
        *bugs_report.table([r.sbs.accounts for r in results]),
        "",
        *straggler_lines,
        "",
        "### False stops on benign phases (randomized)",
        "",
        *seeds.benign_table(results),
        "",
        f"![lost GPU-hours by cause]({sidebyside.CHART.as_posix()})",
        "",
        *sidebyside.render(
            illustration, heading=f"### One seed as an illustration: seed {illustration.trace.seed}"
        ),
        *sidebyside.render(
            stress,
            heading=f"### Stress: {STRESS_MULTIPLIER}x the fault rate, a {args.stress_days:g}-day run "
            "(shorter: the result is a ratio), seed 1",
        ),
        *method_lines(Person(seed=1)),
    ]
    text = "\n".join([*head, *tried, *out])
    print(text)
    if args.write:
        header = Path(__file__).with_name("HEADER.md").read_text()
        Path("BENCHMARKS.md").write_text(header + "\n" + text + "\n")
        readme = Path("README.md")
        readme.write_text(
            sidebyside.update_readme(readme.read_text(), seeds.readme_lines(results, straggler_lines))
        )
        print("\nwrote BENCHMARKS.md and the README's benchmark summary", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
