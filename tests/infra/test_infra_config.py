"""SupervisorConfig: parsing CDK context (lists, JSON strings, CLI strings) and validation."""

from __future__ import annotations

import dataclasses
import json

import pytest

from infra import REPO_ROOT, constants
from infra.config import ConfigError, SupervisorConfig
from sagewarden import keys

ROLE_A = "arn:aws:iam::123456789012:role/TrainA"
ROLE_B = "arn:aws:iam::123456789012:role/ml/TrainB"


@pytest.mark.claim(
    "Off by default: Powertools' Tracer imports the X-Ray SDK, about 0.35 s of every cold start; without it the handlers never import the SDK."
)
@pytest.mark.claim("Lambda architecture (`arm64` or `x86_64`)")
def test_config_defaults_match_cdk_json_context() -> None:
    context = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]

    from_cdk_json = SupervisorConfig.from_mapping(context)

    assert from_cdk_json == SupervisorConfig()
    assert from_cdk_json.job_prefix == keys.DEFAULT_JOB_PREFIX
    assert from_cdk_json.alert_email is None  # "" in cdk.json means "no e-mail"
    assert from_cdk_json.allowed_role_arns == ()
    assert from_cdk_json.checkpoint_buckets == ()
    assert from_cdk_json.log_subscription is True
    assert from_cdk_json.powertools_version == "3.37.0"
    assert from_cdk_json.architecture == "arm64"


@pytest.mark.claim(
    "SageMaker execution roles runs may use. The only roles `iam:PassRole` is granted on. **Empty means every run is rejected.** JSON list or comma-separated."
)
@pytest.mark.parametrize(
    "raw",
    [
        [ROLE_A, ROLE_B],
        json.dumps([ROLE_A, ROLE_B]),
        f"{ROLE_A},{ROLE_B}",
        f" {ROLE_A} , {ROLE_B} ,",
    ],
    ids=["list", "json-string", "comma-separated", "comma-separated-with-spaces"],
)
def test_config_allowed_role_arns_accept_list_json_and_comma_separated(raw: object) -> None:
    config = SupervisorConfig.from_mapping({"allowedRoleArns": raw})

    assert config.allowed_role_arns == (ROLE_A, ROLE_B)
    assert json.loads(config.allowed_role_arns_json) == [ROLE_A, ROLE_B]


@pytest.mark.parametrize(
    "raw", ["", "[]", []], ids=["an empty string", "an empty json list", "an empty list"]
)
def test_config_allowed_role_arns_empty_values_mean_none(raw: object) -> None:
    assert SupervisorConfig.from_mapping({"allowedRoleArns": raw}).allowed_role_arns == ()


@pytest.mark.parametrize(
    "bad",
    [
        "arn:aws:iam::123456789012:user/alice",
        "arn:aws:iam::12345:role/Short",
        "arn:aws:iam::123456789012:role/*",
        "arn:aws:s3:::bucket",
        "TrainRole",
    ],
)
def test_config_rejects_a_value_that_is_not_a_role_arn(bad: str) -> None:
    with pytest.raises(ConfigError, match="allowedRoleArns"):
        SupervisorConfig.from_mapping({"allowedRoleArns": [bad]})


def test_config_rejects_invalid_json_role_list() -> None:
    with pytest.raises(ConfigError, match="invalid JSON"):
        SupervisorConfig.from_mapping({"allowedRoleArns": '["arn:aws:iam::123456789012:role/A"'})


def test_config_accepts_other_partitions_role_arn() -> None:
    arn = "arn:aws-cn:iam::123456789012:role/Train"
    assert SupervisorConfig.from_mapping({"allowedRoleArns": arn}).allowed_role_arns == (arn,)


@pytest.mark.claim("prefix of every job name (1-8 of `a-z0-9`)")
@pytest.mark.parametrize("bad", ["UPPER", "toolong99", "a-b", "a_b", "x y"])
def test_config_rejects_bad_job_prefix(bad: str) -> None:
    with pytest.raises(ConfigError, match="jobPrefix"):
        SupervisorConfig.from_mapping({"jobPrefix": bad})


