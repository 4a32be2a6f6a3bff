"""Events fed into `decide`. Plain values; the adapters build them from AWS payloads."""

from __future__ import annotations

from dataclasses import dataclass

from sagewarden.domain.vocabulary.evidence import HostMetrics
from sagewarden.domain.vocabulary.layouts import Checkpoint, RetentionView
from sagewarden.domain.vocabulary.models import RetireProgress
from sagewarden.domain.vocabulary.plan_windows import PlanView
from sagewarden.domain.vocabulary.reasons import EventSource, LogCheck


@dataclass(frozen=True)
class Submitted:
    """The run was stored; launch its first attempt."""


@dataclass(frozen=True)
class LaunchAccepted:
    attempt: int
    job_arn: str = ""
    already_existed: bool = False


@dataclass(frozen=True)
class LaunchRejected:
    attempt: int
    code: str
    message: str


@dataclass(frozen=True)
class JobObserved:
    """A training job's state, from an EventBridge state change or a DescribeTrainingJob."""

    job_name: str
    attempt: int
    status: str
    secondary: str | None
    modified_ms: int
    failure_reason: str | None = None
    created_ms: int | None = None
    training_started_ms: int | None = None
    ended_ms: int | None = None
    source: str = EventSource.EVENT
    event_id: str | None = None
    # DescribeTrainingJob's WarmPoolStatus (the state-change event does not carry it): Status
    # (None: the field was absent), ResourceRetainedBillableTimeInSeconds, ReusedByJob
    warm_pool_status: str | None = None
    warm_pool_billable_s: int | None = None
    warm_pool_reused_by: str | None = None


@dataclass(frozen=True)
class JobMissing:
    """DescribeTrainingJob says the job does not exist (its launch never happened)."""

    job_name: str
    attempt: int


@dataclass(frozen=True)
class Tick:
    """The periodic sweep found the run due: timers, retries of lost actions, budgets."""


@dataclass(frozen=True)
class CancelRequested:
    by: str


@dataclass(frozen=True)
class ResumeRequested:
    """A person asks a FAILED or CANCELLED run to continue from its newest verified checkpoint
    with a fresh restart budget (POST /runs/{id}/resume): the one intent that reopens a
    finished run."""

    by: str


@dataclass(frozen=True)
class CapacityReleased:
    """One of the account's supervised jobs ended and gave back instances of this type."""

    instance_type: str
    count: int


@dataclass(frozen=True)
class HangSignal:
    """A hang alarm of an attempt changed state (ALARM or OK)."""

    job_name: str
    attempt: int
    signal: str  # log_silence | gpu_idle | checkpoint_stale | progress_stalled
    state: str  # ALARM | OK | INSUFFICIENT_DATA
    since_ms: int
    reason: str = ""
    host: str | None = None
    source: str = EventSource.EVENT


@dataclass(frozen=True)
class AlarmsObserved:
    """What CloudWatch holds for an attempt's hang alarms, read by the sweep (the level, not the
    edge): every alarm present, as (key, state, state-updated ms). Keys are
    `sagewarden.domain.hangs.alarms.alarm_keys` values (e.g. "log_silence", "gpu_idle#2")."""

    job_name: str
    attempt: int
    states: tuple[tuple[str, str, int], ...]


@dataclass(frozen=True)
class RetireOutcome:
    """What one pass of RetireCheckpoints did to one directory (the retirer's answer).

    ``state``: where the next pass continues. ``done``: the synced prefix no longer holds the
    directory. ``progressed``: this pass proved, copied or deleted something of it. ``blocked``:
    why the pass could not advance it although it had the directory to work on (a listing longer
    than a pass, an error that does not heal by itself, a copy that does not match); None when it
    finished, was cut by the pass's bound after progress, or met a transient error."""

    name: str
    state: RetireProgress
    done: bool = False
    progressed: bool = False
    blocked: str | None = None
    line: str = ""


@dataclass(frozen=True)
class RetirementReported:
    """A RetireCheckpoints pass's answer, fed back so the decision records it (domain/checkpoints/retirement.py):
    one outcome per directory the pass reached, in order; ``error``: the S3 error that ended the
    pass (None: it ended by finishing or by its bound)."""

    s3_uri: str
    outcomes: tuple[RetireOutcome, ...]
    error: str | None = None

    @property
    def text(self) -> str:
        """The audit's line: one clause per directory, then the error."""
        lines = [o.line for o in self.outcomes if o.line]
        if self.error:
            lines.append(self.error)
        return "; ".join(lines) or "nothing to do"


Event = (
    Submitted
    | LaunchAccepted
    | LaunchRejected
    | JobObserved
    | JobMissing
    | Tick
    | CancelRequested
    | ResumeRequested
    | CapacityReleased
    | HangSignal
    | AlarmsObserved
    | RetirementReported
)


