"""The PutMetricAlarm requests the supervisor makes for one attempt (pure, no AWS)."""

from __future__ import annotations

import pytest

from sagewarden.adapters.cloudwatch_hang_alarms import alarm_name, alarm_specs, parse_alarm_name
from sagewarden.domain.actions import EnsureHangAlarms

JOB = "sw-llama-01KE5Q86000DNQ47GXEV9VZMPH-a001"
PREFIX = "sagewarden-hang-"


def _spec(hosts: int = 4, **kw) -> EnsureHangAlarms:
    return EnsureHangAlarms(JOB, 1, hosts, 8, 30, 1.0, 20, **kw)


def test_hang_alarm_specs_log_silence_treats_missing_data_as_breaching():
    log = alarm_specs(_spec(), PREFIX, "RUN")[0]
    assert log["AlarmName"] == f"{PREFIX}{JOB}--log-silence"
    assert (log["Namespace"], log["MetricName"], log["Statistic"]) == (
        "Sagewarden/Heartbeat",
        "LogEvents",
        "Sum",
    )
    assert log["EvaluationPeriods"] == log["DatapointsToAlarm"] == 30 and log["Period"] == 60
    assert (
        log["TreatMissingData"] == "breaching" and log["ComparisonOperator"] == "LessThanOrEqualToThreshold"
    )
    assert {"Key": "sagewarden:run-id", "Value": "RUN"} in log["Tags"]


@pytest.mark.parametrize(("hosts", "groups"), [(1, 1), (10, 1), (11, 2), (64, 7)])
def test_hang_alarm_specs_gpu_idle_uses_at_most_ten_metrics_per_alarm(hosts, groups):
    gpu = [a for a in alarm_specs(_spec(hosts), PREFIX, "RUN") if "--gpu-idle" in a["AlarmName"]]
    assert len(gpu) == groups
    covered = []
    for alarm in gpu:
        stats = [m for m in alarm["Metrics"] if "MetricStat" in m]
        assert len(stats) <= 10
        expr = next(m for m in alarm["Metrics"] if "Expression" in m)
        assert expr["Expression"] == f"MIN([{','.join(m['Id'] for m in stats)}])" and expr["ReturnData"]
        covered += [m["MetricStat"]["Metric"]["Dimensions"][0]["Value"] for m in stats]
        assert alarm["Threshold"] == 8.0  # 1 % per GPU x 8 GPUs (values are summed per host)
        assert alarm["TreatMissingData"] == "notBreaching"
    assert covered == [f"{JOB}/algo-{h}" for h in range(1, hosts + 1)]


def test_hang_alarm_specs_progress_alarm_only_when_policy_names_a_metric():
    assert not [a for a in alarm_specs(_spec(), PREFIX, "RUN") if "progress" in a["AlarmName"]]
    spec = _spec(progress_metric="train:throughput", progress_stall_minutes=25)
    progress = next(a for a in alarm_specs(spec, PREFIX, "RUN") if "progress" in a["AlarmName"])
    assert progress["MetricName"] == "train:throughput" and progress["Statistic"] == "SampleCount"
    assert progress["Dimensions"] == [{"Name": "TrainingJobName", "Value": JOB}]
    assert progress["EvaluationPeriods"] == 25 and progress["TreatMissingData"] == "breaching"


@pytest.mark.parametrize("signal", ["log_silence", "gpu_idle", "progress_stalled"])
def test_hang_alarm_names_parse_back_to_job_and_signal(signal):
    assert parse_alarm_name(PREFIX, alarm_name(PREFIX, JOB, signal)) == (JOB, signal)
    assert parse_alarm_name(PREFIX, alarm_name(PREFIX, JOB, signal, 3)) == (JOB, signal)
    assert parse_alarm_name(PREFIX, "someone-else--log-silence") is None
    assert parse_alarm_name(PREFIX, f"{PREFIX}{JOB}--unknown") is None
