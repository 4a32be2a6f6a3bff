"""A stand-in for torchrun's agent, run by tests/companion: starts `--workers` ranks of loop.py
(RANK / LOCAL_RANK set, as torchrun sets them) and, on SIGTERM, does what torch.distributed.
elastic does: SIGTERM to its workers, then SIGKILL to those still alive `--kill-after-s` later
(torchrun's `PContext.close` waits 30 s). It exits with the worst of its workers' codes."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--kill-after-s", type=float, default=1.0)
    p.add_argument("worker_args", nargs=argparse.REMAINDER)
    args = p.parse_args()
    worker_args = args.worker_args[1:] if args.worker_args[:1] == ["--"] else args.worker_args
    loop = os.path.join(os.path.dirname(os.path.abspath(__file__)), "loop.py")
    workers = [
        subprocess.Popen(
            [sys.executable, loop, *worker_args],
            env={**os.environ, "RANK": str(i), "LOCAL_RANK": str(i), "WORLD_SIZE": str(args.workers)},
        )
        for i in range(args.workers)
    ]
    stopping: list[float] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(time.monotonic()))
    killed = False
    while any(w.poll() is None for w in workers):
        if stopping and len(stopping) == 1:
            for w in workers:
                if w.poll() is None:
                    w.send_signal(signal.SIGTERM)
            stopping.append(stopping[0])
        if stopping and not killed and time.monotonic() - stopping[0] >= args.kill_after_s:
            killed = True
            for w in workers:
                if w.poll() is None:
                    w.kill()
            print(
                f"agent: SIGKILL to the workers still alive {args.kill_after_s:g} s after SIGTERM", flush=True
            )
        time.sleep(0.02)
    codes = [w.returncode for w in workers]
    print(f"agent: workers exited {codes}", flush=True)
    return max((c if c >= 0 else 128 - c) for c in codes)


if __name__ == "__main__":
    raise SystemExit(main())
