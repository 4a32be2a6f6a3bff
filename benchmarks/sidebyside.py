"""The side-by-side benchmark: one fault trace, four supervisors, each driving the simulated
SageMaker; where the GPU-hours went, against the physical floor.

(a) SageMaker's RetryStrategy + a person on call, (b) a 5-minute polling script + the same person
(:mod:`benchmarks.baselines`), (c) sagewarden with its default policy and (d) with
``RECOMMENDED_POLICY`` (:mod:`benchmarks.supervised`, the real drill). The trace is
:mod:`benchmarks.trace`, the accounting :mod:`benchmarks.accounting`.
"""

from __future__ import annotations

import contextlib
import io
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.accounting import BUCKETS, Account, account
from benchmarks.baselines import run_baseline
from benchmarks.chart import write_chart
from benchmarks.person import Person
from benchmarks.supervised import RECOMMENDED_POLICY, run_sagewarden
from benchmarks.trace import GPU_FAULT_RATE_PER_GPU_HOUR, MANIFESTATIONS, ROOT_CAUSES, Trace, class_order
from benchmarks.workload import Workload
from sagewarden.domain.advice import CheckpointAdvice

SUPERVISORS = ("a", "b", "c", "d")
LABELS = {
    "a": "(a) SageMaker RetryStrategy + person",
    "b": "(b) polling script (5 min) + person",
    "c": "(c) sagewarden, default policy",
    "d": "(d) sagewarden, recommended policy",
}
TICKS = {
    "a": "(a) RetryStrategy\n+ person",
    "b": "(b) polling script\n+ person",
    "c": "(c) sagewarden\ndefault",
    "d": "(d) sagewarden\nrecommended",
}
CHART = Path("docs/bench-lost-gpu-hours.png")
RETRY_ATTEMPTS = 3


@dataclass
class SideBySide:
    title: str
    workload: Workload
    trace: Trace
    accounts: dict[str, Account] = field(default_factory=dict)
    wall_s: dict[str, float] = field(default_factory=dict)
    person: dict[str, int] = field(default_factory=dict)  # the person's interventions
    gave_up: dict[str, int] = field(default_factory=dict)  # sagewarden runs that ended FAILED
    advice: dict[str, CheckpointAdvice] = field(default_factory=dict)  # sagewarden's, at the end

    def best_alternative(self, excess: bool = False) -> float:
        values = [
            (self.accounts[k].excess_gpu_hours() if excess else self.accounts[k].total_gpu_hours())
            for k in ("a", "b")
        ]
        return min(values)


@dataclass
class Supervised:
    """What one sagewarden drill of the side-by-side hands back (picklable: it may run in a worker)."""

    key: str
    account: Account
    wall_s: float
    person: int
    gave_up: int
    advice: CheckpointAdvice | None = None


def run_supervised(
    key: str, workload: Workload, trace: Trace, person: Person, template: dict[str, Any], seed: int
) -> Supervised:
    """Supervisor (c) or (d) on the trace, through the drill; a process-pool worker may run it."""
    policy = {} if key == "c" else RECOMMENDED_POLICY
    warnings.filterwarnings("ignore", message="No application metrics to publish")  # routine in a drill
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):  # the handlers' metric lines
        s = run_sagewarden(workload, trace, person, template, policy=policy, seed=seed)
    wall = time.perf_counter() - t0
    if s.drill.invariant_violations:
        raise RuntimeError(f"invariant violated in {LABELS[key]}: {s.drill.invariant_violations}")
    acc = account(
        LABELS[key],
        workload,
        trace,
        s.jobs,
        s.records,
        start_ms=s.start_ms,
        end_ms=s.end_ms,
        completed=s.completed,
        faultfree_wall_min=workload.faultfree_minutes,
        decided_ms=s.decided_ms,
    )
    return Supervised(
        key,
        acc,
        wall,
        sum(1 for _, who, _ in s.actions if who.startswith("person")),
        sum(1 for _, who, _ in s.actions if who.startswith("page")),
        s.advice,
    )


def run_baselines(
    title: str,
    workload: Workload,
    trace: Trace,
    person: Person,
    *,
    seed: int = 1,
    progress: Callable[[str], None] = lambda _: None,
) -> SideBySide:
    """The side-by-side with (a) and (b) filled in (they take seconds); add (c), (d) with ``add``."""
    out = SideBySide(title, workload, trace)
    for key, kind in (("a", "retry"), ("b", "poll")):
        t0 = time.perf_counter()
        r = run_baseline(kind, workload, trace, person, seed=seed, retry_attempts=RETRY_ATTEMPTS)
        out.wall_s[key] = time.perf_counter() - t0
        out.accounts[key] = account(
            LABELS[key],
            workload,
            trace,
            r.jobs,
            r.sim.fault_records,
            start_ms=r.start_ms,
            end_ms=r.end_ms,
            completed=r.completed,
            faultfree_wall_min=workload.faultfree_minutes,
        )
        out.person[key] = sum(1 for _, who, _ in r.actions if who.startswith("person"))
        progress(f"{title}: {LABELS[key]} done in {out.wall_s[key]:.1f} s")
    return out


