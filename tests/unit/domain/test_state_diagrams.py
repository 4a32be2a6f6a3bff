"""docs/states.md draws every run-status and launch-state transition that `decide` makes: random
event sequences (the property tests' generator) never take a transition the diagrams lack."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sagewarden.domain.decide import decide
from sagewarden.domain.vocabulary.models import LaunchState, Run, RunStatus
from sagewarden.domain.vocabulary.policy import RunPolicy
from tests.builders import make_run
from tests.unit.domain.builders import _event, move, policies

PAGE = Path(__file__).resolve().parents[3] / "docs" / "states.md"
EDGE = re.compile(r"^\s*(\[\*\]|[A-Z_]+) --> (\[\*\]|[A-Z_]+)\s*$")


def diagrams() -> list[set[tuple[str, str]]]:
    """The edges of each mermaid diagram on the page, in page order."""
    blocks = re.findall(r"```mermaid\n(.*?)```", PAGE.read_text(), flags=re.S)
    return [{m.groups() for line in b.splitlines() if (m := EDGE.match(line))} for b in blocks]


def test_the_page_draws_every_status_and_launch_state() -> None:
    runs, launches = diagrams()
    assert {s for e in runs for s in e} - {"[*]"} == {s.value for s in RunStatus}
    assert {s for e in launches for s in e} - {"[*]"} == {s.value for s in LaunchState}


def transitions(before: Run, after: Run) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    runs = {(before.status.value, after.status.value)} if before.status != after.status else set()
    old = {a.number: a for a in before.attempts}
    launches = {
        ("[*]", a.launch.value) if a.number not in old else (old[a.number].launch.value, a.launch.value)
        for a in after.attempts
        if a.number not in old or old[a.number].launch != a.launch
    }
    return runs, launches


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(policy=policies, moves=st.lists(move, min_size=1, max_size=40))
def test_decide_takes_no_transition_the_diagrams_lack(policy: RunPolicy, moves) -> None:
    runs, launches = diagrams()
    run = make_run(policy)
    assert ("[*]", run.status.value) in runs
    now = 0
    for m in moves:
        now += m[3] * 60_000
        event, obs = _event(run, m, now)
        after = decide(run, event, now, run.policy, obs).run
        took_run, took_launch = transitions(run, after)
        assert took_run <= runs, f"{type(event).__name__}: run {took_run - runs} is not in docs/states.md"
        assert took_launch <= launches, (
            f"{type(event).__name__}: launch {took_launch - launches} is not drawn"
        )
        run = after
