"""Answer a CloudFormation custom-resource request: PUT the response body to its pre-signed URL.

CloudFormation waits for this answer until the resource's ServiceTimeout; an answer that never
arrives holds the deploy that long, so the PUT is retried a few times before giving up.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable

ATTEMPTS = 4
TIMEOUT_S = 10.0


def put_response(
    url: str, body: bytes, *, attempts: int = ATTEMPTS, sleep: Callable[[float], None] = time.sleep
) -> int:
    """PUT ``body`` to the pre-signed ``url``; the HTTP status of the answer. The content type is
    empty, as the URL was signed without one."""
    last: Exception | None = None
    for attempt in range(attempts):
        if attempt:
            sleep(2.0**attempt)
        request = urllib.request.Request(
            url, data=body, method="PUT", headers={"Content-Type": "", "Content-Length": str(len(body))}
        )
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                raise
            last = exc
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            last = exc
    assert last is not None
    raise last
