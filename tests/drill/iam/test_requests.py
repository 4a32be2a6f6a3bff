"""The call -> IAM authorization request table of the replay (drill/iam/requests.py)."""

from __future__ import annotations

import botocore.session
import pytest

from drill.iam.requests import ROWS, AccountFacts, UnmappedCall, authorization_requests

ACCOUNT = "123456789012"
TOPIC = f"arn:aws:sns:us-east-1:{ACCOUNT}:alerts"
KEY = f"arn:aws:kms:us-east-1:{ACCOUNT}:key/1234"
FACTS = AccountFacts(region="us-east-1", account=ACCOUNT, topic_keys={TOPIC: KEY})
TABLE_ARN = f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/state"


def pairs(service: str, operation: str, **params: object) -> list[tuple[str, str]]:
    return [(r.action, r.resource) for r in authorization_requests(service, operation, params, FACTS)]


def test_iam_requests_every_row_is_a_real_api_operation() -> None:
    # A typo in the table ("ListObjectV2") would leave the real call unmapped.
    session = botocore.session.get_session()
    for service, operation in ROWS:
        assert operation in session.get_service_model(service).operation_names, (service, operation)


@pytest.mark.claim("An operation the table does not know fails as an *unmapped call*.")
def test_iam_requests_unknown_operation_is_unmapped_not_allowed() -> None:
    with pytest.raises(UnmappedCall, match=r"dynamodb\.Scanner"):
        authorization_requests("dynamodb", "Scanner", {}, FACTS)


