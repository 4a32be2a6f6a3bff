"""The dashboard's domain metrics and the alerts' console links, on the local account."""

from __future__ import annotations

import pytest

from drill.account.local import BUCKET, EXECUTION_ROLE, LocalAccount
from drill.scenarios.spec import default_training_job
from drill.sim.model import Fault
from sagewarden import keys
from sagewarden.domain.vocabulary.actions import EnsureHangAlarms
from sagewarden.domain.vocabulary.models import RunStatus

MIN = 60_000


@pytest.fixture
def acct(template):
    with LocalAccount(template, store="memory") as account:
        yield account


@pytest.mark.claim(
    "time to recovery, from an attempt's ending to its replacement training (median, p90, max)"
)
def test_a_fault_and_its_recovery_are_measured_and_alerts_link_to_the_job(acct):
    status, run = acct.api(
        "POST",
        "/runs",
        body={"name": "llama-8b", "training_job": default_training_job("llama-8b", BUCKET, EXECUTION_ROLE)},
    )
    assert status == 201
    acct.sagemaker.inject(Fault(kind="internal_error", run="llama-8b", attempt=1, after_training_min=30))
    acct.sagemaker.advance(acct.clock.now_ms + 60 * MIN)
    acct.deliver_due()
    acct.sagemaker.advance(acct.clock.now_ms + 15 * MIN)
    acct.deliver_due()
    stored = acct.supervisor.store.get(run["run_id"])
    assert stored.status == RunStatus.TRAINING and stored.attempt_count == 2
    samples = acct.counters.samples
    assert (keys.METRIC_RUN_STATUS, "TRAINING", 1.0) in samples
    assert (keys.METRIC_RESTARTS, "INFRASTRUCTURE", 1.0) in samples
    (recovery,) = [v for name, _, v in samples if name == keys.METRIC_RECOVERY_SECONDS]
    first, second = acct.sagemaker.jobs()
    assert recovery == pytest.approx((second.training_started_ms - first.ended_ms) / 1000)
    resumed = next(m for _, m in acct.notifier.sent if m.event == "attempt.resumed")
    assert "console.aws.amazon.com/sagemaker/home?region=us-east-1#/jobs/" in resumed.body
    assert f"sagewarden get {run['run_id']}" in resumed.body


@pytest.mark.claim(
    "One job costs its heartbeat metric ($0.30), the log-silence alarm (1 metric), the whole-job idle alarm (hosts 1 and 2: 2 metrics) and, for 2+ hosts, the lone-idle alarms (one metric per host); a `progress_metric` adds 1"
)
def test_each_sweep_reports_the_billed_alarm_metrics_and_watched_jobs(acct):
    """The dashboard's cost estimate: every metric of a metric-math alarm is billed."""
    live = EnsureHangAlarms("sw-a-01KE5Q86000DNQ47GXEV9VZMPH-a001", 1, 12, 8, 30, 1.0, 20)
    small = EnsureHangAlarms("sw-b-01KE5Q86000DNQ47GXEV9VZMPJ-a001", 1, 1, 8, 30, 1.0, 20)
    acct.supervisor.alarms.ensure(live, "01KE5Q86000DNQ47GXEV9VZMPH")
    acct.supervisor.alarms.ensure(small, "01KE5Q86000DNQ47GXEV9VZMPJ")
    acct.supervisor.sweep()
    values = acct.counters.values  # one sweep so far: the sums are the gauges
    gauges = {k: values.get(k) for k in (keys.METRIC_HANG_ALARMS, keys.METRIC_WATCHED_JOBS)}
    # 12 hosts: log silence 1 + whole-job idle (hosts 1, 2) 2 + lone idle (6 + 6 hosts) 12;
    # 1 host: log silence 1 + whole-job idle 1
    assert gauges == {keys.METRIC_HANG_ALARMS: 17.0, keys.METRIC_WATCHED_JOBS: 2.0}
