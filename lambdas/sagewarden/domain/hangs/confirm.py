"""Hang signals: confirm a hang from the alarms' levels and stop the job; repair missing alarms
from what CloudWatch holds; adapt the learned windows. Whether a quiet job is hung: quiet.py.
Pure. Why: docs/hang-detection.md (the alarm levels, *Evidence, not silence*)."""

from __future__ import annotations

import dataclasses

from sagewarden.domain.decision.alerts import bounded_evidence, notify
from sagewarden.domain.decision.deferrals import clear_deferral, defer
from sagewarden.domain.decision.pending import PendingDecision, cancel_pending, request_stop
from sagewarden.domain.hangs.alarms import (
    SIGNAL_CHECKPOINT,
    SIGNAL_LOG_SILENCE,
    SIGNAL_PROGRESS,
    alarm_keys,
    key_signal,
    silence_window_min,
)
from sagewarden.domain.hangs.cadence import Cadence, learn_startup, learn_window
from sagewarden.domain.hangs.quiet import (
    _QUIET_SIGNALS,
    _quiet_gate,
    _trust_heartbeat_again,
    _why_from_logs,
    ready_signals,
    silence_from_logs,
)
from sagewarden.domain.hangs.windows import (
    WINDOW_POLICY,
    hang_alarms,
    instance_shape,
    signal_window,
    startup_allowance,
    window_in_force,
)
from sagewarden.domain.vocabulary.events import AlarmsObserved, HangSignal, Observations
from sagewarden.domain.vocabulary.models import Attempt, startup_kind
from sagewarden.domain.vocabulary.reasons import EventSource, StopIntent


def _current_training(d: PendingDecision, job_name: str, attempt: int) -> tuple[Attempt | None, str | None]:
    cur = d.run.current
    if cur is None or cur.number != attempt or cur.job_name != job_name:
        return None, f"alarm for {job_name}, which is not the current attempt"
    if not cur.in_training:
        return None, f"attempt {cur.number} is not training ({cur.sm_status}/{cur.sm_secondary})"
    if cur.stop_intent is not None:
        return None, f"already stopping ({cur.stop_intent})"
    if cancel_pending(d):
        return None, "cancel recorded"
    return cur, None


def on_hang_signal(d: PendingDecision, e: HangSignal) -> str | None:
    cur, why = _current_training(d, e.job_name, e.attempt)
    if cur is None:
        return why
    if e.source == EventSource.EVENT and e.signal not in _alarmed_signals(d, cur):
        # an alarm this attempt should not have (e.g. a log-silence alarm left from before the
        # deployment dropped its log subscription: nothing feeds its metric, so it breaches)
        return f"{e.signal} is not watched by an alarm for {cur.job_name}; its state is not evidence"
    if e.source == EventSource.EVENT and e.signal == SIGNAL_LOG_SILENCE and silence_from_logs(cur, d.obs):
        if e.state == "OK" and cur.heartbeat_doubted_ms is not None:
            _trust_heartbeat_again(d, cur)
            return None
        return f"log_silence {e.state}: {_why_from_logs(cur, d.obs)}; its alarm's state is not evidence"
    signals = set(cur.hang_signals)
    if e.state != "ALARM":
        if e.signal not in signals:
            return f"{e.signal} is {e.state}; nothing to clear"
        signals.discard(e.signal)
        d.put_attempt(dataclasses.replace(cur, hang_signals=tuple(sorted(signals))))
        d.note(f"{e.signal} cleared ({e.state})")
        return None
    return _raise_signals(d, cur, [e])


