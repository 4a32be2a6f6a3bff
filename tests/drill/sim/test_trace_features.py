"""Simulator features the side-by-side benchmark needs: SageMaker's own RetryStrategy, faults on
the run's healthy operating clock, a spin before a crash, retired instances, capacity at restart
and the per-fault records the loss accounting reads."""

from __future__ import annotations

import boto3
import pytest

from drill.clock import VirtualClock
from drill.sim.model import Fault, JobProfile
from drill.sim.sagemaker import SimSageMaker
from drill.sim.texts import CAPACITY_FAILURE_REASON, INTERNAL_ERROR_REASON
from tests.drill.sim.builders import BUCKET, GPU_NS, HB_NS, MIN, REGION, Recorder, drain, request


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


@pytest.fixture
def sim(aws: None, rec: Recorder) -> SimSageMaker:
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=BUCKET)
    return SimSageMaker(VirtualClock(), s3_client=s3, emit=rec)


# 1 step a minute, a checkpoint every 30 steps written in 2 minutes: 30 min train + 2 min save
PROFILE = JobProfile(
    total_steps=10_000, steps_per_minute=1, checkpoint_every_steps=30, checkpoint_write_seconds=120
)
START_MS = 8 * MIN  # provision 6 min + download 2 min


def _training_at(sim: SimSageMaker, name: str) -> int:
    started = sim.job(name).training_started_ms
    assert started is not None
    return started


def _run_until_ended(sim: SimSageMaker, name: str, limit_min: int = 2_000) -> None:
    """Advance change by change until the job has ended (not further)."""
    limit = sim.clock.now_ms + limit_min * MIN
    while not sim.job(name).is_terminal:
        t = sim.next_event_time()
        assert t is not None and t <= limit, f"{name} is still {sim.job(name).secondary}"
        sim.advance(t)


# ----------------------------------------------------------------------------------------------
# RetryStrategy
# ----------------------------------------------------------------------------------------------


def test_retry_strategy_restarts_the_same_job_from_its_newest_checkpoint(
    sim: SimSageMaker, rec: Recorder
) -> None:
    sim.set_profile("r1", PROFILE)
    t0 = sim.clock.now_ms
    sim.create_training_job(**request("job-a01", retries=1))
    sim.inject(Fault(kind="internal_error", after_training_min=75))  # 2 checkpoints done (30, 60), step 71
    drain(sim, until_ms=t0 + START_MS + 75 * MIN)
    job = sim.job("job-a01")
    assert (job.status, job.secondary) == ("InProgress", "Starting")
    assert job.retries[0]["step"] == 71 and job.retries[0]["start_step"] == 60
    assert job.failure_reason is None and job.ended_ms is None
    assert rec.states("job-a01")[-1] == ("InProgress", "Starting")
    assert all(s != "Failed" for s, _ in rec.states("job-a01"))

    drain(sim, until_ms=sim.clock.now_ms + 20 * MIN)  # cold start again: 8 min
    retried_at = t0 + START_MS + 75 * MIN
    assert job.retries[0]["training_ms"] == retried_at + START_MS
    assert job.training_started_ms == t0 + START_MS  # the first try's
    d = sim.describe_training_job(TrainingJobName="job-a01")
    assert d["SecondaryStatus"] == "Training"
    assert d["TrainingStartTime"].timestamp() * 1000 == t0 + 6 * MIN  # TrainingStartTime kept
    assert [t["Status"] for t in d["SecondaryStatusTransitions"]] == [
        "Starting",
        "Downloading",
        "Training",
        "Starting",
        "Downloading",
        "Training",
    ]
    assert "Retrying" in d["SecondaryStatusTransitions"][3]["StatusMessage"]
    assert job.step == 60 + 12  # resumed at 60, 12 minutes of training since
    assert "Resuming training from global step 60" in sim.log_tail("job-a01", 1, 50)


def test_retry_strategy_is_exhausted_then_the_job_fails(sim: SimSageMaker, rec: Recorder) -> None:
    sim.create_training_job(**request("job-a01", retries=1))
    sim.inject(Fault(kind="internal_error", after_training_min=5, once=False))
    _run_until_ended(sim, "job-a01")
    job = sim.job("job-a01")
    assert len(job.retries) == 1
    assert job.status == "Failed" and job.failure_reason == INTERNAL_ERROR_REASON
    assert [s for s, _ in rec.states("job-a01")].count("Failed") == 1


@pytest.mark.parametrize("kind", ["hardware", "algorithm_error"])
def test_retry_strategy_retries_internal_errors_only(sim: SimSageMaker, kind: str) -> None:
    sim.create_training_job(**request("job-a01", retries=3))
    sim.inject(Fault(kind=kind, after_training_min=5))
    _run_until_ended(sim, "job-a01")
    assert sim.job("job-a01").status == "Failed" and sim.job("job-a01").retries == []