def test_iam_requests_transact_write_items_is_authorised_per_item() -> None:
    items = [
        {"Put": {"TableName": "state", "Item": {}}},
        {"Update": {"TableName": "state", "Key": {}, "UpdateExpression": "SET a = :a"}},
        {"Delete": {"TableName": "other", "Key": {}}},
        {"ConditionCheck": {"TableName": "state", "Key": {}, "ConditionExpression": "x"}},
    ]
    assert pairs("dynamodb", "TransactWriteItems", TransactItems=items) == [
        ("dynamodb:PutItem", TABLE_ARN),
        ("dynamodb:UpdateItem", TABLE_ARN),
        ("dynamodb:DeleteItem", f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/other"),
        ("dynamodb:ConditionCheckItem", TABLE_ARN),
    ]


def test_iam_requests_query_on_an_index_is_authorised_on_the_index_arn() -> None:
    assert pairs("dynamodb", "Query", TableName="state", IndexName="due") == [
        ("dynamodb:Query", f"{TABLE_ARN}/index/due")
    ]
    assert pairs("dynamodb", "Query", TableName="state") == [("dynamodb:Query", TABLE_ARN)]
    assert pairs("dynamodb", "BatchWriteItem", RequestItems={"state": [], "other": []}) == [
        ("dynamodb:BatchWriteItem", TABLE_ARN),
        ("dynamodb:BatchWriteItem", f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/other"),
    ]


def test_iam_requests_create_training_job_implies_add_tags_and_pass_role() -> None:
    params = {
        "TrainingJobName": "sw-llama-01KE8ZQ-a001",
        "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/Train",
        "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 100},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        "Tags": [{"Key": "sagewarden:run-id", "Value": "r1"}],
    }
    requests = authorization_requests("sagemaker", "CreateTrainingJob", params, FACTS)
    by_action: dict[str, list[str]] = {}
    for r in requests:
        by_action.setdefault(r.action, []).append(r.resource)
    job = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:training-job/sw-llama-01KE8ZQ-a001"

    # the name as written and as SageMaker lower-cases it in ARNs: both must be allowed
    assert by_action["sagemaker:CreateTrainingJob"] == [job, job.lower()]
    assert by_action["sagemaker:AddTags"] == [job, job.lower()]
    (pass_role,) = [r for r in requests if r.action == "iam:PassRole"]
    assert pass_role.resource == f"arn:aws:iam::{ACCOUNT}:role/Train"
    assert pass_role.context_dict()["iam:passedtoservice"] == ("sagemaker.amazonaws.com",)
    create = next(r for r in requests if r.action == "sagemaker:CreateTrainingJob")
    assert create.context_dict()["sagemaker:instancetypes"] == ("ml.p4d.24xlarge",)
    assert create.context_dict()["aws:requesttag/sagewarden:run-id"] == ("r1",)
    assert create.context_dict()["sagemaker:keepaliveperiod"] == ()  # modelled, absent

    untagged = authorization_requests("sagemaker", "CreateTrainingJob", {**params, "Tags": []}, FACTS)
    assert "sagemaker:AddTags" not in {r.action for r in untagged}


def test_iam_requests_put_metric_alarm_with_tags_implies_tag_resource() -> None:
    alarm = f"arn:aws:cloudwatch:us-east-1:{ACCOUNT}:alarm:sagewarden-hang-sw-a--log-silence"
    tagged = pairs(
        "cloudwatch",
        "PutMetricAlarm",
        AlarmName="sagewarden-hang-sw-a--log-silence",
        Tags=[{"Key": "k", "Value": "v"}],
    )
    assert tagged == [("cloudwatch:PutMetricAlarm", alarm), ("cloudwatch:TagResource", alarm)]
    untagged = pairs("cloudwatch", "PutMetricAlarm", AlarmName="sagewarden-hang-sw-a--log-silence")
    assert untagged == [("cloudwatch:PutMetricAlarm", alarm)]


def test_iam_requests_describe_alarms_is_authorised_on_every_alarm() -> None:
    star = ("cloudwatch:DescribeAlarms", f"arn:aws:cloudwatch:us-east-1:{ACCOUNT}:alarm:*")
    assert pairs("cloudwatch", "DescribeAlarms", AlarmNamePrefix="sagewarden-hang-") == [star]
    assert pairs("cloudwatch", "DescribeAlarms", AlarmNamePrefix="sagewarden-hang-", StateValue="ALARM") == [
        star
    ]
    assert pairs("cloudwatch", "DescribeAlarms") == [star]


def test_iam_requests_delete_alarms_per_alarm_and_metric_data_on_star() -> None:
    assert pairs("cloudwatch", "DeleteAlarms", AlarmNames=["a", "b"]) == [
        ("cloudwatch:DeleteAlarms", f"arn:aws:cloudwatch:us-east-1:{ACCOUNT}:alarm:a"),
        ("cloudwatch:DeleteAlarms", f"arn:aws:cloudwatch:us-east-1:{ACCOUNT}:alarm:b"),
    ]
    assert pairs("cloudwatch", "GetMetricData", MetricDataQueries=[]) == [("cloudwatch:GetMetricData", "*")]


def test_iam_requests_publish_to_a_kms_topic_needs_the_key() -> None:
    assert pairs("sns", "Publish", TopicArn=TOPIC, Message="m") == [
        ("sns:Publish", TOPIC),
        ("kms:GenerateDataKey", KEY),
        ("kms:Decrypt", KEY),
    ]
    plain = f"arn:aws:sns:us-east-1:{ACCOUNT}:plain"
    assert pairs("sns", "Publish", TopicArn=plain, Message="m") == [("sns:Publish", plain)]


def test_iam_requests_s3_list_is_on_the_bucket_reads_on_the_object() -> None:
    (listing,) = authorization_requests(
        "s3", "ListObjectsV2", {"Bucket": "ckpt", "Prefix": "run/checkpoints/", "Delimiter": "/"}, FACTS
    )
    assert (listing.action, listing.resource) == ("s3:ListBucket", "arn:aws:s3:::ckpt")
    assert listing.context_dict()["s3:prefix"] == ("run/checkpoints/",)
    assert listing.context_dict()["s3:max-keys"] == ()
    obj = "arn:aws:s3:::ckpt/run/checkpoints/checkpoint-300/.complete"
    key = "run/checkpoints/checkpoint-300/.complete"
    assert pairs("s3", "HeadObject", Bucket="ckpt", Key=key) == [("s3:GetObject", obj)]
    assert pairs("s3", "GetObject", Bucket="ckpt", Key=key) == [("s3:GetObject", obj)]


def test_iam_requests_logs_reads_on_group_and_stream_arns() -> None:
    group = f"arn:aws:logs:us-east-1:{ACCOUNT}:log-group:/aws/sagemaker/TrainingJobs"
    assert pairs("logs", "DescribeLogStreams", logGroupName="/aws/sagemaker/TrainingJobs") == [
        ("logs:DescribeLogStreams", group),
        ("logs:DescribeLogStreams", f"{group}:*"),
    ]
    assert pairs("logs", "FilterLogEvents", logGroupIdentifier=f"{group}:*") == [
        ("logs:FilterLogEvents", group),
        ("logs:FilterLogEvents", f"{group}:*"),
    ]
    assert pairs(
        "logs", "GetLogEvents", logGroupName="/aws/sagemaker/TrainingJobs", logStreamName="sw-a/algo-1-17"
    ) == [("logs:GetLogEvents", f"{group}:log-stream:sw-a/algo-1-17")]


def test_iam_requests_planned_operations_have_rows() -> None:
    job = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:training-job/sw-a"
    assert pairs("sagemaker", "UpdateTrainingJob", TrainingJobName="sw-a") == [
        ("sagemaker:UpdateTrainingJob", job)
    ]
    assert pairs("sagemaker", "ListTrainingJobs") == [("sagemaker:ListTrainingJobs", "*")]
    assert pairs("cloudwatch", "PutMetricData", Namespace="Sagewarden", MetricData=[]) == [
        ("cloudwatch:PutMetricData", "*")
    ]
    assert pairs("service-quotas", "GetServiceQuota", ServiceCode="sagemaker", QuotaCode="L-1") == [
        ("servicequotas:GetServiceQuota", f"arn:aws:servicequotas:us-east-1:{ACCOUNT}:sagemaker/L-1")
    ]
