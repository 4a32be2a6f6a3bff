"""Issues 7 and 11 at the service level, on the local account (moto + simulated SageMaker).

Each test pins one defect: lost alarm edges, alarms that were never created, alerts lost on a
publish error or on a finished run, a stop refused because the job already failed, the cost of
a duplicate delivery, the sweep's fairness and its lease, write tokens.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from botocore.exceptions import ClientError, ReadTimeoutError

from drill.account.local import BUCKET, EXECUTION_ROLE, LocalAccount
from drill.account.memory_store import InMemoryRunStore
from drill.scenarios.spec import default_training_job
from drill.sim.model import Fault
from sagewarden.adapters.cloudwatch_hang_alarms import CloudWatchHangAlarms, alarm_name
from sagewarden.domain.vocabulary.actions import EnsureHangAlarms
from sagewarden.domain.vocabulary.models import RunStatus

MIN = 60_000


@pytest.fixture
def acct(template):
    with LocalAccount(template, store="memory") as account:
        yield account


def _submit(acct: LocalAccount, name: str = "llama-8b", **policy: Any) -> dict[str, Any]:
    status, run = acct.api(
        "POST",
        "/runs",
        body={
            "name": name,
            "training_job": default_training_job(name, BUCKET, EXECUTION_ROLE),
            "policy": policy,
        },
    )
    assert status == 201, run
    return run


def _until_training(acct: LocalAccount, run_id: str) -> Any:
    acct.sagemaker.advance(acct.clock.now_ms + 15 * MIN)
    acct.deliver_due()
    stored = acct.supervisor.store.get(run_id)
    assert stored.status == RunStatus.TRAINING, stored.status
    return stored


def _alarm_names(acct: LocalAccount) -> list[str]:
    return sorted(a["AlarmName"] for a in acct.cloudwatch.describe_alarms()["MetricAlarms"])


# --- 2. an alarm whose ALARM event was lost (DLQ) is acted on by the sweep ------------------------


def test_sweep_acts_on_an_alarm_in_alarm_whose_event_never_arrived(acct):
    # the job is stuck (the hosts' metrics say so: a whole job idle while they work is a benign
    # phase, waited for -- domain/vocabulary/evidence.py)
    acct.sagemaker.inject(Fault(kind="stuck_dataloader", run="llama-8b", attempt=1, after_training_min=20))
    run = _submit(acct)
    stored = _until_training(acct, run["run_id"])
    job = stored.current.job_name
    name = alarm_name(acct.supervisor.alarms.prefix, job, "gpu_idle")
    acct.sagemaker.advance(stored.current.training_started_ms + 50 * MIN)  # past the start-up allowance
    # CloudWatch holds the alarm in ALARM; its one state-change event went to the DLQ
    acct.cloudwatch.set_alarm_state(AlarmName=name, StateValue="ALARM", StateReason="Threshold Crossed")
    report = acct.supervisor.sweep()
    assert report.alarms_in_alarm == 1
    after = acct.supervisor.store.get(run["run_id"])
    assert after.status == RunStatus.STOPPING and after.current.stop_intent == "hang"


# --- 3. alarms are repaired from what CloudWatch holds -------------------------------------------


class _ThrottledAlarms:
    """PutMetricAlarm throttled for the first `failures` calls."""

    def __init__(self, inner: CloudWatchHangAlarms, failures: int) -> None:
        self.inner = inner
        self.failures = failures

    def ensure(self, spec: EnsureHangAlarms, run_id: str = "") -> list[str]:
        if self.failures > 0:
            self.failures -= 1
            raise ClientError({"Error": {"Code": "Throttling", "Message": "Rate exceeded"}}, "PutMetricAlarm")
        return self.inner.ensure(spec, run_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_alarm_creation_that_failed_is_repaired_by_the_next_sweep_and_counted(acct):
    acct.supervisor.alarms = _ThrottledAlarms(acct.supervisor.alarms, failures=1)
    run = _submit(acct)
    stored = _until_training(acct, run["run_id"])
    assert _alarm_names(acct) == []  # the creation failed...
    assert stored.current.alarms_active  # ...although the attempt wants them
    assert acct.counters.values["FailedActions"] == 1
    acct.clock.advance_to(acct.clock.now_ms + MIN)  # due within a minute: alarms not yet confirmed
    acct.supervisor.sweep()
    assert len(_alarm_names(acct)) == 3  # log silence, whole-job idle, lone idle host
    acct.clock.advance_to(acct.clock.now_ms + MIN)
    acct.supervisor.sweep()
    assert acct.supervisor.store.get(run["run_id"]).current.alarms_confirmed


# --- 11. alerts are at least once: the outbox ------------------------------------------------------


class _FlakyNotifier:
    def __init__(self, inner: Any, failures: int) -> None:
        self.inner = inner
        self.failures = failures
        self.sent: list[Any] = []

    def publish(self, message: Any) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise ClientError(
                {"Error": {"Code": "KMSThrottlingException", "Message": "throttled"}}, "Publish"
            )
        self.inner.publish(message)
        self.sent.append(message)


@pytest.mark.claim(
    "Alerts are written in the same DynamoDB transaction as the decision that owes them and published (with a dedupe id) until confirmed"
)
def test_alert_whose_publish_failed_is_published_by_the_sweep_exactly_once(acct):
    flaky = _FlakyNotifier(acct.supervisor.notifier, failures=1)
    acct.supervisor.notifier = flaky
    run = _submit(acct)
    assert flaky.sent == []  # run.submitted failed to publish
    assert acct.counters.values["AlertPublishFailures"] == 1
    acct.clock.advance_to(acct.clock.now_ms + 3 * MIN)
    report = acct.supervisor.sweep()
    assert report.alerts_published == 1
    assert [m.event for m in flaky.sent] == ["run.submitted"]
    dedupe = flaky.sent[0].attributes["dedupe_id"]
    assert dedupe.startswith(run["run_id"])
    acct.clock.advance_to(acct.clock.now_ms + 60 * MIN)
    acct.supervisor.sweep()
    assert [m.attributes["dedupe_id"] for m in flaky.sent].count(dedupe) == 1
    received = acct.alerts_received()
    assert [m["MessageAttributes"]["dedupe_id"]["Value"] for m in received].count(dedupe) == 1


def test_a_finished_runs_failure_alert_is_re_sent_although_the_run_is_not_swept_any_more(acct):
    flaky = _FlakyNotifier(acct.supervisor.notifier, failures=100)
    acct.supervisor.notifier = flaky
    run = _submit(acct)
    acct.api("POST", f"/runs/{run['run_id']}/cancel")
    # a stop the moment after CreateTrainingJob may meet a job SageMaker does not know yet: it is
    # asked again once the job is seen running, and the job then takes its time to stop
    for _ in range(6):
        acct.sagemaker.advance(acct.clock.now_ms + 5 * MIN)
        acct.deliver_due()
        if acct.supervisor.store.get(run["run_id"]).status != RunStatus.STOPPING:
            break
    assert acct.supervisor.store.get(run["run_id"]).status == RunStatus.CANCELLED
    assert flaky.sent == []
    flaky.failures = 0  # SNS recovers (e.g. the KMS key policy was fixed)
    acct.clock.advance_to(acct.clock.now_ms + 2 * 60 * MIN)
    acct.supervisor.sweep()
    assert sorted(m.event for m in flaky.sent) == ["run.cancelled", "run.submitted"]
    assert (
        isinstance(acct.supervisor.store, InMemoryRunStore) and acct.supervisor.store.pending_outbox() == []
    )


# --- issue 11: a stop refused because the job already failed is evidence ------------------------


@pytest.mark.claim(
    'a job that ends `Failed` while being stopped for a cancel is not resumed, and a stop answered "job is in status Failed" counts as evidence'
)
def test_cancel_of_a_job_that_already_failed_unnoticed_ends_cancelled_not_resumed(acct):
    acct.delivery = dataclasses.replace(acct.delivery, drop_rate=1.0)  # EventBridge loses everything
    run = _submit(acct)
    acct.sagemaker.advance(acct.clock.now_ms + 15 * MIN)
    acct.supervisor.sweep()  # learns Training from DescribeTrainingJob
    assert acct.supervisor.store.get(run["run_id"]).status == RunStatus.TRAINING
    acct.sagemaker.inject(Fault(kind="internal_error", run="llama-8b", after_training_min=0))
    acct.sagemaker.advance(acct.clock.now_ms + 2 * MIN)
    (job,) = acct.sagemaker.jobs()
    assert job.status == "Failed"
    status, _ = acct.api("POST", f"/runs/{run['run_id']}/cancel")
    assert status in (200, 202)
    # StopTrainingJob answered "job is in status Failed": the supervisor looked and ended the run
    after = acct.supervisor.store.get(run["run_id"])
    assert after.status == RunStatus.CANCELLED
    assert len(acct.sagemaker.jobs()) == 1  # nothing resumed


# --- 12. duplicates are cheap ------------------------------------------------------------------------


class _CountingClient:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr) or name.startswith("_") or name in ("get_paginator", "meta", "exceptions"):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return attr(*args, **kwargs)

        return call


@pytest.mark.claim("Duplicate and stale events are counted (`EventsIgnored`) and logged, not acted on")
def test_a_duplicate_state_change_costs_one_dynamodb_call(template):
    with LocalAccount(template, store="dynamodb") as acct:
        run = _submit(acct)
        _until_training(acct, run["run_id"])
        job = acct.sagemaker.jobs()[0]
        detail = acct.sagemaker.describe_training_job(TrainingJobName=job.name)
        event = {
            "detail": {
                **json.loads(json.dumps(detail, default=str)),
                "LastModifiedTime": detail["LastModifiedTime"],
            }
        }
        counting = _CountingClient(acct.supervisor.store._ddb)  # type: ignore[attr-defined]
        acct.supervisor.store._ddb = counting  # type: ignore[attr-defined]
        assert acct.supervisor.aws.on_job_state_change(event["detail"]) is not None
        assert counting.calls == ["get_item"]


# --- 9. the sweep is fair and never overlaps itself -------------------------------------------------


@pytest.mark.claim(
    "the sweep works through due runs in round-robin shards under a time budget, and every AWS list call follows its token"
)
def test_sweep_serves_every_shard_when_time_runs_short(acct):
    from sagewarden import keys
    from sagewarden.adapters.dynamodb_outbox_lease import due_shard as _shard

    runs = [_submit(acct, f"run-{i}")["run_id"] for i in range(16)]
    shards = {_shard(r) for r in runs}
    assert len(shards) == keys.DUE_SHARDS  # the 16 runs spread over every shard
    acct.clock.advance_to(acct.clock.now_ms + 20 * MIN)
    store = acct.supervisor.store
    swept: list[str] = []
    real_get = store.get

    def get(run_id: str, **kw: Any) -> Any:
        swept.append(run_id)
        return real_get(run_id, **kw)

    store.get = get  # type: ignore[method-assign]
    budget = iter([60_000] * 8 + [0] * 1000)  # time for eight of the sixteen due runs
    report = acct.supervisor.sweep(time_left_ms=lambda: next(budget))
    served = set(swept)
    assert report.out_of_time and report.due == 8 and len(served) == 8
    assert {_shard(r) for r in served} == shards  # round-robin: no shard waits for another


@pytest.mark.claim(
    "This mechanism covers timers, lost events and lost actions, needs no extra IAM role or per-run schedule to clean up, and is idempotent."
)
def test_two_sweeps_never_run_at_once(acct):
    store = acct.supervisor.store
    assert store.acquire_lease("sweep", "other-invocation", acct.clock.now_ms, 70_000)
    report = acct.supervisor.sweep(owner="me")
    assert report.skipped
    acct.clock.advance_to(acct.clock.now_ms + 71_000)  # the other invocation died; its lease expired
    assert not acct.supervisor.sweep(owner="me").skipped


# --- 10. deployments do not touch each other ------------------------------------------------------------


@pytest.mark.claim("the sweep deletes those of no run it knows")
@pytest.mark.claim(
    "so two deployments in one account, whose prefixes differ (the preflight sees to it), never touch each other's alarms"
)
def test_two_deployments_never_see_or_delete_each_others_alarms(acct):
    from sagewarden import keys

    mine = CloudWatchHangAlarms(acct.cloudwatch, keys.alarm_prefix("sw"))
    theirs = CloudWatchHangAlarms(acct.cloudwatch, keys.alarm_prefix("team2"))
    spec = EnsureHangAlarms("team2-x-01KE5Q86000DNQ47GXEV9VZMPH-a001", 1, 2, 8, 30, 1.0, 20)
    theirs.ensure(spec, "01KE5Q86000DNQ47GXEV9VZMPH")
    assert mine.inventory() == {}
    report = acct.supervisor.sweep(cleanup_alarms=True)
    assert report.alarms_deleted == 0 and sorted(theirs.inventory()) == [spec.job_name]


# --- issue 11: a committed write whose response was lost is not a conflict ------------------------


class _LostResponse:
    """transact_write_items commits, then the connection drops before the answer arrives."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.armed = True

    def transact_write_items(self, **kwargs: Any) -> Any:
        result = self.inner.transact_write_items(**kwargs)
        if self.armed:
            self.armed = False
            raise ReadTimeoutError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com")
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.mark.claim(
    'Transactions carry a `ClientRequestToken` derived from the decision, and "my own write already committed" is told apart from "someone else\'s"'
)
def test_a_committed_decision_whose_response_was_lost_still_carries_out_its_actions(template):
    with LocalAccount(template, store="dynamodb") as acct:
        store = acct.supervisor.store
        store._ddb = _LostResponse(store._ddb)  # type: ignore[attr-defined]
        run = _submit(acct)  # create commits normally; the Submitted decision's save loses its answer
        stored = acct.supervisor.store.get(run["run_id"])
        assert stored.status == RunStatus.STARTING and len(acct.sagemaker.jobs()) == 1
        assert [m.event for _, m in acct.notifier.sent] == ["run.submitted"]


