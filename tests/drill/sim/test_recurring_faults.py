"""The simulated SageMaker's deterministic failures (drill/sim/faults.py): a recurring crash ends
every later job of its run the same way -- the same FailureReason and log tail -- until the person
fixes it (``SimSageMaker.fix_recurring``)."""

from __future__ import annotations

from typing import Any

import pytest

from drill.clock import VirtualClock
from drill.sim.sagemaker import Fault, JobProfile, SimSageMaker
from sagewarden.keys import TAG_ATTEMPT, TAG_RUN_NAME

MIN = 60_000
RUN = "r1"
# 1 step a minute, a checkpoint every 30 steps written in 2 minutes
PROFILE = JobProfile(
    total_steps=300, steps_per_minute=1, checkpoint_every_steps=30, checkpoint_write_seconds=120
)
# quoted from benchmarks/corpus/endings.jsonl, case resume-shape-mismatch-pytorch-15720
MISMATCH = (
    "RuntimeError: Error(s) in loading state_dict for hierarchical_transformer:",
    "\tsize mismatch for block_level.position_enc.weight: copying a param of torch.Size([51, 30]) from "
    "checkpoint, where the shape is torch.Size([18290, 30]) in current model.",
)
# case disk-full-after-8-days-mockingbird-774
DISK_FULL = (
    "    zip_file.write_record(name, storage.data_ptr(), num_bytes)",
    "OSError: [Errno 28] No space left on device",
)


class NoS3:
    def put_object(self, **_: Any) -> dict[str, Any]:
        return {}


@pytest.fixture
def sim() -> SimSageMaker:
    s = SimSageMaker(VirtualClock(), s3_client=NoS3())
    s.set_profile(RUN, PROFILE)
    return s


def _submit(sim: SimSageMaker, attempt: int) -> str:
    name = f"{RUN}-a{attempt:02d}"
    resume = max((max(j.checkpoints, default=0) for j in sim.jobs()), default=0)
    sim.create_training_job(
        TrainingJobName=name,
        RoleArn="arn:aws:iam::123456789012:role/sim-training",
        AlgorithmSpecification={"TrainingImage": "img:latest", "TrainingInputMode": "File"},
        OutputDataConfig={"S3OutputPath": "s3://bucket/output"},
        ResourceConfig={"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 100},
        StoppingCondition={"MaxRuntimeInSeconds": 86_400},
        CheckpointConfig={"S3Uri": "s3://bucket/ckpt/", "LocalPath": "/opt/ml/checkpoints"},
        Environment={"SAGEWARDEN_RESUME_STEP": str(resume)},
        Tags=[{"Key": TAG_RUN_NAME, "Value": RUN}, {"Key": TAG_ATTEMPT, "Value": str(attempt)}],
    )
    return name


def _until_ended(sim: SimSageMaker, name: str) -> None:
    while not sim.job(name).is_terminal:
        t = sim.next_event_time()
        assert t is not None, f"{name} is still {sim.job(name).secondary}"
        sim.advance(t)


def _ending(sim: SimSageMaker, name: str) -> tuple[str, str | None, tuple[str, ...]]:
    job = sim.job(name)
    tail = tuple(line for line in sim.log_tail(name, 1, 20) if line in MISMATCH + DISK_FULL)
    return job.status, job.failure_reason, tail


def _minutes_into_training(sim: SimSageMaker, name: str) -> float:
    job = sim.job(name)
    assert job.ended_ms is not None and job.training_started_ms is not None
    return (job.ended_ms - job.training_started_ms) / MIN


@pytest.mark.claim(
    "a user's bug about every 60 healthy hours, quoting a real ending of the endings corpus, that ends every attempt the same way until the person fixes it"
)
def test_a_recurring_crash_ends_every_attempt_the_same_way_until_fixed(sim: SimSageMaker) -> None:
    sim.inject(
        Fault(
            kind="algorithm_error",
            run=RUN,
            after_run_training_min=45,
            log_lines=MISMATCH,
            once=False,
            recur_after_training_min=3,
            label="bug 001",
        )
    )
    first = _submit(sim, 1)
    _until_ended(sim, first)
    assert _minutes_into_training(sim, first) == pytest.approx(45, abs=0.1)  # due on the run's clock
    endings = [_ending(sim, first)]
    for attempt in (2, 3, 4):
        name = _submit(sim, attempt)
        _until_ended(sim, name)
        assert sim.job(name).start_step == 30  # resumed from the same checkpoint every time
        assert _minutes_into_training(sim, name) == pytest.approx(3, abs=0.1)
        endings.append(_ending(sim, name))
    status, reason, tail = endings[0]
    assert status == "Failed" and reason is not None and "size mismatch" in reason and tail == MISMATCH
    assert all(e == endings[0] for e in endings)  # the same FailureReason and log tail each time
    assert [r.label for r in sim.fault_records] == ["bug 001"] * 4

    assert sim.fix_recurring(RUN) == ["bug 001"]
    assert sim.fix_recurring(RUN) == []  # fixed once
    fixed = _submit(sim, 5)
    _until_ended(sim, fixed)
    assert sim.job(fixed).status == "Completed"
    assert len(sim.fault_records) == 4


def test_a_start_up_failure_waits_for_the_next_start_and_a_full_disk_for_the_first_save(
    sim: SimSageMaker,
) -> None:
    sim.inject(
        Fault(
            kind="algorithm_error",
            run=RUN,
            after_run_training_min=10,
            log_lines=MISMATCH,
            once=False,
            recur_after_training_min=1,
            recur_from_next_start=True,
            label="bug 001",
        )
    )
    sim.inject(
        Fault(
            kind="algorithm_error",
            run=RUN,
            after_run_training_min=100,
            log_lines=DISK_FULL,
            once=False,
            during_save=True,
            recur_after_training_min=0,
            label="bug 002",
        )
    )
    # the first job trains through minute 10 (bug 001 is met only by a job that starts after it)
    # and fails in the save that follows minute 100: the one begun at minute 126 (4 x 32: 30 min
    # of training and a 2-minute save each)
    first = _submit(sim, 1)
    _until_ended(sim, first)
    assert [r.label for r in sim.fault_records] == ["bug 002"]
    assert _minutes_into_training(sim, first) == pytest.approx(126 + 1, abs=0.1)  # half-way through it
    assert _ending(sim, first)[2] == DISK_FULL
    assert max(sim.job(first).checkpoints) == 90  # the save that failed never completed

    second = _submit(sim, 2)  # both are due now: the restore fails first, a minute in
    _until_ended(sim, second)
    assert sim.fault_records[-1].label == "bug 001" and _ending(sim, second)[2] == MISMATCH
    assert _minutes_into_training(sim, second) == pytest.approx(1, abs=0.1)

    assert sim.fix_recurring(RUN) == ["bug 001", "bug 002"]  # the person fixes what showed
    third = _submit(sim, 3)
    _until_ended(sim, third)
    assert sim.job(third).status == "Completed"


def test_recurring_applies_to_crashes_only() -> None:
    with pytest.raises(ValueError, match="crash kinds only"):
        Fault(kind="hang_spin", recur_after_training_min=1)
    with pytest.raises(ValueError, match="needs recur_after_training_min"):
        Fault(kind="algorithm_error", recur_from_next_start=True)
