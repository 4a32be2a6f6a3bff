"""Metric ingestion delay in the simulated account (drill/alarms/metric_delay.py): when each datapoint
becomes visible, and that the supervisor's own GetMetricData reads honour it."""

from __future__ import annotations

from datetime import UTC, datetime

import boto3
import pytest

from drill.alarms.metric_delay import MetricDelays, SourceDelay
from drill.clock import VirtualClock
from drill.sim.cloudwatch import SimulatedCloudWatch
from drill.sim.model import JobProfile
from drill.sim.sagemaker import SimSageMaker
from sagewarden import keys
from tests.drill.alarms.builders import REGION, _sim_request

MIN = 60_000
GPU = (keys.TRAINING_METRIC_NAMESPACE, "GPUUtilization")


@pytest.mark.claim("the drill models up to 3 minutes")
@pytest.mark.claim(
    "a datapoint arrives 30 to 90 seconds after its minute ends (drawn per datapoint from the seed), and 5 % of them 3 minutes late"
)
@pytest.mark.claim(
    "all under the faithful simulated account: metric datapoints 30 s to 3 min late, log lines 1 s to 3 min late, warm pools that keep their hosts, AWS's rates"
)
def test_delays_are_drawn_per_datapoint_within_the_source_range_and_replay_exactly() -> None:
    delays = MetricDelays(7)
    late = []
    for host in range(1, 9):
        dims = {"Host": f"job/algo-{host}"}
        for minute in range(500):
            bucket = minute * MIN
            seen = delays.visible_at(GPU[0], GPU[1], dims, bucket, MIN) - (bucket + MIN)
            assert 30_000 <= seen <= 180_000
            assert seen <= 90_000 or seen == 180_000  # 30-90 s, or the newest missing 3 minutes
            late.append(seen)
            assert MetricDelays(7).visible_at(GPU[0], GPU[1], dims, bucket, MIN) == seen + bucket + MIN
    assert 0.02 < sum(1 for s in late if s == 180_000) / len(late) < 0.08  # late_rate 5 %
    assert len(set(late)) > 100  # jitter: the hosts of a job arrive at different times
    assert MetricDelays.none().visible_at(GPU[0], GPU[1], {"Host": "j/algo-1"}, 0, MIN) == MIN
    assert (MetricDelays(7).max_ms, MetricDelays(7).min_ms) == (180_000, 30_000)
    heartbeat_only = MetricDelays(
        7, SourceDelay(0, 0, 0, 0), SourceDelay(0, 0, 0, 0), SourceDelay(600, 0, 0, 0)
    )
    assert (
        heartbeat_only.visible_at(
            keys.HEARTBEAT_NAMESPACE, keys.HEARTBEAT_METRIC, {keys.HEARTBEAT_DIMENSION: "j"}, 0, MIN
        )
        == MIN + 600_000
    )
    assert heartbeat_only.visible_at(GPU[0], GPU[1], {"Host": "j/algo-1"}, 0, MIN) == MIN


@pytest.mark.claim("The alarms and the supervisor's own metric reads see only datapoints that have arrived.")
def test_get_metric_data_answers_only_the_datapoints_that_have_arrived(aws: None) -> None:
    """A read at time T sees a minute's datapoint only once it has arrived: never the minute under
    way, the newest complete ones only after their delay. Timestamps are the virtual minutes."""
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="sim-ckpt-bucket")
    clock = VirtualClock()
    sim = SimSageMaker(clock, s3_client=s3, seed=1)
    sim.set_profile("r1", JobProfile(total_steps=10**9, checkpoint_every_steps=10**9))
    sim.create_training_job(**_sim_request("sw-r1-a01", 4, 24 * 3600))
    while sim.job("sw-r1-a01").training_started_ms is None:
        sim.advance(sim.next_event_time() or clock.now_ms)
    sim.advance(clock.now_ms + 30 * MIN + 20_000)
    delays = MetricDelays(1)
    cloudwatch = SimulatedCloudWatch(boto3.client("cloudwatch", region_name=REGION), sim, delays, clock)
    kind = SimulatedCloudWatch(
        boto3.client("cloudwatch", region_name=REGION), sim, MetricDelays.none(), clock
    )
    now = clock.now_ms
    queries = [
        {
            "Id": f"h{h}",
            "MetricStat": {
                "Metric": {
                    "Namespace": GPU[0],
                    "MetricName": GPU[1],
                    "Dimensions": [{"Name": "Host", "Value": f"sw-r1-a01/algo-{h}"}],
                },
                "Period": 60,
                "Stat": "Average",
            },
            "ReturnData": True,
        }
        for h in range(1, 5)
    ]
    window = {
        "StartTime": datetime.fromtimestamp((now - 10 * MIN) / 1000, tz=UTC),
        "EndTime": datetime.fromtimestamp(now / 1000, tz=UTC),
    }
    seen = cloudwatch.get_metric_data(MetricDataQueries=queries, **window)["MetricDataResults"]
    complete = kind.get_metric_data(MetricDataQueries=queries, **window)["MetricDataResults"]
    newest_kind = max(t for r in complete for t in r["Timestamps"])
    assert (
        newest_kind.tzinfo is not None and newest_kind.timestamp() * 1000 <= now - MIN
    )  # ended periods only
    for late, full in zip(seen, complete, strict=True):
        stamps = [int(t.timestamp() * 1000) for t in late["Timestamps"]]
        dims = {"Host": f"sw-r1-a01/algo-{late['Id'][1:]}"}
        for t in [int(x.timestamp() * 1000) for x in full["Timestamps"]]:
            arrived = delays.visible_at(GPU[0], GPU[1], dims, t, MIN) <= now
            assert (t in stamps) == arrived
    assert sum(len(r["Timestamps"]) for r in seen) < sum(len(r["Timestamps"]) for r in complete)
