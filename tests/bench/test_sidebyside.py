"""The side-by-side benchmark's parts: the fault trace, the two alternatives driving the simulated
SageMaker, the loss accounting (hand-computed expectations) and the chart."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from pathlib import Path

import pytest

from benchmarks.accounting import DELIVERY_MS
from benchmarks.baselines import run_baseline
from benchmarks.chart import write_chart
from benchmarks.seeds import SeedResult, readme_lines
from benchmarks.sidebyside import (
    README_END,
    README_START,
    SUPERVISORS,
    TICKS,
    SideBySide,
    _gh,
    update_readme,
)
from benchmarks.trace import (
    GPU_FAULT_RATE_PER_GPU_HOUR,
    MANIFESTATIONS,
    ROOT_CAUSES,
    Trace,
    TraceFault,
    draw_cause,
    draw_manifestation,
    generate,
)
from drill.account.local import BUCKET, EXECUTION_ROLE
from drill.scenarios.spec import parse
from tests.bench.builders import PERSON, SMALL, _account

MIN = 60_000


def _one(manifestation: str, *, healthy_min: float = 75.0, hardware: bool = True) -> Trace:
    fault = TraceFault(
        index=1,
        healthy_min=healthy_min,
        cause="test",
        manifestation=manifestation,
        host=2,
        hardware=hardware,
        restart_capacity_min=None,
    )
    return Trace(
        seed=0, gpus=SMALL.gpus, hosts=SMALL.hosts, rate_multiplier=1.0, horizon_hours=48, faults=(fault,)
    )


# ----------------------------------------------------------------------------------------------
# The trace
# ----------------------------------------------------------------------------------------------


def test_trace_is_deterministic_for_a_seed() -> None:
    a = generate(seed=11, hosts=256, horizon_hours=24 * 60)
    b = generate(seed=11, hosts=256, horizon_hours=24 * 60)
    c = generate(seed=12, hosts=256, horizon_hours=24 * 60)
    assert a == b and a.faults != c.faults
    assert all(x.healthy_min < y.healthy_min for x, y in zip(a.faults, a.faults[1:], strict=False))


@pytest.mark.claim("the Llama 3 interruption table's root causes at its rate, 1.97e-5 per GPU-hour")
def test_trace_follows_the_table_and_the_rate_on_a_large_sample() -> None:
    hours = 300_000.0
    trace = generate(seed=5, hosts=256, horizon_hours=hours)
    expected = GPU_FAULT_RATE_PER_GPU_HOUR * 2048 * hours  # ~12,100 faults
    assert abs(len(trace.faults) - expected) < 5 * expected**0.5
    total = sum(c.count for c in ROOT_CAUSES)
    causes = Counter(f.cause for f in trace.faults)
    for cause in ROOT_CAUSES:
        share = causes[cause.name] / len(trace.faults)
        assert abs(share - cause.count / total) < 0.012, cause.name
    # within a cause, the manifestations follow its row
    gpu = [f for f in trace.faults if f.cause == "faulty GPU"]
    shows = Counter(f.manifestation for f in gpu)
    assert abs(shows["xid_crash"] / len(gpu) - 0.6) < 0.03 and abs(shows["dead_host"] / len(gpu) - 0.4) < 0.03
    with_capacity = sum(1 for f in gpu if f.restart_capacity_min is not None)
    assert abs(with_capacity / len(gpu) - 0.10) < 0.02
    assert all(f.hardware for f in gpu) and not any(
        f.hardware for f in trace.faults if f.cause == "software bug"
    )
    assert {f.host for f in trace.faults} == set(range(1, 257))


@pytest.mark.claim("the Llama 3 interruption table's root causes at its rate, 1.97e-5 per GPU-hour")
def test_draws_follow_the_weights() -> None:
    rng = random.Random(1)
    draws = Counter(draw_cause(rng).name for _ in range(100_000))
    total = sum(c.count for c in ROOT_CAUSES)
    for cause in ROOT_CAUSES:
        assert abs(draws[cause.name] / 100_000 - cause.count / total) < 0.006
    network = next(c for c in ROOT_CAUSES if c.name == "network switch/cable")
    shows = Counter(draw_manifestation(rng, network) for _ in range(20_000))
    assert abs(shows["nccl_watchdog"] / 20_000 - 0.6) < 0.02


def test_trace_faults_are_valid_simulator_and_scenario_faults() -> None:
    trace = generate(seed=2, hosts=256, horizon_hours=24 * 400)
    assert {f.manifestation for f in trace.faults} == set(MANIFESTATIONS)
    faults = [f.scenario_fault("llm") for f in trace.faults[:50]]
    # the faults name run "llm" and hosts up to 256: the scenario validation checks both exist
    run = {
        "name": "llm",
        "instance_type": "ml.p5.48xlarge",
        "instance_count": 256,
        "profile": {"total_steps": 10**7, "steps_per_minute": 1, "checkpoint_every_steps": 60},
    }
    data = {
        "max_days": 400,
        "account": {"quotas": {"ml.p5.48xlarge": 256}},
        "policy_defaults": {"max_restarts": 100},
        "runs": [run],
        "faults": faults,
    }
    scenario = parse(data, bucket=BUCKET, role_arn=EXECUTION_ROLE)
    assert len(scenario.faults) == 50
    for tf, fault in zip(trace.faults[:50], scenario.faults, strict=True):
        assert fault == tf.sim_fault("llm")
        assert fault.after_run_training_min == tf.healthy_min and fault.bad_host == tf.hardware


# ----------------------------------------------------------------------------------------------
# The alternatives drive the simulator
# ----------------------------------------------------------------------------------------------


@pytest.mark.claim(
    "SageMaker's RetryStrategy + a person on call (a), a 5-minute polling script + the person (b)"
)
def test_polling_script_resubmits_a_crash_at_its_next_poll_without_the_person() -> None:
    trace = _one("xid_crash")
    result = run_baseline("poll", SMALL, trace, PERSON)
    assert result.completed
    first, second = sorted(result.jobs, key=lambda j: j.created_ms)
    assert first.status == "Failed" and first.ended_ms is not None
    # polls every 5 min from the submission: the crash is 83 min in, the next poll at 85 min
    assert second.created_ms == result.start_ms + 85 * MIN
    assert second.created_ms - first.ended_ms <= 5 * MIN
    assert second.start_step == 60  # the newest complete checkpoint
    assert [who for _, who, _ in result.actions] == ["start: resubmit", "script: resubmit"]


@pytest.mark.claim(
    "SageMaker's RetryStrategy + a person on call (a), a 5-minute polling script + the person (b)"
)
def test_retry_strategy_pages_the_person_for_a_crash() -> None:
    trace = _one("xid_crash")
    result = run_baseline("retry", SMALL, trace, PERSON)
    first, second = sorted(result.jobs, key=lambda j: j.created_ms)
    assert first.retries == []  # an AlgorithmError is not SageMaker's to retry
    assert first.ended_ms is not None
    delay = PERSON.paged_delay_ms(1, 0)
    assert first.ended_ms + delay + 1_000 <= second.created_ms <= first.ended_ms + delay + 20_000
    assert "person: resubmit" in [who for _, who, _ in result.actions]


@pytest.mark.claim(
    "SageMaker's RetryStrategy + a person on call (a), a 5-minute polling script + the person (b)"
)
def test_retry_strategy_retries_an_internal_error_itself() -> None:
    trace = _one("internal_error")
    result = run_baseline("retry", SMALL, trace, PERSON)
    assert result.completed and len(result.jobs) == 1
    (job,) = result.jobs
    assert len(job.retries) == 1 and job.retries[0]["start_step"] == 60
    assert not any(who.startswith("person") for _, who, _ in result.actions)


@pytest.mark.parametrize("kind", ["retry", "poll"])
def test_a_hang_lasts_until_the_person_notices_it(kind: str) -> None:
    trace = _one("nccl_spin")
    result = run_baseline(kind, SMALL, trace, PERSON)
    assert result.completed
    first, second = sorted(result.jobs, key=lambda j: j.created_ms)
    (record,) = result.sim.fault_records
    assert first.stop_requested_ms == record.at_ms + PERSON.hang_notice_delay_ms(1)
    assert first.status == "Stopped" and first.ended_ms == first.stop_requested_ms + 2 * MIN  # SIGKILL
    assert first.ended_ms + 1_000 <= second.created_ms <= first.ended_ms + 20_000


# ----------------------------------------------------------------------------------------------
# The accounting, against hand-computed expectations
# ----------------------------------------------------------------------------------------------


def test_accounting_of_one_crash_under_the_polling_script() -> None:
    # Training starts 8 min after submission; healthy minute 75 = 30 train + 2 save + 30 train + 2 save
    # + 11 train: step 71, checkpoint 60, 83 min after submission. Next poll at 85 min: 2 min of
    # detection, no stop (the crash ended the job), a cold start of 8 min, 11 steps redone.
    trace = _one("xid_crash")
    a = _account(run_baseline("poll", SMALL, trace, PERSON), trace)
    (loss,) = a.losses
    assert loss.minutes == pytest.approx((2.0, 0.0, 8.0, 11.0))
    assert loss.floor == pytest.approx((DELIVERY_MS / MIN, 0.0, 8.0, 11.0))
    gpu_hours = 16 * 21 / 60
    assert a.total_gpu_hours() == pytest.approx(gpu_hours)
    assert a.excess_gpu_hours() == pytest.approx(16 * (21 - 19 - DELIVERY_MS / MIN) / 60)
    assert a.unattributed_gpu_hours == pytest.approx(0.0, abs=0.01)  # the wall clock agrees


def test_accounting_of_one_hang_under_the_person() -> None:
    # a dead host at step 71: noticed after the person's delay, 2 min to kill the hung job (+ the
    # Stopped event's delivery), a cold start (the host is bad), 11 steps redone
    trace = _one("dead_host")
    result = run_baseline("retry", SMALL, trace, PERSON)
    a = _account(result, trace)
    (loss,) = a.losses
    notice = PERSON.hang_notice_delay_ms(1) / MIN
    assert loss.minutes[0] == pytest.approx(notice)
    assert 2 + 1 / 60 <= loss.minutes[1] <= 2 + 20 / 60
    assert loss.minutes[2:] == pytest.approx((8.0, 11.0))
    assert loss.floor == pytest.approx(
        ((60_000 + DELIVERY_MS) / MIN, (120_000 + DELIVERY_MS) / MIN, 8.0, 11.0)
    )


def test_accounting_floor_is_warm_after_a_good_instance() -> None:
    trace = _one("segfault", hardware=False)
    a = _account(run_baseline("poll", SMALL, trace, PERSON), trace)
    (loss,) = a.losses
    assert loss.floor[2] == pytest.approx(35 / 60)  # 20 s + 15 s with a warm pool
    assert loss.minutes[2] == pytest.approx(8.0)  # the script starts cold


# ----------------------------------------------------------------------------------------------
# The chart
# ----------------------------------------------------------------------------------------------


@pytest.mark.claim("![lost GPU-hours by cause](docs/bench-lost-gpu-hours.png)")
def test_chart_is_written(tmp_path: Path) -> None:
    crash, hang = _one("xid_crash"), _one("nccl_spin")
    accounts = {
        "a": _account(run_baseline("retry", SMALL, hang, PERSON), hang),
        "b": _account(run_baseline("poll", SMALL, hang, PERSON), hang),
        "c": _account(run_baseline("retry", SMALL, crash, PERSON), crash),
        "d": _account(run_baseline("poll", SMALL, crash, PERSON), crash),
    }
    path = write_chart([("one", accounts), ("two", dict(accounts))], TICKS, tmp_path / "docs" / "chart.png")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


@pytest.mark.claim("Medians (lowest-highest) over 10 trace seeds, 7.5-day runs, GPU-hours")
def test_readme_block_is_rewritten_between_its_markers() -> None:
    crash, hang = _one("xid_crash"), _one("nccl_spin")
    runs = []
    for seed, trace in ((1, crash), (2, hang)):
        accounts = {
            k: _account(run_baseline("retry" if k in ("a", "c") else "poll", SMALL, trace, PERSON), trace)
            for k in SUPERVISORS
        }
        runs.append(SeedResult(seed, SideBySide("t", SMALL, trace, accounts=accounts)))
    text = f"intro\n{README_START}\nold table\n{README_END}\nafter\n"
    out = update_readme(text, readme_lines(runs))
    assert out.startswith(f"intro\n{README_START}\nMedians") and out.endswith(f"{README_END}\nafter\n")
    assert "old table" not in out and "over 2 trace seeds" in out
    totals = sorted(runs[i].sbs.accounts["b"].total_gpu_hours() for i in range(2))
    assert f"{_gh((totals[0] + totals[1]) / 2)} ({_gh(totals[0])}-{_gh(totals[1])})" in out  # median (range)
    assert update_readme(out, readme_lines(runs)) == out  # idempotent
    assert "Effective training (ETTR" in out and "points below it" in out


def test_small_workload_is_what_the_expectations_assume() -> None:
    assert (SMALL.gpus, SMALL.checkpoint_every_steps, SMALL.steps_per_minute) == (16, 30, 1.0)
    assert dataclasses.asdict(SMALL.startup)["provision_s"] + SMALL.startup.download_s == 480


def test_benign_phases_are_drawn_apart_from_the_faults_within_their_ranges_and_rates() -> None:
    from benchmarks.trace import (
        COMPILE_MIN,
        EVAL_EVERY_H,
        EVAL_MIN,
        LOG_INTERVAL_S,
        PAUSE_EVERY_H,
        PAUSE_MIN,
        SAVE_EVERY_H,
        SAVE_MIN,
    )

    hours = 20_000.0
    plain = generate(seed=7, hosts=256, horizon_hours=hours)
    busy = generate(seed=7, hosts=256, horizon_hours=hours, benign=True)
    assert busy.faults == plain.faults and plain.phases == () and plain.compile_min == 0
    assert busy == generate(seed=7, hosts=256, horizon_hours=hours, benign=True)
    assert [p.healthy_min for p in busy.phases] == sorted(p.healthy_min for p in busy.phases)
    for phase, span, every_h in (
        ("save", SAVE_MIN, SAVE_EVERY_H),
        ("pause", PAUSE_MIN, PAUSE_EVERY_H),
        ("eval", EVAL_MIN, EVAL_EVERY_H),
    ):
        got = [p for p in busy.phases if p.phase == phase]
        assert all(span[0] <= p.duration_min <= span[1] for p in got)
        expected = hours / every_h
        assert abs(len(got) - expected) < 5 * expected**0.5, phase
    for seed in range(40):
        tr = generate(seed=seed, hosts=4, horizon_hours=10, benign=True)
        assert COMPILE_MIN[0] <= tr.compile_min <= COMPILE_MIN[1]
        assert LOG_INTERVAL_S[0] <= tr.log_interval_s <= LOG_INTERVAL_S[1]


def test_the_log_cadence_becomes_the_scripts_lines_per_minute_or_every_n_minutes() -> None:
    for interval, lines, every in ((10.0, 6, 1), (30.0, 2, 1), (70.0, 1, 1), (600.0, 1, 10), (250.0, 1, 4)):
        w = dataclasses.replace(_one("xid_crash"), log_interval_s=interval).script(SMALL)
        assert (w.log_lines_per_minute, w.log_every_minutes) == (lines, every)
        assert (w.profile().log_lines_per_minute, w.profile().log_every_minutes) == (lines, every)


def test_benign_phases_are_valid_scenario_faults_and_the_compile_repeats_on_every_attempt() -> None:
    trace = generate(seed=3, hosts=256, horizon_hours=24 * 20, benign=True)
    faults = trace.scenario_faults("llm")
    compile_ = next(f for f in faults if f["kind"] == "compile")
    assert compile_["once"] is False and compile_["duration_min"] == trace.compile_min
    run = {
        "name": "llm",
        "instance_type": "ml.p5.48xlarge",
        "instance_count": 256,
        "profile": {"total_steps": 10**6, "steps_per_minute": 1, "checkpoint_every_steps": 60},
    }
    data = {"max_days": 400, "policy_defaults": {"max_restarts": 100}, "runs": [run], "faults": faults}
    scenario = parse(data, bucket=BUCKET, role_arn=EXECUTION_ROLE)
    assert scenario.faults == trace.sim_faults("llm")
    kinds = {f.kind for f in scenario.faults}
    assert {"compile", "checkpoint_save_long", "dataloader_pause", "eval_phase"} <= kinds
