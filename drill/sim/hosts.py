"""Hosts of the simulated SageMaker: GPU serials, bad hosts that come back, the infra check, and the
NCCL network lines. Why: docs/fidelity.md (one row each)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol

from drill.sim.model import Fault, SimJob, StartupTimes

INFRA_CHECK_FAILURE_REASON = (
    "InfraCheckError: the infrastructure health check found an unhealthy instance (algo-{host}) "
    "before training started. Please retry the training job."
)
_SERIAL_SALT = 0x5E21_A15E_0F00_D00D
_CHECK_SALT = 0x1AF2_ACEC_4EC0_0001
_REPLACED_SALT = 0x2E91_ACED_0000_0BAD
_MISS_SALT = 0x3155_ED0C_4EC0_0002


@dataclass
class Lemon:
    run: str | None
    instance_type: str
    host: int
    fault: Fault
    serials: str
    left: int


class HostsSim(Protocol):
    """What the hosts' model needs of the simulation (drill.sim.lifecycle.SimCore has it): the
    fault log, the lemons and the start-up times. Declared here so that this module never imports
    the lifecycle."""

    fault_log: list[tuple[int, str, str, int]]
    lemons: list[Lemon]
    startup: StartupTimes


def _draw(job: SimJob, host: int, salt: int) -> str:
    rng = random.Random(job._salt ^ salt ^ host)
    return ",".join(f"GPU-{rng.getrandbits(40):010x}" for _ in range(max(job.profile.gpus_per_host, 1)))


def serials(job: SimJob, host: int) -> str:
    """The host's GPU serials (drawn once per job and host, or the pool's/lemon's own)."""
    known = job._serials.get(host)
    if known is None:
        known = job._serials[host] = _draw(job, host, _SERIAL_SALT)
    return known


def remember_lemon(sim: HostsSim, job: SimJob, host: int, fault: Fault) -> None:
    """A fired fault with ``returns_cold``: its host comes back in the run's next cold jobs."""
    sim.lemons.append(
        Lemon(job.run_name, job.instance_type, host, fault, serials(job, host), fault.returns_cold)
    )


def take_lemons(sim: HostsSim, job: SimJob) -> None:
    """A job on new instances (no warm pool) meets the lemons its run has left."""
    if job.warm_pool_used:
        return
    for lemon in sim.lemons:
        if lemon.left <= 0 or lemon.run != job.run_name or lemon.instance_type != job.instance_type:
            continue
        host = min(max(lemon.host, 1), job.instance_count)
        if host in job._inherited:
            continue
        lemon.left -= 1
        job._inherited[host] = lemon.fault
        job._bad_hosts[host] = lemon.fault
        job._serials[host] = lemon.serials
        sim.fault_log.append((job.created_ms, job.name, "lemon_returns", host))


def wants_infra_check(request: dict[str, object]) -> bool:
    config = request.get("InfraCheckConfig")
    return isinstance(config, dict) and bool(config.get("EnableInfraCheck"))


def check_finds(st: StartupTimes, job: SimJob, host: int, fault: Fault) -> bool:
    """Whether the job's infra check finds this bad host: the fault's pin, else a draw per job and
    host at the account's miss rate."""
    if fault.infra_check_finds is not None:
        return fault.infra_check_finds
    return random.Random(job._salt ^ _MISS_SALT ^ host).random() >= st.infra_check_miss_rate


def infra_check(sim: HostsSim, job: SimJob) -> tuple[int, int | None]:
    """(ms the check adds to Starting, the bad host it found when the job must fail, else None).
    Found hosts are replaced when the job goes on; missed ones stay (logged "infra_check_missed")."""
    st = sim.startup
    low, high = st.infra_check_min_s, st.infra_check_max_s
    extra_ms = random.Random(job._salt ^ _CHECK_SALT).randint(low, high) * 1000
    found: list[int] = []
    for host, fault in sorted(job._inherited.items()):
        if check_finds(st, job, host, fault):
            found.append(host)
        else:
            sim.fault_log.append((job.created_ms, job.name, "infra_check_missed", host))
    if not found:
        return extra_ms, None
    sim.fault_log.append((job.created_ms, job.name, "infra_check_found", found[0]))
    failing = [
        h
        for h in found
        if (job._inherited[h].infra_check_on_bad_host or st.infra_check_on_bad_host) == "fail"
    ]
    if failing:
        return extra_ms, failing[0]
    for host in found:  # replaced by good instances before Training
        job._inherited.pop(host, None)
        job._bad_hosts.pop(host, None)
        job._serials[host] = _draw(job, host, _REPLACED_SALT)  # a new instance: new GPUs
    return extra_ms, None


_ADDRESS_SALT = 0x1D_ADD2_E55E_5000


def host_address(job: SimJob, host: int) -> str:
    """The host's private IPv4 address, drawn per job and host (10.x.y.z, distinct in a job): NCCL
    names peers by it, never by `algo-<n>`."""
    rng = random.Random(job._salt ^ _ADDRESS_SALT)
    base = rng.randrange(1 << 16)
    n = (base + host * 7919) % (1 << 16)
    return f"10.{rng.randrange(256)}.{n >> 8}.{n & 0xFF}"


def nccl_debug_info(job: SimJob) -> bool:
    env = job.request.get("Environment") or {}
    return str(env.get("NCCL_DEBUG", "")).strip().upper() in ("INFO", "TRACE")


def training_start_lines(job: SimJob, host: int) -> list[str]:
    """What the host prints when Training starts, beyond the profile's start-up lines."""
    lines: list[str] = []
    if job.profile.fingerprints:
        lines.append(f"[sagewarden] host={host} fingerprint={serials(job, host)}")
    if nccl_debug_info(job):
        who = f"algo-{host}:{90 + host}:{180 + host} [0]"
        ip = host_address(job, host)
        lines.append(f"{who} NCCL INFO Bootstrap : Using eth0:{ip}<0>")
        if job.profile.nccl_transport == "socket" or host == job.profile.nccl_socket_host:
            lines += [
                f"{who} NCCL INFO NET/Plugin: Failed to find ncclNetPlugin_v8 symbol.",
                f"{who} NCCL INFO NET/Socket : Using [0]eth0:{ip}<0>",
                f"{who} NCCL INFO Using network Socket",
            ]
        else:
            lines += [
                f"{who} NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)",
                f"{who} NCCL INFO Using network AWS Libfabric",
            ]
    return lines
