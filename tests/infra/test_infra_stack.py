"""Properties of the synthesized stack that sagewarden relies on."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match
from infra_synth import FULL_CONTEXT, ROLE_A, ROLE_B, SynthResult, as_list, joined

from infra import constants
from infra.constructs.api import ROUTES
from sagewarden import keys

ALL_HANDLERS = (
    keys.HANDLER_API,
    keys.HANDLER_JOB_STATE,
    keys.HANDLER_ALARM_STATE,
    keys.HANDLER_SWEEP,
    keys.HANDLER_HEARTBEAT,
)
CONTROL_HANDLERS = (keys.HANDLER_API, keys.HANDLER_JOB_STATE, keys.HANDLER_ALARM_STATE, keys.HANDLER_SWEEP)


def _rule_with_source(synth: SynthResult, source: str) -> dict[str, Any]:
    rules: list[dict[str, Any]] = [
        r
        for r in synth.resources("AWS::Events::Rule").values()
        if r["Properties"].get("EventPattern", {}).get("source") == [source]
    ]
    assert len(rules) == 1
    return rules[0]


# --- EventBridge ---------------------------------------------------------------------------------


def test_event_rules_sagemaker_pattern_is_exact(synth_full: SynthResult, synth_default: SynthResult) -> None:
    for synth, prefix in ((synth_full, FULL_CONTEXT["jobPrefix"]), (synth_default, keys.DEFAULT_JOB_PREFIX)):
        rule = _rule_with_source(synth, "aws.sagemaker")

        assert rule["Properties"]["EventPattern"] == {
            "source": ["aws.sagemaker"],
            "detail-type": ["SageMaker Training Job State Change"],
            "detail": {"TrainingJobName": [{"prefix": f"{prefix}-"}]},
        }


def test_event_rules_alarm_pattern_matches_hang_alarm_prefix(synth_any: SynthResult) -> None:
    rule = _rule_with_source(synth_any, "aws.cloudwatch")

    assert rule["Properties"]["EventPattern"] == {
        "source": ["aws.cloudwatch"],
        "detail-type": ["CloudWatch Alarm State Change"],
        "detail": {"alarmName": [{"prefix": _alarm_prefix(synth_any)}]},
    }


def _alarm_prefix(synth: SynthResult) -> str:
    """Each deployment's alarm prefix is derived from its job prefix (no two stacks collide)."""
    return keys.alarm_prefix(synth.context.get("jobPrefix", keys.DEFAULT_JOB_PREFIX))


def test_event_rules_route_to_the_right_functions(synth_full: SynthResult) -> None:
    expected = {
        "aws.sagemaker": keys.HANDLER_JOB_STATE,
        "aws.cloudwatch": keys.HANDLER_ALARM_STATE,
    }
    for source, handler in expected.items():
        function_id, _ = synth_full.function_by_handler(handler)
        targets = _rule_with_source(synth_full, source)["Properties"]["Targets"]

        assert [t["Arn"] for t in targets] == [{"Fn::GetAtt": [function_id, "Arn"]}]


@pytest.mark.claim("every minute ─────────────────────────────▶ EventBridge schedule")
@pytest.mark.claim(
    "Its cost is up to one minute of latency on a wake-up, which is small next to the 6–8 minute instance start."
)
@pytest.mark.claim(
    "This mechanism covers timers, lost events and lost actions, needs no extra IAM role or per-run schedule to clean up, and is idempotent."
)
def test_event_rules_sweep_runs_every_minute(synth_any: SynthResult) -> None:
    sweep_id, _ = synth_any.function_by_handler(keys.HANDLER_SWEEP)
    schedules = [
        r
        for r in synth_any.resources("AWS::Events::Rule").values()
        if "ScheduleExpression" in r["Properties"]
    ]

    assert len(schedules) == 1
    assert schedules[0]["Properties"]["ScheduleExpression"] == "rate(1 minute)"
    assert schedules[0]["Properties"]["Targets"][0]["Arn"] == {"Fn::GetAtt": [sweep_id, "Arn"]}


@pytest.mark.claim(
    "Failed event deliveries retry 8 times over up to 6 h and then go to an SQS DLQ, which has an alarm."
)
def test_event_rules_every_target_has_retry_policy_and_dead_letter_queue(synth_any: SynthResult) -> None:
    queue_id, _ = synth_any.one("AWS::SQS::Queue")
    targets = [
        t for r in synth_any.resources("AWS::Events::Rule").values() for t in r["Properties"]["Targets"]
    ]

    assert len(targets) == 3
    for target in targets:
        assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [queue_id, "Arn"]}}
        assert target["RetryPolicy"]["MaximumRetryAttempts"] >= 2
        assert 60 <= target["RetryPolicy"]["MaximumEventAgeInSeconds"] <= 6 * 3600


