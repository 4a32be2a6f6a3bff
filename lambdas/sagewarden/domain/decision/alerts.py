"""Alerts of the decision under way: `notify` and bounded evidence."""

from __future__ import annotations

from sagewarden.domain.decision.pending import PendingDecision
from sagewarden.domain.vocabulary.actions import Notify
from sagewarden.domain.vocabulary.bounded import clip_lines, clip_text

ALERT_BODY_MAX_BYTES = 64 * 1024  # stored in the outbox (DynamoDB) and published (SNS, 256 KiB)


EVIDENCE_MAX_BYTES = 16 * 1024  # per attempt item (DynamoDB 400 KB per item)


def notify(d: PendingDecision, severity: str, event: str, subject: str, lines: list[str]) -> Notify:
    run = d.run
    body_lines = clip_lines(
        [*lines, "", f"Run: {run.name} ({run.run_id})"], ALERT_BODY_MAX_BYTES, keep="head"
    )
    return Notify(
        severity=severity,
        event=event,
        subject=clip_text(f"[sagewarden] {subject}", 99),
        body="\n".join(body_lines),
        attributes={"severity": severity, "run_id": run.run_id, "event": event},
    )


def bounded_evidence(lines: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    return clip_lines(list(lines), EVIDENCE_MAX_BYTES, keep="head")