@pytest.mark.claim("prefix of every job name (1-8 of `a-z0-9`)")
@pytest.mark.parametrize(
    "good",
    ["a", "sw", "team01", "12345678"],
    ids=["one letter", "two letters", "letters and digits", "eight digits"],
)
def test_config_accepts_job_prefix_of_one_to_eight_lowercase_alphanumerics(good: str) -> None:
    assert SupervisorConfig.from_mapping({"jobPrefix": good}).job_prefix == good


@pytest.mark.claim(
    "the CloudFormation stack (at most 25 characters: letters, digits, hyphens). The CLI finds its API by it (`--stack`)."
)
@pytest.mark.parametrize(
    "good",
    ["Sagewarden", "Sagewarden-team2", "S", "SagewardenTeamB-eu-west-1"],
    ids=["the default", "with a dash and a digit", "one letter", "with a region in it"],
)
def test_config_stack_name_is_settable(good: str) -> None:
    assert SupervisorConfig.from_mapping({"stackName": good}).stack_name == good
    assert SupervisorConfig().stack_name == constants.STACK_ID


@pytest.mark.claim(
    "the CloudFormation stack (at most 25 characters: letters, digits, hyphens). The CLI finds its API by it (`--stack`)."
)
@pytest.mark.parametrize(
    "bad", ["2sagewarden", "-sw", "Sage_warden", "Sage warden", "SagewardenTeamB-eu-west-1x"]
)
def test_config_rejects_a_stack_name_cloudformation_or_the_role_names_would_not_keep(bad: str) -> None:
    with pytest.raises(ConfigError, match="stackName"):
        SupervisorConfig.from_mapping({"stackName": bad})


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(True, True), (False, False), ("false", False), ("False", False), ("0", False), ("true", True)],
    ids=[
        "a json true",
        "a json false",
        "the string false",
        "the string False",
        "the string 0",
        "the string true",
    ],
)
def test_config_log_subscription_parses_booleans_and_cli_strings(raw: object, expected: bool) -> None:
    assert SupervisorConfig.from_mapping({"logSubscription": raw}).log_subscription is expected


def test_config_rejects_unparseable_log_subscription() -> None:
    with pytest.raises(ConfigError, match="logSubscription"):
        SupervisorConfig.from_mapping({"logSubscription": "maybe"})


@pytest.mark.claim("deployment-wide run policy defaults (fields below)")
def test_config_policy_defaults_accept_object_or_json_string() -> None:
    as_string = SupervisorConfig.from_mapping({"policyDefaults": '{"max_restarts": 4}'})
    as_object = SupervisorConfig.from_mapping({"policyDefaults": {"max_restarts": 4}})

    assert as_string == as_object
    assert json.loads(as_string.policy_defaults_json) == {"max_restarts": 4}


@pytest.mark.parametrize("bad", ["[1, 2]", "not json", 3], ids=["a json list", "not json", "a number"])
def test_config_rejects_policy_defaults_that_are_not_an_object(bad: object) -> None:
    with pytest.raises(ConfigError, match="policyDefaults"):
        SupervisorConfig.from_mapping({"policyDefaults": bad})


def test_config_checkpoint_buckets_accept_comma_separated_and_reject_bad_names() -> None:
    config = SupervisorConfig.from_mapping({"checkpointBuckets": "ckpt-a,ckpt.b"})
    assert config.checkpoint_buckets == ("ckpt-a", "ckpt.b")

    with pytest.raises(ConfigError, match="checkpointBuckets"):
        SupervisorConfig.from_mapping({"checkpointBuckets": ["Bad_Bucket"]})


def test_config_rejects_bad_alert_email() -> None:
    with pytest.raises(ConfigError, match="alertEmail"):
        SupervisorConfig.from_mapping({"alertEmail": "not-an-address"})


