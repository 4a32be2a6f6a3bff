"""`python -m benchmarks.corpus_eval`: the supervisor measured against real training-job endings.

Loads benchmarks/corpus/endings.jsonl (text quoted from public threads, see
benchmarks/corpus/README.md) and delivers each ending to the pure domain (`decide`) the way the
service does: a FailureReason and log tail to a training attempt that has saved a checkpoint, a
CreateTrainingJob rejection to a launch in flight, a stop to a job in Training. What the run did
next is the prediction, read from the decision: failed (fail-fast), waiting for capacity, quota or
throttling, or asking again for capacity (wait), resumed on other instances (resume-other-hosts), resumed after an unexplained
ending (confirm-once: domain/endings/attempt_ended.py fails a second such ending without progress), or resumed.
Prints accuracy per label, the confusion matrix (unambiguous cases; ambiguous ones apart) and the
cases it gets wrong, grouped by what went wrong; then each case's ending met again on every attempt
(`attempts_until_stop`: resumed from the same checkpoint, ending the same way) and the attempts
until the run stops.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import drill  # noqa: F401  (puts lambdas/ first on sys.path: this tree's domain, not an installed copy)
from sagewarden.domain.capacity.warm_pools import watch_of
from sagewarden.domain.decide import Decision, decide
from sagewarden.domain.vocabulary.actions import LaunchAttempt
from sagewarden.domain.vocabulary.events import (
    Event,
    JobObserved,
    LaunchAccepted,
    LaunchRejected,
    Observations,
    Submitted,
    Tick,
)
from sagewarden.domain.vocabulary.layouts import Checkpoint, LayoutKind
from sagewarden.domain.vocabulary.models import Attempt, Run, RunStatus
from sagewarden.domain.vocabulary.policy import RunPolicy

CORPUS = Path(__file__).resolve().parent / "corpus" / "endings.jsonl"

LABELS = ("resume", "resume-other-hosts", "fail-fast", "wait", "confirm-once")
WAIT_REASONS = frozenset({"capacity", "quota", "throttle"})

# The corpus records no durations: an ending is delivered this long after the job reached
# Training (a case may say otherwise with `training_seconds`). Inside the classifier's 900 s
# start-up window, where most quoted start-up failures belong.
DEFAULT_TRAINING_SECONDS = 300.0
# ... and this long after the job's end: past the 60 s the domain waits for late log lines.
DECIDE_AFTER_END_MS = 5 * 60_000
# A failed job whose case quotes a log tail but no FailureReason gets the reason SageMaker gives a
# script that exited 1 (the training toolkit's wording; it names no cause): the threads were not
# SageMaker jobs, and on SageMaker a failed script always has an AlgorithmError reason. It names no
# signature, but it decides whether the job leaves a warm pool (domain/capacity/warm_pools.py).
SCRIPT_EXITED_REASON = 'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage ""'
# The repeated simulation (`attempts_until_stop`) gives up after this many attempts.
MAX_ATTEMPTS = 12
# stopping within one confirming restart: at most this many attempts
DETERMINISTIC_LABELS = ("fail-fast", "confirm-once")

_MIN = 60_000
_REQUEST: dict[str, Any] = {
    "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"},
    "RoleArn": "arn:aws:iam::123456789012:role/SageMakerTrainingRole",
    "OutputDataConfig": {"S3OutputPath": "s3://bucket/out/"},
    "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 100},
    "StoppingCondition": {"MaxRuntimeInSeconds": 86_400},
    "CheckpointConfig": {"S3Uri": "s3://bucket/ckpt/", "LocalPath": "/opt/ml/checkpoints"},
}


@dataclass(frozen=True)
class Case:
    """One ending of the corpus (benchmarks/corpus/README.md describes the fields)."""

    id: str
    category: str
    source: str
    label: str
    ambiguous: bool
    why: str
    failure_reason: str | None = None
    log_tail: tuple[str, ...] = ()
    api_error: tuple[str, str] | None = None
    status: str | None = None
    secondary_status: str | None = None
    training_seconds: float | None = None


@dataclass(frozen=True)
class Outcome:
    """What the supervisor did with one case."""

    case: Case
    predicted: str
    end_class: str  # the attempt's recorded class (or the launch rejection's)
    reason: str  # the classifier's reason line, or the run's

    @property
    def correct(self) -> bool:
        return self.predicted == self.case.label


def parse(raw: dict[str, Any]) -> Case:
    api = raw.get("api_error")
    return Case(
        id=raw["id"],
        category=raw["category"],
        source=raw["source"],
        label=raw["label"],
        ambiguous=bool(raw["ambiguous"]),
        why=raw["why"],
        failure_reason=raw.get("failure_reason"),
        log_tail=tuple(raw.get("log_tail") or ()),
        api_error=(str(api.get("code") or ""), str(api.get("message") or "")) if api else None,
        status=raw.get("status"),
        secondary_status=raw.get("secondary_status"),
        training_seconds=raw.get("training_seconds"),
    )


def read_raw(path: Path = CORPUS) -> list[dict[str, Any]]:
    """The corpus as stored: one JSON object per non-blank line."""
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load(path: Path = CORPUS) -> list[Case]:
    return [parse(raw) for raw in read_raw(path)]


# --- delivering an ending to the domain ---------------------------------------------------------


def _step(run: Run, event: Event, now: int, policy: RunPolicy, obs: Observations) -> Decision:
    return decide(run, event, now, policy, obs)


def _submitted(policy: RunPolicy) -> Run:
    run = Run(
        run_id="01JC0RPVS0BADC0DE000000000",
        name="corpus",
        owner="arn:aws:iam::123456789012:role/ml-engineer",
        request=copy.deepcopy(_REQUEST),
        policy=policy,
        status=RunStatus.SUBMITTED,
        created_ms=0,
    )
    return _step(run, Submitted(), 0, policy, Observations()).run


def _observed(run: Run, status: str, secondary: str | None, at: int, **kw: Any) -> JobObserved:
    cur = run.current
    assert cur is not None
    return JobObserved(cur.job_name, cur.number, status, secondary, at, **kw)


def _attempt(run: Run, number: int) -> Attempt:
    return next(a for a in run.attempts if a.number == number)


def _reason_of(case: Case) -> str | None:
    if case.failure_reason is None and case.log_tail and (case.status or "Failed") == "Failed":
        return SCRIPT_EXITED_REASON
    return case.failure_reason


_SAVED = Checkpoint("s3://bucket/ckpt/checkpoint-200/", 200, LayoutKind.HF, None)


def _end_attempt(run: Run, case: Case, started: int, pol: RunPolicy) -> tuple[Decision, int]:
    """The case's ending of the run's current attempt (in Training since `started`), decided
    DECIDE_AFTER_END_MS after the job's end, the newest checkpoint step 200; returns the decision and
    when it was taken."""
    seconds = DEFAULT_TRAINING_SECONDS if case.training_seconds is None else case.training_seconds
    end = started + int(seconds * 1000)
    status = case.status or "Failed"
    secondary = case.secondary_status or ("Failed" if status == "Failed" else None)
    ending = _observed(run, status, secondary, end, failure_reason=_reason_of(case), ended_ms=end)
    # a checkpoint newer than the first attempt's start: the ending is judged with progress made
    saved = Checkpoint(_SAVED.uri, _SAVED.step, _SAVED.layout, end - _MIN)
    obs = Observations(log_tail=case.log_tail, checkpoint=saved)
    now = end + DECIDE_AFTER_END_MS
    return _step(run, ending, now, pol, obs), now


def supervise(case: Case, policy: RunPolicy | None = None) -> Outcome:
    """Deliver the case's ending to the domain as the service would, and read what it did."""
    pol = policy or RunPolicy()
    run = _submitted(pol)
    if case.api_error is not None:
        code, message = case.api_error
        d = _step(run, LaunchRejected(1, code, message), _MIN, pol, Observations())
        ended = _attempt(d.run, 1)
        return Outcome(case, _prediction(d, ended), ended.end_class or "", _reason(d, ended))
    run = _step(run, LaunchAccepted(1), 1, pol, Observations()).run
    run = _step(run, _observed(run, "InProgress", "Starting", 2), 2, pol, Observations()).run
    started = 10 * _MIN
    run = _step(run, _observed(run, "InProgress", "Training", started), started, pol, Observations()).run
    d, _ = _end_attempt(run, case, started, pol)
    ended = _attempt(d.run, 1)
    return Outcome(case, _prediction(d, ended), ended.end_class or "", _reason(d, ended))