def test_retry_strategy_max_runtime_counts_every_try(sim: SimSageMaker) -> None:
    sim.set_profile("r1", PROFILE)
    t0 = sim.clock.now_ms
    sim.create_training_job(**request("job-a01", retries=1, max_runtime=60 * 60))
    sim.inject(Fault(kind="internal_error", after_training_min=40))
    _run_until_ended(sim, "job-a01")
    job = sim.job("job-a01")
    assert job.status == "Stopped" and job.secondary == "MaxRuntimeExceeded"
    # 40 min in the first try, so the retry may train 20 more (it entered Training 8 min after the error)
    retry_training = t0 + START_MS + 40 * MIN + START_MS
    assert job.stop_requested_ms == retry_training + 20 * MIN


# ----------------------------------------------------------------------------------------------
# Faults on the run's healthy operating clock
# ----------------------------------------------------------------------------------------------


def test_run_clock_fault_counts_healthy_training_across_attempts(sim: SimSageMaker) -> None:
    sim.set_profile("r1", PROFILE)
    sim.create_training_job(**request("job-a01"))
    sim.inject(Fault(kind="hardware", run="r1", attempt=1, after_training_min=50))
    sim.inject(Fault(kind="algorithm_error", run="r1", after_run_training_min=70, label="trace-2"))
    _run_until_ended(sim, "job-a01")
    assert sim.job("job-a01").ended_reason == "hardware"  # 50 healthy minutes (train, save, train)
    sim.create_training_job(**request("job-a02", attempt=2))
    _run_until_ended(sim, "job-a02")
    record = sim.fault_records[-1]
    assert (record.job, record.kind, record.label) == ("job-a02", "algorithm_error", "trace-2")
    assert record.at_ms == _training_at(sim, "job-a02") + 20 * MIN


def test_run_clock_stops_while_the_job_hangs(sim: SimSageMaker) -> None:
    sim.set_profile("r1", PROFILE)
    sim.create_training_job(**request("job-a01"))
    sim.inject(Fault(kind="hang_spin", run="r1", after_run_training_min=20))
    sim.inject(Fault(kind="algorithm_error", run="r1", after_run_training_min=40))
    drain(sim, until_ms=_training_at_after(sim, "job-a01") + 100 * MIN)
    assert sim.job("job-a01").status == "InProgress"  # hung for 80 min: the crash did not come
    assert [r.kind for r in sim.fault_records] == ["hang_spin"]
    sim.stop_training_job(TrainingJobName="job-a01")
    _run_until_ended(sim, "job-a01")
    sim.create_training_job(**request("job-a02", attempt=2))
    _run_until_ended(sim, "job-a02")
    assert sim.fault_records[-1].at_ms == _training_at(sim, "job-a02") + 20 * MIN
    assert sim.run_healthy_ms("r1", sim.clock.now_ms) == 40 * MIN


def _training_at_after(sim: SimSageMaker, name: str) -> int:
    drain(sim, until_ms=sim.clock.now_ms + 10 * MIN)
    return _training_at(sim, name)


def test_fault_records_carry_the_step_and_the_newest_checkpoint(sim: SimSageMaker) -> None:
    sim.set_profile("r1", PROFILE)
    sim.create_training_job(**request("job-a01"))
    sim.inject(Fault(kind="dead_host", run="r1", after_run_training_min=75, host=2, label="gpu"))
    drain(sim, until_ms=sim.clock.now_ms + 100 * MIN)
    (record,) = sim.fault_records
    # 75 healthy minutes: 30 train + 2 save + 30 train + 2 save + 11 train -> step 71, checkpoint 60
    assert (record.step, record.checkpoint_step, record.host, record.label) == (71, 60, 2, "gpu")


# ----------------------------------------------------------------------------------------------
# Manifestations
# ----------------------------------------------------------------------------------------------

WATCHDOG = (
    "[E ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE)"
)


