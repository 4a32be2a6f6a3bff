"""The IAM replay: every recorded call, and the Lambda service's own requests, evaluated against the
template's policies (`check`, `ReplayReport`). Why: docs/deploy.md (*IAM proven by replay*)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from drill.iam.cfn import UNKNOWN, PhysicalNames, Statement, TemplateIam, resolve
from drill.iam.evaluate import Principal, Verdict, action_matches, arn_matches, evaluate, match_statement
from drill.iam.recorder import CallRecorder, RecordedCall
from drill.iam.requests import AccountFacts, AuthorizationRequest, req

SUPERVISOR_HANDLERS = "sagewarden.handlers."
LAMBDA_SERVICE = "lambda-service"


def account_iam(
    template: Mapping[str, Any],
    *,
    region: str,
    account: str,
    table: str,
    topic_arn: str,
    partition: str = "aws",
) -> tuple[TemplateIam, AccountFacts]:
    """The template's IAM with the drill account's physical names, and the account's facts.

    The template's (single) state table is ``table`` and its (single) topic is ``topic_arn``;
    other resources get deterministic names (:class:`~drill.iam.cfn.PhysicalNames`).
    """
    resources = template.get("Resources", {})
    overrides: dict[str, dict[str, str]] = {}
    tables = [k for k, r in resources.items() if r.get("Type") == "AWS::DynamoDB::Table"]
    topics = [k for k, r in resources.items() if r.get("Type") == "AWS::SNS::Topic"]
    if len(tables) == 1:
        overrides[tables[0]] = {
            "Ref": table,
            "Arn": f"arn:{partition}:dynamodb:{region}:{account}:table/{table}",
        }
    if len(topics) == 1:
        overrides[topics[0]] = {
            "Ref": topic_arn,
            "TopicArn": topic_arn,
            "TopicName": topic_arn.rsplit(":", 1)[-1],
        }
    names = PhysicalNames(region=region, account=account, partition=partition, overrides=overrides)
    iam = TemplateIam.load(template, names)
    topic_keys: dict[str, str] = {}
    for logical in topics:
        props = resources[logical].get("Properties", {})
        if "KmsMasterKeyId" not in props:
            continue
        topic = resolve({"Ref": logical}, names, resources)
        key = resolve(props["KmsMasterKeyId"], names, resources)
        if isinstance(topic, str):
            # an alias or a key outside the template stays as written (its key policy is unknown)
            topic_keys[topic] = key if isinstance(key, str) else "<unresolved key>"
    facts = AccountFacts(region=region, account=account, partition=partition, topic_keys=topic_keys)
    return iam, facts


# -- report ---------------------------------------------------------------------------------------

Outcome = Literal["deny", "unknown", "unmapped"]


@dataclass(frozen=True)
class Finding:
    outcome: Outcome
    call: RecordedCall
    verdict: Verdict | None = None
    note: str = ""

    def render(self) -> str:
        head = {"deny": "DENIED", "unknown": "UNKNOWN", "unmapped": "UNMAPPED CALL"}[self.outcome]
        lines = [f"{head}: {self.call.describe()}"]
        if self.verdict is not None:
            lines.append(f"    request:   {self.verdict.request.describe()}")
            lines.append(f"    why:       {self.verdict.reason}")
            closest = self.verdict.statement
            label = "statement" if self.outcome == "unknown" else "closest"
            lines.append(
                f"    {label + ':':<10} {closest.statement.render() if closest else '(the role has no statement)'}"
            )
        if self.note:
            lines.append(f"    note:      {self.note}")
        return "\n".join(lines)


@dataclass(frozen=True)
class Grant:
    """One (action, resource) pair a role's Allow statement grants."""

    role: str
    statement: Statement
    action: str
    resource: str
    used_by: str  # "code", LAMBDA_SERVICE, or "" (a candidate for removal)

    def render(self) -> str:
        return f"{self.action:<34} {self.resource}   ({self.statement.label()})"


