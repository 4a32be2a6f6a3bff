"""A fast in-memory AWS for soak and crash-injection tests: every port of the supervisor, a
virtual clock, a delivery queue of EventBridge events, and a switchboard (`Calls`) through
which every call passes, so a test can inject an error into the next call of any method,
kill an invocation just before or just after a call takes effect, or run another invocation
in the middle of one.

SageMaker, CloudWatch (hang alarms) and SNS are faked at the *client* level and used through
the real adapters (`SageMakerLauncher`, `CloudWatchHangAlarms`, `SnsNotifier`), so the
adapters' error mapping is exercised too; S3 checkpoints, logs and GPU metrics are faked at
the port level. The store is the real `InMemoryRunStore` (DynamoDB semantics) unless a test
passes another one.

Every port object the `Supervisor` gets is wrapped in `Ported`, which routes each method of
the port's Protocol (enumerated from `sagewarden.ports.aws`, not from a list kept here) through
`Calls`. Injected errors are raised *before* the call takes effect.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import random
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError, ReadTimeoutError

from drill.account.memory_store import InMemoryRunStore
from sagewarden import keys
from sagewarden.adapters.cloudwatch_hang_alarms import CloudWatchHangAlarms, parse_alarm_name
from sagewarden.adapters.dynamodb_run_store import DynamoDbRunStore
from sagewarden.adapters.s3_checkpoint_finder import CheckpointLookupError
from sagewarden.adapters.sagemaker_launcher import SageMakerLauncher
from sagewarden.adapters.sns_notifier import SnsNotifier
from sagewarden.domain.checkpoints.retirement import BucketVersioning
from sagewarden.domain.hangs.cadence import activity_per_minute, phase_cover
from sagewarden.domain.vocabulary.actions import RetireCheckpoints
from sagewarden.domain.vocabulary.events import RetirementReported, RetireOutcome
from sagewarden.domain.vocabulary.evidence import HostMetrics
from sagewarden.domain.vocabulary.layouts import Checkpoint, CheckpointLayout, LayoutKind, RetentionView
from sagewarden.domain.vocabulary.models import RetireProgress
from sagewarden.domain.vocabulary.names import parse_job_name
from sagewarden.domain.vocabulary.policy import RunPolicy
from sagewarden.handlers.on_alarm_state_change import hang_signal_from_event
from sagewarden.ids import ulid
from sagewarden.ports import aws as ports
from sagewarden.ports.aws import OutboxMessage
from sagewarden.settings import SupervisorSettings
from sagewarden.usecases.supervisor import Supervisor

JOB_PREFIX = keys.DEFAULT_JOB_PREFIX
ALARM_PREFIX = keys.alarm_prefix(JOB_PREFIX)
ACCOUNT = "123456789012"
REGION = "us-east-1"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/SageMakerTrainingRole"
TOPIC = f"arn:aws:sns:{REGION}:{ACCOUNT}:sagewarden-alerts"
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
SM_LIVE = ("InProgress", "Stopping")
SM_ENDED = ("Completed", "Failed", "Stopped")


class Crash(BaseException):
    """The invocation was killed here (timeout, out of memory, a lost container). A
    BaseException, so no `except Exception` in the code under test can swallow it."""


# --- the ports, enumerated from the code -------------------------------------------------------


def port_protocols() -> dict[str, type]:
    """Every Protocol class of `sagewarden.ports.aws`, by name."""
    return {
        name: cls
        for name, cls in inspect.getmembers(ports, inspect.isclass)
        if cls.__module__ == ports.__name__ and getattr(cls, "_is_protocol", False)
    }


def protocol_methods(protocol: type) -> tuple[str, ...]:
    return tuple(
        sorted(name for name, value in vars(protocol).items() if callable(value) and not name.startswith("_"))
    )


def port_methods() -> list[str]:
    """`Protocol.method` for every method of every port: the calls the service can make."""
    return [
        f"{name}.{m}" for name, proto in sorted(port_protocols().items()) for m in protocol_methods(proto)
    ]


# --- the switchboard -------------------------------------------------------------------------


@dataclass
class Hook:
    """At the `nth` call of `key` (counted from the world's start; None = the next call matching
    `when`), on `side` ("before" the call takes effect or "after" it did): run `action`
    (another invocation), or kill the invocation when `action` is None."""

    key: str
    side: str
    nth: int | None = None
    when: Callable[[tuple[Any, ...]], bool] | None = None
    action: Callable[[], None] | None = None


class Calls:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.errors: dict[str, list[Exception]] = defaultdict(list)
        self.lost_responses: dict[str, list[Exception]] = defaultdict(list)
        self.hooks: list[Hook] = []
        self.fired: list[tuple[str, str, tuple[Any, ...]]] = []  # (key, what, args) of injected faults
        self.crashes: list[str] = []
        self.returned: dict[str, list[int]] = defaultdict(list)  # numbers of the calls that returned
        self.dead = False  # a killed invocation makes no further call (no `finally` gets through)

    def inject(self, key: str, error: Exception) -> None:
        self.errors[key].append(error)

    def inject_lost_response(self, key: str, error: Exception) -> None:
        """The next call of `key` takes effect, then its response is lost (`error`)."""
        self.lost_responses[key].append(error)

    def effect_done(self, key: str, args: tuple[Any, ...] = ()) -> None:
        """Called by a fake after its call took effect: raises a lost-response error if one was
        injected."""
        pending = self.lost_responses.get(key)
        if pending:
            error = pending.pop(0)
            self.fired.append((key, "response lost: " + type(error).__name__, args))
            raise error

    def before(self, key: str, args: tuple[Any, ...] = ()) -> None:
        if self.dead:
            raise Crash(f"{key}: the invocation is already dead")
        self.counts[key] += 1
        self._hooks(key, "before", args)
        pending = self.errors.get(key)
        if pending:
            error = pending.pop(0)
            self.fired.append((key, type(error).__name__ + ": " + str(error)[:80], args))
            raise error

    def after(self, key: str, args: tuple[Any, ...] = ()) -> None:
        self.returned[key].append(self.counts[key])
        self._hooks(key, "after", args)

    def _hooks(self, key: str, side: str, args: tuple[Any, ...]) -> None:
        for hook in list(self.hooks):
            if hook.key != key or hook.side != side:
                continue
            if hook.when is not None and not hook.when(args):
                continue
            if hook not in self.hooks:  # fired by an invocation nested in this one
                continue
            number = self.counts[key] if side == "before" else self.returned[key][-1]
            if hook.nth is not None and number != hook.nth:
                continue
            self.hooks.remove(hook)
            if hook.action is None:
                self.dead = True
                self.crashes.append(f"{key} #{number} {side}")
                raise Crash(f"killed {side} {key} #{number}")
            hook.action()

    def quiet(self) -> None:
        """No more faults (the world settles)."""
        self.errors.clear()
        self.lost_responses.clear()
        self.hooks.clear()
        self.dead = False


class Ported:
    """A port whose Protocol methods go through `Calls` (key `Protocol.method`)."""

    def __init__(self, inner: Any, protocol: type, calls: Calls) -> None:
        self._inner = inner
        self._name = protocol.__name__
        self._methods = frozenset(protocol_methods(protocol))
        self._calls = calls

    @property
    def inner(self) -> Any:
        return self._inner

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in self._methods:
            return attr
        key = f"{self._name}.{name}"
        calls = self._calls

        def call(*args: Any, **kwargs: Any) -> Any:
            calls.before(key, args)
            result = attr(*args, **kwargs)
            calls.after(key, args)
            return result

        return call


# --- AWS errors, raised before the effect ------------------------------------------------------


def client_error(code: str, message: str, status: int, operation: str) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}},
        operation,
    )


# error classes per target: throttling, a 5xx, access denied
_AWS_ERRORS: dict[str, dict[str, tuple[str, str, int]]] = {
    "sagemaker": {
        "throttle": ("ThrottlingException", "Rate exceeded", 400),
        "5xx": ("InternalFailure", "An internal error occurred.", 500),
        "denied": ("AccessDeniedException", "User is not authorized to perform this action", 400),
    },
    "cloudwatch": {
        "throttle": ("Throttling", "Rate exceeded", 400),
        "5xx": ("InternalServiceError", "Internal service error", 500),
        "denied": ("AccessDenied", "User is not authorized to perform: cloudwatch:*", 403),
    },
    "sns": {
        "throttle": ("Throttling", "Rate exceeded", 400),
        "5xx": ("InternalError", "Internal error", 500),
        "denied": (
            "KMSAccessDenied",
            "The ciphertext refers to a customer master key that you cannot use",
            400,
        ),
    },
    "dynamodb": {
        "throttle": ("ProvisionedThroughputExceededException", "Throughput exceeds the table's limit", 400),
        "5xx": ("InternalServerError", "Internal server error", 500),
        "denied": ("AccessDeniedException", "User is not authorized to perform: dynamodb:*", 400),
    },
    "s3": {
        "throttle": ("SlowDown", "Please reduce your request rate.", 503),
        "5xx": ("InternalError", "We encountered an internal error. Please try again.", 500),
        "denied": ("AccessDenied", "Access Denied", 403),
    },
    "service-quotas": {
        "throttle": ("TooManyRequestsException", "Rate exceeded", 400),
        "5xx": ("ServiceException", "Internal error", 500),
        "denied": ("AccessDeniedException", "User is not authorized to perform: servicequotas:*", 400),
    },
    "logs": {
        "throttle": ("ThrottlingException", "Rate exceeded", 400),
        "5xx": ("ServiceUnavailableException", "Service unavailable", 503),
        "denied": ("AccessDeniedException", "User is not authorized to perform: logs:*", 400),
    },
}
ERROR_KINDS = ("throttle", "5xx", "denied", "timeout")

# every call an error can be injected into: (key, AWS service)
FAULT_TARGETS: tuple[tuple[str, str], ...] = (
    ("sagemaker.create_training_job", "sagemaker"),
    ("sagemaker.stop_training_job", "sagemaker"),
    ("sagemaker.describe_training_job", "sagemaker"),
    ("cloudwatch.put_metric_alarm", "cloudwatch"),
    ("cloudwatch.delete_alarms", "cloudwatch"),
    ("cloudwatch.describe_alarms", "cloudwatch"),
    ("sns.publish", "sns"),
    ("CheckpointFinder.check_access", "s3"),
    ("CheckpointFinder.latest", "s3"),
    ("QuotaReader.sagemaker_quotas", "service-quotas"),
    ("CheckpointFinder.save_activity", "s3"),
    ("LogReader.tail", "logs"),
    ("LogReader.host_triage", "logs"),
    ("MetricsReader.host_metrics", "cloudwatch"),
    ("RunStore.get", "dynamodb"),
    ("RunStore.save", "dynamodb"),
    ("RunStore.create", "dynamodb"),
    ("RunStore.set_due", "dynamodb"),
    ("RunStore.append_audit", "dynamodb"),
    ("RunStore.iter_due", "dynamodb"),
    ("RunStore.get_outbox", "dynamodb"),
    ("RunStore.outbox_done", "dynamodb"),
    ("RunStore.outbox_retry", "dynamodb"),
    ("RunStore.acquire_lease", "dynamodb"),
    ("RunStore.runs_waiting_for", "dynamodb"),
)


def aws_error(service: str, kind: str, operation: str) -> Exception:
    if kind == "timeout":  # no answer at all (the SDK gave up): botocore's transport error
        return ReadTimeoutError(endpoint_url=f"https://{service}.{REGION}.amazonaws.com/")
    code, message, status = _AWS_ERRORS[service][kind]
    error = client_error(code, message, status, operation)
    if service == "s3":  # what the S3 checkpoint finder raises when S3 cannot be asked
        return CheckpointLookupError(f"{code}: {message}", code=code)
    return error


# --- SageMaker -------------------------------------------------------------------------------

FAILURES: dict[str, tuple[str, tuple[str, ...]]] = {
    # outcome -> (FailureReason, log lines the job wrote before it failed); texts follow the
    # classifier's tables (domain/vocabulary/classifier/classify.py)
    "fail_infra": (
        'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage ""',
        ("[rank3]:[E ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout",),
    ),
    "fail_internal": ("InternalServerError: We encountered an internal error.  Please try again.", ()),
    "fail_capacity": (
        "CapacityError: Unable to provision requested ML compute capacity. Please retry using a "
        "different ML instance type.",
        (),
    ),
    "fail_user": (
        'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage "ModuleNotFoundError"',
        ("ModuleNotFoundError: No module named 'transformers_x'",),
    ),
    "fail_client": ("ClientError: Data download failed: access denied to s3://bucket/data", ()),
    "fail_unknown": ("AlgorithmError: ExecuteUserScriptError:\nExitCode 137", ("step 12 loss 2.1",)),
    # a rank killed (SIGKILL): the supervisor reads the hosts' memory before classing it
    "fail_killed": (
        "AlgorithmError: ExecuteUserScriptError:\nExitCode 1",
        ("torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 (pid: 4242)",),
    ),
}
OUTCOMES = (
    "advance",  # the natural next state (Starting -> Downloading -> Training; Stopping -> Stopped)
    "checkpoint",  # a training job writes a checkpoint (and a log line)
    "complete",
    *FAILURES,
    "max_runtime",
    "spot",
    "external_stop",  # a person stops the job outside sagewarden
)


@dataclass
class Job:
    name: str
    run_id: str
    attempt: int
    instance_type: str
    count: int
    checkpoint_uri: str
    created_ms: int
    tags: dict[str, str]
    status: str = "InProgress"
    secondary: str = "Starting"
    modified_ms: int = 0
    failure_reason: str | None = None
    training_start_ms: int | None = None
    end_ms: int | None = None
    keep_alive: int = 0  # ResourceConfig.KeepAlivePeriodInSeconds asked for
    pool_released: bool = False

    @property
    def live(self) -> bool:
        return self.status in SM_LIVE

    def warm_pool(self) -> dict[str, Any] | None:
        """DescribeTrainingJob's WarmPoolStatus (not in events): a kept pool is Available at once
        here (the drill's simulator models the delay) until released."""
        if self.keep_alive <= 0:
            return None
        if self.live:
            return {"Status": "InUse"}
        reason = self.failure_reason or ""
        kept = self.status in ("Completed", "Stopped") or reason.startswith(("AlgorithmError", "ClientError"))
        if not kept:
            return {"Status": "Terminated", "ResourceRetainedBillableTimeInSeconds": 0}
        return {
            "Status": "Terminated" if self.pool_released else "Available",
            "ResourceRetainedBillableTimeInSeconds": 60,
        }

    def detail(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "TrainingJobName": self.name,
            "TrainingJobArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{self.name}",
            "TrainingJobStatus": self.status,
            "SecondaryStatus": self.secondary,
            "CreationTime": self.created_ms,
            "LastModifiedTime": self.modified_ms,
            "ResourceConfig": {"InstanceType": self.instance_type, "InstanceCount": self.count},
        }
        if self.failure_reason:
            d["FailureReason"] = self.failure_reason
        if self.training_start_ms is not None:
            d["TrainingStartTime"] = self.training_start_ms
        if self.end_ms is not None:
            d["TrainingEndTime"] = self.end_ms
        return d


class FakeSageMaker:
    """The SageMaker client the real `SageMakerLauncher` talks to."""

    def __init__(self, world: World, quotas: Mapping[str, int]) -> None:
        self.world = world
        self.quotas = dict(quotas)
        self.jobs: dict[str, Job] = {}
        self.created: list[tuple[str, int]] = []  # (job name, ms) of every job created
        self.hidden_reads = 0  # reads answered "not found" for a job that exists (not visible yet)

    def _call(self, op: str, args: tuple[Any, ...]) -> None:
        self.world.calls.before(f"sagemaker.{op}", args)

    def create_training_job(self, **request: Any) -> dict[str, Any]:
        name = request["TrainingJobName"]
        self._call("create_training_job", (name,))
        if name in self.jobs:
            raise client_error(
                "ResourceInUse",
                f"Training job names must be unique: {name} already exists",
                400,
                "CreateTrainingJob",
            )
        rc = request["ResourceConfig"]
        itype, count = rc["InstanceType"], int(rc["InstanceCount"])
        limit = self.quotas.get(itype, 1_000)
        used = sum(j.count for j in self.jobs.values() if j.live and j.instance_type == itype)
        if used + count > limit:
            raise client_error(
                "ResourceLimitExceeded",
                f"The account-level service limit '{itype} for training job usage' is {limit} Instances, "
                f"with current utilization of {used} Instances and a request delta of {count} Instances. "
                "Please contact AWS support to request an increase for this limit.",
                400,
                "CreateTrainingJob",
            )
        parsed = parse_job_name(name)
        assert parsed is not None, name
        now = self.world.now()
        job = Job(
            name=name,
            run_id=parsed[0],
            attempt=parsed[1],
            instance_type=itype,
            count=count,
            checkpoint_uri=str(request.get("CheckpointConfig", {}).get("S3Uri", "")),
            created_ms=now,
            tags={t["Key"]: t["Value"] for t in request.get("Tags", [])},
            modified_ms=now,
            keep_alive=int(rc.get("KeepAlivePeriodInSeconds") or 0),
        )
        self.jobs[name] = job
        self.created.append((name, now))
        self.world.emit_job(job)
        self.world.calls.effect_done("sagemaker.create_training_job", (name,))
        return {"TrainingJobArn": job.detail()["TrainingJobArn"]}

    def stop_training_job(self, TrainingJobName: str) -> dict[str, Any]:
        self._call("stop_training_job", (TrainingJobName,))
        job = self._visible(TrainingJobName)
        if job is None:
            raise client_error("ValidationException", "Requested resource not found.", 400, "StopTrainingJob")
        if job.status == "InProgress":
            self.world.transition(job, "Stopping", "Stopping")
            self.world.calls.effect_done("sagemaker.stop_training_job", (TrainingJobName,))
            return {}
        if job.status == "Stopping":
            return {}
        raise client_error(
            "ValidationException",
            f"The request was rejected because the training job is in status {job.status}.",
            400,
            "StopTrainingJob",
        )

    def _visible(self, name: str) -> Job | None:
        """The job as a read sees it: not yet, for a delay drawn per job after its creation (AWS
        does not say how long a new job can be missing from reads; drill/sim/read_after_create.py)."""
        job = self.jobs.get(name)
        low, high = self.world.read_after_create_ms
        delay = random.Random(f"read-after-create|{name}").randint(low, high)
        if job is not None and self.world.now() < job.created_ms + delay:
            self.hidden_reads += 1
            return None
        return job

    def describe_training_job(self, TrainingJobName: str) -> dict[str, Any]:
        self._call("describe_training_job", (TrainingJobName,))
        job = self._visible(TrainingJobName)
        if job is None:
            raise client_error(
                "ValidationException", "Requested resource not found.", 400, "DescribeTrainingJob"
            )
        detail = job.detail()
        pool = job.warm_pool()
        if pool is not None:
            detail["WarmPoolStatus"] = pool
        return detail

    def describe_training_plan(self, TrainingPlanName: str) -> dict[str, Any]:
        """A Training Plan with one reserved capacity around the world's whole time (read-only)."""
        self._call("describe_training_plan", (TrainingPlanName,))
        start, end = START_MS, START_MS + 30 * 24 * 3_600_000
        stamp = {
            "StartTime": datetime.fromtimestamp(start / 1000, UTC),
            "EndTime": datetime.fromtimestamp(end / 1000, UTC),
        }
        return {
            "TrainingPlanArn": TrainingPlanName,
            "Status": "Active",
            "TotalInstanceCount": 4,
            "ReservedCapacitySummaries": [
                {"InstanceType": "ml.p4d.24xlarge", "TotalInstanceCount": 4, **stamp}
            ],
            **stamp,
        }

    def update_training_job(self, TrainingJobName: str, ResourceConfig: dict[str, Any]) -> dict[str, Any]:
        """KeepAlivePeriodInSeconds 0 releases an ended job's Available pool; else refused."""
        self._call("update_training_job", (TrainingJobName,))
        job = self._visible(TrainingJobName)
        pool = job.warm_pool() if job is not None else None
        if job is None or pool is None or pool["Status"] != "Available":
            raise client_error(
                "ValidationException", "The warm pool is not Available.", 400, "UpdateTrainingJob"
            )
        if int(ResourceConfig.get("KeepAlivePeriodInSeconds", -1)) == 0:
            job.pool_released = True
            self.world.calls.effect_done("sagemaker.update_training_job", (TrainingJobName,))
        return {"TrainingJobArn": job.detail()["TrainingJobArn"]}

    def live_jobs(self, run_id: str | None = None) -> list[Job]:
        return [j for j in self.jobs.values() if j.live and (run_id is None or j.run_id == run_id)]


# --- CloudWatch (hang alarms) ----------------------------------------------------------------


class FakeCloudWatch:
    """The CloudWatch client the real `CloudWatchHangAlarms` talks to."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.alarms: dict[str, dict[str, Any]] = {}

    def put_metric_alarm(self, **request: Any) -> None:
        name = request["AlarmName"]
        self.world.calls.before("cloudwatch.put_metric_alarm", (name,))
        if name not in self.alarms:  # an update keeps the alarm's state
            self.alarms[name] = {"StateValue": "INSUFFICIENT_DATA", "StateUpdatedTimestamp": self.world.now()}

    def delete_alarms(self, AlarmNames: Sequence[str]) -> None:
        self.world.calls.before("cloudwatch.delete_alarms", tuple(AlarmNames))
        if any(n not in self.alarms for n in AlarmNames):
            raise client_error("ResourceNotFound", "alarm not found", 404, "DeleteAlarms")
        for n in AlarmNames:
            del self.alarms[n]

    def get_paginator(self, operation: str) -> Any:
        assert operation == "describe_alarms", operation
        return _AlarmPaginator(self)


class _AlarmPaginator:
    def __init__(self, cw: FakeCloudWatch) -> None:
        self.cw = cw

    def paginate(self, AlarmNamePrefix: str = "", **_: Any) -> Iterator[dict[str, Any]]:
        names = sorted(n for n in self.cw.alarms if n.startswith(AlarmNamePrefix))
        for i in range(0, max(len(names), 1), 100):
            self.cw.world.calls.before("cloudwatch.describe_alarms", (AlarmNamePrefix,))
            yield {
                "MetricAlarms": [
                    {"AlarmName": n, **self.cw.alarms[n]} for n in names[i : i + 100] if n in self.cw.alarms
                ]
            }


# --- SNS, S3 checkpoints, logs, metrics ----------------------------------------------------------


@dataclass(frozen=True)
class Published:
    dedupe_id: str
    event: str
    run_id: str
    subject: str
    at_ms: int


class FakeSns:
    def __init__(self, world: World) -> None:
        self.world = world
        self.published: list[Published] = []

    def publish(self, **kwargs: Any) -> dict[str, Any]:
        attrs = {k: v["StringValue"] for k, v in kwargs.get("MessageAttributes", {}).items()}
        self.world.calls.before("sns.publish", (attrs.get("dedupe_id", ""),))
        self.published.append(
            Published(
                attrs.get("dedupe_id", ""),
                attrs.get("event", ""),
                attrs.get("run_id", ""),
                kwargs.get("Subject", ""),
                self.world.now(),
            )
        )
        return {"MessageId": f"m-{len(self.published)}"}


class FakeCheckpoints:
    """Checkpoints under each run's CheckpointConfig.S3Uri, written by its training jobs."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.steps: dict[str, list[tuple[int, int]]] = defaultdict(list)  # uri -> [(step, written ms)]

    def write(self, uri: str) -> int:
        step = (self.steps[uri][-1][0] if self.steps[uri] else 0) + 100
        self.steps[uri].append((step, self.world.now()))
        return step

    def check_access(self, s3_uri: str) -> None:
        return None  # every run's bucket exists and the supervisor may list it

    def latest(self, s3_uri: str, layout: CheckpointLayout | None = None) -> Checkpoint | None:
        if not self.steps.get(s3_uri):
            return None
        step, at = self.steps[s3_uri][-1]
        return Checkpoint(f"{s3_uri.rstrip('/')}/checkpoint-{step}/", step, LayoutKind.HF, at)

    def write_seconds(self, checkpoint: Checkpoint) -> float | None:
        return 90.0  # every checkpoint of the fake world takes 90 s to write

    def save_activity(
        self, s3_uri: str, layout: CheckpointLayout | None = None, *, active_since_ms: int | None = None
    ) -> int | None:
        written = self.steps.get(s3_uri)
        return written[-1][1] if written else None  # saves are instant: the newest one's time

    # checkpoint retention (the CheckpointRetirer port): every checkpoint is complete
    def view(self, s3_uri: str, layout: CheckpointLayout, *, limit: int) -> RetentionView:
        written = list(reversed(self.steps.get(s3_uri, [])))
        names = [(f"checkpoint-{step}", step) for step, _ in written]
        # saves are instant: each directory's marker and newest object land at its write time
        return RetentionView(
            tuple(names[:limit]),
            frozenset(n for n, _ in names),
            written_ms=tuple((f"checkpoint-{step}", at) for step, at in written[:limit]),
            newest_write_ms=written[0][1] if written else None,
        )

    def retire(self, action: RetireCheckpoints) -> RetirementReported:
        """Moves are idempotent: a directory already gone is done (a retry finishes a half-done pass)."""
        gone = {int(n.removeprefix("checkpoint-")) for n in action.names}
        self.steps[action.s3_uri] = [(s, at) for s, at in self.steps[action.s3_uri] if s not in gone]
        outcomes = tuple(
            RetireOutcome(n, RetireProgress(n), done=True, progressed=True, line=f"{n}: moved")
            for n in action.names
        )
        return RetirementReported(action.s3_uri, outcomes)

    # the checkpoint buckets' versioning (the VersioningReader port): never versioned
    def versioning(self, bucket: str) -> BucketVersioning:
        return BucketVersioning(bucket, None)


class FakeQuotas:
    """Service Quotas of the fake account: the quotas its SageMaker enforces, by their names."""

    def __init__(self, world: World) -> None:
        self.world = world

    def sagemaker_quotas(self) -> Mapping[str, float]:
        return {f"{itype} for training job usage": float(n) for itype, n in self.world.quotas.items()}


class FakeLogs:
    def __init__(self, world: World) -> None:
        self.world = world
        self.lines: dict[str, list[tuple[int, str]]] = defaultdict(list)

    def write(self, job: str, line: str) -> None:
        self.lines[job].append((self.world.now(), line))

    def tail(
        self, job_name: str, lines: int, *, first: Sequence[str] = (), secrets: Sequence[str] = ()
    ) -> tuple[str, ...]:
        return tuple(text for _, text in self.lines.get(job_name, [])[-lines:])

    def has_events_since(self, job_name: str, since_ms: int, *, until_ms: int | None = None) -> bool:
        return any(
            at >= since_ms and (until_ms is None or at < until_ms) for at, _ in self.lines.get(job_name, [])
        )

    def newest_event_ms(self, job_name: str, host: str | None = None) -> int | None:
        return max((at for at, _ in self.lines.get(job_name, [])), default=None)

    def declared_phase_until(self, job_name: str, since_ms: int) -> int | None:
        ends = [
            cover[-1] + 60_000
            for at, text in self.lines.get(job_name, [])
            if at >= since_ms and (cover := phase_cover(text, at))
        ]
        return max(ends, default=None)

    def activity(self, job_name: str, start_ms: int, end_ms: int) -> tuple[tuple[int, float], ...]:
        counts = activity_per_minute(self.lines.get(job_name, []))
        return tuple(sorted((t, float(n)) for t, n in counts.items() if start_ms <= t < end_ms))

    def matching_lines(
        self,
        job_name: str,
        since_ms: int,
        pattern: str,
        *,
        keep: int | None = None,
        newest: bool = False,
        until_ms: int | None = None,
        secrets: Sequence[str] = (),
    ) -> tuple[str, ...]:
        phrase = pattern.strip('"')
        return tuple(
            f"[algo-1] {text}"
            for at, text in self.lines.get(job_name, [])
            if at >= since_ms and (until_ms is None or at < until_ms) and phrase in text
        )

    def host_triage(
        self, job_name: str, now_ms: int, *, first: Sequence[str] = (), secrets: Sequence[str] = ()
    ) -> tuple[str, ...]:
        last = self.lines.get(job_name)
        return (f"algo-1: last log line {(now_ms - last[-1][0]) / 60_000:.0f} min ago",) if last else ()


class FakeMetrics:
    def __init__(self, world: World) -> None:
        self.world = world

    def host_metrics(self, job_name: str, hosts: int, start_ms: int, end_ms: int) -> tuple[HostMetrics, ...]:
        """Every host idle, nothing written: the fake world's hangs are stuck jobs, acted on as
        soon as a quiet alarm is in ALARM (the evidence says so)."""
        minutes = tuple(range(start_ms - start_ms % 60_000, end_ms - 60_000, 60_000))
        zero = tuple((t, 0.0) for t in minutes)
        disk = tuple((t, 20.0) for t in minutes)
        return tuple(HostMetrics(f"algo-{h}", gpu=zero, cpu=zero, disk=disk) for h in range(1, hosts + 1))

    def host_memory(
        self, job_name: str, hosts: int, start_ms: int, end_ms: int
    ) -> tuple[tuple[str, float, int], ...]:
        """The fake world's hosts never run out of memory."""
        return tuple((f"algo-{h}", 40.0, end_ms - end_ms % 60_000) for h in range(1, hosts + 1))

    def activity(
        self, job_name: str, progress_metric: str | None, start_ms: int, end_ms: int
    ) -> tuple[tuple[tuple[int, float], ...], tuple[tuple[int, float], ...] | None]:
        """A training job logs every minute until it ends (the fake world's jobs do not hang
        silently unless a scenario flips an alarm), so its cadence is learned as the floor."""
        job = next((j for j in self.world.sagemaker.jobs.values() if j.name == job_name), None)
        if job is None or job.training_start_ms is None:
            return (), None
        last = min(end_ms, job.end_ms if job.end_ms is not None else end_ms)
        first = max(start_ms, job.training_start_ms)
        minutes = tuple((t, 6.0) for t in range(first - first % 60_000, last, 60_000))
        return minutes, (minutes if progress_metric else None)


class Counting:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def add(
        self, name: str, value: float = 1.0, *, dimension: tuple[str, str] | None = None, unit: str = "Count"
    ) -> None:
        self.counts[name] += int(value)


# --- the world -------------------------------------------------------------------------------


@dataclass
class Delivery:
    kind: str  # job | alarm
    payload: dict[str, Any]
    event_id: str
    tries: int = 0


TRAINING_JOB = {
    "AlgorithmSpecification": {"TrainingImage": "img:latest", "TrainingInputMode": "File"},
    "RoleArn": ROLE,
    "OutputDataConfig": {"S3OutputPath": "s3://bucket/out/"},
    "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 100},
    "StoppingCondition": {"MaxRuntimeInSeconds": 86_400},
    "Tags": [{"Key": "team", "Value": "llm"}],
}


@dataclass
class World:
    quotas: Mapping[str, int] = field(default_factory=lambda: {"ml.p4d.24xlarge": 4, "ml.p4de.24xlarge": 2})
    seed: int = 0
    store: Any = None  # a RunStore; the in-memory one unless given
    log_silence_fallback: bool = False
    store_wrapper: Callable[[Any], Any] | None = None  # e.g. the referee's ObservedStore
    # a job just created is missing from DescribeTrainingJob/Stop/Update for a delay drawn per job
    # in this range (ms): the drill's default read-after-create model, on here too
    read_after_create_ms: tuple[int, int] = (0, 10_000)

    def __post_init__(self) -> None:
        self.clock_ms = START_MS
        self.calls = Calls()
        self.sagemaker = FakeSageMaker(self, self.quotas)
        self.cloudwatch = FakeCloudWatch(self)
        self.sns = FakeSns(self)
        self.checkpoints = FakeCheckpoints(self)
        self.logs = FakeLogs(self)
        self.pending: list[Delivery] = []
        self.dead_letters: list[Delivery] = []
        self._ids = itertools.count(1)
        self._rng = random.Random(self.seed)
        self.raw_store = self.store if self.store is not None else InMemoryRunStore()
        self.store_view = self.store_wrapper(self.raw_store) if self.store_wrapper else self.raw_store
        self.counters = Counting()
        protocols = port_protocols()

        def port(inner: Any, name: str) -> Any:
            return Ported(inner, protocols[name], self.calls)

        self.supervisor = Supervisor(
            store=port(self.store_view, "RunStore"),
            launcher=port(SageMakerLauncher(self.sagemaker), "Launcher"),
            checkpoints=port(self.checkpoints, "CheckpointFinder"),
            notifier=port(SnsNotifier(self.sns, TOPIC), "Notifier"),
            alarms=port(CloudWatchHangAlarms(self.cloudwatch, ALARM_PREFIX), "HangAlarms"),
            logs=port(self.logs, "LogReader"),
            metrics=port(FakeMetrics(self), "MetricsReader"),
            quotas=port(FakeQuotas(self), "QuotaReader"),
            plans=port(SageMakerLauncher(self.sagemaker), "TrainingPlanReader"),
            retirer=port(self.checkpoints, "CheckpointRetirer"),
            versioning=port(self.checkpoints, "VersioningReader"),
            counters=port(self.counters, "Counters"),
            clock=self.now,
            new_id=lambda: ulid(self.clock_ms, self._rng.randbytes(10)),
            settings=SupervisorSettings(
                job_prefix=JOB_PREFIX, log_silence_fallback=self.log_silence_fallback
            ),
        )

    # -- time --------------------------------------------------------------------------------
    def now(self) -> int:
        return self.clock_ms

    def advance(self, ms: int) -> None:
        self.clock_ms += max(0, ms)

    # -- events ------------------------------------------------------------------------------
    def emit_job(self, job: Job) -> None:
        detail = job.detail()
        detail["Tags"] = dict(job.tags)  # events carry tags as a map
        self.pending.append(Delivery("job", detail, f"ev-{next(self._ids)}"))

    def emit_alarm(self, name: str) -> None:
        alarm = self.cloudwatch.alarms[name]
        stamp = (
            datetime.fromtimestamp(alarm["StateUpdatedTimestamp"] / 1000, UTC).strftime(
                "%Y-%m-%dT%H:%M:%S.%f"
            )[:-3]
            + "+0000"
        )
        event = {
            "source": "aws.cloudwatch",
            "detail-type": "CloudWatch Alarm State Change",
            "time": stamp[:19] + "Z",
            "detail": {
                "alarmName": name,
                "state": {"value": alarm["StateValue"], "reason": "Threshold Crossed", "timestamp": stamp},
                "previousState": {"value": "OK"},
            },
        }
        self.pending.append(Delivery("alarm", event, f"ev-{next(self._ids)}"))

    # -- SageMaker's side of the story ---------------------------------------------------------
    def transition(self, job: Job, status: str, secondary: str, reason: str | None = None) -> None:
        now = max(self.now() + 1000, job.modified_ms + 1)  # a state change takes a moment
        self.clock_ms = now
        job.status, job.secondary, job.modified_ms = status, secondary, now
        if secondary == "Training" and job.training_start_ms is None:
            job.training_start_ms = now
        if reason:
            job.failure_reason = reason
        if status in SM_ENDED:
            job.end_ms = now
        self.emit_job(job)

    def progress(self, job: Job, outcome: str) -> str:
        """Move `job` along; `outcome` is honoured when it is valid in the job's state, else the
        natural next state is taken. Returns what happened."""
        if not job.live:
            return "ended already"
        stopping = job.status == "Stopping"
        training = job.secondary == "Training" and not stopping
        if outcome == "checkpoint" and training:
            step = self.checkpoints.write(job.checkpoint_uri)
            self.logs.write(job.name, f"saved checkpoint step {step}")
            return f"checkpoint {step}"
        if outcome == "complete" and (training or stopping):
            self.transition(job, "Completed", "Completed")
            return "Completed"
        if outcome in FAILURES:
            reason, lines = FAILURES[outcome]
            for line in lines:
                self.logs.write(job.name, line)
            self.transition(job, "Failed", "Failed", reason)
            return f"Failed ({outcome})"
        if outcome == "max_runtime" and (training or stopping):
            if not stopping:
                self.transition(job, "Stopping", "MaxRuntimeExceeded")
            self.transition(job, "Stopped", "MaxRuntimeExceeded")
            return "Stopped/MaxRuntimeExceeded"
        if outcome == "spot" and not stopping:
            self.transition(job, "Stopped", "Interrupted")
            return "Stopped/Interrupted"
        if outcome == "external_stop" and not stopping:
            self.transition(job, "Stopping", "Stopping")
            return "Stopping (by a person)"
        # advance
        if stopping:
            secondary = "MaxRuntimeExceeded" if job.secondary == "MaxRuntimeExceeded" else "Stopped"
            self.transition(job, "Stopped", secondary)
            return f"Stopped/{secondary}"
        nxt = {"Starting": "Downloading", "Downloading": "Training"}.get(job.secondary)
        if nxt is None:
            step = self.checkpoints.write(job.checkpoint_uri)
            self.logs.write(job.name, f"saved checkpoint step {step}")
            return f"checkpoint {step}"
        self.transition(job, "InProgress", nxt)
        if nxt == "Training":
            self.logs.write(job.name, "training started")
        return nxt

    def flip_alarm(self, index: int, state: str) -> str | None:
        names = sorted(self.cloudwatch.alarms)
        if not names:
            return None
        name = names[index % len(names)]
        alarm = self.cloudwatch.alarms[name]
        if alarm["StateValue"] == state:
            return None
        alarm["StateValue"], alarm["StateUpdatedTimestamp"] = state, self.now()
        self.emit_alarm(name)
        return name

    # -- invocations -----------------------------------------------------------------------------
    def invoke(self, what: Callable[[], Any]) -> tuple[str, Any]:
        """One Lambda invocation: "ok", "failed" (an exception escaped) or "crashed"."""
        try:
            return "ok", what()
        except Crash as crash:
            return "crashed", crash
        except Exception as exc:
            return "failed", exc
        finally:
            self.calls.dead = False

    def deliver(self, delivery: Delivery) -> str:
        """Deliver one event to its handler; a failed invocation is retried twice by Lambda's
        asynchronous invocation (queued again), then dead-lettered."""
        sup = self.supervisor
        if delivery.kind == "job":
            outcome, _ = self.invoke(lambda: sup.aws.on_job_state_change(delivery.payload, delivery.event_id))
        else:
            signal = hang_signal_from_event(delivery.payload, ALARM_PREFIX)
            outcome = "ok" if signal is None else self.invoke(lambda: sup.aws.on_hang_signal(signal))[0]
        if outcome != "ok":
            delivery.tries += 1
            (self.pending if delivery.tries < 3 else self.dead_letters).append(delivery)
        return outcome

    def deliver_all(self, limit: int = 500) -> None:
        for _ in range(limit):
            if not self.pending:
                return
            self.deliver(self.pending.pop(0))
        raise AssertionError("events keep coming: the delivery queue never drains")

    def sweep(self, cleanup: bool = False) -> str:
        return self.invoke(lambda: self.supervisor.sweep(cleanup_alarms=cleanup))[0]

    def submit(
        self,
        name: str,
        policy: RunPolicy | None = None,
        key: str | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> tuple[str, Any]:
        job = {
            **TRAINING_JOB,
            "CheckpointConfig": {"S3Uri": f"s3://bucket/ckpt/{name}/"},
            **(overrides or {}),
        }
        return self.invoke(
            lambda: self.supervisor.requests.submit(
                name=name,
                owner="arn:aws:iam::123456789012:role/ml-engineer",
                training_job=job,
                policy=policy or RunPolicy(),
                idempotency_key=key or name,
            )
        )

    def cancel(self, run_id: str) -> str:
        return self.invoke(lambda: self.supervisor.requests.cancel(run_id, "tester"))[0]

    # -- what the world holds ----------------------------------------------------------------------
    def run_ids(self) -> list[str]:
        if isinstance(self.raw_store, InMemoryRunStore):
            return sorted(self.raw_store._runs)
        return self.raw_store.run_ids()  # InspectableDynamoDbRunStore

    def run_id_of(self, name: str) -> str | None:
        for rid in self.run_ids():
            run = self.raw_store.get(rid)
            if run is not None and run.name == name:
                return rid
        return None

    def alarm_jobs(self) -> dict[str, set[str]]:
        """job name -> signals of its alarms in CloudWatch."""
        out: dict[str, set[str]] = defaultdict(set)
        for name in self.cloudwatch.alarms:
            parsed = parse_alarm_name(ALARM_PREFIX, name)
            if parsed:
                out[parsed[0]].add(name)
        return out

    def alarm_keys_of(self, job: str) -> set[str]:
        from sagewarden.adapters.cloudwatch_hang_alarms import parse_alarm_key

        found = set()
        for name in self.cloudwatch.alarms:
            parsed = parse_alarm_key(ALARM_PREFIX, name)
            if parsed and parsed[0] == job:
                found.add(parsed[1])
        return found


def replace_policy(policy: RunPolicy, **changes: Any) -> RunPolicy:
    return dataclasses.replace(policy, **changes)


class InspectableDynamoDbRunStore(DynamoDbRunStore):
    """The DynamoDB store plus the few read-outs the referee needs that are not part of the
    RunStore port (the in-memory store has them natively): every run id, a run's due time and
    the alerts still owed. Scans: for tests on moto only."""

    def _scan(self, sk_prefix: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for page in self._ddb.get_paginator("scan").paginate(
            TableName=self._table,
            FilterExpression="begins_with(#sk, :p)",
            ExpressionAttributeNames={"#sk": keys.SK},
            ExpressionAttributeValues={":p": {"S": sk_prefix}},
            ConsistentRead=True,
        ):
            items += page["Items"]
        return items

    def run_ids(self) -> list[str]:
        return sorted(i["run_id"]["S"] for i in self._scan("RUN") if i[keys.SK]["S"] == "RUN")

    def due_of(self, run_id: str) -> int | None:
        item = self._ddb.get_item(
            TableName=self._table,
            Key={keys.PK: {"S": f"RUN#{run_id}"}, keys.SK: {"S": "RUN"}},
            ConsistentRead=True,
        ).get("Item", {})
        due = item.get(keys.GSI_DUE_SK)
        return int(due["N"]) if due else None

    def pending_outbox(self) -> list[OutboxMessage]:
        out = []
        for i in self._scan("OUTBOX#"):
            run_id = i["run_id"]["S"]
            message = self.get_outbox(run_id, i[keys.SK]["S"][len("OUTBOX#") :])
            if message is not None:
                out.append(message)
        return out
