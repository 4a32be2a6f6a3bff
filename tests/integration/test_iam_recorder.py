"""The IAM replay's call recorder on moto clients and simulated clients (drill/iam/recorder.py)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from drill.iam.recorder import CallRecorder, invoked_as, operation_name
from drill.iam.requests import AccountFacts

ACCOUNT = "123456789012"
FN = "sagewarden.handlers.sweep.handler"


@pytest.fixture
def recorder() -> CallRecorder:
    return CallRecorder(AccountFacts(region="us-east-1", account=ACCOUNT))


def actions(rec: CallRecorder) -> list[tuple[str, str, str]]:
    return sorted((fn, r.action, r.resource) for fn, r in rec.requests)


def test_iam_recorder_records_only_inside_a_function(aws: None, recorder: CallRecorder) -> None:
    s3 = recorder.attach(boto3.client("s3", region_name="us-east-1"))
    s3.create_bucket(Bucket="ckpt")  # the drill's own setup: not a function call
    with invoked_as(FN):
        s3.list_objects_v2(Bucket="ckpt", Prefix="run/")
    s3.list_objects_v2(Bucket="ckpt")

    assert recorder.calls == 1
    assert actions(recorder) == [(FN, "s3:ListBucket", "arn:aws:s3:::ckpt")]


def test_iam_recorder_sees_every_page_of_a_paginator(aws: None, recorder: CallRecorder) -> None:
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="ckpt")
    for i in range(5):
        s3.put_object(Bucket="ckpt", Key=f"run/checkpoint-{i}/x", Body=b"1")
    recorder.attach(s3)
    with invoked_as(FN):
        pages = list(
            s3.get_paginator("list_objects_v2").paginate(
                Bucket="ckpt", Prefix="run/", Delimiter="/", PaginationConfig={"PageSize": 2}
            )
        )

    assert len(pages) == 3
    assert recorder.calls == 3
    assert recorder.distinct_requests() == 1  # same bucket and prefix: one authorization request


def test_iam_recorder_other_clients_and_functions_are_kept_apart(aws: None, recorder: CallRecorder) -> None:
    watched = recorder.attach(boto3.client("s3", region_name="us-east-1"))
    simulator_own = boto3.client("s3", region_name="us-east-1")  # e.g. the simulator writing checkpoints
    watched.create_bucket(Bucket="ckpt")
    with invoked_as("a.handler"):
        simulator_own.put_object(Bucket="ckpt", Key="k", Body=b"1")
        watched.head_object(Bucket="ckpt", Key="k")
        with invoked_as("b.handler"):
            watched.get_object(Bucket="ckpt", Key="k")

    assert actions(recorder) == [
        ("a.handler", "s3:GetObject", "arn:aws:s3:::ckpt/k"),
        ("b.handler", "s3:GetObject", "arn:aws:s3:::ckpt/k"),
    ]


class _SimCloudWatch:
    """Shaped like the drill's SimulatedCloudWatch: answers one call itself, forwards the rest."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def get_metric_data(self, **_: Any) -> dict[str, Any]:
        return {"MetricDataResults": []}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_iam_recorder_proxy_records_what_the_simulation_answers_each_call_once(
    aws: None, recorder: CallRecorder
) -> None:
    cw = recorder.attach(boto3.client("cloudwatch", region_name="us-east-1"))
    proxy = recorder.wrap(_SimCloudWatch(cw), "cloudwatch")
    with invoked_as(FN):
        proxy.get_metric_data(MetricDataQueries=[], StartTime=0, EndTime=1)  # answered by the simulation
        proxy.describe_alarms(AlarmNamePrefix="sagewarden-hang-")  # forwarded to moto: its hook records it

    assert recorder.calls == 2
    assert actions(recorder) == [
        (FN, "cloudwatch:DescribeAlarms", f"arn:aws:cloudwatch:us-east-1:{ACCOUNT}:alarm:*"),
        (FN, "cloudwatch:GetMetricData", "*"),
    ]


@pytest.mark.claim("An operation the table does not know fails as an *unmapped call*.")
def test_iam_recorder_unmapped_calls_are_kept(aws: None, recorder: CallRecorder) -> None:
    s3 = recorder.attach(boto3.client("s3", region_name="us-east-1"))
    with invoked_as(FN):
        s3.list_buckets()

    assert list(recorder.unmapped) == [(FN, "s3", "ListBuckets")]
    assert recorder.requests == {}


def test_iam_recorder_operation_names() -> None:
    assert operation_name("list_objects_v2") == "ListObjectsV2"
    assert operation_name("create_training_job") == "CreateTrainingJob"
    assert operation_name("get_metric_data") == "GetMetricData"