@pytest.mark.claim(
    "Failed event deliveries retry 8 times over up to 6 h and then go to an SQS DLQ, which has an alarm."
)
@pytest.mark.claim(
    "Events that failed 8 deliveries. The sweep reconciles every live attempt about every 10 minutes anyway"
)
def test_event_rules_state_change_targets_retry_for_hours(synth_any: SynthResult) -> None:
    for source in ("aws.sagemaker", "aws.cloudwatch"):
        (target,) = _rule_with_source(synth_any, source)["Properties"]["Targets"]

        assert target["RetryPolicy"] == {
            "MaximumRetryAttempts": constants.EVENT_TARGET_RETRY_ATTEMPTS,
            "MaximumEventAgeInSeconds": constants.EVENT_TARGET_MAX_EVENT_AGE_SECONDS,
        }


def test_dead_letter_queue_is_encrypted_ssl_only_and_keeps_fourteen_days(synth_any: SynthResult) -> None:
    queue_id, queue = synth_any.one("AWS::SQS::Queue")

    assert queue["Properties"]["SqsManagedSseEnabled"] is True
    assert queue["Properties"]["MessageRetentionPeriod"] == 14 * 24 * 3600
    denies = [
        s
        for p in synth_any.resources("AWS::SQS::QueuePolicy").values()
        if {"Ref": queue_id} in p["Properties"]["Queues"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s["Effect"] == "Deny"
    ]
    assert any(s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in denies)


@pytest.mark.claim(
    "Failed event deliveries retry 8 times over up to 6 h and then go to an SQS DLQ, which has an alarm."
)
def test_dead_letter_alarm_notifies_the_alert_topic(synth_any: SynthResult) -> None:
    queue_id, _ = synth_any.one("AWS::SQS::Queue")
    topic_id, _ = synth_any.one("AWS::SNS::Topic")

    synth_any.template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "MetricName": "ApproximateNumberOfMessagesVisible",
            "Namespace": "AWS/SQS",
            "Dimensions": [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue_id, "QueueName"]}}],
            "ComparisonOperator": "GreaterThanThreshold",
            "Threshold": 0,
            "AlarmActions": [{"Ref": topic_id}],
        },
    )


def test_async_failures_of_event_driven_functions_go_to_the_dead_letter_queue(synth_any: SynthResult) -> None:
    queue_id, _ = synth_any.one("AWS::SQS::Queue")
    configs = {
        c["Properties"]["FunctionName"]["Ref"]: c["Properties"]
        for c in synth_any.resources("AWS::Lambda::EventInvokeConfig").values()
    }
    for handler in (
        keys.HANDLER_JOB_STATE,
        keys.HANDLER_ALARM_STATE,
        keys.HANDLER_SWEEP,
        keys.HANDLER_HEARTBEAT,
    ):
        function_id, _ = synth_any.function_by_handler(handler)

        assert configs[function_id]["DestinationConfig"] == {
            "OnFailure": {"Destination": {"Fn::GetAtt": [queue_id, "Arn"]}}
        }


# --- API -----------------------------------------------------------------------------------------


@pytest.mark.claim("Every route uses AWS_IAM auth")
def test_api_every_method_uses_iam_authorization(synth_any: SynthResult) -> None:
    methods = synth_any.resources("AWS::ApiGateway::Method").values()

    assert methods
    for method in methods:
        if method["Properties"]["HttpMethod"] != "OPTIONS":
            assert method["Properties"]["AuthorizationType"] == "AWS_IAM"


@pytest.mark.claim("Every route uses AWS_IAM auth")
def test_api_exposes_exactly_the_six_routes(synth_any: SynthResult) -> None:
    assert synth_any.routes() == set(ROUTES)
    assert set(ROUTES) == {
        ("POST", "/runs"),
        ("GET", "/runs"),
        ("GET", "/runs/{id}"),
        ("GET", "/runs/{id}/events"),
        ("POST", "/runs/{id}/cancel"),
        ("POST", "/runs/{id}/resume"),
    }


def test_api_methods_proxy_to_the_api_function_with_validators(synth_any: SynthResult) -> None:
    api_id, _ = synth_any.function_by_handler(keys.HANDLER_API)
    validators = synth_any.resources("AWS::ApiGateway::RequestValidator")

    for method in synth_any.resources("AWS::ApiGateway::Method").values():
        props = method["Properties"]
        integration = props["Integration"]
        assert integration["Type"] == "AWS_PROXY"
        assert api_id in json.dumps(integration["Uri"])
        validator = validators[props["RequestValidatorId"]["Ref"]]["Properties"]
        assert validator["ValidateRequestParameters"] is True
        if props["HttpMethod"] == "POST" and "RequestModels" in props:
            assert validator["ValidateRequestBody"] is True


