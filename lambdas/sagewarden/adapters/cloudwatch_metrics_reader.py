"""GetMetricData reads: each host's GPU, CPU and disk metrics for a hang's evidence and triage,
and the per-minute activity the hang windows are learned from.

One call (up to 500 series) says which host went idle and what the others do.
Why: docs/hang-detection.md."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sagewarden import keys
from sagewarden.domain.vocabulary.evidence import HostMetrics

MAX_SERIES = 500  # GetMetricData: at most 500 queries per call
MAX_HOSTS = 2_000  # hosts read (4 calls): a larger job's triage names the hosts it did not read
# the instance metrics read per host (SageMaker, /aws/sagemaker/TrainingJobs, dimension Host)
HOST_METRICS = (("g", "GPUUtilization"), ("c", "CPUUtilization"), ("d", "DiskUtilization"))


class CloudWatchMetricsReader:
    def __init__(self, client: Any) -> None:
        self._cw = client

    def host_metrics(self, job_name: str, hosts: int, start_ms: int, end_ms: int) -> tuple[HostMetrics, ...]:
        """Each host's GPUUtilization, CPUUtilization and DiskUtilization per minute over the
        window (the datapoints that have arrived). 500 queries per call, every page of each call
        followed; hosts without any datapoint are absent."""
        queries = [
            {
                "Id": f"{prefix}{h}",
                "MetricStat": {
                    "Metric": {
                        "Namespace": keys.TRAINING_METRIC_NAMESPACE,
                        "MetricName": metric,
                        "Dimensions": [{"Name": "Host", "Value": f"{job_name}/algo-{h}"}],
                    },
                    "Period": 60,
                    "Stat": "Average",
                },
                "ReturnData": True,
            }
            for h in range(1, min(hosts, MAX_HOSTS) + 1)
            for prefix, metric in HOST_METRICS
        ]
        points: dict[str, list[tuple[int, float]]] = {}
        for i in range(0, len(queries), MAX_SERIES):
            request: dict[str, Any] = {
                "MetricDataQueries": queries[i : i + MAX_SERIES],
                "StartTime": datetime.fromtimestamp(start_ms / 1000, tz=UTC),
                "EndTime": datetime.fromtimestamp(end_ms / 1000, tz=UTC),
            }
            while True:
                resp = self._cw.get_metric_data(**request)
                for series in resp.get("MetricDataResults", []):
                    pairs = zip(series.get("Timestamps", []), series.get("Values", []), strict=False)
                    points.setdefault(series["Id"], []).extend((_ms(t), float(v)) for t, v in pairs)
                if not resp.get("NextToken"):
                    break
                request["NextToken"] = resp["NextToken"]
        out = []
        for h in range(1, min(hosts, MAX_HOSTS) + 1):
            got = {prefix: tuple(sorted(points.get(f"{prefix}{h}", ()))) for prefix, _ in HOST_METRICS}
            if any(got.values()):
                out.append(HostMetrics(f"algo-{h}", gpu=got["g"], cpu=got["c"], disk=got["d"]))
        return tuple(out)

    def host_memory(
        self, job_name: str, hosts: int, start_ms: int, end_ms: int
    ) -> tuple[tuple[str, float, int], ...]:
        """Each host's highest MemoryUtilization (Maximum of one-minute periods) over the window and
        the start of its newest minute with a datapoint, (host, percent, ms), for an ending a kill
        explains: near 100 % before the kill is the OOM killer (domain/vocabulary/classifier/classify.py). 500 queries
        per call, every page followed; hosts without any datapoint are absent."""
        queries = [
            {
                "Id": f"m{h}",
                "MetricStat": {
                    "Metric": {
                        "Namespace": keys.TRAINING_METRIC_NAMESPACE,
                        "MetricName": "MemoryUtilization",
                        "Dimensions": [{"Name": "Host", "Value": f"{job_name}/algo-{h}"}],
                    },
                    "Period": 60,
                    "Stat": "Maximum",
                },
                "ReturnData": True,
            }
            for h in range(1, min(hosts, MAX_HOSTS) + 1)
        ]
        peak: dict[str, float] = {}
        newest: dict[str, int] = {}
        for i in range(0, len(queries), MAX_SERIES):
            request: dict[str, Any] = {
                "MetricDataQueries": queries[i : i + MAX_SERIES],
                "StartTime": datetime.fromtimestamp(start_ms / 1000, tz=UTC),
                "EndTime": datetime.fromtimestamp(end_ms / 1000, tz=UTC),
            }
            while True:
                resp = self._cw.get_metric_data(**request)
                for series in resp.get("MetricDataResults", []):
                    values = [float(v) for v in series.get("Values", [])]
                    if values:
                        host = f"algo-{series['Id'][1:]}"
                        peak[host] = max(peak.get(host, 0.0), *values)
                        last = max(_ms(t) for t in series.get("Timestamps", []))
                        newest[host] = max(newest.get(host, last), last)
                if not resp.get("NextToken"):
                    break
                request["NextToken"] = resp["NextToken"]
        return tuple(
            (host, peak[host], newest[host]) for host in sorted(peak, key=lambda h: int(h.split("-")[1]))
        )

    def activity(
        self, job_name: str, progress_metric: str | None, start_ms: int, end_ms: int
    ) -> tuple[tuple[tuple[int, float], ...], tuple[tuple[int, float], ...] | None]:
        """Per-minute activity of a job: its heartbeat (log events, declared phases included) and,
        with a progress metric, how often that metric was reported. One GetMetricData call with
        every page followed."""
        queries: list[dict[str, Any]] = [
            {
                "Id": "logs",
                "MetricStat": {
                    "Metric": {
                        "Namespace": keys.HEARTBEAT_NAMESPACE,
                        "MetricName": keys.HEARTBEAT_METRIC,
                        "Dimensions": [{"Name": keys.HEARTBEAT_DIMENSION, "Value": job_name}],
                    },
                    "Period": 60,
                    "Stat": "Sum",
                },
                "ReturnData": True,
            }
        ]
        if progress_metric:
            queries.append(
                {
                    "Id": "progress",
                    "MetricStat": {
                        "Metric": {
                            "Namespace": keys.TRAINING_METRIC_NAMESPACE,
                            "MetricName": progress_metric,
                            "Dimensions": [{"Name": "TrainingJobName", "Value": job_name}],
                        },
                        "Period": 60,
                        "Stat": "SampleCount",
                    },
                    "ReturnData": True,
                }
            )
        found: dict[str, list[tuple[int, float]]] = {"logs": [], "progress": []}
        request: dict[str, Any] = {
            "MetricDataQueries": queries,
            "StartTime": datetime.fromtimestamp(start_ms / 1000, tz=UTC),
            "EndTime": datetime.fromtimestamp(end_ms / 1000, tz=UTC),
        }
        while True:
            resp = self._cw.get_metric_data(**request)
            for series in resp.get("MetricDataResults", []):
                pairs = zip(series.get("Timestamps", []), series.get("Values", []), strict=False)
                found[series["Id"]] += [(_ms(t), float(v)) for t, v in pairs]
            token = resp.get("NextToken")
            if not token:
                break
            request["NextToken"] = token
        logs = tuple(sorted(found["logs"]))
        return logs, (tuple(sorted(found["progress"])) if progress_metric else None)


def _ms(value: Any) -> int:
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return int(value)
