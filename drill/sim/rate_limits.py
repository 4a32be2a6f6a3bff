"""The account's API rate limits (`DEFAULT_RATES`): a token bucket per operation on the virtual clock,
waits charged to the calling invocation. Why: docs/drill.md (`api_rates`), docs/fidelity.md."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from drill.account import invocation

DEFAULT_RATES: dict[str, float] = {
    "cloudwatch.PutMetricAlarm": 3,
    "cloudwatch.DeleteAlarms": 3,
    "cloudwatch.DescribeAlarms": 9,
    "cloudwatch.GetMetricData": 50,
    "logs.DescribeLogStreams": 5,
    "logs.FilterLogEvents": 5,
    "logs.GetLogEvents": 10,
    "sagemaker.CreateTrainingJob": 1,
    "sagemaker.DescribeTrainingJob": 2,
    "sagemaker.StopTrainingJob": 1,
    "sagemaker.UpdateTrainingJob": 1,
}
DEFAULT_RETRY_WAIT_S = 35.5
DEFAULT_BURST = 1
MAX_RETRY_WAIT_S = 900.0
THROTTLE_CODES = {
    "cloudwatch": "Throttling",
    "logs": "ThrottlingException",
    "sagemaker": "ThrottlingException",
}


def throttled(service: str, operation: str) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": THROTTLE_CODES.get(service, "ThrottlingException"), "Message": "Rate exceeded"},
            "ResponseMetadata": {"HTTPStatusCode": 400, "RetryAttempts": 7, "MaxAttemptsReached": True},
        },
        operation,
    )


@dataclass
class RateLimits:
    """Token buckets per operation (``"service.Operation"`` -> calls per second; a rate of None or
    an operation not listed is not limited) on ``now_ms`` (the virtual clock)."""

    now_ms: Callable[[], int]
    rates: Mapping[str, float | None] = field(default_factory=lambda: dict(DEFAULT_RATES))
    retry_wait_s: float = DEFAULT_RETRY_WAIT_S
    burst: int = DEFAULT_BURST
    # per operation: the theoretical arrival time of the next call (GCRA), in virtual ms
    _tat: dict[str, float] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)  # admitted, per operation
    throttled: dict[str, int] = field(default_factory=dict)  # refused, per operation
    waited_ms: dict[str, float] = field(default_factory=dict)  # charged to callers, per operation

    def __post_init__(self) -> None:
        if self.burst < 1:
            raise ValueError("burst must be at least 1")
        if not 0 <= self.retry_wait_s <= MAX_RETRY_WAIT_S:
            raise ValueError(f"retry_wait_s must be within 0..{MAX_RETRY_WAIT_S:g}")
        for op, rate in self.rates.items():
            if rate is not None and not (math.isfinite(rate) and rate > 0):
                raise ValueError(f"{op}: a rate must be a positive number of calls per second (or null)")

    def admit(self, service: str, operation: str, _params: Mapping[str, Any] | None = None) -> None:
        """Let one call through, charging its wait to the calling invocation, or raise the
        service's throttling error (charging the retries that failed)."""
        key = f"{service}.{operation}"
        rate = self.rates.get(key)
        if rate is None:
            return
        interval = 1000.0 / rate
        at = self.now_ms() + invocation.spent_ms()
        tat = self._tat.get(key, -math.inf)
        start = max(at, tat - (self.burst - 1) * interval)
        wait = start - at
        if wait > self.retry_wait_s * 1000:
            spent = self.retry_wait_s * 1000
            invocation.charge(spent)
            self.throttled[key] = self.throttled.get(key, 0) + 1
            self.waited_ms[key] = self.waited_ms.get(key, 0.0) + spent
            raise throttled(service, operation)
        self._tat[key] = max(tat, start) + interval
        invocation.charge(wait)
        self.calls[key] = self.calls.get(key, 0) + 1
        if wait:
            self.waited_ms[key] = self.waited_ms.get(key, 0.0) + wait


def known_operations() -> tuple[str, ...]:
    return tuple(DEFAULT_RATES)
