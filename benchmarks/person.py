"""The person on call, as the side-by-side benchmark models them (the same for every supervisor).

- **Paged failures** (a job or a sagewarden run ends Failed and a page goes out): the person looks,
  then resubmits from the newest complete checkpoint, cold start. Page to resubmission is
  lognormal with a median of ``paged_median_min`` (30 min) and shape ``paged_sigma`` (0.8: mean
  41 min, 90th percentile 84 min) -- time to see the page, get to a terminal, read the logs.
- **Hangs nobody pages for** (a job still InProgress that makes no progress) are noticed by looking
  at dashboards: onset to noticing is lognormal with a median of ``hang_notice_median_h`` (4 h)
  and shape ``hang_notice_sigma`` (0.5). The person then stops the job and resubmits as soon as it
  has ended.
- Nobody works around the clock harder than this: no nights or weekends are modelled, which
  favours the alternatives.

Delays are drawn per (fault, purpose, k-th time) from one seed, so two supervisors that need the
person for the same fault get the same delay (common random numbers).
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass

MINUTE_MS = 60_000


@dataclass(frozen=True)
class Person:
    paged_median_min: float = 30.0
    paged_sigma: float = 0.8
    hang_notice_median_h: float = 4.0
    hang_notice_sigma: float = 0.5
    seed: int = 0

    def _rng(self, *parts: object) -> random.Random:
        digest = hashlib.sha256("|".join(str(p) for p in (self.seed, *parts)).encode()).digest()
        return random.Random(int.from_bytes(digest[:8], "big"))

    def paged_delay_ms(self, fault: int, k: int = 0) -> int:
        """From the page about ``fault`` (its ``k``-th page) to the person's resubmission."""
        z = self._rng("paged", fault, k).gauss(0.0, 1.0)
        return round(self.paged_median_min * math.exp(self.paged_sigma * z) * MINUTE_MS)

    def hang_notice_delay_ms(self, fault: int) -> int:
        """From a hang's onset to the person noticing it."""
        z = self._rng("hang", fault).gauss(0.0, 1.0)
        return round(self.hang_notice_median_h * 60.0 * math.exp(self.hang_notice_sigma * z) * MINUTE_MS)

    def describe(self) -> str:
        return (
            f"paged failures handled after a lognormal delay (median {self.paged_median_min:g} min, "
            f"sigma {self.paged_sigma:g}); unpaged hangs noticed after a lognormal delay (median "
            f"{self.hang_notice_median_h:g} h, sigma {self.hang_notice_sigma:g}) from onset; resubmits from "
            "the newest complete checkpoint, cold start"
        )
