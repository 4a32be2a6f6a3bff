"""Hosts of the simulated SageMaker (drill/sim/hosts.py; docs/fidelity.md has one row each): GPU
serials that travel with warm-pool instances and lemons, the infra check's start-up time and
what it does with a bad host, and NCCL's network lines with NCCL_DEBUG=INFO."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from drill.clock import VirtualClock
from drill.sim.hosts import INFRA_CHECK_FAILURE_REASON
from drill.sim.model import Fault, JobProfile, StartupTimes
from drill.sim.sagemaker import SimSageMaker
from drill.sim.warm_pools import WarmPoolSettings
from tests.drill.sim.builders import BUCKET, ITYPE, MIN, request, run_until, training_job

XID = "NVRM: Xid (PCI:0000:10:1c): 79, GPU has fallen off the bus."
CHECK_S = 900


@pytest.fixture
def s3(aws: None) -> Any:
    client = boto3.client("s3", region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    return client


def make_sim(
    s3: Any, *, on_bad_host: str = "replace", miss_rate: float = 0.0, **profile: Any
) -> SimSageMaker:
    """A simulated account whose infra check finds every bad host and does `on_bad_host` with it
    (the defaults miss half and fail the job: `test_the_check_by_default_misses_...`)."""
    startup = StartupTimes(
        infra_check_min_s=CHECK_S,
        infra_check_max_s=CHECK_S,
        infra_check_on_bad_host=on_bad_host,
        infra_check_miss_rate=miss_rate,
    )
    sim = SimSageMaker(
        VirtualClock(),
        s3_client=s3,
        startup=startup,
        warm_pools=WarmPoolSettings(quotas={ITYPE: 8}, available_after_s=(0, 0)),
    )
    sim.set_profile("r1", JobProfile(total_steps=10_000, fingerprints=True, **profile))
    return sim


def checked(name: str, **kw: Any) -> dict[str, Any]:
    req = request(name, **kw)
    req["InfraCheckConfig"] = {"EnableInfraCheck": True}
    return req


def fingerprint(sim: SimSageMaker, name: str, host: int) -> str:
    lines = [t for t in sim.log_tail(name, host, 50) if t.startswith("[sagewarden] host=")]
    assert lines == [f"[sagewarden] host={host} fingerprint={sim.job(name)._serials[host]}"]
    return lines[0].split("fingerprint=")[1]


def ended(sim: SimSageMaker, name: str) -> int:
    run_until(sim, lambda: sim.job(name).is_terminal)
    end = sim.job(name).ended_ms
    assert end is not None
    return end


def bad_pool(sim: SimSageMaker) -> int:
    """job-a01 fails with a bad GPU on host 2 and leaves a warm pool (Available at once)."""
    sim.inject(
        Fault(
            kind="algorithm_error", attempt=1, after_training_min=20, host=2, log_lines=(XID,), bad_host=True
        )
    )
    training_job(sim, "job-a01", keep_alive=600)
    return ended(sim, "job-a01")


@pytest.mark.claim(
    "After a fault that singles out a host the replacement starts cold at once (it asks for a volume size 1 GB off the one the bad host's warm pool has, so SageMaker cannot match that pool) and asks SageMaker's infra check first (modelled as 5-30 extra minutes, since AWS publishes no duration), unless the host printed the contract's fingerprint line"
)
def test_the_infra_check_adds_its_time_to_starting_and_is_shown_by_describe(s3: Any) -> None:
    sim = make_sim(s3)
    plain = training_job(sim, "job-p01", run="r2") - sim.job("job-p01").created_ms
    sim.create_training_job(**checked("job-c01", run="r3"))
    run_until(sim, lambda: sim.job("job-c01").training_started_ms is not None)
    job = sim.job("job-c01")
    assert job.training_started_ms - job.created_ms == plain + CHECK_S * 1000
    described = sim.describe_training_job(TrainingJobName="job-c01")
    assert described["InfraCheckConfig"] == {"EnableInfraCheck": True}


def test_warm_pool_instances_keep_their_serials_and_the_check_replaces_a_bad_host(s3: Any) -> None:
    sim = make_sim(s3)
    bad_pool(sim)
    first = fingerprint(sim, "job-a01", 2)
    # without the check: the same instances, the same GPUs, the bad host again
    training_job(sim, "job-a02", attempt=2, keep_alive=600)
    assert sim.job("job-a02").warm_pool_used and fingerprint(sim, "job-a02", 2) == first
    assert fingerprint(sim, "job-a02", 1) == fingerprint(sim, "job-a01", 1)
    ended(sim, "job-a02")  # fails again (5 min in); its pool is kept, bad host included
    # with the check: host 2 is found and replaced before Training; the job trains on
    sim.create_training_job(**checked("job-a03", attempt=3, keep_alive=600))
    run_until(sim, lambda: sim.job("job-a03").training_started_ms is not None)
    job = sim.job("job-a03")
    assert job.warm_pool_used and job._inherited == {} and fingerprint(sim, "job-a03", 2) != first
    run_until(sim, lambda: sim.clock.now_ms >= (job.training_started_ms or 0) + 30 * MIN)
    assert job.status == "InProgress"


def test_the_check_set_to_fail_fails_the_job_in_starting_naming_the_host(s3: Any) -> None:
    sim = make_sim(s3, on_bad_host="fail")
    bad_pool(sim)
    sim.create_training_job(**checked("job-a02", attempt=2, keep_alive=600))
    ended(sim, "job-a02")
    job = sim.job("job-a02")
    assert job.training_started_ms is None and job.status == "Failed"
    assert job.failure_reason == INFRA_CHECK_FAILURE_REASON.format(host=2)


def test_the_check_by_default_misses_a_bad_host_or_fails_the_job_never_replaces_it(s3: Any) -> None:
    """AWS documents neither what the infra check finds nor what it does then: by default (the
    unkind case) it misses a bad host the job meets half the time, drawn per job and host, and a
    host it finds fails the job in Starting; a fault or the account may pin either."""
    defaults = StartupTimes()
    assert (defaults.infra_check_miss_rate, defaults.infra_check_on_bad_host) == (0.5, "fail")
    sim = SimSageMaker(
        VirtualClock(),
        s3_client=s3,
        startup=StartupTimes(infra_check_min_s=CHECK_S, infra_check_max_s=CHECK_S),
    )
    outcomes = []
    for n in range(1, 21):
        run = f"r{n}"
        sim.set_profile(run, JobProfile(total_steps=10_000))
        sim.inject(Fault(kind="hardware", run=run, attempt=1, after_training_min=20, host=2, returns_cold=1))
        training_job(sim, f"job{n}-a01", run=run)
        ended(sim, f"job{n}-a01")
        sim.create_training_job(**checked(f"job{n}-a02", run=run, attempt=2))  # the lemon comes back
        run_until(
            sim,
            lambda n=n: sim.job(f"job{n}-a02").is_terminal or sim.job(f"job{n}-a02").secondary == "Training",
        )
        job = sim.job(f"job{n}-a02")
        if job.status == "Failed":
            assert job.training_started_ms is None
            assert job.failure_reason == INFRA_CHECK_FAILURE_REASON.format(host=2)
            outcomes.append("fail")
        else:
            assert job._inherited.get(2) is not None  # trains with the bad host: the check missed it
            outcomes.append("miss")
    assert 5 <= outcomes.count("miss") <= 15 and outcomes.count("fail") == 20 - outcomes.count("miss")
    missed = [(name, host) for _, name, kind, host in sim.fault_log if kind == "infra_check_missed"]
    assert len(missed) == outcomes.count("miss") and all(host == 2 for _, host in missed)


def test_a_lemon_comes_back_on_new_instances_and_an_intermittent_one_passes_the_check(s3: Any) -> None:
    sim = make_sim(s3)
    sim.inject(
        Fault(
            kind="hardware", attempt=1, after_training_min=20, host=2, returns_cold=1, infra_check_finds=False
        )
    )
    training_job(sim, "job-a01")
    ended(sim, "job-a01")
    bad = fingerprint(sim, "job-a01", 2)
    sim.create_training_job(**checked("job-a02", attempt=2))
    run_until(sim, lambda: sim.job("job-a02").training_started_ms is not None)
    assert not sim.job("job-a02").warm_pool_used and fingerprint(sim, "job-a02", 2) == bad
    assert ended(sim, "job-a02") and sim.job("job-a02").ended_reason == "hardware"  # it fails again
    training_job(sim, "job-a03", attempt=3)  # returns_cold 1: not a second time
    assert fingerprint(sim, "job-a03", 2) != bad and sim.job("job-a03")._inherited == {}


def test_a_job_refused_for_capacity_never_had_instances_so_a_lemon_waits_for_the_next_one(s3: Any) -> None:
    """A job that fails for capacity got no instances: the lemon cannot have come back on it, and
    comes back on the next job that does get new instances."""
    sim = make_sim(s3)
    sim.inject(Fault(kind="hardware", attempt=1, after_training_min=20, host=2, returns_cold=1))
    training_job(sim, "job-a01")
    ended(sim, "job-a01")
    bad = fingerprint(sim, "job-a01", 2)
    sim.inject(Fault(kind="capacity", attempt=2, duration_min=5))
    sim.create_training_job(**request("job-a02", attempt=2))
    assert ended(sim, "job-a02") and sim.job("job-a02").ended_reason == "capacity"
    assert sim.job("job-a02")._inherited == {}
    training_job(sim, "job-a03", attempt=3)
    assert fingerprint(sim, "job-a03", 2) == bad  # the lemon's one return


@pytest.mark.parametrize(
    ("transport", "debug", "expected"),
    [
        ("socket", "INFO", "NCCL INFO Using network Socket"),
        ("efa", "INFO", "NCCL INFO Using network AWS Libfabric"),
        ("socket", "WARN", None),
        ("socket", None, None),
    ],
    ids=[
        "socket with debug info",
        "efa with debug info",
        "socket with debug warn",
        "socket without nccl debug",
    ],
)
def test_nccl_prints_its_network_choice_only_with_nccl_debug_info(
    s3: Any, transport: str, debug: str | None, expected: str | None
) -> None:
    sim = make_sim(s3, nccl_transport=transport)
    req = request("job-n01")
    if debug is not None:
        req["Environment"] = {**req.get("Environment", {}), "NCCL_DEBUG": debug}
    sim.create_training_job(**req)
    run_until(sim, lambda: sim.job("job-n01").training_started_ms is not None)
    for host in (1, 2):
        network = [t for t in sim.log_tail("job-n01", host, 50) if "Using network" in t]
        assert [expected in t for t in network] == ([True] if expected else [])


def test_each_host_prints_its_own_address_and_a_fault_can_name_a_peer_by_it(s3: Any) -> None:
    """NCCL_DEBUG=INFO: each host prints 'NCCL INFO Bootstrap : Using eth0:<ip><0>' at its first
    collective, an address of its own; a fault's line names its host by that address ({host_ip})."""
    from drill.sim.hosts import host_address

    sim = make_sim(s3)
    sim.inject(
        Fault(
            kind="algorithm_error",
            attempt=1,
            after_training_min=20,
            host=2,
            log_host=1,
            log_lines=(
                "NCCL WARN Net : Call to recv from {host_ip}<58355> failed : Connection reset by peer",
            ),
        )
    )
    req = request("job-i01")
    req["Environment"] = {**req.get("Environment", {}), "NCCL_DEBUG": "INFO"}
    sim.create_training_job(**req)
    ended(sim, "job-i01")
    job = sim.job("job-i01")
    addresses = {host_address(job, h) for h in (1, 2)}
    assert len(addresses) == 2 and not any(a.endswith(("1.23", "2.23")) for a in addresses)
    for host in (1, 2):
        boot = [t for t in sim.log_tail("job-i01", host, 80) if "Bootstrap : Using" in t]
        assert boot == [
            f"algo-{host}:{90 + host}:{180 + host} [0] NCCL INFO Bootstrap : Using eth0:{host_address(job, host)}<0>"
        ]
    (named,) = [t for t in sim.log_tail("job-i01", 1, 80) if "Call to recv" in t]
    assert f"from {host_address(job, 2)}<58355>" in named


def test_a_host_that_runs_out_of_ram_shows_its_memory_climbing_before_the_kill(s3: Any) -> None:
    sim = make_sim(s3)
    sim.inject(
        Fault(
            kind="algorithm_error",
            attempt=1,
            after_training_min=30,
            host=2,
            memory_full=True,
            log_lines=("Killed",),
        )
    )
    training_job(sim, "job-m01")
    end = ended(sim, "job-m01")
    job = sim.job("job-m01")

    def peak(host: int, start: int, stop: int) -> float:
        points = sim.metric_datapoints(
            "/aws/sagemaker/TrainingJobs",
            "MemoryUtilization",
            {"Host": f"job-m01/algo-{host}"},
            start,
            stop,
            60,
            "Maximum",
        )
        return max(v for _, v in points)

    assert peak(2, end - 2 * MIN, end) >= 98.0  # the minute of the kill
    assert peak(2, end - 30 * MIN, end - 10 * MIN) < 60.0  # before the climb
    assert peak(1, end - 10 * MIN, end) < 60.0  # its peers did not run out
    assert job._memory_full == (2, end)