def test_api_stage_logs_traces_and_throttles(synth_any: SynthResult) -> None:
    _, stage = synth_any.one("AWS::ApiGateway::Stage")
    props = stage["Properties"]

    assert props["TracingEnabled"] is False  # X-Ray is opt-in (tracing=true)
    assert "DestinationArn" in props["AccessLogSetting"]
    assert json.loads(props["AccessLogSetting"]["Format"])["userArn"] == "$context.identity.userArn"
    (settings,) = props["MethodSettings"]
    assert settings["LoggingLevel"] == "INFO"
    assert settings["DataTraceEnabled"] is False
    assert settings["ThrottlingRateLimit"] == constants.API_THROTTLE_RATE_LIMIT
    assert settings["ThrottlingBurstLimit"] == constants.API_THROTTLE_BURST_LIMIT


@pytest.mark.claim("sagewarden therefore **does not touch it by default**")
def test_api_is_regional_and_leaves_the_account_setting_alone_by_default(synth_any: SynthResult) -> None:
    _, api = synth_any.one("AWS::ApiGateway::RestApi")

    assert api["Properties"]["EndpointConfiguration"] == {"Types": ["REGIONAL"]}
    assert "Body" not in api["Properties"]  # plain Resource/Method tree, no OpenAPI body
    # The account-wide API Gateway CloudWatch role is opt-in (apiGatewayAccountRole=true)
    assert synth_any.resources("AWS::ApiGateway::Account") == {}
    assert "apigateway.amazonaws.com" not in json.dumps(synth_any.resources("AWS::IAM::Role"))


# --- IAM -----------------------------------------------------------------------------------------


def _statements_with_action(synth: SynthResult, action: str) -> list[dict[str, Any]]:
    return [s for s in synth.all_statements() if action in as_list(s["Action"])]


@pytest.mark.claim(
    "SageMaker execution roles runs may use. The only roles `iam:PassRole` is granted on. **Empty means every run is rejected.** JSON list or comma-separated."
)
def test_passrole_names_exactly_the_allowed_roles_for_sagemaker(synth_full: SynthResult) -> None:
    statements = _statements_with_action(synth_full, "iam:PassRole")

    assert len(statements) == 1
    (statement,) = statements
    assert statement["Effect"] == "Allow"
    assert sorted(as_list(statement["Resource"])) == sorted([ROLE_A, ROLE_B])
    assert statement["Condition"] == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}
    assert "*" not in json.dumps(statement["Resource"])


@pytest.mark.claim(
    "SageMaker execution roles runs may use. The only roles `iam:PassRole` is granted on. **Empty means every run is rejected.** JSON list or comma-separated."
)
def test_passrole_is_granted_on_nothing_when_no_role_is_allowed(synth_default: SynthResult) -> None:
    assert _statements_with_action(synth_default, "iam:PassRole") == []
    for statement in synth_default.all_statements():
        assert not any(a.startswith("iam:") for a in as_list(statement["Action"]))


def test_sagemaker_actions_are_scoped_to_the_job_prefix(
    synth_full: SynthResult, synth_default: SynthResult
) -> None:
    for synth, prefix in ((synth_full, FULL_CONTEXT["jobPrefix"]), (synth_default, keys.DEFAULT_JOB_PREFIX)):
        statements = [
            s for s in synth.all_statements() if any(a.startswith("sagemaker:") for a in as_list(s["Action"]))
        ]
        actions = {a for s in statements for a in as_list(s["Action"])}

        assert actions == {
            "sagemaker:CreateTrainingJob",
            "sagemaker:AddTags",
            "sagemaker:DescribeTrainingJob",
            "sagemaker:StopTrainingJob",
            "sagemaker:UpdateTrainingJob",  # terminates a warm pool nothing will reuse
            "sagemaker:DescribeTrainingPlan",  # a run's Training Plan windows (read-only)
        }
        for statement in statements:
            plan = as_list(statement["Action"]) == ["sagemaker:DescribeTrainingPlan"]
            resource = "training-plan/*" if plan else f"training-job/{prefix}-*"
            assert [joined(r) for r in as_list(statement["Resource"])] == [
                f"arn:${{AWS::Partition}}:sagemaker:${{AWS::Region}}:${{AWS::AccountId}}:{resource}"
            ]


