"""S3CheckpointRetirer against moto's S3: what retention reads, and how a move copies, verifies and
deletes so that a retry finishes a half-done move and a half-moved directory never looks complete."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from sagewarden.adapters.s3_checkpoint_retirer import CheckpointRetireError, S3CheckpointRetirer
from sagewarden.domain.actions import RetireCheckpoints
from sagewarden.domain.checkpoints import CheckpointLayout, LayoutKind
from sagewarden.domain.policy import RunPolicy
from sagewarden.domain.retention import markers

BUCKET = "sagewarden-retire-test"
ROOT = "runs/llama/ckpt/"
URI = f"s3://{BUCKET}/{ROOT}"
ARCHIVE = f"s3://{BUCKET}/runs/llama/ckpt-archive/"
FILES = ("model-00001.safetensors", "model-00002.safetensors", "optimizer.pt", "trainer_state.json")


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(var, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield client


class Calls:
    """The S3 operations and their keys, in order (botocore ``provide-client-params`` hook)."""

    def __init__(self, client: Any) -> None:
        self.seen: list[tuple[str, str]] = []
        client.meta.events.register("provide-client-params.s3", self._record)

    def _record(self, params: Any, event_name: str, **_: Any) -> None:
        self.seen.append((event_name.rsplit(".", 1)[-1], str(params.get("Key", ""))))

    def of(self, operation: str) -> list[str]:
        return [key for name, key in self.seen if name == operation]


def checkpoint(s3: Any, step: int, files: tuple[str, ...] = FILES) -> None:
    for name in files:
        s3.put_object(Bucket=BUCKET, Key=f"{ROOT}checkpoint-{step}/{name}", Body=f"{step}:{name}".encode())


def keys(s3: Any, prefix: str) -> set[str]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return {o["Key"][len(prefix) :] for page in pages for o in page.get("Contents", ())}


def action(*names: str, mode: str = "archive") -> RetireCheckpoints:
    return RetireCheckpoints(
        URI, names, mode, ARCHIVE if mode == "archive" else None, markers(RunPolicy(checkpoint_keep=1))
    )


def test_retirer_view_lists_only_complete_checkpoints_newest_first(s3: Any) -> None:
    for step in (100, 200, 300):
        checkpoint(s3, step)
    checkpoint(s3, 400, files=("model-00001.safetensors",))  # being written
    s3.put_object(Bucket=BUCKET, Key=f"{ROOT}logs/events.out", Body=b"x")  # not a checkpoint
    view = S3CheckpointRetirer(s3).view(URI, CheckpointLayout(LayoutKind.HF), limit=10)
    assert view.complete == (("checkpoint-300", 300), ("checkpoint-200", 200), ("checkpoint-100", 100))
    assert view.present == {"checkpoint-100", "checkpoint-200", "checkpoint-300", "checkpoint-400", "logs"}


def test_retirer_moves_a_directory_copying_markers_last_and_deleting_them_first(s3: Any) -> None:
    checkpoint(s3, 100)
    checkpoint(s3, 200)
    calls = Calls(s3)
    result = S3CheckpointRetirer(s3).retire(action("checkpoint-100"))
    assert "checkpoint-100: 4 objects" in result and "moved to" in result
    assert keys(s3, f"{ROOT}checkpoint-100/") == set()
    assert keys(s3, "runs/llama/ckpt-archive/checkpoint-100/") == set(FILES)
    assert keys(s3, f"{ROOT}checkpoint-200/") == set(FILES)  # untouched
    body = s3.get_object(Bucket=BUCKET, Key="runs/llama/ckpt-archive/checkpoint-100/optimizer.pt")["Body"]
    assert body.read() == b"100:optimizer.pt"
    assert calls.of("CopyObject")[-1].endswith("checkpoint-100/trainer_state.json")  # marker copied last
    assert calls.of("DeleteObject")[0].endswith("checkpoint-100/trainer_state.json")  # ... deleted first


def test_retirer_a_half_done_move_is_finished_by_the_next_pass_without_losing_data(s3: Any) -> None:
    checkpoint(s3, 100)
    # the first pass is cut after 4 copies + 2 deletes: the marker and one shard are gone
    first = S3CheckpointRetirer(s3, max_objects=6).retire(action("checkpoint-100"))
    assert "unfinished" in first
    left = keys(s3, f"{ROOT}checkpoint-100/")
    assert "trainer_state.json" not in left and len(left) == 2  # not complete for any finder
    view = S3CheckpointRetirer(s3).view(URI, CheckpointLayout(LayoutKind.HF), limit=10)
    assert view.complete == () and "checkpoint-100" in view.present
    calls = Calls(s3)
    S3CheckpointRetirer(s3).retire(action("checkpoint-100"))  # the recorded intent, retried
    assert keys(s3, f"{ROOT}checkpoint-100/") == set()
    assert keys(s3, "runs/llama/ckpt-archive/checkpoint-100/") == set(FILES)
    assert calls.of("CopyObject") == []  # the verified copies were kept, not redone


def test_retirer_never_deletes_before_the_archive_copy_is_verified(s3: Any) -> None:
    checkpoint(s3, 100)
    # a stale, different object already sits at the archive key: it is overwritten and checked
    s3.put_object(Bucket=BUCKET, Key="runs/llama/ckpt-archive/checkpoint-100/optimizer.pt", Body=b"old")
    retirer = S3CheckpointRetirer(s3)
    original = s3.copy_object
    s3.copy_object = lambda **kw: None  # a copy that silently did nothing
    try:
        with pytest.raises(CheckpointRetireError, match="does not match"):
            retirer.retire(action("checkpoint-100"))
    finally:
        s3.copy_object = original
    assert keys(s3, f"{ROOT}checkpoint-100/") == set(FILES)  # nothing deleted


def test_retirer_an_s3_error_stops_the_pass_and_is_raised_not_taken_as_done(s3: Any) -> None:
    checkpoint(s3, 100)
    checkpoint(s3, 200)

    def denied(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "DeleteObject")

    s3.delete_object = denied
    with pytest.raises(CheckpointRetireError) as err:
        S3CheckpointRetirer(s3).retire(action("checkpoint-100", "checkpoint-200"))
    assert err.value.code == "AccessDenied" and err.value.permanent
    assert keys(s3, f"{ROOT}checkpoint-100/") == set(FILES)
    assert keys(s3, f"{ROOT}checkpoint-200/") == set(FILES)


def test_retirer_delete_mode_deletes_markers_first_and_copies_nothing(s3: Any) -> None:
    checkpoint(s3, 100)
    calls = Calls(s3)
    result = S3CheckpointRetirer(s3).retire(action("checkpoint-100", mode="delete"))
    assert "deleted" in result and keys(s3, f"{ROOT}checkpoint-100/") == set()
    assert calls.of("CopyObject") == [] and calls.of("DeleteObject")[0].endswith("trainer_state.json")
    assert "already gone" in S3CheckpointRetirer(s3).retire(action("checkpoint-100", mode="delete"))


def test_retirer_copies_objects_over_the_copy_limit_in_parts(s3: Any) -> None:
    big = bytes(range(256)) * (12 * 1024 * 4)  # 12 MiB
    s3.put_object(Bucket=BUCKET, Key=f"{ROOT}checkpoint-100/optimizer.pt", Body=big)
    s3.put_object(Bucket=BUCKET, Key=f"{ROOT}checkpoint-100/trainer_state.json", Body=b"{}")
    calls = Calls(s3)
    retirer = S3CheckpointRetirer(s3, copy_object_max=1024 * 1024, copy_part_bytes=5 * 1024 * 1024)
    retirer.retire(action("checkpoint-100"))
    assert len(calls.of("UploadPartCopy")) == 3
    copied = s3.get_object(Bucket=BUCKET, Key="runs/llama/ckpt-archive/checkpoint-100/optimizer.pt")
    assert copied["Body"].read() == big


def test_a_directory_too_large_to_list_within_the_pass_is_left_for_the_next_pass(s3: Any) -> None:
    # 1,001 objects: two pages of list_objects_v2; the pass's time runs out after the first page
    checkpoint(s3, 100)
    checkpoint(s3, 200)
    for i in range(1001):
        s3.put_object(Bucket=BUCKET, Key=f"{ROOT}checkpoint-100/shard-{i:05d}", Body=b"x")
    ticks = iter(range(1_000_000))
    slow = S3CheckpointRetirer(s3, budget_s=5.0, clock=lambda: 10.0 * next(ticks))  # 10 s a look
    calls = Calls(s3)
    line = slow.retire(action("checkpoint-100"))
    assert "unfinished" in line
    assert len(calls.of("ListObjectsV2")) == 1  # the listing stopped after its first page
    assert len(keys(s3, f"{ROOT}checkpoint-100/")) == 1001 + len(FILES)  # nothing deleted
    assert keys(s3, "runs/llama/ckpt-archive/") == set()  # nothing copied either
