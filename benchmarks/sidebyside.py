"""The side-by-side benchmark: one fault trace, six supervisors, each driving the simulated
SageMaker; where the GPU-hours went, against the physical floor.

(a) SageMaker's RetryStrategy + a person on call, (b) a 5-minute polling script + the same person
(:mod:`benchmarks.baselines`), (e) a competent polling script (log silence, resubmission from the
newest checkpoint, a warm pool) and (e2) the same every minute with sagewarden's GPU rules
(:mod:`benchmarks.peers`), (c) sagewarden with its default policy and (d) with
``RECOMMENDED_POLICY`` (:mod:`benchmarks.supervised`, the real drill). The trace is
:mod:`benchmarks.trace`, the accounting :mod:`benchmarks.accounting` -- one function scores every
supervisor. Many seeds: :mod:`benchmarks.seeds`.
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

from benchmarks.accounting import Account, account
from benchmarks.baselines import faultfree_minutes, run_baseline
from benchmarks.chart import write_chart
from benchmarks.peers import run_script
from benchmarks.person import Person
from benchmarks.supervised import RECOMMENDED_POLICY, run_sagewarden
from benchmarks.trace import (
    GPU_FAULT_RATE_PER_GPU_HOUR,
    MANIFESTATIONS,
    ROOT_CAUSES,
    Trace,
    class_order,
    generate,
)
from benchmarks.workload import Workload
from drill.reports.history import BUCKETS
from sagewarden.domain.vocabulary.advice import CheckpointAdvice
from sagewarden.domain.vocabulary.launch import CHECKPOINT_MINUTES_ENV

SUPERVISORS = ("a", "b", "e", "e2", "c", "d")
PEERS = ("a", "b", "e", "e2")  # the alternatives sagewarden is measured against
LABELS = {
    "a": "(a) SageMaker RetryStrategy + person",
    "b": "(b) polling script (5 min) + person",
    "e": "(e) competent script: 5-min poll, 15-min log silence, warm pool",
    "e2": "(e2) the same, 1-min poll + sagewarden's GPU rules",
    "c": "(c) sagewarden, default policy",
    "d": "(d) sagewarden, recommended policy",
}
SHORT = {k: v.split(" ", 1)[0] for k, v in LABELS.items()}  # "(a)" .. "(e2)"
TICKS = {
    "a": "(a) RetryStrategy\n+ person",
    "b": "(b) 5-min poll\n+ person",
    "e": "(e) script\n5 min",
    "e2": "(e2) script 1 min\n+ GPU rules",
    "c": "(c) sagewarden\ndefault",
    "d": "(d) sagewarden\nrecommended",
}
SCRIPT_KINDS = {"e": "script", "e2": "gpuscript"}
CHART = Path("docs/bench-lost-gpu-hours.png")
RETRY_ATTEMPTS = 3
STRESS_MULTIPLIER = 16


@dataclass
class SideBySide:
    title: str
    workload: Workload
    trace: Trace
    faultfree_min: float = 0.0
    accounts: dict[str, Account] = field(default_factory=dict)
    wall_s: dict[str, float] = field(default_factory=dict)
    person: dict[str, int] = field(default_factory=dict)  # the person's interventions
    noticed: dict[str, int] = field(default_factory=dict)  # hangs the person noticed and stopped
    gave_up: dict[str, int] = field(default_factory=dict)  # sagewarden runs that ended FAILED
    advice: dict[str, CheckpointAdvice] = field(default_factory=dict)  # sagewarden's, at the end
    told: dict[str, tuple[int, ...]] = field(default_factory=dict)  # intervals its attempts were told

    def best_peer(self, excess: bool = False) -> tuple[str, float]:
        """The best alternative present (key, GPU-hours): least above the floor, or least in total."""
        values = {
            k: (self.accounts[k].excess_gpu_hours() if excess else self.accounts[k].total_gpu_hours())
            for k in PEERS
            if k in self.accounts
        }
        key = min(values, key=lambda k: values[k])
        return key, values[key]

    def best_alternative(self, excess: bool = False) -> float:
        return self.best_peer(excess)[1]


@dataclass
class Supervised:
    """What one supervisor's run hands back (picklable: a process-pool worker may run it)."""

    key: str
    account: Account
    wall_s: float
    person: int
    gave_up: int
    advice: CheckpointAdvice | None = None
    noticed: int = 0  # hangs the person noticed and stopped (what the notice delay changes)
    told_minutes: tuple[int, ...] = ()  # the checkpoint intervals sagewarden told its attempts


