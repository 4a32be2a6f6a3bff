"""False hang stops on benign phases, default and recommended policy (`make bench`).

Two sets, both on the drill's simulated SageMaker (``drill/sim``: per-host GPU, CPU and disk
metrics per phase, the heartbeat metric, the progress metric, checkpoint objects in S3):

- **Named cases** (``CASES``): one phase each, including those issue 18 named (a 20-minute save
  at every checkpoint, a 60-minute first-step compile, an 8-minute silent data-loader pause), most
  in their unkind variant (a CPU-light save that only algo-1 writes, a serial compile, an eval
  whose hosts are partly as CPU-light as a spin). A small job (4 x ml.p4d.24xlarge unless it says
  otherwise) trains about six hours; one-off phases start ``LATE_MIN`` into Training, once the
  log-silence window has been learned from the cadence. Each case also names a real hang in the
  same setup, which must still be caught (``tests/scenarios/test_benign.py`` runs both).
- **Randomized draws** (``draw``): whole healthy jobs drawn from wide stated distributions (saves
  2-25 min, compiles 5-70 min, silent data-loader pauses 1-12 min, evals 5-30 min silent or not,
  logging every 10 s to every 10 min, 1 to 8 hosts), phases at random times, the drill drawing how
  each looks in the metrics. Reported over every seed, never tuned to one draw.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks.supervised import RECOMMENDED_POLICY
from drill.account.local import BUCKET, EXECUTION_ROLE
from drill.scenarios.runner import DrillResult, run_scenario
from drill.scenarios.spec import parse
from sagewarden.domain.hangs.cadence import phase_marker

# about six hours of training: 1,800 steps at 5 a minute, a 2-minute save every 150 steps
PROFILE: dict[str, Any] = {"total_steps": 1800, "steps_per_minute": 5, "checkpoint_every_steps": 150}
LATE_MIN = 100  # minutes into Training: the window is learned by then (45 + 20 + settling)


@dataclass(frozen=True)
class BenignCase:
    key: str
    label: str
    faults: tuple[dict[str, Any], ...] = ()  # the benign phase(s), as drill faults on attempt 1
    profile: dict[str, Any] = field(default_factory=dict)  # overrides of PROFILE
    startup: dict[str, Any] = field(default_factory=dict)  # StartupTimes overrides
    instance_type: str = "ml.p4d.24xlarge"
    instance_count: int = 4
    hang: dict[str, Any] = field(default_factory=dict)  # a real hang in the same setup (contrast)
    hang_label: str = ""


SAVE_MARKER = phase_marker("checkpoint_save", 15)

CASES: tuple[BenignCase, ...] = (
    BenignCase(
        "save_every",
        "20-minute checkpoint save at every checkpoint, no marker (issue 18: 12 stops before)",
        profile={"checkpoint_write_seconds": 1200},
        hang={"kind": "hang_spin", "after_training_min": LATE_MIN},
        hang_label="NCCL spin",
    ),
    BenignCase(
        "save_marked",
        "12-minute checkpoint save, once, with the phase marker",
        faults=(
            {
                "kind": "checkpoint_save_long",
                "duration_min": 12,
                "after_training_min": LATE_MIN,
                "log_lines": [SAVE_MARKER],
            },
        ),
        # the save itself hangs: the declared 15 minutes run out, then log silence
        hang={"kind": "stuck_dataloader", "after_training_min": LATE_MIN, "log_lines": [SAVE_MARKER]},
        hang_label="a hang inside the declared phase",
    ),
    BenignCase(
        "save_light",
        "25-minute save, once, no marker, CPU-light, only algo-1 writes (3 objects, 8 min apart)",
        faults=(
            {
                "kind": "checkpoint_save_long",
                "duration_min": 25,
                "after_training_min": LATE_MIN,
                "variant": "light",
            },
        ),
        hang={"kind": "stuck_dataloader", "after_training_min": LATE_MIN, "during_save": True},
        hang_label="the save hangs half-way",
    ),
    BenignCase(
        "eval",
        "30-minute silent eval, some hosts as CPU-light as a spin",
        faults=(
            {
                "kind": "eval_phase",
                "duration_min": 30,
                "after_training_min": LATE_MIN,
                "silent": True,
                "variant": "uneven",
            },
        ),
        hang={"kind": "hang_spin", "after_training_min": LATE_MIN},
        hang_label="NCCL spin",
    ),
    BenignCase(
        "slow_start",
        "90-minute Starting + Downloading",
        startup={"provision_s": 3000, "download_s": 2400},
        hang={"kind": "dead_host", "host": 2, "after_training_min": 60},
        hang_label="dead host",
    ),
    BenignCase(
        "compile",
        "60-minute first-step compile, serial (one core per rank, GPUs idle; issue 18: stopped before)",
        faults=({"kind": "compile", "duration_min": 60, "after_training_min": 0, "variant": "serial"},),
        hang={"kind": "stuck_dataloader", "after_training_min": 0},  # a start-up that never ends
        hang_label="a start-up that never ends",
    ),
    BenignCase(
        "compile_45",
        "45-minute first-step compile, parallel",
        faults=({"kind": "compile", "duration_min": 45, "after_training_min": 0, "variant": "parallel"},),
        # a compile that never ends: the hosts work for ever, stopped at benign_phase_max_minutes
        hang={"kind": "compile", "duration_min": 600, "after_training_min": 0, "variant": "parallel"},
        hang_label="a compile that never ends",
    ),
    BenignCase(
        "nccl_init_256",
        "NCCL init on 256 x ml.p5.48xlarge (8 minutes silent, as idle as a stuck job), then a 20-minute compile",
        faults=(
            {"kind": "nccl_init", "duration_min": 8, "after_training_min": 0},
            {"kind": "compile", "duration_min": 20, "after_training_min": 0},
        ),
        instance_type="ml.p5.48xlarge",
        instance_count=256,
        profile={"total_steps": 1000},  # 200 min of training: 256 hosts cost drill time
        hang={"kind": "dead_host", "host": 200, "after_training_min": 90},
        hang_label="dead host",
    ),
    BenignCase(
        "straggler",
        "one straggler host, slow but alive (30 % GPU per GPU vs 95 %, still logging)",
        profile={"straggler_host": 3, "straggler_gpu_util": 240.0, "steps_per_minute": 4},
        hang={"kind": "dead_host", "host": 3, "after_training_min": LATE_MIN},  # the straggler dies
        hang_label="the straggler dies",
    ),
    BenignCase(
        "dataloader_pause",
        "8-minute silent data-loader pause, its workers mostly waiting on storage (issue 18: stopped before)",
        faults=(
            {
                "kind": "dataloader_pause",
                "duration_min": 8,
                "after_training_min": LATE_MIN,
                "variant": "light",
            },
            {"kind": "dataloader_pause", "duration_min": 8, "after_training_min": 290, "variant": "light"},
        ),
        hang={"kind": "stuck_dataloader", "after_training_min": LATE_MIN},
        hang_label="stuck data loader",
    ),
    BenignCase(
        "log_every_10",
        "a job that logs only every 10 minutes",
        profile={"log_every_minutes": 10},
        hang={"kind": "hang_spin", "after_training_min": LATE_MIN},
        hang_label="NCCL spin",
    ),
)
BY_KEY = {c.key: c for c in CASES}


# --- the randomized benign set ----------------------------------------------------------------
# Healthy jobs drawn from wide stated distributions (issue 18), never tuned to one draw: every
# benign phase a long run goes through, at random times, with the drill drawing how each one looks
# in the hosts' metrics (drill/sim/series.py: light saves, serial compiles, uneven evals, ...).
SAVE_MIN = (2.0, 25.0)  # every checkpoint save (periodic, silent, GPUs idle)
COMPILE_MIN = (5.0, 70.0)  # the first-step compile (silent, GPUs idle)
DATA_PAUSE_MIN = (1.0, 12.0)  # silent data-loader pauses (GPUs idle), 1 to 3 of them
EVAL_MIN = (5.0, 30.0)  # evals (GPUs busy), 1 or 2, silent or logging
LOG_EVERY_S = (10.0, 600.0)  # how often the script logs (log-uniform)
CHECKPOINT_EVERY_MIN = (30.0, 60.0)
HOSTS = (1, 2, 4, 8)
DRAW_STEPS, DRAW_SPM = 1200, 5  # four hours of steps
PHASES_FROM_MIN, PHASES_UNTIL_MIN = 50.0, 230.0  # when the one-off phases start (after the compile)


@dataclass(frozen=True)
class BenignDraw:
    seed: int
    hosts: int
    log_every_s: float
    save_min: float
    checkpoint_every_min: float
    compile_min: float
    pauses: tuple[tuple[float, float], ...]  # (at, minutes)
    evals: tuple[tuple[float, float, bool], ...]  # (at, minutes, silent)

    def profile(self) -> dict[str, Any]:
        every_min = max(1, round(self.log_every_s / 60))
        lines = max(1, round(60 / self.log_every_s)) if self.log_every_s < 60 else 1
        return {
            "total_steps": DRAW_STEPS,
            "steps_per_minute": DRAW_SPM,
            "checkpoint_every_steps": max(1, round(self.checkpoint_every_min * DRAW_SPM)),
            "checkpoint_write_seconds": round(self.save_min * 60),
            "log_every_minutes": every_min,
            "log_lines_per_minute": lines,
        }

    def faults(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [
            {"kind": "compile", "duration_min": self.compile_min, "after_training_min": 0}
        ]
        out += [
            {"kind": "dataloader_pause", "duration_min": m, "after_training_min": at} for at, m in self.pauses
        ]
        out += [
            {"kind": "eval_phase", "duration_min": m, "after_training_min": at, "silent": silent}
            for at, m, silent in self.evals
        ]
        return out

    def line(self) -> str:
        pauses = ", ".join(f"{m:.0f}" for _, m in self.pauses)
        evals = ", ".join(f"{m:.0f}{' silent' if s else ''}" for _, m, s in self.evals)
        return (
            f"seed {self.seed}: {self.hosts} host(s), logs every {self.log_every_s:.0f} s, saves "
            f"{self.save_min:.0f} min every {self.checkpoint_every_min:.0f}, compile {self.compile_min:.0f}, "
            f"data pauses {pauses}, evals {evals}"
        )


def draw(seed: int) -> BenignDraw:
    """One healthy job from the stated distributions (deterministic per seed)."""
    rng = random.Random(f"sagewarden-benign-{seed}")

    def at() -> float:
        return round(rng.uniform(PHASES_FROM_MIN, PHASES_UNTIL_MIN), 1)

    lo, hi = LOG_EVERY_S
    return BenignDraw(
        seed=seed,
        hosts=rng.choice(HOSTS),
        log_every_s=math.exp(rng.uniform(math.log(lo), math.log(hi))),
        save_min=rng.uniform(*SAVE_MIN),
        checkpoint_every_min=rng.uniform(*CHECKPOINT_EVERY_MIN),
        compile_min=rng.uniform(*COMPILE_MIN),
        pauses=tuple(sorted((at(), rng.uniform(*DATA_PAUSE_MIN)) for _ in range(rng.randint(1, 3)))),
        evals=tuple(
            sorted((at(), rng.uniform(*EVAL_MIN), rng.random() < 0.5) for _ in range(rng.randint(1, 2)))
        ),
    )


def draw_hang(d: BenignDraw, kind: str) -> dict[str, Any]:
    """A hang of `kind` in the draw's job, at a time drawn from 80 min into Training to the end of
    its one-off phases (a dead host on a host drawn too)."""
    rng = random.Random(f"sagewarden-benign-hang-{d.seed}-{kind}")
    fault: dict[str, Any] = {
        "kind": kind,
        "after_training_min": round(rng.uniform(80.0, PHASES_UNTIL_MIN), 1),
    }
    if kind == "dead_host":
        fault["host"] = rng.randint(1, d.hosts)
    return fault


def draw_scenario(d: BenignDraw, policy: dict[str, Any] | None, hang: dict[str, Any] | None = None) -> Any:
    """The draw's healthy job (its benign phases), and a hang in it when `hang` is given."""
    return parse(
        {
            "seed": d.seed,
            "max_days": 2,
            "account": {"store": "memory"},
            "delivery": {"min_delay_s": 1, "max_delay_s": 20, "duplicate_rate": 0.1},
            "runs": [
                {
                    "name": "benign",
                    "instance_type": "ml.p4d.24xlarge",
                    "instance_count": d.hosts,
                    "profile": d.profile(),
                    "policy": dict(policy or {}),
                }
            ],
            "faults": [
                {"run": "benign", "attempt": 1, **f} for f in [*d.faults(), *([hang] if hang else [])]
            ],
        },
        bucket=BUCKET,
        role_arn=EXECUTION_ROLE,
    )


