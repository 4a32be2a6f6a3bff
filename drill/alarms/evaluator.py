"""`AlarmEvaluator`: CloudWatch metric-alarm evaluation for the drill (moto never evaluates alarms).

Runs the parts in `drill/alarms/` (decision, config, series, metric_delay, sync, events, schedule):
which alarms exist, when each is evaluated, and the evaluation.
Why: docs/drill.md (*The alarm evaluator*), docs/fidelity.md."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from drill.alarms.config import (
    _OPERATORS,
    AlarmConfig,
    SeriesKey,
    _bound_function,
    _job_of,
    _value_function,
    parse_alarm,
)
from drill.alarms.decision import (
    _BREACH,
    _GOOD,
    _MISSING,
    ALARM,
    INSUFFICIENT_DATA,
    _decide,
    _evaluated,
    _stable_periods,
)
from drill.alarms.events import state_change_event, transition_reason
from drill.alarms.metric_delay import MetricDelays
from drill.alarms.schedule import AlarmSchedule
from drill.alarms.series import MINUTE_MS, Arrivals, SeriesFetch, _AlarmState, _SeriesData
from drill.alarms.sync import AlarmSync
from sagewarden import keys

__all__ = ["AlarmEvaluator"]

INITIAL_REASON = "Unchecked: Initial alarm creation"
DEFAULT_ACCOUNT = "123456789012"
DEFAULT_EVALUATION_RANGE_EXTRA = 2


class _Clock(Protocol):
    now_ms: int


class _Account(Protocol):
    """What the evaluator needs from the drill account (``drill.account.local.LocalAccount``)."""

    clock: Any
    cloudwatch: Any
    sagemaker: Any

    def publish_event(self, event: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class _Transition:
    at_ms: int
    alarm: _AlarmState
    old: str
    new: str
    reason: str
    reason_data: str
    previous: tuple[str, str, int]  # reason, reason data, timestamp of the old state


class AlarmEvaluator(AlarmSchedule, AlarmSync, Arrivals, SeriesFetch):
    """Evaluates the supervisor's CloudWatch alarms in the drill (see the module docstring)."""

    def __init__(
        self,
        acct: _Account,
        *,
        period_ms: int = MINUTE_MS,
        prefix: str | None = None,
        evaluation_range_extra: int = DEFAULT_EVALUATION_RANGE_EXTRA,
        account_id: str = DEFAULT_ACCOUNT,
        region: str | None = None,
        delays: MetricDelays | None = None,
    ) -> None:
        if period_ms <= 0 or period_ms % MINUTE_MS:
            raise ValueError("period_ms must be a positive multiple of 60000")
        if evaluation_range_extra < 0:
            raise ValueError("evaluation_range_extra must be >= 0")
        self.acct = acct
        self.clock: _Clock = acct.clock
        self.cloudwatch = acct.cloudwatch
        self.sagemaker = acct.sagemaker
        self.period_ms = period_ms
        self.prefix = keys.DEFAULT_ALARM_PREFIX if prefix is None else prefix
        self.range_extra = evaluation_range_extra
        # late datapoints: the account's model (drill/alarms/metric_delay.py), none without one
        found = delays if delays is not None else getattr(acct, "metric_delays", None)
        self.delays: MetricDelays = found if found is not None else MetricDelays.none()
        self._as_of = 0  # the evaluation time masked values are computed for
        self.account_id = account_id
        self.region = (
            region or getattr(getattr(self.cloudwatch, "meta", None), "region_name", None) or "us-east-1"
        )
        self.states: dict[str, str] = {}
        self._in_alarm: set[str] = set()  # names whose state is ALARM (kept with ``states``)
        self.transitions: list[tuple[int, str, str, str]] = []
        self.events: list[dict[str, Any]] = []
        self.late_transitions = 0
        self.refreshes = 0  # describe_alarms reads (diagnostics)
        self.fetches = 0  # metric_datapoints calls (diagnostics)
        self._alarms: dict[str, _AlarmState] = {}
        self._series: dict[SeriesKey, _SeriesData] = {}
        self._evaluated_to = self._boundary(self.clock.now_ms)
        self._backend = self._moto_backend()
        self._fingerprint: dict[str, tuple[int, Any]] | None = None
        self._backend_reads: bool | None = None  # None until a read through the API has compared
        self._queue: list[tuple[int, str]] = []  # (next_check, alarm name); stale entries skipped
        self._touched: set[str] = set()  # alarm names put or deleted through the client since the last read
        self._backend_size = -1
        self._hooked = self._hook_client()
        self._users: dict[SeriesKey, set[str]] = {}  # series -> names of the alarms reading it
        self._dirty = True
        self._last_refresh_minute: int | None = None
        # phase changes of the simulated jobs (see "Speed" in the module docstring)
        self._job_alarms: dict[str, set[str]] = {}  # job name -> alarms reading one of its series
        self._dirty_jobs: dict[str, list[int]] = {}  # job -> [first, last, unsure] changes not yet settled
        listen = getattr(self.sagemaker, "add_phase_listener", None)
        self._promises = listen is not None and hasattr(self.sagemaker, "metric_bound_now")
        if listen is not None and self._promises:
            listen(self._on_phase_change)

    # -- public ----------------------------------------------------------------------------------
    def next_time(self) -> int | None:
        """The next minute boundary at which an alarm may change state (None without alarms)."""
        self._settle()
        nxt = self._evaluated_to + self.period_ms
        if self._backend is None or self._changed():
            return nxt
        earliest = self._earliest_check()
        if earliest is None:
            return None
        return max(nxt, earliest)

    def alarms_in_alarm(self) -> bool | None:
        """Whether an alarm this evaluator manages is in ALARM and still exists (None without
        moto's backend: the caller looks itself). A set kept with the states, not a scan of every
        alarm, so the drill's every-step question does not grow with the number of alarms."""
        if self._backend is None:
            return None
        alarms = self._backend.alarms
        return any(name in alarms for name in self._in_alarm)

    def evaluate_due(self) -> list[dict[str, Any]]:
        """Evaluate every alarm at every boundary up to now; returns the events published."""
        now = self.clock.now_ms
        target = self._boundary(now)
        self._settle()
        found = self._refresh(now, target)
        # an alarm is evaluated (every boundary since its last evaluation, exactly) once a change
        # has become possible; until then its state provably stays, and its fetches are batched
        pending = self._due_alarms(target)
        if pending:
            self._fetch(pending, target)
            for alarm in pending:
                found += self._evaluate(alarm, target)
        self._evaluated_to = max(self._evaluated_to, target)
        found.sort(key=lambda t: (t.at_ms, t.alarm.config.name))
        published = []
        for tr in found:
            if tr.at_ms < target:
                self.late_transitions += 1
            published.append(self._announce(tr))
        return published

    # -- alarms ----------------------------------------------------------------------------------
    def _refresh(self, now: int, target: int) -> list[_Transition]:
        """Re-read the alarms if they may have changed; returns transitions of updated alarms' catch-up."""
        found: list[_Transition] = []
        if self._backend is not None:
            if not self._changed():
                return found
        else:
            minute = now // MINUTE_MS
            if minute == self._last_refresh_minute:
                return found
            self._last_refresh_minute = minute
        self.refreshes += 1
        previous = self._fingerprint
        touched, self._touched = self._touched, set()
        if self._backend is None:
            fingerprint = None
        elif (
            previous is not None
            and self._hooked
            and len(self._backend.alarms)
            == self._backend_size + sum((n in self._backend.alarms) - (n in previous) for n in touched)
        ):
            # only the touched alarms can differ: update their entries, keep the rest
            fingerprint = dict(previous)
            for name in touched:
                alarm = self._backend.alarms.get(name)
                if (
                    alarm is not None
                    and name.startswith(self.prefix)
                    and getattr(alarm, "rule", None) is None
                ):
                    fingerprint[name] = (id(alarm), getattr(alarm, "configuration_updated_timestamp", None))
                else:
                    fingerprint.pop(name, None)
        else:
            fingerprint = self._backend_fingerprint()
        self._backend_size = len(self._backend.alarms) if self._backend is not None else -1
        if previous is not None and fingerprint is not None:
            # read only the alarms that are new or were re-put since the last read
            changed = sorted(n for n, v in fingerprint.items() if previous.get(n) != v)
            raw = self._read_changed(changed) if changed else {}
            gone = [n for n in self._alarms if n not in fingerprint]
            if sorted(raw) != changed:  # not the backend behind this client after all
                fingerprint = None
        if previous is None or fingerprint is None:
            raw = self._describe()
            gone = [n for n in self._alarms if n not in raw]
            if fingerprint is not None and sorted(fingerprint) != sorted(raw):
                fingerprint = None
            if fingerprint is None:
                self._backend = None  # not the backend behind this client: re-read every minute
        self._fingerprint = fingerprint
        self._dirty = False
        for name in gone:
            self._forget(name)  # deleted: forgotten, no event
        for name in sorted(raw):
            entry = raw[name]
            config = parse_alarm(entry)
            alarm = self._alarms.get(name)
            if alarm is None:
                alarm = _AlarmState(
                    config=config,
                    state=INSUFFICIENT_DATA,
                    reason=INITIAL_REASON,
                    reason_data="",
                    state_ms=now,
                    evaluated_to=target,
                    next_check=-1,
                    value_of=self._bind(config),
                    bound_of=_bound_function(config),
                )
                self._bind_arrivals(alarm)
                self._alarms[name] = alarm
                self.states[name] = alarm.state
                self._use(name, config)
                self._schedule(alarm, target + self.period_ms)
            elif alarm.config != config:  # updated: same state, new configuration
                # boundaries passed before the update was noticed are evaluated with the old one
                if alarm.evaluated_to < self._evaluated_to:
                    self._fetch([alarm], self._evaluated_to)
                    found += self._evaluate(alarm, self._evaluated_to)
                self._unuse(name, alarm.config)
                alarm.config = config
                self._use(name, config)
                alarm.value_of = self._bind(config)
                alarm.bound_of = _bound_function(config)
                self._bind_arrivals(alarm)
                alarm.classes = bytearray()
                alarm.values = []
                alarm.last_end = None
                self._schedule(alarm, alarm.evaluated_to + self.period_ms)
            if (entry.get("StateValue"), entry.get("StateReason")) != (alarm.state, alarm.reason):
                # moto starts a new (or re-put) alarm in OK; CloudWatch in INSUFFICIENT_DATA (or unchanged)
                self._set_moto_state(name, alarm.state, alarm.reason, alarm.reason_data, alarm.state_ms)
        return found

    def _use(self, name: str, config: AlarmConfig) -> None:
        for key in config.series:
            self._users.setdefault(key, set()).add(name)
            self._job_alarms.setdefault(_job_of(key), set()).add(name)

    def _unuse(self, name: str, config: AlarmConfig) -> None:
        for key in config.series:
            users = self._users.get(key)
            if users is None:
                continue
            users.discard(name)
            if not users:  # no alarm reads this series any more
                del self._users[key]
                self._series.pop(key, None)
            job = _job_of(key)
            readers = self._job_alarms.get(job)
            if readers is not None and not any(name in self._users.get(k, ()) for k in config.series):
                readers.discard(name)
                if not readers:
                    del self._job_alarms[job]

    def _on_phase_change(self, job: str, at_ms: int) -> None:
        """A job's phase opened or closed (called by the simulator while it changes the job):
        noted, and settled once the simulator is done (``_settle``)."""
        if job not in self._job_alarms:
            return
        seen = self._dirty_jobs.get(job)
        if seen is None:
            self._dirty_jobs[job] = [at_ms, at_ms, 0]
            return
        if -(-seen[1] // MINUTE_MS) * MINUTE_MS < at_ms:  # a phase in between held a sample
            seen[2] = 1
        seen[1] = at_ms

    def _settle(self) -> None:
        """Alarms reading a job whose phase changed look again from the first minute after the
        change, unless the data they were promised keeps its class (e.g. training -> checkpoint
        save, both far above an idle threshold)."""
        if not self._dirty_jobs:
            return
        dirty, self._dirty_jobs = self._dirty_jobs, {}
        for job, (first, last, unsure) in dirty.items():
            for name in self._job_alarms.get(job, ()):
                alarm = self._alarms.get(name)
                if alarm is None:
                    continue
                if unsure or alarm.promise is None or self._future_class(alarm) != alarm.promise:
                    self._schedule(alarm, min(alarm.next_check, self._first_check_after(alarm, first)))
                    alarm.changed_ms = last

    def _forget(self, name: str) -> None:
        alarm = self._alarms.pop(name)
        self.states.pop(name, None)
        self._in_alarm.discard(name)
        self._unuse(name, alarm.config)

    def _bind(self, config: AlarmConfig) -> Callable[[int], float | None]:
        points = {key: self._series.setdefault(key, _SeriesData()).points for key in config.series}
        return _value_function(config, points)

    # -- data ------------------------------------------------------------------------------------

    # -- evaluation ------------------------------------------------------------------------------
    def _evaluate(self, alarm: _AlarmState, target: int) -> list[_Transition]:
        cfg = alarm.config
        p = alarm.period_ms
        rng = self._range(alarm)
        n, m, treat = cfg.evaluation_periods, cfg.datapoints_to_alarm, cfg.treat_missing
        found: list[_Transition] = []
        window = alarm.classes
        unsure = min(alarm.unsure, rng)
        compare = _OPERATORS[cfg.comparison]
        # boundaries before the alarm's next check provably keep its state (see _schedule)
        first = max(alarm.evaluated_to + self.period_ms, alarm.next_check)
        for boundary in range(first, target + 1, self.period_ms):
            end = boundary // p * p
            if end == alarm.last_end and not unsure:
                continue  # same periods as the last evaluation, all complete: same outcome
            alarm.last_end = end
            hi = (end - alarm.base) // p
            assert hi >= rng, "the alarm's periods do not cover its evaluation range"
            win = window[hi - rng : hi]
            seen: dict[int, float | None] = {}  # window index -> value from the datapoints arrived
            if unsure:
                partial = [
                    i
                    for i in range(rng - unsure, rng)
                    if self._arrived(alarm, alarm.base + (hi - rng + i) * p) > boundary
                ]  # the others: every datapoint has arrived, their final class stands
                if partial:
                    self._load_exact(alarm, alarm.base + (hi - rng + partial[0]) * p, end)
                for i in partial:
                    seen[i] = self._masked_value(alarm, alarm.base + (hi - rng + i) * p, boundary)
                if seen:
                    win = bytearray(win)
                    for i, v in seen.items():
                        win[i] = _MISSING if v is None else (_BREACH if compare(v, cfg.threshold) else _GOOD)
            state, kind = _decide(win, n, m, treat, alarm.state)
            if state != alarm.state:
                reason, data = self._reason(alarm, win, hi - rng, kind, state, boundary, seen)
                found.append(
                    _Transition(
                        boundary,
                        alarm,
                        alarm.state,
                        state,
                        reason,
                        data,
                        (alarm.reason, alarm.reason_data, alarm.state_ms),
                    )
                )
                alarm.state, alarm.reason, alarm.reason_data, alarm.state_ms = state, reason, data, boundary
                self.states[cfg.name] = state
                if state == ALARM:
                    self._in_alarm.add(cfg.name)
                else:
                    self._in_alarm.discard(cfg.name)
        alarm.evaluated_to = target
        if alarm.last_end is not None:
            hi = (alarm.last_end - alarm.base) // p
            last = window[hi - rng : hi]
            j = _stable_periods(last, n, m, treat, alarm.state, unsure)
            changed = alarm.changed_ms
            alarm.promise = None
            if changed is None or changed < alarm.last_end:
                promised = self._promise(alarm, last)
                if promised is not None:  # the data to come is known until a phase change
                    j = max(j, promised)
            change = alarm.last_end + j * p  # first window end whose outcome may differ
            change = -(-change // self.period_ms) * self.period_ms
            at = max(change, target + self.period_ms)
            if changed is not None and changed >= alarm.last_end:  # changed since that window: look again
                at = min(at, self._first_check_after(alarm, changed))
            self._schedule(alarm, at)
        else:
            self._schedule(alarm, target + self.period_ms)
        return found

    def _reason(
        self,
        alarm: _AlarmState,
        win: bytes | bytearray,
        offset: int,
        kind: str,
        state: str,
        at_ms: int,
        seen: dict[int, float | None],
    ) -> tuple[str, str]:
        """StateReason and StateReasonData (JSON) of a transition, in CloudWatch's layout."""
        cfg = alarm.config
        p = alarm.period_ms
        used = _evaluated(win, cfg.evaluation_periods, kind)  # newest first
        when = [alarm.base + (offset + i) * p for i, _ in used]
        for i, filled in used:
            v = alarm.values[offset + i]
            if not filled and i not in seen and v is not None and math.isnan(v):  # bounded: compute now
                alarm.values[offset + i] = self._exact_value(alarm, alarm.base + (offset + i) * p)
        # a period whose datapoints had not all arrived is reported with the value evaluated
        vals = [None if filled else seen.get(i, alarm.values[offset + i]) for i, filled in used]
        return transition_reason(
            cfg,
            vals=vals,
            when=when,
            kind=kind,
            old=alarm.state,
            new=state,
            range_len=len(win),
            at_ms=at_ms,
            start_ms=alarm.base + offset * p,
        )

    # -- events ----------------------------------------------------------------------------------
    def _announce(self, tr: _Transition) -> dict[str, Any]:
        cfg = tr.alarm.config
        self.transitions.append((tr.at_ms, cfg.name, tr.old, tr.new))
        if cfg.name in self._alarms:
            self._set_moto_state(cfg.name, tr.new, tr.reason, tr.reason_data, tr.at_ms)
        event = state_change_event(
            cfg,
            account_id=self.account_id,
            region=self.region,
            at_ms=tr.at_ms,
            old=tr.old,
            new=tr.new,
            reason=tr.reason,
            reason_data=tr.reason_data,
            previous=tr.previous,
        )
        self.events.append(event)
        self.acct.publish_event(event)
        return event
