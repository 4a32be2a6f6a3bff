"""Which hang alarms an attempt should have: pure, so `decide` can compare it with what the sweep
saw in CloudWatch (the level) instead of trusting a flag written before the alarms were created.

An alarm is identified within its job by a *key*: the signal, plus `#<group>` for the idle-GPU
alarms (metric math allows at most 10 metrics per alarm, so hosts are split into balanced groups
of at most 10). The CloudWatch adapter turns keys into alarm names and back.
"""

from __future__ import annotations

from sagewarden.domain.actions import EnsureHangAlarms

SIGNAL_LOG_SILENCE = "log_silence"
SIGNAL_GPU_IDLE = "gpu_idle"
SIGNAL_PROGRESS = "progress_stalled"
SIGNAL_CHECKPOINT = "checkpoint_stale"  # judged by the sweep on ticks; no alarm
HOSTS_PER_ALARM = 10
GROUP_SEP = "#"


def gpu_groups(instance_count: int) -> list[list[int]]:
    """Hosts 1..n in balanced groups of at most 10 (e.g. 11 hosts -> 6 + 5, never 10 + 1, so
    every group has peers to compare an idle host with)."""
    n = max(1, instance_count)
    count = -(-n // HOSTS_PER_ALARM)
    base, extra = divmod(n, count)
    groups, start = [], 1
    for g in range(count):
        size = base + (1 if g < extra else 0)
        groups.append(list(range(start, start + size)))
        start += size
    return groups


def alarm_keys(spec: EnsureHangAlarms) -> tuple[str, ...]:
    """Keys of every alarm `spec` creates."""
    keys = [SIGNAL_LOG_SILENCE]
    if spec.progress_metric:
        keys.append(SIGNAL_PROGRESS)
    groups = gpu_groups(spec.instance_count)
    if len(groups) == 1:
        keys.append(SIGNAL_GPU_IDLE)
    else:
        keys += [f"{SIGNAL_GPU_IDLE}{GROUP_SEP}{g}" for g in range(1, len(groups) + 1)]
    return tuple(keys)


def key_signal(key: str) -> str:
    return key.split(GROUP_SEP, 1)[0]


def key_group(key: str) -> int | None:
    _, sep, group = key.partition(GROUP_SEP)
    return int(group) if sep and group.isdigit() else None
