"""Where the GPU-hours went: per fault, from the simulated SageMaker's own records.

The accounting reads only what the simulator recorded (jobs, their retries, the faults that
fired with the step and the newest complete checkpoint at onset), so it treats every supervisor
alike. For each fault, with onset ``t0``:

- **detection**: ``t0`` -> the supervisor's first decision: a StopTrainingJob of the faulted job,
  a new CreateTrainingJob for the run, or SageMaker's own retry of the job;
- **stop**: that decision -> the replacement requested (for a hang: the job's Stopping, and the
  reaction to its end; 0 for a crash, whose decision is the relaunch);
- **instance start**: replacement requested -> a job of the run in Training again (capacity
  errors and further relaunches included);
- **work lost**: the steps between the resumed checkpoint and the step at onset, redone.

GPU-hours = GPUs x minutes / 60. The **physical floor** of each fault is what no supervisor can
avoid: detection one metric period (60 s) plus event delivery for anything that does not end the
job by itself (a crash is reported by SageMaker: event delivery only); for those, a stop of 120 s
(a hung script ignores SIGTERM; SIGKILL comes at 120 s) plus delivery of the end; an instance
start cold (new instances) when an instance is bad, warm (a warm pool) otherwise, plus any
capacity wait on the way; and the work since the newest complete checkpoint at onset (half a
checkpoint interval on average).

Deterministic failures (a user's bug, benchmarks/user_bugs.py) are scored apart: endings and
GPU-hours per bug (``Account.bugs``), outside the fault classes and their floors.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from benchmarks.trace import Trace, TraceFault, trace_index
from benchmarks.user_bugs import BugLoss, bug_losses
from benchmarks.workload import Workload
from drill.reports.history import MINUTE_MS, RunHistory
from drill.sim.model import FaultRecord, SimJob
from drill.sim.texts import KILL_AFTER_MS

METRIC_PERIOD_MS = 60_000
DELIVERY_MS = 10_500  # EventBridge delivery in the drill: 1-20 s, uniform
CAPACITY_PENDING_AFTER_MS = 2 * MINUTE_MS  # a restart that meets no capacity goes Pending after 2 min


FALSE_STOP = "false stop"  # the class prefix of a supervisor's stop where no fault was


@dataclass(frozen=True)
class FaultLoss:
    fault: TraceFault | None  # None: a false stop (a stop of a job no fault had hit)
    onset_ms: int
    minutes: tuple[float, float, float, float]  # detection, stop, instance start, work lost
    floor: tuple[float, float, float, float]
    recovered: bool = True
    false_stop: str = ""  # the phase a false stop interrupted (compile, save, data pause, eval, train)
    # the fault met again: its bad host came back on a warm pool the supervisor's next job took
    # (nothing forced it: its floor is zero; scored in the fault's class, not counted as a fault)
    again: bool = False

    @property
    def cls(self) -> str:
        return self.fault.cls if self.fault is not None else f"{FALSE_STOP}: {self.false_stop}"

    @property
    def total_min(self) -> float:
        return sum(self.minutes)

    @property
    def floor_min(self) -> float:
        return sum(self.floor)


@dataclass(frozen=True)
class Slowness:
    """What fail-slow hosts cost a run: episodes met, how many were still slowing their job when it
    ended (a restart ended them early), and the GPU-hours of work they cost."""

    met: int
    cut_short: int
    gpu_hours: float


def slowness(
    trace: Trace, jobs: Sequence[SimJob], records: Sequence[FaultRecord], gpus: int, end_ms: int
) -> Slowness:
    """GPU-hours the slow hosts cost: while a host is ``s`` slower its job makes 1 / (1 + s) of its
    steps (the slowest host sets the pace when episodes overlap), so each training minute in an
    episode loses s / (1 + s) of a minute's work on every GPU. Only the job's train phases count
    (a save or a hang in between loses nothing more to slowness)."""
    by_label = {x.label: x for x in trace.slows}
    by_job = {j.name: j for j in jobs}
    episodes: dict[str, list[tuple[int, int, float]]] = {}
    met = cut = 0
    for rec in records:
        ep = by_label.get(rec.label or "")
        job = by_job.get(rec.job)
        if ep is None or job is None:
            continue
        met += 1
        end = rec.at_ms + round(ep.duration_min * MINUTE_MS)
        job_end = job.ended_ms if job.ended_ms is not None else end_ms
        if job_end < end:
            cut += 1
        episodes.setdefault(job.name, []).append((rec.at_ms, min(end, job_end), ep.slowdown))
    lost_min = 0.0
    for name, eps in episodes.items():
        for a, b in _train_spans(by_job[name], end_ms):
            cuts = sorted({a, b} | {t for lo, hi, _ in eps for t in (lo, hi) if a < t < b})
            for lo, hi in itertools.pairwise(cuts):
                worst = max((s for x, y, s in eps if x <= lo and hi <= y), default=0.0)
                lost_min += (hi - lo) / MINUTE_MS * worst / (1.0 + worst)
    return Slowness(met, cut, gpus * lost_min / 60.0)


def _train_spans(job: SimJob, end_ms: int) -> list[tuple[int, int]]:
    return [(s, e if e is not None else end_ms) for s, e, kind in job.phase_intervals if kind == "train"]


@dataclass
class Account:
    """The losses of one supervisor on one trace."""

    supervisor: str
    gpus: int
    losses: list[FaultLoss]
    wall_min: float  # submission to completion
    useful_min: float  # what the work needs with no fault and no overhead
    faultfree_wall_min: float  # the same run with no fault
    completed: bool
    notes: list[str] = field(default_factory=list)
    slowness: Slowness = field(default_factory=lambda: Slowness(0, 0, 0.0))
    # deterministic failures (benchmarks/user_bugs.py): scored apart from the faults' classes
    bugs: list[BugLoss] = field(default_factory=list)

    @property
    def bug_gpu_hours(self) -> float:
        return sum(b.gpu_hours(self.gpus) for b in self.bugs)

    @property
    def bug_endings(self) -> int:
        return sum(b.endings for b in self.bugs)

    @property
    def again_gpu_hours(self) -> float:
        """GPU-hours of faults met again: a bad host back on a reused warm pool or a lemon back on
        new instances (their whole loss: the floor of a fault met again is nothing)."""
        return sum(self.gpu_hours(x.total_min) for x in self.losses if x.again)

    @property
    def again_count(self) -> int:
        return sum(1 for x in self.losses if x.again)

    def gpu_hours(self, minutes: float) -> float:
        return self.gpus * minutes / 60.0

    def bucket_gpu_hours(self, cls: str | None = None) -> tuple[float, ...]:
        rows = [x for x in self.losses if cls is None or x.cls == cls]
        return tuple(self.gpu_hours(sum(x.minutes[i] for x in rows)) for i in range(4))

    def floor_gpu_hours(self, cls: str | None = None) -> float:
        return self.gpu_hours(sum(x.floor_min for x in self.losses if cls is None or x.cls == cls))

    def total_gpu_hours(self, cls: str | None = None) -> float:
        return sum(self.bucket_gpu_hours(cls))

    def excess_gpu_hours(self, cls: str | None = None) -> float:
        return self.total_gpu_hours(cls) - self.floor_gpu_hours(cls)

    def count(self, cls: str | None = None) -> int:
        """Losses of a class (a fault met again counts in its first meeting)."""
        return sum(1 for x in self.losses if (cls is None or x.cls == cls) and not x.again)

    @property
    def false_stops(self) -> list[FaultLoss]:
        return [x for x in self.losses if x.fault is None]

    def fault_count(self) -> int:
        """Faults met (false stops and a fault met again on a reused warm pool aside)."""
        return sum(1 for x in self.losses if x.fault is not None and not x.again)

    @property
    def effective_training(self) -> float:
        return self.useful_min / self.wall_min if self.wall_min else 0.0

    @property
    def unattributed_gpu_hours(self) -> float:
        """Wall-clock GPU-hours beyond the fault-free run that no fault's buckets (nor the slow
        hosts, nor the deterministic failures) explain."""
        return (
            self.gpu_hours(self.wall_min - self.faultfree_wall_min)
            - self.total_gpu_hours()
            - self.slowness.gpu_hours
            - self.bug_gpu_hours
        )


def _phase_at(job: SimJob, t: int) -> str:
    """What the job was doing at ``t``, for naming a false stop (the stop closes the phase under
    way at ``t``: the last one that started before ``t``)."""
    opens = {job.training_started_ms, *(r["training_ms"] for r in job.retries)}
    under_way = [(s, kind) for s, e, kind in job.phase_intervals if s < t and (e is None or t <= e)]
    if not under_way:
        return "start-up"
    start, kind = under_way[-1]
    if kind == "train":  # a phase that has just ended, its newest datapoints not arrived yet
        recent = [
            (s, k)
            for s, e, k in job.phase_intervals
            if k != "train" and e is not None and t - e <= 5 * MINUTE_MS
        ]
        if recent:
            start, kind = recent[-1]
    if kind == "idle":
        return "compile" if start in opens else "data pause"
    names = {
        "save": "save",
        "eval": "eval",
        "eval_silent": "eval",
        "train": "training",
        "data_pause": "data pause",
    }
    return names.get(kind, kind)


def account(
    supervisor: str,
    workload: Workload,
    trace: Trace,
    jobs: list[SimJob],
    records: list[FaultRecord],
    *,
    start_ms: int,
    end_ms: int,
    completed: bool,
    faultfree_wall_min: float,
    decided_ms: Sequence[int] = (),
) -> Account:
    by_index = {f.index: f for f in trace.faults}
    history = RunHistory.of(jobs, workload.name, through_startup=trace.compile_min > 0)
    compile_ms = round(trace.compile_min * MINUTE_MS)  # every restart compiles again
    spm = workload.steps_per_minute
    st = workload.startup
    losses: list[FaultLoss] = []
    met: set[int] = set()
    for rec in records:
        index = trace_index(rec.label)
        if index is None or rec.run != workload.name or rec.kind in ("capacity", "throttle"):
            continue  # not a fault of the trace (a slow host is scored apart: slowness_gpu_hours)
        tf = by_index[index]
        t0 = rec.at_ms
        if tf.index in met:  # its bad host again, on a warm pool a later job took: no floor
            minutes, recovered = history.fault_minutes(
                rec, steps_per_minute=spm, end_ms=end_ms, decided_ms=decided_ms
            )
            losses.append(FaultLoss(tf, t0, minutes, (0.0, 0.0, 0.0, 0.0), recovered=recovered, again=True))
            continue
        met.add(tf.index)
        silent = tf.hang or tf.manifestation == "nccl_watchdog"  # does not end the job at once
        floor_detect = (METRIC_PERIOD_MS + DELIVERY_MS) if silent else DELIVERY_MS
        floor_stop = (KILL_AFTER_MS + DELIVERY_MS) if silent else 0
        start_ms_floor = (
            (st.provision_s + st.download_s) * 1000
            if tf.hardware
            else (st.warm_provision_s + st.warm_download_s) * 1000
        )
        start_ms_floor += compile_ms
        if tf.restart_capacity_min is not None:
            start_ms_floor += CAPACITY_PENDING_AFTER_MS + round(tf.restart_capacity_min * MINUTE_MS)
        floor_work = max(0.0, rec.progress - rec.checkpoint_step) / spm
        floor = (floor_detect / MINUTE_MS, floor_stop / MINUTE_MS, start_ms_floor / MINUTE_MS, floor_work)
        minutes, recovered = history.fault_minutes(
            rec, steps_per_minute=spm, end_ms=end_ms, decided_ms=decided_ms
        )
        # never recovered before the end of the drill: everything after onset is detection
        losses.append(FaultLoss(tf, t0, minutes, floor, recovered=recovered))
    losses += _false_stops(history, records, workload, trace, end_ms, losses)
    losses.sort(key=lambda x: x.onset_ms)
    run_jobs = [j for j in jobs if j.run_name == workload.name]
    return Account(
        supervisor=supervisor,
        gpus=workload.gpus,
        losses=losses,
        wall_min=(end_ms - start_ms) / MINUTE_MS,
        useful_min=workload.useful_minutes,
        faultfree_wall_min=faultfree_wall_min,
        completed=completed,
        slowness=slowness(trace, run_jobs, records, workload.gpus, end_ms),
        bugs=bug_losses(
            trace.bugs,
            workload.name,
            jobs,
            records,
            steps_per_minute=spm,
            compile_min=trace.compile_min,
            end_ms=end_ms,
        ),
    )


def _held_fault(job: SimJob, by_index: dict[int, TraceFault]) -> TraceFault | None:
    """The trace fault of a bad host the job holds (a lemon back on new instances, or a bad host a
    warm pool kept), if any: a stop of such a job is that fault met again, not a false stop."""
    for fault in job._inherited.values():
        index = trace_index(fault.label)
        if index is not None and index in by_index:
            return by_index[index]
    return None


def _false_stops(
    history: RunHistory,
    records: list[FaultRecord],
    workload: Workload,
    trace: Trace,
    end_ms: int,
    losses: list[FaultLoss],
) -> list[FaultLoss]:
    """A supervisor's StopTrainingJob of a job in Training that no fault had hit: from the stop to
    the run training again past the step it was stopped at costs GPUs, and the floor is nothing.
    A false stop inside another loss's recovery (a replacement stopped while it compiles) is
    counted, with no minutes of its own: they are that loss's already. A stop of a job that holds
    a bad host of the trace (sagewarden knows a returning one by its fingerprint line, before it
    fails the job again) is that fault met again, with its whole cost and no floor."""
    faulted = {rec.job for rec in records if trace_index(rec.label) is not None}
    windows = [(x.onset_ms, x.onset_ms + round(sum(x.minutes[:3]) * MINUTE_MS)) for x in losses]
    out: list[FaultLoss] = []
    stopped = [
        j
        for j in history.jobs.values()
        if j.stop_requested_ms is not None
        and j.training_started_ms is not None
        and j.name not in faulted
        and j.ended_reason == "stopped"
    ]
    by_index = {f.index: f for f in trace.faults}
    for job in sorted(stopped, key=lambda j: j.stop_requested_ms or 0):
        stop = job.stop_requested_ms
        assert stop is not None
        held = _held_fault(job, by_index)
        if held is not None:  # a bad host it held, stopped before it failed it again: met again
            rec = FaultRecord(
                stop, job.name, job.run_name, "bad host held", 0, held.label, job.step, 0, float(job.step)
            )
            minutes, recovered = history.fault_minutes(
                rec, steps_per_minute=workload.steps_per_minute, end_ms=end_ms
            )
            out.append(FaultLoss(held, stop, minutes, (0.0, 0.0, 0.0, 0.0), recovered=recovered, again=True))
            windows.append((stop, stop + round(sum(minutes[:3]) * MINUTE_MS)))
            continue
        phase = _phase_at(job, stop)
        if any(lo <= stop < hi for lo, hi in windows):
            out.append(FaultLoss(None, stop, (0.0, 0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0), false_stop=phase))
            continue
        rec = FaultRecord(stop, job.name, job.run_name, FALSE_STOP, 0, None, job.step, 0, float(job.step))
        minutes, recovered = history.fault_minutes(
            rec, steps_per_minute=workload.steps_per_minute, end_ms=end_ms
        )
        out.append(
            FaultLoss(None, stop, minutes, (0.0, 0.0, 0.0, 0.0), recovered=recovered, false_stop=phase)
        )
        windows.append((stop, stop + round(sum(minutes[:3]) * MINUTE_MS)))
    return out
