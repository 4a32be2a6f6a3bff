"""Runs a scenario on the local account: a discrete-event loop over virtual time, with hooks.

Why: docs/drill.md (*The runner and the reports*)."""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from drill.account.local import Delivery, LocalAccount, template_for
from drill.reports.report import (
    check_expectations,
    fault_summary,
    from_iso,
    ground_truth,
    hang_signals,
    iso,
    run_times,
)
from drill.scenarios.spec import RunSpec, Scenario
from drill.sim.model import SimJob
from drill.sim.texts import PAUSE_KINDS
from drill.sim.training_plans import install as install_plans
from sagewarden.domain.vocabulary.layouts import parse_s3_uri

MINUTE = 60_000


@dataclass
class TimelineRow:
    at_ms: int
    run: str
    kind: str  # event | decision | action | error | FAULT | API
    text: str
    routine: bool = False  # an event row the next decision repeats (hidden unless --verbose)
    detail: dict[str, Any] = field(default_factory=dict)  # the audit entry's detail (e.g. the event's fields)


def _is_noise(entry: dict[str, Any]) -> bool:
    """Rows a person does not need in the timeline (they stay in the audit trail and --verbose):
    the event rows of a submission and a launch confirmation, which the next decision restates.
    (An event that changed nothing is not in the audit trail at all: it is counted and logged.)"""
    return entry["kind"] == "event" and entry["summary"].startswith(("Submitted(", "LaunchAccepted("))


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
    description: str = ""
    run_names: dict[str, str] = field(default_factory=dict)  # run id -> name
    # the account's API rate limits and read-after-create delays as the supervisor met them:
    # calls, throttled and waited_s per operation, hidden_reads (drill/sim/rate_limits.py)
    api: dict[str, Any] = field(default_factory=dict)

    def alert_rows(self) -> list[dict[str, Any]]:
        """Every alert published, in time order: at (ms), run name, severity, event, subject, body."""
        rows = []
        for at_ms, msg in sorted(self.alerts_sent, key=lambda a: a[0]):
            run_id = dict(msg.attributes).get("run_id", "")
            rows.append(
                {
                    "at_ms": at_ms,
                    "run": self.run_names.get(run_id, run_id),
                    "severity": msg.severity,
                    "event": msg.event,
                    "subject": msg.subject,
                    "body": msg.body,
                }
            )
        return rows

    def summary(self) -> dict[str, Any]:
        """The JSON summary (``--json``): ISO times, durations in seconds (``_s``), no epoch ms."""
        return {
            "scenario": self.scenario,
            "description": self.description,
            "seed": self.seed,
            "started_at": iso(self.start_ms),
            "ended_at": iso(self.end_ms),
            "virtual_duration_s": round((self.end_ms - self.start_ms) / 1000, 1),
            "wall_s": round(self.wall_seconds, 2),
            "events_delivered": self.events_delivered,
            "alerts_published": self.alerts,
            "runs": self.runs,
            "faults": [
                {"at": iso(f["at_ms"]), **{k: v for k, v in f.items() if k != "at_ms"}} for f in self.faults
            ],
            "alerts": [
                {"at": iso(a["at_ms"]), **{k: v for k, v in a.items() if k != "at_ms"}}
                for a in self.alert_rows()
            ],
            "counters": self.counters,
            "api": self.api,
            "invariant_violations": self.invariant_violations,
        }


def api_summary(acct: LocalAccount) -> dict[str, Any]:
    """What the account's API limits did to the supervisor's calls (see DrillResult.api)."""
    limits = acct.rate_limits
    return {
        "calls": dict(sorted(limits.calls.items())),
        "throttled": dict(sorted(limits.throttled.items())),
        "waited_s": {k: round(v / 1000, 1) for k, v in sorted(limits.waited_ms.items())},
        "hidden_reads": acct.sagemaker_view.hidden_answers,
    }


