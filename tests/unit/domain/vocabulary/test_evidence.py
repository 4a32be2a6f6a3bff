"""The evidence of what a quiet job's hosts are doing (issue 18): each signature the drill models,
judged from SageMaker's per-host GPU, CPU and disk metrics, and unknown never read as idle."""

from __future__ import annotations

import pytest

from sagewarden.domain.vocabulary.evidence import (
    DISK_GROWTH_PP_PER_MIN,
    IDLE_CPU_CORES_PER_GPU,
    SPIN,
    SPIN_CPU_CORES_PER_GPU,
    STUCK,
    UNKNOWN,
    WORK,
    HostMetrics,
    judge,
)

MIN = 60_000
T0 = 1_000 * MIN
GPUS = 8
SINCE, NOW = T0 + 10 * MIN, T0 + 16 * MIN  # a quiet stretch since minute 10, read at minute 16


def _host(
    n: int,
    gpu_pct: float,
    cpu_cores_per_gpu: float,
    *,
    disk: tuple[float, ...] = (),
    minutes: range = range(0, 15),
) -> HostMetrics:
    """Host algo-n: `gpu_pct` per GPU and `cpu_cores_per_gpu` busy cores per GPU in every minute
    of `minutes` (since T0), and optional disk values for the newest minutes."""
    gpu = tuple((T0 + m * MIN, gpu_pct * GPUS) for m in minutes)
    cpu = tuple((T0 + m * MIN, 100 * cpu_cores_per_gpu * GPUS) for m in minutes)
    last = minutes[-1]
    dsk = tuple((T0 + (last - len(disk) + 1 + i) * MIN, v) for i, v in enumerate(disk)) or tuple(
        (T0 + m * MIN, 30.0) for m in minutes
    )
    return HostMetrics(f"algo-{n}", gpu=gpu, cpu=cpu, disk=dsk)


def _judge(hosts, count=None, gpus=GPUS):
    return judge(
        hosts,
        instance_count=count if count is not None else len(hosts),
        gpus_per_host=gpus,
        gpu_busy_percent=50.0,
        since_ms=SINCE,
        now_ms=NOW,
    )


@pytest.mark.claim(
    "with at most 1.5 busy CPU cores per GPU (a rank busy-waiting on its stream) and no disk space growing: a collective spinning"
)
def test_a_spinning_collective_is_every_gpu_busy_with_one_core_per_rank():
    got = _judge([_host(n, 99.5, 1.2) for n in range(1, 5)])
    assert got.kind == SPIN and got.hang and "GPUs busy on 4 of 4" in got.detail


@pytest.mark.claim("every host's GPUs idle with at most 0.5 cores per GPU and nothing written")
def test_a_stuck_job_is_everything_idle():
    got = _judge([_host(n, 2.0, 0.1) for n in range(1, 5)])
    assert got.kind == STUCK and got.hang


@pytest.mark.claim("a stuck host among spinning ones too). Stopped at once.")
def test_a_stuck_host_among_spinning_ones_is_a_hang_naming_the_idle_host():
    hosts = [_host(1, 99.0, 1.1), _host(2, 0.0, 0.02), _host(3, 99.0, 1.1)]
    got = _judge(hosts)
    assert got.kind == SPIN and "GPUs idle on algo-2" in got.detail


@pytest.mark.parametrize(
    ("phase", "gpu_pct", "cpu"),
    [
        ("parallel compile", 0.3, 4.0),
        ("serial compile: one core per rank, as a spin uses", 0.3, 1.0),
        ("data-loader pause, workers busy", 0.3, 3.0),
        ("data-loader pause, workers mostly waiting", 0.3, 0.7),
        ("busy save", 5.0, 2.0),
        ("silent eval", 72.0, 3.0),
    ],
    ids=[
        "parallel compile",
        "serial compile: one core per rank, as a spin uses",
        "data loader pause, workers busy",
        "data loader pause, workers mostly waiting",
        "busy save",
        "silent eval",
    ],
)
def test_benign_phases_show_work(phase, gpu_pct, cpu):
    got = _judge([_host(n, gpu_pct, cpu) for n in range(1, 5)])
    assert got.kind == WORK, phase


