"""False hang stops on the extended benign set, default and recommended policy (`make bench`).

Each case is a small job (4 x ml.p4d.24xlarge unless it says otherwise) that trains for about
six hours, long enough for the log-silence and progress windows to be learned from the attempt's
own cadence (after the 45-minute start-up allowance and 120 minutes of observation), so a phase
placed after that (200 minutes into training) meets the *learned* window, not the fixed one. The
phases are expressed on the drill's simulated SageMaker (``drill/sim``): per-host GPUUtilization,
the heartbeat metric (log lines per minute, and the minutes a phase marker declares) and the
progress metric. Each case also names a real hang in the same setup, which must still be caught
(the tests run both; see ``tests/scenarios/test_benign.py``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks.supervised import RECOMMENDED_POLICY
from drill.account import BUCKET, EXECUTION_ROLE
from drill.runner import DrillResult, run_scenario
from drill.scenario import parse
from sagewarden.domain.cadence import phase_marker

# about six hours of training: 1,800 steps at 5 a minute, a 2-minute save every 150 steps
PROFILE: dict[str, Any] = {"total_steps": 1800, "steps_per_minute": 5, "checkpoint_every_steps": 150}
LATE_MIN = 200  # minutes into Training: windows are learned by then (45 + 120 + settling)


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
        "12-minute checkpoint save, every checkpoint (no marker)",
        profile={"checkpoint_write_seconds": 720},
        hang={"kind": "hang_spin", "after_training_min": LATE_MIN},
        hang_label="NCCL spin",
    ),
    BenignCase(
        "save_marked",
        "12-minute checkpoint save, once, after windows are learned, with the phase marker",
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
        "save_unmarked",
        "12-minute checkpoint save, once, after windows are learned, no marker",
        faults=({"kind": "checkpoint_save_long", "duration_min": 12, "after_training_min": LATE_MIN},),
        hang={"kind": "stuck_dataloader", "after_training_min": LATE_MIN},
        hang_label="stuck data loader",
    ),
    BenignCase(
        "eval",
        "15-minute eval (low GPU, still logging), after windows are learned",
        faults=({"kind": "eval_phase", "duration_min": 15, "after_training_min": LATE_MIN},),
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
        "30-minute first-step compile (silent, every GPU idle)",
        faults=({"kind": "compile", "duration_min": 30, "after_training_min": 0},),
        hang={"kind": "stuck_dataloader", "after_training_min": 0},  # a start-up that never ends
        hang_label="a start-up that never ends",
    ),
    BenignCase(
        "nccl_init_256",
        "NCCL init on 256 x ml.p5.48xlarge (8 minutes silent, every GPU idle), then a 20-minute compile",
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
        "data-loader pause at each epoch boundary (4 minutes, silent, every GPU idle), after windows are learned",
        faults=tuple(
            {"kind": "dataloader_pause", "duration_min": 4, "after_training_min": t} for t in (LATE_MIN, 290)
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
    # moto's heaviest calls through its backends (drill/backend_clients.py): the same day, faster
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


def table(
    seeds: Sequence[int], template: dict[str, Any], progress: Callable[[str], None] | None = None
) -> list[str]:
    """The BENCHMARKS.md section: hang stops per benign case, default and recommended policy."""
    out = [
        "False hang stops on the extended benign set (must be 0), default and recommended policy. "
        f"4 x ml.p4d.24xlarge unless stated, about 6 h of training; one-off phases start {LATE_MIN} min "
        "into Training, after the log-silence window has been learned. Each cell: hang stops over "
        f"{len(seeds)} seeds, and the smallest log-silence window in force during the run (the policy's "
        "until learned; `benchmarks/benign.py`; `tests/scenarios/test_benign.py` also checks that a "
        "real hang in each setup is still caught):",
        "",
        "| phase | runs | hang stops, default policy | hang stops, recommended policy |",
        "|---|---|---|---|",
    ]
    for case in CASES:
        default = measure(case, None, seeds, template)
        recommended = measure(case, RECOMMENDED_POLICY, seeds, template)
        if progress is not None:
            progress(f"benign: {case.key}: {default.stops} / {recommended.stops} hang stops")
        out.append(f"| {case.label} | {len(seeds)} | {_cell(default)} | {_cell(recommended)} |")
    out += [
        "",
        "- A one-off silent save longer than the learned window (silent, every GPU low, like a stuck "
        "data loader) is told apart by its checkpoint objects still landing in S3: quiet signals wait "
        "while the newest checkpoint directory received an object in the last 5 minutes (a hung save "
        "lands none, so it is still caught). The training-script contract's marker "
        "(`[sagewarden] phase=<name> max_minutes=<n>`) covers any other long silent phase; a phase that "
        "recurs within 6 hours (every checkpoint, every epoch) is learned and needs neither.",
        "- The whole job idle (`gpu_idle`) waits out the start-up allowance like log silence does: a "
        "first-step compile or NCCL init leaves every GPU idle for tens of minutes. A lone idle host "
        "acts at once after start-up, and during it once it has held 10 minutes (hosts finish a "
        "compile minutes apart).",
    ]
    return out


if __name__ == "__main__":  # only this section: python -m benchmarks.benign
    import sys
    import time

    from drill.account import drill_template

    t0 = time.perf_counter()
    lines = table([1, 2, 3], drill_template(), progress=lambda s: print(s, file=sys.stderr, flush=True))
    print("\n".join(lines))
    print(f"\n({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
