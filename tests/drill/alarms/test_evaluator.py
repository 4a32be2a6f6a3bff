"""The drill's CloudWatch alarm evaluator: AWS's documented semantics, events, speed."""

from __future__ import annotations

import itertools
import json
import time
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drill.alarms.decision import (
    ALARM,
    INSUFFICIENT_DATA,
    OK,
    _decide,
    _promise_periods,
    _stable_periods,
    evaluate_periods,
)
from drill.alarms.evaluator import AlarmEvaluator
from drill.alarms.metric_delay import MetricDelays
from drill.clock import VirtualClock
from drill.sim.model import Fault, JobProfile
from drill.sim.sagemaker import SimSageMaker
from sagewarden import keys
from sagewarden.adapters.cloudwatch_hang_alarms import alarm_name
from tests.drill.alarms.builders import (
    GPU,
    HB,
    JOB,
    MIN,
    PREFIX,
    REGION,
    FakeAccount,
    FakeMetrics,
    _sim_request,
    changes,
    clear_alarms,
    drive,
    gpu,
    hang_spec,
    heartbeat,
    put_alarm,
    put_hang_alarms,
)


@pytest.fixture
def cw(aws: None) -> Any:
    return boto3.client("cloudwatch", region_name=REGION)


@pytest.fixture
def acct(cw: Any) -> FakeAccount:
    clock = VirtualClock()
    return FakeAccount(clock=clock, cloudwatch=cw, sagemaker=FakeMetrics(clock))


LOG_ALARM = alarm_name(PREFIX, JOB, "log_silence")
GPU_ALARM = alarm_name(PREFIX, JOB, "gpu_idle")  # the whole job idle (hosts 1-2)
LONE_ALARM = alarm_name(PREFIX, JOB, "gpu_lone_idle")  # one host idle while a peer is busy


# ----------------------------------------------------------------------------------------------
# Fakes and helpers
# ----------------------------------------------------------------------------------------------


def drive_every_minute(ev: AlarmEvaluator, clock: VirtualClock, until_ms: int) -> None:
    while clock.now_ms + MIN <= until_ms:
        clock.advance_by(MIN)
        ev.evaluate_due()


def moto_state(cw: Any, name: str) -> dict[str, Any]:
    alarms = cw.describe_alarms(AlarmNames=[name])["MetricAlarms"]
    assert len(alarms) == 1
    return dict(alarms[0])


def periods(text: str) -> list[bool | None]:
    """AWS documentation notation, oldest first: 0 = not breaching, X = breaching, - = missing."""
    return [None if c == "-" else c == "X" for c in text.split()]


# ----------------------------------------------------------------------------------------------
# The decision, against the AWS documentation
# ----------------------------------------------------------------------------------------------

RETAIN = "retain current state"
TREATMENTS = ("missing", "ignore", "breaching", "notBreaching")
# "Configuring how CloudWatch alarms treat missing data": evaluation range 5, EvaluationPeriods 3.
AWS_TABLE = [
    # DatapointsToAlarm 3
    ("0 - X - X", 3, [OK, OK, OK, OK]),
    ("0 - - - -", 3, [OK, OK, OK, OK]),
    ("- - - - -", 3, [INSUFFICIENT_DATA, RETAIN, ALARM, OK]),
    ("0 X X - X", 3, [ALARM, ALARM, ALARM, ALARM]),
    ("- - X - -", 3, [ALARM, RETAIN, ALARM, OK]),
    # DatapointsToAlarm 2 (M out of N)
    ("0 - X - X", 2, [ALARM, ALARM, ALARM, ALARM]),
    ("0 0 X 0 X", 2, [ALARM, ALARM, ALARM, ALARM]),
    ("0 - X - -", 2, [OK, OK, ALARM, OK]),
    ("- - - - 0", 2, [OK, OK, ALARM, OK]),
    ("- - - X -", 2, [ALARM, RETAIN, ALARM, OK]),
]


@pytest.mark.claim(
    "CloudWatch then alarms only once no datapoint is left in its evaluation range, which late minutes cannot cause while older datapoints remain"
)
@pytest.mark.parametrize(
    ("data", "m", "expected"), AWS_TABLE, ids=[f"{data}, {m} of 3 to alarm" for data, m, _ in AWS_TABLE]
)
def test_alarm_evaluator_matches_the_aws_missing_data_tables(data: str, m: int, expected: list[str]) -> None:
    got = []
    for treat in TREATMENTS:
        outcomes = {
            evaluate_periods(
                periods(data),
                evaluation_periods=3,
                datapoints_to_alarm=m,
                treat_missing_data=treat,
                current_state=current,
            )
            for current in (OK, ALARM)
        }
        got.append(RETAIN if outcomes == {OK, ALARM} else outcomes.pop())
    assert got == expected


def test_alarm_evaluator_premature_alarm_waits_for_breaching_data_to_age() -> None:
    # AWS: "- - - - X" and "- - - X -" do not alarm yet (the next datapoint may be fine)
    for data in ("- - - - X", "- - - X -"):
        assert evaluate_periods(periods(data), evaluation_periods=3, current_state=OK) == OK
    assert evaluate_periods(periods("- - X - -"), evaluation_periods=3, current_state=OK) == ALARM