def setup(seed: int, days: float, multiplier: float = 1.0) -> SideBySide:
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
        hosts_fail=True,
        bugs=True,
    )
    workload = trace.script(base)
    title = f"seed {seed}" if multiplier == 1 else f"stress {multiplier:g}x, seed {seed}"
    return SideBySide(title, workload, trace, faultfree_minutes(workload, trace))


def run_one(
    key: str,
    workload: Workload,
    trace: Trace,
    person: Person,
    template: dict[str, Any] | None,
    seed: int,
    faultfree_min: float,
    policy: dict[str, Any] | None = None,
) -> Supervised:
    """One supervisor on the trace, scored by :func:`benchmarks.accounting.account` (``policy``:
    sagewarden's, instead of (c)'s default or (d)'s recommended one)."""
    warnings.filterwarnings("ignore", message="No application metrics to publish")  # routine in a drill
    t0 = time.perf_counter()
    advice = None
    gave_up = 0
    decided: list[int] = []  # the scripts decide when they act: their stop or relaunch is the time
    if key in ("c", "d"):
        assert template is not None
        if policy is None:
            policy = {} if key == "c" else RECOMMENDED_POLICY
        with contextlib.redirect_stdout(io.StringIO()):  # the handlers' metric lines
            s = run_sagewarden(workload, trace, person, template, policy=policy, seed=seed)
        told = tuple(
            int(m)
            for j in s.jobs
            if (m := str((j.request.get("Environment") or {}).get(CHECKPOINT_MINUTES_ENV, ""))).isdigit()
        )
        if s.drill.invariant_violations:
            raise RuntimeError(f"invariant violated in {LABELS[key]}: {s.drill.invariant_violations}")
        jobs, records, start, end, completed, actions = (
            s.jobs,
            s.records,
            s.start_ms,
            s.end_ms,
            s.completed,
            s.actions,
        )
        advice = s.advice
        decided = s.decided_ms  # sagewarden's audit: a relaunch waiting for a warm pool is not detection
        gave_up = sum(1 for _, who, _ in actions if who.startswith("page"))
    else:
        told = ()
        if key in SCRIPT_KINDS:
            r, _ = run_script(SCRIPT_KINDS[key], workload, trace, person, seed=seed)
        else:
            kind = "retry" if key == "a" else "poll"
            r = run_baseline(kind, workload, trace, person, seed=seed, retry_attempts=RETRY_ATTEMPTS)
        jobs, records, start, end, completed, actions = (
            r.jobs,
            r.sim.fault_records,
            r.start_ms,
            r.end_ms,
            r.completed,
            r.actions,
        )
    wall = time.perf_counter() - t0
    acc = account(
        LABELS[key],
        workload,
        trace,
        jobs,
        records,
        start_ms=start,
        end_ms=end,
        completed=completed,
        faultfree_wall_min=faultfree_min,
        decided_ms=decided,
    )
    acted = sum(1 for _, who, _ in actions if who.startswith("person"))
    noticed = sum(
        1 for _, who, _ in actions if who in ("person: stop hung job", "person: fix the looping bug")
    )
    return Supervised(key, acc, wall, acted, gave_up, advice, noticed, told)


def run_supervised(
    key: str, workload: Workload, trace: Trace, person: Person, template: dict[str, Any], seed: int
) -> Supervised:
    """Supervisor (c) or (d) on the trace, through the drill (fault-free wall clock simulated)."""
    return run_one(key, workload, trace, person, template, seed, faultfree_minutes(workload, trace))


