"""The simulated account's API rate limits (issue 17 item 10): token buckets per operation on the
virtual clock, waits charged to the calling invocation, the service's own throttling error."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from drill.account.invocation import invocation, spent_ms
from drill.account.router import LambdaContext
from drill.sim.rate_limits import DEFAULT_RATES, RateLimits

NOW = 1_767_225_600_000


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> int:
        return self.now


def test_the_default_rates_are_the_documented_ones():
    # CloudWatch: General Reference quotas (GetMetricData: the older, lower 50); Logs: the Logs
    # user guide's quota table; SageMaker publishes none (the unkind model's own)
    assert {k: v for k, v in DEFAULT_RATES.items() if not k.startswith("sagemaker.")} == {
        "cloudwatch.PutMetricAlarm": 3,
        "cloudwatch.DeleteAlarms": 3,
        "cloudwatch.DescribeAlarms": 9,
        "cloudwatch.GetMetricData": 50,
        "logs.DescribeLogStreams": 5,
        "logs.FilterLogEvents": 5,
        "logs.GetLogEvents": 10,
    }
    assert DEFAULT_RATES["sagemaker.DescribeTrainingJob"] == 2
    assert DEFAULT_RATES["sagemaker.CreateTrainingJob"] == DEFAULT_RATES["sagemaker.StopTrainingJob"] == 1


def test_the_calls_of_one_invocation_follow_one_another_at_the_rate():
    limits = RateLimits(Clock(), {"sagemaker.DescribeTrainingJob": 2})
    with invocation():
        context = LambdaContext("sweep")
        for _ in range(10):
            limits.admit("sagemaker", "DescribeTrainingJob")
        assert spent_ms() == 9 * 500  # one slot every half second; the first at once
        assert context.get_remaining_time_in_millis() == 60_000 - 4_500  # the sweep's budget sees it
    assert limits.calls == {"sagemaker.DescribeTrainingJob": 10} and limits.throttled == {}
    assert spent_ms() == 0  # outside an invocation nothing is charged


def test_a_concurrent_invocation_is_throttled_once_its_retries_would_wait_too_long():
    clock = Clock()
    limits = RateLimits(clock, {"cloudwatch.DescribeAlarms": 2}, retry_wait_s=35.5)
    with invocation():
        for _ in range(100):  # a sweep paging alarms: its slots run 49.5 s ahead
            limits.admit("cloudwatch", "DescribeAlarms")
    with invocation():  # another function at the same instant
        with pytest.raises(ClientError) as err:
            limits.admit("cloudwatch", "DescribeAlarms")
        assert spent_ms() == 35_500  # botocore's retries spent their time before giving up
    assert err.value.response["Error"] == {"Code": "Throttling", "Message": "Rate exceeded"}
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert limits.throttled == {"cloudwatch.DescribeAlarms": 1}

    clock.now += 60_000  # a minute later the bucket has refilled
    with invocation():
        limits.admit("cloudwatch", "DescribeAlarms")
        assert spent_ms() == 0


def test_a_throttled_call_answers_its_services_error():
    limits = RateLimits(Clock(), retry_wait_s=0)
    for service, operation, code in (
        ("sagemaker", "CreateTrainingJob", "ThrottlingException"),
        ("logs", "FilterLogEvents", "ThrottlingException"),
        ("cloudwatch", "PutMetricAlarm", "Throttling"),
    ):
        with invocation():
            limits.admit(service, operation)
            with pytest.raises(ClientError) as err:
                limits.admit(service, operation)  # the next slot is a second away; no retries
        assert err.value.response["Error"]["Code"] == code
        assert err.value.operation_name == operation


def test_a_null_rate_or_an_operation_not_listed_is_not_limited():
    limits = RateLimits(Clock(), {**DEFAULT_RATES, "logs.GetLogEvents": None}, retry_wait_s=0)
    with invocation():
        for _ in range(1000):
            limits.admit("logs", "GetLogEvents")
            limits.admit("sns", "Publish")
        assert spent_ms() == 0


def test_the_settings_are_checked():
    with pytest.raises(ValueError, match="positive"):
        RateLimits(Clock(), {"logs.GetLogEvents": 0})
    with pytest.raises(ValueError, match="retry_wait_s"):
        RateLimits(Clock(), retry_wait_s=-1)
    with pytest.raises(ValueError, match="burst"):
        RateLimits(Clock(), burst=0)
