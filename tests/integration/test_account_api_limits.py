"""The supervisor on a simulated account that throttles at AWS's rates and shows a new job late
(issue 17 item 10): a throttled launch waits and launches, a throttled read is unknown rather than
empty, the sweep's time runs out when its reads wait and what it did not serve stays due, and a
job missing from DescribeTrainingJob right after its creation is neither launched twice nor
given up on."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from drill.account.invocation import invocation
from drill.account.local import BUCKET, EXECUTION_ROLE, LocalAccount
from drill.iam.recorder import invoked_as
from drill.scenarios.spec import default_training_job
from drill.sim.read_after_create import ReadAfterCreate
from sagewarden.domain.vocabulary.models import RunStatus

MIN = 60_000


def _submit(acct: LocalAccount, name: str) -> dict[str, Any]:
    status, run = acct.api(
        "POST",
        "/runs",
        body={"name": name, "training_job": default_training_job(name, BUCKET, EXECUTION_ROLE)},
    )
    assert status == 201, run
    return run


def _minutes(acct: LocalAccount, n: int) -> None:
    """n minutes of the account: SageMaker, deliveries and the every-minute sweep."""
    for _ in range(n):
        acct.sagemaker.advance(acct.clock.now_ms + MIN)
        acct.deliver_due()
        acct.run_sweep()
        acct.deliver_due()


def _jobs_of(acct: LocalAccount, run_id: str) -> list[Any]:
    return [j for j in acct.sagemaker.jobs() if j.run_id == run_id]


@pytest.mark.claim(
    "all under the faithful simulated account: metric datapoints 30 s to 3 min late, log lines 1 s to 3 min late, warm pools that keep their hosts, AWS's rates"
)
def test_a_launch_the_account_throttles_waits_and_then_launches(template):
    with LocalAccount(template, store="memory", api_rates={"sagemaker.CreateTrainingJob": 1 / 60}) as acct:
        first = _submit(acct, "first")
        # the same instant: CreateTrainingJob's next slot is 60 s away, longer than the SDK's retries wait
        second = _submit(acct, "second")
        assert acct.rate_limits.throttled == {"sagemaker.CreateTrainingJob": 1}
        waiting = acct.supervisor.store.get(second["run_id"])
        assert waiting.status == RunStatus.RETRY_WAIT and waiting.wait_reason == "throttle"
        assert len(_jobs_of(acct, first["run_id"])) == 1 and _jobs_of(acct, second["run_id"]) == []
        _minutes(acct, 3)
        assert len(_jobs_of(acct, second["run_id"])) == 1  # launched once the slot came
        assert acct.supervisor.store.get(second["run_id"]).status in (RunStatus.STARTING, RunStatus.TRAINING)


def test_a_throttled_alarm_read_is_unknown_not_no_alarms(template):
    with LocalAccount(template, store="memory", api_rates={"cloudwatch.DescribeAlarms": 1 / 600}) as acct:
        run = _submit(acct, "llama")
        acct.sagemaker.advance(acct.clock.now_ms + 15 * MIN)
        acct.deliver_due()  # Training: its hang alarms are put
        assert acct.supervisor.store.get(run["run_id"]).status == RunStatus.TRAINING
        with invoked_as("another.function"), invocation():  # someone read the alarms just before
            acct.rate_limits.admit("cloudwatch", "DescribeAlarms")
        failures = acct.counters.values.get("ObservationFailures", 0)
        (result,) = acct.run_sweep()
        assert acct.rate_limits.throttled.get("cloudwatch.DescribeAlarms") == 1
        assert result["errors"] >= 1  # the sweep says so ...
        assert acct.counters.values.get("ObservationFailures", 0) == failures + 1  # ... and counts it
        cur = acct.supervisor.store.get(run["run_id"]).current
        assert cur is not None and cur.live and cur.stop_intent is None  # nothing judged on a guess


def test_the_sweep_runs_out_of_time_when_its_reads_wait_and_serves_the_rest_next(template):
    with LocalAccount(
        template,
        store="memory",
        reconcile_interval_min=10,
        api_rates={"sagemaker.CreateTrainingJob": None, "sagemaker.DescribeTrainingJob": 0.5},
    ) as acct:
        runs = [_submit(acct, f"run-{i:02d}")["run_id"] for i in range(40)]
        acct.sagemaker.advance(acct.clock.now_ms + 15 * MIN)
        acct.deliver_due()
        acct.sagemaker.advance(acct.clock.now_ms + 15 * MIN)  # every run due for its routine look
        before = acct.rate_limits.calls.get("sagemaker.DescribeTrainingJob", 0)
        (first,) = acct.run_sweep()
        described = acct.rate_limits.calls["sagemaker.DescribeTrainingJob"] - before
        # one DescribeTrainingJob slot every 2 s, 60 s of invocation, 10 s kept in reserve
        assert 20 <= described <= 30 and first["observed"] == described and first["out_of_time"]
        acct.sagemaker.advance(acct.clock.now_ms + MIN)
        (second,) = acct.run_sweep()  # the runs left due are served by the next pass
        assert first["observed"] + second["observed"] >= len(runs)
        assert "sagemaker.DescribeTrainingJob" not in acct.rate_limits.throttled  # waits, none failed


@pytest.mark.parametrize("window_s", [(30, 60)], ids=["describe blind for 30 to 60 s"])
def test_a_cancel_right_after_the_launch_stops_the_job_it_cannot_see_yet(template, window_s):
    with LocalAccount(template, store="memory", describe_after_create_s=window_s) as acct:
        run = _submit(acct, "llama")
        status, _ = acct.api("POST", f"/runs/{run['run_id']}/cancel")  # StopTrainingJob: "not found"
        assert status in (200, 202)
        assert acct.sagemaker_view.hidden_answers >= 1
        _minutes(acct, 8)
        (job,) = _jobs_of(acct, run["run_id"])  # launched once, never again
        assert job.status == "Stopped"
        assert acct.supervisor.store.get(run["run_id"]).status == RunStatus.CANCELLED


def test_a_new_job_is_missing_from_reads_for_a_drawn_while(template):
    with LocalAccount(template, store="memory", describe_after_create_s=(5, 9)) as acct:
        view: ReadAfterCreate = acct.sagemaker_view
        run = _submit(acct, "llama")
        (job,) = _jobs_of(acct, run["run_id"])
        delay = view.delay_ms(job.name)
        assert 5_000 <= delay <= 9_000 and delay == ReadAfterCreate(acct.sagemaker, (5, 9)).delay_ms(job.name)
        with pytest.raises(ClientError) as err:
            view.describe_training_job(TrainingJobName=job.name)
        assert err.value.response["Error"] == {
            "Code": "ValidationException",
            "Message": "Requested resource not found.",
        }
        assert acct.sagemaker.describe_training_job(TrainingJobName=job.name)["TrainingJobName"] == job.name
        acct.sagemaker.advance(job.created_ms + delay)
        assert view.describe_training_job(TrainingJobName=job.name)["TrainingJobStatus"] == "InProgress"
