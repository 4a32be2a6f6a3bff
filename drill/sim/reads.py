"""What the simulated account answers about a job from outside SageMaker: its hosts' log streams
and lines (CloudWatch Logs) and its metrics (CloudWatch), a mixin of
``drill.sim.sagemaker.SimSageMaker`` whose attributes these are."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from drill.clock import VirtualClock
from drill.sim import series
from drill.sim.logs import SimLogs
from drill.sim.model import SimJob, int_tag
from drill.sim.texts import STATS
from sagewarden.keys import (
    HEARTBEAT_DIMENSION,
    HEARTBEAT_METRIC,
    HEARTBEAT_NAMESPACE,
    TRAINING_METRIC_NAMESPACE,
)


class SimReads:
    """Logs and metrics of the simulated jobs (a mixin: the attributes are the simulator's)."""

    clock: VirtualClock
    logs: SimLogs
    heartbeat_metric: bool
    heartbeat_outages: list[tuple[int, int | None]]
    _jobs: dict[str, SimJob]
    _bounds_cache: dict[Any, Any]

    def log_tail(self, job_name: str, host: int, n: int) -> list[str]:
        job = self._jobs.get(job_name)
        if job is None:
            return []
        return self.logs.tail(job, host, n)

    def log_stream(self, name: str) -> tuple[SimJob, int] | None:
        """(job, host) of the log stream called ``name`` exactly (a host that has written a line;
        the SSM agent's stream of host n as -n), else None: what ``log_streams(name)`` holds under
        that name, found without a scan."""
        job_name, _, rest = name.partition("/")
        job = self._jobs.get(job_name)
        host = int_tag(rest[5:].partition("-")[0]) if rest.startswith("algo-") else None
        if job is None or host is None:
            return None
        if name.endswith("/ssm"):
            return (job, -host) if host in job._ssm and SimLogs.ssm_stream(job, host) == name else None
        if host not in job._tails or SimLogs.stream(job, host) != name:
            return None
        return job, host

    def log_streams(self, prefix: str) -> list[tuple[str, SimJob, int]]:
        """The log streams (name, job, host) whose names start with ``prefix``, sorted by name:
        ``<job>/algo-<host>-<epoch>`` for every host that has written a line, and with remote
        debugging the SSM agent's ``<job>/algo-<host>-<epoch>/ssm`` (as host -host)."""
        job_part = prefix.split("/", 1)[0]
        if "/" in prefix:
            job = self._jobs.get(job_part)
            jobs = [job] if job is not None else []
        else:
            jobs = [j for name, j in self._jobs.items() if name.startswith(job_part)]
        out = []
        for job in jobs:
            if job.remote_debug:
                self.logs.ssm_lines(job, self.clock.now_ms)
            for host in job._tails:
                name = SimLogs.stream(job, host)
                if name.startswith(prefix):
                    out.append((name, job, host))
            for host in job._ssm:
                name = SimLogs.ssm_stream(job, host)
                if name.startswith(prefix):
                    out.append((name, job, -host))
        return sorted(out, key=lambda x: x[0])

    def log_events(self, job: SimJob, host: int) -> list[tuple[int, str]]:
        """The newest lines (up to 2,000) a host of the job wrote so far: (ms, text), oldest first
        (host -n: the SSM agent's lines of host n)."""
        if host < 0:
            return self.logs.ssm_events(job, -host)
        return self.logs.events(job, host)

    def has_logs(self) -> bool:
        return any(job._tails or job._ssm for job in self._jobs.values())

    def heartbeat_out(self, minute_ms: int) -> bool:
        """Whether the heartbeat pipeline delivered nothing for the minute starting at `minute_ms`
        (inside one of ``heartbeat_outages``): its heartbeat datapoints never exist."""
        return any(lo <= minute_ms and (hi is None or minute_ms < hi) for lo, hi in self.heartbeat_outages)

    def _gpu_host(
        self, namespace: str, metric: str, dimensions: dict[str, str], period_s: int, stat: str
    ) -> tuple[SimJob | None, int] | None:
        """(job, host) of a per-minute GPUUtilization series that can be bounded, else None."""
        if (
            namespace != TRAINING_METRIC_NAMESPACE
            or metric != "GPUUtilization"
            or set(dimensions) != {"Host"}
        ):
            return None
        if period_s != 60 or stat not in ("Average", "Minimum", "Maximum", "Sum"):
            return None
        job_name, _, algo = dimensions["Host"].rpartition("/")
        job = self._jobs.get(job_name)
        host = int_tag(algo[5:]) if algo.startswith("algo-") else None
        if job is None or host is None or not 1 <= host <= job.instance_count:
            return None, 0
        if job.profile.gpus_per_host <= 0:
            return None, 0  # a CPU instance (gpus_per_host 0) reports no GPUUtilization at all
        return job, host

    def metric_bounds(
        self,
        namespace: str,
        metric: str,
        dimensions: dict[str, str],
        start_ms: int,
        end_ms: int,
        period_s: int,
        stat: str,
    ) -> list[tuple[int, int, float, float]] | None:
        """What ``metric_datapoints`` would answer, bounded instead of computed: stretches of
        buckets ``(first, end, lo, hi)`` in which every bucket has a datapoint within [lo, hi];
        buckets outside every stretch have none. Only per-minute GPUUtilization can be bounded
        (None otherwise: ask ``metric_datapoints``). The drill's alarm evaluator classifies long
        healthy stretches from these bounds and computes values only where they matter."""
        found = self._gpu_host(namespace, metric, dimensions, period_s, stat)
        if found is None:
            return None
        job, host = found
        if job is None:
            return []
        now = self.clock.now_ms
        # every host but a dead one has the same bounds: the evaluator asks for all of a job's
        # hosts over one window at one time, so compute them once
        key = (job.name, start_ms, end_ms, now, len(job._segs), job._phase, job.training_ended_ms)
        cached = self._bounds_cache.get(key)
        if cached is None:
            dead = {d for _, _, kind, d in job._segs if kind == "dead_host"}
            cached = (series.gpu_bounds(job, 0, start_ms, end_ms, now), dead)
            self._bounds_cache = {key: cached}
        if host in cached[1] or (job.profile.straggler_host and host == job.profile.straggler_host):
            return series.gpu_bounds(job, host, start_ms, end_ms, now)
        return cached[0]

    def metric_bound_now(
        self, namespace: str, metric: str, dimensions: dict[str, str], period_s: int, stat: str
    ) -> tuple[bool, tuple[float, float] | None]:
        """(bounded?, range) of the datapoints a bounded series will have from now on, until the
        job's phase changes (see ``add_phase_listener``): None if it will have none."""
        found = self._gpu_host(namespace, metric, dimensions, period_s, stat)
        if found is None:
            return False, None
        job, host = found
        if job is None or job._phase is None:
            return True, None
        return True, series.gpu_phase_bound(job, host, job._phase, job._dead_host)

    def metric_datapoints(
        self,
        namespace: str,
        metric: str,
        dimensions: dict[str, str],
        start_ms: int,
        end_ms: int,
        period_s: int,
        stat: str,
    ) -> list[tuple[int, float]]:
        """Simulated CloudWatch datapoints ``[(bucket start ms, value)]`` for [start_ms, end_ms).

        Instance metrics (``/aws/sagemaker/TrainingJobs``, ``Host=<job>/algo-<n>``: GPUUtilization,
        GPUMemoryUtilization, CPUUtilization, MemoryUtilization, DiskUtilization; see
        :mod:`drill.sim.series` for what each phase does to them): one sample per minute per host
        while the job is in Training (no GPU metric on a CPU instance). LogEvents (``Sagewarden/Heartbeat``,
        ``TrainingJobName=<job>``): per-minute count of lines the job wrote, only for minutes with
        at least one line (like a metric fed by a log subscription), and none at all in a deployment
        without the subscription (``heartbeat_metric=False``) and none of a minute inside a heartbeat
        outage (``heartbeat_outages``). Only samples up to now exist.
        """
        if stat not in STATS:
            raise ValueError(f"unsupported stat {stat!r}")
        if period_s <= 0 or period_s % 60:
            raise ValueError("period_s must be a positive multiple of 60")
        samples: Iterable[tuple[int, float]]
        instance = namespace == TRAINING_METRIC_NAMESPACE and metric in series.INSTANCE_METRICS
        heartbeat = namespace == HEARTBEAT_NAMESPACE and metric == HEARTBEAT_METRIC
        if instance and set(dimensions) == {"Host"}:
            job_name, _, algo = dimensions["Host"].rpartition("/")
            job = self._jobs.get(job_name)
            host = int_tag(algo[5:]) if algo.startswith("algo-") else None
            if job is None or host is None or not 1 <= host <= job.instance_count:
                return []
            samples = series.instance_samples(job, host, metric, start_ms, end_ms, self.clock.now_ms)
        elif namespace == TRAINING_METRIC_NAMESPACE and set(dimensions) == {"TrainingJobName"}:
            job = self._jobs.get(dimensions["TrainingJobName"])
            if job is None or metric != job.profile.progress_metric:
                return []
            samples = series.progress_samples(job, start_ms, end_ms, self.clock.now_ms)
        elif heartbeat and set(dimensions) == {HEARTBEAT_DIMENSION}:
            job = self._jobs.get(dimensions[HEARTBEAT_DIMENSION])
            if job is None or not self.heartbeat_metric:
                return []
            samples = series.log_samples(job, start_ms, end_ms, self.clock.now_ms)
            if self.heartbeat_outages:
                samples = [(m, v) for m, v in samples if not self.heartbeat_out(m)]
        else:
            return []
        return series.aggregate(samples, period_s * 1000, stat)
