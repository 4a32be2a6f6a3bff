"""IAM policy evaluation for one authorization request: allow, deny or unknown.

Follows the IAM User Guide's evaluation logic; a Deny or condition it cannot decide is unknown,
never allow. Why: docs/deploy.md (*IAM proven by replay*)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

from drill.iam.cfn import UNKNOWN, RolePolicies, Statement
from drill.iam.requests import AuthorizationRequest

Tri = bool | None  # None: unknown
Decision = Literal["allow", "deny", "unknown"]


@dataclass(frozen=True)
class Principal:
    """Who makes the request: a role of ``account``."""

    role_arn: str
    account: str
    region: str
    partition: str = "aws"

    @property
    def root(self) -> str:
        return f"arn:{self.partition}:iam::{self.account}:root"


@dataclass(frozen=True)
class Match:
    """How one statement relates to a request."""

    statement: Statement
    applies: Tri
    action: Tri
    resource: Tri
    condition: Tri
    reason: str = ""

    def score(self) -> tuple[int, int, int]:
        """Closeness to applying, for 'the statement that came closest'."""
        return (self.action is not False, self.resource is not False, self.condition is not False)


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    request: AuthorizationRequest
    reason: str
    statement: Match | None = None  # the deciding statement, or the closest one when denied
    extra: tuple[str, ...] = field(default_factory=tuple)


# -- matching -------------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _glob(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(body + r"\Z", re.DOTALL | (re.IGNORECASE if ignore_case else 0))


def glob_match(pattern: str, value: str, *, ignore_case: bool = False) -> bool:
    return _glob(pattern, ignore_case).match(value) is not None


def action_matches(pattern: str, action: str) -> bool:
    return glob_match(pattern, action, ignore_case=True)


@lru_cache(maxsize=4096)
def _resource_pattern(pattern: str) -> re.Pattern[str]:
    out = []
    for i, c in enumerate(pattern):
        if c == "*":
            # "If the * wildcard is the last character of a resource ARN segment, it can expand
            # to match beyond the colon boundaries" (IAM User Guide, Resource element).
            out.append(".*" if i + 1 == len(pattern) or pattern[i + 1] == ":" else "[^:]*")
        elif c == "?":
            out.append("[^:]")
        else:
            out.append(re.escape(c))
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def arn_matches(pattern: str, value: str) -> bool:
    """IAM ``Resource`` matching: ``*``/``?`` within a colon-separated segment, a segment-final
    ``*`` also beyond it; case-sensitive."""
    return _resource_pattern(pattern).match(value) is not None


def arn_like(pattern: str, value: str) -> bool:
    """``ArnLike``/``ArnEquals``: each of the six colon-separated ARN parts matched on its own."""
    p, v = pattern.split(":", 5), value.split(":", 5)
    if len(p) < 6 or len(v) < 6:
        return arn_matches(pattern, value)
    return all(glob_match(a, b) for a, b in zip(p, v, strict=True))


def _any(results: Sequence[Tri]) -> Tri:
    if any(r is True for r in results):
        return True
    return None if any(r is None for r in results) else False


def _all(results: Sequence[Tri]) -> Tri:
    if any(r is False for r in results):
        return False
    return None if any(r is None for r in results) else True


def _element_match(values: tuple[Any, ...], fn: Callable[[str], bool]) -> Tri:
    results: list[Tri] = []
    for v in values:
        if v is UNKNOWN or not isinstance(v, str) or "${" in v:
            results.append(None)  # unresolved intrinsic, or a policy variable
        else:
            results.append(fn(v))
    return _any(results)


def _not(value: Tri) -> Tri:
    return None if value is None else not value


def action_applies(st: Statement, action: str) -> Tri:
    if st.actions is not None:
        return _element_match(st.actions, lambda p: action_matches(p, action))
    if st.not_actions is not None:
        return _not(_element_match(st.not_actions, lambda p: action_matches(p, action)))
    return False


def resource_applies(st: Statement, resource: str) -> Tri:
    if st.resources is not None:
        return _element_match(st.resources, lambda p: arn_matches(p, resource))
    if st.not_resources is not None:
        return _not(_element_match(st.not_resources, lambda p: arn_matches(p, resource)))
    return None  # no Resource element (e.g. a trust policy): not modelled here


# -- conditions -----------------------------------------------------------------------------------


def _num(x: str) -> float | None:
    try:
        return float(x)
    except ValueError:
        return None


def _numeric(op: Callable[[float, float], bool]) -> Callable[[str, str], Tri]:
    def cmp(policy: str, value: str) -> Tri:
        a, b = _num(value), _num(policy)
        return None if a is None or b is None else op(a, b)

    return cmp


# base operator -> (compare(policy value, context value), negated)
_OPERATORS: dict[str, tuple[Callable[[str, str], Tri], bool]] = {
    "StringEquals": (lambda p, v: p == v, False),
    "StringNotEquals": (lambda p, v: p == v, True),
    "StringEqualsIgnoreCase": (lambda p, v: p.lower() == v.lower(), False),
    "StringNotEqualsIgnoreCase": (lambda p, v: p.lower() == v.lower(), True),
    "StringLike": (lambda p, v: glob_match(p, v), False),
    "StringNotLike": (lambda p, v: glob_match(p, v), True),
    "ArnEquals": (arn_like, False),
    "ArnLike": (arn_like, False),
    "ArnNotEquals": (arn_like, True),
    "ArnNotLike": (arn_like, True),
    "NumericEquals": (_numeric(lambda a, b: a == b), False),
    "NumericNotEquals": (_numeric(lambda a, b: a == b), True),
    "NumericLessThan": (_numeric(lambda a, b: a < b), False),
    "NumericLessThanEquals": (_numeric(lambda a, b: a <= b), False),
    "NumericGreaterThan": (_numeric(lambda a, b: a > b), False),
    "NumericGreaterThanEquals": (_numeric(lambda a, b: a >= b), False),
    "Bool": (lambda p, v: p.lower() == v.lower(), False),
}


def _policy_values(raw: Any) -> list[str] | None:
    items = raw if isinstance(raw, list) else [raw]
    out = []
    for item in items:
        if isinstance(item, bool):
            out.append("true" if item else "false")
        elif isinstance(item, str | int | float):
            out.append(str(item))
        else:
            return None
    return out


def condition_applies(condition: Any, context: Mapping[str, tuple[str, ...]]) -> tuple[Tri, str]:
    """Evaluate a Condition element against a request context (lower-cased key names)."""
    if condition is UNKNOWN or not isinstance(condition, Mapping):
        return None, "condition holds an unresolved value"
    results: list[Tri] = []
    reasons: list[str] = []
    for operator, keys in condition.items():
        qualifier, _, base = operator.rpartition(":")
        if_exists = base.endswith("IfExists")
        base = base.removesuffix("IfExists")
        if not isinstance(keys, Mapping):
            return None, f"malformed condition {operator}"
        for key, raw in keys.items():
            is_null = base == "Null" and not qualifier and not if_exists
            if not is_null and (
                base not in _OPERATORS or qualifier not in ("", "ForAllValues", "ForAnyValue")
            ):
                results.append(None)
                reasons.append(f"condition operator {operator} is not modelled")
                continue
            values = context.get(str(key).lower())
            pvals = _policy_values(raw)
            if pvals is None or any("${" in p for p in pvals):
                results.append(None)
                reasons.append(f"{operator} {key}: policy variables/unresolved values are not modelled")
                continue
            if values is None:
                results.append(None)
                reasons.append(f"condition key {key} is not modelled for this request")
                continue
            if is_null:
                expect_absent = pvals[0].lower() == "true"
                results.append((len(values) == 0) == expect_absent)
                continue
            compare, negated = _OPERATORS[base]

            def one(v: str, compare: Callable[[str, str], Tri] = compare, pvals: list[str] = pvals) -> Tri:
                return _any([compare(p, v) for p in pvals])

            def f(v: str, negated: bool = negated, one: Callable[[str], Tri] = one) -> Tri:
                return _not(one(v)) if negated else one(v)

            if not values:  # modelled, absent from the request
                if if_exists or qualifier == "ForAllValues":
                    results.append(True)
                elif qualifier == "ForAnyValue":
                    results.append(False)
                else:
                    results.append(negated)
                continue
            if qualifier == "ForAnyValue":
                results.append(_any([f(v) for v in values]))
            elif qualifier == "ForAllValues":
                results.append(_all([f(v) for v in values]))
            elif len(values) == 1:
                results.append(f(values[0]))
            else:
                results.append(None)
                reasons.append(f"{operator} on multi-valued key {key} without ForAllValues/ForAnyValue")
    return _all(results), "; ".join(reasons)


# -- statements and policies ----------------------------------------------------------------------


def with_globals(request: AuthorizationRequest, principal: Principal) -> dict[str, tuple[str, ...]]:
    ctx: dict[str, tuple[str, ...]] = {
        "aws:securetransport": ("true",),
        "aws:requestedregion": (principal.region,),
        "aws:principalaccount": (principal.account,),
    }
    ctx.update(request.context_dict())
    return ctx


def match_statement(
    st: Statement, request: AuthorizationRequest, context: Mapping[str, tuple[str, ...]]
) -> Match:
    action = action_applies(st, request.action)
    if action is False:
        return Match(st, False, action, None, None)
    resource = resource_applies(st, request.resource)
    if resource is False:
        return Match(st, False, action, resource, None)
    condition, reason = condition_applies(st.condition, context) if st.condition else (True, "")
    applies = _all([action, resource, condition])
    if applies is None and not reason:
        reason = "an Action/Resource element holds an unresolved value or a policy variable"
    return Match(st, applies, action, resource, condition, reason)


def _principal_values(principal: Any) -> list[Any] | None:
    """AWS principals of a resource-policy statement, ["*"] for everyone, None if unreadable."""
    if principal == "*":
        return ["*"]
    if isinstance(principal, Mapping):
        out: list[Any] = []
        for kind, value in principal.items():
            items = value if isinstance(value, list) else [value]
            if kind == "AWS":
                out += items
        return out
    return None


def principal_applies(st: Statement, who: Principal, *, account_counts: bool) -> Tri:
    """Does a resource-policy statement name ``who``?

    ``account_counts``: whether naming the account (root / account id) counts. It does for
    Deny (it covers every principal of the account) and for a KMS key policy's Allow (it
    enables the account's IAM policies); an Allow to the account in another resource policy
    only defers to IAM policies, so it does not count there.
    """
    if st.not_principal is not None:
        return None  # NotPrincipal is not modelled
    values = _principal_values(st.principal)
    if values is None:
        return False  # e.g. {"Service": ...} only
    results: list[Tri] = []
    for v in values:
        if v is UNKNOWN or not isinstance(v, str):
            results.append(None)
        elif v == "*" or v == who.role_arn:
            results.append(True)
        elif v in (who.root, who.account):
            results.append(account_counts)
        else:
            results.append(False)
    return _any(results)


def evaluate(
    request: AuthorizationRequest,
    who: Principal,
    identity: RolePolicies,
    resource_policy: Sequence[Statement] = (),
) -> Verdict:
    """The IAM decision for one request made by ``identity``'s role."""
    ctx = with_globals(request, who)
    identity_matches = [match_statement(s, request, ctx) for s in identity.statements]
    resource_matches: list[Match] = []
    for st in resource_policy:
        m = match_statement(st, request, ctx)
        principal = principal_applies(
            st, who, account_counts=st.effect == "Deny" or request.action.lower().startswith("kms:")
        )
        resource_matches.append(
            Match(st, _all([principal, m.applies]), m.action, m.resource, m.condition, m.reason)
        )
    matches = identity_matches + resource_matches

    denies = [m for m in matches if m.statement.effect == "Deny"]
    for m in denies:
        if m.applies is True:
            return Verdict("deny", request, "explicit Deny", m)
    maybe_deny = [m for m in denies if m.applies is None]
    if maybe_deny:
        return Verdict("unknown", request, f"a Deny may apply: {maybe_deny[0].reason}", maybe_deny[0])
    if identity.opaque:
        return Verdict(
            "unknown", request, "the role has policies that cannot be read: " + "; ".join(identity.opaque)
        )

    id_allows = [m for m in identity_matches if m.statement.effect == "Allow"]
    res_allows = [m for m in resource_matches if m.statement.effect == "Allow"]
    is_kms = request.action.lower().startswith("kms:")
    if is_kms and resource_policy:
        # The key policy must allow the role, or the account (which enables IAM policies).
        key_allow = _first(res_allows, True)
        if key_allow is None:
            unknown = _first(res_allows, None)
            if unknown is not None:
                return Verdict("unknown", request, f"key policy: {unknown.reason}", unknown)
            return Verdict(
                "deny",
                request,
                "the key policy allows neither the role nor the account",
                _closest(res_allows),
            )
        names_role = principal_applies(key_allow.statement, who, account_counts=False) is True
        if names_role:
            return Verdict("allow", request, "allowed by the key policy", key_allow)
        res_allows = []  # the account-level grant only defers to IAM policies
    elif is_kms:
        return Verdict("unknown", request, "the KMS key's key policy is not in the template")

    allow = _first(id_allows + res_allows, True)
    if allow is not None:
        return Verdict("allow", request, "allowed", allow)
    unknown = _first(id_allows + res_allows, None)
    if unknown is not None:
        return Verdict("unknown", request, unknown.reason or "unknown", unknown)
    return Verdict(
        "deny", request, "no statement allows it (implicit deny)", _closest(id_allows + res_allows)
    )


def _first(matches: Sequence[Match], applies: Tri) -> Match | None:
    return next((m for m in matches if m.applies is applies), None)


def _closest(matches: Sequence[Match]) -> Match | None:
    return max(matches, key=lambda m: m.score(), default=None)
