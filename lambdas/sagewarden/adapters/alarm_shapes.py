"""The deploy-time alarm-shape check: CloudWatch's own PutMetricAlarm judges one alarm of every shape.

Builds the alarms of `representative_shapes` with the supervisor's `alarm_specs`, puts each
distinct request under a throwaway name, deletes them all, and reports any refusal; `fingerprint`
keys the custom resource. Called by `handlers/check_alarm_shapes.py`.
Why: docs/deploy.md (*CloudWatch judges the alarm shapes*)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sagewarden import keys
from sagewarden.adapters.cloudwatch_hang_alarms import SEP, alarm_specs
from sagewarden.domain.vocabulary.actions import EnsureHangAlarms
from sagewarden.domain.vocabulary.policy import RANGES, RunPolicy

# A job name of the longest form SageMaker allows (63 characters), so dimensions and descriptions
# are as long as a real attempt's can be.
SHAPE_JOB = "sw-shape-check-01KE5Q86000DNQ47GXEV9VZMPH-0123456789abcdef-a001"
SHAPE_RUN_ID = "shape-check"
GPUS_PER_HOST = 8  # p4d/p5: GPUUtilization is summed over a host's GPUs (0-800 %)
PROGRESS_METRIC = "train:step"  # a progress metric named as SageMaker's MetricDefinitions often are
RESPONSE_MAX_BYTES = 4096  # CloudFormation: "The total size of the response body can't exceed 4096 bytes"
RESERVE_MS = 15_000  # stop putting alarms when less time is left: delete them and answer
DELETE_BATCH = 100  # DeleteAlarms takes at most 100 names
MESSAGE_MAX = 500  # characters of one CloudWatch message in a failure reason
EXPRESSION_MAX = 400
FAILED, SUCCESS = "FAILED", "SUCCESS"


@dataclass(frozen=True)
class Shape:
    """One representative attempt: its name in reports and the alarms it would get."""

    name: str
    what: str
    spec: EnsureHangAlarms


@dataclass(frozen=True)
class ShapeRequest:
    """One distinct PutMetricAlarm request, and every shape whose alarms include it."""

    shapes: tuple[str, ...]
    alarm: str  # the alarm's part of a supervisor alarm name: log-silence, gpu-lone-idle-g01, ...
    request: Mapping[str, Any]

    @property
    def name(self) -> str:
        return str(self.request["AlarmName"])

    def label(self) -> str:
        return f"{'/'.join(self.shapes)} {self.alarm}"

    def expressions(self) -> str:
        """What CloudWatch parses: the metric-math expressions, or the one metric watched."""
        queries = self.request.get("Metrics") or []
        found = [str(q["Expression"]) for q in queries if "Expression" in q]
        if found:
            return " ; ".join(found)
        return f"{self.request.get('Namespace')} {self.request.get('MetricName')} {self.request.get('Statistic')}"


@dataclass(frozen=True)
class Refusal:
    request: ShapeRequest
    code: str
    message: str


@dataclass
class ShapeReport:
    """What CloudWatch made of the requests, and what the check left behind (nothing, normally)."""

    shapes: tuple[Shape, ...]
    requests: tuple[ShapeRequest, ...]
    accepted: list[ShapeRequest] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    not_tried: list[ShapeRequest] = field(default_factory=list)  # out of time
    # throttled past the SDK's retries: CloudWatch did not judge them (PutMetricAlarm is 3 per
    # second per account; other tools share it)
    throttled: list[ShapeRequest] = field(default_factory=list)
    left_behind: list[str] = field(default_factory=list)  # alarms that could not be deleted
    cleanup_errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            not self.refused
            and not self.not_tried
            and not self.throttled
            and not self.left_behind
            and len(self.accepted) == len(self.requests)
        )


# -- the shapes ---------------------------------------------------------------------------------------


def representative_shapes(policy: RunPolicy) -> tuple[Shape, ...]:
    """The attempts whose alarms are judged: every form ``alarm_specs`` produces.

    Numbers come from the deployment's policy defaults (what its runs get unless they say
    otherwise); features a deployment may switch off by default (lone-idle alarms, a progress
    metric) are switched on, since a run can switch them on for itself."""
    defaults = RunPolicy()
    lone = policy.gpu_lone_idle_minutes or defaults.gpu_lone_idle_minutes

    def spec(hosts: int, **kw: Any) -> EnsureHangAlarms:
        base = EnsureHangAlarms(
            job_name=SHAPE_JOB,
            attempt=1,
            instance_count=hosts,
            gpus_per_host=GPUS_PER_HOST,
            log_silence_minutes=policy.log_silence_minutes,
            gpu_idle_percent=policy.gpu_idle_percent,
            gpu_idle_minutes=policy.gpu_idle_minutes,
            checkpoint_stale_minutes=policy.checkpoint_stale_minutes,
            progress_metric=None,
            progress_stall_minutes=policy.progress_stall_minutes,
            gpu_lone_idle_minutes=lone,
            gpu_busy_percent=policy.gpu_busy_percent,
        )
        return replace(base, **kw)

    progress = policy.progress_metric or PROGRESS_METRIC
    day = int(RANGES["log_silence_minutes"].high)  # one-minute periods: 1,440 is CloudWatch's one-day cap
    return (
        Shape("one-host", "a one-host job", spec(1)),
        Shape("two-hosts", "a two-host job (lone-idle alarm)", spec(2)),
        Shape("ten-hosts", "ten hosts: the most metrics one alarm may watch", spec(10)),
        Shape("eleven-hosts", "eleven hosts: two lone-idle groups (6 + 5)", spec(11)),
        Shape("progress-metric", "a progress metric (IF, FILL, DIFF)", spec(2, progress_metric=progress)),
        Shape(
            "no-log-subscription",
            "a deployment without the log subscription (no log-silence alarm)",
            spec(2, log_silence_alarm=False),
        ),
        Shape(
            "longest-windows",
            f"every window at the policy's maximum ({day} one-minute periods)",
            spec(
                11,
                progress_metric=progress,
                log_silence_minutes=int(RANGES["log_silence_minutes"].high),
                gpu_idle_minutes=int(RANGES["gpu_idle_minutes"].high),
                progress_stall_minutes=int(RANGES["progress_stall_minutes"].high),
                gpu_lone_idle_minutes=int(RANGES["gpu_lone_idle_minutes"].high),
            ),
        ),
    )


def shape_requests(
    prefix: str, policy: RunPolicy, token: str
) -> tuple[tuple[Shape, ...], tuple[ShapeRequest, ...]]:
    """The shapes and their distinct PutMetricAlarm requests, each under its throwaway name."""
    shapes = representative_shapes(policy)
    found: dict[str, tuple[list[str], str, dict[str, Any]]] = {}
    for shape in shapes:
        for request in alarm_specs(shape.spec, prefix, SHAPE_RUN_ID):
            alarm = str(request["AlarmName"]).rsplit(SEP, 1)[-1]
            key = json.dumps({k: v for k, v in request.items() if k != "AlarmName"}, sort_keys=True)
            if key in found:
                found[key][0].append(shape.name)
                continue
            throwaway = dict(request, AlarmName=throwaway_name(prefix, shape.name, alarm, token))
            found[key] = ([shape.name], alarm, throwaway)
    requests = tuple(ShapeRequest(tuple(names), alarm, req) for names, alarm, req in found.values())
    return shapes, requests


def throwaway_name(prefix: str, shape: str, alarm: str, token: str) -> str:
    return f"{prefix}{keys.SHAPE_CHECK_NAME_PART}{shape}-{alarm}-{token}"


def fingerprint(prefix: str, policy: RunPolicy) -> str:
    """A digest of every request the check makes (names aside from the request id): it changes
    whenever a shape, the prefix or the deployment's policy defaults change."""
    _, requests = shape_requests(prefix, policy, "TOKEN")
    digest = hashlib.sha256()
    for r in requests:
        digest.update(json.dumps([r.shapes, r.alarm, r.request], sort_keys=True).encode())
    return digest.hexdigest()[:32]


