"""The simulated jobs' log lines: in-memory tails, buffered writes to CloudWatch Logs, lazy progress
lines, and the SSM agent's stream. Why: docs/drill.md (*The simulated services*), docs/fidelity.md."""

from __future__ import annotations

import bisect
import math
import time
import warnings
from collections import deque
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from drill.clock import VirtualClock
from drill.sim.model import SimJob, stepf_at
from drill.sim.series import noise
from drill.sim.stragglers import step_line
from drill.sim.texts import LOGGING_PHASES, MINUTE_MS
from sagewarden.domain.hangs.cadence import phase_cover
from sagewarden.keys import TRAINING_LOG_GROUP

if TYPE_CHECKING:
    from drill.alarms.metric_delay import MetricDelays

SSM_OFFSET_MS = 20_000  # the agent's lines are written this long past each minute


class SimLogs:
    def __init__(self, client: Any | None, clock: VirtualClock, *, progress_ms: int, flush_ms: int) -> None:
        self.client = client
        self.clock = clock
        self.progress_ms = progress_ms
        self.flush_ms = flush_ms
        self.last_flush_ms = clock.now_ms
        self.events_rejected = 0  # events moto CloudWatch Logs refused (outside its time window)
        self._buffer: dict[str, list[tuple[int, int, str]]] = {}
        self._seq = 0
        self._streams: set[str] = set()
        self._group_ready = False
        self._warned_rejects = False
        # when a line reaches CloudWatch Logs (drill/alarms/metric_delay.py, the ``logs`` source); None:
        # the instant it is written. The account sets it; the flush below and the supervisor's
        # reads (drill/sim/cloudwatch.py) hold back what has not arrived
        self.arrival: MetricDelays | None = None

    @staticmethod
    def stream(job: SimJob, host: int) -> str:
        return f"{job.name}/algo-{host}-{job.created_ms // 1000}"

    @staticmethod
    def ssm_stream(job: SimJob, host: int) -> str:
        """The SSM agent's stream of a host (remote debugging)."""
        return f"{SimLogs.stream(job, host)}/ssm"

    def ssm_lines(self, job: SimJob, upto: int) -> None:
        """Write the SSM agent's lines of a remote-debugging job up to ``upto`` (lazily, per host):
        one a minute, SSM_OFFSET_MS past the minute, from Training until the job ends."""
        if not job.remote_debug:
            return
        start = job.training_started_ms
        if start is None:
            return
        end = min(upto, job.ended_ms) if job.ended_ms is not None else upto
        since = max(job._ssm_until, start)
        if end <= since:
            return
        job._ssm_until = end
        first = (since - SSM_OFFSET_MS) // MINUTE_MS * MINUTE_MS + MINUTE_MS + SSM_OFFSET_MS
        for mark in range(first, end + 1, MINUTE_MS):
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(mark // 1000))
            for host in range(1, job.instance_count + 1):
                text = f"{stamp} INFO [ssm-agent-worker] [MessageService] [MGSInterop] agent health: OK"
                tail = job._ssm.get(host)
                if tail is None:
                    tail = job._ssm[host] = deque(maxlen=2000)
                tail.append((mark, text))
                if self.client is not None:
                    self._buffer.setdefault(self.ssm_stream(job, host), []).append((mark, self._seq, text))
                    self._seq += 1

    def ssm_events(self, job: SimJob, host: int) -> list[tuple[int, str]]:
        """The SSM agent's newest lines (up to 2,000) of a host so far, oldest first: (ms, text)."""
        self.ssm_lines(job, self.clock.now_ms)
        return list(job._ssm.get(host) or ())

    def write_line(self, job: SimJob, host: int, t: int, text: str, *, discrete: bool = True) -> None:
        if discrete:
            self.progress_lines(job, t)  # keep each stream in time order
        tail = job._tails.get(host)
        if tail is None:
            tail = job._tails[host] = deque(maxlen=2000)
        tail.append((t, text))
        if discrete:
            job._declared.update(phase_cover(text, t)[1:])  # as the heartbeat function does
            if job._line_times and t < job._line_times[-1]:
                bisect.insort(job._line_times, t)
                bisect.insort(job._lines, (t, host, text))
            else:
                job._line_times.append(t)
                job._lines.append((t, host, text))
        if self.client is not None:
            self._buffer.setdefault(self.stream(job, host), []).append((t, self._seq, text))
            self._seq += 1

    def progress_lines(self, job: SimJob, upto: int) -> None:
        """Write the periodic progress lines of the open phase up to ``upto`` (lazily, per host)."""
        self.ssm_lines(job, upto)
        since = job._lines_until
        if upto <= since:
            return
        job._lines_until = upto
        if job._phase not in LOGGING_PHASES:
            return
        # never more often than the script logs (the heartbeat metric's cadence, log_every_minutes)
        every = max(self.progress_ms, job.profile.log_every_minutes * MINUTE_MS)
        first = max(since, job._phase_start - 1) // every * every + every
        marks = range(first, upto + 1, every)
        if job._phase == "train" and job.profile.step_lines:  # the contract's step lines, their own cadence
            each = max(job.profile.step_lines_every_s, 1) * 1000
            begin = max(since, job._phase_start - 1) // each * each + each
            self._step_lines(job, sorted({*marks, *range(begin, upto + 1, each)}), set(marks))
            return
        for mark in marks:
            if job._phase == "train":
                step = int(min(stepf_at(job, mark), job._phase_target))
                loss = 1.2 + 2.8 * math.exp(-3.0 * step / max(job.profile.total_steps, 1))
                loss += 0.02 * noise(job._salt, 0, mark // MINUTE_MS)
                text = f"step {step} loss {loss:.4f}"
            elif job._phase == "spin_logging":
                text = f"[watchdog] rank 0 alive, waiting in collective since step {int(job._stepf)}"
            else:
                text = f"eval at step {int(job._stepf)}: batch {(mark - job._phase_start) // every + 1}"
            for host in range(1, job.instance_count + 1):
                self.write_line(job, host, mark, text, discrete=False)

    def _step_lines(self, job: SimJob, times: list[int], progress: set[int]) -> None:
        """The train phase's progress lines (at ``progress`` times) and step lines, in time order."""
        each = max(job.profile.step_lines_every_s, 1) * 1000
        for mark in times:
            step = int(min(stepf_at(job, mark), job._phase_target))
            for host in range(1, job.instance_count + 1):
                if mark in progress:
                    loss = 1.2 + 2.8 * math.exp(-3.0 * step / max(job.profile.total_steps, 1))
                    loss += 0.02 * noise(job._salt, 0, mark // MINUTE_MS)
                    self.write_line(job, host, mark, f"step {step} loss {loss:.4f}", discrete=False)
                if mark % each == 0:
                    self.write_line(job, host, mark, step_line(job, host, mark, step), discrete=False)

    def stream_names(self) -> frozenset[str]:
        """Every stream written to CloudWatch Logs so far (training streams and SSM agents')."""
        return frozenset(self._streams)

    def tail(self, job: SimJob, host: int, n: int) -> list[str]:
        return [text for _, text in self.events(job, host)[-n:]] if n > 0 else []

    def events(self, job: SimJob, host: int) -> list[tuple[int, str]]:
        """The newest lines (up to 2,000) the host wrote so far, oldest first: (ms, text)."""
        if not job.is_terminal:
            self.progress_lines(job, self.clock.now_ms)
        return list(job._tails.get(host) or ())

    def flush_if_due(self) -> None:
        if self.clock.now_ms - self.last_flush_ms >= self.flush_ms:
            self.flush()

    def flush(self) -> None:
        """Write buffered log lines to CloudWatch Logs now (one put_log_events per stream)."""
        self.last_flush_ms = now = self.clock.now_ms
        if self.client is None or not self._buffer:
            return
        buffer, self._buffer = self._buffer, {}
        if self.arrival is not None:  # lines still on their way stay buffered for a later flush
            for stream in list(buffer):
                events = sorted(buffer[stream])
                n = self.arrival.readable(stream, [t for t, _, _ in events], now)
                if n < len(events):
                    self._buffer[stream] = events[n:]
                    buffer[stream] = events[:n]
                if not buffer[stream]:
                    del buffer[stream]
        if not self._group_ready:
            try:
                self.client.create_log_group(logGroupName=TRAINING_LOG_GROUP)
            except ClientError as err:
                if err.response["Error"]["Code"] != "ResourceAlreadyExistsException":
                    raise
            self._group_ready = True
        for stream in sorted(buffer):
            if stream not in self._streams:
                try:
                    self.client.create_log_stream(logGroupName=TRAINING_LOG_GROUP, logStreamName=stream)
                except ClientError as err:
                    if err.response["Error"]["Code"] != "ResourceAlreadyExistsException":
                        raise
                self._streams.add(stream)
            events = sorted(buffer[stream])
            for i in range(0, len(events), 5000):
                chunk = [{"timestamp": t, "message": m} for t, _, m in events[i : i + 5000]]
                resp = self.client.put_log_events(
                    logGroupName=TRAINING_LOG_GROUP, logStreamName=stream, logEvents=chunk
                )
                self._count_rejects(resp.get("rejectedLogEventsInfo") or {}, len(chunk))

    def _count_rejects(self, info: dict[str, int], size: int) -> None:
        rejected = 0
        if "tooOldLogEventEndIndex" in info:
            rejected += info["tooOldLogEventEndIndex"] + 1
        if "tooNewLogEventStartIndex" in info:
            rejected += size - info["tooNewLogEventStartIndex"]
        if rejected:
            self.events_rejected += rejected
            if not self._warned_rejects:
                self._warned_rejects = True
                warnings.warn(
                    "CloudWatch Logs (moto) rejected simulated log events outside its accepted window "
                    "(14 days before to 2 hours after the wall clock); wrap the run in "
                    "drill.clock.moto_logs_follow(clock)",
                    RuntimeWarning,
                    stacklevel=4,
                )