def test_spin_before_crash_spins_silently_then_fails_with_the_line(sim: SimSageMaker) -> None:
    sim.create_training_job(**request("job-a01"))
    sim.inject(
        Fault(kind="algorithm_error", after_training_min=20, hang_before_crash_min=10, log_lines=(WATCHDOG,))
    )
    drain(sim, until_ms=sim.clock.now_ms + START_MS + 25 * MIN)
    job = sim.job("job-a01")
    onset = _training_at(sim, "job-a01") + 20 * MIN
    assert job.status == "InProgress" and sim.fault_records[0].at_ms == onset
    gpu = sim.metric_datapoints(
        GPU_NS, "GPUUtilization", {"Host": "job-a01/algo-1"}, onset, onset + 5 * MIN, 60, "Average"
    )
    assert len(gpu) == 5 and all(v > 700 for _, v in gpu)  # spinning
    beats = sim.metric_datapoints(
        HB_NS, "LogEvents", {"TrainingJobName": "job-a01"}, onset, onset + 5 * MIN, 60, "Sum"
    )
    assert beats == []  # silent
    _run_until_ended(sim, "job-a01")
    assert job.status == "Failed" and job.ended_ms == onset + 10 * MIN
    assert "Watchdog caught collective operation timeout" in (job.failure_reason or "")


def test_spin_before_crash_stopped_first_ends_stopped(sim: SimSageMaker) -> None:
    sim.create_training_job(**request("job-a01"))
    sim.inject(
        Fault(kind="algorithm_error", after_training_min=20, hang_before_crash_min=10, log_lines=(WATCHDOG,))
    )
    drain(sim, until_ms=sim.clock.now_ms + START_MS + 24 * MIN)
    sim.stop_training_job(TrainingJobName="job-a01")
    _run_until_ended(sim, "job-a01")
    job = sim.job("job-a01")
    assert job.status == "Stopped" and job.failure_reason is None
    assert job.ended_ms == job.stop_requested_ms + 2 * MIN  # hung: SIGKILL after 120 s


def test_spin_before_crash_in_a_checkpoint_save_leaves_the_save_unfinished(sim: SimSageMaker) -> None:
    # the collective hangs during the save 30 steps in: its marker never lands, so the run's newest
    # complete checkpoint stays what it was at the onset (what the fault record says)
    sim.set_profile("r1", PROFILE)
    sim.create_training_job(**request("job-a01"))
    sim.inject(
        Fault(
            kind="algorithm_error",
            run="r1",
            after_run_training_min=31,
            hang_before_crash_min=10,
            log_lines=(WATCHDOG,),
        )
    )
    _run_until_ended(sim, "job-a01")
    job = sim.job("job-a01")
    (record,) = sim.fault_records
    assert (record.step, record.checkpoint_step) == (30, 0)
    assert job.status == "Failed" and job.checkpoints == []


def test_restart_capacity_delays_the_runs_next_job_then_fails_it(sim: SimSageMaker) -> None:
    sim.create_training_job(**request("job-a01"))
    sim.inject(Fault(kind="hardware", run="r1", after_training_min=10, restart_capacity_min=40))
    _run_until_ended(sim, "job-a01")
    t1 = sim.clock.now_ms
    sim.create_training_job(**request("job-a02", attempt=2))
    _run_until_ended(sim, "job-a02")
    job = sim.job("job-a02")
    assert job.status == "Failed" and job.failure_reason == CAPACITY_FAILURE_REASON
    assert job.ended_ms == t1 + 2 * MIN + 40 * MIN  # Pending after 2 min, for 40 min
    sim.create_training_job(**request("job-a03", attempt=3))  # consumed: the next one starts
    drain(sim, until_ms=sim.clock.now_ms + 10 * MIN)
    assert sim.job("job-a03").secondary == "Training"


def test_restart_capacity_applies_to_a_retry_too(sim: SimSageMaker) -> None:
    sim.create_training_job(**request("job-a01", retries=2))
    sim.inject(Fault(kind="internal_error", run="r1", after_training_min=10, restart_capacity_min=30))
    _run_until_ended(sim, "job-a01")
    job = sim.job("job-a01")
    assert len(job.retries) == 1 and job.status == "Failed"
    assert job.failure_reason == CAPACITY_FAILURE_REASON


# ----------------------------------------------------------------------------------------------
# What the drill's invariant check reads
# ----------------------------------------------------------------------------------------------


def test_runs_with_several_live_jobs_are_kept_up_to_date(sim: SimSageMaker) -> None:
    sim.create_training_job(**request("job-a01", run_id="RUN-A"))
    sim.create_training_job(**request("job-b01", run="r2", run_id="RUN-B"))
    assert sim.runs_with_several_live_jobs() == {} and sim.live_count == 2
    sim.create_training_job(**request("job-a02", attempt=2, run_id="RUN-A"))  # two at once for RUN-A
    assert sim.runs_with_several_live_jobs() == {"RUN-A": ["job-a01", "job-a02"]}
    sim.stop_training_job(TrainingJobName="job-a01")
    _run_until_ended(sim, "job-a01")
    assert sim.runs_with_several_live_jobs() == {} and sim.live_jobs("RUN-A") == ["job-a02"]
    assert sim.live_count == 2
