"""The hosts' metrics read for a hang's evidence: GPU, CPU and disk of every host, at most 500
queries per GetMetricData call, every page followed."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from sagewarden.adapters.cloudwatch_metrics_reader import MAX_SERIES, CloudWatchMetricsReader
from sagewarden.domain.vocabulary.evidence import gpu_summary

MIN = 60_000
T0 = 1_000 * MIN


class _Paged:
    """GetMetricData answering each query with two datapoints, split over two pages per call."""

    def __init__(self, silent_hosts: set[int]) -> None:
        self.calls: list[dict[str, Any]] = []
        self.silent = silent_hosts

    def get_metric_data(self, **request: Any) -> dict[str, Any]:
        self.calls.append(request)
        queries = request["MetricDataQueries"]
        assert len(queries) <= MAX_SERIES
        half = len(queries) // 2
        page = queries[half:] if request.get("NextToken") else queries[:half]
        results = []
        for q in page:
            host = int(q["MetricStat"]["Metric"]["Dimensions"][0]["Value"].rsplit("-", 1)[1])
            if host in self.silent:
                results.append({"Id": q["Id"], "Timestamps": [], "Values": []})
                continue
            value = {"GPUUtilization": 790.0, "CPUUtilization": 900.0, "DiskUtilization": 30.0}[
                q["MetricStat"]["Metric"]["MetricName"]
            ]
            stamps = [datetime.fromtimestamp((T0 + m * MIN) / 1000, tz=UTC) for m in (1, 0)]  # newest first
            results.append({"Id": q["Id"], "Timestamps": stamps, "Values": [value, value - 1]})
        return {"MetricDataResults": results, **({} if request.get("NextToken") else {"NextToken": "p2"})}


@pytest.mark.claim("one GetMetricData call per 500 series")
@pytest.mark.claim(
    "3 metrics per host (GPU, CPU, disk), at $0.01 per 1,000 metrics requested with GetMetricData"
)
def test_every_hosts_gpu_cpu_and_disk_in_calls_of_at_most_500_queries_every_page_followed():
    client = _Paged(silent_hosts={7})
    hosts = CloudWatchMetricsReader(client).host_metrics("job-a001", 200, T0, T0 + 5 * MIN)
    assert [len(c["MetricDataQueries"]) for c in client.calls] == [
        500,
        500,
        100,
        100,
    ]  # 2 calls, 2 pages each
    names = {q["MetricStat"]["Metric"]["MetricName"] for c in client.calls for q in c["MetricDataQueries"]}
    assert names == {"GPUUtilization", "CPUUtilization", "DiskUtilization"}
    assert len(hosts) == 199 and "algo-7" not in {m.host for m in hosts}  # no datapoint: absent, not 0
    one = hosts[0]
    assert one.host == "algo-1" and one.gpu == ((T0, 789.0), (T0 + MIN, 790.0))  # oldest first
    assert one.cpu[-1] == (T0 + MIN, 900.0) and one.disk[-1] == (T0 + MIN, 30.0)
    assert gpu_summary(hosts)["algo-1"] == (789.5, 789.0, 790.0)


def test_host_memory_is_each_hosts_peak_with_its_newest_minute_from_moto() -> None:
    """MemoryUtilization as SageMaker publishes it (namespace /aws/sagemaker/TrainingJobs, dimension
    Host = <job>/algo-<n>), read back from moto: the highest value per host and its newest minute."""
    import boto3
    from moto import mock_aws

    job = "sw-llama-01jc0-a001"
    now = datetime.now(tz=UTC).replace(second=0, microsecond=0)
    end_ms = int(now.timestamp() * 1000)
    with mock_aws():
        cw = boto3.client("cloudwatch", region_name="us-east-1")
        for host, values in ((1, (41.0, 42.0, 40.5)), (2, (63.0, 88.0, 99.2))):
            cw.put_metric_data(
                Namespace="/aws/sagemaker/TrainingJobs",
                MetricData=[
                    {
                        "MetricName": "MemoryUtilization",
                        "Dimensions": [{"Name": "Host", "Value": f"{job}/algo-{host}"}],
                        "Timestamp": datetime.fromtimestamp((end_ms - (3 - i) * MIN) / 1000, tz=UTC),
                        "Value": v,
                    }
                    for i, v in enumerate(values)
                ],
            )
        peaks = CloudWatchMetricsReader(cw).host_memory(job, 3, end_ms - 10 * MIN, end_ms)
    assert [(h, p) for h, p, _ in peaks] == [("algo-1", 42.0), ("algo-2", 99.2)]  # algo-3 sent nothing
    assert all(t == end_ms - MIN for _, _, t in peaks)
