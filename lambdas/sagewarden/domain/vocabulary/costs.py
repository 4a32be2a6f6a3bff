"""What a run has cost so far: one estimate, used by the cost budget, the API, the CLI and alerts.
Pure. Why: docs/recovery.md (*Where the rules live*)."""

from __future__ import annotations

from sagewarden.domain.vocabulary.models import Attempt, Run
from sagewarden.domain.vocabulary.policy import RunPolicy
from sagewarden.domain.vocabulary.pricing import price_per_instance_hour


def live_cost_usd(att: Attempt, policy: RunPolicy, now_ms: int) -> float:
    """A live attempt's cost so far (0 before it trains)."""
    if att.training_started_ms is None:
        return 0.0
    hours = max(0, now_ms - att.training_started_ms) / 3_600_000
    return (
        hours
        * att.instance_count
        * price_per_instance_hour(att.instance_type, policy.instance_hour_price_usd)
    )


def attempt_cost_usd(att: Attempt, policy: RunPolicy, now_ms: int) -> float:
    """The attempt's cost: fixed once it ended, so far while it is live."""
    if att.ended or not att.live:
        return att.cost_usd
    return live_cost_usd(att, policy, now_ms)


def run_cost_usd(run: Run, now_ms: int) -> float:
    """The run's cost so far: its ended attempts, plus the live one's so far."""
    cur = run.current
    live = live_cost_usd(cur, run.policy, now_ms) if cur is not None and cur.live else 0.0
    return run.cost_usd + live
