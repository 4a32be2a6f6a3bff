"""The PutMetricAlarm requests the supervisor makes for one attempt (pure, no AWS)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from sagewarden.adapters.cloudwatch_hang_alarms import alarm_name, alarm_specs, parse_alarm_name
from sagewarden.domain.vocabulary.actions import EnsureHangAlarms

JOB = "sw-llama-01KE5Q86000DNQ47GXEV9VZMPH-a001"
PREFIX = "sagewarden-hang-"


def _spec(hosts: int = 4, **kw) -> EnsureHangAlarms:
    return EnsureHangAlarms(JOB, 1, hosts, 8, 30, 1.0, 20, **kw)


@pytest.mark.claim("heartbeat `LogEvents` Sum ≤ 0, missing = breaching, N of N")
@pytest.mark.claim("The silence alarms (missing data breaching) stay N of N")
def test_hang_alarm_specs_log_silence_treats_missing_data_as_breaching():
    log = alarm_specs(_spec(), PREFIX, "RUN")[0]
    assert log["AlarmName"] == f"{PREFIX}{JOB}--log-silence"
    assert (log["Namespace"], log["MetricName"], log["Statistic"]) == (
        "Sagewarden/Heartbeat",
        "LogEvents",
        "Sum",
    )
    assert log["EvaluationPeriods"] == log["DatapointsToAlarm"] == 30 and log["Period"] == 60  # N of N
    assert (
        log["TreatMissingData"] == "breaching" and log["ComparisonOperator"] == "LessThanOrEqualToThreshold"
    )
    assert {"Key": "sagewarden:run-id", "Value": "RUN"} in log["Tags"]


@pytest.mark.claim(
    "one host idle while a peer is above `gpu_busy_percent`, this long: a dead host among busy ones. 0 turns the per-host alarms off"
)
@pytest.mark.claim("per balanced group of ≤ 10 hosts")
@pytest.mark.claim("missing = not breaching, 3 breaching minutes of the last 6")
@pytest.mark.claim(
    "The GPU alarms (missing data not breaching) are M out of N: the window's breaching minutes among the last window + 3"
)
@pytest.mark.claim(
    "Hosts are split into balanced groups (11 hosts → 6 + 5, never 10 + 1) because metric math allows at most 10 metrics per alarm"
)
@pytest.mark.claim("a 64-host job has 7 lone-idle alarms plus 1 whole-job alarm")
@pytest.mark.claim(
    "How MIN and MAX of several series treat a series without a datapoint at that minute is not documented either (AVG: as 0); the drill uses the series present, and the lone-idle alarm fills first (`FILL([...], 0)`), so it does not depend on it."
)
@pytest.mark.parametrize(
    ("hosts", "groups"),
    [(1, 0), (2, 1), (10, 1), (11, 2), (64, 7), (256, 26)],
    ids=[
        "one host: no group",
        "two hosts",
        "ten hosts in one group",
        "eleven hosts in two groups",
        "64 hosts",
        "256 hosts",
    ],
)
def test_hang_alarm_specs_lone_idle_groups_are_balanced_and_cover_every_host(hosts, groups):
    lone = [a for a in alarm_specs(_spec(hosts), PREFIX, "RUN") if "--gpu-lone-idle" in a["AlarmName"]]
    assert len(lone) == groups
    covered = []
    for alarm in lone:
        stats = [m for m in alarm["Metrics"] if "MetricStat" in m]
        assert 2 <= len(stats) <= 10  # metric math: at most 10 metrics; never a host without peers
        (expr,) = [m for m in alarm["Metrics"] if "Expression" in m]
        # the documented form: FILL of an array, then MIN/MAX of it
        filled = "FILL([" + ",".join(m["Id"] for m in stats) + "], 0)"
        assert expr["Expression"] == f"IF(MIN({filled}) < 8 AND MAX({filled}) > 400, 1, 0)"
        assert expr["ReturnData"] and alarm["Threshold"] == 1.0
        # M of N: 3 idle minutes among the last 3 + 3 (the late minutes neither block nor make it)
        assert (alarm["DatapointsToAlarm"], alarm["EvaluationPeriods"]) == (3, 6)
        assert alarm["TreatMissingData"] == "notBreaching"
        covered += [m["MetricStat"]["Metric"]["Dimensions"][0]["Value"] for m in stats]
    if groups:
        assert covered == [f"{JOB}/algo-{h}" for h in range(1, hosts + 1)]
        sizes = [len([m for m in a["Metrics"] if "MetricStat" in m]) for a in lone]
        assert max(sizes) - min(sizes) <= 1


@pytest.mark.claim("hosts 1 and 2 both idle")
@pytest.mark.claim("missing = not breaching, 20 of the last 23 minutes")
@pytest.mark.claim(
    "The GPU alarms (missing data not breaching) are M out of N: the window's breaching minutes among the last window + 3"
)
@pytest.mark.claim("a 64-host job has 7 lone-idle alarms plus 1 whole-job alarm")
@pytest.mark.parametrize(("hosts", "watched"), [(2, [1, 2]), (64, [1, 2])], ids=["two hosts", "64 hosts"])
def test_hang_alarm_specs_whole_job_idle_watches_at_most_two_hosts(hosts, watched):
    (idle,) = [a for a in alarm_specs(_spec(hosts), PREFIX, "RUN") if a["AlarmName"].endswith("--gpu-idle")]
    stats = [m for m in idle["Metrics"] if "MetricStat" in m]
    assert [m["MetricStat"]["Metric"]["Dimensions"][0]["Value"] for m in stats] == [
        f"{JOB}/algo-{h}" for h in watched
    ]
    (expr,) = [m for m in idle["Metrics"] if "Expression" in m]
    assert expr["Expression"] == "MAX([h1,h2])"
    assert idle["Threshold"] == 8.0  # 1 % per GPU x 8 GPUs
    assert (idle["DatapointsToAlarm"], idle["EvaluationPeriods"]) == (20, 23)  # 20 idle minutes of 23
    assert idle["ComparisonOperator"] == "LessThanThreshold" and idle["TreatMissingData"] == "notBreaching"


def test_hang_alarm_specs_one_host_job_watches_its_metric_itself():
    """MAX of a single series is a scalar (metric-math reference) and an alarm's expression must
    return a series: a one-host job's idle alarm is an alarm on algo-1's metric, no expression."""
    (idle,) = [a for a in alarm_specs(_spec(1), PREFIX, "RUN") if a["AlarmName"].endswith("--gpu-idle")]
    assert "Metrics" not in idle
    assert (idle["Namespace"], idle["MetricName"], idle["Statistic"], idle["Period"]) == (
        "/aws/sagemaker/TrainingJobs",
        "GPUUtilization",
        "Average",
        60,
    )
    assert idle["Dimensions"] == [{"Name": "Host", "Value": f"{JOB}/algo-1"}]
    assert (idle["DatapointsToAlarm"], idle["EvaluationPeriods"]) == (20, 23)


@pytest.mark.claim("3 min (at least 3)")
@pytest.mark.claim(
    "learned (≥ 4 min, 20 min past start-up for a job logging every minute; carried to the next attempts on the same instances), else 30 min; never below 4"
)
@pytest.mark.claim("learned, else 30 min; never below 4; judged on the evidence")
@pytest.mark.claim("Their windows are at least 4 minutes (3 late minutes plus one)")
@pytest.mark.claim(
    "how late metric datapoints arrive (the drill: up to 3 minutes; the alarms keep their meaning up to that, later datapoints delay a catch)"
)
@pytest.mark.parametrize(
    ("window", "expected"),
    [(1, 4), (3, 4), (4, 4), (30, 30), (1440, 1440)],
    ids=[
        "a 1-minute window raised",
        "a 3-minute window raised",
        "a 4-minute window kept",
        "a 30-minute window kept",
        "a day kept",
    ],
)
def test_hang_alarm_specs_silence_windows_outlast_late_minutes(window, expected):
    """Log silence and progress treat missing data as breaching: a window no longer than the late
    minutes (3) would fill with them on a healthy job, so it is at least 4 minutes; and
    EvaluationPeriods x 60 s never exceeds a day."""
    spec = dataclasses.replace(
        _spec(), log_silence_minutes=window, progress_metric="train:step", progress_stall_minutes=window
    )
    for alarm in alarm_specs(spec, PREFIX, "RUN"):
        if alarm["TreatMissingData"] == "breaching":
            assert alarm["EvaluationPeriods"] == alarm["DatapointsToAlarm"] == expected
    lone = [
        a
        for a in alarm_specs(_spec(4, gpu_lone_idle_minutes=window), PREFIX, "RUN")
        if "lone" in a["AlarmName"]
    ]
    assert lone[0]["DatapointsToAlarm"] == max(window, 3) and lone[0]["EvaluationPeriods"] <= 1440


@pytest.mark.claim(
    "one host idle while a peer is above `gpu_busy_percent`, this long: a dead host among busy ones. 0 turns the per-host alarms off"
)
@pytest.mark.claim("`gpu_lone_idle_minutes: 0` turns them off: $0.60 a month")
def test_hang_alarm_specs_names_and_keys_agree_and_only_keys_filters():
    from sagewarden.adapters.cloudwatch_hang_alarms import parse_alarm_key
    from sagewarden.domain.hangs.alarms import alarm_keys

    spec = _spec(23, progress_metric="train:step")
    specs = alarm_specs(spec, PREFIX, "RUN")
    assert [parse_alarm_key(PREFIX, a["AlarmName"])[1] for a in specs] == list(alarm_keys(spec))
    only = alarm_specs(dataclasses.replace(spec, only_keys=("log_silence",)), PREFIX, "RUN")
    assert [a["AlarmName"] for a in only] == [f"{PREFIX}{JOB}--log-silence"]
    assert not [
        a for a in alarm_specs(_spec(23, gpu_lone_idle_minutes=0), PREFIX, "RUN") if "lone" in a["AlarmName"]
    ]


@pytest.mark.claim(
    "optional signal: the named metric (the `Name` of one of the job's `MetricDefinitions`) not reported, or reported with the same value, for this long (learned like log silence)"
)
@pytest.mark.claim("the `progress_metric` reported unchanged")
@pytest.mark.claim("or not reported (missing = breaching), N of N")
def test_hang_alarm_specs_progress_alarm_only_when_policy_names_a_metric():
    assert not [a for a in alarm_specs(_spec(), PREFIX, "RUN") if "progress" in a["AlarmName"]]
    spec = _spec(progress_metric="train:throughput", progress_stall_minutes=25)
    progress = next(a for a in alarm_specs(spec, PREFIX, "RUN") if "progress" in a["AlarmName"])
    stats = {m["Id"]: m["MetricStat"] for m in progress["Metrics"] if "MetricStat" in m}
    assert {k: v["Stat"] for k, v in stats.items()} == {"v": "Maximum"}
    assert stats["v"]["Metric"]["MetricName"] == "train:throughput"
    assert stats["v"]["Metric"]["Dimensions"] == [{"Name": "TrainingJobName", "Value": JOB}]
    (expr,) = [m for m in progress["Metrics"] if "Expression" in m]
    # unchanged: 1; unreported: no value, and missing data is breaching. No FILL: a late newest
    # minute must not read as "not reported"
    assert expr["Expression"] == "IF(ABS(DIFF(v)) <= 0, 1, 0)"
    assert progress["EvaluationPeriods"] == progress["DatapointsToAlarm"] == 25
    assert progress["TreatMissingData"] == "breaching"


@pytest.mark.parametrize("signal", ["log_silence", "gpu_idle", "gpu_lone_idle", "progress_stalled"])
def test_hang_alarm_names_parse_back_to_job_and_signal(signal):
    assert parse_alarm_name(PREFIX, alarm_name(PREFIX, JOB, signal)) == (JOB, signal)
    assert parse_alarm_name(PREFIX, alarm_name(PREFIX, JOB, signal, 3)) == (JOB, signal)
    assert parse_alarm_name(PREFIX, "someone-else--log-silence") is None
    assert parse_alarm_name(PREFIX, f"{PREFIX}{JOB}--unknown") is None


@pytest.mark.parametrize(
    ("idle_percent", "busy_percent"),
    [(0.00001, 50.0), (1.0, 0.000002), (1e-9, 100.0)],
    ids=["a tiny idle threshold", "a tiny busy threshold", "a billionth of a percent idle"],
)
def test_hang_alarm_specs_write_expression_numbers_as_plain_decimals(idle_percent, busy_percent):
    # f"{x:g}" writes 8e-05 for a threshold of 0.00001 % per GPU x 8 GPUs. CloudWatch's metric-math
    # syntax documents decimal numbers only; where AWS is silent the unkind reading holds: such an
    # expression is refused, and the run's lone-idle alarm never exists.
    spec = _spec(2, gpu_busy_percent=busy_percent)
    spec = dataclasses.replace(spec, gpu_idle_percent=idle_percent)
    (lone,) = [a for a in alarm_specs(spec, PREFIX, "RUN") if "--gpu-lone-idle" in a["AlarmName"]]
    (expr,) = [m["Expression"] for m in lone["Metrics"] if "Expression" in m]

    numbers = re.findall(r"[<>] ([^,)\s]+)", expr)
    assert len(numbers) == 2 and not any("e" in n.lower() for n in numbers), expr
    assert [float(n) for n in numbers] == pytest.approx([idle_percent * 8, busy_percent * 8], rel=1e-12)
