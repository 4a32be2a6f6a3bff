"""Deferrals: a decision that waits for evidence, bounded, then gives up or fails.
Why: docs/reliability.md (*Unknown is not empty*)."""

from __future__ import annotations

from sagewarden.domain.decision.alerts import notify
from sagewarden.domain.decision.outcomes import fail
from sagewarden.domain.decision.pending import PendingDecision
from sagewarden.domain.vocabulary.bounded import clip_text

DEFER_RETRY_MS = 60_000  # a deferred decision is retried on the next sweep


DEFER_ALERT_AFTER_MS = 10 * 60_000  # ... and a person is told when it stays deferred this long


# ... and when the reason is an error that cannot heal by itself (no such bucket, access denied),
# the run fails after this long instead of waiting for ever: long enough for a person told at
# DEFER_ALERT_AFTER_MS to fix a bucket policy or a typo, and for IAM changes to propagate
DEFER_FAIL_AFTER_MS = 30 * 60_000


def defer(d: PendingDecision, reason: str, *, permanent: bool = False) -> None:
    """Take no decision now: an observation it needs is unknown. Retried on the next sweep;
    a person is told once when it stays deferred for DEFER_ALERT_AFTER_MS. `permanent`: the
    observation failed with an error that does not heal by itself (see `defer_or_fail`)."""
    run = d.run
    since = run.deferred_since_ms if run.deferred_since_ms is not None else d.now
    permanent_since = None
    if permanent:
        permanent_since = (
            run.deferred_permanent_since_ms if run.deferred_permanent_since_ms is not None else d.now
        )
    d.set(
        deferred_since_ms=since,
        deferred_reason=clip_text(reason, 1_000),
        deferred_permanent_since_ms=permanent_since,
    )
    d.note(f"decision deferred: {reason}")
    if not run.deferred_alerted and d.now - since >= DEFER_ALERT_AFTER_MS:
        d.set(deferred_alerted=True)
        advice = (
            "sagewarden will not act on a guess: it retries every minute and decides as soon "
            "as the observation can be made. Fix the access or wait for the service to recover."
        )
        if permanent_since is not None:
            fails_in = max(0, permanent_since + DEFER_FAIL_AFTER_MS - d.now) / 60_000
            advice = (
                "This error does not heal by itself: fix the bucket name, the bucket policy or the "
                f"supervisor's access within {fails_in:.0f} min, or the run fails "
                f"({DEFER_FAIL_AFTER_MS // 60_000} min after the error was first seen)."
            )
        d.act(
            notify(
                d,
                "warning",
                "run.deferred",
                f"{run.name}: decision deferred for {(d.now - since) / 60_000:.0f} min",
                [f"Reason: {reason}", advice],
            )
        )


def deferral_expired(d: PendingDecision, permanent: bool) -> bool:
    """An error that cannot heal by itself has been the reason for DEFER_FAIL_AFTER_MS: waiting
    on it would wait for ever. A transient error (throttling, 5xx, a timeout) never expires."""
    since = d.run.deferred_permanent_since_ms
    return permanent and since is not None and d.now - since >= DEFER_FAIL_AFTER_MS


def give_up(d: PendingDecision, reason: str) -> None:
    """Fail the run on an expired deferral (see `deferral_expired`)."""
    since = d.run.deferred_permanent_since_ms
    minutes = (d.now - since) / 60_000 if since is not None else 0
    fail(
        d,
        f"gave up after {minutes:.0f} min of an error that does not heal by itself: {reason}. "
        f"Fix it, then resume the run (sagewarden resume {d.run.run_id})",
    )


def defer_or_fail(d: PendingDecision, reason: str, *, permanent: bool) -> None:
    """Defer, or fail the run once the deferral expired (`deferral_expired`)."""
    if deferral_expired(d, permanent):
        give_up(d, reason)
    else:
        defer(d, reason, permanent=permanent)


def clear_deferral(d: PendingDecision) -> None:
    if d.run.deferred_since_ms is not None:
        d.note(f"deferral resolved after {(d.now - d.run.deferred_since_ms) / 60_000:.0f} min")
        d.set(
            deferred_since_ms=None,
            deferred_reason=None,
            deferred_alerted=False,
            deferred_permanent_since_ms=None,
        )
