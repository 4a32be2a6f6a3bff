"""`make bench`: measure what users judge sagewarden by, on the local drill (virtual time).

First the side-by-side benchmark over many trace seeds (:mod:`benchmarks.seeds`,
:mod:`benchmarks.sidebyside`): per seed a fault trace (7.5 days of work by default) for a 2,048-GPU run with its benign
phases, driven through six supervisors -- SageMaker's RetryStrategy + a person, a polling script +
the same person, a competent polling script (e) and the same every minute with sagewarden's GPU
rules (e2), and sagewarden (default and recommended policy) --, lost GPU-hours by cause against the
physical floor, the ratio to the best peer per seed, the person's notice delay as a sensitivity
axis; one seed's full tables and a shorter 16x-stress run as illustrations, and the chart
docs/bench-lost-gpu-hours.png.

Then, for each fault kind on a small job, over several seeds:
  detect   = fault onset -> the supervisor's action (stop or relaunch)
  recover  = fault onset -> a replacement attempt in Training
  GPU-h lost per fault = GPUs x (recover + work since the checkpoint the replacement resumed from)
Plus false positives on benign slow phases, warm-pool vs cold restarts, and drill speed
(virtual hours per wall second). Writes BENCHMARKS.md with --write.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import multiprocessing
import resource
import statistics
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks import benign, interval, retention, seeds, sidebyside
from benchmarks.baselines import faultfree_minutes
from benchmarks.method import method_lines
from benchmarks.person import Person
from benchmarks.trace import generate
from benchmarks.workload import Workload
from drill.account import BUCKET, EXECUTION_ROLE
from drill.runner import DrillResult, run_scenario
from drill.scenario import load, parse

NODES, GPUS = 4, 8
PROFILE = {"total_steps": 2500, "steps_per_minute": 5, "checkpoint_every_steps": 150}
FAULT_AT_MIN = 240  # minutes into Training: past the start-up allowance and the learning of windows
NCCL = "[E ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE)"
NCCL_WATCHDOG: dict[str, Any] = {"kind": "algorithm_error", "log_lines": [NCCL]}
# (label, the fault -- or faults, the last one measured --, policy[, the run's hosts and profile])
FAULTS: list[tuple[Any, ...]] = [
    ("internal_error", {"kind": "internal_error"}, {}),
    ("hardware (unhealthy host)", {"kind": "hardware", "host": 2}, {}),
    ("NCCL watchdog (AlgorithmError)", NCCL_WATCHDOG, {}),
    # a spot job (EnableManagedSpotTraining): SageMaker keeps no warm pools for spot instances
    ("spot interruption (managed spot training)", {"kind": "spot_interruption"}, {}),
    ("hang: NCCL spin (GPU 100 %)", {"kind": "hang_spin"}, {}),
    ("hang: one dead host", {"kind": "dead_host", "host": 3}, {}),
    ("hang: stuck data loader", {"kind": "stuck_dataloader"}, {}),
    (
        "hang: NCCL spin 60 min into training (window not learned yet: the policy's 30 min until minute 68)",
        {"kind": "hang_spin", "after_training_min": 60},
        {},
    ),
    ("hang: NCCL spin 80 min into attempt 1", {"kind": "hang_spin", "after_training_min": 80}, {}),
    (
        "hang: stuck data loader 80 min into attempt 1",
        {"kind": "stuck_dataloader", "after_training_min": 80},
        {},
    ),
    (
        "hang: NCCL spin 2.4 h into a 16-host attempt 1, logging twice a minute",
        {"kind": "hang_spin", "after_training_min": 144},
        {},
        {"nodes": 16, "profile": {"log_lines_per_minute": 2}},
    ),
    (
        "hang: dead host 2 min into Training, 2 hosts (start-up)",
        {"kind": "dead_host", "host": 2, "after_training_min": 2},
        {},
        {"nodes": 2},
    ),
    (
        "hang: dead host 20 min into Training (start-up)",
        {"kind": "dead_host", "host": 3, "after_training_min": 20},
        {},
    ),
    (
        "hang: dead host 100 min into Training",
        {"kind": "dead_host", "host": 3, "after_training_min": 100},
        {},
    ),
    (
        "hang: dead host 100 min into Training, 16 hosts",
        {"kind": "dead_host", "host": 11, "after_training_min": 100},
        {},
        {"nodes": 16},
    ),
    (
        "hang: NCCL spin 60 min into attempt 2 (attempt 1 learned the windows, then an internal error)",
        [{"kind": "internal_error"}, {"kind": "hang_spin", "attempt": 2, "after_training_min": 60}],
        {},
    ),
    (
        "hang: loop stuck, a thread still logging (policy progress_metric)",
        {"kind": "hang_spin_logging"},
        {"progress_metric": "train:throughput"},
    ),
]
METRIC = {"Name": "train:throughput", "Regex": "throughput=(\\S+)"}
WARM_POOL_QUOTA = {"quotas": {"ml.p4d.24xlarge": NODES}}  # an account that raised its warm-pool quota


def _scenario(
    seed: int,
    faults: list[dict[str, Any]],
    policy: dict[str, Any] | None = None,
    run: dict[str, Any] | None = None,
    **account: Any,
) -> Any:
    run = run or {}
    return parse(
        {
            "seed": seed,
            "max_days": 3,
            "account": {"store": "memory", **account},
            "delivery": {"min_delay_s": 1, "max_delay_s": 20, "duplicate_rate": 0.1},
            "runs": [
                {
                    "name": "bench",
                    "instance_type": "ml.p4d.24xlarge",
                    "instance_count": run.get("nodes", NODES),
                    "profile": {**PROFILE, **run.get("profile", {})},
                    "policy": policy or {},
                    "training_job": _training_job(faults, policy),
                }
            ],
            "faults": [
                {"run": "bench", "attempt": 1, "after_training_min": FAULT_AT_MIN, **f} for f in faults
            ],
        },
        bucket=BUCKET,
        role_arn=EXECUTION_ROLE,
    )


def _training_job(faults: list[dict[str, Any]], policy: dict[str, Any] | None) -> dict[str, Any]:
    job: dict[str, Any] = {}
    if (policy or {}).get("progress_metric"):
        # a progress_metric must be one of the job's MetricDefinitions (the API checks)
        job["AlgorithmSpecification"] = {"MetricDefinitions": [METRIC]}
    if any(f.get("kind") == "spot_interruption" for f in faults):
        # only a managed spot job is interrupted for spot capacity
        job["EnableManagedSpotTraining"] = True
        job["StoppingCondition"] = {"MaxWaitTimeInSeconds": 6 * 86_400}  # >= MaxRuntime (5 d)
    return job


def _lost_gpu_hours(fault: dict[str, Any], acct_jobs: list[Any]) -> float | None:
    """GPU-hours one fault (a drill fault record) cost: recovery time plus the work redone."""
    recover = fault["to_healthy_replacement_s"]
    if recover is None:
        return None
    jobs = sorted(acct_jobs, key=lambda j: j.created_ms)
    faulted = next(j for j in jobs if j.name == fault["job"])
    replacement = next(j for j in jobs if j.created_ms > faulted.created_ms)
    work_lost_s = max(0, faulted.step - replacement.start_step) / PROFILE["steps_per_minute"] * 60
    return faulted.instance_count * GPUS * (recover + work_lost_s) / 3600


# the measuring drills' AWS calls to moto's heaviest APIs go to its backends (the same state and
# outcome, tested; drill/backend_clients.py); the drill-speed rows time the demo as users run it
FAST: dict[str, Any] = {"backend_reads": True}


def _run(
    scenario: Any, template: dict[str, Any], account_options: dict[str, Any] | None = None
) -> tuple[DrillResult, list[Any]]:
    with contextlib.redirect_stdout(io.StringIO()):  # the handlers' EMF metric lines
        result = run_scenario(scenario, template, account_options=account_options)
    if result.invariant_violations:
        raise SystemExit(f"invariant violated: {result.invariant_violations}")
    return result, result.jobs


DRAWS = 24  # randomized healthy jobs (benchmarks/benign.py), every one reported


def _hangs_in_drawn_jobs(template: dict[str, Any], draw_seeds: range) -> list[str]:
    """Detection of a hang at a random time (80-230 min into Training) in each randomized healthy
    job of the benign set, split by how often the job logs (its learned window follows)."""
    out = [
        "",
        f"A hang at a random time 80-230 min into attempt 1 of each of the {len(draw_seeds)} randomized "
        "healthy jobs of the benign set below (its saves, compile, data-loader pauses and evals going on "
        "around it; a dead host on a random host): detect, median (min-max) over the draws, by how often "
        "the job logs (log silence cannot be shorter than three of its intervals):",
        "",
        "| hang | jobs logging at least every 90 s | jobs logging less often |",
        "|---|---|---|",
    ]
    for kind, label in (
        ("hang_spin", "NCCL spin"),
        ("stuck_dataloader", "stuck data loader"),
        ("dead_host", "dead host"),
    ):
        fast: list[float] = []
        slow: list[float] = []
        missed = 0
        for seed in draw_seeds:
            d = benign.draw(seed)
            if kind == "dead_host" and d.hosts < 2:
                continue  # a one-host job's dead host is a stuck job
            with contextlib.redirect_stdout(io.StringIO()):
                result = benign.run_draw(d, None, template, hang=benign.draw_hang(d, kind))
            f = next(x for x in result.faults if x["kind"] == kind)
            if f["to_action_s"] is None:
                missed += 1
            else:
                (fast if d.log_every_s < 90 else slow).append(f["to_action_s"] / 60)
        _progress(f"drawn jobs: {label}: {_stats(fast)} / {_stats(slow)}, {missed} not caught")
        note = f"; **{missed} not caught**" if missed else ""
        out.append(
            f"| {label} | {_stats(fast)} ({len(fast)} jobs) | {_stats(slow)} ({len(slow)} jobs){note} |"
        )
    return out


def _stats(values: list[float]) -> str:
    if not values:
        return "n/a"
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


STRESS_MULTIPLIER = 16


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def setup(seed: int, days: float, multiplier: float = 1.0) -> sidebyside.SideBySide:
    """One seed's run: its trace (faults over twice the work's healthy time, benign phases) and the
    workload logging at the trace's cadence, with the fault-free wall clock simulated."""
    base = Workload(days=days)
    trace = generate(
        seed=seed,
        hosts=base.hosts,
        gpus_per_host=base.gpus_per_host,
        horizon_hours=2 * days * 24,
        rate_multiplier=multiplier,
        benign=True,
    )
    workload = trace.script(base)
    title = f"seed {seed}" if multiplier == 1 else f"stress {multiplier:g}x, seed {seed}"
    return sidebyside.SideBySide(title, workload, trace, faultfree_minutes(workload, trace))