def policy_from_json(text: str) -> RunPolicy:
    return RunPolicy.from_dict(json.loads(text or "{}"))


def resource_properties(prefix: str, policy_defaults_json: str) -> dict[str, str]:
    """The custom resource's properties (synthesized into the template): what the check judges,
    and the fingerprint that makes CloudFormation run it again when that changes."""
    return {
        keys.SHAPE_CHECK_PROP_ALARM_PREFIX: prefix,
        keys.SHAPE_CHECK_PROP_POLICY_DEFAULTS: policy_defaults_json,
        keys.SHAPE_CHECK_PROP_FINGERPRINT: fingerprint(prefix, policy_from_json(policy_defaults_json)),
    }


# the answers a throttled call gets once the SDK's retries are spent (CloudWatch's query API answers
# Throttling; the others are the same condition under other services' names)
THROTTLING_CODES = frozenset(
    {"Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException"}
)


# -- the check ------------------------------------------------------------------------------------------


def check(
    cloudwatch: Any,
    shapes: tuple[Shape, ...],
    requests: Sequence[ShapeRequest],
    *,
    time_left_ms: Callable[[], int] | None = None,
) -> ShapeReport:
    """Put every request, then delete every alarm put (also when one was refused or the time ran
    out). A refusal does not stop the check: the report names every shape CloudWatch refuses."""
    report = ShapeReport(shapes, tuple(requests))
    created: list[str] = []
    uncertain: list[str] = []  # the call failed in transit: the alarm may exist
    try:
        for r in requests:
            if time_left_ms is not None and time_left_ms() < RESERVE_MS:
                report.not_tried.append(r)
                continue
            try:
                cloudwatch.put_metric_alarm(**r.request)
            except ClientError as exc:
                error = exc.response.get("Error", {})
                if str(error.get("Code", "")) in THROTTLING_CODES:  # not a verdict on the expression
                    report.throttled.append(r)
                    continue
                report.refused.append(Refusal(r, str(error.get("Code", "")), str(error.get("Message", ""))))
                continue
            except BotoCoreError as exc:
                uncertain.append(r.name)
                report.refused.append(Refusal(r, type(exc).__name__, str(exc)))
                continue
            created.append(r.name)
            report.accepted.append(r)
    finally:
        _delete(cloudwatch, created, uncertain, report)
    return report