def add(sbs: SideBySide, result: Supervised) -> None:
    sbs.accounts[result.key] = result.account
    sbs.wall_s[result.key] = result.wall_s
    sbs.person[result.key] = result.person
    sbs.gave_up[result.key] = result.gave_up
    if result.advice is not None:
        sbs.advice[result.key] = result.advice


def run_side_by_side(
    title: str,
    workload: Workload,
    trace: Trace,
    person: Person,
    template: dict[str, Any],
    *,
    seed: int = 1,
    progress: Callable[[str], None] = lambda _: None,
) -> SideBySide:
    """All four supervisors in this process, one after the other."""
    out = run_baselines(title, workload, trace, person, seed=seed, progress=progress)
    for key in ("c", "d"):
        add(out, run_supervised(key, workload, trace, person, template, seed))
        progress(f"{title}: {LABELS[key]} done in {out.wall_s[key]:.1f} s")
    accounts = out.accounts
    out.accounts = {k: accounts[k] for k in SUPERVISORS}
    return out


# ----------------------------------------------------------------------------------------------
# Rendering (markdown)
# ----------------------------------------------------------------------------------------------


def _gh(value: float) -> str:
    return f"{value:,.0f}"


def _ratio(num: float, den: float) -> str:
    return "n/a" if den <= 0 else f"{num / den:.3f}"


def summary_table(sbs: SideBySide) -> list[str]:
    out = [
        "| supervisor | faults | "
        + " | ".join(BUCKETS)
        + " | total lost | physical floor | above the floor | effective training | run took | person acted |",
        "|---|---|" + "---|" * (len(BUCKETS) + 6),
    ]
    for key in SUPERVISORS:
        a = sbs.accounts[key]
        buckets = " | ".join(_gh(v) for v in a.bucket_gpu_hours())
        gave_up = f" ({sbs.gave_up[key]} give-ups)" if sbs.gave_up.get(key) else ""
        out.append(
            f"| {LABELS[key]} | {a.count()} | {buckets} | **{_gh(a.total_gpu_hours())}** | "
            f"{_gh(a.floor_gpu_hours())} | **{_gh(a.excess_gpu_hours())}** | {100 * a.effective_training:.1f} % | "
            f"{a.wall_min / 1440:.2f} d | {sbs.person[key]}{gave_up} |"
        )
    return out


def ratio_lines(sbs: SideBySide) -> list[str]:
    best_total, best_excess = sbs.best_alternative(), sbs.best_alternative(excess=True)
    out = [
        "| ratio | on total lost GPU-hours | on GPU-hours above the physical floor |",
        "|---|---|---|",
    ]
    for key in ("c", "d"):
        a = sbs.accounts[key]
        out.append(
            f"| {LABELS[key]} / best of (a), (b) | {_ratio(a.total_gpu_hours(), best_total)} | "
            f"**{_ratio(a.excess_gpu_hours(), best_excess)}** |"
        )
    return out


def class_table(sbs: SideBySide) -> list[str]:
    out = [
        "| fault class | faults | physical floor per fault | "
        + " | ".join(f"({k}) per fault" for k in SUPERVISORS)
        + " | (c) / floor | (d) / floor |",
        "|---|---|---|" + "---|" * (len(SUPERVISORS) + 2),
    ]
    d = sbs.accounts["d"]
    for cls in class_order():
        n = d.count(cls)
        if n == 0:
            continue
        per = {
            k: sbs.accounts[k].total_gpu_hours(cls) / max(sbs.accounts[k].count(cls), 1) for k in SUPERVISORS
        }
        floor = d.floor_gpu_hours(cls) / n
        c = sbs.accounts["c"]
        out.append(
            f"| {cls} | {n} | {_gh(floor)} | "
            + " | ".join(_gh(per[k]) for k in SUPERVISORS)
            + f" | {_ratio(c.total_gpu_hours(cls), c.floor_gpu_hours(cls))}"
            + f" | {_ratio(d.total_gpu_hours(cls), d.floor_gpu_hours(cls))} |"
        )
    return out


