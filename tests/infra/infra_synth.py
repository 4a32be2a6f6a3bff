"""In-process synthesis of the stack for the infra tests, and lookups on the result.

(A module with a unique name rather than conftest.py, so test modules can import it without
clashing with other directories' conftest modules.)
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from aws_cdk.assertions import Template

from infra.stack import build_app

ROLE_A = "arn:aws:iam::123456789012:role/SagewardenTrainingA"
ROLE_B = "arn:aws:iam::123456789012:role/ml/SagewardenTrainingB"
FULL_CONTEXT: dict[str, Any] = {
    "allowedRoleArns": [ROLE_A, ROLE_B],
    "alertEmail": "ml-oncall@example.com",
    "checkpointBuckets": ["team-checkpoints"],
    "jobPrefix": "ml7",
    "policyDefaults": {"max_restarts": 5},
    "logSubscription": False,
}
KMS_KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
TABLE_KEY = "arn:aws:kms:us-east-1:123456789012:key/abcd1234-12ab-34cd-56ef-0987654321ab"
ADMIN_ROLE = "arn:aws:iam::123456789012:role/platform/PlatformAdmin"
# The opt-ins: the account-wide API Gateway CloudWatch role, an SSE-KMS checkpoint bucket, admins,
# a customer-managed table key, reserved concurrency, checkpoint retention and reads scoped to owners.
OPT_IN_CONTEXT: dict[str, Any] = {
    "allowedRoleArns": [ROLE_A],
    "checkpointBuckets": ["team-checkpoints"],
    "checkpointKmsKeyArns": [KMS_KEY],
    "apiGatewayAccountRole": True,
    "tracing": True,
    "adminRoleArns": [ADMIN_ROLE],
    "tableKmsKeyArn": TABLE_KEY,
    "reservedConcurrency": "true",
    "checkpointRetention": True,
    "readScope": "owner",
}
# A region without an API Gateway CloudWatch role, and the account setting left alone.
NO_API_LOGS_CONTEXT: dict[str, Any] = {"allowedRoleArns": [ROLE_A], "apiLogging": False}


@dataclass
class SynthResult:
    """One synthesized configuration: the template plus what cdk-nag reported."""

    context: dict[str, Any]
    outdir: Path
    template: Template
    raw: dict[str, Any]
    synth_error: str | None
    violations: list[dict[str, Any]] = field(default_factory=list)

    # --- lookups -----------------------------------------------------------------------------
    def resources(self, type_: str) -> dict[str, dict[str, Any]]:
        return {k: r for k, r in self.raw["Resources"].items() if r["Type"] == type_}

    def one(self, type_: str) -> tuple[str, dict[str, Any]]:
        found = self.resources(type_)
        assert len(found) == 1, f"expected one {type_}, found {sorted(found)}"
        return next(iter(found.items()))

    def function_by_handler(self, handler: str) -> tuple[str, dict[str, Any]]:
        matches = [
            (k, r)
            for k, r in self.resources("AWS::Lambda::Function").items()
            if r["Properties"].get("Handler") == handler
        ]
        assert len(matches) == 1, f"expected one function with handler {handler}"
        return matches[0]

    def role_of(self, function: dict[str, Any]) -> str:
        return str(function["Properties"]["Role"]["Fn::GetAtt"][0])

    def statements_of_role(self, role_id: str) -> list[dict[str, Any]]:
        """Every statement of every AWS::IAM::Policy attached to the role."""
        statements = []
        for policy in self.resources("AWS::IAM::Policy").values():
            if {"Ref": role_id} in policy["Properties"].get("Roles", []):
                statements.extend(policy["Properties"]["PolicyDocument"]["Statement"])
        return statements

    def all_statements(self) -> list[dict[str, Any]]:
        return [
            s
            for policy in self.resources("AWS::IAM::Policy").values()
            for s in policy["Properties"]["PolicyDocument"]["Statement"]
        ]

    def routes(self) -> set[tuple[str, str]]:
        """(HTTP method, path) of every API method, rebuilt from the Resource tree."""
        resources = self.resources("AWS::ApiGateway::Resource")

        def path_of(ref: dict[str, Any]) -> str:
            if "Fn::GetAtt" in ref:  # the root resource
                return ""
            res = resources[ref["Ref"]]["Properties"]
            return f"{path_of(res['ParentId'])}/{res['PathPart']}"

        return {
            (m["Properties"]["HttpMethod"], path_of(m["Properties"]["ResourceId"]) or "/")
            for m in self.resources("AWS::ApiGateway::Method").values()
        }


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def synthesize(context: dict[str, Any], outdir: Path) -> SynthResult:
    app, stack = build_app(context=context, outdir=str(outdir))
    synth_error = None
    try:
        app.synth()
        template = Template.from_stack(stack)  # reuses the assembly synthesized above
    except RuntimeError as exc:  # cdk-nag findings fail synth; the template is still written
        synth_error = str(exc)
        template = Template.from_json(json.loads((outdir / f"{stack.stack_name}.template.json").read_text()))
    violations: list[dict[str, Any]] = []
    report_path = outdir / "validation-report.json"
    if report_path.exists():
        report = json.loads(report_path.read_text())
        for plugin in report.get("pluginReports", []):
            violations.extend(plugin.get("violations", []))
    return SynthResult(
        context=context,
        outdir=outdir,
        template=template,
        raw=dict(template.to_json()),
        synth_error=synth_error,
        violations=violations,
    )


def joined(value: Any, *, strict: bool = True) -> str:
    """An ARN or name with its intrinsics rendered as text: Fn::Join joined, Ref and Fn::GetAtt as
    ``${...}``, e.g. 'arn:${AWS::Partition}:sagemaker:...'. Another intrinsic fails the test
    (`strict`) or is rendered as ``${<its name>}``."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return "${" + str(value["Ref"]) + "}"
    if "Fn::GetAtt" in value:
        return "${" + ".".join(value["Fn::GetAtt"]) + "}"
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(joined(p, strict=strict) for p in parts)
    if strict:
        raise AssertionError(f"unexpected intrinsic {value!r}")
    return "${" + next(iter(value)) + "}"