def test_control_functions_get_table_topic_and_sagemaker_access(synth_full: SynthResult) -> None:
    table_id, _ = synth_full.one("AWS::DynamoDB::Table")
    topic_id, _ = synth_full.one("AWS::SNS::Topic")
    for handler in CONTROL_HANDLERS:
        _, function = synth_full.function_by_handler(handler)
        statements = synth_full.statements_of_role(synth_full.role_of(function))
        actions = {a for s in statements for a in as_list(s["Action"])}

        assert {"dynamodb:PutItem", "dynamodb:Query", "sns:Publish", "sagemaker:CreateTrainingJob"} <= actions
        assert "dynamodb:Scan" not in actions
        table_resources = {
            joined(r)
            for s in statements
            if "dynamodb:Query" in as_list(s["Action"])
            for r in as_list(s["Resource"])
        }
        assert table_resources == {f"${{{table_id}.Arn}}"} | {
            f"${{{table_id}.Arn}}/index/{name}" for name in (keys.GSI_RUNS, keys.GSI_STATUS, keys.GSI_DUE)
        }
        assert any(s["Action"] == "sns:Publish" and s["Resource"] == {"Ref": topic_id} for s in statements)


def test_heartbeat_function_gets_only_logs_tracing_and_its_failure_queue(synth_any: SynthResult) -> None:
    _, function = synth_any.function_by_handler(keys.HANDLER_HEARTBEAT)
    statements = synth_any.statements_of_role(synth_any.role_of(function))
    actions = {a for s in statements for a in as_list(s["Action"])}

    assert actions <= {
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "xray:PutTraceSegments",
        "xray:PutTelemetryRecords",
        "sqs:SendMessage",
        "sqs:GetQueueAttributes",
        "sqs:GetQueueUrl",
    }
    assert "logs:PutLogEvents" in actions


@pytest.mark.claim("The heartbeat function is not X-Ray traced")
def test_heartbeat_function_is_not_traced(synth_any: SynthResult) -> None:
    # It runs for every training job of the region and calls no AWS API: X-Ray's sampled traces
    # would cost more than its invocations (scripts/heartbeat_cost.py) and show nothing.
    _, function = synth_any.function_by_handler(keys.HANDLER_HEARTBEAT)
    statements = synth_any.statements_of_role(synth_any.role_of(function))

    assert function["Properties"].get("TracingConfig", {"Mode": "PassThrough"}) == {"Mode": "PassThrough"}
    assert not [a for s in statements for a in as_list(s["Action"]) if a.startswith("xray:")]