def class_buckets_table(sbs: SideBySide, key: str) -> list[str]:
    """Minutes per fault by bucket for one supervisor, next to the floor's."""
    a = sbs.accounts[key]
    out = [
        "| fault class | " + " | ".join(f"{b} (floor)" for b in BUCKETS) + " |",
        "|---|" + "---|" * len(BUCKETS),
    ]
    for cls in class_order():
        rows = [x for x in a.losses if x.fault.cls == cls]
        if not rows:
            continue
        cells = []
        for i in range(len(BUCKETS)):
            got = sum(x.minutes[i] for x in rows) / len(rows)
            floor = sum(x.floor[i] for x in rows) / len(rows)
            cells.append(f"{got:.1f} ({floor:.1f})")
        out.append(f"| {cls} | " + " | ".join(cells) + " |")
    return out


def mapping_table() -> list[str]:
    total = sum(c.count for c in ROOT_CAUSES)
    out = [
        "| root cause (Llama 3) | interruptions | share | bad instance | shows on SageMaker as | capacity error on restart |",
        "|---|---|---|---|---|---|",
    ]
    for c in ROOT_CAUSES:
        shows = ", ".join(f"{round(p * 100)} % {MANIFESTATIONS[m].cls}" for m, p in c.shows_as)
        cap = f"{round(c.restart_capacity * 100)} %" if c.restart_capacity else "-"
        out.append(
            f"| {c.name} | {c.count} | {100 * c.count / total:.1f} % | {'yes' if c.hardware else 'no'} | {shows} | {cap} |"
        )
    return out


def trace_lines(sbs: SideBySide) -> list[str]:
    w, tr = sbs.workload, sbs.trace
    used = sbs.accounts["d"].count()
    cap = sum(1 for f in tr.faults[:used] if f.restart_capacity_min is not None)
    return [
        f"Trace: {w.hosts} x {w.instance_type} ({w.gpus:,} GPUs), {w.days:g} days of work, a checkpoint every "
        f"{w.checkpoint_minutes:g} min ({w.checkpoint_write_seconds} s to write), faults at "
        f"{GPU_FAULT_RATE_PER_GPU_HOUR:.3g} per GPU-hour x {tr.rate_multiplier:g} = one per "
        f"{tr.mtbf_hours:.1f} h of healthy operation (seed {tr.seed}); {used} faults met by (d), "
        f"{cap} of them followed by a capacity error at restart. Lost GPU-hours = {w.gpus:,} GPUs x time; "
        f"the fault-free run takes {w.faultfree_minutes / 1440:.2f} days.",
    ]


def render(normal: SideBySide, stress: SideBySide, person: Person) -> list[str]:
    out: list[str] = []
    out += ["## Side by side: one fault trace, four supervisors", ""]
    out += [*trace_lines(normal), ""]
    out += [f"![lost GPU-hours by cause]({CHART.as_posix()})", ""]
    out += [*summary_table(normal), ""]
    out += [*ratio_lines(normal), ""]
    out += [
        "Per fault class: lost GPU-hours per fault, and sagewarden's ratio to the physical floor "
        "(1.00 = nothing lost that physics did not force):",
        "",
    ]
    out += [*class_table(normal), ""]
    out += ["Where (d)'s minutes per fault go, against the floor's:", ""]
    out += [*class_buckets_table(normal, "d"), ""]
    out += [f"### Stress: the same run at {stress.trace.rate_multiplier:g}x the fault rate", ""]
    out += [*trace_lines(stress), ""]
    out += [*summary_table(stress), ""]
    out += [*ratio_lines(stress), ""]
    out += [*class_table(stress), ""]
    out += ["### How the trace is made and how it is scored", ""]
    out += [
        "Root causes in the proportions of the Llama 3 interruption table, each shown on SageMaker "
        "as `benchmarks/trace.py` says (edit its table to try another view):",
        "",
    ]
    out += [*mapping_table(), ""]
    out += [
        f"- **Person on call** (the same for every supervisor): {person.describe()}. Delays are drawn per "
        "fault, so two supervisors that need the person for the same fault wait the same time.",
        "- **(a)** sets `RetryStrategy.MaximumRetryAttempts` "
        f"= {RETRY_ATTEMPTS}; SageMaker retries only an InternalServerError, within the same job (the "
        "simulator's assumptions: status stays InProgress, SecondaryStatus goes back to Starting, cold "
        "instances, the script resumes from the newest complete checkpoint, MaxRuntimeInSeconds counts "
        "every try). Every other failure pages the person. **(b)** calls DescribeTrainingJob every 5 "
        "minutes and resubmits a Failed job from the newest complete checkpoint at once. Neither "
        "detects hangs: they last until the person notices.",
        "- **(c), (d)** run the real handlers, service and adapters in the drill (state in memory, log "
        "reads answered by the simulator, an hourly reconcile). When sagewarden gives up on the run "
        "(restart budget, crash loop, a user error by policy) it pages, and the person resubmits it. "
        f"(d)'s policy: `{RECOMMENDED_POLICY}` (`benchmarks/supervised.py`).",
        "- **Buckets** per fault: *detection* = onset -> first decision (stop, relaunch, or SageMaker's "
        "own retry); *stop* = decision -> replacement requested (the job's Stopping, and the wait for "
        "the person when sagewarden gives up after stopping a hung job); *instance start* = requested -> "
        "Training again (capacity errors included); *work lost* = steps since the resumed checkpoint. "
        "**Physical floor**: detection one metric period (60 s) + event delivery (10.5 s) for anything "
        "that does not end the job by itself, delivery only for a crash; stop 120 s (SIGKILL of a hung "
        "script) + delivery; instance start cold (8 min) after a bad instance, warm (35 s) otherwise, "
        "plus any capacity wait; work since the newest complete checkpoint at onset (half a checkpoint "
        "interval on average). *Above the floor* is what a supervisor controls.",
        "- **Effective training** = the work's training time / the run's wall clock (the fault-free run "
        f"scores {100 * normal.workload.useful_minutes / normal.workload.faultfree_minutes:.1f} %: start-up "
        "and checkpoint writes).",
    ]
    return out


