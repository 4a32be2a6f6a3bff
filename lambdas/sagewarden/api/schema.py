"""The API's shapes for its OpenAPI document: pydantic models rendered as JSON Schema, never used to validate.

Derived from RunPolicy, `domain.policy.RANGES` and SageMaker's model; tests check every response
against them. Why: docs/api.md (*What a cold start loads*)."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from sagewarden.domain.vocabulary.models import LaunchState, RunStatus
from sagewarden.domain.vocabulary.policy import (
    CHECKPOINT_LAYOUTS,
    CHECKPOINT_RETIRED,
    HANG_CONFIRMATIONS,
    MAX_KEEP_DIR_TEXT,
    MAX_KEEP_DIRS,
    MAX_TEXT,
    RANGES,
    TRAINING_PLAN_FALLBACKS,
    RunPolicy,
)

RunStatusName = Literal[tuple(s.value for s in RunStatus)]  # type: ignore[valid-type]


class InstanceChoice(BaseModel):
    model_config = ConfigDict(extra="forbid")
    instance_type: str = Field(description="like ml.p4d.24xlarge (a SageMaker training instance type)")
    instance_count: int = Field(ge=1)


def _policy_field(f: dataclasses.Field[Any]) -> tuple[Any, Any]:
    name, text = f.name, str(f.type)
    optional = "None" in text
    if name in RANGES:
        r = RANGES[name]
        base: Any = int if text.startswith("int") else float
        info = Field(
            default=None,
            description=r.describe(),
            gt=r.low if r.low_open else None,
            ge=None if r.low_open else r.low,
            lt=r.high if r.high_open else None,
            le=None if r.high_open else r.high,
        )
        return (base | None if optional else base), info
    if name == "instance_fallbacks":
        return list[InstanceChoice], Field(default=None, max_length=10)
    if name == "environment_defaults":
        return dict[str, str], Field(default=None)
    if name == "checkpoint_keep_dirs":
        item = Annotated[str, Field(min_length=1, max_length=MAX_KEEP_DIR_TEXT, pattern=r"^[^/]+$")]
        return list[item], Field(
            default=None,
            max_length=MAX_KEEP_DIRS,
            description="checkpoint directory names or fnmatch patterns retention never retires",
        )
    if name == "checkpoint_layout":
        return Literal[CHECKPOINT_LAYOUTS], Field(default=None)
    if name == "checkpoint_retired":
        return Literal[CHECKPOINT_RETIRED], Field(default=None)
    if name == "checkpoint_archive_uri":
        return (str | None), Field(default=None, min_length=6, max_length=1024, pattern=r"^s3://[^/]")
    if name == "hang_confirmation":
        return Literal[HANG_CONFIRMATIONS], Field(default=None)
    if name == "training_plan_fallback":
        return Literal[TRAINING_PLAN_FALLBACKS], Field(default=None)
    if text.startswith("bool"):
        return bool, Field(default=None)
    return (str | None), Field(default=None, min_length=1, max_length=MAX_TEXT)


# Every RunPolicy field, optional (unset fields take the deployment's defaults).
Policy: type[BaseModel] = create_model(  # type: ignore[call-overload]
    "Policy",
    __config__=ConfigDict(extra="forbid"),
    __doc__="Per-run policy; every field is optional and defaults to the deployment's policyDefaults.",
    **{f.name: _policy_field(f) for f in dataclasses.fields(RunPolicy) if f.name != "extra"},
)


class RunSubmission(BaseModel):
    """POST /runs body."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(
        min_length=1,
        max_length=26,
        pattern=r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$",
        description="part of every job name: letters, digits and hyphens",
    )
    training_job: dict[str, Any] = Field(
        description="the native CreateTrainingJob request without TrainingJobName"
    )
    policy: Policy | None = None  # type: ignore[valid-type]


class FieldProblem(BaseModel):
    field: str = Field(
        description="path of the offending value, e.g. training_job.ResourceConfig.InstanceCount"
    )
    message: str


class Conflict(BaseModel):
    run_id: str = Field(
        description="the run that holds the name or the prefix: a live run, or a FAILED or CANCELLED "
        "one of another principal that may still be resumed (it holds its checkpoint prefix)"
    )
    name: str | None
    status: RunStatusName | None  # type: ignore[valid-type]
    on: Literal["name", "checkpoint_prefix", "archive_prefix"] = Field(
        description="what of this run collides. checkpoint_prefix: its CheckpointConfig.S3Uri is the "
        "other run's prefix, inside it or around it (SageMaker downloads everything under a job's "
        "S3Uri), or the other run's retention archive overlaps it; archive_prefix: its "
        "policy.checkpoint_archive_uri overlaps the other run's checkpoint prefix"
    )


