"""Property tests: DESIGN.md's invariants hold for any sequence of events.

Events are generated relative to the run's current state (so they are meaningful: states of
the current or an earlier attempt, stale and duplicate deliveries, launch results, timers,
cancels, hang alarms, capacity releases) with time moving forward by random steps.
"""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sagewarden.domain.decide import decide
from sagewarden.domain.due import next_due_ms
from sagewarden.domain.vocabulary.actions import LaunchAttempt, ReleaseWarmPool, StopJob
from sagewarden.domain.vocabulary.events import (
    CancelRequested,
    CapacityReleased,
    HangSignal,
    JobMissing,
    JobObserved,
    LaunchAccepted,
    LaunchRejected,
    Observations,
    ResumeRequested,
    Submitted,
    Tick,
)
from sagewarden.domain.vocabulary.models import SM_TERMINAL, LaunchState, Run, RunStatus
from sagewarden.domain.vocabulary.policy import InstanceChoice, RunPolicy
from tests.builders import ckpt, make_run

STATES = [
    ("InProgress", "Starting"),
    ("InProgress", "Downloading"),
    ("InProgress", "Training"),
    ("Stopping", "Stopping"),
    ("Completed", "Completed"),
    ("Failed", "Failed"),
    ("Stopped", "Stopped"),
    ("Stopped", "MaxRuntimeExceeded"),
    ("Stopped", "Interrupted"),
]
REASONS = [
    None,
    "InternalServerError: We encountered an internal error.  Please try again.",
    "AlgorithmError: ExecuteUserScriptError:\nExitCode 1",
    "CapacityError: Unable to provision requested ML compute capacity.",
    "ClientError: Data download failed",
]
TAILS = [(), ("Watchdog caught collective operation timeout",), ("ModuleNotFoundError: No module named 'x'",)]
QUOTA = (
    "The account-level service limit 'ml.p4d.24xlarge for training job usage' is {l} Instances, with current "
    "utilization of 0 Instances and a request delta of 2 Instances."
)

move = st.tuples(
    st.sampled_from(
        [
            "observe",
            "observe_old",
            "accept",
            "reject",
            "tick",
            "cancel",
            "hang",
            "release",
            "missing",
            "submit",
            "resume",
            "pool",
        ]
    ),
    st.integers(0, 8),  # which state / variant
    st.integers(0, 4),  # reason / tail / checkpoint variant
    st.integers(0, 180),  # minutes to advance
    st.booleans(),  # stale timestamp?
)

policies = st.builds(
    RunPolicy,
    max_restarts=st.integers(0, 4),
    max_no_progress_restarts=st.integers(1, 3),
    hang_confirmation=st.sampled_from(["any", "2-of-3"]),
    instance_fallbacks=st.sampled_from([(), (InstanceChoice("ml.p4de.24xlarge", 2),)]),
    max_cost_usd=st.sampled_from([None, 500.0]),
    max_wall_clock_hours=st.sampled_from([24.0 * 90, 12.0]),
)


def _event(run: Run, m: tuple[str, int, int, int, bool], now: int):
    kind, a, b, _, stale = m
    cur = run.current
    if kind == "submit":
        return Submitted(), Observations()
    if kind == "tick":
        return Tick(), Observations(checkpoint=ckpt(100 * b) if b else None)
    if kind == "cancel":
        return CancelRequested("tester"), Observations()
    if kind == "resume":
        return ResumeRequested("tester"), Observations(checkpoint=ckpt(100 * b) if b else None)
    if kind == "release":
        return CapacityReleased("ml.p4d.24xlarge", 2), Observations()
    if cur is None:
        return Tick(), Observations()
    if kind == "accept":
        return LaunchAccepted(cur.number, already_existed=b == 0), Observations()
    if kind == "reject":
        code, msg = [
            ("ResourceLimitExceeded", QUOTA.format(l=4)),
            ("ResourceLimitExceeded", QUOTA.format(l=1)),
            ("ThrottlingException", "Rate exceeded"),
            ("ValidationException", "bad"),
            ("ResourceLimitExceeded", QUOTA.format(l=4)),
        ][b]
        return LaunchRejected(cur.number, code, msg), Observations()
    if kind == "missing":
        return JobMissing(cur.job_name, cur.number), Observations()
    if kind == "hang":
        sig = ["log_silence", "gpu_idle"][a % 2]
        state = "ALARM" if a < 6 else "OK"
        return HangSignal(cur.job_name, cur.number, sig, state, now), Observations(log_tail=("x",))
    if kind == "pool":  # the sweep's DescribeTrainingJob of an attempt, with its WarmPoolStatus
        number = max(1, cur.number - a % 2)
        status, secondary = STATES[4 + a % 5]
        pool = [None, "Available", "Terminated", "Reused", "InUse"][b]
        event = JobObserved(
            cur.job_name[:-3] + f"{number:03d}",
            number,
            status,
            secondary,
            now - 3_600_000 if stale else now,
            failure_reason=REASONS[a % 5] if status == "Failed" else None,
            source="describe",
            warm_pool_status=pool,
            warm_pool_billable_s=60 * a if pool else None,
        )
        return event, Observations(checkpoint=ckpt(100 * b) if b else None)
    number = cur.number if kind == "observe" else max(1, cur.number - 1)
    job = cur.job_name if kind == "observe" else cur.job_name[:-3] + f"{number:03d}"
    status, secondary = STATES[a]
    at = now - 3_600_000 if stale else now
    event = JobObserved(
        job, number, status, secondary, at, failure_reason=REASONS[b] if status == "Failed" else None
    )
    return event, Observations(checkpoint=ckpt(100 * (b + a)) if b else None, log_tail=TAILS[b % 3])


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