class AccountStepper:
    """One step of a simulated account's world on its virtual clock: the simulated SageMaker's next
    change, EventBridge deliveries, alarm evaluation and the every-minute sweep, in that order.

    Shared by the drill's loop (below) and the local API server (``drill/account/server.py``), which
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
        self.template = template_for(template, log_subscription=scenario.log_subscription)
        self.evaluator_factory = evaluator_factory
        self.hooks = list(hooks)
        self.account_options = dict(account_options or {})  # extra LocalAccount keyword arguments
        self.run_ids: dict[str, str] = {}
        # runs submitted again under a name (a person resubmitting a run that gave up): the ids
        # before the current one, whose audit trails stay in the timeline
        self.earlier_run_ids: dict[str, list[str]] = {}
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
            spot_quotas=sc.spot_quotas,
            total_spot_instance_quota=sc.total_spot_instance_quota,
            startup=sc.startup,
            warm_pools=sc.warm_pools,
            delivery=Delivery(**d) if d else Delivery(),
            timestamp_form=sc.timestamp_form,
            policy_defaults=sc.policy_defaults,
            reconcile_interval_min=sc.reconcile_interval_min,
            store=sc.store,
            metric_delay=sc.metric_delay,
            api_rates=sc.api_rates,
            api_retry_wait_s=sc.api_retry_wait_s,
            describe_after_create_s=sc.describe_after_create_s,
            heartbeat_outages=sc.heartbeat_outages,
            **self.account_options,
        ) as acct:
            self.acct = acct
            start = acct.clock.now_ms
            end_limit = start + int(sc.max_days * 24 * 60 * MINUTE)
            for spec in sc.runs:
                acct.sagemaker.set_profile(spec.name, spec.profile)
            for fault in sc.faults:
                acct.sagemaker.inject(fault)
            install_plans(acct.sagemaker.training_plans, sc.training_plans, start)
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
            before = self.run_ids.get(payload.name)
            if before is not None and before != body["run_id"]:
                self.earlier_run_ids.setdefault(payload.name, []).append(before)
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
            # ... and no warm pool of a run is left to release (an idle pool is billed too)
            if run is None or not run.status.terminal or run.warm_pools:
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

    def _archived(self, run: Mapping[str, Any]) -> tuple[list[str] | None, list[str], list[str]]:
        """For a run that archives retired checkpoints: the child directories under its own archive
        prefix (None: no archive), the archive copies there whose bytes are not what the run's jobs
        wrote at that key of the synced prefix (a copy of another run's file, or of nothing the run
        wrote), and the files its jobs wrote that are now nowhere: neither in the synced prefix nor,
        byte for byte, in the archive."""
        retention = run.get("retention") or {}
        archive = retention.get("archive_prefix")
        if not archive:
            return None, [], []
        s3 = self.acct.s3
        bucket, prefix = parse_s3_uri(archive)
        sync_bucket, sync_prefix = parse_s3_uri(str(run["training_job"]["CheckpointConfig"]["S3Uri"]))
        written = self.acct.sagemaker.checkpoint_writer.written
        copies: dict[str, bytes] = {}
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for obj in page.get("Contents", ()):
                copies[str(obj["Key"])[len(prefix) :]] = s3.get_object(Bucket=bucket, Key=obj["Key"])[
                    "Body"
                ].read()
        synced = {
            str(obj["Key"])
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=sync_bucket, Prefix=sync_prefix)
            for obj in page.get("Contents", ())
        }
        wrong = [
            f"{archive}{rel}"
            for rel, data in sorted(copies.items())
            if written.get((sync_bucket, sync_prefix + rel)) != data
        ]
        lost = [
            f"s3://{b}/{key}"
            for (b, key), data in sorted(written.items())
            if b == sync_bucket
            and key.startswith(sync_prefix)
            and key not in synced
            and copies.get(key[len(sync_prefix) :]) != data
        ]
        return sorted({rel.split("/", 1)[0] for rel in copies}), wrong, lost

    def _result(self, start: int, wall_s: float) -> DrillResult:
        acct = self.acct
        now = acct.clock.now_ms
        timeline: list[TimelineRow] = []
        runs: dict[str, dict[str, Any]] = {}
        jobs = list(acct.sagemaker.jobs())
        submitted = {c["call"].removeprefix("POST /runs "): c["at_ms"] for c in self.api_calls}
        for name, run_id in self.run_ids.items():
            _, run = acct.api("GET", f"/runs/{run_id}")
            audit = self._audit(run_id)
            archived, mismatches, lost = self._archived(run)
            earlier = [e for rid in self.earlier_run_ids.get(name, []) for e in self._audit(rid)]
            for e in [*earlier, *audit]:
                timeline.append(
                    TimelineRow(
                        e["at_ms"], name, e["kind"], e["summary"], routine=_is_noise(e), detail=e["detail"]
                    )
                )
            run_jobs = [j for j in jobs if j.run_name == name]
            sim_jobs = {j.name: j for j in run_jobs}
            submitted_ms = submitted.get(name, start)
            ended_ms = None
            if run["status"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
                ends = [j.ended_ms for j in run_jobs if j.ended_ms is not None]
                ended_ms = max([from_iso(run["updated_at"]) or submitted_ms, *ends])
            runs[name] = {
                "run_id": run_id,
                "status": run["status"],
                "outcome": run["outcome"],
                "submitted_at": iso(submitted_ms),
                "ended_at": iso(ended_ms),
                "attempts": [
                    {
                        "number": a["number"],
                        "job_name": a["job_name"],
                        "instances": f"{a['instance_count']} x {a['instance_type']}",
                        "resumed_from_step": a["resumed_from"]["step"] if a["resumed_from"] else None,
                        "resumed_checkpoint_age_s": a["resumed_checkpoint_age_s"],
                        "end_class": a["end_class"],
                        "end_reason": a["end_reason"],
                        "hang_signals": hang_signals(a),
                        "stop_intent": a["stop_intent"],
                        "infra_check": a["infra_check"],
                        "fabric": a["fabric"],
                        "straggler_host": a["straggler_host"],
                        "sagemaker": f"{a['sagemaker_status']}/{a['secondary_status']}",
                        "requested_at": a["requested_at"],
                        "training_started_at": a["training_started_at"],
                        "ended_at": a["ended_at"],
                        "restored": _restored(sim_jobs.get(a["job_name"])),
                    }
                    for a in run["attempts"]
                ],
                "restarts": run["restarts"],
                "max_restarts": run["policy"]["max_restarts"],
                "restarts_by_class": run["restarts_by_class"],
                "segments": run["segments"],
                "last_checkpoint_step": run["last_checkpoint"]["step"] if run["last_checkpoint"] else None,
                "time_s": {
                    f"{k}_s": v for k, v in run_times(run_jobs, submitted_ms, ended_ms or now).items()
                },
                "gpu_hours_lost": 0.0,
                "estimated_cost_usd": run["estimated_cost_usd"],
                "ettr": run["ettr"],
                "ground_truth": ground_truth(
                    acct.sagemaker.run_productive_ms(name, ended_ms or now), submitted_ms, ended_ms or now
                ),
                "decisions": [
                    e["summary"]
                    for e in audit
                    if e["kind"] == "decision" and not e["summary"].startswith("ignored")
                ],
                # checkpoint retention's moves, as the audit trail has them (results and errors), and
                # the checkpoint directories its archive prefix holds at the end
                "retention": [
                    e["summary"]
                    for e in audit
                    if e["kind"] in ("action", "error") and e["summary"].startswith("RetireCheckpoints")
                ],
                "archived": archived,
                "archive_mismatches": mismatches,
                "checkpoint_files_lost": lost,
            }
        faults = self._fault_report(timeline, runs)
        for f in faults:
            if f["run"] in runs and f["gpu_hours_lost"] is not None:
                runs[f["run"]]["gpu_hours_lost"] += f["gpu_hours_lost"]["total"]
            timeline.append(
                TimelineRow(
                    f["at_ms"], f["run"] or "-", "FAULT", f"{f['kind']} on {f['job']} (host algo-{f['host']})"
                )
            )
        for r in runs.values():
            r["gpu_hours_lost"] = round(r["gpu_hours_lost"], 2)
        timeline.sort(key=lambda r: (r.at_ms, 0 if r.kind == "FAULT" else 1))
        result = DrillResult(
            scenario=self.scenario.name,
            seed=self.scenario.seed,
            start_ms=start,
            end_ms=now,
            wall_seconds=wall_s,
            runs=runs,
            timeline=timeline,
            faults=faults,
            invariant_violations=[],
            api_calls=self.api_calls,
            alerts=len(acct.notifier.sent),
            alerts_sent=list(acct.notifier.sent),
            jobs=jobs,
            events_delivered=len(acct.delivered),
            counters=dict(acct.counters.values),
            api=api_summary(acct),
            description=self.scenario.description,
            run_names={
                **{rid: name for name, rids in self.earlier_run_ids.items() for rid in rids},
                **{run_id: name for name, run_id in self.run_ids.items()},
            },
        )
        alerts: dict[str, list[str]] = {}
        for a in result.alert_rows():
            alerts.setdefault(a["run"], []).append(a["event"])
        self.violations += check_expectations(self.scenario.expect, runs, alerts)
        result.invariant_violations = list(self.violations)
        return result

    def _fault_report(
        self, timeline: list[TimelineRow], runs: dict[str, dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Per fault: when it happened, how it was classed, when the supervisor acted, when a
        replacement trained, and its GPU-hours (drill.reports.report.fault_summary)."""
        sim = self.acct.sagemaker
        jobs = sim.jobs()  # (a list: a deleted job's name may have been used again)
        # per run, sorted: action times, and (Training start, job) -- bisected per fault, so the
        # report does not grow with faults x timeline
        actions: dict[str | None, list[int]] = {}
        for r in timeline:
            if r.kind == "action":
                actions.setdefault(r.run, []).append(r.at_ms)
        trainings: dict[str | None, list[tuple[int, str]]] = {}
        for j in jobs:
            if j.training_started_ms is not None:
                trainings.setdefault(j.run_name, []).append((j.training_started_ms, j.name))
        for times in actions.values():
            times.sort()
        for started in trainings.values():
            started.sort()
        out = fault_summary(sim.fault_log, sim.fault_records, jobs, runs, drill_end_ms=self.acct.clock.now_ms)
        for f in out:
            at_ms, job_name, run = f["at_ms"], f["job"], f["run"]
            run_actions = actions.get(run, [])
            # an action at the fault's very millisecond answers it (a sweep due that instant
            # reads the job the fault just ended)
            i = bisect.bisect_left(run_actions, at_ms)
            action_ms = run_actions[i] if i < len(run_actions) else None
            run_trainings = trainings.get(run, [])
            i = bisect.bisect_right(run_trainings, (at_ms, "\uffff"))
            healthy_ms = next((t for t, name in run_trainings[i:] if name != job_name and t), None)
            # a benign phase: nothing should follow it (a false alarm shows in its class)
            if f["kind"] in PAUSE_KINDS:
                action_ms = healthy_ms = None
            f["to_action_s"] = None if action_ms is None else round((action_ms - at_ms) / 1000, 1)
            f["to_healthy_replacement_s"] = (
                None if healthy_ms is None else round((healthy_ms - at_ms) / 1000, 1)
            )
        return out


def run_scenario(scenario: Scenario, template: dict[str, Any], **kwargs: Any) -> DrillResult:
    """Run a scenario; the supervisor's hang alarms are evaluated against the simulated metrics."""
    if kwargs.get("evaluator_factory") is None:
        from drill.alarms.evaluator import AlarmEvaluator

        kwargs["evaluator_factory"] = AlarmEvaluator
    return DrillRunner(scenario, template, **kwargs).run()


__all__ = ["AccountStepper", "DrillResult", "DrillRunner", "run_scenario"]


def _restored(job: SimJob | None) -> dict[str, Any] | None:
    """What a job's start downloaded from its CheckpointConfig.S3Uri, where the scenario models
    checkpoint sizes (profile.checkpoint_bytes): child directories, modelled bytes, seconds."""
    if job is None or job.restored_bytes is None:
        return None
    return {"dirs": list(job.restored_dirs), "bytes": job.restored_bytes, "seconds": job.restore_ms / 1000}
