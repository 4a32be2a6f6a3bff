"""What the hosts do while a job is quiet: spin, stuck, work or unknown, judged from per-host GPU,
CPU and disk metrics. Pure. Why: docs/hang-detection.md (*Evidence, not silence*)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Series = tuple[tuple[int, float], ...]  # (minute start ms, value) of the minutes that had data

SPIN_CPU_CORES_PER_GPU = 1.5  # GPUs busy and no more CPU than this: spinning, not computing for an eval
IDLE_CPU_CORES_PER_GPU = 0.5  # GPUs idle and no more CPU than this: nothing runs
# disk space growing this fast (percentage points a minute) over the newest minutes: writing. A log
# file grows thousands of times slower; a checkpoint written at 1 GB a minute to 8 TB, 0.0125
DISK_GROWTH_PP_PER_MIN = 0.01
RECENT_POINTS = 3  # the newest datapoints per host a level is judged from (their median)
DISK_POINTS = 5  # the newest datapoints disk growth is judged over
# a host is judged spinning or idle only on at least this many datapoints of each metric (one
# minute says nothing about growth, and its neighbours may still be on their way)
MIN_POINTS = 2

SPIN = "spin"
STUCK = "stuck"
WORK = "work"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class HostMetrics:
    """One host's instance metrics over a recent window, only the datapoints that have arrived."""

    host: str  # algo-<n>
    gpu: Series = ()  # GPUUtilization
    cpu: Series = ()  # CPUUtilization
    disk: Series = ()  # DiskUtilization


@dataclass(frozen=True)
class Verdict:
    kind: str  # SPIN | STUCK | WORK | UNKNOWN
    detail: str  # one line for the audit and the alert

    @property
    def hang(self) -> bool:
        return self.kind in (SPIN, STUCK)


@dataclass(frozen=True)
class _HostState:
    host: str
    gpu_busy: bool
    cpu_per_gpu: float
    disk_rate: float  # percentage points a minute over the newest disk datapoints
    points: int  # the fewest datapoints of the three metrics

    @property
    def writing(self) -> bool:
        return self.disk_rate >= DISK_GROWTH_PP_PER_MIN

    @property
    def working(self) -> bool:
        limit = SPIN_CPU_CORES_PER_GPU if self.gpu_busy else IDLE_CPU_CORES_PER_GPU
        return self.writing or self.cpu_per_gpu > limit

    def describe(self) -> str:
        gpus = "GPUs busy" if self.gpu_busy else "GPUs idle"
        disk = f", disk space +{self.disk_rate:.2f} pp/min" if self.writing else ""
        return f"{self.host} {gpus}, CPU {self.cpu_per_gpu:.1f} cores/GPU{disk}"


def _since(series: Series, since_ms: int, now_ms: int) -> list[tuple[int, float]]:
    return [(t, v) for t, v in sorted(series) if since_ms <= t < now_ms]


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def _state(m: HostMetrics, since_ms: int, now_ms: int, gpus: int, busy_pct: float) -> _HostState | None:
    gpu = [v for _, v in _since(m.gpu, since_ms, now_ms)[-RECENT_POINTS:]]
    cpu = [v for _, v in _since(m.cpu, since_ms, now_ms)[-RECENT_POINTS:]]
    if not gpu or not cpu:
        return None
    disk = _since(m.disk, since_ms, now_ms)[-DISK_POINTS:]
    rate = 0.0
    if len(disk) >= 2 and disk[-1][0] > disk[0][0]:
        rate = (disk[-1][1] - disk[0][1]) / ((disk[-1][0] - disk[0][0]) / 60_000)
    points = min(len(gpu), len(cpu), len(disk))
    return _HostState(m.host, _median(gpu) >= busy_pct * gpus, _median(cpu) / 100 / gpus, rate, points)


