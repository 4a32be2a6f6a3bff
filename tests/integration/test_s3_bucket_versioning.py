"""S3BucketVersioning against moto's S3: a checkpoint bucket's versioning and lifecycle rules, as
checkpoint retention's storage warning reads them (domain/checkpoints/retirement.py versioning_warning)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from sagewarden.adapters.s3_bucket_versioning import S3BucketVersioning, lifecycle_rule
from sagewarden.adapters.s3_checkpoint_finder import CheckpointLookupError
from sagewarden.domain.checkpoints.retirement import LifecycleRule, versioning_warning

BUCKET = "sagewarden-versioning-test"
URI = f"s3://{BUCKET}/runs/llama/ckpt/"


@pytest.fixture
def s3(aws: None) -> Iterator[Any]:
    client = boto3.client("s3", region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    yield client


def test_versioning_a_delete_on_a_versioned_bucket_keeps_the_bytes_as_a_noncurrent_version(s3: Any) -> None:
    # why retention frees nothing there: the object is hidden behind a delete marker, not gone
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    s3.put_object(Bucket=BUCKET, Key="runs/llama/ckpt/checkpoint-1/optimizer.pt", Body=b"x" * 1024)
    s3.delete_object(Bucket=BUCKET, Key="runs/llama/ckpt/checkpoint-1/optimizer.pt")
    versions = s3.list_object_versions(Bucket=BUCKET, Prefix="runs/")
    assert [v["Size"] for v in versions["Versions"]] == [1024] and len(versions["DeleteMarkers"]) == 1
    facts = S3BucketVersioning(s3).versioning(BUCKET)
    assert facts.status == "Enabled" and facts.rules == ()  # NoSuchLifecycleConfiguration: no rules
    assert versioning_warning(URI, facts) is not None


def test_versioning_of_a_bucket_never_versioned_reads_no_lifecycle_rules(s3: Any) -> None:
    seen: list[str] = []
    s3.meta.events.register("provide-client-params.s3", lambda event_name, **_: seen.append(event_name))
    facts = S3BucketVersioning(s3).versioning(BUCKET)
    assert facts.status is None and versioning_warning(URI, facts) is None
    assert [e.rsplit(".", 1)[-1] for e in seen] == ["GetBucketVersioning"]


def test_versioning_reads_which_rules_expire_noncurrent_versions_under_the_prefix(s3: Any) -> None:
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Suspended"})
    noncurrent = {"NoncurrentVersionExpiration": {"NoncurrentDays": 7}}
    tagged = {"And": {"Prefix": "runs/", "Tags": [{"Key": "tier", "Value": "hot"}]}}
    s3.put_bucket_lifecycle_configuration(
        Bucket=BUCKET,
        LifecycleConfiguration={
            "Rules": [
                {"ID": "tagged", "Status": "Enabled", "Filter": tagged, **noncurrent},
                {
                    "ID": "current-only",
                    "Status": "Enabled",
                    "Filter": {"Prefix": "runs/"},
                    "Expiration": {"Days": 30},
                },
            ]
        },
    )
    facts = S3BucketVersioning(s3).versioning(BUCKET)
    assert facts.status == "Suspended"
    assert facts.rules == (LifecycleRule(None, True, True), LifecycleRule("runs/", True, False))
    assert versioning_warning(URI, facts) is not None  # neither rule removes every noncurrent version
    s3.put_bucket_lifecycle_configuration(
        Bucket=BUCKET,
        LifecycleConfiguration={
            "Rules": [
                {"ID": "runs", "Status": "Enabled", "Filter": {"And": {"Prefix": "runs/"}}, **noncurrent}
            ]
        },
    )
    assert versioning_warning(URI, S3BucketVersioning(s3).versioning(BUCKET)) is None


@pytest.mark.parametrize(
    ("rule", "prefix"),
    [
        ({"Filter": {}}, ""),
        ({"Filter": {"Prefix": "a/"}}, "a/"),
        ({"Filter": {"And": {"Prefix": "a/", "ObjectSizeGreaterThan": 1024}}}, None),
        ({"Filter": {"Tag": {"Key": "k", "Value": "v"}}}, None),
        ({"Prefix": "legacy/"}, "legacy/"),
    ],
    ids=["whole bucket", "a prefix", "a prefix and a size", "a tag", "the older rule-level prefix"],
)
def test_versioning_rule_filters_count_only_when_they_are_a_prefix_alone(
    rule: dict[str, Any], prefix: str | None
) -> None:
    assert lifecycle_rule({"Status": "Enabled", **rule}).prefix == prefix


def test_versioning_that_cannot_be_read_is_unknown_not_unversioned(s3: Any) -> None:
    def denied(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "GetBucketVersioning")

    s3.get_bucket_versioning = denied
    with pytest.raises(CheckpointLookupError) as err:
        S3BucketVersioning(s3).versioning(BUCKET)
    assert err.value.code == "AccessDenied" and err.value.permanent
