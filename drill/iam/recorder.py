"""Records the AWS calls a supervisor function makes in the drill, each exactly once.

`CallRecorder.attach` hooks a botocore client, `CallRecorder.wrap` proxies a simulated one;
`CURRENT_FUNCTION` says which function runs. Why: docs/deploy.md (*IAM proven by replay*)."""

from __future__ import annotations

import contextlib
import contextvars
import inspect
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from drill.iam.requests import AccountFacts, AuthorizationRequest, UnmappedCall, authorization_requests

CURRENT_FUNCTION: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "sagewarden_function", default=None
)

_NOT_API = frozenset({"get_paginator", "can_paginate", "get_waiter", "close", "meta", "exceptions"})


@contextlib.contextmanager
def invoked_as(handler: str) -> Iterator[None]:
    """Attribute the AWS calls made inside the block to ``handler`` (a dotted handler path)."""
    token = CURRENT_FUNCTION.set(handler)
    try:
        yield
    finally:
        CURRENT_FUNCTION.reset(token)


def operation_name(method: str) -> str:
    """boto3 method name -> API operation name (``list_objects_v2`` -> ``ListObjectsV2``)."""
    return "".join(part[:1].upper() + part[1:] for part in method.split("_"))


@dataclass(frozen=True)
class RecordedCall:
    function: str
    service: str
    operation: str
    params: str  # a short summary

    def describe(self) -> str:
        return f"{self.function}: {self.service}.{self.operation}({self.params})"


def summarize(params: Mapping[str, Any], limit: int = 240) -> str:
    parts = []
    for key, value in params.items():
        if isinstance(value, list):
            text = f"[{len(value)} item{'s' if len(value) != 1 else ''}]"
        elif isinstance(value, Mapping):
            text = (
                "{" + ", ".join(str(k) for k in list(value)[:4]) + (", ..." if len(value) > 4 else "") + "}"
            )
        else:
            text = repr(value)
            text = text if len(text) <= 80 else text[:77] + "..."
        parts.append(f"{key}={text}")
    out = ", ".join(parts)
    return out if len(out) <= limit else out[: limit - 3] + "..."


@dataclass
class CallRecorder:
    """Collects the calls of supervisor functions, deduplicated by the requests they imply."""

    facts: AccountFacts
    calls: int = 0
    calls_by_function: Counter[str] = field(default_factory=Counter)
    # (function, request) -> the first call that made it
    requests: dict[tuple[str, AuthorizationRequest], RecordedCall] = field(default_factory=dict)
    # (function, service, operation) -> the first such call
    unmapped: dict[tuple[str, str, str], RecordedCall] = field(default_factory=dict)
    enabled: bool = True
    # called with (function, service, operation, params) for every call of a function, enabled or
    # not (e.g. the scale benchmark's per-minute call counter, benchmarks/scale_costs.py)
    listeners: list[Callable[[str, str, str, Mapping[str, Any]], None]] = field(default_factory=list)
    # called with (service, operation, params) before every call of a function is made; may refuse
    # it by raising the service's error (the account's API rate limits, drill/sim/rate_limits.py)
    gates: list[Callable[[str, str, Mapping[str, Any]], None]] = field(default_factory=list)

    def record(self, service: str, operation: str, params: Mapping[str, Any]) -> None:
        function = CURRENT_FUNCTION.get()
        if function is None:
            return
        for gate in self.gates:
            gate(service, operation, params)
        for listener in self.listeners:
            listener(function, service, operation, params)
        if not self.enabled:
            return
        self.calls += 1
        self.calls_by_function[function] += 1
        try:
            implied = authorization_requests(service, operation, params, self.facts)
        except UnmappedCall:
            key = (function, service, operation)
            if key not in self.unmapped:
                self.unmapped[key] = RecordedCall(function, service, operation, summarize(params))
            return
        except (KeyError, TypeError, ValueError) as exc:  # a row could not read the parameters
            key = (function, service, f"{operation} (row failed: {exc!r})")
            if key not in self.unmapped:
                self.unmapped[key] = RecordedCall(function, service, operation, summarize(params))
            return
        call: RecordedCall | None = None
        for request in implied:
            key2 = (function, request)
            if key2 not in self.requests:
                call = call or RecordedCall(function, service, operation, summarize(params))
                self.requests[key2] = call

    # -- hooks -------------------------------------------------------------------------------
    def attach(self, client: Any) -> Any:
        """Record every API call of a botocore client; returns the client."""
        service = client.meta.service_model.service_name

        def hook(params: Mapping[str, Any], model: Any, **_: Any) -> None:
            self.record(service, model.name, params)

        client.meta.events.register("provide-client-params", hook)
        return client

    def wrap(self, obj: Any, service: str) -> Any:
        """A proxy recording the API methods ``obj`` implements itself."""
        return _RecordingProxy(obj, service, self)

    # -- views -------------------------------------------------------------------------------
    def distinct_requests(self) -> int:
        return len(self.requests)


class _RecordingProxy:
    def __init__(self, inner: Any, service: str, recorder: CallRecorder) -> None:
        self._inner = inner
        self._service = service
        self._recorder = recorder
        self._api: dict[str, bool] = {}

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        api = self._api.get(name)
        if api is None:
            api = self._api[name] = (
                not name.startswith("_") and name not in _NOT_API and _defined_on(self._inner, name)
            )
        if not api or not callable(attr):
            return attr
        operation = operation_name(name)
        recorder, service = self._recorder, self._service

        def call(*args: Any, **kwargs: Any) -> Any:
            recorder.record(service, operation, kwargs)
            return attr(*args, **kwargs)

        return call


def _defined_on(obj: Any, name: str) -> bool:
    """True if ``obj`` implements ``name`` itself (not through ``__getattr__`` delegation)."""
    try:
        inspect.getattr_static(obj, name)
    except AttributeError:
        return False
    return True