@pytest.mark.claim("Lambda architecture (`arm64` or `x86_64`)")
def test_config_rejects_unknown_architecture_and_unpinned_powertools() -> None:
    with pytest.raises(ConfigError, match="architecture"):
        SupervisorConfig.from_mapping({"architecture": "arm"})
    with pytest.raises(ConfigError, match="powertoolsVersion"):
        SupervisorConfig.from_mapping({"powertoolsVersion": "latest"})


def test_config_powertools_layer_parameter_names_arch_runtime_and_version() -> None:
    config = SupervisorConfig.from_mapping({"architecture": "x86_64", "powertoolsVersion": "3.1.2"})

    assert config.powertools_layer_parameter == "/aws/service/powertools/python/x86_64/python3.12/3.1.2"
    assert constants.PYTHON_VERSION == "python3.12"


def test_config_is_immutable() -> None:
    config = SupervisorConfig.from_mapping({"policyDefaults": {"max_restarts": 1}})

    with pytest.raises(dataclasses.FrozenInstanceError):
        config.job_prefix = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.policy_defaults["max_restarts"] = 2  # type: ignore[index]


@pytest.mark.claim("deployment-wide run policy defaults (fields below)")
def test_config_policy_defaults_are_validated_with_the_run_policy_schema():
    from infra.config import ConfigError, SupervisorConfig

    ok = SupervisorConfig.from_mapping({"policyDefaults": {"max_restarts": 3, "hang_confirmation": "2-of-3"}})
    assert ok.policy_defaults["max_restarts"] == 3
    for bad, field in (
        ({"max_restart": 3}, "max_restart"),
        ({"log_silence_minutes": 0}, "log_silence_minutes"),
    ):
        try:
            SupervisorConfig.from_mapping({"policyDefaults": bad})
        except ConfigError as exc:
            assert field in str(exc)
        else:
            raise AssertionError(f"{bad} accepted")


@pytest.mark.claim("sagewarden therefore **does not touch it by default**")
def test_config_account_wide_api_gateway_role_is_opt_in_and_api_logging_on_by_default() -> None:
    assert SupervisorConfig().api_gateway_account_role is False
    assert SupervisorConfig().api_logging is True
    config = SupervisorConfig.from_mapping({"apiGatewayAccountRole": "true", "apiLogging": "false"})
    assert (config.api_gateway_account_role, config.api_logging) == (True, False)
    with pytest.raises(ConfigError, match="apiGatewayAccountRole"):
        SupervisorConfig.from_mapping({"apiGatewayAccountRole": "maybe"})


@pytest.mark.claim(
    "Pass the key's ARN: `-c checkpointKmsKeyArns=arn:aws:kms:...:key/...` (an alias does not work in IAM)"
)
@pytest.mark.parametrize(
    "key",
    [
        "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
        "arn:aws:kms:eu-west-1:123456789012:key/mrk-1234abcd12ab34cd56ef1234567890ab",
    ],
    ids=["a key arn", "a multi-region key arn"],
)
def test_config_checkpoint_kms_key_arns_accept_key_arns(key: str) -> None:
    assert SupervisorConfig.from_mapping({"checkpointKmsKeyArns": key}).checkpoint_kms_key_arns == (key,)


@pytest.mark.claim(
    "Pass the key's ARN: `-c checkpointKmsKeyArns=arn:aws:kms:...:key/...` (an alias does not work in IAM)"
)
@pytest.mark.parametrize(
    "bad",
    [
        "arn:aws:kms:us-east-1:123456789012:alias/checkpoints",
        "1234abcd-12ab-34cd-56ef-1234567890ab",
        "arn:aws:kms:us-east-1:123456789012:key/*",
    ],
)
def test_config_checkpoint_kms_key_arns_reject_aliases_ids_and_wildcards(bad: str) -> None:
    with pytest.raises(ConfigError, match="checkpointKmsKeyArns"):
        SupervisorConfig.from_mapping({"checkpointKmsKeyArns": [bad]})


