"""How a run leaves the decision: finished, failed, cancelled, or waiting to launch again."""

from __future__ import annotations

from sagewarden.domain.decision.alerts import notify
from sagewarden.domain.decision.pending import PendingDecision, ckpt_text
from sagewarden.domain.vocabulary.classifier.models import Classification
from sagewarden.domain.vocabulary.models import RunStatus
from sagewarden.domain.vocabulary.reasons import WaitReason


def wait(
    d: PendingDecision,
    reason: WaitReason,
    delay_ms: int,
    max_hours: float,
    cls: Classification,
    instance_type: str | None = None,
) -> None:
    run = d.run
    started = run.wait_started_ms if run.wait_started_ms is not None else d.now
    if (d.now - started) / 3_600_000 > max_hours:
        fail(d, f"gave up after waiting {max_hours:g} h ({reason})", cls.evidence)
        return
    first = run.wait_count == 0
    d.set(
        status=RunStatus.RETRY_WAIT,
        wake_at_ms=d.now + delay_ms,
        wait_reason=reason,
        wait_instance_type=instance_type,
        wait_started_ms=started,
        wait_count=run.wait_count + 1,
    )
    d.note(f"waiting ({reason}) {delay_ms / 1000:.0f} s")
    if first and reason != WaitReason.THROTTLE:
        lines = [
            f"Reason: {cls.reason}",
            f"Next try {f'in {delay_ms / 60_000:.0f} min' if delay_ms > 0 else 'now'}; gives up after {max_hours:g} h",
        ]
        if reason == WaitReason.QUOTA:
            lines.append("Also retries as soon as another supervised job releases these instances.")
        d.act(
            notify(
                d, "warning", "run.waiting", f"{run.name}: waiting for {reason}", [*lines, *cls.evidence[:3]]
            )
        )


def fail(d: PendingDecision, why: str, evidence: tuple[str, ...] = (), details: tuple[str, ...] = ()) -> None:
    """End the run FAILED; `details` (the class, why, advice) go between the outcome and the rest."""
    finish(d, RunStatus.FAILED, why, "critical", "run.failed", evidence, details)


def finish_cancelled(d: PendingDecision, detail: str) -> None:
    finish(
        d,
        RunStatus.CANCELLED,
        f"cancelled by {d.run.cancel_requested_by} ({detail})",
        "warning",
        "run.cancelled",
    )


def finish(
    d: PendingDecision,
    status: RunStatus,
    why: str,
    severity: str,
    event: str,
    evidence: tuple[str, ...] = (),
    details: tuple[str, ...] = (),
) -> None:
    run = d.run
    d.set(
        status=status,
        outcome=why,
        wake_at_ms=None,
        wait_reason=None,
        wait_instance_type=None,
        deferred_since_ms=None,
        deferred_reason=None,
        deferred_alerted=False,
        deferred_permanent_since_ms=None,
    )
    lines = [
        f"Outcome: {why}",
        *details,
        f"Attempts: {run.attempt_count}; restarts {run.restarts} of {d.policy.max_restarts}; "
        f"MaxRuntime segments {run.segments}",
        f"Last verified checkpoint: {ckpt_text(run.last_checkpoint)}",
        f"Estimated cost: ${run.cost_usd:,.2f}",
    ]
    if evidence:
        lines += ["Evidence:", *evidence[:10]]
    d.act(notify(d, severity, event, f"{run.name}: {status.value.lower()}", lines))
    d.note(f"run {status.value}: {why}")
