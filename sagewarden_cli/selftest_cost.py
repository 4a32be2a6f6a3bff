"""What `sagewarden selftest` announces it will cost, from its plan and its steps' deadlines."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sagewarden_cli.selftest_plan import PLAN, POLICY, Plan
from sagewarden_cli.selftest_steps import steps

# -- cost --------------------------------------------------------------------------------------------
# SageMaker training, on-demand, us-east-1 list price per instance-hour as we read it in 2025 (half
# of ml.m5.xlarge's $0.23 in lambdas/sagewarden/domain/vocabulary/pricing.py). Other regions differ a little;
# check today's SageMaker pricing page.
PRICE_PER_HOUR_USD: dict[str, float] = {"ml.m5.large": 0.115}
PRICE_SOURCE = "us-east-1 on-demand SageMaker training list price, read 2025"
# Billed per job beyond the script's own run time: the image download (billing starts when the
# instance is ready) and the model upload, about 3 minutes together on ml.m5.large.
BILLED_OVERHEAD_MIN = 3.0
ALARM_TO_STOP_MIN = 2.0  # the alarm's evaluation and the event's delivery
KILL_MIN = 2.0  # SageMaker kills a job that ignores SIGTERM 120 s after StopTrainingJob


def price_per_hour(instance_type: str) -> float | None:
    if instance_type in PRICE_PER_HOUR_USD:
        return PRICE_PER_HOUR_USD[instance_type]
    from sagewarden.domain.vocabulary.pricing import ESTIMATED_PRICE_PER_INSTANCE_HOUR_USD

    return ESTIMATED_PRICE_PER_INSTANCE_HOUR_USD.get(instance_type)


def typical_instance_minutes(plan: Plan = PLAN, policy: Mapping[str, Any] = POLICY) -> float:
    """Billed instance-minutes when every step happens as it should."""
    hang = plan.hang_after_min + float(policy["log_silence_minutes"]) + ALARM_TO_STOP_MIN + KILL_MIN
    return 3 * BILLED_OVERHEAD_MIN + plan.crash_after_min + hang + plan.finish_after_min


def most_instance_minutes(plan: Plan = PLAN, policy: Mapping[str, Any] = POLICY) -> float:
    """At most: one job runs at a time and the self-test cancels the run at the first missed
    deadline, so no more than every deadline in full plus the final stop."""
    return sum(s.deadline_min for s in steps(plan, policy)) + KILL_MIN


def cost_lines(instance_type: str, plan: Plan = PLAN, policy: Mapping[str, Any] = POLICY) -> list[str]:
    typical, most = typical_instance_minutes(plan, policy), most_instance_minutes(plan, policy)
    price = price_per_hour(instance_type)
    if price is None:
        return [f"about {typical:.0f} {instance_type} instance-minutes (at most {most:.0f}); no price known"]
    return [
        f"about {typical:.0f} {instance_type} instance-minutes, ${typical / 60 * price:.2f} "
        f"(at most {most:.0f}, ${most / 60 * price:.2f}, if every step used its full deadline)",
        f"at ${price:g} per instance-hour ({PRICE_SOURCE}); CloudWatch alarms and S3 add less than a cent",
    ]
