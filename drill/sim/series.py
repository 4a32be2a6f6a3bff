"""The simulated metric series of a job, answered analytically from its Training segments.

GPUUtilization per host, the job's progress metric (a MetricDefinitions metric) and the heartbeat
metric (log lines per minute) exist only for minutes while the job was in Training, and only up
to "now". Every value is a pure function of the job's segments, its noise salt and the minute, so
any window can be asked for at any time and gets the same answer.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator

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


def gpu_samples(
    job: SimJob, host: int, start_ms: int, end_ms: int, now_ms: int
) -> Iterator[tuple[int, float]]:
    p = job.profile
    full = 100.0 * p.gpus_per_host
    for m, kind, dead in training_minutes(job, start_ms, end_ms, now_ms):
        n = noise(job._salt, host, m // MINUTE_MS)
        if kind == "train":
            v = p.gpu_util_per_host * (1.0 + 0.02 * n)
        elif kind == "save":
            v = 5.0 * p.gpus_per_host * (1.0 + 0.2 * n)
        elif kind == "eval":
            v = 10.0 * p.gpus_per_host * (1.0 + 0.2 * n)
        elif kind == "stuck":
            v = 2.0 * p.gpus_per_host * (1.0 + 0.2 * n)
        elif kind == "dead_host" and host == dead:
            v = 0.0
        else:  # hang_spin, spin_logging, and the live hosts of dead_host
            v = full - 0.5 * p.gpus_per_host * abs(n)
        yield m, min(max(v, 0.0), full)


def progress_samples(job: SimJob, start_ms: int, end_ms: int, now_ms: int) -> Iterator[tuple[int, float]]:
    """The job's own progress metric (MetricDefinitions regex over its log): one value per
    minute in which the training loop advanced (steps per minute), none otherwise."""
    rate = job.profile.steps_per_minute
    for m, kind, _ in training_minutes(job, start_ms, end_ms, now_ms):
        if kind == "train":
            yield m, rate * (1.0 + 0.02 * noise(job._salt, 0, m // MINUTE_MS))


def log_samples(job: SimJob, start_ms: int, end_ms: int, now_ms: int) -> Iterator[tuple[int, float]]:
    rate = float(job.profile.log_lines_per_minute * job.instance_count)
    counts = {
        m: rate for m, kind, _ in training_minutes(job, start_ms, end_ms, now_ms) if kind in LOGGING_PHASES
    }
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


def aggregate(samples: Iterator[tuple[int, float]], period_ms: int, stat: str) -> list[tuple[int, float]]:
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