@dataclass(frozen=True)
class Repeated:
    """The case's ending met again and again: every attempt resumes from the same checkpoint and
    ends the same way before the next one (a deterministic failure, as the domain sees it)."""

    case: Case
    attempts: int  # attempts run until the run stopped (MAX_ATTEMPTS + 1: it never stopped)
    stopped: bool
    outcome: str  # the run's outcome line, or where it was left

    @property
    def restarts(self) -> int:
        return self.attempts - 1


def attempts_until_stop(case: Case, policy: RunPolicy | None = None) -> Repeated | None:
    """Run the case's ending through `decide` on every attempt -- each resumed from the checkpoint
    the first one left (step 200) and ending the same way before the next one, on the warm pool
    when the domain waits for it -- and count the attempts until the run stops. None for a
    CreateTrainingJob rejection (no attempt runs)."""
    if case.api_error is not None:
        return None
    pol = policy or RunPolicy()
    run = _submitted(pol)
    now = 1
    run = _step(run, LaunchAccepted(1), now, pol, Observations()).run
    started = 10 * _MIN
    run = _step(run, _observed(run, "InProgress", "Training", started), started, pol, Observations()).run
    for _ in range(MAX_ATTEMPTS):
        d, now = _end_attempt(run, case, started, pol)
        run = d.run
        launch = _launched(d)
        waited = 0
        while launch is None and not run.status.terminal and waited < 50:
            d, now = _advance(run, now, pol)
            run, launch = d.run, _launched(d)
            waited += 1
        if run.status.terminal or launch is None:
            return Repeated(case, run.attempt_count, run.status.terminal, run.outcome or "no launch")
        previous = _attempt(run, launch.attempt - 1)
        now += 1
        run = _step(run, LaunchAccepted(launch.attempt), now, pol, Observations()).run
        watch = watch_of(run, previous.job_name)
        if watch is not None and watch.status == "Available" and not watch.bad_host:
            # the new job runs on the pool: DescribeTrainingJob of the old one says Reused by it
            now += _MIN
            seen = _pool_seen(previous, "Reused", reused_by=launch.job_name)
            run = _step(run, seen, now, pol, Observations()).run
        started = now + 5 * _MIN
        run = _step(run, _observed(run, "InProgress", "Training", started), started, pol, Observations()).run
    return Repeated(case, MAX_ATTEMPTS + 1, False, f"still running after {MAX_ATTEMPTS} attempts")


