"""Per-host GPU triage for a hang: which host went idle, from the job's own GPUUtilization.

The gpu-idle alarm evaluates MIN over hosts, which says *that* a host is idle but not *which*;
one GetMetricData call (up to 500 series) answers that for the alert.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sagewarden import keys

MAX_SERIES = 500


class CloudWatchMetricsReader:
    def __init__(self, client: Any) -> None:
        self._cw = client

    def gpu_by_host(
        self, job_name: str, hosts: int, start_ms: int, end_ms: int
    ) -> dict[str, tuple[float, float]]:
        """host -> (average, minimum) GPUUtilization over the window; hosts without data are absent."""
        queries = [
            {
                "Id": f"h{h}",
                "MetricStat": {
                    "Metric": {
                        "Namespace": keys.TRAINING_METRIC_NAMESPACE,
                        "MetricName": "GPUUtilization",
                        "Dimensions": [{"Name": "Host", "Value": f"{job_name}/algo-{h}"}],
                    },
                    "Period": 60,
                    "Stat": "Average",
                },
                "ReturnData": True,
            }
            for h in range(1, min(hosts, MAX_SERIES) + 1)
        ]
        resp = self._cw.get_metric_data(
            MetricDataQueries=queries,
            StartTime=datetime.fromtimestamp(start_ms / 1000, tz=UTC),
            EndTime=datetime.fromtimestamp(end_ms / 1000, tz=UTC),
        )
        out: dict[str, tuple[float, float]] = {}
        for series in resp.get("MetricDataResults", []):
            values = [float(v) for v in series.get("Values", [])]
            if values:
                out[f"algo-{series['Id'][1:]}"] = (sum(values) / len(values), min(values))
        return out


def gpu_triage_lines(
    by_host: dict[str, tuple[float, float]], threshold: float, hosts: int
) -> tuple[str, ...]:
    """Readable lines, idlest host first, e.g. 'algo-3: GPUUtilization avg 0 (min 0) <- idle'."""
    rows = sorted(by_host.items(), key=lambda kv: (kv[1][0], kv[0]))
    lines = [
        f"{host}: GPUUtilization avg {avg:.0f} (min {low:.0f})" + ("  <- idle" if avg < threshold else "")
        for host, (avg, low) in rows
    ]
    missing = hosts - len(by_host)
    if missing > 0:
        lines.append(f"{missing} host(s) reported no GPU metrics in the window")
    return tuple(lines)