README_START = "<!-- bench:summary:start (written by `make bench`) -->"
README_END = "<!-- bench:summary:end -->"


def readme_summary(normal: SideBySide) -> list[str]:
    """The README's table and sentences, from the same numbers as BENCHMARKS.md."""
    out = [
        "| supervisor | lost GPU-hours | above the physical floor | effective training |",
        "|---|---|---|---|",
    ]
    for key in SUPERVISORS:
        a = normal.accounts[key]
        out.append(
            f"| {LABELS[key]} | {_gh(a.total_gpu_hours())} | {_gh(a.excess_gpu_hours())} | "
            f"{100 * a.effective_training:.1f} % |"
        )
    best_total, best_excess = normal.best_alternative(), normal.best_alternative(excess=True)
    c, d = normal.accounts["c"], normal.accounts["d"]
    gave_up = normal.gave_up.get("c", 0)
    out += [
        "",
        f"The physical floor ({_gh(d.floor_gpu_hours())} GPU-hours for (d)) is what no supervisor avoids: a fault "
        "is seen one metric period after it starts, a hung job takes 120 s to kill, instances take minutes to "
        "start, and the work since the last checkpoint is redone. Above that floor, sagewarden loses "
        f"{_ratio(c.excess_gpu_hours(), best_excess)} (default policy) and {_ratio(d.excess_gpu_hours(), best_excess)} "
        "(recommended policy) of the best alternative's GPU-hours; counting the floor too, "
        f"{_ratio(c.total_gpu_hours(), best_total)} and {_ratio(d.total_gpu_hours(), best_total)}. Crashes cost "
        "about the floor for anyone quick to react; the gain is on hangs, which the alternatives leave to a "
        "person."
        + (
            f" The default policy gave up {gave_up} time(s) on this run (its restart budget is small for a fault "
            "a day) and paged the person."
            if gave_up
            else ""
        ),
    ]
    return out


def update_readme(text: str, normal: SideBySide) -> str:
    """Replace the README's generated block (between the markers) with the current numbers."""
    start, end = text.index(README_START) + len(README_START), text.index(README_END)
    return text[:start] + "\n" + "\n".join(readme_summary(normal)) + "\n" + text[end:]


def chart(normal: SideBySide, stress: SideBySide, path: Path = CHART) -> Path:
    panels = [
        (
            f"{normal.workload.days:g}-day run, {normal.workload.gpus:,} GPUs, {normal.accounts['d'].count()} faults",
            normal.accounts,
        ),
        (
            f"stress: {stress.trace.rate_multiplier:g}x fault rate, {stress.accounts['d'].count()} faults",
            stress.accounts,
        ),
    ]
    return write_chart(panels, TICKS, path)


def drill_speed_rows(*results: SideBySide) -> list[str]:
    rows = []
    for sbs in results:
        for key in ("c", "d"):
            a = sbs.accounts[key]
            hours = a.wall_min / 60
            wall = sbs.wall_s[key]
            rows.append(
                f"| {sbs.title}: {sbs.workload.hosts} x p5 ({sbs.workload.gpus:,} GPUs), {a.count()} faults, "
                f"{LABELS[key]} | {hours / 24:.1f} days | {wall:.1f} s | {hours / wall:.0f} |"
            )
    return rows
