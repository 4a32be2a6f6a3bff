"""SageMaker's training quotas, by the names Service Quotas lists and ResourceLimitExceeded quotes.

A leaf of the domain: admission, the CLI's dry run and preflight, and the drill's account name
quotas through here; spot requests count against the spot quotas. Why: docs/fidelity.md."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TOTAL_QUOTA = "Number of instances across all training jobs"
TOTAL_SPOT_QUOTA = "Number of instances across all spot training jobs"


def is_managed_spot(request: Mapping[str, Any]) -> bool:
    """The CreateTrainingJob request asks for managed spot training."""
    return bool(request.get("EnableManagedSpotTraining"))


def training_quota(instance_type: str, *, spot: bool = False) -> str:
    """The per-type instance quota a training job of this type counts against."""
    return (
        f"{instance_type} for spot training job usage" if spot else f"{instance_type} for training job usage"
    )


def total_quota(*, spot: bool = False) -> str:
    """The account-wide instance quota across all (spot) training jobs."""
    return TOTAL_SPOT_QUOTA if spot else TOTAL_QUOTA


def warm_pool_quota(instance_type: str) -> str:
    """The warm-pool quota of an instance type (0 by default; never used by managed spot)."""
    return f"{instance_type} for training warm pool usage"


def instance_quotas(instance_type: str, *, spot: bool = False) -> tuple[str, str]:
    """Both quotas a job of `instance_type` counts against: its type's and the account-wide one."""
    return training_quota(instance_type, spot=spot), total_quota(spot=spot)
