"""Entities: Run, Attempt and their statuses. Immutable values; `decide` returns new ones."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sagewarden.domain.vocabulary.layouts import Checkpoint
from sagewarden.domain.vocabulary.policy import RunPolicy


class RunStatus(StrEnum):
    SUBMITTED = "SUBMITTED"  # accepted; first launch not yet confirmed
    STARTING = "STARTING"  # a job exists (or its launch is in flight) and has not reached Training
    TRAINING = "TRAINING"
    # waiting for quota, capacity, throttling, backoff or a warm pool; wake_at_ms is set
    RETRY_WAIT = "RETRY_WAIT"
    STOPPING = "STOPPING"  # the supervisor asked SageMaker to stop the job (hang, budget, cancel)
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED})


class LaunchState(StrEnum):
    PENDING = "PENDING"  # intent recorded; CreateTrainingJob not yet confirmed (may be retried by name)
    SUBMITTED = "SUBMITTED"  # SageMaker accepted the job (or it already existed)
    WAITING = "WAITING"  # CreateTrainingJob was rejected (quota, throttling); the same number is retried
    # the run was cancelled while this launch was unconfirmed and SageMaker has no such job long
    # after the request (longer than any invocation that could still be issuing it): never created
    ABANDONED = "ABANDONED"


SM_TERMINAL = frozenset({"Completed", "Failed", "Stopped"})
# DeleteTrainingJob of an ended job: the job shows this status for a while, then is gone and its
# name can be used again (docs/fidelity.md); it comes only after a terminal state
SM_DELETING = "Deleting"
CHECKPOINT_HISTORY = 8
MAX_WRITING_SPANS = 32  # Run.checkpoint_spans: the oldest are dropped (their directories are kept)
# Rank used to keep an attempt's recorded state forward-only when timestamps tie. Only these
# statuses are acted on: one SageMaker adds later is unknown, never read as any of them.
SM_STATUS_RANK = {
    "InProgress": 0,
    "Stopping": 1,
    "Completed": 2,
    "Failed": 2,
    "Stopped": 2,
    SM_DELETING: 3,
}


@dataclass(frozen=True)
class Attempt:
    number: int
    job_name: str
    instance_type: str
    instance_count: int
    requested_at_ms: int
    launch: LaunchState = LaunchState.PENDING
    launch_tries: int = 1
    resume_from: Checkpoint | None = None
    sm_status: str | None = None
    sm_secondary: str | None = None
    sm_modified_ms: int = 0
    created_ms: int | None = None
    training_started_ms: int | None = None
    ended_ms: int | None = None
    failure_reason: str | None = None
    end_class: str | None = None
    end_reason: str | None = None
    evidence: tuple[str, ...] = ()
    checkpoint_at_end: Checkpoint | None = None
    stop_intent: str | None = None  # a StopIntent value (vocabulary/reasons.py)
    stop_requested_ms: int | None = None
    alarms_active: bool = False  # hang alarms are wanted for this attempt (it reached Training)
    alarms_confirmed: bool = False  # the sweep saw every expected alarm in CloudWatch
    # hang windows learned from this attempt's own cadence (None: the policy's window is in force)
    log_window_min: int | None = None
    progress_window_min: int | None = None
    hang_signals: tuple[str, ...] = ()
    cost_usd: float = 0.0
    # ResourceConfig.KeepAlivePeriodInSeconds this attempt's request carried (0: no warm pool asked)
    keep_alive_s: int = 0
    # hosts (algo-<n>) a confirmed hang singled out (no GPU metrics, or idle among busy peers):
    # with them the attempt's warm pool must not be reused (the same instances, the same bad host)
    suspect_hosts: tuple[str, ...] = ()
    # domain/capacity/warm_pools.py: the attempt whose warm pool this one runs on (its WarmPoolStatus went
    # Reused, ReusedByJob this attempt's job) and how that attempt ended (warm_pools.fault_key);
    # pool_suspect: this attempt ended the same way, on the same instances, so its pool is suspect
    # as a whole (no host named) and is never reused
    pool_of: int | None = None
    pool_fault: str | None = None
    pool_suspect: bool = False
    # domain/hosts/bad_hosts.py and domain/hosts/fabric.py: this attempt's request asked SageMaker to check its
    # instances first (InfraCheckConfig); its NCCL transport as its log showed it ("socket",
    # "efa", None: not seen), with the lines that show it; its start-up log scan is over
    infra_check: bool = False
    # domain/capacity/warm_pools.py: this attempt's request asks for a VolumeSizeInGB 1 GB off the run's
    # (launch.steered_volume_gb), so that it cannot match the pool of an attempt that asked for
    # the run's own size -- and the other way round: a replacement after a bad host flips it and
    # starts at once instead of waiting until the bad host's pool is gone
    volume_steer: bool = False
    # the checkpoint interval this attempt was told (SAGEWARDEN_CHECKPOINT_MINUTES; None: none)
    checkpoint_minutes: int | None = None
    fabric: str | None = None
    fabric_evidence: tuple[str, ...] = ()
    scan_done: bool = False
    # domain/hosts/stragglers.py: each host's baseline from the attempt's first step lines, as (host,
    # compute vs the peers' median, compute ms); the host flagged as a straggler (None: none)
    # with its slowdown, and since when it has been slow (None: back to its peers' pace)
    host_baselines: tuple[tuple[str, float, float], ...] = ()
    straggler_host: str | None = None
    straggler_shift: float | None = None
    straggler_since_ms: int | None = None
    # goodput's straggler bucket: the host slower than its own baseline by at least MEASURE_SHIFT
    # for a straggler window (host, shift, since; None: none), whatever the policy's threshold, and
    # the work its ended episodes cost (slow for T at shift s: T x s / (1 + s)), ms
    slow_episode: tuple[str, float, int] | None = None
    slow_lost_ms: int = 0
    # domain/goodput.py: when SageMaker was first seen Downloading, Uploading, Stopping for this
    # attempt (its secondary status, from the event's or DescribeTrainingJob's modified time), and
    # the onset a confirmed hang implies (its alarm's state change minus the alarm's window)
    downloading_ms: int | None = None
    uploading_ms: int | None = None
    stopping_ms: int | None = None
    hang_onset_ms: int | None = None
    # checkpoints this attempt wrote whose write time the supervisor measured, and their total ms
    # (a long save counts at its own length; the ones it did not see at the run's median)
    saves_seen: int = 0
    saves_seen_ms: int = 0
    # domain/hangs/heartbeat.py: when the job's logs first had lines its silent heartbeat never showed
    # (the pipeline failed this job): its log silence is judged from its logs until its
    # log-silence alarm is seen OK again (None: its heartbeat is trusted)
    heartbeat_doubted_ms: int | None = None
    # ... and the log-silence ALARM stretch (its alarm's ALARM since) whose silence was looked up
    # in the logs while a benign phase was waited for: once per stretch (None: none yet)
    heartbeat_checked_ms: int | None = None

    @property
    def ended(self) -> bool:
        return self.ended_ms is not None

    @property
    def live(self) -> bool:
        """A SageMaker job may exist and is not known to have ended."""
        return self.launch in (LaunchState.PENDING, LaunchState.SUBMITTED) and not self.ended

    @property
    def in_training(self) -> bool:
        return self.live and self.sm_status == "InProgress" and self.sm_secondary == "Training"

    @property
    def end_pending(self) -> bool:
        """SageMaker reported a terminal state but the decision about it was deferred (an
        observation it needs, such as the newest checkpoint, could not be read)."""
        return not self.ended and self.sm_status in SM_TERMINAL


def startup_kind(att: Attempt) -> str:
    """Attempts whose start-up is comparable: the same instance type and count, and both fresh
    starts or both resumed from a checkpoint (loading one can take tens of silent minutes)."""
    how = "resumed" if att.resume_from is not None else "fresh"
    return f"{att.instance_type} x {att.instance_count} {how}"


@dataclass(frozen=True)
class PreviousEnding:
    """How the run's last resumed crash ended (domain/endings/loops.py): the next ending that repeats it at
    the same step, after a resume from the checkpoint it ended at, is a loop."""

    attempt: int
    signature: str  # loops.ending_signature: class, reason and evidence without their numbers
    step: int  # the step of the newest checkpoint at that ending (-1: none)
    marks: str  # the step numbers its lines print (loops.step_marks; "" when they print none)
    singled_out: bool  # it pointed at hardware or a host: a repeat elsewhere is no loop of the code
    lines: tuple[str, ...] = ()  # its evidence, for the alert that stops a loop (bounded)


@dataclass(frozen=True)
class PoolWatch:
    """A warm pool an ended attempt may have left (it asked for one), watched until it is gone:
    released when nothing will reuse it, waited for when the next attempt will run on it.
    SageMaker's events do not carry WarmPoolStatus: the sweep reads it with DescribeTrainingJob."""

    job_name: str
    attempt: int
    instance_type: str
    instance_count: int
    ended_ms: int
    keep_alive_s: int
    # the ending keeps a pool (Completed, Stopped, AlgorithmError, ClientError): otherwise none is
    # expected, and its absence says nothing about the account's warm-pool quota
    kept_by_ending: bool = True
    bad_host: bool = False  # a host was singled out: the pool must never be reused
    fault: str | None = None  # how the attempt ended, for a repeat on its instances (warm_pools.fault_key)
    status: str | None = None  # the last WarmPoolStatus seen (None: none yet)
    releases: int = 0  # UpdateTrainingJob(KeepAlivePeriodInSeconds=0) asked this often
    last_release_ms: int | None = None


