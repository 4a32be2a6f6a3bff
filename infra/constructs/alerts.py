"""The SNS topic people subscribe to for run alerts, and the stack's KMS key (the topic's, and
the log groups' of the functions and the API: their logs carry training log tails)."""

from __future__ import annotations

from aws_cdk import ArnFormat, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

_CLOUDWATCH = "cloudwatch.amazonaws.com"
# CloudWatch Logs' regional service principal: it encrypts a log group's events with the key
_LOGS_ACTIONS = ["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"]


class Alerts(Construct):
    """SNS topic with a customer-managed KMS key (rotation on) and an SSL-only topic policy.

    The supervisor's functions publish through ``topic.grant_publish`` (which also grants the
    KMS data-key actions). CloudWatch alarms of this stack (e.g. the dead-letter-queue alarm)
    may publish too: the key policy and topic policy allow ``cloudwatch.amazonaws.com`` for
    alarms of this account only; without that an alarm action on an encrypted topic fails
    silently. CloudWatch Logs may use the key for the log groups of this account and region
    (``grant_logs``: the functions' and the API's log groups are encrypted with it).

    Attributes:
        key: the ``kms.Key`` of the topic and of the stack's log groups.
        topic: the ``sns.Topic``.
        email_subscription: the ``sns.Subscription`` when an alert e-mail is configured.
    """

    def __init__(self, scope: Construct, construct_id: str, *, alert_email: str | None) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)

        self.key = kms.Key(
            self,
            "TopicKey",
            description="sagewarden alert topic and log group encryption",
            enable_key_rotation=True,
            # In-flight notifications and the stack's own log groups (destroyed with the stack)
            # are encrypted with it; nothing to keep after destroy.
            removal_policy=RemovalPolicy.DESTROY,
            pending_window=Duration.days(7),
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowCloudWatchAlarmsToUseTheKey",
                principals=[iam.ServicePrincipal(_CLOUDWATCH)],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
            )
        )

        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowCloudWatchLogsOfThisAccountAndRegion",
                principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
                actions=_LOGS_ACTIONS,
                resources=["*"],
                conditions={
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": stack.format_arn(
                            service="logs",
                            resource="log-group",
                            resource_name="*",
                            arn_format=ArnFormat.COLON_RESOURCE_NAME,
                        )
                    }
                },
            )
        )

        self.topic = sns.Topic(
            self,
            "Topic",
            display_name="sagewarden alerts",
            master_key=self.key,
            enforce_ssl=True,
        )
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowCloudWatchAlarmsOfThisAccount",
                principals=[iam.ServicePrincipal(_CLOUDWATCH)],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnLike": {
                        "aws:SourceArn": stack.format_arn(
                            service="cloudwatch",
                            resource="alarm",
                            resource_name="*",
                            arn_format=ArnFormat.COLON_RESOURCE_NAME,
                        )
                    },
                },
            )
        )

        self.email_subscription: sns.Subscription | None = None
        if alert_email:
            self.email_subscription = self.topic.add_subscription(
                subscriptions.EmailSubscription(alert_email)
            )
