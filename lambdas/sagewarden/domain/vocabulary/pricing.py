"""Estimated on-demand prices per instance-hour for common SageMaker training types: us-east-1 list
prices, estimates only. Why: docs/recovery.md (*Cost*)."""

from __future__ import annotations

ESTIMATED_PRICE_PER_INSTANCE_HOUR_USD: dict[str, float] = {
    "ml.p5.48xlarge": 113.07,
    "ml.p5e.48xlarge": 113.07,
    "ml.p4de.24xlarge": 40.97,
    "ml.p4d.24xlarge": 37.69,
    "ml.p3dn.24xlarge": 35.89,
    "ml.p3.16xlarge": 28.15,
    "ml.p3.8xlarge": 14.69,
    "ml.p3.2xlarge": 3.83,
    "ml.g5.48xlarge": 20.36,
    "ml.g5.12xlarge": 7.09,
    "ml.g5.2xlarge": 1.52,
    "ml.g5.xlarge": 1.41,
    "ml.trn1.32xlarge": 24.72,
    "ml.trn1n.32xlarge": 28.50,
    "ml.m5.xlarge": 0.23,
}

GPUS_PER_INSTANCE: dict[str, int] = {
    "ml.p5.48xlarge": 8,
    "ml.p5e.48xlarge": 8,
    "ml.p4de.24xlarge": 8,
    "ml.p4d.24xlarge": 8,
    "ml.p3dn.24xlarge": 8,
    "ml.p3.16xlarge": 8,
    "ml.p3.8xlarge": 4,
    "ml.p3.2xlarge": 1,
    "ml.g5.48xlarge": 8,
    "ml.g5.12xlarge": 4,
    "ml.g5.2xlarge": 1,
    "ml.g5.xlarge": 1,
    "ml.trn1.32xlarge": 16,
    "ml.trn1n.32xlarge": 16,
}


def price_per_instance_hour(instance_type: str, override: float | None) -> float:
    if override is not None:
        return override
    return ESTIMATED_PRICE_PER_INSTANCE_HOUR_USD.get(instance_type, 0.0)


def gpus_per_instance(instance_type: str) -> int:
    return GPUS_PER_INSTANCE.get(instance_type, 8)