def test_functions_write_only_to_their_own_log_group(synth_any: SynthResult) -> None:
    for handler in ALL_HANDLERS:
        _, function = synth_any.function_by_handler(handler)
        log_group_id = function["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        statements = synth_any.statements_of_role(synth_any.role_of(function))
        log_writes = [s for s in statements if "logs:PutLogEvents" in as_list(s["Action"])]

        assert [s["Resource"] for s in log_writes] == [{"Fn::GetAtt": [log_group_id, "Arn"]}]
        _, role = next(
            (k, r)
            for k, r in synth_any.resources("AWS::IAM::Role").items()
            if k == synth_any.role_of(function)
        )
        assert "ManagedPolicyArns" not in role["Properties"]


@pytest.mark.claim(
    "When set, a run whose `CheckpointConfig.S3Uri` is in another bucket is refused at submit (400)"
)
def test_checkpoint_reads_are_scoped_to_configured_buckets(synth_full: SynthResult) -> None:
    (bucket,) = FULL_CONTEXT["checkpointBuckets"]
    list_statements = _statements_with_action(synth_full, "s3:ListBucket")
    get_statements = _statements_with_action(synth_full, "s3:GetObject")

    assert [joined(r) for s in list_statements for r in as_list(s["Resource"])] == [
        f"arn:${{AWS::Partition}}:s3:::{bucket}"
    ]
    assert [joined(r) for s in get_statements for r in as_list(s["Resource"])] == [
        f"arn:${{AWS::Partition}}:s3:::{bucket}/*"
    ]


def test_checkpoint_reads_cover_all_buckets_when_none_configured(synth_default: SynthResult) -> None:
    get_statements = _statements_with_action(synth_default, "s3:GetObject")

    assert [joined(r) for s in get_statements for r in as_list(s["Resource"])] == [
        "arn:${AWS::Partition}:s3:::*/*"
    ]
    for statement in synth_default.all_statements():
        assert not any(
            a.startswith("s3:") and a not in ("s3:ListBucket", "s3:GetObject")
            for a in as_list(statement["Action"])
        )


@pytest.mark.claim(
    "so two deployments in one account, whose prefixes differ (the preflight sees to it), never touch each other's alarms"
)
def test_alarm_management_is_scoped_to_the_hang_alarm_prefix(synth_any: SynthResult) -> None:
    # Two grants: the supervisor's on its hang alarms, and the deploy-time alarm-shape check's on
    # its throwaway alarms only (a narrower prefix; its own role; test_infra_alarm_shape_check.py).
    statements = _statements_with_action(synth_any, "cloudwatch:PutMetricAlarm")
    alarms = "arn:${AWS::Partition}:cloudwatch:${AWS::Region}:${AWS::AccountId}:alarm:"
    prefix = _alarm_prefix(synth_any)

    assert len(statements) == 2
    for statement in statements:
        assert set(as_list(statement["Action"])) == {
            "cloudwatch:PutMetricAlarm",
            "cloudwatch:DeleteAlarms",
            "cloudwatch:TagResource",
        }
    assert sorted(joined(r) for st in statements for r in as_list(st["Resource"])) == [
        f"{alarms}{prefix}*",
        f"{alarms}{prefix}{keys.SHAPE_CHECK_NAME_PART}*",
    ]
    (metric_read,) = _statements_with_action(synth_any, "cloudwatch:GetMetricData")
    assert metric_read["Action"] == "cloudwatch:GetMetricData"  # the only action granted on "*"


@pytest.mark.claim(
    "`DescribeAlarms` with `AlarmNamePrefix` is authorized against `alarm:*`, not against the alarm-name prefix"
)
def test_alarm_listing_is_granted_on_all_alarms_of_the_account_and_region(synth_any: SynthResult) -> None:
    # DescribeAlarms(AlarmNamePrefix=...) is authorised against alarm:*; a prefix grant is denied.
    (statement,) = _statements_with_action(synth_any, "cloudwatch:DescribeAlarms")

    assert as_list(statement["Action"]) == ["cloudwatch:DescribeAlarms"]
    assert [joined(r) for r in as_list(statement["Resource"])] == [
        "arn:${AWS::Partition}:cloudwatch:${AWS::Region}:${AWS::AccountId}:alarm:*"
    ]
    assert "Condition" not in statement


def test_training_log_reads_are_scoped_to_the_training_log_group(synth_any: SynthResult) -> None:
    (statement,) = _statements_with_action(synth_any, "logs:FilterLogEvents")

    assert set(as_list(statement["Action"])) == {
        "logs:FilterLogEvents",
        "logs:GetLogEvents",
        "logs:DescribeLogStreams",
    }
    group = "arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:" + keys.TRAINING_LOG_GROUP
    assert [joined(r) for r in as_list(statement["Resource"])] == [group, f"{group}:*"]


def test_only_the_api_reads_service_quotas_for_the_submit_time_quota_check(synth_any: SynthResult) -> None:
    quota_reads = {"servicequotas:ListServiceQuotas", "servicequotas:ListAWSDefaultServiceQuotas"}
    for handler in ALL_HANDLERS:
        _, function = synth_any.function_by_handler(handler)
        statements = synth_any.statements_of_role(synth_any.role_of(function))
        actions = {a for s in statements for a in as_list(s["Action"])}
        assert (quota_reads <= actions) == (handler == keys.HANDLER_API), handler
        assert not any(a.startswith("servicequotas:") for a in actions - quota_reads), handler


def test_only_unscopable_actions_are_granted_on_star(synth_any: SynthResult) -> None:
    # Service Quotas' list operations have no resource type in the Service Authorization Reference
    unscopable = {
        "xray:PutTraceSegments",
        "xray:PutTelemetryRecords",
        "cloudwatch:GetMetricData",
        "servicequotas:ListServiceQuotas",
        "servicequotas:ListAWSDefaultServiceQuotas",
    }
    for statement in synth_any.all_statements():
        if "*" in as_list(statement["Resource"]):
            assert set(as_list(statement["Action"])) <= unscopable, statement


# --- State table ---------------------------------------------------------------------------------


@pytest.mark.claim("`make destroy` keeps the state table (runs and audit trail)")
def test_state_table_is_on_demand_with_pitr_sse_and_retained(synth_any: SynthResult) -> None:
    _, table = synth_any.one("AWS::DynamoDB::Table")
    props = table["Properties"]

    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["SSESpecification"]["SSEEnabled"] is True
    assert props["KeySchema"] == [
        {"AttributeName": keys.PK, "KeyType": "HASH"},
        {"AttributeName": keys.SK, "KeyType": "RANGE"},
    ]
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert table["DeletionPolicy"] == "Retain"
    assert table["UpdateReplacePolicy"] == "Retain"


@pytest.mark.claim("Every non-terminal run carries `due_at`, kept in a sparse GSI sharded 4 ways.")
def test_state_table_has_the_three_shared_indexes(synth_any: SynthResult) -> None:
    _, table = synth_any.one("AWS::DynamoDB::Table")
    props = table["Properties"]
    types = {a["AttributeName"]: a["AttributeType"] for a in props["AttributeDefinitions"]}
    indexes = {
        i["IndexName"]: ([k["AttributeName"] for k in i["KeySchema"]], i["Projection"])
        for i in props["GlobalSecondaryIndexes"]
    }

    assert indexes == {
        keys.GSI_RUNS: ([keys.GSI_RUNS_PK, keys.GSI_RUNS_SK], {"ProjectionType": "ALL"}),
        keys.GSI_STATUS: ([keys.GSI_STATUS_PK, keys.GSI_STATUS_SK], {"ProjectionType": "ALL"}),
        keys.GSI_DUE: ([keys.GSI_DUE_PK, keys.GSI_DUE_SK], {"ProjectionType": "ALL"}),
    }
    assert types == {
        keys.PK: "S",
        keys.SK: "S",
        keys.GSI_RUNS_PK: "S",
        keys.GSI_RUNS_SK: "S",
        keys.GSI_STATUS_PK: "S",
        keys.GSI_STATUS_SK: "S",
        keys.GSI_DUE_PK: "S",
        keys.GSI_DUE_SK: "N",
    }


# --- Alerts --------------------------------------------------------------------------------------


@pytest.mark.claim("SNS topic (KMS-encrypted, SSL-only).")
def test_alert_topic_uses_rotating_kms_key_and_enforces_ssl(synth_any: SynthResult) -> None:
    topic_id, topic = synth_any.one("AWS::SNS::Topic")
    key_id, key = synth_any.one("AWS::KMS::Key")
    _, policy = synth_any.one("AWS::SNS::TopicPolicy")

    assert topic["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert key["Properties"]["EnableKeyRotation"] is True
    assert policy["Properties"]["Topics"] == [{"Ref": topic_id}]
    assert {
        "Action": "sns:Publish",
        "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        "Effect": "Deny",
        "Principal": "*",
        "Resource": {"Ref": topic_id},
        "Sid": "AllowPublishThroughSSLOnly",
    } in policy["Properties"]["PolicyDocument"]["Statement"]


def test_alert_key_lets_cloudwatch_alarms_publish_to_the_encrypted_topic(synth_any: SynthResult) -> None:
    _, key = synth_any.one("AWS::KMS::Key")
    statements = key["Properties"]["KeyPolicy"]["Statement"]

    assert any(
        s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}
        and set(s["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey*"}
        for s in statements
    )


def test_alert_email_subscription_exists_only_when_configured(
    synth_full: SynthResult, synth_default: SynthResult
) -> None:
    synth_full.template.resource_count_is("AWS::SNS::Subscription", 1)
    synth_full.template.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": FULL_CONTEXT["alertEmail"]}
    )
    synth_default.template.resource_count_is("AWS::SNS::Subscription", 0)


# --- Functions -----------------------------------------------------------------------------------


@pytest.mark.claim(
    "Each command first checks its prerequisites, Python 3.11+ (3.12 in Lambda) and Node.js 18+ for CDK synthesis, and says in one line what to install if one is missing"
)
def test_functions_run_python312_with_the_powertools_layer_and_tracing(synth_any: SynthResult) -> None:
    parameters = synth_any.raw["Parameters"]
    layer_parameters = {
        name: p
        for name, p in parameters.items()
        if str(p.get("Default", "")).startswith("/aws/service/powertools/")
    }
    assert list(layer_parameters.values()) == [
        {
            "Type": "AWS::SSM::Parameter::Value<String>",
            "Default": "/aws/service/powertools/python/arm64/python3.12/3.37.0",
        }
    ]
    (layer_parameter,) = layer_parameters
    for handler in ALL_HANDLERS:
        _, function = synth_any.function_by_handler(handler)
        props = function["Properties"]

        assert props["Runtime"] == "python3.12"
        assert props["Architectures"] == ["arm64"]
        assert props["Layers"] == [{"Ref": layer_parameter}]
        # X-Ray is opt-in: without tracing=true no function is traced and Powertools is told so
        assert props.get("TracingConfig", {"Mode": "PassThrough"}) == {"Mode": "PassThrough"}
        assert props["Environment"]["Variables"]["POWERTOOLS_TRACE_DISABLED"] == "true"


def test_functions_timeouts_fit_their_triggers(synth_any: SynthResult) -> None:
    timeouts = {h: synth_any.function_by_handler(h)[1]["Properties"]["Timeout"] for h in ALL_HANDLERS}

    assert timeouts[keys.HANDLER_API] == 29
    for handler in ALL_HANDLERS[1:]:
        assert 60 <= timeouts[handler] <= 120


def test_functions_get_the_shared_environment(synth_full: SynthResult) -> None:
    table_id, _ = synth_full.one("AWS::DynamoDB::Table")
    topic_id, _ = synth_full.one("AWS::SNS::Topic")
    for handler in ALL_HANDLERS:
        _, function = synth_full.function_by_handler(handler)
        env = function["Properties"]["Environment"]["Variables"]

        assert env[keys.ENV_TABLE_NAME] == {"Ref": table_id}
        assert env[keys.ENV_TOPIC_ARN] == {"Ref": topic_id}
        assert json.loads(env[keys.ENV_ALLOWED_ROLE_ARNS]) == [ROLE_A, ROLE_B]
        assert env[keys.ENV_JOB_PREFIX] == FULL_CONTEXT["jobPrefix"]
        assert json.loads(env[keys.ENV_POLICY_DEFAULTS]) == FULL_CONTEXT["policyDefaults"]
        assert env[keys.ENV_ALARM_PREFIX] == keys.alarm_prefix(FULL_CONTEXT["jobPrefix"])
        assert env[keys.ENV_HEARTBEAT_NAMESPACE] == keys.HEARTBEAT_NAMESPACE
        assert env["POWERTOOLS_SERVICE_NAME"] == f"sagewarden-{FULL_CONTEXT['jobPrefix']}"
        assert env["POWERTOOLS_METRICS_NAMESPACE"] == "Sagewarden"
        assert env["POWERTOOLS_LOG_LEVEL"] == "INFO"


@pytest.mark.claim(
    "The API function still logs every request it serves; requests that IAM rejects are then not logged."
)
def test_functions_have_their_own_log_group_with_retention(synth_any: SynthResult) -> None:
    log_groups = synth_any.resources("AWS::Logs::LogGroup")
    for handler in ALL_HANDLERS:
        _, function = synth_any.function_by_handler(handler)
        log_group = log_groups[function["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]]

        assert log_group["Properties"]["RetentionInDays"] == 90


@pytest.mark.claim("No Docker.")
def test_functions_code_asset_excludes_bytecode(synth_default: SynthResult) -> None:
    _, function = synth_default.function_by_handler(keys.HANDLER_API)
    asset_hash = function["Properties"]["Code"]["S3Key"].removesuffix(".zip")
    asset_dir = synth_default.outdir / f"asset.{asset_hash}"

    assert (asset_dir / "sagewarden" / "keys.py").is_file()
    assert not list(asset_dir.rglob("__pycache__"))
    assert not list(asset_dir.rglob("*.pyc"))


# --- Hang signals --------------------------------------------------------------------------------


@pytest.mark.claim(
    "subscribe the heartbeat function to `/aws/sagemaker/TrainingJobs`. Set `false` if the group's two subscription-filter slots are taken; the sweep then checks log silence itself."
)
@pytest.mark.claim(
    "Each deployment's heartbeat takes one of the two subscription-filter slots of `/aws/sagemaker/TrainingJobs`; a third one needs `-c logSubscription=false`"
)
@pytest.mark.claim("In that mode no heartbeat metric exists, so no attempt gets a log-silence alarm")
@pytest.mark.claim(
    "If that is too much, deploy with `CONTEXT='-c logSubscription=false'` (the sweep then checks log silence itself)"
)
def test_heartbeat_subscription_exists_only_when_enabled(
    synth_full: SynthResult, synth_default: SynthResult
) -> None:
    assert FULL_CONTEXT["logSubscription"] is False
    synth_full.template.resource_count_is("AWS::Logs::SubscriptionFilter", 0)
    # no custom resource ensures the training log group (the alarm-shape check is always there)
    assert [r["Type"] for r in synth_full.raw["Resources"].values() if r["Type"].startswith("Custom::")] == [
        keys.SHAPE_CHECK_RESOURCE_TYPE
    ]

    heartbeat_id, _ = synth_default.function_by_handler(keys.HANDLER_HEARTBEAT)
    _, subscription = synth_default.one("AWS::Logs::SubscriptionFilter")
    assert subscription["Properties"]["LogGroupName"] == keys.TRAINING_LOG_GROUP
    assert subscription["Properties"]["FilterPattern"] == ""
    assert subscription["Properties"]["DestinationArn"] == {"Fn::GetAtt": [heartbeat_id, "Arn"]}


@pytest.mark.claim("a custom resource creates it if missing and never deletes it")
def test_heartbeat_subscription_waits_for_log_group_and_invoke_permission(synth_default: SynthResult) -> None:
    _, subscription = synth_default.one("AWS::Logs::SubscriptionFilter")
    custom = {
        k: r
        for k, r in synth_default.raw["Resources"].items()
        if r["Type"] == "Custom::SagewardenEnsureLogGroup"
    }
    ((custom_id, custom_resource),) = custom.items()
    permissions = {
        k: r
        for k, r in synth_default.resources("AWS::Lambda::Permission").items()
        if r["Properties"]["Principal"] == "logs.amazonaws.com"
    }
    ((permission_id, permission),) = permissions.items()

    assert {custom_id, permission_id} <= set(subscription["DependsOn"])
    assert joined(permission["Properties"]["SourceArn"]) == (
        "arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:"
        f"{keys.TRAINING_LOG_GROUP}:*"
    )
    create = json.loads(custom_resource["Properties"]["Create"])
    assert create["action"] == "createLogGroup"
    assert create["parameters"] == {"logGroupName": keys.TRAINING_LOG_GROUP}
    assert create["ignoreErrorCodesMatching"] == "ResourceAlreadyExistsException"
    assert "Delete" not in custom_resource["Properties"]  # never deletes the shared group


@pytest.mark.claim("a custom resource creates it if missing and never deletes it")
def test_training_log_group_is_never_owned_by_the_stack(synth_any: SynthResult) -> None:
    for log_group in synth_any.resources("AWS::Logs::LogGroup").values():
        assert log_group["Properties"].get("LogGroupName") != keys.TRAINING_LOG_GROUP


# --- Outputs -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "output",
    [
        constants.OUTPUT_API_URL,
        constants.OUTPUT_TABLE_NAME,
        constants.OUTPUT_TOPIC_ARN,
        constants.OUTPUT_DLQ_URL,
    ],
)
def test_stack_outputs_expose_endpoints(synth_full: SynthResult, output: str) -> None:
    synth_full.template.has_output(output, {"Value": Match.any_value()})


def test_stack_outputs_are_exactly_the_documented_six(synth_any: SynthResult) -> None:
    # RestApi adds an `Endpoint` output of its own, a duplicate of ApiUrl: removed.
    assert sorted(synth_any.raw["Outputs"]) == sorted(
        [
            constants.OUTPUT_API_URL,
            constants.OUTPUT_TABLE_NAME,
            constants.OUTPUT_TOPIC_ARN,
            constants.OUTPUT_DLQ_URL,
            constants.OUTPUT_JOB_PREFIX,
            constants.OUTPUT_ALARM_SHAPES,
        ]
    )
    prefix = synth_any.context.get("jobPrefix", keys.DEFAULT_JOB_PREFIX)
    assert synth_any.raw["Outputs"][constants.OUTPUT_JOB_PREFIX]["Value"] == prefix


def test_health_alarms_watch_this_deployments_counters_and_notify(synth_any: SynthResult) -> None:
    from infra.constructs.health import HEALTH_ALARMS

    service = f"sagewarden-{synth_any.context.get('jobPrefix', keys.DEFAULT_JOB_PREFIX)}"
    alarms = {
        r["Properties"]["MetricName"]: r["Properties"]
        for r in synth_any.resources("AWS::CloudWatch::Alarm").values()
        if r["Properties"].get("Namespace") == "Sagewarden"
    }
    assert set(alarms) == {spec.metric for spec in HEALTH_ALARMS} >= {"FailedActions", "AlertPublishFailures"}
    for props in alarms.values():
        assert props["Dimensions"] == [{"Name": "service", "Value": service}]
        assert props["Statistic"] == "Sum" and props["TreatMissingData"] == "notBreaching"
        assert len(props["AlarmActions"]) == 1  # the alert topic


@pytest.mark.claim("The heartbeat function is not X-Ray traced")
def test_tracing_true_traces_the_api_stage_and_every_function_but_the_heartbeat(
    synth_opt_in: SynthResult,
) -> None:
    _, stage = synth_opt_in.one("AWS::ApiGateway::Stage")
    assert stage["Properties"]["TracingEnabled"] is True
    for handler in ALL_HANDLERS:
        props = synth_opt_in.function_by_handler(handler)[1]["Properties"]
        traced = handler != keys.HANDLER_HEARTBEAT  # no AWS call to trace, and it runs for every job
        assert props.get("TracingConfig", {"Mode": "PassThrough"}) == {
            "Mode": "Active" if traced else "PassThrough"
        }
        assert props["Environment"]["Variables"]["POWERTOOLS_TRACE_DISABLED"] == (
            "false" if traced else "true"
        )