def on_alarms_observed(d: PendingDecision, e: AlarmsObserved) -> str | None:
    cur, why = _current_training(d, e.job_name, e.attempt)
    if cur is None:
        return why
    changed = False
    if d.policy.hang_detection:
        expected = set(alarm_keys(hang_alarms(d, cur)))
        present = {key for key, _, _ in e.states}
        missing = sorted(expected - present)
        if missing:
            d.put_attempt(dataclasses.replace(cur, alarms_active=True, alarms_confirmed=False))
            d.act(hang_alarms(d, cur))
            d.note(f"hang alarms missing in CloudWatch ({', '.join(missing)}): creating them")
            cur = d.run.current or cur
            changed = True
        elif not cur.alarms_confirmed:
            d.put_attempt(dataclasses.replace(cur, alarms_active=True, alarms_confirmed=True))
            d.note(f"hang alarms confirmed in CloudWatch ({len(expected)})")
            cur = d.run.current or cur
            changed = True
    in_alarm: dict[str, int] = {}
    expected_keys = set(alarm_keys(hang_alarms(d, cur)))
    from_logs = silence_from_logs(cur, d.obs)
    if cur.heartbeat_doubted_ms is not None and any(
        key_signal(key) == SIGNAL_LOG_SILENCE and state == "OK" for key, state, _ in e.states
    ):
        cur = _trust_heartbeat_again(d, cur)  # a heartbeat datapoint reached its alarm again
        from_logs = silence_from_logs(cur, d.obs)
        changed = True
    for key, state, since in e.states:
        # only the alarms this attempt should have are evidence (see on_hang_signal), and not the
        # heartbeat's silence while log silence is judged from the logs (`silence_from_logs`)
        if state == "ALARM" and key in expected_keys:
            signal = key_signal(key)
            if signal == SIGNAL_LOG_SILENCE and from_logs:
                continue
            in_alarm[signal] = min(since, in_alarm.get(signal, since))
    # the level wins over remembered edges: a signal whose alarm is no longer in ALARM is dropped
    # (log silence judged from the logs is the sweep's own level: its tick clears it)
    kept = tuple(
        s
        for s in cur.hang_signals
        if s in in_alarm or s == SIGNAL_CHECKPOINT or (s == SIGNAL_LOG_SILENCE and from_logs)
    )
    if kept != cur.hang_signals:
        d.put_attempt(dataclasses.replace(cur, hang_signals=kept))
        d.note(
            f"hang signals no longer in ALARM dropped: {', '.join(sorted(set(cur.hang_signals) - set(kept)))}"
        )
        cur = d.run.current or cur
        changed = True
    fresh = [
        HangSignal(
            e.job_name,
            e.attempt,
            signal,
            "ALARM",
            since,
            reason="alarm in ALARM (sweep)",
            source=EventSource.SWEEP,
        )
        for signal, since in sorted(in_alarm.items())
        if signal not in cur.hang_signals
    ]
    if fresh:
        why = _raise_signals(d, cur, fresh)
        if why is None:
            return None
        if not changed:
            return why
        d.note(why)  # saved anyway (e.g. a missing alarm re-created): say why the signal waits
    return None if changed else "alarms as expected"


def _alarmed_signals(d: PendingDecision, cur: Attempt) -> set[str]:
    return {key_signal(k) for k in alarm_keys(hang_alarms(d, cur))}


def _raise_signals(d: PendingDecision, cur: Attempt, events: list[HangSignal]) -> str | None:
    events, why = ready_signals(d.run, d.policy, cur, d.now, events)
    if not events:
        return why
    basis: str | None = None
    if all(e.signal in _QUIET_SIGNALS for e in events):
        act, why, events = _quiet_gate(d, cur, events)
        if not act:
            return why
        basis = why
        cur = d.run.current or cur
    signals = set(cur.hang_signals)
    new = [e for e in events if e.signal not in signals]
    if not new:
        return f"{', '.join(e.signal for e in events)} already in ALARM; waiting for a second signal"
    signals |= {e.signal for e in new}
    cur = dataclasses.replace(cur, hang_signals=tuple(sorted(signals)))
    needed = 1 if d.policy.hang_confirmation == "any" else 2
    if len(signals) < needed:
        d.put_attempt(cur)
        d.note(
            f"{', '.join(e.signal for e in new)} in ALARM; waiting for a second signal ({d.policy.hang_confirmation})"
        )
        return None
    _confirm(d, cur, new[-1], signals, basis)
    return None


def hang_onset_ms(d: PendingDecision, cur: Attempt, e: HangSignal) -> int:
    """When the hang began: the alarm's state change minus its window; for the whole job's log
    silence, the job's newest log event when the service could read it (the alarm changes state
    only a metric period or more after its window of silence is complete)."""
    implied = e.since_ms - signal_window(d.run, d.policy, cur, e.signal) * 60_000
    newest = d.obs.log_newest_ms
    if e.signal != SIGNAL_LOG_SILENCE or e.host is not None or newest is None or newest > d.now:
        return implied
    return max(newest, cur.training_started_ms or newest)