def test_the_alarm_inventory_follows_every_page_at_the_largest_page_size():
    """DescribeAlarms answers at most 100 alarms a page; asking for 100 halves the calls against its
    9 TPS quota, and every page is still followed."""
    import boto3
    from botocore.stub import Stubber

    cw = boto3.client("cloudwatch", region_name="us-east-1")
    prefix = "sagewarden-sw-hang-"
    job = "sw-x-01KE5Q86000DNQ47GXEV9VZMPH-a001"
    STAT = {
        "Metric": {"Namespace": "Sagewarden/Heartbeat", "MetricName": "LogEvents"},
        "Period": 60,
        "Stat": "Sum",
    }

    def page(keys: list[str], token: str | None) -> dict[str, Any]:
        alarms = [
            {
                "AlarmName": alarm_name(prefix, job, k),
                "StateValue": "OK",
                "Metrics": [{"Id": "m", "MetricStat": STAT}],
            }
            for k in keys
        ]
        return {"MetricAlarms": alarms, **({"NextToken": token} if token else {})}

    expected = {"AlarmNamePrefix": prefix, "AlarmTypes": ["MetricAlarm"], "MaxRecords": 100}
    with Stubber(cw) as stub:
        stub.add_response("describe_alarms", page(["log_silence"], "t1"), expected)
        stub.add_response("describe_alarms", page(["gpu_idle"], None), {**expected, "NextToken": "t1"})
        found = CloudWatchHangAlarms(cw, prefix).inventory()
        stub.assert_no_pending_responses()
    assert [k for k, _, _ in found[job]] == ["gpu_idle", "log_silence"] and found.metrics == 2


