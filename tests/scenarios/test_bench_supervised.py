"""sagewarden driving the side-by-side benchmark's run through the real drill, with the person on
call taking over when it gives up."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.accounting import account
from benchmarks.person import Person
from benchmarks.supervised import run_sagewarden
from benchmarks.trace import Trace, TraceFault
from benchmarks.workload import Workload

SMALL = Workload(hosts=2, days=1.0)
PERSON = Person(seed=3)
MIN = 60_000


def _trace(*faults: tuple[float, str]) -> Trace:
    return Trace(
        seed=0,
        gpus=SMALL.gpus,
        hosts=SMALL.hosts,
        rate_multiplier=1.0,
        horizon_hours=48,
        faults=tuple(
            TraceFault(i, healthy, "test", manifestation, 2, False, None)
            for i, (healthy, manifestation) in enumerate(faults, start=1)
        ),
    )


def _scored(who: str, trace: Trace, result: Any) -> Any:
    """The supervised drill's result scored as `make bench` scores it."""
    return account(
        who,
        SMALL,
        trace,
        result.jobs,
        result.records,
        start_ms=result.start_ms,
        end_ms=result.end_ms,
        completed=True,
        faultfree_wall_min=SMALL.faultfree_minutes,
        decided_ms=result.decided_ms,
    )


@pytest.mark.claim("and sagewarden with its default (c) and recommended (d) policy")
def test_sagewarden_recovers_a_crash_and_a_hang_by_itself(template: dict[str, Any]) -> None:
    trace = _trace((75.0, "xid_crash"), (400.0, "nccl_spin"))
    result = run_sagewarden(SMALL, trace, PERSON, template, policy={"log_silence_minutes": 15})
    assert result.completed and result.actions == []  # nobody was paged
    assert result.drill.invariant_violations == []  # one job at a time, every AWS call allowed by IAM
    a = _scored("c", trace, result)
    crash, hang = a.losses
    assert crash.minutes[0] < 0.5  # the failure event, 1-20 s
    # an Xid crash is an AlgorithmError: SageMaker keeps the pool, bad GPU and all; the cold
    # replacement does not wait for it to be gone (stop bucket 0): it asks for another volume size,
    # which SageMaker's matching never gives that pool
    first, after_crash, after_hang = sorted(result.jobs, key=lambda j: j.created_ms)
    assert crash.minutes[1] == 0 and not after_crash.warm_pool_used
    volume = [j.request["ResourceConfig"]["VolumeSizeInGB"] for j in (first, after_crash, after_hang)]
    assert volume[1] == volume[0] - 1 and volume[2] == volume[1]  # the resume after the spin: its pool
    assert after_hang.warm_pool_used  # a spin singles out no host: the resume runs on its pool
    assert crash.minutes[3] == pytest.approx(11.0)  # step 71, checkpoint 60
    # the window learned from the job's cadence (it logs every minute: the 5-minute floor, not the
    # policy's 15), the evaluation range, delivery
    assert 5 <= hang.minutes[0] <= 5 + 4
    # SIGKILL after 120 s, then the relaunch once SageMaker reports the pool Available (drawn
    # 0-10 min; the resume waits for it at most 5), on which the replacement starts in 35 s
    assert 1.5 <= hang.minutes[1] <= 2.5 + 5 + 1
    assert hang.minutes[2] == pytest.approx(35 / 60, abs=0.1)


