"""One clock: every timestamp the simulated account hands the supervisor is virtual time.

moto stamps alarm states with the machine's clock; the supervisor decides on the drill's virtual
clock (e.g. a lone idle host at start-up must have been in ALARM for 10 minutes, measured from the
alarm's state timestamp). A state set at virtual time T must be described with T.
"""

from __future__ import annotations

import pytest

from drill.account.local import LocalAccount
from drill.alarms.decision import ALARM, INSUFFICIENT_DATA
from drill.alarms.evaluator import AlarmEvaluator
from sagewarden.domain.vocabulary.actions import EnsureHangAlarms
from sagewarden.usecases.aws_events import to_ms

MIN = 60_000
JOB = "sw-clock-01KE5Q86000DNQ47GXEV9VZMPH-a001"
RUN = "01KE5Q86000DNQ47GXEV9VZMPH"
SPEC = EnsureHangAlarms(JOB, 1, 2, 8, 30, 1.0, 20)


def _described(account: LocalAccount) -> dict[str, dict]:
    pages = account.supervisor.alarms._cw.get_paginator("describe_alarms").paginate(
        AlarmNamePrefix=account.supervisor.alarms.prefix
    )
    return {a["AlarmName"]: a for page in pages for a in page["MetricAlarms"]}


@pytest.mark.parametrize(
    "backend_reads", [False, True], ids=["calls through moto's api", "calls answered from moto's backends"]
)
def test_alarm_state_timestamps_are_the_virtual_time_of_the_change(template, backend_reads):
    with LocalAccount(template, store="memory", backend_reads=backend_reads, iam_replay=False) as account:
        clock = account.clock
        clock.advance_by(7 * MIN + 17_000)  # not on a minute boundary
        evaluator = AlarmEvaluator(account)
        account.supervisor.alarms.ensure(SPEC, RUN)
        created = clock.now_ms
        evaluator.evaluate_due()
        for alarm in _described(account).values():
            assert alarm["StateValue"] == INSUFFICIENT_DATA
            assert to_ms(alarm["StateUpdatedTimestamp"]) == created
            assert to_ms(alarm["AlarmConfigurationUpdatedTimestamp"]) == created

        boundary = (created // MIN + 1) * MIN
        clock.advance_to(boundary + 25_000)  # evaluated late in the minute: the change is at the boundary
        evaluator.evaluate_due()
        silence = next(a for n, a in _described(account).items() if n.endswith("--log-silence"))
        assert silence["StateValue"] == ALARM  # no heartbeat at all: missing data is breaching
        assert to_ms(silence["StateUpdatedTimestamp"]) == boundary
        assert to_ms(silence["StateTransitionedTimestamp"]) == boundary
        inventory = dict((k, (s, since)) for k, s, since in account.supervisor.alarms.inventory()[JOB])
        assert inventory["log_silence"] == (ALARM, boundary)

        # re-putting an alarm (a learned window) keeps its state and when it entered it
        clock.advance_by(30 * MIN)
        account.supervisor.alarms.ensure(SPEC, RUN)
        evaluator.evaluate_due()
        silence = next(a for n, a in _described(account).items() if n.endswith("--log-silence"))
        assert silence["StateValue"] == ALARM
        assert to_ms(silence["StateTransitionedTimestamp"]) == boundary
        assert to_ms(silence["AlarmConfigurationUpdatedTimestamp"]) == clock.now_ms


def test_alarm_state_change_events_carry_the_virtual_time(template):
    with LocalAccount(template, store="memory", iam_replay=False) as account:
        account.clock.advance_by(3 * MIN)
        evaluator = AlarmEvaluator(account)
        account.supervisor.alarms.ensure(SPEC, RUN)
        evaluator.evaluate_due()
        boundary = (account.clock.now_ms // MIN + 1) * MIN
        account.clock.advance_to(boundary)
        events = evaluator.evaluate_due()
        assert events and {to_ms(e["time"]) for e in events} == {boundary}
        assert {to_ms(e["detail"]["state"]["timestamp"]) for e in events} == {boundary}
