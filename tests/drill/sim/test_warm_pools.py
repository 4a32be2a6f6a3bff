"""Warm pools of the simulated SageMaker as AWS documents them (drill/sim/warm_pools.py cites the
pages; docs/fidelity.md has one row each)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from drill.clock import VirtualClock
from drill.sim.model import Fault, JobProfile
from drill.sim.sagemaker import SimSageMaker
from drill.sim.warm_pools import WarmPoolSettings
from tests.drill.sim.builders import BUCKET, ITYPE, MIN, code_of, drain, request, run_until, training_job

POOL_AFTER_S = 120  # end -> Available in these tests (a fixed draw)
ALGORITHM_NCCL = "[E ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout"
XID = "NVRM: Xid (PCI:0000:10:1c): 79, GPU has fallen off the bus."


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def s3(aws: None) -> Any:
    client = boto3.client("s3", region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    return client


def make_sim(clock: VirtualClock, s3: Any, **settings: Any) -> SimSageMaker:
    options: dict[str, Any] = {"quotas": {ITYPE: 8}, "available_after_s": (POOL_AFTER_S, POOL_AFTER_S)}
    options.update(settings)
    return SimSageMaker(clock, s3_client=s3, warm_pools=WarmPoolSettings(**options))


@pytest.fixture
def pools(clock: VirtualClock, s3: Any) -> SimSageMaker:
    sim = make_sim(clock, s3)
    sim.set_profile("r1", JobProfile(total_steps=100))
    return sim


def status(sim: SimSageMaker, name: str) -> dict[str, Any] | None:
    return sim.describe_training_job(TrainingJobName=name).get("WarmPoolStatus")


def ended(sim: SimSageMaker, name: str) -> int:
    run_until(sim, lambda: sim.job(name).is_terminal)
    ended_ms = sim.job(name).ended_ms
    assert ended_ms is not None
    return ended_ms


def at(sim: SimSageMaker, ms: int) -> None:
    drain(sim, until_ms=ms)


# --- when a pool is Available ---------------------------------------------------------------------


@pytest.mark.claim(
    "the drill draws 0-10 minutes and shows nothing, and a resume waits at most 5 minutes for its pool (a later pool is not waited for: the resume starts cold)"
)
def test_pool_is_available_only_some_time_after_the_end_and_shows_no_status_before(
    pools: SimSageMaker,
) -> None:
    pools.create_training_job(**request("job-a01", keep_alive=600))
    assert status(pools, "job-a01") == {"Status": "InUse"}
    end = ended(pools, "job-a01")
    assert status(pools, "job-a01") is None  # AWS says nothing about this stretch: no status at all
    at(pools, end + POOL_AFTER_S * 1000 - 1)
    assert status(pools, "job-a01") is None
    at(pools, end + POOL_AFTER_S * 1000)
    assert status(pools, "job-a01") == {"Status": "Available", "ResourceRetainedBillableTimeInSeconds": 0}
    at(pools, end + POOL_AFTER_S * 1000 + 90_000)
    assert status(pools, "job-a01") == {"Status": "Available", "ResourceRetainedBillableTimeInSeconds": 90}


@pytest.mark.claim("the drill draws 0-10 min")
def test_the_time_to_available_is_drawn_per_pool_within_the_range(clock: VirtualClock, s3: Any) -> None:
    """AWS publishes no number: by default the delay is drawn in 0-10 minutes, a range past the
    5 minutes a resume waits for its pool (domain/capacity/warm_pools.py POOL_WAIT_MS)."""
    from sagewarden.domain.capacity.warm_pools import POOL_WAIT_MS

    sim = make_sim(clock, s3, available_after_s=WarmPoolSettings().available_after_s)
    sim.set_profile("r1", JobProfile(total_steps=50))
    delays = []
    for n in range(1, 13):
        sim.create_training_job(**request(f"job-a{n:02d}", attempt=n, keep_alive=60, count=1))
        end = ended(sim, f"job-a{n:02d}")
        pool = sim.warm_pools.pool_of(f"job-a{n:02d}")
        assert pool is not None
        delays.append(pool.settles_ms - end)
        at(sim, end + 12 * MIN)  # settled and expired before the next one
    assert all(0 <= d <= 600_000 for d in delays) and len(set(delays)) > 1
    assert any(d > POOL_WAIT_MS for d in delays) and any(d < POOL_WAIT_MS for d in delays)


@pytest.mark.claim(
    "SageMaker keeps one after `Completed`, `Stopped`, and an `AlgorithmError` or `ClientError`"
)
@pytest.mark.parametrize(
    ("ending", "kept"),
    [
        ("completed", True),
        ("stopped", True),
        ("algorithm_error", True),
        ("client_error", True),
        ("internal_error", False),
        ("hardware", False),
    ],
    ids=[
        "completed keeps it",
        "stopped keeps it",
        "an algorithm error keeps it",
        "a client error keeps it",
        "an internal error loses it",
        "a hardware fault loses it",
    ],
)
def test_which_endings_keep_a_pool(clock: VirtualClock, s3: Any, ending: str, kept: bool) -> None:
    sim = make_sim(clock, s3)
    sim.set_profile("r1", JobProfile(total_steps=1_000))
    started = training_job(sim, "job-a01", keep_alive=600)
    if ending == "stopped":
        drain(sim, until_ms=started + 10 * MIN)
        sim.stop_training_job(TrainingJobName="job-a01")
    elif ending == "client_error":
        sim.inject(
            Fault(
                kind="algorithm_error",
                after_training_min=10,
                failure_reason="ClientError: Data download failed: access denied to s3://bucket/data",
            )
        )
    elif ending != "completed":
        sim.inject(Fault(kind=ending, after_training_min=10))
    end = ended(sim, "job-a01")
    at(sim, end + POOL_AFTER_S * 1000)
    want = {"Status": "Available" if kept else "Terminated", "ResourceRetainedBillableTimeInSeconds": 0}
    assert status(sim, "job-a01") == want


def test_a_job_that_never_had_its_instances_keeps_no_pool(clock: VirtualClock, s3: Any) -> None:
    sim = make_sim(clock, s3)
    sim.inject(Fault(kind="capacity", duration_min=10))
    sim.create_training_job(**request("job-a01", keep_alive=600))
    ended(sim, "job-a01")
    assert sim.job("job-a01").status == "Failed"
    assert status(sim, "job-a01") == {"Status": "Terminated", "ResourceRetainedBillableTimeInSeconds": 0}


# --- reuse: the same instances ------------------------------------------------------------------------


def test_a_matching_job_reuses_the_pool_and_starts_in_seconds(pools: SimSageMaker) -> None:
    pools.create_training_job(**request("job-a01", keep_alive=600))
    end = ended(pools, "job-a01")
    at(pools, end + POOL_AFTER_S * 1000 + 60_000)
    t = pools.clock.now_ms
    started = training_job(pools, "job-a02", attempt=2, keep_alive=600)
    assert pools.job("job-a02").warm_pool_used and started - t == 35_000
    assert status(pools, "job-a01") == {
        "Status": "Reused",
        "ResourceRetainedBillableTimeInSeconds": 60,
        "ReusedByJob": "job-a02",  # the job's name (the API's pattern), not its ARN
    }
    assert status(pools, "job-a02") == {"Status": "InUse"}
    cold = training_job(pools, "job-a03", attempt=3, keep_alive=600)  # the pool moved on: none left
    assert cold - pools.job("job-a03").created_ms == 480_000


@pytest.mark.claim(
    "We assume a job can take only a pool that is `Available` when it is created; after a bad host the replacement does not rely on it (it asks for another volume size, which the matching rule never gives that pool; the matching rule itself is only proven on a real account)."
)
def test_a_job_created_before_the_pool_is_available_starts_cold(pools: SimSageMaker) -> None:
    pools.create_training_job(**request("job-a01", keep_alive=600))
    ended(pools, "job-a01")
    started = training_job(pools, "job-a02", attempt=2, keep_alive=600)
    assert not pools.job("job-a02").warm_pool_used
    assert started - pools.job("job-a02").created_ms == 480_000


@pytest.mark.parametrize(
    "change",
    [
        {"count": 1},
        {"itype": "ml.p5.48xlarge"},
        {"volume": 200},
        {"role": "arn:aws:iam::123456789012:role/other"},
    ],
    ids=[
        "another instance count",
        "another instance type",
        "another volume size",
        "another role",
    ],
)
def test_only_a_job_matching_role_instances_and_volume_takes_the_pool(
    pools: SimSageMaker, change: dict[str, Any]
) -> None:
    pools.create_training_job(**request("job-a01", keep_alive=600))
    end = ended(pools, "job-a01")
    at(pools, end + POOL_AFTER_S * 1000)
    req = request(
        "job-a02", attempt=2, keep_alive=600, count=change.get("count", 2), itype=change.get("itype", ITYPE)
    )
    if "volume" in change:
        req["ResourceConfig"]["VolumeSizeInGB"] = change["volume"]
    if "role" in change:
        req["RoleArn"] = change["role"]
    pools.create_training_job(**req)
    assert not pools.job("job-a02").warm_pool_used
    assert (status(pools, "job-a01") or {}).get("Status") == "Available"


@pytest.mark.claim(
    "the replacement must never run on that pool (it would meet the same dead host), and it does not wait for it either"
)
@pytest.mark.claim(
    "a bad host (`dead_host`, `hardware`, or a fault with `bad_host: true`) fails the next job on it again `bad_host_refire_min` into its Training"
)
@pytest.mark.claim(
    "all under the faithful simulated account: metric datapoints 30 s to 3 min late, log lines 1 s to 3 min late, warm pools that keep their hosts, AWS's rates"
)
def test_a_dead_host_kept_in_the_pool_hangs_the_next_job_on_it_again(pools: SimSageMaker) -> None:
    pools.set_profile("r1", JobProfile(total_steps=10_000))
    started = training_job(pools, "job-a01", keep_alive=600, count=4)
    pools.inject(Fault(kind="dead_host", attempt=1, after_training_min=30, host=3))
    drain(pools, until_ms=started + 40 * MIN)
    pools.stop_training_job(TrainingJobName="job-a01")  # a supervisor stops the hung job
    end = ended(pools, "job-a01")
    at(pools, end + POOL_AFTER_S * 1000)
    second = training_job(pools, "job-a02", attempt=2, keep_alive=600, count=4)
    assert pools.job("job-a02").warm_pool_used
    drain(pools, until_ms=second + 10 * MIN)
    assert [(job, kind, host) for _, job, kind, host in pools.fault_log] == [
        ("job-a01", "dead_host", 3),
        ("job-a02", "dead_host", 3),  # the same instance, 5 minutes into Training
    ]
    assert pools.fault_log[-1][0] == second + 5 * MIN
    assert pools.job("job-a02")._phase == "dead_host"


@pytest.mark.claim(
    "a bad host (`dead_host`, `hardware`, or a fault with `bad_host: true`) fails the next job on it again `bad_host_refire_min` into its Training"
)
def test_a_crash_of_a_bad_gpu_comes_back_on_the_pool_and_a_cold_job_is_spared(pools: SimSageMaker) -> None:
    pools.set_profile("r1", JobProfile(total_steps=10_000))
    pools.inject(
        Fault(
            kind="algorithm_error", attempt=1, after_training_min=20, host=2, log_lines=(XID,), bad_host=True
        )
    )
    training_job(pools, "job-a01", keep_alive=600)
    end = ended(pools, "job-a01")
    assert (pools.job("job-a01").failure_reason or "").startswith("AlgorithmError")  # a pool is kept
    at(pools, end + POOL_AFTER_S * 1000)
    training_job(pools, "job-a02", attempt=2, keep_alive=600)
    ended(pools, "job-a02")
    assert pools.job("job-a02").warm_pool_used and pools.job("job-a02").status == "Failed"
    assert XID in pools.log_tail("job-a02", 2, 5)
    # job-a02 failed with an AlgorithmError again: its pool (the same instances) is kept; released
    # before a cold job, nothing comes back
    at(pools, pools.clock.now_ms + POOL_AFTER_S * 1000)
    pools.update_training_job(TrainingJobName="job-a02", ResourceConfig={"KeepAlivePeriodInSeconds": 0})
    started = training_job(pools, "job-a03", attempt=3, keep_alive=600)
    drain(pools, until_ms=started + 60 * MIN)
    assert not pools.job("job-a03").warm_pool_used and pools.job("job-a03").status == "InProgress"


# --- release and expiry ---------------------------------------------------------------------------------


@pytest.mark.claim(
    "which AWS accepts only while the pool is `Available`) and released again each minute until it is gone"
)
def test_release_is_refused_until_the_pool_is_available_then_terminates_it(pools: SimSageMaker) -> None:
    pools.create_training_job(**request("job-a01", keep_alive=600))
    running = {"KeepAlivePeriodInSeconds": 0}
    with pytest.raises(ClientError) as err:
        pools.update_training_job(TrainingJobName="job-a01", ResourceConfig=running)
    assert code_of(err)[0] == "ValidationException"  # not ended yet
    end = ended(pools, "job-a01")
    with pytest.raises(ClientError) as err:
        pools.update_training_job(TrainingJobName="job-a01", ResourceConfig=running)
    assert code_of(err)[0] == "ValidationException"  # ended, but the pool is not Available yet
    at(pools, end + POOL_AFTER_S * 1000 + 30_000)
    pools.update_training_job(TrainingJobName="job-a01", ResourceConfig={"KeepAlivePeriodInSeconds": 0})
    assert status(pools, "job-a01") == {"Status": "Terminated", "ResourceRetainedBillableTimeInSeconds": 30}
    with pytest.raises(ClientError):  # terminated: nothing to update any more
        pools.update_training_job(TrainingJobName="job-a01", ResourceConfig=running)
    started = training_job(pools, "job-a02", attempt=2, keep_alive=600)
    assert started - pools.job("job-a02").created_ms == 480_000


def test_an_unclaimed_pool_expires_keep_alive_after_it_became_available(pools: SimSageMaker) -> None:
    pools.create_training_job(**request("job-a01", keep_alive=600))
    end = ended(pools, "job-a01")
    available = end + POOL_AFTER_S * 1000
    at(pools, available + 600_000 - 1)
    assert (status(pools, "job-a01") or {}).get("Status") == "Available"
    at(pools, available + 600_000)
    assert status(pools, "job-a01") == {"Status": "Terminated", "ResourceRetainedBillableTimeInSeconds": 600}


# --- quota -----------------------------------------------------------------------------------------------


@pytest.mark.claim(
    "The warm-pool quota is 0 per instance type by default, and then SageMaker simply keeps no pool"
)
@pytest.mark.claim(
    "The warm-pool quota per instance type is AWS's default, 0, unless named: no pool is kept."
)
def test_without_warm_pool_quota_the_job_runs_and_keeps_no_pool_without_an_error(
    clock: VirtualClock, s3: Any
) -> None:
    sim = make_sim(clock, s3, quotas={})  # AWS's default warm-pool quota: 0
    sim.set_profile("r1", JobProfile(total_steps=100))
    sim.create_training_job(**request("job-a01", keep_alive=600))  # accepted: no error, no warning
    end = ended(sim, "job-a01")
    assert sim.job("job-a01").status == "Completed"
    at(sim, end + POOL_AFTER_S * 1000)
    assert status(sim, "job-a01") == {"Status": "Terminated", "ResourceRetainedBillableTimeInSeconds": 0}
    started = training_job(sim, "job-a02", attempt=2, keep_alive=600)
    assert started - sim.job("job-a02").created_ms == 480_000


def test_a_pool_that_does_not_fit_the_quota_is_not_kept(clock: VirtualClock, s3: Any) -> None:
    sim = make_sim(clock, s3, quotas={ITYPE: 3})
    sim.set_profile("r1", JobProfile(total_steps=100))
    sim.set_profile("r2", JobProfile(total_steps=100))
    sim.create_training_job(**request("job-a01", keep_alive=600))
    sim.create_training_job(**request("other-a01", run="r2", run_id="01OTHER", keep_alive=600))
    ended(sim, "job-a01")
    ended(sim, "other-a01")
    at(sim, sim.clock.now_ms + POOL_AFTER_S * 1000)
    assert sorted((status(sim, n) or {}).get("Status", "") for n in ("job-a01", "other-a01")) == [
        "Available",
        "Terminated",
    ]


def test_idle_pools_count_towards_the_training_job_quota(clock: VirtualClock, s3: Any) -> None:
    sim = SimSageMaker(
        clock,
        s3_client=s3,
        quotas={ITYPE: 3},
        warm_pools=WarmPoolSettings(quotas={ITYPE: 8}, available_after_s=(0, 0)),
    )
    sim.set_profile("r1", JobProfile(total_steps=100))
    sim.create_training_job(**request("job-a01", keep_alive=600))
    end = ended(sim, "job-a01")
    at(sim, end + 1)
    other = request("job-a02", attempt=2, keep_alive=600)
    other["ResourceConfig"]["VolumeSizeInGB"] = 200  # does not match the pool: needs new instances
    with pytest.raises(ClientError) as err:
        sim.create_training_job(**other)
    code, message = code_of(err)
    assert code == "ResourceLimitExceeded" and "current utilization of 2 Instances" in message
    sim.create_training_job(**request("job-a03", attempt=3, keep_alive=600))  # takes the pool: fits
    assert sim.job("job-a03").warm_pool_used


@pytest.mark.claim(
    "a launch refused for quota (`ResourceLimitExceeded`) while such a pool of its instance type is kept -- idle pool instances count towards the training-job quotas -- waits until that pool is gone, not a backoff"
)
def test_an_ended_jobs_instances_count_towards_the_quota_before_its_pool_is_available(
    clock: VirtualClock, s3: Any
) -> None:
    """AWS does not say when an ended job's instances, kept for its pool, stop counting: from its
    end (the unkind reading). A job launched at once on other instances is refused while the pool
    is settling; a job whose ending keeps no pool leaves nothing counted."""
    sim = SimSageMaker(
        clock,
        s3_client=s3,
        quotas={ITYPE: 3},
        warm_pools=WarmPoolSettings(quotas={ITYPE: 8}, available_after_s=(POOL_AFTER_S, POOL_AFTER_S)),
    )
    sim.set_profile("r1", JobProfile(total_steps=100))
    sim.create_training_job(**request("job-a01", keep_alive=600))
    end = ended(sim, "job-a01")
    at(sim, end + 1_000)
    assert status(sim, "job-a01") is None  # not Available yet
    other = request("job-a02", attempt=2, keep_alive=600)
    other["ResourceConfig"]["VolumeSizeInGB"] = 200
    with pytest.raises(ClientError) as err:
        sim.create_training_job(**other)
    assert code_of(err)[0] == "ResourceLimitExceeded"
    none_kept = SimSageMaker(clock, s3_client=s3, quotas={ITYPE: 3}, warm_pools=WarmPoolSettings(quotas={}))
    none_kept.set_profile("r1", JobProfile(total_steps=100))
    none_kept.create_training_job(**request("job-b01", keep_alive=600))
    at(none_kept, ended(none_kept, "job-b01") + 1_000)
    none_kept.create_training_job(**request("job-b02", attempt=2, keep_alive=600))  # nothing held


# --- spot ------------------------------------------------------------------------------------------------


@pytest.mark.claim("Managed spot training gets no pool (SageMaker refuses a spot job that asks for one)")
@pytest.mark.claim(
    "A spot job that asks for a pool is refused in the drill; AWS documents the rule, not the error."
)
def test_managed_spot_with_a_keep_alive_is_refused(pools: SimSageMaker) -> None:
    spot = request("job-a01", keep_alive=600)
    spot["EnableManagedSpotTraining"] = True
    spot["StoppingCondition"]["MaxWaitTimeInSeconds"] = 86_400
    with pytest.raises(ClientError) as err:
        pools.create_training_job(**spot)
    code, message = code_of(err)
    assert code == "ValidationException" and "spot" in message


def test_a_spot_job_never_takes_a_pool(pools: SimSageMaker) -> None:
    pools.create_training_job(**request("job-a01", keep_alive=600))
    end = ended(pools, "job-a01")
    at(pools, end + POOL_AFTER_S * 1000)
    spot = request("job-a02", attempt=2)
    spot["EnableManagedSpotTraining"] = True
    spot["StoppingCondition"]["MaxWaitTimeInSeconds"] = 86_400
    pools.create_training_job(**spot)
    assert not pools.job("job-a02").warm_pool_used
    assert status(pools, "job-a02") is None


def test_the_state_change_event_carries_no_warm_pool_status(clock: VirtualClock, s3: Any) -> None:
    """The EventBridge schema of "SageMaker Training Job State Change" has no WarmPoolStatus:
    only DescribeTrainingJob shows it (the supervisor's sweep reads it there)."""
    events: list[dict[str, Any]] = []
    sim = SimSageMaker(
        clock, s3_client=s3, emit=events.append, warm_pools=WarmPoolSettings(quotas={ITYPE: 8})
    )
    sim.set_profile("r1", JobProfile(total_steps=100))
    sim.create_training_job(**request("job-a01", keep_alive=600))
    end = ended(sim, "job-a01")
    at(sim, end + 11 * MIN)  # past the default range of the delay to Available
    assert status(sim, "job-a01") is not None
    assert events and all("WarmPoolStatus" not in e["detail"] for e in events)
