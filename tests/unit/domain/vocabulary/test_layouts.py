"""Pure checkpoint-selection logic: names, completeness, the tracker file and the probe walk."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sagewarden.domain.vocabulary.layouts import (
    DCP_MARKER,
    HF_MARKER,
    MEGATRON_RELEASE_DIR,
    Checkpoint,
    CheckpointLayout,
    Completion,
    LayoutKind,
    MegatronTracker,
    Probe,
    candidates,
    checkpoint_uri,
    first_complete,
    is_complete,
    needs_megatron_tracker,
    parse_megatron_tracker,
    parse_s3_uri,
    probe_plan,
    save_seconds,
    to_checkpoint,
)

HF = CheckpointLayout(LayoutKind.HF)
MEGATRON = CheckpointLayout(LayoutKind.MEGATRON)
DCP = CheckpointLayout(LayoutKind.DCP)
AUTO = CheckpointLayout()


# --- in-memory model of the adapter -----------------------------------------------------------


def choose(
    listing: dict[str, set[str]],
    layout: CheckpointLayout,
    *,
    tracker: MegatronTracker = None,
    max_probes: int = 10_000,
) -> tuple[Probe | None, int, bool]:
    """What the adapter does, over ``{dir name: file names inside}`` instead of S3.

    Returns (chosen probe, number of probes made, gave_up).
    """
    calls: list[Probe] = []

    def check(probe: Probe) -> Completion | None:
        calls.append(probe)
        files = listing.get(probe.name, set())
        ok = bool(files) if probe.marker is None else probe.marker in files
        return Completion() if ok else None

    plan = probe_plan(listing, layout, megatron_tracker=tracker)
    selection = first_complete(plan, check, max_probes)
    return selection.chosen, len(calls), selection.gave_up


# --- parse_s3_uri / checkpoint_uri ------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("s3://my-bucket/runs/r1/checkpoints", ("my-bucket", "runs/r1/checkpoints/")),
        ("s3://my-bucket/runs/r1/checkpoints/", ("my-bucket", "runs/r1/checkpoints/")),
        ("s3://my-bucket", ("my-bucket", "")),
        ("s3://my-bucket/", ("my-bucket", "")),
        ("s3://my.bucket-1/a", ("my.bucket-1", "a/")),
    ],
    ids=[
        "a prefix without a trailing slash",
        "a prefix with a trailing slash",
        "a bucket alone",
        "a bucket with a slash",
        "a bucket with a dot and a dash",
    ],
)
def test_parse_s3_uri_splits_bucket_and_prefix(uri: str, expected: tuple[str, str]) -> None:
    assert parse_s3_uri(uri) == expected


@pytest.mark.parametrize(
    "uri",
    [
        "",
        "s3://",
        "s3:///prefix",
        "https://my-bucket.s3.amazonaws.com/x",
        "S3://my-bucket/x",
        "my-bucket/x",
        "s3://my bucket/x",
        "s3://my-bucket/x y",
        "s3://my-bucket/x\n",
        "s3://-bad/x",
        "s3://a/x",
    ],
    ids=[
        "an empty uri",
        "a scheme alone",
        "no bucket",
        "an https url",
        "an upper-case scheme",
        "no scheme",
        "a space in the bucket",
        "a space in the prefix",
        "a trailing newline",
        "a bucket starting with a dash",
        "a bucket too short",
    ],
)
def test_parse_s3_uri_rejects_bad_input(uri: str) -> None:
    with pytest.raises(ValueError):
        parse_s3_uri(uri)


def test_parse_s3_uri_rejects_non_string() -> None:
    with pytest.raises(ValueError):
        parse_s3_uri(None)  # type: ignore[arg-type]


@given(
    bucket=st.from_regex(r"[a-z0-9][a-z0-9-]{1,20}[a-z0-9]", fullmatch=True),
    parts=st.lists(st.from_regex(r"[A-Za-z0-9_.=-]{1,8}", fullmatch=True), max_size=4),
    slash=st.booleans(),
)
def test_parse_s3_uri_prefix_is_empty_or_ends_with_slash(bucket: str, parts: list[str], slash: bool) -> None:
    path = "/".join(parts) + ("/" if slash and parts else "")
    got_bucket, prefix = parse_s3_uri(f"s3://{bucket}/{path}")
    assert got_bucket == bucket
    assert prefix == ("/".join(parts) + "/" if parts else "")


def test_checkpoint_uri_always_ends_with_slash() -> None:
    assert checkpoint_uri("bkt", "runs/r1/", "checkpoint-5") == "s3://bkt/runs/r1/checkpoint-5/"
    assert checkpoint_uri("bkt", "", "iter_0000005") == "s3://bkt/iter_0000005/"


# --- CheckpointLayout / Checkpoint ------------------------------------------------------------


def test_checkpoint_layout_accepts_plain_string_kind() -> None:
    layout = CheckpointLayout("hf")  # type: ignore[arg-type]
    assert layout.kind is LayoutKind.HF


def test_checkpoint_layout_drops_regex_fields_for_other_kinds() -> None:
    layout = CheckpointLayout(LayoutKind.HF, dir_regex=r"ckpt_(\d+)", marker="DONE")
    assert (layout.dir_regex, layout.marker) == (None, None)
    assert layout == HF


def test_checkpoint_coerces_string_layout() -> None:
    ckpt = Checkpoint(uri="s3://bkt/checkpoint-1/", step=1, layout="hf")  # type: ignore[arg-type]
    assert ckpt.layout is LayoutKind.HF


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kind": LayoutKind.REGEX, "marker": "DONE"},
        {"kind": LayoutKind.REGEX, "dir_regex": r"ckpt_(\d+)"},
        {"kind": LayoutKind.REGEX, "dir_regex": r"ckpt_(\d+", "marker": "DONE"},
        {"kind": LayoutKind.REGEX, "dir_regex": r"ckpt_\d+", "marker": "DONE"},
        {"kind": LayoutKind.REGEX, "dir_regex": r"ckpt_(\d+)", "marker": "/DONE"},
        {"kind": "nope"},
    ],
    ids=[
        "a regex layout without a regex",
        "a regex layout without a marker",
        "a regex that does not compile",
        "a regex without a step group",
        "a marker with a slash",
        "an unknown kind",
    ],
)
def test_checkpoint_layout_rejects_inconsistent_config(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        CheckpointLayout(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"uri": "s3://bkt/checkpoint-1", "step": 1, "layout": LayoutKind.HF},
        {"uri": "bkt/checkpoint-1/", "step": 1, "layout": LayoutKind.HF},
        {"uri": "s3://bkt/checkpoint-1/", "step": -1, "layout": LayoutKind.HF},
        {"uri": "s3://bkt/checkpoint-1/", "step": 1, "layout": LayoutKind.AUTO},
        {"uri": "s3://bkt/checkpoint-1/", "step": 1, "layout": "bogus"},
    ],
    ids=[
        "a uri without a trailing slash",
        "a uri without a scheme",
        "a negative step",
        "an auto layout",
        "an unknown layout",
    ],
)
def test_checkpoint_rejects_invalid_fields(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        Checkpoint(**kwargs)  # type: ignore[arg-type]


# --- candidates -------------------------------------------------------------------------------


def test_candidates_hf_orders_by_numeric_step_not_lexicographic() -> None:
    names = [
        "checkpoint-900",
        "checkpoint-1000",
        "checkpoint-95",
        "runs",
        "checkpoint-abc",
        "tmp-checkpoint-2000",
    ]
    assert candidates(names, HF) == [
        (1000, "checkpoint-1000", LayoutKind.HF),
        (900, "checkpoint-900", LayoutKind.HF),
        (95, "checkpoint-95", LayoutKind.HF),
    ]


def test_candidates_megatron_accepts_any_digit_count_and_ignores_release() -> None:
    names = [
        "iter_0000500",
        "iter_12000000",
        "iter_7",
        MEGATRON_RELEASE_DIR,
        "iter_",
        "iter_x1",
        "checkpoint-9",
    ]
    assert candidates(names, MEGATRON) == [
        (12_000_000, "iter_12000000", LayoutKind.MEGATRON),
        (500, "iter_0000500", LayoutKind.MEGATRON),
        (7, "iter_7", LayoutKind.MEGATRON),
    ]


def test_candidates_dcp_takes_trailing_number_of_any_name() -> None:
    names = ["step_1200", "step-1300", "global_step1100", "1400", "latest", "step_12a", "v2_step"]
    assert [(s, n) for s, n, _ in candidates(names, DCP)] == [
        (1400, "1400"),
        (1300, "step-1300"),
        (1200, "step_1200"),
        (1100, "global_step1100"),
    ]
    assert {k for _, _, k in candidates(names, DCP)} == {LayoutKind.DCP}


def test_candidates_auto_classifies_each_name_hf_then_megatron_then_dcp() -> None:
    names = ["checkpoint-30", "iter_0000020", "step_10", "logs", MEGATRON_RELEASE_DIR]
    assert candidates(names, AUTO) == [
        (30, "checkpoint-30", LayoutKind.HF),
        (20, "iter_0000020", LayoutKind.MEGATRON),
        (10, "step_10", LayoutKind.DCP),
    ]


def test_candidates_auto_treats_odd_hf_like_names_as_dcp() -> None:
    # Not the Trainer's exact spelling, so only a DCP .metadata can make it complete.
    assert candidates(["checkpoint_40", "tmp-checkpoint-50"], AUTO) == [
        (50, "tmp-checkpoint-50", LayoutKind.DCP),
        (40, "checkpoint_40", LayoutKind.DCP),
    ]


def test_candidates_regex_uses_named_step_group() -> None:
    layout = CheckpointLayout(LayoutKind.REGEX, dir_regex=r"e(\d+)-s(?P<step>\d+)", marker="DONE")
    assert candidates(["e9-s100", "e1-s2000", "e2-sX", "other"], layout) == [
        (2000, "e1-s2000", LayoutKind.REGEX),
        (100, "e9-s100", LayoutKind.REGEX),
    ]


def test_candidates_regex_uses_group_one_without_named_group() -> None:
    layout = CheckpointLayout(LayoutKind.REGEX, dir_regex=r"ckpt\.(\d+)\.(\d+)", marker="DONE")
    assert candidates(["ckpt.5.999", "ckpt.40.1"], layout) == [
        (40, "ckpt.40.1", LayoutKind.REGEX),
        (5, "ckpt.5.999", LayoutKind.REGEX),
    ]


def test_candidates_regex_must_match_the_whole_name() -> None:
    layout = CheckpointLayout(LayoutKind.REGEX, dir_regex=r"ckpt_(\d+)", marker="DONE")
    assert candidates(["ckpt_10", "ckpt_20.tmp", "old-ckpt_30"], layout) == [
        (10, "ckpt_10", LayoutKind.REGEX)
    ]


def test_candidates_regex_skips_non_numeric_step_group() -> None:
    layout = CheckpointLayout(LayoutKind.REGEX, dir_regex=r"ckpt_(?P<step>\w+)", marker="DONE")
    assert candidates(["ckpt_abc", "ckpt_7"], layout) == [(7, "ckpt_7", LayoutKind.REGEX)]


def test_candidates_rejects_non_ascii_digits() -> None:
    assert candidates(["checkpoint-\u0661\u0662", "iter_\uff11"], AUTO) == []


def test_candidates_breaks_ties_deterministically_and_dedups() -> None:
    names = ["step_1200", "iter_0001200", "checkpoint-1200", "step-1200", "iter_1200", "step_1200"]
    expected = [
        (1200, "checkpoint-1200", LayoutKind.HF),
        (1200, "iter_0001200", LayoutKind.MEGATRON),
        (1200, "iter_1200", LayoutKind.MEGATRON),
        (1200, "step-1200", LayoutKind.DCP),
        (1200, "step_1200", LayoutKind.DCP),
    ]
    assert candidates(names, AUTO) == expected
    assert candidates(list(reversed(names)), AUTO) == expected


def test_candidates_ignores_empty_and_slashed_names() -> None:
    assert candidates(["", "a/checkpoint-5", "checkpoint-5/"], AUTO) == []


@given(
    steps=st.sets(st.integers(min_value=0, max_value=10**12), max_size=40),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_candidates_is_sorted_desc_and_ignores_listing_order(steps: set[int], seed: int) -> None:
    names = [f"checkpoint-{s}" for s in steps] + ["logs", "tensorboard"]
    shuffled = names[:]
    random.Random(seed).shuffle(shuffled)
    got = candidates(shuffled, HF)
    assert [s for s, _, _ in got] == sorted(steps, reverse=True)
    assert got == candidates(names, HF)


# --- parse_megatron_tracker -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1200", 1200),
        ("  0001200 \n", 1200),
        ("0", 0),
        ("release", "release"),
        ("\trelease\r\n", "release"),
        ("", None),
        ("   ", None),
        ("-5", None),
        ("12.5", None),
        ("1_200", None),
        ("RELEASE", None),
        ("1200\n1300", None),
        ("\uff11\uff12", None),
        ("\ufffd\ufffd", None),
    ],
    ids=[
        "an iteration",
        "an iteration with zeros and whitespace",
        "iteration zero",
        "release",
        "release with whitespace",
        "an empty file",
        "a blank file",
        "a negative number",
        "a fraction",
        "an underscore in the number",
        "release in upper case",
        "two lines",
        "full-width digits",
        "replacement characters",
    ],
)
def test_parse_megatron_tracker_reads_iteration_or_release(text: str, expected: object) -> None:
    assert parse_megatron_tracker(text) == expected


# --- is_complete ------------------------------------------------------------------------------


def test_is_complete_hf_needs_trainer_state() -> None:
    assert is_complete(LayoutKind.HF, ["model.safetensors", HF_MARKER])
    assert not is_complete(LayoutKind.HF, ["model.safetensors", "optimizer.pt"])


def test_is_complete_dcp_needs_metadata() -> None:
    assert is_complete(LayoutKind.DCP, ["__0_0.distcp", DCP_MARKER])
    assert not is_complete(LayoutKind.DCP, ["__0_0.distcp", "__1_0.distcp"])


def test_is_complete_regex_needs_marker() -> None:
    assert is_complete(LayoutKind.REGEX, ["w.bin", "DONE"], "DONE")
    assert not is_complete(LayoutKind.REGEX, ["w.bin"], "DONE")
    with pytest.raises(ValueError):
        is_complete(LayoutKind.REGEX, ["w.bin"])


def test_is_complete_megatron_follows_tracker_iteration() -> None:
    files = ["mp_rank_00/model_optim_rng.pt"]
    assert is_complete(LayoutKind.MEGATRON, files, step=1000, tracker=1000)
    assert is_complete(LayoutKind.MEGATRON, files, step=500, tracker=1000)
    assert not is_complete(LayoutKind.MEGATRON, files, step=2000, tracker=1000)
    assert not is_complete(LayoutKind.MEGATRON, [], step=1000, tracker=1000)


def test_is_complete_megatron_release_only_for_release_dir() -> None:
    files = ["mp_rank_00/model_optim_rng.pt"]
    assert is_complete(LayoutKind.MEGATRON, files, step="release", tracker="release")
    assert not is_complete(LayoutKind.MEGATRON, [], step="release", tracker="release")
    assert not is_complete(LayoutKind.MEGATRON, files, step=0, tracker="release")
    assert not is_complete(LayoutKind.MEGATRON, files, step="release", tracker=100)


def test_is_complete_megatron_without_tracker_needs_metadata() -> None:
    assert is_complete(LayoutKind.MEGATRON, [DCP_MARKER, "__0_0.distcp"], step=100)
    assert not is_complete(LayoutKind.MEGATRON, ["mp_rank_00/model_optim_rng.pt"], step=100)


def test_is_complete_megatron_with_tracker_needs_step() -> None:
    with pytest.raises(ValueError):
        is_complete(LayoutKind.MEGATRON, ["x"], tracker=5)


def test_is_complete_rejects_auto() -> None:
    with pytest.raises(ValueError):
        is_complete(LayoutKind.AUTO, [HF_MARKER])


# --- needs_megatron_tracker / probe_plan ------------------------------------------------------


def test_needs_megatron_tracker_only_for_megatron_dirs() -> None:
    assert needs_megatron_tracker(["iter_0000010"], AUTO)
    assert needs_megatron_tracker([MEGATRON_RELEASE_DIR], MEGATRON)
    assert not needs_megatron_tracker(["checkpoint-10"], AUTO)
    assert not needs_megatron_tracker(["iter_0000010"], HF)
    assert not needs_megatron_tracker(["iter_0000010"], DCP)


@pytest.mark.claim(
    'Checkpoint discovery lists only the child "directories" (`Delimiter="/"`, paginated) and probes newest-first for the completion marker.'
)
def test_probe_plan_hf_looks_for_trainer_state_newest_first() -> None:
    plan = probe_plan(["checkpoint-5", "checkpoint-10"], HF)
    assert [(p.name, p.marker) for p in plan] == [("checkpoint-10", HF_MARKER), ("checkpoint-5", HF_MARKER)]


def test_probe_plan_megatron_drops_dirs_newer_than_tracker() -> None:
    plan = probe_plan(["iter_0000300", "iter_0000200", "iter_0000100"], MEGATRON, megatron_tracker=200)
    assert [(p.name, p.marker, p.tracker_named) for p in plan] == [
        ("iter_0000200", None, True),
        ("iter_0000100", None, False),
    ]


def test_probe_plan_megatron_release_keeps_only_release_dir() -> None:
    plan = probe_plan(["iter_0000300", MEGATRON_RELEASE_DIR], MEGATRON, megatron_tracker="release")
    assert plan == [Probe(MEGATRON_RELEASE_DIR, 0, LayoutKind.MEGATRON, None, tracker_named=True)]


def test_probe_plan_megatron_release_without_release_dir_is_empty() -> None:
    assert probe_plan(["iter_0000300"], MEGATRON, megatron_tracker="release") == []


def test_probe_plan_megatron_without_tracker_falls_back_to_metadata() -> None:
    plan = probe_plan(["iter_0000300", "iter_0000200", MEGATRON_RELEASE_DIR], MEGATRON)
    assert [(p.name, p.marker) for p in plan] == [("iter_0000300", DCP_MARKER), ("iter_0000200", DCP_MARKER)]


def test_probe_plan_auto_release_sorts_after_numbered_dirs() -> None:
    plan = probe_plan(
        ["checkpoint-7", MEGATRON_RELEASE_DIR, "iter_0000009"], AUTO, megatron_tracker="release"
    )
    assert [(p.name, p.kind) for p in plan] == [
        ("checkpoint-7", LayoutKind.HF),
        (MEGATRON_RELEASE_DIR, LayoutKind.MEGATRON),
    ]


def test_probe_plan_regex_uses_policy_marker() -> None:
    layout = CheckpointLayout(LayoutKind.REGEX, dir_regex=r"ckpt_(\d+)", marker="_SUCCESS")
    assert [(p.name, p.marker) for p in probe_plan(["ckpt_1", "ckpt_2"], layout)] == [
        ("ckpt_2", "_SUCCESS"),
        ("ckpt_1", "_SUCCESS"),
    ]


# --- first_complete / to_checkpoint -----------------------------------------------------------


def test_first_complete_skips_half_written_newest() -> None:
    listing = {
        "checkpoint-300": {"model.safetensors"},
        "checkpoint-200": {"model.safetensors", HF_MARKER},
        "checkpoint-100": {"model.safetensors", HF_MARKER},
    }
    chosen, probes, gave_up = choose(listing, HF)
    assert chosen is not None and chosen.name == "checkpoint-200"
    assert (probes, gave_up) == (2, False)


def test_first_complete_gives_up_after_max_probes() -> None:
    listing = {f"checkpoint-{s}": {"model.safetensors"} for s in range(10, 60, 10)}
    listing["checkpoint-1"] = {HF_MARKER}
    chosen, probes, gave_up = choose(listing, HF, max_probes=3)
    assert chosen is None
    assert (probes, gave_up) == (3, True)


def test_first_complete_exhausted_plan_is_not_giving_up() -> None:
    listing = {"checkpoint-1": {"model.safetensors"}}
    assert choose(listing, HF, max_probes=1) == (None, 1, False)


def test_first_complete_rejects_non_positive_max_probes() -> None:
    with pytest.raises(ValueError):
        first_complete([], lambda _: None, 0)


def test_first_complete_reports_rejected_newest_first() -> None:
    plan = probe_plan(["checkpoint-3", "checkpoint-2", "checkpoint-1"], HF)
    selection = first_complete(plan, lambda p: Completion(42) if p.step == 1 else None, 8)
    assert [p.step for p in selection.rejected] == [3, 2]
    assert selection.chosen == plan[2]
    assert selection.completion == Completion(42)


def test_to_checkpoint_builds_uri_and_carries_evidence() -> None:
    probe = Probe("iter_0001000", 1000, LayoutKind.MEGATRON, None, tracker_named=True)
    assert to_checkpoint("bkt", "runs/r1/", probe, Completion(1_700_000_000_000)) == Checkpoint(
        uri="s3://bkt/runs/r1/iter_0001000/",
        step=1000,
        layout=LayoutKind.MEGATRON,
        written_at_ms=1_700_000_000_000,
    )


# --- properties -------------------------------------------------------------------------------

_NAMERS = {
    LayoutKind.HF: lambda s: f"checkpoint-{s}",
    LayoutKind.MEGATRON: lambda s: f"iter_{s:07d}",
    LayoutKind.DCP: lambda s: f"step_{s}",
}
_MARKERS = {LayoutKind.HF: HF_MARKER, LayoutKind.MEGATRON: DCP_MARKER, LayoutKind.DCP: DCP_MARKER}


@st.composite
def listings(draw: st.DrawFn) -> tuple[LayoutKind, dict[int, bool]]:
    kind = draw(st.sampled_from([LayoutKind.HF, LayoutKind.MEGATRON, LayoutKind.DCP]))
    steps = draw(st.sets(st.integers(min_value=0, max_value=10**9), max_size=30))
    complete = {s: draw(st.booleans()) for s in sorted(steps)}
    return kind, complete


def _listing(kind: LayoutKind, complete: dict[int, bool]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {"logs": {"events.out"}}
    for step, done in complete.items():
        files = {"shard-0.bin"} | ({_MARKERS[kind]} if done else set())
        out[_NAMERS[kind](step)] = files
    return out


@settings(max_examples=300)
@given(data=listings(), auto=st.booleans(), max_probes=st.integers(min_value=1, max_value=40))
def test_choose_picks_highest_complete_step(
    data: tuple[LayoutKind, dict[int, bool]], auto: bool, max_probes: int
) -> None:
    kind, complete = data
    layout = AUTO if auto else CheckpointLayout(kind)
    chosen, probes, gave_up = choose(_listing(kind, complete), layout, max_probes=max_probes)

    done = [s for s, ok in complete.items() if ok]
    best = max(done, default=None)
    newer_incomplete = sum(1 for s, ok in complete.items() if not ok and (best is None or s > best))
    if best is not None and newer_incomplete < max_probes:
        assert chosen is not None
        assert (chosen.step, chosen.kind) == (best, kind)
        assert probes == newer_incomplete + 1
    else:
        assert chosen is None
        assert probes == min(newer_incomplete, max_probes)
        assert gave_up == (
            newer_incomplete > max_probes or (best is not None and newer_incomplete == max_probes)
        )


@settings(max_examples=300)
@given(
    steps=st.sets(st.integers(min_value=0, max_value=10**7 - 1), max_size=25),
    tracker=st.integers(min_value=0, max_value=10**7 - 1),
)
def test_choose_megatron_picks_highest_iteration_at_or_below_tracker(steps: set[int], tracker: int) -> None:
    # Every iter_ dir holds files (newer ones are half-written); the tracker alone decides.
    listing = {f"iter_{s:07d}": {"mp_rank_00/model_optim_rng.pt"} for s in steps}
    chosen, probes, _ = choose(listing, MEGATRON, tracker=tracker)
    eligible = [s for s in steps if s <= tracker]
    if eligible:
        assert chosen is not None
        assert chosen.step == max(eligible)
        assert chosen.tracker_named == (chosen.step == tracker)
        assert probes == 1
    else:
        assert chosen is None and probes == 0


@settings(max_examples=200)
@given(
    data=listings(),
    tracker=st.one_of(st.none(), st.just("release"), st.integers(min_value=0, max_value=10**9)),
)
def test_probe_plan_agrees_with_is_complete(
    data: tuple[LayoutKind, dict[int, bool]], tracker: MegatronTracker
) -> None:
    """A probe succeeds exactly when is_complete says the directory is complete."""
    kind, complete = data
    listing = _listing(kind, complete)
    planned = {p.name: p for p in probe_plan(listing, CheckpointLayout(kind), megatron_tracker=tracker)}
    for step, name, found_kind in candidates(listing, CheckpointLayout(kind)):
        files = listing[name]
        expected = is_complete(found_kind, files, step=step, tracker=tracker)
        probe = planned.get(name)
        if probe is None:
            assert not expected
        else:
            assert (bool(files) if probe.marker is None else probe.marker in files) == expected


@given(
    start=st.integers(0, 10**9),
    gap=st.integers(1, 600_000),
    writes=st.integers(2, 50),
    marker_listed=st.booleans(),
)
def test_save_seconds_of_evenly_landing_writes_is_the_whole_save(
    start: int, gap: int, writes: int, marker_listed: bool
) -> None:
    # a save that began at `start` and landed a write every `gap` ms, its marker last: the estimate
    # is the whole save, though its start left no trace in S3
    landed = [start + gap * (i + 1) for i in range(writes)]
    done = landed[-1]
    listing = landed if marker_listed else landed[:-1]
    assert save_seconds(listing, done) == pytest.approx((done - start) / 1000)


def test_save_seconds_is_zero_with_only_the_marker_and_never_negative() -> None:
    assert save_seconds([5_000], 5_000) == 0.0
    assert save_seconds([1_000, 3_000], 3_000) == pytest.approx(4.0)
    assert save_seconds([9_000], 5_000) >= 0.0