@pytest.mark.claim(
    "(seed 1, 60 faults in 2.5 days of work): (d) loses 0.239 of the best peer's GPU-hours above the floor ((e2) there); it never gave up"
)
def test_the_person_resubmits_when_sagewarden_gives_up(template: dict[str, Any]) -> None:
    # an OOM is a user error by default policy: sagewarden fails the run and pages
    trace = _trace((75.0, "oom"))
    result = run_sagewarden(SMALL, trace, PERSON, template)
    assert result.completed and result.drill.invariant_violations == []
    page, resubmit = result.actions
    assert page[1] == "page: sagewarden gave up" and resubmit[1] == "person: resubmit run"
    assert resubmit[0] - page[0] == PERSON.paged_delay_ms(1, 0)
    assert len({j.run_id for j in result.jobs}) == 2  # a second sagewarden run
    last = max(result.jobs, key=lambda j: j.created_ms)
    assert last.start_step == 60 and last.status == "Completed"  # it resumed from the checkpoint
    # the run that gave up keeps its audit in the timeline: its decisions are scored (before: only
    # the resubmitted run's were, so every earlier fault's detection ran to the next launch)
    first = min(result.jobs, key=lambda j: j.created_ms)
    assert first.ended_ms is not None and any(t <= first.ended_ms for t in result.decided_ms)
    assert {row.run for row in result.drill.timeline if row.kind == "decision"} == {SMALL.name}


@pytest.mark.claim("Six supervisors each really call the simulated SageMaker")
@pytest.mark.claim("One function scores them all; a stop where no fault was costs its GPU-hours in full")
def test_every_supervisor_is_scored_by_the_one_function_on_the_same_inputs(
    template: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # run_one is what `make bench` runs for every supervisor: each of the six goes through
    # accounting.account with the same workload, trace and fault-free wall clock
    from benchmarks import sidebyside

    calls: list[tuple[str, Workload, Trace, float]] = []

    def spy(label: str, workload: Workload, trace: Trace, *args: Any, **kwargs: Any) -> Any:
        calls.append((label, workload, trace, kwargs["faultfree_wall_min"]))
        return account(label, workload, trace, *args, **kwargs)

    monkeypatch.setattr(sidebyside, "account", spy)
    trace = _trace((75.0, "xid_crash"))
    faultfree = 1_234.5  # any value: it must reach the scoring unchanged for every supervisor
    results = {
        key: sidebyside.run_one(key, SMALL, trace, PERSON, template, 1, faultfree)
        for key in sidebyside.SUPERVISORS
    }
    assert [label for label, *_ in calls] == [sidebyside.LABELS[k] for k in sidebyside.SUPERVISORS]
    assert all(w is SMALL and t is trace and ff == faultfree for _, w, t, ff in calls)
    for key, r in results.items():
        assert r.account.supervisor == sidebyside.LABELS[key]
        (loss,) = r.account.losses  # the one crash, met by everyone, with the same floor rules
        assert loss.fault is trace.faults[0]
    floors = {key: r.account.losses[0].floor[1:] for key, r in results.items()}  # stop, start, work
    assert len(set(floors.values())) == 1, floors


def test_a_lemon_stopped_at_its_fingerprint_line_is_its_fault_met_again_not_a_false_stop(
    template: dict[str, Any],
) -> None:
    # a bad GPU whose host comes back on the next cold start; the bench's script prints the
    # contract's fingerprint line, so sagewarden restarts without the infra check and stops the
    # attempt the host came back on before it fails again (5 min into Training)
    lemon = TraceFault(1, 75.0, "test", "xid_crash", 2, True, None, returns_cold=1)
    trace = Trace(
        seed=0, gpus=SMALL.gpus, hosts=SMALL.hosts, rate_multiplier=1.0, horizon_hours=48, faults=(lemon,)
    )
    result = run_sagewarden(SMALL, trace, PERSON, template, policy={"keep_alive_seconds": 0})
    assert result.completed and result.actions == []
    _, back, third = sorted(result.jobs, key=lambda j: j.created_ms)
    assert "InfraCheckConfig" not in back.request and 2 in back._inherited  # the lemon, back
    assert back.ended_reason == "stopped" and "InfraCheckConfig" in third.request
    a = _scored("d", trace, result)
    assert not a.false_stops
    fault, again = a.losses
    assert not fault.again and again.again and again.fault == lemon
    assert again.floor == (0.0, 0.0, 0.0, 0.0) and sum(again.minutes) > 0  # its whole cost, counted
