"""Issue 21 part 4: encrypted log groups, the optional table key, admins, reserved concurrency,
and checkov in `make lint` with every accepted finding reasoned in .checkov.yaml."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from infra_synth import ADMIN_ROLE, TABLE_KEY, SynthResult, as_list

from infra import REPO_ROOT, constants
from infra.config import ConfigError, SupervisorConfig
from sagewarden import keys

pytestmark = pytest.mark.xdist_group("infra-deploy-options")

HANDLERS = {
    keys.HANDLER_API: constants.API_FUNCTION,
    keys.HANDLER_JOB_STATE: constants.JOB_STATE_FUNCTION,
    keys.HANDLER_ALARM_STATE: constants.ALARM_STATE_FUNCTION,
    keys.HANDLER_SWEEP: constants.SWEEP_FUNCTION,
    keys.HANDLER_HEARTBEAT: constants.HEARTBEAT_FUNCTION,
    keys.HANDLER_ALARM_SHAPE_CHECK: constants.SHAPE_CHECK_FUNCTION,
}


@pytest.fixture(scope="module", params=["default", "full", "opt_in"])
def synth_each(request: pytest.FixtureRequest) -> SynthResult:
    return request.getfixturevalue(f"synth_{request.param}")


def _key_id(synth: SynthResult) -> str:
    keys_ = synth.resources("AWS::KMS::Key")
    assert len(keys_) == 1, sorted(keys_)
    return next(iter(keys_))


@pytest.mark.claim("Every log group of the stack is encrypted with the stack's KMS key")
def test_every_log_group_of_the_stack_is_encrypted_with_the_stack_key(synth_each: SynthResult) -> None:
    key_id = _key_id(synth_each)
    groups = synth_each.resources("AWS::Logs::LogGroup")
    assert len(groups) >= 6  # five functions and the alarm-shape check (+ the API's access logs)
    for name, group in groups.items():
        assert group["Properties"].get("KmsKeyId") == {"Fn::GetAtt": [key_id, "Arn"]}, name


@pytest.mark.claim("Every log group of the stack is encrypted with the stack's KMS key")
def test_the_key_lets_cloudwatch_logs_use_it_for_this_accounts_log_groups_only(
    synth_default: SynthResult,
) -> None:
    key = synth_default.raw["Resources"][_key_id(synth_default)]
    (statement,) = [
        s
        for s in key["Properties"]["KeyPolicy"]["Statement"]
        if s.get("Sid") == "AllowCloudWatchLogsOfThisAccountAndRegion"
    ]
    principal = json.dumps(statement["Principal"])
    assert "logs." in principal and "AWS::Region" in principal
    assert "kms:GenerateDataKey*" in statement["Action"] and "kms:Decrypt*" in statement["Action"]
    condition = json.dumps(statement["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"])
    assert ":logs:" in condition and "AWS::AccountId" in condition and "log-group:*" in condition


@pytest.mark.claim(
    "a customer-managed KMS key (same region) for the state table, which stores every run's request; the functions may use it only through DynamoDB. Default: DynamoDB's AWS-managed key."
)
def test_the_table_uses_the_aws_managed_key_unless_a_customer_key_is_given(
    synth_default: SynthResult, synth_opt_in: SynthResult
) -> None:
    _, plain = synth_default.one("AWS::DynamoDB::Table")
    assert "KMSMasterKeyId" not in plain["Properties"]["SSESpecification"]
    assert not [s for s in synth_default.all_statements() if s.get("Sid") == "UseTheTableKeyThroughDynamoDB"]

    _, table = synth_opt_in.one("AWS::DynamoDB::Table")
    sse = table["Properties"]["SSESpecification"]
    assert sse["SSEEnabled"] is True and sse["SSEType"] == "KMS" and sse["KMSMasterKeyId"] == TABLE_KEY
    # every function that reads or writes the table may use the key, and only through DynamoDB
    for handler in (keys.HANDLER_API, keys.HANDLER_JOB_STATE, keys.HANDLER_ALARM_STATE, keys.HANDLER_SWEEP):
        _, function = synth_opt_in.function_by_handler(handler)
        grants = [
            s
            for s in synth_opt_in.statements_of_role(synth_opt_in.role_of(function))
            if s.get("Sid") == "UseTheTableKeyThroughDynamoDB"
        ]
        assert len(grants) == 1, handler
        assert as_list(grants[0]["Resource"]) == [TABLE_KEY]
        assert set(as_list(grants[0]["Action"])) == {
            "kms:Decrypt",
            "kms:DescribeKey",
            "kms:Encrypt",
            "kms:GenerateDataKey",
        }
        assert "dynamodb." in json.dumps(grants[0]["Condition"]["StringEquals"]["kms:ViaService"])


@pytest.mark.claim("IAM roles whose sessions may cancel and resume any run (everyone else: only their own")
def test_admins_reach_the_api_function_alone(synth_default: SynthResult, synth_opt_in: SynthResult) -> None:
    for synth, expected in ((synth_default, []), (synth_opt_in, [ADMIN_ROLE])):
        for handler in HANDLERS:
            env = synth.function_by_handler(handler)[1]["Properties"]["Environment"]["Variables"]
            if handler == keys.HANDLER_API:
                assert json.loads(env[keys.ENV_ADMIN_ROLE_ARNS]) == expected
            else:
                assert keys.ENV_ADMIN_ROLE_ARNS not in env, handler


@pytest.mark.claim(
    "reserve concurrency for each function: 10 API, 5 job-state, 5 alarm-state, 2 sweep, 10 heartbeat, 1 alarm-shape check (33 in all)"
)
def test_reserved_concurrency_is_opt_in_and_sized_per_function(
    synth_default: SynthResult, synth_opt_in: SynthResult
) -> None:
    for handler in HANDLERS:
        props = synth_default.function_by_handler(handler)[1]["Properties"]
        assert "ReservedConcurrentExecutions" not in props, handler
    limits = {
        h: synth_opt_in.function_by_handler(h)[1]["Properties"]["ReservedConcurrentExecutions"]
        for h in HANDLERS
    }
    assert limits == {h: spec.reserved_concurrency for h, spec in HANDLERS.items()}
    assert (
        limits[keys.HANDLER_SWEEP] == 2
    )  # one sweep works under the lease; an overlapping tick finds it taken
    assert sum(limits.values()) == 33  # README: the account needs at least 133 concurrent executions


@pytest.mark.claim("IAM roles whose sessions may cancel and resume any run (everyone else: only their own")
@pytest.mark.parametrize(
    ("context", "field"),
    [
        ({"adminRoleArns": ["arn:aws:iam::123456789012:user/alice"]}, "adminRoleArns"),
        ({"adminRoleArns": "not-an-arn"}, "adminRoleArns"),
        ({"tableKmsKeyArn": "alias/sagewarden"}, "tableKmsKeyArn"),
        ({"reservedConcurrency": "sometimes"}, "reservedConcurrency"),
    ],
    ids=[
        "an admin that is a user",
        "an admin that is not an arn",
        "a table key that is an alias",
        "a reserved concurrency in words",
    ],
)
def test_bad_security_context_fails_the_synth_naming_the_key(context: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        SupervisorConfig.from_mapping(context)


@pytest.mark.claim("IAM roles whose sessions may cancel and resume any run (everyone else: only their own")
def test_security_context_parses_from_the_command_line_forms() -> None:
    config = SupervisorConfig.from_mapping(
        {"adminRoleArns": f"{ADMIN_ROLE}, arn:aws:iam::123456789012:role/Other", "tableKmsKeyArn": TABLE_KEY}
    )
    assert config.admin_role_arns == (ADMIN_ROLE, "arn:aws:iam::123456789012:role/Other")
    assert config.table_kms_key_arn == TABLE_KEY
    assert SupervisorConfig.from_mapping({"reservedConcurrency": "true"}).reserved_concurrency is True
    assert SupervisorConfig().reserved_concurrency is False


def _checkov_skips() -> list[tuple[str, str]]:
    """(check id, the reason on the comment line above it) for every skip in .checkov.yaml."""
    lines = (REPO_ROOT / ".checkov.yaml").read_text(encoding="utf-8").splitlines()
    skips = []
    for i, line in enumerate(lines):
        m = re.fullmatch(r"\s*-\s*(CKV2?_[A-Z0-9_]+)\s*", line)
        if m:
            reason = lines[i - 1].strip()
            skips.append((m.group(1), reason.removeprefix("#").strip() if reason.startswith("#") else ""))
    return skips


def test_make_lint_runs_checkov_on_a_fresh_synth_with_the_checked_in_config() -> None:
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    lint = makefile.split("\nlint:", 1)[1].split("\n\n", 1)[0]
    assert "$(MAKE) checkov" in lint
    recipe = makefile.split("\ncheckov:", 1)[1].split("\n\n", 1)[0]
    assert "CDK_OUTDIR=.cache/checkov-synth $(PY) app.py" in recipe
    assert "checkov --config-file .checkov.yaml -f .cache/checkov-synth/*.template.json" in recipe
    assert "pip install --progress-bar off -r requirements-checkov.lock" in makefile
    assert re.search(r"^checkov==\d", (REPO_ROOT / "requirements-checkov.lock").read_text(), re.M)


@pytest.mark.claim("it fails on any finding that `.checkov.yaml` does not accept with a one-line reason")
def test_every_accepted_checkov_finding_has_a_one_line_reason_and_the_fixed_ones_are_not_skipped() -> None:
    skips = _checkov_skips()
    assert skips, ".checkov.yaml skips nothing?"
    for check, reason in skips:
        assert len(reason) > 20, f"{check} has no reason on the line above it"
    ids = [c for c, _ in skips]
    assert len(ids) == len(set(ids))
    # fixed, not acknowledged: encrypted log groups
    assert "CKV_AWS_158" not in ids


def test_the_dead_letter_reason_holds_every_function_but_the_api_sends_failures_to_the_queue(
    synth_each: SynthResult,
) -> None:
    """.checkov.yaml accepts CKV_AWS_116 (no DeadLetterConfig) because every asynchronous function,
    the deploy-time helpers included, has an invoke config whose on-failure destination is the DLQ."""
    queue_id, _ = synth_each.one("AWS::SQS::Queue")
    destinations = {
        c["Properties"]["FunctionName"]["Ref"]: c["Properties"].get("DestinationConfig")
        for c in synth_each.resources("AWS::Lambda::EventInvokeConfig").values()
    }
    api_id, _ = synth_each.function_by_handler(keys.HANDLER_API)
    functions = set(synth_each.resources("AWS::Lambda::Function")) - {api_id}
    assert synth_each.function_by_handler(keys.HANDLER_ALARM_SHAPE_CHECK)[0] in functions
    for function_id in functions:
        assert destinations.get(function_id) == {
            "OnFailure": {"Destination": {"Fn::GetAtt": [queue_id, "Arn"]}}
        }, function_id


def test_the_environment_reason_holds_no_function_environment_holds_a_secret(synth_each: SynthResult) -> None:
    """.checkov.yaml accepts CKV_AWS_173 (environment without a customer key) because no function's
    environment holds a secret: no secret-looking name, no value that looks secret by itself."""
    from sagewarden.domain.vocabulary.redaction import secret_key, secret_text

    for function_id, function in synth_each.resources("AWS::Lambda::Function").items():
        variables = function["Properties"].get("Environment", {}).get("Variables", {})
        for name, value in variables.items():
            assert not secret_key(name), (function_id, name)
            if isinstance(value, str):
                assert not secret_text(value), (function_id, name)


def test_read_scope_reaches_the_api_function_alone(
    synth_default: SynthResult, synth_opt_in: SynthResult
) -> None:
    for synth, scope in ((synth_default, "all"), (synth_opt_in, "owner")):
        for function_id, function in synth.resources("AWS::Lambda::Function").items():
            env = function["Properties"].get("Environment", {}).get("Variables", {})
            if function["Properties"].get("Handler") == keys.HANDLER_API:
                assert env[keys.ENV_READ_SCOPE] == scope
            else:
                assert keys.ENV_READ_SCOPE not in env, function_id


@pytest.mark.claim(
    "the sweep's role alone (the only function that decides retention) also gets `s3:PutObject`"
)
def test_checkpoint_retention_writes_are_opt_in_and_the_sweeps_alone(
    synth_default: SynthResult, synth_opt_in: SynthResult
) -> None:
    """Checkpoint discovery only reads; retention's copy and delete exist only with
    checkpointRetention=true, on the sweep's role alone, scoped to the checkpoint buckets."""
    assert not [s for s in synth_default.all_statements() if s.get("Sid") == "MoveRetiredCheckpoints"]
    for handler in (keys.HANDLER_API, keys.HANDLER_JOB_STATE, keys.HANDLER_ALARM_STATE, keys.HANDLER_SWEEP):
        _, function = synth_opt_in.function_by_handler(handler)
        statements = synth_opt_in.statements_of_role(synth_opt_in.role_of(function))
        moves = [s for s in statements if s.get("Sid") == "MoveRetiredCheckpoints"]
        uploads = [s for s in statements if s.get("Sid") == "FindOpenArchiveCopies"]
        versioning = [s for s in statements if s.get("Sid") == "ReadCheckpointBucketVersioning"]
        env = function["Properties"]["Environment"]["Variables"]
        assert env[keys.ENV_CHECKPOINT_RETENTION] == "true"
        # only the API reads a retention run's bucket versioning, at submit
        assert (len(versioning) == 1) == (handler == keys.HANDLER_API), handler
        if versioning:
            assert set(as_list(versioning[0]["Action"])) == {
                "s3:GetBucketVersioning",
                "s3:GetLifecycleConfiguration",
            }
            assert "team-checkpoints/*" not in json.dumps(
                versioning[0]["Resource"]
            )  # the buckets, not objects
        if handler != keys.HANDLER_SWEEP:
            assert moves == [] and uploads == [], handler
            continue
        assert len(moves) == 1
        assert set(as_list(moves[0]["Action"])) == {
            "s3:PutObject",
            "s3:AbortMultipartUpload",
            "s3:ListMultipartUploadParts",
            "s3:DeleteObject",
        }
        assert "team-checkpoints/*" in json.dumps(moves[0]["Resource"])
        assert len(uploads) == 1 and as_list(uploads[0]["Action"]) == ["s3:ListBucketMultipartUploads"]
        assert "team-checkpoints" in json.dumps(uploads[0]["Resource"])
        kms = [s for s in statements if s.get("Sid") == "EncryptArchivedCheckpointsThroughS3"]
        assert len(kms) == 1 and as_list(kms[0]["Action"]) == ["kms:GenerateDataKey"]
