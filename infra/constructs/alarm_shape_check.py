"""CloudWatch judges the hang-alarm shapes at deploy time.

A custom resource (``Custom::SagewardenAlarmShapeCheck``) backed by a function of the shared code
asset (handler ``sagewarden.handlers.check_alarm_shapes``): on every deploy that changes the
shapes it puts one alarm of every shape the supervisor can create under a throwaway name and
deletes it again (``sagewarden.adapters.alarm_shapes``). A refusal answers FAILED with the shape, its
expression and CloudWatch's message, so ``cdk deploy`` fails and rolls back before a user depends
on an alarm CloudWatch would refuse.

Re-run on change: the resource's properties carry a fingerprint of every request the check makes
(computed here, at synth, with the same code), so a deploy whose shapes differ updates the
resource and CloudFormation invokes the check again; a deploy that changes nothing in them does not.

A plain ``CustomResource`` with the function as its service token (no provider framework): the
function answers CloudFormation itself and keeps its answer within the documented 4,096 bytes,
which the framework would not (it appends its own stack trace to the reason). ``ServiceTimeout``
bounds how long CloudFormation waits for an answer that never comes.

IAM: ``cloudwatch:PutMetricAlarm``, ``cloudwatch:TagResource`` (the requests carry the
supervisor's tags) and ``cloudwatch:DeleteAlarms`` on ``alarm:<alarm prefix>shape-check-*`` only.
"""

from __future__ import annotations

from aws_cdk import ArnFormat, CustomResource, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from sagewarden import keys
from sagewarden.adapters import alarm_shapes

from .. import constants
from ..config import SupervisorConfig
from .functions import DeadLetterDestination, SupervisorFunction, SupervisorFunctions
from .nag import acknowledge, resource_finding

SHAPE_CHECK_ACTIONS = ("cloudwatch:PutMetricAlarm", "cloudwatch:TagResource", "cloudwatch:DeleteAlarms")


def shape_check_properties(config: SupervisorConfig) -> dict[str, str]:
    """The custom resource's properties: what the check judges, and its fingerprint."""
    return alarm_shapes.resource_properties(keys.alarm_prefix(config.job_prefix), config.policy_defaults_json)


class AlarmShapeCheck(Construct):
    """The check's function, its one policy and the custom resource.

    Attributes:
        function: the ``SupervisorFunction`` that runs the check.
        policy: ``iam.Policy`` with the alarm actions on the throwaway names only.
        resource: the ``CustomResource``.
        report: its ``Report`` attribute (a JSON string): the stack output ``AlarmShapes``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: SupervisorConfig,
        functions: SupervisorFunctions,
        dead_letter_queue: sqs.IQueue,
    ) -> None:
        super().__init__(scope, construct_id)
        self.function = SupervisorFunction(
            self,
            constants.SHAPE_CHECK_FUNCTION.construct_id,
            spec=constants.SHAPE_CHECK_FUNCTION,
            code=functions.code,
            layer=functions.layer,
            architecture=functions.architecture,
            environment=functions.powertools_environment,
            log_key=functions.log_key,
            reserved_concurrency=constants.SHAPE_CHECK_FUNCTION.reserved_concurrency
            if config.reserved_concurrency
            else None,
        )
        # CloudFormation invokes the function asynchronously; a second run after a function
        # error would answer a request that is already answered. A failed invocation goes to the
        # stack's dead-letter queue, as every asynchronous function's does (its alarm pages).
        self.function.function.configure_async_invoke(
            retry_attempts=0, on_failure=DeadLetterDestination(dead_letter_queue)
        )

        throwaway_arn = Stack.of(self).format_arn(
            service="cloudwatch",
            resource="alarm",
            resource_name=f"{keys.alarm_prefix(config.job_prefix)}{keys.SHAPE_CHECK_NAME_PART}*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        self.policy = iam.Policy(
            self,
            "Policy",
            statements=[
                iam.PolicyStatement(
                    sid="ThrowawayShapeCheckAlarmsOnly",
                    actions=list(SHAPE_CHECK_ACTIONS),
                    resources=[throwaway_arn],
                )
            ],
            roles=[self.function.role],
        )
        acknowledge(
            self.policy,
            "AwsSolutions-IAM5",
            "Put, tag and delete only the alarm-shape check's throwaway alarms "
            f"('{keys.alarm_prefix(config.job_prefix)}{keys.SHAPE_CHECK_NAME_PART}*'): their names carry the "
            "deploy's request id, so they cannot be listed in advance.",
            findings=[resource_finding(self, throwaway_arn)],
        )

        self.resource = CustomResource(
            self,
            "Resource",
            service_token=self.function.function.function_arn,
            resource_type=keys.SHAPE_CHECK_RESOURCE_TYPE,
            properties=shape_check_properties(config),
            service_timeout=Duration.seconds(constants.SHAPE_CHECK_SERVICE_TIMEOUT_SECONDS),
        )
        # the function must hold its permissions before CloudFormation invokes it
        self.resource.node.add_dependency(self.policy)
        self.report = self.resource.get_att_string(keys.SHAPE_CHECK_ATTR_REPORT)
