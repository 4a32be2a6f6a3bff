"""CloudWatch as the simulated account sees it: moto for alarms, the simulator for metric data.

SageMaker's per-host metrics and the heartbeat metric are answered analytically by the
simulated SageMaker (weeks of one-minute datapoints would be too slow to push into moto), so
GetMetricData for those namespaces is served from it; every other call goes to moto.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from drill.sim_sagemaker import SimSageMaker


class SimulatedCloudWatch:
    def __init__(self, moto_client: Any, sim: SimSageMaker) -> None:
        self._moto = moto_client
        self._sim = sim

    def get_metric_data(
        self, *, MetricDataQueries: list[dict[str, Any]], StartTime: datetime, EndTime: datetime, **_: Any
    ) -> dict[str, Any]:
        start, end = int(StartTime.timestamp() * 1000), int(EndTime.timestamp() * 1000)
        results = []
        for q in MetricDataQueries:
            stat = q["MetricStat"]
            metric = stat["Metric"]
            dims = {d["Name"]: d["Value"] for d in metric.get("Dimensions", [])}
            points = self._sim.metric_datapoints(
                metric["Namespace"], metric["MetricName"], dims, start, end, int(stat["Period"]), stat["Stat"]
            )
            results.append(
                {
                    "Id": q["Id"],
                    "Label": metric["MetricName"],
                    "Timestamps": [datetime.fromtimestamp(t / 1000) for t, _ in reversed(points)],
                    "Values": [v for _, v in reversed(points)],
                    "StatusCode": "Complete",
                }
            )
        return {"MetricDataResults": results, "Messages": []}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._moto, name)


class FlushOnReadLogs:
    """CloudWatch Logs for the supervisor: the simulator's buffered log lines are written to moto
    right before anything reads them, so reads are always current and quiet stretches of
    virtual time cost no log writes."""

    READS = frozenset({"get_log_events", "filter_log_events", "describe_log_streams"})

    def __init__(self, moto_client: Any, sim: SimSageMaker) -> None:
        self._moto = moto_client
        self._sim = sim

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._moto, name)
        if name in self.READS:
            self._sim.flush_logs()
        return attr
