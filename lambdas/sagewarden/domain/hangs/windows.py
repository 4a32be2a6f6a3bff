"""How long a job may stay silent: the hang window in force and the start-up allowance, each
with one home. Why: docs/hang-detection.md (*Learned windows*, *Start-up allowance*)."""

from __future__ import annotations

from sagewarden.domain.decision.pending import PendingDecision
from sagewarden.domain.hangs.alarms import (
    SIGNAL_CHECKPOINT,
    SIGNAL_GPU_IDLE,
    SIGNAL_GPU_LONE_IDLE,
    SIGNAL_LOG_SILENCE,
    SIGNAL_PROGRESS,
)
from sagewarden.domain.vocabulary.actions import EnsureHangAlarms
from sagewarden.domain.vocabulary.models import Attempt, Run, startup_kind
from sagewarden.domain.vocabulary.policy import RunPolicy
from sagewarden.domain.vocabulary.pricing import gpus_per_instance


def instance_shape(att: Attempt) -> str:
    return f"{att.instance_type} x {att.instance_count}"


# where a hang window in force comes from
WINDOW_LEARNED = "learned"  # the attempt's own cadence
WINDOW_CARRIED = "carried"  # learned by an earlier attempt on the same instances
WINDOW_POLICY = "policy"


def window_in_force(run: Run, policy: RunPolicy, att: Attempt, *, progress: bool = False) -> tuple[int, str]:
    """The log-silence (or progress) window of `att`, and where it comes from: the attempt's own
    learned window, else one an earlier attempt of the run learned on the same instances, else
    the policy's (the ceiling of every learned one)."""
    if progress:
        own, learned, ceiling = (
            att.progress_window_min,
            run.learned_progress_window_min,
            policy.progress_stall_minutes,
        )
    else:
        own, learned, ceiling = att.log_window_min, run.learned_log_window_min, policy.log_silence_minutes
    if own:
        return own, WINDOW_LEARNED
    if learned and run.learned_windows_on == instance_shape(att):
        return min(learned, ceiling), WINDOW_CARRIED
    return ceiling, WINDOW_POLICY


def startup_allowance(run: Run, policy: RunPolicy, att: Attempt) -> int:
    """The policy's start-up allowance, or a shorter one learned from an earlier *comparable*
    attempt (`startup_kind`: a fresh start's minutes say nothing about a resume that loads a
    checkpoint for twenty silent minutes)."""
    learned, pol = run.startup_learned_min, policy.startup_silence_minutes
    if learned is None or run.startup_learned_on != startup_kind(att):
        return pol
    return min(pol, learned)


def signal_window(run: Run, policy: RunPolicy, att: Attempt, signal: str) -> int:
    """The minutes `signal` must last before it counts for `att`: the log-silence and progress
    windows in force (`window_in_force`), the policy's for the others, 0 for a signal with none."""
    return {
        SIGNAL_LOG_SILENCE: window_in_force(run, policy, att)[0],
        SIGNAL_GPU_IDLE: policy.gpu_idle_minutes,
        SIGNAL_GPU_LONE_IDLE: policy.gpu_lone_idle_minutes,
        SIGNAL_CHECKPOINT: policy.checkpoint_stale_minutes or 0,
        SIGNAL_PROGRESS: window_in_force(run, policy, att, progress=True)[0],
    }.get(signal, 0)


def hang_alarms(d: PendingDecision, att: Attempt, only_keys: tuple[str, ...] = ()) -> EnsureHangAlarms:
    return EnsureHangAlarms(
        job_name=att.job_name,
        attempt=att.number,
        instance_count=att.instance_count,
        gpus_per_host=gpus_per_instance(att.instance_type),
        log_silence_minutes=signal_window(d.run, d.policy, att, SIGNAL_LOG_SILENCE),
        gpu_idle_percent=d.policy.gpu_idle_percent,
        gpu_idle_minutes=d.policy.gpu_idle_minutes,
        checkpoint_stale_minutes=d.policy.checkpoint_stale_minutes,
        progress_metric=d.policy.progress_metric,
        progress_stall_minutes=signal_window(d.run, d.policy, att, SIGNAL_PROGRESS),
        gpu_lone_idle_minutes=d.policy.gpu_lone_idle_minutes,
        gpu_busy_percent=d.policy.gpu_busy_percent,
        log_silence_alarm=d.obs.log_subscription,
        only_keys=only_keys,
    )