@pytest.mark.claim(
    "a light save leaves every host but one as idle as a stuck job and lands an object only every 8 minutes"
)
def test_a_light_save_shows_work_on_the_one_host_that_writes():
    """Rank 0 writes the checkpoint: the other hosts are as idle as a stuck job, algo-1's disk
    space grows."""
    growing = tuple(30.0 + 0.02 * i for i in range(5))  # the slowest modelled rate, 0.02 pp a minute
    assert 2 * DISK_GROWTH_PP_PER_MIN <= 0.02
    hosts = [_host(1, 5.0, 0.3, disk=growing), *(_host(n, 5.0, 0.3) for n in range(2, 5))]
    got = _judge(hosts)
    assert got.kind == WORK and "algo-1" in got.detail and "disk space" in got.detail
    assert _judge([_host(n, 5.0, 0.3) for n in range(1, 5)]).kind == STUCK  # without the writer


def test_an_eval_with_little_cpu_on_some_hosts_is_work_while_one_host_loads_data():
    quiet = [_host(n, 72.0, 1.1) for n in range(1, 4)]  # spin-like hosts
    assert _judge([*quiet, _host(4, 72.0, 3.0)]).kind == WORK
    # the limit: an eval using as little CPU as a spin on *every* host reads as a spin
    assert _judge(quiet).kind == SPIN


@pytest.mark.claim(
    "with at most 1.5 busy CPU cores per GPU (a rank busy-waiting on its stream) and no disk space growing: a collective spinning"
)
@pytest.mark.claim("every host's GPUs idle with at most 0.5 cores per GPU and nothing written")
def test_the_thresholds_sit_between_the_modelled_signatures():
    # spin 0.9-1.25 cores/GPU < 1.5 < an eval's busy hosts (2+); stuck <= 0.3 < 0.5 < a serial compile (0.8+)
    assert 1.25 < SPIN_CPU_CORES_PER_GPU < 2.0 and 0.3 < IDLE_CPU_CORES_PER_GPU < 0.6
    assert _judge([_host(1, 99.0, 1.25)], count=1).kind == SPIN
    assert _judge([_host(1, 0.3, 0.6)], count=1).kind == WORK
    assert _judge([_host(1, 0.3, 0.3)], count=1).kind == STUCK


def test_only_the_minutes_since_the_quiet_stretch_began_count():
    # busy training before minute 10, spinning after: the training minutes are not evidence
    training = _host(1, 95.0, 3.5, minutes=range(0, 10))
    spin = _host(1, 99.0, 1.1, minutes=range(10, 15))
    merged = HostMetrics("algo-1", gpu=training.gpu + spin.gpu, cpu=training.cpu + spin.cpu, disk=spin.disk)
    assert _judge([merged]).kind == SPIN
    only_training = _host(1, 95.0, 3.5, minutes=range(0, 10))
    assert _judge([only_training]).kind == UNKNOWN  # nothing since: not "working", not "idle"


@pytest.mark.claim(
    "the metrics cannot be read, a host's datapoints have not arrived (at least two since the stretch began are needed), or the instance has no GPUs: unknown is not idle"
)
def test_a_light_save_is_told_from_two_datapoints_of_its_writer_and_one_is_not_enough_for_a_hang():
    slow = (30.0, 30.02)  # the slowest modelled write, two minutes
    hosts = [_host(1, 5.0, 0.3, disk=slow, minutes=range(0, 12)), *(_host(n, 5.0, 0.3) for n in range(2, 5))]
    assert _judge(hosts).kind == WORK
    # algo-1's newer minutes still on their way: one datapoint since the stretch began is unknown
    one = [_host(1, 5.0, 0.3, minutes=range(0, 11)), *(_host(n, 5.0, 0.3) for n in range(2, 5))]
    got = _judge(one)
    assert got.kind == UNKNOWN and "algo-1" in got.detail


@pytest.mark.claim(
    "the metrics cannot be read, a host's datapoints have not arrived (at least two since the stretch began are needed), or the instance has no GPUs: unknown is not idle"
)
@pytest.mark.claim(
    'Host metrics that cannot be read, or have not arrived, are unknown evidence, never "idle"'
)
def test_unknown_is_never_idle():
    four = [_host(n, 2.0, 0.1) for n in range(1, 4)]  # algo-4 missing: late metrics or a dead host
    got = _judge(four, count=4)
    assert got.kind == UNKNOWN and "algo-4" in got.detail and not got.hang
    assert _judge([], count=4).kind == UNKNOWN
    assert _judge([_host(1, 0.0, 0.0)], count=1, gpus=0).kind == UNKNOWN  # a CPU instance
    # a working host is evidence even while another host's datapoints are missing
    assert _judge([_host(1, 0.3, 3.0)], count=4).kind == WORK