@dataclass(frozen=True)
class RetireProgress:
    """How far the retirement of one checkpoint directory got (domain/checkpoints/retirement.py), as the
    retirer answered its last pass: where the next pass continues, so what one pass proved is not
    proved again and a directory larger than one pass finishes. Bounded: one per directory being
    retired (at most MAX_RETIRE_DIRS), each a few short strings.

    ``verified`` objects are proven copied: in phase "copy" the first ``verified`` objects of the
    directory in the retirer's order, in phase "delete" every object still in the synced prefix
    (all were proven copied). ``digest`` fingerprints those objects (keys, sizes and ETags of the
    source and of the archive copy): a later pass trusts them only while both sides still read the
    same; otherwise it proves them again. ``upload``: the multipart copy under way of one object
    too large for a single CopyObject, (file, UploadId, source ETag): the next pass resumes it.
    ``stalled``: consecutive passes that had the directory to work on and could not advance it."""

    name: str
    phase: str = "copy"  # copy | delete
    verified: int = 0
    digest: str = ""
    upload: tuple[str, str, str] | None = None
    parts: int = 0  # parts of ``upload`` already copied
    stalled: int = 0


@dataclass(frozen=True)
class Run:
    run_id: str
    name: str
    owner: str
    request: Mapping[
        str, Any
    ]  # CreateTrainingJob request without TrainingJobName: the single source of truth
    policy: RunPolicy
    status: RunStatus
    created_ms: int
    job_prefix: str = "sw"
    version: int = 0
    updated_ms: int = 0
    attempts: tuple[Attempt, ...] = ()  # the store may load only the latest; numbers are contiguous
    attempt_count: int = 0
    wake_at_ms: int | None = None
    wait_reason: str | None = None  # a WaitReason value (vocabulary/reasons.py)
    wait_instance_type: str | None = None
    wait_started_ms: int | None = None
    wait_count: int = 0  # consecutive waits in the current waiting spell (drives backoff)
    # the waiting spell's last CreateTrainingJob rejection, "<instance type>|<code>|<message>"
    # (bounded): a 5xx repeated word for word on the same request backs off (domain/decide.py)
    last_rejection: str | None = None
    restarts: int = 0  # counted against policy.max_restarts
    restarts_by_class: Mapping[str, int] = field(default_factory=dict)
    no_progress_streak: int = 0
    # how the last ending without progress failed (domain/endings/loops.py): a streak grows only on repeats
    no_progress_signature: str | None = None
    # how the last resumed crash ended (domain/endings/loops.py): a repeat at the same step is a loop
    last_ending: PreviousEnding | None = None
    segments: int = 0  # MaxRuntime chain links
    fallback_index: int = 0  # 0 = the request's own ResourceConfig, k = policy.instance_fallbacks[k-1]
    last_checkpoint: Checkpoint | None = None
    cost_usd: float = 0.0  # ended attempts only
    outcome: str | None = None  # one line: why the run is where it is
    cancel_requested_by: str | None = None
    idempotency_key: str | None = None
    # instance choices (0 = the request's own, k = policy.instance_fallbacks[k-1]) skipped because
    # their quota can never fit one attempt
    skipped_choices: tuple[int, ...] = ()
    # a decision that needs an observation which could not be made (S3/Logs error) is deferred,
    # never taken on "nothing there"; the sweep retries and an alert goes out if it persists
    deferred_since_ms: int | None = None
    deferred_reason: str | None = None
    deferred_alerted: bool = False
    # since when the deferral's reason is an error that does not heal by itself (no such bucket,
    # access denied): after draft.DEFER_FAIL_AFTER_MS of it the run fails instead of waiting on
    deferred_permanent_since_ms: int | None = None
    # jobs of this run that must not run (a launch that landed after a cancel, an event of a
    # terminal run's job still in progress): job name -> when the last stop was requested.
    # The only thing that may change on a terminal run; kept until SageMaker confirms the end.
    strays: tuple[tuple[str, int], ...] = ()
    # POST /runs/{id}/resume reopened a FAILED or CANCELLED run: how often, by whom, and when its
    # budgets (restarts, wall clock) started afresh
    # SageMaker kept no warm pool an attempt asked for (the account's warm-pool quota, 0 by
    # default): later attempts ask for none, and the user was told once
    warm_pool_off: bool = False
    # warm pools of ended attempts still watched (models.PoolWatch), oldest first; may change on a
    # terminal run too, like strays, until every pool is gone
    warm_pools: tuple[PoolWatch, ...] = ()
    # for checkpoint-interval advice: the newest checkpoints seen, (step, written ms, write s or
    # -1 when unmeasured, the next older step in S3 or -1), oldest first, at most CHECKPOINT_HISTORY;
    # and training time of ended attempts
    checkpoint_history: tuple[tuple[int, int, float, int], ...] = ()
    training_ms: int = 0
    # when the fault the run is recovering from ended its attempt (time to recovery is measured
    # to the replacement's Training); None when not recovering
    recovering_since_ms: int | None = None
    # the start-up allowance learned from an earlier attempt's first minutes of Training (see
    # cadence.learn_startup); None: the policy's startup_silence_minutes
    startup_learned_min: int | None = None
    # which attempts it was learned from and applies to (`startup_kind`): the same instances, and
    # a fresh start or a resume (a resume may spend silent minutes loading its checkpoint)
    startup_learned_on: str | None = None
    # hang windows an attempt learned from its cadence (hangs.adapt_windows), for the next attempts
    # on the same instances ("<type> x <count>"): the cadence is the training script's, so a
    # resumed attempt starts with them instead of the policy's until it learns its own
    learned_windows_on: str | None = None
    learned_log_window_min: int | None = None
    learned_progress_window_min: int | None = None
    resumes: int = 0
    resumed_by: str | None = None
    # when the run last became terminal (None while it is not; domain/resuming.py: a FAILED or
    # CANCELLED run may be resumed for RESUME_WINDOW_DAYS after it)
    finished_ms: int | None = None
    budget_started_ms: int | None = None
    # what the run holds while it is not terminal, so no other live run can take it: its name and
    # its checkpoint prefix (domain.claims; the store writes and releases them with the run)
    claims: tuple[str, ...] = ()
    # domain/hosts/bad_hosts.py: fingerprints (GPU serials) of hosts an ending or a hang singled out, as
    # (host, serials, attempt), oldest first, at most hosts.MAX_BAD_FINGERPRINTS; and whether the
    # next attempts ask SageMaker for an infra check (until one reaches Training with it)
    bad_fingerprints: tuple[tuple[str, str, int], ...] = ()
    infra_check_pending: bool = False
    # domain/goodput.py: the wall time already accounted, as ms per bucket, and which buckets hold
    # an estimate; the span it covers ends at goodput_until_ms (None: nothing folded yet, it starts
    # at created_ms) and takes in attempts up to goodput_through; goodput_carry_ms: training time
    # the folded attempts spent past the checkpoint the next one resumes from (to be redone)
    goodput_ms: Mapping[str, int] = field(default_factory=dict)
    goodput_estimates: tuple[str, ...] = ()
    goodput_until_ms: int | None = None
    goodput_through: int = 0
    goodput_carry_ms: int = 0
    # domain/checkpoints/retention.py: checkpoint directories (names under the synced prefix) chosen for
    # retirement and not yet gone from it; recorded before the first S3 call, so a half-done move
    # is finished by a later pass
    retiring: tuple[str, ...] = ()
    # domain/checkpoints/retention.py (ownership): when the run's ended attempts could write checkpoints, as
    # (the step each resumed from or -1, its Training start, its end), oldest first, at most
    # MAX_WRITING_SPANS; a directory is the run's own only if one of its attempts wrote it then
    checkpoint_spans: tuple[tuple[int, int, int], ...] = ()
    # domain/checkpoints/retirement.py: what the retirer's last pass answered for each directory in
    # ``retiring`` (where the next pass continues); the directories that cannot be retired (name,
    # why, since ms), no longer tried; and the submit-time warning about the checkpoint bucket's
    # versioning (retention frees no storage there), None when there is nothing to warn about
    retire_progress: tuple[RetireProgress, ...] = ()
    retire_stuck: tuple[tuple[str, str, int], ...] = ()
    storage_warning: str | None = None
    # domain/capacity/training_plans.py: the run's Training Plan (ResourceConfig.TrainingPlanArn) as last
    # read with DescribeTrainingPlan: its windows (start ms, end ms) oldest first, its status, when
    # it was read; plan_error: the last read failed (the windows are unknown, never "none");
    # plan_warned: the windows (by start) whose "cannot finish" alert went out; plan_off: the
    # policy's on-demand fallback is in force (attempts launch without the plan)
    plan_windows: tuple[tuple[int, int], ...] = ()
    plan_status: str | None = None
    plan_read_ms: int | None = None
    plan_error: str | None = None
    plan_warned: tuple[int, ...] = ()
    plan_off: bool = False
    # time spent waiting for the plan's next window (not counted against max_wall_clock_hours):
    # the waits that ended, and since when the run waits now (None: not waiting for a window)
    plan_waited_ms: int = 0
    plan_wait_since_ms: int | None = None

    @property
    def budget_origin_ms(self) -> int:
        """Where the wall-clock budget counts from (the submission, or the last resume)."""
        return self.budget_started_ms if self.budget_started_ms is not None else self.created_ms

    @property
    def current(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def checkpoint_uri(self) -> str:
        return str(self.request.get("CheckpointConfig", {}).get("S3Uri", ""))

    def with_attempt(self, attempt: Attempt) -> tuple[Attempt, ...]:
        """Attempts with `attempt` replacing the one of the same number (or appended)."""
        kept = tuple(a for a in self.attempts if a.number != attempt.number)
        return tuple(sorted((*kept, attempt), key=lambda a: a.number))
