"""How the service writes events, observations and actions into the audit trail (text and detail),
and what of a run's secrets its entries and alerts may show (none: `domain.redaction`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from sagewarden.domain.actions import Action, LaunchAttempt, Notify
from sagewarden.domain.events import (
    AlarmsObserved,
    CancelRequested,
    CapacityReleased,
    Event,
    HangSignal,
    JobObserved,
    Observations,
    ResumeRequested,
    RetirementReported,
    event_name,
)
from sagewarden.domain.models import Run
from sagewarden.domain.redaction import redact, scrub_text, secret_values
from sagewarden.ports import AuditEntry


def error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 500 else text[:497] + "..."


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


def redacted_entry(entry: AuditEntry, secrets: tuple[str, ...]) -> AuditEntry:
    """An audit entry as it may be stored and shown (`domain.redaction`)."""
    return AuditEntry(
        entry.at_ms, entry.kind, scrub_text(entry.summary, secrets), redact(entry.detail, secrets)
    )


def redacted_alert(message: Notify, secrets: tuple[str, ...]) -> Notify:
    """An alert as it may be published: no secret value in its subject or body."""
    if not secrets:
        return message
    return dataclasses.replace(
        message, subject=scrub_text(message.subject, secrets), body=scrub_text(message.body, secrets)
    )
