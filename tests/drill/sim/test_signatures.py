"""What each Training phase does to SageMaker's per-host instance metrics in the simulated account
(drill/sim/series.py; docs/fidelity.md): CPU, disk space and GPU per phase, the unkind overlaps
(a serial compile or an eval's quiet hosts as CPU-light as a spin, a light save leaving all but one
host as idle as a stuck job), late datapoints, and how the evidence judges each signature."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from drill.alarms.metric_delay import MetricDelays
from drill.clock import VirtualClock
from drill.sim.cloudwatch import SimulatedCloudWatch
from drill.sim.model import Fault
from drill.sim.sagemaker import SimSageMaker
from drill.sim.series import PHASE_SIGNATURES
from sagewarden.adapters.cloudwatch_metrics_reader import CloudWatchMetricsReader
from sagewarden.domain.vocabulary.evidence import SPIN, STUCK, UNKNOWN, WORK, HostMetrics, judge
from sagewarden.keys import TRAINING_METRIC_NAMESPACE as NS
from tests.drill.sim.builders import BUCKET, MIN, drain, training_job

GPUS = 8
HOSTS = 4


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def sim(aws: None, clock: VirtualClock) -> SimSageMaker:
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket=BUCKET)
    return SimSageMaker(clock, s3_client=s3)


AT, LONG = 20, 12  # the phase starts 20 min into Training and lasts 12


def _series(sim: SimSageMaker, metric: str, host: int, start: int, end: int) -> list[tuple[int, float]]:
    return sim.metric_datapoints(NS, metric, {"Host": f"job-a01/algo-{host}"}, start, end, 60, "Average")


def _cores_per_gpu(sim: SimSageMaker, host: int, start: int, end: int) -> list[float]:
    return [v / 100 / GPUS for _, v in _series(sim, "CPUUtilization", host, start, end)]


def _phase(sim: SimSageMaker, fault: Fault) -> tuple[int, int]:
    """Run a 4-host job with `fault` and return the [start, end) of the phase's minutes."""
    sim.inject(fault)
    started = training_job(sim, "job-a01", count=HOSTS)
    drain(sim, until_ms=started + (AT + LONG + 10) * MIN)
    return started + (AT + 1) * MIN, started + (AT + LONG - 1) * MIN


def _metrics(sim: SimSageMaker, start: int, end: int) -> list[HostMetrics]:
    return [
        HostMetrics(
            f"algo-{h}",
            gpu=tuple(_series(sim, "GPUUtilization", h, start, end)),
            cpu=tuple(_series(sim, "CPUUtilization", h, start, end)),
            disk=tuple(_series(sim, "DiskUtilization", h, start, end)),
        )
        for h in range(1, HOSTS + 1)
    ]


BENIGN = [
    ("compile", "parallel", WORK),
    ("compile", "serial", WORK),
    ("dataloader_pause", "workers", WORK),
    ("dataloader_pause", "light", WORK),
    ("eval_phase", "even", WORK),
    ("eval_phase", "uneven", WORK),
    ("checkpoint_save_long", "busy", WORK),
    ("checkpoint_save_long", "light", WORK),
]


@pytest.mark.parametrize(("kind", "variant", "verdict"), BENIGN)
def test_each_benign_signature_is_in_its_model_range_and_reads_as_work(
    sim: SimSageMaker, kind: str, variant: str, verdict: str
) -> None:
    silent = {"silent": True} if kind == "eval_phase" else {}
    start, end = _phase(sim, Fault(kind, after_training_min=AT, duration_min=LONG, variant=variant, **silent))
    phase = {"checkpoint_save_long": "save", "dataloader_pause": "data_pause", "eval_phase": "eval"}.get(
        kind, kind
    )
    lo, hi = PHASE_SIGNATURES[(phase, variant)]
    cpu = [c for h in range(1, HOSTS + 1) for c in _cores_per_gpu(sim, h, start, end)]
    assert cpu and all(0 <= c <= max(hi, 1.3) for c in cpu)
    if variant != "uneven":
        assert all(lo <= c <= hi for c in cpu)
    assert (
        judge(
            _metrics(sim, start, end),
            instance_count=HOSTS,
            gpus_per_host=GPUS,
            gpu_busy_percent=50.0,
            since_ms=start,
            now_ms=end,
        ).kind
        == verdict
    )


@pytest.mark.parametrize(
    ("fault", "verdict"),
    [
        (Fault("hang_spin", after_training_min=AT), SPIN),
        (Fault("stuck_dataloader", after_training_min=AT), STUCK),
        (Fault("dead_host", host=3, after_training_min=AT), SPIN),
        # the limit: NCCL init is as idle as a stuck job; only the start-up allowance holds it
        (Fault("nccl_init", after_training_min=AT, duration_min=LONG), STUCK),
    ],
    ids=[
        "a spin",
        "a stuck data loader",
        "a dead host",
        "nccl init as idle as a stuck job",
    ],
)
def test_hangs_read_as_hangs(sim: SimSageMaker, fault: Fault, verdict: str) -> None:
    start, end = _phase(sim, fault)
    got = judge(
        _metrics(sim, start, end),
        instance_count=HOSTS,
        gpus_per_host=GPUS,
        gpu_busy_percent=50.0,
        since_ms=start,
        now_ms=end,
    )
    assert got.kind == verdict, got.detail
    if fault.kind == "dead_host":
        assert "GPUs idle on algo-3" in got.detail


