"""One run's jobs as the simulated SageMaker recorded them, and how a fault's cost splits into
buckets: shared by the drill's per-fault GPU-hours (``drill.reports.report``) and the benchmark's scoring
(``benchmarks.accounting``), which builds on it (the drill never imports the benchmarks)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from drill.sim.model import FaultRecord, SimJob

MINUTE_MS = 60_000
BUCKETS = ("detection", "stop", "instance start", "work lost")


def _launches(jobs: list[SimJob]) -> list[tuple[int, int | None, int]]:
    """(requested ms, Training ms or None, resumed step) of every relaunch: new jobs and retries."""
    out: list[tuple[int, int | None, int]] = []
    for job in jobs:
        out.append((job.created_ms, job.training_started_ms, job.start_step))
        for retry in job.retries:
            out.append((retry["failed_ms"], retry["training_ms"], retry["start_step"]))
    out.sort(key=lambda x: x[0])
    return out


@dataclass(frozen=True)
class RunHistory:
    """One run's jobs as the simulator recorded them: every (re)launch, and when each trained.

    Shared by the benchmark (:func:`account`) and the drill's per-fault GPU-hours
    (``drill.reports.report``), so both split a fault's cost the same way.
    """

    jobs: dict[str, SimJob]
    launches: list[tuple[int, int | None, int]]  # (requested ms, Training ms or None, resumed step)
    trainings: list[tuple[int, int]]  # (Training ms, resumed step), sorted

    @staticmethod
    def of(jobs: list[SimJob], run_name: str | None, *, through_startup: bool = False) -> RunHistory:
        """With ``through_startup``, a relaunch trains again once the silent start-up phase that
        opens its Training (a compile: an idle phase at its first minute) has ended."""
        run_jobs = sorted((j for j in jobs if j.run_name == run_name), key=lambda j: j.created_ms)
        launches = _launches(run_jobs)
        if through_startup:
            launches = [
                (req, _past_startup(job, t) if t is not None else None, step)
                for job in run_jobs
                for req, t, step in _launches([job])
            ]
            launches.sort(key=lambda x: x[0])
        trainings = sorted((t, step) for _, t, step in launches if t is not None)
        return RunHistory({j.name: j for j in run_jobs}, launches, trainings)

    def fault_minutes(
        self,
        rec: FaultRecord,
        *,
        steps_per_minute: float,
        end_ms: int,
        decided_ms: Sequence[int] = (),
    ) -> tuple[tuple[float, float, float, float], bool]:
        """Minutes of (detection, stop, instance start, work lost) for one fired fault, and whether
        the run recovered from it; unrecovered, everything from onset to ``end_ms`` is detection.
        ``decided_ms`` (sorted): when the supervisor decided on an ending, where it records that
        (sagewarden's audit): a relaunch that waits for a warm pool is then not detection time."""
        t0 = rec.at_ms
        job = self.jobs[rec.job]
        relaunch = next((req for req, _, _ in self.launches if req >= t0), None)
        stop_req = (
            job.stop_requested_ms
            if job.stop_requested_ms is not None and job.stop_requested_ms >= t0
            else None
        )
        decided = next((t for t in decided_ms if t >= t0), None)
        if decided is not None and relaunch is not None and decided > relaunch:
            decided = None  # a later decision is about something else
        decision_candidates = [t for t in (relaunch, stop_req, decided) if t is not None]
        healthy = next(((t, step) for t, step in self.trainings if t > t0), None)
        if relaunch is None or healthy is None or not decision_candidates:
            return ((end_ms - t0) / MINUTE_MS, 0.0, 0.0, 0.0), False
        decision = min(decision_candidates)
        healthy_ms, resumed = healthy
        minutes = (
            (decision - t0) / MINUTE_MS,
            (relaunch - decision) / MINUTE_MS,
            (healthy_ms - relaunch) / MINUTE_MS,
            max(0.0, rec.progress - resumed) / steps_per_minute,
        )
        return minutes, True


def _past_startup(job: SimJob, training_ms: int) -> int | None:
    """When the try that entered Training at ``training_ms`` was past its opening idle phase (its
    compile); None while it still compiles (or if it ended compiling)."""
    for start, end, kind in job.phase_intervals:
        if start < training_ms or end == start:
            continue
        if start > training_ms:
            break
        return end if kind in ("compile", "nccl_init", "idle") else start
    return training_ms
