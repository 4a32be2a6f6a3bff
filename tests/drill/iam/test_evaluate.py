"""IAM evaluation rules of the replay (drill/iam/evaluate.py), on hand-written policies."""

from __future__ import annotations

from typing import Any

import pytest

from drill.iam.cfn import PhysicalNames, RolePolicies, Statement
from drill.iam.evaluate import Principal, arn_matches, condition_applies, evaluate
from drill.iam.requests import AuthorizationRequest, req

ACCOUNT = "123456789012"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/fn"
WHO = Principal(ROLE, ACCOUNT, "us-east-1")
NAMES = PhysicalNames(region="us-east-1", account=ACCOUNT)
ALARM = f"arn:aws:cloudwatch:us-east-1:{ACCOUNT}:alarm:sagewarden-hang-sw-a-01--gpu-idle"


def role(*statements: dict[str, Any], opaque: tuple[str, ...] = ()) -> RolePolicies:
    parsed = [Statement.parse(s, "test policy", i, NAMES, {}) for i, s in enumerate(statements)]
    return RolePolicies("Role", ROLE, parsed, list(opaque))


def allow(action: Any, resource: Any, **extra: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": action, "Resource": resource, **extra}


def decide(
    request: AuthorizationRequest, policies: RolePolicies, resource_policy: list[dict[str, Any]] | None = None
) -> str:
    res = [Statement.parse(s, "resource policy", i, NAMES, {}) for i, s in enumerate(resource_policy or [])]
    return evaluate(request, WHO, policies, res).decision


def test_iam_evaluate_no_statement_is_an_implicit_deny() -> None:
    verdict = evaluate(req("sns:Publish", "arn:aws:sns:us-east-1:1:t"), WHO, role())
    assert verdict.decision == "deny"
    assert "implicit" in verdict.reason


@pytest.mark.claim(
    "`DescribeAlarms` with `AlarmNamePrefix` is authorized against `alarm:*`, not against the alarm-name prefix"
)
def test_iam_evaluate_prefix_grant_does_not_cover_alarm_star() -> None:
    # The bug the replay found: DescribeAlarms is authorised on alarm:*, the grant was a prefix.
    prefix = role(
        allow("cloudwatch:DescribeAlarms", f"arn:aws:cloudwatch:us-east-1:{ACCOUNT}:alarm:sagewarden-hang-*")
    )
    request = req("cloudwatch:DescribeAlarms", f"arn:aws:cloudwatch:us-east-1:{ACCOUNT}:alarm:*")

    assert decide(request, prefix) == "deny"
    assert (
        decide(
            request,
            role(allow("cloudwatch:DescribeAlarms", f"arn:aws:cloudwatch:us-east-1:{ACCOUNT}:alarm:*")),
        )
        == "allow"
    )


@pytest.mark.claim(
    "The rules are IAM's: an explicit deny wins, `*`/`?` wildcards, `NotAction`/`NotResource`, and the condition operators."
)
def test_iam_evaluate_actions_match_case_insensitively_with_wildcards() -> None:
    request = req("sqs:SendMessage", "arn:aws:sqs:us-east-1:1:dlq")
    assert decide(request, role(allow("SQS:sendmessage*", "*"))) == "allow"
    assert decide(request, role(allow("sqs:SendMessag?", "*"))) == "allow"
    assert decide(request, role(allow("sqs:Send", "*"))) == "deny"
    assert decide(request, role(allow("*", "*"))) == "allow"


def test_iam_evaluate_resources_match_case_sensitively_per_arn_segment() -> None:
    request = req("sagemaker:DescribeTrainingJob", f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:training-job/sw-a")
    assert (
        decide(request, role(allow("sagemaker:*", f"arn:aws:sagemaker:*:{ACCOUNT}:training-job/sw-*")))
        == "allow"
    )
    assert (
        decide(request, role(allow("sagemaker:*", f"arn:aws:sagemaker:*:{ACCOUNT}:training-job/SW-*")))
        == "deny"
    )
    # a wildcard inside a segment stays in it; a segment-final one may run past the colons
    assert not arn_matches(
        "arn:aws:sagemaker:*-east-1", f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:training-job/x"
    )
    assert arn_matches("arn:aws:sagemaker:us-*", f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:training-job/x")
    assert not arn_matches(
        "arn:aws:sagemaker:us?east:*", "arn:aws:sagemaker:us:east:1"
    )  # ? stays in a segment
    group = f"arn:aws:logs:us-east-1:{ACCOUNT}:log-group:/aws/sagemaker/TrainingJobs"
    assert arn_matches(f"{group}:*", f"{group}:log-stream:sw-a/algo-1-1")
    assert not arn_matches(group, f"{group}:log-stream:sw-a/algo-1-1")
    assert arn_matches("arn:aws:s3:::*/*", "arn:aws:s3:::bucket/a/b:c")
    assert not arn_matches("arn:aws:s3:::bucket", "arn:aws:s3:::bucket/key")


def test_iam_evaluate_resource_star_request_needs_a_star_grant() -> None:
    request = req("cloudwatch:GetMetricData", "*")
    assert decide(request, role(allow("cloudwatch:GetMetricData", "arn:aws:cloudwatch:*"))) == "deny"
    assert decide(request, role(allow("cloudwatch:GetMetricData", "*"))) == "allow"


@pytest.mark.claim(
    "The rules are IAM's: an explicit deny wins, `*`/`?` wildcards, `NotAction`/`NotResource`, and the condition operators."
)
def test_iam_evaluate_explicit_deny_wins_over_allow() -> None:
    request = req("cloudwatch:DeleteAlarms", ALARM)
    policies = role(
        allow("cloudwatch:*", "*"),
        {"Effect": "Deny", "Action": "cloudwatch:DeleteAlarms", "Resource": "*"},
    )
    verdict = evaluate(request, WHO, policies)
    assert verdict.decision == "deny"
    assert verdict.reason == "explicit Deny"


@pytest.mark.claim(
    "The rules are IAM's: an explicit deny wins, `*`/`?` wildcards, `NotAction`/`NotResource`, and the condition operators."
)
def test_iam_evaluate_not_action_and_not_resource() -> None:
    request = req("cloudwatch:DeleteAlarms", ALARM)
    assert decide(request, role({"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"})) == "allow"
    assert (
        decide(request, role({"Effect": "Allow", "NotAction": "cloudwatch:Delete*", "Resource": "*"}))
        == "deny"
    )
    assert (
        decide(request, role({"Effect": "Allow", "Action": "*", "NotResource": "arn:aws:iam::*:*"}))
        == "allow"
    )
    assert decide(request, role({"Effect": "Allow", "Action": "*", "NotResource": ALARM})) == "deny"
    # a Deny with NotResource covers everything but the listed resources
    deny_elsewhere = {"Effect": "Deny", "Action": "*", "NotResource": "arn:aws:s3:::*"}
    assert decide(request, role(allow("*", "*"), deny_elsewhere)) == "deny"


def test_iam_evaluate_passrole_condition_on_passed_to_service() -> None:
    grant = allow(
        "iam:PassRole",
        f"arn:aws:iam::{ACCOUNT}:role/Train",
        Condition={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
    )
    to_sagemaker = req(
        "iam:PassRole",
        f"arn:aws:iam::{ACCOUNT}:role/Train",
        {"iam:PassedToService": "sagemaker.amazonaws.com"},
    )
    to_ec2 = req(
        "iam:PassRole", f"arn:aws:iam::{ACCOUNT}:role/Train", {"iam:PassedToService": "ec2.amazonaws.com"}
    )
    other_role = req(
        "iam:PassRole",
        f"arn:aws:iam::{ACCOUNT}:role/Admin",
        {"iam:PassedToService": "sagemaker.amazonaws.com"},
    )

    assert decide(to_sagemaker, role(grant)) == "allow"
    assert decide(to_ec2, role(grant)) == "deny"
    assert decide(other_role, role(grant)) == "deny"


@pytest.mark.claim(
    "The rules are IAM's: an explicit deny wins, `*`/`?` wildcards, `NotAction`/`NotResource`, and the condition operators."
)
@pytest.mark.parametrize(
    ("condition", "context", "expected"),
    [
        ({"StringLike": {"s3:prefix": "run/*"}}, {"s3:prefix": ("run/ckpt/",)}, True),
        ({"StringLike": {"s3:prefix": "run/*"}}, {"s3:prefix": ("other/",)}, False),
        ({"StringEquals": {"s3:prefix": "x"}}, {"s3:prefix": ()}, False),  # modelled, absent
        ({"StringNotEquals": {"s3:prefix": "x"}}, {"s3:prefix": ()}, True),  # negated + absent
        ({"StringEqualsIfExists": {"s3:prefix": "x"}}, {"s3:prefix": ()}, True),
        ({"StringEqualsIgnoreCase": {"k": "ABC"}}, {"k": ("abc",)}, True),
        ({"ArnLike": {"k": "arn:aws:sns:*:*:t"}}, {"k": ("arn:aws:sns:us-east-1:1:t",)}, True),
        ({"ArnNotLike": {"k": "arn:aws:sns:*:*:t"}}, {"k": ("arn:aws:sns:us-east-1:1:t",)}, False),
        ({"Bool": {"aws:SecureTransport": "false"}}, {"aws:securetransport": ("true",)}, False),
        ({"Bool": {"aws:SecureTransport": True}}, {"aws:securetransport": ("true",)}, True),
        ({"NumericLessThanEquals": {"k": "3600"}}, {"k": ("600",)}, True),
        ({"NumericLessThanEquals": {"k": "3600"}}, {"k": ("7200",)}, False),
        ({"Null": {"k": "true"}}, {"k": ()}, True),
        ({"Null": {"k": "false"}}, {"k": ()}, False),
        ({"ForAllValues:StringEquals": {"aws:TagKeys": ["a", "b"]}}, {"aws:tagkeys": ("a",)}, True),
        ({"ForAllValues:StringEquals": {"aws:TagKeys": ["a"]}}, {"aws:tagkeys": ("a", "c")}, False),
        ({"ForAllValues:StringEquals": {"aws:TagKeys": ["a"]}}, {"aws:tagkeys": ()}, True),
        ({"ForAnyValue:StringEquals": {"aws:TagKeys": ["c"]}}, {"aws:tagkeys": ("a", "c")}, True),
        ({"ForAnyValue:StringEquals": {"aws:TagKeys": ["c"]}}, {"aws:tagkeys": ()}, False),
        # two operators AND, values of one key OR
        (
            {"StringEquals": {"a": ["1", "2"]}, "StringLike": {"b": "x*"}},
            {"a": ("2",), "b": ("xy",)},
            True,
        ),
        ({"StringEquals": {"a": ["1", "2"]}, "StringLike": {"b": "x*"}}, {"a": ("2",), "b": ("y",)}, False),
    ],
    ids=[
        "a prefix matching the pattern",
        "a prefix outside the pattern",
        "an absent key for a plain operator",
        "an absent key for a negated operator",
        "an absent key for an if-exists operator",
        "a value equal but for case",
        "an arn matching the pattern",
        "an arn matching a negated pattern",
        "a bool false against a true value",
        "a json bool true against a true value",
        "a number under the limit",
        "a number over the limit",
        "null true for an absent key",
        "null false for an absent key",
        "all values inside the allowed set",
        "a value outside the allowed set",
        "all values of an empty set",
        "any value in the set",
        "any value of an empty set",
        "two operators both met",
        "two operators, one not met",
    ],
)
def test_iam_evaluate_condition_operators(
    condition: dict[str, Any], context: dict[str, tuple[str, ...]], expected: bool
) -> None:
    assert condition_applies(condition, context)[0] is expected


@pytest.mark.claim("A condition or value the checker does not model is *unknown*, never allowed.")
@pytest.mark.claim(
    "The checker answers *unknown* for a role with a permissions boundary or an AWS managed policy, and for a condition on a key the table does not model"
)
@pytest.mark.parametrize(
    ("condition", "why"),
    [
        ({"DateGreaterThan": {"aws:CurrentTime": "2020-01-01T00:00:00Z"}}, "operator"),
        ({"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}, "operator"),
        ({"StringEquals": {"dynamodb:LeadingKeys": "RUN#1"}}, "not modelled"),
        ({"StringEquals": {"aws:PrincipalTag/team": "${aws:username}"}}, "policy variables"),
        ({"StringEquals": {"multi": "a"}}, "multi-valued"),
    ],
    ids=[
        "a date operator",
        "an ip operator",
        "a key that is not modelled",
        "a policy variable",
        "a multi-valued key without a set operator",
    ],
)
def test_iam_evaluate_unmodelled_condition_is_unknown_never_allow(
    condition: dict[str, Any], why: str
) -> None:
    request = req("dynamodb:GetItem", f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/t", {"multi": ["a", "b"]})
    verdict = evaluate(request, WHO, role(allow("dynamodb:GetItem", "*", Condition=condition)))

    assert verdict.decision == "unknown"
    assert why in verdict.reason


def test_iam_evaluate_a_deny_that_might_apply_makes_an_allow_unknown() -> None:
    request = req("dynamodb:GetItem", f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/t")
    policies = role(
        allow("dynamodb:*", "*"),
        {
            "Effect": "Deny",
            "Action": "dynamodb:*",
            "Resource": "*",
            "Condition": {"DateLessThan": {"aws:CurrentTime": "x"}},
        },
    )
    assert decide(request, policies) == "unknown"


@pytest.mark.claim("A condition or value the checker does not model is *unknown*, never allowed.")
def test_iam_evaluate_unresolved_resource_is_unknown() -> None:
    request = req("sns:Publish", "arn:aws:sns:us-east-1:1:t")
    parameter_ref = {"Ref": "TopicArnParameter"}  # a template parameter: chosen at deploy time
    assert decide(request, role(allow("sns:Publish", parameter_ref))) == "unknown"
    # ... unless another statement decides on its own
    assert decide(request, role(allow("sns:Publish", parameter_ref), allow("sns:*", "*"))) == "allow"


@pytest.mark.claim(
    "The checker answers *unknown* for a role with a permissions boundary or an AWS managed policy, and for a condition on a key the table does not model"
)
def test_iam_evaluate_unreadable_role_policy_is_unknown() -> None:
    request = req("sns:Publish", "arn:aws:sns:us-east-1:1:t")
    assert (
        decide(request, role(allow("*", "*"), opaque=("managed policy 'arn:aws:iam::aws:policy/X'",)))
        == "unknown"
    )


def test_iam_evaluate_resource_policy_deny_applies_to_the_role() -> None:
    topic = "arn:aws:sns:us-east-1:1:t"
    ssl_only = {
        "Effect": "Deny",
        "Principal": "*",
        "Action": "sns:Publish",
        "Resource": topic,
        "Condition": {"Bool": {"aws:SecureTransport": "false"}},
    }
    deny_all = {**ssl_only, "Condition": {}}
    policies = role(allow("sns:Publish", topic))

    assert decide(req("sns:Publish", topic), policies, [ssl_only]) == "allow"  # the SDK uses TLS
    assert decide(req("sns:Publish", topic), policies, [deny_all]) == "deny"


def test_iam_evaluate_kms_needs_the_key_policy_to_enable_iam() -> None:
    key = f"arn:aws:kms:us-east-1:{ACCOUNT}:key/k"
    request = req("kms:Decrypt", key)
    grant = role(allow(["kms:Decrypt", "kms:GenerateDataKey*"], key))
    root = {
        "Effect": "Allow",
        "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"},
        "Action": "kms:*",
        "Resource": "*",
    }
    service_only = {
        "Effect": "Allow",
        "Principal": {"Service": "cloudwatch.amazonaws.com"},
        "Action": "kms:*",
        "Resource": "*",
    }
    names_role = {"Effect": "Allow", "Principal": {"AWS": ROLE}, "Action": "kms:Decrypt", "Resource": "*"}

    assert decide(request, grant, [root]) == "allow"
    assert decide(request, role(), [root]) == "deny"  # the key policy defers to IAM, which grants nothing
    assert decide(request, grant, [service_only]) == "deny"
    assert decide(request, role(), [names_role]) == "allow"
    assert decide(request, grant) == "unknown"  # no key policy in the template
