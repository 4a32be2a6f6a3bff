"""The bench trace's deterministic failures (benchmarks/user_bugs.py): drawn per seed, quoting real
endings of the corpus, ended the same way on every attempt until the person fixes them, and the
table of GPU-hours lost to them (benchmarks/bugs_report.py)."""

from __future__ import annotations

import dataclasses

import pytest

from benchmarks.accounting import Account
from benchmarks.baselines import run_baseline
from benchmarks.bugs_report import HEADING, table
from benchmarks.corpus_eval import DETERMINISTIC_LABELS, load
from benchmarks.person import Person
from benchmarks.trace import generate, person_key
from benchmarks.user_bugs import BUG_KINDS, BugLoss, TraceBug, bug_losses, draw_bugs
from benchmarks.workload import Workload
from drill.sim.model import FaultRecord

CASES = {c.id: c for c in load()}


def test_bugs_are_deterministic_per_seed_and_leave_the_other_faults_alone() -> None:
    a = generate(seed=3, horizon_hours=2_000, benign=True, hosts_fail=True, bugs=True)
    b = generate(seed=3, horizon_hours=2_000, benign=True, hosts_fail=True, bugs=True)
    other = generate(seed=4, horizon_hours=2_000, benign=True, hosts_fail=True, bugs=True)
    plain = generate(seed=3, horizon_hours=2_000, benign=True, hosts_fail=True)
    assert a.bugs and a.bugs == b.bugs
    assert [x.healthy_min for x in other.bugs] != [x.healthy_min for x in a.bugs]
    assert plain.bugs == () and dataclasses.replace(a, bugs=()) == plain  # their own random stream
    assert {x.label for x in a.bugs}.isdisjoint({f.label for f in a.faults})


@pytest.mark.claim(
    "a user's bug about every 60 healthy hours, quoting a real ending of the endings corpus, that ends every attempt the same way until the person fixes it"
)
def test_bugs_arrive_about_once_per_60_healthy_hours() -> None:
    hours = 10_000
    counts = [len(draw_bugs(seed, 256, hours)) for seed in range(1, 21)]
    rate = sum(counts) / (len(counts) * hours)
    assert rate == pytest.approx(1 / 60, rel=0.05)


@pytest.mark.claim(
    "a user's bug about every 60 healthy hours, quoting a real ending of the endings corpus, that ends every attempt the same way until the person fixes it"
)
def test_every_bug_quotes_an_unambiguous_deterministic_case_of_the_corpus() -> None:
    bugs = [b for seed in range(1, 11) for b in draw_bugs(seed, 256, 1_000, compile_min=20.0)]
    assert {b.kind for b in bugs} == set(BUG_KINDS)
    for kind in BUG_KINDS.values():
        for case_id in kind.cases:
            case = CASES[case_id]
            assert not case.ambiguous and case.label in DETERMINISTIC_LABELS, case_id
    for bug in bugs:
        case = CASES[bug.case]
        fault = bug.sim_fault("llm-30d")
        assert bug.case in bug.label and fault.label == bug.label
        assert fault.log_lines == case.log_tail and fault.failure_reason == case.failure_reason
        assert fault.recur_after_training_min == bug.offset_min and not fault.once
        kind = BUG_KINDS[bug.kind]
        lo, hi = kind.offset_min
        base = 20.0 if kind.after_compile else 0.0
        assert base + lo - 0.05 <= bug.offset_min <= base + hi + 0.05
        assert fault.during_save == kind.at_first_save
        assert fault.recur_from_next_start == kind.from_next_start
        assert person_key(bug.label, dataclasses.replace(generate(seed=1, horizon_hours=1), bugs=(bug,))) == (
            bug.person_key
        )


# a small run: 2 hosts, a day of work, and one bug of each kind's shape where it is easy to see
SMALL = Workload(hosts=2, days=1.0)


def _one_bug(kind: str, case: str, healthy_min: float, offset: float) -> tuple[Workload, object]:
    trace = generate(seed=1, hosts=SMALL.hosts, horizon_hours=0.01)
    bug = TraceBug(1, healthy_min, kind, case, 1, offset)
    return SMALL, dataclasses.replace(trace, faults=(), bugs=(bug,))


