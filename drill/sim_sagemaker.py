"""A simulated SageMaker training service on a virtual clock.

moto's SageMaker completes every job at once and has no StopTrainingJob, quotas or name checks, so
the drill owns this simulation. The supervisor calls it exactly like a boto3 ``sagemaker`` client
(``create_training_job``, ``describe_training_job``, ``stop_training_job``); the drill drives time
with :meth:`SimSageMaker.advance` and reads simulated GPU metrics, heartbeat counts and log tails.

Clock ownership: ``advance(to_ms)`` owns the clock. It moves the :class:`VirtualClock` forwards to
each change as it processes it (so an ``emit`` callback sees the event's own time as "now", and may
call back into the API re-entrantly), then to ``to_ms``. Drivers call ``advance`` instead of
moving the clock themselves; ``advance`` itself is not re-entrant.

Everything random comes from ``random.Random(seed)`` (event ids, per-job noise salts) or from a
hash of that salt, so two simulations with the same seed and the same calls emit identical events.
Metrics are answered analytically from per-job phase intervals, and ``advance`` jumps from one
change to the next, so weeks of virtual time take milliseconds.

Logs: every line is kept in memory (``log_tail``); with a ``logs_client`` lines are also buffered
and written to ``/aws/sagemaker/TrainingJobs`` with one put_log_events per stream per flush. A
flush happens before every emitted event (a handler may read the tail), and at the end of
``advance`` -- every call when ``log_flush_interval_s`` is 0 (default), else at most once per that
many virtual seconds (each moto call costs about 2 ms: raise it for long demos). moto accepts
events only within 14 days before / 2 hours after the wall clock; wrap the run in
``drill.clock.moto_logs_follow(clock)`` (rejections are counted in ``log_events_rejected``).

Timing model (all configurable through :class:`StartupTimes` and :class:`JobProfile`):
Starting (provision_s) -> Downloading (download_s; describe's TrainingStartTime is set here,
instances are up) -> Training (MaxRuntimeInSeconds counts from here) -> Uploading (upload_s) ->
Completed. Stops: Stopping for stop_s, longer while a SIGTERM checkpoint is written (SIGKILL at
120 s leaves it half-written); a hung script ignores SIGTERM and is killed at 120 s.
"""

from __future__ import annotations

import bisect
import copy
import functools
import json
import math
import random
import re
import uuid
import warnings
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from drill.clock import VirtualClock, from_ms
from sagewarden.keys import (
    HEARTBEAT_DIMENSION,
    HEARTBEAT_METRIC,
    HEARTBEAT_NAMESPACE,
    TAG_ATTEMPT,
    TAG_RUN_ID,
    TAG_RUN_NAME,
    TRAINING_LOG_GROUP,
    TRAINING_METRIC_NAMESPACE,
)

__all__ = [
    "CAPACITY_FAILURE_REASON",
    "CAPACITY_STATUS_MESSAGE",
    "FAULT_KINDS",
    "HARDWARE_FAILURE_REASON",
    "INTERNAL_ERROR_REASON",
    "Fault",
    "JobProfile",
    "SimJob",
    "SimSageMaker",
    "StartupTimes",
]

# ----------------------------------------------------------------------------------------------
# Texts
# ----------------------------------------------------------------------------------------------

INTERNAL_ERROR_REASON = "InternalServerError: We encountered an internal error.  Please try again."
HARDWARE_FAILURE_REASON = (
    "HardwareError: Instance algo-{host} failed its health checks (unhealthy instance) and "
    "automatic training cluster repair was exhausted. Please retry the training job."
)
CAPACITY_FAILURE_REASON = (
    "CapacityError: Unable to provision requested ML compute capacity. "
    "Please retry using a different ML instance type."
)
CAPACITY_STATUS_MESSAGE = "Insufficient capacity error from EC2 while launching instances, retrying!"
ALGORITHM_ERROR_REASON = (
    'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage "{message}"\n'
    'Command "torchrun --nnodes {nodes} --nproc_per_node {gpus} train.py", exit code: 1'
)
DEFAULT_ALGORITHM_LOG_LINE = "RuntimeError: simulated failure in the user training script"

_STATUS_MESSAGES = {
    "Starting": "Launching requested ML instances",
    "Downloading": "Downloading the training image and input data",
    "Training": "Training image download completed. Training in progress.",
    "Uploading": "Uploading the generated training model",
    "Completed": "Training job completed",
    "Failed": "Training job failed",
    "Stopping": "Stopping the training job",
    "Stopped": "The training job was stopped",
    "MaxRuntimeExceeded": "The training job was stopped because it reached its maximum runtime",
    "Interrupted": "The training job was interrupted because spot capacity was reclaimed",
}
_WARM_STARTING_MESSAGE = "Reusing instances from a warm pool"

# ----------------------------------------------------------------------------------------------
# Constants
# ----------------------------------------------------------------------------------------------

MINUTE_MS = 60_000
KILL_AFTER_MS = 120_000  # StopTrainingJob: SIGTERM, then SIGKILL after 120 s
DEFAULT_MAX_RUNTIME_S = 86_400
MAX_RUNTIME_LIMIT_S = 2_419_200
MAX_PENDING_RANGE_S = (1_800, 2_419_200)
DEFAULT_CAPACITY_WAIT_MIN = 30.0
DEFAULT_SAVE_LONG_MIN = 12.0
DEFAULT_EVAL_MIN = 10.0
_NAME_RE = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_NAME_PATTERN = "^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"
_TERMINAL = frozenset({"Completed", "Failed", "Stopped"})
_CRASH_KINDS = frozenset({"internal_error", "hardware", "algorithm_error"})
_HANG_KINDS = frozenset({"hang_spin", "dead_host", "stuck_dataloader", "hang_spin_logging"})
_PAUSE_KINDS = frozenset({"checkpoint_save_long", "eval_phase"})
_TRAINING_FAULTS = _CRASH_KINDS | _HANG_KINDS | _PAUSE_KINDS | {"spot_interruption"}
_START_FAULTS = frozenset({"capacity", "throttle"})
FAULT_KINDS = _TRAINING_FAULTS | _START_FAULTS
_HANG_PHASES = frozenset({"hang_spin", "dead_host", "stuck", "spin_logging"})
# spin_logging: the training loop is stuck in a collective (GPUs spin) while another thread keeps
# writing lines, so neither log silence nor idle GPUs show it; only the progress metric stops
_LOGGING_PHASES = frozenset({"train", "eval", "spin_logging"})
_STATS = frozenset({"Average", "Minimum", "Maximum", "Sum", "SampleCount"})
_MASK64 = (1 << 64) - 1


# ----------------------------------------------------------------------------------------------
# Public data classes
# ----------------------------------------------------------------------------------------------


@dataclass
class JobProfile:
    """How the user's training script behaves."""

    total_steps: int = 10_000
    steps_per_minute: float = 10.0
    checkpoint_every_steps: int = 1_000
    checkpoint_layout: str = "hf"  # "hf" | "megatron" | "dcp"
    checkpoint_write_seconds: int = 120  # no log lines, GPU low; objects appear progressively, marker last
    checkpoint_on_sigterm: bool = True  # final save on StopTrainingJob / MaxRuntime / spot (not when hung)
    gpus_per_host: int = 8
    gpu_util_per_host: float = 760.0  # summed over the host's GPUs (0..100*gpus)
    log_lines_per_minute: int = 6  # per host while training normally
    progress_metric: str = "train:throughput"  # a MetricDefinitions metric, reported each minute of training
    startup_log_lines: tuple[str, ...] = ("Loading model...", "Initializing process group")


@dataclass
class StartupTimes:
    provision_s: int = 360  # Starting
    download_s: int = 120  # Downloading (image + data)
    warm_provision_s: int = 20  # when a warm pool is reused (KeepAlivePeriodInSeconds)
    warm_download_s: int = 15
    upload_s: int = 60  # Uploading before Completed
    stop_s: int = 60  # Stopping -> Stopped after StopTrainingJob (SIGKILL at 120 s)