def _launched(d: Decision) -> LaunchAttempt | None:
    return next((a for a in d.actions if isinstance(a, LaunchAttempt)), None)


def _pool_seen(att: Attempt, status: str, reused_by: str | None = None) -> JobObserved:
    return JobObserved(
        att.job_name,
        att.number,
        att.sm_status or "Failed",
        att.sm_secondary,
        att.sm_modified_ms,
        failure_reason=att.failure_reason,
        ended_ms=att.ended_ms,
        source="describe",
        warm_pool_status=status,
        warm_pool_billable_s=60 if status != "Available" else None,
        warm_pool_reused_by=reused_by,
    )


def _advance(run: Run, now: int, pol: RunPolicy) -> tuple[Decision, int]:
    """What the service would deliver next to a run that has not launched yet: its warm pool
    Available two minutes after the job's end (gone when it holds a bad host), else the sweep's
    tick at the run's wake-up time."""
    cur = run.current
    assert cur is not None
    watch = watch_of(run, cur.job_name)
    if run.status == RunStatus.RETRY_WAIT and run.wait_reason == "warm_pool" and watch is not None:
        at = max(now, (cur.ended_ms or now) + 2 * _MIN) + 1
        status = "Terminated" if watch.bad_host or watch.status == "Available" else "Available"
        return _step(run, _pool_seen(cur, status), at, pol, Observations(checkpoint=_SAVED)), at
    at = max(now + 1, run.wake_at_ms or now + _MIN)
    return _step(run, Tick(), at, pol, Observations(checkpoint=_SAVED)), at


