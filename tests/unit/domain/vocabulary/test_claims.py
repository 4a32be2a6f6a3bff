"""What a live run holds (domain.claims): its name and its checkpoint prefix, nested ones included."""

from __future__ import annotations

import pytest

from sagewarden.domain.vocabulary.claims import (
    ARCHIVERS,
    BELOW,
    HOLDER,
    ancestors,
    checkpoint_prefix,
    claim_keys,
    overlaps,
    take_plan,
)


@pytest.mark.parametrize(
    ("uri", "prefix"),
    [("s3://b/ckpt", "s3://b/ckpt/"), ("s3://b/ckpt/", "s3://b/ckpt/"), ("s3://b/ckpt//", "s3://b/ckpt/"), ("s3://b", "s3://b/")],
)  # fmt: skip
def test_claims_spell_a_prefix_one_way(uri, prefix):
    assert checkpoint_prefix(uri) == prefix


@pytest.mark.claim(
    "An exact name or prefix is one item; a nested prefix is caught by the run's claim on every folder above its prefix (a string set of the live runs below each), so it is race-free too. Runs stored before claims existed hold none."
)
def test_claims_cover_the_name_the_prefix_and_every_folder_above_it():
    assert ancestors("s3://b/x/y/") == ("s3://b/", "s3://b/x/")
    assert claim_keys("llama", "s3://b/x/y") == (
        "name#llama",
        "ckpt#s3://b/x/y/",
        "under#s3://b/",
        "under#s3://b/x/",
    )
    plan = {t.item: t for t in take_plan(claim_keys("llama", "s3://b/x/y"))}
    assert [i for i, t in plan.items() if t.holder] == ["name#llama", "ckpt#s3://b/x/y/"]
    # no live run at a folder above it (nor an archive there), none below it
    assert {i for i, t in plan.items() if HOLDER in t.free} == {"ckpt#s3://b/", "ckpt#s3://b/x/"}
    assert plan["under#s3://b/x/y/"].free >= {BELOW} and plan["ckpt#s3://b/x/y/"].free == {ARCHIVERS}


@pytest.mark.claim(
    "A second live run with the same `name`, or with a `CheckpointConfig.S3Uri` that is the same prefix, inside it or around it"
)
@pytest.mark.parametrize(
    ("other_name", "other_uri", "expected"),
    [
        ("llama", "s3://b/elsewhere/", ("name",)),
        ("qwen", "s3://b/ckpt", ("checkpoint_prefix",)),
        ("qwen", "s3://b/ckpt/rank0/", ("checkpoint_prefix",)),
        ("qwen", "s3://b/", ("checkpoint_prefix",)),
        ("qwen", "s3://b/ckpt2/", ()),  # a sibling sharing the first letters is another folder
        ("llama", "s3://b/ckpt/", ("name", "checkpoint_prefix")),
    ],
    ids=[
        "the same name",
        "the same prefix",
        "a prefix inside it",
        "a prefix above it",
        "a sibling folder sharing its first letters",
        "the same name and prefix",
    ],
)
def test_claims_overlap_on_a_name_or_a_nested_prefix(other_name, other_uri, expected):
    assert overlaps("llama", "s3://b/ckpt/", other_name, other_uri) == expected
