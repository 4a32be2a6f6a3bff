"""The one place that reads the environment and builds clients and adapters (once per container)."""

from __future__ import annotations

import json
import os
import time
from functools import lru_cache
from typing import Any

from sagewarden import keys
from sagewarden.domain.vocabulary.policy import RunPolicy
from sagewarden.ids import ulid_factory
from sagewarden.settings import SupervisorSettings
from sagewarden.usecases.supervisor import Supervisor


@lru_cache(maxsize=1)
def _boto_config() -> Any:
    from botocore.config import Config

    # SageMaker's control-plane throttling is per account and not adjustable: adaptive retries
    return Config(retries={"mode": "adaptive", "max_attempts": 8}, connect_timeout=5, read_timeout=20)


def allowed_role_arns() -> frozenset[str]:
    return frozenset(json.loads(os.environ.get(keys.ENV_ALLOWED_ROLE_ARNS, "[]") or "[]"))


def admin_role_arns() -> tuple[str, ...]:
    """Who may cancel and resume any run, besides its owner (`domain.ownership`)."""
    return tuple(json.loads(os.environ.get(keys.ENV_ADMIN_ROLE_ARNS, "[]") or "[]"))


def job_prefix() -> str:
    return os.environ.get(keys.ENV_JOB_PREFIX, keys.DEFAULT_JOB_PREFIX)


def alarm_prefix() -> str:
    return os.environ.get(keys.ENV_ALARM_PREFIX) or keys.alarm_prefix(job_prefix())


def settings() -> SupervisorSettings:
    defaults = json.loads(os.environ.get(keys.ENV_POLICY_DEFAULTS, "{}") or "{}")
    return SupervisorSettings(
        job_prefix=job_prefix(),
        policy_defaults=RunPolicy.from_dict(defaults),
        log_silence_fallback=os.environ.get(keys.ENV_LOG_SILENCE_FALLBACK, "false") == "true",
        checkpoint_retention=os.environ.get(keys.ENV_CHECKPOINT_RETENTION, "false") == "true",
        region=os.environ.get("AWS_REGION", ""),
        read_scope=os.environ.get(keys.ENV_READ_SCOPE) or "all",
    )


def now_ms() -> int:
    return int(time.time() * 1000)


class PowertoolsCounters:
    """Metrics through Powertools (EMF): plain ones are flushed with the handler's other metrics
    (`metrics.log_metrics`); a dimensioned one is its own EMF record (`single_metric`) carrying
    the deployment's `service` dimension too."""

    def add(
        self, name: str, value: float = 1.0, *, dimension: tuple[str, str] | None = None, unit: str = "Count"
    ) -> None:
        from aws_lambda_powertools.metrics import MetricUnit, single_metric

        from sagewarden.observability import SERVICE, metrics

        if dimension is None:
            metrics.add_metric(name=name, unit=MetricUnit(unit), value=value)
            return
        with single_metric(
            name=name,
            unit=MetricUnit(unit),
            value=value,
            namespace=keys.METRICS_NAMESPACE,
            default_dimensions={"service": SERVICE},
        ) as metric:
            metric.add_dimension(name=dimension[0], value=dimension[1])


_override: Supervisor | None = None


def use(instance: Supervisor | None) -> None:
    """Install a supervisor built elsewhere (the local drill and scenario tests); None restores."""
    global _override
    _override = instance


def supervisor() -> Supervisor:
    return _override if _override is not None else _build()


@lru_cache(maxsize=1)
def _build() -> Supervisor:
    import boto3

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

    cfg = _boto_config()
    deployed = settings()
    sagemaker = SageMakerLauncher(boto3.client("sagemaker", config=cfg))
    return Supervisor(
        store=DynamoDbRunStore(boto3.client("dynamodb", config=cfg), os.environ[keys.ENV_TABLE_NAME]),
        launcher=sagemaker,
        plans=sagemaker,  # DescribeTrainingPlan (domain/capacity/training_plans.py)
        checkpoints=S3CheckpointFinder(boto3.client("s3", config=cfg)),
        # only where the deployment grants the writes (-c checkpointRetention=true)
        retirer=S3CheckpointRetirer(boto3.client("s3", config=cfg))
        if deployed.checkpoint_retention
        else None,
        # read by the API's submit of a retention run (the only function granted the reads)
        versioning=S3BucketVersioning(boto3.client("s3", config=cfg))
        if deployed.checkpoint_retention
        else None,
        notifier=SnsNotifier(boto3.client("sns", config=cfg), os.environ[keys.ENV_TOPIC_ARN]),
        alarms=CloudWatchHangAlarms(boto3.client("cloudwatch", config=cfg), alarm_prefix()),
        logs=CloudWatchLogsReader(boto3.client("logs", config=cfg)),
        metrics=CloudWatchMetricsReader(boto3.client("cloudwatch", config=cfg)),
        # read by the API's submit only (the only function granted Service Quotas reads)
        quotas=ServiceQuotasReader(boto3.client("service-quotas", config=cfg)),
        counters=PowertoolsCounters(),
        clock=now_ms,
        new_id=ulid_factory(now_ms),
        settings=deployed,
    )


def cloudwatch_client() -> Any:
    """A CloudWatch client (the deploy-time alarm-shape check; built on each call: it runs once)."""
    import boto3

    return boto3.client("cloudwatch", config=_boto_config())


def reset() -> None:
    """Forget cached clients (tests and the drill rebuild the world between scenarios)."""
    _build.cache_clear()
    _boto_config.cache_clear()
