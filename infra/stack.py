"""The deployable stack: a thin shell around the ``Supervisor`` construct, plus outputs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from aws_cdk import App, CfnOutput, Stack, Validations
from cdk_nag import AwsSolutionsChecks
from constructs import Construct

from . import REPO_ROOT, constants
from .config import SupervisorConfig
from .constructs.supervisor import Supervisor


class SagewardenStack(Stack):
    """One deployment. Several can share an account and region when their stack names and job
    prefixes differ (the preflight refuses a prefix another stack already uses).

    Attributes:
        supervisor: the ``Supervisor`` construct (all resources live under it).
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, config: SupervisorConfig, **kwargs: Any
    ) -> None:
        kwargs.setdefault("description", constants.STACK_DESCRIPTION)
        kwargs.setdefault("analytics_reporting", False)
        super().__init__(scope, construct_id, **kwargs)
        self.supervisor = Supervisor(self, constants.SUPERVISOR_ID, config=config)

        CfnOutput(
            self, constants.OUTPUT_API_URL, value=self.supervisor.api.url, description="REST API base URL"
        )
        CfnOutput(
            self,
            constants.OUTPUT_TABLE_NAME,
            value=self.supervisor.state.table.table_name,
            description="DynamoDB state table",
        )
        CfnOutput(
            self,
            constants.OUTPUT_TOPIC_ARN,
            value=self.supervisor.alerts.topic.topic_arn,
            description="SNS alert topic (subscribe to it for run alerts)",
        )
        CfnOutput(
            self,
            constants.OUTPUT_DLQ_URL,
            value=self.supervisor.event_rules.dead_letter_queue.queue_url,
            description="Dead-letter queue of undeliverable events and failed async invocations",
        )
        CfnOutput(
            self,
            constants.OUTPUT_JOB_PREFIX,
            value=config.job_prefix,
            description="Prefix of this deployment's training jobs (<prefix>-*) and hang alarms",
        )
        CfnOutput(
            self,
            constants.OUTPUT_ALARM_SHAPES,
            value=self.supervisor.alarm_shape_check.report,
            description="What CloudWatch made of every hang-alarm shape at the last deploy that changed "
            "them (JSON; `sagewarden selftest` prints it)",
        )


def cdk_json_context() -> dict[str, Any]:
    """The ``context`` block of the repository's ``cdk.json`` (defaults of every deployment).

    The CDK CLI passes it to the app itself; reading it here as well makes ``python app.py``
    (no CLI) synthesize exactly what ``cdk synth`` does. CLI values still win: CDK applies the
    CLI's context after the defaults given to ``App(context=...)``.
    """
    path = REPO_ROOT / "cdk.json"
    if not path.exists():
        return {}
    context = json.loads(path.read_text(encoding="utf-8")).get("context", {})
    return dict(context)


def build_app(
    *,
    context: Mapping[str, Any] | None = None,
    outdir: str | None = None,
    nag: bool = True,
) -> tuple[App, SagewardenStack]:
    """An ``App`` holding the sagewarden stack (and, by default, the cdk-nag AwsSolutions pack).

    ``context`` overrides the ``cdk.json`` defaults. Nothing here calls AWS.
    """
    app = App(context={**cdk_json_context(), **(context or {})}, outdir=outdir)
    config = SupervisorConfig.from_context(app.node.try_get_context)
    stack = SagewardenStack(app, config.stack_name, config=config)
    if nag:
        # cdk-nag 3 is a policy-validation plugin: unacknowledged findings (errors and warnings)
        # fail `app.synth()` and are written to <outdir>/validation-report.json.
        Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stack
