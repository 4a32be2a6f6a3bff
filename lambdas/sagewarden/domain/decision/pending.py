"""The decision under way: `PendingDecision`, what one call of `decide` changes, and the
small steps every handler shares (stop, cancel, choices, back-off). Why: docs/reliability.md
(*Design choices*)."""

from __future__ import annotations

import dataclasses
import zlib
from dataclasses import dataclass, field
from typing import Any

from sagewarden.domain.vocabulary.actions import Action, StopJob
from sagewarden.domain.vocabulary.costs import live_cost_usd
from sagewarden.domain.vocabulary.events import Observations
from sagewarden.domain.vocabulary.layouts import Checkpoint
from sagewarden.domain.vocabulary.models import Attempt, LaunchState, Run, RunStatus
from sagewarden.domain.vocabulary.policy import InstanceChoice, RunPolicy
from sagewarden.domain.vocabulary.pricing import price_per_instance_hour
from sagewarden.domain.vocabulary.reasons import StopIntent

RECONCILE_INTERVAL_MS = 10 * 60_000  # how often the sweep re-observes a live job


LAUNCH_RETRY_AFTER_MS = 2 * 60_000  # a launch intent still unconfirmed after this is re-issued


# A cancelled run's unconfirmed launch counts as never created once SageMaker has had no such job
# for this long after the request: longer than any function that could still be issuing it.
LAUNCH_SETTLE_MS = 5 * 60_000


STOP_RETRY_AFTER_MS = 5 * 60_000  # a stop still not observed after this is re-issued


STOP_REASK_ON_EVIDENCE_MS = 60_000  # a job seen running this long after its stop is asked again at once


ALARM_VERIFY_AFTER_MS = 60_000  # hang alarms not yet seen in CloudWatch are checked this soon


@dataclass
class PendingDecision:
    run: Run
    now: int
    policy: RunPolicy
    obs: Observations
    actions: list[Action] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def set(self, **changes: Any) -> None:
        self.run = dataclasses.replace(self.run, **changes)

    def put_attempt(self, attempt: Attempt) -> None:
        self.run = dataclasses.replace(self.run, attempts=self.run.with_attempt(attempt))

    def note(self, text: str) -> None:
        self.notes.append(text)

    def act(self, action: Action) -> None:
        self.actions.append(action)


def choices(d: PendingDecision) -> list[InstanceChoice]:
    rc = d.run.request.get("ResourceConfig", {})
    primary = InstanceChoice(str(rc.get("InstanceType", "")), int(rc.get("InstanceCount", 1)))
    return [primary, *d.policy.instance_fallbacks]


def choice(d: PendingDecision) -> InstanceChoice:
    options = choices(d)
    return options[d.run.fallback_index % len(options)]


def cancel_pending(d: PendingDecision) -> bool:
    return d.run.cancel_requested_by is not None


def request_stop(d: PendingDecision, cur: Attempt, intent: StopIntent, why: str) -> None:
    d.put_attempt(dataclasses.replace(cur, stop_intent=intent, stop_requested_ms=d.now))
    d.set(status=RunStatus.STOPPING)
    d.act(StopJob(cur.job_name, intent))
    d.note(f"{why}: intent '{intent}' recorded, stopping {cur.job_name}")


def stop_stray(d: PendingDecision, job: str, why: str) -> None:
    """Stop a job of this run that must not run, and keep asking until SageMaker confirms."""
    strays = dict(d.run.strays)
    strays[job] = d.now
    d.set(strays=tuple(sorted(strays.items())))
    d.act(StopJob(job, StopIntent.ORPHAN))
    d.note(f"{why}: stopping {job}")


def backoff_ms(d: PendingDecision) -> int:
    pol, run = d.policy, d.run
    base = min(pol.backoff_cap_seconds, pol.backoff_base_seconds * 2 ** min(run.wait_count, 20))
    return int(base * 1000 * jitter(run.run_id, run.wait_count, pol.backoff_jitter))


def throttle_ms(d: PendingDecision) -> int:
    return int(d.policy.throttle_backoff_seconds * 1000 * jitter(d.run.run_id, d.run.wait_count, 0.5))


def jitter(seed: str, k: int, spread: float) -> float:
    """Deterministic factor in [1 - spread, 1 + spread] (decide stays pure and replayable)."""
    frac = (zlib.crc32(f"{seed}:{k}".encode()) % 10_000) / 10_000
    return 1 + spread * (2 * frac - 1)


def running_cost(d: PendingDecision, cur: Attempt) -> float:
    return live_cost_usd(cur, d.policy, d.now)


def lost_work(d: PendingDecision, ended: Attempt) -> tuple[float, float]:
    """Training time since the newest checkpoint the next attempt resumes from, and its cost."""
    if ended.training_started_ms is None or ended.ended_ms is None:
        return 0.0, 0.0
    since = ended.training_started_ms
    ck = ended.checkpoint_at_end
    if ck is not None and ck.written_at_ms is not None:
        since = max(since, ck.written_at_ms)
    lost_s = max(0.0, (ended.ended_ms - since) / 1000)
    price = price_per_instance_hour(ended.instance_type, d.policy.instance_hour_price_usd)
    return lost_s, lost_s / 3600 * ended.instance_count * price


def step_of(ckpt: Checkpoint | None) -> int:
    return ckpt.step if ckpt is not None else -1


def ckpt_text(ckpt: Checkpoint | None) -> str:
    return f"step {ckpt.step} ({ckpt.uri})" if ckpt is not None else "no checkpoint (fresh start)"


def waiting_launch(cur: Attempt | None) -> bool:
    return cur is not None and cur.launch == LaunchState.WAITING
