"""Run API (API Gateway REST, every route AWS_IAM-authorised): thin routes over the service.

The routes are annotated for the OpenAPI document (`api.openapi` renders it from this resolver),
but the resolver's own validation stays off: its JSON parsing is the plain `json.loads` this API
must not trust with hostile input, and its errors are 422s in another shape. Each route reads
its input through the hardened parsers below (`_query_*`, `_submission`), so every rejection
is a 400/413 with field-level `errors`, and the annotated parameters only describe the API.

Every response body is strict JSON (`allow_nan=False`); an unforeseen exception still answers a
JSON 500 with a request id instead of escaping to API Gateway as a 502.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError

from sagewarden import composition
from sagewarden.api import responses as answers
from sagewarden.api.json_body import body_text, parse_json
from sagewarden.api.representation import audit_json, run_json
from sagewarden.api.validation import idempotency_key_problem, validate_submit
from sagewarden.domain.vocabulary.models import RunStatus
from sagewarden.domain.vocabulary.ownership import shown_principal
from sagewarden.observability import logger, metrics, tracer
from sagewarden.ports.aws import IdempotentReplay
from sagewarden.usecases.admission import RunConflict
from sagewarden.usecases.errors import FieldError, InvalidRequest
from sagewarden.usecases.run_requests import NotRunOwner, RunFinished, RunNotFound, RunNotResumable

if TYPE_CHECKING:  # for the OpenAPI document only: `api.route_docs.resolve` supplies them then
    from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Query

    from sagewarden.api import schema
    from sagewarden.api.route_docs import CURSOR, RUN_ID

app = APIGatewayRestResolver()
MAX_PAGE = 100
DEFAULT_PAGE = 25
_LIMIT_RE = re.compile(r"[0-9]{1,3}")
_RUN_ID_RE = re.compile(answers.RUN_ID_PATTERN)


def _json(status: int, body: Any) -> Response:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=json.dumps(body, default=str, allow_nan=False),
    )


def _caller() -> str:
    """The IAM principal of the request (API Gateway's AWS_IAM authorisation): a run's owner
    is the caller that submitted it; cancel and resume compare callers by
    `domain.ownership.same_principal` (a role's sessions are the role)."""
    ctx = app.current_event.request_context
    identity = ctx.identity
    return identity.user_arn or identity.caller or identity.account_id or "unknown"


def _query(name: str) -> str | None:
    return app.current_event.get_query_string_value(name, None)


def _query_limit() -> int:
    raw = _query("limit")
    if raw is None:
        return DEFAULT_PAGE
    if not _LIMIT_RE.fullmatch(raw) or not 1 <= int(raw) <= MAX_PAGE:
        raise InvalidRequest([FieldError("limit", f"must be an integer from 1 to {MAX_PAGE}")])
    return int(raw)


def _query_cursor() -> str | None:
    raw = _query("cursor")
    if raw is not None and not 1 <= len(raw) <= answers.MAX_CURSOR_CHARS:
        raise InvalidRequest([FieldError("cursor", "invalid cursor: use next_cursor of the previous page")])
    return raw


def _query_status() -> str | None:
    raw = _query("status")
    if raw is not None and raw not in RunStatus.__members__:
        raise InvalidRequest([FieldError("status", f"must be one of {', '.join(RunStatus.__members__)}")])
    return raw


def _run_id(raw: str) -> str:
    """A well-formed run id; anything else names no run (404) and never reaches the store."""
    if not _RUN_ID_RE.fullmatch(raw):
        raise RunNotFound(raw)
    return raw


def _store_cursor_error(exc: ValueError) -> InvalidRequest:
    return InvalidRequest([FieldError("cursor", str(exc) or "invalid cursor")])


@app.post(
    "/runs",
    summary="Submit a run",
    description="Checks the run against the account (its checkpoint prefix can be listed, its instance "
    "count fits a known quota, no other live run holds its name or checkpoint prefix), stores it and "
    "asks for its first attempt. Nothing is stored when any check fails.",
    responses={
        201: answers.response(
            "the run, created; its first attempt was requested (or its launch is deferred: see `deferred`)",
            "Run",
        ),
        200: answers.response("the run an earlier request with this Idempotency-Key created", "Run"),
        400: answers.BAD_REQUEST,
        409: answers.response(
            "another live run holds the name or the checkpoint prefix (`conflict` names it), or the "
            "Idempotency-Key was used with a different body",
            "Error",
        ),
        413: answers.TOO_LARGE,
        500: answers.INTERNAL,
    },
)
@tracer.capture_method
def submit_run(
    body: Annotated[schema.RunSubmission, Body(description="what to run and how to supervise it")] = None,  # type: ignore[assignment]
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            description="makes a repeat return the same run (200); 1-128 printable ASCII characters",
            max_length=128,
        ),
    ] = None,
) -> Response[schema.Run]:
    event = app.current_event
    parsed = parse_json(body_text(event.body, bool(event.is_base64_encoded)))
    key = event.headers.get("Idempotency-Key") or event.headers.get("idempotency-key")
    if key is not None and (problem := idempotency_key_problem(key)):
        raise InvalidRequest([FieldError("Idempotency-Key", problem)])
    sup = composition.supervisor()
    req = validate_submit(
        parsed,
        allowed_roles=composition.allowed_role_arns(),
        job_prefix=sup.settings.job_prefix,
        policy_defaults=sup.settings.policy_defaults,
        retention_allowed=sup.settings.checkpoint_retention,
    )
    try:
        run, created = sup.requests.submit(
            name=req.name,
            owner=_caller(),
            training_job=req.training_job,
            policy=req.policy,
            idempotency_key=key,
            admins=composition.admin_role_arns(),
        )
    except IdempotentReplay:
        return _json(409, {"message": "Idempotency-Key was already used with a different request body"})
    logger.append_keys(run_id=run.run_id)
    metrics.add_metric(name="RunsSubmitted" if created else "RunsReplayed", unit="Count", value=1)
    return _json(201 if created else 200, run_json(run, now_ms=sup.clock()))


