"""Runs a scenario on the local account: a discrete-event loop over virtual time.

Each step jumps to the earliest of: the next simulated SageMaker change, the next event
delivery, the next minute at which the every-minute sweep would find a run due, the next
alarm evaluation, and the next scripted action. Nothing happens in between, so weeks of
virtual time take seconds.

Hooks (optional) act alongside the supervisor, e.g. a person on call who resubmits a run that
sagewarden gave up on: each has ``next_time() -> int | None`` (when it wants to act),
``step(runner)`` (called after every step; may call ``runner.submit(spec)``) and ``done() ->
bool`` (the drill does not end while a hook has something pending).
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from drill.account import BUCKET, EXECUTION_ROLE, Delivery, LocalAccount
from drill.scenario import RunSpec, Scenario

MINUTE = 60_000


@dataclass
class TimelineRow:
    at_ms: int
    run: str
    kind: str  # event | decision | action | error | FAULT | API
    text: str
    routine: bool = False  # a sweep or reconciler look that changed nothing (hidden unless --verbose)


def _is_noise(entry: dict[str, Any], following: dict[str, Any] | None) -> bool:
    """Rows a person does not need in the timeline (they stay in the audit trail and --verbose)."""
    text = entry["summary"]
    if entry["kind"] != "event":
        return False
    if text.startswith(("Submitted(", "LaunchAccepted(")):  # the next decision says the same
        return True
    if following is None or not following["summary"].startswith("ignored"):
        return False
    return text.startswith("Tick(") or text.endswith(("(describe)", " OK", " INSUFFICIENT_DATA"))


@dataclass
class DrillResult:
    scenario: str
    seed: int
    start_ms: int
    end_ms: int
    wall_seconds: float
    runs: dict[str, dict[str, Any]]
    timeline: list[TimelineRow]
    faults: list[dict[str, Any]]
    invariant_violations: list[str]
    api_calls: list[dict[str, Any]] = field(default_factory=list)
    alerts: int = 0
    events_delivered: int = 0
    alerts_sent: list[Any] = field(default_factory=list)  # (virtual ms, Notify) as published
    jobs: list[Any] = field(default_factory=list)  # the simulated SageMaker's jobs at the end (SimJob)
    counters: dict[str, float] = field(default_factory=dict)  # the supervisor's operational counters
    iam: Any = None  # drill.iam.ReplayReport: the run's AWS calls checked against the template's IAM

    def summary(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "seed": self.seed,
            "virtual_hours": round((self.end_ms - self.start_ms) / 3_600_000, 2),
            "wall_seconds": round(self.wall_seconds, 2),
            "events_delivered": self.events_delivered,
            "alerts_published": self.alerts,
            "runs": self.runs,
            "faults": self.faults,
            "counters": self.counters,
            "invariant_violations": self.invariant_violations,
        }


class AccountStepper:
    """One step of a simulated account's world on its virtual clock: the simulated SageMaker's next
    change, EventBridge deliveries, alarm evaluation and the every-minute sweep, in that order.

    Shared by the drill's loop (below) and the local API server (``drill/server.py``), which
    steps the same world in real time while API requests arrive between steps.
    """

    def __init__(self, acct: LocalAccount, evaluator: Any = None) -> None:
        self.acct = acct
        self.evaluator = evaluator

    def next_time(self, *, sweeping: bool) -> int | None:
        """The earliest virtual time at which something happens (never before now); None if idle.
        ``sweeping`` is False before any run exists (the drill skips the sweep's look-ups then)."""
        acct = self.acct
        candidates = [
            acct.sagemaker.next_event_time(),
            acct.next_delivery_ms(),
            acct.next_sweep_ms(self._alarms_in_alarm()) if sweeping else None,
            self.evaluator.next_time() if self.evaluator else None,
        ]
        times = [t for t in candidates if t is not None]
        return max(min(times), acct.clock.now_ms) if times else None

    def _alarms_in_alarm(self) -> bool | None:
        """The evaluator's ALARM set, when it keeps one (None: the account scans its alarms)."""
        ask = getattr(self.evaluator, "alarms_in_alarm", None)
        return ask() if ask is not None else None

    def step(
        self, t: int, *, sweeping: Callable[[], bool], scripted: Callable[[], None] | None = None
    ) -> None:
        """Advance to ``t`` and let everything due happen; ``scripted`` runs after the deliveries
        (the drill's scripted submissions and actions)."""
        acct = self.acct
        acct.sagemaker.advance(t)
        acct.deliver_due()
        if scripted is not None:
            scripted()
        if self.evaluator is not None:
            self.evaluator.evaluate_due()
            acct.deliver_due()
        nxt = acct.next_sweep_ms(self._alarms_in_alarm()) if sweeping() else None
        if nxt is not None and nxt <= acct.clock.now_ms:
            acct.run_sweep()


class DrillRunner:
    def __init__(
        self,
        scenario: Scenario,
        template: dict[str, Any],
        *,
        evaluator_factory: Any = None,
        hooks: Sequence[Any] = (),
        account_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.scenario = scenario
        self.template = template
        self.evaluator_factory = evaluator_factory
        self.hooks = list(hooks)
        self.account_options = dict(account_options or {})  # extra LocalAccount keyword arguments
        self.run_ids: dict[str, str] = {}
        self.api_calls: list[dict[str, Any]] = []
        self.violations: list[str] = []

    def run(self) -> DrillResult:
        sc = self.scenario
        wall = time.perf_counter()
        d = sc.delivery
        with LocalAccount(
            self.template,
            seed=sc.seed,
            quotas=sc.quotas,
            total_instance_quota=sc.total_instance_quota,
            startup=sc.startup,
            delivery=Delivery(**d) if d else Delivery(),
            timestamp_form=sc.timestamp_form,
            policy_defaults=sc.policy_defaults,
            reconcile_interval_min=sc.reconcile_interval_min,
            store=sc.store,
            **self.account_options,
        ) as acct:
            self.acct = acct
            start = acct.clock.now_ms
            end_limit = start + int(sc.max_days * 24 * 60 * MINUTE)
            for spec in sc.runs:
                acct.sagemaker.set_profile(spec.name, spec.profile)
            for fault in sc.faults:
                acct.sagemaker.inject(fault)
            evaluator = self.evaluator_factory(acct) if self.evaluator_factory else None
            scripted: list[tuple[int, str, Any]] = [
                (start + int(s.submit_at_min * MINUTE), "submit", s) for s in sc.runs
            ] + [(start + int(a["at_min"] * MINUTE), "action", a) for a in sc.actions]
            scripted.sort(key=lambda t: (t[0], t[1]))
            world = AccountStepper(acct, evaluator)

            def run_scripted() -> None:
                while scripted and scripted[0][0] <= acct.clock.now_ms:
                    _, what, payload = scripted.pop(0)
                    self._scripted(what, payload)

            while True:
                candidates = [
                    world.next_time(sweeping=bool(self.run_ids)),
                    scripted[0][0] if scripted else None,
                    *(h.next_time() for h in self.hooks),
                ]
                times = [t for t in candidates if t is not None]
                if not times:
                    break
                t = max(min(times), acct.clock.now_ms)
                if t > end_limit:
                    break
                world.step(t, sweeping=lambda: bool(self.run_ids), scripted=run_scripted)
                for hook in self.hooks:
                    hook.step(self)
                self._check_invariants()
                if not scripted and self._all_done() and acct.next_delivery_ms() is None:
                    break
            result = self._result(start, time.perf_counter() - wall)
            result.iam = acct.take_iam_report()  # IAM replay: a denied or unknown call is a violation
            result.invariant_violations += result.iam.failures()
        return result

    # ------------------------------------------------------------------------------------------
    def _scripted(self, what: str, payload: Any) -> None:
        acct = self.acct
        if what == "submit":
            headers = {"Idempotency-Key": payload.idempotency_key} if payload.idempotency_key else {}
            status, body = acct.api("POST", "/runs", body=payload.body, headers=headers)
            self.api_calls.append(
                {"at_ms": acct.clock.now_ms, "call": f"POST /runs {payload.name}", "status": status}
            )
            if status not in (200, 201):
                raise RuntimeError(f"submitting {payload.name} failed: {status} {body}")
            self.run_ids[payload.name] = body["run_id"]
        elif "cancel" in payload:
            run_id = self.run_ids[payload["cancel"]]
            status, _ = acct.api("POST", f"/runs/{run_id}/cancel")
            self.api_calls.append(
                {
                    "at_ms": acct.clock.now_ms,
                    "call": f"POST /runs/{{id}}/cancel {payload['cancel']}",
                    "status": status,
                }
            )
        else:
            raise ValueError(f"unknown scenario action {payload}")

    def submit(self, spec: RunSpec) -> None:
        """Submit a run now (POST /runs), as a scenario's scripted submission does."""
        self._scripted("submit", spec)

    def _all_done(self) -> bool:
        if any(not h.done() for h in self.hooks):
            return False
        if len(self.run_ids) < len(self.scenario.runs):
            return False
        # every simulated job of the account has ended too (nothing left burning money); checked
        # first: it is one counter, the runs' states are store reads
        if self.acct.sagemaker.live_count:
            return False
        for run_id in self.run_ids.values():
            run = self.acct.supervisor.store.get(run_id)
            if run is None or not run.status.terminal:
                return False
        return True

    def _check_invariants(self) -> None:
        # the simulator keeps the runs with several live jobs up to date: no scan per step
        crowded = self.acct.sagemaker.runs_with_several_live_jobs()
        if not crowded:
            return
        for name, run_id in self.run_ids.items():
            live = crowded.get(run_id, [])
            if len(live) > 1:
                msg = f"{name}: {len(live)} live jobs at once ({', '.join(live)})"
                if msg not in self.violations:
                    self.violations.append(msg)

    # ------------------------------------------------------------------------------------------
    def _audit(self, run_id: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        cursor = None
        while True:
            query = {"limit": "100", **({"cursor": cursor} if cursor else {})}
            status, body = self.acct.api("GET", f"/runs/{run_id}/events", query=query)
            if status != 200:
                raise RuntimeError(f"GET events failed: {status} {body}")
            events += body["events"]
            cursor = body.get("next_cursor")
            if not cursor:
                return events

    def _result(self, start: int, wall_s: float) -> DrillResult:
        acct = self.acct
        timeline: list[TimelineRow] = []
        runs: dict[str, dict[str, Any]] = {}
        for name, run_id in self.run_ids.items():
            _, run = acct.api("GET", f"/runs/{run_id}")
            audit = self._audit(run_id)
            for i, e in enumerate(audit):
                nxt = audit[i + 1] if i + 1 < len(audit) else None
                prev = audit[i - 1] if i else None
                noise = _is_noise(e, nxt) or (
                    prev is not None
                    and e["summary"].startswith("ignored")
                    and _is_noise(prev, e)
                    and not prev["summary"].startswith(("Submitted(", "LaunchAccepted("))
                )
                timeline.append(TimelineRow(e["at_ms"], name, e["kind"], e["summary"], routine=noise))
            runs[name] = {
                "run_id": run_id,
                "status": run["status"],
                "outcome": run["outcome"],
                "attempts": [
                    {
                        "number": a["number"],
                        "job_name": a["job_name"],
                        "instances": f"{a['instance_count']} x {a['instance_type']}",
                        "resumed_from_step": a["resumed_from"]["step"] if a["resumed_from"] else None,
                        "resumed_checkpoint_age_s": a["resumed_checkpoint_age_s"],
                        "end_class": a["end_class"],
                        "end_reason": a["end_reason"],
                        "sagemaker": f"{a['sagemaker_status']}/{a['secondary_status']}",
                        "training_started_at": a["training_started_at"],
                        "ended_at": a["ended_at"],
                    }
                    for a in run["attempts"]
                ],
                "restarts": run["restarts"],
                "restarts_by_class": run["restarts_by_class"],
                "segments": run["segments"],
                "last_checkpoint_step": run["last_checkpoint"]["step"] if run["last_checkpoint"] else None,
                "estimated_cost_usd": run["estimated_cost_usd"],
                "decisions": [
                    e["summary"]
                    for e in audit
                    if e["kind"] == "decision" and not e["summary"].startswith("ignored")
                ],
            }
        faults = self._fault_report(timeline)
        for f in faults:
            timeline.append(
                TimelineRow(
                    f["at_ms"], f["run"] or "-", "FAULT", f"{f['kind']} on {f['job']} (host algo-{f['host']})"
                )
            )
        timeline.sort(key=lambda r: (r.at_ms, 0 if r.kind == "FAULT" else 1))
        expected = self.scenario.expect
        for name, exp in expected.items():
            got = runs.get(name)
            if got is None:
                self.violations.append(f"expect: run {name} was never submitted")
                continue
            if "status" in exp and got["status"] != exp["status"]:
                self.violations.append(f"expect: {name} status {got['status']} != {exp['status']}")
            if "attempts" in exp and len(got["attempts"]) != exp["attempts"]:
                self.violations.append(f"expect: {name} attempts {len(got['attempts'])} != {exp['attempts']}")
        return DrillResult(
            scenario=self.scenario.name,
            seed=self.scenario.seed,
            start_ms=start,
            end_ms=acct.clock.now_ms,
            wall_seconds=wall_s,
            runs=runs,
            timeline=timeline,
            faults=faults,
            invariant_violations=list(self.violations),
            api_calls=self.api_calls,
            alerts=len(acct.notifier.sent),
            alerts_sent=list(acct.notifier.sent),
            jobs=list(acct.sagemaker.jobs()),
            events_delivered=len(acct.delivered),
            counters=dict(acct.counters.values),
        )

    def _fault_report(self, timeline: list[TimelineRow]) -> list[dict[str, Any]]:
        """Per fault: when it happened, when the supervisor acted, when a replacement trained."""
        out = []
        jobs = {j.name: j for j in self.acct.sagemaker.jobs()}
        # per run, sorted: action times, and (Training start, job) -- bisected per fault, so the
        # report does not grow with faults x timeline
        actions: dict[str | None, list[int]] = {}
        for r in timeline:
            if r.kind == "action":
                actions.setdefault(r.run, []).append(r.at_ms)
        trainings: dict[str | None, list[tuple[int, str]]] = {}
        for j in jobs.values():
            if j.training_started_ms is not None:
                trainings.setdefault(j.run_name, []).append((j.training_started_ms, j.name))
        for times in actions.values():
            times.sort()
        for started in trainings.values():
            started.sort()
        for at_ms, job_name, kind, host in self.acct.sagemaker.fault_log:
            job = jobs.get(job_name)
            run = job.run_name if job else None
            run_actions = actions.get(run, [])
            i = bisect.bisect_right(run_actions, at_ms)
            action_ms = run_actions[i] if i < len(run_actions) else None
            run_trainings = trainings.get(run, [])
            i = bisect.bisect_right(run_trainings, (at_ms, "\uffff"))
            healthy_ms = next((t for t, name in run_trainings[i:] if name != job_name and t), None)
            out.append(
                {
                    "at_ms": at_ms,
                    "run": run,
                    "job": job_name,
                    "kind": kind,
                    "host": host,
                    "to_action_s": None if action_ms is None else round((action_ms - at_ms) / 1000, 1),
                    "to_healthy_replacement_s": None
                    if healthy_ms is None
                    else round((healthy_ms - at_ms) / 1000, 1),
                }
            )
        return out


def run_scenario(scenario: Scenario, template: dict[str, Any], **kwargs: Any) -> DrillResult:
    """Run a scenario; the supervisor's hang alarms are evaluated against the simulated metrics."""
    if kwargs.get("evaluator_factory") is None:
        from drill.alarm_evaluator import AlarmEvaluator

        kwargs["evaluator_factory"] = AlarmEvaluator
    return DrillRunner(scenario, template, **kwargs).run()


__all__ = ["BUCKET", "EXECUTION_ROLE", "AccountStepper", "DrillResult", "DrillRunner", "run_scenario"]