def run_draw(
    d: BenignDraw, policy: dict[str, Any] | None, template: dict[str, Any], hang: dict[str, Any] | None = None
) -> DrillResult:
    result = run_scenario(draw_scenario(d, policy, hang), template, account_options={"backend_reads": True})
    if result.invariant_violations:
        raise SystemExit(f"invariant violated: {result.invariant_violations}")
    return result


def scenario(case: BenignCase, policy: dict[str, Any] | None, *, seed: int, hang: bool = False) -> Any:
    faults = [case.hang] if hang else list(case.faults)
    return parse(
        {
            "seed": seed,
            "max_days": 2,
            "account": {"store": "memory", "startup": dict(case.startup)},
            "delivery": {"min_delay_s": 1, "max_delay_s": 20, "duplicate_rate": 0.1},
            "runs": [
                {
                    "name": "benign",
                    "instance_type": case.instance_type,
                    "instance_count": case.instance_count,
                    "profile": {**PROFILE, **case.profile},
                    "policy": dict(policy or {}),
                }
            ],
            "faults": [{"run": "benign", "attempt": 1, **f} for f in faults],
        },
        bucket=BUCKET,
        role_arn=EXECUTION_ROLE,
    )


def run_case(
    case: BenignCase,
    policy: dict[str, Any] | None,
    template: dict[str, Any],
    *,
    seed: int,
    hang: bool = False,
) -> DrillResult:
    # moto's heaviest calls through its backends (drill/account/backend_clients.py): the same day, faster
    result = run_scenario(
        scenario(case, policy, seed=seed, hang=hang), template, account_options={"backend_reads": True}
    )
    if result.invariant_violations:
        raise SystemExit(f"invariant violated: {result.invariant_violations}")
    return result


