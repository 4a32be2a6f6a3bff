"""`Job`: the companion inside one training process (docs/companion.md).

    job = Job.start(total_steps=10_000)     # fingerprint, watchdog, resume info
    for batch in job.steps(loader):          # or: train_step(batch); job.step()
        ...
    with job.phase("save"):                  # compile, save, eval, restore
        save()
    job.on_sigterm(save)                     # save once at the next step boundary, then exit

What it prints and when (every format: lines.py):

- once, at start: a `companion start` line; on local rank 0 the host's fingerprint (the GPU
  serials from nvidia-smi) or, when none can be read, `fingerprint_unavailable=<why>`.
- at a step boundary, on local rank 0: the contract's step line, every `step_every` steps (auto:
  each of the first AUTO_SAMPLES steps, then every 2^k steps, k chosen so a line comes about every
  STEP_LINE_TARGET_S; every host picks a power of two, so the steps of the host printing least
  often are printed by all).
- at a phase's start and end, on local rank 0: the phase marker and `phase_end`.
- a heartbeat (local rank 0) at most every `heartbeat_s`, only while steps advance or a declared
  phase is within its budget: never while the loop is stalled, since every log line counts as
  activity to the supervisor's log-silence alarm (docs/hang-detection.md) and a heartbeat
  through a stall would hide it.
- an evidence block (every rank), once per stall: no step for the learned window, max(
  `stall_floor_s`, `stall_factor` x the p99 of this process's step times; `first_step_s` before
  its first step), or a declared phase past its budget.
- on SIGTERM (with `on_sigterm`): `sigterm received`, then at the next step boundary the save
  (`sigterm save_start`, a `save` phase, `sigterm save_done` or `save_failed`) and `sigterm exit`;
  with no boundary (or a save still running) `budget_s` after the signal, `sigterm save_skipped` or
  `save_overdue`, the stacks, and the process exits (code 143).

A GIL-holding stall (a C call that never releases it) stops the watchdog thread too; for that the
companion also arms `faulthandler.dump_traceback_later` a margin past the watchdog's deadline: its
dump starts with CPython's own `Timeout (h:mm:ss)!` line, without markers.
"""

from __future__ import annotations

import atexit
import faulthandler
import math
import os
import signal
import statistics
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, TextIO, TypeVar

from sagewarden_companion import __version__, evidence, lines, probes
from sagewarden_companion.env import Where, where
from sagewarden_companion.output import Printer
from sagewarden_companion.timing import CUDA, WALL, Span

T = TypeVar("T")

AUTO_SAMPLES = 10  # steps printed one by one before the auto interval is chosen
STEP_LINE_TARGET_S = 60.0  # "about once a minute is right" (docs/recovery.md, item 6)
MAX_STEP_EVERY = 1 << 16
STEP_HISTORY = 1024  # step times the window is learned from (the newest)
DEFAULT_PHASE_MINUTES = {"compile": 60, "save": 15, "eval": 30, "restore": 30}
OTHER_PHASE_MINUTES = 30
MAX_STALLS = 20  # evidence blocks a process prints at most (a flapping job stays bounded)
BACKSTOP_MARGIN_S = 60.0
BACKSTOP_REARM_S = 1.0
SIGTERM_EXIT_CODE = 143  # 128 + SIGTERM, as a shell reports a process ended by it
SIGTERM_BUDGET_S = 110.0  # StopTrainingJob kills 120 s after SIGTERM; 10 s to exit and be logged


@dataclass
class _Phase:
    name: str
    started: float
    budget_s: float