class Error(BaseModel):
    message: str
    errors: list[FieldProblem] | None = Field(default=None, description="400 and 413: every problem found")
    status: RunStatusName | None = Field(default=None, description="409: the finished run's status")  # type: ignore[valid-type]
    conflict: Conflict | None = Field(
        default=None, description="409: the other live run that holds this run's name or checkpoint prefix"
    )
    request_id: str | None = Field(default=None, description="500: quote it when reporting the problem")


class Checkpoint(BaseModel):
    uri: str
    step: int
    layout: str
    written_at: str | None


class Attempt(BaseModel):
    number: int
    job_name: str
    instance_type: str
    instance_count: int
    launch: Literal[tuple(s.value for s in LaunchState)]  # type: ignore[valid-type]
    sagemaker_status: str | None
    secondary_status: str | None
    requested_at: str | None
    training_started_at: str | None
    ended_at: str | None
    resumed_from: Checkpoint | None
    resumed_checkpoint_age_s: int | None
    checkpoint_at_end: Checkpoint | None
    end_class: str | None
    end_reason: str | None
    failure_reason: str | None
    evidence: list[str]
    stop_intent: str | None
    hang_signals: list[str]
    suspect_hosts: list[str] = Field(description="hosts (algo-<n>) a hang or the ending singled out")
    infra_check: bool = Field(description="the attempt asked SageMaker for an infra check (InfraCheckConfig)")
    volume_steered: bool = Field(
        description="the attempt asked for a VolumeSizeInGB 1 GB off the request's (1 GB more when it "
        "asks for 1), so that SageMaker could not put it on a warm pool holding a bad host"
    )
    fabric: str | None = Field(
        description="the network NCCL selected, from its log: socket (slow: attempt.slow_fabric), efa, "
        "other; null: not seen or not checked"
    )
    fabric_evidence: list[str] = Field(description="the NCCL log lines that show it")
    straggler_host: str | None = Field(
        description="the host flagged as slower than its peers from the script's step lines "
        "(attempt.straggler); null: none flagged or not checked"
    )
    straggler_slowdown: float | None = Field(
        description="how much slower that host's compute per step is than its peers', beyond its own "
        "baseline (0.15 = 15 %)"
    )
    learned_windows_min: dict[str, int] = Field(
        description="hang windows learned from this attempt's cadence (log_silence, progress_stalled)"
    )
    estimated_cost_usd: float = Field(
        description="instances x instance-hour price x hours since Training: fixed when the attempt ended, "
        "so far while it is live"
    )


class CheckpointAdvice(BaseModel):
    observed_interval_min: float | None
    write_seconds: float | None
    mtbf_hours: float | None
    faults: int
    training_hours: float | None
    optimal_interval_min: float | None = Field(description="Young/Daly: sqrt(2 x write time x MTBF)")
    gpu_hours_per_day_saved: float | None
    summary: str


class Wait(BaseModel):
    reason: str
    until: str | None
    instance_type: str | None


class Deferral(BaseModel):
    reason: str = Field(description="the observation the next decision needs and why it failed")
    since: str | None
    permanent: bool = Field(
        description="the error does not heal by itself (no such bucket, access denied): the run "
        "fails at fails_at unless it is fixed; a transient error (throttling, 5xx) waits"
    )
    fails_at: str | None = Field(description="permanent errors only: when the run fails if still deferred")


class GoodputBucket(BaseModel):
    name: str = Field(
        description="productive | waiting | provisioning | downloading | startup | checkpoint_saves | "
        "hang_detection | stopping | uploading | restarts | straggler | idle_warm_pool | other"
    )
    label: str
    seconds: float
    percent: float = Field(description="of the run's wall time")
    how: Literal["measured", "estimate", "not measured"] = Field(
        description="measured: between two recorded timestamps; estimate: derived (save counts x "
        "write time, a hang's onset from its alarm window, work redone, productive as the rest of "
        "Training); not measured: nothing the run records shows it (0)"
    )
    estimate: bool = Field(description="how is not measured")


class Goodput(BaseModel):
    ratio: float | None = Field(description="effective training time ratio: productive / wall time")
    percent: float | None
    wall_seconds: float = Field(description="submission to the run's end (to now while it is live)")
    live: bool = Field(description="the run is not terminal: the figures are so far")
    summary: str = Field(description='one line, e.g. "ETTR 93.1 %: 3.2 % restarts (work redone), ..."')
    buckets: list[GoodputBucket] = Field(
        description="every bucket, in a fixed order; they add up to the wall time"
    )


