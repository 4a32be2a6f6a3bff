"""What a preflight check reports (sagewarden_cli/doctor.py, sagewarden_cli/deployments.py), and how it reads AWS errors."""

from __future__ import annotations

from dataclasses import dataclass

OK = "ok"
WARN = "warn"
FAIL = "FAIL"


@dataclass(frozen=True)
class Finding:
    level: str  # OK | WARN | FAIL
    check: str
    message: str
    detail: str | None = None  # e.g. a policy to grant, printed under the line


def error_code(exc: Exception) -> str:
    """The AWS error code of a botocore ClientError ('' for anything else)."""
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def denied(exc: Exception) -> bool:
    """Whether AWS refused the call to this identity (a check it may not make is a warning)."""
    code = error_code(exc)
    return code in {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "403"} or (
        "not authorized" in str(exc)
    )
