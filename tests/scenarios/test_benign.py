"""The extended benign set on the drill: no phase a healthy job goes through may stop it as hung,
with the default or the recommended policy, even once the windows have been learned from the
attempt's cadence; and a real hang in each same setup is still caught (so these tests can fail).

The cases (and the benchmark that reports them) are in `benchmarks/benign.py`."""

from __future__ import annotations

from datetime import datetime

import pytest

from benchmarks.benign import (
    BY_KEY,
    CASES,
    COMPILE_MIN,
    DATA_PAUSE_MIN,
    EVAL_MIN,
    LOG_EVERY_S,
    SAVE_MIN,
    draw,
    draw_hang,
    hang_stops,
    log_windows,
    run_case,
    run_draw,
    silent_phases_past_the_window,
)
from benchmarks.supervised import RECOMMENDED_POLICY

POLICIES = {"default": None, "recommended": RECOMMENDED_POLICY}
# A silent phase longer than the learned (4-minute) log-silence window is told apart from a hang by
# what the hosts do (domain/vocabulary/evidence.py): CPU beyond one core per rank, disk space growing, or
# checkpoint objects still landing in S3 (hangs.SAVE_ACTIVE_MS).


# the 256-host case costs ~15 s a run: the tests drive it with the default policy, the benchmark
# with both
BENIGN_RUNS = [(c.key, "default") for c in CASES] + [
    (c.key, "recommended") for c in CASES if c.instance_count <= 16
]


def _params(runs):
    return [pytest.param(key, policy, id=f"{key}-{policy}") for key, policy in runs]


@pytest.mark.claim(
    "benign phases that must *not* trigger: `checkpoint_save_long`, `eval_phase`, and silent phases with every GPU idle: `compile` (a first-step compile, 30 min by default), `nccl_init` (NCCL initialisation on many hosts, 8 min) and `dataloader_pause` (a data-loader pause at an epoch boundary, 4 min); `duration_min` sets any phase's length;"
)
@pytest.mark.claim(
    "and on the named look-alikes (a 20-minute save at every checkpoint, 45- and 60-minute compiles, an 8-minute silent data pause, NCCL init on 256 hosts)"
)
@pytest.mark.parametrize(("key", "policy"), _params(BENIGN_RUNS))
def test_benign_phase_is_not_stopped_and_the_run_completes(template, key, policy):
    result = run_case(BY_KEY[key], POLICIES[policy], template, seed=31)
    run = result.runs["benign"]
    assert hang_stops(result) == 0, run["decisions"]
    assert run["status"] == "SUCCEEDED" and len(run["attempts"]) == 1 and run["restarts"] == 0


@pytest.mark.parametrize("key", [c.key for c in CASES])
def test_a_real_hang_in_the_same_setup_is_still_caught(template, key):
    case = BY_KEY[key]
    result = run_case(case, None, template, seed=31, hang=True)
    run = result.runs["benign"]
    assert hang_stops(result) == 1, f"{case.hang_label}: {run['decisions']}"
    assert run["restarts_by_class"] == {"HANG": 1} and run["status"] == "SUCCEEDED"


def test_the_late_phases_meet_a_learned_window(template):
    # the one-off phases start after the window was learned, not under the policy's 30 minutes:
    # otherwise they would prove little
    result = run_case(BY_KEY["eval"], None, template, seed=31)
    assert min(log_windows(result, None)) <= 4  # learned from a job that logs every minute
    assert silent_phases_past_the_window(result, 4) >= 1  # the 30-minute silent eval was judged


def _stopped_after_min(result) -> float:
    first = result.runs["benign"]["attempts"][0]
    assert first["end_class"] == "SUPERVISOR_STOP"
    started, ended = (
        datetime.fromisoformat(first[k].replace("Z", "+00:00")) for k in ("training_started_at", "ended_at")
    )
    return (ended - started).total_seconds() / 60


@pytest.mark.claim(
    "An alarm still in ALARM when the allowance ends is acted on then (the sweep looks at that moment, and at the grace period's end: an alarm already in ALARM sends no new state change)."
)
def test_a_start_up_that_never_ends_is_stopped_after_the_allowance(template):
    # the contrast of the 60-minute compile: silent and idle for good (no CPU, nothing written) is a
    # hang once the 45-minute start-up allowance is over (gpu_idle and log silence wait for it)
    result = run_case(BY_KEY["compile"], None, template, seed=31, hang=True)
    assert 45 <= _stopped_after_min(result) <= 55


