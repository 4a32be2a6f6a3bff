"""The simulated SageMaker restores CheckpointConfig.S3Uri at job start: Downloading lasts as long
again as the synced prefix's modelled checkpoint bytes take at RESTORE_BYTES_PER_S per instance."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from drill.clock import VirtualClock
from drill.sim.checkpoints import RESTORE_BYTES_PER_S, modelled_sizes
from drill.sim.model import JobProfile
from drill.sim.sagemaker import SimSageMaker
from tests.drill.sim.builders import BUCKET, MIN, REGION, drain, training_job

SIZE = 980 * 10**9  # a 70B checkpoint with Adam state


@pytest.fixture
def s3(aws: None) -> Any:
    client = boto3.client("s3", region_name=REGION)
    client.create_bucket(Bucket=BUCKET)
    return client


@pytest.fixture
def sim(s3: Any) -> SimSageMaker:
    return SimSageMaker(VirtualClock(), s3_client=s3, emit=lambda _: None)


def downloading_s(sim: SimSageMaker, name: str) -> float:
    (step,) = [t for t in sim.job(name).transitions if t["Status"] == "Downloading"]
    return (step["EndTime"] - step["StartTime"]) / 1000


def test_sim_restore_hf_checkpoint_is_weights_and_adam_state_2_to_12() -> None:
    files = [("a", b""), ("b", b""), ("trainer_state.json", b"{}")]
    assert modelled_sizes("hf", files, 14) == [2, 12, 2]


def test_sim_restore_downloads_the_modelled_bytes_of_the_synced_prefix(sim: SimSageMaker, s3: Any) -> None:
    sim.set_profile(
        "r1", JobProfile(checkpoint_write_seconds=60, checkpoint_bytes=SIZE, checkpoint_on_sigterm=False)
    )
    started = training_job(sim, "job-a01")
    drain(sim, until_ms=started + 310 * MIN)  # three checkpoints (every 100 min)
    first = downloading_s(sim, "job-a01")
    sim.stop_training_job(TrainingJobName="job-a01")
    drain(sim, until_ms=sim.clock.now_ms + 10 * MIN)
    # something moved one out of the synced prefix (retention): it is not downloaded
    for name in ("model.safetensors", "optimizer.pt", "trainer_state.json"):
        s3.delete_object(Bucket=BUCKET, Key=f"runs/r1/checkpoint-1000/{name}")
    training_job(sim, "job-a02", attempt=2, resume=3000)
    job = sim.job("job-a02")
    assert job.restored_dirs == ("checkpoint-2000", "checkpoint-3000")
    assert abs(job.restored_bytes - 2 * SIZE) < 10_000  # the markers' own few bytes
    assert (
        downloading_s(sim, "job-a02") - first == job.restore_ms / 1000 == int(2 * SIZE / RESTORE_BYTES_PER_S)
    )


def test_sim_restore_is_not_modelled_without_checkpoint_bytes(sim: SimSageMaker) -> None:
    training_job(sim, "job-a01")
    assert sim.job("job-a01").restored_bytes is None and sim.job("job-a01").restore_ms == 0


def test_sim_writes_files_of_multipart_size_in_parts_and_keeps_what_each_job_wrote(
    sim: SimSageMaker, s3: Any
) -> None:
    """A file whose modelled size is over 8 MB is a multipart upload (ETag "<md5>-1", no additional
    checksum), as a real sync writes it; its body names the run's CheckpointConfig.S3Uri, so two
    runs' same-named files differ; the simulator keeps the bytes each key got."""
    sim.set_profile("r1", JobProfile(checkpoint_write_seconds=60, checkpoint_bytes=SIZE))
    started = training_job(sim, "job-a01")
    drain(sim, until_ms=started + 110 * MIN)  # the first checkpoint (step 1,000)
    key = "runs/r1/checkpoint-1000/optimizer.pt"
    head = s3.head_object(Bucket=BUCKET, Key=key, ChecksumMode="ENABLED")
    assert head["ETag"].endswith('-1"') and not [k for k in head if k.startswith("Checksum")]
    marker = s3.head_object(Bucket=BUCKET, Key="runs/r1/checkpoint-1000/trainer_state.json")
    assert "-" not in marker["ETag"]  # the marker's own few bytes: one PutObject
    data = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    assert data == sim.checkpoint_writer.written[(BUCKET, key)] and b"s3://" in data