def test_the_scale_drills_backend_alarm_reads_answer_the_inventory_like_moto(template):
    """`backend_reads` (the scale benchmark) serves DescribeAlarms from moto's backend: the
    supervisor's inventory (paged at 100) must read the same alarms and metrics as through moto."""
    with LocalAccount(template, store="memory", backend_reads=True) as account:
        fast = account.supervisor.alarms
        spec = EnsureHangAlarms("sw-x-01KE5Q86000DNQ47GXEV9VZMPH-a001", 1, 12, 8, 30, 1.0, 20)
        fast.ensure(spec, "01KE5Q86000DNQ47GXEV9VZMPH")
        slow = CloudWatchHangAlarms(account.cloudwatch, fast._prefix)
        seen, expected = fast.inventory(), slow.inventory()
        assert seen == expected and len(seen[spec.job_name]) == 4 and seen.metrics == expected.metrics == 15


def _job(i: int) -> str:
    return f"sw-x-01KE5Q86000DNQ47GXEV9VZ{i:03d}-a001"


def test_backend_alarm_reads_page_a_listing_like_moto_even_when_alarms_go_between_pages(template):
    """More alarms than one page: every page continues the same listing (no alarm twice, none
    skipped), and an alarm deleted between two pages is not returned nor does it end the listing."""
    with LocalAccount(template, store="memory", backend_reads=True) as account:
        fast = account.supervisor.alarms
        for i in range(40):
            fast.ensure(EnsureHangAlarms(_job(i), 1, 2, 8, 30, 1.0, 20), "01KE5Q86000DNQ47GXEV9VZMPH")
        slow = CloudWatchHangAlarms(account.cloudwatch, fast._prefix)
        assert fast.inventory() == slow.inventory() and len(fast.inventory()) == 40
        each = len(fast.inventory()[_job(0)])
        assert 40 * each > 100  # more than one page
        client = fast._cw
        first = client.describe_alarms(AlarmNamePrefix=fast._prefix, MaxRecords=100)
        names = [a["AlarmName"] for a in first["MetricAlarms"]]
        assert len(names) == 100 and "NextToken" in first
        fast.delete(_job(39))  # the last jobs' alarms sort last: on the second page
        fast.delete(_job(38))
        second = client.describe_alarms(
            AlarmNamePrefix=fast._prefix, MaxRecords=100, NextToken=first["NextToken"]
        )
        rest = [a["AlarmName"] for a in second["MetricAlarms"]]
        assert "NextToken" not in second and not set(names) & set(rest)
        assert sorted(names + rest) == sorted(
            a["AlarmName"]
            for a in account.cloudwatch.describe_alarms(AlarmNamePrefix=fast._prefix)["MetricAlarms"]
        )
        assert len(rest) == 40 * each - 100 - 2 * each


