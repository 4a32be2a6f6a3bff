"""S3 directory buckets (issue 32 item 12): the simulated account's model of their ListObjectsV2
(drill/sim/directory_buckets.py; docs/fidelity.md), checkpoint discovery, retention's view and moves
on it, and the submit-time refusal (the deployment does not grant s3express:CreateSession)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from drill.sim.directory_buckets import DirectoryBucketS3, is_directory_bucket
from sagewarden.adapters.s3_checkpoint_finder import S3CheckpointFinder
from sagewarden.adapters.s3_checkpoint_retirer import S3CheckpointRetirer
from sagewarden.api.validation import validate_submit
from sagewarden.domain.checkpoints.retention import markers
from sagewarden.domain.vocabulary.actions import RetireCheckpoints
from sagewarden.domain.vocabulary.layouts import CheckpointLayout, LayoutKind
from sagewarden.domain.vocabulary.policy import RunPolicy
from sagewarden.usecases.errors import InvalidRequest
from tests.builders import REQUEST, ROLE

DIR_BUCKET = "ckpt--use1-az4--x-s3"
ROOT = "runs/llama/"
URI = f"s3://{DIR_BUCKET}/{ROOT}"


@pytest.fixture
def s3(aws: None) -> Iterator[DirectoryBucketS3]:
    client = DirectoryBucketS3(boto3.client("s3", region_name="us-east-1"))
    client.create_bucket(Bucket=DIR_BUCKET)
    yield client


def put(s3: Any, *keys: str, root: str = ROOT) -> None:
    for key in keys:
        s3.put_object(Bucket=DIR_BUCKET, Key=root + key, Body=b"x")


def test_directory_bucket_model_names_and_listing_rules(s3: DirectoryBucketS3) -> None:
    """S3 API Reference, ListObjectsV2: on a directory bucket StartAfter is not supported, only
    prefixes ending in "/" are, "/" is the only delimiter, and objects are not returned in
    lexicographical order. Names: <base>--<zone-id>--x-s3 (an Availability Zone or a Local Zone)."""
    assert is_directory_bucket("ckpt--use1-az4--x-s3") and is_directory_bucket("a--use1-lax1-az1--x-s3")
    assert not is_directory_bucket("sagewarden-drill") and not is_directory_bucket("ckpt--x-s3-copy")
    keys = [f"{ROOT}k-{i:03d}" for i in range(250)]
    for key in keys:
        s3.put_object(Bucket=DIR_BUCKET, Key=key, Body=b"x")
    for refused in ({"StartAfter": ROOT}, {"Prefix": "runs/llama"}, {"Delimiter": "-"}):
        with pytest.raises(ClientError):
            s3.list_objects_v2(Bucket=DIR_BUCKET, **{"Prefix": ROOT, **refused})
    pages = list(
        s3.get_paginator("list_objects_v2").paginate(
            Bucket=DIR_BUCKET, Prefix=ROOT, PaginationConfig={"PageSize": 100}
        )
    )
    listed = [o["Key"] for p in pages for o in p.get("Contents", ())]
    assert len(pages) == 3 and sorted(listed) == keys and listed != keys  # every key once, unordered
    rolled = s3.list_objects_v2(Bucket=DIR_BUCKET, Prefix="", Delimiter="/")
    assert rolled["CommonPrefixes"] == [{"Prefix": "runs/"}]


def test_discovery_and_the_submit_time_check_work_on_a_directory_bucket(s3: DirectoryBucketS3) -> None:
    """The finder never sends StartAfter, lists only prefixes ending in "/" and never depends on
    the order of keys: the newest complete checkpoint, a Megatron directory the tracker vouches
    for, save activity and the access check all read a directory bucket."""
    for step in (100, 200, 300, 1000):
        put(s3, f"checkpoint-{step}/model.safetensors", f"checkpoint-{step}/trainer_state.json")
    put(s3, "checkpoint-2000/model.safetensors")  # half-written
    finder = S3CheckpointFinder(s3, page_size=2)
    found = finder.latest(URI, CheckpointLayout(LayoutKind.HF))
    assert found is not None and found.step == 1000
    assert finder.write_seconds(found) is not None
    assert finder.save_activity(URI, CheckpointLayout(LayoutKind.HF)) is not None
    finder.check_access(URI)
    put(s3, "iter_0000100/", "iter_0000200/", "iter_0000200/mp_rank_00/model_optim_rng.pt", root="mega/")
    s3.put_object(Bucket=DIR_BUCKET, Key="mega/latest_checkpointed_iteration.txt", Body=b"200")
    mega = finder.latest(f"s3://{DIR_BUCKET}/mega/", CheckpointLayout(LayoutKind.MEGATRON))
    assert mega is not None and mega.step == 200  # iter_0000100 holds only its folder object
    view = finder.complete(URI, CheckpointLayout(LayoutKind.HF), limit=8)
    assert [n for n, _ in view.complete] == [
        "checkpoint-1000",
        "checkpoint-300",
        "checkpoint-200",
        "checkpoint-100",
    ]
    assert view.newest_write_ms is not None and view.written("checkpoint-100") is not None
    listings = [p for op, p in s3.calls if op == "list_objects_v2"]
    assert listings and not any("StartAfter" in p for p in listings)
    assert all(not p.get("Prefix") or str(p["Prefix"]).endswith("/") for p in listings)


def test_retention_moves_and_deletes_checkpoints_in_a_directory_bucket(s3: DirectoryBucketS3) -> None:
    for step in (100, 200):
        put(s3, f"checkpoint-{step}/model.safetensors", f"checkpoint-{step}/trainer_state.json")
    retirer = S3CheckpointRetirer(s3)
    archive = f"s3://{DIR_BUCKET}/runs/llama-archive/"
    keep = markers(RunPolicy(checkpoint_keep=1))
    retirer.retire(RetireCheckpoints(URI, ("checkpoint-100",), "archive", archive, keep))
    retirer.retire(RetireCheckpoints(URI, ("checkpoint-200",), "delete", None, keep))
    left = {o["Key"] for o in s3.list_objects_v2(Bucket=DIR_BUCKET, Prefix="runs/").get("Contents", ())}
    assert not any(k.startswith(f"{ROOT}checkpoint-") for k in left)
    assert {k for k in left if k.startswith("runs/llama-archive/")}  # the archive holds the copies


@pytest.mark.claim(
    "a `policy.checkpoint_archive_uri` more than 20 folders deep, and a `CheckpointConfig.S3Uri` or archive prefix in an S3 directory bucket (a name ending `--x-s3`)"
)
@pytest.mark.parametrize("where", ["synced", "archive"])
def test_submit_refuses_a_directory_bucket_saying_why(where: str) -> None:
    """The deployment grants s3:ListBucket/GetObject on general purpose buckets; a directory
    bucket is reached only through s3express:CreateSession, which it does not grant: refused at
    submit with the reason, nothing stored (docs/checkpoints.md)."""
    job = copy.deepcopy(REQUEST)
    policy: dict[str, Any] = {"checkpoint_keep": 2}
    if where == "synced":
        job["CheckpointConfig"]["S3Uri"] = URI
        field = "training_job.CheckpointConfig.S3Uri"
    else:
        policy["checkpoint_archive_uri"] = f"s3://{DIR_BUCKET}/archive/"
        field = "policy.checkpoint_archive_uri"
    body = {"name": "llama", "training_job": job, "policy": policy}
    with pytest.raises(InvalidRequest) as err:
        validate_submit(body, allowed_roles=frozenset({ROLE}), job_prefix="sw", policy_defaults=RunPolicy())
    problems = {e.field: e.message for e in err.value.errors}
    assert field in problems and "s3express:CreateSession" in problems[field]