@settings(max_examples=400, deadline=None)
@given(
    n=st.integers(1, 4),
    m_minus=st.integers(0, 3),
    extra=st.integers(0, 2),
    unsure=st.integers(0, 3),
    treat=st.sampled_from(TREATMENTS),
    data=st.data(),
)
def test_alarm_evaluator_stability_bound_never_skips_a_possible_change(
    n: int, m_minus: int, extra: int, unsure: int, treat: str, data: st.DataObject
) -> None:
    """Every outcome possible before the bound says so is OK, whatever data arrives meanwhile, and
    whatever the newest ``unsure`` periods of each evaluation read while their datapoints are late."""
    m = max(1, n - m_minus)
    rng = n + extra
    window = bytes(data.draw(st.lists(st.sampled_from(b"GBM"), min_size=rng, max_size=rng)))
    state = _decide(window, n, m, treat, OK)[0]
    bound = _stable_periods(window, n, m, treat, state, unsure)
    assert bound >= 1
    if state != OK:
        assert bound == 1
        return
    for j in range(1, bound):
        u = min(rng, max(j, unsure))
        for future in itertools.product(b"GBM", repeat=u):
            shifted = (window + bytes(j))[j:][: rng - u] + bytes(future)
            assert _decide(shifted, n, m, treat, OK)[0] == OK, (window, j, bytes(future))


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(1, 6),
    m_minus=st.integers(0, 3),
    extra=st.integers(0, 2),
    unsure=st.integers(0, 3),
    empty=st.integers(0, 3),
    empty_class=st.sampled_from([None, ord("G"), ord("M")]),
    future=st.sampled_from(b"GBM"),
    treat=st.sampled_from(TREATMENTS),
    current=st.sampled_from([OK, ALARM, INSUFFICIENT_DATA]),
    data=st.data(),
)
def test_alarm_evaluator_promise_never_skips_a_possible_change(
    n: int,
    m_minus: int,
    extra: int,
    unsure: int,
    empty: int,
    empty_class: int | None,
    future: int,
    treat: str,
    current: str,
    data: st.DataObject,
) -> None:
    """With every period to come of class ``future`` once complete, no evaluation before the
    promised one can change the state: the newest ``unsure`` periods may read as anything (a
    missing one stays missing), the newest ``empty`` ones as ``empty_class``."""
    m = max(1, n - m_minus)
    rng = n + extra
    window = bytes(data.draw(st.lists(st.sampled_from(b"GBM"), min_size=rng, max_size=rng)))
    state = _decide(window, n, m, treat, current)[0]
    promised = _promise_periods(
        window, future, n, m, treat, state, unsure=unsure, empty=empty, empty_class=empty_class
    )
    assert promised is not None and promised >= 1
    u = min(unsure, rng)
    e = min(empty, u)
    for j in range(1, min(promised, rng + 2)):
        final = (window + bytes([future]) * j)[-rng:]
        options = [
            bytes([empty_class])
            if (k >= u - e and empty_class is not None)
            else (b"M" if c == ord("M") else b"GBM")
            for k, c in enumerate(final[rng - u :])
        ]
        for tail in itertools.product(*options):
            assert _decide(final[: rng - u] + bytes(tail), n, m, treat, state)[0] == state


# ----------------------------------------------------------------------------------------------
# The supervisor's alarms
# ----------------------------------------------------------------------------------------------


@pytest.mark.claim("heartbeat `LogEvents` Sum ≤ 0, missing = breaching, N of N")
@pytest.mark.claim("how wide an alarm's evaluation range is (the shapes are tested with N and N + 2 periods)")
@pytest.mark.parametrize(
    ("extra", "delay"),
    [(0, 0), (2, 2)],
    ids=["a range of exactly n periods, on time", "a range two periods longer, two minutes late"],
)
def test_alarm_evaluator_log_silence_fires_after_exactly_n_silent_minutes(
    acct: FakeAccount, cw: Any, extra: int, delay: int
) -> None:
    """Breaching missing data: ALARM once N silent minutes (plus the range's extra periods) passed."""
    t0 = acct.clock.now_ms
    silent_from = t0 + 20 * MIN  # minutes [t0, t0 + 20 min) have log lines
    resume_at = silent_from + 40 * MIN
    heartbeat(acct, lambda t: 12.0 if t < silent_from or t >= resume_at else None)
    put_hang_alarms(cw, hang_spec(silence=5))
    ev = AlarmEvaluator(acct, evaluation_range_extra=extra)
    ev.evaluate_due()
    drive(ev, acct.clock, t0 + 90 * MIN)

    fire = silent_from + (5 + delay) * MIN
    assert changes(ev, LOG_ALARM) == [
        (t0 + MIN, INSUFFICIENT_DATA, OK),
        (fire, OK, ALARM),
        (resume_at + MIN, ALARM, OK),  # the first minute with log lines is complete
    ]
    # the only OK -> ALARM change is at `fire`: one minute earlier (N - 1 silent minutes) it was OK
    assert fire - silent_from == (5 + delay) * MIN
    assert ev.late_transitions == 0


