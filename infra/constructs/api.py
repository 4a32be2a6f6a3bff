"""The IAM-authenticated REST API through which teams submit, inspect and cancel runs.

Routes (all ``AWS_IAM``, all proxied to the API function)::

    POST /runs                  submit a run
    GET  /runs                  list runs
    GET  /runs/{id}             one run
    GET  /runs/{id}/events      its audit trail
    POST /runs/{id}/cancel      cancel it
    POST /runs/{id}/resume      resume a FAILED or CANCELLED run

The resource tree is plain ``AWS::ApiGateway::Resource``/``Method`` resources (no OpenAPI
body), so tools such as the local drill can rebuild the routes from the synthesized template.
"""

from __future__ import annotations

import json

from aws_cdk import RemovalPolicy
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from .. import constants
from .nag import acknowledge

# (method, path) of every route, in the order they are created.
ROUTES = (
    ("POST", "/runs"),
    ("GET", "/runs"),
    ("GET", "/runs/{id}"),
    ("GET", "/runs/{id}/events"),
    ("POST", "/runs/{id}/cancel"),
    ("POST", "/runs/{id}/resume"),
)

_ACCESS_LOG_FORMAT = {
    "requestId": "$context.requestId",
    "extendedRequestId": "$context.extendedRequestId",
    "requestTime": "$context.requestTime",
    "httpMethod": "$context.httpMethod",
    "resourcePath": "$context.resourcePath",
    "path": "$context.path",
    "status": "$context.status",
    "responseLength": "$context.responseLength",
    "ip": "$context.identity.sourceIp",
    "userAgent": "$context.identity.userAgent",
    "caller": "$context.identity.caller",
    "userArn": "$context.identity.userArn",
    "accountId": "$context.identity.accountId",
    "integrationStatus": "$context.integration.status",
    "integrationLatency": "$context.integration.latency",
    "errorMessage": "$context.error.message",
    "xrayTraceId": "$context.xrayTraceId",
}