def _names(hosts: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(hosts[:limit])
    return shown + (f" (+{len(hosts) - limit})" if len(hosts) > limit else "")


def _host_number(host: str) -> int:
    tail = host.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def judge(
    hosts: Sequence[HostMetrics],
    *,
    instance_count: int,
    gpus_per_host: int,
    gpu_busy_percent: float,
    since_ms: int,
    now_ms: int,
) -> Verdict:
    """The verdict on a quiet job from its hosts' metrics since the quiet stretch began."""
    if gpus_per_host <= 0:
        return Verdict(UNKNOWN, "no GPU metrics on this instance type")
    if not hosts:
        return Verdict(UNKNOWN, "no instance metrics read")
    by_host = {m.host: m for m in hosts}
    states: list[_HostState] = []
    missing: list[str] = []
    for n in range(1, max(1, instance_count) + 1):
        name = f"algo-{n}"
        m = by_host.get(name)
        state = _state(m, since_ms, now_ms, gpus_per_host, gpu_busy_percent) if m is not None else None
        if state is not None and (state.working or state.points >= MIN_POINTS):
            states.append(state)
        else:
            missing.append(name)
    working = [s for s in states if s.working]
    if working:
        return Verdict(
            WORK,
            f"work on {len(working)} of {instance_count} host(s): "
            + "; ".join(s.describe() for s in working[:3])
            + (f"; +{len(working) - 3} more" if len(working) > 3 else ""),
        )
    if missing:
        return Verdict(
            UNKNOWN,
            f"too few datapoints since the quiet stretch began from {_names(missing)} (late, or no longer reported)",
        )
    spinning = [s.host for s in states if s.gpu_busy]
    idle = [s.host for s in states if not s.gpu_busy]
    top_cpu = max(s.cpu_per_gpu for s in states)
    if spinning:
        extra = f"; GPUs idle on {_names(sorted(idle, key=_host_number))}" if idle else ""
        return Verdict(
            SPIN,
            f"GPUs busy on {len(spinning)} of {instance_count} host(s) with at most {top_cpu:.1f} "
            f"busy CPU cores per GPU and no disk space growing{extra}: a collective spinning",
        )
    return Verdict(
        STUCK,
        f"GPUs idle on all {instance_count} host(s) with at most {top_cpu:.1f} busy CPU cores per GPU "
        "and no disk space growing: nothing runs",
    )


def gpu_summary(hosts: Sequence[HostMetrics]) -> dict[str, tuple[float, float, float]]:
    """host -> (average, minimum, latest) GPUUtilization of the hosts that reported it."""
    out: dict[str, tuple[float, float, float]] = {}
    for m in hosts:
        if m.gpu:
            values = [v for _, v in m.gpu]
            out[m.host] = (sum(values) / len(values), min(values), max(m.gpu)[1])
    return out


def gpu_suspects(
    by_host: dict[str, tuple[float, float, float]], threshold: float, hosts: int
) -> tuple[str, ...]:
    """The hosts (algo-N) to look at first: those without GPU metrics in the window (a dead host
    reports nothing), then those idle now, idlest first. Every host idle: no one stands out."""
    silent = [f"algo-{n}" for n in range(1, hosts + 1) if f"algo-{n}" not in by_host]
    idle = sorted((h for h, (_, _, last) in by_host.items() if last < threshold), key=lambda h: by_host[h][2])
    found = [*silent, *idle]
    return () if len(found) >= hosts else tuple(found)


def gpu_triage_lines(
    by_host: dict[str, tuple[float, float, float]],
    threshold: float,
    hosts: int,
    cpu_now: dict[str, float] | None = None,
) -> tuple[str, ...]:
    """Readable lines, idlest host now first, e.g.
    'algo-3: GPUUtilization now 0 (avg 649, min 0 over the window), CPUUtilization now 3  <- idle'."""
    rows = sorted(by_host.items(), key=lambda kv: (kv[1][2], kv[1][0], kv[0]))
    cpu = cpu_now or {}
    lines = [
        f"{host}: GPUUtilization now {last:.0f} (avg {avg:.0f}, min {low:.0f} over the window)"
        + (f", CPUUtilization now {cpu[host]:.0f}" if host in cpu else "")
        + ("  <- idle" if last < threshold else "")
        for host, (avg, low, last) in rows
    ]
    missing = hosts - len(by_host)
    if missing > 0:
        lines.append(f"{missing} host(s) reported no GPU metrics in the window")
    return tuple(lines)
