"""When each alarm is looked at next (a mixin of `AlarmEvaluator`): the queue of checks, the check
after a phase change, and the periods before a state could change.

Why: docs/drill.md (*The alarm evaluator*: speed)."""

from __future__ import annotations

import heapq
from typing import Any

from drill.alarms.config import _OPERATORS, Bound, SeriesKey
from drill.alarms.decision import _BREACH, _GOOD, _MISSING, _promise_periods
from drill.alarms.series import MINUTE_MS, _AlarmState


class AlarmSchedule:
    """Scheduling part of ``AlarmEvaluator`` (a mixin): the attributes are the evaluator's."""

    period_ms: int
    sagemaker: Any
    _queue: list[tuple[int, str]]
    _alarms: dict[str, _AlarmState]
    _promises: bool

    def _boundary(self, ms: int) -> int:
        return ms - ms % self.period_ms

    def _schedule(self, alarm: _AlarmState, at: int) -> None:
        """Set the alarm's next check; the queue keeps the earliest at hand (no scan per step)."""
        if at != alarm.next_check or not alarm.queued:
            alarm.next_check = at
            alarm.queued = True
            heapq.heappush(self._queue, (at, alarm.config.name))

    def _earliest_check(self) -> int | None:
        queue = self._queue
        while queue:
            at, name = queue[0]
            alarm = self._alarms.get(name)
            if alarm is not None and alarm.next_check == at:
                return at
            heapq.heappop(queue)  # stale: the alarm was forgotten or rescheduled
        return None

    def _due_alarms(self, target: int) -> list[_AlarmState]:
        due: dict[str, _AlarmState] = {}
        queue = self._queue
        while queue and queue[0][0] <= target:
            at, name = heapq.heappop(queue)
            alarm = self._alarms.get(name)
            if alarm is not None and alarm.next_check == at:
                alarm.queued = False
                if alarm.evaluated_to < target:
                    due[name] = alarm
                else:  # pragma: no cover - a check is always after the last evaluation
                    self._schedule(alarm, alarm.evaluated_to + self.period_ms)
        return [due[name] for name in sorted(due)]

    def _first_check_after(self, alarm: _AlarmState, at_ms: int) -> int:
        bucket = -(-at_ms // MINUTE_MS) * MINUTE_MS  # the first sample of the new phase
        end = -(-(bucket + 1) // alarm.period_ms) * alarm.period_ms  # its period's end
        return max(-(-end // self.period_ms) * self.period_ms, alarm.evaluated_to + self.period_ms)

    def _future_class(self, alarm: _AlarmState) -> int | None:
        """The class every period will have while the alarm's jobs keep their current phases
        (bounded series only; None when it cannot be told)."""
        cfg = alarm.config
        states: dict[SeriesKey, Bound | None] = {}
        for key in cfg.series:
            if key in states:
                continue
            bounded, bound = self.sagemaker.metric_bound_now(
                key.namespace, key.metric, dict(key.dimensions), key.period_s, key.stat
            )
            if not bounded:
                return None
            states[key] = bound
        future = alarm.bound_of(states)
        compare = _OPERATORS[cfg.comparison]
        if future is None:
            return _MISSING
        if compare(future[0], cfg.threshold) == compare(future[1], cfg.threshold):
            return _BREACH if compare(future[0], cfg.threshold) else _GOOD
        return None

    def _promise(self, alarm: _AlarmState, window: bytes | bytearray) -> int | None:
        """Periods until the state may change if every series keeps the datapoints it has now
        (a bounded series does until its job's next phase change, which ``_settle`` looks at):
        None when that cannot be promised; a very large number when it never changes."""
        cfg = alarm.config
        if not self._promises or alarm.last_end is None:
            return None
        c = self._future_class(alarm)
        if c is None:
            return None
        alarm.promise = c
        return _promise_periods(
            window,
            c,
            cfg.evaluation_periods,
            cfg.datapoints_to_alarm,
            cfg.treat_missing,
            alarm.state,
            unsure=min(alarm.unsure, len(window)),
            empty=alarm.empty,
            empty_class=alarm.empty_class,
        )
