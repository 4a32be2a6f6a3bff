"""The strongest alternatives: a competent polling script, as an engineer would write it in an
afternoon, driving the simulated SageMaker through its public API (no sagewarden, no drill).

(e) ``script``: every 5 minutes, DescribeTrainingJob; a ``Failed`` or ``Stopped`` job is
    resubmitted at once from the newest complete checkpoint, asking for a warm pool
    (``KeepAlivePeriodInSeconds``, so a restart after a non-hardware ending can reuse the
    instances where the account allows it); a job in ``Training`` gets one FilterLogEvents over its
    streams for the last 15 minutes, and is stopped (StopTrainingJob, then resubmitted once it is
    ``Stopped``) when there is no line. The first 45 minutes of Training are a start-up allowance
    (compiles and NCCL init are silent): silence counts from its end, as sagewarden's
    ``startup_silence_minutes`` (45) does.
(e2) ``gpuscript``: the same script polling every minute, plus sagewarden's own GPU rules, read
    with GetMetricData (per host ``GPUUtilization``, 1-minute Average, only datapoints that have
    arrived: ``drill/alarms/metric_delay.py``): a host whose last 3 datapoints are idle (below 1 % per GPU)
    while a peer's newest is busy (above 50 % per GPU) -- 10 datapoints during the start-up
    allowance --, or every host idle for the last 10 datapoints after the allowance.

Both know one thing a careful engineer adds after the first bad night: an ending that repeats
with no new checkpoint in between is a loop -- the script's own stop (a save or a compile longer
than the rule allows) or a failure (a bad host coming back on the warm pool the resubmission
took: AWS keeps a pool's instances, bad ones included). The script then pages the person and
leaves the resubmission to them (and a stop's rule off); the person, after their paged delay,
doubles a looping rule's threshold (the start-up allowance when the stop came during start-up,
else the window), turns it back on, and resubmits. Hangs the rules miss wait for the person's
eyes, as for (a) and (b) (:mod:`benchmarks.baselines`). The person's resubmission is cold, as
theirs is for every supervisor: they first release the run's warm pools (UpdateTrainingJob,
``KeepAlivePeriodInSeconds`` 0, on each ended job whose pool is Available).

The logs are the script's own lines at its cadence (:class:`drill.sim.cloudwatch.ScriptLogs`).
GPU datapoints come from the simulator's metric model; the reads use its bounds
(:func:`drill.sim.series.gpu_bounds_by_host`) where they decide a rule and the datapoints where
they do not -- :meth:`GpuRules.read` (the fast path) is tested to give what
:meth:`GpuRules.read_datapoints` (GetMetricData's datapoints) gives.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from benchmarks.baselines import BaselineDriver, BaselineResult
from benchmarks.person import Person
from benchmarks.trace import Trace
from benchmarks.workload import Workload
from drill.alarms.metric_delay import MetricDelays, Series
from drill.clock import to_ms
from drill.sim import series
from drill.sim.cloudwatch import ScriptLogs
from drill.sim.sagemaker import SimSageMaker
from sagewarden.keys import TRAINING_LOG_GROUP, TRAINING_METRIC_NAMESPACE

MINUTE_MS = 60_000


@dataclass(frozen=True)
class ScriptRules:
    """What the polling script does, and its thresholds."""

    poll_minutes: float = 5.0
    log_silence_minutes: float = 15.0
    startup_allowance_minutes: float = 45.0
    keep_alive_seconds: int = 1800
    gpu: bool = False  # sagewarden's GPU rules too (e2)
    lone_idle_minutes: int = 3
    lone_idle_startup_minutes: int = 10  # during the start-up allowance (hosts finish a compile apart)
    whole_idle_minutes: int = 10
    idle_percent: float = 1.0  # per GPU
    busy_percent: float = 50.0  # per GPU
    stop_check_seconds: int = 30  # after its StopTrainingJob, the script polls until Stopped
    loop_after: int = 2  # automatic stops in a row with no new checkpoint in between: a loop


SCRIPT = ScriptRules()  # (e)
GPU_SCRIPT = ScriptRules(poll_minutes=1.0, gpu=True)  # (e2)
RULES = {"script": SCRIPT, "gpuscript": GPU_SCRIPT}


@dataclass(frozen=True)
class Reading:
    """One host's arrived datapoints in the read window, oldest first: (bucket ms, idle, busy)."""

    host: int
    points: tuple[tuple[int, bool, bool], ...]