@dataclass
class ReplayReport:
    calls: int
    calls_by_function: Mapping[str, int]
    distinct_requests: int
    allowed: int
    findings: list[Finding] = field(default_factory=list)
    grants: list[Grant] = field(default_factory=list)
    roles: Mapping[str, Sequence[str]] = field(default_factory=dict)  # role -> handlers
    recorders: Sequence[CallRecorder] = ()  # what was checked (to check again, e.g. another template)
    template_iam: TemplateIam | None = None  # what it was checked against

    @property
    def denied(self) -> list[Finding]:
        return [f for f in self.findings if f.outcome == "deny"]

    @property
    def unknown(self) -> list[Finding]:
        return [f for f in self.findings if f.outcome == "unknown"]

    @property
    def unmapped(self) -> list[Finding]:
        return [f for f in self.findings if f.outcome == "unmapped"]

    @property
    def candidates_for_removal(self) -> list[Grant]:
        return [g for g in self.grants if not g.used_by]

    def failures(self) -> list[str]:
        return [f"IAM replay: {f.render()}" for f in self.findings]

    def summary(self) -> str:
        return (
            f"IAM replay: {self.calls} calls recorded, {self.distinct_requests} distinct authorization "
            f"requests; {self.allowed} allowed, {len(self.denied)} denied, {len(self.unknown)} unknown, "
            f"{len(self.unmapped)} unmapped; {len(self.candidates_for_removal)} grants no call needed"
        )

    def render(self) -> str:
        lines = [self.summary()]
        for f in self.findings:
            lines += ["", f.render()]
        for role, handlers in sorted(self.roles.items()):
            grants = [g for g in self.grants if g.role == role]
            calls = sum(self.calls_by_function.get(h, 0) for h in handlers)
            lines += ["", f"role {role} ({', '.join(handlers)}; {calls} calls)"]
            for title, kind in (
                ("needed by recorded calls", "code"),
                ("used by the Lambda service for the function", LAMBDA_SERVICE),
                ("candidates for removal (no recorded call needed them)", ""),
            ):
                chosen = [g for g in grants if g.used_by == kind]
                if chosen:
                    lines.append(f"  {title}:")
                    lines += [f"    {line}" for line in _grouped(chosen)]
        return "\n".join(lines)


def _grouped(grants: Sequence[Grant]) -> list[str]:
    """One line per (statement, action): the resources it is granted on."""
    groups: dict[tuple[str, str], list[str]] = {}
    for g in grants:
        groups.setdefault((g.statement.label(), g.action), []).append(g.resource)
    return [f"{action:<30} {', '.join(res)}   ({label})" for (label, action), res in groups.items()]


# -- the check ------------------------------------------------------------------------------------


def _resource_policy(iam: TemplateIam, resource: str) -> Sequence[Statement]:
    found = iam.resource_policies.get(resource)
    if found is None and resource.startswith("arn:") and ":s3:::" in resource and "/" in resource:
        found = iam.resource_policies.get(resource.split("/", 1)[0])  # an object of a bucket with a policy
    return found or ()


def lambda_service_requests(
    iam: TemplateIam, handler: str, facts: AccountFacts
) -> list[AuthorizationRequest]:
    """What the Lambda service does with the function's role: logs, traces, failure destination."""
    resources = iam.template.get("Resources", {})
    logical = iam.functions.get(handler)
    if logical is None:
        return []
    props = resources[logical].get("Properties", {})
    out: list[AuthorizationRequest] = []
    group = resolve((props.get("LoggingConfig") or {}).get("LogGroup"), iam.names, resources)
    if not isinstance(group, str):
        group = f"/aws/lambda/{resolve({'Ref': logical}, iam.names, resources)}"
    stream = facts.arn("logs", f"log-group:{group}:log-stream:2026/01/01/[$LATEST]0123456789abcdef")
    out += [req("logs:CreateLogStream", stream), req("logs:PutLogEvents", stream)]
    if (props.get("TracingConfig") or {}).get("Mode") == "Active":
        out += [req("xray:PutTraceSegments", "*"), req("xray:PutTelemetryRecords", "*")]
    for res in resources.values():
        if res.get("Type") != "AWS::Lambda::EventInvokeConfig":
            continue
        cfg = res.get("Properties", {})
        if cfg.get("FunctionName") != {"Ref": logical}:
            continue
        for when in ("OnFailure", "OnSuccess"):
            dest = resolve(
                ((cfg.get("DestinationConfig") or {}).get(when) or {}).get("Destination"),
                iam.names,
                resources,
            )
            if isinstance(dest, str) and ":sqs:" in dest:
                out.append(req("sqs:SendMessage", dest))
            elif isinstance(dest, str) and ":sns:" in dest:
                out.append(req("sns:Publish", dest))
    return out


