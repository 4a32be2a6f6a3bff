"""Shared builders of the bench tests: a small account and person for side-by-side runs."""

from __future__ import annotations

from benchmarks.accounting import account
from benchmarks.baselines import BaselineResult
from benchmarks.person import Person
from benchmarks.trace import (
    Trace,
)
from benchmarks.workload import Workload

# 2 hosts x 8 GPUs, one step a minute, a checkpoint every 30 steps written in 2 min, 8-min cold start
SMALL = Workload(hosts=2, days=1.0)


PERSON = Person(seed=3)


def _account(result: BaselineResult, trace: Trace):
    return account(
        result.kind,
        SMALL,
        trace,
        result.jobs,
        result.sim.fault_records,
        start_ms=result.start_ms,
        end_ms=result.end_ms,
        completed=result.completed,
        faultfree_wall_min=SMALL.faultfree_minutes,
    )
