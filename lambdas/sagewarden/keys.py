"""Names shared by the CDK constructs, the adapters and the test fixtures.

The table schema, environment variable names, tag keys and alarm prefix live here and only
here, so the infrastructure, the Lambda code and the simulated account cannot drift apart.
This module must stay import-free (no boto3, no CDK).
"""

# --- DynamoDB state table -------------------------------------------------------------------
PK = "pk"
SK = "sk"

# GSI: list runs newest first (all runs share one partition; run ids are ULIDs, so sort = time)
GSI_RUNS = "runs"
GSI_RUNS_PK = "entity"  # constant "RUN" on run items only
GSI_RUNS_SK = "run_id"

# GSI: list runs of one status, newest first
GSI_STATUS = "by_status"
GSI_STATUS_PK = "status"
GSI_STATUS_SK = "run_id"

# GSI (sparse): non-terminal runs ordered by the next time the sweep must look at them.
# Only active runs carry these attributes, so the index holds exactly the runs that need work.
GSI_DUE = "due"
GSI_DUE_PK = "due_shard"
GSI_DUE_SK = "due_at"  # epoch milliseconds (number)
DUE_SHARDS = 4

# --- Environment variables of the functions ---------------------------------------------------
ENV_TABLE_NAME = "SAGEWARDEN_TABLE_NAME"
ENV_TOPIC_ARN = "SAGEWARDEN_TOPIC_ARN"
ENV_ALLOWED_ROLE_ARNS = "SAGEWARDEN_ALLOWED_ROLE_ARNS"  # JSON list
# the API function's alone: principals that may cancel and resume any run (JSON list of ARNs)
ENV_ADMIN_ROLE_ARNS = "SAGEWARDEN_ADMIN_ROLE_ARNS"
ENV_READ_SCOPE = "SAGEWARDEN_READ_SCOPE"  # who may read a run: "all" callers, or its "owner" and admins
READ_SCOPES = ("all", "owner")
ENV_JOB_PREFIX = "SAGEWARDEN_JOB_PREFIX"
ENV_POLICY_DEFAULTS = "SAGEWARDEN_POLICY_DEFAULTS"  # JSON object of RunPolicy overrides
ENV_ALARM_PREFIX = "SAGEWARDEN_ALARM_PREFIX"
ENV_HEARTBEAT_NAMESPACE = "SAGEWARDEN_HEARTBEAT_NAMESPACE"
# "true" when no log subscription feeds the heartbeat (logSubscription=false): the sweep then
# checks each training job for recent log events itself (FilterLogEvents, one call per job)
ENV_LOG_SILENCE_FALLBACK = "SAGEWARDEN_LOG_SILENCE_FALLBACK"
ENV_CHECKPOINT_RETENTION = "SAGEWARDEN_CHECKPOINT_RETENTION"

DEFAULT_JOB_PREFIX = "sw"


def heartbeat_filter_name(stack_name: str, job_prefix: str) -> str:
    """The heartbeat's subscription filter on the training log group. It carries the job prefix
    as well as the stack's name: two supervisors in one stack (the construct library) would
    otherwise name theirs alike, and CloudFormation refuses the second."""
    return f"{stack_name}-{job_prefix}-heartbeat"


def legacy_heartbeat_filter_name(stack_name: str) -> str:
    """The name the filter had before it carried the job prefix (the first deploy of this version
    replaces it: the preflight counts it as the stack's own)."""
    return f"{stack_name}-heartbeat"


def alarm_prefix(job_prefix: str) -> str:
    """Prefix of every hang alarm a deployment creates. Derived from the deployment's job
    prefix, so two deployments in one account and region never list, match or delete each
    other's alarms (their job prefixes must differ anyway: the job-state rules match by it)."""
    return f"sagewarden-{job_prefix}-hang-"


DEFAULT_ALARM_PREFIX = alarm_prefix(DEFAULT_JOB_PREFIX)
# the sweep's lease item (two sweeps never run at once)
LEASE_PK_PREFIX = "LEASE#"
# what a live run holds so no other live run can take it: its name, its checkpoint prefix
CLAIM_PK_PREFIX = "CLAIM#"
# the deployment's own state (not a run's): the heartbeat pipeline's health (domain/hangs/heartbeat.py)
DEPLOYMENT_PK_PREFIX = "DEPLOYMENT#"
HEARTBEAT_NAMESPACE = "Sagewarden/Heartbeat"
HEARTBEAT_METRIC = "LogEvents"
HEARTBEAT_DIMENSION = "TrainingJobName"

