"""The simulated SageMaker's data classes: what a training script does (JobProfile), how long
SageMaker takes (StartupTimes), what goes wrong (Fault) and one training job's state (SimJob)."""

from __future__ import annotations

import dataclasses
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from drill.sim.texts import (
    CRASH_KINDS,
    FAULT_KINDS,
    FAULT_PHASE,
    HANG_KINDS,
    MINUTE_MS,
    PHASE_VARIANTS,
    TERMINAL,
)


@dataclass
class JobProfile:
    """How the user's training script behaves."""

    total_steps: int = 10_000
    steps_per_minute: float = 10.0
    checkpoint_every_steps: int = 1_000
    checkpoint_layout: str = "hf"  # "hf" | "megatron" | "dcp"
    checkpoint_write_seconds: int = 120  # no log lines, GPU low; objects appear progressively, marker last
    checkpoint_on_sigterm: bool = True  # final save on StopTrainingJob / MaxRuntime / spot (not when hung)
    # the modelled size of one checkpoint (0: the tiny objects' own sizes): carried per object by
    # the simulator, never written; a job's start downloads the synced prefix's modelled bytes
    # (drill/sim/checkpoints.py, RESTORE_BYTES_PER_S per instance)
    checkpoint_bytes: int = 0
    gpus_per_host: int = 8  # 0: a CPU instance (no GPUUtilization metric)
    gpu_util_per_host: float = 760.0  # summed over the host's GPUs (0..100*gpus)
    log_lines_per_minute: int = 6  # per host while training normally
    # the script logs only every n minutes of logging phases (e.g. every N steps): the heartbeat
    # and progress metrics have data in those minutes only (the in-memory tail is not thinned)
    log_every_minutes: int = 1
    # a slow but alive host (0: none): its GPUs run at straggler_gpu_util (summed over its GPUs)
    # while training, below its peers' gpu_util_per_host; it logs like the others
    straggler_host: int = 0
    straggler_gpu_util: float = 240.0
    progress_metric: str = "train:throughput"  # a MetricDefinitions metric, reported each minute of training
    startup_log_lines: tuple[str, ...] = ("Loading model...", "Initializing process group")
    # the training-script contract's fingerprint line, once per host at Training start
    # (drill/sim/hosts.py), and the network NCCL selects ("efa" | "socket"; printed with
    # NCCL_DEBUG=INFO in the job's Environment)
    fingerprints: bool = False
    nccl_transport: str = "efa"
    # one host (0: none) whose NCCL falls back to sockets though the job's transport is efa
    nccl_socket_host: int = 0
    # the contract's SAGEWARDEN_CHECKPOINT_MINUTES: when a job is told it, it checkpoints every that
    # many minutes of training (steps_per_minute x minutes steps) instead of checkpoint_every_steps
    checkpoint_minutes_from_env: bool = False
    # the contract's step lines (drill/sim/stragglers.py): each host prints, every
    # step_lines_every_s while training, `[sagewarden] host=<n> step=<s> step_ms=<ms> compute_ms=<ms> total=<steps>`
    step_lines: bool = False
    step_lines_every_s: int = 60
    # uneven data shards: this host (0: none) does this much more work per step from the start
    uneven_host: int = 0
    uneven_fraction: float = 0.05


def script_profile(request: dict[str, Any]) -> JobProfile:
    """How a job behaves when nothing set its run's profile (the local server without a scenario):
    JobProfile's defaults, with the number of steps the training script is told to train, as a
    script reads it from its hyperparameters (``max_steps``, the Hugging Face Trainer's name).
    SageMaker passes HyperParameters to the script as they are (strings); a value that is not a
    positive whole number is ignored, as a script with a default would."""
    text = str((request.get("HyperParameters") or {}).get("max_steps", "")).strip()
    if text.isdigit() and int(text) > 0:
        return JobProfile(total_steps=int(text))
    return JobProfile()


@dataclass
class StartupTimes:
    provision_s: int = 360  # Starting
    download_s: int = 120  # Downloading (image + data)
    warm_provision_s: int = 20  # when a warm pool is reused (KeepAlivePeriodInSeconds)
    warm_download_s: int = 15
    upload_s: int = 60  # Uploading before Completed
    stop_s: int = 60  # Stopping -> Stopped after StopTrainingJob (SIGKILL at 120 s)
    # DeleteTrainingJob: the job shows TrainingJobStatus Deleting this long, then is gone (AWS
    # publishes no figure)
    delete_s: int = 120
    # InfraCheckConfig.EnableInfraCheck: the check's extra time in Starting, drawn per job (AWS
    # publishes no figure: an adversarial range); how often it finds nothing on a bad host the
    # job meets (drawn per job and host, unless the fault pins ``infra_check_finds``); and what it
    # does with one it finds ("fail": the job fails naming it; "replace": the job starts on good
    # instances). AWS publishes none of it: the defaults are the unkind case, a check that
    # either misses the host (half the time: a coin) or fails the job, never replaces the host
    infra_check_min_s: int = 300
    infra_check_max_s: int = 1800
    infra_check_miss_rate: float = 0.5
    infra_check_on_bad_host: str = "fail"


