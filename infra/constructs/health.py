"""Alarms on the supervisor's own health, from the counters the functions publish (Powertools
metrics, EMF, namespace `Sagewarden`, dimension `service = sagewarden-<jobPrefix>`).

Every failed effect is re-driven by the sweep, so one failure is not news; a failure that keeps
happening is (throttling that does not clear, a permission or key policy that is wrong, S3 or
CloudWatch Logs that cannot be read). Each alarm notifies the alert topic.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_sns as sns
from constructs import Construct

from sagewarden import keys

from .. import constants


@dataclass(frozen=True)
class HealthAlarmSpec:
    construct_id: str
    metric: str
    threshold: float
    minutes: int
    description: str


HEALTH_ALARMS = (
    HealthAlarmSpec(
        "FailedActionsAlarm",
        keys.METRIC_FAILED_ACTIONS,
        3,
        15,
        "sagewarden: actions keep failing (CreateTrainingJob, StopTrainingJob, PutMetricAlarm, "
        "DeleteAlarms...). The sweep re-drives each one; a steady rate means throttling that does "
        "not clear or a missing permission. See the functions' logs for the error.",
    ),
    HealthAlarmSpec(
        "AlertPublishFailuresAlarm",
        keys.METRIC_ALERT_PUBLISH_FAILURES,
        3,
        15,
        "sagewarden: alerts could not be published to SNS (throttling, the topic's KMS key policy, "
        "size). They stay owed in the outbox and are retried; nothing is lost, but nobody is told.",
    ),
    HealthAlarmSpec(
        "ObservationFailuresAlarm",
        keys.METRIC_OBSERVATION_FAILURES,
        10,
        30,
        "sagewarden: checkpoints (S3), training logs or metrics cannot be read. Decisions that need "
        "them are deferred, never taken on a guess; fix the access (s3:ListBucket / kms:Decrypt / "
        "logs:*) so runs can resume.",
    ),
    HealthAlarmSpec(
        "SweepErrorsAlarm",
        keys.METRIC_SWEEP_ERRORS,
        5,
        15,
        "sagewarden: the sweep keeps failing on some runs (see the sweep function's logs).",
    ),
    HealthAlarmSpec(
        "SweepOutOfTimeAlarm",
        keys.METRIC_SWEEP_OUT_OF_TIME,
        10,
        15,
        "sagewarden: the sweep runs out of time every minute: more due work than one pass can serve "
        "(timers and re-observation slow down, none is lost). Raise the sweep's timeout/memory.",
    ),
)


class SupervisorHealth(Construct):
    """One alarm per spec in HEALTH_ALARMS, each notifying the alert topic.

    Attributes:
        alarms: ``{metric name: cloudwatch.Alarm}``.
        service: the ``service`` dimension value the functions publish under.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, job_prefix: str, alert_topic: sns.ITopic
    ) -> None:
        super().__init__(scope, construct_id)
        self.service = constants.powertools_service_name(job_prefix)
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        for spec in HEALTH_ALARMS:
            alarm = cloudwatch.Alarm(
                self,
                spec.construct_id,
                alarm_description=spec.description,
                metric=self.metric(spec.metric, minutes=spec.minutes),
                threshold=spec.threshold,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                evaluation_periods=1,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            alarm.add_alarm_action(cw_actions.SnsAction(alert_topic))
            self.alarms[spec.metric] = alarm

    def metric(self, name: str, *, minutes: int = 5, statistic: str = "Sum") -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace=keys.METRICS_NAMESPACE,
            metric_name=name,
            dimensions_map={"service": self.service},
            period=Duration.minutes(minutes),
            statistic=statistic,
        )