def repeat_all(cases: Iterable[Case], policy: RunPolicy | None = None) -> list[Repeated]:
    out = []
    for c in cases:
        r = attempts_until_stop(c, policy)
        if r is not None:
            out.append(r)
    return out


def _prediction(d: Decision, ended: Attempt) -> str:
    run = d.run
    if run.status == RunStatus.FAILED:
        return "fail-fast"
    if run.status == RunStatus.CANCELLED:
        return "cancelled"
    if run.status == RunStatus.SUCCEEDED:
        return "succeeded"
    if run.status == RunStatus.RETRY_WAIT and run.wait_reason in WAIT_REASONS:
        return "wait"
    if ended.end_class == "CAPACITY":
        # the capacity path (domain/endings/attempt_ended.py _capacity): a backoff counted from the refused
        # attempt's request, or a fallback type -- asking again at once when the job sat Pending
        # longer than the backoff, as the harness's ending (after 10 minutes) always did
        return "wait"
    if not ended.ended and ended.end_class is None:
        return "deferred"  # no decision taken yet (the domain waits for a read)
    watch = watch_of(run, ended.job_name)
    if (watch is not None and watch.bad_host) or ended.suspect_hosts or run.infra_check_pending:
        return "resume-other-hosts"
    if ended.end_class == "UNKNOWN":
        return "confirm-once"
    return "resume"


def _reason(d: Decision, ended: Attempt) -> str:
    if ended.end_reason:
        return ended.end_reason
    return d.run.outcome or (d.notes[-1] if d.notes else "")


# --- the report --------------------------------------------------------------------------------


def evaluate(cases: Iterable[Case], policy: RunPolicy | None = None) -> list[Outcome]:
    return [supervise(c, policy) for c in cases]


def _table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def _pct(n: int, d: int) -> str:
    return f"{100 * n / d:.0f} %" if d else "-"


def accuracy_rows(outcomes: Sequence[Outcome]) -> list[tuple[str, int, int, str]]:
    """Per expected label: cases, right, accuracy (the outcomes given, usually the unambiguous)."""
    rows = []
    for label in LABELS:
        mine = [o for o in outcomes if o.case.label == label]
        right = sum(o.correct for o in mine)
        rows.append((label, len(mine), right, _pct(right, len(mine))))
    total = sum(o.correct for o in outcomes)
    rows.append(("all", len(outcomes), total, _pct(total, len(outcomes))))
    return rows


def confusion(outcomes: Sequence[Outcome]) -> tuple[list[str], dict[tuple[str, str], int]]:
    """The predicted columns (the labels, then anything else the domain did) and the counts."""
    counts = Counter((o.case.label, o.predicted) for o in outcomes)
    extra = sorted({o.predicted for o in outcomes} - set(LABELS))
    return [*LABELS, *extra], dict(counts)


def wrong_groups(outcomes: Sequence[Outcome]) -> dict[tuple[str, str, str], list[Outcome]]:
    """The wrong outcomes by (expected, predicted, the class the domain gave)."""
    groups: dict[tuple[str, str, str], list[Outcome]] = defaultdict(list)
    for o in outcomes:
        if not o.correct:
            groups[(o.case.label, o.predicted, o.end_class)].append(o)
    return dict(sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])))