@dataclass
class Fault:
    """A failure or phase injected into matching jobs.

    Crashes (internal_error, hardware, algorithm_error) end the job Failed; spot_interruption ends
    it Stopped/Interrupted; hangs (hang_spin, dead_host, stuck_dataloader) last until the job is
    stopped; benign phases (checkpoint_save_long, eval_phase) pause progress for ``duration_min``.
    Start-time faults: capacity (Pending, then Failed or Stopped by MaxPendingTimeInSeconds) and
    throttle (the next matching CreateTrainingJob raises ThrottlingException).
    """

    kind: str
    run: str | None = None  # tag sagewarden:run-name (None = any job)
    attempt: int | None = None  # tag sagewarden:attempt as int (None = any attempt)
    after_training_min: float = 0.0  # after the attempt entered Training (start-time faults: after creation)
    duration_min: float | None = None  # benign phases and capacity waits
    host: int = 1  # host-specific faults (algo-<host>)
    failure_reason: str | None = None  # override FailureReason text
    log_lines: tuple[str, ...] = ()  # lines the fault's host writes when it fires
    half_written_checkpoint: bool = False  # at a crash, leave a newest checkpoint dir without its marker
    once: bool = True  # consumed after firing once
    instance_type: str | None = None  # only jobs of this ResourceConfig.InstanceType

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; expected one of {sorted(FAULT_KINDS)}")


@dataclass
class _Save:
    """A checkpoint save in progress: files appear at evenly spaced times, the marker last."""

    step: int
    start_ms: int
    end_ms: int
    files: list[tuple[str, bytes]]
    reason: str  # periodic | long | sigterm
    written: int = 0
    kill_ms: int | None = None

    def file_time(self, index: int) -> int:
        return self.start_ms + (self.end_ms - self.start_ms) * (index + 1) // len(self.files)

    def next_time(self) -> int | None:
        if self.written >= len(self.files):
            return None
        t = self.file_time(self.written)
        if self.kill_ms is not None and t > self.kill_ms:
            return None
        return t


@dataclass
class _FaultState:
    fault: Fault
    seq: int
    consumed: bool = False


@dataclass
class _WarmPool:
    instance_type: str
    instance_count: int
    expires_ms: int
    source_job: str


@dataclass
class SimJob:
    """One simulated training job. Times are epoch milliseconds of the virtual clock."""

    name: str
    arn: str
    request: dict[str, Any]
    profile: JobProfile
    tags: dict[str, str]
    run_name: str | None
    run_id: str | None
    attempt: int | None
    instance_type: str
    instance_count: int
    created_ms: int
    seq: int
    status: str = "InProgress"
    secondary: str = "Starting"
    status_message: str = ""
    failure_reason: str | None = None
    # SecondaryStatusTransitions: Status, StartTime, EndTime (ms or None), StatusMessage
    transitions: list[dict[str, Any]] = field(default_factory=list)
    provisioned_ms: int | None = None  # instances ready (Downloading); describe's TrainingStartTime
    training_started_ms: int | None = None  # entered secondary Training (MaxRuntime counts from here)
    training_ended_ms: int | None = None  # left secondary Training
    ended_ms: int | None = None  # terminal; describe's TrainingEndTime
    last_modified_ms: int = 0
    start_step: int = 0  # from Environment SAGEWARDEN_RESUME_STEP
    step: int = 0  # refreshed at phase changes and at the end of every advance()
    checkpoints: list[int] = field(default_factory=list)  # steps whose completion marker was written
    warm_pool_used: bool = False
    capacity_wait: bool = False
    # completed | stopped | max_runtime | spot_interruption | internal_error | hardware |
    # algorithm_error | capacity | max_pending
    ended_reason: str | None = None
    stop_requested_ms: int | None = None
    faults_fired: list[str] = field(default_factory=list)
    # --- internals -----------------------------------------------------------------------------
    _salt: int = 0
    _stepf: float = 0.0
    _phase: str | None = None  # train | save | eval | hang_spin | dead_host | stuck (only in Training)
    _phase_start: int = 0
    _phase_target: float = 0.0
    _after_save: str = "train"  # train | upload
    _dead_host: int = 0
    _timer_at: int | None = None
    _timer_kind: str = ""
    _stop_final: str = "Stopped"
    _save: _Save | None = None
    _last_saved_step: int = 0
    _bound: list[tuple[int, int, _FaultState]] = field(default_factory=list)
    _capacity: _FaultState | None = None
    _seg_starts: list[int] = field(default_factory=list)
    _segs: list[tuple[int, int | None, str, int]] = field(default_factory=list)  # start, end, kind, dead host
    _line_times: list[int] = field(default_factory=list)  # discrete log lines (not periodic progress)
    _lines_until: int = 0
    _tails: dict[int, deque[str]] = field(default_factory=dict)
    _warm_pool_state: str | None = None  # Available | Reused | Terminated (after the end)
    _warm_reused_by: str | None = None
    _warm_expires_ms: int | None = None

    @property
    def is_terminal(self) -> bool:
        return self.status in _TERMINAL

    @property
    def hosts(self) -> int:
        return self.instance_count

    @property
    def times(self) -> dict[str, int | None]:
        """The job's milestones in epoch ms (None where not reached)."""
        return {
            "created": self.created_ms,
            "provisioned": self.provisioned_ms,
            "training_started": self.training_started_ms,
            "training_ended": self.training_ended_ms,
            "stop_requested": self.stop_requested_ms,
            "ended": self.ended_ms,
            "last_modified": self.last_modified_ms,
        }

    def current_step(self, now_ms: int) -> int:
        """The script's global step at ``now_ms`` (only moves while training normally)."""
        if self._phase == "train":
            spm = self.profile.steps_per_minute
            s = self._stepf + spm * (now_ms - self._phase_start) / MINUTE_MS
            return int(min(s, self._phase_target))
        return int(self._stepf)


# ----------------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------------


def _client_error(code: str, message: str, operation: str) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {
                "RequestId": "sim-error",
                "HostId": "",
                "HTTPStatusCode": 400,
                "HTTPHeaders": {},
                "RetryAttempts": 0,
            },
        },
        operation,
    )


def _iso_ms(ms: int) -> str:
    return from_ms(ms).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _iso_s(ms: int) -> str:
    return from_ms(ms).strftime("%Y-%m-%dT%H:%M:%SZ")


def _mix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def _noise(salt: int, host: int, minute: int) -> float:
    """Deterministic noise in [-1, 1) for one (job, host, minute) sample."""
    return (_mix64(_mix64(salt ^ host) ^ (minute & _MASK64)) >> 11) / float(1 << 52) - 1.0


@functools.lru_cache(maxsize=1)
def _create_input_shape() -> Any:
    import botocore.session  # local: loading the service model takes a moment

    model = botocore.session.get_session().get_service_model("sagemaker")
    return model.operation_model("CreateTrainingJob").input_shape


def _parse_s3_uri(uri: str) -> tuple[str, str]:
    if not uri.startswith("s3://"):
        raise ValueError(f"not an s3 uri: {uri}")
    bucket, _, prefix = uri[5:].partition("/")
    return bucket, prefix.strip("/")


def _checkpoint_files(layout: str, step: int, total_steps: int) -> list[tuple[str, bytes]]:
    """Relative keys and tiny bodies of one checkpoint; the completion marker is the last entry."""
    if layout == "hf":
        d = f"checkpoint-{step}"
        state = {"global_step": step, "max_steps": total_steps, "log_history": []}
        return [
            (f"{d}/model.safetensors", f"sim-weights:{step}".encode()),
            (f"{d}/optimizer.pt", f"sim-optimizer:{step}".encode()),
            (f"{d}/trainer_state.json", json.dumps(state).encode()),
        ]
    if layout == "megatron":
        d = f"iter_{step:07d}"
        return [
            (f"{d}/mp_rank_00/model_optim_rng.pt", f"sim-rank0:{step}".encode()),
            (f"{d}/mp_rank_01/model_optim_rng.pt", f"sim-rank1:{step}".encode()),
            ("latest_checkpointed_iteration.txt", str(step).encode()),
        ]
    if layout == "dcp":
        d = f"step_{step}"
        return [
            (f"{d}/__0_0.distcp", f"sim-shard0:{step}".encode()),
            (f"{d}/__1_0.distcp", f"sim-shard1:{step}".encode()),
            (f"{d}/.metadata", json.dumps({"step": step}).encode()),
        ]
    raise ValueError(f"unknown checkpoint layout {layout!r}")