def hang_stops(result: DrillResult) -> int:
    return sum(1 for d in result.runs["benign"]["decisions"] if "hang confirmed" in d)


_WINDOW = re.compile(r"log_silence window \d+ -> (\d+) min")


def log_windows(result: DrillResult, policy: dict[str, Any] | None) -> list[int]:
    """The attempt's log-silence windows in force, in order: the policy's, then each learned one."""
    first = int((policy or {}).get("log_silence_minutes", 30))
    learned = [int(m.group(1)) for d in result.runs["benign"]["decisions"] if (m := _WINDOW.search(d))]
    return [first, *learned]


@dataclass
class CaseOutcome:
    runs: int = 0
    stops: int = 0
    completed: int = 0
    windows: list[int] = field(default_factory=list)  # the smallest log-silence window of each run


def measure(
    case: BenignCase, policy: dict[str, Any] | None, seeds: Sequence[int], template: dict[str, Any]
) -> CaseOutcome:
    out = CaseOutcome()
    for seed in seeds:
        result = run_case(case, policy, template, seed=seed)
        out.runs += 1
        out.stops += hang_stops(result)
        out.completed += result.runs["benign"]["status"] == "SUCCEEDED"
        out.windows.append(min(log_windows(result, policy)))
    return out


def _cell(o: CaseOutcome) -> str:
    lo, hi = min(o.windows), max(o.windows)
    window = f"{lo}" if lo == hi else f"{lo}-{hi}"
    done = "" if o.completed == o.runs else f", {o.runs - o.completed} not completed"
    return f"**{o.stops}**{done} (window {window} min)"


