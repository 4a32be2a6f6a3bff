"""The extended benign set on the drill: no phase a healthy job goes through may stop it as hung,
with the default or the recommended policy, even once the windows have been learned from the
attempt's cadence; and a real hang in each same setup is still caught (so these tests can fail).

The cases (and the benchmark that reports them) are in `benchmarks/benign.py`."""

from __future__ import annotations

from datetime import datetime

import pytest

from benchmarks.benign import BY_KEY, CASES, hang_stops, log_windows, run_case
from benchmarks.supervised import RECOMMENDED_POLICY

POLICIES = {"default": None, "recommended": RECOMMENDED_POLICY}
# A one-off 12-minute save the job does not declare with the phase marker, after the supervisor
# learned a ~6-minute log-silence window, is silent with every GPU low like a stuck data loader; it
# is told apart by its checkpoint objects still landing in S3 (hangs.SAVE_ACTIVE_MS).


# the 256-host case costs ~15 s a run: the tests drive it with the default policy, the benchmark
# with both
BENIGN_RUNS = [(c.key, "default") for c in CASES] + [
    (c.key, "recommended") for c in CASES if c.instance_count <= 16
]


def _params(runs):
    return [pytest.param(key, policy, id=f"{key}-{policy}") for key, policy in runs]


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
    assert min(log_windows(result, None)) <= 6  # learned from a job that logs every minute


def test_a_start_up_that_never_ends_is_stopped_after_the_allowance(template):
    # the contrast of the 30-minute compile: silent and idle for good is a hang once the 45-minute
    # start-up allowance is over (gpu_idle and log silence wait for it, nothing else held it back)
    result = run_case(BY_KEY["compile"], None, template, seed=31, hang=True)
    first = result.runs["benign"]["attempts"][0]
    assert first["end_class"] == "SUPERVISOR_STOP"
    started, ended = (
        datetime.fromisoformat(first[k].replace("Z", "+00:00")) for k in ("training_started_at", "ended_at")
    )
    stopped_after = (ended - started).total_seconds() / 60
    assert 45 <= stopped_after <= 55


def test_a_job_logging_every_ten_minutes_keeps_a_long_learned_window(template):
    # with a 60-minute ceiling the learned window shows: 3 x (9 quiet minutes + 1) or longer when a
    # checkpoint save falls inside a gap -- never the 5-6 minutes of a job logging every minute
    policy = {"log_silence_minutes": 60}
    result = run_case(BY_KEY["log_every_10"], policy, template, seed=31)
    windows = log_windows(result, policy)
    assert len(windows) >= 2 and min(windows[1:]) >= 30, windows
    assert hang_stops(result) == 0 and result.runs["benign"]["status"] == "SUCCEEDED"