@dataclass(frozen=True)
class Observations:
    """Facts the service looked up before deciding (I/O happens outside the domain)."""

    # how the deployment watches log silence: True, a log subscription feeds the heartbeat metric
    # and a log-silence alarm watches it; False (logSubscription=false), no heartbeat exists, so no
    # such alarm may exist either and the sweep's own check (`logs_silent`) carries log silence
    log_subscription: bool = True
    # the deployment's heartbeat pipeline is judged broken (domain/hangs/heartbeat.py): every training
    # attempt's log silence is judged from its logs, as without a subscription (False: delivering,
    # or not known to this invocation: each attempt's own confirmation still guards every stop)
    heartbeat_broken: bool = False

    checkpoint: Checkpoint | None = None
    checkpoint_error: str | None = None  # the lookup failed: the checkpoint is UNKNOWN, not absent
    # the lookup failed with an error that does not heal by itself (no such bucket, access denied)
    checkpoint_error_permanent: bool = False
    log_tail: tuple[str, ...] = ()
    log_error: str | None = None  # the log read failed: the tail is unknown, not empty
    # on a hang: when the job last wrote a log event (None: none, or unknown), for a silence's onset
    log_newest_ms: int | None = None
    hosts_triage: tuple[str, ...] = ()  # one line per host: what it was doing when the hang fired
    # hosts (algo-<n>) the GPU metrics single out when a hang fires: none reported, or idle while
    # others are busy (empty when every host looks the same, or when not read)
    suspect_hosts: tuple[str, ...] = ()
    # log-silence fallback (no log subscription): True = no log event in the window, False = some
    # event, None = not checked (or the check failed: see log_error)
    logs_silent: bool | None = None
    # ... and for how many minutes at least (the window in force, or a longer one it also spans)
    logs_silent_min: int | None = None
    # domain/hangs/heartbeat.py: the confirming read of the job's training streams before a stop on its
    # heartbeat's log silence (None: not read), or the error that left it unknown (no stop on it)
    heartbeat_check: LogCheck | None = None
    heartbeat_check_error: str | None = None
    # per-minute activity of the attempt, to learn its hang windows from (None: not read)
    heartbeat: tuple[tuple[int, float], ...] | None = None
    progress: tuple[tuple[int, float], ...] | None = None
    # when the newest checkpoint directory last received an object (a save under way or just
    # done), read when a hang alarm is in ALARM; None: no checkpoint directory or not read
    save_activity_ms: int | None = None
    save_activity_error: str | None = None  # the read failed: whether a save is under way is unknown
    # domain/hosts/bad_hosts.py: the contract's fingerprint lines of the attempt, read with its log tail at
    # an ending or a hang (the error when they could not be read: unknown, not "none printed")
    fingerprint_lines: tuple[str, ...] = ()
    fingerprint_error: str | None = None
    # at a failure of 2+ hosts, the look-up of the hosts that printed a GPU hardware line failed:
    # which host failed is unknown (the tail may not have reached it), not "none printed one"
    hardware_printers_error: str | None = None
    # domain/hosts/bad_hosts.py, peers by address: at a failure whose NCCL/EFA lines name peers by IP, the lines
    # in which the hosts declared those addresses (NCCL INFO Bootstrap : Using eth0:<ip><0>), or the
    # error of a look-up that failed (which host has the address is then unknown, not "none")
    address_lines: tuple[str, ...] = ()
    address_error: str | None = None
    # domain/hosts/fabric.py: the start-up scan of a training attempt's log (NCCL's transport lines and
    # fingerprint lines; None: not read), or the error that left it unknown
    scan_lines: tuple[str, ...] | None = None
    scan_error: str | None = None
    # domain/hosts/stragglers.py: the contract's step lines of the training attempt's recent minutes
    # (None: not read), or the error that left them unknown
    step_lines: tuple[str, ...] | None = None
    step_error: str | None = None
    # each host's recent GPU, CPU and disk metrics, read when a hang alarm is in ALARM (None: not
    # read); the read failed: host_metrics_error (unknown, never "idle")
    host_metrics: tuple[HostMetrics, ...] | None = None
    host_metrics_error: str | None = None
    # at a failure whose tail shows a kill (SIGKILL, exitcode -9): the highest MemoryUtilization a
    # host reached before the end, (host, percent); None: not read, or the read failed (the error:
    # unknown, which the classifier reads as "not shown to be memory", never as "low")
    host_memory: tuple[str, float] | None = None
    host_memory_error: str | None = None
    # domain/checkpoints/retention.py: the synced prefix's complete checkpoints and child directories, read
    # on a training attempt's tick when checkpoint_keep is set (None: not read); the read's error
    # (unknown: nothing is retired this pass)
    retention: RetentionView | None = None
    retention_error: str | None = None
    # domain/capacity/training_plans.py: the run's training plan as DescribeTrainingPlan answered (None:
    # not read), or the error that left it unknown
    plan: PlanView | None = None
    plan_error: str | None = None


def event_name(event: Event) -> str:
    return type(event).__name__
