"""The side-by-side over many trace seeds: medians and ranges, the ratio to the best peer per seed,
per-class ratios to the physical floor pooled over seeds, false stops on the benign phases, and
the person's hang-notice delay as a sensitivity axis.

Each seed is its own run (7.5 days of work by default: `--days`) (its own faults, benign phases, compile time and log cadence: see
:mod:`benchmarks.trace`), driven through every supervisor and scored by the one function of
:mod:`benchmarks.accounting`. A ratio is taken per seed (a supervisor against the best peer *of
that seed*), then summarised: the median, and the range (lowest to highest) over the seeds.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from benchmarks.accounting import Account
from benchmarks.person import Person
from benchmarks.sidebyside import LABELS, PEERS, SHORT, SUPERVISORS, SideBySide
from benchmarks.trace import class_order
from drill.reports.history import MINUTE_MS

PERSON_NOTICE_H = (0.25, 1.0, 4.0)  # the sensitivity axis: the person's median hang-notice delay
MAIN_NOTICE_H = 4.0  # the person of the main tables
TARGET_PER_CLASS = 1.25  # the target: every fault class within 1.25 x its floor


@dataclass
class SeedResult:
    seed: int
    sbs: SideBySide  # the main person (MAIN_NOTICE_H)
    # every supervisor's account under the person with another notice delay (hours -> key -> account)
    variants: dict[float, dict[str, Account]] = field(default_factory=dict)

    def accounts(self, notice_h: float = MAIN_NOTICE_H) -> dict[str, Account]:
        return self.sbs.accounts if notice_h == MAIN_NOTICE_H else self.variants[notice_h]


def person_matters(account: Account, noticed: int, person: Person) -> bool:
    """Whether ``person`` (another hang-notice delay) could change this run: the person stopped a
    hang in it, or would have looked at a silent fault before the supervisor decided on it. (The
    person looks at a job ``hang_notice_delay_ms`` after a fault's onset and stops it only if it still
    hangs; sagewarden's drill has the person act on pages only, so it never matters there.)"""
    if noticed:
        return True
    for loss in account.losses:
        f = loss.fault
        if f is None or not (f.hang or f.manifestation == "nccl_watchdog"):
            continue
        if person.hang_notice_delay_ms(f.index) <= loss.minutes[0] * MINUTE_MS:
            return True
    return False


def best_peer(accounts: dict[str, Account], *, excess: bool = True) -> tuple[str, float]:
    values = {
        k: (accounts[k].excess_gpu_hours() if excess else accounts[k].total_gpu_hours())
        for k in PEERS
        if k in accounts
    }
    key = min(values, key=lambda k: values[k])
    return key, values[key]


def _div(num: float, den: float) -> float:
    return num / den if den > 0 else float("inf")


def ratio_to_best(accounts: dict[str, Account], key: str, *, excess: bool = True) -> float:
    a = accounts[key]
    return _div(
        a.excess_gpu_hours() if excess else a.total_gpu_hours(), best_peer(accounts, excess=excess)[1]
    )


def ratio_to(accounts: dict[str, Account], key: str, peer: str, *, excess: bool = True) -> float:
    a, p = accounts[key], accounts[peer]
    return (
        _div(a.excess_gpu_hours(), p.excess_gpu_hours())
        if excess
        else _div(a.total_gpu_hours(), p.total_gpu_hours())
    )


def med(values: Sequence[float], fmt: str = "{:.3f}") -> str:
    """Median (lowest-highest)."""
    if not values:
        return "n/a"
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def _gh(v: float) -> str:
    return f"{v:,.0f}"


def overview_table(results: Sequence[SeedResult]) -> list[str]:
    out = [
        "| supervisor | faults met | false stops | total lost GPU-hours | physical floor | above the floor "
        "| effective training | run took (days) | person acted |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key in SUPERVISORS:
        accts = [r.sbs.accounts[key] for r in results]
        out.append(
            f"| {LABELS[key]} | {med([a.fault_count() for a in accts], '{:.0f}')} "
            f"| {med([len(a.false_stops) for a in accts], '{:.0f}')} "
            f"| {med([a.total_gpu_hours() for a in accts], '{:,.0f}')} "
            f"| {med([a.floor_gpu_hours() for a in accts], '{:,.0f}')} "
            f"| **{med([a.excess_gpu_hours() for a in accts], '{:,.0f}')}** "
            f"| {med([100 * a.effective_training for a in accts], '{:.1f} %')} "
            f"| {med([a.wall_min / 1440 for a in accts], '{:.2f}')} "
            f"| {med([r.sbs.person.get(key, 0) for r in results], '{:.0f}')} |"
        )
    return out


RATIO_ROWS: tuple[tuple[str, str, str | None], ...] = (
    ("(d) / best peer", "d", None),
    ("(c) / best peer", "c", None),
    ("(d) / (e)", "d", "e"),
    ("(d) / (e2)", "d", "e2"),
    ("(c) / (e)", "c", "e"),
    ("(c) / (e2)", "c", "e2"),
)


def _ratios(results: Sequence[SeedResult], key: str, peer: str | None, *, excess: bool) -> list[float]:
    return [
        ratio_to_best(r.sbs.accounts, key, excess=excess)
        if peer is None
        else ratio_to(r.sbs.accounts, key, peer, excess=excess)
        for r in results
    ]


def ratio_table(results: Sequence[SeedResult]) -> list[str]:
    bests = [best_peer(r.sbs.accounts)[0] for r in results]
    tally = ", ".join(f"{SHORT[k]} in {bests.count(k)}" for k in PEERS if bests.count(k))
    out = [
        f"Ratio per seed, then median (lowest-highest) over {len(results)} seeds; the best peer is the "
        f"alternative that lost least above the floor in that seed ({tally}):",
        "",
        "| ratio | on GPU-hours above the physical floor | on total lost GPU-hours |",
        "|---|---|---|",
    ]
    for label, key, peer in RATIO_ROWS:
        out.append(
            f"| {label} | **{med(_ratios(results, key, peer, excess=True))}** "
            f"| {med(_ratios(results, key, peer, excess=False))} |"
        )
    return out


def per_seed_table(results: Sequence[SeedResult]) -> list[str]:
    out = [
        "| seed | faults | compile | log every | false stops (e) / (e2) / (d) | best peer | (d) / best peer "
        "| (d) / (e) | (d) / (e2) | (d) above the floor |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        a, tr = r.sbs.accounts, r.sbs.trace
        key, _ = best_peer(a)
        stops = " / ".join(str(len(a[k].false_stops)) for k in ("e", "e2", "d"))
        out.append(
            f"| {r.seed} | {a['d'].fault_count()} | {tr.compile_min:g} min | {tr.log_interval_s:g} s | {stops} "
            f"| {SHORT[key]} | {ratio_to_best(a, 'd'):.3f} | {ratio_to(a, 'd', 'e'):.3f} "
            f"| {ratio_to(a, 'd', 'e2'):.3f} | {_gh(a['d'].excess_gpu_hours())} |"
        )
    return out


def class_floor_table(
    results: Sequence[SeedResult], keys: Sequence[str] = ("e", "e2", "c", "d")
) -> list[str]:
    """Per fault class, pooled over seeds: total lost / physical floor for each supervisor."""
    pooled = {k: [r.sbs.accounts[k] for r in results] for k in keys}
    out = [
        "| fault class | faults (all seeds) | physical floor per fault | "
        + " | ".join(f"{SHORT[k]} / floor" for k in keys)
        + " |",
        "|---|---|---|" + "---|" * len(keys),
    ]
    over: list[str] = []
    for cls in class_order():
        d = pooled["d"]
        n = sum(a.count(cls) for a in d)
        if n == 0:
            continue
        floor = sum(a.floor_gpu_hours(cls) for a in d)
        cells = []
        for k in keys:
            total = sum(a.total_gpu_hours(cls) for a in pooled[k])
            fl = sum(a.floor_gpu_hours(cls) for a in pooled[k])
            if fl <= 0:
                cells.append("-")  # met no fault of the class
                continue
            value = total / fl
            cells.append(f"**{value:.2f}**" if value > TARGET_PER_CLASS else f"{value:.2f}")
            if k == "d" and value > TARGET_PER_CLASS:
                over.append(f"{cls} ({value:.2f})")
        out.append(f"| {cls} | {n} | {_gh(floor / n)} | " + " | ".join(cells) + " |")
    out += [
        "",
        f"Bold: above {TARGET_PER_CLASS} x the floor. (d) is above it on: {', '.join(over) if over else 'none'}.",
    ]
    return out


def ettr_ceiling(r: SeedResult) -> float:
    """The effective-training ceiling physics allows this seed's job: its fault-free run (benign
    phases and compiles included) with the checkpoint interval at Young's optimum sqrt(2 x save x
    MTBF), and every fault costing only its floor's detection, stop and restart plus half an
    interval of work. Faults arrive per healthy minute, so the wall W solves
    W = A + (W / MTBF) x (restart + interval / 2). Slow hosts and lemons are left out."""
    w = r.sbs.workload
    save = w.checkpoint_write_seconds / 60.0
    mtbf = r.sbs.trace.mtbf_hours * 60.0
    interval = math.sqrt(2.0 * save * mtbf)
    firsts = [x for x in r.sbs.accounts["d"].losses if x.fault is not None and not x.again]
    restart = statistics.fmean(sum(x.floor[:3]) for x in firsts) if firsts else 0.0
    saves_now = w.total_steps // w.checkpoint_every_steps * save
    base = r.sbs.faultfree_min - saves_now + w.useful_minutes / interval * save
    share = (restart + interval / 2.0) / mtbf
    return w.useful_minutes * (1.0 - share) / base if share < 1 else 0.0


def _ettr_fast(results: Sequence[SeedResult], key: str) -> list[float]:
    """Per seed, a supervisor's ETTR without the slow hosts, in percent."""
    return [100 * _ettr_without_slowness(r.sbs.accounts[key]) for r in results]


def _points_below(ceilings: Sequence[float], fast: Sequence[float]) -> list[float]:
    """Per seed, how many points an ETTR (percent) is below the ceiling (a fraction)."""
    return [100 * c - f for c, f in zip(ceilings, fast, strict=True)]


def ettr_table(results: Sequence[SeedResult]) -> list[str]:
    """Effective training per supervisor, with and without the slow hosts, against the ceiling."""
    ceilings = [ettr_ceiling(r) for r in results]
    out = [
        "### Effective training time (ETTR) against the ceiling",
        "",
        "ETTR = the work's training minutes / the run's wall clock. *Without slowness* takes the minutes "
        "the slow hosts cost out of the wall clock (no supervisor here can see them: see below). The "
        "ceiling is what physics allows this job: its fault-free run with the checkpoint interval at "
        "Young's optimum and every fault costing only its physical floor plus half an interval of work "
        f"(`benchmarks/seeds.py`, `ettr_ceiling`): median {med([100 * c for c in ceilings], '{:.1f} %')}. "
        "Medians (lowest-highest) per seed; points below the ceiling per seed.",
        "",
        "| supervisor | ETTR | ETTR without slowness | points below the ceiling (without slowness) |",
        "|---|---|---|---|",
    ]
    for key in SUPERVISORS:
        plain = [100 * r.sbs.accounts[key].effective_training for r in results]
        fast = _ettr_fast(results, key)
        below = _points_below(ceilings, fast)
        out.append(
            f"| {LABELS[key]} | {med(plain, '{:.1f} %')} | {med(fast, '{:.1f} %')} | {med(below, '{:.1f}')} |"
        )
    return out


def ettr_sentence(results: Sequence[SeedResult]) -> str:
    """The README's line on effective training: (d) and the best-placed peer against the ceiling."""
    ceilings = [ettr_ceiling(r) for r in results]
    d, e, e2 = (_ettr_fast(results, key) for key in ("d", "e", "e2"))
    below = _points_below(ceilings, d)
    return (
        "Effective training (ETTR, without the slow hosts no supervisor here sees): (d) "
        f"{med(d, '{:.1f} %')}, (e) {med(e, '{:.1f} %')}, (e2) {med(e2, '{:.1f} %')}; "
        f"the ceiling physics allows this job (Young's interval, every fault at its floor) "
        f"{med([100 * c for c in ceilings], '{:.1f} %')}, and (d) is {med(below, '{:.1f}')} points below it."
    )


def _ettr_without_slowness(a: Account) -> float:
    wall = a.wall_min - a.slowness.gpu_hours * 60.0 / a.gpus
    return a.useful_min / wall if wall > 0 else 0.0


def hosts_table(results: Sequence[SeedResult]) -> list[str]:
    """Slow hosts and bad hosts that come back, per supervisor: medians over the seeds."""
    slows = [len(r.sbs.trace.slows) for r in results]
    lemons = [sum(1 for f in r.sbs.trace.faults if f.returns_cold) for r in results]
    out = [
        "### Slow hosts and bad hosts that come back",
        "",
        f"Each seed's trace also holds fail-slow episodes ({med(slows, '{:.0f}')} drawn over its horizon) and "
        f"lemons ({med(lemons, '{:.0f}')} of its bad-instance faults come back on the run's next "
        "2 cold starts; `benchmarks/trace.py` cites both). Medians (lowest-highest) per seed. *Slowness* is "
        "the work the slow hosts cost (a host s slower costs s / (1 + s) of each training minute, on every "
        "GPU); an episode ends early when its job ends (a restart, or the run's end). *Met again* is a bad host's fault met a second time: "
        "on a warm pool the supervisor reused, or a lemon on new instances that no infra check caught.",
        "",
        "| supervisor | slow episodes met | ended early with their job | GPU-h lost to slowness "
        "| bad-host faults met again | GPU-h lost to them |",
        "|---|---|---|---|---|---|",
    ]
    for key in SUPERVISORS:
        accts = [r.sbs.accounts[key] for r in results]
        out.append(
            f"| {LABELS[key]} | {med([a.slowness.met for a in accts], '{:.0f}')} "
            f"| {med([a.slowness.cut_short for a in accts], '{:.0f}')} "
            f"| {med([a.slowness.gpu_hours for a in accts], '{:,.0f}')} "
            f"| {med([a.again_count for a in accts], '{:.0f}')} "
            f"| {med([a.again_gpu_hours for a in accts], '{:,.0f}')} |"
        )
    out += [
        "",
        "No supervisor here catches a slow host: the 2,048-GPU runs print no step lines (at 256 hosts the "
        "drill would spend most of its time writing them), and nothing else tells a slow host from its "
        "peers. What sagewarden's straggler check and escalation do when the script prints them is "
        "measured on a 16-host job below.",
    ]
    return out


BUCKET_NAMES = ("detection", "stop", "instance start", "work redone")


def breakdown_table(results: Sequence[SeedResult], key: str = "d") -> list[str]:
    """Where the minutes above the floor went, for each class (d) loses more than the target on:
    per fault, pooled over seeds, each bucket against its floor."""
    out = [
        f"Where {SHORT[key]} loses more than {TARGET_PER_CLASS} x the floor: minutes per fault, pooled "
        "over the seeds, each bucket as lost / floor (instance start includes SageMaker's infra check "
        "when the replacement asks for it, and any capacity wait); *met again* is the class's faults met "
        "a second time, minutes per first meeting:",
        "",
        "| fault class | faults | " + " | ".join(BUCKET_NAMES) + " | met again | total / floor |",
        "|---|---|" + "---|" * len(BUCKET_NAMES) + "---|---|",
    ]
    rows = 0
    for cls in class_order():
        losses = [x for r in results for x in r.sbs.accounts[key].losses if x.cls == cls]
        first = [x for x in losses if not x.again]
        if not first:
            continue
        floor = sum(x.floor_min for x in first)
        total = sum(x.total_min for x in losses)
        if floor <= 0 or total / floor <= TARGET_PER_CLASS:
            continue
        n = len(first)
        cells = [
            f"{sum(x.minutes[i] for x in first) / n:.1f} / {sum(x.floor[i] for x in first) / n:.1f}"
            for i in range(len(BUCKET_NAMES))
        ]
        again = sum(x.total_min for x in losses if x.again) / n
        out.append(f"| {cls} | {n} | " + " | ".join(cells) + f" | {again:.1f} | {total / floor:.2f} |")
        rows += 1
    if rows == 0:
        return []
    return out


def benign_table(results: Sequence[SeedResult]) -> list[str]:
    """The randomized benign result: the phases every supervisor met, and the false stops they made."""
    phases = [p for r in results for p in r.sbs.trace.phases]
    compiles = [r.sbs.trace.compile_min for r in results]
    logs = [r.sbs.trace.log_interval_s for r in results]
    rows = [
        ("compile (every start)", compiles, "compile"),
        ("long checkpoint save", [p.duration_min for p in phases if p.phase == "save"], "save"),
        ("data-loader pause", [p.duration_min for p in phases if p.phase == "pause"], "data pause"),
        ("eval", [p.duration_min for p in phases if p.phase == "eval"], "eval"),
    ]
    out = [
        f"Benign phases drawn per seed ({len(results)} seeds; `benchmarks/trace.py`): a log line every "
        f"{med(logs, '{:.0f}')} s; phases and their minutes, median (lowest-highest), and the false stops "
        "each supervisor made in them (summed over the seeds; a stop just after a phase ended, its last "
        "datapoints still late, counts for that phase):",
        "",
        "| phase | drawn | minutes | " + " | ".join(f"{SHORT[k]} false stops" for k in SUPERVISORS) + " |",
        "|---|---|---|" + "---|" * len(SUPERVISORS),
    ]
    for label, minutes, phase in rows:
        counts = [
            sum(1 for r in results for x in r.sbs.accounts[k].false_stops if x.false_stop == phase)
            for k in SUPERVISORS
        ]
        out.append(
            f"| {label} | {len(minutes)} | {med(minutes, '{:.0f}')} | "
            + " | ".join(str(c) for c in counts)
            + " |"
        )
    other = [
        sum(
            1
            for r in results
            for x in r.sbs.accounts[k].false_stops
            if x.false_stop not in ("compile", "save", "data pause", "eval")
        )
        for k in SUPERVISORS
    ]
    if any(other):
        out.append("| other (training, start-up) | | | " + " | ".join(str(c) for c in other) + " |")
    lost = [
        med(
            [
                r.sbs.accounts[k].gpu_hours(sum(x.total_min for x in r.sbs.accounts[k].false_stops))
                for r in results
            ],
            "{:,.0f}",
        )
        for k in SUPERVISORS
    ]
    out.append("| GPU-hours lost to false stops per seed | | | " + " | ".join(lost) + " |")
    return out


def person_table(results: Sequence[SeedResult]) -> list[str]:
    out = [
        "The person's median delay to notice a hang nobody paged for (lognormal, sigma 0.5) is a "
        "sensitivity axis: it changes (a) and (b) on every hang, (e) and (e2) only on hangs their rules "
        "miss or leave off, (c) and (d) only when sagewarden gives up. Ratio of (d) per seed, median "
        "(lowest-highest):",
        "",
        "| person notices a hang after (median) | (d) / best peer, above the floor | best peer (seeds) "
        "| (d) / best peer, totals |",
        "|---|---|---|---|",
    ]
    for h in PERSON_NOTICE_H:
        accts = [r.accounts(h) for r in results]
        bests = [best_peer(a)[0] for a in accts]
        tally = ", ".join(f"{SHORT[k]} {bests.count(k)}" for k in PEERS if bests.count(k))
        label = f"{h * 60:.0f} min" if h < 1 else f"{h:g} h"
        out.append(
            f"| {label} | **{med([ratio_to_best(a, 'd') for a in accts])}** | {tally} "
            f"| {med([ratio_to_best(a, 'd', excess=False) for a in accts])} |"
        )
    return out


def _per_bug(results: Sequence[SeedResult], key: str) -> str:
    """Attempts each deterministic failure ended, over the seeds: the mean."""
    bugs = [b for r in results for b in r.sbs.accounts[key].bugs]
    return f"{sum(b.endings for b in bugs) / len(bugs):.1f}" if bugs else "n/a"


def readme_lines(results: Sequence[SeedResult], straggler_lines: Sequence[str] = ()) -> list[str]:
    """The README's table and sentences, from the same numbers as BENCHMARKS.md."""
    out = [
        f"Medians (lowest-highest) over {len(results)} trace seeds, {results[0].sbs.workload.days:g}-day runs, GPU-hours:",
        "",
        "| supervisor | lost | above the physical floor | false stops |",
        "|---|---|---|---|",
    ]
    for key in SUPERVISORS:
        accts = [r.sbs.accounts[key] for r in results]
        out.append(
            f"| {LABELS[key]} | {med([a.total_gpu_hours() for a in accts], '{:,.0f}')} "
            f"| {med([a.excess_gpu_hours() for a in accts], '{:,.0f}')} "
            f"| {med([len(a.false_stops) for a in accts], '{:.0f}')} |"
        )
    d_best = _ratios(results, "d", None, excess=True)
    d_e = _ratios(results, "d", "e", excess=True)
    d_e2 = _ratios(results, "d", "e2", excess=True)
    over = [
        cls
        for cls in class_order()
        if (fl := sum(r.sbs.accounts["d"].floor_gpu_hours(cls) for r in results)) > 0
        and sum(r.sbs.accounts["d"].total_gpu_hours(cls) for r in results) / fl > TARGET_PER_CLASS
    ]
    out += [
        "",
        "Above the physical floor, sagewarden's recommended policy (d) loses, per seed and then the median "
        f"(lowest-highest): **{med(d_best)}** of the best peer's GPU-hours, **{med(d_e)}** of (e)'s and "
        f"**{med(d_e2)}** of (e2)'s (targets: 0.1 of (e), 0.5 of (e2)). Pooled over the seeds, (d) is within "
        f"{TARGET_PER_CLASS} x the floor on every fault class"
        + (f" but {', '.join(over)}." if over else ".")
        + " False stops on the benign phases count in full (their floor is 0).",
        "",
        "Slow hosts and bad hosts that come back (per seed, median): slowness costs (d) "
        f"{med([r.sbs.accounts['d'].slowness.gpu_hours for r in results], '{:,.0f}')} GPU-hours and (e) "
        f"{med([r.sbs.accounts['e'].slowness.gpu_hours for r in results], '{:,.0f}')} (no step lines at 256 "
        "hosts: nobody sees them); faults met again on a bad host cost (d) "
        f"{med([r.sbs.accounts['d'].again_gpu_hours for r in results], '{:,.0f}')} GPU-hours, (e) "
        f"{med([r.sbs.accounts['e'].again_gpu_hours for r in results], '{:,.0f}')} and (e2) "
        f"{med([r.sbs.accounts['e2'].again_gpu_hours for r in results], '{:,.0f}')}.",
        "",
        "Deterministic failures (user bugs quoting real endings of the corpus, ended the same way on "
        "every attempt until the person fixes them; per seed, median): "
        + ", ".join(
            f"{SHORT[k]} {med([r.sbs.accounts[k].bug_gpu_hours for r in results], '{:,.0f}')} GPU-hours "
            f"({_per_bug(results, k)} attempts per bug)"
            for k in ("a", "e", "d")
        )
        + ".",
        "",
        ettr_sentence(results),
        *(
            [""]
            + [
                "Straggler escalation, a 16-host job printing step lines (BENCHMARKS.md): " + line
                for line in straggler_lines
                if line.startswith("Median")
            ]
            if straggler_lines
            else []
        ),
    ]
    return out
