"""`LocalAccount`: moto for DynamoDB, S3, SNS, SQS, CloudWatch and Logs, the simulated SageMaker, a
virtual clock, and delivery through the synthesized template's rules and routes.

Why: docs/drill.md (*The account*)."""

from __future__ import annotations

import contextlib
import heapq
import json
import os
import random
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import boto3
from moto import mock_aws

from drill.account.backend_clients import (
    BackendAlarmReads,
    BackendS3Reads,
    BackendS3Writes,
    BackendSnsPublish,
)
from drill.account.deploy import run_alarm_shape_check
from drill.account.deployment import (
    create_table_from_template,
    template_checkpoint_retention,
    template_log_subscription,
    template_read_scope,
)
from drill.account.invocation import spent_ms
from drill.account.memory_store import InMemoryRunStore
from drill.account.router import LambdaContext, TemplateRouter
from drill.alarms.metric_delay import MetricDelays
from drill.clock import VirtualClock, moto_cloudwatch_follow, moto_logs_follow, moto_s3_follow
from drill.iam import IamReplayError
from drill.iam.recorder import CallRecorder
from drill.iam.replay import ReplayReport, account_iam, check
from drill.sim.cloudwatch import FlushOnReadLogs, SimulatedCloudWatch, SimulatedLogs
from drill.sim.dynamodb_limits import enforce_transaction_limits
from drill.sim.model import StartupTimes
from drill.sim.quotas import SimServiceQuotas
from drill.sim.rate_limits import DEFAULT_RATES, DEFAULT_RETRY_WAIT_S, RateLimits
from drill.sim.read_after_create import DEFAULT_WINDOW_S, ReadAfterCreate
from drill.sim.sagemaker import SimSageMaker
from drill.sim.warm_pools import WarmPoolSettings
from sagewarden import composition, keys
from sagewarden.adapters.cloudwatch_hang_alarms import CloudWatchHangAlarms
from sagewarden.adapters.cloudwatch_logs_reader import CloudWatchLogsReader
from sagewarden.adapters.cloudwatch_metrics_reader import CloudWatchMetricsReader
from sagewarden.adapters.dynamodb_run_store import DynamoDbRunStore
from sagewarden.adapters.s3_bucket_versioning import S3BucketVersioning
from sagewarden.adapters.s3_checkpoint_finder import S3CheckpointFinder
from sagewarden.adapters.s3_checkpoint_retirer import S3CheckpointRetirer
from sagewarden.adapters.sagemaker_launcher import SageMakerLauncher
from sagewarden.adapters.service_quotas_reader import ServiceQuotasReader
from sagewarden.adapters.sns_notifier import SnsNotifier
from sagewarden.domain.vocabulary.actions import Notify
from sagewarden.domain.vocabulary.policy import RunPolicy
from sagewarden.ids import ulid
from sagewarden.settings import SupervisorSettings
from sagewarden.usecases.supervisor import Supervisor

REGION = "us-east-1"
ACCOUNT = "123456789012"
TABLE = "sagewarden-local"
BUCKET = "sagewarden-drill"
EXECUTION_ROLE = f"arn:aws:iam::{ACCOUNT}:role/SageMakerTrainingRole"
CALLER = f"arn:aws:iam::{ACCOUNT}:role/ml-engineer"
ALARM_PREFIX = keys.DEFAULT_ALARM_PREFIX
STACK_NAME = "Sagewarden"  # infra.constants.STACK_ID: the stack the drill's template describes
STACK_ID = (
    f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{STACK_NAME}/00000000-0000-4000-8000-000000000001"
)
# The deployment this account represents (CDK context): its template is what the IAM replay
# checks the supervisor's calls against. ``drill_template()`` synthesizes it (cached on disk).
DEPLOY_CONTEXT: dict[str, Any] = {
    "allowedRoleArns": [EXECUTION_ROLE],
    "checkpointBuckets": [BUCKET],
    "checkpointRetention": True,  # runs may ask for checkpoint_keep (the sweep may move checkpoints)
}


