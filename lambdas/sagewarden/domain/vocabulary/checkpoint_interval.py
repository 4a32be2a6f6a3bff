"""The interval between a run's checkpoints, as the supervisor observed it (pure, a leaf: the
checkpoint-interval advice, the crash-loop rule and the Training Plan windows use it)."""

from __future__ import annotations

import itertools
import statistics


def observed_interval_min(history: tuple[tuple[int, int, float, int], ...]) -> float | None:
    """Minutes between checkpoints. The supervisor sees a checkpoint when it happens to look (every
    reconcile tick, at attempt ends), so two it saw may be several checkpoints apart: the pace
    (minutes per step) comes from the pairs it saw, and the interval in steps from each
    checkpoint's next older directory in S3. Without the latter, the median gap between sightings
    (an upper bound)."""
    pace = [
        (b[1] - a[1]) / 60_000 / (b[0] - a[0])
        for a, b in itertools.pairwise(history)
        if b[1] > a[1] and b[0] > a[0]
    ]
    if not pace:
        return None
    steps = [h[0] - h[3] for h in history if 0 <= h[3] < h[0]]
    if steps:
        return statistics.median(steps) * statistics.median(pace)
    gaps = [(b[1] - a[1]) / 60_000 for a, b in itertools.pairwise(history) if b[1] > a[1]]
    return statistics.median(gaps)
