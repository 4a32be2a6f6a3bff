"""The bench trace's slow hosts and lemons (issue: slow and bad hosts), and how they are scored."""

from __future__ import annotations

import dataclasses
import math
import random
import statistics

import pytest

from benchmarks import stragglers
from benchmarks.accounting import Slowness
from benchmarks.baselines import run_baseline
from benchmarks.trace import (
    INFRA_CHECK_SHARES,
    LEMON_RETURNS,
    LEMON_SHARE,
    SLOW_DURATION_MIN,
    SLOW_FACTOR,
    SLOW_REFERENCE_HOSTS,
    SLOW_STRETCH,
    Trace,
    TraceFault,
    TraceSlow,
    draw_slow,
    generate,
    slow_rate_per_host_hour,
    trace_index,
)
from benchmarks.workload import Workload
from tests.bench.builders import PERSON, SMALL, _account  # 16 GPUs, a 2-min save every 30 steps


def _trace(*, faults: tuple[TraceFault, ...] = (), slows: tuple[TraceSlow, ...] = ()) -> Trace:
    return Trace(0, SMALL.gpus, SMALL.hosts, 1.0, 48, faults=faults, slows=slows)


def test_slow_episodes_follow_their_ranges_and_rate_and_leave_the_faults_alone() -> None:
    hours = 4_000.0
    plain = generate(seed=5, hosts=256, horizon_hours=hours)
    both = generate(seed=5, hosts=256, horizon_hours=hours, hosts_fail=True)
    assert [dataclasses.replace(f, returns_cold=0) for f in both.faults] == list(plain.faults)
    assert both == generate(seed=5, hosts=256, horizon_hours=hours, hosts_fail=True)
    expected = slow_rate_per_host_hour() * 256 * hours
    assert abs(len(both.slows) - expected) < 5 * expected**0.5
    assert all(SLOW_DURATION_MIN[0] <= x.duration_min <= SLOW_DURATION_MIN[1] for x in both.slows)
    assert all(SLOW_FACTOR[0] <= x.slowdown <= SLOW_FACTOR[1] for x in both.slows)
    assert {x.host for x in both.slows} == set(range(1, 257))
    # log-uniform: the median duration is the geometric mean of the range
    median = statistics.median(x.duration_min for x in both.slows)
    assert median == pytest.approx(math.sqrt(SLOW_DURATION_MIN[0] * SLOW_DURATION_MIN[1]), rel=0.15)
    # the rate scales with the hosts
    small = draw_slow(5, 16, hours)
    assert abs(len(small) - expected / 16) < 5 * (expected / 16) ** 0.5


def test_the_slow_rate_makes_an_unhelped_reference_run_about_1_34x_longer() -> None:
    # episodes drawn as the trace draws them, each losing D x s / (1 + s) minutes of work: at the
    # reference job's rate the lost share of the wall clock is 1 - 1 / 1.34
    rng = random.Random(1)
    lost = []
    for _ in range(200_000):
        d = math.exp(rng.uniform(*map(math.log, SLOW_DURATION_MIN)))
        s = math.exp(rng.uniform(*map(math.log, SLOW_FACTOR)))
        lost.append(d * s / (1 + s))
    per_min = slow_rate_per_host_hour() * SLOW_REFERENCE_HOSTS / 60
    share = per_min * statistics.fmean(lost)
    assert 1 / (1 - share) == pytest.approx(SLOW_STRETCH, rel=0.02)


def test_a_quarter_of_the_bad_instance_faults_are_lemons_and_no_other_fault_is() -> None:
    trace = generate(seed=2, hosts=256, horizon_hours=24 * 400, hosts_fail=True)
    hardware = [f for f in trace.faults if f.hardware]
    lemons = [f for f in hardware if f.returns_cold]
    assert all(f.returns_cold == LEMON_RETURNS for f in lemons)
    assert not any(f.returns_cold for f in trace.faults if not f.hardware)
    n = len(hardware)
    assert abs(len(lemons) - LEMON_SHARE * n) < 5 * (n * LEMON_SHARE * (1 - LEMON_SHARE)) ** 0.5
    assert all(f.sim_fault().returns_cold == f.returns_cold for f in lemons)