def _confirm(
    d: PendingDecision, cur: Attempt, e: HangSignal, signals: set[str], basis: str | None = None
) -> None:
    onset = hang_onset_ms(d, cur, e)
    silent_for = max(0.0, (d.now - onset) / 60_000)
    evidence = bounded_evidence(
        (
            f"signal: {', '.join(sorted(signals))} ({e.source})",
            f"host: {e.host or 'see triage'}; for {silent_for:.0f} min",
            f"alarm reason: {e.reason[:200]}",
            *((basis[:400],) if basis else ()),
            *d.obs.hosts_triage,
            *d.obs.log_tail[-10:],
        )
    )
    # the hosts the GPU metrics single out: the attempt's warm pool holds the same instances and
    # must not be reused (domain/capacity/warm_pools.py)
    cur = dataclasses.replace(
        cur,
        evidence=evidence,
        suspect_hosts=d.obs.suspect_hosts,
        hang_onset_ms=onset,  # for goodput's hang-detection bucket
    )
    request_stop(d, cur, StopIntent.HANG, f"hang confirmed ({', '.join(sorted(signals))})")
    d.act(
        notify(
            d,
            "critical",
            "hang.detected",
            f"{d.run.name}: hang on attempt {cur.number} ({e.signal}), stopping",
            [
                f"Signal: {e.signal} on {e.host or 'the job (see host triage)'} for {silent_for:.0f} min",
                f"Alarm: {e.reason[:200]}",
                *((f"Why: {basis[:400]}",) if basis else ()),
                f"Restarts used: {d.run.restarts} of {d.policy.max_restarts}",
                "Host triage:",
                *(d.obs.hosts_triage or ("(unavailable: " + (d.obs.log_error or "no data") + ")",)),
                "Log tail:",
                *d.obs.log_tail[-20:],
            ],
        )
    )


def tick_signal(d: PendingDecision, cur: Attempt) -> HangSignal | str | None:
    """A hang signal the sweep's own observations show (checkpoint freshness, log silence
    without a subscription); a string when a needed observation failed (deferred)."""
    if not cur.in_training or cur.training_started_ms is None or cur.stop_intent is not None:
        return None
    limit = d.policy.checkpoint_stale_minutes
    if limit is not None:
        if d.obs.checkpoint_error:
            return f"cannot read the checkpoints to judge their freshness: {d.obs.checkpoint_error}"
        newest = d.obs.checkpoint
        written = newest.written_at_ms if newest is not None and newest.written_at_ms is not None else None
        fresh_since = max(cur.training_started_ms, written or 0)
        if d.now - fresh_since >= limit * 60_000:
            step = f"step {newest.step}" if newest is not None else "none"
            return HangSignal(
                job_name=cur.job_name,
                attempt=cur.number,
                signal=SIGNAL_CHECKPOINT,
                state="ALARM",
                since_ms=d.now,
                reason=f"no new complete checkpoint for {(d.now - fresh_since) / 60_000:.0f} min (newest: {step})",
                source=EventSource.SWEEP,
            )
    if d.obs.logs_silent is True:
        window = silence_window_min(signal_window(d.run, d.policy, cur, SIGNAL_LOG_SILENCE))
        silent_for = max(window, d.obs.logs_silent_min or window)
        return HangSignal(
            job_name=cur.job_name,
            attempt=cur.number,
            signal=SIGNAL_LOG_SILENCE,
            state="ALARM",
            # as an alarm would: in ALARM since the window's end (the quiet stretch's onset + window)
            since_ms=d.now - (silent_for - window) * 60_000,
            reason=f"no log events in the last {silent_for} min (sweep check: {_from_logs_short(d.obs)})",
            source=EventSource.SWEEP,
        )
    if d.obs.log_error and d.obs.logs_silent is None:
        return f"cannot read the job's logs to judge log silence: {d.obs.log_error}"
    return None


def _from_logs_short(obs: Observations) -> str:
    if not obs.log_subscription:
        return "no log subscription"
    return "heartbeat pipeline broken" if obs.heartbeat_broken else "its heartbeat contradicted by its logs"


def on_tick_signals(d: PendingDecision, cur: Attempt) -> str | None:
    """Returns None when it acted, a reason when it did not (see `decide`)."""
    found = tick_signal(d, cur)
    _drop_cleared_tick_signals(d, cur, found)
    if found is None:
        if d.run.deferred_since_ms is not None:
            clear_deferral(d)
            return None
        return None if d.run.current != cur else "nothing due"
    if isinstance(found, str):
        before = d.run
        defer(d, found)
        return None if d.actions or d.run != before else f"deferred: {found}"
    return on_hang_signal(d, found)


