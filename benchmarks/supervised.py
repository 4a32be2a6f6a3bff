"""sagewarden driving the benchmark's run through the real drill (handlers, service, adapters on
moto, the simulated SageMaker, the alarm evaluator), with the same person on call as the
alternatives: when sagewarden gives up on a run (restart budget, crash loop, a user error by
policy) it pages, and the person resubmits the run -- a new sagewarden run with the same
request, which resumes from the newest checkpoint -- after their paged delay, having fixed the
deterministic failure it stopped on, if any (benchmarks/user_bugs.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from benchmarks.person import Person
from benchmarks.trace import Trace, person_key
from benchmarks.workload import Workload
from drill.account.local import BUCKET, EXECUTION_ROLE
from drill.alarms.evaluator import AlarmEvaluator
from drill.scenarios.runner import DrillResult, DrillRunner
from drill.scenarios.spec import RunSpec, parse
from drill.sim.model import SimJob
from sagewarden.domain.vocabulary.advice import CheckpointAdvice, checkpoint_advice
from sagewarden.domain.vocabulary.models import RunStatus

# The policy this benchmark recommends for a long, large run (one place, so it can be tuned):
RECOMMENDED_POLICY: dict[str, Any] = {
    # warm restarts: a retained warm pool turns an 8-minute cold start into ~35 s after endings
    # that did not involve a bad instance (SageMaker keeps no pool after a hardware ending)
    "keep_alive_seconds": 1800,
    # a fault a day is normal at 2,048 GPUs: a 30-day run must not exhaust its budget
    "max_restarts": 200,
    # the shortest windows the benign set allows: a 12-minute checkpoint save is silent, so log
    # silence needs more than 12 minutes; a dead host is the lone-idle alarm's (3 minutes), while
    # a data-loader pause at an epoch boundary idles every GPU for minutes (a 5-minute window
    # stopped a 5-minute pause; `benchmarks/benign.py`)
    "log_silence_minutes": 15,
    "gpu_idle_minutes": 10,
    # an OOM after days of training is fragmentation or a leak more often than a code bug
    "oom_is_user_error": False,
    # tell every new attempt the Young/Daly interval (SAGEWARDEN_CHECKPOINT_MINUTES), which the
    # script below follows
    "apply_checkpoint_advice": True,
}
# the training-script contract the sagewarden runs' script follows (docs/recovery.md): the
# fingerprint line at start (a bad host that comes back is known by its GPU serials) and the
# checkpoint interval it is told; no peer reads either
CONTRACT: dict[str, Any] = {"fingerprints": True, "checkpoint_minutes_from_env": True}


@dataclass
class PersonOnCall:
    """A drill hook: resubmits the run after the person's paged delay when sagewarden gives up."""

    person: Person
    spec: RunSpec
    trace: Trace | None = None  # person_key of its deterministic failures
    max_resubmissions: int = 100
    actions: list[tuple[int, str, str]] = field(default_factory=list)
    _pending: int | None = None
    _handled: set[str] = field(default_factory=set)
    _pages: dict[int, int] = field(default_factory=dict)

    def next_time(self) -> int | None:
        return self._pending

    def done(self) -> bool:
        return self._pending is None

    def step(self, runner: DrillRunner) -> None:
        now = runner.acct.clock.now_ms
        if self._pending is not None:
            if now >= self._pending:
                self._pending = None
                for label in runner.acct.sagemaker.fix_recurring(self.spec.name):
                    self.actions.append((now, "fix: the bug, at the resubmission", label))
                runner.submit(self.spec)
                self.actions.append((now, "person: resubmit run", runner.run_ids[self.spec.name]))
            return
        run_id = runner.run_ids.get(self.spec.name)
        if run_id is None or run_id in self._handled or runner.acct.sagemaker.live_jobs(run_id):
            return  # a run with a live job has not given up (cheap: no store read)
        run = runner.acct.supervisor.store.get(run_id)
        if run is None or run.status != RunStatus.FAILED:
            return
        self._handled.add(run_id)
        if len(self._handled) > self.max_resubmissions:
            return
        records = runner.acct.sagemaker.fault_records
        fault = next((i for r in reversed(records) if (i := person_key(r.label, self.trace)) is not None), 0)
        k = self._pages.get(fault, 0)
        self._pages[fault] = k + 1
        self.actions.append((now, "page: sagewarden gave up", run_id))
        self._pending = now + self.person.paged_delay_ms(fault, k)


