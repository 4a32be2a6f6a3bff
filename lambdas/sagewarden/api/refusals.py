"""What the Run API answers a request it refuses: the bodies of its 400/413, 403, 404, 409 and
500 answers (docs/api.md). `handlers/api.py` registers each as its resolver's handler of the
exception that carries the refusal.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from sagewarden.api.request_parts import RUN_ID_RE
from sagewarden.api.responses import json_response
from sagewarden.domain.vocabulary.ownership import shown_principal

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import Response
    from aws_lambda_powertools.event_handler.exceptions import NotFoundError

    from sagewarden.usecases.admission import RunConflict
    from sagewarden.usecases.errors import InvalidRequest
    from sagewarden.usecases.run_requests import NotRunOwner, RunFinished, RunNotFound, RunNotResumable


def not_owner(exc: NotRunOwner) -> Response:
    return json_response(
        403,
        {
            # the owner by identity, never by session (often an e-mail address): domain/vocabulary/ownership.py
            "message": f"only the run's owner ({shown_principal(exc.run.owner)}) or an admin may "
            f"{exc.action} run {exc.run.run_id}; you are {exc.caller}",
        },
    )


def not_resumable(exc: RunNotResumable) -> Response:
    return json_response(
        409,
        {"message": f"run {exc.run.run_id} cannot be resumed: {exc.reason}", "status": exc.run.status.value},
    )


def conflict(exc: RunConflict) -> Response:
    other = exc.holder
    return json_response(
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


def invalid(exc: InvalidRequest) -> Response:
    return json_response(
        exc.status,
        {"message": exc.message, "errors": [{"field": e.field, "message": e.message} for e in exc.errors]},
    )


def not_found(exc: RunNotFound) -> Response:
    run_id = str(exc)
    return json_response(
        404, {"message": f"run {run_id} not found" if RUN_ID_RE.fullmatch(run_id) else "no such run"}
    )


def no_route(exc: NotFoundError) -> Response:
    # A path the resolver cannot match (e.g. a run id with characters no route pattern takes).
    # Registered explicitly: otherwise the catch-all handler would answer it with a 500.
    return json_response(404, {"message": "not found"})


def finished(exc: RunFinished) -> Response:
    return json_response(
        409,
        {
            "message": f"run {exc.run.run_id} already finished ({exc.run.status.value})",
            "status": exc.run.status.value,
        },
    )


def internal_error_body(request_id: str) -> str:
    return json.dumps({"message": "internal error", "request_id": request_id})
