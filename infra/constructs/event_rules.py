"""EventBridge rules that drive the supervisor, and their dead-letter queue.

1. SageMaker training job state changes of this deployment's jobs (name prefix
   ``<jobPrefix>-``) -> job-state function.
2. CloudWatch alarm state changes of the supervisor's hang alarms (name prefix
   ``keys.alarm_prefix(jobPrefix)``) -> alarm function.
3. A one-minute schedule -> sweep function (reconciler and durable timers).

Targets are direct Lambda targets with an EventBridge retry policy and a shared, encrypted,
SSL-only SQS dead-letter queue. An alarm on that queue notifies the alert topic as soon as
one event could not be delivered.
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from sagewarden import keys

from .. import constants
from .nag import acknowledge

SAGEMAKER_SOURCE = "aws.sagemaker"
SAGEMAKER_DETAIL_TYPE = "SageMaker Training Job State Change"
CLOUDWATCH_SOURCE = "aws.cloudwatch"
ALARM_DETAIL_TYPE = "CloudWatch Alarm State Change"


def training_job_name_prefix(job_prefix: str) -> str:
    """The training job name prefix of a deployment; every attempt name starts with it."""
    return f"{job_prefix}-"


class EventRules(Construct):
    """The three rules, the dead-letter queue and its alarm.

    Attributes:
        training_job_rule, alarm_rule, sweep_rule: the ``events.Rule`` resources.
        dead_letter_queue: the ``sqs.Queue`` shared by all targets.
        dead_letter_alarm: ``cloudwatch.Alarm`` on visible messages in that queue.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        job_prefix: str,
        job_state_function: lambda_.IFunction,
        alarm_state_function: lambda_.IFunction,
        sweep_function: lambda_.IFunction,
        alert_topic: sns.ITopic,
    ) -> None:
        super().__init__(scope, construct_id)

        self.dead_letter_queue = sqs.Queue(
            self,
            "DeadLetterQueue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(constants.DLQ_RETENTION_DAYS),
            removal_policy=RemovalPolicy.DESTROY,
        )
        acknowledge(
            self.dead_letter_queue,
            "AwsSolutions-SQS3",
            "This queue is itself the dead-letter queue of the EventBridge targets and of the "
            "functions' asynchronous invocations; a dead-letter queue of a dead-letter queue "
            "adds nothing (its depth alarms the alert topic instead).",
        )

        def target(
            function: lambda_.IFunction, *, retries: int, max_age_seconds: int
        ) -> targets.LambdaFunction:
            return targets.LambdaFunction(
                function,
                dead_letter_queue=self.dead_letter_queue,
                retry_attempts=retries,
                max_event_age=Duration.seconds(max_age_seconds),
            )

        self.training_job_rule = events.Rule(
            self,
            "TrainingJobStateChange",
            description="sagewarden: SageMaker training job state changes of supervised jobs",
            event_pattern=events.EventPattern(
                source=[SAGEMAKER_SOURCE],
                detail_type=[SAGEMAKER_DETAIL_TYPE],
                detail={"TrainingJobName": [{"prefix": training_job_name_prefix(job_prefix)}]},
            ),
            targets=[
                target(
                    job_state_function,
                    retries=constants.EVENT_TARGET_RETRY_ATTEMPTS,
                    max_age_seconds=constants.EVENT_TARGET_MAX_EVENT_AGE_SECONDS,
                )
            ],
        )
        self.alarm_rule = events.Rule(
            self,
            "HangAlarmStateChange",
            description="sagewarden: state changes of the supervisor's hang alarms",
            event_pattern=events.EventPattern(
                source=[CLOUDWATCH_SOURCE],
                detail_type=[ALARM_DETAIL_TYPE],
                detail={"alarmName": [{"prefix": keys.alarm_prefix(job_prefix)}]},
            ),
            targets=[
                target(
                    alarm_state_function,
                    retries=constants.EVENT_TARGET_RETRY_ATTEMPTS,
                    max_age_seconds=constants.EVENT_TARGET_MAX_EVENT_AGE_SECONDS,
                )
            ],
        )
        self.sweep_rule = events.Rule(
            self,
            "SweepSchedule",
            description="sagewarden: periodic reconciler and durable timers",
            schedule=events.Schedule.rate(Duration.minutes(constants.SWEEP_RATE_MINUTES)),
            targets=[
                target(
                    sweep_function,
                    retries=constants.SWEEP_TARGET_RETRY_ATTEMPTS,
                    max_age_seconds=constants.SWEEP_TARGET_MAX_EVENT_AGE_SECONDS,
                )
            ],
        )

        self.dead_letter_alarm = cloudwatch.Alarm(
            self,
            "DeadLetterAlarm",
            alarm_description=(
                "sagewarden: an event or a failed asynchronous invocation landed in the dead-letter "
                "queue; the sweep reconciles run state, but inspect the message."
            ),
            metric=self.dead_letter_queue.metric_approximate_number_of_messages_visible(
                period=Duration.minutes(5), statistic="Maximum"
            ),
            threshold=0,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.dead_letter_alarm.add_alarm_action(cw_actions.SnsAction(alert_topic))
