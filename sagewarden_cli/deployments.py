"""The preflight's prefix check: the sagewarden deployments of an account and region, as
CloudFormation holds them.

The preflight (sagewarden_cli/doctor.py) runs :func:`check_prefix` to refuse a job prefix another stack
already uses: two
deployments with one prefix would receive each other's job and alarm events, could stop each
other's jobs (IAM is scoped by the prefix) and would delete each other's hang alarms (each sweep
cleans up the alarms under its prefix that belong to no run of its own).

A stack is a sagewarden deployment when it has the ``JobPrefix`` output (infra/stack.py), or, for
stacks deployed before that output existed, when its description is sagewarden's; the prefix of
such an older stack is read from its template (the functions' ``SAGEWARDEN_JOB_PREFIX``).

DescribeStacks without a stack name lists the region's stacks (AWS documents that it then needs
both cloudformation:DescribeStacks and ListStacks). Every page is read, up to ``MAX_PAGES``; an
error is never "no other stack".
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from sagewarden_cli.findings import FAIL, OK, WARN, Finding, denied

OUTPUT_JOB_PREFIX = "JobPrefix"  # infra.constants.OUTPUT_JOB_PREFIX
STACK_DESCRIPTION_START = "sagewarden:"  # infra.constants.STACK_DESCRIPTION
ENV_JOB_PREFIX = "SAGEWARDEN_JOB_PREFIX"  # sagewarden.keys.ENV_JOB_PREFIX
ALARM_PREFIX = "sagewarden-{prefix}-hang-"  # sagewarden.keys.alarm_prefix
MAX_PAGES = 100  # DescribeStacks pages (CloudFormation's default quota is 2,000 stacks per region)
# A stack in these states holds no resources (a first deploy rolled back): it supervises nothing.
EMPTY_STATUSES = frozenset({"ROLLBACK_COMPLETE", "DELETE_COMPLETE"})


@dataclass(frozen=True)
class Stack:
    name: str
    status: str
    sagewarden: bool
    job_prefix: str | None  # None: not a sagewarden stack, or its prefix could not be read
    problem: str = ""  # why the prefix of a sagewarden stack is unknown


@dataclass(frozen=True)
class Listing:
    stacks: tuple[Stack, ...]
    complete: bool  # False: more than MAX_PAGES pages

    def get(self, name: str) -> Stack | None:
        return next((s for s in self.stacks if s.name == name), None)

    def deployments(self) -> list[Stack]:
        return [s for s in self.stacks if s.sagewarden and s.status not in EMPTY_STATUSES]


def list_stacks(cloudformation: Any, *, max_pages: int = MAX_PAGES) -> Listing:
    """Every stack of the region (DescribeStacks, every page), sagewarden's recognised.

    Raises the client's errors (the caller decides what a denial means)."""
    stacks: list[Stack] = []
    complete = True
    for number, page in enumerate(_pages(cloudformation), start=1):
        for described in page.get("Stacks") or []:
            stacks.append(_stack(cloudformation, described))
        if number >= max_pages and page.get("NextToken"):
            complete = False
            break
    return Listing(tuple(stacks), complete)


def _pages(cloudformation: Any) -> Iterator[Mapping[str, Any]]:
    token: str | None = None
    while True:
        page = cloudformation.describe_stacks(**({"NextToken": token} if token else {}))
        yield page
        token = page.get("NextToken")
        if not token:
            return


def _stack(cloudformation: Any, described: Mapping[str, Any]) -> Stack:
    name = str(described.get("StackName", ""))
    status = str(described.get("StackStatus", ""))
    outputs = {str(o.get("OutputKey")): str(o.get("OutputValue", "")) for o in described.get("Outputs") or []}
    if OUTPUT_JOB_PREFIX in outputs:
        return Stack(name, status, True, outputs[OUTPUT_JOB_PREFIX])
    if not str(described.get("Description") or "").startswith(STACK_DESCRIPTION_START):
        return Stack(name, status, False, None)
    if status in EMPTY_STATUSES:
        return Stack(name, status, True, None)
    prefix, problem = _prefix_from_template(cloudformation, name)
    return Stack(name, status, True, prefix, problem)


def _prefix_from_template(cloudformation: Any, name: str) -> tuple[str | None, str]:
    """The job prefix a sagewarden stack from before the JobPrefix output gives its functions."""
    try:
        body = cloudformation.get_template(StackName=name).get("TemplateBody")
    except Exception as exc:  # denied, throttled: unknown, and the caller says so
        return None, f"its template could not be read ({_first_line(exc)})"
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return None, "its template is not JSON"
    resources = body.get("Resources", {}) if isinstance(body, Mapping) else {}
    for resource in resources.values():
        if not isinstance(resource, Mapping) or resource.get("Type") != "AWS::Lambda::Function":
            continue
        env = (resource.get("Properties") or {}).get("Environment", {}).get("Variables", {})
        value = env.get(ENV_JOB_PREFIX) if isinstance(env, Mapping) else None
        if isinstance(value, str) and value:
            return value, ""
    return None, f"its template names no {ENV_JOB_PREFIX}"


