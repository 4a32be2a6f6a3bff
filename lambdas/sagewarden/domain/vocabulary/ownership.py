"""Who may change a run: its owner, compared by identity, or a configured admin. Pure. Why:
docs/api.md (*Who may do what*)."""

from __future__ import annotations

import re
from collections.abc import Iterable

_ARN = re.compile(
    r"^arn:(?P<partition>aws[a-z-]*):(?P<service>iam|sts)::(?P<account>\d{12}):(?P<resource>.+)$"
)
UNKNOWN = "unknown"


def principal(arn: str) -> str:
    """The identity behind an IAM or STS ARN, in one canonical form:
    ``arn:<partition>:iam::<account>:role/<name>`` for a role or any session of it,
    ``arn:<partition>:iam::<account>:user/<name>`` for an IAM user (names in lower case: IAM
    does not tell names apart by case); anything else as given."""
    m = _ARN.match(arn.strip())
    if m is None:
        return arn
    partition, service, account, resource = m.group("partition", "service", "account", "resource")
    kind, _, rest = resource.partition("/")
    if service == "sts" and kind == "assumed-role" and "/" in rest:
        return f"arn:{partition}:iam::{account}:role/{rest.split('/', 1)[0].lower()}"
    if service == "iam" and kind in ("role", "user") and rest:
        return f"arn:{partition}:iam::{account}:{kind}/{rest.rsplit('/', 1)[-1].lower()}"
    return arn


def same_principal(a: str, b: str) -> bool:
    """True when the two ARNs name the same identity (see the module's rule)."""
    if not a or not b or UNKNOWN in (a, b):
        return False
    return principal(a) == principal(b)


def is_admin(caller: str, admins: Iterable[str]) -> bool:
    return any(same_principal(caller, admin) for admin in admins)


def may_change(owner: str, caller: str, admins: Iterable[str]) -> bool:
    """May `caller` cancel or resume a run `owner` submitted? (Under readScope=owner, also: may it
    read the run.)"""
    return same_principal(owner, caller) or is_admin(caller, admins)


def shown_principal(arn: str) -> str:
    """`arn` as an error may show it to another principal: a role session as its role
    (``arn:<partition>:iam::<account>:role/<name>``, the session name left out), an IAM user or
    role as it is, and anything else (a federated user, whose name its caller chose) as its
    account alone."""
    m = _ARN.match(arn.strip())
    if m is None:
        return "another principal"
    partition, service, account, resource = m.group("partition", "service", "account", "resource")
    kind, _, rest = resource.partition("/")
    if service == "sts" and kind == "assumed-role" and "/" in rest:
        return f"arn:{partition}:iam::{account}:role/{rest.split('/', 1)[0]}"
    if service == "iam" and kind in ("role", "user") and rest:
        return arn.strip()
    if service == "iam" and resource == "root":
        return arn.strip()
    return f"a principal of account {account}"