class RunSummary(BaseModel):
    run_id: str
    name: str
    owner: str = Field(
        description="the IAM principal that submitted the run: it (any session of its role) or an "
        "admin may cancel and resume it"
    )
    status: RunStatusName  # type: ignore[valid-type]
    outcome: str | None
    created_at: str | None
    updated_at: str | None
    attempt_count: int
    restarts: int
    restarts_by_class: dict[str, int]
    no_progress_streak: int
    segments: int
    wait: Wait | None
    deferred: Deferral | None = Field(
        description="the next decision waits for an observation that failed (retried every minute)"
    )
    checkpoint_uri: str = Field(
        description="training_job.CheckpointConfig.S3Uri: no two live runs share a name or overlapping prefixes"
    )
    last_checkpoint: Checkpoint | None
    estimated_cost_usd: float = Field(
        description="the run's cost so far: its ended attempts plus the live attempt so far (the figure the "
        "cost budget counts)"
    )
    policy: dict[str, Any] = Field(description="the run's resolved policy (every field of Policy)")
    version: int
    ettr: Goodput = Field(
        description="goodput: the run's wall time split into productive training and badput buckets"
    )


class HangWindow(BaseModel):
    minutes: int
    source: Literal["learned", "carried", "policy"] = Field(
        description="learned: the attempt's own cadence; carried: learned by an earlier attempt on "
        "the same instance type and count; policy: the run policy's window"
    )


class NewestCheckpoint(BaseModel):
    step: int
    written_at: str | None
    write_seconds: float | None = Field(
        description="how long the save took (its objects and completion marker in S3, the start before its first object estimated), when measured"
    )


class WatchedPool(BaseModel):
    job_name: str
    status: str | None = Field(description="the last WarmPoolStatus seen (null: none reported yet)")
    releases: int = Field(description="UpdateTrainingJob(KeepAlivePeriodInSeconds=0) asked this often")
    bad_host: bool = Field(description="the attempt singled out a host: the pool is never reused")


class WarmPool(BaseModel):
    keep_alive_seconds: int = Field(
        description="ResourceConfig.KeepAlivePeriodInSeconds the next attempt asks for (0: no warm pool)"
    )
    note: str = Field(
        description="why: e.g. no warm pool for managed spot training, or with keep_alive_seconds 0"
    )
    pools: list[WatchedPool] = Field(
        description="warm pools of ended attempts, watched until SageMaker reports them gone"
    )


class RetiringDirectory(BaseModel):
    name: str = Field(description="the checkpoint directory under the synced prefix")
    phase: Literal["copy", "delete"] = Field(
        description="copy: its objects are being copied to the archive and proven; delete: every object "
        "is proven copied and the synced prefix's are being deleted (the completion markers first)"
    )
    objects_proven: int = Field(
        description="copy: objects proven copied so far (not proven again by later passes); delete: objects left to delete"
    )
    multipart_parts_copied: int = Field(
        description="parts of the multipart copy under way of one large object (the next pass resumes it)"
    )
    passes_without_progress: int = Field(
        description="passes in a row that could not advance it (3 make it one that cannot be retired)"
    )
    summary: str


class CannotRetire(BaseModel):
    name: str
    reason: str = Field(
        description="why no pass could advance it (e.g. a listing longer than a pass, access denied, a copy "
        "that does not match its source); it is no longer tried, and stays in the synced prefix"
    )
    since: str | None


class Retention(BaseModel):
    archive_prefix: str | None = Field(
        description="where this run's retired checkpoints go: the archive prefix followed by the run id "
        "(<archive>/<run_id>/<directory>/<file>); null with checkpoint_retired delete"
    )
    retiring: list[RetiringDirectory] = Field(description="directories being retired, and how far each got")
    cannot_retire: list[CannotRetire] = Field(
        description="directories retention gave up on (the newest 16): move or delete them yourself"
    )
    storage_warning: str | None = Field(
        description="read at submit: the checkpoint bucket is versioned without a lifecycle rule expiring "
        "noncurrent versions under the prefix, so retention frees no storage"
    )


class Run(RunSummary):
    checkpoint_advice: CheckpointAdvice | None
    newest_checkpoint: NewestCheckpoint | None = Field(
        description="the newest verified checkpoint the supervisor has seen (every reconcile tick and each "
        "attempt's end); null before the first"
    )
    hang_windows: dict[str, HangWindow] | None = Field(
        description="the latest attempt's hang windows in force (log_silence; progress_stalled with a "
        "progress_metric); null without an attempt or with hang detection off"
    )
    warm_pool: WarmPool
    retention: Retention | None = Field(
        description="checkpoint retention (policy.checkpoint_keep); null when the run keeps every checkpoint"
    )
    attempts: list[Attempt]
    training_job: dict[str, Any] = Field(
        description="the CreateTrainingJob request as submitted, except that the values of secret-looking "
        "Environment, HyperParameters and Tags keys and ContainerArguments/ContainerEntrypoint flags "
        "(docs/api.md, Who may do what), URL passwords and well-known tokens read "
        '"<redacted>" (the launched jobs get the real values)'
    )


class RunPage(BaseModel):
    runs: list[RunSummary]
    next_cursor: str | None


class AuditEvent(BaseModel):
    at: str | None
    at_ms: int
    kind: str = Field(description="event | decision | action | error")
    summary: str
    detail: dict[str, Any]


class EventPage(BaseModel):
    events: list[AuditEvent]
    next_cursor: str | None