class Job:
    _current: Job | None = None
    _lock_class = threading.Lock()

    def __init__(
        self,
        total_steps: int | None = None,
        *,
        step_every: int | None = None,
        heartbeat_s: float = 60.0,
        stall_floor_s: float = 180.0,
        stall_factor: float = 5.0,
        first_step_s: float = 2700.0,
        evidence: bool = True,
        backstop: bool = True,
        backstop_margin_s: float = BACKSTOP_MARGIN_S,
        watchdog: bool = True,
        stream: TextIO | None = None,
        env: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if step_every is not None and step_every < 1:
            raise ValueError("step_every must be at least 1")
        self.total_steps = total_steps
        self.where: Where = where(env)
        self._printer = Printer(stream)
        self._clock = clock
        self._step_every = step_every
        self._heartbeat_s = heartbeat_s
        self._floor_s = stall_floor_s
        self._factor = stall_factor
        self._first_step_s = first_step_s
        self._evidence_on = evidence
        self._backstop_on = backstop
        self._backstop_margin_s = backstop_margin_s
        self._watchdog_on = watchdog
        self._lock = threading.RLock()
        now = clock()
        self._activity = now  # the last step boundary, phase exit or start
        self._step_span = Span(self._clock)
        self._sections: list[Span] = []
        self._section_depth = 0
        self._durations: deque[float] = deque(maxlen=STEP_HISTORY)
        self._boundaries = 0
        self._last_step: int | None = self.where.resume_step
        self._counter = self._last_step or 0
        self._phases: list[_Phase] = []
        self._stall_reported = False
        self._stalls = 0
        self._beat_at = now
        self._stepped_since_beat = False
        self._backstop_armed_at: float | None = None
        self._backstop_fires_at: float | None = None
        self._sigterm_at: float | None = None
        self._sigterm_save: Callable[[], Any] | None = None
        self._sigterm_budget_s = SIGTERM_BUDGET_S
        self._sigterm_said = False
        self._saving_since: float | None = None
        self._saved = False
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    # -- starting -------------------------------------------------------------------------------

    @classmethod
    def start(cls, total_steps: int | None = None, **options: Any) -> Job:
        """Start the companion for this process (once: a second call returns the same Job, and
        gives it `total_steps` if it had none)."""
        with cls._lock_class:
            job = cls._current
            if job is not None:
                if job.total_steps is None and total_steps is not None:
                    job.total_steps = total_steps
                return job
            job = cls(total_steps, **options)
            job._begin()
            cls._current = job
            return job

    @classmethod
    def current(cls) -> Job | None:
        return cls._current

    def _begin(self) -> None:
        w = self.where
        resume_found = os.path.isdir(w.resume_dir) if w.resume_dir else None
        self._say(
            lines.companion_start(
                w.host,
                w.rank,
                w.local_rank,
                __version__,
                w.attempt,
                w.resume_step,
                resume_found,
                self.total_steps,
            )
        )
        if w.host is None and (w.local_rank or 0) == 0:
            self._say(lines.companion_note("host-unknown", w.host_name or "none"))
        if w.prints_host_lines:
            assert w.host is not None
            raw, why = probes.gpu_serials()
            serials = lines.usable_serials(raw or [])
            if serials:
                self._say(lines.fingerprint(w.host, serials))
            else:
                self._say(lines.fingerprint_unavailable(w.host, why if raw is None else "no-serials"))
        if w.launcher_dir:
            _register_with_launcher(w.launcher_dir)
        self._arm_backstop(force=True)
        if self._watchdog_on:
            self._thread = threading.Thread(target=self._watch, name="sagewarden-watchdog", daemon=True)
            self._thread.start()
        atexit.register(self.close)

    def close(self) -> None:
        """Stop the watchdog (atexit does it too)."""
        self._closed.set()
        self._wake.set()
        if self._backstop_on and self._backstop_armed_at is not None:
            faulthandler.cancel_dump_traceback_later()
            self._backstop_armed_at = None
        if Job._current is self:
            Job._current = None

    # -- what the supervisor told the script ------------------------------------------------------

    @property
    def resume_step(self) -> int | None:
        """SAGEWARDEN_RESUME_STEP: the newest verified checkpoint's step (None: start fresh)."""
        return self.where.resume_step

    @property
    def resume_dir(self) -> str | None:
        """SAGEWARDEN_RESUME_DIR: load this directory (it may differ from the newest on disk)."""
        return self.where.resume_dir

    @property
    def attempt(self) -> int | None:
        return self.where.attempt

    @property
    def checkpoint_minutes(self) -> int | None:
        """SAGEWARDEN_CHECKPOINT_MINUTES: save every that many minutes when set."""
        return self.where.checkpoint_minutes

    @property
    def stop_requested(self) -> bool:
        """True once SIGTERM arrived (with `on_sigterm`, or an integration's handler)."""
        return self._sigterm_at is not None

    @property
    def last_step(self) -> int | None:
        return self._last_step

    # -- steps ------------------------------------------------------------------------------------

    def step(self, step: int | None = None) -> None:
        """Mark the end of a training step (its number, or the next after the last)."""
        self._boundary(step)
        if self._sigterm_at is not None and self._sigterm_save is not None:
            self._run_sigterm_save()

    def steps(self, iterable: Iterable[T]) -> Iterator[T]:
        """Each item is one step: its body is the step's compute, the wait for it is not."""
        for item in iterable:
            self.begin_compute()
            yield item
            self.end_compute()
            self.step()

    @contextmanager
    def compute(self) -> Iterator[None]:
        """The host's own work in the step (forward, backward, optimizer): compute_ms."""
        self.begin_compute()
        try:
            yield
        finally:
            self.end_compute()

    def begin_compute(self) -> None:
        with self._lock:
            self._section_depth += 1
            if self._section_depth == 1:
                self._sections.append(Span(self._clock))

    def end_compute(self) -> None:
        with self._lock:
            if self._section_depth == 0:
                return
            self._section_depth -= 1
            if self._section_depth == 0 and self._sections:
                self._sections[-1].end()

    def _boundary(self, step: int | None) -> None:
        now = self._clock()
        with self._lock:
            while self._phases:  # a phase left open (an integration's save) ends at the next step
                self._end_phase("ok")
            number = int(step) if step is not None else self._counter + 1
            self._counter = number
            span, sections = self._step_span, self._sections
            span.end()
            wall_ms = span.wall_ms
            if not self._stall_reported:  # a stall the loop came out of teaches no window
                self._durations.append(wall_ms / 1000.0)
            self._boundaries += 1
            self._last_step = number
            self._activity = now
            self._stall_reported = False
            self._stepped_since_beat = True
            self._step_span, self._sections, self._section_depth = Span(self._clock), [], 0
            printing = self.where.prints_host_lines and self._prints(number)
        if printing:
            assert self.where.host is not None
            if sections:
                measured = [s.measured_ms() for s in sections]
                compute_ms = sum(ms for ms, _ in measured)
                timer = CUDA if all(t == CUDA for _, t in measured) else WALL
                scope = "section"
            else:
                compute_ms, timer = span.measured_ms()
                scope = "step"
            self._say(
                lines.step(self.where.host, number, wall_ms, compute_ms, self.total_steps, timer, scope)
            )
        self._arm_backstop()

    def _prints(self, number: int) -> bool:
        if self._step_every is not None:
            return number % self._step_every == 0
        if self._boundaries <= AUTO_SAMPLES:
            return True
        if self._boundaries == AUTO_SAMPLES + 1:
            typical = statistics.median(list(self._durations)[:AUTO_SAMPLES]) or 1e-6
            every = 1
            while every * 2 <= min(MAX_STEP_EVERY, STEP_LINE_TARGET_S / typical):
                every *= 2
            self._step_every = every
            return number % every == 0
        return False  # unreachable: _step_every is set at AUTO_SAMPLES + 1

    # -- phases -----------------------------------------------------------------------------------

    @contextmanager
    def phase(self, name: str, max_minutes: float | None = None) -> Iterator[None]:
        """A declared long phase (compile, save, eval, restore): the supervisor counts its minutes
        as active and the watchdog waits for it up to `max_minutes` (at most 120)."""
        self.begin_phase(name, max_minutes)
        try:
            yield
        except BaseException:
            self.end_phase("error")
            raise
        self.end_phase("ok")

    def begin_phase(self, name: str, max_minutes: float | None = None) -> None:
        minutes = lines.clamp_minutes(
            max_minutes if max_minutes is not None else DEFAULT_PHASE_MINUTES.get(name, OTHER_PHASE_MINUTES)
        )
        with self._lock:
            self._phases.append(_Phase(lines.token(name), self._clock(), minutes * 60.0))
            self._stall_reported = False
        if self.where.prints_host_lines:
            self._say(lines.phase(name, minutes))
        self._arm_backstop(force=True)

    def end_phase(self, result: str = "ok") -> None:
        with self._lock:
            if self._phases:
                self._end_phase(result)
        self._arm_backstop(force=True)

    def _end_phase(self, result: str) -> None:
        ended = self._phases.pop()
        now = self._clock()
        self._activity = now
        self._stall_reported = False
        # the phase's time is not the next step's: step_ms and compute_ms start again here
        self._step_span, self._sections, self._section_depth = Span(self._clock), [], 0
        if self.where.prints_host_lines:
            self._say(lines.phase_end(ended.name, now - ended.started, result))

    @property
    def phase_name(self) -> str | None:
        return self._phases[-1].name if self._phases else None

    # -- SIGTERM ----------------------------------------------------------------------------------

    def on_sigterm(self, save: Callable[[], Any], budget_s: float = SIGTERM_BUDGET_S) -> None:
        """On SIGTERM, call `save` once at the next step boundary (inside a `save` phase), then
        exit; exit `budget_s` after the signal whatever happens. Call from the main thread."""
        self._sigterm_save = save
        self.handle_sigterm(budget_s)

    def handle_sigterm(self, budget_s: float = SIGTERM_BUDGET_S) -> None:
        """Install the handler only (integrations save their own way, at their own boundary)."""
        self._sigterm_budget_s = budget_s
        signal.signal(signal.SIGTERM, self._on_signal)

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self._sigterm_at is None:
            self._sigterm_at = self._clock()
        self._wake.set()  # the watchdog prints `sigterm received` (a handler never prints)

    def begin_sigterm_save(self) -> bool:
        """Start the one save after SIGTERM (False: it was already done or under way)."""
        with self._lock:
            if self._saved or self._saving_since is not None:
                return False
            self._saving_since = self._clock()
        self._say_sigterm_received()
        self._say(lines.sigterm("save_start", self.where.host, self.where.rank, step=self._last_step))
        minutes = max(1, math.ceil(self._sigterm_left_s() / 60.0))
        self.begin_phase("save", minutes)
        return True

    def end_sigterm_save(self, error: BaseException | None = None) -> int:
        """End the save begun by begin_sigterm_save; the exit code the process should end with."""
        with self._lock:
            started = self._saving_since if self._saving_since is not None else self._clock()
            self._saving_since = None
            self._saved = True
        self.end_phase("ok" if error is None else "error")
        elapsed = self._clock() - started
        if error is None:
            self._say(
                lines.sigterm("save_done", self.where.host, self.where.rank, elapsed_s=f"{elapsed:.1f}")
            )
            code = 0
        else:
            self._say(
                lines.sigterm(
                    "save_failed",
                    self.where.host,
                    self.where.rank,
                    elapsed_s=f"{elapsed:.1f}",
                    error=type(error).__name__,
                )
            )
            code = SIGTERM_EXIT_CODE
        self._say(lines.sigterm("exit", self.where.host, self.where.rank, code=code))
        return code

    def _run_sigterm_save(self) -> None:
        if not self.begin_sigterm_save():
            return
        assert self._sigterm_save is not None
        try:
            self._sigterm_save()
        except Exception as exc:
            code = self.end_sigterm_save(exc)
        else:
            code = self.end_sigterm_save()
        self.close()
        raise SystemExit(code)

    def _sigterm_left_s(self) -> float:
        if self._sigterm_at is None:
            return self._sigterm_budget_s
        return max(0.0, self._sigterm_budget_s - (self._clock() - self._sigterm_at))

    def _say_sigterm_received(self) -> None:
        with self._lock:
            if self._sigterm_said or self._sigterm_at is None:
                return
            self._sigterm_said = True
        self._say(
            lines.sigterm(
                "received",
                self.where.host,
                self.where.rank,
                last_step=self._last_step,
                in_phase=self.phase_name,
                budget_s=f"{self._sigterm_budget_s:g}",
            )
        )

    # -- the watchdog -----------------------------------------------------------------------------

    def window_s(self) -> float:
        """How long without a step is a stall: max(floor, factor x p99 of the step times), or
        `first_step_s` before the first step."""
        with self._lock:
            durations = sorted(self._durations)
        if not durations:
            return self._first_step_s
        p99 = durations[max(0, math.ceil(0.99 * len(durations)) - 1)]
        return max(self._floor_s, self._factor * p99)

    def _deadline(self) -> tuple[float, str]:
        """(when the current quiet becomes a stall, why)."""
        with self._lock:
            phase = self._phases[-1] if self._phases else None
            activity = self._activity
        if phase is not None:
            return phase.started + phase.budget_s, "phase-over-budget"
        return activity + self.window_s(), "no-step" if self._boundaries else "no-first-step"

    def _tick_s(self) -> float:
        return min(1.0, max(0.05, min(self._floor_s, self._heartbeat_s) / 20.0))

    def _watch(self) -> None:
        while not self._closed.is_set():
            self._wake.wait(self._tick_s())
            self._wake.clear()
            if self._closed.is_set():
                return
            try:
                self.check()
            except Exception as exc:  # the watchdog must never take the job down
                self._say(lines.companion_note("watchdog-error", type(exc).__name__))

    def check(self) -> None:
        """One look (the watchdog thread's; tests call it too)."""
        now = self._clock()
        if self._sigterm_at is not None:
            self._say_sigterm_received()
            if now - self._sigterm_at >= self._sigterm_budget_s:
                self._sigterm_deadline()
                return
        self._heartbeat(now)
        deadline, reason = self._deadline()
        with self._lock:
            due = (
                now >= deadline
                and not self._stall_reported
                and self._stalls < MAX_STALLS
                and self._evidence_on
            )
            if due:
                self._stall_reported = True
                self._stalls += 1
                stall = self._stalls
                quiet = now - self._activity
        if due:
            self._cancel_backstop()
            self.dump(stall, reason, quiet, outside_commands=True)

    def dump(self, stall: int, reason: str, quiet_s: float, *, outside_commands: bool) -> None:
        w = self.where
        self._printer.lines(
            evidence.block(
                host=w.host,
                rank=w.rank,
                stall=stall,
                last_step=self._last_step,
                in_phase=self.phase_name,
                quiet_s=quiet_s,
                window_s=self.window_s(),
                reason=reason,
                gpu=w.prints_host_lines,
                outside_commands=outside_commands,
            )
        )

    def _heartbeat(self, now: float) -> None:
        if not self.where.prints_host_lines or now - self._beat_at < self._heartbeat_s:
            return
        with self._lock:
            phase = self._phases[-1] if self._phases else None
            alive = self._stepped_since_beat or (phase is not None and now < phase.started + phase.budget_s)
            if not alive:
                return  # a stalled loop: no heartbeat (see the module doc)
            self._beat_at = now
            self._stepped_since_beat = False
            age = now - self._activity if self._boundaries else None
        assert self.where.host is not None
        self._say(lines.heartbeat(self.where.host, self._last_step, self.phase_name, age))

    def _sigterm_deadline(self) -> None:
        """`budget_s` after SIGTERM and the process has not exited: say why, dump the stacks
        (no outside command: there is no time left), exit."""
        w = self.where
        if self._saving_since is not None:
            self._say(lines.sigterm("save_overdue", w.host, w.rank, budget_s=f"{self._sigterm_budget_s:g}"))
        elif not self._saved:
            self._say(
                lines.sigterm(
                    "save_skipped",
                    w.host,
                    w.rank,
                    reason="no-step-boundary",
                    budget_s=f"{self._sigterm_budget_s:g}",
                )
            )
        with self._lock:
            self._stalls += 1
            stall = self._stalls
        self.dump(stall, "sigterm-deadline", self._clock() - self._activity, outside_commands=False)
        self._say(lines.sigterm("exit", w.host, w.rank, code=SIGTERM_EXIT_CODE))
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(SIGTERM_EXIT_CODE)

    # -- the GIL-held backstop --------------------------------------------------------------------

    def _arm_backstop(self, force: bool = False) -> None:
        """Arm faulthandler's own watchdog a margin past the Python watchdog's deadline: at most
        once a second as steps push the deadline later, at once when it would fire earlier (the
        first steps shorten the first-step allowance to the learned window)."""
        if not self._backstop_on:
            return
        now = self._clock()
        deadline, _ = self._deadline()
        fires_at = max(now + 1.0, deadline) + max(self._backstop_margin_s, self.window_s())
        if (
            not force
            and self._backstop_armed_at is not None
            and self._backstop_fires_at is not None
            and now - self._backstop_armed_at < BACKSTOP_REARM_S
            and fires_at >= self._backstop_fires_at
        ):
            return
        fd = self._printer.fileno()
        if fd is None:
            return
        try:
            faulthandler.dump_traceback_later(fires_at - now, repeat=False, file=fd, exit=False)
            self._backstop_armed_at, self._backstop_fires_at = now, fires_at
        except (OSError, ValueError, RuntimeError):
            self._backstop_armed_at = self._backstop_fires_at = None

    def _cancel_backstop(self) -> None:
        if self._backstop_on and self._backstop_armed_at is not None:
            faulthandler.cancel_dump_traceback_later()
            self._backstop_armed_at = None

    # -- output -----------------------------------------------------------------------------------

    def _say(self, text: str) -> None:
        self._printer.line(text)


def _register_with_launcher(directory: str) -> None:
    """Tell the launcher (`python -m sagewarden_companion -- ...`) this process is a rank that
    handles SIGTERM, so it signals the ranks before their launcher (torchrun kills its workers
    30 s after its own SIGTERM) and before their helper processes (a data-loader worker killed
    first fails the rank's save). The file holds the process's start time, so a reused pid is
    never signalled."""
    pid = os.getpid()
    try:
        path = os.path.join(directory, f"{pid}.rank")
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(process_start_time(pid) or "")
        os.replace(tmp, path)
    except OSError:
        pass  # the launcher then signals the whole group at once, as without the companion


def process_start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux /proc); None elsewhere."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None