class SupervisorApi(Construct):
    """Regional REST API with IAM auth, request validation, access and execution logging.

    Attributes:
        rest_api: the ``apigw.RestApi``.
        access_log_group: the stage's access ``logs.LogGroup`` (``None`` with logging off).
        methods: ``{(http_method, path): apigw.Method}`` for every route.
        url: the invoke URL of the deployed stage.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        handler: lambda_.IFunction,
        account_cloud_watch_role: bool = False,
        logging: bool = True,
        tracing: bool = False,
        log_key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, construct_id)

        self.access_log_group: logs.LogGroup | None = None
        access_log_destination: apigw.IAccessLogDestination | None = None
        if logging:
            self.access_log_group = logs.LogGroup(
                self,
                "AccessLogs",
                encryption_key=log_key,
                retention=logs.RetentionDays[constants.LOG_RETENTION],
                removal_policy=RemovalPolicy.DESTROY,
            )
            access_log_destination = apigw.LogGroupLogDestination(self.access_log_group)
        self.rest_api = apigw.RestApi(
            self,
            "RestApi",
            description="sagewarden: submit and supervise SageMaker training runs",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            # Access and execution logging need the region's account-level API Gateway CloudWatch
            # Logs role. Setting it (AWS::ApiGateway::Account) changes a setting every REST API of
            # the account and region shares, and it outlives this stack: opt-in only
            # (apiGatewayAccountRole=true). Otherwise the role must already be set in the region
            # (the deploy preflight checks) or logging is turned off (apiLogging=false).
            cloud_watch_role=account_cloud_watch_role,
            cloud_watch_role_removal_policy=RemovalPolicy.RETAIN if account_cloud_watch_role else None,
            default_method_options=apigw.MethodOptions(authorization_type=apigw.AuthorizationType.IAM),
            deploy_options=apigw.StageOptions(
                stage_name=constants.API_STAGE_NAME,
                access_log_destination=access_log_destination,
                access_log_format=(
                    apigw.AccessLogFormat.custom(json.dumps(_ACCESS_LOG_FORMAT)) if logging else None
                ),
                logging_level=apigw.MethodLoggingLevel.INFO if logging else apigw.MethodLoggingLevel.OFF,
                data_trace_enabled=False,  # never log full request/response bodies
                metrics_enabled=True,
                tracing_enabled=tracing,
                throttling_rate_limit=constants.API_THROTTLE_RATE_LIMIT,
                throttling_burst_limit=constants.API_THROTTLE_BURST_LIMIT,
            ),
        )
        # RestApi adds an `Endpoint` output of its own; the stack's `ApiUrl` output is the one.
        self.rest_api.node.try_remove_child("Endpoint")
        self.url = self.rest_api.url

        body_validator = self.rest_api.add_request_validator(
            "BodyAndParameters", validate_request_body=True, validate_request_parameters=True
        )
        parameter_validator = self.rest_api.add_request_validator(
            "ParametersOnly", validate_request_body=False, validate_request_parameters=True
        )
        # A light gate in front of the function (which validates the body fully with pydantic):
        # the submission must be a JSON object.
        run_request_model = self.rest_api.add_model(
            "SubmitRunRequest",
            content_type="application/json",
            model_name="SubmitRunRequest",
            schema=apigw.JsonSchema(
                schema=apigw.JsonSchemaVersion.DRAFT4,
                title="SubmitRunRequest",
                type=apigw.JsonSchemaType.OBJECT,
            ),
        )
        integration = apigw.LambdaIntegration(handler, proxy=True, allow_test_invoke=False)
        id_parameter = {f"method.request.path.{constants.RUN_ID_PATH_PARAMETER}": True}

        runs = self.rest_api.root.add_resource("runs")
        run = runs.add_resource("{" + constants.RUN_ID_PATH_PARAMETER + "}")
        events = run.add_resource("events")
        cancel = run.add_resource("cancel")
        resume = run.add_resource("resume")

        self.methods: dict[tuple[str, str], apigw.Method] = {
            ("POST", "/runs"): runs.add_method(
                "POST",
                integration,
                request_validator=body_validator,
                request_models={"application/json": run_request_model},
            ),
            ("GET", "/runs"): runs.add_method("GET", integration, request_validator=parameter_validator),
            ("GET", "/runs/{id}"): run.add_method(
                "GET", integration, request_validator=parameter_validator, request_parameters=id_parameter
            ),
            ("GET", "/runs/{id}/events"): events.add_method(
                "GET", integration, request_validator=parameter_validator, request_parameters=id_parameter
            ),
            # The cancel body (an optional reason) is optional, so only the path is validated.
            ("POST", "/runs/{id}/cancel"): cancel.add_method(
                "POST", integration, request_validator=parameter_validator, request_parameters=id_parameter
            ),
            ("POST", "/runs/{id}/resume"): resume.add_method(
                "POST", integration, request_validator=parameter_validator, request_parameters=id_parameter
            ),
        }

        if account_cloud_watch_role:
            # The account-level CloudWatch role that `cloud_watch_role=True` adds under the API.
            cloud_watch_role = self.rest_api.node.try_find_child("CloudWatchRole") or self.rest_api
            acknowledge(
                cloud_watch_role,
                "AwsSolutions-IAM4",
                "The account-wide API Gateway CloudWatch role (AWS::ApiGateway::Account) serves every "
                "REST API of the account and region, so it must keep AWS's managed push-to-logs policy; "
                "a policy scoped to this API would break other APIs' execution logging.",
                findings=[
                    "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                    "AmazonAPIGatewayPushToCloudWatchLogs"
                ],
            )
        if not logging:
            acknowledge(
                self.rest_api.deployment_stage,
                "AwsSolutions-APIG1",
                "apiLogging=false, chosen by the deployer because the region has no API Gateway "
                "CloudWatch Logs role and the account setting must not change; the API function logs "
                "every request it serves (caller identity and outcome) in its own log group.",
            )
            acknowledge(
                self.rest_api.deployment_stage,
                "AwsSolutions-APIG6",
                "apiLogging=false (see AwsSolutions-APIG1): no execution logging; the API function "
                "logs every request it serves.",
            )
        acknowledge(
            self.rest_api.deployment_stage,
            "AwsSolutions-APIG3",
            "IAM-authorised API for a handful of in-account callers (SigV4, throttled stage); a WAF "
            "web ACL would add cost without blocking anything IAM does not already reject.",
        )
        for method in self.methods.values():
            acknowledge(
                method,
                "AwsSolutions-COG4",
                "Callers are IAM principals of the account (AWS_IAM authorisation on every method); "
                "there are no end users, so no Cognito user pool.",
            )