class GpuRules:
    """sagewarden's two GPU rules, as the script (e2) applies them to GetMetricData."""

    def __init__(self, sim: SimSageMaker, rules: ScriptRules, delays: MetricDelays) -> None:
        self.sim = sim
        self.rules = rules
        self.delays = delays
        self._series: dict[tuple[str, int], Series] = {}

    def _arrival(self, job_name: str, host: int) -> Series:
        key = (job_name, host)
        found = self._series.get(key)
        if found is None:
            dims = {"Host": f"{job_name}/algo-{host}"}
            found = self._series[key] = self.delays.series(TRAINING_METRIC_NAMESPACE, "GPUUtilization", dims)
        return found

    def _window(self, now: int) -> tuple[int, int]:
        span = max(self.rules.whole_idle_minutes, self.rules.lone_idle_startup_minutes) + 5
        return now - span * MINUTE_MS, now

    def _thresholds(self, gpus: int) -> tuple[float, float]:
        return self.rules.idle_percent * gpus, self.rules.busy_percent * gpus

    def read_datapoints(self, job_name: str, now: int) -> list[Reading]:
        """Every host's arrived datapoints as GetMetricData answers them (one query per host)."""
        job = self.sim.job(job_name)
        idle, busy = self._thresholds(job.profile.gpus_per_host)
        start, end = self._window(now)
        out = []
        for host in range(1, job.instance_count + 1):
            dims = {"Host": f"{job_name}/algo-{host}"}
            points = self.sim.metric_datapoints(
                TRAINING_METRIC_NAMESPACE, "GPUUtilization", dims, start, end, 60, "Average"
            )
            arrival = self._arrival(job_name, host)
            out.append(
                Reading(
                    host,
                    tuple(
                        (t, v < idle, v > busy) for t, v in points if arrival.visible_at(t, MINUTE_MS) <= now
                    ),
                )
            )
        return out

    def read(self, job_name: str, now: int) -> list[Reading] | None:
        """The same readings, from the metric model's bounds where they decide a datapoint's class
        (values only where they do not); None when no host can have an idle datapoint in the
        window (then neither rule can fire)."""
        job = self.sim.job(job_name)
        idle, busy = self._thresholds(job.profile.gpus_per_host)
        start, end = self._window(now)
        shared, own = series.gpu_bounds_by_host(job, start, end, now)
        if all(lo >= idle for *_, lo, _ in shared) and all(
            lo >= idle for bounds in own.values() for *_, lo, _ in bounds
        ):
            return None
        sure = now - MINUTE_MS - self._max_delay_ms()  # buckets at or before this have all arrived
        out = []
        for host in range(1, job.instance_count + 1):
            bounds = own.get(host, shared)
            arrival = self._arrival(job_name, host)
            points: list[tuple[int, bool, bool]] = []
            values: dict[int, float] | None = None
            for first, last, lo, hi in bounds:
                for t in range(first, last, MINUTE_MS):
                    if t > sure and arrival.visible_at(t, MINUTE_MS) > now:
                        continue
                    if hi < idle or (lo >= idle and (lo > busy or hi <= busy)):
                        points.append((t, hi < idle, lo > busy))
                        continue
                    if values is None:  # the bounds do not decide: the datapoints themselves
                        dims = {"Host": f"{job_name}/algo-{host}"}
                        values = dict(
                            self.sim.metric_datapoints(
                                TRAINING_METRIC_NAMESPACE, "GPUUtilization", dims, start, end, 60, "Average"
                            )
                        )
                    v = values[t]
                    points.append((t, v < idle, v > busy))
            out.append(Reading(host, tuple(points)))
        return out

    def _max_delay_ms(self) -> int:
        return round(self.delays.gpu.max_s * 1000)

    def verdict(self, readings: list[Reading] | None, training_start: int, now: int) -> str | None:
        """``gpu_lone_idle`` / ``gpu_idle`` when a rule holds, else None."""
        if not readings:
            return None
        allowance_end = training_start + round(self.rules.startup_allowance_minutes * MINUTE_MS)
        lone = self.rules.lone_idle_minutes if now >= allowance_end else self.rules.lone_idle_startup_minutes
        # a peer busy in the same minutes (compared minute by minute: a late datapoint must not
        # make the end of an all-idle phase look like one idle host among busy ones)
        busy = [{t for t, _, b in r.points if b} for r in readings]
        for i, r in enumerate(readings):
            tail = r.points[-lone:]
            if len(tail) < lone or not all(p[1] for p in tail):
                continue
            minutes = {t for t, _, _ in tail}
            if any(j != i and minutes <= busy[j] for j in range(len(readings))):
                return "gpu_lone_idle"
        whole = self.rules.whole_idle_minutes
        for r in readings:
            tail = r.points[-whole:]
            if len(tail) < whole or not all(p[1] for p in tail) or tail[0][0] < allowance_end:
                return None
        return "gpu_idle"