def drill_template(*, log_subscription: bool = True) -> dict[str, Any]:
    """The template synthesized with :data:`DEPLOY_CONTEXT` (what the drill and tests run on);
    ``log_subscription=False``: the deployment without the log subscription
    (``-c logSubscription=false``)."""
    from infra.template import synthesized_template

    context = DEPLOY_CONTEXT if log_subscription else {**DEPLOY_CONTEXT, "logSubscription": False}
    return synthesized_template(context=context)


def template_for(template: dict[str, Any], *, log_subscription: bool) -> dict[str, Any]:
    """`template` when it deploys the log subscription as asked, else the drill's template that
    does (a scenario's ``account.log_subscription`` picks the deployment it runs on)."""
    if template_log_subscription(template) == log_subscription:
        return template
    return drill_template(log_subscription=log_subscription)


@dataclass(frozen=True)
class Delivery:
    """How the simulated EventBridge delivers: at least once, unordered, late."""

    min_delay_s: float = 1.0
    max_delay_s: float = 20.0
    duplicate_rate: float = 0.0
    drop_rate: float = 0.0  # best-effort events that never arrive (the sweep must catch up)


@dataclass
class MemoryCounters:
    """The supervisor's operational counters (CloudWatch metrics in a real deployment)."""

    values: dict[str, float] = field(default_factory=dict)
    samples: list[tuple[str, str, float]] = field(default_factory=list)  # (name, dimension value, value)

    def add(
        self, name: str, value: float = 1.0, *, dimension: tuple[str, str] | None = None, unit: str = "Count"
    ) -> None:
        self.values[name] = self.values.get(name, 0.0) + value
        if dimension is not None or unit != "Count":
            self.samples.append((name, dimension[1] if dimension else "", value))


@dataclass
class RecordingNotifier:
    inner: SnsNotifier
    clock: VirtualClock
    sent: list[tuple[int, Notify]] = field(default_factory=list)

    def publish(self, message: Notify) -> None:
        self.inner.publish(message)
        self.sent.append((self.clock.now_ms, message))