def test_backend_s3_writes_land_in_moto_and_in_the_checkpoint_listing(template):
    """The simulator's checkpoint objects, written straight into moto's bucket in large drills,
    are listed and headed by the supervisor's reads and by moto itself, stamped in virtual time."""
    with LocalAccount(template, store="memory", backend_reads=True) as account:
        writer = account.sagemaker.checkpoint_writer.s3
        account.clock.advance_by(3_600_000)
        writer.put_object(Bucket=BUCKET, Key="run/ckpt/step-30/shard-0", Body=b"x" * 7)
        reads = account.supervisor.checkpoints._s3
        listed = reads.list_objects_v2(Bucket=BUCKET, Prefix="run/ckpt/", Delimiter="/")
        assert listed["CommonPrefixes"] == [{"Prefix": "run/ckpt/step-30/"}]
        head = reads.head_object(Bucket=BUCKET, Key="run/ckpt/step-30/shard-0")
        assert head["ContentLength"] == 7
        assert head["LastModified"].timestamp() * 1000 == pytest.approx(account.clock.now_ms, abs=1000)
        assert account.s3.get_object(Bucket=BUCKET, Key="run/ckpt/step-30/shard-0")["Body"].read() == b"x" * 7
        with pytest.raises(ClientError, match="NoSuchBucket"):
            writer.put_object(Bucket="no-such-bucket", Key="k", Body=b"")


