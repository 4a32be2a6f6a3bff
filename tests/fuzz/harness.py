"""Call the API the way API Gateway does and keep the raw response, for checks on the body text.

`TemplateRouter.call_api` parses the response for convenience; these tests need the exact
status, headers and body text (is it strict JSON? is there a NaN in it?), so they build the
same proxy event for the route the synthesized template wires and call its handler directly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from drill.account.local import CALLER, LocalAccount
from drill.account.router import LambdaContext, _proxy_event


@dataclass(frozen=True)
class RawResponse:
    status: int
    text: str
    headers: Mapping[str, str]
    routed: bool = True  # False: no route of the template matched, the handler never ran

    def json(self) -> Any:
        return strict_json(self.text)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def strict_json(text: str) -> Any:
    """json.loads that refuses what RFC 8259 does not allow (NaN, Infinity, -Infinity)."""
    return json.loads(text, parse_constant=_reject_constant)


def raw_call(
    acct: LocalAccount,
    method: str,
    path: str,
    *,
    body: str | None = None,
    headers: Mapping[str, str] | None = None,
    query: Mapping[str, str] | None = None,
    caller_arn: str = CALLER,
) -> RawResponse:
    router = acct.router
    acct.mark_dirty()
    for route in router.api_routes:
        params = route.match(method, path)
        if params is None:
            continue
        event = _proxy_event(method, route.path, path, params, None, body, headers or {}, query, caller_arn)
        resp = router.handler(route.handler)(event, LambdaContext(route.handler))
        return RawResponse(int(resp["statusCode"]), resp.get("body") or "", resp.get("headers") or {})
    return RawResponse(403, '{"message": "Missing Authentication Token"}', {}, routed=False)
