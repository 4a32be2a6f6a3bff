"""`make soak`: property-based histories of many runs at once against the in-memory world.

Events duplicated, reordered, delayed and dropped; sweeps and cancels at random times; AWS
errors (throttling, 5xx, access denied) injected into the next call of any port method;
concurrent invocations for the same run. The invariants of issue 7 are checked after every
step, and "nothing lost" once the world has quiesced. `SAGEWARDEN_SOAK_EXAMPLES` sets the
number of histories (a few hundred in `make test`, 10,000 in `make soak`).
"""

from __future__ import annotations

import os
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.soak.history import WEIGHTED_KINDS, History
from tests.soak.stats import STATS

EXAMPLES = int(os.environ.get("SAGEWARDEN_SOAK_EXAMPLES", "300"))
MAX_STEPS = int(os.environ.get("SAGEWARDEN_SOAK_MAX_STEPS", "60"))

step = st.tuples(st.sampled_from(WEIGHTED_KINDS), st.integers(0, 40), st.integers(0, 40))
# the length is drawn first (uniformly), so histories are long as often as short, and a shrunk
# counterexample is as short as it can be
steps = st.integers(1, MAX_STEPS).flatmap(lambda n: st.lists(step, min_size=n, max_size=n))


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
@given(history=steps)
def test_soak_invariants_hold_for_any_interleaving(history):
    started = time.perf_counter()
    h = History()
    try:
        for kind, a, b in history:
            h.apply(kind, a, b)
            problems = h.check()
            assert not problems, h.story(problems)
        problems = h.finish()
        assert not problems, h.story(problems)
    except AssertionError:
        STATS.record(len(history), time.perf_counter() - started, failed=True, story="\n".join(h.log))
        raise
    STATS.record(len(history), time.perf_counter() - started)
