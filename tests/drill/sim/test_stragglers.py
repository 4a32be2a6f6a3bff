"""Stragglers in the simulated SageMaker (drill/sim/stragglers.py; docs/fidelity.md): a slow host
slows the whole job by its slowdown, for its duration or for good; the contract's step lines show
equal wall step times and the slow host's higher compute; uneven shards are constant from the start."""

from __future__ import annotations

import re

import boto3
import pytest

from drill.clock import VirtualClock
from drill.sim.model import Fault, JobProfile
from drill.sim.sagemaker import SimSageMaker
from sagewarden.domain.hosts.stragglers import parse
from tests.drill.sim.builders import BUCKET, MIN, drain, training_job


@pytest.fixture
def sim(aws: None) -> SimSageMaker:
    client = boto3.client("s3", region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    return SimSageMaker(VirtualClock(), s3_client=client)


LINE = re.compile(r"\[sagewarden\] host=(\d+) step=(\d+) step_ms=(\d+) compute_ms=(\d+) total=(\d+)")


def step_lines(sim: SimSageMaker, name: str, host: int) -> list[tuple[int, int, int]]:
    """(step, step_ms, compute_ms) of the host's contract lines so far."""
    out = []
    for text in sim.log_tail(name, host, 2000):
        m = LINE.search(text)
        if m:
            assert int(m[1]) == host and int(m[5]) == 100_000
            out.append((int(m[2]), int(m[3]), int(m[4])))
    return out


def at(sim: SimSageMaker, t: int) -> None:
    drain(sim, until_ms=t)


@pytest.mark.claim("`step_ms` alone is equal on every host (they wait for each other) and singles out none.")
@pytest.mark.claim(
    "a host alive but slow: `slow_host` (its compute per step `slowdown` longer, e.g. 0.15; the whole job's step rate becomes 1/(1 + `slowdown`); for `duration_min`, or lasting)."
)
def test_a_lasting_slow_host_slows_the_job_and_shows_in_its_compute(sim: SimSageMaker) -> None:
    sim.set_profile("r1", JobProfile(total_steps=100_000, steps_per_minute=10.0, step_lines=True))
    sim.inject(Fault("slow_host", run="r1", host=2, slowdown=0.25, after_training_min=20, once=True))
    started = training_job(sim, "job-a01", count=3)
    at(sim, started + 20 * MIN)
    before = sim.job("job-a01").current_step(started + 20 * MIN)
    at(sim, started + 60 * MIN)
    after = sim.job("job-a01").current_step(started + 60 * MIN)
    assert before == pytest.approx(200, abs=2)
    assert after - before == pytest.approx(400 / 1.25, abs=2)  # 40 min at 10/1.25 steps per minute
    late = {h: step_lines(sim, "job-a01", h)[-1] for h in (1, 2, 3)}
    early = {h: step_lines(sim, "job-a01", h)[5] for h in (1, 2, 3)}
    assert {s for s, _, _ in late.values()} == {late[1][0]}  # the same step on every host
    assert {w for _, w, _ in early.values()} == {6000} and {w for _, w, _ in late.values()} == {7500}
    assert late[2][2] == pytest.approx(early[2][2] * 1.25, rel=0.03)
    assert late[1][2] == pytest.approx(early[1][2], rel=0.03)  # peers: the same work, more waiting


@pytest.mark.claim(
    "a host alive but slow: `slow_host` (its compute per step `slowdown` longer, e.g. 0.15; the whole job's step rate becomes 1/(1 + `slowdown`); for `duration_min`, or lasting)."
)
def test_a_transient_slow_host_ends_and_the_rate_comes_back(sim: SimSageMaker) -> None:
    sim.set_profile("r1", JobProfile(total_steps=100_000, steps_per_minute=10.0, step_lines=True))
    sim.inject(Fault("slow_host", run="r1", host=1, slowdown=0.5, after_training_min=10, duration_min=4))
    started = training_job(sim, "job-a01", count=2)
    at(sim, started + 30 * MIN)
    # 26 healthy minutes and 4 at 10/1.5 steps per minute
    assert sim.job("job-a01").current_step(started + 30 * MIN) == pytest.approx(260 + 40 / 1.5, abs=2)
    assert step_lines(sim, "job-a01", 1)[-1][1] == 6000


def test_uneven_shards_are_a_constant_offset_the_domain_reads(sim: SimSageMaker) -> None:
    sim.set_profile(
        "r1", JobProfile(total_steps=100_000, step_lines=True, uneven_host=3, uneven_fraction=0.05)
    )
    started = training_job(sim, "job-a01", count=4)
    at(sim, started + 30 * MIN)
    samples = parse(t for h in (1, 2, 3, 4) for t in sim.log_tail("job-a01", h, 2000))
    ratios = [
        s.compute_ms / next(p.compute_ms for p in samples if p.step == s.step and p.host == "algo-1")
        for s in samples
        if s.host == "algo-3"
    ]
    assert len(ratios) >= 25 and all(1.02 <= r <= 1.08 for r in ratios)


def test_a_slow_host_needs_a_positive_slowdown() -> None:
    with pytest.raises(ValueError, match="slowdown"):
        Fault("slow_host", slowdown=0)
