"""Crash injection: kill an invocation just before or just after the Nth call of a port method,
let the world redeliver and sweep, and check that nothing was lost.

A scenario is a script of what users, SageMaker and CloudWatch do (`Driver` methods). It is
first run without a crash to count the calls of every port method (`Protocol.method`, as
enumerated from `sagewarden.ports.aws`), then once per (method, N, side) with the invocation that
makes that call killed there (`Crash`, a BaseException: no `except Exception` swallows it, and
a killed invocation makes no further call, not even from a `finally`). A killed event delivery
is delivered again (Lambda's asynchronous retry), a killed API call is retried by its client,
a killed sweep is followed by the next one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sagewarden.domain.hangs.alarms import SIGNAL_LOG_SILENCE
from sagewarden.domain.vocabulary.policy import RunPolicy
from tests.soak.referee import MIN, Referee, make_world, settle
from tests.soak.world import ALARM_PREFIX, Hook, Job, World, port_methods


class ScenarioStuck(AssertionError):
    pass


@dataclass
class Driver:
    world: World
    referee: Referee
    names: dict[str, str] = field(default_factory=dict)  # run name -> run id
    allowed_duplicates: set[str] = field(default_factory=set)
    crashed: list[str] = field(default_factory=list)

    # -- invocations -------------------------------------------------------------------------
    def _after(self, outcome: str, what: str) -> None:
        if outcome == "crashed":
            self.crashed.append(what)
            # an alert SNS already has but the store still owes is published again later: the
            # duplicate an outbox cannot avoid when the process dies between the two
            published = {p.dedupe_id for p in self.world.sns.published}
            owed = {m.dedupe_id for m in self.world.raw_store.pending_outbox()}
            self.allowed_duplicates |= published & owed

    def submit(
        self, name: str, policy: RunPolicy | None = None, count: int = 2, plan: str | None = None
    ) -> None:
        job: dict[str, Any] = {
            "ResourceConfig": {
                "InstanceType": "ml.p4d.24xlarge",
                "InstanceCount": count,
                "VolumeSizeInGB": 100,
            }
        }
        if plan is not None:
            job["ResourceConfig"]["TrainingPlanArn"] = plan
        for _ in range(3):  # the client retries with the same Idempotency-Key
            outcome, result = self.world.submit(name, policy, overrides=job)
            self._after(outcome, f"submit {name}")
            if outcome == "ok":
                self.names[name] = result[0].run_id
                return
        raise ScenarioStuck(f"submit of {name} never succeeded")

    def cancel(self, name: str) -> None:
        rid = self.names.get(name) or self.world.run_id_of(name)  # during its submit: not known yet
        assert rid is not None, name
        for _ in range(3):
            outcome = self.world.cancel(rid)
            self._after(outcome, f"cancel {name}")
            if outcome != "crashed":
                return

    def deliver(self) -> None:
        for _ in range(200):
            if not self.world.pending:
                return
            d = self.world.pending.pop(0)
            self._after(self.world.deliver(d), f"deliver {d.event_id}")
        raise ScenarioStuck("the delivery queue never drains")

    def sweep(self, minutes: float = 0) -> None:
        self.world.advance(int(minutes * MIN))
        self._after(self.world.sweep(), "sweep")
        self.deliver()

    def read_api(self, name: str) -> None:
        sup = self.world.supervisor
        rid = self.names[name]
        for call in (
            lambda: sup.requests.get(rid),
            lambda: sup.requests.list_runs(None, 10, None),
            lambda: sup.requests.events(rid, 10, None),
        ):
            self._after(self.world.invoke(call)[0], "api read")

    # -- the world -------------------------------------------------------------------------------
    def job(self, name: str, attempt: int, *, wait: bool = True) -> Job:
        """The SageMaker job of `name`'s attempt; if it does not exist yet (its launch was lost
        with a killed invocation) the sweep gets time to re-issue it."""
        for _ in range(12):
            rid = self.names.get(name)
            for job in self.world.sagemaker.jobs.values():
                if job.run_id == rid and job.attempt == attempt:
                    return job
            if not wait:
                break
            for job in list(self.world.sagemaker.jobs.values()):  # SageMaker completes its stops
                if job.run_id == rid and job.status == "Stopping":
                    self.world.progress(job, "advance")
            self.deliver()
            self.sweep(minutes=3)
        raise ScenarioStuck(f"no job for {name} attempt {attempt}")

    def progress(self, name: str, attempt: int, *outcomes: str) -> None:
        job = self.job(name, attempt)
        for outcome in outcomes:
            self.world.progress(job, outcome)
        self.deliver()

    def stopped(self, name: str, attempt: int) -> None:
        """SageMaker completes the stop the supervisor asked for (waiting for the ask, which a
        killed invocation may have postponed to the sweep's retry)."""
        job = self.job(name, attempt)
        for _ in range(12):
            if job.status == "Stopping":
                self.world.progress(job, "advance")
                self.deliver()
                return
            self.sweep(minutes=3)
        raise ScenarioStuck(f"{job.name} was never asked to stop")

    def alarm(self, name: str, attempt: int, signal: str, state: str) -> None:
        job = self.job(name, attempt)
        slug = {"log_silence": "log-silence", "gpu_idle": "gpu-idle"}[signal]
        alarm = f"{ALARM_PREFIX}{job.name}--{slug}"
        for _ in range(6):  # its creation may have been lost with a killed invocation
            if alarm in self.world.cloudwatch.alarms:
                break
            self.sweep(minutes=2)
        if alarm not in self.world.cloudwatch.alarms:
            raise ScenarioStuck(f"alarm {alarm} never created")
        cw = self.world.cloudwatch.alarms[alarm]
        cw["StateValue"], cw["StateUpdatedTimestamp"] = state, self.world.now()
        self.world.emit_alarm(alarm)
        self.deliver()

    def at_call(self, key: str, action: Callable[[], None], side: str = "before") -> None:
        """Run another invocation when `key` is next called (e.g. a cancel during a launch)."""
        self.world.calls.hooks.append(Hook(key, side, action=action))


# --- scenarios ----------------------------------------------------------------------------------


def _to_training(d: Driver, name: str, attempt: int = 1) -> None:
    d.progress(name, attempt, "advance")  # Downloading
    d.progress(name, attempt, "advance")  # Training


def scenario_submit(d: Driver) -> None:
    d.submit("sub")
    d.progress("sub", 1, "advance")
    d.read_api("sub")


def scenario_training_start(d: Driver) -> None:
    d.submit("train")
    _to_training(d, "train")
    d.sweep(minutes=11)  # the sweep's alarm inventory confirms (or repairs) the hang alarms
    d.progress("train", 1, "checkpoint")
    d.sweep(minutes=11)


def scenario_failure_resume(d: Driver) -> None:
    d.submit("resume")
    _to_training(d, "resume")
    d.progress("resume", 1, "checkpoint")
    d.world.advance(20 * MIN)
    d.progress("resume", 1, "fail_infra")
    _to_training(d, "resume", 2)
    d.sweep(minutes=11)


def scenario_hang_stop_resume(d: Driver) -> None:
    d.submit("hang")
    _to_training(d, "hang")
    d.progress("hang", 1, "checkpoint")
    d.sweep(minutes=46)  # past the hang grace period and the start-up allowance for silence
    d.alarm("hang", 1, SIGNAL_LOG_SILENCE, "ALARM")
    d.sweep(minutes=1)
    d.stopped("hang", 1)
    _to_training(d, "hang", 2)
    d.sweep(minutes=11)


def scenario_cancel_during_launch(d: Driver) -> None:
    d.at_call("Launcher.launch", lambda: d.cancel("cancelled"))
    d.submit("cancelled")
    d.sweep(minutes=3)
    d.sweep(minutes=6)


def scenario_launch_unconfirmed(d: Driver) -> None:
    """CreateTrainingJob of attempt 1 takes effect but its answer is lost (a read timeout), and
    the job's first state-change event is lost too: the sweep must find the job it launched."""
    from tests.soak.world import aws_error

    d.world.calls.inject_lost_response(
        "sagemaker.create_training_job", aws_error("sagemaker", "timeout", "CreateTrainingJob")
    )
    d.submit("unconfirmed")
    d.world.pending.clear()  # the job's InProgress event never arrives
    d.sweep(minutes=3)  # the launch is re-issued: ResourceInUse, the job exists
    d.sweep(minutes=3)
    d.progress("unconfirmed", 1, "advance")


def scenario_cancel_while_training(d: Driver) -> None:
    d.submit("stopme")
    _to_training(d, "stopme")
    d.cancel("stopme")
    d.progress("stopme", 1, "fail_infra")  # ends Failed while the cancel's stop is in flight
    d.sweep(minutes=6)


def scenario_run_failed(d: Driver) -> None:
    d.submit("broken")
    _to_training(d, "broken")
    d.progress("broken", 1, "fail_user")  # ModuleNotFoundError: the run fails, run.failed is owed
    d.sweep(minutes=3)


def scenario_killed_rank(d: Driver) -> None:
    d.submit("killed")
    _to_training(d, "killed")
    d.progress("killed", 1, "checkpoint")
    d.world.advance(20 * MIN)
    d.progress("killed", 1, "fail_killed")  # the hosts' memory is read before the ending is classed
    d.sweep(minutes=3)


def scenario_quota_release(d: Driver) -> None:
    d.submit("first", count=4)
    d.job("first", 1)
    d.submit("second", count=2)  # the quota (4) is used by "first": waits, woken by its release
    _to_training(d, "first")
    d.progress("first", 1, "complete")
    d.job("second", 1)
    _to_training(d, "second")


def scenario_alert_retry(d: Driver) -> None:
    from tests.soak.world import aws_error

    d.world.calls.inject("sns.publish", aws_error("sns", "throttle", "Publish"))
    d.submit("alerts")  # run.submitted fails to publish: the sweep re-publishes from the outbox
    d.sweep(minutes=3)
    d.sweep(minutes=3)


def scenario_cadence_and_advice(d: Driver) -> None:
    d.submit("steady")
    _to_training(d, "steady")
    for _ in range(4):  # three hours of training, a checkpoint every 45 min: the sweep learns the
        d.progress("steady", 1, "checkpoint")  # log cadence (alarm re-put) and measures writes
        d.sweep(minutes=45)
    d.progress("steady", 1, "complete")
    d.sweep(minutes=3)


def scenario_cadence_from_logs(d: Driver) -> None:
    """Without a subscription the sweep judges log silence from the logs, so the job writes a
    line (a checkpoint) every 10 minutes -- fewer would be a hang -- for 90 minutes: long enough
    past the start-up allowance for the cadence to be read (LogReader.activity)."""
    d.submit("steady")
    _to_training(d, "steady")
    for _ in range(9):
        d.progress("steady", 1, "checkpoint")
        d.sweep(minutes=10)
    d.progress("steady", 1, "complete")
    d.sweep(minutes=3)


def scenario_log_silence_fallback(d: Driver) -> None:
    d.submit("quiet")
    _to_training(d, "quiet")
    d.sweep(minutes=11)
    d.world.advance(31 * MIN)  # no log line for longer than log_silence_minutes
    d.sweep(minutes=1)
    d.stopped("quiet", 1)
    d.sweep(minutes=6)


def scenario_heartbeat_pipeline(d: Driver) -> None:
    """The heartbeat pipeline breaks under a training job that keeps logging: its log-silence alarm
    goes to ALARM while its logs have lines; the stop is refused on its logs, its heartbeat is
    doubted and the pipeline judged broken (RunStore.save_pipeline, heartbeat.broken), until the
    alarm is OK again (heartbeat.restored). The job is never stopped."""
    d.submit("beat")
    _to_training(d, "beat")
    d.sweep(minutes=46)  # past the grace period and the start-up allowance for silence
    d.progress("beat", 1, "checkpoint")  # a line its heartbeat never shows
    d.alarm("beat", 1, SIGNAL_LOG_SILENCE, "ALARM")
    for _ in range(4):  # a delivering heartbeat would have ended the ALARM by now
        d.sweep(minutes=2)
    d.alarm("beat", 1, SIGNAL_LOG_SILENCE, "OK")
    d.sweep(minutes=1)
    d.sweep(minutes=1)  # a killed pass is followed by the next one, which still sees the OK
    d.progress("beat", 1, "complete")
    d.sweep(minutes=3)


def scenario_training_plan(d: Driver) -> None:
    d.submit("planned", plan="arn:aws:sagemaker:us-east-1:123456789012:training-plan/reserved")
    _to_training(d, "planned")
    d.sweep(minutes=31)  # the sweep reads the plan again (domain/capacity/training_plans.py)
    d.progress("planned", 1, "checkpoint")
    d.sweep(minutes=11)


def scenario_checkpoint_retention(d: Driver) -> None:
    d.submit("kept", RunPolicy(checkpoint_keep=1, checkpoint_retired="delete"))
    _to_training(d, "kept")
    for _ in range(3):
        d.progress("kept", 1, "checkpoint")
        d.sweep(minutes=11)  # the sweep reads the synced prefix and retires the older ones
    d.sweep(minutes=11)


@dataclass(frozen=True)
class Scenario:
    name: str
    script: Callable[[Driver], None]
    world: dict[str, Any] = field(default_factory=dict)
    # what must end the same whatever the crash: the runs' ends, the jobs created, the kinds of
    # alert published (an alert about a wait is left out where a crash can change the timing)
    same: tuple[str, ...] = ("runs", "jobs", "alerts")


SCENARIOS = (
    Scenario("submit", scenario_submit),
    Scenario("training start (hang alarms)", scenario_training_start),
    Scenario("failure -> resume", scenario_failure_resume),
    Scenario("hang -> stop -> resume", scenario_hang_stop_resume),
    Scenario("cancel during a launch", scenario_cancel_during_launch),
    Scenario("cancel while training, job fails meanwhile", scenario_cancel_while_training),
    Scenario("run failed (run.failed alert)", scenario_run_failed),
    # a killed launch of "second" that is re-issued after "first" released its instances finds
    # the quota free: no wait, no run.waiting alert
    Scenario("a killed rank (the hosts' memory read)", scenario_killed_rank),
    Scenario("quota wait -> capacity released", scenario_quota_release, same=("runs", "jobs")),
    Scenario("alert publish retried by the sweep", scenario_alert_retry),
    Scenario("a run on a training plan (plan read at submit and by the sweep)", scenario_training_plan),
    Scenario("checkpoint retention (older checkpoints retired by the sweep)", scenario_checkpoint_retention),
    Scenario("cadence learned, checkpoint writes measured", scenario_cadence_and_advice),
    Scenario("heartbeat pipeline broken under a logging job, then restored", scenario_heartbeat_pipeline),
    Scenario(
        "log silence without a subscription", scenario_log_silence_fallback, {"log_silence_fallback": True}
    ),
    # without a subscription the cadence is read from the logs (LogReader.activity)
    Scenario("cadence learned from the logs", scenario_cadence_from_logs, {"log_silence_fallback": True}),
    # a new job missing from DescribeTrainingJob/Stop for longer than the supervisor waits before
    # re-issuing a launch (2 min) or giving up on a cancelled one (5 min): "not found" must read as
    # "not visible yet", never as "never launched" (no second job, none left running)
    Scenario(
        "launch unconfirmed, job not visible for 3.5 min",
        scenario_launch_unconfirmed,
        {"read_after_create_ms": (210_000, 210_000)},
    ),
    Scenario(
        "cancel during a launch, job not visible for 6 min",
        scenario_cancel_during_launch,
        {"read_after_create_ms": (360_000, 360_000)},
    ),
)


# --- running -----------------------------------------------------------------------------------


@dataclass
class Result:
    driver: Driver
    problems: list[str]
    counts: Counter[str]
    returned: dict[str, list[int]] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """What must not depend on where a crash happened."""
        w = self.driver.world
        by_id = {rid: name for name, rid in self.driver.names.items()}
        runs = {}
        for name, rid in sorted(self.driver.names.items()):
            run = w.raw_store.get(rid, all_attempts=True)
            assert run is not None
            runs[name] = (run.status.value, run.attempt_count)
        jobs = sorted((by_id.get(j.run_id, j.run_id), j.attempt) for j in w.sagemaker.jobs.values())
        alerts = sorted({(by_id.get(p.run_id, p.run_id), p.event) for p in w.sns.published})
        return {"runs": runs, "jobs": jobs, "alerts": alerts}


def run_scenario(scenario: Scenario, crash: tuple[str, int, str] | None = None) -> Result:
    world, referee = make_world(**scenario.world)
    driver = Driver(world, referee)
    if crash is not None:
        key, nth, side = crash
        world.calls.hooks.append(Hook(key, side, nth=nth))
    problems: list[str] = []
    try:
        scenario.script(driver)
    except ScenarioStuck as stuck:
        problems.append(f"scenario stuck: {stuck}")
    counts = Counter({k: n for k, n in world.calls.counts.items() if k[0].isupper()})
    returned = {k: list(v) for k, v in world.calls.returned.items() if k[0].isupper()}
    if crash is not None and not driver.crashed:
        problems.append(f"the crash at {crash} never happened")
    referee.allowed_duplicates |= driver.allowed_duplicates
    problems += referee.check_step()
    why = settle(world, referee)
    problems += referee.check_quiesced()
    if why:
        problems.append("never came to rest: " + "; ".join(why))
    return Result(driver, sorted(set(problems)), counts, returned)


def crash_points(baseline: Result, per_method: int | None = None) -> list[tuple[str, int, str]]:
    """(port method, N, side) for every call the scenario made; `per_method` keeps the first
    calls of each method and its last one."""
    points = []
    for key in port_methods():
        calls = list(range(1, baseline.counts.get(key, 0) + 1))
        returned = baseline.returned.get(key, [])  # a call that raised has no "after"
        for side, numbers in (("before", calls), ("after", returned)):
            if per_method is not None and len(numbers) > per_method:
                numbers = [*numbers[: per_method - 1], numbers[-1]]
            points += [(key, k, side) for k in numbers]
    return points