@pytest.mark.claim(
    "A run asking for retention in a deployment without it is refused at submit (400 on `policy.checkpoint_keep`)"
)
def test_config_checkpoint_retention_is_off_by_default_and_needs_named_buckets() -> None:
    assert SupervisorConfig.from_mapping({}).checkpoint_retention is False
    on = SupervisorConfig.from_mapping({"checkpointRetention": "true", "checkpointBuckets": "team-ckpt"})
    assert on.checkpoint_retention is True
    with pytest.raises(ConfigError, match="checkpointRetention needs checkpointBuckets"):
        SupervisorConfig.from_mapping({"checkpointRetention": True})


@pytest.mark.claim(
    "A deployment's `policyDefaults.environment_defaults` with a secret-looking key or value is refused at synth"
)
@pytest.mark.parametrize(
    ("environment", "why"),
    [
        pytest.param({"HF_TOKEN": "hf_value"}, "the key looks like it names a secret", id="a TOKEN key"),
        pytest.param({"DB_PASS": "hunter22"}, "the key looks like it names a secret", id="a PASS key"),
        pytest.param({"GITHUB_PAT": "pat-value-1"}, "the key looks like it names a secret", id="a PAT key"),
        pytest.param(
            {"MODEL": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"},
            "the value looks like a secret",
            id="a token under a plain key",
        ),
        pytest.param(
            {"DATABASE_URL": "postgres://app:pw@db:5432/x"},
            "the value looks like a secret",
            id="a URL's password",
        ),
    ],
)
def test_config_refuses_a_secret_in_policy_defaults_environment(
    environment: dict[str, str], why: str
) -> None:
    # policyDefaults goes into every function's environment in plain text (ENV_POLICY_DEFAULTS)
    key = next(iter(environment))
    with pytest.raises(ConfigError) as caught:
        SupervisorConfig.from_mapping({"policyDefaults": {"environment_defaults": environment}})
    message = str(caught.value)
    assert message.startswith(f"policyDefaults.environment_defaults.{key}: {why}")
    assert "Secrets Manager" in message and "every function's environment" in message
    assert environment[key] not in message  # the refusal does not print the value either


def test_config_accepts_plain_environment_defaults_and_secret_references() -> None:
    reference = "arn:aws:secretsmanager:us-east-1:123456789012:secret:ml/hf-token-AbCdEf"
    config = SupervisorConfig.from_mapping(
        {"policyDefaults": {"environment_defaults": {"NCCL_DEBUG": "WARN", "HF_TOKEN_SECRET_ARN": reference}}}
    )
    assert config.policy_defaults["environment_defaults"]["HF_TOKEN_SECRET_ARN"] == reference


@pytest.mark.claim(
    "A deployment's `policyDefaults.environment_defaults` with a secret-looking key or value is refused at synth"
)
def test_the_construct_refuses_a_secret_in_policy_defaults_at_synth() -> None:
    from aws_cdk import App, Stack

    from infra.library import SagewardenSupervisor

    stack = Stack(App(), "Platform")
    with pytest.raises(ConfigError, match=r"environment_defaults\.WANDB_API_KEY"):
        SagewardenSupervisor(
            stack,
            "Supervisor",
            allowed_role_arns=["arn:aws:iam::123456789012:role/training"],
            policy_defaults={"environment_defaults": {"WANDB_API_KEY": "0123456789abcdef"}},
        )


def test_config_read_scope_is_all_by_default_owner_on_request_and_nothing_else() -> None:
    assert SupervisorConfig.from_mapping({}).read_scope == "all"
    assert SupervisorConfig.from_mapping({"readScope": "owner"}).read_scope == "owner"
    with pytest.raises(ConfigError, match="readScope: one of all, owner, got 'owners'"):
        SupervisorConfig.from_mapping({"readScope": "owners"})