class ScriptDriver(BaselineDriver):
    """(e) and (e2) on the simulator (see the module docstring)."""

    KINDS = tuple(RULES)
    PROGRESS_LOG_INTERVAL_S = 10**9  # the script reads ScriptLogs, not the simulator's tails

    def __init__(
        self,
        kind: str,
        workload: Workload,
        trace: Trace,
        person: Person,
        *,
        seed: int = 1,
        rules: ScriptRules | None = None,
        max_days: float = 400.0,
    ) -> None:
        rules = rules or RULES.get(kind, SCRIPT)
        super().__init__(
            kind, workload, trace, person, seed=seed, poll_minutes=rules.poll_minutes, max_days=max_days
        )
        self.rules = rules
        self.logs = ScriptLogs(self.sim)
        self.gpu = GpuRules(self.sim, rules, MetricDelays(seed=seed)) if rules.gpu else None
        self._stopping: str | None = None  # the job the script stopped, until it has ended
        self._loop: dict[str, tuple[int, int]] = {}  # rule -> (checkpoint at its last stop, stops in a row)
        self._off: set[str] = set()  # rules the script left off after a loop, until the person looks
        self._crashes: tuple[int, int] = (-1, 0)  # (checkpoint at the last failure, failures in a row)
        self._paged = False  # a loop was handed to the person: the script resubmits nothing meanwhile
        self.stops: list[tuple[int, str, str]] = []  # (ms, rule, job) of the script's own stops

    def _request(self) -> dict[str, Any]:
        request = super()._request()
        request["ResourceConfig"]["KeepAlivePeriodInSeconds"] = self.rules.keep_alive_seconds
        return request

    def _submit(self, who: str) -> None:
        if who.startswith("person"):
            self._paged = False
            self._crashes = (-1, 0)
            self._release_pools()
        try:
            super()._submit(who)
        except ClientError as err:  # throttled or over a quota: the next poll tries again
            self.actions.append((self.clock.now_ms, f"{who}: {err.response['Error']['Code']}", ""))

    def _on_event(self, event: dict[str, Any]) -> None:
        detail = event["detail"]
        if detail["TrainingJobName"] != self._current:
            return
        if detail["TrainingJobStatus"] == "Completed":
            self._done = True
        elif detail["TrainingJobStatus"] == "Stopped" and self._stopping_for_hang == self._current:
            super()._on_event(event)  # the person stopped it: they resubmit (or the script does first)
        # Failed and Stopped jobs otherwise wait for the script's next poll

    def _release_pools(self) -> None:
        """The person's cold start: every warm pool the run's ended jobs left is released."""
        if self._current is not None and not self.sim.job(self._current).is_terminal:
            return  # nothing to resubmit (the script was first)
        for job in self.sim.jobs():
            if not job.is_terminal or job.run_name != self.workload.name:
                continue
            try:
                self.sim.update_training_job(
                    TrainingJobName=job.name, ResourceConfig={"KeepAlivePeriodInSeconds": 0}
                )
            except ClientError:
                continue  # no pool Available there (none kept, not yet settled, reused or gone)
            self.actions.append((self.clock.now_ms, "person: release the warm pool", job.name))

    def _page(self, what: str, name: str, then: Callable[[], None]) -> None:
        """Page the person about a loop; ``then`` is what they do after their paged delay."""
        self._paged = True
        fault = self._fault_index()
        k = self._pages.get(fault, 0)
        self._pages[fault] = k + 1
        delivered = self.clock.now_ms + round(self._delivery.uniform(1.0, 20.0) * 1000)
        self.actions.append((delivered, f"page: script loops on {what}", name))
        self._at(delivered + self.person.paged_delay_ms(fault, k), f"person handles the {what} loop", then)

    # -- the script ------------------------------------------------------------------------------
    def _poll(self) -> None:
        if self._done:
            return
        self._look()
        self._at(self.clock.now_ms + self.poll_ms, "poll", self._poll)

    def _look(self) -> None:
        if self._paged:
            return  # the person has the run
        if self._current is None:
            self._submit("script")
            return
        d = self.sim.describe_training_job(TrainingJobName=self._current)
        status = d["TrainingJobStatus"]
        if status in ("Failed", "Stopped"):
            self._stopping = None
            if status == "Failed" and self._failure_loops(self._current):
                return
            self._submit("script")
        elif status == "InProgress" and d["SecondaryStatus"] == "Training" and self._stopping is None:
            started = max(
                to_ms(t["StartTime"]) for t in d["SecondaryStatusTransitions"] if t["Status"] == "Training"
            )
            rule = self._check(started)
            if rule is not None:
                self._stop(rule, started)

    def _check(self, started: int) -> str | None:
        now = self.clock.now_ms
        allowance = round(self.rules.startup_allowance_minutes * MINUTE_MS)
        silence = round(self.rules.log_silence_minutes * MINUTE_MS)
        if "log_silence" not in self._off and now - started >= allowance + silence:
            found = self.logs.filter_log_events(
                logGroupName=TRAINING_LOG_GROUP,
                logStreamNamePrefix=f"{self._current}/",
                startTime=now - silence,
                endTime=now,
                limit=1,
            )
            if not found["events"]:
                return "log_silence"
        if self.gpu is not None and self._current is not None:
            readings = self.gpu.read(self._current, now)
            rule = self.gpu.verdict(readings, started, now)
            if rule is not None and rule not in self._off:
                return rule
        return None

    def _failure_loops(self, name: str) -> bool:
        """A failure with no new checkpoint since the previous one: the second in a row pages."""
        checkpoint = self._newest_checkpoint()
        last, streak = self._crashes
        streak = streak + 1 if checkpoint == last else 1
        self._crashes = (checkpoint, streak)
        if streak < self.rules.loop_after:
            return False
        self._page("failures", name, lambda: self._submit("person"))
        return True

    def _stop(self, rule: str, started: int) -> None:
        name = self._current
        assert name is not None
        now = self.clock.now_ms
        self.sim.stop_training_job(TrainingJobName=name)
        self._stopping = name
        self.stops.append((now, rule, name))
        self.actions.append((now, f"script: stop ({rule})", name))
        checkpoint = self._newest_checkpoint()
        last, streak = self._loop.get(rule, (-1, 0))
        streak = streak + 1 if checkpoint == last else 1
        self._loop[rule] = (checkpoint, streak)
        if streak >= self.rules.loop_after:
            self._off.add(rule)
            self._loop.pop(rule)
            in_startup = now - started <= self._startup_span_ms(rule)
            self._page(rule, name, lambda: self._retune(rule, in_startup))
        self._at(now + self.rules.stop_check_seconds * 1000, "until stopped", self._until_stopped)

    def _startup_span_ms(self, rule: str) -> int:
        window = {
            "log_silence": self.rules.log_silence_minutes,
            "gpu_idle": self.rules.whole_idle_minutes,
        }.get(rule, self.rules.lone_idle_startup_minutes)
        return round((self.rules.startup_allowance_minutes + window) * MINUTE_MS) + self.poll_ms

    def _until_stopped(self) -> None:
        if self._done or self._stopping is None:
            return
        if self.sim.describe_training_job(TrainingJobName=self._stopping)["TrainingJobStatus"] == "Stopped":
            self._stopping = None
            if not self._paged:
                self._submit("script")
            return
        self._at(
            self.clock.now_ms + self.rules.stop_check_seconds * 1000, "until stopped", self._until_stopped
        )

    def _retune(self, rule: str, in_startup: bool) -> None:
        """The person looks at the loop: doubles what the rule waits for and turns it back on."""
        r = self.rules
        if in_startup:
            r = dataclasses.replace(r, startup_allowance_minutes=2 * r.startup_allowance_minutes)
        elif rule == "log_silence":
            r = dataclasses.replace(r, log_silence_minutes=2 * r.log_silence_minutes)
        elif rule == "gpu_idle":
            r = dataclasses.replace(r, whole_idle_minutes=2 * r.whole_idle_minutes)
        else:
            r = dataclasses.replace(r, lone_idle_minutes=2 * r.lone_idle_minutes)
        self.rules = r
        if self.gpu is not None:
            self.gpu.rules = r
        self._off.discard(rule)
        self.actions.append((self.clock.now_ms, f"person: retune the script ({rule})", self._current or ""))
        self._submit("person")  # once the stopped job has ended (else the script's next look does)


def run_script(
    kind: str, workload: Workload, trace: Trace, person: Person, **kwargs: Any
) -> tuple[BaselineResult, ScriptDriver]:
    driver = ScriptDriver(kind, workload, trace, person, **kwargs)
    return driver.run(), driver
