"""training_job checked to full depth against SageMaker's service model, plus sagewarden's own rules."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest

from sagewarden.api import sagemaker_model, validation
from sagewarden.domain.vocabulary.launch import build_request
from sagewarden.domain.vocabulary.models import Attempt, Run, RunStatus
from sagewarden.domain.vocabulary.policy import RunPolicy
from sagewarden.usecases.errors import InvalidRequest, RequestTooLarge
from tests.builders import training_job
from tests.doc_pages import documentation

ROLE = "arn:aws:iam::123456789012:role/SageMakerTrainingRole"


def _job(**changes):
    job = training_job("llama", "bucket", ROLE)
    job.update(changes)
    return job


def _submit(job=None, policy=None, name="llama"):
    body = {"name": name, "training_job": job if job is not None else _job()}
    if policy is not None:
        body["policy"] = policy
    return validation.validate_submit(
        body, allowed_roles=frozenset({ROLE}), job_prefix="sw", policy_defaults=RunPolicy()
    )


def _errors(job=None, policy=None) -> dict[str, str]:
    with pytest.raises(InvalidRequest) as caught:
        _submit(job, policy)
    return {e.field: e.message for e in caught.value.errors}


def test_validation_default_job_is_accepted():
    req = _submit()
    assert req.training_job["ResourceConfig"]["InstanceType"] == "ml.p4d.24xlarge"


@pytest.mark.claim(
    "Every problem is reported at once (up to 50), each with the full path of the offending value"
)
@pytest.mark.claim(
    "checked **to its full depth against SageMaker's own service model** (the one botocore ships in the Lambda runtime): unknown keys (with a did-you-mean), wrong types, missing required members, string lengths, numeric ranges, enum values (instance types, input modes …), list and map sizes, and string patterns"
)
@pytest.mark.claim(
    "Then sagewarden's own rules: a `RoleArn` in `allowedRoleArns`, a `CheckpointConfig.S3Uri` (no checkpoints means nothing to resume from), no `TrainingJobName` (sagewarden names attempts itself), no `SAGEWARDEN_*` environment variables, no `InstanceGroups`, MaxRuntime at most 28 days (longer runs are chained)"
)
@pytest.mark.claim("room for the 3 tags and 5 environment variables sagewarden adds to every attempt")
@pytest.mark.claim(
    "`training_job.ResourceConfig.InstanceCount` above 10,000 (every integer of the model is also bounded by its type: SageMaker's `integer` is 32-bit), a `CheckpointConfig.S3Uri` more than 20 folders deep, and a `CheckpointConfig.LocalPath` over 256 characters"
)
@pytest.mark.claim(
    "an instance type newer than that model is refused until the runtime (or a bundled botocore) knows it"
)
@pytest.mark.parametrize(
    ("mutate", "field", "says"),
    [
        (lambda j: j["ResourceConfig"].update(InstanceCont=2), "training_job.ResourceConfig.InstanceCont", "did you mean InstanceCount?"),
        (lambda j: j.update(hyperParameters={}), "training_job.hyperParameters", "did you mean HyperParameters?"),
        (lambda j: j["ResourceConfig"].update(InstanceCount="2"), "training_job.ResourceConfig.InstanceCount", "must be an integer"),
        (lambda j: j["ResourceConfig"].update(InstanceCount=2.0), "training_job.ResourceConfig.InstanceCount", "must be an integer"),
        (lambda j: j["ResourceConfig"].update(InstanceCount=True), "training_job.ResourceConfig.InstanceCount", "must be an integer"),
        (lambda j: j["ResourceConfig"].update(KeepAlivePeriodInSeconds=99_999), "training_job.ResourceConfig.KeepAlivePeriodInSeconds", "from 0 to 21600"),
        (lambda j: j["ResourceConfig"].update(InstanceType="ml.p4d.24xl"), "training_job.ResourceConfig.InstanceType", "did you mean ml.p4d.24xlarge?"),
        (lambda j: j["AlgorithmSpecification"].update(TrainingInputMode="Fast"), "training_job.AlgorithmSpecification.TrainingInputMode", "must be one of Pipe, File, FastFile"),
        (lambda j: j["AlgorithmSpecification"].pop("TrainingInputMode"), "training_job.AlgorithmSpecification.TrainingInputMode", "required"),
        (lambda j: j.update(EnableNetworkIsolation="true"), "training_job.EnableNetworkIsolation", "must be true or false"),
        (lambda j: j.update(VpcConfig=None), "training_job.VpcConfig", "must not be null"),
        (lambda j: j.update(VpcConfig=[]), "training_job.VpcConfig", "must be an object"),
        (lambda j: j.update(HyperParameters={"lr": "x" * 2501}), "training_job.HyperParameters.lr", "at most 2500 characters"),
        (lambda j: j.update(HyperParameters={"lr": 0.1}), "training_job.HyperParameters.lr", "must be a string"),
        (lambda j: j.update(HyperParameters={f"k{i}": "1" for i in range(101)}), "training_job.HyperParameters", "at most 100 entries"),
        (lambda j: j.update(Environment={"1BAD": "x"}), "training_job.Environment.1BAD", "key must match"),
        (lambda j: j.update(Tags=[{"Key": "team"}]), "training_job.Tags[0].Value", "required"),
        (lambda j: j.update(Tags=[{"Key": "a", "Value": "b"}] * 51), "training_job.Tags", "at most 50 items"),
        (lambda j: j.update(InputDataConfig=[]), "training_job.InputDataConfig", "at least 1 items"),
        (
            lambda j: j.update(InputDataConfig=[{"ChannelName": "train", "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "ftp://x"}}}]),
            "training_job.InputDataConfig[0].DataSource.S3DataSource.S3Uri",
            "must match",
        ),
        (
            lambda j: j.update(InputDataConfig=[{"ChannelName": "bad name!", "DataSource": {}}]),
            "training_job.InputDataConfig[0].ChannelName",
            "must match",
        ),
        (lambda j: j.update(RoleArn="not-an-arn-at-all-but-long"), "training_job.RoleArn", "must match"),
        (lambda j: j["StoppingCondition"].update(MaxRuntimeInSeconds=0), "training_job.StoppingCondition.MaxRuntimeInSeconds", "at least 1"),
        (lambda j: j.update(TrainingJobName="mine"), "training_job.TrainingJobName", "sagewarden names every attempt"),
        (lambda j: j["ResourceConfig"].update(InstanceGroups=[]), "training_job.ResourceConfig.InstanceGroups", "not supported"),
        (lambda j: j.update(Tags=[{"Key": f"k{i}", "Value": "v"} for i in range(48)]), "training_job.Tags", "at most 47 tags"),
        # issue 16 item 11: SageMaker's InstanceCount is a 32-bit integer; sagewarden bounds it lower
        (lambda j: j["ResourceConfig"].update(InstanceCount=10**30), "training_job.ResourceConfig.InstanceCount", "at most 2147483647 (a 32-bit integer)"),
        (lambda j: j["ResourceConfig"].update(InstanceCount=2**31), "training_job.ResourceConfig.InstanceCount", "at most 2147483647 (a 32-bit integer)"),
        (lambda j: j["ResourceConfig"].update(InstanceCount=10_001), "training_job.ResourceConfig.InstanceCount", "from 1 to 10,000"),
        (lambda j: j["ResourceConfig"].update(VolumeSizeInGB=2**31), "training_job.ResourceConfig.VolumeSizeInGB", "at most 2147483647 (a 32-bit integer)"),
    ],
    ids=[
        "a misspelt key",
        "a key in the wrong case",
        "an instance count as a string",
        "an instance count as a float",
        "an instance count as a bool",
        "a keep-alive over six hours",
        "a misspelt instance type",
        "an unknown input mode",
        "a missing input mode",
        "network isolation as a string",
        "a null vpc config",
        "a vpc config that is a list",
        "a hyperparameter value too long",
        "a hyperparameter value that is a number",
        "too many hyperparameters",
        "an environment key starting with a digit",
        "a tag without a value",
        "too many tags for sagemaker",
        "no input channel",
        "an input uri that is not s3",
        "a channel name with a space",
        "a role that is not an arn",
        "a zero max runtime",
        "a job name of its own",
        "instance groups",
        "too many tags with the supervisor's own",
        "an instance count of 10 to the 30",
        "an instance count over 32 bits",
        "an instance count over ten thousand",
        "a volume size over 32 bits",
    ],
)  # fmt: skip
def test_validation_training_job_problem_is_reported_with_its_full_path(mutate, field, says):
    job = copy.deepcopy(_job())
    mutate(job)
    errors = _errors(job)
    assert field in errors, errors
    assert says in errors[field], errors[field]


@pytest.mark.claim(
    "`training_job.ResourceConfig.InstanceCount` above 10,000 (every integer of the model is also bounded by its type: SageMaker's `integer` is 32-bit), a `CheckpointConfig.S3Uri` more than 20 folders deep, and a `CheckpointConfig.LocalPath` over 256 characters"
)
def test_validation_checkpoint_prefix_at_most_20_folders_deep():
    """Each folder above a run's checkpoint prefix is claimed in the run's transaction (no live run
    may write inside another's prefix): the depth is bounded so the claims fit one transaction."""
    deep = "s3://bucket/" + "/".join(f"d{i}" for i in range(20)) + "/"
    job = _job()
    job["CheckpointConfig"]["S3Uri"] = deep
    assert _submit(job).training_job["CheckpointConfig"]["S3Uri"] == deep
    job["CheckpointConfig"]["S3Uri"] = deep + "one-more/"
    assert "at most 20 folders deep" in _errors(job)["training_job.CheckpointConfig.S3Uri"]


@pytest.mark.claim(
    "`training_job.ResourceConfig.InstanceCount` above 10,000 (every integer of the model is also bounded by its type: SageMaker's `integer` is 32-bit), a `CheckpointConfig.S3Uri` more than 20 folders deep, and a `CheckpointConfig.LocalPath` over 256 characters"
)
def test_validation_instance_count_at_the_bound_is_accepted():
    job = _job()
    job["ResourceConfig"]["InstanceCount"] = 10_000
    assert _submit(job).training_job["ResourceConfig"]["InstanceCount"] == 10_000


def test_validation_reports_every_problem_of_a_job_at_once():
    job = _job(Bogus=1, EnableNetworkIsolation=3)
    job["ResourceConfig"]["InstanceCount"] = "two"
    job["CheckpointConfig"]["LocalPath"] = 5
    errors = _errors(job)
    assert {
        "training_job.Bogus",
        "training_job.EnableNetworkIsolation",
        "training_job.ResourceConfig.InstanceCount",
        "training_job.CheckpointConfig.LocalPath",
    } <= set(errors)


@pytest.mark.claim(
    "Every problem is reported at once (up to 50), each with the full path of the offending value"
)
def test_validation_problems_are_capped_and_the_rest_counted():
    job = _job(**{f"Bogus{i}": 1 for i in range(500)})
    with pytest.raises(InvalidRequest) as caught:
        _submit(job)
    assert len(caught.value.errors) == 50
    assert "more problems not listed" in caught.value.errors[-1].message


@pytest.mark.claim(
    "checked **to its full depth against SageMaker's own service model** (the one botocore ships in the Lambda runtime): unknown keys (with a did-you-mean), wrong types, missing required members, string lengths, numeric ranges, enum values (instance types, input modes …), list and map sizes, and string patterns"
)
def test_validation_walk_depth_is_bounded(monkeypatch):
    monkeypatch.setattr(sagemaker_model, "MAX_WALK_DEPTH", 2)
    job = _job(InputDataConfig=[{"ChannelName": "t", "DataSource": {"S3DataSource": {}}}])
    problems = sagemaker_model.training_job_problems(job)
    assert any("nested deeper than 2 levels" in p.message for p in problems), problems


@pytest.mark.claim(
    "`policy`: unknown fields, types, the ranges in the table below, a `progress_metric` that is not the `Name` of one of `AlgorithmSpecification.MetricDefinitions`, fallback instance types SageMaker does not know, and environment defaults that SageMaker would refuse"
)
@pytest.mark.claim(
    "`[{instance_type, instance_count}]`, tried in order on capacity errors; each type must be one SageMaker knows"
)
@pytest.mark.parametrize(
    ("policy", "field", "says"),
    [
        ({"instance_fallbacks": [{"instance_type": "ml.p9.huge", "instance_count": 1}]}, "policy.instance_fallbacks[0].instance_type", "not a valid TrainingInstanceType"),
        ({"environment_defaults": {"bad-name": "1"}}, "policy.environment_defaults.bad-name", "key must match"),
        ({"environment_defaults": {"SAGEWARDEN_X": "1"}}, "policy.environment_defaults", "set by the supervisor"),
        ({"environment_defaults": {f"D{i}": "1" for i in range(50)}}, "training_job.Environment", "SageMaker allows 100"),
        ({"progress_metric": "train:throughput"}, "policy.progress_metric", "none defined"),
    ],
    ids=[
        "a fallback instance type that does not exist",
        "an environment default with a bad key",
        "an environment default the supervisor sets",
        "environment defaults pushing the job over its limit",
        "a progress metric the job does not define",
    ],
)  # fmt: skip
def test_validation_policy_is_checked_against_the_job_and_the_model(policy, field, says):
    job = _job(Environment={f"E{i}": "1" for i in range(48)})
    errors = _errors(job, policy)
    assert field in errors, errors
    assert says in errors[field], errors[field]


@pytest.mark.claim(
    "`policy`: unknown fields, types, the ranges in the table below, a `progress_metric` that is not the `Name` of one of `AlgorithmSpecification.MetricDefinitions`, fallback instance types SageMaker does not know, and environment defaults that SageMaker would refuse"
)
def test_validation_progress_metric_must_be_one_of_the_metric_definitions():
    job = _job()
    job["AlgorithmSpecification"]["MetricDefinitions"] = [{"Name": "train:loss", "Regex": "loss=(\\S+)"}]
    errors = _errors(job, {"progress_metric": "train:los"})
    assert (
        "train:loss" in errors["policy.progress_metric"]
        and "did you mean" in errors["policy.progress_metric"]
    )
    assert _submit(job, {"progress_metric": "train:loss"}).policy.progress_metric == "train:loss"


@pytest.mark.claim("room for the 3 tags and 5 environment variables sagewarden adds to every attempt")
def test_validation_supervisor_additions_match_what_launch_adds():
    run = Run(
        run_id="01KE5Q86000DNQ47GXEV9VZMPH",
        name="llama",
        owner="me",
        request=_job(Tags=[], Environment={}),
        policy=RunPolicy(),
        status=RunStatus.STARTING,
        created_ms=0,
        updated_ms=0,
        job_prefix="sw",
    )
    req = build_request(run, Attempt(1, "sw-llama-01KE5Q86000DNQ47GXEV9VZMPH-a001", "ml.p4d.24xlarge", 2, 0))
    assert len(req["Tags"]) == validation.SUPERVISOR_TAGS
    assert len(req["Environment"]) == validation.SUPERVISOR_ENV_VARS
    assert sagemaker_model.training_job_problems({**req, "TrainingJobName": "x"}) == []


@pytest.mark.claim("a run whose stored form would exceed 350,000 bytes (413)")
@pytest.mark.claim(
    "The API's JSON parser rejects deep nesting, huge integers, non-finite numbers, lone surrogates and forged cursors with a 400 naming the field (413 for size); the stored item is checked against DynamoDB's size as stored before anything is written."
)
def test_validation_stored_size_over_the_limit_is_413(monkeypatch):
    size = validation.stored_request_bytes("llama", _job(), RunPolicy())
    monkeypatch.setattr(validation, "MAX_STORED_REQUEST_BYTES", size - 1)
    with pytest.raises(RequestTooLarge) as caught:
        _submit()
    assert caught.value.status == 413 and caught.value.errors[0].field == "body"
    monkeypatch.setattr(validation, "MAX_STORED_REQUEST_BYTES", size + 200)
    assert _submit().name == "llama"


@pytest.mark.claim("Text is stored as UTF-8, so 250 KB of non-ASCII hyperparameters stay 250 KB")
def test_validation_stored_size_counts_utf8_bytes_not_escapes():
    job = _job(HyperParameters={"text": "é" * 2000})
    size = validation.stored_request_bytes("llama", job, RunPolicy())
    base = validation.stored_request_bytes("llama", _job(HyperParameters={"text": ""}), RunPolicy())
    assert size - base == 4000  # two UTF-8 bytes per character, not six for a \\u00e9 escape


def test_validation_model_is_loaded_once_lazily_and_domain_never_imports_botocore():
    code = (
        "import sys; sys.path.insert(0, 'lambdas')\n"
        "import sagewarden.domain.vocabulary.policy, sagewarden.domain.decide, sagewarden.domain.vocabulary.launch\n"
        "assert 'botocore' not in sys.modules, 'the domain imported botocore'\n"
        "import sagewarden.handlers.api\n"
        "from sagewarden.api import sagemaker_model as m\n"
        "assert m.model.cache_info().currsize == 0, 'model loaded at import'\n"
        "m.model(); m.model()\n"
        "assert m.model.cache_info().misses == 1 and m.model.cache_info().hits == 1\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_validation_readme_example_body_is_accepted():

    readme = documentation()
    start = readme.index("Example body:\n\n```json\n") + len("Example body:\n\n```json\n")
    import json

    body = json.loads(readme[start : readme.index("```", start)])
    role = body["training_job"]["RoleArn"]
    req = validation.validate_submit(
        body, allowed_roles=frozenset({role}), job_prefix="sw", policy_defaults=RunPolicy()
    )
    assert req.name == body["name"]


@pytest.mark.claim(
    "checked **to its full depth against SageMaker's own service model** (the one botocore ships in the Lambda runtime): unknown keys (with a did-you-mean), wrong types, missing required members, string lengths, numeric ranges, enum values (instance types, input modes …), list and map sizes, and string patterns"
)
def test_validation_empty_and_misspelled_keys_are_named():
    body = {"name": "llama", "training_job": _job(), "": 1, "polcy": {}}
    with pytest.raises(InvalidRequest) as caught:
        validation.validate_submit(
            body, allowed_roles=frozenset({ROLE}), job_prefix="sw", policy_defaults=RunPolicy()
        )
    errors = {e.field: e.message for e in caught.value.errors}
    assert errors['""'] == "unknown field"  # found by the fuzzer: it was reported with an empty field
    assert errors["polcy"] == "unknown field; did you mean policy?"
    assert all(e.field for e in caught.value.errors)
    assert "did you mean max_restarts?" in _errors(None, {"max_restart": 3})["policy.max_restart"]
