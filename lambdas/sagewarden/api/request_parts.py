"""The caller, a page's query parameters and a run id, as the routes of `handlers/api.py` read them.

Each is checked here: a bad one is a field-level 400, a malformed run id a 404. Why: docs/api.md."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sagewarden.api import responses as answers
from sagewarden.domain.vocabulary.models import RunStatus
from sagewarden.usecases.errors import FieldError, InvalidRequest
from sagewarden.usecases.run_requests import RunNotFound

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent

MAX_PAGE = 100
DEFAULT_PAGE = 25
_LIMIT_RE = re.compile(r"[0-9]{1,3}")
RUN_ID_RE = re.compile(answers.RUN_ID_PATTERN)


def caller(event: APIGatewayProxyEvent) -> str:
    """The IAM principal of the request (API Gateway's AWS_IAM authorisation): a run's owner
    is the caller that submitted it; cancel and resume compare callers by
    `domain.ownership.same_principal` (a role's sessions are the role)."""
    ctx = event.request_context
    identity = ctx.identity
    return identity.user_arn or identity.caller or identity.account_id or "unknown"


def _query(event: APIGatewayProxyEvent, name: str) -> str | None:
    return event.get_query_string_value(name, None)


def query_limit(event: APIGatewayProxyEvent) -> int:
    raw = _query(event, "limit")
    if raw is None:
        return DEFAULT_PAGE
    if not _LIMIT_RE.fullmatch(raw) or not 1 <= int(raw) <= MAX_PAGE:
        raise InvalidRequest([FieldError("limit", f"must be an integer from 1 to {MAX_PAGE}")])
    return int(raw)


def query_cursor(event: APIGatewayProxyEvent) -> str | None:
    raw = _query(event, "cursor")
    if raw is not None and not 1 <= len(raw) <= answers.MAX_CURSOR_CHARS:
        raise InvalidRequest([FieldError("cursor", "invalid cursor: use next_cursor of the previous page")])
    return raw


def query_status(event: APIGatewayProxyEvent) -> str | None:
    raw = _query(event, "status")
    if raw is not None and raw not in RunStatus.__members__:
        raise InvalidRequest([FieldError("status", f"must be one of {', '.join(RunStatus.__members__)}")])
    return raw


def well_formed_run_id(raw: str) -> str:
    """A well-formed run id; anything else names no run (404) and never reaches the store."""
    if not RUN_ID_RE.fullmatch(raw):
        raise RunNotFound(raw)
    return raw


def store_cursor_error(exc: ValueError) -> InvalidRequest:
    """The 400 for a cursor the store refused (malformed, or another run's)."""
    return InvalidRequest([FieldError("cursor", str(exc) or "invalid cursor")])
