"""Property tests: DESIGN.md's invariants hold for any sequence of events.

Events are generated relative to the run's current state (so they are meaningful: states of
the current or an earlier attempt, stale and duplicate deliveries, launch results, timers,
cancels, hang alarms, capacity releases) with time moving forward by random steps.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sagewarden.domain.decide import decide
from sagewarden.domain.due import next_due_ms
from sagewarden.domain.vocabulary.actions import LaunchAttempt, ReleaseWarmPool, StopJob
from sagewarden.domain.vocabulary.events import (
    ResumeRequested,
)
from sagewarden.domain.vocabulary.models import SM_TERMINAL, LaunchState, RunStatus
from sagewarden.domain.vocabulary.policy import RunPolicy
from tests.builders import make_run
from tests.unit.domain.builders import _event, move, policies


@pytest.mark.claim("never forgets a run")
@pytest.mark.claim(
    "A quota- or throttle-rejected launch keeps its number. No job was created, so the name is free. Numbers stay contiguous, and no number is ever used for two jobs."
)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(policy=policies, moves=st.lists(move, min_size=1, max_size=40))
def test_decide_invariants_hold_for_any_event_sequence(policy: RunPolicy, moves):
    run = make_run(policy)
    now = 0
    launched: dict[int, str] = {}  # attempt number -> job name of every LaunchAttempt
    submitted_numbers: set[int] = set()
    for m in moves:
        now += m[3] * 60_000
        event, obs = _event(run, m, now)
        before = run
        d = decide(run, event, now, run.policy, obs)
        run = d.run

        # 4. terminal runs never change again (only the bookkeeping of stray jobs to stop and of
        # warm pools to release, whose billed time adds to the cost) -- except when a person
        # explicitly resumes a FAILED or CANCELLED one
        if before.status.terminal and not isinstance(event, ResumeRequested):
            kept = dataclasses.replace(
                run, strays=before.strays, warm_pools=before.warm_pools, cost_usd=before.cost_usd
            )
            assert kept == before
            assert run.cost_usd >= before.cost_usd
            assert all(isinstance(a, (StopJob, ReleaseWarmPool)) for a in d.actions)
        # 6. every action follows a decision that names its cause
        if d.actions:
            assert d.notes
        # 1. at most one live attempt; a launch only when no other attempt may be running
        live = [a for a in run.attempts if a.live]
        assert len(live) <= 1
        for action in d.actions:
            if isinstance(action, LaunchAttempt):
                others = [a for a in run.attempts if a.live and a.number != action.attempt]
                assert not others, f"launch of {action.attempt} while {others[0].number} may run"
                # 3. an attempt number is launched under one name only, and a number SageMaker
                # accepted is never launched again as a new job
                assert launched.setdefault(action.attempt, action.job_name) == action.job_name
                prev = next((a for a in before.attempts if a.number == action.attempt), None)
                assert prev is None or prev.launch in (LaunchState.PENDING, LaunchState.WAITING)
        # 3. attempt numbers are contiguous
        numbers = [a.number for a in run.attempts]
        assert numbers == list(range(1, len(numbers) + 1))
        assert run.attempt_count == len(numbers)
        # 5. an attempt's recorded SageMaker state never moves backwards
        old = {a.number: a for a in before.attempts}
        for a in run.attempts:
            if a.number in old:
                o = old[a.number]
                assert a.sm_modified_ms >= o.sm_modified_ms
                if o.ended:
                    assert a == o
                if o.sm_status in SM_TERMINAL:
                    assert a.sm_status == o.sm_status
            if a.launch == LaunchState.SUBMITTED:
                submitted_numbers.add(a.number)
        # 2. a non-terminal run always has a way forward
        if not run.status.terminal:
            due = next_due_ms(run, now)
            assert due is not None
            cur = run.current
            way = (
                (run.status == RunStatus.RETRY_WAIT and run.wake_at_ms is not None)
                or (cur is not None and cur.live)
                or (run.status == RunStatus.SUBMITTED and cur is None)
            )
            assert way, f"{run.status} with no live job, no wake-up and nothing to launch"
