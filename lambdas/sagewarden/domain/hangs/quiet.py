"""When a quiet job is hung: the signals ready to judge, the evidence that tells a hang from a
long benign phase (a save, a compile, the warm-up after a hang stop), and the verdict. Pure.
Why: docs/hang-detection.md."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from sagewarden.domain.decision.deferrals import clear_deferral, defer
from sagewarden.domain.decision.pending import PendingDecision
from sagewarden.domain.hangs.alarms import (
    METRIC_LAG_MIN,
    SIGNAL_GPU_IDLE,
    SIGNAL_GPU_LONE_IDLE,
    SIGNAL_LOG_SILENCE,
    SIGNAL_PROGRESS,
    key_signal,
    silence_window_min,
)
from sagewarden.domain.hangs.heartbeat import ConfirmWindows, confirm_windows
from sagewarden.domain.hangs.windows import (
    signal_window,
    startup_allowance,
)
from sagewarden.domain.vocabulary.events import AlarmsObserved, HangSignal, Observations
from sagewarden.domain.vocabulary.evidence import SPIN, UNKNOWN, WORK, Verdict, judge
from sagewarden.domain.vocabulary.models import Attempt, Run
from sagewarden.domain.vocabulary.policy import RunPolicy
from sagewarden.domain.vocabulary.pricing import gpus_per_instance
from sagewarden.domain.vocabulary.reasons import LogCheck

# What start-up looks like, so these wait out `startup_silence_minutes` after Training starts: a
# first-step compile or NCCL init on hundreds of hosts is silent and leaves *every* GPU idle for
# tens of minutes. Only the asymmetric signal (one host idle while a peer is busy) acts at once.
_QUIET_SIGNALS = frozenset({SIGNAL_LOG_SILENCE, SIGNAL_PROGRESS, SIGNAL_GPU_IDLE})


STARTUP_LONE_IDLE_MS = 10 * 60_000  # in ALARM this long during start-up: a dead host, not skew


SAVE_ACTIVE_MS = 5 * 60_000  # a checkpoint object this recent: a save is under way (or just ended)


# the quiet signals whose alarms count a minute without data as silent (missing is breaching): the
# minutes before Training have none, and the newest minutes' datapoints may still be on their way
_MISSING_IS_SILENT = frozenset({SIGNAL_LOG_SILENCE, SIGNAL_PROGRESS})


def ready_signals(
    run: Run, policy: RunPolicy, cur: Attempt, now: int, events: list[HangSignal]
) -> tuple[list[HangSignal], str | None]:
    """The signals that may be judged now, and why the others (or all) wait: the grace period
    after Training starts holds every signal; a first-step compile or NCCL init on hundreds of
    hosts is silent with every GPU idle, so the quiet signals wait out the start-up allowance, and
    those whose alarms count a minute without data as silent wait until Training has lasted what
    they see (`quiet_ready_ms`; the alarm's level is read again then). Hosts also finish a compile
    or NCCL init minutes apart: the early ones spin in the first collective while the late ones
    still compile, which looks like a lone idle host; during start-up that signal must hold
    STARTUP_LONE_IDLE_MS before it acts."""
    started = cur.training_started_ms or now
    if now - started < policy.hang_grace_minutes * 60_000:
        names = ", ".join(e.signal for e in events)
        return (
            [],
            f"{names} within the {policy.hang_grace_minutes}-minute grace period after training started",
        )
    allowance = startup_allowance(run, policy, cur)
    startup = now - started < allowance * 60_000
    waiting = [
        e
        for e in events
        if (e.signal in _QUIET_SIGNALS and (startup or now < quiet_ready_ms(run, policy, cur, e.signal)))
        or (startup and e.signal == SIGNAL_GPU_LONE_IDLE and now - e.since_ms < STARTUP_LONE_IDLE_MS)
    ]
    ready = [e for e in events if e not in waiting]
    if ready:
        return ready, None
    names = ", ".join(e.signal for e in waiting)
    if startup:
        return [], f"{names} within the {allowance}-minute start-up allowance"
    return [], f"{names} in ALARM before Training has lasted what the alarm can judge"


def wants_save_activity(event: HangSignal | AlarmsObserved) -> bool:
    """Whether deciding on this alarm event may need the evidence of what the job is doing (a
    checkpoint save under way, the hosts' metrics): only a quiet signal in ALARM is judged on it
    (see `_quiet_gate`)."""
    if isinstance(event, HangSignal):
        return event.state == "ALARM" and event.signal in _QUIET_SIGNALS
    return any(state == "ALARM" and key_signal(key) in _QUIET_SIGNALS for key, state, _ in event.states)


def quiet_ready_ms(run: Run, policy: RunPolicy, cur: Attempt, signal: str) -> int:
    """From when an ALARM of `signal` says something about Training. The log-silence and progress
    alarms count a minute without data as silent: every minute before Training has none, and a
    minute's datapoint may land up to METRIC_LAG_MIN minutes after it ends. So until Training has
    lasted the alarm's window, an ALARM only says that no datapoint of Training has *arrived* --
    2 minutes into Training, with the first minutes' datapoints still on their way, a 5-minute
    window is in ALARM on a job that logs every second. The signal is judged once Training has
    lasted its window, or the start-up allowance plus that lag (by then no datapoint means the
    job wrote nothing for the allowance), whichever comes first -- never before the allowance.
    Other signals: the start-up allowance. Never within the grace period after Training starts
    (`hang_grace_minutes`), which holds every signal."""
    started = cur.training_started_ms or 0
    allowance = startup_allowance(run, policy, cur)
    ready = allowance
    if signal in _MISSING_IS_SILENT:
        window = silence_window_min(signal_window(run, policy, cur, signal))
        ready = max(allowance, min(window, allowance + METRIC_LAG_MIN))
    return started + max(ready, policy.hang_grace_minutes) * 60_000


def quiet_due_ms(run: Run, now_ms: int) -> int | None:
    """The next moment a quiet signal of the training attempt becomes judgeable
    (`quiet_ready_ms`): its alarm's level is read again then -- an alarm that went to ALARM while
    it had to wait stays there without a new state change."""
    cur, pol = run.current, run.policy
    if cur is None or not cur.in_training or cur.training_started_ms is None or not pol.hang_detection:
        return None
    if cur.stop_intent is not None:
        return None
    signals = (SIGNAL_LOG_SILENCE, SIGNAL_GPU_IDLE, *((SIGNAL_PROGRESS,) if pol.progress_metric else ()))
    ahead = [at for at in (quiet_ready_ms(run, pol, cur, s) for s in signals) if at > now_ms]
    return min(ahead, default=None)


def quiet_onset_ms(run: Run, policy: RunPolicy, cur: Attempt, signal: str, since_ms: int) -> int:
    """When the quiet stretch behind a quiet signal began, at the latest: its alarm went to ALARM
    `since_ms`, at least its window after the stretch began."""
    return since_ms - signal_window(run, policy, cur, signal) * 60_000


def host_verdict(
    run: Run, policy: RunPolicy, cur: Attempt, obs: Observations, since_ms: int, now_ms: int
) -> Verdict:
    """The evidence of the hosts' metrics since `since_ms` (`domain/vocabulary/evidence.py`); unknown when
    they were not read or the read failed (never "idle")."""
    if obs.host_metrics_error is not None:
        return Verdict(UNKNOWN, f"the hosts' metrics could not be read: {obs.host_metrics_error}")
    if obs.host_metrics is None:
        return Verdict(UNKNOWN, "the hosts' metrics were not read")
    return judge(
        obs.host_metrics,
        instance_count=cur.instance_count,
        gpus_per_host=gpus_per_instance(cur.instance_type),
        gpu_busy_percent=policy.gpu_busy_percent,
        since_ms=since_ms,
        now_ms=now_ms,
    )


def _quiet_gate(
    d: PendingDecision, cur: Attempt, quiet: list[HangSignal]
) -> tuple[bool, str | None, list[HangSignal]]:
    """Whether quiet signals may act now (`judge_quiet`). Returns (act, why, the signals that
    act): why not, or the basis of acting; (False, None, []) when the draft changed (deferred, the
    attempt's heartbeat found contradicted by its logs, or its silence looked up in its logs during
    a benign phase)."""
    verdict = judge_quiet(d.run, d.policy, cur, d.obs, d.now, quiet)
    changed = False
    looked = verdict.looked_up_alarm_ms
    if verdict.doubt or (looked is not None and looked != cur.heartbeat_checked_ms):
        d.put_attempt(
            dataclasses.replace(
                cur,
                heartbeat_doubted_ms=(
                    cur.heartbeat_doubted_ms if cur.heartbeat_doubted_ms is not None else d.now
                )
                if verdict.doubt
                else cur.heartbeat_doubted_ms,
                heartbeat_checked_ms=looked if looked is not None else cur.heartbeat_checked_ms,
            )
        )
        d.note(verdict.why)
        changed = True
    if verdict.kind == DEFER:
        before = d.run
        defer(d, verdict.why)
        unchanged = not changed and not d.actions and d.run == before
        return False, f"deferred: {', '.join(e.signal for e in quiet)}" if unchanged else None, []
    if verdict.kind == WAIT:
        return False, None if changed else verdict.why, []
    if d.run.deferred_since_ms is not None:
        clear_deferral(d)
    return True, verdict.why, list(verdict.signals)


ACT, WAIT, DEFER = "act", "wait", "defer"


def quiet_judgement(
    run: Run, policy: RunPolicy, cur: Attempt, obs: Observations, now: int, quiet: list[HangSignal]
) -> tuple[str, str]:
    """How quiet signals (the job silent, stalled or idle) are judged on the evidence of what the
    job is doing: (ACT | WAIT | DEFER, why).

    - A checkpoint save under way (an object landed in S3 in the last SAVE_ACTIVE_MS) or hosts
      that are working (`domain/vocabulary/evidence.py`: CPU busy, disk space growing) are a benign phase:
      WAIT, up to `benign_phase_max_minutes` of quiet (a compile that never ends, a save that
      keeps writing for ever are still hangs).
    - Hosts spinning or stuck, nothing landing: a hang, ACT at once.
    - No usable evidence (a CPU instance, metrics late or unreadable): the silence alone decides,
      on the policy's window (a learned window only decides when the evidence is read).
    - An unreadable bucket: DEFER (unknown is not "no save").
    - Nothing looked up at all (the service's first, look-up-free pass over an alarm event): ACT,
      so that pass never takes a "nothing to do" the evidence may contradict; the observed pass
      then decides."""
    names = ", ".join(e.signal for e in quiet)
    if not _looked_up(obs):
        return ACT, "the evidence of what the job is doing was not looked up"
    if obs.save_activity_error is not None:
        return DEFER, (
            f"{names} in ALARM, but whether a checkpoint save is under way is unknown: {obs.save_activity_error}"
        )
    onsets = {e.signal: quiet_onset_ms(run, policy, cur, e.signal, e.since_ms) for e in quiet}
    quiet_min = (now - min(onsets.values())) / 60_000
    verdict = host_verdict(run, policy, cur, obs, max(onsets.values()), now)
    last = obs.save_activity_ms
    benign = None
    if last is not None and now - last < SAVE_ACTIVE_MS:
        benign = (
            f"a checkpoint save is under way (its newest object written {(now - last) / 60_000:.1f} min ago)"
        )
    elif verdict.kind == WORK:
        benign = f"the hosts are working ({verdict.detail})"
    ceiling = policy.benign_phase_max_minutes
    if benign is not None:
        if quiet_min < ceiling:
            return WAIT, (
                f"{names} in ALARM while {benign}: a benign phase, waited for up to {ceiling} min of "
                f"quiet ({quiet_min:.0f} so far); looking again on the next pass"
            )
        return (
            ACT,
            f"quiet for {quiet_min:.0f} min, past the {ceiling}-minute ceiling of a benign phase, while {benign}",
        )
    warm = warming_up_after_hang(run, cur)
    if verdict.hang and not (warm and verdict.kind != SPIN):
        return ACT, f"evidence: {verdict.kind}: {verdict.detail}"
    if warm and verdict.hang:
        # a restore, the first steps and a save just after a resume look stuck (GPUs idle, little
        # CPU): after a hang stop that is no new evidence -- a spin would be; the policy's window
        # decides, never a window learned on another attempt
        verdict = Verdict(
            UNKNOWN,
            f"{verdict.kind} ({verdict.detail}) during the warm-up of an attempt resumed after a hang "
            "stop: no new evidence",
        )
    # no usable evidence: the silence alone, on the window that needs none
    if any(now - onsets[e.signal] >= _evidence_free_window(policy, e.signal) * 60_000 for e in quiet):
        return ACT, f"no usable evidence ({verdict.detail}); quiet past the policy's window"
    wait_min = min(_evidence_free_window(policy, e.signal) for e in quiet)
    return WAIT, (
        f"{names} in ALARM, no usable evidence of what the job is doing ({verdict.detail}): acting "
        f"once it has been quiet for the policy's {wait_min} min ({quiet_min:.0f} so far)"
    )


def warming_up_after_hang(run: Run, cur: Attempt) -> bool:
    """`cur` resumed from a checkpoint after the previous attempt was stopped for a hang, and has
    not saved a newer one yet (its restore, first steps and first save). Its quiet signals act only
    on new evidence -- hosts spinning in a collective -- or once quiet for the policy's window: a
    stuck-looking warm-up stopped again would be a false stop loop (each resume meets the same
    restore)."""
    prev = run.last_ending
    if cur.resume_from is None or prev is None or prev.attempt != cur.number - 1:
        return False
    if not prev.signature.startswith("HANG|"):
        return False
    newest = run.last_checkpoint
    return newest is None or newest.step <= cur.resume_from.step


def silence_from_logs(cur: Attempt, obs: Observations) -> bool:
    """Whether `cur`'s log silence is judged from its logs by the sweep's own check
    (`observations._log_silence`), not from its heartbeat alarm: no log subscription feeds a
    heartbeat, the deployment's heartbeat pipeline is broken, or this attempt's logs contradicted
    its silent heartbeat (domain/hangs/heartbeat.py)."""
    return not obs.log_subscription or obs.heartbeat_broken or cur.heartbeat_doubted_ms is not None


def _why_from_logs(cur: Attempt, obs: Observations) -> str:
    if not obs.log_subscription:
        return "no log subscription feeds a heartbeat; the sweep judges log silence from the logs"
    if obs.heartbeat_broken:
        return "the heartbeat pipeline is broken; the sweep judges log silence from the logs"
    return "its logs contradicted its silent heartbeat; the sweep judges its log silence from its logs"


def _trust_heartbeat_again(d: PendingDecision, cur: Attempt) -> Attempt:
    """The attempt's log-silence alarm is OK: heartbeat datapoints reach it again."""
    back = dataclasses.replace(cur, heartbeat_doubted_ms=None)
    d.put_attempt(back)
    d.note(
        "log_silence alarm OK: heartbeat datapoints arrive again; log silence is judged on the heartbeat again"
    )
    return back


@dataclass(frozen=True)
class QuietVerdict:
    """`judge_quiet`'s answer: ACT | WAIT | DEFER, why, the signals that act; `doubt`: the job's
    logs contradicted its heartbeat's silence; `looked_up_alarm_ms`: the log-silence alarm stretch
    (its ALARM since) whose silence was looked up in the logs during a benign phase."""

    kind: str
    why: str
    signals: tuple[HangSignal, ...] = ()
    doubt: bool = False
    looked_up_alarm_ms: int | None = None


def judge_quiet(
    run: Run, policy: RunPolicy, cur: Attempt, obs: Observations, now: int, quiet: list[HangSignal]
) -> QuietVerdict:
    """`quiet_judgement`, and a heartbeat's log silence confirmed in the job's own logs
    (`obs.heartbeat_check`, domain/hangs/heartbeat.py) before it may stop the job:

    - silent (no line in the window): the silence is real, the judgement stands;
    - lines: not silent, log_silence does not act (the other quiet signals are judged alone);
      lines the heartbeat should have shown also doubt the attempt's heartbeat (`doubt`);
    - unknown (the read failed, or was not made): no stop on it (DEFER when nothing else acts).

    While a benign phase is waited for, one look-up per log-silence ALARM stretch
    (`looked_up_alarm_ms`) tells a broken heartbeat from a quiet job early. Without a look-up at all
    (the service's first, look-up-free pass) the judgement stands, as in `quiet_judgement`."""
    kind, why = quiet_judgement(run, policy, cur, obs, now, quiet)
    heard = [e for e in quiet if e.signal == SIGNAL_LOG_SILENCE]
    if kind == DEFER or not heard or silence_from_logs(cur, obs) or not _looked_up(obs):
        return QuietVerdict(kind, why, tuple(quiet))
    check, since = obs.heartbeat_check, heard[0].since_ms
    window = silence_window_min(signal_window(run, policy, cur, SIGNAL_LOG_SILENCE))
    if kind == WAIT:
        if check is None:
            return QuietVerdict(kind, why, tuple(quiet))
        if check != LogCheck.CONTRADICTED:
            return QuietVerdict(
                kind, f"{why}; its logs looked up: {check.value}", tuple(quiet), looked_up_alarm_ms=since
            )
    if check == LogCheck.SILENT:
        return QuietVerdict(kind, f"{why}; its logs confirm it: no line for {window} min", tuple(quiet))
    if check == LogCheck.CONTRADICTED:
        note = (
            "log_silence in ALARM while the job's logs have lines its heartbeat never showed: the "
            "heartbeat pipeline failed this job, not the job; its log silence is judged from its logs "
            "until its log-silence alarm is OK again"
        )
    elif check == LogCheck.RECENT:
        note = f"log_silence in ALARM, but the job's logs have lines in the last {window} min: not silent"
    else:
        note = (
            "log_silence in ALARM, but its silence cannot be confirmed in the job's logs: "
            f"{obs.heartbeat_check_error or 'they were not read'}"
        )
    doubt = check == LogCheck.CONTRADICTED
    rest = [e for e in quiet if e.signal != SIGNAL_LOG_SILENCE]
    looked = since if kind == WAIT else None
    if not rest:
        return QuietVerdict(DEFER if check is None else WAIT, note, (), doubt, looked)
    kind, why = quiet_judgement(run, policy, cur, obs, now, rest)
    return QuietVerdict(kind, f"{note}; {why}", tuple(rest), doubt, looked)


def _looked_up(obs: Observations) -> bool:
    """Whether the evidence of what the job is doing was looked up (not the service's first,
    look-up-free pass)."""
    return any(
        x is not None
        for x in (obs.save_activity_ms, obs.save_activity_error, obs.host_metrics, obs.host_metrics_error)
    )


def _alarmed_quiet(run: Run, event: HangSignal | AlarmsObserved, now: int) -> list[HangSignal] | None:
    """The signals in ALARM in `event` that may be judged now (`ready_signals`), when every one
    of them is quiet; None when one is not (it acts without the evidence) or none is ready."""
    cur = run.current
    if cur is None or not cur.in_training or cur.training_started_ms is None:
        return None
    if isinstance(event, HangSignal):
        rows = [(event.signal, event.state, event.since_ms)]
    else:
        rows = [(key_signal(k), state, since) for k, state, since in event.states]
    earliest: dict[str, int] = {}
    for signal, state, since in rows:
        if state == "ALARM":
            earliest[signal] = min(since, earliest.get(signal, since))
    alarmed = [
        HangSignal(cur.job_name, cur.number, signal, "ALARM", since)
        for signal, since in sorted(earliest.items())
    ]
    if not alarmed or any(e.signal not in _QUIET_SIGNALS for e in alarmed):
        return None
    ready, _ = ready_signals(run, run.policy, cur, now, alarmed)
    return ready or None


def quiet_signals_wait(run: Run, event: HangSignal | AlarmsObserved, obs: Observations, now: int) -> bool:
    """Whether deciding on `event` will only wait for a benign phase (or a deferral): every
    signal in ALARM is quiet and judged WAIT or DEFER on `obs` (`judge_quiet`). The service then
    skips the log tail and per-host log triage, which only a hang's alert needs (a job of hundreds
    of hosts is quiet through every long save)."""
    cur = run.current
    alarmed = _alarmed_quiet(run, event, now)
    if cur is None or alarmed is None:
        return False
    return judge_quiet(run, run.policy, cur, obs, now, alarmed).kind != ACT


def silence_to_confirm(
    run: Run, event: HangSignal | AlarmsObserved, obs: Observations, now: int
) -> ConfirmWindows | None:
    """The reads of the job's training streams that deciding on `event` needs before it may act
    on the heartbeat's log silence (domain/hangs/heartbeat.py), judged on the evidence in `obs`: when
    the quiet signals would act, or, once per log-silence ALARM stretch, while a benign phase is
    waited for. None: no read is needed (no heartbeat log silence in ALARM, log silence judged
    from the logs already, or the decision waits for something else)."""
    cur = run.current
    alarmed = _alarmed_quiet(run, event, now)
    if cur is None or alarmed is None or silence_from_logs(cur, obs):
        return None
    heard = next((e for e in alarmed if e.signal == SIGNAL_LOG_SILENCE), None)
    if heard is None:
        return None
    windows = confirm_windows(signal_window(run, run.policy, cur, SIGNAL_LOG_SILENCE), heard.since_ms, now)
    kind, _ = quiet_judgement(run, run.policy, cur, obs, now, alarmed)
    if kind == ACT:
        return windows
    if kind == WAIT and windows.stale_until_ms is not None and cur.heartbeat_checked_ms != heard.since_ms:
        return windows
    return None


def _evidence_free_window(policy: RunPolicy, signal: str) -> int:
    """How long a quiet signal must last to act on without evidence: the policy's window."""
    return {
        SIGNAL_LOG_SILENCE: policy.log_silence_minutes,
        SIGNAL_PROGRESS: policy.progress_stall_minutes,
        SIGNAL_GPU_IDLE: policy.gpu_idle_minutes,
    }.get(signal, 0)
