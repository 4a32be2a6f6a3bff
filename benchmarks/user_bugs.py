"""Deterministic failures in the bench trace: a user's bug that ends every attempt the same way
until a person fixes it, quoting the failure text of a real ending of the corpus.

Four kinds (``BUG_KINDS``), each from cases of benchmarks/corpus/endings.jsonl (its id is in the
bug's label): a ``state_dict`` / shape mismatch at the restore of every resume, an assertion at a
step after every resume (the step lies before the next checkpoint, so the resume is always from
the same one), a start-up check that fails at once (a batch-size assertion after a node-count
change, an import error), and a full disk at the first save of every attempt. Bugs arrive at
``RATE_PER_HEALTHY_HOUR`` over the run's healthy operating time, from their own random stream (a
seed's other faults stay the same), and recur through the simulated SageMaker's recurring crash
(``Fault.recur_after_training_min``) until the person on call fixes them: when they resubmit
after a page, or when they notice the loop on a dashboard (the hang-notice delay) -- the bench's
people (benchmarks/person.py, baselines.py, supervised.py). The loss per bug is scored here.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.corpus_eval import CORPUS, read_raw
from drill.sim.model import Fault, FaultRecord, SimJob

RATE_PER_HEALTHY_HOUR = 1 / 60  # about one deterministic failure per 60 healthy hours of the run
MINUTE_MS = 60_000
BUG_PREFIX = "bug"


@dataclass(frozen=True)
class BugKind:
    """When a kind of deterministic failure ends an attempt, and the corpus cases it quotes."""

    what: str
    cases: tuple[str, ...]  # corpus ids (unambiguous, a deterministic label)
    # minutes after an attempt entered Training (after its compile when ``after_compile``)
    offset_min: tuple[float, float]
    after_compile: bool = False
    from_next_start: bool = False  # first met by the first attempt that starts once it is due
    at_first_save: bool = False  # half-way through the attempt's first checkpoint save


BUG_KINDS: dict[str, BugKind] = {
    # the checkpoint the job wrote does not load into the model it builds: every resume fails at
    # its restore, before the compile
    "resume-mismatch": BugKind(
        "state_dict / shape mismatch at the restore",
        (
            "resume-shape-mismatch-pytorch-15720",
            "resume-shape-mismatch-crfill-29",
            "resume-shape-mismatch-deepspeed-5570",
        ),
        (1.0, 4.0),
        from_next_start=True,
    ),
    # a batch the script meets minutes after every resume (before the next checkpoint)
    "step-assertion": BugKind(
        "assertion at a step after resume",
        ("nan-floating-point-random-iter-opendet2-29", "device-assert-nll-classes-reid-372"),
        (2.0, 15.0),
        after_compile=True,
    ),
    # a config check or an import that fails at start-up (a node-count change, a dependency)
    "start-check": BugKind(
        "config check or import error at start",
        (
            "config-batch-assert-7-gpus-openrlhf-346",
            "config-batch-assert-deepspeed-6914",
            "import-error-libcudart12-flash-attn-631",
            "import-error-sagemaker-synetune-113",
        ),
        (0.5, 2.0),
        from_next_start=True,
    ),
    # the volume fills: the save under way fails, then the first save of every attempt
    "disk-full": BugKind(
        "disk full at the first save",
        (
            "disk-full-torch-save-dolly-139",
            "disk-full-after-8-days-mockingbird-774",
            "disk-full-safetensors-llamafactory-5155",
        ),
        (0.0, 0.0),
        at_first_save=True,
    ),
}


@functools.lru_cache(maxsize=1)
def corpus_cases() -> dict[str, dict[str, Any]]:
    return {raw["id"]: raw for raw in read_raw(CORPUS)}


@dataclass(frozen=True)
class TraceBug:
    index: int
    healthy_min: float  # the run's healthy operating minutes when it comes due
    kind: str
    case: str  # the corpus id it quotes
    host: int
    offset_min: float  # when it ends each later attempt, after the attempt entered Training

    @property
    def label(self) -> str:
        return f"{BUG_PREFIX} {self.index:03d} {self.kind} / {self.case}"

    @property
    def person_key(self) -> int:
        """The key the person's delays are drawn with (apart from the trace faults' indexes)."""
        return 100_000 + self.index

    def sim_fault(self, run: str) -> Fault:
        kind = BUG_KINDS[self.kind]
        raw = corpus_cases()[self.case]
        return Fault(
            kind="algorithm_error",
            run=run,
            after_run_training_min=self.healthy_min,
            host=self.host,
            log_lines=tuple(raw.get("log_tail") or ()),
            failure_reason=raw.get("failure_reason"),
            once=False,
            during_save=kind.at_first_save,
            recur_after_training_min=self.offset_min,
            recur_from_next_start=kind.from_next_start,
            label=self.label,
        )


def bug_of(label: str | None, bugs: Sequence[TraceBug]) -> TraceBug | None:
    if not (label or "").startswith(BUG_PREFIX + " "):
        return None
    return next((b for b in bugs if b.label == label), None)


def draw_bugs(seed: int, hosts: int, horizon_hours: float, compile_min: float = 0.0) -> tuple[TraceBug, ...]:
    """Deterministic failures over ``horizon_hours`` of healthy operation, from their own stream:
    a kind, one of its corpus cases, a host that prints it and its offset in every attempt."""
    rng = random.Random(seed * 1_000_003 + 173)
    out: list[TraceBug] = []
    t = 0.0
    names = sorted(BUG_KINDS)
    while True:
        t += rng.expovariate(RATE_PER_HEALTHY_HOUR)
        if t >= horizon_hours:
            break
        name = rng.choice(names)
        kind = BUG_KINDS[name]
        case = rng.choice(kind.cases)
        offset = rng.uniform(*kind.offset_min) + (compile_min if kind.after_compile else 0.0)
        out.append(
            TraceBug(len(out) + 1, round(t * 60.0, 3), name, case, rng.randint(1, hosts), round(offset, 1))
        )
    return tuple(out)


@dataclass(frozen=True)
class BugLoss:
    """What one deterministic failure cost a run: the attempts it ended and the minutes from its
    first ending to the run training again after the fix (its compile included), plus the work
    since the checkpoint at that first ending."""

    bug: TraceBug
    endings: int
    minutes: float
    recovered: bool

    def gpu_hours(self, gpus: int) -> float:
        return gpus * self.minutes / 60.0


def bug_losses(
    bugs: Sequence[TraceBug],
    run: str,
    jobs: Sequence[SimJob],
    records: Sequence[FaultRecord],
    *,
    steps_per_minute: float,
    compile_min: float,
    end_ms: int,
) -> list[BugLoss]:
    """Per bug met (in order): endings and minutes lost, from the simulator's records."""
    hits: dict[str, list[FaultRecord]] = {}
    for rec in records:
        if rec.run == run and bug_of(rec.label, bugs) is not None:
            hits.setdefault(rec.label or "", []).append(rec)
    run_jobs = sorted((j for j in jobs if j.run_name == run), key=lambda j: j.created_ms)
    out = []
    for bug in bugs:
        recs = hits.get(bug.label)
        if not recs:
            continue
        first, last = recs[0], recs[-1]
        later = [
            j.training_started_ms
            for j in run_jobs
            if j.created_ms > last.at_ms and j.training_started_ms is not None
        ]
        recovered = later[0] + round(compile_min * MINUTE_MS) if later else None
        until = min(recovered, end_ms) if recovered is not None else end_ms
        work = max(0.0, first.progress - first.checkpoint_step) / steps_per_minute
        minutes = max(0, until - first.at_ms) / MINUTE_MS + work
        out.append(BugLoss(bug, len(recs), minutes, recovered is not None and recovered <= end_ms))
    return out