def test_the_infra_check_replaces_fails_or_misses_a_bad_instance_at_the_stated_shares() -> None:
    """Issue 32 item 15: AWS publishes no rate for what the infra check does with a bad host: the
    trace draws each bad-instance fault's case at INFRA_CHECK_SHARES, and the simulator's fault
    carries it (a miss, a failed job in Starting, or a replaced host)."""
    trace = generate(seed=2, hosts=256, horizon_hours=24 * 400)
    hardware = [f for f in trace.faults if f.hardware]
    assert not any(f.infra_check for f in trace.faults if not f.hardware)
    n = len(hardware)
    for case, share in INFRA_CHECK_SHARES:
        drawn = sum(f.infra_check == case for f in hardware)
        assert abs(drawn - share * n) < 5 * (n * share * (1 - share)) ** 0.5, case
    pinned = {
        f.infra_check: (f.sim_fault().infra_check_finds, f.sim_fault().infra_check_on_bad_host)
        for f in hardware
    }
    assert pinned == {"replace": (True, "replace"), "fail": (True, "fail"), "miss": (False, None)}
    lemons = generate(seed=2, hosts=256, horizon_hours=24 * 400, hosts_fail=True)
    assert [f.infra_check for f in lemons.faults] == [f.infra_check for f in trace.faults]  # own stream


def test_records_name_their_trace_fault_and_slow_episodes_none() -> None:
    slow = TraceSlow(3, 10.0, 2, 0.2, 5.0).sim_fault()
    assert trace_index(slow.label) is None and trace_index("007 faulty GPU / xid_crash") == 7
    assert trace_index(None) is None and slow.kind == "slow_host" and slow.slowdown == 0.2


def test_a_slow_host_costs_its_share_of_the_training_minutes_it_slowed() -> None:
    # healthy minute 66 falls in a train stretch (30 train, 2 save, 30 train, 2 save, train...):
    # 10 minutes 25 % slower make 1 / 1.25 of their steps, so 2 minutes of work are lost on 16 GPUs
    trace = _trace(slows=(TraceSlow(1, 66.0, 2, 0.25, 10.0),))
    a = _account(run_baseline("poll", SMALL, trace, PERSON), trace)
    assert a.slowness == Slowness(1, 0, pytest.approx(16 * 2 / 60))
    assert not a.losses  # not a fault: nothing in the per-fault buckets
    assert a.unattributed_gpu_hours == pytest.approx(0.0, abs=0.05)  # the wall clock agrees


def test_overlapping_slow_hosts_cost_only_the_slowest() -> None:
    one = _trace(slows=(TraceSlow(1, 66.0, 2, 0.25, 10.0),))
    two = _trace(slows=(TraceSlow(1, 66.0, 2, 0.25, 10.0), TraceSlow(2, 66.0, 1, 0.10, 10.0)))
    a1 = _account(run_baseline("poll", SMALL, one, PERSON), one)
    a2 = _account(run_baseline("poll", SMALL, two, PERSON), two)
    assert a2.slowness.met == 2 and a2.slowness.gpu_hours == pytest.approx(a1.slowness.gpu_hours)


def test_a_restart_ends_a_slow_episode_early() -> None:
    # a crash 4 healthy minutes into a 30-minute episode: the episode dies with its job
    crash = TraceFault(1, 70.0, "test", "xid_crash", 2, True, None)
    trace = _trace(faults=(crash,), slows=(TraceSlow(1, 66.0, 2, 0.25, 30.0),))
    a = _account(run_baseline("poll", SMALL, trace, PERSON), trace)
    assert a.slowness.met == 1 and a.slowness.cut_short == 1
    assert a.slowness.gpu_hours == pytest.approx(16 * 4 * 0.2 / 60)
    assert [x.fault for x in a.losses] == [crash]


