"""Texts and details of the audit trail's entries for events, observations and actions, and the
scrubbing of a run's secrets from them (`domain/vocabulary/redaction.py`).

Why: docs/reliability.md (*Secrets are scrubbed before text is cut*)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from sagewarden.domain.vocabulary.actions import Action, LaunchAttempt, Notify
from sagewarden.domain.vocabulary.events import (
    AlarmsObserved,
    CancelRequested,
    CapacityReleased,
    Event,
    HangSignal,
    JobObserved,
    LaunchRejected,
    Observations,
    ResumeRequested,
    RetirementReported,
    event_name,
)
from sagewarden.domain.vocabulary.models import Run
from sagewarden.domain.vocabulary.redaction import redact, scrub_text, secret_values
from sagewarden.ports.aws import AuditEntry

ERROR_TEXT_CHARS = 500
# looked-up texts the domain parses into numbers and never shows (scrubbed by the log reader)
_PARSED_ONLY = frozenset({"step_lines"})


def error_text(exc: BaseException, secrets: Sequence[str] = ()) -> str:
    """An exception as one bounded text: scrubbed of the run's secrets (and of what the patterns
    call secret) before it is cut to ERROR_TEXT_CHARS."""
    text = scrub_text(f"{type(exc).__name__}: {exc}", secrets)
    return text if len(text) <= ERROR_TEXT_CHARS else text[: ERROR_TEXT_CHARS - 3] + "..."


def describe_event(event: Event) -> str:
    if isinstance(event, JobObserved):
        text = f"{event.job_name}: {event.status}/{event.secondary} ({event.source})"
        return text + (f": {event.failure_reason}" if event.failure_reason else "")
    if isinstance(event, HangSignal):
        return f"{event.job_name}: {event.signal} {event.state} ({event.source})"
    if isinstance(event, AlarmsObserved):
        in_alarm = [k for k, s, _ in event.states if s == "ALARM"]
        return f"{event.job_name}: {len(event.states)} hang alarms in CloudWatch" + (
            f", in ALARM: {', '.join(in_alarm)}" if in_alarm else ""
        )
    if isinstance(event, CapacityReleased):
        return f"capacity released: {event.count} x {event.instance_type}"
    if isinstance(event, CancelRequested):
        return f"cancel requested by {event.by}"
    if isinstance(event, ResumeRequested):
        return f"resume requested by {event.by}"
    if isinstance(event, RetirementReported):
        names = ", ".join(o.name for o in event.outcomes) or "no directory"
        return f"retirement pass answered for {names}" + (" (ended by an S3 error)" if event.error else "")
    fields = ", ".join(f"{k}={v}" for k, v in dataclasses.asdict(event).items())
    return f"{event_name(event)}({fields})"


def event_detail(event: Event, obs: Observations) -> dict[str, Any]:
    detail: dict[str, Any] = {"type": event_name(event), **dataclasses.asdict(event)}
    if obs.checkpoint is not None:
        detail["checkpoint"] = {"uri": obs.checkpoint.uri, "step": obs.checkpoint.step}
    if obs.checkpoint_error:
        detail["checkpoint_error"] = obs.checkpoint_error
    if obs.log_error:
        detail["log_error"] = obs.log_error
    if obs.log_tail:
        detail["log_tail"] = list(obs.log_tail[-20:])
    if obs.hosts_triage:
        detail["hosts_triage"] = list(obs.hosts_triage)
    if obs.logs_silent is not None:
        detail["logs_silent"] = obs.logs_silent
    return detail


def action_detail(action: Action) -> dict[str, Any]:
    data = dataclasses.asdict(action)
    if isinstance(action, LaunchAttempt):
        req = dict(action.request)
        data = {
            "attempt": action.attempt,
            "job_name": action.job_name,
            "environment": {
                k: v for k, v in req.get("Environment", {}).items() if k.startswith("SAGEWARDEN_")
            },
            "resource_config": req.get("ResourceConfig", {}),
        }
    return data


def run_secrets(run: Run) -> tuple[str, ...]:
    """The secret values of a run that audit entries and alerts must not show."""
    return secret_values(run.request, run.policy.environment_defaults)


def redacted_event(event: Event, secrets: Sequence[str]) -> Event:
    """An event with its free texts scrubbed (a FailureReason, CreateTrainingJob's error message,
    an alarm's reason), before `decide` cuts any of them: the classifier's evidence keeps 300
    characters of a FailureReason that quotes the whole command line."""
    if isinstance(event, JobObserved) and event.failure_reason:
        return dataclasses.replace(event, failure_reason=scrub_text(event.failure_reason, secrets))
    if isinstance(event, LaunchRejected) and event.message:
        return dataclasses.replace(event, message=scrub_text(event.message, secrets))
    if isinstance(event, HangSignal) and event.reason:
        return dataclasses.replace(event, reason=scrub_text(event.reason, secrets))
    return event


def redacted_observations(obs: Observations, secrets: Sequence[str]) -> Observations:
    """Observations with every looked-up text scrubbed (log lines, triage rows, the start-up scan,
    fingerprints, every error text), before `decide` quotes, bounds and stores them."""
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(obs):
        if f.name in _PARSED_ONLY:
            continue
        value = getattr(obs, f.name)
        if isinstance(value, str) and value:
            changes[f.name] = scrub_text(value, secrets)
        elif isinstance(value, tuple) and value and all(isinstance(v, str) for v in value):
            changes[f.name] = tuple(scrub_text(v, secrets) for v in value)
    return dataclasses.replace(obs, **changes) if changes else obs


def redacted_entry(entry: AuditEntry, secrets: tuple[str, ...]) -> AuditEntry:
    """An audit entry as it may be stored and shown (`domain.redaction`)."""
    return AuditEntry(
        entry.at_ms, entry.kind, scrub_text(entry.summary, secrets), redact(entry.detail, secrets)
    )


def redacted_alert(message: Notify, secrets: tuple[str, ...]) -> Notify:
    """An alert as it may be published: no secret value in its subject or body."""
    return dataclasses.replace(
        message, subject=scrub_text(message.subject, secrets), body=scrub_text(message.body, secrets)
    )
