"""A real training loop that uses the companion, run by tests/companion in a subprocess.

The model is a two-parameter linear regression trained with SGD on the standard library (as
examples/selftest/train.py), one gradient step per training step. What it does besides training
comes from its arguments: stall at a step (in a function named like a rank stuck in a collective,
while a helper thread keeps running), hold the GIL, declare a phase, save on SIGTERM, never reach
another step boundary after SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import threading
import time

from sagewarden_companion.job import Job

POINTS = [(-1.0 + 2.0 * i / 15, 2.0 * (-1.0 + 2.0 * i / 15) + 1.0) for i in range(16)]


def sgd_step(w: float, b: float) -> tuple[float, float]:
    n = len(POINTS)
    gw = sum(2 * (w * x + b - y) * x / n for x, y in POINTS)
    gb = sum(2 * (w * x + b - y) / n for x, y in POINTS)
    return w - 0.2 * gw, b - 0.2 * gb


def stuck_in_collective(seconds: float) -> None:
    time.sleep(seconds)


def holding_the_gil() -> None:
    re.match(r"(a+)+$", "a" * 40 + "b")  # catastrophic backtracking: sre never releases the GIL


def prefetch_forever(stop: threading.Event) -> None:
    while not stop.wait(0.05):
        pass


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--step-s", type=float, default=0.02)
    p.add_argument("--total", type=int, default=None)
    p.add_argument("--step-every", type=int, default=1)
    p.add_argument("--stall-after", type=int, default=0)
    p.add_argument("--stall-s", type=float, default=600.0)
    p.add_argument("--gil-stall-after", type=int, default=0)
    p.add_argument("--phase-after", type=int, default=0)
    p.add_argument("--phase-s", type=float, default=2.0)
    p.add_argument("--sigterm-save", default=None, help="on SIGTERM save a checkpoint here")
    p.add_argument("--save-s", type=float, default=0.5)
    p.add_argument("--sigterm-budget-s", type=float, default=110.0)
    p.add_argument("--stuck-after-sigterm", action="store_true")
    p.add_argument("--forever", action="store_true", help="keep training until stopped")
    p.add_argument("--floor-s", type=float, default=1.0)
    p.add_argument("--factor", type=float, default=3.0)
    p.add_argument("--first-step-s", type=float, default=30.0)
    p.add_argument("--heartbeat-s", type=float, default=0.2)
    p.add_argument("--backstop-margin-s", type=float, default=60.0)
    args = p.parse_args()

    job = Job.start(
        total_steps=args.total,
        step_every=args.step_every,
        stall_floor_s=args.floor_s,
        stall_factor=args.factor,
        first_step_s=args.first_step_s,
        heartbeat_s=args.heartbeat_s,
        backstop_margin_s=args.backstop_margin_s,
    )
    stop = threading.Event()
    threading.Thread(target=prefetch_forever, args=(stop,), name="data-prefetch", daemon=True).start()
    state = {"w": 0.0, "b": 0.0, "step": job.resume_step or 0}
    if job.resume_dir:
        with open(os.path.join(job.resume_dir, "state.json")) as f:
            state = json.load(f)
        print(f"resumed from {job.resume_dir} at step {state['step']}", flush=True)

    def save() -> None:
        assert args.sigterm_save is not None
        path = os.path.join(args.sigterm_save, f"checkpoint-{state['step']}")
        os.makedirs(path, exist_ok=True)
        time.sleep(args.save_s)  # a save takes a while
        with open(os.path.join(path, "state.json"), "w") as f:  # the completion marker, last
            json.dump(state, f)

    if args.sigterm_save:
        job.on_sigterm(save, budget_s=args.sigterm_budget_s)

    step = state["step"]
    while args.forever or step < (job.resume_step or 0) + args.steps:
        step += 1
        with job.compute():
            state["w"], state["b"] = sgd_step(state["w"], state["b"])
        time.sleep(args.step_s)
        state["step"] = step
        if args.stuck_after_sigterm and job.stop_requested:
            stuck_in_collective(600.0)
        job.step(step)
        if step == args.stall_after:
            stuck_in_collective(args.stall_s)
        if step == args.gil_stall_after:
            holding_the_gil()
        if step == args.phase_after:
            with job.phase("save", max_minutes=1):
                time.sleep(args.phase_s)
    stop.set()
    print(f"trained {step} steps: w={state['w']:.3f} b={state['b']:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