@pytest.mark.claim(
    "a user's bug about every 60 healthy hours, quoting a real ending of the endings corpus, that ends every attempt the same way until the person fixes it"
)
@pytest.mark.parametrize(
    ("kind", "looping"),
    [
        pytest.param("retry", False, id="RetryStrategy pages the person at the first ending"),
        pytest.param("poll", True, id="the polling script resubmits until the person sees the loop"),
    ],
)
def test_a_bug_ends_every_attempt_the_same_way_until_the_person_fixes_it(kind: str, looping: bool) -> None:
    workload, trace = _one_bug("step-assertion", "device-assert-nll-classes-reid-372", 200.0, 6.0)
    result = run_baseline(kind, workload, trace, Person(seed=1), seed=1)
    assert result.completed
    ended = [j for j in result.jobs if j.status == "Failed"]
    reasons = {j.failure_reason for j in ended}
    assert len(reasons) == 1 and "device-side assert triggered" in next(iter(reasons))
    assert {r.label for r in result.sim.fault_records} == {trace.bugs[0].label}
    assert len(ended) == len(result.sim.fault_records)
    # every attempt after the first resumed from the same checkpoint and ended 6 minutes in
    assert len({j.start_step for j in ended[1:]}) <= 1
    for job in ended[1:]:
        assert job.ended_ms is not None and job.training_started_ms is not None
        assert (job.ended_ms - job.training_started_ms) / 60_000 == pytest.approx(6.0, abs=0.1)
    fixes = [a for a in result.actions if "fix" in a[1]]
    assert len(fixes) == 1 and fixes[0][2] == trace.bugs[0].label
    assert (len(ended) > 3) == looping  # the script's loop lasts the person's notice delay
    losses = bug_losses(
        trace.bugs,
        workload.name,
        result.jobs,
        result.sim.fault_records,
        steps_per_minute=workload.steps_per_minute,
        compile_min=trace.compile_min,
        end_ms=result.end_ms,
    )
    assert [x.endings for x in losses] == [len(ended)] and losses[0].recovered
    # at least the time from the first ending to the fix
    first_end = min(j.ended_ms for j in ended if j.ended_ms is not None)
    assert losses[0].minutes * 60_000 >= fixes[0][0] - first_end


def _account(key: str, losses: list[BugLoss]) -> Account:
    return Account(key, 2_048, [], 0.0, 0.0, 0.0, True, bugs=losses)


def test_the_table_gives_attempts_per_bug_and_gpu_hours_per_supervisor() -> None:
    bug = TraceBug(1, 10.0, "disk-full", "disk-full-torch-save-dolly-139", 1, 0.0)
    per_seed = [
        {
            "a": _account("a", [BugLoss(bug, 1, 60.0, True)]),
            "d": _account("d", [BugLoss(bug, 1, 30.0, True)]),
        },
        {
            "a": _account("a", [BugLoss(bug, 3, 90.0, True), BugLoss(bug, 1, 30.0, True)]),
            "d": _account("d", []),
        },
    ]
    lines = table(per_seed)
    assert lines[0] == HEADING
    rows = {line.split(" | ")[0].lstrip("| "): line for line in lines if line.startswith("| (")}
    assert set(rows) == {"(a) SageMaker RetryStrategy + person", "(d) sagewarden, recommended policy"}
    # (a): 3 bugs, 5 attempts, 1 (1-3) per bug; 2,048 GPUs x 1 h, then x 2 h: 2,048 (2,048-4,096) per seed
    assert rows["(a) SageMaker RetryStrategy + person"].endswith(
        "| 3 | 5 | 1 (1-3) | 3,072 (2,048-4,096) | 6,144 |"
    )
    assert rows["(d) sagewarden, recommended policy"].endswith("| 1 | 1 | 1 | 512 (0-1,024) | 1,024 |")


def test_a_bug_never_met_costs_nothing() -> None:
    bug = TraceBug(1, 10.0, "disk-full", "disk-full-torch-save-dolly-139", 1, 0.0)
    other = FaultRecord(0, "job", "llm-30d", "algorithm_error", 1, "001 faulty GPU / xid_crash", 5, 0, 5.0)
    assert bug_losses([bug], "llm-30d", [], [other], steps_per_minute=1.0, compile_min=0.0, end_ms=10) == []
