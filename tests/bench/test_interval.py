"""The checkpoint-interval part of the benchmark: the advice sagewarden gives during a supervised
drill, the same work re-planned with the advised interval, and the saving arithmetic."""

from __future__ import annotations

import math

import pytest

from benchmarks.accounting import Account
from benchmarks.interval import IntervalComparison, render, told_text
from benchmarks.person import Person
from benchmarks.supervised import RECOMMENDED_POLICY, run_sagewarden
from benchmarks.trace import Trace, TraceFault
from benchmarks.workload import Workload
from drill.account.local import drill_template
from sagewarden.domain.vocabulary.advice import CheckpointAdvice

SMALL = Workload(hosts=2, days=1.0)  # 16 GPUs, a step a minute, a checkpoint every 30 steps (2-min write)


def _advice(optimal_min: float | None, saved: float | None = 40.0) -> CheckpointAdvice:
    return CheckpointAdvice(
        gpus=16,
        interval_min=32.0,
        write_s=120.0,
        mtbf_h=25.0,
        faults=3,
        training_h=70.0,
        optimal_min=optimal_min,
        lost_fraction_now=0.07,
        lost_fraction_optimal=0.05,
        gpu_hours_per_day_saved=saved,
    )


def _account(wall_min: float) -> Account:
    return Account(
        "x", gpus=16, losses=[], wall_min=wall_min, useful_min=1000, faultfree_wall_min=900, completed=True
    )


@pytest.mark.claim(
    "(d) told its attempts 58-84 minutes (Young/Daly) where the script's own interval is 30; the same work finished 0.28 days sooner than with the policy off, 13,687 GPU-hours saved"
)
def test_the_saving_is_the_wall_clock_difference_times_the_gpus() -> None:
    cmp = IntervalComparison(_advice(77.0), SMALL, (61, 77), _account(2880.0), _account(2700.0))
    assert cmp.saved_gpu_hours == 16 * 180 / 60  # 3 hours of 16 GPUs
    assert math.isclose(cmp.saved_per_day, 48 / 2)  # over a 2-day run
    text = "\n".join(render(cmp))
    assert "48 GPU-hours" in text and "predicted 40" in text
    assert "61-77 min to 2 of its attempts" in text and "every 30 min throughout (policy off)" in text


def test_told_intervals_are_summarised() -> None:
    assert told_text(()) == "none told"
    assert told_text((84, 84)) == "84 min to 2 of its attempts"


@pytest.mark.claim(
    "(d) told its attempts 58-84 minutes (Young/Daly) where the script's own interval is 30; the same work finished 0.28 days sooner than with the policy off, 13,687 GPU-hours saved"
)
def test_a_supervised_drill_reports_the_advice_it_measured() -> None:
    fault = TraceFault(
        index=1,
        healthy_min=200,
        cause="test",
        manifestation="hardware_reason",
        host=2,
        hardware=True,
        restart_capacity_min=None,
    )
    trace = Trace(
        seed=0, gpus=SMALL.gpus, hosts=SMALL.hosts, rate_multiplier=1.0, horizon_hours=48, faults=(fault,)
    )
    result = run_sagewarden(SMALL, trace, Person(seed=3), drill_template(), policy=RECOMMENDED_POLICY)
    assert result.completed
    advice = result.advice
    assert advice is not None
    # the save's objects and marker, its start before the first object estimated: the whole write
    assert advice.write_s is not None and math.isclose(
        advice.write_s, SMALL.checkpoint_write_seconds, rel_tol=0.05
    )
    assert advice.faults == 1
    c_h, m_h = advice.write_s / 3600, advice.mtbf_h
    assert advice.optimal_min is not None and math.isclose(advice.optimal_min, 60 * math.sqrt(2 * c_h * m_h))
    # the second attempt was told an interval (the recommended policy applies the advice), and the
    # script (the bench's contract) checkpoints at it
    told = [(j.request.get("Environment") or {}).get("SAGEWARDEN_CHECKPOINT_MINUTES") for j in result.jobs]
    assert told[0] is None and told[-1] is not None and int(told[-1]) > 30
    assert result.jobs[-1].profile.checkpoint_every_steps == round(int(told[-1]) * SMALL.steps_per_minute)