def add(sbs: SideBySide, result: Supervised) -> None:
    sbs.accounts[result.key] = result.account
    sbs.wall_s[result.key] = result.wall_s
    sbs.person[result.key] = result.person
    sbs.gave_up[result.key] = result.gave_up
    sbs.noticed[result.key] = result.noticed
    if result.advice is not None:
        sbs.advice[result.key] = result.advice
    sbs.told[result.key] = result.told_minutes


def order(sbs: SideBySide) -> None:
    sbs.accounts = {k: sbs.accounts[k] for k in SUPERVISORS if k in sbs.accounts}


def run_side_by_side(
    title: str,
    workload: Workload,
    trace: Trace,
    person: Person,
    template: dict[str, Any] | None,
    *,
    seed: int = 1,
    keys: tuple[str, ...] = SUPERVISORS,
    progress: Callable[[str], None] = lambda _: None,
) -> SideBySide:
    """The supervisors ``keys`` in this process, one after the other."""
    out = SideBySide(title, workload, trace, faultfree_minutes(workload, trace))
    for key in keys:
        add(out, run_one(key, workload, trace, person, template, seed, out.faultfree_min))
        progress(f"{title}: {LABELS[key]} done in {out.wall_s[key]:.1f} s")
    order(out)
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
        "| supervisor | faults | false stops | "
        + " | ".join(BUCKETS)
        + " | total lost | physical floor | above the floor | effective training | run took | person acted |",
        "|---|---|---|" + "---|" * (len(BUCKETS) + 6),
    ]
    for key, a in sbs.accounts.items():
        buckets = " | ".join(_gh(v) for v in a.bucket_gpu_hours())
        gave_up = f" ({sbs.gave_up[key]} give-ups)" if sbs.gave_up.get(key) else ""
        out.append(
            f"| {LABELS[key]} | {a.fault_count()} | {len(a.false_stops)} | {buckets} | "
            f"**{_gh(a.total_gpu_hours())}** | {_gh(a.floor_gpu_hours())} | **{_gh(a.excess_gpu_hours())}** | "
            f"{100 * a.effective_training:.1f} % | {a.wall_min / 1440:.2f} d | {sbs.person.get(key, 0)}{gave_up} |"
        )
    return out


def ratio_lines(sbs: SideBySide) -> list[str]:
    (bt, best_total), (be, best_excess) = sbs.best_peer(), sbs.best_peer(excess=True)
    out = [
        "| ratio | on total lost GPU-hours | on GPU-hours above the physical floor |",
        "|---|---|---|",
    ]
    for key in ("c", "d"):
        a = sbs.accounts[key]
        out.append(
            f"| {SHORT[key]} / best peer ({SHORT[bt]} on totals, {SHORT[be]} above the floor) | "
            f"{_ratio(a.total_gpu_hours(), best_total)} | **{_ratio(a.excess_gpu_hours(), best_excess)}** |"
        )
    d = sbs.accounts["d"]
    for peer in ("e", "e2"):
        if peer in sbs.accounts:
            p = sbs.accounts[peer]
            out.append(
                f"| {SHORT['d']} / {SHORT[peer]} | {_ratio(d.total_gpu_hours(), p.total_gpu_hours())} | "
                f"{_ratio(d.excess_gpu_hours(), p.excess_gpu_hours())} |"
            )
    return out


def classes_met(accounts: dict[str, Account]) -> list[str]:
    """Fault classes in table order, then the false-stop classes, as met by any supervisor."""
    seen = {x.cls for a in accounts.values() for x in a.losses}
    faults = [c for c in class_order() if c in seen]
    return faults + sorted(c for c in seen if c not in faults)


def class_table(sbs: SideBySide) -> list[str]:
    keys = list(sbs.accounts)
    out = [
        "| fault class | faults | physical floor per fault | "
        + " | ".join(f"{SHORT[k]} per fault" for k in keys)
        + " | (d) / floor |",
        "|---|---|---|" + "---|" * (len(keys) + 1),
    ]
    d = sbs.accounts["d"]
    for cls in classes_met(sbs.accounts):
        n = d.count(cls)
        if n == 0 or cls not in class_order():
            continue
        per = {k: sbs.accounts[k].total_gpu_hours(cls) / max(sbs.accounts[k].count(cls), 1) for k in keys}
        out.append(
            f"| {cls} | {n} | {_gh(d.floor_gpu_hours(cls) / n)} | "
            + " | ".join(_gh(per[k]) for k in keys)
            + f" | {_ratio(d.total_gpu_hours(cls), d.floor_gpu_hours(cls))} |"
        )
    return out