def _delete(cloudwatch: Any, created: list[str], uncertain: list[str], report: ShapeReport) -> None:
    """Delete what was put. The names known to exist go in batches; a name whose put failed in
    transit is deleted on its own, so a name that does not exist cannot spoil a batch (AWS has
    documented DeleteAlarms both ways: "no alarms are deleted" and "the correct names are still
    deleted")."""
    for i in range(0, len(created), DELETE_BATCH):
        batch = created[i : i + DELETE_BATCH]
        try:
            cloudwatch.delete_alarms(AlarmNames=batch)
        except (ClientError, BotoCoreError) as exc:
            report.left_behind += batch
            report.cleanup_errors.append(_error_text(exc))
    for name in uncertain:
        try:
            cloudwatch.delete_alarms(AlarmNames=[name])
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ResourceNotFound":
                report.left_behind.append(name)
                report.cleanup_errors.append(_error_text(exc))
        except BotoCoreError as exc:
            report.left_behind.append(name)
            report.cleanup_errors.append(_error_text(exc))


def _error_text(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"{error.get('Code', '')}: {error.get('Message', '')}"
    return f"{type(exc).__name__}: {exc}"


# -- the report: what the stack output AlarmShapes carries ---------------------------------------------


def report_data(report: ShapeReport, now_ms: int) -> dict[str, Any]:
    """The JSON report of a passed check (the stack output ``AlarmShapes``; ``sagewarden selftest``
    prints it): when, how many distinct alarms, and each shape's alarms."""
    return {
        "result": "accepted",
        "checked_at": _iso(now_ms),
        "alarms": len(report.accepted),
        "shapes": {s.name: _alarms_of(s.name, report.requests) for s in report.shapes},
    }


def not_checked_data(shapes: tuple[Shape, ...], requests: Sequence[ShapeRequest], why: str) -> dict[str, Any]:
    return {
        "result": "not checked",
        "why": why,
        "shapes": {s.name: _alarms_of(s.name, requests) for s in shapes},
    }


def _alarms_of(shape: str, requests: Sequence[ShapeRequest]) -> list[str]:
    return [r.alarm for r in requests if shape in r.shapes]


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def failure_reason(report: ShapeReport) -> str:
    """Why the deploy fails: every refused shape with its expression(s) and CloudWatch's message,
    what could not be tried, and whether anything was left behind (with the command that removes it)."""
    total = len(report.requests)
    parts: list[str] = []
    if report.refused:
        parts.append(
            f"sagewarden's alarm-shape check: CloudWatch refused {len(report.refused)} of {total} hang-alarm "
            "requests (PutMetricAlarm), so the supervisor could not create these alarms for real runs."
        )
        for f in report.refused:
            parts.append(
                f"[{f.request.label()}] expression {_clip(f.request.expressions(), EXPRESSION_MAX)} -> "
                f"{f.code}: {_clip(f.message, MESSAGE_MAX)}"
            )
    if report.throttled:
        parts.append(
            f"CloudWatch throttled {len(report.throttled)} of {total} requests past the SDK's retries "
            f"({', '.join(r.label() for r in report.throttled)}): they were not judged. PutMetricAlarm "
            "is limited per account (3 per second by default) and other tools share it: deploy again."
        )
    if report.not_tried:
        parts.append(
            f"Out of time before {len(report.not_tried)} of {total} requests could be put "
            f"({', '.join(r.label() for r in report.not_tried)}): deploy again."
        )
    if report.left_behind:
        parts.append(
            f"Could not delete {len(report.left_behind)} throwaway alarm(s) ({'; '.join(report.cleanup_errors)}); "
            f"remove them with: aws cloudwatch delete-alarms --alarm-names {' '.join(report.left_behind)}"
        )
    else:
        parts.append("Every alarm the check put was deleted.")
    return " ".join(parts)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- the CloudFormation side -------------------------------------------------------------------------


def physical_id(prefix: str) -> str:
    return f"{prefix}{keys.SHAPE_CHECK_NAME_PART.rstrip('-')}"


@dataclass(frozen=True)
class Answer:
    """The response body for CloudFormation, and the full text of a reason the body shortened."""

    body: dict[str, Any]
    detail: str = ""

    @property
    def status(self) -> str:
        return str(self.body["Status"])

    @property
    def report(self) -> dict[str, Any] | None:
        """The JSON report (the stack output ``AlarmShapes``), when there is one."""
        data = self.body.get("Data") or {}
        text = data.get(keys.SHAPE_CHECK_ATTR_REPORT)
        return dict(json.loads(text)) if text else None


def on_event(
    event: Mapping[str, Any],
    cloudwatch: Any,
    *,
    now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    time_left_ms: Callable[[], int] | None = None,
) -> Answer:
    """The answer to one custom-resource request: Create and Update run the check; Delete does
    nothing (the check keeps nothing that would need deleting)."""
    props = event.get("ResourceProperties") or {}
    prefix = str(props.get(keys.SHAPE_CHECK_PROP_ALARM_PREFIX, ""))
    if event.get("RequestType") == "Delete":
        return Answer(response(event, SUCCESS))
    if not prefix:
        return Answer(
            response(event, FAILED, reason=f"the custom resource has no {keys.SHAPE_CHECK_PROP_ALARM_PREFIX}")
        )
    policy = policy_from_json(str(props.get(keys.SHAPE_CHECK_PROP_POLICY_DEFAULTS, "{}")))
    token = str(event.get("RequestId", "")).lower()[:36] or "request"
    shapes, requests = shape_requests(prefix, policy, token)
    expected = str(props.get(keys.SHAPE_CHECK_PROP_FINGERPRINT, ""))
    if expected != fingerprint(prefix, policy):
        why = (
            "the request's shapes come from another version of sagewarden than the one running the check "
            "(CloudFormation rolling back an update); they were checked when that version was deployed"
        )
        return Answer(
            response(
                event, SUCCESS, physical=physical_id(prefix), data=not_checked_data(shapes, requests, why)
            )
        )
    report = check(cloudwatch, shapes, requests, time_left_ms=time_left_ms)
    if not report.ok:
        reason = failure_reason(report)
        return Answer(response(event, FAILED, physical=physical_id(prefix), reason=reason), reason)
    return Answer(response(event, SUCCESS, physical=physical_id(prefix), data=report_data(report, now_ms())))


def response(
    event: Mapping[str, Any],
    status: str,
    *,
    physical: str | None = None,
    reason: str = "",
    data: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A custom-resource response body that fits CloudFormation's 4,096 bytes: the reason is
    shortened (with a note) until the whole body does."""
    body: dict[str, Any] = {
        "Status": status,
        "Reason": "",
        "PhysicalResourceId": physical or str(event.get("PhysicalResourceId") or physical_id("sagewarden-")),
        "StackId": event.get("StackId", ""),
        "RequestId": event.get("RequestId", ""),
        "LogicalResourceId": event.get("LogicalResourceId", ""),
    }
    if data is not None:
        body["Data"] = {keys.SHAPE_CHECK_ATTR_REPORT: json.dumps(data, separators=(",", ":"))}
    reason = reason or ("see the function's log" if status == FAILED else "")
    body["Reason"] = _fit_reason(body, reason)
    return body


def _fit_reason(body: dict[str, Any], reason: str) -> str:
    def size(text: str) -> int:
        return len(encode({**body, "Reason": text}))

    if size(reason) <= RESPONSE_MAX_BYTES:
        return reason
    note = " … (shortened to fit CloudFormation's 4,096-byte response; the function's log has it all)"
    lo, hi = 0, len(reason)
    while lo < hi:  # the longest head of the reason that fits with the note
        mid = (lo + hi + 1) // 2
        if size(reason[:mid] + note) <= RESPONSE_MAX_BYTES:
            lo = mid
        else:
            hi = mid - 1
    return reason[:lo] + note


def encode(body: Mapping[str, Any]) -> bytes:
    """The bytes sent to CloudFormation's response URL."""
    return json.dumps(body).encode("utf-8")
