"""The supervisor's five Lambda functions, built by one small factory.

Every function shares one plain code asset (``<repo>/lambdas``, no bundling, no Docker), the
public Powertools layer of the pinned version (resolved at deploy time from AWS's public SSM
parameter, so synth stays offline), Python 3.12, X-Ray active tracing when the deployment asks for it (`tracing=true`; never the
heartbeat), its own role and its own log
group with a retention. The roles start with nothing but write access to their own log group
and X-Ray; everything else is granted by the supervisor composition.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import jsii
from aws_cdk import Duration, IgnoreMode, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from .. import constants
from ..asset import lambda_code_dir
from ..config import SupervisorConfig
from .nag import acknowledge


@jsii.implements(lambda_.IDestination)
class DeadLetterDestination:
    """An SQS on-failure destination that grants the function ``sqs:SendMessage`` on the queue and
    nothing more (CDK's ``SqsDestination`` also grants GetQueueAttributes and GetQueueUrl, which
    Lambda never needs to deliver a failed invocation)."""

    def __init__(self, queue: sqs.IQueue) -> None:
        self._queue = queue

    def bind(
        self, scope: Construct, fn: lambda_.IFunction, *, type: lambda_.DestinationType | None = None
    ) -> lambda_.DestinationConfig:
        fn.add_to_role_policy(
            iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[self._queue.queue_arn])
        )
        return lambda_.DestinationConfig(destination=self._queue.queue_arn)


_ARCHITECTURES = {"arm64": lambda_.Architecture.ARM_64, "x86_64": lambda_.Architecture.X86_64}


class SupervisorFunction(Construct):
    """One function with its own role and log group.

    Attributes:
        function: the ``lambda_.Function``.
        role: its execution ``iam.Role`` (no managed policies).
        log_group: its ``logs.LogGroup``.
        spec: the ``constants.FunctionSpec`` it was built from.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        spec: constants.FunctionSpec,
        code: lambda_.Code,
        layer: lambda_.ILayerVersion,
        architecture: lambda_.Architecture,
        environment: Mapping[str, str],
        log_key: kms.IKey,
        reserved_concurrency: int | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.spec = spec
        # encrypted with the stack's key: a function's log carries training log tails and errors
        self.log_group = logs.LogGroup(
            self,
            "LogGroup",
            encryption_key=log_key,
            retention=logs.RetentionDays[constants.LOG_RETENTION],
            removal_policy=RemovalPolicy.DESTROY,
        )
        # An own role instead of AWSLambdaBasicExecutionRole: that managed policy lets the
        # function write to every log group of the account; this one writes only to its own.
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"sagewarden {spec.construct_id}",
        )
        self.log_group.grant_write(self.role)
        self.function = lambda_.Function(
            self,
            "Function",
            description=spec.description,
            runtime=lambda_.Runtime.PYTHON_3_12,
            architecture=architecture,
            handler=spec.handler,
            code=code,
            layers=[layer],
            memory_size=spec.memory_mb,
            timeout=Duration.seconds(spec.timeout_seconds),
            tracing=lambda_.Tracing.ACTIVE if spec.tracing else lambda_.Tracing.DISABLED,
            role=self.role,
            log_group=self.log_group,
            environment=dict(environment),
            reserved_concurrent_executions=reserved_concurrency,
        )
        acknowledge(
            self.function,
            "AwsSolutions-L1",
            "Pinned to python3.12 on purpose: the Powertools layer parameter, the project's "
            "tooling and its tests all target 3.12; the runtime moves with them, not alone.",
        )
        if spec.tracing:
            acknowledge(
                self.role,
                "AwsSolutions-IAM5",
                "X-Ray PutTraceSegments/PutTelemetryRecords (added by active tracing) support no "
                "resource-level permissions, so they are granted on '*'.",
                findings=["Resource::*"],
            )


class SupervisorFunctions(Construct):
    """Factory and holder of the five functions.

    Attributes:
        layer: the Powertools ``ILayerVersion`` (ARN resolved from SSM at deploy time).
        layer_parameter_name: the public SSM parameter name it is resolved from.
        code: the shared ``lambda_.Code`` asset.
        architecture: the functions' ``lambda_.Architecture``.
        log_key: the ``kms.IKey`` every function's log group is encrypted with.
        powertools_environment: the Powertools settings every function gets (service name,
            metrics namespace, log level).
        api, job_state, alarm_state, sweep, heartbeat: the ``SupervisorFunction`` wrappers.
        all: the five wrappers, in that order.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: SupervisorConfig,
        environment: Mapping[str, str],
        log_key: kms.IKey,
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_key = log_key
        self.layer_parameter_name = config.powertools_layer_parameter
        # A CloudFormation parameter of type AWS::SSM::Parameter::Value<String>: resolved by
        # CloudFormation at deploy time, a token at synth time (no AWS call, no context lookup).
        layer_arn = ssm.StringParameter.value_for_string_parameter(self, self.layer_parameter_name)
        self.layer = lambda_.LayerVersion.from_layer_version_arn(self, "PowertoolsLayer", layer_arn)
        self.code = lambda_.Code.from_asset(
            str(lambda_code_dir()),
            exclude=list(constants.LAMBDA_CODE_EXCLUDE),
            ignore_mode=IgnoreMode.GLOB,
        )
        self.powertools_environment = {
            "POWERTOOLS_SERVICE_NAME": constants.powertools_service_name(config.job_prefix),
            "POWERTOOLS_METRICS_NAMESPACE": constants.POWERTOOLS_METRICS_NAMESPACE,
            "POWERTOOLS_LOG_LEVEL": constants.POWERTOOLS_LOG_LEVEL,
        }
        full_environment = {**environment, **self.powertools_environment}
        self.architecture = architecture = _ARCHITECTURES[config.architecture]

        def make(spec: constants.FunctionSpec) -> SupervisorFunction:
            # X-Ray only where the deployment asks for it (tracing=true) and the function has
            # calls worth tracing; otherwise Powertools is told so and the SDK is never imported
            traced = spec.tracing and config.tracing
            return SupervisorFunction(
                self,
                spec.construct_id,
                spec=dataclasses.replace(spec, tracing=traced),
                code=self.code,
                layer=self.layer,
                architecture=architecture,
                environment={**full_environment, "POWERTOOLS_TRACE_DISABLED": "false" if traced else "true"},
                log_key=log_key,
                reserved_concurrency=spec.reserved_concurrency if config.reserved_concurrency else None,
            )

        self.api = make(constants.API_FUNCTION)
        self.job_state = make(constants.JOB_STATE_FUNCTION)
        self.alarm_state = make(constants.ALARM_STATE_FUNCTION)
        self.sweep = make(constants.SWEEP_FUNCTION)
        self.heartbeat = make(constants.HEARTBEAT_FUNCTION)
        self.all = (self.api, self.job_state, self.alarm_state, self.sweep, self.heartbeat)