# what one more attempt of a deterministic failure costs, for the GPU-hours line: the issue's
# reference job (256 x ml.p5.48xlarge) and the harness's own attempt (a 10-minute start, then 5
# minutes of training before the failure): a floor, since a real job's start-up and its minutes to
# the failure are often longer
REFERENCE_GPUS = 2_048
RESTART_MIN = 15.0


def repeat_rows(repeats: Sequence[Repeated]) -> list[tuple[str, int, str, str, int]]:
    """Per expected label (unambiguous cases): cases, attempts until the run stops (min-max), how
    many never stopped within MAX_ATTEMPTS, and the restarts after the first attempt in all."""
    rows = []
    for label in LABELS:
        mine = [r for r in repeats if r.case.label == label and not r.case.ambiguous]
        if not mine:
            continue
        lo, hi = min(r.attempts for r in mine), max(r.attempts for r in mine)
        never = sum(not r.stopped for r in mine)
        span = str(lo) if lo == hi else f"{lo}-{hi}"
        rows.append(
            (label, len(mine), span + ("+" if never else ""), str(never), sum(r.restarts for r in mine))
        )
    return rows


def repeat_report(repeats: Sequence[Repeated]) -> list[str]:
    deterministic = [r for r in repeats if r.case.label in DETERMINISTIC_LABELS and not r.case.ambiguous]
    over = [r for r in deterministic if r.attempts > 2]
    restarts = sum(r.restarts for r in deterministic)
    gpu_h = restarts * REFERENCE_GPUS * RESTART_MIN / 60
    lines = [
        "## The same ending again and again (unambiguous cases; CreateTrainingJob rejections run no attempt)",
        "",
        "Each case's ending on every attempt, each resumed from the checkpoint the first left and ending "
        "the same way before the next (on the warm pool when the domain waits for it): attempts until "
        "the run stops. `fail-fast` should stop at the first, `confirm-once` at the second; transient "
        f"ones stop by the crash-loop streak. Never stopped: still running after {MAX_ATTEMPTS}.",
        "",
        *_table(("label", "cases", "attempts", "never stopped", "restarts in all"), repeat_rows(repeats)),
        "",
        f"Deterministic failures (`fail-fast`, `confirm-once`): {len(deterministic)} cases, {restarts} "
        f"restarts in all, {len(over)} needing more than one confirming restart; at {REFERENCE_GPUS:,} GPUs "
        f"and {RESTART_MIN:g} minutes an attempt, the restarts cost {gpu_h:,.0f} GPU-hours.",
    ]
    if over:
        lines += [
            "",
            *(f"- `{r.case.id}` [{r.case.category}]: {r.attempts} attempts ({r.outcome})" for r in over),
        ]
    return lines


def report(outcomes: Sequence[Outcome], *, list_wrong: bool = True) -> list[str]:
    clear = [o for o in outcomes if not o.case.ambiguous]
    unclear = [o for o in outcomes if o.case.ambiguous]
    lines = [
        f"# Endings corpus: {len(outcomes)} cases, {len(clear)} unambiguous, {len(unclear)} ambiguous",
        "",
        "## Accuracy per label (unambiguous cases)",
        "",
        *_table(("label", "cases", "right", "accuracy"), accuracy_rows(clear)),
        "",
        "## Confusion matrix (unambiguous; rows expected, columns what the supervisor did)",
        "",
    ]
    columns, counts = confusion(clear)
    lines += _table(
        ("expected \\ did", *columns),
        ((label, *(counts.get((label, col), 0) or "." for col in columns)) for label in LABELS),
    )
    lines += [
        "",
        "## Ambiguous cases (reasonable people differ; not scored)",
        "",
        *_table(("label", "cases", "same as the label", "share"), accuracy_rows(unclear)[:-1]),
        "",
    ]
    lines += _table(
        ("case", "label", "did", "class"),
        ((o.case.id, o.case.label, o.predicted, o.end_class) for o in unclear),
    )
    by_cat: dict[str, list[Outcome]] = defaultdict(list)
    for o in clear:
        by_cat[o.case.category].append(o)
    lines += ["", "## Per category (unambiguous)", ""]
    lines += _table(
        ("category", "cases", "right"),
        ((cat, len(os), sum(o.correct for o in os)) for cat, os in sorted(by_cat.items())),
    )
    if list_wrong:
        lines += ["", "## Wrong (unambiguous), grouped by expected -> did (class)", ""]
        groups = wrong_groups(clear)
        if not groups:
            lines += [
                "None. The ambiguous cases the supervisor treats otherwise than their label (not "
                "scored), each with why it was labelled so and the supervisor's reason:",
                "",
                *(
                    f"- `{o.case.id}` [{o.case.category}] {o.case.label} -> {o.predicted} "
                    f"({o.end_class or 'no class'}): labelled because {o.case.why}; the supervisor: {o.reason}"
                    for o in unclear
                    if not o.correct
                ),
                "",
            ]
        for (expected, did, cls), group in groups.items():
            lines.append(f"### {expected} -> {did} ({cls or 'no class'}): {len(group)}")
            lines.append("")
            for o in group:
                lines.append(f"- `{o.case.id}` [{o.case.category}]: {o.reason}")
            lines.append("")
    return lines