def silent_phases_past_the_window(result: DrillResult, window_min: int) -> int:
    """Silent phases (no log lines: saves, compiles, silent evals, data-loader pauses) that lasted
    longer than `window_min` plus the alarm's late minutes: each one was judged on the evidence."""
    silent = {"save", "compile", "nccl_init", "data_pause", "eval_silent"}
    return sum(
        1
        for job in result.jobs
        for start, end, kind in job.phase_intervals
        if kind in silent and end is not None and end - start > (window_min + 3) * 60_000
    )


@dataclass
class DrawOutcome:
    runs: int = 0
    stops: int = 0
    completed: int = 0
    judged: int = 0  # silent phases longer than the learned window
    stopped_seeds: list[int] = field(default_factory=list)


def measure_draws(
    seeds: Sequence[int], policy: dict[str, Any] | None, template: dict[str, Any]
) -> DrawOutcome:
    out = DrawOutcome()
    for seed in seeds:
        result = run_draw(draw(seed), policy, template)
        out.runs += 1
        stops = hang_stops(result)
        out.stops += stops
        if stops:
            out.stopped_seeds.append(seed)
        out.completed += result.runs["benign"]["status"] == "SUCCEEDED"
        out.judged += silent_phases_past_the_window(result, min(log_windows(result, policy)))
    return out


