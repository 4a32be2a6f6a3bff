"""Least-privilege permissions of the supervisor's functions.

Each capability is one named inline policy (``AWS::IAM::Policy``) attached to exactly the
roles that need it, so the grants read like a table and every cdk-nag acknowledgement sits on
the one policy that holds the wildcard it is about.

=====================  =====  =========  =====  =====  =========
capability             api    job state  alarm  sweep  heartbeat
=====================  =====  =========  =====  =====  =========
state table r/w          x        x        x      x
publish alerts (SNS)     x        x        x      x
SageMaker jobs           x        x        x      x
iam:PassRole (allow)     x        x        x      x
checkpoint discovery     x        x        x      x
checkpoint keys (KMS)    x        x        x      x     (only with checkpointKmsKeyArns)
hang alarms              x        x        x      x
training logs read       x        x        x      x
metric data read         x        x        x      x
SageMaker quotas read    x
checkpoint retention                            x          (only with checkpointRetention)
bucket versioning read   x                                 (only with checkpointRetention)
=====================  =====  =========  =====  =====  =========

Any of the four control functions may carry out the supervisor's actions (submit an attempt,
stop a job, create or delete alarms, notify), because the run state machine decides them
whichever event arrives -- and for the same reason any of them may need the evidence a decision
reads (log tails, metrics): a cancel through the API whose StopTrainingJob is refused because the
job already failed looks at the job and classifies its failure from the log tail (the IAM replay
found that path denied). The heartbeat function only writes its own logs (its metrics are
CloudWatch embedded-metric-format log lines). Only the API reads Service Quotas: a submit whose
instance count is above a known quota is refused (400). Only the sweep moves retired checkpoints
(domain/checkpoints/retention.py decides it on the sweep's tick alone), and only in a deployment that asked
for it: copying into the archive and deleting from the synced prefix are writes discovery never
needs. In such a deployment the API reads a retention run's checkpoint bucket's versioning and
lifecycle rules at submit (a versioned bucket without a noncurrent-version rule is warned about).
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from sagewarden import keys

from ..config import SupervisorConfig
from .alerts import Alerts
from .event_rules import training_job_name_prefix
from .functions import SupervisorFunction, SupervisorFunctions
from .hang_signals import training_log_group_arn
from .nag import acknowledge, resource_finding
from .state_table import StateTable

SAGEMAKER_JOB_ACTIONS = (
    "sagemaker:CreateTrainingJob",
    # CreateTrainingJob with Tags (the run/attempt tags) is also authorised as AddTags on the
    # new job's ARN; scoped to the same name prefix, it cannot tag anything else.
    "sagemaker:AddTags",
    "sagemaker:DescribeTrainingJob",
    "sagemaker:StopTrainingJob",
    # terminates the warm pool an ended attempt left when nothing will reuse it
    "sagemaker:UpdateTrainingJob",
)
# DescribeTrainingPlan is authorised against the plan (resource type training-plan), as AWS's
# managed policy AmazonSageMakerTrainingPlanCreateAccess grants it: training-plan/*
TRAINING_PLAN_ACTIONS = ("sagemaker:DescribeTrainingPlan",)
# Authorised per alarm ARN, so scoped to the hang-alarm name prefix.
ALARM_ACTIONS = (
    "cloudwatch:PutMetricAlarm",
    "cloudwatch:DeleteAlarms",
    # PutMetricAlarm with Tags (run id, job name) is also authorised as TagResource.
    "cloudwatch:TagResource",
)
# DescribeAlarms with AlarmNamePrefix (with or without StateValue) is authorised against
# ``alarm:*``, not against the prefix: a grant on ``alarm:<prefix>*`` is denied. Service
# Authorization Reference, CloudWatch ("DescribeAlarms", resource type alarm):
# https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoncloudwatch.html
ALARM_LIST_ACTIONS = ("cloudwatch:DescribeAlarms",)
LOG_READ_ACTIONS = ("logs:FilterLogEvents", "logs:GetLogEvents", "logs:DescribeLogStreams")
# Account-level reads with no resource type in the Service Authorization Reference (Service
# Quotas: ListServiceQuotas, ListAWSDefaultServiceQuotas), so granted on "*":
# https://docs.aws.amazon.com/service-authorization/latest/reference/list_servicequotas.html
QUOTA_READ_ACTIONS = ("servicequotas:ListServiceQuotas", "servicequotas:ListAWSDefaultServiceQuotas")
CHECKPOINT_BUCKET_ACTIONS = ("s3:ListBucket",)
CHECKPOINT_OBJECT_ACTIONS = ("s3:GetObject",)
# Reading an object of an SSE-KMS bucket (e.g. Megatron's latest_checkpointed_iteration.txt) is
# also authorised as kms:Decrypt on the object's key, requested by S3 on the caller's behalf.
CHECKPOINT_KEY_ACTIONS = ("kms:Decrypt",)
# Checkpoint retention: server-side copies into the archive (CopyObject and the multipart copy of a
# large object are both s3:PutObject), the parts of a multipart copy a later pass resumes
# (ListParts), an open copy no pass reported given up, and deletes (DeleteObjects is authorised
# per key as s3:DeleteObject). Reading the source and checking the copy (HeadObject, ListObjectsV2)
# are discovery's s3:GetObject and s3:ListBucket; finding the open copies of a key
# (ListMultipartUploads) is the bucket's s3:ListBucketMultipartUploads.
RETENTION_OBJECT_ACTIONS = (
    "s3:PutObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
    "s3:DeleteObject",
)
RETENTION_BUCKET_ACTIONS = ("s3:ListBucketMultipartUploads",)
# A retention run's submit reads its checkpoint bucket's versioning and lifecycle rules
# (GetBucketVersioning, GetBucketLifecycleConfiguration: s3:GetLifecycleConfiguration).
VERSIONING_READ_ACTIONS = ("s3:GetBucketVersioning", "s3:GetLifecycleConfiguration")
RETENTION_KEY_ACTIONS = ("kms:GenerateDataKey",)
S3_VIA_SERVICE = "s3.*.amazonaws.com"
SAGEMAKER_SERVICE = "sagemaker.amazonaws.com"


class SupervisorPermissions(Construct):
    """Grants the functions what the table above says, and nothing else.

    Attributes:
        sagemaker_policy, checkpoint_policy, alarms_policy, logs_policy, metrics_policy,
            quotas_policy: the ``iam.Policy`` of each capability.
        pass_role_policy: ``iam.Policy`` with ``iam:PassRole`` on the allowed roles, or ``None``
            when no role is allowed (then no role can be passed and SageMaker rejects runs).
        control_roles, evidence_roles: the roles each group of policies is attached to.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: SupervisorConfig,
        functions: SupervisorFunctions,
        state_table: StateTable,
        alerts: Alerts,
    ) -> None:
        super().__init__(scope, construct_id)
        control = (functions.api, functions.job_state, functions.alarm_state, functions.sweep)
        evidence = control
        self.control_roles = tuple(f.role for f in control)
        self.evidence_roles = tuple(f.role for f in evidence)
        self._grant_state_and_alerts(control, state_table, alerts)
        self.sagemaker_policy = self._grant_training_jobs(config, control)
        self.pass_role_policy = self._grant_pass_role(config, control)
        bucket_arns, object_arns = self._checkpoint_arns(config)
        self.checkpoint_policy = self._grant_checkpoint_discovery(config, control, bucket_arns, object_arns)
        self.retention_policy = self._grant_checkpoint_retention(
            config, functions.sweep, bucket_arns, object_arns
        )
        self.versioning_policy = self._grant_versioning_read(config, functions.api, bucket_arns)
        self.alarms_policy = self._grant_hang_alarms(config, control)
        self.logs_policy = self._grant_training_logs(evidence)
        self.quotas_policy = self._grant_quota_reads(functions.api)
        self.metrics_policy = self._grant_metric_reads(evidence)

    def _grant_state_and_alerts(
        self, control: Sequence[SupervisorFunction], state_table: StateTable, alerts: Alerts
    ) -> None:
        """The state table (read/write) and the alert topic (publish), to every control function."""
        for fn in control:
            state_table.grant_read_write(fn.role)
            alerts.topic.grant_publish(fn.role)
            acknowledge(
                fn.role,
                "AwsSolutions-IAM5",
                "kms:GenerateDataKey* on the alert topic's own key only, added by "
                "topic.grant_publish: SNS needs it to encrypt what the function publishes.",
                findings=["Action::kms:GenerateDataKey*"],
            )

    def _grant_training_jobs(
        self, config: SupervisorConfig, control: Sequence[SupervisorFunction]
    ) -> iam.Policy:
        """SageMaker training jobs of this deployment (name prefix), and its runs' training plans."""
        stack = Stack.of(self)
        job_arn = stack.format_arn(
            service="sagemaker",
            resource="training-job",
            resource_name=f"{training_job_name_prefix(config.job_prefix)}*",
        )
        plan_arn = stack.format_arn(service="sagemaker", resource="training-plan", resource_name="*")
        policy = self._policy(
            "SageMakerTrainingJobs",
            control,
            [
                iam.PolicyStatement(
                    sid="TrainingJobsOfThisDeployment",
                    actions=list(SAGEMAKER_JOB_ACTIONS),
                    resources=[job_arn],
                ),
                # a run on a Training Plan: its windows (domain/capacity/training_plans.py)
                iam.PolicyStatement(
                    sid="ReadTrainingPlans",
                    actions=list(TRAINING_PLAN_ACTIONS),
                    resources=[plan_arn],
                ),
            ],
        )
        acknowledge(
            policy,
            "AwsSolutions-IAM5",
            f"Scoped to the training jobs this deployment names ('{config.job_prefix}-' prefix); "
            "job names are generated per attempt, so they cannot be listed in advance.",
            findings=[resource_finding(self, job_arn)],
        )
        acknowledge(
            policy,
            "AwsSolutions-IAM5",
            "DescribeTrainingPlan on this account's training plans: a run names its plan in its "
            "request (ResourceConfig.TrainingPlanArn), so the plans cannot be listed in advance; "
            "read-only (AWS's own AmazonSageMakerTrainingPlanCreateAccess grants it on training-plan/*).",
            findings=[resource_finding(self, plan_arn)],
        )
        return policy

    def _grant_pass_role(
        self, config: SupervisorConfig, control: Sequence[SupervisorFunction]
    ) -> iam.Policy | None:
        """iam:PassRole, only to SageMaker, only for the allow-listed roles (None: no role allowed)."""
        if not config.allowed_role_arns:
            return None
        return self._policy(
            "PassTrainingRoles",
            control,
            [
                iam.PolicyStatement(
                    sid="PassAllowListedTrainingRolesToSageMaker",
                    actions=["iam:PassRole"],
                    resources=list(config.allowed_role_arns),
                    conditions={"StringEquals": {"iam:PassedToService": SAGEMAKER_SERVICE}},
                )
            ],
        )

    def _checkpoint_arns(self, config: SupervisorConfig) -> tuple[list[str], list[str]]:
        """(The checkpoint buckets' ARNs, their objects' ARNs); every bucket when none is named."""
        buckets = list(config.checkpoint_buckets) or ["*"]
        bucket_arns = [self._bucket_arn(b) for b in buckets]
        return bucket_arns, [f"{arn}/*" for arn in bucket_arns]

    def _grant_checkpoint_discovery(
        self,
        config: SupervisorConfig,
        control: Sequence[SupervisorFunction],
        bucket_arns: list[str],
        object_arns: list[str],
    ) -> iam.Policy:
        """S3 checkpoint discovery: list the prefixes, read the markers (and decrypt them)."""
        checkpoint_statements = [
            iam.PolicyStatement(
                sid="ListCheckpointPrefixes",
                actions=list(CHECKPOINT_BUCKET_ACTIONS),
                resources=bucket_arns,
            ),
            iam.PolicyStatement(
                sid="ReadCheckpointMarkers",
                actions=list(CHECKPOINT_OBJECT_ACTIONS),
                resources=object_arns,
            ),
        ]
        if config.checkpoint_kms_key_arns:
            # SSE-KMS checkpoint buckets: decrypt with the named keys, and only through S3.
            checkpoint_statements.append(
                iam.PolicyStatement(
                    sid="DecryptCheckpointObjectsThroughS3",
                    actions=list(CHECKPOINT_KEY_ACTIONS),
                    resources=list(config.checkpoint_kms_key_arns),
                    conditions={"StringLike": {"kms:ViaService": S3_VIA_SERVICE}},
                )
            )
        policy = self._policy("CheckpointDiscovery", control, checkpoint_statements)
        if config.checkpoint_buckets:
            acknowledge(
                policy,
                "AwsSolutions-IAM5",
                "Read-only access to objects of the configured checkpoint buckets: checkpoint "
                "directories (checkpoint-<step>/, iter_<n>/, .metadata) are discovered by prefix.",
                findings=[resource_finding(self, arn) for arn in object_arns],
            )
        else:
            acknowledge(
                policy,
                "AwsSolutions-IAM5",
                "checkpointBuckets is empty, which the deployer chose to mean 'checkpoints may be "
                "in any bucket': read-only List/Get on all buckets for checkpoint discovery. Set "
                "-c checkpointBuckets=<names> to narrow it.",
                findings=[resource_finding(self, arn) for arn in bucket_arns + object_arns],
            )
        return policy

    def _grant_checkpoint_retention(
        self,
        config: SupervisorConfig,
        sweep: SupervisorFunction,
        bucket_arns: list[str],
        object_arns: list[str],
    ) -> iam.Policy | None:
        """Checkpoint retention (opt-in; the sweep alone): move retired checkpoints to the archive."""
        if not config.checkpoint_retention:
            return None
        retention_statements = [
            iam.PolicyStatement(
                sid="MoveRetiredCheckpoints",
                actions=list(RETENTION_OBJECT_ACTIONS),
                resources=object_arns,
            ),
            iam.PolicyStatement(
                sid="FindOpenArchiveCopies",
                actions=list(RETENTION_BUCKET_ACTIONS),
                resources=bucket_arns,
            ),
        ]
        if config.checkpoint_kms_key_arns:
            retention_statements.append(
                iam.PolicyStatement(
                    sid="EncryptArchivedCheckpointsThroughS3",
                    actions=list(RETENTION_KEY_ACTIONS),
                    resources=list(config.checkpoint_kms_key_arns),
                    conditions={"StringLike": {"kms:ViaService": S3_VIA_SERVICE}},
                )
            )
        policy = self._policy("CheckpointRetention", (sweep,), retention_statements)
        acknowledge(
            policy,
            "AwsSolutions-IAM5",
            "Checkpoint retention (opt-in, checkpointRetention=true): the sweep moves complete "
            "checkpoint directories older than the ones a run keeps out of its synced prefix "
            "(copy to the archive prefix, then delete), found by prefix"
            + ("" if config.checkpoint_buckets else "; checkpointBuckets is empty, so in any bucket")
            + ".",
            findings=[resource_finding(self, arn) for arn in object_arns],
        )
        return policy

    def _grant_versioning_read(
        self, config: SupervisorConfig, api: SupervisorFunction, bucket_arns: list[str]
    ) -> iam.Policy | None:
        """With checkpoint retention: the API reads a checkpoint bucket's versioning at submit."""
        if not config.checkpoint_retention:
            return None
        return self._policy(
            "CheckpointBucketVersioning",
            (api,),
            [
                iam.PolicyStatement(
                    sid="ReadCheckpointBucketVersioning",
                    actions=list(VERSIONING_READ_ACTIONS),
                    resources=bucket_arns,
                )
            ],
        )

    def _grant_hang_alarms(
        self, config: SupervisorConfig, control: Sequence[SupervisorFunction]
    ) -> iam.Policy:
        """Hang alarms: create, tag and delete by name prefix; list on alarm:* (read-only)."""
        stack = Stack.of(self)
        alarm_arn = stack.format_arn(
            service="cloudwatch",
            resource="alarm",
            resource_name=f"{keys.alarm_prefix(config.job_prefix)}*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        all_alarms_arn = stack.format_arn(
            service="cloudwatch",
            resource="alarm",
            resource_name="*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        policy = self._policy(
            "HangAlarms",
            control,
            [
                iam.PolicyStatement(
                    sid="SupervisorAlarmsOnly", actions=list(ALARM_ACTIONS), resources=[alarm_arn]
                ),
                iam.PolicyStatement(
                    sid="ListAlarmsByPrefix", actions=list(ALARM_LIST_ACTIONS), resources=[all_alarms_arn]
                ),
            ],
        )
        acknowledge(
            policy,
            "AwsSolutions-IAM5",
            f"Create, tag and delete are scoped to alarms named '{keys.alarm_prefix(config.job_prefix)}*' "
            "(one set of hang alarms per running attempt, named after it). cloudwatch:DescribeAlarms "
            "alone is on alarm:* of this account and region: AWS authorises DescribeAlarms with "
            "AlarmNamePrefix against alarm:*, so a prefix-scoped grant is denied; it is read-only "
            "and the function filters by the prefix itself.",
            findings=[resource_finding(self, alarm_arn), resource_finding(self, all_alarms_arn)],
        )
        return policy

    def _grant_training_logs(self, evidence: Sequence[SupervisorFunction]) -> iam.Policy:
        """Evidence: read the SageMaker training log group and its streams."""
        log_group_arn = training_log_group_arn(self)
        policy = self._policy(
            "TrainingLogsRead",
            evidence,
            [
                iam.PolicyStatement(
                    sid="ReadTrainingJobLogs",
                    actions=list(LOG_READ_ACTIONS),
                    resources=[training_log_group_arn(self, with_wildcard=False), log_group_arn],
                )
            ],
        )
        acknowledge(
            policy,
            "AwsSolutions-IAM5",
            "Read-only on the one SageMaker training log group and its streams; the trailing ':*' "
            "is the log-group ARN form that stream-level reads are authorised against.",
            findings=[resource_finding(self, log_group_arn)],
        )
        return policy

    def _grant_quota_reads(self, api: SupervisorFunction) -> iam.Policy:
        """The API's submit-time quota check: list the SageMaker quotas."""
        policy = self._policy(
            "SageMakerQuotasRead",
            (api,),
            [
                iam.PolicyStatement(
                    sid="ListSageMakerQuotas", actions=list(QUOTA_READ_ACTIONS), resources=["*"]
                )
            ],
        )
        acknowledge(
            policy,
            "AwsSolutions-IAM5",
            "servicequotas:ListServiceQuotas and ListAWSDefaultServiceQuotas support no resource-level "
            "permissions; they are read-only, and only the API calls them (the submit-time quota check).",
            findings=["Resource::*"],
        )
        return policy

    def _grant_metric_reads(self, evidence: Sequence[SupervisorFunction]) -> iam.Policy:
        """Evidence: read metric data (host and activity metrics)."""
        policy = self._policy(
            "MetricDataRead",
            evidence,
            [iam.PolicyStatement(sid="GetMetricData", actions=["cloudwatch:GetMetricData"], resources=["*"])],
        )
        acknowledge(
            policy,
            "AwsSolutions-IAM5",
            "cloudwatch:GetMetricData supports no resource-level permissions; it is read-only.",
            findings=["Resource::*"],
        )
        return policy

    def _policy(
        self,
        construct_id: str,
        functions: Sequence[SupervisorFunction],
        statements: list[iam.PolicyStatement],
    ) -> iam.Policy:
        policy = iam.Policy(self, construct_id, statements=statements, roles=[f.role for f in functions])
        for fn in functions:
            # The function must not run before its permissions exist (e.g. the first sweep tick).
            fn.function.node.add_dependency(policy)
        return policy

    def _bucket_arn(self, bucket: str) -> str:
        return Stack.of(self).format_arn(service="s3", region="", account="", resource=bucket)
