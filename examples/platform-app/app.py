#!/usr/bin/env python3
"""A platform team's own CDK app with sagewarden inside one of its stacks.

    pip install "sagewarden[infra] @ <path or URL of the sagewarden repository>"
    cdk synth        # or: python app.py

The Lambda code comes from the installed ``sagewarden`` package: no checkout of the repository is
needed next to this app.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import App, CfnOutput, Stack
from constructs import Construct

from sagewarden_cdk import SagewardenSupervisor


class TrainingPlatformStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        supervisor = SagewardenSupervisor(
            self,
            "Supervisor",
            allowed_role_arns=["arn:aws:iam::123456789012:role/training-execution"],
            job_prefix="plat",
            policy_defaults={"max_restarts": 20},
        )
        CfnOutput(self, "SagewardenApiUrl", value=supervisor.api.url)
        CfnOutput(self, "SagewardenAlertsTopic", value=supervisor.alerts.topic.topic_arn)
        # a second supervisor in the same stack, for another team's jobs: its own job prefix (its
        # heartbeat subscription takes the training log group's second filter slot; where another
        # tool holds that one, pass log_subscription=False)
        research = SagewardenSupervisor(
            self,
            "ResearchSupervisor",
            allowed_role_arns=["arn:aws:iam::123456789012:role/research-execution"],
            job_prefix="rsch",
        )
        CfnOutput(self, "ResearchApiUrl", value=research.api.url)


app = App()
TrainingPlatformStack(app, "TrainingPlatform")
app.synth()