def _comparable(alarm: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v
        for k, v in alarm.items()
        if k not in ("AlarmArn", "AlarmName", "AlarmConfigurationUpdatedTimestamp", "StateUpdatedTimestamp")
    }


def test_backend_alarm_puts_store_what_moto_stores_through_its_api(template):
    """The scale drill's PutMetricAlarm shortcut: the hang alarms of a 40-host job (metric-math
    groups, DIFF on a progress metric, single-metric alarms) read back through moto's own
    DescribeAlarms exactly as the same requests put through moto's API, and are recorded."""
    from botocore.exceptions import ParamValidationError

    from sagewarden.adapters.cloudwatch_hang_alarms import alarm_specs

    with LocalAccount(template, store="memory", backend_reads=True) as account:
        fast = account.supervisor.alarms._cw
        spec = EnsureHangAlarms(_job(1), 1, 40, 8, 30, 1.0, 20, progress_metric="train:loss")
        requests = alarm_specs(spec, "fast-", "01KE5Q86000DNQ47GXEV9VZMPH")
        assert len(requests) > 3 and any(r.get("Metrics") for r in requests)
        for r in requests:
            fast.put_metric_alarm(**r)
            account.cloudwatch.put_metric_alarm(
                **{**r, "AlarmName": "slow-" + r["AlarmName"][len("fast-") :]}
            )
        via_backend = account.cloudwatch.describe_alarms(AlarmNamePrefix="fast-")["MetricAlarms"]
        via_api = account.cloudwatch.describe_alarms(AlarmNamePrefix="slow-")["MetricAlarms"]
        assert [_comparable(a) for a in via_backend] == [_comparable(a) for a in via_api]
        with pytest.raises(ParamValidationError):
            fast.put_metric_alarm(**{**requests[0], "EvaluationPeriods": "three"})