def _range(values: Sequence[float], unit: str = " min") -> str:
    return f"{min(values):.0f}-{max(values):.0f}{unit}"


def draws_summary(seeds: Sequence[int]) -> str:
    """What the draws held (the distributions are wide; these are the values actually drawn)."""
    ds = [draw(s) for s in seeds]
    pauses = [m for d in ds for _, m in d.pauses]
    evals = [m for d in ds for _, m, _ in d.evals]
    silent = sum(1 for d in ds for *_, quiet in d.evals if quiet)
    return (
        f"{len(ds)} jobs of {', '.join(str(h) for h in sorted({d.hosts for d in ds}))} hosts; saves "
        f"{_range([d.save_min for d in ds])} at every checkpoint (every {_range([d.checkpoint_every_min for d in ds])}); "
        f"compiles {_range([d.compile_min for d in ds])}; {len(pauses)} data-loader pauses "
        f"{_range(pauses)}; {len(evals)} evals {_range(evals)} ({silent} silent); logging every "
        f"{_range([d.log_every_s for d in ds], ' s')}"
    )


def table(
    seeds: Sequence[int],
    template: dict[str, Any],
    progress: Callable[[str], None] | None = None,
    draw_seeds: Sequence[int] = (),
) -> list[str]:
    """The BENCHMARKS.md section: hang stops per named benign case and over the randomized draws,
    default and recommended policy."""
    out = [
        "False hang stops on benign phases (must be 0), default and recommended policy "
        "(`benchmarks/benign.py`; `tests/scenarios/test_benign.py` also checks that a real hang in "
        "each named setup is still caught).",
        "",
        "Randomized healthy jobs, drawn from the stated distributions (saves 2-25 min at every "
        "checkpoint, a first-step compile of 5-70 min, 1-3 silent data-loader pauses of 1-12 min, 1-2 "
        "evals of 5-30 min, silent or not, logging every 10 s to every 10 min, 1-8 x ml.p4d.24xlarge, "
        "4 h of steps; one-off phases at random times 50-230 min into Training; how each phase looks "
        "in the hosts' metrics drawn by the drill, unkind variants included). Every seed is reported:",
        "",
        "| draws | hang stops, default policy | hang stops, recommended policy | silent phases longer than the learned window (judged on evidence) |",
        "|---|---|---|---|",
    ]
    if draw_seeds:
        default = measure_draws(draw_seeds, None, template)
        recommended = measure_draws(draw_seeds, RECOMMENDED_POLICY, template)
        if progress is not None:
            progress(f"benign: {len(draw_seeds)} draws: {default.stops} / {recommended.stops} hang stops")

        def cell(o: DrawOutcome) -> str:
            which = f" (seeds {', '.join(map(str, o.stopped_seeds))})" if o.stopped_seeds else ""
            done = "" if o.completed == o.runs else f", {o.runs - o.completed} not completed"
            return f"**{o.stops}**{which}{done} in {o.runs} runs"

        out.append(
            f"| seeds {min(draw_seeds)}-{max(draw_seeds)} | {cell(default)} | {cell(recommended)} | "
            f"{default.judged} / {recommended.judged} |"
        )
        out += ["", f"The draws held: {draws_summary(draw_seeds)}."]
    out += [
        "",
        f"Named cases: 4 x ml.p4d.24xlarge unless stated, about 6 h of training; one-off phases start "
        f"{LATE_MIN} min into Training, after the log-silence window has been learned. Each cell: hang "
        f"stops over {len(seeds)} seeds, and the smallest log-silence window in force during the run "
        "(the policy's until learned):",
        "",
        "| phase | runs | hang stops, default policy | hang stops, recommended policy |",
        "|---|---|---|---|",
    ]
    for case in CASES:
        default_case = measure(case, None, seeds, template)
        recommended_case = measure(case, RECOMMENDED_POLICY, seeds, template)
        if progress is not None:
            progress(f"benign: {case.key}: {default_case.stops} / {recommended_case.stops} hang stops")
        out.append(f"| {case.label} | {len(seeds)} | {_cell(default_case)} | {_cell(recommended_case)} |")
    out += [
        "",
        "- A silent phase longer than the learned window is told apart from a hang by what the hosts "
        "are doing (`domain/vocabulary/evidence.py`): CPU busy beyond a spinning rank's single core (a compile, "
        "data loading, an eval's input pipeline), disk space growing (a checkpoint being written) or "
        "checkpoint objects landing in S3 are a benign phase, waited for up to "
        "`benign_phase_max_minutes` (90) of quiet; GPUs busy with a core per rank, or everything idle, "
        "with nothing written, is a hang, stopped at once. The phase marker "
        "(`[sagewarden] phase=<name> max_minutes=<n>`) still covers a phase the metrics cannot tell "
        "apart (NCCL init after start-up, an eval with its data already on the GPUs).",
        "- The whole job idle (`gpu_idle`) and log silence wait out the start-up allowance: NCCL init "
        "is as idle as a stuck job. A lone idle host acts at once after start-up, and during it once it "
        "has held 10 minutes (hosts finish a compile minutes apart).",
    ]
    return out


if __name__ == "__main__":  # only this section: python -m benchmarks.benign
    import sys
    import time

    from drill.account.local import drill_template

    t0 = time.perf_counter()
    lines = table(
        [1, 2, 3],
        drill_template(),
        progress=lambda s: print(s, file=sys.stderr, flush=True),
        draw_seeds=range(1, 25),
    )
    print("\n".join(lines))
    print(f"\n({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
