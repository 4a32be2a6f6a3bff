"""Per-attempt hang alarms in CloudWatch.

Names: `<alarm prefix><job name>--<signal>[-gNN]`. The prefix (derived from the deployment's job
prefix, `keys.alarm_prefix`) is what the EventBridge rule filters on; the job name carries the
run id and attempt, so the alarm handler finds the run without a scan. Alarms have no actions:
their state changes reach the supervisor through EventBridge ("CloudWatch Alarm State Change"),
and the sweep reads their *states* every pass (`inventory`) because those events are edges.

- log-silence: the heartbeat metric (log events per minute, published by the log-subscription
  function) summed per minute; missing data is BREACHING, so a silent job alarms after
  `log_silence_minutes` even though nothing is published while it is silent.
- progress-stall (optional, policy `progress_metric`): the job's own MetricDefinitions metric
  (extracted by SageMaker from its log lines) had no datapoint for `progress_stall_minutes`;
  missing data is BREACHING. Catches a loop stuck while another thread keeps logging.
- gpu-idle: MIN over the job's hosts of GPUUtilization (summed over a host's GPUs, so the
  threshold is gpu_idle_percent x GPUs per host) for `gpu_idle_minutes`. Metric math allows
  at most 10 metrics per alarm, so hosts are split into balanced groups of at most 10 (`-g01`,
  `-g02`, ...); any group in ALARM is the gpu_idle signal. Missing data is not breaching (no
  data before Training).
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from sagewarden import keys
from sagewarden.adapters.sagemaker_launcher import to_ms
from sagewarden.domain.actions import EnsureHangAlarms
from sagewarden.domain.hang_alarms import (
    GROUP_SEP,
    SIGNAL_GPU_IDLE,
    SIGNAL_LOG_SILENCE,
    SIGNAL_PROGRESS,
    gpu_groups,
    key_group,
    key_signal,
)

_SIGNAL_SLUG = {
    SIGNAL_LOG_SILENCE: "log-silence",
    SIGNAL_GPU_IDLE: "gpu-idle",
    SIGNAL_PROGRESS: "progress-stall",
}
_SLUG_SIGNAL = {v: k for k, v in _SIGNAL_SLUG.items()}
SEP = "--"


def alarm_name(prefix: str, job_name: str, signal: str, group: int | None = None) -> str:
    name = f"{prefix}{job_name}{SEP}{_SIGNAL_SLUG[signal]}"
    return f"{name}-g{group:02d}" if group is not None else name


def alarm_name_for_key(prefix: str, job_name: str, key: str) -> str:
    return alarm_name(prefix, job_name, key_signal(key), key_group(key))


def parse_alarm_key(prefix: str, name: str) -> tuple[str, str] | None:
    """(job name, key) of one of our alarms (key as in `domain.hang_alarms`), else None."""
    if not name.startswith(prefix) or SEP not in name:
        return None
    job, slug = name[len(prefix) :].rsplit(SEP, 1)
    group: int | None = None
    head, sep, tail = slug.rpartition("-g")
    if sep and tail.isdigit():
        slug, group = head, int(tail)
    signal = _SLUG_SIGNAL.get(slug)
    if signal is None:
        return None
    return job, signal if group is None else f"{signal}{GROUP_SEP}{group}"


def parse_alarm_name(prefix: str, name: str) -> tuple[str, str] | None:
    """(job name, signal) of one of our alarms, else None."""
    parsed = parse_alarm_key(prefix, name)
    return (parsed[0], key_signal(parsed[1])) if parsed else None


def alarm_specs(spec: EnsureHangAlarms, prefix: str, run_id: str) -> list[dict[str, Any]]:
    """The PutMetricAlarm requests for one attempt (pure; tested without AWS)."""
    tags = [{"Key": keys.TAG_RUN_ID, "Value": run_id}, {"Key": "sagewarden:job", "Value": spec.job_name}]
    out: list[dict[str, Any]] = [
        {
            "AlarmName": alarm_name(prefix, spec.job_name, SIGNAL_LOG_SILENCE),
            "AlarmDescription": f"sagewarden: no log events from {spec.job_name} for {spec.log_silence_minutes} min",
            "Namespace": keys.HEARTBEAT_NAMESPACE,
            "MetricName": keys.HEARTBEAT_METRIC,
            "Dimensions": [{"Name": keys.HEARTBEAT_DIMENSION, "Value": spec.job_name}],
            "Statistic": "Sum",
            "Period": 60,
            "EvaluationPeriods": spec.log_silence_minutes,
            "DatapointsToAlarm": spec.log_silence_minutes,
            "Threshold": 0.0,
            "ComparisonOperator": "LessThanOrEqualToThreshold",
            "TreatMissingData": "breaching",
            "ActionsEnabled": False,
            "Tags": tags,
        }
    ]
    if spec.progress_metric:
        out.append(
            {
                "AlarmName": alarm_name(prefix, spec.job_name, SIGNAL_PROGRESS),
                "AlarmDescription": (
                    f"sagewarden: {spec.job_name} reported no '{spec.progress_metric}' "
                    f"for {spec.progress_stall_minutes} min (training loop not advancing)"
                ),
                "Namespace": keys.TRAINING_METRIC_NAMESPACE,
                "MetricName": spec.progress_metric,
                "Dimensions": [{"Name": "TrainingJobName", "Value": spec.job_name}],
                "Statistic": "SampleCount",
                "Period": 60,
                "EvaluationPeriods": spec.progress_stall_minutes,
                "DatapointsToAlarm": spec.progress_stall_minutes,
                "Threshold": 0.0,
                "ComparisonOperator": "LessThanOrEqualToThreshold",
                "TreatMissingData": "breaching",
                "ActionsEnabled": False,
                "Tags": tags,
            }
        )
    threshold = spec.gpu_idle_percent * spec.gpus_per_host
    groups = gpu_groups(spec.instance_count)
    for gi, group in enumerate(groups, start=1):
        metrics: list[dict[str, Any]] = [
            {
                "Id": f"h{h}",
                "MetricStat": {
                    "Metric": {
                        "Namespace": keys.TRAINING_METRIC_NAMESPACE,
                        "MetricName": "GPUUtilization",
                        "Dimensions": [{"Name": "Host", "Value": f"{spec.job_name}/algo-{h}"}],
                    },
                    "Period": 60,
                    "Stat": "Average",
                },
                "ReturnData": False,
            }
            for h in group
        ]
        metrics.append(
            {
                "Id": "idle",
                "Expression": f"MIN([{','.join(m['Id'] for m in metrics)}])",
                "Label": "lowest host GPUUtilization",
                "ReturnData": True,
            }
        )
        out.append(
            {
                "AlarmName": alarm_name(
                    prefix, spec.job_name, SIGNAL_GPU_IDLE, gi if len(groups) > 1 else None
                ),
                "AlarmDescription": (
                    f"sagewarden: a host of {spec.job_name} (algo-{group[0]}..algo-{group[-1]}) below "
                    f"{threshold:g} GPUUtilization (summed over {spec.gpus_per_host} GPUs) for {spec.gpu_idle_minutes} min"
                ),
                "Metrics": metrics,
                "EvaluationPeriods": spec.gpu_idle_minutes,
                "DatapointsToAlarm": spec.gpu_idle_minutes,
                "Threshold": threshold,
                "ComparisonOperator": "LessThanThreshold",
                "TreatMissingData": "notBreaching",
                "ActionsEnabled": False,
                "Tags": tags,
            }
        )
    return out


class CloudWatchHangAlarms:
    def __init__(self, client: Any, prefix: str = keys.DEFAULT_ALARM_PREFIX) -> None:
        self._cw = client
        self._prefix = prefix

    @property
    def prefix(self) -> str:
        return self._prefix

    def ensure(self, spec: EnsureHangAlarms, run_id: str = "") -> list[str]:
        names = []
        for request in alarm_specs(spec, self._prefix, run_id):
            self._cw.put_metric_alarm(**request)  # idempotent: same name replaces
            names.append(request["AlarmName"])
        return names

    def _names_for(self, job_name: str) -> list[str]:
        names: list[str] = []
        for page in self._cw.get_paginator("describe_alarms").paginate(
            AlarmNamePrefix=f"{self._prefix}{job_name}{SEP}", AlarmTypes=["MetricAlarm"]
        ):
            names += [a["AlarmName"] for a in page.get("MetricAlarms", [])]
        return names

    def delete(self, job_name: str) -> list[str]:
        names = self._names_for(job_name)
        for i in range(0, len(names), 100):
            try:
                self._cw.delete_alarms(AlarmNames=names[i : i + 100])
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "ResourceNotFound":
                    raise
        return names

    def inventory(self) -> dict[str, tuple[tuple[str, str, int], ...]]:
        """Every hang alarm of this deployment, by job: (key, state, state-updated ms). One
        DescribeAlarms by prefix, every page followed (100 alarms a page)."""
        found: dict[str, list[tuple[str, str, int]]] = {}
        for page in self._cw.get_paginator("describe_alarms").paginate(
            AlarmNamePrefix=self._prefix, AlarmTypes=["MetricAlarm"]
        ):
            for a in page.get("MetricAlarms", []):
                parsed = parse_alarm_key(self._prefix, a["AlarmName"])
                if parsed is None:
                    continue
                since = to_ms(a.get("StateUpdatedTimestamp")) or 0
                found.setdefault(parsed[0], []).append((parsed[1], str(a.get("StateValue", "")), since))
        return {job: tuple(sorted(rows)) for job, rows in found.items()}