@dataclass
class Fault:
    """A failure or phase injected into matching jobs.

    Crashes (internal_error, hardware, algorithm_error) end the job Failed; spot_interruption ends
    it Stopped/Interrupted; hangs (hang_spin, dead_host, stuck_dataloader) last until the job is
    stopped; benign phases (checkpoint_save_long, eval_phase, and the silent all-GPUs-idle compile,
    nccl_init, dataloader_pause) pause progress for ``duration_min``.
    Start-time faults: capacity (Pending, then Failed or Stopped by MaxPendingTimeInSeconds),
    throttle (the next matching CreateTrainingJob raises ThrottlingException) and quota (it raises
    ResourceLimitExceeded, in AWS's message shape, naming a limit of ``quota_limit`` instances with
    all of them in use; without ``quota_limit`` the limit is the request's own instance count, so the
    request fits once other jobs release theirs; a ``quota_limit`` below it can never fit).

    When a training fault fires is either ``after_training_min`` after the matching attempt entered
    Training, or -- with ``after_run_training_min`` -- once the run (every job tagged with its
    run name, across attempts) has spent that many minutes in Training *healthy* (training,
    saving or evaluating; a hung job's minutes do not count). The second form is a fault trace
    over operating time: every supervisor driving the run meets the same faults after the same
    amount of healthy operation, however long it took to recover from the earlier ones.
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
    after_run_training_min: float | None = None  # healthy Training minutes of the run (see above)
    # crashes only: the collective spins (GPUs busy, no log lines) this long before the crash, e.g. a
    # NCCL watchdog timeout after a network fault; the fault's log lines appear at the crash
    hang_before_crash_min: float | None = None
    # the fault's host is bad hardware: it stays bad in a warm pool kept after the job, and the next
    # job on that pool meets it again (dead_host and hardware faults always are; set it for a crash
    # a bad GPU causes, e.g. an algorithm_error with Xid lines)
    bad_host: bool = False
    # the run's next CreateTrainingJob waits Pending this long, then fails with a CapacityError
    # (a replacement for the failed host is not available at once)
    restart_capacity_min: float | None = None
    label: str | None = None  # free text carried into SimSageMaker.fault_records (e.g. a root cause)
    # hangs only: the hang begins half-way through the first checkpoint save that starts once the
    # fault is due (``after_training_min`` / ``after_run_training_min``); the save never completes,
    # so its directory stays without the completion marker (a half-written checkpoint)
    during_save: bool = False
    # quota only: the limit ResourceLimitExceeded names (None: the request's own instance count)
    quota_limit: int | None = None
    # the fault's host comes back (same serials) in the run's next this-many jobs of the same
    # instance type on new instances (drill/sim/hosts.py: a "lemon")
    returns_cold: int = 0
    # SageMaker's infra check (InfraCheckConfig) finds this bad host before Training (False: an
    # intermittent fault a short check misses; None: drawn at StartupTimes.infra_check_miss_rate),
    # and what it does with it when found ("fail" or "replace"; None: the account's setting)
    infra_check_finds: bool | None = None
    infra_check_on_bad_host: str | None = None
    # which host writes the fault's log lines (None: its own ``host``), e.g. a peer naming it
    log_host: int | None = None
    # crashes only: the fault's host ran out of RAM -- its MemoryUtilization climbs to ~99 % in the
    # minutes before the crash (the kernel's OOM killer ends it; its log lines say only "Killed")
    memory_full: bool = False
    # benign phases only: how the phase looks in the instance metrics (texts.PHASE_VARIANTS; None:
    # drawn per occurrence from the job's salt, as periodic saves are)
    variant: str | None = None
    # eval_phase only: the eval writes no log lines (its GPUs stay busy, its hosts load data)
    silent: bool = False
    # slow_host only: how much longer the host's compute per step takes (0.15: 15 % slower), for
    # ``duration_min`` (None: for the rest of the job)
    slowdown: float = 0.15
    # crashes only: a deterministic failure (a user's bug). Once it has fired, it fires again in
    # every later job of its run this many minutes after the job entered Training (with
    # ``during_save``: half-way through that job's first save), the same lines and FailureReason
    # each time, until the person fixes it (SimSageMaker.fix_recurring); firing never consumes it
    recur_after_training_min: float | None = None
    # ... and its first firing waits for the first job to enter Training once it is due (a failure
    # at start-up or at the restore), instead of hitting the job training when it comes due
    recur_from_next_start: bool = False

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; expected one of {sorted(FAULT_KINDS)}")
        if self.hang_before_crash_min is not None and self.kind not in CRASH_KINDS:
            raise ValueError("hang_before_crash_min applies to crash kinds only")
        recurring_crash = self.kind in CRASH_KINDS and self.recur_after_training_min is not None
        if self.during_save and self.kind not in HANG_KINDS and not recurring_crash:
            raise ValueError("during_save applies to hang kinds only (and to a recurring crash)")
        if self.recur_after_training_min is not None and self.kind not in CRASH_KINDS:
            raise ValueError("recur_after_training_min applies to crash kinds only")
        if self.recur_from_next_start and self.recur_after_training_min is None:
            raise ValueError("recur_from_next_start needs recur_after_training_min")
        if self.quota_limit is not None and self.kind != "quota":
            raise ValueError("quota_limit applies to quota faults only")
        if self.silent and self.kind != "eval_phase":
            raise ValueError("silent applies to eval_phase only")
        if self.kind == "slow_host" and not 0 < self.slowdown <= 10:
            raise ValueError("slowdown must be within 0 (excluded) .. 10")
        if self.variant is not None:
            known = PHASE_VARIANTS.get(FAULT_PHASE.get(self.kind, ""), ())
            if self.variant not in known:
                raise ValueError(
                    f"variant {self.variant!r} does not apply to {self.kind}"
                    + (f" (one of {', '.join(known)})" if known else "")
                )


@dataclass
class Save:
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
class FaultState:
    fault: Fault
    seq: int
    consumed: bool = False  # a recurring fault: fixed
    fired: bool = False  # it has fired at least once
    ends: bool = False  # the end of a transient slow_host fault (drill/sim/stragglers.py)


@dataclass(frozen=True)
class FaultRecord:
    """One fired training fault, with what the run had at its onset (for loss accounting)."""

    at_ms: int
    job: str
    run: str | None
    kind: str
    host: int
    label: str | None
    step: int  # the job's step at the onset
    checkpoint_step: int  # the run's newest complete checkpoint at the onset (0 if none)
    progress: float = 0.0  # the job's exact (fractional) step at the onset


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
    _step: int = 0  # ``step`` when not training (see the property)
    checkpoints: list[int] = field(default_factory=list)  # steps whose completion marker was written
    # what its start restored from CheckpointConfig.S3Uri (modelled bytes, child directories) and
    # how long that took (ms), with profile.checkpoint_bytes set; None: not modelled
    restored_bytes: int | None = None
    restored_dirs: tuple[str, ...] = ()
    restore_ms: int = 0
    warm_pool_used: bool = False
    capacity_wait: bool = False
    # completed | stopped | max_runtime | spot_interruption | internal_error | hardware |
    # algorithm_error | capacity | max_pending
    ended_reason: str | None = None
    stop_requested_ms: int | None = None
    faults_fired: list[str] = field(default_factory=list)
    # RetryStrategy retries (SageMaker restarting the same job after an InternalServerError): per
    # retry {"failed_ms", "reason", "step" (at the failure), "start_step" (resumed), "training_ms"}
    retries: list[dict[str, Any]] = field(default_factory=list)
    # --- internals -----------------------------------------------------------------------------
    _salt: int = 0
    _stepf: float = 0.0
    _phase: str | None = None  # a kind of phase_intervals (only in Training)
    _phase_start: int = 0
    _seg_step0: float = 0.0  # the step the open Training phase started at (goodput ground truth)
    _phase_target: float = 0.0
    _after_save: str = "train"  # train | upload
    _dead_host: int = 0
    # a host-memory fault (Fault.memory_full): (host, crash ms); its MemoryUtilization climbs to ~99 %
    # over the MEMORY_RISE_MIN minutes before the crash (drill/sim/series.py)
    _memory_full: tuple[int, int] | None = None
    _timer_at: int | None = None
    _timer_kind: str = ""
    _stop_final: str = "Stopped"
    _save: Save | None = None
    _last_saved_step: int = 0
    _bound: list[tuple[int, int, FaultState]] = field(default_factory=list)
    _capacity: FaultState | None = None
    _seg_starts: list[int] = field(default_factory=list)
    _segs: list[tuple[int, int | None, str, int]] = field(default_factory=list)  # start, end, kind, dead host
    _line_times: list[int] = field(default_factory=list)  # discrete log lines (not periodic progress)
    _lines: list[tuple[int, int, str]] = field(default_factory=list)  # the same lines: (ms, host, text)
    _declared: set[int] = field(default_factory=set)  # minutes a phase marker line declared active
    _variants: dict[int, str] = field(default_factory=dict)  # segment start -> a fault's pinned variant
    _lines_until: int = 0
    _tails: dict[int, deque[tuple[int, str]]] = field(default_factory=dict)  # per host: (ms, line)
    _pool: Any = None  # the warm pool the job left when it ended (drill.sim.warm_pools.WarmPool)
    # hosts (algo-<n>) that are bad hardware, with the fault that made them so: they stay bad in
    # a warm pool the job leaves, and ``_inherited`` are those a job met on the pool it reused
    _bad_hosts: dict[int, Fault] = field(default_factory=dict)
    _inherited: dict[int, Fault] = field(default_factory=dict)
    _serials: dict[int, str] = field(default_factory=dict)  # GPU serials per host (drill/sim/hosts.py)
    _slow: dict[int, float] = field(default_factory=dict)  # slow hosts now: host -> slowdown (stragglers.py)
    infra_check: bool = False  # the request's InfraCheckConfig.EnableInfraCheck
    # the request's RemoteDebugConfig.EnableRemoteDebug: SageMaker starts the SSM agent in the
    # container, which writes its own stream per host, <job>/algo-<n>-<ts>/ssm (drill/sim/logs.py)
    remote_debug: bool = False
    _ssm: dict[int, deque[tuple[int, str]]] = field(default_factory=dict)  # per host: the agent's lines
    _ssm_until: int = 0  # the agent's lines are written up to here
    _infra_check_host: int = 0  # the bad host the check found when the job fails for it
    _try_started_ms: int | None = None  # this try's Training entry (retries restart it)
    _runtime_used_ms: int = 0  # Training time of earlier tries (MaxRuntime counts all of them)
    _pending_crash: FaultState | None = None  # hang_before_crash_min: the crash still to come
    _await_save: list[FaultState] = field(default_factory=list)  # during_save hangs due at the next save
    _clock: Any = field(default=None, repr=False, compare=False)  # the simulation's VirtualClock
    # DeleteTrainingJob accepted at this time: Deleting until ``StartupTimes.delete_s`` later,
    # then the job is gone from the API and its name is free (status keeps its terminal value)
    deleted_ms: int | None = None

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL

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

    @property
    def phase_intervals(self) -> list[tuple[int, int | None, str]]:
        """The Training phases so far: (start ms, end ms or None while open, kind) with kind one of
        train, save, eval, eval_silent, compile, nccl_init, data_pause, hang_spin, dead_host, stuck,
        spin_logging (for reports and plots)."""
        return [(start, end, kind) for start, end, kind, _ in self._segs]

    @property
    def step(self) -> int:
        """The script's global step now (it only moves while training normally)."""
        if self._phase == "train" and self._clock is not None:
            return self.current_step(self._clock.now_ms)
        return self._step

    @step.setter
    def step(self, value: int) -> None:
        self._step = value

    def current_step(self, now_ms: int) -> int:
        """The script's global step at ``now_ms`` (only moves while training normally)."""
        if self._phase == "train":
            s = self._stepf + spm(self) * (now_ms - self._phase_start) / MINUTE_MS
            return int(min(s, self._phase_target))
        return int(self._stepf)


def spm(job: SimJob) -> float:
    """The job's step rate now: every step waits for its slowest host (stragglers.py)."""
    slow = max(job._slow.values(), default=0.0)
    return job.profile.steps_per_minute / (1.0 + slow)


def stepf_at(job: SimJob, t: int) -> float:
    """The open train phase's fractional step at ``t`` (before capping at the phase target)."""
    return job._stepf + spm(job) * (t - job._phase_start) / MINUTE_MS


def int_tag(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def with_told_interval(profile: JobProfile, env: dict[str, Any]) -> JobProfile:
    """The profile of a job whose script follows the contract's SAGEWARDEN_CHECKPOINT_MINUTES (an
    unset, empty or unreadable value keeps the script's own interval)."""
    raw = str(env.get("SAGEWARDEN_CHECKPOINT_MINUTES") or "")
    if not profile.checkpoint_minutes_from_env or not raw.isdigit() or int(raw) <= 0:
        return profile
    every = max(1, round(int(raw) * profile.steps_per_minute))
    return dataclasses.replace(profile, checkpoint_every_steps=every)