def test_a_spin_uses_about_one_core_per_rank_and_the_gpus_stay_busy(sim: SimSageMaker) -> None:
    start, end = _phase(sim, Fault("hang_spin", after_training_min=AT))
    for h in range(1, HOSTS + 1):
        assert all(0.9 <= c <= 1.25 for c in _cores_per_gpu(sim, h, start, end))
        assert all(v >= 99 * GPUS for _, v in _series(sim, "GPUUtilization", h, start, end))


def test_an_uneven_eval_has_cpu_light_hosts_but_never_all_of_them(sim: SimSageMaker) -> None:
    for at in range(20, 200, 30):  # several evals, each drawn its own quiet hosts
        sim.inject(Fault("eval_phase", after_training_min=at, duration_min=10, variant="uneven", silent=True))
    started = training_job(sim, "job-a01", count=HOSTS)
    drain(sim, until_ms=started + 230 * MIN)
    quiet_counts = []
    for start, end, kind in sim.job("job-a01").phase_intervals:
        if kind != "eval_silent" or end is None:
            continue
        quiet = [h for h in range(1, HOSTS + 1) if max(_cores_per_gpu(sim, h, start, end)) < 1.5]
        quiet_counts.append(len(quiet))
    assert quiet_counts and max(quiet_counts) < HOSTS and max(quiet_counts) >= 1


@pytest.mark.claim(
    "a light save leaves every host but one as idle as a stuck job and lands an object only every 8 minutes"
)
def test_a_light_save_grows_disk_space_on_algo_1_only_and_a_hung_save_keeps_what_it_wrote(
    sim: SimSageMaker,
) -> None:
    start, end = _phase(
        sim, Fault("checkpoint_save_long", after_training_min=AT, duration_min=LONG, variant="light")
    )
    one = [v for _, v in _series(sim, "DiskUtilization", 1, start, end)]
    assert one == sorted(one) and one[-1] - one[0] > 0.1
    for h in range(2, HOSTS + 1):
        assert len({v for _, v in _series(sim, "DiskUtilization", h, start, end)}) == 1
    after = _series(sim, "DiskUtilization", 1, end + 3 * MIN, end + 8 * MIN)
    assert all(v < one[-1] for _, v in after)  # the save ended: the oldest checkpoint was pruned


@pytest.mark.claim("A save that hangs stops writing and is stopped within minutes")
def test_a_save_cut_by_a_hang_stops_growing_but_keeps_what_it_wrote(sim: SimSageMaker) -> None:
    sim.inject(Fault("stuck_dataloader", after_training_min=20, during_save=True))
    started = training_job(sim, "job-a01", count=HOSTS)
    drain(sim, until_ms=started + 140 * MIN)  # the first save: step 1,000 at 10 steps a minute
    save = next(
        (s, e) for s, e, k in sim.job("job-a01").phase_intervals if k == "save" and s >= started + 20 * MIN
    )
    stuck = [v for _, v in _series(sim, "DiskUtilization", 1, save[1] + MIN, save[1] + 15 * MIN)]
    during = [v for _, v in _series(sim, "DiskUtilization", 1, save[0], save[1])]
    assert len(set(stuck)) == 1 and stuck[0] > during[0]


@pytest.mark.claim("the drill models up to 3 minutes")
def test_cpu_and_disk_datapoints_arrive_late_like_the_gpu_ones(sim: SimSageMaker, clock: Any) -> None:
    started = training_job(sim, "job-a01", count=2)
    drain(sim, until_ms=started + 30 * MIN)
    late = MetricDelays.from_dict({"gpu": {"base_s": 170, "jitter_s": 0, "late_rate": 0}})
    reader = CloudWatchMetricsReader(SimulatedCloudWatch(None, sim, late, clock))
    hosts = reader.host_metrics("job-a01", 2, started, clock.now_ms)
    now = clock.now_ms
    newest = [t for m in hosts for t in (m.gpu[-1][0], m.cpu[-1][0], m.disk[-1][0])]
    # a minute is visible 170 s after it ends: the newest has arrived, the one after it has not
    assert len(hosts) == 2 and all(t + MIN + 170_000 <= now < t + 2 * MIN + 170_000 for t in newest)
    assert (
        judge(
            hosts,
            instance_count=2,
            gpus_per_host=GPUS,
            gpu_busy_percent=50.0,
            since_ms=started + 28 * MIN,
            now_ms=clock.now_ms,
        ).kind
        == UNKNOWN
    )
