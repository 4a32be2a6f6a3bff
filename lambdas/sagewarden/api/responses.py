"""The API's documented answers, light enough for every cold start; `json_response` writes the bodies.

Routes name body models by name (`api.schema`), resolved only when the document is rendered.
Why: docs/api.md (*What a cold start loads*)."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse  # loaded by the resolver anyway

RUN_ID_PATTERN = r"^[0-9A-HJKMNP-TV-Z]{26}$"
MAX_CURSOR_CHARS = 1024


def json_response(status: int, body: Any) -> Response:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=json.dumps(body, default=str, allow_nan=False),
    )


def response(description: str, model: str) -> OpenAPIResponse:
    """An OpenAPI response whose JSON body has the shape of the `api.schema` model named `model`."""
    return {"description": description, "content": {"application/json": {"model": model}}}


BAD_REQUEST = response("invalid input: `errors` names each problem; nothing was stored", "Error")
TOO_LARGE = response("the request (or the run it would store) is too large; nothing was stored", "Error")
NOT_FOUND = response("no run has this id (readScope=owner: none the caller may see)", "Error")
INTERNAL = response("an unexpected error; the body carries a request_id", "Error")
NOT_OWNER = response(
    "only the run's owner (the principal that submitted it; a role counts, whatever the session) "
    "or an admin (the deployment's adminRoleArns) may do this; nothing changed",
    "Error",
)
