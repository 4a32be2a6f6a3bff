"""The account's SageMaker quotas from Service Quotas, for the submit-time quota check.

Reads applied values and AWS defaults (applied wins) within a page and time budget, cached for
CACHE_S; an incomplete listing raises (unknown). Why: docs/api.md (*The API*: the refusals)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

SERVICE_CODE = "sagemaker"
OPERATIONS = ("list_aws_default_service_quotas", "list_service_quotas")  # defaults first, applied win
PAGE_SIZE = 100  # the API's maximum
MAX_PAGES = 60  # per operation: 6,000 quotas
BUDGET_S = 8.0  # both listings, well inside the API function's timeout
CACHE_S = 900.0  # quotas change when a person raises one: a quarter of an hour is fresh enough
RETRY_S = 60.0  # after a failed listing, submits within this long do not list again (still unknown)


class QuotasUnknown(Exception):
    """The listing could not be read completely (an error, or its page or time budget ran out)."""


class ServiceQuotasReader:
    def __init__(
        self,
        client: Any,
        *,
        clock: Callable[[], float] = time.monotonic,
        cache_s: float = CACHE_S,
        budget_s: float = BUDGET_S,
        max_pages: int = MAX_PAGES,
    ) -> None:
        self._client = client
        self._clock = clock
        self._cache_s = cache_s
        self._budget_s = budget_s
        self._max_pages = max_pages
        self._cached: tuple[float, dict[str, float]] | None = None
        self._failed: tuple[float, str] | None = None

    def sagemaker_quotas(self) -> Mapping[str, float]:
        now = self._clock()
        if self._cached is not None and now - self._cached[0] < self._cache_s:
            return self._cached[1]
        if self._failed is not None and now - self._failed[0] < RETRY_S:
            raise QuotasUnknown(f"{self._failed[1]} (less than {RETRY_S:g} s ago)")
        try:
            values = self._read(now + self._budget_s)
        except QuotasUnknown as exc:
            self._failed = (now, str(exc))
            raise
        self._cached, self._failed = (now, values), None
        return values

    def _read(self, deadline: float) -> dict[str, float]:
        values: dict[str, float] = {}
        for operation in OPERATIONS:
            pages = self._client.get_paginator(operation).paginate(
                ServiceCode=SERVICE_CODE, PaginationConfig={"PageSize": PAGE_SIZE}
            )
            try:
                for n, page in enumerate(pages, start=1):
                    for q in page.get("Quotas", ()):
                        if "QuotaName" in q and q.get("Value") is not None and not q.get("ErrorReason"):
                            values[str(q["QuotaName"])] = float(q["Value"])
                    more = bool(page.get("NextToken"))
                    if more and (n >= self._max_pages or self._clock() >= deadline):
                        raise QuotasUnknown(
                            f"{operation} cut after {n} pages by its budget: the quotas are unknown"
                        )
            except QuotasUnknown:
                raise
            except Exception as exc:
                raise QuotasUnknown(f"{operation}: {exc}") from exc
        return values
