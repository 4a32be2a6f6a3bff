"""The simulated metric series of a job, answered analytically from its Training segments.

`PHASE_SIGNATURES` holds what each phase looks like on a host.
Why: docs/fidelity.md (what a script's phases do to the metrics)."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator

from drill.sim.model import SimJob
from drill.sim.texts import HANG_PHASES, LOGGING_PHASES, MASK64, MINUTE_MS, PHASE_VARIANTS


def mix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def noise(salt: int, host: int, minute: int) -> float:
    """Deterministic noise in [-1, 1) for one (job, host, minute) sample."""
    return (mix64(mix64(salt ^ host) ^ (minute & MASK64)) >> 11) / float(1 << 52) - 1.0


def training_window(job: SimJob, start_ms: int, end_ms: int, now_ms: int) -> tuple[int, int] | None:
    if job.training_started_ms is None:
        return None
    lo = max(start_ms, job.training_started_ms)
    ended = job.training_ended_ms
    hi = min(end_ms, ended if ended is not None else now_ms + 1)
    first = -(-lo // MINUTE_MS) * MINUTE_MS
    if first >= hi:
        return None
    return first, hi


def _segments_from(job: SimJob, first: int) -> Iterator[tuple[int, int | None, str, int]]:
    i = max(bisect.bisect_right(job._seg_starts, first) - 1, 0)
    yield from job._segs[i:]


def training_minutes(job: SimJob, start_ms: int, end_ms: int, now_ms: int) -> Iterator[tuple[int, str, int]]:
    """Every minute boundary in [start_ms, end_ms) while the job was in Training (and not
    after now), with the phase it was in: (minute ms, phase kind, dead host)."""
    window = training_window(job, start_ms, end_ms, now_ms)
    if window is None:
        return
    first, hi = window
    m = first
    for seg_start, seg_end, kind, dead in _segments_from(job, first):
        stop = hi if seg_end is None else min(hi, seg_end)
        if m < seg_start:
            m = -(-seg_start // MINUTE_MS) * MINUTE_MS
        while m < stop:
            yield m, kind, dead
            m += MINUTE_MS
        if m >= hi:
            return


def gpu_level(job: SimJob, host: int, kind: str) -> tuple[float, float] | None:
    """(base, relative spread) of one host's GPUUtilization in a phase; None while spinning."""
    p = job.profile
    gpus = p.gpus_per_host
    if kind == "train":
        if p.straggler_host and host == p.straggler_host:  # slow but alive: less busy than its peers
            return p.straggler_gpu_util, 0.1
        return p.gpu_util_per_host, 0.02
    if kind in ("eval", "eval_silent"):
        return 72.5 * gpus, 0.17  # forward passes only: 60-85 % per GPU
    if kind in ("compile", "nccl_init", "data_pause"):
        return 0.3 * gpus, 0.5  # below 1 % per GPU
    return {"save": (5.0 * gpus, 0.2), "stuck": (2.0 * gpus, 0.2)}.get(kind)