@app.get(
    "/runs",
    summary="List runs, newest first",
    description="Every caller the API admits sees every run (redacted: no secret values); with the "
    "deployment's readScope=owner, only the runs it owns (an admin: all), and a page may then hold fewer "
    "runs than `limit`, even none, with a `next_cursor` to follow.",
    responses={
        200: answers.response("a page of runs", "RunPage"),
        400: answers.BAD_REQUEST,
        500: answers.INTERNAL,
    },
)
def list_runs(
    status: Annotated[schema.RunStatusName | None, Query(description="only runs in this status")] = None,  # type: ignore[valid-type]
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="page size")] = DEFAULT_PAGE,
    cursor: CURSOR = None,
) -> Response[schema.RunPage]:
    sup = composition.supervisor()
    try:
        page = sup.requests.list_runs(
            _query_status(),
            _query_limit(),
            _query_cursor(),
            reader=_caller(),
            admins=composition.admin_role_arns(),
        )
    except ValueError as exc:  # the store refused the cursor
        raise _store_cursor_error(exc) from exc
    return _json(
        200,
        {
            "runs": [run_json(r, with_attempts=False, now_ms=sup.clock()) for r in page.items],
            "next_cursor": page.cursor,
        },
    )


@app.get(
    "/runs/<run_id>",
    summary="A run with all its attempts",
    description="Every caller the API admits may read every run (readScope=owner: only its owner and the "
    "admins; anyone else gets 404, as for a run that does not exist). The values of secret-looking "
    "Environment, HyperParameters and Tags keys and container-argument flags (TOKEN, SECRET, PASSWORD, "
    "KEY, CREDENTIAL, PASS, PAT, AUTH, ...; docs/api.md), URL passwords and well-known tokens read "
    '"<redacted>", here and in every other answer, audit entry and alert.',
    responses={200: answers.response("the run", "Run"), 404: answers.NOT_FOUND, 500: answers.INTERNAL},
)
def get_run(run_id: RUN_ID) -> Response[schema.Run]:
    sup = composition.supervisor()
    run = sup.requests.get(_run_id(run_id), reader=_caller(), admins=composition.admin_role_arns())
    return _json(200, run_json(run, now_ms=sup.clock()))


@app.get(
    "/runs/<run_id>/events",
    summary="The run's audit trail, oldest first",
    responses={
        200: answers.response("a page of events", "EventPage"),
        400: answers.BAD_REQUEST,
        404: answers.NOT_FOUND,
        500: answers.INTERNAL,
    },
)
def get_events(
    run_id: RUN_ID,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="page size")] = DEFAULT_PAGE,
    cursor: CURSOR = None,
) -> Response[schema.EventPage]:
    try:
        page = composition.supervisor().requests.events(
            _run_id(run_id),
            _query_limit(),
            _query_cursor(),
            reader=_caller(),
            admins=composition.admin_role_arns(),
        )
    except ValueError as exc:  # the store refused the cursor (malformed, or another run's)
        raise _store_cursor_error(exc) from exc
    return _json(200, {"events": [audit_json(e) for e in page.items], "next_cursor": page.cursor})


