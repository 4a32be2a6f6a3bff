"""Training Plans of the simulated SageMaker (drill/sim/training_plans.py; docs/fidelity.md has one
row per behaviour)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from drill.clock import VirtualClock
from drill.sim.model import JobProfile
from drill.sim.sagemaker import SimSageMaker
from drill.sim.training_plans import (
    EXPIRATION_ENV,
    INSUFFICIENT_CAPACITY_REASON,
    PLAN_TERMINATED_REASON,
)
from tests.drill.sim.builders import BUCKET, ITYPE, MIN, code_of, drain, request, run_until

HOUR = 60 * MIN


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def s3(aws: None) -> Any:
    client = boto3.client("s3", region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    return client


@pytest.fixture
def sim(clock: VirtualClock, s3: Any) -> SimSageMaker:
    sm = SimSageMaker(clock, s3_client=s3)
    t0 = clock.now_ms
    # two windows: [1 h, 5 h) and [11 h, 15 h) from now; 2 instances
    sm.training_plans.add("plan-a", ITYPE, 2, [(t0 + HOUR, t0 + 5 * HOUR), (t0 + 11 * HOUR, t0 + 15 * HOUR)])
    sm.set_profile("r1", JobProfile(total_steps=100_000, steps_per_minute=1, checkpoint_every_steps=30))
    return sm


def plan_arn(sim: SimSageMaker) -> str:
    return sim.training_plans.plans()[0].arn


def on_plan(sim: SimSageMaker, name: str, **kw: Any) -> dict[str, Any]:
    req = request(name, **kw)
    req["ResourceConfig"]["TrainingPlanArn"] = plan_arn(sim)
    return req


def test_describe_training_plan_follows_the_windows_scheduled_active_scheduled_expired(
    sim: SimSageMaker, clock: VirtualClock
) -> None:
    t0 = clock.now_ms
    seen = []
    for at_h in (0, 2, 7, 12, 16):
        drain(sim, until_ms=t0 + at_h * HOUR)
        out = sim.describe_training_plan(TrainingPlanName="plan-a")
        seen.append((out["Status"], [c["Status"] for c in out["ReservedCapacitySummaries"]]))
    assert seen == [
        ("Scheduled", ["Scheduled", "Scheduled"]),
        ("Active", ["Active", "Scheduled"]),
        ("Scheduled", ["Expired", "Scheduled"]),  # between two windows the plan reverts to Scheduled
        ("Active", ["Expired", "Active"]),
        ("Expired", ["Expired", "Expired"]),
    ]
    out = sim.describe_training_plan(TrainingPlanName="plan-a")
    assert out["TotalInstanceCount"] == 2 and out["DurationHours"] == 8
    assert out["TrainingPlanArn"].endswith(":training-plan/plan-a")
    with pytest.raises(ClientError) as err:
        sim.describe_training_plan(TrainingPlanName="nope")
    assert code_of(err)[0] == "ResourceNotFound"


def test_describe_training_plan_takes_the_plans_name_and_refuses_its_arn(sim: SimSageMaker) -> None:
    """The API Reference: TrainingPlanName is "the name of the training plan to describe", 1-64
    characters matching the name pattern; botocore's shape would take an ARN too. The simulator
    takes the stricter source, so a supervisor sending the ARN fails here as it may on AWS."""
    import botocore.session

    from drill.sim.training_plans import PLAN_NAME_PATTERN

    model = botocore.session.get_session().get_service_model("sagemaker")
    member = model.operation_model("DescribeTrainingPlan").input_shape.members["TrainingPlanName"]
    assert member.metadata["pattern"].endswith(")?" + PLAN_NAME_PATTERN)  # botocore: ARN prefix optional
    assert sim.describe_training_plan(TrainingPlanName="plan-a")["TrainingPlanName"] == "plan-a"
    with pytest.raises(ClientError) as err:
        sim.describe_training_plan(TrainingPlanName=plan_arn(sim))
    code, message = code_of(err)
    assert code == "ValidationException"
    assert "at 'trainingPlanName' failed to satisfy constraint" in message and PLAN_NAME_PATTERN in message


def test_a_job_on_a_plan_waits_pending_until_the_window_opens_and_gets_its_expiration(
    sim: SimSageMaker, clock: VirtualClock
) -> None:
    t0 = clock.now_ms
    sim.create_training_job(**on_plan(sim, "job-a01"))
    drain(sim, until_ms=t0 + 30 * MIN)
    job = sim.job("job-a01")
    assert (job.status, job.secondary) == ("InProgress", "Pending")
    assert sim.training_plans.environment("job-a01") == {}
    run_until(sim, lambda: job.training_started_ms is not None)
    provision = (sim.startup.provision_s + sim.startup.download_s) * 1000
    assert job.training_started_ms == t0 + HOUR + provision
    assert sim.training_plans.environment("job-a01") == {EXPIRATION_ENV: str(t0 + 5 * HOUR)}


def test_instances_are_terminated_30_min_before_the_window_ends_and_the_job_fails_like_a_crash(
    sim: SimSageMaker, clock: VirtualClock
) -> None:
    t0 = clock.now_ms
    sim.create_training_job(**on_plan(sim, "job-a01"))
    run_until(sim, lambda: sim.job("job-a01").is_terminal)
    job = sim.job("job-a01")
    assert job.status == "Failed" and job.ended_ms == t0 + 5 * HOUR - 30 * MIN
    assert job.failure_reason == PLAN_TERMINATED_REASON
    assert job.failure_reason.startswith("InternalServerError")  # reads like an instance failure
    assert sim.training_plans.terminated == [(t0 + 5 * HOUR - 30 * MIN, "job-a01")]


def test_a_retry_strategy_retries_the_termination_and_the_job_waits_for_the_next_window(
    sim: SimSageMaker, clock: VirtualClock
) -> None:
    """AWS does not say that a window's end skips the job's own RetryStrategy, and the
    termination reads as an InternalServerError, the failure it retries: the unkind reading. The
    job goes back to Starting in the same job (no Failed state), waits Pending for the plan, and
    trains again in the next window, which its environment then names."""
    t0 = clock.now_ms
    sim.create_training_job(**on_plan(sim, "job-a01", retries=2))
    run_until(sim, lambda: sim.training_plans.terminated != [])
    job = sim.job("job-a01")
    assert sim.training_plans.terminated == [(t0 + 5 * HOUR - 30 * MIN, "job-a01")]
    assert (job.status, job.secondary) == ("InProgress", "Pending") and len(job.retries) == 1
    assert "Failed" not in [tr["Status"] for tr in job.transitions]
    run_until(sim, lambda: sim.job("job-a01").secondary == "Training" and clock.now_ms > t0 + 6 * HOUR)
    assert clock.now_ms >= t0 + 11 * HOUR  # not before the next window opened
    env = sim.training_plans.environment("job-a01")
    assert env[EXPIRATION_ENV] == str(t0 + 15 * HOUR)


def test_a_stop_before_termination_ends_the_job_stopped_not_terminated(
    sim: SimSageMaker, clock: VirtualClock
) -> None:
    t0 = clock.now_ms
    sim.create_training_job(**on_plan(sim, "job-a01"))
    drain(sim, until_ms=t0 + 5 * HOUR - 35 * MIN)
    sim.stop_training_job(TrainingJobName="job-a01")
    run_until(sim, lambda: sim.job("job-a01").is_terminal)
    assert sim.job("job-a01").status == "Stopped"
    assert sim.training_plans.terminated == []


def test_a_job_created_after_termination_began_waits_for_the_next_window(
    sim: SimSageMaker, clock: VirtualClock
) -> None:
    t0 = clock.now_ms
    drain(sim, until_ms=t0 + 5 * HOUR - 20 * MIN)  # inside the window's last 30 minutes
    sim.create_training_job(**on_plan(sim, "job-a02", attempt=2))
    run_until(sim, lambda: sim.job("job-a02").training_started_ms is not None)
    provision = (sim.startup.provision_s + sim.startup.download_s) * 1000
    assert sim.job("job-a02").training_started_ms == t0 + 11 * HOUR + provision


def test_a_full_window_keeps_the_second_job_pending_until_the_first_ends(
    sim: SimSageMaker, clock: VirtualClock
) -> None:
    t0 = clock.now_ms
    sim.create_training_job(**on_plan(sim, "job-a01", count=2))
    sim.create_training_job(**on_plan(sim, "job-b01", run="r2", run_id="01RUNID2", count=1))
    drain(sim, until_ms=t0 + 2 * HOUR)
    assert sim.job("job-a01").secondary == "Training"
    assert sim.job("job-b01").secondary == "Pending"
    assert sim.describe_training_plan(TrainingPlanName="plan-a")["InUseInstanceCount"] == 2
    sim.stop_training_job(TrainingJobName="job-a01")
    run_until(sim, lambda: sim.job("job-b01").secondary != "Pending")
    assert sim.job("job-b01").secondary == "Starting"


def test_pending_two_days_without_capacity_ends_with_insufficient_capacity(
    clock: VirtualClock, s3: Any
) -> None:
    sm = SimSageMaker(clock, s3_client=s3)
    t0 = clock.now_ms
    sm.training_plans.add("far", ITYPE, 2, [(t0 + 3 * 24 * HOUR, t0 + 3 * 24 * HOUR + 2 * HOUR)])
    req = request("job-f01")
    req["ResourceConfig"]["TrainingPlanArn"] = sm.training_plans.plans()[0].arn
    sm.create_training_job(**req)
    run_until(sm, lambda: sm.job("job-f01").is_terminal)
    job = sm.job("job-f01")
    assert (job.status, job.failure_reason, job.ended_ms) == (
        "Failed",
        INSUFFICIENT_CAPACITY_REASON,
        t0 + 2 * 24 * HOUR,
    )


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"InstanceType": "ml.p5.48xlarge"}, "reserves 2 x ml.p4d.24xlarge"),
        ({"InstanceCount": 3}, "reserves 2 x"),
        (
            {"TrainingPlanArn": "arn:aws:sagemaker:us-east-1:123456789012:training-plan/other"},
            "does not exist",
        ),
    ],
    ids=[
        "another instance type",
        "more instances than reserved",
        "a plan that does not exist",
    ],
)
def test_a_request_that_does_not_fit_its_plan_is_refused(
    sim: SimSageMaker, change: dict[str, Any], words: str
) -> None:
    req = on_plan(sim, "job-x01")
    req["ResourceConfig"].update(change)
    with pytest.raises(ClientError) as err:
        sim.create_training_job(**req)
    code, message = code_of(err)
    assert code == "ValidationException" and words in message


def test_an_expired_plan_cannot_be_used(sim: SimSageMaker, clock: VirtualClock) -> None:
    drain(sim, until_ms=clock.now_ms + 16 * HOUR)
    with pytest.raises(ClientError) as err:
        sim.create_training_job(**on_plan(sim, "job-e01"))
    assert "is Expired" in code_of(err)[1]


def test_the_launcher_reads_a_plans_windows_from_its_reserved_capacities(
    sim: SimSageMaker, clock: VirtualClock
) -> None:
    from sagewarden.adapters.sagemaker_launcher import SageMakerLauncher

    t0 = clock.now_ms
    view = SageMakerLauncher(sim).describe_plan(plan_arn(sim))
    assert (view.arn, view.status, view.instance_type, view.total_count) == (
        plan_arn(sim),
        "Scheduled",
        ITYPE,
        2,
    )
    assert view.windows == ((t0 + HOUR, t0 + 5 * HOUR), (t0 + 11 * HOUR, t0 + 15 * HOUR))


def test_scenario_plans_are_checked_and_installed_from_the_drills_start(clock: VirtualClock, s3: Any) -> None:
    from drill.sim.training_plans import install, parse_plans

    plans, problems = parse_plans(
        [
            {"name": "ok", "instance_type": ITYPE, "count": 2, "windows": [[0, 10], [16, 24]]},
            {"name": "bad", "instance_type": ITYPE, "count": 2, "windows": [[0, 10], [9, 12]]},
            {"name": "short", "instance_type": ITYPE, "count": 0, "windows": [[0, 0.25]], "extra": 1},
        ]
    )
    assert [p.name for p in plans] == ["ok"]
    assert problems == [
        "account.training_plans[1].windows: a list of [start_h, end_h] from the drill's start, each longer "
        "than 30 minutes, not overlapping",
        "account.training_plans[2].extra: unknown field (known: name, instance_type, count, windows)",
    ]
    sm = SimSageMaker(clock, s3_client=s3)
    install(sm.training_plans, plans, clock.now_ms)
    out = sm.describe_training_plan(TrainingPlanName="ok")
    assert [c["StartTime"].timestamp() * 1000 - clock.now_ms for c in out["ReservedCapacitySummaries"]] == [
        0,
        16 * HOUR,
    ]