def gpu_samples(job: SimJob, host: int, start_ms: int, end_ms: int, now_ms: int) -> list[tuple[int, float]]:
    """One GPUUtilization value (summed over the host's GPUs) per Training minute of the window;
    none for a CPU instance (``gpus_per_host`` 0), which has no GPUUtilization metric."""
    window = training_window(job, start_ms, end_ms, now_ms)
    if window is None or job.profile.gpus_per_host <= 0:
        return []
    first, hi = window
    p = job.profile
    gpus = p.gpus_per_host
    full = 100.0 * gpus
    host_hash = mix64(job._salt ^ host)  # noise(salt, host, minute), with the host's part hoisted
    scale = float(1 << 52)
    out: list[tuple[int, float]] = []
    m = first
    for seg_start, seg_end, kind, dead in _segments_from(job, first):
        stop = hi if seg_end is None else min(hi, seg_end)
        if m < seg_start:
            m = -(-seg_start // MINUTE_MS) * MINUTE_MS
        if m < stop:
            if kind == "dead_host" and host == dead:
                out.extend((t, 0.0) for t in range(m, stop, MINUTE_MS))
                m += -(-(stop - m) // MINUTE_MS) * MINUTE_MS
            else:
                level = gpu_level(job, host, kind)
                if level is not None:
                    base, spread, spin = level[0], level[1], False
                else:  # hang_spin, spin_logging, and the live hosts of dead_host
                    base, spread, spin = full, 0.5 * gpus, True
                while m < stop:
                    n = (mix64(host_hash ^ ((m // MINUTE_MS) & MASK64)) >> 11) / scale - 1.0
                    v = full - spread * abs(n) if spin else base * (1.0 + spread * n)
                    out.append((m, min(max(v, 0.0), full)))
                    m += MINUTE_MS
        if m >= hi:
            break
    return out


def gpu_phase_bound(job: SimJob, host: int, kind: str, dead: int) -> tuple[float, float]:
    """The range every GPUUtilization sample of one host lies in during one kind of phase."""
    p = job.profile
    gpus = p.gpus_per_host
    full = 100.0 * gpus
    if kind == "dead_host" and host == dead:
        return 0.0, 0.0
    level = gpu_level(job, host, kind)
    if level is not None:
        base, spread = level
        # noise is in [-1, 1): values within base x (1 -/+ spread), clamped to [0, full]
        lo = min(max(base * (1.0 - spread), 0.0), full)
        hi = min(max(base * (1.0 + spread), 0.0), full)
        return min(lo, hi), max(lo, hi)
    return max(full - 0.5 * gpus, 0.0), full  # spinning


def gpu_bounds(
    job: SimJob, host: int, start_ms: int, end_ms: int, now_ms: int
) -> list[tuple[int, int, float, float]]:
    """Stretches of minutes [first, end) in which every GPUUtilization value of ``gpu_samples`` lies
    within [lo, hi] (one stretch per Training phase); minutes outside every stretch have none."""
    window = training_window(job, start_ms, end_ms, now_ms)
    if window is None:
        return []
    first, hi = window
    out: list[tuple[int, int, float, float]] = []
    m = first
    for seg_start, seg_end, kind, dead in _segments_from(job, first):
        stop = hi if seg_end is None else min(hi, seg_end)
        if m < seg_start:
            m = -(-seg_start // MINUTE_MS) * MINUTE_MS
        if m < stop:
            lo_v, hi_v = gpu_phase_bound(job, host, kind, dead)
            last = m + -(-(stop - m) // MINUTE_MS) * MINUTE_MS
            if out and out[-1][1] == m and out[-1][2:] == (lo_v, hi_v):
                out[-1] = (out[-1][0], last, lo_v, hi_v)  # same range on both sides of a phase change
            else:
                out.append((m, last, lo_v, hi_v))
            m = last
        if m >= hi:
            break
    return out


def gpu_bounds_by_host(
    job: SimJob, start_ms: int, end_ms: int, now_ms: int
) -> tuple[list[tuple[int, int, float, float]], dict[int, list[tuple[int, int, float, float]]]]:
    """:func:`gpu_bounds` of every host of the job at once: the stretches all hosts share, and the
    hosts whose stretches differ from them (a dead host, a straggler) with their own. Asking
    ``gpu_bounds`` host by host gives the same answer; this costs one computation per distinct host."""
    shared = gpu_bounds(job, 0, start_ms, end_ms, now_ms)
    odd = {dead for _, _, kind, dead in job._segs if kind == "dead_host" and dead}
    if job.profile.straggler_host:
        odd.add(job.profile.straggler_host)
    own = {
        h: gpu_bounds(job, h, start_ms, end_ms, now_ms) for h in sorted(odd) if 1 <= h <= job.instance_count
    }
    return shared, {h: b for h, b in own.items() if b != shared}


def logging_minutes(job: SimJob, start_ms: int, end_ms: int, now_ms: int) -> Iterator[tuple[int, str]]:
    """The Training minutes in [start_ms, end_ms) in which the script writes its periodic lines:
    every minute of a logging phase, or every ``log_every_minutes``-th one counted from the start
    of Training (a script that logs every N steps logs again N steps later, pauses aside)."""
    every = job.profile.log_every_minutes
    if every <= 1:
        for m, kind, _ in training_minutes(job, start_ms, end_ms, now_ms):
            if kind in LOGGING_PHASES:
                yield m, kind
        return
    begin = job.training_started_ms if job.training_started_ms is not None else start_ms
    count = 0
    for m, kind, _ in training_minutes(job, begin, end_ms, now_ms):
        if kind in LOGGING_PHASES:
            if count % every == 0 and m >= start_ms:
                yield m, kind
            count += 1


def progress_samples(job: SimJob, start_ms: int, end_ms: int, now_ms: int) -> Iterator[tuple[int, float]]:
    """The job's own progress metric (MetricDefinitions regex over its log): one value per
    minute in which the training loop advanced and logged (steps per minute), none otherwise."""
    rate = job.profile.steps_per_minute
    for m, kind in logging_minutes(job, start_ms, end_ms, now_ms):
        if kind == "train":
            yield m, rate * (1.0 + 0.02 * noise(job._salt, 0, m // MINUTE_MS))


def log_samples(job: SimJob, start_ms: int, end_ms: int, now_ms: int) -> Iterator[tuple[int, float]]:
    """The heartbeat metric: lines per minute, plus the minutes a phase-marker line declared
    active (the heartbeat function publishes those at once, ahead of time)."""
    rate = float(job.profile.log_lines_per_minute * job.instance_count)
    counts = {m: rate for m, _ in logging_minutes(job, start_ms, end_ms, now_ms)}
    for m in job._declared:
        if start_ms <= m < end_ms:
            counts[m] = counts.get(m, 0.0) + 1.0
    lo_line = start_ms // MINUTE_MS * MINUTE_MS
    times = job._line_times
    i = bisect.bisect_left(times, lo_line)
    while i < len(times) and times[i] < end_ms and times[i] <= now_ms:
        minute = times[i] // MINUTE_MS * MINUTE_MS
        if minute >= start_ms:
            counts[minute] = counts.get(minute, 0.0) + 1.0
        i += 1
    for minute in sorted(counts):
        yield minute, counts[minute]


def aggregate(samples: Iterable[tuple[int, float]], period_ms: int, stat: str) -> list[tuple[int, float]]:
    if period_ms == MINUTE_MS:  # samples are per minute, one per bucket, in time order
        if stat == "SampleCount":
            return [(t, 1.0) for t, _ in samples]
        return list(samples)
    buckets: dict[int, list[float]] = {}
    for t, v in samples:
        b = t - t % period_ms
        acc = buckets.get(b)
        if acc is None:
            buckets[b] = [v, v, v, 1.0]
        else:
            acc[0] += v
            acc[1] = min(acc[1], v)
            acc[2] = max(acc[2], v)
            acc[3] += 1.0
    out: list[tuple[int, float]] = []
    for b in sorted(buckets):
        total, lo, hi, count = buckets[b]
        value = {
            "Average": total / count,
            "Minimum": lo,
            "Maximum": hi,
            "Sum": total,
            "SampleCount": count,
        }[stat]
        out.append((b, value))
    return out


# --- the other instance metrics ----------------------------------------------------------------

INSTANCE_METRICS = frozenset(
    {"GPUUtilization", "GPUMemoryUtilization", "CPUUtilization", "MemoryUtilization", "DiskUtilization"}
)
_CPU_TRAIN = (2.5, 4.5)
_CPU_SPIN = (0.9, 1.25)  # a rank busy-waits on its stream while the collective spins on the GPU
# busy cores per GPU: (kind, variant) -> range; variant None = every occurrence
PHASE_SIGNATURES: dict[tuple[str, str | None], tuple[float, float]] = {
    ("train", None): _CPU_TRAIN,
    ("save", "busy"): (1.5, 3.0),
    ("save", "light"): (0.2, 0.6),
    ("eval", "even"): (2.0, 4.0),
    ("eval", "uneven"): (2.0, 4.0),  # the quiet hosts: _CPU_EVAL_QUIET
    ("compile", "parallel"): (2.0, 6.0),
    ("compile", "serial"): (0.8, 1.3),
    ("data_pause", "workers"): (1.5, 5.0),
    ("data_pause", "light"): (0.6, 1.0),
    ("nccl_init", None): (0.05, 0.4),  # bootstrap waits on the network: as idle as a stuck job
    ("hang_spin", None): _CPU_SPIN,
    ("spin_logging", None): _CPU_SPIN,
    ("dead_host", None): _CPU_SPIN,  # the live hosts spin in the collective the dead one left
    ("stuck", None): (0.02, 0.3),
}
_CPU_EVAL_QUIET = (0.8, 1.3)
_CPU_DEAD = (0.0, 0.05)
_SLOTS_WITHOUT_GPUS = 4  # a CPU instance: its "ranks"


def _unit(*parts: int) -> float:
    """A deterministic draw in [0, 1) from integers."""
    h = 0x2545F4914F6CDD1D
    for p in parts:
        h = mix64(h ^ (p & MASK64))
    return (h >> 11) / float(1 << 53)


def phase_variant(job: SimJob, seg_start: int, kind: str) -> str | None:
    """The variant of one occurrence of a phase: pinned by the fault that opened it, else drawn."""
    options = PHASE_VARIANTS.get(kind)
    if not options:
        return None
    pinned = job._variants.get(seg_start)
    if pinned in options:
        return pinned
    return options[int(_unit(job._salt, seg_start, 0x7A) * len(options))]


def _quiet_eval_host(job: SimJob, seg_start: int, host: int) -> bool:
    """An uneven eval's hosts that load data with little CPU: about half, never every host."""
    n = job.instance_count
    if n < 2:
        return False
    busy = 1 + int(_unit(job._salt, seg_start, 0xB5) * n)  # at least this one stays busy
    return host != busy and _unit(job._salt, seg_start, host, 0xE7) < 0.5


def _writers(job: SimJob, seg_start: int, variant: str | None) -> frozenset[int] | None:
    """Hosts whose disk space grows during a save (None: every host)."""
    return frozenset({1}) if variant == "light" else None


def _segment_at(job: SimJob, m: int) -> int:
    """Index of the segment that holds minute start ``m`` (the latest one starting at or before)."""
    return max(bisect.bisect_right(job._seg_starts, m) - 1, 0)


def cpu_range(job: SimJob, host: int, kind: str, dead: int, seg_start: int) -> tuple[float, float]:
    """Busy cores per GPU of one host in one phase (see the module docstring)."""
    if kind == "dead_host" and host == dead:
        return _CPU_DEAD
    variant = phase_variant(job, seg_start, kind)
    if kind in ("eval", "eval_silent") and variant == "uneven" and _quiet_eval_host(job, seg_start, host):
        return _CPU_EVAL_QUIET
    key = ("eval" if kind == "eval_silent" else kind, variant)
    return PHASE_SIGNATURES.get(key) or PHASE_SIGNATURES.get((key[0], None)) or _CPU_TRAIN


def _disk_base(job: SimJob, host: int) -> float:
    return 15.0 + 25.0 * _unit(job._salt, host, 0xD1)


def _disk_rate(job: SimJob) -> float:
    """Percentage points of disk space a writing host gains per minute of a save."""
    return 0.02 + 0.28 * _unit(job._salt, 0xD2)


MEMORY_RISE_MIN = 8  # a host-memory fault's MemoryUtilization climbs for this long before the crash


def memory_value(job: SimJob, host: int, m: int, u: float) -> float:
    """MemoryUtilization of one host in the minute starting at ``m``: 30-57 %, or climbing to ~99 %
    over the minutes before a host-memory fault's crash (Fault.memory_full), 99 % in the minute of
    the kill."""
    base = 30.0 + 25.0 * _unit(job._salt, host, 0x4D) + 2.0 * u
    full = job._memory_full
    if full is None or full[0] != host or m > full[1]:
        return base
    rise = MEMORY_RISE_MIN * MINUTE_MS
    left = max(0, full[1] - (m + MINUTE_MS))  # from the minute's end to the kill
    if left >= rise:
        return base
    return base + (99.0 - base) * (1.0 - left / rise)


def disk_value(job: SimJob, host: int, m: int) -> float:
    """DiskUtilization of one host at minute start ``m`` (in Training)."""
    i = _segment_at(job, m)
    start, _, kind, _ = job._segs[i]
    base = _disk_base(job, host)
    if kind == "save":
        writers = _writers(job, start, phase_variant(job, start, "save"))
        if writers is None or host in writers:
            return base + _disk_rate(job) * max(0, m - start) / MINUTE_MS
        return base
    if kind in HANG_PHASES and i > 0:  # a save cut by the hang keeps what it wrote
        p_start, p_end, p_kind, _ = job._segs[i - 1]
        if p_kind == "save" and p_end == start:
            writers = _writers(job, p_start, phase_variant(job, p_start, "save"))
            if writers is None or host in writers:
                return base + _disk_rate(job) * (p_end - p_start) / MINUTE_MS
    return base


def instance_samples(
    job: SimJob, host: int, metric: str, start_ms: int, end_ms: int, now_ms: int
) -> list[tuple[int, float]]:
    """One value of an instance metric per Training minute of the window (``/aws/sagemaker/
    TrainingJobs``, ``Host=<job>/algo-<host>``). GPU metrics: none for a CPU instance."""
    gpus = job.profile.gpus_per_host
    if metric == "GPUUtilization":
        return gpu_samples(job, host, start_ms, end_ms, now_ms)
    if metric == "GPUMemoryUtilization" and gpus <= 0:
        return []
    slots = gpus if gpus > 0 else _SLOTS_WITHOUT_GPUS
    out: list[tuple[int, float]] = []
    for m, kind, dead in training_minutes(job, start_ms, end_ms, now_ms):
        u = (noise(job._salt ^ 0xC9, host, m // MINUTE_MS) + 1.0) / 2.0  # [0, 1)
        dead_here = kind == "dead_host" and host == dead
        if metric == "CPUUtilization":
            seg_start = job._segs[_segment_at(job, m)][0]
            lo, hi = cpu_range(job, host, kind, dead, seg_start)
            out.append((m, 100.0 * slots * (lo + (hi - lo) * u)))
        elif metric == "GPUMemoryUtilization":  # the model's weights stay allocated; a dead rank's are freed
            out.append((m, 0.0 if dead_here else gpus * (72.0 + 12.0 * _unit(job._salt, host, 0x6D) + u)))
        elif metric == "MemoryUtilization":
            out.append((m, memory_value(job, host, m, u)))
        elif metric == "DiskUtilization":
            out.append((m, round(disk_value(job, host, m), 4)))
    return out