@pytest.mark.claim(
    "one host idle while a peer is above `gpu_busy_percent`, this long: a dead host among busy ones. 0 turns the per-host alarms off"
)
def test_alarm_evaluator_gpu_idle_fires_when_one_host_is_idle(acct: FakeAccount, cw: Any) -> None:
    t0 = acct.clock.now_ms
    idle_from = t0 + 30 * MIN
    for host in (1, 3, 4):
        gpu(acct, host, lambda t: 760.0)
    gpu(acct, 2, lambda t: 0.0 if t >= idle_from else 755.0)
    put_hang_alarms(cw, hang_spec(hosts=4, idle=4))
    ev = AlarmEvaluator(acct)
    ev.evaluate_due()
    drive(ev, acct.clock, t0 + 60 * MIN)

    # one host idle among busy ones: the lone-idle alarm, after its 3 minutes; the whole-job alarm
    # (hosts 1-2, the busiest of them) stays OK because host 1 is busy
    assert changes(ev, LONE_ALARM) == [(t0 + MIN, INSUFFICIENT_DATA, OK), (idle_from + 3 * MIN, OK, ALARM)]
    assert changes(ev, GPU_ALARM) == [(t0 + MIN, INSUFFICIENT_DATA, OK)]
    event = next(
        e for e in ev.events if e["detail"]["state"]["value"] == ALARM and "gpu" in e["detail"]["alarmName"]
    )
    data = json.loads(event["detail"]["state"]["reasonData"])
    # IF(MIN < idle AND MAX > busy, 1, 0): 3 breaching of the last 6 (M of N)
    assert data["recentDatapoints"] == [0.0] * 3 + [1.0] * 3
    assert "statistic" not in data  # metric math has no single statistic
    assert moto_state(cw, LONE_ALARM)["StateValue"] == ALARM


def test_alarm_evaluator_whole_job_idle_fires_when_every_host_is_idle(acct: FakeAccount, cw: Any) -> None:
    t0 = acct.clock.now_ms
    idle_from = t0 + 30 * MIN
    for host in (1, 2, 3):
        gpu(acct, host, lambda t: 0.0 if t >= idle_from else 760.0)
    put_hang_alarms(cw, hang_spec(hosts=3, idle=4))
    ev = AlarmEvaluator(acct)
    ev.evaluate_due()
    drive(ev, acct.clock, t0 + 60 * MIN)
    assert changes(ev, GPU_ALARM) == [(t0 + MIN, INSUFFICIENT_DATA, OK), (idle_from + 4 * MIN, OK, ALARM)]
    assert changes(ev, LONE_ALARM) == [(t0 + MIN, INSUFFICIENT_DATA, OK)]  # nobody is busy: not lone


