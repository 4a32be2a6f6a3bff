"""Construct ids, Lambda defaults and other infrastructure-only constants.

Names shared with the Lambda code (table keys, environment variable names, handler paths,
alarm prefix, heartbeat namespace) live in ``sagewarden.keys``; this module only holds what
the CDK side alone needs. It imports no CDK module (durations are plain seconds), so tools
such as the local drill can read it without starting jsii.
"""

from __future__ import annotations

from dataclasses import dataclass

from sagewarden import keys

# --- Stack ------------------------------------------------------------------------------------
STACK_ID = "Sagewarden"  # the default stack name (context `stackName`)
STACK_DESCRIPTION = "sagewarden: serverless supervisor that keeps long SageMaker training runs alive"
SUPERVISOR_ID = "Supervisor"

# --- Construct ids (children of the Supervisor construct) ------------------------------------
STATE_TABLE_ID = "StateTable"
ALERTS_ID = "Alerts"
FUNCTIONS_ID = "Functions"
EVENT_RULES_ID = "EventRules"
API_ID = "Api"
HANG_SIGNALS_ID = "HangSignals"
PERMISSIONS_ID = "Permissions"
HEALTH_ID = "Health"
DASHBOARD_ID = "Dashboard"
ALARM_SHAPE_CHECK_ID = "AlarmShapeCheck"

# --- Stack outputs ----------------------------------------------------------------------------
OUTPUT_API_URL = "ApiUrl"
OUTPUT_TABLE_NAME = "TableName"
OUTPUT_TOPIC_ARN = "TopicArn"
OUTPUT_DLQ_URL = "DeadLetterQueueUrl"
# The deployment's job prefix: how the preflight tells which stack of an account and region owns
# a prefix (sagewarden_cli/deployments.py reads it; a stack has exactly one).
OUTPUT_JOB_PREFIX = "JobPrefix"
# What CloudWatch made of the hang-alarm shapes at the last deploy that changed them (a JSON
# report from the alarm-shape check; `sagewarden selftest` prints it; sagewarden_cli/selftest_shapes.py).
OUTPUT_ALARM_SHAPES = "AlarmShapes"

# --- Lambda -----------------------------------------------------------------------------------
# Never ship byte code, caches or editor droppings in the asset.
LAMBDA_CODE_EXCLUDE = [
    "**/__pycache__",
    "**/*.pyc",
    "**/.mypy_cache",
    "**/.pytest_cache",
    "**/.ruff_cache",
    "**/.DS_Store",
]
PYTHON_VERSION = "python3.12"  # also the runtime segment of the Powertools SSM parameter
DEFAULT_ARCHITECTURE = "arm64"
SUPPORTED_ARCHITECTURES = ("arm64", "x86_64")
DEFAULT_POWERTOOLS_VERSION = "3.37.0"
# Public SSM parameter whose value is the ARN of the Powertools layer of that exact version.
POWERTOOLS_LAYER_PARAMETER = "/aws/service/powertools/python/{arch}/" + PYTHON_VERSION + "/{version}"
LOG_RETENTION = "THREE_MONTHS"  # name of an aws_logs.RetentionDays member (90 days)


def powertools_service_name(job_prefix: str) -> str:
    """The `service` dimension of a deployment's metrics (and its log/trace service name)."""
    return f"sagewarden-{job_prefix}"


POWERTOOLS_METRICS_NAMESPACE = keys.METRICS_NAMESPACE
POWERTOOLS_LOG_LEVEL = "INFO"

# EventBridge -> Lambda delivery (EventBridge's own retry policy, before the event hits the DLQ)
EVENT_TARGET_RETRY_ATTEMPTS = 8
EVENT_TARGET_MAX_EVENT_AGE_SECONDS = 6 * 3600
# A sweep tick that could not be delivered for a few minutes is superseded by the next one.
SWEEP_TARGET_RETRY_ATTEMPTS = 2
SWEEP_TARGET_MAX_EVENT_AGE_SECONDS = 5 * 60
SWEEP_RATE_MINUTES = 1
# Lambda's own asynchronous invocation retries (function errors), before the failure record
# lands in the DLQ.
ASYNC_RETRY_ATTEMPTS = 2
ASYNC_MAX_EVENT_AGE_SECONDS = 6 * 3600

DLQ_RETENTION_DAYS = 14

# --- Dashboard and the cost estimate ----------------------------------------------------------
DASHBOARD_PERIOD_MINUTES = 5
DASHBOARD_DEFAULT_DAYS = 1
# CloudWatch list prices (us-east-1, first tier) used for the supervision-cost estimate; check
# them against the current pricing page.
CW_PRICES_AS_OF = "us-east-1 list prices as read in 2025"
CW_CUSTOM_METRIC_MONTH_USD = 0.30  # per custom metric (a heartbeat series) per month
CW_ALARM_METRIC_MONTH_USD = 0.10  # per standard-resolution alarm metric per month
CW_DASHBOARD_MONTH_USD = 3.00  # per dashboard per month beyond the account's free three
DAYS_PER_BILLING_MONTH = 30

