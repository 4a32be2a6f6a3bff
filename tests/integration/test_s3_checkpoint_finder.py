"""S3CheckpointFinder against moto's S3: layouts, half-written directories, paging and call counts."""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from drill.clock import VirtualClock, moto_s3_follow
from sagewarden.adapters.s3_checkpoint_finder import CheckpointLookupError, S3CheckpointFinder
from sagewarden.domain.vocabulary.layouts import Checkpoint, CheckpointLayout, LayoutKind

BUCKET = "sagewarden-ckpt-test"
ROOT = "runs/r-001/checkpoints/"
URI = f"s3://{BUCKET}/{ROOT}"
TRACKER = "latest_checkpointed_iteration.txt"


class CallLog:
    """Counts the S3 operations a client makes (botocore ``before-call`` hook)."""

    def __init__(self, client: Any) -> None:
        self.calls: list[str] = []
        client.meta.events.register("before-call.s3", self._record)

    def _record(self, model: Any, **_: Any) -> None:
        self.calls.append(model.name)

    def reset(self) -> None:
        self.calls.clear()

    @property
    def counts(self) -> Counter[str]:
        return Counter(self.calls)


@pytest.fixture
def s3(aws: None) -> Iterator[Any]:
    client = boto3.client("s3", region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    yield client


@pytest.fixture
def calls(s3: Any) -> CallLog:
    return CallLog(s3)


def put(s3: Any, *keys: str, root: str = ROOT, body: bytes = b"x") -> None:
    for key in keys:
        s3.put_object(Bucket=BUCKET, Key=root + key, Body=body)


def marker_ms(s3: Any, key: str) -> int:
    return int(s3.head_object(Bucket=BUCKET, Key=key)["LastModified"].timestamp() * 1000)


# --- Hugging Face ------------------------------------------------------------------------------


@pytest.mark.claim("resume**: start a new attempt from the newest *verified* checkpoint")
def test_latest_hf_skips_half_written_newest(s3: Any, calls: CallLog) -> None:
    for step in (100, 200):
        put(s3, f"checkpoint-{step}/model.safetensors", f"checkpoint-{step}/trainer_state.json")
    put(s3, "checkpoint-300/model.safetensors", "checkpoint-300/optimizer.pt")
    calls.reset()

    found = S3CheckpointFinder(s3).latest(URI, CheckpointLayout(LayoutKind.HF))
    made = calls.counts

    assert found == Checkpoint(
        uri=f"{URI}checkpoint-200/",
        step=200,
        layout=LayoutKind.HF,
        written_at_ms=marker_ms(s3, f"{ROOT}checkpoint-200/trainer_state.json"),
        previous_step=100,  # the next older directory: the checkpoint interval in steps
    )
    assert made == Counter({"ListObjectsV2": 1, "HeadObject": 2})


def test_latest_hf_orders_by_numeric_step(s3: Any) -> None:
    for step in (900, 1000, 95):
        put(s3, f"checkpoint-{step}/trainer_state.json")

    found = S3CheckpointFinder(s3).latest(URI)

    assert found is not None
    assert (found.step, found.uri, found.layout) == (1000, f"{URI}checkpoint-1000/", LayoutKind.HF)


def test_latest_hf_ignores_tracker_file_without_reading_it(s3: Any, calls: CallLog) -> None:
    put(s3, "checkpoint-5/trainer_state.json", TRACKER)
    calls.reset()

    found = S3CheckpointFinder(s3).latest(URI)

    assert found is not None and found.step == 5
    assert "GetObject" not in calls.counts


def test_latest_gives_up_after_max_probes(s3: Any, calls: CallLog, caplog: pytest.LogCaptureFixture) -> None:
    put(s3, "checkpoint-1/trainer_state.json")
    put(s3, *(f"checkpoint-{step}/model.safetensors" for step in range(10, 60, 10)))
    calls.reset()

    with caplog.at_level(logging.WARNING, logger="sagewarden.adapters.s3_checkpoint_finder"):
        found = S3CheckpointFinder(s3, max_probes=3).latest(URI, CheckpointLayout(LayoutKind.HF))

    assert found is None
    assert calls.counts["HeadObject"] == 3
    assert any("gave up after 3" in r.getMessage() for r in caplog.records)
    assert any("checkpoint-50" in r.getMessage() for r in caplog.records)


def test_latest_finds_complete_checkpoint_just_within_max_probes(s3: Any, calls: CallLog) -> None:
    put(s3, "checkpoint-1/trainer_state.json")
    put(s3, *(f"checkpoint-{step}/model.safetensors" for step in range(10, 30, 10)))  # 2 incomplete
    calls.reset()

    found = S3CheckpointFinder(s3, max_probes=3).latest(URI)

    assert found is not None and found.step == 1
    assert calls.counts["HeadObject"] == 3


def test_finder_rejects_bad_settings(s3: Any) -> None:
    with pytest.raises(ValueError):
        S3CheckpointFinder(s3, max_probes=0)
    with pytest.raises(ValueError):
        S3CheckpointFinder(s3, page_size=1001)


# --- Megatron ----------------------------------------------------------------------------------


def test_latest_megatron_follows_tracker_past_newer_partial_iter(s3: Any, calls: CallLog) -> None:
    put(s3, "iter_0000500/mp_rank_00/model_optim_rng.pt")
    put(s3, "iter_0001000/mp_rank_00/model_optim_rng.pt", "iter_0001000/mp_rank_01/model_optim_rng.pt")
    put(s3, "iter_0002000/mp_rank_00/model_optim_rng.pt")  # being written
    put(s3, TRACKER, body=b"1000\n")
    calls.reset()

    found = S3CheckpointFinder(s3).latest(URI, CheckpointLayout(LayoutKind.MEGATRON))
    made = calls.counts

    assert found == Checkpoint(
        uri=f"{URI}iter_0001000/",
        step=1000,
        layout=LayoutKind.MEGATRON,
        written_at_ms=marker_ms(s3, ROOT + TRACKER),
        previous_step=500,
    )
    # one listing page, one tracker read, one MaxKeys=1 listing of iter_0001000/
    assert made == Counter({"ListObjectsV2": 2, "GetObject": 1})


def test_latest_megatron_auto_layout_reads_tracker(s3: Any) -> None:
    put(s3, "iter_0000010/model.pt", "iter_0000020/model.pt", TRACKER, body=b"10")

    found = S3CheckpointFinder(s3).latest(URI)

    assert found is not None
    assert (found.step, found.layout) == (10, LayoutKind.MEGATRON)


def test_latest_megatron_release(s3: Any) -> None:
    put(s3, "release/mp_rank_00/model_optim_rng.pt")
    put(s3, "iter_0000100/mp_rank_00/model_optim_rng.pt")  # started after release, not finished
    put(s3, TRACKER, body=b"release\n")

    found = S3CheckpointFinder(s3).latest(URI, CheckpointLayout(LayoutKind.MEGATRON))

    assert found is not None
    assert (found.uri, found.step, found.layout) == (f"{URI}release/", 0, LayoutKind.MEGATRON)
    assert found.written_at_ms == marker_ms(s3, ROOT + TRACKER)


def test_latest_megatron_release_without_release_dir_is_none(s3: Any) -> None:
    put(s3, "iter_0000100/model.pt", TRACKER, body=b"release")

    assert S3CheckpointFinder(s3).latest(URI, CheckpointLayout(LayoutKind.MEGATRON)) is None


def test_latest_megatron_tracker_naming_missing_dir_falls_back_to_older(s3: Any) -> None:
    put(s3, "iter_0000500/model.pt", "iter_0002000/model.pt", TRACKER, body=b"1000")

    found = S3CheckpointFinder(s3).latest(URI, CheckpointLayout(LayoutKind.MEGATRON))

    assert found is not None
    assert (found.step, found.written_at_ms) == (500, None)


def test_latest_megatron_folder_placeholder_is_not_a_checkpoint(s3: Any) -> None:
    put(s3, "iter_0000100/", body=b"")  # console-style "folder", no files inside
    put(s3, TRACKER, body=b"100")

    assert S3CheckpointFinder(s3).latest(URI, CheckpointLayout(LayoutKind.MEGATRON)) is None


def test_latest_megatron_without_tracker_uses_metadata(s3: Any, calls: CallLog) -> None:
    put(s3, "iter_0000100/.metadata", "iter_0000100/__0_0.distcp")
    put(s3, "iter_0000200/__0_0.distcp")
    calls.reset()

    found = S3CheckpointFinder(s3).latest(URI, CheckpointLayout(LayoutKind.MEGATRON))
    made = calls.counts

    assert found is not None
    assert (found.step, found.written_at_ms) == (100, marker_ms(s3, f"{ROOT}iter_0000100/.metadata"))
    assert made == Counter({"ListObjectsV2": 1, "HeadObject": 2})


def test_latest_megatron_without_tracker_or_metadata_is_none(s3: Any) -> None:
    put(s3, "iter_0000100/mp_rank_00/model_optim_rng.pt", "iter_0000200/mp_rank_00/model_optim_rng.pt")

    assert S3CheckpointFinder(s3).latest(URI, CheckpointLayout(LayoutKind.MEGATRON)) is None


def test_latest_megatron_garbage_tracker_falls_back_to_metadata(s3: Any) -> None:
    put(s3, "iter_0000100/.metadata", "iter_0000200/model.pt")
    put(s3, TRACKER, body=b"\xff\xfenot a number")

    found = S3CheckpointFinder(s3).latest(URI, CheckpointLayout(LayoutKind.MEGATRON))

    assert found is not None and found.step == 100


# --- DCP / regex -------------------------------------------------------------------------------


def test_latest_dcp_requires_metadata(s3: Any) -> None:
    put(s3, "step_1200/.metadata", "step_1200/__0_0.distcp")
    put(s3, "step_1300/__0_0.distcp", "step_1300/__1_0.distcp")
    layout = CheckpointLayout(LayoutKind.DCP)

    found = S3CheckpointFinder(s3).latest(URI, layout)

    assert found is not None
    assert (found.uri, found.step, found.layout) == (f"{URI}step_1200/", 1200, LayoutKind.DCP)
    assert found.written_at_ms == marker_ms(s3, f"{ROOT}step_1200/.metadata")


def test_latest_dcp_without_any_metadata_is_none(s3: Any) -> None:
    put(s3, "step_1200/__0_0.distcp", "step-1300/__0_0.distcp")

    assert S3CheckpointFinder(s3).latest(URI, CheckpointLayout(LayoutKind.DCP)) is None


def test_latest_regex_layout_uses_marker(s3: Any) -> None:
    put(s3, "ckpt.e1.s1500/weights.bin", "ckpt.e1.s1500/_COMPLETE")
    put(s3, "ckpt.e2.s3000/weights.bin")
    put(s3, "ckpt.e3.s4500.tmp/weights.bin", "ckpt.e3.s4500.tmp/_COMPLETE")
    layout = CheckpointLayout(LayoutKind.REGEX, dir_regex=r"ckpt\.e\d+\.s(?P<step>\d+)", marker="_COMPLETE")

    found = S3CheckpointFinder(s3).latest(URI, layout)

    assert found is not None
    assert (found.uri, found.step, found.layout) == (f"{URI}ckpt.e1.s1500/", 1500, LayoutKind.REGEX)


# --- locations ---------------------------------------------------------------------------------


def test_latest_nested_prefix_ignores_sibling_runs(s3: Any) -> None:
    put(s3, "checkpoint-10/trainer_state.json")
    put(s3, "checkpoint-99/trainer_state.json", root="runs/r-002/checkpoints/")
    put(s3, "checkpoint-98/trainer_state.json", root="runs/r-001/checkpoints-old/")

    for uri in (URI, URI.rstrip("/")):
        found = S3CheckpointFinder(s3).latest(uri)
        assert found is not None
        assert (found.uri, found.step) == (f"{URI}checkpoint-10/", 10)


def test_latest_bucket_root(s3: Any) -> None:
    put(s3, "checkpoint-7/trainer_state.json", "checkpoint-8/model.safetensors", "notes.txt", root="")
    put(s3, "checkpoint-99/trainer_state.json", root="deeper/")

    for uri in (f"s3://{BUCKET}", f"s3://{BUCKET}/"):
        found = S3CheckpointFinder(s3).latest(uri)
        assert found is not None
        assert (found.uri, found.step) == (f"s3://{BUCKET}/checkpoint-7/", 7)


def test_latest_empty_location_is_none(s3: Any, calls: CallLog) -> None:
    put(s3, "checkpoint-1/trainer_state.json", root="elsewhere/")
    calls.reset()

    assert S3CheckpointFinder(s3).latest(URI) is None
    assert calls.counts == Counter({"ListObjectsV2": 1})


def test_latest_location_without_checkpoint_dirs_is_none(s3: Any, calls: CallLog) -> None:
    put(s3, "logs/events.out", "tensorboard/run.tfevents", "README.md")
    calls.reset()

    assert S3CheckpointFinder(s3).latest(URI) is None
    assert calls.counts == Counter({"ListObjectsV2": 1})


def test_latest_rejects_malformed_uri(s3: Any) -> None:
    with pytest.raises(ValueError):
        S3CheckpointFinder(s3).latest(f"https://{BUCKET}.example/{ROOT}")


# --- paging and cost ---------------------------------------------------------------------------


@pytest.mark.claim(
    'Checkpoint discovery lists only the child "directories" (`Delimiter="/"`, paginated) and probes newest-first for the completion marker.'
)
@pytest.mark.claim(
    "the sweep works through due runs in round-robin shards under a time budget, and every AWS list call follows its token"
)
def test_latest_pages_through_small_pages(s3: Any, calls: CallLog) -> None:
    put(s3, *(f"checkpoint-{step}/trainer_state.json" for step in range(1, 7)))
    put(s3, "checkpoint-7/model.safetensors", TRACKER)
    calls.reset()

    found = S3CheckpointFinder(s3, page_size=2).latest(URI)

    assert found is not None and found.step == 6
    # 7 directories + 1 file at 2 entries per page -> 4 pages, then 2 probes.
    assert calls.counts == Counter({"ListObjectsV2": 4, "HeadObject": 2})


@pytest.mark.claim("For 2,000 checkpoint directories with a half-written newest one it makes 4 S3 calls.")
def test_latest_two_thousand_hf_dirs_costs_list_pages_plus_two_heads(s3: Any, calls: CallLog) -> None:
    # 2,000 checkpoint directories, the newest one half-written (weights, no trainer_state.json).
    newest = 2000
    put(s3, *(f"checkpoint-{step}/trainer_state.json" for step in range(1, newest)))
    put(s3, f"checkpoint-{newest}/model.safetensors")
    calls.reset()

    found = S3CheckpointFinder(s3).latest(URI)

    assert found is not None
    assert (found.step, found.uri) == (newest - 1, f"{URI}checkpoint-{newest - 1}/")
    # 2,000 common prefixes at 1,000 per page -> 2 list pages, + 2 head_object.
    assert calls.counts == Counter({"ListObjectsV2": 2, "HeadObject": 2})
    assert len(calls.calls) == 4


# --- errors ------------------------------------------------------------------------------------


def test_latest_missing_bucket_raises_lookup_error(s3: Any) -> None:
    with pytest.raises(CheckpointLookupError, match="does not exist") as info:
        S3CheckpointFinder(s3).latest("s3://no-such-bucket-here/ckpt")
    assert info.value.code == "NoSuchBucket"


def test_latest_access_denied_on_list_raises_lookup_error(s3: Any) -> None:
    with Stubber(s3) as stub:
        stub.add_client_error("list_objects_v2", service_error_code="AccessDenied", http_status_code=403)
        with pytest.raises(CheckpointLookupError, match="access denied") as info:
            S3CheckpointFinder(s3).latest(URI)
    assert info.value.code == "AccessDenied"


def test_latest_forbidden_marker_raises_lookup_error(s3: Any) -> None:
    with Stubber(s3) as stub:
        stub.add_response(
            "list_objects_v2",
            {"CommonPrefixes": [{"Prefix": f"{ROOT}checkpoint-3/"}], "IsTruncated": False},
        )
        stub.add_client_error("head_object", service_error_code="403", http_status_code=403)
        with pytest.raises(CheckpointLookupError, match=r"checkpoint-3/trainer_state\.json"):
            S3CheckpointFinder(s3).latest(URI)
        stub.assert_no_pending_responses()


# --- the submit-time check (issue 16 item 2) ---------------------------------------------------


@pytest.mark.claim(
    "a `CheckpointConfig.S3Uri` it cannot list (one `ListObjectsV2` of one key: the bucket does not exist, is in another region, or is denied to the supervisor's role by `checkpointBuckets` or its bucket policy)"
)
def test_check_access_is_one_listing_of_one_key_and_passes_on_an_empty_prefix(
    s3: Any, calls: CallLog
) -> None:
    S3CheckpointFinder(s3).check_access(f"s3://{BUCKET}/fresh-run/checkpoints/")
    assert calls.calls == ["ListObjectsV2"]


def test_check_access_missing_bucket_is_a_permanent_error(s3: Any) -> None:
    with pytest.raises(CheckpointLookupError, match="does not exist") as info:
        S3CheckpointFinder(s3).check_access("s3://no-such-bucket-here/ckpt/")
    assert info.value.permanent


@pytest.mark.claim(
    "a `CheckpointConfig.S3Uri` it cannot list (one `ListObjectsV2` of one key: the bucket does not exist, is in another region, or is denied to the supervisor's role by `checkpointBuckets` or its bucket policy)"
)
@pytest.mark.parametrize(
    ("code", "status", "permanent"),
    [
        ("AccessDenied", 403, True),
        ("AllAccessDisabled", 403, True),
        ("PermanentRedirect", 301, True),  # the bucket is in another region
        ("SlowDown", 503, False),
        ("InternalError", 500, False),
        ("ExpiredToken", 400, False),
    ],
    ids=[
        "access denied is permanent",
        "all access disabled is permanent",
        "a bucket in another region is permanent",
        "a slow down heals",
        "an internal error heals",
        "an expired token heals",
    ],
)
def test_check_access_says_which_errors_cannot_heal_by_themselves(
    s3: Any, code: str, status: int, permanent: bool
) -> None:
    with Stubber(s3) as stub:
        stub.add_client_error("list_objects_v2", service_error_code=code, http_status_code=status)
        with pytest.raises(CheckpointLookupError) as info:
            S3CheckpointFinder(s3).check_access(URI)
    assert (info.value.code, info.value.permanent) == (code, permanent)


# --- a save under way ----------------------------------------------------------------------------


def test_save_activity_is_the_newest_object_of_the_newest_directory(s3: Any, calls: CallLog) -> None:
    put(s3, "checkpoint-100/model.safetensors", "checkpoint-100/trainer_state.json")
    put(
        s3, "checkpoint-200/model-00001.safetensors", "checkpoint-200/model-00002.safetensors"
    )  # being written
    newest = max(
        int(o["LastModified"].timestamp() * 1000)
        for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{ROOT}checkpoint-200/")["Contents"]
    )
    calls.reset()
    finder = S3CheckpointFinder(s3)
    assert finder.save_activity(URI, CheckpointLayout(LayoutKind.HF)) == newest
    assert calls.counts == Counter({"ListObjectsV2": 2})  # the directories, then the newest one
    assert finder.save_activity(f"s3://{BUCKET}/elsewhere/", CheckpointLayout(LayoutKind.HF)) is None


def test_save_activity_that_cannot_be_read_is_an_error_not_none(s3: Any) -> None:
    with Stubber(s3) as stub:
        stub.add_client_error("list_objects_v2", service_error_code="AccessDenied", http_status_code=403)
        with pytest.raises(CheckpointLookupError, match="access denied"):
            S3CheckpointFinder(s3).save_activity(URI, CheckpointLayout(LayoutKind.HF))


def _shards(s3: Any, n: int) -> None:
    put(s3, *(f"checkpoint-300/shard-{i:05d}" for i in range(n)))


@pytest.mark.claim(
    "the listing stops at the first page showing a write in the last 5 minutes, and is read within 10 seconds"
)
def test_save_activity_stops_at_the_first_page_showing_a_recent_write(s3: Any, calls: CallLog) -> None:
    """A write at or after ``active_since_ms`` already means "saving": the other pages of a
    directory of thousands of shards are not read."""
    _shards(s3, 25)
    calls.reset()
    finder = S3CheckpointFinder(s3, page_size=10)
    at = finder.save_activity(URI, CheckpointLayout(LayoutKind.HF), active_since_ms=0)
    assert at is not None and calls.counts == Counter({"ListObjectsV2": 2})  # directories, one page
    calls.reset()
    newest = finder.save_activity(URI, CheckpointLayout(LayoutKind.HF))  # no bound: every page
    assert newest is not None and newest >= at and calls.counts == Counter({"ListObjectsV2": 4})


@pytest.mark.claim(
    'a directory too large for that (100,000 shards is 100 pages) is "unknown", and deferred the same way'
)
def test_save_activity_cut_by_its_time_budget_is_unknown_not_an_answer(s3: Any, calls: CallLog) -> None:
    """Pages read past the budget without a recent write: the newest write is not known, so no
    time is returned -- an error the caller turns into a deferral."""
    _shards(s3, 25)
    ticks = iter(range(100))
    finder = S3CheckpointFinder(s3, page_size=10, clock=lambda: float(next(ticks)))
    far_future = 10**15
    with pytest.raises(CheckpointLookupError, match="time budget"):
        finder.save_activity(URI, CheckpointLayout(LayoutKind.HF), active_since_ms=far_future, budget_s=1.5)
    # within its budget the same listing is read to its end
    finder = S3CheckpointFinder(s3, page_size=10, clock=lambda: 0.0)
    assert finder.save_activity(URI, CheckpointLayout(LayoutKind.HF), active_since_ms=far_future) is not None


@pytest.mark.claim(
    "the listing stops at the first page showing a write in the last 5 minutes, and is read within 10 seconds"
)
def test_save_activity_is_read_within_ten_seconds_by_default(s3: Any) -> None:
    """docs/hang-detection.md: the listing "is read within 10 seconds". 9.9 s into it another page
    is read; at 10 s the listing is cut (unknown), whatever pages are left."""
    _shards(s3, 25)  # three pages of 10
    clock = iter([0.0, 9.9, 10.0])
    finder = S3CheckpointFinder(s3, page_size=10, clock=lambda: next(clock))
    with pytest.raises(CheckpointLookupError, match="cut after 2 pages by its 10-s time budget"):
        finder.save_activity(URI, CheckpointLayout(LayoutKind.HF), active_since_ms=10**15)


# --- how long a save took (goodput's checkpoint-save bucket and the interval advice) -----------

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def listed(*offsets_s: int, names: tuple[str, ...] = ()) -> dict[str, Any]:
    keys = names or tuple(f"{ROOT}checkpoint-7/f{i}" for i in range(len(offsets_s)))
    return {
        "Contents": [
            {"Key": k, "LastModified": T0 + timedelta(seconds=s), "Size": 1}
            for k, s in zip(keys, offsets_s, strict=True)
        ],
        "IsTruncated": False,
    }


def ckpt(done_s: int, name: str = "checkpoint-7/") -> Checkpoint:
    at = int((T0 + timedelta(seconds=done_s)).timestamp() * 1000)
    return Checkpoint(uri=f"{URI}{name}", step=7, layout=LayoutKind.HF, written_at_ms=at)


@pytest.mark.parametrize(
    ("offsets", "done", "expected"),
    [
        # weights, optimizer, marker land 60 s apart: the save began one gap before the weights
        ((60, 120, 180), 180, 180.0),
        # Megatron: two rank files in the directory, the tracker file (its marker) outside it
        ((60, 120), 180, 180.0),
        # an object written after the marker (the next save under the same name) is not this save's
        ((60, 120, 180, 900), 180, 180.0),
        # only the marker: nothing to measure the save by
        ((180,), 180, 0.0),
    ],
    ids=[
        "three objects a minute apart",
        "megatron's tracker outside the directory",
        "an object after the marker",
        "only the marker",
    ],
)
def test_write_seconds_counts_the_time_before_the_first_object_landed(
    s3: Any, offsets: tuple[int, ...], done: int, expected: float
) -> None:
    with Stubber(s3) as stub:
        stub.add_response("list_objects_v2", listed(*offsets))
        assert S3CheckpointFinder(s3).write_seconds(ckpt(done)) == pytest.approx(expected)
        stub.assert_no_pending_responses()


def test_write_seconds_of_an_unreadable_directory_is_an_error(s3: Any) -> None:
    with Stubber(s3) as stub:
        stub.add_client_error("list_objects_v2", service_error_code="AccessDenied", http_status_code=403)
        with pytest.raises(CheckpointLookupError):
            S3CheckpointFinder(s3).write_seconds(ckpt(180))


# --- retention's view ----------------------------------------------------------------------------


def _at(clock: VirtualClock, minute: int) -> int:
    clock.advance_to(DEFAULT_MS + minute * 60_000)
    return clock.now_ms


DEFAULT_MS = 1_767_571_200_000  # 2026-01-05, the drill's start


@pytest.mark.claim("A newest checkpoint still uploading does not count.")
def test_retention_view_dates_each_directory_and_the_newest_ones_last_write(s3: Any) -> None:
    """Issue 32 items 3 and 5: when each complete directory was written (its marker, or the file a
    Megatron probe listed), and the newest one's last write over every page -- a large file that
    lands after the marker is the save still uploading."""
    clock = VirtualClock(DEFAULT_MS)
    with moto_s3_follow(clock):
        t100 = _at(clock, 1)
        put(s3, "checkpoint-100/model.safetensors", "checkpoint-100/trainer_state.json")
        t200 = _at(clock, 10)
        put(s3, "checkpoint-200/trainer_state.json")  # the small marker first
        late = _at(clock, 13)
        put(s3, *(f"checkpoint-200/shard-{i:02d}" for i in range(5)))  # ... the large files after it
    view = S3CheckpointFinder(s3, page_size=2).complete(URI, CheckpointLayout(LayoutKind.HF), limit=4)
    assert view.complete == (("checkpoint-200", 200), ("checkpoint-100", 100))
    assert view.written("checkpoint-200") == t200 and view.written("checkpoint-100") == t100
    assert view.newest_write_ms == late  # every page of checkpoint-200 read
    mega = f"s3://{BUCKET}/mega/"
    with moto_s3_follow(clock):
        t_iter = _at(clock, 20)
        put(s3, "iter_0000100/mp_rank_00/model_optim_rng.pt", root="mega/")
        _at(clock, 30)
        put(s3, "iter_0000200/mp_rank_00/model_optim_rng.pt", root="mega/")
        put(s3, TRACKER, root="mega/", body=b"200")
    view = S3CheckpointFinder(s3).complete(mega, CheckpointLayout(LayoutKind.MEGATRON), limit=4)
    assert view.written("iter_0000100") == t_iter and view.best == ""  # no Hugging Face directory


@pytest.mark.claim("A newest checkpoint still uploading does not count.")
def test_retention_view_last_write_cut_by_its_budget_is_unknown(s3: Any) -> None:
    put(s3, "checkpoint-100/trainer_state.json", *(f"checkpoint-100/shard-{i:02d}" for i in range(25)))
    ticks = iter(range(1000))
    finder = S3CheckpointFinder(s3, page_size=10, clock=lambda: float(next(ticks)))
    view = finder.complete(URI, CheckpointLayout(LayoutKind.HF), budget_s=1.5)
    assert view.complete == (("checkpoint-100", 100),) and view.newest_write_ms is None


def _trainer_state(best: str | None, history: int) -> bytes:
    state = {
        "best_metric": 0.42,
        "best_model_checkpoint": best,
        "global_step": 900,
        "log_history": [{"loss": 1.0 / (i + 1), "step": i} for i in range(history)],
    }
    return json.dumps(state, indent=2, sort_keys=True).encode()  # as transformers writes it


@pytest.mark.claim("Only periodic checkpoints.")
def test_retention_view_reads_the_best_checkpoint_from_the_first_bytes_of_trainer_state(
    s3: Any, calls: CallLog
) -> None:
    """Issue 32 item 4: the newest complete Hugging Face directory's trainer_state.json names the
    best checkpoint; a long run's log_history makes it megabytes, and its sorted keys put
    best_model_checkpoint in the first bytes: one ranged GetObject reads it."""
    put(s3, "checkpoint-100/trainer_state.json", body=_trainer_state(None, 1))
    put(
        s3,
        "checkpoint-900/trainer_state.json",
        body=_trainer_state("/opt/ml/checkpoints/checkpoint-300", 20_000),
    )
    assert (
        s3.head_object(Bucket=BUCKET, Key=f"{ROOT}checkpoint-900/trainer_state.json")["ContentLength"] > 10**6
    )
    calls.reset()
    view = S3CheckpointFinder(s3).complete(URI, CheckpointLayout(LayoutKind.HF))
    assert view.best == "checkpoint-300"
    assert calls.counts["GetObject"] == 1
    put(s3, "checkpoint-900/trainer_state.json", body=_trainer_state(None, 3))
    assert S3CheckpointFinder(s3).complete(URI, CheckpointLayout(LayoutKind.HF)).best == ""
    # the key beyond the bytes read (a file written without sorted keys): unknown, not "none"
    unsorted = json.dumps({"log_history": ["x" * 100] * 1000, "best_model_checkpoint": "checkpoint-1"})
    put(s3, "checkpoint-900/trainer_state.json", body=unsorted.encode())
    assert S3CheckpointFinder(s3).complete(URI, CheckpointLayout(LayoutKind.HF)).best is None
