"""Delivers events and API calls to handlers as the synthesized template wires them (`TemplateRouter`).

Why: docs/drill.md (*The account*: a wrong rule or route fails the drill)."""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import re
import sys
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from moto.events.models import EventPattern

from drill.account.invocation import invocation, spent_ms
from drill.iam.recorder import invoked_as

Handler = Callable[[dict[str, Any], Any], Any]


@dataclass(frozen=True)
class EventRoute:
    rule_id: str
    pattern: EventPattern | None
    schedule: str | None
    handler: str


@dataclass(frozen=True)
class ApiRoute:
    method: str
    path: str  # like /runs/{id}/cancel
    authorization: str
    handler: str

    def match(self, method: str, path: str) -> dict[str, str] | None:
        if method != self.method:
            return None
        regex = "^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(self.path)) + "$"
        m = re.match(regex, path)
        return m.groupdict() if m else None


@dataclass
class LambdaContext:
    function_name: str
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:local"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    timeout_ms: int = 60_000

    def get_remaining_time_in_millis(self) -> int:
        """The invocation's time left: what its throttled calls waited is spent (drill/account/invocation.py)."""
        return max(0, int(self.timeout_ms - spent_ms()))


class _ThreadRoutedStdout(io.TextIOBase):
    """sys.stdout while a handler runs: what the handler's thread prints is discarded, what any
    other thread prints goes to the stdout in place before. ``contextlib.redirect_stdout`` would
    swap the process's stdout, so a CLI printing in the test thread while the local server's
    clock thread runs a handler would print into the discard sink."""

    def __init__(self, target: Any) -> None:
        self.target = target

    def write(self, text: str) -> int:
        if getattr(_handler_thread, "active", False):
            return len(text)
        return int(self.target.write(text))

    def flush(self) -> None:
        if not getattr(_handler_thread, "active", False):
            self.target.flush()


_handler_thread = threading.local()
_routing_lock = threading.Lock()
_routing_depth = 0


@contextlib.contextmanager
def _discard_this_threads_stdout() -> Iterator[None]:
    global _routing_depth
    with _routing_lock:
        if _routing_depth == 0 and not isinstance(sys.stdout, _ThreadRoutedStdout):
            sys.stdout = _ThreadRoutedStdout(sys.stdout)
        _routing_depth += 1
    outer = getattr(_handler_thread, "active", False)
    _handler_thread.active = True
    try:
        yield
    finally:
        _handler_thread.active = outer
        with _routing_lock:
            _routing_depth -= 1
            if _routing_depth == 0 and isinstance(sys.stdout, _ThreadRoutedStdout):
                sys.stdout = sys.stdout.target


def _attributed(dotted: str, fn: Handler) -> Handler:
    """``fn``, with the AWS calls it makes attributed to its function (IAM replay, drill/iam), and
    what it prints discarded: in Lambda a function's stdout (Powertools' EMF batches, which it
    prints whenever a metric reaches 100 values) goes to its log group, not to the terminal or the
    output of a CLI talking to the drill."""

    def invoke(event: dict[str, Any], context: Any) -> Any:
        with invoked_as(dotted), invocation(), _discard_this_threads_stdout():
            return fn(event, context)

    return invoke


def _function_handler(resources: Mapping[str, Any], target_arn: Any) -> str | None:
    if isinstance(target_arn, Mapping) and "Fn::GetAtt" in target_arn:
        logical = target_arn["Fn::GetAtt"][0]
        res = resources.get(logical, {})
        if res.get("Type") == "AWS::Lambda::Function":
            return str(res["Properties"]["Handler"])
    return None


def _integration_handler(resources: Mapping[str, Any], uri: Any) -> str | None:
    # Uri is Fn::Join [..., "arn:...:apigateway:...:lambda:path/2015-03-31/functions/", GetAtt Fn.Arn, "/invocations"]
    text = json.dumps(uri)
    for logical in re.findall(r'"Fn::GetAtt": \["([^"]+)", "Arn"\]', text):
        res = resources.get(logical, {})
        if res.get("Type") == "AWS::Lambda::Function":
            return str(res["Properties"]["Handler"])
    return None


def _resource_path(resources: Mapping[str, Any], ref: Any) -> str:
    parts: list[str] = []
    while isinstance(ref, Mapping) and "Ref" in ref:
        res = resources[ref["Ref"]]
        parts.append(res["Properties"]["PathPart"])
        ref = res["Properties"]["ParentId"]
    return "/" + "/".join(reversed(parts))


