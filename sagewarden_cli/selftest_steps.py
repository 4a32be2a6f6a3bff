"""`sagewarden selftest`'s steps: what each must see in the run (as the API shows it) and by when.

Each step's check reads one :class:`Observation` (the run, its events, the server's time) and says
pending, done (and when it happened) or failed; :func:`steps` lists them in order with their
deadlines, measured from the step before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sagewarden_cli.selftest_plan import PLAN, POLICY, Plan

# -- the steps ---------------------------------------------------------------------------------------
PENDING, DONE, FAILED = "pending", "done", "failed"
SCRIPT_CHECK = "script loaded the named checkpoints"
TERMINAL = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})
START_DEADLINE_MIN = 20.0  # ml.m5.large provisioning and the image download; usually 3-8 minutes
ENDING_SLACK_MIN = 10.0  # an ending reaches sagewarden within seconds; room for a slow upload
# log silence is judged by the sweep instead of alarms when logSubscription=false: up to 10 minutes more
DETECTION_SLACK_MIN = 15.0
STOP_DEADLINE_MIN = 6.0
MAX_POLL_FAILURES = 5  # consecutive failed polls (network, 5xx, throttling) before giving up  # SIGKILL 120 s after the stop, then Stopping -> Stopped


@dataclass(frozen=True)
class Check:
    state: str  # pending | done | failed
    at_ms: int | None = None  # when it happened (server time)
    detail: str = ""


@dataclass(frozen=True)
class Step:
    title: str
    deadline_min: float  # from the previous step
    check: Callable[[Observation], Check]


@dataclass
class Observation:
    run: dict[str, Any]
    events: list[dict[str, Any]]
    now_ms: int

    def attempt(self, number: int) -> dict[str, Any] | None:
        for a in self.run.get("attempts") or []:
            if a.get("number") == number:
                return dict(a)
        return None


def _ms(text: Any) -> int | None:
    from sagewarden_cli.render import ms_of

    return ms_of(text) if isinstance(text, str) else None


def _ended(a: Mapping[str, Any]) -> bool:
    return a.get("sagemaker_status") in ("Completed", "Failed", "Stopped") or bool(a.get("ended_at"))


def _state(a: Mapping[str, Any]) -> str:
    parts = [p for p in (a.get("sagemaker_status"), a.get("secondary_status")) if p]
    return "/".join(parts) or str(a.get("launch") or "not launched")


def _ending(a: Mapping[str, Any]) -> str:
    text = f"attempt {a['number']} ended {_state(a)}"
    if a.get("end_class"):
        text += f", classed {a['end_class']}"
    if a.get("end_reason"):
        text += f": {a['end_reason']}"
    return text


def _run_over(o: Observation, wanted: str) -> Check | None:
    run = o.run
    if run.get("status") in TERMINAL:
        outcome = f": {run['outcome']}" if run.get("outcome") else ""
        return Check(FAILED, detail=f"the run is {run['status']}{outcome} (waiting for {wanted})")
    return None


def _training(number: int, resume_step: int | None) -> Callable[[Observation], Check]:
    def check(o: Observation) -> Check:
        a = o.attempt(number)
        if a is None:
            return _run_over(o, f"attempt {number}") or Check(
                PENDING, detail=f"no attempt {number} yet (run {o.run.get('status')})"
            )
        if resume_step is not None:
            got = (a.get("resumed_from") or {}).get("step")
            if got != resume_step:
                where = f"step {got}" if got is not None else "no checkpoint"
                return Check(
                    FAILED,
                    detail=f"attempt {number} was launched from {where}; the script's newest checkpoint "
                    f"is step {resume_step}",
                )
        started = _ms(a.get("training_started_at"))
        if started is not None:
            source = (a.get("resumed_from") or {}).get("uri")
            return Check(DONE, started, f"{a.get('job_name')}" + (f" from {source}" if source else ""))
        if _ended(a):
            return Check(FAILED, detail=_ending(a) + " before it trained")
        return _run_over(o, f"attempt {number} to train") or Check(
            PENDING, detail=f"attempt {number} is {_state(a)}"
        )

    return check


def _crash_classified(o: Observation) -> Check:
    a = o.attempt(1)
    if a is None or not _ended(a) or not a.get("end_class"):
        if a is not None and a.get("sagemaker_status") == "InProgress":
            return Check(PENDING, detail=f"attempt 1 is still {_state(a)}")
        return _run_over(o, "attempt 1 to end") or Check(PENDING, detail="attempt 1 has not ended yet")
    if a.get("sagemaker_status") == "Failed" and a.get("end_class") == "INFRASTRUCTURE":
        return Check(DONE, _ms(a.get("ended_at")), str(a.get("end_reason") or ""))
    return Check(FAILED, detail=_ending(a))


def _hang_stop(o: Observation, job_name: Any) -> int | None:
    """When sagewarden recorded the hang intent and asked SageMaker to stop the job (StopJob)."""
    for e in o.events:
        d = e.get("detail") or {}
        if e.get("kind") == "action" and d.get("intent") == "hang" and d.get("job_name") == job_name:
            return int(e["at_ms"]) if isinstance(e.get("at_ms"), int) else _ms(e.get("at"))
    return None


def _hang_detected(policy: Mapping[str, Any]) -> Callable[[Observation], Check]:
    def check(o: Observation) -> Check:
        a = o.attempt(2)
        if a is None:
            return _run_over(o, "attempt 2") or Check(PENDING, detail="no attempt 2")
        signals = list(a.get("hang_signals") or [])
        if a.get("stop_intent") == "hang":
            if signals and "log_silence" not in signals:
                return Check(
                    FAILED, detail=f"a hang was detected by {', '.join(signals)}, not by log silence"
                )
            shown = ", ".join(signals) or "log_silence"
            return Check(
                DONE,
                _hang_stop(o, a.get("job_name")) or o.now_ms,
                f"signals: {shown}; stopping {a.get('job_name')}",
            )
        if _ended(a):
            if a.get("sagemaker_status") == "Completed":
                return Check(
                    FAILED, detail="attempt 2 completed: the job never hung, so there was nothing to detect"
                )
            return Check(FAILED, detail=_ending(a) + "; no hang was detected")
        run_policy = o.run.get("policy") or {}
        started = _ms(a.get("training_started_at"))
        silent = f"{(o.now_ms - started) / 60_000:.1f} min after it started training" if started else ""
        return _run_over(o, "the hang detection") or Check(
            PENDING,
            detail=f"attempt 2 is still {_state(a)} {silent}, with no hang detected (hang_detection "
            f"{str(run_policy.get('hang_detection', policy['hang_detection'])).lower()}, log_silence_minutes "
            f"{run_policy.get('log_silence_minutes', policy['log_silence_minutes'])})",
        )

    return check


def _stopped(o: Observation) -> Check:
    a = o.attempt(2)
    if a is None:
        return Check(FAILED, detail="no attempt 2")
    if a.get("sagemaker_status") == "Stopped":
        return Check(DONE, _ms(a.get("ended_at")) or o.now_ms, f"{_state(a)}, classed {a.get('end_class')}")
    if _ended(a):
        return Check(FAILED, detail=_ending(a))
    return _run_over(o, "attempt 2 to stop") or Check(PENDING, detail=f"attempt 2 is {_state(a)}")


def _succeeded(o: Observation) -> Check:
    run = o.run
    if run.get("status") == "SUCCEEDED":
        a = o.attempt(3)
        return Check(
            DONE,
            _ms((a or {}).get("ended_at")) or _ms(run.get("updated_at")) or o.now_ms,
            str(run.get("outcome") or ""),
        )
    extra = o.attempt(4)
    if extra is not None:
        previous = o.attempt(3) or {"number": 3}
        return Check(FAILED, detail=_ending(previous) + "; sagewarden launched attempt 4")
    a = o.attempt(3)
    state = f"attempt 3 is {_state(a)}" if a else "no attempt 3"
    return _run_over(o, "the run to succeed") or Check(PENDING, detail=state)


def steps(plan: Plan = PLAN, policy: Mapping[str, Any] = POLICY) -> list[Step]:
    silence = float(policy["log_silence_minutes"])
    return [
        Step("attempt 1 training", START_DEADLINE_MIN, _training(1, None)),
        Step("crash classified INFRASTRUCTURE", plan.crash_after_min + ENDING_SLACK_MIN, _crash_classified),
        Step(
            f"resumed as attempt 2 from step {plan.resume_2}", START_DEADLINE_MIN, _training(2, plan.resume_2)
        ),
        Step(
            "hang detected (log silence)",
            plan.hang_after_min + silence + float(policy["hang_grace_minutes"]) + DETECTION_SLACK_MIN,
            _hang_detected(policy),
        ),
        Step("stopped", STOP_DEADLINE_MIN, _stopped),
        Step(
            f"resumed as attempt 3 from step {plan.resume_3}", START_DEADLINE_MIN, _training(3, plan.resume_3)
        ),
        Step("succeeded", plan.finish_after_min + ENDING_SLACK_MIN, _succeeded),
    ]
