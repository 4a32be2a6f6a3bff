"""Warm pools of the simulated SageMaker: endings that keep a pool, matching, quota, release, expiry,
billing; settled lazily (`WarmPools.settle`). Why: docs/fidelity.md (one row each)."""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from typing import Any

from drill.sim.hosts import serials
from drill.sim.model import Fault, SimJob
from drill.sim.texts import client_error

AVAILABLE = "Available"
TERMINATED = "Terminated"
REUSED = "Reused"
IN_USE = "InUse"
_DELAY_SALT = 0x57A2_4D00_1F00_C0DE


@dataclass
class WarmPoolSettings:
    """How the simulated account keeps warm pools (a scenario's ``account.warm_pools``)."""

    # instances of each type the account may keep warm (its "<type> for training warm pool usage"
    # quotas); a type not named has AWS's default, 0: jobs asking for a pool run without one
    quotas: dict[str, int] = field(default_factory=dict)
    # how long after a job's end its pool becomes Available (AWS publishes no number: the
    # adversarial range, drawn per pool from the seed; up to 10 minutes, past the 5 minutes a
    # resume waits for its pool, domain/warm_pools.POOL_WAIT_MS)
    available_after_s: tuple[int, int] = (0, 600)
    # a bad host kept in a pool fails the next job on it this many minutes into its Training
    bad_host_refire_min: float = 5.0

    def __post_init__(self) -> None:
        low, high = self.available_after_s
        if not 0 <= low <= high:
            raise ValueError("available_after_s must be [low, high] with 0 <= low <= high")
        if any(n < 0 for n in self.quotas.values()):
            raise ValueError("warm-pool quotas must not be negative")


@dataclass
class WarmPool:
    """The instances one ended job left (or would have left: ``kept`` False)."""

    source_job: str
    instance_type: str
    instance_count: int
    match: tuple[Any, ...]
    keep_alive_s: int
    settles_ms: int  # when it becomes Available (or is known not kept: Terminated)
    kept: bool  # the ending allows a pool (before the quota is looked at)
    bad_hosts: dict[int, Fault]
    serials: dict[int, str] = field(default_factory=dict)  # the instances' GPU serials, per host
    status: str | None = None  # None until it settles
    available_ms: int | None = None
    gone_ms: int | None = None  # when it stopped being Available (released, expired, reused)
    reused_by: str | None = None

    def expires_ms(self) -> int | None:
        if self.available_ms is None:
            return None
        return self.available_ms + self.keep_alive_s * 1000


def match_key(request: dict[str, Any]) -> tuple[Any, ...]:
    """What must be identical for a job to take a pool ("Matching training jobs")."""
    rc = request.get("ResourceConfig") or {}
    vpc = request.get("VpcConfig") or {}
    return (
        request.get("RoleArn"),
        rc.get("InstanceType"),
        rc.get("InstanceCount"),
        rc.get("VolumeKmsKeyId"),
        rc.get("VolumeSizeInGB"),
        tuple(sorted(vpc.get("SecurityGroupIds") or ())),
        tuple(sorted(vpc.get("Subnets") or ())),
        bool(request.get("EnableInterContainerTrafficEncryption", False)),
        bool(request.get("EnableNetworkIsolation", False)),
    )


def keep_alive_of(request: dict[str, Any]) -> int:
    return int((request.get("ResourceConfig") or {}).get("KeepAlivePeriodInSeconds") or 0)


def is_spot(request: dict[str, Any]) -> bool:
    return bool(request.get("EnableManagedSpotTraining"))


def ending_keeps_pool(job: SimJob) -> bool:
    """Completed, Stopped once the cluster was up, or Failed with an algorithm or client error."""
    if job.provisioned_ms is None:
        return False
    if job.status in ("Completed", "Stopped"):
        return True
    reason = job.failure_reason or ""
    return job.status == "Failed" and reason.startswith(("AlgorithmError", "ClientError"))


