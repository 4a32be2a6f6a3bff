"""The SageMaker adapter's requests, as botocore sends them (Stubber: moto has no Training Plans)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from sagewarden.adapters.sagemaker_launcher import SageMakerLauncher

PLAN_ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/reserved-p5"


@pytest.fixture
def sagemaker(aws: None) -> Any:
    return boto3.client("sagemaker", region_name="us-east-1")


def test_the_launcher_asks_for_a_training_plan_by_its_name_not_its_arn(sagemaker: Any) -> None:
    """A run names its plan by ARN (ResourceConfig.TrainingPlanArn); DescribeTrainingPlan's
    TrainingPlanName is documented as the plan's name (at most 64 characters)."""
    answer = {
        "TrainingPlanArn": PLAN_ARN,
        "TrainingPlanName": "reserved-p5",
        "Status": "Scheduled",
        "TotalInstanceCount": 2,
        "ReservedCapacitySummaries": [
            {
                "ReservedCapacityArn": "arn:aws:sagemaker:us-east-1:123456789012:reserved-capacity/rc-1",
                "InstanceType": "ml.p5.48xlarge",
                "TotalInstanceCount": 2,
                "Status": "Scheduled",
                "StartTime": 1_800_000_000,
                "EndTime": 1_800_036_000,
            }
        ],
    }
    with Stubber(sagemaker) as stub:
        stub.add_response("describe_training_plan", answer, {"TrainingPlanName": "reserved-p5"})
        view = SageMakerLauncher(sagemaker).describe_plan(PLAN_ARN)
        stub.assert_no_pending_responses()
    assert (view.arn, view.status, view.instance_type, view.total_count) == (
        PLAN_ARN,
        "Scheduled",
        "ml.p5.48xlarge",
        2,
    )
    assert view.windows == ((1_800_000_000_000, 1_800_036_000_000),)