@pytest.mark.claim(
    "a quiet stretch (log silence, a stalled progress metric, the whole job idle) while the hosts' metrics show work (CPU busy, disk space growing) or checkpoint objects land is a benign phase for at most this long"
)
@pytest.mark.claim(
    "waited for up to `benign_phase_max_minutes` (90) of quiet, so a compile that never ends or a save that keeps writing is still stopped"
)
def test_a_compile_that_never_ends_is_stopped_at_the_benign_ceiling(template):
    # the hosts work (CPU busy, GPUs idle) for ever: a benign phase for at most
    # benign_phase_max_minutes (90) of quiet, then a hang
    result = run_case(BY_KEY["compile_45"], None, template, seed=31, hang=True)
    assert 90 <= _stopped_after_min(result) <= 100
    hang = next(d for d in result.runs["benign"]["decisions"] if "hang confirmed" in d)
    assert "log_silence" in hang or "gpu_idle" in hang


@pytest.mark.claim("a job that logs every 10 minutes keeps a 30-minute one after 100")
def test_a_job_logging_every_ten_minutes_keeps_a_long_learned_window(template):
    # with a 60-minute ceiling the learned window shows: 3 x (9 quiet minutes + 1) or longer when a
    # checkpoint save falls inside a gap -- never the 5-6 minutes of a job logging every minute
    policy = {"log_silence_minutes": 60}
    result = run_case(BY_KEY["log_every_10"], policy, template, seed=31)
    windows = log_windows(result, policy)
    assert len(windows) >= 2 and min(windows[1:]) >= 30, windows
    assert hang_stops(result) == 0 and result.runs["benign"]["status"] == "SUCCEEDED"


# --- randomized healthy jobs ---------------------------------------------------------------------


@pytest.mark.claim(
    "**0 false hang stops** on 24 randomized healthy jobs (saves 2-25 min at every checkpoint, compiles 5-70 min, silent data-loader pauses 1-12 min, evals 5-30 min, logging every 10 s to 10 min) under both policies"
)
def test_the_draws_cover_the_stated_distributions():
    draws = [draw(seed) for seed in range(1, 61)]
    for lo, hi, values in (
        (*SAVE_MIN, [d.save_min for d in draws]),
        (*COMPILE_MIN, [d.compile_min for d in draws]),
        (*DATA_PAUSE_MIN, [m for d in draws for _, m in d.pauses]),
        (*EVAL_MIN, [m for d in draws for _, m, _ in d.evals]),
        (*LOG_EVERY_S, [d.log_every_s for d in draws]),
    ):
        assert lo <= min(values) < lo + 0.25 * (hi - lo) and hi - 0.25 * (hi - lo) < max(values) <= hi
    assert {d.hosts for d in draws} == {1, 2, 4, 8}
    assert draw(7) == draw(7)  # deterministic per seed


@pytest.mark.claim(
    "**0 false hang stops** on 24 randomized healthy jobs (saves 2-25 min at every checkpoint, compiles 5-70 min, silent data-loader pauses 1-12 min, evals 5-30 min, logging every 10 s to 10 min) under both policies"
)
@pytest.mark.parametrize(
    ("seed", "policy"),
    [(s, "default") for s in range(1, 7)] + [(s, "recommended") for s in range(7, 10)],
    ids=[f"the job drawn from seed {s}, default policy" for s in range(1, 7)]
    + [f"the job drawn from seed {s}, recommended policy" for s in range(7, 10)],
)
def test_no_healthy_job_drawn_from_the_distributions_is_stopped(template, seed, policy):
    result = run_draw(draw(seed), POLICIES[policy], template)
    run = result.runs["benign"]
    assert hang_stops(result) == 0, (draw(seed).line(), run["decisions"])
    assert run["status"] == "SUCCEEDED" and len(run["attempts"]) == 1


@pytest.mark.claim(
    "In 24 randomized healthy jobs with a hang at a random time: a spin 6.4 min (7.4 at most) where the job logs at least every 90 s, 8.7 (3.4-30.0) where it logs less often (its window is longer); a dead host 4.5-5.1 (5.8 at most)"
)
@pytest.mark.parametrize(
    ("seed", "kind"),
    [(2, "hang_spin"), (3, "stuck_dataloader"), (5, "dead_host")],
    ids=[
        "a spin in the job from seed 2",
        "a stuck data loader in the job from seed 3",
        "a dead host in the job from seed 5",
    ],
)
def test_a_hang_in_a_drawn_healthy_job_is_still_caught(template, seed, kind):
    d = draw(seed)
    assert d.log_every_s < 90  # a job logging at least every minute or so: its window is the floor
    result = run_draw(d, None, template, hang=draw_hang(d, kind))
    run = result.runs["benign"]
    assert hang_stops(result) == 1 and run["restarts_by_class"] == {"HANG": 1}, run["decisions"]
    hang = next(f for f in result.faults if f["kind"] == kind)
    assert hang["to_action_s"] / 60 <= 8, (d.line(), hang)