@dataclass
class SupervisedResult:
    drill: DrillResult
    jobs: list[SimJob]
    records: list[Any]
    start_ms: int
    end_ms: int
    completed: bool
    actions: list[tuple[int, str, str]]
    decisions: list[str]
    advice: CheckpointAdvice | None = None  # what GET /runs/{id} advised at the end (the last run)
    # when sagewarden decided on an ending (its audit: an attempt ended, a stop or a launch), sorted
    decided_ms: list[int] = field(default_factory=list)


def scenario_for(
    workload: Workload, trace: Trace, policy: dict[str, Any], *, seed: int, max_days: float = 400.0
) -> Any:
    return parse(
        {
            "name": f"bench-{workload.name}",
            "seed": seed,
            "max_days": max_days,
            # the hourly reconcile changes no decision here (no event is lost); it only costs drill time
            "account": {
                "store": "memory",
                "startup": dataclasses.asdict(workload.startup),
                "reconcile_interval_min": 60,
                # the account has the warm-pool quota the recommended policy's pools need (AWS's
                # default is 0: without it every restart is cold, and sagewarden says so once)
                "warm_pools": {"quotas": workload.warm_pool_quotas()},
            },
            "delivery": {"min_delay_s": 1, "max_delay_s": 20},
            "runs": [
                {
                    "name": workload.name,
                    "instance_type": workload.instance_type,
                    "instance_count": workload.hosts,
                    "max_runtime_hours": workload.max_runtime_days * 24,
                    "profile": {**dataclasses.asdict(workload.profile()), **CONTRACT},
                    "policy": policy,
                }
            ],
            "faults": trace.scenario_faults(workload.name),
        },
        bucket=BUCKET,
        role_arn=EXECUTION_ROLE,
    )


def run_sagewarden(
    workload: Workload,
    trace: Trace,
    person: Person,
    template: dict[str, Any],
    *,
    policy: dict[str, Any] | None = None,
    seed: int = 1,
    max_days: float = 400.0,
) -> SupervisedResult:
    scenario = scenario_for(workload, trace, policy or {}, seed=seed, max_days=max_days)
    hook = PersonOnCall(person, scenario.runs[0], trace=trace)
    runner = DrillRunner(
        scenario,
        template,
        evaluator_factory=AlarmEvaluator,
        hooks=[hook],
        # log reads are answered by the simulator: 256 host streams flushed into moto would cost
        # one moto call per stream and flush, minutes over 30 days (see drill.sim.cloudwatch);
        # alarm puts and reads, checkpoint objects and alerts go to moto's backends: serializing
        # 26 ten-metric alarms at every sweep pass was most of the drill's time
        # (drill/account/backend_clients.py, tested to give the same day)
        account_options={"logs": "simulated", "backend_reads": True},
    )
    result = runner.run()
    sim = runner.acct.sagemaker
    jobs = sim.jobs()
    completed = any(j.status == "Completed" for j in jobs if j.run_name == workload.name)
    done = [j.ended_ms for j in jobs if j.run_name == workload.name and j.status == "Completed"]
    end = max(t for t in done if t is not None) if completed else result.end_ms
    decisions = [d for run in result.runs.values() for d in run["decisions"]]
    last = runner.acct.supervisor.store.get(runner.run_ids[workload.name])
    advice = checkpoint_advice(last, end) if last is not None else None
    return SupervisedResult(
        drill=result,
        jobs=jobs,
        records=list(sim.fault_records),
        start_ms=result.start_ms,
        end_ms=end,
        completed=completed,
        actions=hook.actions,
        decisions=decisions,
        advice=advice,
        decided_ms=sorted(
            row.at_ms
            for row in result.timeline
            if row.run == workload.name
            and (
                (row.kind == "decision" and " ended: " in row.text)
                or (row.kind == "action" and row.text.startswith(("StopJob", "LaunchAttempt")))
            )
        ),
    )
