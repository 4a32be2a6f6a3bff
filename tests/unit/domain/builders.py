"""Shared builders of the domain tests: meaningful random event sequences for property tests."""

from __future__ import annotations

from hypothesis import strategies as st

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
from sagewarden.domain.vocabulary.models import Run
from sagewarden.domain.vocabulary.policy import InstanceChoice, RunPolicy
from tests.builders import ckpt

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