@pytest.mark.claim(
    "How MIN and MAX of several series treat a series without a datapoint at that minute is not documented either (AVG: as 0); the drill uses the series present, and the lone-idle alarm fills first (`FILL([...], 0)`), so it does not depend on it."
)
def test_alarm_evaluator_gpu_idle_ignores_hosts_without_data(acct: FakeAccount, cw: Any) -> None:
    """A period where some hosts have no datapoint uses the others (MIN over the present ones)."""
    t0 = acct.clock.now_ms
    gpu(acct, 1, lambda t: 760.0)
    gpu(acct, 2, lambda t: None if (t - t0) // MIN % 2 else 740.0)  # every other minute missing
    put_hang_alarms(cw, hang_spec(hosts=2, idle=3))
    ev = AlarmEvaluator(acct)
    ev.evaluate_due()
    drive(ev, acct.clock, t0 + 30 * MIN)
    assert changes(ev, GPU_ALARM) == [(t0 + MIN, INSUFFICIENT_DATA, OK)]


def test_alarm_evaluator_not_breaching_gpu_alarm_stays_ok_before_training(acct: FakeAccount, cw: Any) -> None:
    t0 = acct.clock.now_ms
    put_hang_alarms(cw, hang_spec(hosts=2, idle=3))  # no GPU datapoints at all
    ev = AlarmEvaluator(acct)
    ev.evaluate_due()
    wakes = drive(ev, acct.clock, t0 + 6 * 60 * MIN)  # wakes every minute: the ALARM may end any minute

    assert changes(ev, GPU_ALARM) == [(t0 + MIN, INSUFFICIENT_DATA, OK)]
    event = next(e for e in ev.events if e["detail"]["alarmName"] == GPU_ALARM)
    assert event["detail"]["state"]["reason"] == (
        "Threshold Crossed: no datapoints were received for 8 periods and 6 missing datapoints were "
        "treated as [NonBreaching]."  # 3 of 6 (M of N), a range of 6 + 2
    )
    assert ev.states[GPU_ALARM] == OK
    # without any heartbeat the silence alarm (breaching) alarms at the first evaluation
    assert changes(ev, LOG_ALARM) == [(t0 + MIN, INSUFFICIENT_DATA, ALARM)]
    assert wakes > 0


def test_alarm_evaluator_m_out_of_n(acct: FakeAccount, cw: Any) -> None:
    t0 = acct.clock.now_ms
    pattern = {3: 99.0, 5: 99.0, 9: 99.0, 15: 99.0, 16: 99.0}  # minute -> breaching value; else 10
    heartbeat(acct, lambda t: pattern.get((t - t0) // MIN, 10.0))
    name = put_alarm(cw, "m-of-n", EvaluationPeriods=3, DatapointsToAlarm=2)
    ev = AlarmEvaluator(acct)
    ev.evaluate_due()
    drive(ev, acct.clock, t0 + 25 * MIN)
    # each boundary evaluates the 3 minutes before it (all have data, so the range's extra
    # periods are not needed): 2 of [3,4,5] breach; [4,5,6] and [9,10,11] hold only one
    assert changes(ev, name) == [
        (t0 + MIN, INSUFFICIENT_DATA, OK),
        (t0 + 6 * MIN, OK, ALARM),  # [3,4,5]
        (t0 + 7 * MIN, ALARM, OK),  # [4,5,6]
        (t0 + 17 * MIN, OK, ALARM),  # [14,15,16]; [15,16,17] keeps it
        (t0 + 19 * MIN, ALARM, OK),  # [16,17,18]
    ]
    alarm_event = next(e for e in ev.events if e["detail"]["state"]["value"] == ALARM)
    assert alarm_event["detail"]["state"]["reason"].startswith(
        "Threshold Crossed: 2 out of the last 3 datapoints"
    )
    assert "(minimum 2 datapoints for OK -> ALARM transition)" in alarm_event["detail"]["state"]["reason"]


@pytest.mark.parametrize(
    ("op", "breaching"),
    [
        ("GreaterThanOrEqualToThreshold", {50.0, 51.0}),
        ("GreaterThanThreshold", {51.0}),
        ("LessThanThreshold", {49.0}),
        ("LessThanOrEqualToThreshold", {49.0, 50.0}),
    ],
    ids=[
        "greater than or equal",
        "greater than",
        "less than",
        "less than or equal",
    ],
)
def test_alarm_evaluator_comparison_operators(
    acct: FakeAccount, cw: Any, op: str, breaching: set[float]
) -> None:
    t0 = acct.clock.now_ms
    values = [49.0, 50.0, 51.0]
    heartbeat(acct, lambda t: values[(t - t0) // MIN % 3])
    name = put_alarm(cw, "op", ComparisonOperator=op, Threshold=50.0)
    ev = AlarmEvaluator(acct)
    ev.evaluate_due()
    seen: dict[float, str] = {}
    for i in range(1, 7):
        acct.clock.advance_to(t0 + i * MIN)
        ev.evaluate_due()
        seen[values[(i - 1) % 3]] = ev.states[name]
    assert seen == {v: (ALARM if v in breaching else OK) for v in values}


def test_alarm_evaluator_new_alarm_is_insufficient_data_without_event(acct: FakeAccount, cw: Any) -> None:
    name = put_alarm(cw, "quiet")  # TreatMissingData missing, and no data ever
    assert moto_state(cw, name)["StateValue"] == OK  # moto's own default, unlike CloudWatch
    ev = AlarmEvaluator(acct)
    ev.evaluate_due()
    assert ev.states == {name: INSUFFICIENT_DATA}
    assert moto_state(cw, name)["StateValue"] == INSUFFICIENT_DATA
    assert moto_state(cw, name)["StateReason"] == "Unchecked: Initial alarm creation"
    drive(ev, acct.clock, acct.clock.now_ms + 45 * MIN)
    assert ev.states == {name: INSUFFICIENT_DATA}
    assert ev.transitions == [] and acct.published == []


def test_alarm_evaluator_event_shape_and_moto_state(acct: FakeAccount, cw: Any) -> None:
    t0 = acct.clock.now_ms
    heartbeat(acct, lambda t: 6.0 if t < t0 + 10 * MIN else None)
    for host in (1, 2):
        gpu(acct, host, lambda t: 700.0)
    put_hang_alarms(cw, hang_spec(hosts=2, silence=4))
    ev = AlarmEvaluator(acct, evaluation_range_extra=0)
    ev.evaluate_due()
    drive(ev, acct.clock, t0 + 20 * MIN)

    assert acct.published == ev.events and len(ev.events) == 4  # three INSUFFICIENT_DATA -> OK, one ALARM
    event = next(e for e in ev.events if e["detail"]["state"]["value"] == ALARM)
    fixture = json.loads(
        (Path(__file__).parents[2] / "events" / "cloudwatch_alarm_state_change.json").read_text()
    )
    assert set(event) == set(fixture)
    assert set(event["detail"]) == set(fixture["detail"])
    assert set(event["detail"]["state"]) == set(fixture["detail"]["state"])
    # the template's rule pattern (tests/infra): source, detail-type, alarmName prefix
    assert event["source"] == "aws.cloudwatch"
    assert event["detail-type"] == "CloudWatch Alarm State Change"
    assert event["detail"]["alarmName"].startswith(keys.DEFAULT_ALARM_PREFIX)
    assert uuid.UUID(event["id"]).version == 4
    assert event["version"] == "0" and event["account"] == "123456789012" and event["region"] == REGION
    assert event["resources"] == [f"arn:aws:cloudwatch:{REGION}:123456789012:alarm:{LOG_ALARM}"]
    assert event["time"] == "2026-01-05T00:14:00Z"
    state = event["detail"]["state"]
    assert state["timestamp"] == "2026-01-05T00:14:00.000+0000"
    assert state["reason"] == (
        "Threshold Crossed: no datapoints were received for 4 periods and 4 missing datapoints were "
        "treated as [Breaching]."
    )
    data = json.loads(state["reasonData"])
    assert set(data) == {
        "version",
        "queryDate",
        "startDate",
        "statistic",
        "period",
        "recentDatapoints",
        "threshold",
        "evaluatedDatapoints",
    }
    assert data["statistic"] == "Sum" and data["period"] == 60 and data["threshold"] == 0.0
    assert data["queryDate"] == "2026-01-05T00:14:00.000+0000"
    assert data["startDate"] == "2026-01-05T00:10:00.000+0000"
    assert [d["timestamp"] for d in data["evaluatedDatapoints"]] == [
        "2026-01-05T00:13:00.000+0000",
        "2026-01-05T00:12:00.000+0000",
        "2026-01-05T00:11:00.000+0000",
        "2026-01-05T00:10:00.000+0000",
    ]
    previous = event["detail"]["previousState"]
    assert previous["value"] == OK and previous["timestamp"] == "2026-01-05T00:01:00.000+0000"
    assert previous["reason"] == (
        "Threshold Crossed: 4 out of the last 4 datapoints [6.0 (05/01/26 00:00:00), 6.0 (04/01/26 23:59:00), "
        "6.0 (04/01/26 23:58:00), 6.0 (04/01/26 23:57:00)] were not less than or equal to the threshold (0.0) "
        "(minimum 1 datapoint "
        "for INSUFFICIENT_DATA -> OK transition)."
    )
    assert json.loads(previous["reasonData"])["recentDatapoints"] == [6.0, 6.0, 6.0, 6.0]
    assert event["detail"]["configuration"] == {
        "description": f"sagewarden: no log events from {JOB} for 4 min",
        "metrics": [
            {
                "id": event["detail"]["configuration"]["metrics"][0]["id"],
                "metricStat": {
                    "metric": {"namespace": HB[0], "name": HB[1], "dimensions": {"TrainingJobName": JOB}},
                    "period": 60,
                    "stat": "Sum",
                },
                "returnData": True,
            }
        ],
    }
    gpu_event = next(e for e in ev.events if e["detail"]["alarmName"] == GPU_ALARM)
    metrics = gpu_event["detail"]["configuration"]["metrics"]
    assert [m["id"] for m in metrics] == ["h1", "h2", "busiest"]
    assert metrics[0]["metricStat"]["metric"]["dimensions"] == {"Host": f"{JOB}/algo-1"}
    assert metrics[0]["returnData"] is False
    assert metrics[2] == {
        "id": "busiest",
        "expression": "MAX([h1,h2])",
        "label": "busiest watched host GPUUtilization",
        "returnData": True,
    }
    # the state is mirrored into moto, so describe_alarms agrees
    described = moto_state(cw, LOG_ALARM)
    assert described["StateValue"] == ALARM
    assert described["StateReason"] == state["reason"]
    assert json.loads(described["StateReasonData"]) == data


def test_alarm_evaluator_event_reaches_the_alarm_handler_parser(acct: FakeAccount, cw: Any) -> None:
    from sagewarden.handlers.on_alarm_state_change import hang_signal_from_event

    t0 = acct.clock.now_ms
    heartbeat(acct, lambda t: None)
    put_hang_alarms(cw, hang_spec(hosts=1, silence=2))
    ev = AlarmEvaluator(acct, evaluation_range_extra=0)
    ev.evaluate_due()
    drive(ev, acct.clock, t0 + 5 * MIN)
    event = next(e for e in ev.events if e["detail"]["alarmName"] == LOG_ALARM)
    signal = hang_signal_from_event(event, PREFIX)
    assert signal is not None
    assert (signal.job_name, signal.signal, signal.state) == (JOB, "log_silence", ALARM)
    assert signal.since_ms == t0 + MIN


def test_alarm_evaluator_forgets_deleted_alarms(acct: FakeAccount, cw: Any) -> None:
    t0 = acct.clock.now_ms
    heartbeat(acct, lambda t: None)
    names = put_hang_alarms(cw, hang_spec(hosts=1, silence=2))
    ev = AlarmEvaluator(acct)
    ev.evaluate_due()
    drive(ev, acct.clock, t0 + 10 * MIN)
    assert ev.states[LOG_ALARM] == ALARM
    published = len(acct.published)

    cw.delete_alarms(AlarmNames=names)
    assert ev.next_time() == t0 + 11 * MIN  # the change is noticed without describe_alarms
    acct.clock.advance_to(t0 + 11 * MIN)
    assert ev.evaluate_due() == []
    assert ev.states == {} and len(acct.published) == published
    assert ev.next_time() is None

    put_hang_alarms(cw, hang_spec(hosts=1, silence=2))  # re-created later: a new alarm
    ev.evaluate_due()
    assert ev.states == {LOG_ALARM: INSUFFICIENT_DATA, GPU_ALARM: INSUFFICIENT_DATA}


def test_alarm_evaluator_updating_an_alarm_keeps_its_state(acct: FakeAccount, cw: Any) -> None:
    t0 = acct.clock.now_ms
    heartbeat(acct, lambda t: None)
    put_hang_alarms(cw, hang_spec(hosts=1, silence=2))
    ev = AlarmEvaluator(acct)
    ev.evaluate_due()
    drive(ev, acct.clock, t0 + 10 * MIN)
    before = list(ev.transitions)
    put_hang_alarms(cw, hang_spec(hosts=1, silence=2))  # the supervisor's idempotent ensure
    assert moto_state(cw, LOG_ALARM)["StateValue"] == OK  # moto reset it
    acct.clock.advance_by(10_000)
    ev.evaluate_due()
    assert ev.states[LOG_ALARM] == ALARM and ev.transitions == before
    assert moto_state(cw, LOG_ALARM)["StateValue"] == ALARM  # mirrored back


def test_alarm_evaluator_new_configuration_applies_from_the_update_on(acct: FakeAccount, cw: Any) -> None:
    t0 = acct.clock.now_ms
    heartbeat(acct, lambda t: 12.0)
    name = put_alarm(cw, "retuned", EvaluationPeriods=3, DatapointsToAlarm=3, Threshold=50.0)
    ev = AlarmEvaluator(acct)
    ev.evaluate_due()
    drive_every_minute(ev, acct.clock, t0 + 2 * MIN)  # OK, and not due again before t0 + 4 min
    acct.clock.advance_by(30_000)
    put_alarm(cw, "retuned", EvaluationPeriods=3, DatapointsToAlarm=3, Threshold=5.0)  # now 12 > 5 breaches
    ev.evaluate_due()
    assert ev.states[name] == OK  # t0 + 2 min was evaluated with the threshold it had then
    acct.clock.advance_to(t0 + 3 * MIN)
    ev.evaluate_due()
    assert changes(ev, name) == [(t0 + MIN, INSUFFICIENT_DATA, OK), (t0 + 3 * MIN, OK, ALARM)]
    assert ev.late_transitions == 0


def test_alarm_evaluator_is_deterministic(cw: Any) -> None:
    def run() -> list[dict[str, Any]]:
        clock = VirtualClock()
        acct = FakeAccount(clock=clock, cloudwatch=cw, sagemaker=FakeMetrics(clock))
        clear_alarms(cw)
        t0 = clock.now_ms
        heartbeat(acct, lambda t: 5.0 if (t - t0) // MIN % 17 < 9 else None)
        gpu(acct, 1, lambda t: 700.0)
        gpu(acct, 2, lambda t: 0.0 if (t - t0) // MIN % 23 < 6 else 700.0)
        gpu(acct, 3, lambda t: 700.0)
        put_hang_alarms(cw, hang_spec(hosts=3, silence=4, idle=3))
        ev = AlarmEvaluator(acct)
        ev.evaluate_due()
        drive(ev, clock, t0 + 4 * 60 * MIN)
        return acct.published

    first, second = run(), run()
    assert len(first) > 10
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)
    assert len({e["id"] for e in first}) == len(first)


@pytest.mark.claim("The alarms and the supervisor's own metric reads see only datapoints that have arrived.")
@pytest.mark.parametrize("late", [False, True], ids=["datapoints on time", "datapoints arriving late"])
def test_alarm_evaluator_waking_only_when_asked_equals_every_minute(cw: Any, late: bool) -> None:
    """Also with datapoints arriving late (drill/alarms/metric_delay.py's defaults): the stability bound
    counts the newest periods that may still lack datapoints as unknown."""
    delays = MetricDelays(11) if late else None

    def run(every_minute: bool) -> tuple[list[tuple[int, str, str, str]], int, int]:
        clock = VirtualClock()
        acct = FakeAccount(clock=clock, cloudwatch=cw, sagemaker=FakeMetrics(clock))
        clear_alarms(cw)
        t0 = clock.now_ms
        heartbeat(acct, lambda t: None if 100 <= (t - t0) // MIN % 300 < 140 else 7.0)
        gpu(acct, 1, lambda t: 700.0)
        gpu(acct, 2, lambda t: 0.0 if 200 <= (t - t0) // MIN % 400 < 230 else 700.0)
        put_hang_alarms(cw, hang_spec(hosts=2, silence=30, idle=20, lone=20))
        put_alarm(
            cw,
            "rate",
            ComparisonOperator="LessThanThreshold",
            Threshold=5.0,
            EvaluationPeriods=5,
            DatapointsToAlarm=3,
        )
        put_alarm(  # 3 of 3: an alarm that one datapoint can fire may change any minute (woken every minute)
            cw,
            "ignore",
            ComparisonOperator="LessThanThreshold",
            Threshold=6.0,
            TreatMissingData="ignore",
            EvaluationPeriods=3,
            DatapointsToAlarm=3,
        )
        ev = AlarmEvaluator(acct, delays=delays)
        ev.evaluate_due()
        until = t0 + 24 * 60 * MIN
        if every_minute:
            drive_every_minute(ev, clock, until)
            wakes = 24 * 60
        else:
            wakes = drive(ev, clock, until)
        assert ev.late_transitions == 0
        return ev.transitions, wakes, acct.sagemaker.calls

    minute_by_minute, _, calls_every_minute = run(True)
    jumping, wakes, calls_jumping = run(False)
    assert jumping == minute_by_minute
    assert {new for _, _, _, new in jumping} == {OK, ALARM, INSUFFICIENT_DATA}
    naive_calls = 24 * 60 * 3  # 3 series (one heartbeat, two hosts) asked every minute
    print(f"\n{wakes} wakes instead of {24 * 60}; {calls_jumping} metric calls instead of {naive_calls}")
    # late datapoints: the 3-of-5 "rate" alarm's newest 3 periods are always unsure, so it is
    # looked at every minute (its fetches are still batched)
    assert wakes < 24 * 60 or late
    assert calls_jumping == calls_every_minute < naive_calls // 2  # alarms are fetched when due


@pytest.mark.claim(
    "How MIN and MAX of several series treat a series without a datapoint at that minute is not documented either (AVG: as 0); the drill uses the series present, and the lone-idle alarm fills first (`FILL([...], 0)`), so it does not depend on it."
)
def test_alarm_evaluator_math_functions_and_missing_series(acct: FakeAccount, cw: Any) -> None:
    t0 = acct.clock.now_ms
    gpu(acct, 1, lambda t: 10.0)
    gpu(acct, 2, lambda t: 30.0 if (t - t0) // MIN % 2 == 0 else None)
    expected = {"MIN": (10.0, 10.0), "MAX": (30.0, 10.0), "AVG": (20.0, 10.0), "SUM": (40.0, 10.0)}
    for func in expected:
        metrics: list[dict[str, Any]] = [
            {
                "Id": f"h{h}",
                "MetricStat": {
                    "Metric": {
                        "Namespace": GPU[0],
                        "MetricName": GPU[1],
                        "Dimensions": [{"Name": "Host", "Value": f"{JOB}/algo-{h}"}],
                    },
                    "Period": 60,
                    "Stat": "Average",
                },
                "ReturnData": False,
            }
            for h in (1, 2)
        ]
        metrics.append({"Id": "e1", "Expression": f"{func}([h1, h2])", "ReturnData": True})
        cw.put_metric_alarm(
            AlarmName=f"{PREFIX}{func.lower()}",
            Metrics=metrics,
            EvaluationPeriods=2,
            DatapointsToAlarm=2,
            Threshold=0.0,
            ComparisonOperator="GreaterThanThreshold",
            TreatMissingData="missing",
        )
    ev = AlarmEvaluator(acct)
    ev.evaluate_due()
    drive(ev, acct.clock, t0 + 3 * MIN)
    for func, (even, odd) in expected.items():
        event = next(e for e in ev.events if e["detail"]["alarmName"] == f"{PREFIX}{func.lower()}")
        assert event["detail"]["state"]["value"] == ALARM
        # first evaluation (t0 + 1 min): minutes -1 (odd: host 2 missing) and 0 (even: both hosts)
        assert json.loads(event["detail"]["state"]["reasonData"])["recentDatapoints"] == [odd, even]


def test_alarm_evaluator_rejects_what_it_cannot_evaluate(acct: FakeAccount, cw: Any) -> None:
    request = {
        "AlarmName": PREFIX + "p99",
        "Namespace": HB[0],
        "MetricName": HB[1],
        "ExtendedStatistic": "p99",
        "Period": 60,
        "EvaluationPeriods": 1,
        "Threshold": 1.0,
        "ComparisonOperator": "GreaterThanThreshold",
    }
    cw.put_metric_alarm(**request)
    ev = AlarmEvaluator(acct)
    with pytest.raises(ValueError, match="percentile"):
        ev.evaluate_due()
    with pytest.raises(ValueError, match="EvaluationPeriods"):
        evaluate_periods([None], evaluation_periods=2)


@pytest.mark.claim(
    "Hosts are split into balanced groups (11 hosts → 6 + 5, never 10 + 1) because metric math allows at most 10 metrics per alarm"
)
def test_alarm_evaluator_refuses_more_than_ten_metrics_or_a_day_of_periods() -> None:
    """CloudWatch: "a math expression used for an alarm can include as many as 10 metrics" (a
    hard limit); the supervisor's per-host alarms split hosts into groups of at most 10."""
    from drill.alarms.config import parse_alarm

    def alarm(hosts: int) -> dict[str, Any]:
        ids = ",".join(f"h{h}" for h in range(1, hosts + 1))
        return {
            "AlarmName": PREFIX + "wide",
            "EvaluationPeriods": 3,
            "Threshold": 1.0,
            "ComparisonOperator": "LessThanThreshold",
            "Metrics": [
                *(
                    {
                        "Id": f"h{h}",
                        "MetricStat": {
                            "Metric": {"Namespace": GPU[0], "MetricName": GPU[1], "Dimensions": []},
                            "Period": 60,
                            "Stat": "Average",
                        },
                        "ReturnData": False,
                    }
                    for h in range(1, hosts + 1)
                ),
                {"Id": "e", "Expression": f"MIN([{ids}])", "ReturnData": True},
            ],
        }

    assert len(parse_alarm(alarm(10)).series) == 10
    with pytest.raises(ValueError, match="at most 10"):
        parse_alarm(alarm(11))
    # "the number of evaluation periods ... multiplied by the length of each evaluation period
    # cannot exceed one day": the supervisor caps its windows at 1,440 one-minute periods
    assert parse_alarm({**alarm(2), "EvaluationPeriods": 1440}).evaluation_periods == 1440
    with pytest.raises(ValueError, match="exceed one day"):
        parse_alarm({**alarm(2), "EvaluationPeriods": 1441})


# ----------------------------------------------------------------------------------------------
# On the simulated SageMaker: a 30-day, 8-host job
# ----------------------------------------------------------------------------------------------


def test_alarm_evaluator_thirty_days_on_the_simulated_sagemaker(aws: None, cw: Any) -> None:
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="sim-ckpt-bucket")
    clock = VirtualClock()
    sim = SimSageMaker(clock, s3_client=s3)
    acct = FakeAccount(clock=clock, cloudwatch=cw, sagemaker=sim)
    day = 24 * 60 * MIN
    sim.set_profile("r1", JobProfile(total_steps=10**9, checkpoint_every_steps=10**9))
    sim.inject(Fault(kind="checkpoint_save_long", after_training_min=3 * 24 * 60, duration_min=12))
    sim.inject(Fault(kind="dead_host", after_training_min=27 * 24 * 60, host=5))
    job = "sw-r1-a01"
    sim.create_training_job(**_sim_request(job, 8, 28 * 24 * 3600))
    while sim.job(job).training_started_ms is None:
        sim.advance(sim.next_event_time() or clock.now_ms)
    spec = hang_spec(job=job, hosts=8, silence=30, idle=20)
    put_hang_alarms(cw, spec)
    spin = put_alarm(  # all GPUs of host 1 near 100 % (a collective spinning): 3 of 5 minutes
        cw,
        "spin",
        Namespace=GPU[0],
        MetricName=GPU[1],
        Dimensions=[{"Name": "Host", "Value": f"{job}/algo-1"}],
        Statistic="Average",
        ComparisonOperator="GreaterThanOrEqualToThreshold",
        Threshold=790.0,
        EvaluationPeriods=5,
        DatapointsToAlarm=3,
        TreatMissingData="notBreaching",
    )
    ev = AlarmEvaluator(acct)
    end = clock.now_ms + 30 * day
    cpu = 0.0
    wakes = 0
    while True:
        started = time.process_time()
        t_eval = ev.next_time()
        cpu += time.process_time() - started
        candidates = [t for t in (sim.next_event_time(), t_eval) if t is not None]
        t = max(min(candidates), clock.now_ms)
        if t > end:
            break
        sim.advance(t)
        started = time.process_time()
        ev.evaluate_due()
        cpu += time.process_time() - started
        wakes += 1
    print(
        f"\n30 virtual days, 8 hosts, 3 alarms: {cpu:.2f} s CPU in the evaluator, {wakes} wakes, "
        f"{ev.fetches} metric_datapoints calls, {ev.refreshes} describe_alarms reads"
    )

    silence_alarm = alarm_name(PREFIX, job, "log_silence")
    idle_alarm = alarm_name(PREFIX, job, "gpu_idle")
    lone_alarm = alarm_name(PREFIX, job, "gpu_lone_idle")
    dead_at = next(t for t, name, kind, _ in sim.fault_log if kind == "dead_host")
    dead_minute = -(-dead_at // MIN) * MIN  # first per-minute sample taken while the host is dead
    beats = sim.metric_datapoints(
        HB[0], HB[1], {keys.HEARTBEAT_DIMENSION: job}, dead_at - 60 * MIN, dead_at + MIN, 60, "Sum"
    )
    last_beat = max(t for t, _ in beats)
    ended = sim.job(job).training_ended_ms
    assert ended is not None and sim.job(job).ended_reason == "max_runtime"
    assert [(old, new) for _, old, new in changes(ev, silence_alarm)] == [
        (INSUFFICIENT_DATA, OK),
        (OK, ALARM),
    ]
    assert (
        changes(ev, silence_alarm)[1][0] == last_beat + MIN + (30 + 2) * MIN
    )  # the 12-min save did not fire
    lone = changes(ev, lone_alarm)  # host 5 idle while its peers spin
    assert [(old, new) for _, old, new in lone] == [(INSUFFICIENT_DATA, OK), (OK, ALARM), (ALARM, OK)]
    assert lone[1][0] == dead_minute + 3 * MIN
    assert lone[2][0] > ended  # data stopped: notBreaching brings it back to OK
    # the whole job was never idle (hosts 1-2 kept computing or spinning)
    assert [(old, new) for _, old, new in changes(ev, idle_alarm)] == [(INSUFFICIENT_DATA, OK)]
    spinning = changes(ev, spin)
    assert [(old, new) for _, old, new in spinning] == [(INSUFFICIENT_DATA, OK), (OK, ALARM), (ALARM, OK)]
    assert spinning[1][0] == dead_minute + 3 * MIN  # the live hosts spin at ~800 while host 5 is dead
    assert ev.late_transitions == 0
    assert wakes < 30 * 24 * 60 // 2  # the 3-of-5 alarm may change every 3rd minute; the sim wakes too
