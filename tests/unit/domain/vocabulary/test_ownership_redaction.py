"""The pure rules behind 403s and redaction: domain/vocabulary/ownership.py and domain/vocabulary/redaction.py."""

from __future__ import annotations

import pytest

from sagewarden.domain.vocabulary.ownership import may_change, principal, same_principal, shown_principal
from sagewarden.domain.vocabulary.redaction import REDACTED, redact, scrub_text, secret_key, secret_values

A = "123456789012"


@pytest.mark.claim("whoever can assume the role that submitted a run may cancel and resume it")
@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (f"arn:aws:sts::{A}:assumed-role/ml/alice", f"arn:aws:sts::{A}:assumed-role/ml/bob", True),
        (f"arn:aws:sts::{A}:assumed-role/ml/alice", f"arn:aws:iam::{A}:role/team/ml", True),  # path
        (f"arn:aws:iam::{A}:role/ml", f"arn:aws:iam::{A}:role/ml", True),
        (f"arn:aws:iam::{A}:role/Platform-Admin", f"arn:aws:sts::{A}:assumed-role/platform-admin/x", True),
        (f"arn:aws:sts::{A}:assumed-role/ml/alice", f"arn:aws:sts::{A}:assumed-role/vision/alice", False),
        (f"arn:aws:sts::{A}:assumed-role/ml/alice", "arn:aws:sts::210987654321:assumed-role/ml/alice", False),
        (f"arn:aws:sts::{A}:assumed-role/ml/s", f"arn:aws-cn:sts::{A}:assumed-role/ml/s", False),
        (f"arn:aws:iam::{A}:user/carol", f"arn:aws:iam::{A}:user/dev/carol", True),
        (f"arn:aws:iam::{A}:user/carol", f"arn:aws:iam::{A}:user/dave", False),
        (f"arn:aws:iam::{A}:user/carol", f"arn:aws:iam::{A}:role/carol", False),
        (f"arn:aws:iam::{A}:user/carol", f"arn:aws:sts::{A}:assumed-role/x/carol", False),
        (f"arn:aws:sts::{A}:federated-user/eve", f"arn:aws:sts::{A}:federated-user/eve", True),
        (f"arn:aws:iam::{A}:root", f"arn:aws:iam::{A}:root", True),
        ("unknown", "unknown", False),
        ("", "", False),
    ],
    ids=[
        "two sessions of one role",
        "a session and its role under a path",
        "one role twice",
        "a role and its session in another case",
        "one session name in two roles",
        "one role in two accounts",
        "one role in two partitions",
        "a user and the same user under a path",
        "two users",
        "a user and a role of one name",
        "a user and a session of one name",
        "one federated user twice",
        "the root twice",
        "two unknown principals",
        "two empty principals",
    ],
)
def test_principals_are_compared_by_identity_not_by_session(a, b, same):
    assert same_principal(a, b) is same
    assert same_principal(b, a) is same


def test_the_canonical_identity_of_a_session_is_its_role():
    assert principal(f"arn:aws:sts::{A}:assumed-role/AWSReservedSSO_ML_1a2b/alice@example.com") == (
        f"arn:aws:iam::{A}:role/awsreservedsso_ml_1a2b"
    )
    assert principal("AROAEXAMPLE:alice") == "AROAEXAMPLE:alice"  # not an ARN: compared as it is


def test_an_admin_may_change_any_run_others_only_their_own():
    owner = f"arn:aws:sts::{A}:assumed-role/ml/alice"
    admins = (f"arn:aws:iam::{A}:role/platform/admin",)
    assert may_change(owner, f"arn:aws:sts::{A}:assumed-role/admin/oncall", admins)
    assert may_change(owner, f"arn:aws:sts::{A}:assumed-role/ml/bob", ())
    assert not may_change(owner, f"arn:aws:sts::{A}:assumed-role/vision/bob", admins)


