"""Which hang alarms an attempt should have, by key (a signal, plus `#<group>` for lone-idle
groups of at most 10 hosts). Pure. Why: docs/hang-detection.md (*Where the rules live*)."""

from __future__ import annotations

from sagewarden.domain.vocabulary.actions import EnsureHangAlarms

SIGNAL_LOG_SILENCE = "log_silence"
SIGNAL_GPU_IDLE = "gpu_idle"
SIGNAL_GPU_LONE_IDLE = "gpu_lone_idle"
GPU_IDLE_HOSTS = 2  # hosts watched by the whole-job idle alarm
SIGNAL_PROGRESS = "progress_stalled"
SIGNAL_CHECKPOINT = "checkpoint_stale"  # judged by the sweep on ticks; no alarm
HOSTS_PER_ALARM = 10
GROUP_SEP = "#"
# Metric datapoints arrive late (AWS publishes no bound; the alarm shapes, the learned cadence and
# the drill's default model assume up to this many minutes): see adapters/cloudwatch_hang_alarms.py
METRIC_LAG_MIN = 3
MAX_ALARM_PERIODS = 1440  # EvaluationPeriods x Period must not exceed one day (60 s periods)


def silence_window_min(minutes: int) -> int:
    """The minutes a silence is judged over (the log-silence and progress alarms, N of N with
    missing breaching, and the sweep's own log-silence check): never fewer than the late minutes
    plus one, or the minutes whose data is still on its way would alone fill the window."""
    return min(max(minutes, METRIC_LAG_MIN + 1), MAX_ALARM_PERIODS)


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


def lone_idle_groups(spec: EnsureHangAlarms) -> list[list[int]]:
    """Host groups of the lone-idle alarms (none for a one-host job or when switched off)."""
    if spec.instance_count < 2 or spec.gpu_lone_idle_minutes <= 0:
        return []
    return gpu_groups(spec.instance_count)


def alarm_keys(spec: EnsureHangAlarms) -> tuple[str, ...]:
    """Keys of every alarm `spec` creates."""
    keys = [SIGNAL_LOG_SILENCE] if spec.log_silence_alarm else []
    if spec.progress_metric:
        keys.append(SIGNAL_PROGRESS)
    keys.append(SIGNAL_GPU_IDLE)
    groups = lone_idle_groups(spec)
    if len(groups) == 1:
        keys.append(SIGNAL_GPU_LONE_IDLE)
    else:
        keys += [f"{SIGNAL_GPU_LONE_IDLE}{GROUP_SEP}{g}" for g in range(1, len(groups) + 1)]
    return tuple(keys)


def key_signal(key: str) -> str:
    return key.split(GROUP_SEP, 1)[0]


def key_group(key: str) -> int | None:
    _, sep, group = key.partition(GROUP_SEP)
    return int(group) if sep and group.isdigit() else None
