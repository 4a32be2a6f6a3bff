"""The SNS topic people subscribe to for run alerts, encrypted with its own KMS key."""

from __future__ import annotations

from aws_cdk import ArnFormat, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

_CLOUDWATCH = "cloudwatch.amazonaws.com"


class Alerts(Construct):
    """SNS topic with a customer-managed KMS key (rotation on) and an SSL-only topic policy.

    The supervisor's functions publish through ``topic.grant_publish`` (which also grants the
    KMS data-key actions). CloudWatch alarms of this stack (e.g. the dead-letter-queue alarm)
    may publish too: the key policy and topic policy allow ``cloudwatch.amazonaws.com`` for
    alarms of this account only; without that an alarm action on an encrypted topic fails
    silently.

    Attributes:
        key: the ``kms.Key`` of the topic.
        topic: the ``sns.Topic``.
        email_subscription: the ``sns.Subscription`` when an alert e-mail is configured.
    """

    def __init__(self, scope: Construct, construct_id: str, *, alert_email: str | None) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)

        self.key = kms.Key(
            self,
            "TopicKey",
            description="sagewarden alert topic encryption",
            enable_key_rotation=True,
            # Only in-flight notifications are encrypted with it; nothing to keep after destroy.
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
