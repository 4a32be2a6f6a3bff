"""Narrow, reasoned acknowledgements of cdk-nag (v3) findings.

cdk-nag 3 reports through CDK's policy-validation framework; a finding is acknowledged with
``Validations.of(construct).acknowledge(...)`` on the construct that owns the resource (the
acknowledgement covers that construct's children). Findings of rules that report several
findings per resource (IAM4, IAM5) are acknowledged one by one as ``Rule[finding]``, e.g.
``AwsSolutions-IAM5[Resource::*]``, so a new wildcard added later still fails the check.
"""

from __future__ import annotations

from collections.abc import Iterable

from aws_cdk import Acknowledgment, Stack, Validations
from constructs import IConstruct


def acknowledge(scope: IConstruct, rule: str, reason: str, findings: Iterable[str] = ()) -> None:
    """Acknowledge ``rule`` on ``scope`` (and its children), or only the listed findings."""
    findings = list(findings)
    ids = [f"{rule}[{finding}]" for finding in findings] if findings else [rule]
    Validations.of(scope).acknowledge(*(Acknowledgment(id=rule_id, reason=reason) for rule_id in ids))


def rendered(scope: IConstruct, value: object) -> str:
    """A value as cdk-nag renders it in finding ids.

    Intrinsics are flattened the way cdk-nag does: ``{"Ref": "X"}`` -> ``<X>``,
    ``{"Fn::GetAtt": ["Y", "Arn"]}`` -> ``<Y.Arn>``, ``Fn::Join`` concatenated.
    """
    return _flatten(Stack.of(scope).resolve(value))


def resource_finding(scope: IConstruct, resource: object) -> str:
    """The IAM5 finding id suffix of a wildcard resource, e.g. ``Resource::arn:<AWS::Partition>:...``."""
    return f"Resource::{rendered(scope, resource)}"


def _flatten(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        ((name, arg),) = value.items()
        if name == "Ref":
            return f"<{arg}>"
        if name == "Fn::GetAtt":
            return f"<{arg[0]}.{arg[1]}>"
        if name == "Fn::Join":
            separator, parts = arg
            return str(separator).join(_flatten(part) for part in parts)
    raise ValueError(f"cannot render {value!r} as a cdk-nag finding")