class LocalAccount:
    """Owns the moto mock, the simulated SageMaker and the supervisor wired to them."""

    def __init__(
        self,
        template: Mapping[str, Any],
        *,
        seed: int = 0,
        start_ms: int | None = None,
        quotas: Mapping[str, int] | None = None,
        total_instance_quota: int | None = None,
        # managed spot training's own quotas (a spot job counts against these only)
        spot_quotas: Mapping[str, int] | None = None,
        total_spot_instance_quota: int | None = None,
        startup: StartupTimes | None = None,
        warm_pools: WarmPoolSettings | None = None,
        delivery: Delivery | None = None,
        timestamp_form: str = "millis",
        policy_defaults: Mapping[str, Any] | None = None,
        reconcile_interval_min: float = 10.0,
        store: str = "dynamodb",
        # periodic progress lines written to CloudWatch Logs: one per host this often (600 s thins
        # them; None = 600 s where a log subscription feeds the heartbeat metric, else 60 s: the
        # logs are then the only record of the job's cadence and must carry it -- also where the
        # heartbeat has outages, when the supervisor reads the cadence from the logs)
        progress_log_interval_s: int | None = None,
        # stretches of virtual minutes from the start, (from, until or None: never heals), in which
        # the heartbeat pipeline delivers nothing for any job (drill/sim/reads.py heartbeat_out)
        heartbeat_outages: Sequence[tuple[float, float | None]] = (),
        log_flush_interval_s: int = 86_400,  # reads flush first (FlushOnReadLogs), so rarely needed
        logs: str = "moto",  # "simulated": log reads answered by the simulator (SimulatedLogs)
        iam_replay: bool = True,  # record the supervisor's AWS calls; check them on close (drill/iam)
        # large drills: DescribeAlarms and checkpoint listings read moto's in-memory state directly
        # (BackendAlarmReads, BackendS3Reads), paged like AWS, without moto's serializer and scans;
        # hang alarms are put, alerts published and the simulator's checkpoint objects written the
        # same way (drill/account/backend_clients.py), and the topic has no SQS inbox (read notifier.sent)
        backend_reads: bool = False,
        # Service Quotas as the supervisor reads it (the submit-time quota check): "simulated"
        # lists the simulated SageMaker's quotas; "denied" answers AccessDeniedException (unknown)
        service_quotas: str = "simulated",
        # when each metric datapoint and log line becomes visible (drill/alarms/metric_delay.py): a
        # scenario's ``account.metric_delay`` (per source), a MetricDelays, or None for the
        # defaults (late by up to 3 minutes); ``MetricDelays.none()`` is the kind model
        metric_delay: Mapping[str, Any] | MetricDelays | None = None,
        # the account's API rate limits (drill/sim/rate_limits.py): calls per second per operation over
        # the documented defaults (None for an operation: not limited), and how long botocore's
        # retries wait for a throttled call's slot before it fails
        api_rates: Mapping[str, float | None] | None = None,
        api_retry_wait_s: float = DEFAULT_RETRY_WAIT_S,
        # a job just created is not visible to DescribeTrainingJob (and Stop/Update) for a delay
        # drawn per job in this range, seconds (drill/sim/read_after_create.py); (0, 0): at once
        describe_after_create_s: tuple[float, float] = DEFAULT_WINDOW_S,
    ) -> None:
        self._api_rates = {**DEFAULT_RATES, **dict(api_rates or {})}
        self._api_retry_wait_s = api_retry_wait_s
        self._describe_after_create_s = describe_after_create_s
        self._backend_reads = backend_reads
        self.metric_delays = (
            metric_delay
            if isinstance(metric_delay, MetricDelays)
            else MetricDelays.from_dict(metric_delay, seed=seed)
        )
        if service_quotas not in ("simulated", "denied"):
            raise ValueError("service_quotas must be 'simulated' or 'denied'")
        self._service_quotas = service_quotas
        if logs not in ("moto", "simulated"):
            raise ValueError("logs must be 'moto' or 'simulated'")
        self._logs_kind = logs
        self._iam_replay = iam_replay
        self._iam_report_taken = False
        self._progress_log_interval_s = progress_log_interval_s
        self._heartbeat_outages = list(heartbeat_outages)
        self._log_flush_interval_s = log_flush_interval_s
        if store not in ("dynamodb", "memory"):
            raise ValueError("store must be 'dynamodb' (moto) or 'memory'")
        self._store_kind = store
        self.template = template
        self.router = TemplateRouter(template)
        self.clock = VirtualClock(start_ms) if start_ms is not None else VirtualClock()
        self.rng = random.Random(seed)
        self.delivery = delivery or Delivery()
        self._pending: list[tuple[int, int, dict[str, Any]]] = []
        self._seq = 0
        self.delivered: list[tuple[int, dict[str, Any], list[str]]] = []
        self._mock = mock_aws()
        self._env_backup: dict[str, str | None] = {}
        self._seed = seed
        self._quotas = dict(quotas or {})
        self._total_quota = total_instance_quota
        self._spot_quotas = dict(spot_quotas or {})
        self._total_spot_quota = total_spot_instance_quota
        self._startup = startup
        self._warm_pools = warm_pools
        self._timestamp_form = timestamp_form
        self._policy_defaults = dict(policy_defaults or {})
        self._reconcile_ms = int(reconcile_interval_min * 60_000)
        self._due_cache: tuple[int | None] | None = None
        self.alarm_shapes: Any = None  # the alarm-shape check's answer at "deploy" (drill/account/deploy.py)
        self._last_sweep_ms = -1

    # -- lifecycle -----------------------------------------------------------------------------
    def __enter__(self) -> LocalAccount:
        env = {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": REGION,
            "POWERTOOLS_TRACE_DISABLED": "1",
            "POWERTOOLS_METRICS_NAMESPACE": "Sagewarden",
            "POWERTOOLS_LOG_LEVEL": os.environ.get("POWERTOOLS_LOG_LEVEL", "ERROR"),
            "POWERTOOLS_DEV": "0",
            "POWERTOOLS_METRICS_DISABLED": "true",
            keys.ENV_TABLE_NAME: TABLE,
            keys.ENV_JOB_PREFIX: keys.DEFAULT_JOB_PREFIX,
            keys.ENV_ALARM_PREFIX: ALARM_PREFIX,
            keys.ENV_ALLOWED_ROLE_ARNS: json.dumps([EXECUTION_ROLE]),
            keys.ENV_POLICY_DEFAULTS: json.dumps(self._policy_defaults),
        }
        for k, v in env.items():
            self._env_backup[k] = os.environ.get(k)
            os.environ[k] = v
        self._mock.start()
        self._clock_patches = contextlib.ExitStack()
        self._clock_patches.enter_context(moto_logs_follow(self.clock))
        self._clock_patches.enter_context(moto_s3_follow(self.clock))
        self._clock_patches.enter_context(moto_cloudwatch_follow(self.clock))
        # DynamoDB refuses a transaction over 4 MB, which moto accepts (drill/sim/dynamodb_limits.py)
        self.ddb = enforce_transaction_limits(boto3.client("dynamodb", region_name=REGION))
        self.s3 = boto3.client("s3", region_name=REGION)
        self.sns = boto3.client("sns", region_name=REGION)
        self.sqs = boto3.client("sqs", region_name=REGION)
        self.cloudwatch = boto3.client("cloudwatch", region_name=REGION)
        self.logs = boto3.client("logs", region_name=REGION)
        # The simulator writes checkpoints and training logs with clients of its own: those
        # writes are SageMaker's, not the supervisor's, and must not be recorded as its calls.
        sim_s3 = boto3.client("s3", region_name=REGION)
        sim_logs = boto3.client("logs", region_name=REGION)
        create_table_from_template(self.ddb, self.template, TABLE)
        self.s3.create_bucket(Bucket=BUCKET)
        self.topic_arn = self.sns.create_topic(Name="sagewarden-alerts")["TopicArn"]
        self.alert_queue_url: str | None = None
        if not self._backend_reads:  # large drills read alerts from the notifier's record: moto's
            # SQS recounts the whole queue on every message, quadratic over a 1,000-run day
            queue_url = self.sqs.create_queue(QueueName="alerts-inbox")["QueueUrl"]
            queue_arn = self.sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
                "Attributes"
            ]["QueueArn"]
            self.sns.subscribe(TopicArn=self.topic_arn, Protocol="sqs", Endpoint=queue_arn)
            self.alert_queue_url = queue_url
        os.environ[keys.ENV_TOPIC_ARN] = self.topic_arn
        # --- IAM replay: the clients handed to the supervisor's adapters record its calls ---
        self.iam, facts = account_iam(
            self.template, region=REGION, account=ACCOUNT, table=TABLE, topic_arn=self.topic_arn
        )
        self.recorder = CallRecorder(facts, enabled=self._iam_replay)
        # the supervisor's calls are throttled at the account's rates (the recorder sees exactly them)
        self.rate_limits = RateLimits(lambda: self.clock.now_ms, self._api_rates, self._api_retry_wait_s)
        self.recorder.gates.append(self.rate_limits.admit)
        for client in (self.ddb, self.s3, self.sns, self.cloudwatch, self.logs):
            self.recorder.attach(client)
        # ---
        checkpoint_client, sim_s3 = self._checkpoint_clients(sim_s3)
        # what the template deploys decides what is watched: without the log subscription no
        # heartbeat metric exists and the sweep judges log silence itself
        self.log_subscription = template_log_subscription(self.template)
        if self._progress_log_interval_s is None:
            self._progress_log_interval_s = (
                600 if self.log_subscription and not self._heartbeat_outages else 60
            )
        self.sagemaker = SimSageMaker(
            self.clock,
            s3_client=sim_s3,
            logs_client=sim_logs if self._logs_kind == "moto" else None,
            account_id=ACCOUNT,
            region=REGION,
            quotas=self._quotas,
            total_instance_quota=self._total_quota,
            spot_quotas=self._spot_quotas,
            total_spot_instance_quota=self._total_spot_quota,
            startup=self._startup,
            seed=self._seed,
            emit=self._on_emit,
            timestamp_form=self._timestamp_form,
            progress_log_interval_s=self._progress_log_interval_s,
            log_flush_interval_s=self._log_flush_interval_s,
            heartbeat_metric=self.log_subscription,
            warm_pools=self._warm_pools,
        )
        start = self.clock.now_ms
        self.sagemaker.heartbeat_outages = [
            (start + int(lo * 60_000), None if hi is None else start + int(hi * 60_000))
            for lo, hi in self._heartbeat_outages
        ]
        # a training job's log lines reach CloudWatch Logs late, as the account's model says
        self.sagemaker.logs.arrival = self.metric_delays
        # what the supervisor's SageMaker client sees: a new job only after a short delay
        self.sagemaker_view = ReadAfterCreate(self.sagemaker, self._describe_after_create_s, seed=self._seed)
        self.notifier = RecordingNotifier(SnsNotifier(self._sns_client(), self.topic_arn), self.clock)
        self.service_quotas = SimServiceQuotas(
            self.sagemaker, region=REGION, account=ACCOUNT, denied=self._service_quotas == "denied"
        )
        quotas_client = self.service_quotas.attach(boto3.client("service-quotas", region_name=REGION))
        self.recorder.attach(quotas_client)
        id_rng = random.Random(self._seed * 7919 + 1)
        self.counters = MemoryCounters()
        retention = template_checkpoint_retention(self.template)
        self.supervisor = Supervisor(
            store=DynamoDbRunStore(self.ddb, TABLE) if self._store_kind == "dynamodb" else InMemoryRunStore(),
            launcher=(sagemaker := SageMakerLauncher(self.recorder.wrap(self.sagemaker_view, "sagemaker"))),
            plans=sagemaker,
            checkpoints=S3CheckpointFinder(checkpoint_client),
            notifier=self.notifier,
            alarms=CloudWatchHangAlarms(self._alarms_client(), ALARM_PREFIX),
            logs=CloudWatchLogsReader(
                FlushOnReadLogs(self.logs, self.sagemaker)
                if self._logs_kind == "moto"
                else self.recorder.wrap(SimulatedLogs(self.sagemaker), "logs"),
                # virtual seconds: reads take no virtual time but what throttling makes them wait
                # (drill/account/invocation.py), and a read is reused only within the same virtual
                # half-minute, as in an account (not across a fast drill's hours)
                clock=lambda: (self.clock.now_ms + spent_ms()) / 1000,
            ),
            metrics=CloudWatchMetricsReader(
                self.recorder.wrap(
                    SimulatedCloudWatch(self.cloudwatch, self.sagemaker, self.metric_delays, self.clock),
                    "cloudwatch",
                )
            ),
            quotas=ServiceQuotasReader(quotas_client, clock=lambda: self.clock.now_ms / 1000),
            # virtual seconds: a pass is cut by its object bound, never by the host's speed
            retirer=S3CheckpointRetirer(checkpoint_client, clock=lambda: self.clock.now_ms / 1000)
            if retention
            else None,
            versioning=S3BucketVersioning(checkpoint_client) if retention else None,
            counters=self.counters,
            clock=lambda: self.clock.now_ms,
            new_id=lambda: ulid(self.clock.now_ms, id_rng.randbytes(10)),
            settings=SupervisorSettings(
                job_prefix=keys.DEFAULT_JOB_PREFIX,
                policy_defaults=RunPolicy.from_dict(self._policy_defaults),
                reconcile_interval_ms=self._reconcile_ms,
                log_silence_fallback=not self.log_subscription,
                checkpoint_retention=retention,
                region=REGION,
                read_scope=template_read_scope(self.template),
            ),
        )
        composition.use(self.supervisor)
        try:
            # the deploy's custom resources run (drill/account/deploy.py): the alarm-shape check's calls
            # are recorded as its function's, for the IAM replay
            self.alarm_shapes = run_alarm_shape_check(
                self.template, self.cloudwatch, stack_id=STACK_ID, now_ms=lambda: self.clock.now_ms
            )
        except BaseException:
            self.__exit__(*sys.exc_info())
            raise
        return self

    def _alarms_client(self) -> Any:
        """The hang-alarm adapter's client: moto's, or with DescribeAlarms served from its backend
        (paged like CloudWatch, without moto's serializer: see BackendAlarmReads)."""
        if not self._backend_reads:
            return self.cloudwatch
        from moto.cloudwatch.models import cloudwatch_backends
        from moto.core import DEFAULT_ACCOUNT_ID

        backend = cloudwatch_backends[os.environ.get("MOTO_ACCOUNT_ID", DEFAULT_ACCOUNT_ID)][REGION]
        return BackendAlarmReads(
            self.cloudwatch, backend, lambda op, params: self.recorder.record("cloudwatch", op, params)
        )

    def _sns_client(self) -> Any:
        """The notifier's SNS client: moto's, or (``backend_reads``) Publish into its backend."""
        if not self._backend_reads:
            return self.sns
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.sns.models import sns_backends

        backend = sns_backends[os.environ.get("MOTO_ACCOUNT_ID", DEFAULT_ACCOUNT_ID)][REGION]
        return BackendSnsPublish(
            self.sns, backend, lambda op, params: self.recorder.record("sns", op, params)
        )

    def _checkpoint_clients(self, sim_s3: Any) -> tuple[Any, Any]:
        """(The checkpoint finder's S3 client, the simulator's): moto's, or (``backend_reads``)
        listings and heads from a sorted index of moto's keys, and the simulator's checkpoint
        objects written straight into moto's buckets and that index."""
        if not self._backend_reads:
            return self.s3, sim_s3
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        backend = s3_backends[os.environ.get("MOTO_ACCOUNT_ID", DEFAULT_ACCOUNT_ID)]["global"]
        reads = BackendS3Reads(self.s3, backend, lambda op, params: self.recorder.record("s3", op, params))
        reads.watch(sim_s3)
        reads.watch(self.s3)
        return reads, BackendS3Writes(sim_s3, backend, reads)

    def __exit__(self, exc_type: object, *exc: object) -> None:
        report = None
        if self._iam_replay and not self._iam_report_taken and exc_type is None:
            report = self.iam_report()
        composition.use(None)
        self._clock_patches.close()
        self._mock.stop()
        for k, v in self._env_backup.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if report is not None and report.findings:
            raise IamReplayError("\n".join([report.summary(), *report.failures()]))

    # -- IAM replay (drill/iam) ----------------------------------------------------------------
    def iam_report(self) -> ReplayReport:
        """Every AWS call the supervisor's functions made so far, checked against the template's
        IAM policies (denied, unknown and unmapped calls are ``report.findings``)."""
        return check(self.recorder, self.iam)

    def take_iam_report(self) -> ReplayReport:
        """:meth:`iam_report`, for a caller that reports the findings itself (closing the account
        then no longer raises :class:`~drill.iam.IamReplayError` for them)."""
        self._iam_report_taken = True
        return self.iam_report()

    # -- EventBridge ---------------------------------------------------------------------------
    def _on_emit(self, event: dict[str, Any]) -> None:
        d = self.delivery
        if d.drop_rate and self.rng.random() < d.drop_rate:
            return
        copies = 2 if d.duplicate_rate and self.rng.random() < d.duplicate_rate else 1
        for _ in range(copies):
            delay_ms = int(self.rng.uniform(d.min_delay_s, d.max_delay_s) * 1000)
            self._seq += 1
            heapq.heappush(self._pending, (self.clock.now_ms + delay_ms, self._seq, event))

    def publish_event(self, event: dict[str, Any]) -> None:
        """Put an event on the simulated bus now (e.g. an alarm state change)."""
        self._on_emit(event)

    def next_delivery_ms(self) -> int | None:
        return self._pending[0][0] if self._pending else None

    def deliver_due(self) -> int:
        count = 0
        while self._pending and self._pending[0][0] <= self.clock.now_ms:
            _, _, event = heapq.heappop(self._pending)
            routed = self.router.deliver(event)
            self.mark_dirty()
            self.delivered.append((self.clock.now_ms, event, [h for h, _ in routed]))
            count += 1
        return count

    # -- API -----------------------------------------------------------------------------------
    def api(self, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        kwargs.setdefault("caller_arn", CALLER)
        self.mark_dirty()
        return self.router.call_api(method, path, **kwargs)

    # -- sweep ---------------------------------------------------------------------------------
    def mark_dirty(self) -> None:
        self._due_cache = None

    def next_sweep_ms(self, alarms_in_alarm: bool | None = None) -> int | None:
        """The next minute boundary at which the every-minute sweep would have work: a run or an
        owed alert due, or a hang alarm in ALARM (the sweep reads alarm *states* every pass, so
        an ALARM whose event was dropped or ignored is still acted on). A sweep with none of these
        is a no-op, so the drill skips it.

        The due index only changes when a handler runs, so that part is cached until then.
        ``alarms_in_alarm``: the alarm evaluator's answer (it keeps the ALARM set as it evaluates),
        instead of a scan of every alarm at every step.
        """
        minute = 60_000
        if self._due_cache is None:
            self._due_cache = (self._earliest_due(),)
        candidates = [] if self._due_cache[0] is None else [-(-self._due_cache[0] // minute) * minute]
        in_alarm = self._any_alarm_in_alarm() if alarms_in_alarm is None else alarms_in_alarm
        if in_alarm:
            candidates.append(-(-(self._last_sweep_ms + 1) // minute) * minute)
        if not candidates:
            return None
        return max(self.clock.now_ms, min(candidates))

    def _any_alarm_in_alarm(self) -> bool:
        try:
            from moto.cloudwatch.models import cloudwatch_backends
            from moto.core import DEFAULT_ACCOUNT_ID

            backend = cloudwatch_backends[os.environ.get("MOTO_ACCOUNT_ID", DEFAULT_ACCOUNT_ID)][REGION]
        except Exception:  # pragma: no cover - not a moto account
            return False
        return any(
            name.startswith(ALARM_PREFIX) and getattr(alarm, "state_value", "") == "ALARM"
            for name, alarm in backend.alarms.items()
        )

    def _earliest_due(self) -> int | None:
        store = self.supervisor.store
        if isinstance(store, InMemoryRunStore):
            return store.earliest_due()
        earliest = None
        for shard in range(keys.DUE_SHARDS):
            resp = self.ddb.query(
                TableName=TABLE,
                IndexName=keys.GSI_DUE,
                Limit=1,
                KeyConditionExpression="#s = :s",
                ExpressionAttributeNames={"#s": keys.GSI_DUE_PK},
                ExpressionAttributeValues={":s": {"S": str(shard)}},
            )
            for item in resp["Items"]:
                due = int(item[keys.GSI_DUE_SK]["N"])
                earliest = due if earliest is None else min(earliest, due)
        return earliest

    def run_sweep(self) -> Any:
        schedule = self.router.scheduled_handlers()
        if not schedule:
            raise AssertionError("the template schedules no sweep")
        results = []
        self.mark_dirty()
        self._last_sweep_ms = self.clock.now_ms
        for _, handler in schedule:
            results.append(
                self.router.handler(handler)(
                    {
                        "source": "aws.events",
                        "detail-type": "Scheduled Event",
                        "time": self.clock.now().isoformat(),
                        "detail": {},
                    },
                    LambdaContext(handler),
                )
            )
        return results

    def alerts_received(self) -> list[dict[str, Any]]:
        """Messages that reached the SNS topic's SQS subscriber (what e-mail subscribers get)."""
        if self.alert_queue_url is None:
            raise RuntimeError("backend_reads drills keep no alert inbox: read notifier.sent")
        out: list[dict[str, Any]] = []
        while True:
            resp = self.sqs.receive_message(QueueUrl=self.alert_queue_url, MaxNumberOfMessages=10)
            msgs = resp.get("Messages", [])
            if not msgs:
                return out
            for m in msgs:
                out.append(json.loads(m["Body"]))
                self.sqs.delete_message(QueueUrl=self.alert_queue_url, ReceiptHandle=m["ReceiptHandle"])
