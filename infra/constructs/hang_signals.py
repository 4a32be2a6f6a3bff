"""Log-silence signal: a subscription filter feeding the heartbeat function.

The heartbeat function turns the training log events it receives into a per-job heartbeat
metric (``keys.HEARTBEAT_NAMESPACE``), which the hang alarms watch. It sees events as they
arrive, unlike LogStream ``lastEventTimestamp`` (eventually consistent, up to an hour late).

The log group ``keys.TRAINING_LOG_GROUP`` (``/aws/sagemaker/TrainingJobs``) is shared by every
training job of the account and region and may exist already; CloudFormation cannot adopt an
existing log group, and deleting this stack must never delete it. So the stack does not own
it: an ``AwsCustomResource`` calls ``logs:CreateLogGroup`` once and ignores
``ResourceAlreadyExistsException``, and does nothing on delete.

Full subscription slots
-----------------------
A log group takes at most **two** subscription filters. If the team already uses both slots
on ``/aws/sagemaker/TrainingJobs``, creating the filter fails with ``LimitExceededException``
and CloudFormation rolls the deployment back (on a first deployment the stack ends in
ROLLBACK_COMPLETE and must be deleted before retrying). Redeploy with
``cdk deploy -c logSubscription=false``: no filter and no heartbeat wiring are created, and the
sweep's fallback detects log silence by querying each running job's recent log events
(FilterLogEvents with a start-time window) instead.
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_logs_destinations as log_destinations
from aws_cdk import aws_sqs as sqs
from aws_cdk import custom_resources as cr
from constructs import Construct

from sagewarden import keys

from .. import constants
from .functions import DeadLetterDestination
from .nag import acknowledge, resource_finding

# An empty pattern forwards every event: any line a job writes is a sign of life.
ALL_EVENTS_PATTERN = ""


def training_log_group_arn(scope: Construct, *, with_wildcard: bool = True) -> str:
    """ARN of the shared training log group.

    CloudWatch Logs documents the ``:*`` form (which also covers the group's streams) as the
    one to use in IAM policies for most actions; policies here list both forms.
    """
    arn = Stack.of(scope).format_arn(
        service="logs",
        resource="log-group",
        resource_name=keys.TRAINING_LOG_GROUP,
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )
    return f"{arn}:*" if with_wildcard else arn


class HangSignals(Construct):
    """Ensure the training log group exists and subscribe the heartbeat function to it.

    Created only when ``log_subscription`` is true; otherwise the construct is empty and all
    attributes are ``None``.

    Attributes:
        log_group_ensured: the ``cr.AwsCustomResource`` that creates the group if missing.
        log_group: the (imported, not owned) training ``logs.ILogGroup``.
        subscription_filter: the ``logs.SubscriptionFilter`` to the heartbeat function.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        heartbeat_function: lambda_.IFunction,
        log_subscription: bool,
        job_prefix: str = keys.DEFAULT_JOB_PREFIX,
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_group_ensured: cr.AwsCustomResource | None = None
        self.log_group: logs.ILogGroup | None = None
        self.subscription_filter: logs.SubscriptionFilter | None = None
        if not log_subscription:
            return

        create_call = cr.AwsSdkCall(
            service="CloudWatchLogs",
            action="createLogGroup",
            parameters={"logGroupName": keys.TRAINING_LOG_GROUP},
            physical_resource_id=cr.PhysicalResourceId.of(keys.TRAINING_LOG_GROUP),
            ignore_error_codes_matching="ResourceAlreadyExistsException",
        )
        self.log_group_ensured = cr.AwsCustomResource(
            self,
            "EnsureTrainingLogGroup",
            resource_type="Custom::SagewardenEnsureLogGroup",
            on_create=create_call,
            on_update=create_call,
            # No on_delete: the group is shared with every training job of the account.
            policy=cr.AwsCustomResourcePolicy.from_statements(
                [
                    iam.PolicyStatement(
                        actions=["logs:CreateLogGroup"],
                        resources=[
                            training_log_group_arn(self, with_wildcard=False),
                            training_log_group_arn(self),
                        ],
                    )
                ]
            ),
            install_latest_aws_sdk=False,
        )
        acknowledge(
            self.log_group_ensured,
            "AwsSolutions-IAM5",
            "logs:CreateLogGroup on the one shared SageMaker training log group; the trailing "
            "':*' is the log-group ARN form CloudWatch Logs authorises most actions against.",
            findings=[resource_finding(self, training_log_group_arn(self))],
        )
        self._acknowledge_provider()

        self.log_group = logs.LogGroup.from_log_group_name(self, "TrainingLogGroup", keys.TRAINING_LOG_GROUP)
        # LambdaDestination adds the logs.amazonaws.com invoke permission (scoped to this log
        # group's ARN and account) and makes the filter depend on it.
        self.subscription_filter = logs.SubscriptionFilter(
            self,
            "HeartbeatSubscription",
            log_group=self.log_group,
            destination=log_destinations.LambdaDestination(heartbeat_function),
            filter_pattern=logs.FilterPattern.all_events(),
            filter_name=keys.heartbeat_filter_name(Stack.of(self).stack_name, job_prefix),
        )
        self.subscription_filter.node.add_dependency(self.log_group_ensured)

    def send_failures_to(self, queue: sqs.IQueue) -> None:
        """Failed asynchronous invocations of CDK's AwsCustomResource provider (CloudFormation
        invokes it asynchronously) go to `queue`, as every other function's do. The provider is one
        function per stack: a second supervisor in the stack finds it configured already."""
        provider = Stack.of(self).node.try_find_child(constants.AWS_CUSTOM_RESOURCE_PROVIDER_ID)
        if not isinstance(provider, lambda_.Function) or provider.node.try_find_child("EventInvokeConfig"):
            return
        provider.configure_async_invoke(on_failure=DeadLetterDestination(queue))

    def _acknowledge_provider(self) -> None:
        """The AwsCustomResource provider is a singleton function that CDK adds to the stack."""
        provider = Stack.of(self).node.try_find_child(constants.AWS_CUSTOM_RESOURCE_PROVIDER_ID)
        if provider is None:  # pragma: no cover - a CDK upgrade renamed it; cdk-nag will say so
            return
        acknowledge(
            provider,
            "AwsSolutions-IAM4",
            "CDK's built-in AwsCustomResource provider (runs once per deployment to create the "
            "shared log group) uses AWSLambdaBasicExecutionRole for its own logs.",
            findings=[
                "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
            ],
        )
