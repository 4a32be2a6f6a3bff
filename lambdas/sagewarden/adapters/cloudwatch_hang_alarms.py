"""Per-attempt hang alarms in CloudWatch: their names, metric-math shapes, puts, deletes and `inventory`.

Names are `<alarm prefix><job name>--<signal>[-gNN]`; the shapes (log-silence, progress-stall,
gpu-lone-idle, gpu-idle) tolerate datapoints up to `METRIC_LAG_MIN` minutes late. Windows come
from `domain/hangs/`.
Why: docs/hang-detection.md (*Metrics arrive late*, *Why each alarm shape*)."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from sagewarden import keys
from sagewarden.domain.hangs.alarms import (
    GPU_IDLE_HOSTS,
    GROUP_SEP,
    MAX_ALARM_PERIODS,
    METRIC_LAG_MIN,
    SIGNAL_GPU_IDLE,
    SIGNAL_GPU_LONE_IDLE,
    SIGNAL_LOG_SILENCE,
    SIGNAL_PROGRESS,
    alarm_keys,
    key_group,
    key_signal,
    lone_idle_groups,
    silence_window_min,
)
from sagewarden.domain.vocabulary.actions import EnsureHangAlarms
from sagewarden.ports.aws import AlarmInventory
from sagewarden.usecases.aws_events import to_ms

_SIGNAL_SLUG = {
    SIGNAL_LOG_SILENCE: "log-silence",
    SIGNAL_GPU_IDLE: "gpu-idle",
    SIGNAL_GPU_LONE_IDLE: "gpu-lone-idle",
    SIGNAL_PROGRESS: "progress-stall",
}
_SLUG_SIGNAL = {v: k for k, v in _SIGNAL_SLUG.items()}
SEP = "--"


def billed_metrics(alarm: Mapping[str, Any]) -> int:
    """Alarm metrics CloudWatch bills for one alarm: one for a single-metric alarm, one per
    metric (MetricStat) of a metric-math alarm; expressions are free."""
    queries = alarm.get("Metrics") or []
    return sum(1 for q in queries if "MetricStat" in q) if queries else 1


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


def _host_metric(job_name: str, host: int) -> dict[str, Any]:
    return {
        "Id": f"h{host}",
        "MetricStat": {
            "Metric": {
                "Namespace": keys.TRAINING_METRIC_NAMESPACE,
                "MetricName": "GPUUtilization",
                "Dimensions": [{"Name": "Host", "Value": f"{job_name}/algo-{host}"}],
            },
            "Period": 60,
            "Stat": "Average",
        },
        "ReturnData": False,
    }


def _literal(x: float) -> str:
    """A number as a metric-math literal: plain decimal digits, never exponent notation
    (f"{x:g}" writes 8e-05; CloudWatch's metric-math syntax documents no exponent form)."""
    text = format(Decimal(repr(float(x))), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _silence_window(minutes: int) -> dict[str, Any]:
    """N of N, for the alarms whose missing data is breaching (log silence, progress): never
    shorter than the late minutes plus one (see the module docstring)."""
    n = silence_window_min(minutes)
    return {"EvaluationPeriods": n, "DatapointsToAlarm": n}


def _late_tolerant_window(minutes: int, floor: int = 1) -> dict[str, Any]:
    """M of N, for the alarms whose missing data is not breaching (GPU idle): M breaching minutes
    among the last M + METRIC_LAG_MIN, so late newest minutes neither block nor make a catch."""
    m = min(max(minutes, floor), MAX_ALARM_PERIODS)
    n = min(m + METRIC_LAG_MIN, MAX_ALARM_PERIODS)
    return {"EvaluationPeriods": n, "DatapointsToAlarm": m}


def _hosts(ids: list[int]) -> str:
    return ",".join(f"h{h}" for h in ids)


def alarm_specs(spec: EnsureHangAlarms, prefix: str, run_id: str) -> list[dict[str, Any]]:
    """The PutMetricAlarm requests for one attempt (pure; tested without AWS). With
    `spec.only_keys`, just those alarms (a learned window changed)."""
    tags = [{"Key": keys.TAG_RUN_ID, "Value": run_id}, {"Key": "sagewarden:job", "Value": spec.job_name}]
    common = {"ActionsEnabled": False, "Tags": tags}
    job = spec.job_name
    out: dict[str, dict[str, Any]] = {}
    out[SIGNAL_LOG_SILENCE] = {
        "AlarmName": alarm_name(prefix, job, SIGNAL_LOG_SILENCE),
        "AlarmDescription": f"sagewarden: no log events from {job} for {spec.log_silence_minutes} min",
        "Namespace": keys.HEARTBEAT_NAMESPACE,
        "MetricName": keys.HEARTBEAT_METRIC,
        "Dimensions": [{"Name": keys.HEARTBEAT_DIMENSION, "Value": job}],
        "Statistic": "Sum",
        "Period": 60,
        **_silence_window(spec.log_silence_minutes),
        "Threshold": 0.0,
        "ComparisonOperator": "LessThanOrEqualToThreshold",
        "TreatMissingData": "breaching",
        **common,
    }
    if spec.progress_metric:
        metric = {
            "Namespace": keys.TRAINING_METRIC_NAMESPACE,
            "MetricName": spec.progress_metric,
            "Dimensions": [{"Name": "TrainingJobName", "Value": job}],
        }
        out[SIGNAL_PROGRESS] = {
            "AlarmName": alarm_name(prefix, job, SIGNAL_PROGRESS),
            "AlarmDescription": (
                f"sagewarden: {job} reported no '{spec.progress_metric}', or the same value, "
                f"for {spec.progress_stall_minutes} min (training loop not advancing)"
            ),
            "Metrics": [
                {
                    "Id": "v",
                    "MetricStat": {"Metric": metric, "Period": 60, "Stat": "Maximum"},
                    "ReturnData": False,
                },
                {
                    # 1 in a minute whose value did not change since the last report; a minute
                    # without a report has no value (missing: breaching, once none is left)
                    "Id": "stalled",
                    "Expression": "IF(ABS(DIFF(v)) <= 0, 1, 0)",
                    "Label": "progress reported unchanged",
                    "ReturnData": True,
                },
            ],
            **_silence_window(spec.progress_stall_minutes),
            "Threshold": 1.0,
            "ComparisonOperator": "GreaterThanOrEqualToThreshold",
            "TreatMissingData": "breaching",
            **common,
        }
    idle = spec.gpu_idle_percent * spec.gpus_per_host
    busy = spec.gpu_busy_percent * spec.gpus_per_host
    whole = list(range(1, min(spec.instance_count, GPU_IDLE_HOSTS) + 1))
    watched: dict[str, Any]
    if len(whole) == 1:  # MAX of one series is a scalar: the alarm watches the host's metric itself
        host = _host_metric(job, 1)["MetricStat"]
        watched = {
            "Namespace": host["Metric"]["Namespace"],
            "MetricName": host["Metric"]["MetricName"],
            "Dimensions": host["Metric"]["Dimensions"],
            "Statistic": host["Stat"],
            "Period": host["Period"],
        }
    else:
        watched = {
            "Metrics": [
                *[_host_metric(job, h) for h in whole],
                {
                    "Id": "busiest",
                    "Expression": f"MAX([{_hosts(whole)}])",
                    "Label": "busiest watched host GPUUtilization",
                    "ReturnData": True,
                },
            ]
        }
    out[SIGNAL_GPU_IDLE] = {
        "AlarmName": alarm_name(prefix, job, SIGNAL_GPU_IDLE),
        "AlarmDescription": (
            f"sagewarden: {job} idle: algo-{'/'.join(str(h) for h in whole)} below {idle:g} GPUUtilization "
            f"(summed over {spec.gpus_per_host} GPUs) for {spec.gpu_idle_minutes} min"
        ),
        **watched,
        **_late_tolerant_window(spec.gpu_idle_minutes),
        "Threshold": idle,
        "ComparisonOperator": "LessThanThreshold",
        "TreatMissingData": "notBreaching",
        **common,
    }
    groups = lone_idle_groups(spec)
    for gi, group in enumerate(groups, start=1):
        filled = f"FILL([{_hosts(group)}], 0)"  # a host that stopped reporting is idle
        key = SIGNAL_GPU_LONE_IDLE if len(groups) == 1 else f"{SIGNAL_GPU_LONE_IDLE}{GROUP_SEP}{gi}"
        out[key] = {
            "AlarmName": alarm_name_for_key(prefix, job, key),
            "AlarmDescription": (
                f"sagewarden: a host of {job} (algo-{group[0]}..algo-{group[-1]}) below {idle:g} "
                f"GPUUtilization while a peer is above {busy:g}, for {spec.gpu_lone_idle_minutes} min"
            ),
            "Metrics": [
                *[_host_metric(job, h) for h in group],
                {
                    "Id": "lone",
                    "Expression": f"IF(MIN({filled}) < {_literal(idle)} AND MAX({filled}) > {_literal(busy)}, 1, 0)",
                    "Label": "one host idle while a peer is busy",
                    "ReturnData": True,
                },
            ],
            # partly arrived minutes may read lone-idle: never fewer breaching minutes than those
            **_late_tolerant_window(spec.gpu_lone_idle_minutes, floor=METRIC_LAG_MIN),
            "Threshold": 1.0,
            "ComparisonOperator": "GreaterThanOrEqualToThreshold",
            "TreatMissingData": "notBreaching",
            **common,
        }
    return [out[k] for k in alarm_keys(spec) if not spec.only_keys or k in spec.only_keys]


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

    def inventory(self) -> AlarmInventory:
        """Every hang alarm of this deployment, by job: (key, state, state-updated ms), and the
        number of metrics they watch. One DescribeAlarms by prefix, every page followed (100
        alarms a page)."""
        found: dict[str, list[tuple[str, str, int]]] = {}
        metrics = 0
        for page in self._cw.get_paginator("describe_alarms").paginate(
            AlarmNamePrefix=self._prefix,
            AlarmTypes=["MetricAlarm"],
            PaginationConfig={"PageSize": 100},  # the most a page holds: fewer calls against 9 TPS
        ):
            for a in page.get("MetricAlarms", []):
                parsed = parse_alarm_key(self._prefix, a["AlarmName"])
                if parsed is None:
                    continue
                # when the alarm entered its state: StateUpdatedTimestamp also moves when only its
                # EvaluationState changes (MetricAlarm reference), StateTransitionedTimestamp not
                since = to_ms(a.get("StateTransitionedTimestamp") or a.get("StateUpdatedTimestamp")) or 0
                found.setdefault(parsed[0], []).append((parsed[1], str(a.get("StateValue", "")), since))
                metrics += billed_metrics(a)
        out = AlarmInventory({job: tuple(sorted(rows)) for job, rows in found.items()})
        out.metrics = metrics
        return out
