"""Exit codes and the one error type every command raises.

Every failure ends as one line on stderr (field errors of a refused request add one indented
line per field) and one of these exit codes, never a traceback.
"""

from __future__ import annotations

OK = 0
API_ERROR = 1  # the API (or AWS) refused or failed the request: 4xx other than 404, 5xx, throttling
USAGE = 2  # bad arguments, an unreadable or invalid file, no credentials/region/API URL, unknown profile
NETWORK = 3  # the API or AWS could not be reached: refused, timed out, DNS, TLS
NOT_FOUND = 4  # no such run (id or name), no attempt or logs yet
INTERRUPTED = 130  # Ctrl-C

EXIT_CODES = (
    (OK, "ok"),
    (API_ERROR, "the API refused or failed the request (4xx except 404, 5xx, throttled); a refused dry run"),
    (USAGE, "usage or configuration: arguments, files, --set, profile, credentials, region, API URL"),
    (NETWORK, "network: connection refused, timeout, DNS or TLS failure"),
    (NOT_FOUND, "not found: unknown run id or name, no attempt or logs yet"),
    (INTERRUPTED, "interrupted (Ctrl-C)"),
)


class CliError(Exception):
    """A failure to report as one line (plus `details`, one per line) with exit code `code`."""

    def __init__(self, message: str, code: int = API_ERROR, details: list[str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.details = list(details or [])
