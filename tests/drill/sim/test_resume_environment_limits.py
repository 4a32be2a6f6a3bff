"""Environment values are at most 512 characters, while CheckpointConfig.S3Uri may be 1,024
(issue 17 item 9): the resume variables never make SageMaker refuse a launch, the simulated
SageMaker refuses what SageMaker refuses, and the API refuses what could not be passed on."""

from __future__ import annotations

import copy
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.exceptions import ClientError

from drill.clock import VirtualClock
from drill.scenarios.spec import default_training_job
from drill.sim.sagemaker import SimSageMaker
from sagewarden.api import validation
from sagewarden.domain.vocabulary.launch import ENV_VALUE_MAX, build_request
from sagewarden.domain.vocabulary.layouts import Checkpoint
from sagewarden.domain.vocabulary.models import Attempt, Run, RunStatus
from sagewarden.domain.vocabulary.policy import RunPolicy
from sagewarden.usecases.errors import InvalidRequest
from tests.drill.sim.builders import BUCKET, REGION, request

RUN_ID = "01KE5Q86000DNQ47GXEV9VZMPH"
LONG_PREFIX = f"s3://{BUCKET}/" + "/".join(["p" * 120] * 8) + "/"  # about 1,000 characters


def test_the_domains_limit_is_sagemakers():
    shape = (
        botocore.session.get_session().get_service_model("sagemaker").shape_for("TrainingEnvironmentValue")
    )
    assert shape.metadata["max"] == ENV_VALUE_MAX == 512
    uri = botocore.session.get_session().get_service_model("sagemaker").shape_for("S3Uri")
    assert uri.metadata["max"] == 1024


def _resumed(prefix: str, local_path: str = "/opt/ml/checkpoints") -> dict[str, Any]:
    job = default_training_job("llama", BUCKET, "arn:aws:iam::123456789012:role/r")
    job["CheckpointConfig"] = {"S3Uri": prefix, "LocalPath": local_path}
    run = Run(
        run_id=RUN_ID,
        name="llama",
        owner="me",
        request=job,
        policy=RunPolicy(),
        status=RunStatus.STARTING,
        created_ms=0,
        updated_ms=0,
        job_prefix="sw",
    )
    ckpt = Checkpoint(prefix.rstrip("/") + "/checkpoint-600/", 600, "hf", 0)
    attempt = Attempt(2, f"sw-llama-{RUN_ID}-a002", "ml.p4d.24xlarge", 2, 0, resume_from=ckpt)
    return build_request(run, attempt)["Environment"]


def test_a_resume_from_a_checkpoint_uri_over_512_characters_leaves_the_uri_out():
    env = _resumed(LONG_PREFIX)
    assert 950 < len(LONG_PREFIX) <= 1024
    assert all(len(v) <= ENV_VALUE_MAX for v in env.values())
    assert "SAGEWARDEN_RESUME_CHECKPOINT" not in env  # about 1,000 characters: SageMaker would refuse it
    assert env["SAGEWARDEN_RESUME_DIR"] == "/opt/ml/checkpoints/checkpoint-600"  # what the script loads
    assert env["SAGEWARDEN_RESUME_STEP"] == "600"


def test_a_short_checkpoint_uri_is_passed_as_before():
    env = _resumed(f"s3://{BUCKET}/llama/checkpoints/")
    assert env["SAGEWARDEN_RESUME_CHECKPOINT"] == f"s3://{BUCKET}/llama/checkpoints/checkpoint-600/"


@pytest.fixture
def sim(aws: None) -> SimSageMaker:
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=BUCKET)
    return SimSageMaker(VirtualClock(), s3_client=s3)


def test_the_simulator_refuses_an_environment_value_over_512_characters(sim: SimSageMaker):
    req = request("job-a01")
    req["Environment"] = {"SAGEWARDEN_RESUME_CHECKPOINT": "s3://" + "x" * 508}  # 513 characters
    with pytest.raises(ClientError) as err:
        sim.create_training_job(**req)
    assert err.value.response["Error"]["Code"] == "ValidationException"
    assert "Member must have length less than or equal to 512" in err.value.response["Error"]["Message"]
    assert "'environment'" in err.value.response["Error"]["Message"]

    req = request("job-a02")
    req["Environment"] = {"SAGEWARDEN_RESUME_CHECKPOINT": "s3://" + "x" * 507}  # exactly 512
    req["CheckpointConfig"]["S3Uri"] = LONG_PREFIX  # an S3Uri of about 1,000 characters is fine
    sim.create_training_job(**req)


def test_the_simulator_refuses_what_the_model_bounds_and_botocore_does_not_check(sim: SimSageMaker):
    req = request("job-a01")
    req["CheckpointConfig"]["S3Uri"] = "s3://" + "x" * 1020
    with pytest.raises(ClientError) as err:
        sim.create_training_job(**req)
    assert "'checkpointConfig.s3Uri'" in err.value.response["Error"]["Message"]
    assert "less than or equal to 1024" in err.value.response["Error"]["Message"]


def _submit_errors(job: dict[str, Any]) -> dict[str, str]:
    body = {"name": "llama", "training_job": job}
    try:
        validation.validate_submit(
            body,
            allowed_roles=frozenset({job["RoleArn"]}),
            job_prefix="sw",
            policy_defaults=RunPolicy(),
        )
    except InvalidRequest as exc:
        return {e.field: e.message for e in exc.errors}
    return {}


@pytest.mark.claim(
    "`training_job.ResourceConfig.InstanceCount` above 10,000 (every integer of the model is also bounded by its type: SageMaker's `integer` is 32-bit), a `CheckpointConfig.S3Uri` more than 20 folders deep, and a `CheckpointConfig.LocalPath` over 256 characters"
)
def test_the_api_refuses_what_could_not_reach_the_training_script():
    role = "arn:aws:iam::123456789012:role/r"
    job = default_training_job("llama", BUCKET, role)
    assert _submit_errors(copy.deepcopy(job)) == {}
    too_long = copy.deepcopy(job)
    too_long["Environment"] = {"TOKENIZER_CONFIG": "x" * 513}
    assert "at most 512 characters" in _submit_errors(too_long)["training_job.Environment.TOKENIZER_CONFIG"]
    deep = copy.deepcopy(job)
    deep["CheckpointConfig"]["LocalPath"] = "/mnt/" + "d" * 300
    assert "at most 256 characters" in _submit_errors(deep)["training_job.CheckpointConfig.LocalPath"]
    long_prefix = copy.deepcopy(job)
    long_prefix["CheckpointConfig"]["S3Uri"] = LONG_PREFIX  # the S3 URI itself may be 1,024
    assert _submit_errors(long_prefix) == {}