class WarmPools:
    """Every pool the account's jobs left, settled in time order as the API is called."""

    def __init__(self, settings: WarmPoolSettings) -> None:
        self.settings = settings
        self._by_job: dict[str, WarmPool] = {}
        self._pending: list[WarmPool] = []  # not settled yet, by settles_ms
        self._available: list[WarmPool] = []  # Available now (as of the last settle), oldest first

    # -- time ---------------------------------------------------------------------------------
    def settle(self, now: int) -> None:
        """Bring every pool up to ``now``: expiries, and pools becoming Available (or not kept,
        when the ending allows none or the warm-pool quota has no room), in time order."""
        while self._pending and self._pending[0].settles_ms <= now:
            pool = self._pending.pop(0)
            self._expire(pool.settles_ms)
            fits = self._idle(pool.instance_type) + pool.instance_count <= self.settings.quotas.get(
                pool.instance_type, 0
            )
            if pool.kept and fits:
                pool.status, pool.available_ms = AVAILABLE, pool.settles_ms
                self._available.append(pool)
            else:
                pool.status, pool.gone_ms = TERMINATED, pool.settles_ms
        self._expire(now)

    def _expire(self, t: int) -> None:
        for pool in list(self._available):
            expires = pool.expires_ms()
            if expires is not None and expires <= t:
                self._end(pool, TERMINATED, expires)

    def _end(self, pool: WarmPool, status: str, t: int) -> None:
        pool.status, pool.gone_ms = status, t
        self._available.remove(pool)

    def _idle(self, itype: str) -> int:
        return sum(p.instance_count for p in self._available if p.instance_type == itype)

    def idle_instances(self, itype: str | None = None) -> int:
        """Instances held by pools (of one type, or all): they count towards the training-job
        quotas ("All warm pool instance usage counts toward your SageMaker training resource
        limit"). Available pools, and the instances of ended jobs whose pool is not Available yet
        but will be kept (the ending keeps one and the warm-pool quota has room): AWS does not say
        when an ended job's instances stop counting, so they count from its end (the unkind
        reading: a job launched at once, before the pool is Available, may be refused for it)."""
        held = sum(p.instance_count for p in self._available if itype is None or p.instance_type == itype)
        for p in self._pending:
            room = self.settings.quotas.get(p.instance_type, 0) - self._idle(p.instance_type)
            if p.kept and (itype is None or p.instance_type == itype) and p.instance_count <= room:
                held += p.instance_count
        return held

    # -- a job starts ------------------------------------------------------------------------------
    def candidate(self, request: dict[str, Any]) -> WarmPool | None:
        """The Available pool a new job with this request would run on (spot jobs take none)."""
        if is_spot(request):
            return None
        key = match_key(request)
        return next((p for p in self._available if p.match == key), None)

    def take(self, pool: WarmPool, job: SimJob, now: int) -> None:
        self._end(pool, REUSED, now)
        pool.reused_by = job.name
        job.warm_pool_used = True
        job._inherited = dict(pool.bad_hosts)
        job._bad_hosts.update(pool.bad_hosts)  # the same instances: still bad
        job._serials.update(pool.serials)  # ... with the same GPUs

    def refires(self, job: SimJob) -> list[Fault]:
        """The faults of the bad hosts a job met on the pool it took, as they fire in it."""
        after = self.settings.bad_host_refire_min
        return [
            dataclasses.replace(
                f,
                run=None,
                attempt=None,
                instance_type=None,
                host=host,
                after_training_min=after,
                after_run_training_min=None,
                once=True,
                restart_capacity_min=None,
                returns_cold=0,
                during_save=False,
                half_written_checkpoint=False,
                recur_after_training_min=None,
                recur_from_next_start=False,
            )
            for host, f in sorted(job._inherited.items())
        ]

    # -- a job ends ------------------------------------------------------------------------------
    def leave(self, job: SimJob, t: int) -> None:
        """The job ended at ``t``: the pool it leaves settles a drawn while later."""
        keep = keep_alive_of(job.request)
        if keep <= 0 or job.provisioned_ms is None:
            return
        low, high = self.settings.available_after_s
        delay_s = random.Random(job._salt ^ _DELAY_SALT).randint(low, high)
        pool = WarmPool(
            source_job=job.name,
            instance_type=job.instance_type,
            instance_count=job.instance_count,
            match=match_key(job.request),
            keep_alive_s=keep,
            settles_ms=t + delay_s * 1000,
            kept=ending_keeps_pool(job),
            bad_hosts=dict(job._bad_hosts),
            serials={h: serials(job, h) for h in range(1, job.instance_count + 1)},
        )
        job._pool = pool
        self._by_job[job.name] = pool
        self._pending.append(pool)
        self._pending.sort(key=lambda p: p.settles_ms)

    # -- the API ---------------------------------------------------------------------------------
    def status(self, job: SimJob, now: int) -> dict[str, Any] | None:
        """DescribeTrainingJob's ``WarmPoolStatus`` (None: the field is absent)."""
        if keep_alive_of(job.request) <= 0 and not job.warm_pool_used:
            return None
        if not job.is_terminal:
            return {"Status": IN_USE}
        pool = self._by_job.get(job.name)
        if pool is None:  # never had instances, or asked for no pool: nothing is kept
            return {"Status": TERMINATED, "ResourceRetainedBillableTimeInSeconds": 0}
        self.settle(now)
        if pool.status is None:
            return None  # not settled yet: AWS does not say what it shows; the unkind reading
        out: dict[str, Any] = {"Status": pool.status}
        if pool.available_ms is not None:
            until = now if pool.status == AVAILABLE else (pool.gone_ms or now)
            out["ResourceRetainedBillableTimeInSeconds"] = max(0, until - pool.available_ms) // 1000
        else:
            out["ResourceRetainedBillableTimeInSeconds"] = 0
        if pool.status == REUSED:
            out["ReusedByJob"] = pool.reused_by
        return out

    def update(self, job: SimJob, keep: int, now: int, op: str) -> None:
        """UpdateTrainingJob's KeepAlivePeriodInSeconds: only for an ended job whose pool is
        Available (0 terminates it, another value restarts its keep-alive from now)."""
        self.settle(now)
        pool = self._by_job.get(job.name)
        if not job.is_terminal or pool is None or pool.status != AVAILABLE:
            state = (
                "InProgress" if not job.is_terminal else (pool.status if pool else None) or "not available"
            )
            raise client_error(
                "ValidationException",
                f"The warm pool of training job {job.name} can be updated only after the job has ended "
                f"and while its warm pool status is Available (it is {state}).",
                op,
            )
        if keep == 0:
            self._end(pool, TERMINATED, now)
        else:
            pool.keep_alive_s = keep + (now - (pool.available_ms or now)) // 1000

    def pool_of(self, job_name: str) -> WarmPool | None:
        return self._by_job.get(job_name)

    def forget(self, job_name: str) -> None:
        """The job was deleted (it kept no Available pool): a pool still settling is not kept, and
        a later job of the same name does not inherit the pool's record."""
        pool = self._by_job.pop(job_name, None)
        if pool is not None and pool in self._pending:
            self._pending.remove(pool)
            pool.status, pool.gone_ms = TERMINATED, pool.settles_ms
