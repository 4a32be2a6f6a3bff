"""`python -m sagewarden_companion [--grace-s S] -- torchrun train.py ...`: make SIGTERM land.

SageMaker's StopTrainingJob (and MaxRuntime) sends SIGTERM to the container's first process and
kills everything 120 s later. Under a wrapper that does not pass it on (an open issue of the
SageMaker training toolkit), the training processes never see it and their save never runs. The
launcher, as the container's entry point (`AlgorithmSpecification.ContainerEntrypoint`):

- starts the command in a process group of its own;
- on SIGTERM signals the ranks first: the processes that started the companion (`Job.start`)
  under it register themselves, and get SIGTERM at once; once none of them is alive, the whole
  group gets it (their launcher, e.g. torchrun, unless it exited by itself within AFTER_RANKS_S,
  and helper processes such as data-loader workers). Signalled first, torchrun would SIGKILL its workers 30 s later (torch.distributed.
  elastic closes its workers with a 30 s timeout), and a data-loader worker killed first fails
  its rank's save. With no registered rank the group gets SIGTERM at once;
- SIGINT, and a second SIGTERM, go to the whole group at once;
- reports a child still alive `--grace-s` after SIGTERM (default 115: SageMaker kills at 120),
  names what is left, and kills the group so that its exit can still be logged;
- reaps every orphan when it is PID 1, and exits with the child's code (128 + n for a child
  ended by signal n).

Lines (all `[sagewarden] launcher <event> ...`, lines.py): `start`, `signal`, `overdue`, `exit`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

from sagewarden_companion import lines
from sagewarden_companion.env import LAUNCHER_DIR_ENV
from sagewarden_companion.job import process_start_time
from sagewarden_companion.output import Printer

DEFAULT_GRACE_S = 115.0
POLL_S = 0.05
REAP_AFTER_KILL_S = 5.0
# once the ranks are done, their launcher (torchrun) usually exits by itself within moments; it
# gets SIGTERM only if it has not after this long (signalled while exiting, it would end 143)
AFTER_RANKS_S = 5.0


def parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    args = list(argv)
    if "--" not in args:
        raise SystemExit("usage: python -m sagewarden_companion [--grace-s S] -- COMMAND [ARGS...]")
    cut = args.index("--")
    p = argparse.ArgumentParser(prog="python -m sagewarden_companion", description=__doc__.split("\n")[0])
    p.add_argument(
        "--grace-s",
        type=float,
        default=DEFAULT_GRACE_S,
        help="seconds after SIGTERM before a child still alive is reported and killed (default 115)",
    )
    opts = p.parse_args(args[:cut])
    command = args[cut + 1 :]
    if not command:
        p.error("no command after --")
    return opts, command


class Launcher:
    def __init__(self, command: Sequence[str], grace_s: float, printer: Printer | None = None) -> None:
        self.command = list(command)
        self.grace_s = grace_s
        self.printer = printer or Printer()
        self.pending: list[int] = []
        self.sigterm_at: float | None = None
        self.group_signalled = False
        self.ranks_done_at: float | None = None
        self.overdue = False
        self.ranks_dir = tempfile.mkdtemp(prefix="sagewarden-launcher-")
        self.child: subprocess.Popen[bytes] | None = None
        self.status: int | None = None

    def _on_signal(self, signum: int, frame: object) -> None:
        self.pending.append(signum)  # handled by the loop (a handler never prints)

    def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        env = dict(os.environ)
        env[LAUNCHER_DIR_ENV] = self.ranks_dir
        try:
            self.child = subprocess.Popen(self.command, env=env, preexec_fn=os.setpgrp)
        except OSError as exc:
            self.say("exit", code=127, error=type(exc).__name__, program=os.path.basename(self.command[0]))
            self._cleanup()
            return 127
        self.say(
            "start",
            pid=self.child.pid,
            pgid=self.child.pid,
            grace_s=f"{self.grace_s:g}",
            program=os.path.basename(self.command[0]),
        )
        try:
            while self.status is None:
                self._reap()
                while self.pending and self.status is None:
                    self._handle(self.pending.pop(0))
                if self.status is None:
                    self._progress()
                    time.sleep(POLL_S)
        finally:
            self._cleanup()
        code = self._exit_code(self.status)
        waited = None if self.sigterm_at is None else time.monotonic() - self.sigterm_at
        self.say("exit", code=code, after_sigterm_s=lines.number(waited))
        return code

    # -- signals ----------------------------------------------------------------------------------

    def _handle(self, signum: int) -> None:
        if signum == signal.SIGINT:
            self._signal_group(signal.SIGINT)
            return
        if self.sigterm_at is not None:  # a second SIGTERM: everyone, now
            self._signal_group(signal.SIGTERM)
            return
        self.sigterm_at = time.monotonic()
        ranks = self.live_ranks()
        if ranks:
            for pid in ranks:
                _kill(pid, signal.SIGTERM)
            self.say("signal", signal="SIGTERM", to="ranks", pids=ranks)
        else:
            self.ranks_done_at = self.sigterm_at
            self._signal_group(signal.SIGTERM)

    def _signal_group(self, sig: signal.Signals) -> None:
        assert self.child is not None
        with contextlib.suppress(OSError):  # the group may be gone
            os.killpg(self.child.pid, sig)
        if sig == signal.SIGTERM:
            self.group_signalled = True
        self.say("signal", signal=sig.name, to="group", pgid=self.child.pid)

    def _progress(self) -> None:
        if self.sigterm_at is None:
            return
        if not self.group_signalled and not self.live_ranks():
            now = time.monotonic()
            self.ranks_done_at = self.ranks_done_at or now
            if now - self.ranks_done_at >= AFTER_RANKS_S or self.ranks_done_at == self.sigterm_at:
                self._signal_group(signal.SIGTERM)  # now their launcher and helpers
        if not self.overdue and time.monotonic() - self.sigterm_at >= self.grace_s:
            self.overdue = True
            assert self.child is not None
            alive = self.live_ranks() or [self.child.pid]
            self.say(
                "overdue",
                signal="SIGTERM",
                waited_s=lines.number(time.monotonic() - self.sigterm_at),
                grace_s=f"{self.grace_s:g}",
                alive=alive,
            )
            for pid in self.live_ranks():
                _kill(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.killpg(self.child.pid, signal.SIGKILL)
            deadline = time.monotonic() + REAP_AFTER_KILL_S
            while self.status is None and time.monotonic() < deadline:
                self._reap()
                time.sleep(POLL_S)

    # -- the ranks that registered ------------------------------------------------------------------

    def live_ranks(self) -> list[int]:
        found = []
        try:
            names = os.listdir(self.ranks_dir)
        except OSError:
            return []
        for name in names:
            if not name.endswith(".rank") or not name[:-5].isdigit():
                continue
            pid = int(name[:-5])
            try:
                with open(os.path.join(self.ranks_dir, name), encoding="ascii") as f:
                    started = f.read().strip()
            except OSError:
                continue
            if _alive(pid, started):
                found.append(pid)
        return sorted(found)

    # -- children ---------------------------------------------------------------------------------

    def _reap(self) -> None:
        """Collect the child's status; as PID 1 also every orphan handed to it."""
        assert self.child is not None
        target = -1 if os.getpid() == 1 else self.child.pid
        while True:
            try:
                pid, status = os.waitpid(target, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.child.pid:
                self.status = status
                self.child.returncode = self._exit_code(status)
                return

    @staticmethod
    def _exit_code(status: int | None) -> int:
        if status is None:
            return 1
        if os.WIFSIGNALED(status):
            return 128 + os.WTERMSIG(status)
        return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1

    def _cleanup(self) -> None:
        shutil.rmtree(self.ranks_dir, ignore_errors=True)  # only the launcher's own directory

    def say(self, event: str, **fields: object) -> None:
        self.printer.line(lines.launcher(event, **fields))


def _alive(pid: int, started: str) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # not ours
    now = process_start_time(pid)
    if started and now is not None and now != started:
        return False  # the pid was reused
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            state = f.read().rsplit(")", 1)[-1].split()[0]
        return state not in ("Z", "X")  # a zombie has exited; its parent has not collected it yet
    except (OSError, IndexError):
        return True


def _kill(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, sig)


def main(argv: Sequence[str] | None = None) -> int:
    opts, command = parse(sys.argv[1:] if argv is None else argv)
    return Launcher(command, opts.grace_s).run()
