"""One `sagewarden selftest` session: submit the run, watch it step by step against the deadlines,
and check in the job's log that the script resumed from the checkpoints sagewarden named.

Its cleanup (ending the run, deleting the uploads) is sagewarden_cli/selftest_cleanup.py; the
command that drives it is sagewarden_cli/selftest.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sagewarden_cli import selftest_shapes
from sagewarden_cli.errors import API_ERROR, NETWORK, CliError
from sagewarden_cli.selftest_job import Target, training_job
from sagewarden_cli.selftest_plan import NEWER_POLICY, PLAN, RUN_NAME, Plan
from sagewarden_cli.selftest_steps import DONE, FAILED, MAX_POLL_FAILURES, Observation, Step, steps

if TYPE_CHECKING:
    from sagewarden_cli.client import Client, Context
    from sagewarden_cli.env import Env


NOT_YET = "not yet"  # script_resumes: a line not (yet) in the log


@dataclass
class Outcome:
    title: str
    state: str  # done | failed | not reached
    at_ms: int | None = None
    took_ms: int | None = None
    deadline_min: float | None = None
    detail: str = ""


@dataclass
class SelfTest:
    env: Env
    ctx: Context
    target: Target
    policy: dict[str, Any]
    plan: Plan = PLAN
    interval_s: float = 10.0
    outcomes: list[Outcome] = field(default_factory=list)
    run_id: str | None = None
    dropped: list[str] = field(default_factory=list)
    # The POST /runs (body, headers) whose answer has not come: the run may exist without its id
    # being known here (sagewarden_cli/selftest_cleanup.py finds it by the request's Idempotency-Key).
    pending: tuple[dict[str, Any], dict[str, str]] | None = None
    shapes: selftest_shapes.ShapeReport | None = None  # what CloudWatch made of the alarm shapes at deploy
    _events: list[dict[str, Any]] = field(default_factory=list)
    _cursor: str | None = None
    _seen_on_page: int = 0

    @property
    def client(self) -> Client:
        return self.ctx.client

    @property
    def run_name(self) -> str:
        return RUN_NAME

    def say(self, text: str) -> None:
        if self.env.json:
            self.env.note(text)
        else:
            self.env.out(text)

    # -- submit ------------------------------------------------------------------------------
    def submit(self, stamp: str) -> dict[str, Any]:
        """POST /runs; policy fields the deployed API does not know (NEWER_POLICY) are dropped."""
        policy: dict[str, Any] = {**NEWER_POLICY, **self.policy}
        job = training_job(self.target, self.plan)
        headers = {"Idempotency-Key": f"selftest-{stamp}"}
        for _ in range(len(NEWER_POLICY) + 1):
            body = {"name": RUN_NAME, "training_job": job, "policy": dict(policy)}
            # until an answer says otherwise, this request may have created the run
            self.pending = (body, headers)
            resp = self.client.send("POST", "/runs", body=body, headers=headers)
            if resp.status >= 500:  # e.g. API Gateway's 504 while the function stored the run
                raise self.client.api_error(resp)
            if resp.status < 400:
                run = dict(self.client.decode(resp))
                self.pending = None
                return run
            self.pending = None  # refused: nothing was created
            if resp.status != 400:
                raise self.client.api_error(resp)
            unknown = _unknown_newer_fields(resp.body, policy, self.policy)
            if not unknown:
                raise self.client.api_error(resp)
            for key in unknown:
                policy.pop(key)
            self.dropped += unknown
        raise self.client.api_error(resp)

    # -- watch -------------------------------------------------------------------------------
    def observe(self) -> Observation:
        run = dict(self.client.call("GET", f"/runs/{self.run_id}"))
        now = self.client.now_ms()
        self._poll_events()
        return Observation(run, self._events, now)

    def _poll_events(self) -> None:
        path = f"/runs/{self.run_id}/events"
        cursor, skip = self._cursor, self._seen_on_page
        while True:
            page = self.client.call(
                "GET", path, query={"limit": "100", **({"cursor": cursor} if cursor else {})}
            )
            items = list(page.get("events") or [])
            self._events += items[skip:]
            nxt = page.get("next_cursor")
            if not nxt:
                self._cursor, self._seen_on_page = cursor, len(items)
                return
            cursor, skip = nxt, 0

    def watch(self, submitted_ms: int) -> bool:
        plan = steps(self.plan, self.policy)
        self.outcomes = [Outcome("submitted", "done", submitted_ms, 0, None, f"run {self.run_id}")]
        self._print(self.outcomes[0], submitted_ms)
        prev = submitted_ms
        index = 0
        wait = self.interval_s
        failures = 0
        while index < len(plan):
            try:
                obs = self.observe()
                failures = 0
            except CliError as err:  # a network blip must not end a half-hour test
                failures += 1
                if err.code not in (NETWORK, API_ERROR) or failures > MAX_POLL_FAILURES:
                    raise
                self.env.note(f"(polling the API failed: {err}; retrying)")
                self.env.sleep(self.interval_s * 4)
                continue
            progressed = False
            while index < len(plan):
                step = plan[index]
                result = step.check(obs)
                deadline_ms = step.deadline_min * 60_000
                if result.state == DONE:
                    at = max(result.at_ms if result.at_ms is not None else obs.now_ms, prev)
                    took = at - prev
                    if took > deadline_ms:
                        out = Outcome(
                            step.title,
                            FAILED,
                            at,
                            took,
                            step.deadline_min,
                            f"happened after {took / 60_000:.1f} min, beyond its deadline: {result.detail}",
                        )
                        self._finish_failed(out, plan[index + 1 :], submitted_ms)
                        return False
                    out = Outcome(step.title, DONE, at, took, step.deadline_min, result.detail)
                    self.outcomes.append(out)
                    self._print(out, submitted_ms)
                    prev, index, progressed = at, index + 1, True
                    continue
                if result.state == FAILED:
                    out = Outcome(
                        step.title, FAILED, obs.now_ms, obs.now_ms - prev, step.deadline_min, result.detail
                    )
                    self._finish_failed(out, plan[index + 1 :], submitted_ms)
                    return False
                if obs.now_ms - prev > deadline_ms:
                    out = Outcome(
                        step.title,
                        FAILED,
                        obs.now_ms,
                        obs.now_ms - prev,
                        step.deadline_min,
                        f"did not happen within {step.deadline_min:g} min; seen instead: {result.detail}",
                    )
                    self._finish_failed(out, plan[index + 1 :], submitted_ms)
                    return False
                break
            if index >= len(plan):
                return True
            wait = self.interval_s if progressed else min(wait * 2, self.interval_s * 4)
            self.env.sleep(wait)
        return True

    def _finish_failed(self, out: Outcome, rest: list[Step], submitted_ms: int) -> None:
        self.outcomes.append(out)
        self._print(out, submitted_ms)
        self.outcomes += [Outcome(s.title, "not reached", deadline_min=s.deadline_min) for s in rest]

    def _print(self, o: Outcome, submitted_ms: int) -> None:
        clock = _clock((o.at_ms or submitted_ms) - submitted_ms)
        mark = "ok  " if o.state == DONE else "FAIL"
        took = f"{o.took_ms / 60_000:5.1f} min" if o.took_ms and o.title != "submitted" else " " * 9
        detail = f"  {o.detail}" if o.detail else ""
        self.say(f"[{clock}] {mark} {o.title:<36} {took}{detail}")

    # -- the script's own word ---------------------------------------------------------------
    def script_resumes_landed(self, run: dict[str, Any]) -> tuple[str, str]:
        """`script_resumes`, read again for up to LATE_LINES_MS of server time while an attempt's
        'Resuming training' line is missing: CloudWatch Logs ingests a line some time after it
        is written (AWS publishes no bound), and a short last attempt may have just printed it."""
        from sagewarden_cli.logs import LATE_LINES_MS

        until = self.client.now_ms() + LATE_LINES_MS
        while True:
            state, text = self.script_resumes(run)
            if state != NOT_YET or self.client.now_ms() >= until:
                return ("not checked" if state == NOT_YET else state), text
            self.env.sleep(self.interval_s)
            run = dict(self.client.call("GET", f"/runs/{self.run_id}"))  # (and the server's time)

    def script_resumes(self, run: dict[str, Any]) -> tuple[str, str]:
        """(state, text): did the script load the checkpoint sagewarden named (its log says so)?
        NOT_YET: an attempt's log has no such line so far."""
        from sagewarden_cli.logs import JobLogReader

        found: list[str] = []
        for a in run.get("attempts") or []:
            want = (a.get("resumed_from") or {}).get("step")
            if want is None or not a.get("training_started_at"):
                continue
            try:
                reader = JobLogReader(self.ctx.aws_client("logs"), str(a["job_name"]))
                reader.refresh_streams()
                lines = [line.message for line in reader.read_new()]
            except Exception as exc:  # a missing permission must not fail the self-test
                return "not checked", f"its logs could not be read ({_one_line(str(exc))})"
            said = [
                int(m.group(1))
                for t in lines
                if (m := re.search(r"Resuming training from global step (\d+)", t))
            ]
            if not said:
                return NOT_YET, f"attempt {a['number']}'s log has no 'Resuming training' line (yet)"
            if said[0] != want:
                return (
                    FAILED,
                    f"attempt {a['number']} resumed from step {said[0]}, but sagewarden named step {want}",
                )
            found.append(f"attempt {a['number']} from step {want}")
        if not found:
            return "not checked", "no resumed attempt trained"
        return DONE, "the script's log confirms: " + ", ".join(found)


def _unknown_newer_fields(raw: bytes, sent: Mapping[str, Any], ours: Mapping[str, Any]) -> list[str]:
    """The NEWER_POLICY fields a 400 calls unknown, when they are all it complains about."""
    try:
        errors = json.loads(raw).get("errors") or []
    except (ValueError, AttributeError):
        return []
    unknown: list[str] = []
    for e in errors:
        f = str(e.get("field", "")) if isinstance(e, dict) else ""
        name = f.removeprefix("policy.")
        message = str(e.get("message", "")) if isinstance(e, dict) else ""
        if (
            name in NEWER_POLICY
            and name in sent
            and name not in ours
            and message.startswith("unknown policy field")
        ):
            unknown.append(name)
        else:
            return []
    return unknown


def _clock(ms: int) -> str:
    s = max(0, ms) // 1000
    return f"{s // 60:3d}:{s % 60:02d}"


def _one_line(text: str) -> str:
    return " ".join(text.split())[:200]
