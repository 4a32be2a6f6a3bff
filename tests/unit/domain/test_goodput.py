"""Goodput (ETTR) bucket arithmetic: domain/goodput.py."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sagewarden.domain.goodput import (
    DOWNLOADING,
    ESTIMATE,
    HANG,
    KEYS,
    MEASURED,
    NOT_MEASURED,
    OTHER,
    PRODUCTIVE,
    PROVISIONING,
    REDONE,
    SAVES,
    STOPPING,
    STRAGGLER,
    UPLOADING,
    WAITING,
    _fold,
    run_goodput,
)
from sagewarden.domain.vocabulary.events import JobObserved, LaunchAccepted, Submitted
from sagewarden.domain.vocabulary.layouts import Checkpoint
from sagewarden.domain.vocabulary.models import Attempt, LaunchState, Run, RunStatus
from tests.builders import MIN, make_run, step

T0 = 1_767_571_200_000  # a fixed epoch ms


def ck(step_: int, at: int, write_s: float = 120.0, prev: int | None = None) -> Checkpoint:
    return Checkpoint(f"s3://bucket/ckpt/checkpoint-{step_}/", step_, "hf", at, write_s, prev)


def att(number: int, **kw: object) -> Attempt:
    base: dict[str, object] = {
        "number": number,
        "job_name": f"sw-llama-a{number:02d}",
        "instance_type": "ml.p4d.24xlarge",
        "instance_count": 2,
        "requested_at_ms": T0,
        "launch": LaunchState.SUBMITTED,
    }
    base.update(kw)
    return Attempt(**base)  # type: ignore[arg-type]


def one_attempt_run(a: Attempt, **run_kw: object) -> Run:
    return make_run(created_ms=T0, attempts=(a,), attempt_count=a.number, **run_kw)


@pytest.mark.claim("buckets that add up to the wall time exactly")
@pytest.mark.claim("start-up and idle warm pool are 0 and say so")
def test_goodput_single_attempt_buckets_from_timestamps_and_saves() -> None:
    # 6 min Starting, 2 min Downloading, 64 min Training with two 2-minute saves, 1 min Uploading
    a = att(
        1,
        created_ms=T0,
        downloading_ms=T0 + 6 * MIN,
        training_started_ms=T0 + 8 * MIN,
        uploading_ms=T0 + 72 * MIN,
        ended_ms=T0 + 73 * MIN,
        checkpoint_at_end=ck(600, T0 + 72 * MIN, prev=300),
    )
    run = one_attempt_run(
        a,
        status=RunStatus.SUCCEEDED,
        updated_ms=T0 + 73 * MIN,
        checkpoint_history=((300, T0 + 40 * MIN, 120.0, -1), (600, T0 + 72 * MIN, 120.0, 300)),
    )
    g = run_goodput(run, T0 + 99 * MIN)
    assert g.wall_ms == 73 * MIN
    assert g.ms(PROVISIONING) == 6 * MIN
    assert g.ms(DOWNLOADING) == 2 * MIN
    assert g.ms(SAVES) == 4 * MIN
    assert g.ms(UPLOADING) == 1 * MIN
    assert g.ms(PRODUCTIVE) == 60 * MIN
    assert sum(b.ms for b in g.buckets) == g.wall_ms
    assert g.ratio is not None and abs(g.ratio - 60 / 73) < 1e-9
    how = {b.key: b.how for b in g.buckets}
    assert how[PROVISIONING] == MEASURED and how[SAVES] == ESTIMATE and how[PRODUCTIVE] == ESTIMATE
    assert how["startup"] == NOT_MEASURED and how["straggler"] == NOT_MEASURED
    assert g.line().startswith("ETTR 82.2 %: 8.2 % provisioning, ~5.5 % checkpoint saves")


def test_goodput_hang_detection_from_onset_to_stop_and_stopping() -> None:
    a = att(
        1,
        created_ms=T0,
        training_started_ms=T0 + 10 * MIN,
        hang_onset_ms=T0 + 50 * MIN,
        stop_intent="hang",
        stop_requested_ms=T0 + 70 * MIN,
        ended_ms=T0 + 72 * MIN,
    )
    g = run_goodput(one_attempt_run(a, status=RunStatus.STOPPING), T0 + 72 * MIN)
    assert g.ms(HANG) == 20 * MIN
    assert g.ms(STOPPING) == 2 * MIN
    assert g.ms(PRODUCTIVE) == 40 * MIN
    assert g.ms(WAITING) == 0 and g.ms(OTHER) == 0  # live: after the end, the run waits or decides
    assert (
        g.live
        and g.line() == "ETTR 55.6 % so far: ~27.8 % hang detection, 13.9 % provisioning, 2.8 % stopping"
    )


def test_goodput_waiting_for_quota_while_launch_is_rejected() -> None:
    a = att(1, launch=LaunchState.WAITING, requested_at_ms=T0 + 5 * MIN)
    g = run_goodput(one_attempt_run(a, status=RunStatus.RETRY_WAIT), T0 + 30 * MIN)
    assert g.ms(WAITING) == 30 * MIN
    assert g.ratio == 0.0


def test_goodput_capacity_pending_attempt_counts_as_waiting() -> None:
    a = att(1, created_ms=T0, ended_ms=T0 + 40 * MIN, end_class="CAPACITY")
    g = run_goodput(one_attempt_run(a, status=RunStatus.RETRY_WAIT), T0 + 45 * MIN)
    assert g.ms(WAITING) == 45 * MIN


def test_goodput_restart_folds_the_attempt_and_counts_the_work_redone() -> None:
    """Through decide: attempt 1 trains past its last checkpoint and dies; attempt 2 redoes it."""
    run = make_run(created_ms=T0)
    run = step(run, Submitted(), T0).run
    a1 = run.current
    assert a1 is not None
    run = step(run, LaunchAccepted(1), T0 + 1000).run
    for status, secondary, at in (
        ("InProgress", "Starting", T0 + 2000),
        ("InProgress", "Downloading", T0 + 6 * MIN),
        ("InProgress", "Training", T0 + 8 * MIN),
    ):
        run = step(run, JobObserved(a1.job_name, 1, status, secondary, at, created_ms=T0 + 1000), at).run
    written = T0 + 40 * MIN
    run = dataclasses.replace(run, checkpoint_history=((300, written, 120.0, -1),))
    from sagewarden.domain.vocabulary.events import Observations

    obs = Observations(checkpoint=ck(300, written))
    end = T0 + 50 * MIN  # 10 min of training past the checkpoint are lost
    ended = JobObserved(
        a1.job_name, 1, "Failed", "Failed", end, failure_reason="InternalServerError", ended_ms=end
    )
    d = step(run, ended, end + 1000, obs)
    run = d.run
    assert run.current is not None and run.current.number == 2, d.notes
    assert run.goodput_through == 1 and run.goodput_carry_ms == 10 * MIN
    assert run.goodput_ms[DOWNLOADING] == 2 * MIN and run.goodput_ms[SAVES] == 2 * MIN
    a2 = run.current
    for status, secondary, at in (
        ("InProgress", "Training", end + 10 * MIN),
        ("Completed", "Completed", end + 60 * MIN),
    ):
        run = step(
            run,
            JobObserved(
                a2.job_name,
                2,
                status,
                secondary,
                at,
                created_ms=end + 2000,
                ended_ms=at if status == "Completed" else None,
            ),
            at,
        ).run
    g = run_goodput(run, end + 99 * MIN)
    assert g.ms(REDONE) == 10 * MIN
    assert sum(b.ms for b in g.buckets) == g.wall_ms
    assert all(b.ms >= 0 for b in g.buckets)


def test_goodput_run_end_alert_carries_the_ettr_line() -> None:
    run = make_run(created_ms=T0)
    run = step(run, Submitted(), T0).run
    a1 = run.current
    assert a1 is not None
    run = step(run, LaunchAccepted(1), T0 + 1000).run
    run = step(
        run, JobObserved(a1.job_name, 1, "InProgress", "Training", T0 + 8 * MIN, created_ms=T0), T0 + 8 * MIN
    ).run
    end = T0 + 60 * MIN
    d = step(run, JobObserved(a1.job_name, 1, "Completed", "Completed", end, ended_ms=end), end)
    assert d.run.status == RunStatus.SUCCEEDED
    (alert,) = [a for a in d.actions if getattr(a, "event", "") == "run.succeeded"]
    assert "ETTR 86.7 %" in alert.body  # type: ignore[attr-defined]
    assert d.run.goodput_until_ms == end
    assert run_goodput(d.run, end + 10 * HOUR_MS).wall_ms == 60 * MIN  # closed: no longer grows


HOUR_MS = 3_600_000


def test_goodput_legacy_run_without_ledger_shows_unsplit_time_as_other() -> None:
    a = att(3, requested_at_ms=T0 + 50 * MIN, created_ms=T0 + 50 * MIN, training_started_ms=T0 + 55 * MIN)
    g = run_goodput(one_attempt_run(a, status=RunStatus.TRAINING), T0 + 60 * MIN)
    assert g.ms(OTHER) == 50 * MIN
    assert sum(b.ms for b in g.buckets) == g.wall_ms


# --- property: buckets add up to the wall time and are never negative ---------------------------

times = st.integers(min_value=0, max_value=48 * 60)  # minutes
opt_times = st.one_of(st.none(), times)


@st.composite
def attempt_histories(draw: st.DrawFn) -> tuple[Run, int]:
    n = draw(st.integers(min_value=1, max_value=4))
    history = tuple(
        sorted(
            {
                (
                    draw(st.integers(0, 5000)),
                    T0 + draw(times) * MIN,
                    draw(st.sampled_from([-1.0, 30.0, 120.0])),
                    -1,
                )
                for _ in range(draw(st.integers(0, 5)))
            }
        )
    )
    attempts = []
    base = 0  # time moves forwards: each attempt is requested after the one before it
    for i in range(1, n + 1):
        marks = sorted(base + draw(times) for _ in range(6))
        base = marks[-1]
        attempts.append(
            att(
                i,
                requested_at_ms=T0 + marks[0] * MIN,
                launch=draw(st.sampled_from(list(LaunchState))),
                created_ms=draw(st.sampled_from([None, T0 + marks[1] * MIN])),
                downloading_ms=draw(st.sampled_from([None, T0 + marks[2] * MIN])),
                training_started_ms=draw(st.sampled_from([None, T0 + marks[3] * MIN])),
                hang_onset_ms=draw(st.sampled_from([None, T0 + (base - draw(times)) * MIN])),
                stop_intent=draw(st.sampled_from([None, "hang", "cancel"])),
                stop_requested_ms=draw(st.sampled_from([None, T0 + marks[4] * MIN])),
                uploading_ms=draw(st.sampled_from([None, T0 + marks[4] * MIN])),
                ended_ms=draw(st.sampled_from([None, T0 + marks[5] * MIN])),
                end_class=draw(st.sampled_from([None, "CAPACITY", "INFRASTRUCTURE"])),
                resume_from=draw(st.sampled_from([None, ck(100, T0 + (base - draw(times)) * MIN)])),
                checkpoint_at_end=draw(st.sampled_from([None, ck(400, T0 + (base - draw(times)) * MIN)])),
            )
        )
    status = draw(st.sampled_from(list(RunStatus)))
    run = make_run(
        created_ms=T0,
        status=status,
        updated_ms=T0 + draw(times) * MIN,
        checkpoint_history=history,
        goodput_carry_ms=draw(st.integers(0, 10 * HOUR_MS)),
    )
    # fold the attempts in order, as decisions would: each new attempt folds the one before
    from sagewarden.domain.goodput import after_decision
    from sagewarden.domain.vocabulary.events import Tick

    before = dataclasses.replace(run, status=RunStatus.TRAINING, attempts=(attempts[0],))
    for nxt in attempts[1:]:
        after = dataclasses.replace(before, attempts=(*before.attempts, nxt))
        before, _ = after_decision(before, after, Tick(), (), nxt.requested_at_ms)
        before = dataclasses.replace(before, attempts=(nxt,))
    final = dataclasses.replace(before, status=status)
    if status.terminal:
        final, _ = after_decision(before, final, Tick(), (), T0 + (base + draw(times)) * MIN)
    return final, T0 + (base + draw(times)) * MIN


@pytest.mark.claim("buckets that add up to the wall time exactly")
@settings(max_examples=300, deadline=None)
@given(attempt_histories())
def test_goodput_buckets_add_up_to_wall_time_and_are_never_negative(case: tuple[Run, int]) -> None:
    run, now = case
    g = run_goodput(run, now)
    assert [b.key for b in g.buckets] == list(KEYS)
    assert sum(b.ms for b in g.buckets) == g.wall_ms
    assert all(b.ms >= 0 for b in g.buckets), g.buckets
    assert g.ratio is None or 0.0 <= g.ratio <= 1.0


def test_goodput_counts_a_long_save_it_measured_at_its_own_length() -> None:
    # 122 min of Training, a save every 300 steps; the third one took 35 min and the supervisor
    # measured it when it saw it (at the median it would count as 2 min)
    a = att(
        1,
        created_ms=T0,
        training_started_ms=T0 + 8 * MIN,
        uploading_ms=T0 + 130 * MIN,
        ended_ms=T0 + 131 * MIN,
        checkpoint_at_end=ck(1200, T0 + 130 * MIN, prev=900),
        saves_seen=4,
        saves_seen_ms=(2 + 2 + 35 + 2) * MIN,
    )
    history = (
        (300, T0 + 40 * MIN, 120.0, -1),
        (600, T0 + 72 * MIN, 120.0, 300),
        (900, T0 + 104 * MIN, 2100.0, 600),
        (1200, T0 + 130 * MIN, 120.0, 900),
    )
    kw = {"status": RunStatus.SUCCEEDED, "updated_ms": T0 + 131 * MIN, "checkpoint_history": history}
    g = run_goodput(one_attempt_run(a, **kw), T0 + 131 * MIN)
    assert g.ms(SAVES) == 41 * MIN
    assert g.ms(PRODUCTIVE) == (122 - 41) * MIN
    # without the measured saves, the same checkpoints count at the median write time (2 min)
    plain = run_goodput(
        one_attempt_run(dataclasses.replace(a, saves_seen=0, saves_seen_ms=0), **kw), T0 + 131 * MIN
    )
    assert plain.ms(SAVES) == 4 * 2 * MIN


@pytest.mark.claim(
    "a host `s` slower than its own baseline for a straggler window, flagged or not once it is 7.5 % slower, holds back `s / (1 + s)`"
)
def test_goodput_straggler_bucket_is_the_work_a_slow_host_held_back() -> None:
    # 60 min of Training; a host 25 % slower for the last 40 of them: 40 x 0.25 / 1.25 = 8 min lost
    a = att(
        1,
        created_ms=T0,
        training_started_ms=T0 + 10 * MIN,
        ended_ms=T0 + 70 * MIN,
        uploading_ms=T0 + 70 * MIN,
        slow_episode=("algo-2", 0.25, T0 + 30 * MIN),
        slow_lost_ms=3 * MIN,  # an earlier episode, ended
    )
    g = run_goodput(one_attempt_run(a, status=RunStatus.SUCCEEDED, updated_ms=T0 + 70 * MIN), T0 + 70 * MIN)
    assert g.ms(STRAGGLER) == (8 + 3) * MIN
    assert g.ms(PRODUCTIVE) == (60 - 11) * MIN
    assert {b.key: b.how for b in g.buckets}[STRAGGLER] == ESTIMATE


def test_goodput_work_a_short_replacement_did_not_redo_is_carried_to_the_next_attempt() -> None:
    # attempt 1 trained 30 min past the checkpoint attempt 2 resumed from; attempt 2 was stopped 4 min
    # into Training (a bad host) after a checkpoint on its stop: attempt 3 still redoes 26 min
    a2 = att(
        2,
        requested_at_ms=T0,
        created_ms=T0,
        training_started_ms=T0 + 10 * MIN,
        stop_intent="bad_host",
        stop_requested_ms=T0 + 14 * MIN,
        ended_ms=T0 + 16 * MIN,
    )
    a3 = att(3, requested_at_ms=T0 + 17 * MIN, resume_from=ck(160, T0 + 15 * MIN))
    run = one_attempt_run(a2, goodput_through=1, goodput_until_ms=T0, goodput_carry_ms=30 * MIN)
    folded = _fold(run, T0 + 17 * MIN, a3, WAITING)
    assert folded.goodput_ms[REDONE] == 4 * MIN
    assert folded.goodput_carry_ms == 26 * MIN