def _int_tag(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


# ----------------------------------------------------------------------------------------------
# The simulation
# ----------------------------------------------------------------------------------------------


class SimSageMaker:
    """A boto3-shaped SageMaker training API on a virtual clock (see module docstring)."""

    def __init__(
        self,
        clock: VirtualClock,
        *,
        s3_client: Any,
        logs_client: Any | None = None,
        account_id: str = "123456789012",
        region: str = "us-east-1",
        quotas: dict[str, int] | None = None,
        total_instance_quota: int | None = None,
        startup: StartupTimes | None = None,
        seed: int = 0,
        emit: Callable[[dict[str, Any]], None] | None = None,
        timestamp_form: str = "millis",
        progress_log_interval_s: int = 600,
        log_flush_interval_s: int = 0,
    ) -> None:
        if timestamp_form not in ("millis", "string"):
            raise ValueError("timestamp_form must be 'millis' or 'string'")
        if progress_log_interval_s < 60:
            raise ValueError("progress_log_interval_s must be at least 60")
        self.clock = clock
        self.account_id = account_id
        self.region = region
        self.quotas = dict(quotas or {})
        self.total_instance_quota = total_instance_quota
        self.startup = startup or StartupTimes()
        self.emit = emit
        self.timestamp_form = timestamp_form
        self.events: list[dict[str, Any]] = []  # every event emitted, in order
        self.log_events_rejected = 0  # events moto CloudWatch Logs refused (outside its time window)
        self.fault_log: list[tuple[int, str, str, int]] = []  # (at ms, job name, fault kind, host)
        self._s3 = s3_client
        self._logs = logs_client
        self._rng = random.Random(seed)
        self._progress_ms = progress_log_interval_s * 1000
        self._jobs: dict[str, SimJob] = {}
        self._live: dict[str, SimJob] = {}
        self._profiles: dict[str, JobProfile] = {}
        self._faults: list[_FaultState] = []
        self._fault_seq = 0
        self._throttle = 0
        self._warm_pools: list[_WarmPool] = []
        self._outbox: list[tuple[int, int, dict[str, Any]]] = []
        self._out_seq = 0
        self._advancing = False
        self._request_seq = 0
        self._log_buffer: dict[str, list[tuple[int, int, str]]] = {}
        self._log_seq = 0
        self._streams: set[str] = set()
        self._group_ready = False
        self._warned_rejects = False
        self._log_flush_ms = log_flush_interval_s * 1000
        self._last_flush_ms = clock.now_ms

    # ------------------------------------------------------------------------------------------
    # boto3-shaped API
    # ------------------------------------------------------------------------------------------

    def create_training_job(self, **request: Any) -> dict[str, Any]:
        op = "CreateTrainingJob"
        now = self.clock.now_ms
        self._gate(op)
        tags = self._tags_of(request)
        self._throttle_fault(tags, request)
        self._validate(request, op)
        name: str = request["TrainingJobName"]
        arn = self._arn(name)
        if name in self._jobs:
            raise _client_error(
                "ResourceInUse",
                "Training job names must be unique within an AWS account and region, and a training "
                f"job with this name already exists ({arn})",
                op,
            )
        rc = request["ResourceConfig"]
        itype: str = rc["InstanceType"]
        count: int = rc["InstanceCount"]
        self._check_quota(itype, count, op)

        run_name = tags.get(TAG_RUN_NAME)
        profile = self._profiles.get(run_name) if run_name else None
        profile = profile or JobProfile()
        env = request.get("Environment") or {}
        start_step = _int_tag(env.get("SAGEWARDEN_RESUME_STEP")) or 0
        job = SimJob(
            name=name,
            arn=arn,
            request=copy.deepcopy(request),
            profile=profile,
            tags=tags,
            run_name=run_name,
            run_id=tags.get(TAG_RUN_ID),
            attempt=_int_tag(tags.get(TAG_ATTEMPT)),
            instance_type=itype,
            instance_count=count,
            created_ms=now,
            seq=len(self._jobs),
            start_step=start_step,
            step=start_step,
            _salt=self._rng.getrandbits(64),
            _stepf=float(start_step),
            _last_saved_step=start_step,
            _lines_until=now,
        )
        self._jobs[name] = job
        self._live[name] = job

        keep_alive = int(rc.get("KeepAlivePeriodInSeconds") or 0)
        if keep_alive > 0:
            job.warm_pool_used = self._take_warm_pool(job)
        capacity = None if job.warm_pool_used else self._take_capacity_fault(job)
        message = _WARM_STARTING_MESSAGE if job.warm_pool_used else _STATUS_MESSAGES["Starting"]
        self._transition(job, now, "InProgress", "Starting", message)
        if capacity is not None:
            job.capacity_wait = True
            job._capacity = capacity
            delay = max(round(capacity.fault.after_training_min * MINUTE_MS), 1000)
            self._set_timer(job, now + delay, "pending")
        else:
            provision = self.startup.warm_provision_s if job.warm_pool_used else self.startup.provision_s
            self._set_timer(job, now + provision * 1000, "downloading")
        return {"TrainingJobArn": arn, "ResponseMetadata": self._response_metadata()}

    def describe_training_job(self, *, TrainingJobName: str) -> dict[str, Any]:
        job = self._existing_job(TrainingJobName, "DescribeTrainingJob")
        r = job.request
        out: dict[str, Any] = {
            "TrainingJobName": job.name,
            "TrainingJobArn": job.arn,
        }
        if job.status == "Completed":
            out["ModelArtifacts"] = {"S3ModelArtifacts": self._model_artifacts(job)}
        out["TrainingJobStatus"] = job.status
        out["SecondaryStatus"] = job.secondary
        if job.failure_reason is not None:
            out["FailureReason"] = job.failure_reason
        out["HyperParameters"] = copy.deepcopy(r.get("HyperParameters", {}))
        out["AlgorithmSpecification"] = copy.deepcopy(r["AlgorithmSpecification"])
        out["RoleArn"] = r["RoleArn"]
        for key in ("InputDataConfig", "OutputDataConfig", "ResourceConfig", "VpcConfig"):
            if key in r:
                out[key] = copy.deepcopy(r[key])
        warm = self._warm_pool_status(job)
        if warm is not None:
            out["WarmPoolStatus"] = warm
        out["StoppingCondition"] = self._stopping_condition(job)
        out["CreationTime"] = from_ms(job.created_ms)
        if job.provisioned_ms is not None:
            out["TrainingStartTime"] = from_ms(job.provisioned_ms)
        if job.ended_ms is not None:
            out["TrainingEndTime"] = from_ms(job.ended_ms)
        out["LastModifiedTime"] = from_ms(job.last_modified_ms)
        out["SecondaryStatusTransitions"] = [
            {k: (from_ms(v) if k in ("StartTime", "EndTime") else v) for k, v in tr.items() if v is not None}
            for tr in job.transitions
        ]
        out["EnableNetworkIsolation"] = bool(r.get("EnableNetworkIsolation", False))
        out["EnableInterContainerTrafficEncryption"] = bool(
            r.get("EnableInterContainerTrafficEncryption", False)
        )
        out["EnableManagedSpotTraining"] = bool(r.get("EnableManagedSpotTraining", False))
        for key in ("CheckpointConfig", "Environment", "RetryStrategy"):
            if key in r:
                out[key] = copy.deepcopy(r[key])
        if job.ended_ms is not None and job.provisioned_ms is not None:
            seconds = (job.ended_ms - job.provisioned_ms) // 1000
            out["TrainingTimeInSeconds"] = seconds
            out["BillableTimeInSeconds"] = seconds * job.instance_count
        out["ResponseMetadata"] = self._response_metadata()
        return out

    def stop_training_job(self, *, TrainingJobName: str) -> dict[str, Any]:
        op = "StopTrainingJob"
        job = self._existing_job(TrainingJobName, op)
        if job.is_terminal:
            raise _client_error(
                "ValidationException",
                f"The request was rejected because the training job is in status {job.status}.",
                op,
            )
        if job.status == "InProgress":
            self._begin_stop(job, self.clock.now_ms, "Stopped", "stopped")
        return {"ResponseMetadata": self._response_metadata()}

    # ------------------------------------------------------------------------------------------
    # Simulation control
    # ------------------------------------------------------------------------------------------

    def set_profile(self, run_name: str, profile: JobProfile) -> None:
        """Behaviour of jobs tagged ``sagewarden:run-name = run_name`` created from now on."""
        if profile.checkpoint_layout not in ("hf", "megatron", "dcp"):
            raise ValueError(f"unknown checkpoint layout {profile.checkpoint_layout!r}")
        self._profiles[run_name] = profile

    def inject(self, fault: Fault) -> None:
        """Arm a fault. Training faults also bind to matching jobs already in Training."""
        state = _FaultState(fault=fault, seq=self._fault_seq)
        self._fault_seq += 1
        self._faults.append(state)
        if fault.kind in _TRAINING_FAULTS:
            now = self.clock.now_ms
            for job in self._live.values():
                if job.secondary == "Training" and job.status == "InProgress" and self._matches(fault, job):
                    self._bind(job, state, now)

    def throttle_next(self, n: int) -> None:
        """The next ``n`` API calls (create, describe or stop) raise ThrottlingException."""
        self._throttle += n

    def next_event_time(self) -> int | None:
        """Earliest virtual time at which something is pending, never earlier than now; None if idle.

        It equals ``clock.now_ms`` when an API call left an event to deliver: call ``advance(now)``.
        """
        best: int | None = self._outbox[0][0] if self._outbox else None
        item = self._earliest_item()
        if item is not None and (best is None or item[0] < best):
            best = item[0]
        return None if best is None else max(best, self.clock.now_ms)

    def advance(self, to_ms: int) -> None:
        """Process everything up to ``to_ms`` in time order; moves the clock (see module docstring)."""
        if to_ms < self.clock.now_ms:
            raise ValueError(f"cannot advance backwards: {to_ms} < {self.clock.now_ms}")
        if self._advancing:
            raise RuntimeError("advance() is not re-entrant (called from an emit callback?)")
        self._advancing = True
        try:
            while True:
                item = self._earliest_item()
                t_out = self._outbox[0][0] if self._outbox else None
                if t_out is not None and t_out <= to_ms and (item is None or t_out <= item[0]):
                    t, _, event = self._outbox.pop(0)
                    self._move_clock(t)
                    self.flush_logs()  # a handler may read the log tail on this event
                    self.events.append(event)
                    if self.emit is not None:
                        self.emit(event)
                    continue
                if item is None or item[0] > to_ms:
                    break
                self._move_clock(item[0])
                self._fire(item[3], item[4], item[0])
            self._move_clock(to_ms)
            for job in list(self._live.values()):
                self._progress_lines(job, to_ms)
                job.step = job.current_step(to_ms)
            if self.clock.now_ms - self._last_flush_ms >= self._log_flush_ms:
                self.flush_logs()
        finally:
            self._advancing = False

    # ------------------------------------------------------------------------------------------
    # Observation
    # ------------------------------------------------------------------------------------------

    def jobs(self) -> list[SimJob]:
        return list(self._jobs.values())

    def job(self, name: str) -> SimJob:
        return self._jobs[name]

    def live_jobs(self, run_id: str) -> list[str]:
        return [j.name for j in self._live.values() if j.run_id == run_id]

    def log_tail(self, job_name: str, host: int, n: int) -> list[str]:
        job = self._jobs.get(job_name)
        if job is None:
            return []
        if not job.is_terminal:
            self._progress_lines(job, self.clock.now_ms)
        tail = job._tails.get(host)
        if not tail or n <= 0:
            return []
        return list(tail)[-n:]

    def metric_datapoints(
        self,
        namespace: str,
        metric: str,
        dimensions: dict[str, str],
        start_ms: int,
        end_ms: int,
        period_s: int,
        stat: str,
    ) -> list[tuple[int, float]]:
        """Simulated CloudWatch datapoints ``[(bucket start ms, value)]`` for [start_ms, end_ms).

        GPUUtilization (``/aws/sagemaker/TrainingJobs``, ``Host=<job>/algo-<n>``): one sample per
        minute per host while the job is in Training. LogEvents (``Sagewarden/Heartbeat``,
        ``TrainingJobName=<job>``): per-minute count of lines the job wrote, only for minutes with
        at least one line (like a metric fed by a log subscription). Only samples up to now exist.
        """
        if stat not in _STATS:
            raise ValueError(f"unsupported stat {stat!r}")
        if period_s <= 0 or period_s % 60:
            raise ValueError("period_s must be a positive multiple of 60")
        samples: Iterator[tuple[int, float]]
        gpu = namespace == TRAINING_METRIC_NAMESPACE and metric == "GPUUtilization"
        heartbeat = namespace == HEARTBEAT_NAMESPACE and metric == HEARTBEAT_METRIC
        if gpu and set(dimensions) == {"Host"}:
            job_name, _, algo = dimensions["Host"].rpartition("/")
            job = self._jobs.get(job_name)
            host = _int_tag(algo[5:]) if algo.startswith("algo-") else None
            if job is None or host is None or not 1 <= host <= job.instance_count:
                return []
            samples = self._gpu_samples(job, host, start_ms, end_ms)
        elif namespace == TRAINING_METRIC_NAMESPACE and set(dimensions) == {"TrainingJobName"}:
            job = self._jobs.get(dimensions["TrainingJobName"])
            if job is None or metric != job.profile.progress_metric:
                return []
            samples = self._progress_samples(job, start_ms, end_ms)
        elif heartbeat and set(dimensions) == {HEARTBEAT_DIMENSION}:
            job = self._jobs.get(dimensions[HEARTBEAT_DIMENSION])
            if job is None:
                return []
            samples = self._log_samples(job, start_ms, end_ms)
        else:
            return []
        return _aggregate(samples, period_s * 1000, stat)

    # ------------------------------------------------------------------------------------------
    # API helpers
    # ------------------------------------------------------------------------------------------

    def _existing_job(self, name: str, op: str) -> SimJob:
        """Throttling first, then the job, as the API answers: unknown names are a ValidationException."""
        self._gate(op)
        job = self._jobs.get(name)
        if job is None:
            raise _client_error("ValidationException", "Requested resource not found.", op)
        return job

    def _gate(self, op: str) -> None:
        if self._throttle > 0:
            self._throttle -= 1
            raise _client_error("ThrottlingException", "Rate exceeded", op)

    def _response_metadata(self) -> dict[str, Any]:
        self._request_seq += 1
        return {"RequestId": f"sim-{self._request_seq:012d}", "HTTPStatusCode": 200, "RetryAttempts": 0}

    def _arn(self, name: str) -> str:
        return f"arn:aws:sagemaker:{self.region}:{self.account_id}:training-job/{name.lower()}"

    @staticmethod
    def _tags_of(request: dict[str, Any]) -> dict[str, str]:
        tags: dict[str, str] = {}
        for tag in request.get("Tags") or []:
            if isinstance(tag, dict) and "Key" in tag:
                tags[str(tag["Key"])] = str(tag.get("Value", ""))
        return tags

    def _throttle_fault(self, tags: dict[str, str], request: dict[str, Any]) -> None:
        rc = request.get("ResourceConfig") or {}
        for state in self._faults:
            f = state.fault
            if f.kind != "throttle" or state.consumed:
                continue
            if not self._matches_tags(f, tags, rc.get("InstanceType")):
                continue
            if f.once:
                state.consumed = True
            name = str(request.get("TrainingJobName", ""))
            self.fault_log.append((self.clock.now_ms, name, "throttle", f.host))
            raise _client_error("ThrottlingException", "Rate exceeded", "CreateTrainingJob")

    def _validate(self, request: dict[str, Any], op: str) -> None:
        from botocore.validate import ParamValidator

        report = ParamValidator().validate(request, _create_input_shape())
        if report.has_errors():
            raise _client_error("ValidationException", report.generate_report(), op)
        for key in (
            "TrainingJobName",
            "AlgorithmSpecification",
            "RoleArn",
            "OutputDataConfig",
            "ResourceConfig",
            "StoppingCondition",
        ):
            if key not in request:
                raise _client_error(
                    "ValidationException",
                    f"1 validation error detected: Value null at '{key[0].lower() + key[1:]}' failed to "
                    "satisfy constraint: Member must not be null",
                    op,
                )
        name = request["TrainingJobName"]
        if len(name) > 63 or not _NAME_RE.match(name):
            raise _client_error(
                "ValidationException",
                f"1 validation error detected: Value '{name}' at 'trainingJobName' failed to satisfy "
                f"constraint: Member must satisfy regular expression pattern: {_NAME_PATTERN}",
                op,
            )
        rc = request["ResourceConfig"]
        for key in ("InstanceType", "InstanceCount", "VolumeSizeInGB"):
            if key not in rc:
                raise _client_error(
                    "ValidationException",
                    f"1 validation error detected: Value null at 'resourceConfig.{key[0].lower() + key[1:]}' "
                    "failed to satisfy constraint: Member must not be null",
                    op,
                )
        sc = request["StoppingCondition"]
        max_runtime = sc.get("MaxRuntimeInSeconds", DEFAULT_MAX_RUNTIME_S)
        if not 1 <= max_runtime <= MAX_RUNTIME_LIMIT_S:
            raise _client_error(
                "ValidationException",
                f"MaxRuntimeInSeconds must be between 1 and {MAX_RUNTIME_LIMIT_S} seconds.",
                op,
            )
        pending = sc.get("MaxPendingTimeInSeconds")
        if pending is not None and not MAX_PENDING_RANGE_S[0] <= pending <= MAX_PENDING_RANGE_S[1]:
            raise _client_error(
                "ValidationException",
                f"MaxPendingTimeInSeconds must be between {MAX_PENDING_RANGE_S[0]} and "
                f"{MAX_PENDING_RANGE_S[1]} seconds.",
                op,
            )
        ckpt = request.get("CheckpointConfig")
        if ckpt is not None and not str(ckpt.get("S3Uri", "")).startswith("s3://"):
            raise _client_error("ValidationException", "CheckpointConfig.S3Uri must be an s3:// URI.", op)

    def _check_quota(self, itype: str, count: int, op: str) -> None:
        limit = self.quotas.get(itype)
        if limit is not None:
            used = sum(j.instance_count for j in self._live.values() if j.instance_type == itype)
            if used + count > limit:
                raise self._limit_error(f"{itype} for training job usage", limit, used, count, op)
        if self.total_instance_quota is not None:
            used = sum(j.instance_count for j in self._live.values())
            if used + count > self.total_instance_quota:
                raise self._limit_error(
                    "Number of instances across all training jobs", self.total_instance_quota, used, count, op
                )

    @staticmethod
    def _limit_error(what: str, limit: int, used: int, delta: int, op: str) -> ClientError:
        return _client_error(
            "ResourceLimitExceeded",
            f"The account-level service limit '{what}' is {limit} Instances, with current utilization of "
            f"{used} Instances and a request delta of {delta} Instances. Please contact AWS support to "
            "request an increase for this limit.",
            op,
        )

    def _stopping_condition(self, job: SimJob) -> dict[str, Any]:
        sc = copy.deepcopy(job.request.get("StoppingCondition") or {})
        sc.setdefault("MaxRuntimeInSeconds", DEFAULT_MAX_RUNTIME_S)
        return sc

    def _model_artifacts(self, job: SimJob) -> str:
        base = str(job.request["OutputDataConfig"].get("S3OutputPath", "")).rstrip("/")
        return f"{base}/{job.name}/output/model.tar.gz"

    # ------------------------------------------------------------------------------------------
    # Warm pools and faults
    # ------------------------------------------------------------------------------------------

    def _take_warm_pool(self, job: SimJob) -> bool:
        now = self.clock.now_ms
        self._warm_pools = [p for p in self._warm_pools if now < p.expires_ms]
        for pool in self._warm_pools:
            if (
                pool.instance_type == job.instance_type
                and pool.instance_count == job.instance_count
                and now < pool.expires_ms
            ):
                self._warm_pools.remove(pool)
                source = self._jobs[pool.source_job]
                source._warm_pool_state = "Reused"
                source._warm_reused_by = job.arn
                return True
        return False

    def _leave_warm_pool(self, job: SimJob, t: int) -> None:
        keep_alive = int(job.request["ResourceConfig"].get("KeepAlivePeriodInSeconds") or 0)
        if keep_alive <= 0:
            return
        if job.provisioned_ms is None or job.ended_reason in ("hardware", "internal_error"):
            job._warm_pool_state = "Terminated"
            return
        job._warm_pool_state = "Available"
        job._warm_expires_ms = t + keep_alive * 1000
        pool = _WarmPool(job.instance_type, job.instance_count, job._warm_expires_ms, job.name)
        self._warm_pools.append(pool)

    def _warm_pool_status(self, job: SimJob) -> dict[str, Any] | None:
        keep_alive = int(job.request["ResourceConfig"].get("KeepAlivePeriodInSeconds") or 0)
        if keep_alive <= 0:
            return None
        if not job.is_terminal:
            return {"Status": "InUse"}
        state = job._warm_pool_state or "Terminated"
        expires = job._warm_expires_ms
        if state == "Available" and expires is not None and self.clock.now_ms >= expires:
            state = "Terminated"
        out: dict[str, Any] = {"Status": state}
        if state in ("Terminated", "Reused") and job._warm_expires_ms is not None:
            out["ResourceRetainedBillableTimeInSeconds"] = keep_alive * job.instance_count
        if state == "Reused":
            out["ReusedByJob"] = job._warm_reused_by
        return out

    @staticmethod
    def _matches_tags(f: Fault, tags: dict[str, str], itype: str | None) -> bool:
        if f.run is not None and tags.get(TAG_RUN_NAME) != f.run:
            return False
        if f.attempt is not None and _int_tag(tags.get(TAG_ATTEMPT)) != f.attempt:
            return False
        return not (f.instance_type is not None and itype != f.instance_type)

    def _matches(self, f: Fault, job: SimJob) -> bool:
        return self._matches_tags(f, job.tags, job.instance_type)

    def _take_capacity_fault(self, job: SimJob) -> _FaultState | None:
        for state in self._faults:
            if state.fault.kind == "capacity" and not state.consumed and self._matches(state.fault, job):
                if state.fault.once:
                    state.consumed = True
                job.faults_fired.append("capacity")
                self.fault_log.append((job.created_ms, job.name, "capacity", state.fault.host))
                return state
        return None

    def _bind(self, job: SimJob, state: _FaultState, now: int) -> None:
        assert job.training_started_ms is not None
        at = max(now, job.training_started_ms + round(state.fault.after_training_min * MINUTE_MS))
        job._bound.append((at, state.seq, state))
        job._bound.sort(key=lambda b: (b[0], b[1]))

    # ------------------------------------------------------------------------------------------
    # The event loop
    # ------------------------------------------------------------------------------------------

    def _move_clock(self, t: int) -> None:
        if t > self.clock.now_ms:
            self.clock.advance_to(t)

    def _earliest_item(self) -> tuple[int, int, int, SimJob, str] | None:
        best: tuple[int, int, int, SimJob, str] | None = None
        for job in self._live.values():
            for t, prio, kind in self._job_items(job):
                cand = (t, prio, job.seq, job, kind)
                if best is None or cand[:3] < best[:3]:
                    best = cand
        return best

    def _job_items(self, job: SimJob) -> Iterator[tuple[int, int, str]]:
        if job._save is not None:
            t = job._save.next_time()
            if t is not None:
                yield t, 0, "file"
        if job._timer_at is not None:
            yield job._timer_at, 1, "timer"
        if job._phase is not None and job.status == "InProgress":
            assert job.training_started_ms is not None
            yield job.training_started_ms + self._max_runtime_ms(job), 2, "max_runtime"
        if job._bound and job._phase is not None:
            yield job._bound[0][0], 3, "fault"

    def _max_runtime_ms(self, job: SimJob) -> int:
        sc = job.request.get("StoppingCondition") or {}
        return int(sc.get("MaxRuntimeInSeconds", DEFAULT_MAX_RUNTIME_S)) * 1000

    def _fire(self, job: SimJob, kind: str, t: int) -> None:
        if kind == "file":
            self._write_next_file(job, t)
        elif kind == "timer":
            timer = job._timer_kind
            job._timer_at, job._timer_kind = None, ""
            self._on_timer(job, timer, t)
        elif kind == "max_runtime":
            self._begin_stop(job, t, "MaxRuntimeExceeded", "max_runtime")
        elif kind == "fault":
            _, _, state = job._bound.pop(0)
            self._on_fault(job, state, t)

    def _set_timer(self, job: SimJob, at: int | None, kind: str) -> None:
        job._timer_at, job._timer_kind = at, kind

    def _on_timer(self, job: SimJob, timer: str, t: int) -> None:
        st = self.startup
        if timer == "downloading":
            job.provisioned_ms = t
            self._transition(job, t, "InProgress", "Downloading")
            download = st.warm_download_s if job.warm_pool_used else st.download_s
            self._set_timer(job, t + download * 1000, "training")
        elif timer == "training":
            self._enter_training(job, t)
        elif timer == "pending":
            self._transition(job, t, "InProgress", "Pending", CAPACITY_STATUS_MESSAGE)
            fault = job._capacity.fault if job._capacity else None
            duration = DEFAULT_CAPACITY_WAIT_MIN
            if fault is not None and fault.duration_min is not None:
                duration = fault.duration_min
            wait_ms = round(duration * MINUTE_MS)
            fail_at = t + max(wait_ms, 1)
            max_pending = (job.request.get("StoppingCondition") or {}).get("MaxPendingTimeInSeconds")
            if max_pending is not None and job.created_ms + max_pending * 1000 < fail_at:
                self._set_timer(job, max(job.created_ms + max_pending * 1000, t + 1), "max_pending")
            else:
                self._set_timer(job, fail_at, "capacity_fail")
        elif timer == "capacity_fail":
            reason = job._capacity.fault.failure_reason if job._capacity else None
            job.ended_reason = "capacity"
            self._fail(job, t, reason or CAPACITY_FAILURE_REASON)
        elif timer == "max_pending":
            job.ended_reason = "max_pending"
            self._transition(job, t, "Stopped", "Stopped")
            self._finish(job, t)
        elif timer == "phase_end":
            self._on_phase_end(job, t)
        elif timer == "completed":
            job.ended_reason = "completed"
            self._transition(job, t, "Completed", "Completed")
            self._finish(job, t)
        elif timer == "stopped":
            job._save = None
            self._transition(job, t, "Stopped", job._stop_final)
            self._finish(job, t)
        else:  # pragma: no cover - programming error
            raise AssertionError(f"unknown timer {timer}")

    def _enter_training(self, job: SimJob, t: int) -> None:
        job._bound = []
        job.training_started_ms = t
        job._lines_until = t
        self._transition(job, t, "InProgress", "Training")
        for host in range(1, job.instance_count + 1):
            for line in job.profile.startup_log_lines:
                self._write_line(job, host, t, line)
            if job.start_step > 0:
                self._write_line(job, host, t, f"Resuming training from global step {job.start_step}")
        for state in self._faults:
            f = state.fault
            if f.kind in _TRAINING_FAULTS and not state.consumed and self._matches(f, job):
                self._bind(job, state, t)
        self._start_train(job, t)

    # --- Training phases --------------------------------------------------------------------------

    def _open_segment(self, job: SimJob, t: int, kind: str) -> None:
        job._phase = kind
        job._phase_start = t
        job._seg_starts.append(t)
        job._segs.append((t, None, kind, job._dead_host))

    def _close_segment(self, job: SimJob, t: int) -> None:
        """Freeze progress at ``t`` and close the open Training segment."""
        if job._phase is None:
            return
        self._progress_lines(job, t)
        if job._phase == "train" and job.profile.steps_per_minute > 0:
            job._stepf = min(job._phase_target, self._stepf_at(job, t))
        job.step = int(job._stepf)
        start, _, kind, dead = job._segs[-1]
        job._segs[-1] = (start, t, kind, dead)
        job._phase = None

    @staticmethod
    def _stepf_at(job: SimJob, t: int) -> float:
        return job._stepf + job.profile.steps_per_minute * (t - job._phase_start) / MINUTE_MS

    def _start_train(self, job: SimJob, t: int) -> None:
        p = job.profile
        s = job._stepf
        if s >= p.total_steps:
            job._phase_target = s
            self._open_segment(job, t, "train")
            self._set_timer(job, t + 1000, "phase_end")
            return
        every = p.checkpoint_every_steps
        target = float(p.total_steps)
        if every > 0:
            target = min(target, float((math.floor(s / every) + 1) * every))
        job._phase_target = target
        self._open_segment(job, t, "train")
        if p.steps_per_minute <= 0:
            self._set_timer(job, None, "")
        else:
            self._set_timer(job, t + math.ceil((target - s) * MINUTE_MS / p.steps_per_minute), "phase_end")

    def _on_phase_end(self, job: SimJob, t: int) -> None:
        phase = job._phase
        p = job.profile
        if phase == "train":
            target = job._phase_target
            self._close_segment(job, t)
            job._stepf = target
            job.step = int(target)
            step = int(target)
            every = p.checkpoint_every_steps
            if every > 0 and step % every == 0 and step > job._last_saved_step:
                job._after_save = "upload" if step >= p.total_steps else "train"
                self._begin_save(job, t, step, p.checkpoint_write_seconds * 1000, "periodic")
                self._open_segment(job, t, "save")
                self._set_timer(job, job._save.end_ms if job._save else t, "phase_end")
            elif step >= p.total_steps:
                self._begin_upload(job, t)
            else:
                self._start_train(job, t)
        elif phase == "save":
            self._close_segment(job, t)
            if job._after_save == "upload" or job._stepf >= p.total_steps:
                self._begin_upload(job, t)
            else:
                self._start_train(job, t)
        elif phase == "eval":
            self._close_segment(job, t)
            self._start_train(job, t)
        else:  # pragma: no cover - hangs have no end timer
            raise AssertionError(f"phase {phase} has no end")

    def _begin_upload(self, job: SimJob, t: int) -> None:
        self._leave_training(job, t)
        self._transition(job, t, "InProgress", "Uploading")
        self._set_timer(job, t + self.startup.upload_s * 1000, "completed")

    def _leave_training(self, job: SimJob, t: int) -> None:
        self._close_segment(job, t)
        if job.training_started_ms is not None and job.training_ended_ms is None:
            job.training_ended_ms = t
        job._bound = []

    # --- Checkpoints ------------------------------------------------------------------------------

    def _begin_save(self, job: SimJob, t: int, step: int, duration_ms: int, reason: str) -> None:
        files = _checkpoint_files(job.profile.checkpoint_layout, step, job.profile.total_steps)
        job._save = _Save(step=step, start_ms=t, end_ms=t + max(duration_ms, 0), files=files, reason=reason)
        where = self._local_dir(job, files)
        self._write_line(job, 1, t, f"Saving checkpoint for global step {step} to {where}")

    @staticmethod
    def _local_dir(job: SimJob, files: list[tuple[str, bytes]]) -> str:
        local = str((job.request.get("CheckpointConfig") or {}).get("LocalPath", "/opt/ml/checkpoints"))
        return f"{local.rstrip('/')}/{files[0][0].split('/')[0]}"

    def _write_next_file(self, job: SimJob, t: int) -> None:
        save = job._save
        assert save is not None
        rel, body = save.files[save.written]
        self._put_checkpoint_object(job, rel, body)
        save.written += 1
        if save.written == len(save.files):
            if save.step not in job.checkpoints:
                job.checkpoints.append(save.step)
            job._last_saved_step = max(job._last_saved_step, save.step)
            self._write_line(job, 1, t, f"Checkpoint for global step {save.step} saved")
            job._save = None

    def _put_checkpoint_object(self, job: SimJob, rel: str, body: bytes) -> None:
        cfg = job.request.get("CheckpointConfig")
        if not cfg:
            return
        bucket, prefix = _parse_s3_uri(str(cfg["S3Uri"]))
        key = f"{prefix}/{rel}" if prefix else rel
        self._s3.put_object(Bucket=bucket, Key=key, Body=body)

    def _write_half_checkpoint(self, job: SimJob) -> None:
        save = job._save
        if save is None:
            step = max(job.current_step(self.clock.now_ms), job._last_saved_step + 1)
            files = _checkpoint_files(job.profile.checkpoint_layout, step, job.profile.total_steps)
            save = _Save(step=step, start_ms=0, end_ms=0, files=files, reason="half")
        for rel, body in save.files[save.written : len(save.files) - 1]:
            self._put_checkpoint_object(job, rel, body)
        job._save = None

    # --- Faults -----------------------------------------------------------------------------------

    def _on_fault(self, job: SimJob, state: _FaultState, t: int) -> None:
        f = state.fault
        if (state.consumed and f.once) or job.secondary != "Training" or job._phase is None:
            return
        if f.kind in _HANG_KINDS or f.kind in _PAUSE_KINDS:
            if job._phase in _HANG_PHASES:
                return  # nothing more happens to a hung job
            if job._phase in ("save", "eval"):
                assert job._timer_at is not None
                job._bound.append((job._timer_at, state.seq, state))  # defer to the end of the phase
                job._bound.sort(key=lambda b: (b[0], b[1]))
                return
        if f.once:
            state.consumed = True
        job.faults_fired.append(f.kind)
        host = min(max(f.host, 1), job.instance_count)
        self.fault_log.append((t, job.name, f.kind, host))
        lines = f.log_lines
        if f.kind == "algorithm_error" and not lines:
            lines = (DEFAULT_ALGORITHM_LOG_LINE,)
        for line in lines:
            self._write_line(job, host, t, line)

        if f.kind in _CRASH_KINDS:
            if f.half_written_checkpoint:
                self._write_half_checkpoint(job)
            job._save = None
            job.ended_reason = f.kind
            if f.kind == "internal_error":
                reason = f.failure_reason or INTERNAL_ERROR_REASON
            elif f.kind == "hardware":
                reason = f.failure_reason or HARDWARE_FAILURE_REASON.format(host=host)
            else:
                reason = f.failure_reason or ALGORITHM_ERROR_REASON.format(
                    message=lines[-1].replace('"', "'"),
                    nodes=job.instance_count,
                    gpus=job.profile.gpus_per_host,
                )
            self._fail(job, t, reason)
        elif f.kind == "spot_interruption":
            self._begin_stop(job, t, "Interrupted", "spot_interruption")
        elif f.kind in _HANG_KINDS:
            self._close_segment(job, t)
            job._dead_host = host if f.kind == "dead_host" else 0
            phase = {"stuck_dataloader": "stuck", "hang_spin_logging": "spin_logging"}.get(f.kind, f.kind)
            self._open_segment(job, t, phase)
            self._set_timer(job, None, "")
        elif f.kind == "checkpoint_save_long":
            self._close_segment(job, t)
            minutes = f.duration_min if f.duration_min is not None else DEFAULT_SAVE_LONG_MIN
            job._after_save = "train"
            self._begin_save(job, t, int(job._stepf), round(minutes * MINUTE_MS), "long")
            self._open_segment(job, t, "save")
            self._set_timer(job, job._save.end_ms if job._save else t, "phase_end")
        elif f.kind == "eval_phase":
            self._close_segment(job, t)
            minutes = f.duration_min if f.duration_min is not None else DEFAULT_EVAL_MIN
            self._open_segment(job, t, "eval")
            self._set_timer(job, t + round(minutes * MINUTE_MS), "phase_end")

    # --- Endings ------------------------------------------------------------------------------------

    def _begin_stop(self, job: SimJob, t: int, final: str, reason: str) -> None:
        if job.status != "InProgress":
            return
        job._stop_final = final
        job.ended_reason = reason
        job.stop_requested_ms = t
        stop_ms = self.startup.stop_s * 1000
        stopped_at = t + stop_ms
        phase = job._phase
        self._leave_training(job, t)
        if phase is not None:
            if phase in _HANG_PHASES:
                stopped_at = t + max(stop_ms, KILL_AFTER_MS)  # a hung script ignores SIGTERM
            else:
                if job._save is None:
                    step = int(job._stepf)
                    if job.profile.checkpoint_on_sigterm and step > job._last_saved_step:
                        self._write_line(job, 1, t, "Received SIGTERM: saving a final checkpoint")
                        self._begin_save(job, t, step, job.profile.checkpoint_write_seconds * 1000, "sigterm")
                if job._save is not None:
                    job._save.kill_ms = t + KILL_AFTER_MS
                    stopped_at = max(t + stop_ms, min(job._save.end_ms, t + KILL_AFTER_MS))
        self._transition(job, t, "Stopping", "Stopping")
        self._set_timer(job, stopped_at, "stopped")

    def _fail(self, job: SimJob, t: int, reason: str) -> None:
        self._leave_training(job, t)
        job.failure_reason = reason
        self._transition(job, t, "Failed", "Failed")
        self._finish(job, t)

    def _finish(self, job: SimJob, t: int) -> None:
        self._leave_training(job, t)
        job.ended_ms = t
        job._timer_at = None
        job._save = None
        job._bound = []
        job.step = int(job._stepf)
        self._live.pop(job.name, None)
        self._leave_warm_pool(job, t)

    # --- State changes and events -------------------------------------------------------------

    def _transition(
        self, job: SimJob, t: int, status: str, secondary: str, message: str | None = None
    ) -> None:
        msg = message if message is not None else _STATUS_MESSAGES.get(secondary, secondary)
        if job.transitions:
            job.transitions[-1]["EndTime"] = t
        entry: dict[str, Any] = {"Status": secondary, "StartTime": t, "EndTime": None, "StatusMessage": msg}
        if status in _TERMINAL:
            entry["EndTime"] = t
        job.transitions.append(entry)
        job.status, job.secondary, job.status_message = status, secondary, msg
        job.last_modified_ms = t
        self._queue_event(job, t)

    def _ts(self, ms: int | None) -> Any:
        if ms is None:
            return None
        return ms if self.timestamp_form == "millis" else _iso_ms(ms)

    def _queue_event(self, job: SimJob, t: int) -> None:
        r = job.request
        detail: dict[str, Any] = {
            "TrainingJobName": job.name,
            "TrainingJobArn": job.arn,
            "TrainingJobStatus": job.status,
            "SecondaryStatus": job.secondary,
        }
        if job.status == "Failed":
            detail["FailureReason"] = job.failure_reason
        detail["HyperParameters"] = copy.deepcopy(r.get("HyperParameters", {}))
        detail["AlgorithmSpecification"] = copy.deepcopy(r["AlgorithmSpecification"])
        detail["RoleArn"] = r["RoleArn"]
        if "InputDataConfig" in r:
            detail["InputDataConfig"] = copy.deepcopy(r["InputDataConfig"])
        detail["OutputDataConfig"] = copy.deepcopy(r["OutputDataConfig"])
        detail["ResourceConfig"] = copy.deepcopy(r["ResourceConfig"])
        detail["StoppingCondition"] = self._stopping_condition(job)
        detail["CreationTime"] = self._ts(job.created_ms)
        if job.provisioned_ms is not None:
            detail["TrainingStartTime"] = self._ts(job.provisioned_ms)
        if job.status in _TERMINAL:
            detail["TrainingEndTime"] = self._ts(t)
        detail["LastModifiedTime"] = self._ts(t)
        detail["SecondaryStatusTransitions"] = [
            {k: (self._ts(v) if k in ("StartTime", "EndTime") else v) for k, v in tr.items() if v is not None}
            for tr in job.transitions
        ]
        detail["Tags"] = dict(job.tags)
        event = {
            "version": "0",
            "id": str(uuid.UUID(int=self._rng.getrandbits(128), version=4)),
            "detail-type": "SageMaker Training Job State Change",
            "source": "aws.sagemaker",
            "account": self.account_id,
            "time": _iso_s(t),
            "region": self.region,
            "resources": [job.arn],
            "detail": detail,
        }
        self._outbox.append((t, self._out_seq, event))
        self._outbox.sort(key=lambda o: (o[0], o[1]))
        self._out_seq += 1

    # --- Logs ---------------------------------------------------------------------------------------

    def _stream(self, job: SimJob, host: int) -> str:
        return f"{job.name}/algo-{host}-{job.created_ms // 1000}"

    def _write_line(self, job: SimJob, host: int, t: int, text: str, *, discrete: bool = True) -> None:
        if discrete:
            self._progress_lines(job, t)  # keep each stream in time order
        tail = job._tails.get(host)
        if tail is None:
            tail = job._tails[host] = deque(maxlen=2000)
        tail.append(text)
        if discrete:
            if job._line_times and t < job._line_times[-1]:
                bisect.insort(job._line_times, t)
            else:
                job._line_times.append(t)
        if self._logs is not None:
            self._log_buffer.setdefault(self._stream(job, host), []).append((t, self._log_seq, text))
            self._log_seq += 1

    def _progress_lines(self, job: SimJob, upto: int) -> None:
        """Write the periodic progress lines of the open phase up to ``upto`` (lazily, per host)."""
        since = job._lines_until
        if upto <= since:
            return
        job._lines_until = upto
        if job._phase not in _LOGGING_PHASES:
            return
        every = self._progress_ms
        first = max(since, job._phase_start - 1) // every * every + every
        for mark in range(first, upto + 1, every):
            if job._phase == "train":
                step = int(min(self._stepf_at(job, mark), job._phase_target))
                loss = 1.2 + 2.8 * math.exp(-3.0 * step / max(job.profile.total_steps, 1))
                loss += 0.02 * _noise(job._salt, 0, mark // MINUTE_MS)
                text = f"step {step} loss {loss:.4f}"
            elif job._phase == "spin_logging":
                text = f"[watchdog] rank 0 alive, waiting in collective since step {int(job._stepf)}"
            else:
                text = f"eval at step {int(job._stepf)}: batch {(mark - job._phase_start) // every + 1}"
            for host in range(1, job.instance_count + 1):
                self._write_line(job, host, mark, text, discrete=False)

    def flush_logs(self) -> None:
        """Write buffered log lines to CloudWatch Logs now (one put_log_events per stream)."""
        self._last_flush_ms = self.clock.now_ms
        if self._logs is None or not self._log_buffer:
            return
        buffer, self._log_buffer = self._log_buffer, {}
        if not self._group_ready:
            try:
                self._logs.create_log_group(logGroupName=TRAINING_LOG_GROUP)
            except ClientError as err:
                if err.response["Error"]["Code"] != "ResourceAlreadyExistsException":
                    raise
            self._group_ready = True
        for stream in sorted(buffer):
            if stream not in self._streams:
                try:
                    self._logs.create_log_stream(logGroupName=TRAINING_LOG_GROUP, logStreamName=stream)
                except ClientError as err:
                    if err.response["Error"]["Code"] != "ResourceAlreadyExistsException":
                        raise
                self._streams.add(stream)
            events = sorted(buffer[stream])
            for i in range(0, len(events), 5000):
                chunk = [{"timestamp": t, "message": m} for t, _, m in events[i : i + 5000]]
                resp = self._logs.put_log_events(
                    logGroupName=TRAINING_LOG_GROUP, logStreamName=stream, logEvents=chunk
                )
                self._count_rejects(resp.get("rejectedLogEventsInfo") or {}, len(chunk))

    def _count_rejects(self, info: dict[str, int], size: int) -> None:
        rejected = 0
        if "tooOldLogEventEndIndex" in info:
            rejected += info["tooOldLogEventEndIndex"] + 1
        if "tooNewLogEventStartIndex" in info:
            rejected += size - info["tooNewLogEventStartIndex"]
        if rejected:
            self.log_events_rejected += rejected
            if not self._warned_rejects:
                self._warned_rejects = True
                warnings.warn(
                    "CloudWatch Logs (moto) rejected simulated log events outside its accepted window "
                    "(14 days before to 2 hours after the wall clock); wrap the run in "
                    "drill.clock.moto_logs_follow(clock)",
                    RuntimeWarning,
                    stacklevel=3,
                )

    # --- Metric samples -----------------------------------------------------------------------------

    def _training_window(self, job: SimJob, start_ms: int, end_ms: int) -> tuple[int, int] | None:
        if job.training_started_ms is None:
            return None
        lo = max(start_ms, job.training_started_ms)
        ended = job.training_ended_ms
        hi = min(end_ms, ended if ended is not None else self.clock.now_ms + 1)
        first = -(-lo // MINUTE_MS) * MINUTE_MS
        if first >= hi:
            return None
        return first, hi

    def _segments_from(self, job: SimJob, first: int) -> Iterator[tuple[int, int | None, str, int]]:
        i = max(bisect.bisect_right(job._seg_starts, first) - 1, 0)
        yield from job._segs[i:]

    def _training_minutes(self, job: SimJob, start_ms: int, end_ms: int) -> Iterator[tuple[int, str, int]]:
        """Every minute boundary in [start_ms, end_ms) while the job was in Training (and not
        after now), with the phase it was in: (minute ms, phase kind, dead host)."""
        window = self._training_window(job, start_ms, end_ms)
        if window is None:
            return
        first, hi = window
        m = first
        for seg_start, seg_end, kind, dead in self._segments_from(job, first):
            stop = hi if seg_end is None else min(hi, seg_end)
            if m < seg_start:
                m = -(-seg_start // MINUTE_MS) * MINUTE_MS
            while m < stop:
                yield m, kind, dead
                m += MINUTE_MS
            if m >= hi:
                return

    def _gpu_samples(self, job: SimJob, host: int, start_ms: int, end_ms: int) -> Iterator[tuple[int, float]]:
        p = job.profile
        full = 100.0 * p.gpus_per_host
        for m, kind, dead in self._training_minutes(job, start_ms, end_ms):
            n = _noise(job._salt, host, m // MINUTE_MS)
            if kind == "train":
                v = p.gpu_util_per_host * (1.0 + 0.02 * n)
            elif kind == "save":
                v = 5.0 * p.gpus_per_host * (1.0 + 0.2 * n)
            elif kind == "eval":
                v = 10.0 * p.gpus_per_host * (1.0 + 0.2 * n)
            elif kind == "stuck":
                v = 2.0 * p.gpus_per_host * (1.0 + 0.2 * n)
            elif kind == "dead_host" and host == dead:
                v = 0.0
            else:  # hang_spin, spin_logging, and the live hosts of dead_host
                v = full - 0.5 * p.gpus_per_host * abs(n)
            yield m, min(max(v, 0.0), full)

    def _progress_samples(self, job: SimJob, start_ms: int, end_ms: int) -> Iterator[tuple[int, float]]:
        """The job's own progress metric (MetricDefinitions regex over its log): one value per
        minute in which the training loop advanced (steps per minute), none otherwise."""
        rate = job.profile.steps_per_minute
        for m, kind, _ in self._training_minutes(job, start_ms, end_ms):
            if kind == "train":
                yield m, rate * (1.0 + 0.02 * _noise(job._salt, 0, m // MINUTE_MS))

    def _log_samples(self, job: SimJob, start_ms: int, end_ms: int) -> Iterator[tuple[int, float]]:
        rate = float(job.profile.log_lines_per_minute * job.instance_count)
        counts = {
            m: rate for m, kind, _ in self._training_minutes(job, start_ms, end_ms) if kind in _LOGGING_PHASES
        }
        lo_line = start_ms // MINUTE_MS * MINUTE_MS
        times = job._line_times
        i = bisect.bisect_left(times, lo_line)
        now = self.clock.now_ms
        while i < len(times) and times[i] < end_ms and times[i] <= now:
            minute = times[i] // MINUTE_MS * MINUTE_MS
            if minute >= start_ms:
                counts[minute] = counts.get(minute, 0.0) + 1.0
            i += 1
        for minute in sorted(counts):
            yield minute, counts[minute]


def _aggregate(samples: Iterator[tuple[int, float]], period_ms: int, stat: str) -> list[tuple[int, float]]:
    buckets: dict[int, list[float]] = {}
    for t, v in samples:
        b = t - t % period_ms
        acc = buckets.get(b)
        if acc is None:
            buckets[b] = [v, v, v, 1.0]
        else:
            acc[0] += v
            acc[1] = min(acc[1], v)
            acc[2] = max(acc[2], v)
            acc[3] += 1.0
    out: list[tuple[int, float]] = []
    for b in sorted(buckets):
        total, lo, hi, count = buckets[b]
        value = {
            "Average": total / count,
            "Minimum": lo,
            "Maximum": hi,
            "Sum": total,
            "SampleCount": count,
        }[stat]
        out.append((b, value))
    return out
