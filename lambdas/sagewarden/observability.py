"""Powertools singletons: logger, metrics (service dimension per deployment) and a lazy tracer.

Why: docs/deploy.md (*Context*: `tracing`; *Two deployments side by side*)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, TypeVar

from aws_lambda_powertools import Logger, Metrics

SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME") or "sagewarden"
logger = Logger(service=SERVICE)
metrics = Metrics(namespace="Sagewarden", service=SERVICE)

F = TypeVar("F", bound=Callable[..., Any])


def tracing_enabled() -> bool:
    """Tracing is on unless POWERTOOLS_TRACE_DISABLED says otherwise (Powertools' own switch)."""
    return os.environ.get("POWERTOOLS_TRACE_DISABLED", "false").strip().lower() not in ("true", "1")


class LazyTracer:
    """`capture_lambda_handler` and `capture_method` of Powertools' Tracer, which is created (and
    the X-Ray SDK imported) only when a decorated function first runs with tracing enabled."""

    def __init__(self, service: str) -> None:
        self._service = service
        self._real: Any = None
        self._decided = False

    def real(self) -> Any:
        """Powertools' Tracer, or None when tracing is off (decided once, at first use)."""
        if not self._decided:
            self._decided = True
            if tracing_enabled():
                from aws_lambda_powertools import Tracer

                self._real = Tracer(service=self._service)
        return self._real

    def _lazy(self, fn: F, decorate: Callable[[Any, F], F]) -> F:
        wrapped: F | None = None

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            nonlocal wrapped
            if wrapped is None:
                real = self.real()
                wrapped = fn if real is None else decorate(real, fn)
            return wrapped(*args, **kwargs)

        return call  # type: ignore[return-value]

    def capture_lambda_handler(self, fn: F) -> F:
        return self._lazy(fn, lambda real, f: real.capture_lambda_handler(f))

    def capture_method(self, fn: F) -> F:
        return self._lazy(fn, lambda real, f: real.capture_method(f))


tracer = LazyTracer(SERVICE)
