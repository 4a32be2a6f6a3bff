"""S3CheckpointRetirer against moto's S3: what retention reads, and how a move copies, proves and
deletes so that a retry finishes a half-done move, a half-moved directory never looks complete,
two runs sharing one archive never touch each other's copies, and a directory larger than one
pass finishes.

moto keeps S3's additional checksums (the CRC32 boto3 sends with PutObject; CopyObject copies the
source's), computes a multipart upload's full-object checksum when the upload asks for one, and
gives a multipart upload made without one no checksum at all. It ignores CopySourceIfMatch and
gives SSE-KMS objects MD5 ETags; `KmsEtags` below models what S3 documents for those (not an MD5)."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from sagewarden.adapters.s3_checkpoint_retirer import S3CheckpointRetirer, same_content
from sagewarden.domain.checkpoints.retention import markers, run_archive_prefix
from sagewarden.domain.vocabulary.actions import RetireCheckpoints
from sagewarden.domain.vocabulary.events import RetirementReported
from sagewarden.domain.vocabulary.layouts import CheckpointLayout, LayoutKind
from sagewarden.domain.vocabulary.policy import RunPolicy

BUCKET = "sagewarden-retire-test"
ROOT = "runs/llama/ckpt/"
URI = f"s3://{BUCKET}/{ROOT}"
RUN_ID = "01JC0FFEE0BADC0DE000000000"
ARCHIVE = run_archive_prefix(f"s3://{BUCKET}/runs/llama/ckpt-archive/", RUN_ID)
ARCHIVED = f"runs/llama/ckpt-archive/{RUN_ID}/"
FILES = ("model-00001.safetensors", "model-00002.safetensors", "optimizer.pt", "trainer_state.json")
MIB = 1024**2


@pytest.fixture
def s3(aws: None) -> Iterator[Any]:
    client = boto3.client("s3", region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    yield client


class Calls:
    """The S3 operations and their keys, in order (botocore ``provide-client-params`` hook); a
    DeleteObjects counts once per key it names."""

    def __init__(self, client: Any) -> None:
        self.seen: list[tuple[str, str]] = []
        self.params: list[tuple[str, dict[str, Any]]] = []
        client.meta.events.register("provide-client-params.s3", self._record)

    def _record(self, params: Any, event_name: str, **_: Any) -> None:
        operation = event_name.rsplit(".", 1)[-1]
        self.params.append((operation, dict(params)))
        if operation == "DeleteObjects":
            self.seen += [(operation, str(o["Key"])) for o in params["Delete"]["Objects"]]
        else:
            self.seen.append((operation, str(params.get("Key", ""))))

    def of(self, operation: str) -> list[str]:
        return [key for name, key in self.seen if name == operation]

    def parts(self) -> list[int]:
        return [int(p["PartNumber"]) for name, p in self.params if name == "UploadPartCopy"]


class KmsEtags:
    """What S3 documents and moto does not model: an object encrypted with SSE-KMS has an ETag
    that is not an MD5 of its data. Rewrites the ETags S3 answers for such objects (HeadObject,
    ListObjectsV2, PutObject, CopyObject into them) to a value derived from the key."""

    def __init__(self, client: Any) -> None:
        self.keys: set[str] = set()
        for op in ("PutObject", "HeadObject", "ListObjectsV2", "CopyObject"):
            client.meta.events.register(f"before-parameter-build.s3.{op}", self._remember)
            client.meta.events.register(f"after-call.s3.{op}", self._rewrite)

    def _remember(self, params: Any, context: Any, **_: Any) -> None:
        context["kms_etags_key"] = params.get("Key")
        if params.get("ServerSideEncryption") == "aws:kms":
            self.keys.add(str(params["Key"]))

    def etag(self, key: str) -> str:
        return '"' + hashlib.sha256(f"kms:{key}".encode()).hexdigest()[:32] + '"'

    def _rewrite(self, parsed: Any, context: Any, **_: Any) -> None:
        for entry in parsed.get("Contents", ()):
            if entry.get("Key") in self.keys:
                entry["ETag"] = self.etag(entry["Key"])
        key = context.get("kms_etags_key")
        if key in self.keys and "ETag" in parsed:
            parsed["ETag"] = self.etag(str(key))


def checkpoint(s3: Any, step: int, files: tuple[str, ...] = FILES, root: str = ROOT, **put: Any) -> None:
    for name in files:
        s3.put_object(
            Bucket=BUCKET, Key=f"{root}checkpoint-{step}/{name}", Body=f"{step}:{name}".encode(), **put
        )


def multipart_put(s3: Any, key: str, body: bytes) -> str:
    """A real multipart upload (5 MiB parts, no additional checksum asked): ETag "<md5>-N"."""
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    parts = []
    for number, start in enumerate(range(0, len(body), 5 * MIB), start=1):
        answer = s3.upload_part(
            Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=number, Body=body[start : start + 5 * MIB]
        )
        parts.append({"PartNumber": number, "ETag": answer["ETag"]})
    done = s3.complete_multipart_upload(
        Bucket=BUCKET, Key=key, UploadId=upload, MultipartUpload={"Parts": parts}
    )
    return str(done["ETag"])


def keys(s3: Any, prefix: str) -> set[str]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return {o["Key"][len(prefix) :] for page in pages for o in page.get("Contents", ())}


def body(s3: Any, key: str) -> bytes:
    data: bytes = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    return data


def action(*names: str, mode: str = "archive", uri: str = URI, archive: str = ARCHIVE) -> RetireCheckpoints:
    return RetireCheckpoints(
        uri, names, mode, archive if mode == "archive" else None, markers(RunPolicy(checkpoint_keep=1))
    )


def continued(previous: RetireCheckpoints, report: RetirementReported) -> RetireCheckpoints:
    """The next pass's action as the decision makes it: the directories not done, with the
    progress the report gave for each (domain/checkpoints/retirement.py, domain/checkpoints/retention.py)."""
    states = {o.name: o.state for o in report.outcomes if not o.done}
    kept = {p.name: p for p in previous.progress}
    names = tuple(n for n in previous.names if n in states or n not in {o.name for o in report.outcomes})
    progress = tuple(states.get(n) or kept[n] for n in names if n in states or n in kept)
    return dataclasses.replace(previous, names=names, progress=progress)


@pytest.mark.claim("Only what the finder recognises as complete.")
def test_retirer_view_lists_only_complete_checkpoints_newest_first(s3: Any) -> None:
    for step in (100, 200, 300):
        checkpoint(s3, step)
    checkpoint(s3, 400, files=("model-00001.safetensors",))  # being written
    s3.put_object(Bucket=BUCKET, Key=f"{ROOT}logs/events.out", Body=b"x")  # not a checkpoint
    view = S3CheckpointRetirer(s3).view(URI, CheckpointLayout(LayoutKind.HF), limit=10)
    assert view.complete == (("checkpoint-300", 300), ("checkpoint-200", 200), ("checkpoint-100", 100))
    assert view.present == {"checkpoint-100", "checkpoint-200", "checkpoint-300", "checkpoint-400", "logs"}


@pytest.mark.claim("A half-moved checkpoint never looks complete.")
def test_retirer_moves_a_directory_copying_markers_last_and_deleting_them_first(s3: Any) -> None:
    checkpoint(s3, 100)
    checkpoint(s3, 200)
    calls = Calls(s3)
    report = S3CheckpointRetirer(s3).retire(action("checkpoint-100"))
    assert "checkpoint-100: 4 objects" in report.text and "moved to" in report.text and report.error is None
    assert [o.done for o in report.outcomes] == [True]
    assert keys(s3, f"{ROOT}checkpoint-100/") == set()
    assert keys(s3, f"{ARCHIVED}checkpoint-100/") == set(FILES)  # under the run's own archive prefix
    assert keys(s3, f"{ROOT}checkpoint-200/") == set(FILES)  # untouched
    assert body(s3, f"{ARCHIVED}checkpoint-100/optimizer.pt") == b"100:optimizer.pt"
    assert calls.of("CopyObject")[-1].endswith("checkpoint-100/trainer_state.json")  # marker copied last
    assert calls.of("DeleteObjects")[0].endswith("checkpoint-100/trainer_state.json")  # ... deleted first
    assert calls.of("HeadObject") == [
        f"{ARCHIVED}checkpoint-100/{f}" for f in sorted(FILES)
    ]  # a check a copy


@pytest.mark.claim("Every write survives its own retry.")
@pytest.mark.claim("One pass moves at most 4 directories and touches at most 2,000 objects within 15 seconds")
def test_retirer_a_half_done_move_is_finished_by_the_next_pass_without_losing_data(s3: Any) -> None:
    checkpoint(s3, 100)
    # the first pass is cut after 4 copies and the markers' delete: the marker is gone
    first = S3CheckpointRetirer(s3, max_objects=5).retire(action("checkpoint-100"))
    assert "unfinished" in first.text and not first.outcomes[0].done
    left = keys(s3, f"{ROOT}checkpoint-100/")
    assert "trainer_state.json" not in left and len(left) == 3  # not complete for any finder
    view = S3CheckpointRetirer(s3).view(URI, CheckpointLayout(LayoutKind.HF), limit=10)
    assert view.complete == () and "checkpoint-100" in view.present
    for given in (continued(action("checkpoint-100"), first), action("checkpoint-100")):
        # the recorded intent retried with the progress the first pass reported, or without it
        # (the report was lost): the copies are proven (the digest; S3's checksums), not redone
        calls = Calls(s3)
        report = S3CheckpointRetirer(s3).retire(given)
        assert calls.of("CopyObject") == [] and report.outcomes[0].done
        assert keys(s3, f"{ROOT}checkpoint-100/") == set()
        assert {k: body(s3, f"{ARCHIVED}checkpoint-100/{k}") for k in FILES} == {
            k: f"100:{k}".encode() for k in FILES
        }
        checkpoint(s3, 100, files=tuple(sorted(left)))  # again, for the second way
        s3.delete_object(Bucket=BUCKET, Key=f"{ROOT}checkpoint-100/trainer_state.json")


@pytest.mark.claim("A half-moved checkpoint never looks complete.")
def test_retirer_never_deletes_before_the_archive_copy_is_verified(s3: Any) -> None:
    checkpoint(s3, 100)
    # a stale, different object already sits at the archive key: it is overwritten and checked
    s3.put_object(Bucket=BUCKET, Key=f"{ARCHIVED}checkpoint-100/optimizer.pt", Body=b"old")
    retirer = S3CheckpointRetirer(s3)
    original = s3.copy_object
    s3.copy_object = lambda **kw: None  # a copy that silently did nothing
    try:
        report = retirer.retire(action("checkpoint-100"))
    finally:
        s3.copy_object = original
    assert report.error is not None and "does not match" in report.error
    assert report.outcomes[0].blocked is not None  # it would not heal by itself
    assert keys(s3, f"{ROOT}checkpoint-100/") == set(FILES)  # nothing deleted


@pytest.mark.claim("Unknown is not empty.")
def test_retirer_an_s3_error_ends_the_pass_and_is_reported_not_taken_as_done(s3: Any) -> None:
    checkpoint(s3, 100)
    checkpoint(s3, 200)

    def denied(**kw: Any) -> dict[str, Any]:
        # DeleteObjects answers 200 and names every key it could not delete
        objects = kw["Delete"]["Objects"]
        return {"Errors": [{"Key": o["Key"], "Code": "AccessDenied", "Message": "no"} for o in objects]}

    s3.delete_objects = denied
    report = S3CheckpointRetirer(s3).retire(action("checkpoint-100", "checkpoint-200"))
    assert report.error is not None and "AccessDenied" in report.error
    assert [o.name for o in report.outcomes] == ["checkpoint-100"]  # the pass stopped there
    assert report.outcomes[0].blocked is not None and not report.outcomes[0].done  # denied: permanent
    assert keys(s3, f"{ROOT}checkpoint-100/") == set(FILES)
    assert keys(s3, f"{ROOT}checkpoint-200/") == set(FILES)

    def throttled(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "SlowDown", "Message": "slow"}}, "DeleteObjects")

    s3.delete_objects = throttled
    report = S3CheckpointRetirer(s3).retire(action("checkpoint-100"))
    assert report.error is not None and "SlowDown" in report.error
    assert report.outcomes[0].blocked is None  # transient: never counts against the directory


def test_retirer_delete_mode_deletes_markers_first_and_copies_nothing(s3: Any) -> None:
    checkpoint(s3, 100)
    calls = Calls(s3)
    report = S3CheckpointRetirer(s3).retire(action("checkpoint-100", mode="delete"))
    assert "deleted" in report.text and keys(s3, f"{ROOT}checkpoint-100/") == set()
    assert calls.of("CopyObject") == [] and calls.of("DeleteObjects")[0].endswith("trainer_state.json")
    again = S3CheckpointRetirer(s3).retire(action("checkpoint-100", mode="delete"))
    assert "already gone" in again.text and again.outcomes[0].done


@pytest.mark.claim("`CopyObject` up to 1 GB, 1 GB parts above")
def test_retirer_copies_objects_over_the_copy_limit_in_parts(s3: Any) -> None:
    big = bytes(range(256)) * (12 * 1024 * 4)  # 12 MiB
    s3.put_object(Bucket=BUCKET, Key=f"{ROOT}checkpoint-100/optimizer.pt", Body=big)
    s3.put_object(Bucket=BUCKET, Key=f"{ROOT}checkpoint-100/trainer_state.json", Body=b"{}")
    calls = Calls(s3)
    retirer = S3CheckpointRetirer(s3, copy_object_max=MIB, copy_part_bytes=5 * MIB)
    report = retirer.retire(action("checkpoint-100"))
    assert report.outcomes[0].done
    assert len(calls.of("UploadPartCopy")) == 3
    assert body(s3, f"{ARCHIVED}checkpoint-100/optimizer.pt") == big
    # the copy keeps a full-object checksum of the source's algorithm: S3 proves it end to end
    head = s3.head_object(Bucket=BUCKET, Key=f"{ARCHIVED}checkpoint-100/optimizer.pt", ChecksumMode="ENABLED")
    assert head["ChecksumType"] == "FULL_OBJECT" and head["ChecksumCRC32"]


@pytest.mark.claim("A directory that cannot finish is shown, not retried for ever.")
def test_a_directory_too_large_to_list_within_the_pass_is_left_for_the_next_pass(s3: Any) -> None:
    # 1,001 objects: two pages of list_objects_v2; the pass's time runs out after the first page
    checkpoint(s3, 100)
    checkpoint(s3, 200)
    for i in range(1001):
        s3.put_object(Bucket=BUCKET, Key=f"{ROOT}checkpoint-100/shard-{i:05d}", Body=b"x")
    ticks = iter(range(1_000_000))
    slow = S3CheckpointRetirer(s3, budget_s=5.0, clock=lambda: 10.0 * next(ticks))  # 10 s a look
    calls = Calls(s3)
    report = slow.retire(action("checkpoint-100", "checkpoint-200"))
    assert "unfinished" in report.text
    assert len(calls.of("ListObjectsV2")) == 1  # the listing stopped after its first page
    assert len(keys(s3, f"{ROOT}checkpoint-100/")) == 1001 + len(FILES)  # nothing deleted
    assert keys(s3, f"{ARCHIVED}") == set()  # nothing copied either
    # it had the whole pass and could not even be listed: it counts against the directory
    (outcome,) = report.outcomes
    assert (
        outcome.name == "checkpoint-100" and outcome.blocked and "takes longer than a pass" in outcome.blocked
    )


# --- two runs, one team archive; what proves a copy (issue 32 item 1) -----------------------------


@pytest.mark.claim("Every run archives under its own run id")
def test_retirer_two_runs_sharing_one_archive_keep_each_others_copies(s3: Any) -> None:
    # two runs of one model write checkpoint-1000 with real multipart uploads: equal sizes,
    # different bytes, multipart ETags; both retire it to one team-level archive
    team = f"s3://{BUCKET}/team-archive/"
    runs = {
        "01JRUNA0000000000000000000": "runs/alpha/ckpt/",
        "01JRUNB0000000000000000000": "runs/bravo/ckpt/",
    }
    wrote: dict[str, dict[str, bytes]] = {}
    for n, (run_id, root) in enumerate(runs.items()):
        shards = {f"model-0000{i}.safetensors": bytes([n * 16 + i]) * (6 * MIB) for i in (1, 2)}
        for name, data in shards.items():
            multipart_put(s3, f"{root}checkpoint-1000/{name}", data)
        marker = f'{{"global_step": 1000, "run": {n}}}'.encode()
        s3.put_object(Bucket=BUCKET, Key=f"{root}checkpoint-1000/trainer_state.json", Body=marker)
        wrote[run_id] = {**shards, "trainer_state.json": marker}
    for run_id, root in runs.items():
        retire = action(
            "checkpoint-1000", uri=f"s3://{BUCKET}/{root}", archive=run_archive_prefix(team, run_id)
        )
        assert S3CheckpointRetirer(s3).retire(retire).outcomes[0].done
        assert keys(s3, f"{root}checkpoint-1000/") == set()
    for run_id, files in wrote.items():
        copies = f"team-archive/{run_id}/checkpoint-1000/"  # the key names the run
        assert {name: body(s3, copies + name) for name in keys(s3, copies)} == files
    assert {k.split("/")[0] for k in keys(s3, "team-archive/")} == set(runs)


@pytest.mark.claim("A copy is proven, never assumed.")
def test_retirer_an_archive_object_of_equal_size_is_a_copy_only_when_checksums_prove_it(s3: Any) -> None:
    # the source and an object already at its archive key: equal sizes, different bytes, both
    # multipart uploads (ETag "-N", no additional checksum): nothing proves it a copy
    shard = bytes([7]) * (6 * MIB)
    multipart_put(s3, f"{ROOT}checkpoint-100/model-00001.safetensors", shard)
    multipart_put(s3, f"{ARCHIVED}checkpoint-100/model-00001.safetensors", bytes([9]) * (6 * MIB))
    # ... and one whose checksum proves it (a copy an earlier pass made, its report lost)
    s3.put_object(Bucket=BUCKET, Key=f"{ROOT}checkpoint-100/trainer_state.json", Body=b"{}")
    s3.copy_object(
        Bucket=BUCKET,
        Key=f"{ARCHIVED}checkpoint-100/trainer_state.json",
        CopySource={"Bucket": BUCKET, "Key": f"{ROOT}checkpoint-100/trainer_state.json"},
    )
    calls = Calls(s3)
    assert S3CheckpointRetirer(s3).retire(action("checkpoint-100")).outcomes[0].done
    assert body(s3, f"{ARCHIVED}checkpoint-100/model-00001.safetensors") == shard  # copied again
    assert calls.of("CopyObject") == [f"{ARCHIVED}checkpoint-100/model-00001.safetensors"]


@pytest.mark.claim("A copy is proven, never assumed.")
@pytest.mark.parametrize(
    ("a", "b", "verdict"),
    [
        ({"CRC32": ("x", "FULL_OBJECT")}, {"CRC32": ("x", "FULL_OBJECT")}, True),
        ({"CRC32": ("x", "FULL_OBJECT")}, {"CRC32": ("y", "FULL_OBJECT")}, False),
        ({"CRC32": ("x-2", "COMPOSITE")}, {"CRC32": ("y-3", "COMPOSITE")}, None),
        ({"CRC32": ("x-2", "COMPOSITE")}, {"CRC32": ("x-2", "COMPOSITE")}, True),
        ({"CRC32": ("x", "FULL_OBJECT")}, {"CRC32": ("x-2", "COMPOSITE")}, None),
        ({"CRC64NVME": ("x", "FULL_OBJECT")}, {"SHA256": ("x", "FULL_OBJECT")}, None),
        ({}, {}, None),
    ],
    ids=[
        "one algorithm, one value",
        "one algorithm over the whole object disagrees",
        "composite checksums of other part sizes say nothing",
        "equal composite checksums",
        "a full-object and a composite checksum say nothing",
        "no algorithm in common",
        "no checksums (a multipart upload made without one)",
    ],
)
def test_retirer_same_content_is_decided_by_checksums_alone(a: Any, b: Any, verdict: bool | None) -> None:
    assert same_content(a, b) is verdict


@pytest.mark.claim("A copy is proven, never assumed.")
def test_retirer_moves_sse_kms_sources_to_an_sse_s3_archive_in_one_pass(s3: Any) -> None:
    # SSE-KMS source (its ETags are not MD5s), SSE-S3 archive (they are): the ETags never agree;
    # the checksums S3 copies with the object do
    kms = KmsEtags(s3)
    checkpoint(s3, 100, ServerSideEncryption="aws:kms")
    assert s3.head_object(Bucket=BUCKET, Key=f"{ROOT}checkpoint-100/optimizer.pt")["ETag"] == kms.etag(
        f"{ROOT}checkpoint-100/optimizer.pt"
    )
    report = S3CheckpointRetirer(s3).retire(action("checkpoint-100"))
    assert report.error is None and report.outcomes[0].done
    assert (
        keys(s3, f"{ARCHIVED}checkpoint-100/") == set(FILES) and keys(s3, f"{ROOT}checkpoint-100/") == set()
    )


# --- progress across passes (issue 32 item 2) -----------------------------------------------------


@pytest.mark.claim("objects an earlier pass proved are not charged again, and the next pass continues")
def test_retirer_a_directory_larger_than_one_pass_finishes_without_proving_objects_twice(s3: Any) -> None:
    # 25 shards and a marker, 10 objects a pass: before, every pass re-checked the shards it had
    # proven and stopped at the same one
    shards = tuple(f"shard-{i:03d}.pt" for i in range(25))
    checkpoint(s3, 100, files=(*shards, "trainer_state.json"))
    calls = Calls(s3)
    retire, passes = action("checkpoint-100"), 0
    while True:
        passes += 1
        report = S3CheckpointRetirer(s3, max_objects=10).retire(retire)
        assert report.error is None and report.outcomes[0].progressed
        if report.outcomes[0].done:
            break
        assert passes < 5, report.text
        retire = continued(retire, report)
    assert passes == 3  # 10 + 10 + 6 copies, then the deletes in the same pass
    copied = calls.of("CopyObject")
    assert len(copied) == len(set(copied)) == 26  # no object copied or proven twice
    assert len(calls.of("HeadObject")) == 26
    assert keys(s3, f"{ARCHIVED}checkpoint-100/") == {*shards, "trainer_state.json"}
    assert keys(s3, f"{ROOT}checkpoint-100/") == set()


@pytest.mark.claim("A copy is proven, never assumed.")
def test_retirer_a_changed_source_is_proven_again_not_trusted(s3: Any) -> None:
    checkpoint(s3, 100, files=("a.pt", "b.pt", "trainer_state.json"))
    first = S3CheckpointRetirer(s3, max_objects=2).retire(action("checkpoint-100"))
    assert first.outcomes[0].state.verified == 2
    # SageMaker's sync uploads a.pt again with other bytes before the next pass
    s3.put_object(Bucket=BUCKET, Key=f"{ROOT}checkpoint-100/a.pt", Body=b"rewritten")
    S3CheckpointRetirer(s3).retire(continued(action("checkpoint-100"), first))
    assert body(s3, f"{ARCHIVED}checkpoint-100/a.pt") == b"rewritten"


@pytest.mark.claim("a multipart copy resumes from its last part (`ListParts`)")
@pytest.mark.claim("`CopyObject` up to 1 GB, 1 GB parts above")
def test_retirer_resumes_a_multipart_copy_from_its_last_part(s3: Any) -> None:
    big = bytes(range(256)) * (12 * 1024 * 4)  # 12 MiB: 3 parts of 5 MiB
    s3.put_object(Bucket=BUCKET, Key=f"{ROOT}checkpoint-100/optimizer.pt", Body=big)
    s3.put_object(Bucket=BUCKET, Key=f"{ROOT}checkpoint-100/trainer_state.json", Body=b"{}")
    now = [0.0]

    def part_takes_10_s(**_: Any) -> None:
        now[0] += 10.0  # each part copy takes 10 s of a pass's 15

    s3.meta.events.register("before-call.s3.UploadPartCopy", part_takes_10_s)
    calls = Calls(s3)
    retire, reports = action("checkpoint-100"), []
    for _ in range(4):
        now[0] += 600.0  # the next pass, minutes later
        retirer = S3CheckpointRetirer(
            s3, copy_object_max=MIB, copy_part_bytes=5 * MIB, budget_s=15.0, clock=lambda: now[0]
        )
        reports.append(retirer.retire(retire))
        if reports[-1].outcomes[0].done:
            break
        assert reports[-1].outcomes[0].progressed and reports[-1].outcomes[0].state.upload is not None
        retire = continued(retire, reports[-1])
    assert reports[-1].outcomes[0].done and len(reports) == 2  # 2 parts, then 1 and the rest
    assert calls.parts() == [1, 2, 3]  # no part copied twice
    assert len(calls.of("CreateMultipartUpload")) == 1 and calls.of("AbortMultipartUpload") == []
    assert body(s3, f"{ARCHIVED}checkpoint-100/optimizer.pt") == big
    assert s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) == []


@pytest.mark.claim("a multipart copy resumes from its last part (`ListParts`)")
def test_retirer_aborts_an_open_copy_of_its_key_that_no_pass_reported(s3: Any) -> None:
    # an invocation died mid-copy: its upload is open under the run's archive key, unreported
    big = bytes(range(256)) * (12 * 1024 * 4)
    s3.put_object(Bucket=BUCKET, Key=f"{ROOT}checkpoint-100/optimizer.pt", Body=big)
    s3.put_object(Bucket=BUCKET, Key=f"{ROOT}checkpoint-100/trainer_state.json", Body=b"{}")
    target = f"{ARCHIVED}checkpoint-100/optimizer.pt"
    orphan = s3.create_multipart_upload(Bucket=BUCKET, Key=target)["UploadId"]
    other = s3.create_multipart_upload(Bucket=BUCKET, Key=f"{target}.not-ours")["UploadId"]
    calls = Calls(s3)
    retirer = S3CheckpointRetirer(s3, copy_object_max=MIB, copy_part_bytes=5 * MIB)
    assert retirer.retire(action("checkpoint-100")).outcomes[0].done
    assert calls.of("AbortMultipartUpload") == [target]
    left = {u["UploadId"] for u in s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])}
    assert orphan not in left and other in left  # only the upload of exactly its key
    assert body(s3, target) == big


def test_retirer_copies_only_the_version_it_listed(s3: Any) -> None:
    # the source is written again between the listing and its copy: S3 refuses a CopyObject whose
    # CopySourceIfMatch no longer matches (412 PreconditionFailed); moto ignores the condition, so
    # this double applies it as S3 documents
    checkpoint(s3, 100, files=("a.pt", "trainer_state.json"))
    original = s3.copy_object

    def conditional(**kw: Any) -> Any:
        source = kw["CopySource"]
        if source["Key"].endswith("a.pt"):
            s3.put_object(Bucket=BUCKET, Key=source["Key"], Body=b"written again, longer")
        current = s3.head_object(Bucket=source["Bucket"], Key=source["Key"])["ETag"]
        if kw.get("CopySourceIfMatch") not in (None, current):
            raise ClientError(
                {
                    "Error": {
                        "Code": "PreconditionFailed",
                        "Message": "At least one of the pre-conditions you specified did not hold",
                    }
                },
                "CopyObject",
            )
        return original(**kw)

    s3.copy_object = conditional
    report = S3CheckpointRetirer(s3).retire(action("checkpoint-100"))
    assert report.error is not None and "PreconditionFailed" in report.error
    assert report.outcomes[0].blocked is None  # the next pass lists it again
    assert keys(s3, f"{ROOT}checkpoint-100/") == {"a.pt", "trainer_state.json"}
