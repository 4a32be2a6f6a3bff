"""The evaluator and moto's CloudWatch: noticing alarms put, re-put and deleted, reading them, and
writing each state back with virtual-time timestamps.

Why: docs/drill.md (*The alarm evaluator*)."""

from __future__ import annotations

import os
from typing import Any

from drill.alarms.config import _entry_from_backend, _state_of, parse_alarm
from drill.clock import from_ms


def _stamp(alarm: Any, at_ms: int) -> None:
    """Set a moto alarm's state timestamps to virtual time (naive UTC, as moto keeps them)."""
    when = from_ms(at_ms).replace(tzinfo=None)
    alarm.state_updated_timestamp = when
    alarm.state_transitioned_timestamp = when


class AlarmSync:
    """Moto-facing part of ``AlarmEvaluator`` (a mixin): the attributes are the evaluator's."""

    cloudwatch: Any
    region: str
    prefix: str
    _backend: Any | None
    _backend_reads: bool | None
    _dirty: bool
    _hooked: bool
    _touched: set[str]
    _backend_size: int
    _fingerprint: dict[str, tuple[int, Any]] | None

    def _hook_client(self) -> bool:
        """Note the alarms put or deleted through the account's CloudWatch client, so that a
        change is seen without scanning every alarm at every step."""
        events = getattr(getattr(self.cloudwatch, "meta", None), "events", None)
        if events is None or self._backend is None:
            return False

        def put(params: dict[str, Any], **_: Any) -> None:
            self._touched.add(str(params.get("AlarmName", "")))

        def delete(params: dict[str, Any], **_: Any) -> None:
            self._touched.update(str(n) for n in params.get("AlarmNames", []))

        events.register("before-parameter-build.cloudwatch.PutMetricAlarm", put)
        events.register("before-parameter-build.cloudwatch.DeleteAlarms", delete)
        return True

    def _moto_backend(self) -> Any | None:
        try:
            from moto.cloudwatch.models import cloudwatch_backends
            from moto.core import DEFAULT_ACCOUNT_ID
        except ImportError:  # pragma: no cover - moto is a dev dependency
            return None
        try:
            account = os.environ.get("MOTO_ACCOUNT_ID", DEFAULT_ACCOUNT_ID)
            return cloudwatch_backends[account][self.region]
        except Exception:  # pragma: no cover - not a moto account
            return None

    def _backend_fingerprint(self) -> dict[str, tuple[int, Any]]:
        prefix = self.prefix
        return {
            name: (id(alarm), getattr(alarm, "configuration_updated_timestamp", None))
            for name, alarm in self._backend.alarms.items()  # type: ignore[union-attr]
            if name.startswith(prefix) and getattr(alarm, "rule", None) is None
        }

    def _changed(self) -> bool:
        if self._dirty:
            return True
        if self._hooked:
            # alarms put or deleted through the client are noted; anyone else's creation or
            # deletion shows in the backend's size (a re-put by another client would be missed)
            if self._touched or len(self._backend.alarms) != self._backend_size:  # type: ignore[union-attr]
                self._dirty = True
            return self._dirty
        if self._backend_fingerprint() != self._fingerprint:
            self._dirty = True
        return self._dirty

    def _describe(self, names: list[str] | None = None) -> dict[str, dict[str, Any]]:
        """The alarms under the prefix (all of them, or only ``names``), by name."""
        out: dict[str, dict[str, Any]] = {}
        paginator = self.cloudwatch.get_paginator("describe_alarms")
        if names is None:
            pages = [paginator.paginate(AlarmNamePrefix=self.prefix, AlarmTypes=["MetricAlarm"])]
        else:
            pages = [
                paginator.paginate(AlarmNames=names[i : i + 100], AlarmTypes=["MetricAlarm"])
                for i in range(0, len(names), 100)
            ]
        for pager in pages:
            for page in pager:
                for entry in page.get("MetricAlarms", []):
                    if entry["AlarmName"].startswith(self.prefix):
                        out[entry["AlarmName"]] = entry
        return out

    def _read_changed(self, names: list[str]) -> dict[str, dict[str, Any]]:
        """New or re-put alarms, by name. The evaluator is CloudWatch's own evaluation engine in
        the drill, so once a read through the API has shown that the backend's alarms convert to
        the same entries, it reads them from moto's backend directly (no API round trip, which
        costs ~50 ms for two dozen 10-metric alarms)."""
        backend = self._backend
        if self._backend_reads and backend is not None:
            found = {n: _entry_from_backend(backend.alarms[n]) for n in names if n in backend.alarms}
            if sorted(found) == names:
                return found
        raw = self._describe(names)
        if self._backend_reads is None and raw and self._backend is not None:
            try:
                same = all(
                    parse_alarm(entry) == parse_alarm(_entry_from_backend(self._backend.alarms[name]))
                    and _state_of(entry) == _state_of(_entry_from_backend(self._backend.alarms[name]))
                    for name, entry in raw.items()
                )
            except Exception:  # an attribute moto renamed: keep reading through the API
                same = False
            self._backend_reads = same
        return raw

    def _set_moto_state(self, name: str, value: str, reason: str, data: str, at_ms: int) -> None:
        """Mirror a state into moto, stamped with the virtual time it was set at (``at_ms``):
        ``StateUpdatedTimestamp`` and ``StateTransitionedTimestamp`` (the MetricAlarm reference:
        the last change of StateValue), which moto would stamp with the machine's clock."""
        if self._backend_reads and self._backend is not None:  # the engine writes its own state
            alarm = self._backend.alarms.get(name)
            if alarm is None:
                self._dirty = True  # deleted meanwhile: forgotten at the next refresh
            else:
                alarm.update_state(reason, data or "{}", value)
                _stamp(alarm, at_ms)
            return
        try:
            self.cloudwatch.set_alarm_state(
                AlarmName=name, StateValue=value, StateReason=reason, StateReasonData=data or "{}"
            )
        except Exception as exc:  # deleted meanwhile: forgotten at the next refresh
            if "ResourceNotFound" not in str(exc):
                raise
            self._dirty = True
            return
        if self._backend is not None and name in self._backend.alarms:
            _stamp(self._backend.alarms[name], at_ms)
