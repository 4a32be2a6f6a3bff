"""Stragglers (domain/hosts/stragglers.py): scoring each host against its peers and its own baseline,
the confirmation window, unknown hosts, the break-even arithmetic, and the escalation (alert;
with straggler_action "restart" and a loss above the cost, a stop and a cold resume with the
infra check)."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable

import pytest

from sagewarden.adapters.run_codec import attempt_from_dict, attempt_to_dict
from sagewarden.domain.due import next_due_ms
from sagewarden.domain.hosts.stragglers import (
    READ_EVERY_MS,
    baseline,
    break_even,
    parse,
    read_since_ms,
    score,
)
from sagewarden.domain.vocabulary.actions import Notify, StopJob
from sagewarden.domain.vocabulary.events import LaunchAccepted, Observations, Submitted, Tick
from sagewarden.domain.vocabulary.models import RunStatus
from sagewarden.domain.vocabulary.policy import PolicyError, RunPolicy
from tests.builders import MIN, REQUEST, ckpt, make_run, observed, step

HOSTS = [f"algo-{n}" for n in range(1, 5)]
STEP_MS = 6000.0  # 10 steps per minute
COMPUTE_MS = 5100.0


def job_lines(
    minutes: int, factor: Callable[[int, int], float], *, count: int = 4, total: int | None = None
) -> list[tuple[int, str]]:
    """One contract line per host per minute of Training: (ms since Training started, line). The
    wall step time is the slowest host's; a host's compute is its own share times its factor."""
    out = []
    step_no = 0
    for m in range(1, minutes + 1):
        factors = {h: factor(h, m) for h in range(1, count + 1)}
        wall = STEP_MS * max(factors.values())
        step_no += round(MIN / wall)
        tail = f" total={total}" if total is not None else ""
        for h in range(1, count + 1):
            jitter = 1 + 0.004 * ((h * 7 + m * 3) % 5 - 2)  # +/- 0.8 %, deterministic
            compute = COMPUTE_MS * factors[h] * jitter
            out.append(
                (
                    m * MIN,
                    f"[algo-{h}] [sagewarden] host={h} step={step_no} step_ms={wall:.0f} compute_ms={compute:.0f}{tail}",
                )
            )
    return out


def slow_from(host: int, start_min: int, fraction: float, end_min: int | None = None):
    def factor(h: int, m: int) -> float:
        on = h == host and m >= start_min and (end_min is None or m < end_min)
        return 1.0 + fraction if on else 1.0

    return factor


def samples_of(lines, upto_min: int, window_min: int = 8):
    return parse(text for t, text in lines if (upto_min - window_min) * MIN < t <= upto_min * MIN)


def base_of(lines):
    b = baseline(parse(text for t, text in lines if t <= 12 * MIN), HOSTS)
    assert b is not None
    return b


def verdict(lines, at_min: int, threshold: float = 0.15) -> dict[str, str]:
    scores = score(samples_of(lines, at_min), base_of(lines), HOSTS, threshold, 5 * MIN)
    return {s.host: s.status for s in scores}


# --------------------------------------------------------------------------------------------
# scoring (pure)


@pytest.mark.claim(
    "`straggler_threshold` / `straggler_window_minutes` | 0.15 / 6 | 0.05 ≤ x ≤ 1 / 1 ≤ x ≤ 1,440"
)
@pytest.mark.parametrize("fraction", [0.15, 0.30], ids=["15 % slower", "30 % slower"])
def test_a_lasting_slowdown_of_15_or_30_percent_is_flagged_once_it_lasted_the_window(fraction):
    lines = job_lines(60, slow_from(2, 30, fraction))
    assert verdict(lines, 29)["algo-2"] == "ok"
    assert verdict(lines, 32)["algo-2"] == "shifted"  # not yet for 5 minutes
    assert verdict(lines, 37) == {"algo-1": "ok", "algo-2": "straggler", "algo-3": "ok", "algo-4": "ok"}
    (s,) = [
        s for s in score(samples_of(lines, 37), base_of(lines), HOSTS, 0.15, 5 * MIN) if s.host == "algo-2"
    ]
    assert s.shift == pytest.approx(fraction, abs=0.02)
    assert s.vs_history == pytest.approx(fraction, abs=0.02)


@pytest.mark.claim("10 %, a 3-minute slowdown, checkpoint shard writes and uneven shards are never flagged")
def test_ten_percent_is_not_flagged_at_the_default_threshold_but_is_at_a_lower_one():
    lines = job_lines(60, slow_from(3, 20, 0.10))
    for at in range(25, 61, 2):
        assert verdict(lines, at)["algo-3"] != "straggler"
    assert verdict(lines, 40, threshold=0.08)["algo-3"] == "straggler"


@pytest.mark.claim(
    "A host briefly slow (its own checkpoint shard write) is not flagged, and neither is the whole job slowing down (no host's ratio moves)."
)
@pytest.mark.claim("A real straggler's own jitter does not break its stretch; a return to normal does.")
def test_a_transient_slowdown_shorter_than_the_window_is_not_flagged():
    # one host slow for 3 minutes (e.g. its own checkpoint shard write), 30 % slower
    lines = job_lines(60, slow_from(1, 30, 0.30, end_min=33))
    assert all(verdict(lines, at)["algo-1"] != "straggler" for at in range(10, 61))


@pytest.mark.claim("so a host constantly slower from the start (uneven data shards) is not a change")
def test_a_constant_offset_from_the_start_is_in_the_baseline_and_not_flagged():
    lines = job_lines(60, lambda h, m: 1.2 if h == 4 else 1.0)  # uneven shards: 20 % from the start
    assert all(v != "straggler" for at in range(10, 61) for v in verdict(lines, at).values())


@pytest.mark.claim("A host that printed no line is unknown, not healthy.")
def test_a_host_without_lines_is_unknown_not_healthy():
    lines = [
        (t, text) for t, text in job_lines(60, lambda h, m: 1.0) if not (t > 30 * MIN and "[algo-2]" in text)
    ]
    v = verdict(lines, 40)
    assert v["algo-2"] == "unknown" and v["algo-1"] == "ok"
    assert {s.status for s in score([], base_of(lines), HOSTS, 0.15, 5 * MIN)} == {"unknown"}
    assert baseline(parse(text for _, text in lines if "[algo-2]" not in text), HOSTS) is None


@pytest.mark.claim(
    "A host briefly slow (its own checkpoint shard write) is not flagged, and neither is the whole job slowing down (no host's ratio moves)."
)
def test_the_whole_job_slowing_down_flags_no_host():
    lines = job_lines(60, lambda h, m: 1.3 if m >= 20 else 1.0)
    assert all(v == "ok" for at in range(25, 61) for v in verdict(lines, at).values())


def test_break_even_is_slowdown_times_remaining_gpu_hours_against_the_restarts_gpu_hours():
    parts = {"detect_s": 600, "stop_s": 120, "cold_start_s": 1500, "since_checkpoint_s": 1380}
    be = break_even(0.15, 10 * 3600, 16, slow_for_s=8 * 3600, **parts)
    assert be.loss_gpu_h == pytest.approx(0.15 * 10 * 16)  # 24 GPU-h
    assert be.cost_gpu_h == pytest.approx((600 + 120 + 1500 + 1380) / 3600 * 16)  # 16 GPU-h
    assert be.paid_gpu_h == pytest.approx(0.15 * 8 * 16)  # 19.2 GPU-h lost already
    assert be.restart_pays
    near_end = break_even(0.15, 3600, 16, slow_for_s=8 * 3600, **parts)
    assert near_end.loss_gpu_h == pytest.approx(2.4) and not near_end.restart_pays
    unknown = break_even(0.3, None, 16, detect_s=0, stop_s=0, cold_start_s=0, since_checkpoint_s=0)
    assert unknown.loss_gpu_h is None and not unknown.restart_pays


def test_a_restart_waits_until_the_slowdown_has_cost_as_much_as_a_restart():
    # the ski-rental rule: a fresh straggler with days left does not pay a restart yet (it may pass,
    # as most fail-slow episodes do); once it has lost a restart's worth, it does
    parts = {"detect_s": 600, "stop_s": 120, "cold_start_s": 1500, "since_checkpoint_s": 1380}
    fresh = break_even(0.30, 48 * 3600, 16, slow_for_s=10 * 60, **parts)
    assert fresh.loss_gpu_h is not None and fresh.loss_gpu_h > fresh.cost_gpu_h
    assert fresh.paid_gpu_h < fresh.cost_gpu_h and not fresh.restart_pays
    cost_h = fresh.cost_gpu_h / 16 / 0.30  # the hours a 30 % slowdown takes to cost one restart
    assert not break_even(0.30, 48 * 3600, 16, slow_for_s=0.95 * cost_h * 3600, **parts).restart_pays
    assert break_even(0.30, 48 * 3600, 16, slow_for_s=1.05 * cost_h * 3600, **parts).restart_pays


@pytest.mark.claim(
    "`straggler_threshold` / `straggler_window_minutes` | 0.15 / 6 | 0.05 ≤ x ≤ 1 / 1 ≤ x ≤ 1,440"
)
def test_policy_checks_the_straggler_fields():
    with pytest.raises(PolicyError):
        RunPolicy.from_dict({"straggler_action": "reboot"}).validate()
    with pytest.raises(PolicyError):
        RunPolicy.from_dict({"straggler_threshold": 2.0}).validate()
    RunPolicy.from_dict({"straggler_action": "restart", "straggler_threshold": 0.2}).validate()


# --------------------------------------------------------------------------------------------
# the decision: reads, alert, escalation


def run_training(**policy):
    request = copy.deepcopy(REQUEST)
    request["ResourceConfig"].update(InstanceType="ml.p4d.24xlarge", InstanceCount=4)
    pol = RunPolicy.from_dict({"step_lines": True, **policy})
    d0 = step(make_run(pol, request=request), Submitted(), 0)
    run = step(d0.run, LaunchAccepted(1), 1).run
    t0 = 10 * MIN
    return step(run, observed(run, "InProgress", "Training", t0), t0).run, t0


def drive(run, t0, lines, minutes, checkpoint_every=None):
    """Tick every minute; hand over the lines of the window the domain asks to read (and, every
    ``checkpoint_every`` minutes, a new checkpoint)."""
    out = []
    for m in range(1, minutes + 1):
        now = t0 + m * MIN
        since = read_since_ms(run, now)
        saved = ckpt(m, now) if checkpoint_every and m % checkpoint_every == 0 else None
        obs = Observations(checkpoint=saved)
        if since is not None:
            obs = Observations(
                step_lines=tuple(text for t, text in lines if since <= t0 + t <= now), checkpoint=saved
            )
        d = step(run, Tick(), now, obs)
        out.append((m, d))
        run = d.run
        if run.status != RunStatus.TRAINING:
            break
    return run, out


def alerts(out):
    return [
        (m, a) for m, d in out for a in d.actions if isinstance(a, Notify) and a.event == "attempt.straggler"
    ]


def stops(out):
    return [(m, a) for m, d in out for a in d.actions if isinstance(a, StopJob)]


@pytest.mark.claim(
    "With `alert`, the default, the job keeps training and the alert says whether a restart would pay."
)
def test_a_lasting_straggler_is_alerted_within_ten_minutes_naming_host_slowdown_and_break_even():
    run, t0 = run_training()
    assert read_since_ms(run, t0 + READ_EVERY_MS) == t0
    assert next_due_ms(run, t0) <= t0 + READ_EVERY_MS
    lines = job_lines(90, slow_from(3, 30, 0.15), total=20_000)
    run, out = drive(run, t0, lines, 90)
    ((m, alert),) = alerts(out)
    assert 30 < m <= 40
    shown = re.search(r"algo-3 of attempt 1 is (\d+)% slower", alert.subject)
    assert shown is not None and abs(int(shown[1]) - 15) <= 1, alert.subject  # the lines jitter 0.8 %
    assert "Projected loss over the remaining run" in alert.body and "GPU-h" in alert.body
    assert "A restart's cost" in alert.body and "straggler_action 'alert'" in alert.body
    assert not stops(out) and run.status == RunStatus.TRAINING
    assert run.current.straggler_host == "algo-3"
    stored = attempt_from_dict(json.loads(json.dumps(attempt_to_dict(run.current))))
    assert stored == run.current and len(stored.host_baselines) == 4  # what the store keeps


@pytest.mark.claim(
    "or `restart`: stop and resume cold (with the infra check) once the slowdown has cost as much as a restart and the rest of the run would lose more"
)
def test_with_restart_a_lasting_straggler_is_stopped_once_it_has_cost_a_restart_and_resumes_cold_with_the_infra_check():
    run, t0 = run_training(straggler_action="restart")
    lines = job_lines(400, slow_from(2, 30, 0.30), total=200_000)  # days left: a restart pays
    run, out = drive(run, t0, lines, 400, checkpoint_every=30)
    ((m, stop),) = stops(out)
    ((at, alert),) = alerts(out)
    assert 30 < at <= 40 and "A restart does not pay yet" in alert.body and "Lost to it so far" in alert.body
    assert stop.intent == "straggler" and m > 60  # not at the flag: once it had cost a restart
    why = next(n for _, d in out for n in d.notes if "it has cost" in n)
    paid, rest, cost = (
        float(x)
        for x in re.findall(r"([\d.]+) GPU-h", why)[:1]
        + re.findall(r"lose ([\d.]+)", why)
        + re.findall(r"restart's ([\d.]+) GPU-h", why)
    )
    assert paid >= cost and rest > cost
    assert run.current.suspect_hosts == ("algo-2",)
    t = t0 + (m + 2) * MIN
    d = step(run, observed(run, "Stopped", "Stopped", t), t)
    assert d.run.infra_check_pending and d.run.status != RunStatus.FAILED


def test_with_restart_a_straggler_that_passes_before_it_cost_a_restart_is_never_stopped():
    run, t0 = run_training(straggler_action="restart")
    lines = job_lines(200, slow_from(2, 30, 0.30, end_min=75), total=200_000)  # 45 min, then normal
    run, out = drive(run, t0, lines, 200, checkpoint_every=30)
    ((at, _),) = alerts(out)
    assert 30 < at <= 40 and not stops(out) and run.status == RunStatus.TRAINING
    assert run.current.straggler_host == "algo-2" and run.current.straggler_since_ms is None
    assert any("back to its peers' pace" in n for _, d in out for n in d.notes)


def test_with_restart_no_total_means_an_unknown_loss_and_no_stop():
    run, t0 = run_training(straggler_action="restart")
    run, out = drive(run, t0, job_lines(90, slow_from(2, 30, 0.30)), 90)
    ((_, alert),) = alerts(out)
    assert "unknown" in alert.body and not stops(out)


@pytest.mark.claim(
    "A read that fails is unknown: nothing is decided, a flagged host stays flagged, and the next read tries again."
)
def test_unreadable_step_lines_decide_nothing_and_are_read_again():
    run, t0 = run_training()
    now = t0 + 3 * MIN
    d = step(run, Tick(), now, Observations(step_error="ThrottlingException: Rate exceeded"))
    assert any("unknown" in n for n in d.notes) and not d.run.current.host_baselines
    assert read_since_ms(d.run, now + READ_EVERY_MS) == t0


@pytest.mark.claim(
    "a host `s` slower than its own baseline for a straggler window, flagged or not once it is 7.5 % slower, holds back `s / (1 + s)`"
)
def test_goodput_measures_a_ten_percent_host_it_does_not_alert_on_and_ends_the_episode_when_it_recovers():
    run, t0 = run_training()
    lines = job_lines(120, slow_from(4, 30, 0.10, end_min=80), total=20_000)
    run, out = drive(run, t0, lines, 120)
    assert not alerts(out) and run.current.straggler_host is None  # below the 15 % alert threshold
    cur = run.current
    assert cur.slow_episode is None  # back to its pace by the end
    # slow for 50 min at 10 %: 50 x 0.1 / 1.1 = 4.5 min held back, dated from when it began to show
    assert 3.5 * MIN <= cur.slow_lost_ms <= 5.5 * MIN, cur.slow_lost_ms
    stored = attempt_from_dict(json.loads(json.dumps(attempt_to_dict(cur))))
    assert stored == cur


@pytest.mark.claim(
    "a host `s` slower than its own baseline for a straggler window, flagged or not once it is 7.5 % slower, holds back `s / (1 + s)`"
)
def test_goodput_measures_no_slowdown_on_a_healthy_job_or_a_constant_offset():
    run, t0 = run_training()
    lines = job_lines(120, slow_from(2, 0, 0.05), total=20_000)  # 5 % slower from the first step
    run, _ = drive(run, t0, lines, 120)
    assert run.current.slow_episode is None and run.current.slow_lost_ms == 0