@app.post(
    "/runs/<run_id>/cancel",
    summary="Cancel a run",
    description="Only the run's owner (any session of the role that submitted it) or an admin "
    "(readScope=owner: anyone else gets 404).",
    responses={
        202: answers.response(
            "the stop was requested; the run becomes CANCELLED when SageMaker confirms", "Run"
        ),
        200: answers.response("the run had no live job and is now CANCELLED", "Run"),
        403: answers.NOT_OWNER,
        404: answers.NOT_FOUND,
        409: answers.response("the run already finished", "Error"),
        500: answers.INTERNAL,
    },
)
def cancel_run(run_id: RUN_ID) -> Response[schema.Run]:
    sup = composition.supervisor()
    run = sup.requests.cancel(_run_id(run_id), by=_caller(), admins=composition.admin_role_arns())
    return _json(202 if not run.status.terminal else 200, run_json(run, now_ms=sup.clock()))


@app.post(
    "/runs/<run_id>/resume",
    summary="Resume a FAILED or CANCELLED run",
    description="Only the run's owner (any session of the role that submitted it) or an admin "
    "(readScope=owner: anyone else gets 404).",
    responses={
        202: answers.response(
            "a new attempt was launched from the newest verified checkpoint, with fresh budgets", "Run"
        ),
        403: answers.NOT_OWNER,
        404: answers.NOT_FOUND,
        409: answers.response(
            "the run is not FAILED or CANCELLED, its checkpoints cannot be read, or another live run "
            "took its name or checkpoint prefix (`conflict` names it)",
            "Error",
        ),
        500: answers.INTERNAL,
    },
)
def resume_run(run_id: RUN_ID) -> Response[schema.Run]:
    sup = composition.supervisor()
    run = sup.requests.resume(_run_id(run_id), by=_caller(), admins=composition.admin_role_arns())
    return _json(202, run_json(run, now_ms=sup.clock()))


@app.exception_handler(NotRunOwner)
def _not_owner(exc: NotRunOwner) -> Response:
    return _json(
        403,
        {
            # the owner by identity, never by session (often an e-mail address): domain/vocabulary/ownership.py
            "message": f"only the run's owner ({shown_principal(exc.run.owner)}) or an admin may "
            f"{exc.action} run {exc.run.run_id}; you are {exc.caller}",
        },
    )


@app.exception_handler(RunNotResumable)
def _not_resumable(exc: RunNotResumable) -> Response:
    return _json(
        409,
        {"message": f"run {exc.run.run_id} cannot be resumed: {exc.reason}", "status": exc.run.status.value},
    )


@app.exception_handler(RunConflict)
def _conflict(exc: RunConflict) -> Response:
    other = exc.holder
    return _json(
        409,
        {
            "message": exc.message,
            "conflict": {
                "run_id": exc.holder_run_id,
                "name": other.name if other else None,
                "status": other.status.value if other else None,
                "on": exc.on,
            },
        },
    )


@app.exception_handler(InvalidRequest)
def _invalid(exc: InvalidRequest) -> Response:
    return _json(
        exc.status,
        {"message": exc.message, "errors": [{"field": e.field, "message": e.message} for e in exc.errors]},
    )


@app.exception_handler(RunNotFound)
def _not_found(exc: RunNotFound) -> Response:
    run_id = str(exc)
    return _json(
        404, {"message": f"run {run_id} not found" if _RUN_ID_RE.fullmatch(run_id) else "no such run"}
    )


@app.not_found
def _no_route(exc: NotFoundError) -> Response:
    # A path the resolver cannot match (e.g. a run id with characters no route pattern takes).
    # Registered explicitly: otherwise the catch-all handler below would answer it with a 500.
    return _json(404, {"message": "not found"})


@app.exception_handler(RunFinished)
def _finished(exc: RunFinished) -> Response:
    return _json(
        409,
        {
            "message": f"run {exc.run.run_id} already finished ({exc.run.status.value})",
            "status": exc.run.status.value,
        },
    )


def _request_id() -> str:
    try:
        return str(app.current_event.request_context.request_id or app.lambda_context.aws_request_id)
    except Exception:  # pragma: no cover - only when the event itself is malformed
        return "unknown"


def _internal_error_body(request_id: str) -> str:
    return json.dumps({"message": "internal error", "request_id": request_id})


@app.exception_handler(Exception)
def _unexpected(exc: Exception) -> Response:
    request_id = _request_id()
    logger.error("unhandled error in the API", exc_info=exc, extra={"request_id": request_id})
    metrics.add_metric(name="ApiErrors", unit="Count", value=1)
    return Response(
        status_code=500, content_type=content_types.APPLICATION_JSON, body=_internal_error_body(request_id)
    )


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    try:
        return app.resolve(event, context)
    except Exception:  # last resort: never let API Gateway turn an exception into a 502
        request_id = str(getattr(context, "aws_request_id", "unknown"))
        logger.exception("unhandled error outside the routes", extra={"request_id": request_id})
        return {
            "statusCode": 500,
            "headers": {"Content-Type": content_types.APPLICATION_JSON},
            "body": _internal_error_body(request_id),
            "isBase64Encoded": False,
        }
