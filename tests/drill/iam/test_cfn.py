"""Reading a template's IAM for the replay (drill/iam/cfn.py): intrinsics, roles, resource policies."""

from __future__ import annotations

from typing import Any

import pytest

from drill.iam.cfn import UNKNOWN, PhysicalNames, TemplateIam, resolve

ACCOUNT = "123456789012"
NAMES = PhysicalNames(region="eu-west-1", account=ACCOUNT, overrides={"Table": {"Ref": "state"}})
RESOURCES: dict[str, Any] = {
    "Table": {"Type": "AWS::DynamoDB::Table", "Properties": {}},
    "Key": {"Type": "AWS::KMS::Key", "Properties": {"KeyPolicy": {"Statement": []}}},
    "Queue": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "dlq"}},
    "Custom": {"Type": "Custom::Thing", "Properties": {}},
}


def r(value: Any) -> Any:
    return resolve(value, NAMES, RESOURCES)


def test_iam_cfn_pseudo_parameters_and_join() -> None:
    joined = {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":logs:",
                {"Ref": "AWS::Region"},
                ":",
                {"Ref": "AWS::AccountId"},
                ":x",
            ],
        ]
    }
    assert r(joined) == f"arn:aws:logs:eu-west-1:{ACCOUNT}:x"
    assert r({"Ref": "AWS::URLSuffix"}) == "amazonaws.com"


def test_iam_cfn_ref_and_getatt_use_the_account_names() -> None:
    assert r({"Ref": "Table"}) == "state"
    assert r({"Fn::GetAtt": ["Table", "Arn"]}) == f"arn:aws:dynamodb:eu-west-1:{ACCOUNT}:table/state"
    assert r({"Fn::GetAtt": "Queue.Arn"}) == f"arn:aws:sqs:eu-west-1:{ACCOUNT}:dlq"
    assert r({"Fn::GetAtt": ["Key", "Arn"]}).startswith(f"arn:aws:kms:eu-west-1:{ACCOUNT}:key/")


def test_iam_cfn_sub_select_split() -> None:
    assert r({"Fn::Sub": "arn:${AWS::Partition}:s3:::${Bucket}/*"}) is UNKNOWN  # Bucket: a parameter
    assert r({"Fn::Sub": ["${T}/index/*", {"T": {"Fn::GetAtt": ["Table", "Arn"]}}]}).endswith(
        "table/state/index/*"
    )
    assert r({"Fn::Sub": "${Table.Arn}-${!Literal}"}).endswith("table/state-${Literal}")
    assert r({"Fn::Select": [1, {"Fn::Split": [",", "a,b,c"]}]}) == "b"


def test_iam_cfn_what_cannot_be_resolved_is_unknown() -> None:
    assert r({"Ref": "SomeParameter"}) is UNKNOWN
    assert r({"Fn::GetAtt": ["Custom", "Arn"]}) is UNKNOWN
    assert r({"Fn::ImportValue": "x"}) is UNKNOWN
    assert r({"Fn::Join": ["", ["arn:", {"Ref": "SomeParameter"}]]}) is UNKNOWN
    assert r([{"Ref": "AWS::NoValue"}, "kept"]) == ["kept"]


@pytest.mark.claim(
    "The checker answers *unknown* for a role with a permissions boundary or an AWS managed policy, and for a condition on a key the table does not model"
)
def test_iam_cfn_roles_collect_attached_inline_and_managed_policies() -> None:
    template: dict[str, Any] = {
        "Resources": {
            "Role": {
                "Type": "AWS::IAM::Role",
                "Properties": {
                    "Policies": [
                        {
                            "PolicyName": "inline",
                            "PolicyDocument": {
                                "Statement": [{"Effect": "Allow", "Action": "a:A", "Resource": "*"}]
                            },
                        }
                    ],
                    "ManagedPolicyArns": [
                        {"Ref": "Managed"},
                        "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
                    ],
                },
            },
            "Attached": {
                "Type": "AWS::IAM::Policy",
                "Properties": {
                    "PolicyDocument": {"Statement": [{"Effect": "Allow", "Action": "b:B", "Resource": "*"}]},
                    "Roles": [{"Ref": "Role"}],
                },
            },
            "Managed": {
                "Type": "AWS::IAM::ManagedPolicy",
                "Properties": {
                    "PolicyDocument": {"Statement": {"Effect": "Deny", "Action": "c:C", "Resource": "*"}}
                },
            },
            "Fn": {
                "Type": "AWS::Lambda::Function",
                "Properties": {"Handler": "pkg.handler", "Role": {"Fn::GetAtt": ["Role", "Arn"]}},
            },
        }
    }
    iam = TemplateIam.load(template, PhysicalNames(region="us-east-1", account=ACCOUNT))
    role = iam.role_of("pkg.handler")

    assert role is not None
    assert sorted(a for s in role.statements for a in s.actions or ()) == ["a:A", "b:B", "c:C"]
    # the AWS managed policy is not in the template: it is opaque, never assumed empty
    assert len(role.opaque) == 1 and "AWSLambdaBasicExecutionRole" in role.opaque[0]


@pytest.mark.claim(
    "The checker answers *unknown* for a role with a permissions boundary or an AWS managed policy, and for a condition on a key the table does not model"
)
def test_iam_cfn_a_permissions_boundary_makes_the_role_unknown() -> None:
    """README: the checker answers *unknown* for a role with a permissions boundary (it does not
    evaluate it), even where the role's own policy allows the request."""
    from drill.iam.evaluate import Principal, evaluate
    from drill.iam.requests import req

    def template(boundary: bool) -> dict[str, Any]:
        props: dict[str, Any] = {
            "Policies": [
                {
                    "PolicyName": "inline",
                    "PolicyDocument": {
                        "Statement": [{"Effect": "Allow", "Action": "sns:Publish", "Resource": "*"}]
                    },
                }
            ]
        }
        if boundary:
            props["PermissionsBoundary"] = "arn:aws:iam::123456789012:policy/boundary"
        return {
            "Resources": {
                "Role": {"Type": "AWS::IAM::Role", "Properties": props},
                "Fn": {
                    "Type": "AWS::Lambda::Function",
                    "Properties": {"Handler": "pkg.handler", "Role": {"Fn::GetAtt": ["Role", "Arn"]}},
                },
            }
        }

    names = PhysicalNames(region="us-east-1", account=ACCOUNT)
    who = Principal(f"arn:aws:iam::{ACCOUNT}:role/fn", ACCOUNT, "us-east-1")
    request = req("sns:Publish", f"arn:aws:sns:us-east-1:{ACCOUNT}:alerts")
    decisions = {}
    for boundary in (False, True):
        role = TemplateIam.load(template(boundary), names).role_of("pkg.handler")
        assert role is not None
        decisions[boundary] = evaluate(request, who, role, []).decision
    assert decisions == {False: "allow", True: "unknown"}