def _interval_advice(
    pool: ProcessPoolExecutor,
    normal: sidebyside.SideBySide,
    person: Person,
    template: dict[str, Any],
    seed: int,
) -> list[str]:
    """(d) again with the checkpoint interval sagewarden advised during (d), same work and trace."""
    advice = normal.advice.get("d")
    advised = interval.advised_workload(normal.workload, advice) if advice is not None else None
    if advice is None or advised is None:
        return [
            "",
            "### Checkpoint interval",
            "",
            f"No interval to try: {advice.line() if advice else 'no advice'}.",
        ]
    ff = faultfree_minutes(advised, normal.trace)
    result = pool.submit(sidebyside.run_one, "d", advised, normal.trace, person, template, seed, ff).result()
    _progress(f"advised checkpoint interval: (d) done in {result.wall_s:.1f} s")
    cmp = interval.IntervalComparison(advice, normal.workload, advised, normal.accounts["d"], result.account)
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
        _progress(f"{sbs.title}: {sidebyside.LABELS[result.key]} done in {result.wall_s:.1f} s")
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
    _progress(f"person-delay variants: {len(variants)} runs")
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
    args = parser.parse_args(argv)
    started = time.perf_counter()
    # the handlers' Powertools metrics warn when an invocation published none (routine in a drill)
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    from drill.account import drill_template

    template = drill_template()
    small_seeds = list(range(1, args.seeds + 1))
    trace_seeds = list(range(1, args.trace_seeds + 1))
    pool = ProcessPoolExecutor(max_workers=args.jobs, mp_context=multiprocessing.get_context("spawn"))
    from benchmarks import scale  # 10, 100 and 1,000 concurrent runs over a virtual day

    largest = None if args.no_small else pool.submit(scale.measure_detached, max(scale.BENCH_SIZES), template)

    def small_job() -> list[str]:
        return [] if args.no_small else small_job_sections(small_seeds, template)

    results, stress, small = side_by_side(pool, template, trace_seeds, args.days, args.stress_days, small_job)
    illustration = results[0].sbs
    tried = _interval_advice(
        pool, illustration, Person(seed=illustration.trace.seed), template, results[0].seed
    )
    if args.write:
        sidebyside.chart([illustration, stress])
        _progress(f"wrote {sidebyside.CHART}")
    out: list[str] = []
    if not args.no_small:
        out += small
        out += sidebyside.drill_speed_rows(illustration, stress)
        biggest = largest.result() if largest is not None else None
        if biggest is not None:
            _progress(f"scale: {biggest.runs} runs in {biggest.wall_s:.1f} s (worker)")
            out += scale.run(
                template,
                [n for n in scale.BENCH_SIZES if n != biggest.runs],
                progress=_progress,
                measured=[biggest],
            )
    pool.shutdown()
    out += ["", *retention.table()]  # arithmetic on the simulator's restore model: no drill run
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
        *seeds.person_table(results),
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
        readme.write_text(sidebyside.update_readme(readme.read_text(), seeds.readme_lines(results)))
        print("\nwrote BENCHMARKS.md and the README's benchmark summary", file=sys.stderr)
    return 0


