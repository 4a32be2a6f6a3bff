"""`make bench`'s tables on a small job: each fault kind on a 4-host job over several seeds
(detect, recover, GPU-hours lost), hangs in randomized healthy jobs, the benign set, warm vs cold
restarts, and the drill's speed. Run by :mod:`benchmarks.__main__` beside the side-by-side."""

from __future__ import annotations

import contextlib
import io
import statistics
import sys
import time
from typing import Any

from benchmarks import benign
from drill.account.local import BUCKET, EXECUTION_ROLE
from drill.scenarios.runner import DrillResult, run_scenario
from drill.scenarios.spec import load, parse
from drill.sim.warm_pools import WarmPoolSettings
from sagewarden.domain.capacity.warm_pools import POOL_WAIT_MS


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


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
# outcome, tested; drill/account/backend_clients.py); the drill-speed rows time the demo as users run it
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
        progress(f"drawn jobs: {label}: {_stats(fast)} / {_stats(slow)}, {missed} not caught")
        note = f"; **{missed} not caught**" if missed else ""
        out.append(
            f"| {label} | {_stats(fast)} ({len(fast)} jobs) | {_stats(slow)} ({len(slow)} jobs){note} |"
        )
    return out


def _stats(values: list[float]) -> str:
    if not values:
        return "n/a"
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


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
    out += benign.table(small_seeds, template, progress=progress, draw_seeds=range(1, DRAWS + 1))
    out.append("")
    low_s, high_s = WarmPoolSettings().available_after_s
    out.append(
        "Warm pool (`keep_alive_seconds`) after a non-hardware ending (NCCL watchdog), in an account "
        f"with warm-pool quota for the job (AWS's default is 0); the pool becomes Available "
        f"{low_s / 60:g}-{high_s / 60:g} min after the end (drawn), and the resume waits for it up "
        f"to {POOL_WAIT_MS // 60_000} min (a later pool: it starts cold):"
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