def test_backend_sns_publish_reaches_the_topic_and_refuses_what_sns_refuses(template):
    with LocalAccount(template, store="memory", backend_reads=True) as account:
        from moto.sns.models import sns_backends

        sns = account.supervisor.notifier.inner._sns
        sent = sns.publish(
            TopicArn=account.topic_arn,
            Subject="run r1: stopped a hang",
            Message="body",
            MessageAttributes={"run_id": {"DataType": "String", "StringValue": "r1"}},
        )
        topic = next(iter(b for b in sns_backends.values()))["us-east-1"].topics[account.topic_arn]
        assert [n[0] for n in topic.sent_notifications] == [sent["MessageId"]]
        assert topic.sent_notifications[0][3] == {"run_id": {"Type": "String", "Value": "r1"}}
        with pytest.raises(ClientError, match="InvalidParameter"):
            sns.publish(TopicArn=account.topic_arn, Subject="x" * 120, Message="body")


def test_the_alarm_inventory_dates_an_alarm_state_from_its_last_transition():
    """StateUpdatedTimestamp also moves when only the alarm's EvaluationState changes (the
    MetricAlarm reference); how long an alarm has been in ALARM (e.g. a lone idle host during
    start-up must hold 10 minutes) is measured from StateTransitionedTimestamp."""
    from datetime import UTC, datetime

    import boto3
    from botocore.stub import Stubber

    cw = boto3.client("cloudwatch", region_name="us-east-1")
    prefix = "sagewarden-sw-hang-"
    job = "sw-x-01KE5Q86000DNQ47GXEV9VZMPH-a001"
    entered = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
    touched = datetime(2026, 1, 5, 10, 7, tzinfo=UTC)  # an evaluation-state blip, still ALARM
    alarm = {
        "AlarmName": alarm_name(prefix, job, "gpu_lone_idle"),
        "StateValue": "ALARM",
        "StateUpdatedTimestamp": touched,
        "StateTransitionedTimestamp": entered,
    }
    expected = {"AlarmNamePrefix": prefix, "AlarmTypes": ["MetricAlarm"], "MaxRecords": 100}
    with Stubber(cw) as stub:
        stub.add_response("describe_alarms", {"MetricAlarms": [alarm]}, expected)
        found = CloudWatchHangAlarms(cw, prefix).inventory()
        assert found[job] == (("gpu_lone_idle", "ALARM", int(entered.timestamp() * 1000)),)