def small_job_sections(small_seeds: list[int], template: dict[str, Any]) -> list[str]:
    """The per-fault table on a small job, the benign set, warm pools and drill speed."""
    out: list[str] = ["", "## Per fault on a small job", ""]
    out.append(
        f"Setup: {NODES} x ml.p4d.24xlarge ({NODES * GPUS} GPUs) logging every minute, checkpoint every "
        f"30 min, fault {FAULT_AT_MIN} min into attempt 1 unless named, instance start 6 min + 2 min download, "
        f"events delayed 1-20 s with 10 % duplicates, metric datapoints 30 s to 3 min late (the faithful "
        f"account, docs/fidelity.md), default policy (log-silence and progress windows learned from the "
        f"attempt's cadence once 20 minutes past the 45-minute start-up allowance show it, else 30 min; "
        f"a quiet signal acted on at once when the hosts' metrics show a spin or a stuck job, waited "
        f"for up to 90 min while they show work; one host idle among busy ones 3 min; the whole job idle "
        f"20 min; confirmation `any`). Median (min-max) over {len(small_seeds)} seeds; virtual minutes; "
        f"*detect* is onset -> stop requested or relaunch."
    )
    out.append("")
    out.append(
        "| fault | detect: fault -> action | recover: fault -> replacement training | GPU-hours lost per fault |"
    )
    out.append("|---|---|---|---|")
    for label, fault, policy, *rest in FAULTS:
        detect, recover, lost = [], [], []
        for seed in small_seeds:
            faults = fault if isinstance(fault, list) else [fault]
            result, jobs = _run(_scenario(seed, faults, policy, rest[0] if rest else None), template, FAST)
            f = result.faults[-1]
            if f["to_action_s"] is not None:
                detect.append(f["to_action_s"] / 60)
            if f["to_healthy_replacement_s"] is not None:
                recover.append(f["to_healthy_replacement_s"] / 60)
            g = _lost_gpu_hours(f, jobs)
            if g is not None:
                lost.append(g)
        out.append(f"| {label} | {_stats(detect)} | {_stats(recover)} | {_stats(lost)} |")

    out += _hangs_in_drawn_jobs(template, range(1, DRAWS + 1))
    out.append("")
    out += benign.table(small_seeds, template, progress=_progress, draw_seeds=range(1, DRAWS + 1))
    out.append("")
    out.append(
        "Warm pool (`keep_alive_seconds`) after a non-hardware ending (NCCL watchdog), in an account "
        "with warm-pool quota for the job (AWS's default is 0); the pool becomes Available 0-5 min "
        "after the end (drawn), and the resume waits for it:"
    )
    out.append("")
    out.append("| policy | recover: fault -> replacement training |")
    out.append("|---|---|")
    for label, keep in (("cold (no warm pool)", 0), ("warm pool, keep_alive_seconds=1800", 1800)):
        rec = []
        for seed in small_seeds:
            result, _ = _run(
                _scenario(
                    seed, [NCCL_WATCHDOG], policy={"keep_alive_seconds": keep}, warm_pools=WARM_POOL_QUOTA
                ),
                template,
                FAST,
            )
            if result.faults[0]["to_healthy_replacement_s"] is not None:
                rec.append(result.faults[0]["to_healthy_replacement_s"] / 60)
        out.append(f"| {label} | {_stats(rec)} min |")

    out.append("")
    out.append("Drill speed (wall clock on this machine, 2 cores):")
    out.append("")
    out.append("| scenario | virtual time | wall time | virtual hours per wall second |")
    out.append("|---|---|---|---|")
    default = load("default", bucket=BUCKET, role_arn=EXECUTION_ROLE)
    for label, store in (
        ("default demo, state on moto DynamoDB", "dynamodb"),
        ("default demo, in-memory store", "memory"),
    ):
        default.store = store
        t0 = time.perf_counter()
        result, _ = _run(default, template)
        wall = time.perf_counter() - t0
        hours = (result.end_ms - result.start_ms) / 3_600_000
        out.append(f"| {label} | {hours:.1f} h | {wall:.1f} s | {hours / wall:.1f} |")
    long = parse(
        {
            "seed": 1,
            "max_days": 60,
            "account": {"store": "memory", "reconcile_interval_min": 60},
            "runs": [
                {
                    "name": "forty-days",
                    "instance_type": "ml.p5.48xlarge",
                    "instance_count": 16,
                    "max_runtime_hours": 120,
                    "profile": {"total_steps": 57_600, "steps_per_minute": 1, "checkpoint_every_steps": 60},
                }
            ],
            "faults": [
                {"run": "forty-days", "attempt": a, "after_training_min": 900, "kind": k}
                for a, k in ((2, "hardware"), (4, "hang_spin"), (6, "internal_error"))
            ],
        },
        bucket=BUCKET,
        role_arn=EXECUTION_ROLE,
    )
    t0 = time.perf_counter()
    result, _ = _run(long, template)
    wall = time.perf_counter() - t0
    hours = (result.end_ms - result.start_ms) / 3_600_000
    run = result.runs["forty-days"]
    out.append(
        f"| 40-day 16 x p5 run, 5-day segments, 3 faults ({run['status']}, {len(run['attempts'])} attempts) "
        f"| {hours / 24:.1f} days | {wall:.1f} s | {hours / wall:.0f} |"
    )
    return out


if __name__ == "__main__":
    sys.exit(main())
