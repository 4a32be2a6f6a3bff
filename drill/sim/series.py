"""The simulated metric series of a job, answered analytically from its Training segments.

GPUUtilization per host, the job's progress metric (a MetricDefinitions metric) and the heartbeat
metric (log lines per minute) exist only for minutes while the job was in Training, and only up
to "now". Every value is a pure function of the job's segments, its noise salt and the minute, so
any window can be asked for at any time and gets the same answer.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator

from drill.sim.model import SimJob
from drill.sim.texts import LOGGING_PHASES, MASK64, MINUTE_MS


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
    return {
        "save": (5.0 * gpus, 0.2),
        "eval": (10.0 * gpus, 0.2),
        "idle": (0.3 * gpus, 0.5),  # compile, NCCL init, data-loader pause: below 1 % per GPU
        "stuck": (2.0 * gpus, 0.2),
    }.get(kind)


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
