"""The scale benchmark on a small account: ten runs with faults, every call counted, every run
finished, nothing left behind."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.scale import QUOTA_TPS, BigJob, measure
from benchmarks.scale_report import render


@pytest.mark.claim(
    "10, 100 and 1,000 concurrent runs over a virtual day, every run SUCCEEDED, 0 invariant violations; 0, 0 and 49 failed reads"
)
def test_ten_runs_finish_and_every_call_is_counted(template: dict[str, Any]) -> None:
    r = measure(10, template, hours=8, steps=240)
    assert r.drill.invariant_violations == []  # one live job per run, every AWS call allowed by IAM
    assert dict(r.statuses) == {"SUCCEEDED": 10}
    assert r.live_jobs_at_end == 0 and r.alarms_left == 0  # no job burning, no alarm billed
    assert r.observation_failures == 0  # every read answered (e.g. DescribeAlarms paged at 100)
    # the sweep looks at a training run each reconcile interval, not every minute (alarms confirmed)
    assert r.sweeps.due < 10 * 8 * 60 / 4
    assert len(r.drill.faults) >= 10  # one or two per run
    rates = r.counter.rates(r.drill.end_ms)
    # each run was created at least once, its alarms put and deleted, the sweep read the alarms
    assert sum(n for (_, op), n in r.counter.counts.items() if op == "sagemaker.CreateTrainingJob") >= 10
    assert rates["cloudwatch.PutMetricAlarm"].peak_per_min >= 3
    assert rates["cloudwatch.DeleteAlarms"].peak_per_min >= 1
    assert rates["cloudwatch.DescribeAlarms"].mean_per_min > 0
    assert r.sweeps.due > 0 and r.sweeps.passes > 0
    assert set(r.counter.peak_by_run) and min(r.counter.peak_by_run.values()) >= 3  # log, idle, lone-idle
    assert r.counter.max_metrics_per_alarm <= 10
    assert 0 < r.cost.total / r.run_days < 0.1
    big = BigJob(250, 27, 27, 10, {"logs.GetLogEvents": 250}, 4.0, "SUCCEEDED")
    text = "\n".join(render([r], big, 1.0))
    assert (
        "| 10 runs |" in text
        and "PutMetricAlarm" in text
        and str(QUOTA_TPS["cloudwatch.DescribeAlarms"]) in text
    )


def test_a_measurement_drilled_in_a_worker_process_comes_back_whole(template: dict[str, Any]) -> None:
    import pickle

    from benchmarks.scale import measure_detached
    from benchmarks.scale_report import run

    r = pickle.loads(pickle.dumps(measure_detached(10, template)))  # what a process pool does
    assert dict(r.statuses) == {"SUCCEEDED": 10} and r.counter.rates(r.drill.end_ms)
    text = "\n".join(run(template, [], measured=[r]))
    assert "| 10 runs |" in text and "**sweep CPU time per due item**" in text


def test_the_backend_shortcuts_change_nothing_but_speed(template: dict[str, Any]) -> None:
    """The scale drill's shortcuts through moto (drill/account/backend_clients.py: alarm puts and reads,
    checkpoint objects, alerts) give the same day as the drill through moto's API: the same runs,
    faults, detection times and alerts."""
    from benchmarks.scale import scenario
    from drill.alarms.evaluator import AlarmEvaluator
    from drill.scenarios.runner import DrillRunner

    sc = scenario(6, hours=10, steps=480)
    days = []
    for fast in (True, False):
        r = DrillRunner(
            sc,
            template,
            evaluator_factory=AlarmEvaluator,
            account_options={"logs": "simulated", "backend_reads": fast},
        ).run()
        assert r.invariant_violations == []
        days.append(
            (
                {name: run["status"] for name, run in r.runs.items()},
                [(f["run"], f["kind"], f["classified_as"], f["to_action_s"]) for f in r.faults],
                [(at, n.subject) for at, n in r.alerts_sent],
            )
        )
    assert days[0] == days[1]
    assert any(f[2] not in ("benign", "not detected") for f in days[0][1])  # something was detected