def attempts_per_case(repeats: Sequence[Repeated]) -> list[str]:
    """Every case's attempts until the run stopped, grouped by label and attempts (case ids)."""
    groups: dict[tuple[str, int, bool], list[str]] = defaultdict(list)
    for r in repeats:
        groups[(r.case.label, r.attempts, r.stopped)].append(
            r.case.id + (" (ambiguous)" if r.case.ambiguous else "")
        )
    rows = [
        (
            label,
            str(attempts) if stopped else f"{attempts - 1}+ (never stopped)",
            len(ids),
            ", ".join(sorted(ids)),
        )
        for (label, attempts, stopped), ids in sorted(
            groups.items(), key=lambda kv: (LABELS.index(kv[0][0]), kv[0][1])
        )
    ]
    return _table(("label", "attempts until stop", "cases", "ids"), rows)


BENCH_HEADING = "## Real endings: the corpus"


def _demote(lines: Iterable[str]) -> list[str]:
    """The report's headings one level down, under the bench's section (its title line dropped)."""
    out: list[str] = []
    dropped = False
    for line in lines:
        if line.startswith("# "):
            dropped = True
            continue
        if dropped and not line:
            dropped = False
            continue
        dropped = False
        out.append("#" + line if line.startswith("#") else line)
    return out


def bench_section(cases: Sequence[Case], policy: RunPolicy | None = None) -> list[str]:
    """BENCHMARKS.md's section: the report and the repeated endings of ``cases``, with each case's
    attempts until the run stopped."""
    outcomes = evaluate(cases, policy)
    repeats = repeat_all(cases, policy)
    clear = sum(not c.ambiguous for c in cases)
    by_cat = Counter(c.category for c in cases)
    return [
        BENCH_HEADING,
        "",
        f"{len(cases)} endings of real training jobs ({clear} unambiguous, {len(cases) - clear} ambiguous; "
        f"{len(by_cat)} categories), quoted from public threads with their source "
        "(benchmarks/corpus/endings.jsonl, benchmarks/corpus/README.md), each delivered to the pure "
        "domain (`decide`) as the service would deliver it; `python -m benchmarks.corpus_eval` prints "
        "the same.",
        "",
        *_demote(report(outcomes)),
        *_demote(repeat_report(repeats)),
        "",
        "### Attempts until the run stopped, per case",
        "",
        *attempts_per_case(repeats),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.corpus_eval", description=__doc__)
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="the JSONL corpus to measure")
    parser.add_argument("--no-wrong", action="store_true", help="leave out the list of wrong cases")
    args = parser.parse_args(argv)
    cases = load(args.corpus)
    outcomes = evaluate(cases)
    lines = [*report(outcomes, list_wrong=not args.no_wrong), "", *repeat_report(repeat_all(cases))]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
