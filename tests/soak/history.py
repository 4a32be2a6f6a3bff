"""A history: one interleaving of what the world, the users and the supervisor do, step by step.

A step is a plain tuple `(kind, a, b)` (hypothesis generates and shrinks lists of them); `a`
and `b` pick what the step acts on (a run, a job, an event, an alarm, a port method, an error
class). `History.apply` carries a step out and returns a readable line, so a shrunk
counterexample reads as a story.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from sagewarden.domain.vocabulary.events import Tick
from sagewarden.domain.vocabulary.names import parse_job_name
from sagewarden.domain.vocabulary.policy import InstanceChoice, RunPolicy
from tests.soak.referee import MIN, Referee, make_world, settle
from tests.soak.world import ERROR_KINDS, FAULT_TARGETS, OUTCOMES, Delivery, Hook, World, aws_error

LOST_RESPONSE_TARGETS = ("sagemaker.create_training_job", "sagemaker.stop_training_job")
# SageMaker's calls are where a lost answer matters most (launches, stops): drawn more often
WEIGHTED_FAULT_TARGETS = FAULT_TARGETS + tuple(t for t in FAULT_TARGETS if t[0] in LOST_RESPONSE_TARGETS) * 3

KINDS = (
    "submit",
    "progress",
    "deliver",
    "sweep",
    "delay",
    "duplicate",
    "drop",
    "cancel",
    "flip",
    "fault",
    "race",
    "delete_alarm",
)
# how often each kind is drawn (hypothesis shrinks towards the first entries: simple steps first)
WEIGHTED_KINDS = (
    ("submit",) * 2
    + ("progress",) * 5
    + ("deliver",) * 5
    + ("sweep",) * 3
    + ("delay",) * 2
    + ("duplicate", "drop", "cancel", "flip", "flip")
    + ("fault",) * 3
    + ("race",) * 2
    + ("delete_alarm",)
)
MAX_RUNS = 5

POLICIES: tuple[tuple[str, RunPolicy, int], ...] = (
    ("default", RunPolicy(), 2),
    (
        "fallback",
        RunPolicy(instance_fallbacks=(InstanceChoice("ml.p4de.24xlarge", 2),), max_restarts=2),
        2,
    ),
    (
        "2-of-3",
        RunPolicy(
            hang_confirmation="2-of-3",
            gpu_idle_minutes=5,
            checkpoint_stale_minutes=60,
            progress_metric="train:loss",
        ),
        2,
    ),
    ("never-fits", RunPolicy(instance_fallbacks=(InstanceChoice("ml.p4de.24xlarge", 2),)), 6),
    ("tight", RunPolicy(max_restarts=0, max_no_progress_restarts=1, max_wall_clock_hours=3.0), 2),
)


@dataclass
class History:
    world: World = field(init=False)
    referee: Referee = field(init=False)
    runs: list[str] = field(default_factory=list)
    delivered: list[Delivery] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)  # problems found by a step itself
    submitted: int = 0
    store: Any = None  # the in-memory store unless given (e.g. the DynamoDB store on moto)

    def __post_init__(self) -> None:
        self.world, self.referee = make_world(store=self.store)

    # -- steps -------------------------------------------------------------------------------
    def apply(self, kind: str, a: int, b: int) -> str:
        text = getattr(self, f"_{kind}")(a, b)
        self.log.append(f"{len(self.log) + 1:>3}. [{self.world.now() // 1000 % 1_000_000:>6}s] {text}")
        return text

    def _submit(self, a: int, b: int) -> str:
        if self.submitted >= MAX_RUNS:
            return "submit: skipped (enough runs)"
        self.submitted += 1
        label, policy, count = POLICIES[a % len(POLICIES)]
        name = f"run-{self.submitted}"
        job = {
            "ResourceConfig": {
                "InstanceType": "ml.p4d.24xlarge",
                "InstanceCount": count,
                "VolumeSizeInGB": 100,
            }
        }
        outcome, result = self.world.submit(name, policy, overrides=job)
        if outcome != "ok":  # the client retries once with the same Idempotency-Key
            outcome, result = self.world.submit(name, policy, overrides=job)
        if outcome == "ok":
            self.runs.append(result[0].run_id)
            return f"submit {name} ({label}, {count} instances): {result[0].status.value}"
        run_id = self.world.run_id_of(name)
        if run_id:
            self.runs.append(run_id)
        return f"submit {name} ({label}): {outcome} ({result}); stored: {bool(run_id)}"

    def _progress(self, a: int, b: int) -> str:
        live = sorted(self.world.sagemaker.live_jobs(), key=lambda j: j.name)
        if not live:
            return "progress: no live job"
        job = live[a % len(live)]
        # half the time the natural next state, else any outcome (failures of every class too)
        outcome = "advance" if b % 2 == 0 else OUTCOMES[(b // 2) % len(OUTCOMES)]
        what = self.world.progress(job, outcome)
        return f"SageMaker: {self._short(job.name)} -> {what}"

    def _deliver(self, a: int, b: int) -> str:
        pending = self.world.pending
        if not pending:
            return "deliver: nothing pending"
        d = pending.pop(a % len(pending))
        self.delivered.append(copy.deepcopy(d))
        outcome = self.world.deliver(d)
        return f"deliver {self._describe(d)}: {outcome}"

    def _duplicate(self, a: int, b: int) -> str:
        if not self.delivered:
            return "duplicate: nothing delivered yet"
        d = copy.deepcopy(self.delivered[a % len(self.delivered)])
        d.tries = 0
        self.world.pending.append(d)
        return f"duplicate {self._describe(d)} (queued again)"

    def _drop(self, a: int, b: int) -> str:
        pending = self.world.pending
        if not pending:
            return "drop: nothing pending"
        d = pending.pop(a % len(pending))
        return f"drop {self._describe(d)}"

    def _delay(self, a: int, b: int) -> str:
        ms = (a % 31 + 1) * 3 * MIN + (b % 60) * 1000
        self.world.advance(ms)
        return f"time passes: {ms / MIN:.1f} min"

    def _sweep(self, a: int, b: int) -> str:
        served = self.referee.due_runs()
        fired = len(self.world.calls.fired)
        cleanup = b % 4 == 0
        outcome = self.world.sweep(cleanup=cleanup)
        if outcome == "ok" and len(self.world.calls.fired) == fired:
            self.extra += self.referee.check_alarms_after_sweep(served)
        return f"sweep{' with alarm cleanup' if cleanup else ''} ({len(served)} runs due): {outcome}"

    def _cancel(self, a: int, b: int) -> str:
        if not self.runs:
            return "cancel: no run"
        rid = self.runs[a % len(self.runs)]
        return f"cancel {self._run(rid)}: {self.world.cancel(rid)}"

    def _flip(self, a: int, b: int) -> str:
        state = "OK" if b % 3 == 0 else "ALARM"
        name = self.world.flip_alarm(a, state)
        return f"alarm {self._short(name)} -> {state}" if name else "flip: no alarm changes"

    def _fault(self, a: int, b: int) -> str:
        key, service = WEIGHTED_FAULT_TARGETS[a % len(WEIGHTED_FAULT_TARGETS)]
        if key in LOST_RESPONSE_TARGETS and b % 5 == 4:
            # SageMaker's idempotent-by-name calls: the call takes effect, its answer is lost
            self.world.calls.inject_lost_response(key, aws_error(service, "timeout", key))
            return f"fault: next {key} takes effect but its response is lost (read timeout)"
        kind = ERROR_KINDS[b % len(ERROR_KINDS)]
        self.world.calls.inject(key, aws_error(service, kind, key.split(".")[-1]))
        return f"fault: next {key} fails before it takes effect ({service} {kind})"

    def _race(self, a: int, b: int) -> str:
        if not self.runs:
            return "race: no run"
        rid = self.runs[a % len(self.runs)]
        variants = (
            "its next event",
            "a cancel",
            "a sweep tick",
            "a duplicate of its last event",
            "a sweep",
            "a cancel (while its next launch is in flight)",
        )
        variant = variants[b % len(variants)]
        world = self.world

        def nested() -> None:
            if variant == "its next event":
                mine = [d for d in world.pending if self._run_of(d) == rid]
                if mine:
                    world.pending.remove(mine[0])
                    self.delivered.append(copy.deepcopy(mine[0]))
                    world.deliver(mine[0])
                    return
                world.invoke(lambda: world.supervisor.handle(rid, Tick()))
            elif variant.startswith("a cancel"):
                world.cancel(rid)
            elif variant == "a sweep tick":
                world.invoke(lambda: world.supervisor.handle(rid, Tick()))
            elif variant == "a sweep":  # a whole sweep pass runs while this invocation saves
                world.sweep()
            else:
                mine = [d for d in self.delivered if self._run_of(d) == rid]
                if mine:
                    world.deliver(copy.deepcopy(mine[-1]))

        if "launch" in variant:  # between the save of a launch decision and CreateTrainingJob

            def launching(args: tuple[Any, ...]) -> bool:
                parsed = parse_job_name(str(args[1].get("TrainingJobName", "")))
                return parsed is not None and parsed[0] == rid

            world.calls.hooks.append(Hook("Launcher.launch", "before", when=launching, action=nested))
            return f"race: {self._run(rid)}'s next launch waits until {variant} ran to completion"
        world.calls.hooks.append(
            Hook("RunStore.save", "before", when=lambda args: args[0].run_id == rid, action=nested)
        )
        return f"race: the next save of {self._run(rid)} first lets {variant} run to completion"

    def _delete_alarm(self, a: int, b: int) -> str:
        names = sorted(self.world.cloudwatch.alarms)
        if not names:
            return "delete alarm: none"
        name = names[a % len(names)]
        del self.world.cloudwatch.alarms[name]
        return f"someone deletes alarm {self._short(name)}"

    # -- checks ------------------------------------------------------------------------------
    def check(self) -> list[str]:
        problems, self.extra = self.extra + self.referee.check_step(), []
        return problems

    def finish(self) -> list[str]:
        why = settle(self.world, self.referee)
        problems = self.referee.check_quiesced()
        if why:
            problems.append("the world never came to rest: " + "; ".join(why))
        return problems

    def story(self, problems: list[str]) -> str:
        return "\n".join(["violations:", *("  " + p for p in problems), "history:", *self.log])

    # -- naming --------------------------------------------------------------------------------
    def _run(self, rid: str) -> str:
        return f"run-{self.runs.index(rid) + 1}" if rid in self.runs else rid

    def _short(self, name: str) -> str:
        for rid in self.runs:
            name = name.replace(rid, self._run(rid))
        return name

    def _run_of(self, d: Delivery) -> str | None:
        from sagewarden.domain.vocabulary.names import parse_job_name

        if d.kind == "job":
            parsed = parse_job_name(str(d.payload.get("TrainingJobName", "")))
        else:
            from sagewarden.adapters.cloudwatch_hang_alarms import parse_alarm_name
            from tests.soak.world import ALARM_PREFIX

            alarm = parse_alarm_name(ALARM_PREFIX, str(d.payload["detail"]["alarmName"]))
            parsed = parse_job_name(alarm[0]) if alarm else None
        return parsed[0] if parsed else None

    def _describe(self, d: Delivery) -> str:
        if d.kind == "job":
            p = d.payload
            return f"{d.event_id} {self._short(p['TrainingJobName'])} {p['TrainingJobStatus']}/{p['SecondaryStatus']}"
        det: dict[str, Any] = d.payload["detail"]
        return f"{d.event_id} alarm {self._short(det['alarmName'])} {det['state']['value']}"