def class_buckets_table(sbs: SideBySide, key: str) -> list[str]:
    """Minutes per fault by bucket for one supervisor, next to the floor's."""
    a = sbs.accounts[key]
    out = [
        "| class | " + " | ".join(f"{b} (floor)" for b in BUCKETS) + " |",
        "|---|" + "---|" * len(BUCKETS),
    ]
    for cls in classes_met({key: a}):
        rows = [x for x in a.losses if x.cls == cls]
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
    used = sbs.accounts["d"].fault_count()
    cap = sum(1 for f in tr.faults[:used] if f.restart_capacity_min is not None)
    benign = ""
    if tr.phases or tr.compile_min:
        kinds = {k: sum(1 for p in tr.phases if p.phase == k) for k in ("save", "pause", "eval")}
        benign = (
            f" Benign side: a {tr.compile_min:g}-minute compile at every start, a log line every "
            f"{tr.log_interval_s:g} s, and over the trace {kinds['save']} long saves, {kinds['pause']} data "
            f"pauses and {kinds['eval']} evals."
        )
    return [
        f"Trace: {w.hosts} x {w.instance_type} ({w.gpus:,} GPUs), {w.days:g} days of work, a checkpoint every "
        f"{w.checkpoint_minutes:g} min ({w.checkpoint_write_seconds} s to write), faults at "
        f"{GPU_FAULT_RATE_PER_GPU_HOUR:.3g} per GPU-hour x {tr.rate_multiplier:g} = one per "
        f"{tr.mtbf_hours:.1f} h of healthy operation (seed {tr.seed}); {used} faults met by (d), "
        f"{cap} of them followed by a capacity error at restart.{benign} Lost GPU-hours = {w.gpus:,} GPUs x "
        f"time; the fault-free run (benign phases included) takes {sbs.faultfree_min / 1440:.2f} days.",
    ]


def render(sbs: SideBySide, *, heading: str) -> list[str]:
    """One trace's full tables (an illustration next to the medians over seeds)."""
    out = [heading, ""]
    out += [*trace_lines(sbs), ""]
    out += [*summary_table(sbs), ""]
    out += [*ratio_lines(sbs), ""]
    out += ["Per fault class: lost GPU-hours per fault, and (d)'s ratio to the physical floor:", ""]
    out += [*class_table(sbs), ""]
    out += ["Where (d)'s minutes per fault (or false stop) go, against the floor's:", ""]
    out += [*class_buckets_table(sbs, "d"), ""]
    return out


README_START = "<!-- bench:summary:start (written by `make bench`) -->"
README_END = "<!-- bench:summary:end -->"


def update_readme(text: str, lines: list[str]) -> str:
    """Replace the README's generated block (between the markers) with ``lines``."""
    start, end = text.index(README_START) + len(README_START), text.index(README_END)
    return text[:start] + "\n" + "\n".join(lines) + "\n" + text[end:]


def chart(panels: list[SideBySide], path: Path = CHART) -> Path:
    return write_chart(
        [
            (
                f"{p.title}: {p.workload.days:g}-day run, {p.workload.gpus:,} GPUs, "
                f"{p.accounts['d'].fault_count()} faults",
                p.accounts,
            )
            for p in panels
        ],
        TICKS,
        path,
    )


def drill_speed_rows(*results: SideBySide) -> list[str]:
    rows = []
    for sbs in results:
        for key in ("c", "d"):
            a = sbs.accounts[key]
            hours = a.wall_min / 60
            wall = sbs.wall_s[key]
            rows.append(
                f"| {sbs.title}: {sbs.workload.hosts} x p5 ({sbs.workload.gpus:,} GPUs), {a.fault_count()} faults, "
                f"{LABELS[key]} | {hours / 24:.1f} days | {wall:.1f} s | {hours / wall:.0f} |"
            )
    return rows