# --- The supervisor's own metrics (namespace Sagewarden, dimension service) -------------------
METRICS_NAMESPACE = "Sagewarden"
METRIC_FAILED_ACTIONS = "FailedActions"
METRIC_ALERTS_PUBLISHED = "AlertsPublished"
METRIC_ALERT_PUBLISH_FAILURES = "AlertPublishFailures"
METRIC_OBSERVATION_FAILURES = "ObservationFailures"
METRIC_EVENTS_IGNORED = "EventsIgnored"
METRIC_SWEEP_ERRORS = "SweepErrors"
METRIC_SWEEP_OUT_OF_TIME = "SweepOutOfTime"

# Domain metrics for the dashboard (infra/constructs/dashboard.py). Same namespace; dimensions
# are `service` plus the one named below, so each value is its own series. Units are CloudWatch
# units; "event" means: emit value 1 each time it happens (the dashboard sums them).
# RunStatus{service,status}: a run entered `status` (a RunStatus value). Count, event.
METRIC_RUN_STATUS = "RunStatus"
DIM_STATUS = "status"
# Restarts{service,class}: a new attempt was launched to resume a run; `class` is the ending
# class it resumes from (EndingClass value: INFRASTRUCTURE, UNKNOWN, SPOT_INTERRUPTED,
# SEGMENT_DONE), or HANG after a supervisor stop for a hang. Count, event.
METRIC_RESTARTS = "Restarts"
DIM_CLASS = "class"
RESTART_CLASS_HANG = "HANG"
# HangDetections{service,signal}: a hang was confirmed; one per signal in ALARM at confirmation
# (log_silence, gpu_idle, progress_stalled, checkpoint_stale). Count, event.
METRIC_HANG_DETECTIONS = "HangDetections"
DIM_SIGNAL = "signal"
# RecoverySeconds{service}: from an attempt's ending (fault) to its replacement reaching
# Training. Seconds, one value per recovery.
METRIC_RECOVERY_SECONDS = "RecoverySeconds"
# Waits{service,reason}: a run entered RETRY_WAIT; reason quota | capacity | throttle. Count, event.
METRIC_WAITS = "Waits"
DIM_REASON = "reason"
# Ettr{service,run}: a run ended (SUCCEEDED, FAILED, CANCELLED); its effective training time ratio
# (domain/goodput.py) in percent, `run` its name. Percent, one value per run end, from the
# function that ends it. Each run name is its own metric, with one data point.
METRIC_ETTR = "Ettr"
DIM_RUN = "run"
# Gauges from the sweep's periodic alarm cleanup (one DescribeAlarms listing of the deployment's
# hang-alarm prefix): how many hang alarms exist, and for how many distinct training jobs.
# Count, one value per cleanup pass; the dashboard plots their Maximum. They drive the
# supervision-cost estimate (alarms x alarm price + jobs x heartbeat metric price).
METRIC_HANG_ALARMS = "HangAlarms"
METRIC_WATCHED_JOBS = "WatchedJobs"

# --- SageMaker ------------------------------------------------------------------------------
TAG_RUN_ID = "sagewarden:run-id"
TAG_ATTEMPT = "sagewarden:attempt"
TAG_RUN_NAME = "sagewarden:run-name"
TRAINING_LOG_GROUP = "/aws/sagemaker/TrainingJobs"
TRAINING_METRIC_NAMESPACE = "/aws/sagemaker/TrainingJobs"

# --- Lambda entry points (module:function under lambdas/) ------------------------------------
HANDLER_API = "sagewarden.handlers.api.handler"
HANDLER_JOB_STATE = "sagewarden.handlers.on_training_job_state_change.handler"
HANDLER_ALARM_STATE = "sagewarden.handlers.on_alarm_state_change.handler"
HANDLER_SWEEP = "sagewarden.handlers.sweep.handler"
HANDLER_HEARTBEAT = "sagewarden.handlers.on_training_logs.handler"
# CloudFormation custom resource: CloudWatch judges one alarm of every shape at deploy time
HANDLER_ALARM_SHAPE_CHECK = "sagewarden.handlers.check_alarm_shapes.handler"

# --- Deploy-time alarm-shape check (sagewarden.adapters.alarm_shapes) ----------------------------------
SHAPE_CHECK_RESOURCE_TYPE = "Custom::SagewardenAlarmShapeCheck"
# the custom resource's properties (synthesized by infra/constructs/alarm_shape_check.py)
SHAPE_CHECK_PROP_ALARM_PREFIX = "AlarmPrefix"
SHAPE_CHECK_PROP_POLICY_DEFAULTS = "PolicyDefaults"
SHAPE_CHECK_PROP_FINGERPRINT = "Fingerprint"
# the attribute of its answer (Data) that the stack output AlarmShapes carries (a JSON report)
SHAPE_CHECK_ATTR_REPORT = "Report"
# throwaway alarm names: <alarm prefix>shape-check-<shape>-<alarm>-<request id>; never "--"
SHAPE_CHECK_NAME_PART = "shape-check-"
