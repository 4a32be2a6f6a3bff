"""What the API's routes mean for the OpenAPI document, loaded only when it is rendered.

`resolve` evaluates `handlers/api.py`'s string annotations and attaches the response models just
before `api.openapi` renders. Why: docs/api.md (*What a cold start loads*)."""

from __future__ import annotations

import inspect
import typing
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Path, Query

from sagewarden.api import schema
from sagewarden.api.responses import MAX_CURSOR_CHARS, RUN_ID_PATTERN

RUN_ID = Annotated[str, Path(description="the run's id (a ULID)", pattern=RUN_ID_PATTERN)]
CURSOR = Annotated[
    str | None,
    Query(description="next_cursor of the previous page", max_length=MAX_CURSOR_CHARS),
]
# The names the routes' annotations use, beyond what their module imports at run time.
NAMES: dict[str, Any] = {
    "Body": Body,
    "Header": Header,
    "Path": Path,
    "Query": Query,
    "schema": schema,
    "RUN_ID": RUN_ID,
    "CURSOR": CURSOR,
}


def resolve(app: APIGatewayRestResolver) -> None:
    """Make `app`'s routes describable: every route's annotations evaluated (with `NAMES` beside
    its module's own), every response's model name replaced by the `api.schema` model.
    Idempotent. Evaluated in place because a decorated route (e.g. traced) is seen through its
    wrapper, whose module is not the route's."""
    for route in app._static_routes + app._dynamic_routes:
        func = inspect.unwrap(route.func)
        names = {**func.__globals__, **NAMES}
        func.__annotations__.update(typing.get_type_hints(func, globalns=names, include_extras=True))
        for answer in (route.responses or {}).values():
            for content in answer.get("content", {}).values():
                model = content.get("model")
                if isinstance(model, str):
                    content["model"] = getattr(schema, model)  # type: ignore[typeddict-unknown-key]
