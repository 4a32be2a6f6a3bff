"""Where to look closer at an attempt: AWS console deep links and the CLI commands. Pure. Why:
docs/alerts-and-runbook.md."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from sagewarden import keys


@dataclass(frozen=True)
class AttemptLinks:
    training_job: str
    logs: str
    metrics: str
    cli_get: str
    cli_logs: str


def console_origin(region: str) -> str:
    """Scheme and host of the AWS console for ``region`` (China and GovCloud have their own)."""
    if region.startswith("cn-"):
        return f"https://{region}.console.amazonaws.cn"
    if region.startswith("us-gov-"):
        return f"https://{region}.console.amazonaws-us-gov.com"
    return f"https://{region}.console.aws.amazon.com"


def _console_value(value: str) -> str:
    """A name inside the CloudWatch console fragment: percent-encoded twice, ``%`` -> ``$``."""
    return quote(quote(value, safe=""), safe="").replace("%", "$")


def _fragment_part(value: str) -> str:
    """A free-form part of a fragment (e.g. a metrics search term): encoded once, ``%`` -> ``$``."""
    return quote(value, safe="").replace("%", "$")


def training_job_url(region: str, job_name: str) -> str:
    home = f"{console_origin(region)}/sagemaker/home?region={quote(region, safe='')}"
    return f"{home}#/jobs/{quote(job_name, safe='')}"


def log_streams_url(region: str, job_name: str, log_group: str = keys.TRAINING_LOG_GROUP) -> str:
    """The log group's stream list, filtered to the job's streams (prefix ``<job>/``)."""
    home = f"{console_origin(region)}/cloudwatch/home?region={quote(region, safe='')}"
    return (
        f"{home}#logsV2:log-groups/log-group/{_console_value(log_group)}"
        f"$3FlogStreamNameFilter$3D{_console_value(job_name + '/')}"
    )


def metrics_url(region: str, job_name: str) -> str:
    """A CloudWatch metrics search for the job name (instance, training and heartbeat metrics)."""
    home = f"{console_origin(region)}/cloudwatch/home?region={quote(region, safe='')}"
    return f"{home}#metricsV2:graph=~();search={_fragment_part(job_name)}"


def attempt_links(region: str, run_id: str, job_name: str) -> AttemptLinks:
    return AttemptLinks(
        training_job=training_job_url(region, job_name),
        logs=log_streams_url(region, job_name),
        metrics=metrics_url(region, job_name),
        cli_get=f"sagewarden get {run_id}",
        cli_logs=f"sagewarden logs {run_id}",
    )


def link_lines(region: str, run_id: str, job_name: str) -> list[str]:
    """Lines to append to an alert body, one link or command per line."""
    links = attempt_links(region, run_id, job_name)
    return [
        f"Training job: {links.training_job}",
        f"Logs ({job_name}/*): {links.logs}",
        f"Metrics: {links.metrics}",
        f"Look closer: {links.cli_get}   |   {links.cli_logs}",
    ]
