"""The synthesized template's IAM, resolved against the drill's account.

`resolve` evaluates intrinsics (unknown, never a guess) and `TemplateIam` collects each function's
identity and resource-based policies. Why: docs/deploy.md (*IAM proven by replay*)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


class _Unknown:
    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<unknown>"


UNKNOWN: Any = _Unknown()
_NO_VALUE = object()  # AWS::NoValue: dropped from lists and objects

PSEUDO = ("AWS::Region", "AWS::AccountId", "AWS::Partition", "AWS::URLSuffix", "AWS::StackName")


@dataclass(frozen=True)
class PhysicalNames:
    """Physical names of the template's resources in one account.

    ``overrides`` pins ``Ref``/``GetAtt`` values of logical ids (``{"Topic": {"Ref": arn}}``);
    other resources of the types below get deterministic names; anything else is unknown.
    """

    region: str
    account: str
    partition: str = "aws"
    stack_name: str = "Sagewarden"
    overrides: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def pseudo(self, name: str) -> Any:
        return {
            "AWS::Region": self.region,
            "AWS::AccountId": self.account,
            "AWS::Partition": self.partition,
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": self.stack_name,
        }.get(name, UNKNOWN)

    def _arn(self, service: str, resource: str, *, regional: bool = True) -> str:
        region, account = (self.region, self.account) if regional else ("", self.account)
        return f"arn:{self.partition}:{service}:{region}:{account}:{resource}"

    def attribute(self, logical: str, res: Mapping[str, Any], attr: str, resources: Mapping[str, Any]) -> Any:
        """``Ref`` (attr "Ref") or ``Fn::GetAtt`` of one resource."""
        pinned = self.overrides.get(logical, {})
        if attr in pinned:
            return pinned[attr]
        props = res.get("Properties", {})
        kind = res.get("Type", "")

        def named(prop: str, default: str) -> Any:
            value = resolve(props[prop], self, resources) if prop in props else default
            return value

        if kind == "AWS::DynamoDB::Table":
            name = pinned.get("Ref") or named("TableName", f"{self.stack_name}-{logical}")
            return {"Ref": name, "Arn": _arn_or_unknown(self, "dynamodb", "table/{}", name)}.get(
                attr, UNKNOWN
            )
        if kind == "AWS::SNS::Topic":
            name = named("TopicName", f"{self.stack_name}-{logical}")
            arn = _arn_or_unknown(self, "sns", "{}", name)
            return {"Ref": arn, "TopicArn": arn, "TopicName": name}.get(attr, UNKNOWN)
        if kind == "AWS::SQS::Queue":
            name = named("QueueName", f"{self.stack_name}-{logical}")
            if name is UNKNOWN:
                return UNKNOWN
            url = f"https://sqs.{self.region}.amazonaws.com/{self.account}/{name}"
            return {"Ref": url, "QueueUrl": url, "QueueName": name, "Arn": self._arn("sqs", name)}.get(
                attr, UNKNOWN
            )
        if kind == "AWS::KMS::Key":
            key_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.account}/{self.region}/{logical}"))
            return {"Ref": key_id, "KeyId": key_id, "Arn": self._arn("kms", f"key/{key_id}")}.get(
                attr, UNKNOWN
            )
        if kind == "AWS::Logs::LogGroup":
            name = named("LogGroupName", f"{self.stack_name}-{logical}")
            if name is UNKNOWN:
                return UNKNOWN
            # The LogGroup's Arn attribute carries the trailing ":*".
            return {"Ref": name, "Arn": self._arn("logs", f"log-group:{name}:*")}.get(attr, UNKNOWN)
        if kind == "AWS::IAM::Role":
            name = named("RoleName", f"{self.stack_name}-{logical}")
            if name is UNKNOWN:
                return UNKNOWN
            arn = f"arn:{self.partition}:iam::{self.account}:role/{name}"
            return {"Ref": name, "Arn": arn, "RoleId": f"AROA{logical.upper()[:17]}"}.get(attr, UNKNOWN)
        if kind == "AWS::Lambda::Function":
            name = named("FunctionName", f"{self.stack_name}-{logical}")
            if name is UNKNOWN:
                return UNKNOWN
            return {"Ref": name, "Arn": self._arn("lambda", f"function:{name}")}.get(attr, UNKNOWN)
        if kind == "AWS::S3::Bucket":
            name = named("BucketName", f"{self.stack_name}-{logical}".lower())
            if name is UNKNOWN:
                return UNKNOWN
            return {"Ref": name, "Arn": f"arn:{self.partition}:s3:::{name}"}.get(attr, UNKNOWN)
        return UNKNOWN


def _arn_or_unknown(names: PhysicalNames, service: str, pattern: str, name: Any) -> Any:
    if name is UNKNOWN:
        return UNKNOWN
    if isinstance(name, str) and name.startswith("arn:"):
        return name
    return names._arn(service, pattern.format(name))


_SUB = re.compile(r"\$\{([^}]*)\}")


def resolve(value: Any, names: PhysicalNames, resources: Mapping[str, Any]) -> Any:
    """Evaluate intrinsics in ``value``; :data:`UNKNOWN` where that is impossible."""
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, list):
        items = [resolve(v, names, resources) for v in value]
        return [v for v in items if v is not _NO_VALUE]
    if not isinstance(value, Mapping):
        return UNKNOWN
    if len(value) == 1:
        ((fn, arg),) = value.items()
        if fn == "Ref":
            if arg == "AWS::NoValue":
                return _NO_VALUE
            if arg in PSEUDO:
                return names.pseudo(arg)
            if arg in resources:
                return names.attribute(arg, resources[arg], "Ref", resources)
            return UNKNOWN  # a template parameter: its value is chosen at deploy time
        if fn == "Fn::GetAtt":
            logical, attr = arg.split(".", 1) if isinstance(arg, str) else arg
            if logical not in resources:
                return UNKNOWN
            return names.attribute(logical, resources[logical], attr, resources)
        if fn == "Fn::Join":
            sep, parts = arg
            parts = resolve(parts, names, resources)
            if parts is UNKNOWN or any(not isinstance(p, str) for p in parts):
                return UNKNOWN
            return str(sep).join(parts)
        if fn == "Fn::Sub":
            return _sub(arg, names, resources)
        if fn == "Fn::Select":
            index, items = resolve(arg[0], names, resources), resolve(arg[1], names, resources)
            if not isinstance(items, list) or index is UNKNOWN:
                return UNKNOWN
            i = int(index)
            return items[i] if 0 <= i < len(items) else UNKNOWN
        if fn == "Fn::Split":
            sep, text = arg[0], resolve(arg[1], names, resources)
            return text.split(sep) if isinstance(text, str) else UNKNOWN
        if fn.startswith("Fn::") or fn == "Condition":
            return UNKNOWN  # Fn::If, Fn::ImportValue, Fn::GetAZs, ...: not modelled
    out = {k: resolve(v, names, resources) for k, v in value.items()}
    return {k: v for k, v in out.items() if v is not _NO_VALUE}


def _sub(arg: Any, names: PhysicalNames, resources: Mapping[str, Any]) -> Any:
    text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])
    unknown = False

    def replace(m: re.Match[str]) -> str:
        nonlocal unknown
        ref = m.group(1)
        if ref.startswith("!"):
            return "${" + ref[1:] + "}"
        if ref in variables:
            value = resolve(variables[ref], names, resources)
        elif "." in ref:
            value = resolve({"Fn::GetAtt": ref.split(".", 1)}, names, resources)
        else:
            value = resolve({"Ref": ref}, names, resources)
        if not isinstance(value, str):
            unknown = True
            return ""
        return value

    result = _SUB.sub(replace, text)
    return UNKNOWN if unknown else result


def is_known(value: Any) -> bool:
    """True if ``value`` (after :func:`resolve`) holds no :data:`UNKNOWN` anywhere."""
    if value is UNKNOWN:
        return False
    if isinstance(value, list):
        return all(is_known(v) for v in value)
    if isinstance(value, Mapping):
        return all(is_known(v) for v in value.values())
    return True


# -- statements -----------------------------------------------------------------------------------


def _as_tuple(value: Any) -> tuple[Any, ...] | None:
    if value is None:
        return None
    if value is UNKNOWN:
        return (UNKNOWN,)
    return tuple(value) if isinstance(value, list) else (value,)


@dataclass(frozen=True)
class Statement:
    """One policy statement with resolved values (an element may be :data:`UNKNOWN`)."""

    origin: str  # e.g. "AWS::IAM::Policy SupervisorPermissionsHangAlarms..." or "KeyPolicy of X"
    index: int
    effect: str
    sid: str | None
    actions: tuple[Any, ...] | None
    not_actions: tuple[Any, ...] | None
    resources: tuple[Any, ...] | None
    not_resources: tuple[Any, ...] | None
    condition: Any  # resolved Condition mapping, {} when none, or UNKNOWN
    principal: Any = None  # resource-based policies only: "*" or {"AWS": (...), "Service": (...)}
    not_principal: Any = None

    @classmethod
    def parse(
        cls,
        raw: Mapping[str, Any],
        origin: str,
        index: int,
        names: PhysicalNames,
        resources: Mapping[str, Any],
    ) -> Statement:
        r = resolve(dict(raw), names, resources)
        return cls(
            origin=origin,
            index=index,
            effect=str(r.get("Effect", "")),
            sid=r.get("Sid") if isinstance(r.get("Sid"), str) else None,
            actions=_as_tuple(r.get("Action")),
            not_actions=_as_tuple(r.get("NotAction")),
            resources=_as_tuple(r.get("Resource")),
            not_resources=_as_tuple(r.get("NotResource")),
            condition=r.get("Condition", {}) if is_known(r.get("Condition", {})) else UNKNOWN,
            principal=r.get("Principal"),
            not_principal=r.get("NotPrincipal"),
        )

    def label(self) -> str:
        return f"{self.origin} statement {self.sid or '#' + str(self.index)}"

    def render(self) -> str:
        parts = [f"{self.label()}: {self.effect}"]
        for name, value in (
            ("Action", self.actions),
            ("NotAction", self.not_actions),
            ("Resource", self.resources),
            ("NotResource", self.not_resources),
        ):
            if value is not None:
                parts.append(f"{name}={list(value)}")
        if self.condition:
            parts.append(f"Condition={self.condition}")
        return " ".join(parts)


def _statements(doc: Any, origin: str, names: PhysicalNames, resources: Mapping[str, Any]) -> list[Statement]:
    if not isinstance(doc, Mapping):
        return []
    raw = doc.get("Statement", [])
    raw = raw if isinstance(raw, list) else [raw]
    return [Statement.parse(s, origin, i, names, resources) for i, s in enumerate(raw)]


@dataclass
class RolePolicies:
    """A role's identity-based policies. ``opaque`` lists what could not be read (e.g. an AWS
    managed policy, a permissions boundary): any request of the role is then at best unknown."""

    role: str
    arn: str
    statements: list[Statement] = field(default_factory=list)
    opaque: list[str] = field(default_factory=list)


@dataclass
class TemplateIam:
    """The IAM of a synthesized template, resolved with :class:`PhysicalNames`."""

    template: Mapping[str, Any]
    names: PhysicalNames
    roles: dict[str, RolePolicies] = field(default_factory=dict)
    function_roles: dict[str, str] = field(default_factory=dict)  # handler -> role logical id
    functions: dict[str, str] = field(default_factory=dict)  # handler -> function logical id
    resource_policies: dict[str, list[Statement]] = field(default_factory=dict)  # resource ARN -> stmts

    @classmethod
    def load(cls, template: Mapping[str, Any], names: PhysicalNames) -> TemplateIam:
        resources: Mapping[str, Any] = template.get("Resources", {})
        iam = cls(template, names)
        for logical, res in resources.items():
            if res.get("Type") == "AWS::IAM::Role":
                arn = names.attribute(logical, res, "Arn", resources)
                rp = RolePolicies(logical, arn if isinstance(arn, str) else f"<role {logical}>")
                props = res.get("Properties", {})
                for i, inline in enumerate(props.get("Policies", [])):
                    name = inline.get("PolicyName", i)
                    rp.statements += _statements(
                        inline.get("PolicyDocument"), f"{logical} inline policy {name}", names, resources
                    )
                for ref in props.get("ManagedPolicyArns", []):
                    managed = _managed_policy_logical(ref, resources)
                    if managed is None:
                        rp.opaque.append(
                            f"managed policy {resolve(ref, names, resources)!r} (not in the template)"
                        )
                if "PermissionsBoundary" in props:
                    rp.opaque.append("permissions boundary (not evaluated)")
                iam.roles[logical] = rp
        for logical, res in resources.items():
            kind = res.get("Type")
            props = res.get("Properties", {})
            if kind in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
                stmts = _statements(props.get("PolicyDocument"), f"{kind} {logical}", names, resources)
                targets = [_ref(r) for r in props.get("Roles", [])]
                if kind == "AWS::IAM::ManagedPolicy":
                    targets += [
                        role
                        for role, rres in resources.items()
                        if rres.get("Type") == "AWS::IAM::Role"
                        and any(
                            _managed_policy_logical(m, resources) == logical
                            for m in rres.get("Properties", {}).get("ManagedPolicyArns", [])
                        )
                    ]
                for role in targets:
                    if role in iam.roles:
                        iam.roles[role].statements += stmts
            elif kind == "AWS::Lambda::Function":
                fn_role = _getatt_logical(props.get("Role"))
                handler = props.get("Handler")
                if fn_role and isinstance(handler, str):
                    iam.function_roles[handler] = fn_role
                    iam.functions[handler] = logical
            elif kind == "AWS::SNS::TopicPolicy":
                for topic in props.get("Topics", []):
                    arn = resolve(topic, names, resources)
                    iam._add_resource_policy(arn, props.get("PolicyDocument"), f"{kind} {logical}")
            elif kind == "AWS::SQS::QueuePolicy":
                for queue in props.get("Queues", []):
                    q = _ref(queue)
                    arn = names.attribute(q, resources[q], "Arn", resources) if q in resources else UNKNOWN
                    iam._add_resource_policy(arn, props.get("PolicyDocument"), f"{kind} {logical}")
            elif kind == "AWS::KMS::Key":
                arn = names.attribute(logical, res, "Arn", resources)
                iam._add_resource_policy(arn, props.get("KeyPolicy"), f"KeyPolicy of {logical}")
            elif kind == "AWS::S3::BucketPolicy":
                bucket = resolve(props.get("Bucket"), names, resources)
                arn = f"arn:{names.partition}:s3:::{bucket}" if isinstance(bucket, str) else UNKNOWN
                iam._add_resource_policy(arn, props.get("PolicyDocument"), f"{kind} {logical}")
        return iam

    def _add_resource_policy(self, arn: Any, doc: Any, origin: str) -> None:
        if isinstance(arn, str):
            res = self.template.get("Resources", {})
            self.resource_policies.setdefault(arn, []).extend(_statements(doc, origin, self.names, res))

    def role_of(self, handler: str) -> RolePolicies | None:
        role = self.function_roles.get(handler)
        return self.roles.get(role) if role else None


def _ref(value: Any) -> str:
    return str(value["Ref"]) if isinstance(value, Mapping) and "Ref" in value else str(value)


def _getatt_logical(value: Any) -> str | None:
    if isinstance(value, Mapping) and "Fn::GetAtt" in value:
        arg = value["Fn::GetAtt"]
        return str(arg.split(".", 1)[0] if isinstance(arg, str) else arg[0])
    return None


def _managed_policy_logical(value: Any, resources: Mapping[str, Any]) -> str | None:
    name = _ref(value) if isinstance(value, Mapping) and "Ref" in value else None
    if name and resources.get(name, {}).get("Type") == "AWS::IAM::ManagedPolicy":
        return name
    return None


def statements_of(iam: TemplateIam, handler: str) -> Sequence[Statement]:
    role = iam.role_of(handler)
    return role.statements if role else ()