def check(
    recorder: CallRecorder,
    iam: TemplateIam,
    *,
    handlers: Iterable[str] | None = None,
    recorders: Sequence[CallRecorder] = (),
) -> ReplayReport:
    """Evaluate every request the recorder saw (and ``recorders``, to pool several runs)."""
    pool = [recorder, *recorders]
    facts = recorder.facts
    supervisor = sorted(
        set(handlers)
        if handlers is not None
        else {h for h in iam.function_roles if h.startswith(SUPERVISOR_HANDLERS)}
    )
    requests: dict[tuple[str, AuthorizationRequest], tuple[RecordedCall, str]] = {}
    for rec in pool:
        for key, call in rec.requests.items():
            requests.setdefault(key, (call, "code"))
    for handler in supervisor:
        for r in lambda_service_requests(iam, handler, facts):
            call = RecordedCall(
                handler, "lambda", "(service)", "the Lambda service acting with the function's role"
            )
            requests.setdefault((handler, r), (call, LAMBDA_SERVICE))

    report = ReplayReport(
        calls=sum(r.calls for r in pool),
        calls_by_function=_sum_counters(r.calls_by_function for r in pool),
        distinct_requests=len(requests),
        allowed=0,
        recorders=pool,
        template_iam=iam,
    )
    for rec in pool:
        for (_, _, operation), call in rec.unmapped.items():
            if not any(f.call == call for f in report.findings):
                note = f"add a row for {call.service}.{operation} to drill/iam/requests.py"
                report.findings.append(Finding("unmapped", call, note=note))

    used: dict[str, list[tuple[AuthorizationRequest, str]]] = {}
    for (handler, request), (call, kind) in requests.items():
        role = iam.role_of(handler)
        if role is None:
            report.findings.append(
                Finding("unknown", call, note=f"no function with handler {handler} in the template")
            )
            continue
        who = Principal(role.arn, facts.account, facts.region, facts.partition)
        verdict = evaluate(request, who, role, _resource_policy(iam, request.resource))
        if verdict.decision == "allow":
            report.allowed += 1
        else:
            note = _hint(request, iam)
            report.findings.append(Finding(verdict.decision, call, verdict, note))
        used.setdefault(role.role, []).append((request, kind))

    roles: dict[str, list[str]] = {}
    for handler in supervisor:
        role_id = iam.function_roles.get(handler)
        if role_id:
            roles.setdefault(role_id, []).append(handler)
    report.roles = roles
    for role_id in roles:
        report.grants += _grants(iam, role_id, used.get(role_id, []))
    return report


def _sum_counters(counters: Iterable[Mapping[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in counters:
        for k, v in c.items():
            out[k] = out.get(k, 0) + v
    return out


def _grants(iam: TemplateIam, role_id: str, used: Sequence[tuple[AuthorizationRequest, str]]) -> list[Grant]:
    out: list[Grant] = []
    by_action: dict[str, list[tuple[AuthorizationRequest, str]]] = {}
    for request, kind in used:
        by_action.setdefault(request.action, []).append((request, kind))
    for st in iam.roles[role_id].statements:
        if st.effect != "Allow":
            continue
        actions = (
            st.actions if st.actions is not None else tuple(f"NotAction:{a}" for a in st.not_actions or ())
        )
        resources = (
            st.resources
            if st.resources is not None
            else tuple(f"NotResource:{r}" for r in st.not_resources or ())
        )
        for action in actions:
            # only the requests whose action this grant's action can match (a cheap test on the
            # few distinct actions) are matched in full: a large drill records thousands
            candidates = [
                pair
                for name, pairs in by_action.items()
                if not isinstance(action, str)
                or action.startswith("NotAction:")
                or action_matches(action, name)
                for pair in pairs
            ]
            for resource in resources:
                kinds = {kind for request, kind in candidates if _pair_covers(st, action, resource, request)}
                used_by = "code" if "code" in kinds else LAMBDA_SERVICE if kinds else ""
                out.append(Grant(role_id, st, str(action), str(resource), used_by))
    return out


def _pair_covers(st: Statement, action: Any, resource: Any, request: AuthorizationRequest) -> bool:
    if (
        action is UNKNOWN
        or resource is UNKNOWN
        or not isinstance(action, str)
        or not isinstance(resource, str)
    ):
        return False
    if action.startswith("NotAction:") or resource.startswith("NotResource:"):
        return match_statement(st, request, request.context_dict()).applies is not False
    if not action_matches(action, request.action) or not arn_matches(resource, request.resource):
        return False
    return match_statement(st, request, request.context_dict()).applies is not False


def _hint(request: AuthorizationRequest, iam: TemplateIam) -> str:
    if request.action == "iam:PassRole":
        return (
            "is the role in the deployment's allowedRoleArns? The drill's template is synthesized "
            "with drill.account.local.DEPLOY_CONTEXT (use drill.account.local.drill_template())"
        )
    return ""