class TemplateRouter:
    def __init__(self, template: Mapping[str, Any]) -> None:
        resources = template["Resources"]
        self.event_routes: list[EventRoute] = []
        self.api_routes: list[ApiRoute] = []
        self.functions: dict[str, Mapping[str, Any]] = {}
        for logical, res in resources.items():
            props = res.get("Properties", {})
            if res["Type"] == "AWS::Lambda::Function":
                self.functions[str(props.get("Handler"))] = props
            if res["Type"] == "AWS::Events::Rule" and props.get("State", "ENABLED") == "ENABLED":
                for target in props.get("Targets", []):
                    handler = _function_handler(resources, target.get("Arn"))
                    if handler is None:
                        continue
                    pattern = props.get("EventPattern")
                    self.event_routes.append(
                        EventRoute(
                            logical,
                            EventPattern.load(json.dumps(pattern)) if pattern else None,
                            props.get("ScheduleExpression"),
                            handler,
                        )
                    )
            if res["Type"] == "AWS::ApiGateway::Method" and props.get("HttpMethod") != "OPTIONS":
                handler = _integration_handler(resources, props.get("Integration", {}).get("Uri"))
                if handler is None:
                    continue
                resource_id = props.get("ResourceId")
                path = (
                    "/"
                    if isinstance(resource_id, Mapping) and "Fn::GetAtt" in resource_id
                    else _resource_path(resources, resource_id)
                )
                self.api_routes.append(
                    ApiRoute(props["HttpMethod"], path, props.get("AuthorizationType", "NONE"), handler)
                )
        self._handlers: dict[str, Handler] = {}

    # ------------------------------------------------------------------------------------------
    def handler(self, dotted: str) -> Handler:
        if dotted not in self._handlers:
            module, func = dotted.rsplit(".", 1)
            self._handlers[dotted] = _attributed(dotted, getattr(importlib.import_module(module), func))
        return self._handlers[dotted]

    def handlers_for_event(self, event: Mapping[str, Any]) -> list[str]:
        return [
            r.handler
            for r in self.event_routes
            if r.pattern is not None and r.pattern.matches_event(dict(event))  # type: ignore[arg-type]
        ]

    def scheduled_handlers(self) -> list[tuple[str, str]]:
        return [(r.schedule, r.handler) for r in self.event_routes if r.schedule]

    def deliver(self, event: Mapping[str, Any]) -> list[tuple[str, Any]]:
        results = []
        for dotted in self.handlers_for_event(event):
            results.append((dotted, self.handler(dotted)(dict(event), LambdaContext(dotted))))
        return results

    def call_api(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        query: Mapping[str, str] | None = None,
        caller_arn: str = "arn:aws:iam::123456789012:role/ml-engineer",
        raw_body: str | None = None,
    ) -> tuple[int, Any]:
        """Invoke the API as API Gateway would, signed by `caller_arn` (AWS_IAM auth)."""
        for route in self.api_routes:
            params = route.match(method, path)
            if params is None:
                continue
            if route.authorization != "AWS_IAM":
                raise AssertionError(f"route {method} {route.path} is not IAM-authorised in the template")
            event = _proxy_event(
                method, route.path, path, params, body, raw_body, headers or {}, query, caller_arn
            )
            resp = self.handler(route.handler)(event, LambdaContext(route.handler))
            payload = json.loads(resp["body"]) if resp.get("body") else None
            return int(resp["statusCode"]), payload
        return 403, {"message": "Missing Authentication Token"}  # what API Gateway answers for unknown routes


def _proxy_event(
    method: str,
    resource: str,
    path: str,
    params: Mapping[str, str],
    body: Any,
    raw_body: str | None,
    headers: Mapping[str, str],
    query: Mapping[str, str] | None,
    caller_arn: str,
) -> dict[str, Any]:
    text = raw_body if raw_body is not None else (json.dumps(body) if body is not None else None)
    account = caller_arn.split(":")[4] if caller_arn.count(":") >= 5 else "123456789012"
    return {
        "resource": resource,
        "path": path,
        "httpMethod": method,
        "headers": {"Content-Type": "application/json", **headers},
        "multiValueHeaders": {k: [v] for k, v in {"Content-Type": "application/json", **headers}.items()},
        "queryStringParameters": dict(query) if query else None,
        "multiValueQueryStringParameters": {k: [v] for k, v in query.items()} if query else None,
        "pathParameters": dict(params) or None,
        "stageVariables": None,
        "requestContext": {
            "resourcePath": resource,
            "httpMethod": method,
            "path": f"/prod{path}",
            "stage": "prod",
            "requestId": str(uuid.uuid4()),
            "accountId": account,
            "apiId": "local",
            "identity": {
                "accountId": account,
                "caller": caller_arn.rsplit("/", 1)[-1],
                "userArn": caller_arn,
                "user": caller_arn.rsplit("/", 1)[-1],
                "sourceIp": "127.0.0.1",
                "userAgent": "sagewarden-drill",
            },
        },
        "body": text,
        "isBase64Encoded": False,
    }
