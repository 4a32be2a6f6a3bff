"""Run API (API Gateway REST, every route AWS_IAM-authorised): thin routes over the service."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types

from sagewarden import composition
from sagewarden.api.representation import audit_json, run_json
from sagewarden.api.validation import (
    MAX_BODY_BYTES,
    FieldError,
    InvalidRequest,
    idempotency_key_problem,
    validate_submit,
)
from sagewarden.domain.models import RunStatus
from sagewarden.observability import logger, metrics, tracer
from sagewarden.ports import IdempotentReplay
from sagewarden.service import RunFinished, RunNotFound

app = APIGatewayRestResolver()
MAX_PAGE = 100


def _json(status: int, body: Any) -> Response:
    return Response(
        status_code=status, content_type=content_types.APPLICATION_JSON, body=json.dumps(body, default=str)
    )


def _caller() -> str:
    ctx = app.current_event.request_context
    identity = ctx.identity
    return identity.user_arn or identity.caller or identity.account_id or "unknown"


def _limit() -> int:
    raw = app.current_event.get_query_string_value("limit", "25") or "25"
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_PAGE:
        raise InvalidRequest([FieldError("limit", f"must be an integer from 1 to {MAX_PAGE}")])
    return int(raw)


@app.post("/runs")
@tracer.capture_method
def submit_run() -> Response:
    raw = app.current_event.body or ""
    if len(raw.encode()) > MAX_BODY_BYTES:
        raise InvalidRequest([FieldError("body", f"larger than {MAX_BODY_BYTES // 1024} KiB")])
    try:
        body = json.loads(raw) if raw else None
    except json.JSONDecodeError as exc:
        raise InvalidRequest(
            [FieldError("body", f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")]
        ) from exc
    key = app.current_event.headers.get("Idempotency-Key") or app.current_event.headers.get("idempotency-key")
    if key is not None and (problem := idempotency_key_problem(key)):
        raise InvalidRequest([FieldError("Idempotency-Key", problem)])
    sup = composition.supervisor()
    req = validate_submit(
        body,
        allowed_roles=composition.allowed_role_arns(),
        job_prefix=sup.settings.job_prefix,
        policy_defaults=sup.settings.policy_defaults,
    )
    try:
        run, created = sup.submit(
            name=req.name,
            owner=_caller(),
            training_job=req.training_job,
            policy=req.policy,
            idempotency_key=key,
        )
    except IdempotentReplay:
        return _json(409, {"message": "Idempotency-Key was already used with a different request body"})
    logger.append_keys(run_id=run.run_id)
    metrics.add_metric(name="RunsSubmitted" if created else "RunsReplayed", unit="Count", value=1)
    return _json(201 if created else 200, run_json(run))


@app.get("/runs")
def list_runs() -> Response:
    status = app.current_event.get_query_string_value("status", None)
    if status is not None and status not in RunStatus.__members__:
        raise InvalidRequest([FieldError("status", f"must be one of {', '.join(RunStatus.__members__)}")])
    cursor = app.current_event.get_query_string_value("cursor", None)
    try:
        page = composition.supervisor().list_runs(status, _limit(), cursor)
    except ValueError as exc:
        raise InvalidRequest([FieldError("cursor", str(exc))]) from exc
    return _json(
        200, {"runs": [run_json(r, with_attempts=False) for r in page.items], "next_cursor": page.cursor}
    )


@app.get("/runs/<run_id>")
def get_run(run_id: str) -> Response:
    return _json(200, run_json(composition.supervisor().get(run_id)))


@app.get("/runs/<run_id>/events")
def get_events(run_id: str) -> Response:
    cursor = app.current_event.get_query_string_value("cursor", None)
    try:
        page = composition.supervisor().events(run_id, _limit(), cursor)
    except ValueError as exc:
        raise InvalidRequest([FieldError("cursor", str(exc))]) from exc
    return _json(200, {"events": [audit_json(e) for e in page.items], "next_cursor": page.cursor})


@app.post("/runs/<run_id>/cancel")
def cancel_run(run_id: str) -> Response:
    run = composition.supervisor().cancel(run_id, by=_caller())
    return _json(202 if not run.status.terminal else 200, run_json(run))


@app.exception_handler(InvalidRequest)
def _invalid(exc: InvalidRequest) -> Response:
    return _json(
        400,
        {
            "message": "invalid request",
            "errors": [{"field": e.field, "message": e.message} for e in exc.errors],
        },
    )


@app.exception_handler(RunNotFound)
def _not_found(exc: RunNotFound) -> Response:
    return _json(404, {"message": f"run {exc} not found"})


@app.exception_handler(RunFinished)
def _finished(exc: RunFinished) -> Response:
    return _json(
        409,
        {
            "message": f"run {exc.run.run_id} already finished ({exc.run.status.value})",
            "status": exc.run.status.value,
        },
    )


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return app.resolve(event, context)
