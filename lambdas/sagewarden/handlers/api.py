"""Run API (API Gateway REST, every route AWS_IAM-authorised): thin routes over the use cases.

Input is read by `api/request_parts.py` and `api/validation.py` (the resolver's own validation is
off), refusals answered by `api/refusals.py`, and an unforeseen exception by a JSON 500.
Why: docs/api.md (*Why the body parser is strict*)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types

from sagewarden import composition
from sagewarden.api import refusals
from sagewarden.api import responses as answers
from sagewarden.api.json_body import body_text, parse_json
from sagewarden.api.representation import audit_json, run_json
from sagewarden.api.request_parts import (
    DEFAULT_PAGE,
    MAX_PAGE,
    caller,
    query_cursor,
    query_limit,
    query_status,
    store_cursor_error,
    well_formed_run_id,
)
from sagewarden.api.responses import json_response
from sagewarden.api.validation import idempotency_key_problem, validate_submit
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
            owner=caller(app.current_event),
            training_job=req.training_job,
            policy=req.policy,
            idempotency_key=key,
            admins=composition.admin_role_arns(),
        )
    except IdempotentReplay:
        return json_response(
            409, {"message": "Idempotency-Key was already used with a different request body"}
        )
    logger.append_keys(run_id=run.run_id)
    metrics.add_metric(name="RunsSubmitted" if created else "RunsReplayed", unit="Count", value=1)
    return json_response(201 if created else 200, run_json(run, now_ms=sup.clock()))


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
            query_status(app.current_event),
            query_limit(app.current_event),
            query_cursor(app.current_event),
            reader=caller(app.current_event),
            admins=composition.admin_role_arns(),
        )
    except ValueError as exc:  # the store refused the cursor
        raise store_cursor_error(exc) from exc
    return json_response(
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
    run = sup.requests.get(
        well_formed_run_id(run_id), reader=caller(app.current_event), admins=composition.admin_role_arns()
    )
    return json_response(200, run_json(run, now_ms=sup.clock()))


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
            well_formed_run_id(run_id),
            query_limit(app.current_event),
            query_cursor(app.current_event),
            reader=caller(app.current_event),
            admins=composition.admin_role_arns(),
        )
    except ValueError as exc:  # the store refused the cursor (malformed, or another run's)
        raise store_cursor_error(exc) from exc
    return json_response(200, {"events": [audit_json(e) for e in page.items], "next_cursor": page.cursor})


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
    run = sup.requests.cancel(
        well_formed_run_id(run_id), by=caller(app.current_event), admins=composition.admin_role_arns()
    )
    return json_response(202 if not run.status.terminal else 200, run_json(run, now_ms=sup.clock()))


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
    run = sup.requests.resume(
        well_formed_run_id(run_id), by=caller(app.current_event), admins=composition.admin_role_arns()
    )
    return json_response(202, run_json(run, now_ms=sup.clock()))


# the refusals (api/refusals.py), each the answer to the exception that carries it
app.exception_handler(NotRunOwner)(refusals.not_owner)
app.exception_handler(RunNotResumable)(refusals.not_resumable)
app.exception_handler(RunConflict)(refusals.conflict)
app.exception_handler(InvalidRequest)(refusals.invalid)
app.exception_handler(RunNotFound)(refusals.not_found)
app.not_found(refusals.no_route)
app.exception_handler(RunFinished)(refusals.finished)


def _request_id() -> str:
    try:
        return str(app.current_event.request_context.request_id or app.lambda_context.aws_request_id)
    except Exception:  # pragma: no cover - only when the event itself is malformed
        return "unknown"


@app.exception_handler(Exception)
def _unexpected(exc: Exception) -> Response:
    request_id = _request_id()
    logger.error("unhandled error in the API", exc_info=exc, extra={"request_id": request_id})
    metrics.add_metric(name="ApiErrors", unit="Count", value=1)
    return Response(
        status_code=500,
        content_type=content_types.APPLICATION_JSON,
        body=refusals.internal_error_body(request_id),
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
            "body": refusals.internal_error_body(request_id),
            "isBase64Encoded": False,
        }