def _first_line(exc: Exception) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


# -- the check ------------------------------------------------------------------------------------


def check_prefix(
    cloudformation: Any, cloudwatch: Any, *, region: str, stack: str, prefix: str
) -> list[Finding]:
    """Refuse a job prefix another sagewarden stack uses, and a stack name that would replace a
    stack of something else or change the prefix of a running deployment. Re-deploying the same
    stack with the same prefix passes."""
    from botocore.exceptions import ClientError

    try:
        listing = list_stacks(cloudformation)
    except ClientError as exc:
        if not denied(exc):
            raise
        return [
            Finding(
                WARN,
                "prefix",
                f"cannot list the CloudFormation stacks of {region} (cloudformation:DescribeStacks and ListStacks "
                f"denied): make sure no other sagewarden deployment uses jobPrefix {prefix!r}",
            )
        ]
    findings = _own_stack(listing.get(stack), region=region, stack=stack, prefix=prefix)
    others = [s for s in listing.deployments() if s.name != stack]
    clash = [s.name for s in others if s.job_prefix == prefix]
    if clash:
        used = {s.job_prefix for s in listing.deployments() if s.job_prefix}
        findings.append(
            Finding(
                FAIL,
                "prefix",
                f"jobPrefix {prefix!r} is already used by stack {', '.join(clash)} in {region}: two deployments "
                "with one prefix receive each other's job and alarm events, may stop each other's jobs and "
                f"delete each other's hang alarms; pick another, e.g. JOB_PREFIX={free_prefix(prefix, used)} "
                "(cdk: -c jobPrefix=...)",
            )
        )
    findings += [
        Finding(
            WARN,
            "prefix",
            f"stack {s.name} is a sagewarden deployment whose job prefix is unknown ({s.problem}): make sure "
            f"it does not use {prefix!r}",
        )
        for s in others
        if s.job_prefix is None
    ]
    if not listing.complete:
        findings.append(
            Finding(
                WARN, "prefix", f"{region} has more stacks than this check reads; other deployments may exist"
            )
        )
    ours = listing.get(stack)
    if not clash and not (ours is not None and ours.job_prefix == prefix):
        findings += _unclaimed_alarms(cloudwatch, region=region, prefix=prefix)
    if not any(f.level == FAIL for f in findings):
        seen = ", ".join(f"{s.name} ({s.job_prefix or '?'})" for s in others)
        findings.append(
            Finding(
                OK,
                "prefix",
                f"jobPrefix {prefix!r}, stack {stack}: no other deployment in {region} uses the prefix"
                + (f"; other deployments: {seen}" if seen else ""),
            )
        )
    return findings


def _own_stack(ours: Stack | None, *, region: str, stack: str, prefix: str) -> list[Finding]:
    if ours is None or ours.status in EMPTY_STATUSES:
        return []
    if not ours.sagewarden:
        return [
            Finding(
                FAIL,
                "prefix",
                f"stack {stack} in {region} is not a sagewarden deployment: deploying would replace its "
                "resources; name this one differently (STACK=<name>, cdk: -c stackName=<name>)",
            )
        ]
    if ours.job_prefix is not None and ours.job_prefix != prefix:
        return [
            Finding(
                FAIL,
                "prefix",
                f"stack {stack} runs with jobPrefix {ours.job_prefix!r}: deploying it with {prefix!r} would stop "
                f"supervising its runs (their jobs are named {ours.job_prefix}-*); to update it, pass "
                f"JOB_PREFIX={ours.job_prefix} (cdk: -c jobPrefix={ours.job_prefix}); for a second deployment, "
                "name a new stack (STACK=<name>)",
            )
        ]
    return []


def _unclaimed_alarms(cloudwatch: Any, *, region: str, prefix: str) -> list[Finding]:
    """Hang alarms under the prefix that no stack claims (a removed deployment's, or one this
    identity cannot see): the new deployment's sweep would delete them."""
    from botocore.exceptions import ClientError

    names = ALARM_PREFIX.format(prefix=prefix)
    try:
        page = cloudwatch.describe_alarms(AlarmNamePrefix=names, AlarmTypes=["MetricAlarm"])
    except ClientError as exc:
        if not denied(exc):
            raise
        return [
            Finding(WARN, "prefix", f"cannot look for hang alarms named {names}* (DescribeAlarms denied)")
        ]
    found = len(page.get("MetricAlarms") or [])
    if not found:
        return []
    count = f"{found}{' or more' if page.get('NextToken') else ''}"
    return [
        Finding(
            WARN,
            "prefix",
            f"{count} hang alarm(s) named {names}* exist in {region}, but no stack claims jobPrefix {prefix!r}: "
            "if another deployment still uses them, pick another prefix; otherwise this deployment deletes "
            "the ones that belong to none of its runs",
        )
    ]


def free_prefix(prefix: str, used: set[str]) -> str:
    """A job prefix like ``prefix`` that no deployment uses (at most 8 characters)."""
    for n in range(2, 1000):
        candidate = f"{prefix[: 8 - len(str(n))]}{n}"
        if candidate not in used:
            return candidate
    return "<another>"
