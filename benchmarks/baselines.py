"""The alternatives sagewarden is compared with, each driving the simulated SageMaker for real.

(a) ``retry``: SageMaker's own RetryStrategy (``MaximumRetryAttempts``; SageMaker retries only an
    InternalServerError, within the same job) plus a person on call. Every other failure pages
    the person, who resubmits after their delay; hangs page nobody and last until the person
    notices them (see :mod:`benchmarks.person`).
(b) ``poll``: a script calls DescribeTrainingJob every ``poll_minutes`` (5) and resubmits a
    ``Failed`` job from the newest complete checkpoint at once; it has no hang detection, so
    hangs wait for the same person.

Both run on the simulator and a virtual clock with no AWS account (no moto: checkpoint objects
are not stored, the simulator's own records say which checkpoints completed -- what the
training script's resume logic would find in CheckpointConfig). A resubmission is a new
CreateTrainingJob with ``SAGEWARDEN_RESUME_STEP`` set to that checkpoint, the way the simulated
script resumes. Event delivery to the person's pager takes 1-20 s, like the drill's EventBridge.
A deterministic failure of the trace (benchmarks/user_bugs.py) is fixed by the person when they
resubmit after a page, or when they notice the loop (their hang-notice delay after its first
ending), whichever comes first.
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchmarks.person import Person
from benchmarks.trace import Trace, person_key, trace_index
from benchmarks.workload import Workload
from drill.clock import VirtualClock
from drill.sim.model import SimJob
from drill.sim.sagemaker import SimSageMaker
from drill.sim.texts import HANG_PHASES
from drill.sim.warm_pools import WarmPoolSettings

BUCKET = "sagewarden-bench"
ROLE = "arn:aws:iam::123456789012:role/SageMakerTrainingRole"
MINUTE_MS = 60_000


class NullS3:
    """Checkpoint objects go nowhere (the baselines never list them; the simulator records them)."""

    def put_object(self, **_: Any) -> dict[str, Any]:
        return {}


@dataclass
class BaselineResult:
    kind: str
    sim: SimSageMaker
    start_ms: int
    end_ms: int
    completed: bool
    actions: list[tuple[int, str, str]] = field(default_factory=list)  # (ms, who: what, job)

    @property
    def jobs(self) -> list[SimJob]:
        return self.sim.jobs()


class BaselineDriver:
    """Drives one run of ``workload`` through ``trace`` on a fresh simulator (see module docstring).

    Subclasses (the polling scripts of :mod:`benchmarks.peers`) reuse the loop, the submission and
    the person's eyes, and bring their own ``KINDS``, request and polling."""

    KINDS: tuple[str, ...] = ("retry", "poll")
    # the simulator's in-memory log tails get a periodic line per host this often (seconds)
    PROGRESS_LOG_INTERVAL_S = 600

    def __init__(
        self,
        kind: str,
        workload: Workload,
        trace: Trace,
        person: Person,
        *,
        seed: int = 1,
        retry_attempts: int = 3,
        poll_minutes: float = 5.0,
        max_days: float = 400.0,
    ) -> None:
        if kind not in self.KINDS:
            raise ValueError(f"kind must be one of {self.KINDS}")
        self.kind = kind
        self.workload = workload
        self.trace = trace
        self.person = person
        self.retry_attempts = retry_attempts
        self.poll_ms = round(poll_minutes * MINUTE_MS)
        self.max_ms = round(max_days * 24 * 60 * MINUTE_MS)
        self.clock = VirtualClock()
        self.sim = SimSageMaker(
            self.clock,
            s3_client=NullS3(),
            emit=self._on_event,
            seed=seed,
            startup=workload.startup,
            progress_log_interval_s=self.PROGRESS_LOG_INTERVAL_S,
            # the same account as sagewarden's drill (the warm-pool quota the job's pools need);
            # pools then follow AWS's rules for every supervisor that asks for one
            warm_pools=WarmPoolSettings(quotas=workload.warm_pool_quotas()),
        )
        self.sim.set_profile(workload.name, workload.profile())
        for fault in trace.sim_faults(workload.name):
            self.sim.inject(fault)
        self._delivery = random.Random(seed * 7919 + 3)
        self._timers: list[tuple[int, int, str, Callable[[], None]]] = []
        self._seq = 0
        self._attempt = 0
        self._current: str | None = None
        self._done = False
        self._faults_seen = 0
        self._pages: dict[int, int] = {}  # fault index -> pages so far
        self._bugs_watched: set[int] = set()  # deterministic failures the person will look at
        self._stopping_for_hang: str | None = None
        self.actions: list[tuple[int, str, str]] = []

    # -- the loop ------------------------------------------------------------------------------
    def run(self) -> BaselineResult:
        start = self.clock.now_ms
        self._submit("start")
        if self.kind != "retry":
            self._at(start + self.poll_ms, "poll", self._poll)
        limit = start + self.max_ms
        while not self._done:
            candidates = [t for t in (self.sim.next_event_time(), self._next_timer()) if t is not None]
            if not candidates:
                break
            t = max(min(candidates), self.clock.now_ms)
            if t > limit:
                break
            self.sim.advance(t)
            self._watch_faults()
            while self._timers and self._timers[0][0] <= self.clock.now_ms and not self._done:
                _, _, _, action = heapq.heappop(self._timers)
                action()
        return BaselineResult(self.kind, self.sim, start, self.clock.now_ms, self._done, self.actions)

    def _at(self, ms: int, what: str, action: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._timers, (ms, self._seq, what, action))

    def _next_timer(self) -> int | None:
        return self._timers[0][0] if self._timers else None

    # -- SageMaker ---------------------------------------------------------------------------------
    def _newest_checkpoint(self) -> int:
        return max((max(j.checkpoints, default=0) for j in self.sim.jobs()), default=0)

    def _request(self) -> dict[str, Any]:
        """The CreateTrainingJob request every (re)submission starts from."""
        request = self.workload.training_job(BUCKET, ROLE)
        if self.kind == "retry":
            request["RetryStrategy"] = {"MaximumRetryAttempts": self.retry_attempts}
        return request

    def _submit(self, who: str) -> None:
        if who.startswith("person"):
            self._fix()
        if self._current is not None and not self.sim.job(self._current).is_terminal:
            return  # someone resubmitted already (the script and the person may both react)
        self._attempt += 1
        name = f"{self.workload.name}-{self.kind}-{self._attempt:03d}"
        request = self._request()
        request["TrainingJobName"] = name
        request["Tags"] = self.workload.tags(f"baseline-{self.kind}", self._attempt)
        request["Environment"] = {
            **request.get("Environment", {}),
            "SAGEWARDEN_RESUME_STEP": str(self._newest_checkpoint()),
        }
        self.sim.create_training_job(**request)
        self._current = name
        self.actions.append((self.clock.now_ms, f"{who}: resubmit", name))

    def _on_event(self, event: dict[str, Any]) -> None:
        """A job state change (delivered to the pager and to whoever watches)."""
        detail = event["detail"]
        if detail["TrainingJobName"] != self._current:
            return
        status = detail["TrainingJobStatus"]
        if status == "Completed":
            self._done = True
            return
        if status not in ("Failed", "Stopped"):
            return
        delivered = self.clock.now_ms + round(self._delivery.uniform(1.0, 20.0) * 1000)
        if status == "Stopped" and self._stopping_for_hang == self._current:
            self._stopping_for_hang = None
            self._at(delivered, "person resubmits after the stop", lambda: self._submit("person"))
            return
        if self.kind == "poll" and status == "Failed":
            return  # the script finds it at its next poll
        fault = self._fault_index()
        k = self._pages.get(fault, 0)
        self._pages[fault] = k + 1
        self.actions.append((delivered, "page", detail["TrainingJobName"]))
        self._at(
            delivered + self.person.paged_delay_ms(fault, k),
            "person handles the page",
            lambda: self._submit("person"),
        )

    def _poll(self) -> None:
        if self._done:
            return
        name = self._current
        if name is not None:
            d = self.sim.describe_training_job(TrainingJobName=name)
            if d["TrainingJobStatus"] == "Failed":
                self._submit("script")
        self._at(self.clock.now_ms + self.poll_ms, "poll", self._poll)

    # -- the person's eyes ----------------------------------------------------------------------
    def _fault_index(self) -> int:
        """The key of the fault being recovered from (the newest one that fired): its trace index,
        or a deterministic failure's key (benchmarks/user_bugs.py)."""
        records = self.sim.fault_records
        return next((i for r in reversed(records) if (i := person_key(r.label, self.trace)) is not None), 0)

    def _fix(self) -> None:
        """The person looks at the run's endings: a deterministic failure that showed is fixed."""
        for label in self.sim.fix_recurring(self.workload.name):
            self.actions.append((self.clock.now_ms, "fix: the bug, at the resubmission", label))

    def _watch_faults(self) -> None:
        records = self.sim.fault_records
        while self._faults_seen < len(records):
            record = records[self._faults_seen]
            self._faults_seen += 1
            fault = trace_index(record.label)
            key = person_key(record.label, self.trace)
            if fault is None and key is not None and key not in self._bugs_watched:
                # a deterministic failure: whatever resubmits meanwhile, the person sees the same
                # ending again and again on a dashboard after their notice delay, and fixes it
                self._bugs_watched.add(key)
                notice = record.at_ms + self.person.hang_notice_delay_ms(key)
                self._at(notice, "person looks at the loop", self._notice_loop)
                continue
            if fault is None:
                continue  # a slow host: nothing hangs, the person has nothing to notice
            notice = record.at_ms + self.person.hang_notice_delay_ms(fault)
            self._at(notice, "person looks", functools.partial(self._notice, record.job))

    def _notice_loop(self) -> None:
        for label in self.sim.fix_recurring(self.workload.name):
            self.actions.append((self.clock.now_ms, "person: fix the looping bug", label))

    def _notice(self, job_name: str) -> None:
        """The person looks at the run: a job still hung is stopped (then resubmitted)."""
        job = self.sim.job(job_name)
        if job.is_terminal or job.status != "InProgress" or job._phase not in HANG_PHASES:
            return
        self.actions.append((self.clock.now_ms, "person: stop hung job", job_name))
        self._stopping_for_hang = job_name
        self.sim.stop_training_job(TrainingJobName=job_name)


def run_baseline(
    kind: str, workload: Workload, trace: Trace, person: Person, **kwargs: Any
) -> BaselineResult:
    return BaselineDriver(kind, workload, trace, person, **kwargs).run()


def faultfree_minutes(workload: Workload, trace: Trace) -> float:
    """Wall clock of the run with the trace's benign phases and no fault, no slow host (simulated: its
    compile, saves, pauses and evals take what they take)."""
    quiet = dataclasses.replace(trace, faults=(), slows=(), bugs=())
    result = BaselineDriver("retry", workload, quiet, Person()).run()
    if not result.completed:
        raise RuntimeError("the fault-free run did not complete")
    return (result.end_ms - result.start_ms) / MINUTE_MS