def test_a_lemon_comes_back_on_new_instances_and_its_fault_is_met_again() -> None:
    # the polling script resubmits cold (no warm pool): a lemon's host is in the next job and fails
    # there again; a plain bad-instance fault is not
    crash = TraceFault(1, 70.0, "test", "xid_crash", 2, True, None)
    plain = _trace(faults=(crash,))
    lemon = _trace(faults=(dataclasses.replace(crash, returns_cold=1),))
    a_plain = _account(run_baseline("poll", SMALL, plain, PERSON), plain)
    a_lemon = _account(run_baseline("poll", SMALL, lemon, PERSON), lemon)
    assert a_plain.again_count == 0 and a_plain.again_gpu_hours == 0
    assert a_lemon.again_count == 1 and a_lemon.again_gpu_hours > 0
    assert a_lemon.fault_count() == 1  # met again is not a new fault


def test_the_straggler_bench_arms_the_seeds_episodes_and_nets_alert_minus_restart() -> None:
    scenario, trace = stragglers.scenario(4, "restart", days=1.0)
    assert trace.slows == draw_slow(4, stragglers.HOSTS, 48.0)
    assert [f.label for f in scenario.faults] == [f"slow {x.index:03d}" for x in trace.slows]
    (run,) = scenario.runs
    assert run.body["policy"]["straggler_action"] == "restart" and run.profile.step_lines
    slow = Slowness(3, 0, 40.0)
    runs = [
        stragglers.StragglerRun(1, "alert", 600.0, 0, 1, slow),
        stragglers.StragglerRun(1, "restart", 590.0, 1, 1, Slowness(3, 1, 5.0)),
        stragglers.StragglerRun(2, "alert", 600.0, 0, 0, Slowness(0, 0, 0.0)),
        stragglers.StragglerRun(2, "restart", 610.0, 1, 1, Slowness(0, 0, 0.0)),
    ]
    text = "\n".join(stragglers.table(runs, days=1.0))
    gph = stragglers.HOSTS * stragglers.GPUS_PER_HOST / 60
    assert f"| {10 * gph:+,.0f} |" in text and f"| {-10 * gph:+,.0f} |" in text
    assert "saved +0 (" in text  # the median of +x and -x


def test_the_ettr_ceiling_is_the_fault_free_run_at_youngs_interval_with_floor_only_faults() -> None:
    from types import SimpleNamespace

    from benchmarks.seeds import ettr_ceiling

    w = Workload(days=7.5)  # 256 hosts, a 2-min save every 30 steps, a step a minute
    base = generate(seed=1, hosts=256, horizon_hours=360)
    fault = TraceFault(1, 10.0, "test", "xid_crash", 2, True, None)
    loss = SimpleNamespace(fault=fault, again=False, floor=(0.2, 0.0, 9.8, 12.0))
    sbs = SimpleNamespace(
        workload=w,
        trace=base,
        faultfree_min=w.faultfree_minutes,
        accounts={"d": SimpleNamespace(losses=[loss])},
    )
    ceiling = ettr_ceiling(SimpleNamespace(sbs=sbs))
    mtbf, save = base.mtbf_hours * 60, 2.0
    tau = math.sqrt(2 * save * mtbf)
    saves_now = w.total_steps // w.checkpoint_every_steps * save
    expected = (
        w.useful_minutes
        * (1 - (10.0 + tau / 2) / mtbf)
        / (w.faultfree_minutes - saves_now + w.useful_minutes / tau * save)
    )
    assert ceiling == pytest.approx(expected)
    at_tau = w.useful_minutes / (w.faultfree_minutes - saves_now + w.useful_minutes / tau * save)
    assert ceiling < at_tau  # faults cost something, even at their floor
    # a faster fault rate lowers it
    busier = dataclasses.replace(base, rate_multiplier=4.0)
    assert ettr_ceiling(SimpleNamespace(sbs=SimpleNamespace(**{**vars(sbs), "trace": busier}))) < ceiling
