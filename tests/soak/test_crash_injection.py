"""Crash injection (issue 7): for every port method the service calls (enumerated from the
Protocols in `sagewarden.ports.aws`), kill the invocation just before and just after its Nth call,
then redeliver and sweep until the world is at rest. Same invariants as the soak, nothing
lost (every job that should exist exists exactly once, every training attempt has its hang
alarms, every owed alert was published), and the same end as without the crash.

Duplicates: an alert SNS accepted while the store still owed it when the process died is
published again by the sweep (same dedupe_id, which subscribers can drop). That is the only
duplicate allowed; it is computed per crash (`Driver.allowed_duplicates`), never assumed.

`SAGEWARDEN_CRASH_CALLS` bounds the calls of one method crashed per scenario (the first N-1
and the last; default 8 in `make test`); `make soak` sets it to 0 = every call.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

from tests.soak.crash import SCENARIOS, crash_points, run_scenario
from tests.soak.stats import STATS
from tests.soak.world import port_methods

PER_METHOD = int(os.environ.get("SAGEWARDEN_CRASH_CALLS", "8")) or None


@pytest.mark.claim("never forgets a run")
@pytest.mark.claim(
    "every decision is re-derived from observed state, every effect is re-driven until confirmed, and nothing unknown is treated as known"
)
@pytest.mark.claim("1,583 crash points, 0 violations")
@pytest.mark.claim("A timer cannot be lost: it is part of the run item that the decision wrote.")
@pytest.mark.claim("If a function dies between saving and acting, the sweep re-issues what is missing")
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_crash_anywhere_loses_nothing(scenario):
    baseline = run_scenario(scenario)
    assert not baseline.problems, baseline.problems
    expected = {k: v for k, v in baseline.summary().items() if k in scenario.same}
    failures = []
    points = crash_points(baseline, PER_METHOD)
    for point in points:
        result = run_scenario(scenario, crash=point)
        problems = list(result.problems)
        got = {k: v for k, v in result.summary().items() if k in scenario.same}
        if got != expected:
            problems.append(f"ends differently: {got} instead of {expected}")
        published = Counter(p.dedupe_id for p in result.driver.world.sns.published)
        if any(n > 1 for n in published.values()):
            STATS.crash_duplicates += 1  # allowed (see the module docstring), counted for the report
        if problems:
            failures.append(f"crash {point[2]} {point[0]} #{point[1]}: " + "; ".join(problems))
    STATS.crash_points += len(points)
    STATS.crash_scenarios.append(f"{scenario.name}: {len(points)}")
    assert not failures, f"{len(failures)} of {len(points)} crash points lose something:\n" + "\n".join(
        failures[:20]
    )


@pytest.mark.claim("1,583 crash points, 0 violations")
def test_crash_injection_covers_every_port_method():
    """The scenarios call every method of every port at least once (so each has crash points);
    the list of methods comes from the Protocols, so a new port method shows up here."""
    called = set()
    for scenario in SCENARIOS:
        called |= set(run_scenario(scenario).counts)
    missing = sorted(set(port_methods()) - called)
    assert not missing, f"port methods no scenario calls (no crash point): {missing}"
    assert len(port_methods()) >= 25  # the enumeration found the ports (not an empty list)