# --- API --------------------------------------------------------------------------------------
API_STAGE_NAME = "v1"
API_THROTTLE_RATE_LIMIT = 20  # requests per second, steady state
API_THROTTLE_BURST_LIMIT = 40
RUN_ID_PATH_PARAMETER = "id"


@dataclass(frozen=True)
class FunctionSpec:
    """Static settings of one supervisor function."""

    construct_id: str
    handler: str
    description: str
    timeout_seconds: int
    memory_mb: int
    # X-Ray active tracing. Off for the heartbeat: it makes no AWS call (nothing to trace), and
    # it runs for every training job of the region, so sampled traces would cost more than its
    # Lambda requests (scripts/heartbeat_cost.py).
    tracing: bool = True
    # Reserved concurrency with `reservedConcurrency=true` (off by default: AWS refuses any
    # reservation that leaves fewer than 100 unreserved executions, and a new account has 10)
    reserved_concurrency: int = 1


API_FUNCTION = FunctionSpec(
    construct_id="ApiFunction",
    handler=keys.HANDLER_API,
    description="sagewarden REST API: submit, list, inspect and cancel runs",
    timeout_seconds=29,  # API Gateway's integration timeout
    memory_mb=512,
    reserved_concurrency=10,  # people and the CLI; API Gateway throttles at 20 requests/s anyway
)
JOB_STATE_FUNCTION = FunctionSpec(
    construct_id="JobStateFunction",
    handler=keys.HANDLER_JOB_STATE,
    description="sagewarden: react to SageMaker training job state changes",
    timeout_seconds=90,
    memory_mb=512,
    reserved_concurrency=5,  # asynchronous: a throttled event waits in Lambda's queue (retried up to 6 h)
)
ALARM_STATE_FUNCTION = FunctionSpec(
    construct_id="AlarmStateFunction",
    handler=keys.HANDLER_ALARM_STATE,
    description="sagewarden: react to hang alarm state changes",
    timeout_seconds=90,
    memory_mb=512,
    reserved_concurrency=5,  # asynchronous, as above
)
SWEEP_FUNCTION = FunctionSpec(
    construct_id="SweepFunction",
    handler=keys.HANDLER_SWEEP,
    description="sagewarden: periodic reconciler and durable timers",
    # Matches the one-minute schedule so sweeps do not pile up on one another; the sweep
    # should stop taking new work when little time remains: the next tick carries on.
    timeout_seconds=60,
    memory_mb=512,
    reserved_concurrency=2,  # one works (the lease); a tick that overlaps it finds the lease taken
)
HEARTBEAT_FUNCTION = FunctionSpec(
    construct_id="HeartbeatFunction",
    handler=keys.HANDLER_HEARTBEAT,
    description="sagewarden: turn training log events into per-job heartbeat metrics",
    timeout_seconds=60,
    memory_mb=256,
    tracing=False,
    reserved_concurrency=10,  # asynchronous (log subscription deliveries); throttled ones are retried
)
ALL_FUNCTIONS = (
    API_FUNCTION,
    JOB_STATE_FUNCTION,
    ALARM_STATE_FUNCTION,
    SWEEP_FUNCTION,
    HEARTBEAT_FUNCTION,
)

# Not a supervisor function: the handler of the deploy-time alarm-shape check (a CloudFormation
# custom resource, infra/constructs/alarm_shape_check.py). A dozen PutMetricAlarm calls and one
# DeleteAlarms; the check stops putting alarms when 15 s are left and answers.
SHAPE_CHECK_FUNCTION = FunctionSpec(
    construct_id="AlarmShapeCheckFunction",
    handler=keys.HANDLER_ALARM_SHAPE_CHECK,
    description="sagewarden: deploy-time check that CloudWatch accepts every hang-alarm shape",
    timeout_seconds=120,
    memory_mb=256,
    tracing=False,  # runs once per deploy; its answer and log say everything
)
# CloudFormation gives up on an unanswered custom resource after this (default 3,600 s)
SHAPE_CHECK_SERVICE_TIMEOUT_SECONDS = 300

# --- Custom resource that makes sure the shared training log group exists ----------------------
# Stable id of the singleton provider function that ``custom_resources.AwsCustomResource``
# adds at stack level (part of aws-cdk-lib's public behaviour since v1).
AWS_CUSTOM_RESOURCE_PROVIDER_ID = "AWS679f53fac002430cb0da5b7982bd2287"
