"""The heartbeat and its pipeline: whether a heartbeat's silence is the job's (`confirm_windows`),
and whether the pipeline delivers at all (`judge_pipeline`). Pure. Why: docs/hang-detection.md
(*A broken heartbeat*, *The pipeline itself*)."""

from __future__ import annotations

from dataclasses import dataclass

from sagewarden.domain.hangs.alarms import METRIC_LAG_MIN, silence_window_min
from sagewarden.domain.vocabulary.actions import Notify
from sagewarden.domain.vocabulary.bounded import clip_lines, clip_text

# a heartbeat datapoint of a minute whose log lines were written arrives METRIC_LAG_MIN minutes
# after the minute at the latest, and the alarm is evaluated within a minute of that: a line at
# least this old ends the ALARM of a delivering heartbeat
SETTLE_MS = (METRIC_LAG_MIN + 2) * 60_000
MAX_JOBS_NAMED = 10  # jobs a pipeline state and its alert name (the rest are counted)
EVENT_BROKEN = "heartbeat.broken"
EVENT_RESTORED = "heartbeat.restored"
# the outbox's owner of the deployment's own alerts (never a run id: those are 26-character ULIDs)
DEPLOYMENT_ALERTS = "deployment"


@dataclass(frozen=True)
class ConfirmWindows:
    """The reads that confirm a heartbeat's silence in the job's logs: any line since `recent_ms`
    (the silence window) means not silent; a line in [stale_ms, stale_until_ms) -- the alarm's
    window before it went to ALARM up to SETTLE_MS ago -- contradicts the heartbeat. None when that
    range is still empty (the alarm is too new to tell)."""

    recent_ms: int
    stale_ms: int
    stale_until_ms: int | None


def confirm_windows(window_min: int, alarm_since_ms: int, now_ms: int) -> ConfirmWindows:
    """The confirming reads for a log-silence window in force of `window_min` (floored as the
    alarm's, `silence_window_min`) whose alarm has been in ALARM since `alarm_since_ms`. A line
    written at t in [since - window, now - SETTLE_MS) would have reached a delivering heartbeat
    and ended the ALARM at an evaluation between `since` and now."""
    window_ms = silence_window_min(window_min) * 60_000
    stale = min(alarm_since_ms, now_ms) - window_ms
    until = now_ms - SETTLE_MS
    return ConfirmWindows(now_ms - window_ms, stale, until if until > stale else None)


@dataclass(frozen=True)
class PipelineHealth:
    """The deployment's heartbeat pipeline as last judged (stored with a version; every write is
    conditional on it). `broken_since_ms` None: delivering (or never judged)."""

    broken_since_ms: int | None = None
    jobs: tuple[str, ...] = ()  # the attempts whose logs contradicted their silent heartbeat
    changed_ms: int = 0
    version: int = 0

    @property
    def broken(self) -> bool:
        return self.broken_since_ms is not None


@dataclass(frozen=True)
class PipelineLevel:
    """What one sweep pass saw: the deployment's log-silence alarms in OK and in ALARM (from its
    alarm inventory, every page read), and the training jobs whose heartbeat is doubted."""

    flowing: int
    silent: int
    doubted: tuple[str, ...]


def judge_pipeline(
    previous: PipelineHealth, level: PipelineLevel, now_ms: int
) -> tuple[PipelineHealth, Notify | None]:
    """The pipeline's health after a pass, and the alert a change owes (None: no change).

    Broken: no log-silence alarm is OK (no heartbeat datapoint reaches any alarm) while some
    training attempt's logs contradicted its silent heartbeat. Healed: a log-silence alarm is OK.
    Anything else leaves it as it was (no alarm at all, or silent alarms without a contradiction:
    jobs that are quiet, or not judged yet)."""
    jobs = tuple(sorted(level.doubted))
    if not previous.broken and level.flowing == 0 and jobs:
        health = PipelineHealth(now_ms, jobs[:MAX_JOBS_NAMED], now_ms, previous.version + 1)
        return health, _broken_alert(level, jobs)
    if previous.broken and level.flowing > 0:
        since = previous.broken_since_ms or now_ms
        health = PipelineHealth(None, (), now_ms, previous.version + 1)
        return health, _restored_alert(since, now_ms, level)
    return previous, None


def _notify(severity: str, event: str, subject: str, lines: list[str]) -> Notify:
    return Notify(
        severity=severity,
        event=event,
        subject=clip_text(f"[sagewarden] {subject}", 99),
        body="\n".join(clip_lines(lines, 16_000, keep="head")),
        attributes={"severity": severity, "event": event},
    )


def _broken_alert(level: PipelineLevel, jobs: tuple[str, ...]) -> Notify:
    named = ", ".join(jobs[:MAX_JOBS_NAMED]) + (
        f" (+{len(jobs) - MAX_JOBS_NAMED})" if len(jobs) > MAX_JOBS_NAMED else ""
    )
    return _notify(
        "warning",
        EVENT_BROKEN,
        f"heartbeat pipeline broken: no heartbeat for any of {level.silent} training job(s)",
        [
            f"No log-silence alarm of this deployment sees a heartbeat datapoint ({level.silent} in ALARM, "
            "none OK), and the logs of these training jobs have lines their heartbeat never showed: "
            f"{named}.",
            "The log subscription -> heartbeat function -> Sagewarden/Heartbeat pipeline delivers nothing.",
            "No job is stopped on its heartbeat now: the sweep judges every training job's log silence "
            "from its logs (FilterLogEvents), as a deployment without the log subscription does, at most "
            "a third of its window late. You are told when the heartbeat comes back.",
            "Check: the heartbeat function's errors and throttles (its log group and Lambda metrics), "
            "CloudWatch Logs' DeliveryErrors and DeliveryThrottling (AWS/Logs) for /aws/sagemaker/TrainingJobs, "
            "the subscription filter on that group (aws logs describe-subscription-filters), "
            "and the CloudWatch Logs service health.",
        ],
    )


def _restored_alert(since_ms: int, now_ms: int, level: PipelineLevel) -> Notify:
    return _notify(
        "info",
        EVENT_RESTORED,
        f"heartbeat pipeline restored after {(now_ms - since_ms) / 60_000:.0f} min",
        [
            f"A heartbeat datapoint reached a log-silence alarm again ({level.flowing} OK, {level.silent} in ALARM).",
            "Log silence is judged on the heartbeat again; a job whose heartbeat its logs contradicted "
            "goes back to it once its own log-silence alarm is OK.",
        ],
    )