def _drop_cleared_tick_signals(d: PendingDecision, cur: Attempt, found: HangSignal | str | None) -> None:
    """Signals judged on ticks are levels too: a fresh checkpoint clears checkpoint_stale, and
    (without a log subscription) a log event clears log_silence."""
    cleared = set()
    stale_now = isinstance(found, HangSignal) and found.signal == SIGNAL_CHECKPOINT
    judged_fresh = d.policy.checkpoint_stale_minutes is None or (
        not d.obs.checkpoint_error and not isinstance(found, str) and not stale_now
    )
    if SIGNAL_CHECKPOINT in cur.hang_signals and judged_fresh:
        cleared.add(SIGNAL_CHECKPOINT)
    if SIGNAL_LOG_SILENCE in cur.hang_signals and d.obs.logs_silent is False:
        cleared.add(SIGNAL_LOG_SILENCE)
    if cleared:
        d.put_attempt(
            dataclasses.replace(cur, hang_signals=tuple(s for s in cur.hang_signals if s not in cleared))
        )
        d.note(f"{', '.join(sorted(cleared))} cleared")


def adapt_windows(d: PendingDecision, cur: Attempt) -> bool:
    """Learn the log-silence (and progress) window from the attempt's own activity and re-put
    the alarm whose window changed. True when something changed."""
    pol = d.policy
    if not (pol.adaptive_windows and pol.hang_detection and cur.in_training and cur.training_started_ms):
        return False
    start = cur.training_started_ms + startup_allowance(d.run, d.policy, cur) * 60_000
    before_startup = (d.run.startup_learned_min, d.run.startup_learned_on)

    def learned(series: tuple[tuple[int, float], ...] | None, ceiling: int, current: int) -> Cadence | None:
        if series is None:
            return None
        cadence = learn_window(series, start_ms=start, now_ms=d.now, ceiling_min=ceiling)
        return cadence if cadence.window_min is not None and cadence.window_min != current else None

    log = learned(
        d.obs.heartbeat, pol.log_silence_minutes, signal_window(d.run, d.policy, cur, SIGNAL_LOG_SILENCE)
    )
    prog = (
        learned(
            d.obs.progress, pol.progress_stall_minutes, signal_window(d.run, d.policy, cur, SIGNAL_PROGRESS)
        )
        if pol.progress_metric
        else None
    )
    changed: list[str] = []
    notes: list[str] = []
    learned_startup = (
        learn_startup(
            d.obs.heartbeat,
            started_ms=cur.training_started_ms,
            allowance_min=pol.startup_silence_minutes,
            now_ms=d.now,
        )
        if d.obs.heartbeat is not None
        else None
    )
    kind = startup_kind(cur)
    if learned_startup is not None and (learned_startup, kind) != (
        d.run.startup_learned_min,
        d.run.startup_learned_on,
    ):
        d.set(startup_learned_min=learned_startup, startup_learned_on=kind)
        d.note(
            f"start-up allowance for the next attempts on {kind}: {learned_startup} min, from this "
            f"attempt's first {pol.startup_silence_minutes} min of Training"
        )
    for signal, cadence, current in (
        (SIGNAL_LOG_SILENCE, log, signal_window(d.run, d.policy, cur, SIGNAL_LOG_SILENCE)),
        (SIGNAL_PROGRESS, prog, signal_window(d.run, d.policy, cur, SIGNAL_PROGRESS)),
    ):
        if cadence is not None:
            changed.append(signal)
            notes.append(
                f"{signal} window {current} -> {cadence.window_min} min (quiet stretches up to "
                f"{cadence.typical_quiet_min} min in {cadence.quantile_pct}% of {cadence.intervals} "
                f"intervals, {cadence.observed_min} min of training)"
            )
    if not changed:
        return (d.run.startup_learned_min, d.run.startup_learned_on) != before_startup
    cur = dataclasses.replace(
        cur,
        log_window_min=log.window_min if log is not None else cur.log_window_min,
        progress_window_min=prog.window_min if prog is not None else cur.progress_window_min,
    )
    d.put_attempt(cur)
    # the run keeps the windows in force for the next attempts: a carried one not relearned stays
    log_min, log_from = window_in_force(d.run, d.policy, cur)
    prog_min, prog_from = window_in_force(d.run, d.policy, cur, progress=True)
    d.set(
        learned_windows_on=instance_shape(cur),
        learned_log_window_min=None if log_from == WINDOW_POLICY else log_min,
        learned_progress_window_min=None if prog_from == WINDOW_POLICY else prog_min,
    )
    keys = tuple(k for k in alarm_keys(hang_alarms(d, cur)) if key_signal(k) in changed)
    if keys:  # without a log subscription a learned log-silence window has no alarm to re-put
        d.act(hang_alarms(d, cur, only_keys=keys))
    d.note("learned from the attempt's cadence: " + "; ".join(notes))
    return True