@pytest.mark.claim("reads `<redacted>` in every API answer")
@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("HF_TOKEN", True),
        ("WANDB_API_KEY", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("db_password", True),
        ("GOOGLE_APPLICATION_CREDENTIALS", True),
        ("api_key", True),
        ("TOKENIZERS_PARALLELISM", True),  # a substring match: over-redaction is the safe side
        ("EPOCHS", False),
        ("NCCL_DEBUG", False),
        (3, False),
    ],
    ids=[
        "a token",
        "an api key",
        "an aws secret key",
        "a password",
        "a credentials path",
        "a lower-case api key",
        "a word holding token",
        "an epoch count",
        "an nccl setting",
        "a key that is not a string",
    ],
)
def test_secret_looking_keys(name, secret):
    assert secret_key(name) is secret


@pytest.mark.claim("reads `<redacted>` in every API answer")
@pytest.mark.claim("Such a value of 8 characters or more is also replaced wherever it appears in text")
def test_redact_hides_secret_keys_in_secret_maps_and_secret_values_everywhere():
    request = {
        "Environment": {"HF_TOKEN": "hf_0123456789abcdef", "PW_PASSWORD": "short", "EPOCHS": "3"},
        "HyperParameters": {"api_key": "sk-abcdefgh123", "lr": "0.1"},
        "Tags": [{"Key": "team", "Value": "ml"}],  # a tag's "Key" is no secret
    }
    secrets = secret_values(request, (("GITHUB_TOKEN", "ghp_abcdefghijkl"),))
    assert set(secrets) == {
        "ghp_abcdefghijkl",
        "hf_0123456789abcdef",
        "sk-abcdefgh123",
    }
    assert "short" not in secrets  # under 8 characters: redacted by key only
    shown = redact(
        {
            "training_job": request,
            "failure_reason": "401 for token hf_0123456789abcdef",
            "log_tail": ["GITHUB_TOKEN=ghp_abcdefghijkl", "step 10"],
            "policy": {"environment_defaults": {"GITHUB_TOKEN": "ghp_abcdefghijkl"}},
        },
        secrets,
    )
    assert shown["training_job"]["Environment"] == {
        "HF_TOKEN": REDACTED,
        "PW_PASSWORD": REDACTED,
        "EPOCHS": "3",
    }
    assert shown["training_job"]["HyperParameters"] == {"api_key": REDACTED, "lr": "0.1"}
    assert shown["training_job"]["Tags"] == [{"Key": "team", "Value": "ml"}]
    assert shown["failure_reason"] == f"401 for token {REDACTED}"
    assert shown["log_tail"] == [f"GITHUB_TOKEN={REDACTED}", "step 10"]
    assert shown["policy"]["environment_defaults"] == {"GITHUB_TOKEN": REDACTED}
    assert request["Environment"]["HF_TOKEN"] == "hf_0123456789abcdef"  # the input is not changed


@pytest.mark.claim("Such a value of 8 characters or more is also replaced wherever it appears in text")
def test_a_secret_that_contains_another_is_replaced_whole():
    secrets = secret_values({"Environment": {"A_TOKEN": "abcdefgh", "B_TOKEN": "abcdefgh-longer"}})
    assert scrub_text("x abcdefgh-longer y abcdefgh", secrets) == f"x {REDACTED} y {REDACTED}"


@pytest.mark.claim("A 403 names the owner by identity")
@pytest.mark.parametrize(
    ("arn", "shown"),
    [
        (
            f"arn:aws:sts::{A}:assumed-role/AWSReservedSSO_ML_1a2b/alice@example.com",
            f"arn:aws:iam::{A}:role/AWSReservedSSO_ML_1a2b",
        ),
        (f"arn:aws:iam::{A}:role/team/ml", f"arn:aws:iam::{A}:role/team/ml"),
        (f"arn:aws:iam::{A}:user/carol", f"arn:aws:iam::{A}:user/carol"),
        (f"arn:aws:sts::{A}:federated-user/eve@example.com", f"a principal of account {A}"),
        ("AROAEXAMPLE:alice@example.com", "another principal"),
    ],
    ids=[
        "an sso session shown as its role",
        "a role under a path",
        "a user",
        "a federated user shown by account only",
        "a role id never shown",
    ],
)
def test_an_error_shows_another_principal_by_identity_never_by_session(arn, shown):
    assert shown_principal(arn) == shown
