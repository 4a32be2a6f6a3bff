"""The `sagewarden selftest` training job: a tiny training loop that fails on purpose.

It runs in a public SageMaker PyTorch training image on a CPU instance (ml.m5.large), with
Python's standard library only (the model is a two-parameter linear regression trained with SGD;
torch is not needed). It follows sagewarden's training-script contract (README, "Training-script
contract"):

- it reads SAGEWARDEN_ATTEMPT, SAGEWARDEN_RESUME_STEP and SAGEWARDEN_RESUME_DIR;
- it writes Hugging Face-layout checkpoints `checkpoint-<step>/` under the checkpoint directory
  (/opt/ml/checkpoints, which SageMaker syncs to CheckpointConfig.S3Uri), the completion marker
  `trainer_state.json` last;
- it logs one line per step.

What it does depends on the attempt (the plan comes in as hyperparameters, so the job shows it):

- attempt 1 (--crash-attempt) trains from scratch, writes checkpoints, and at --crash-at-step
  dies the way a job dies when a peer is lost: a NCCL watchdog timeout line, then a non-zero exit.
  sagewarden must class that INFRASTRUCTURE and resume from the newest checkpoint.
- attempt 2 (--hang-attempt) resumes (it checks that the checkpoint it was given holds the step it
  was told and prints it), writes a checkpoint, and after --hang-after-step stops logging and
  sleeps, ignoring SIGTERM like a process stuck in a collective. Only sagewarden's log-silence
  detection can end it (StopTrainingJob; SageMaker kills it 120 s after SIGTERM).
- attempt 3 and later resume and complete.

Run it by hand (what the tests do; --hang-seconds makes the hang end so a test can finish):

    SAGEWARDEN_ATTEMPT=1 python examples/selftest/train.py --checkpoint-dir /tmp/ckpt --seconds-per-step 0.01
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import struct
import sys
import time
from importlib import metadata

CHECKPOINT_DIR = "/opt/ml/checkpoints"
MODEL_DIR = os.environ.get("SM_MODEL_DIR", "/opt/ml/model")
MARKER = "trainer_state.json"  # the Hugging Face layout's completion marker, written last
WEIGHTS = "model.safetensors"
HANG_EXIT_CODE = 3  # only with --hang-seconds (tests)

# The data: y = 2x + 1 at 16 points in [-1, 1]; each step is one gradient step on all of them.
POINTS = [(-1.0 + 2.0 * i / 15, 2.0 * (-1.0 + 2.0 * i / 15) + 1.0) for i in range(16)]
LEARNING_RATE = 0.2


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="sagewarden self-test training job")
    p.add_argument("--total-steps", type=int, default=40)
    p.add_argument("--checkpoint-every", type=int, default=10)
    p.add_argument("--seconds-per-step", type=float, default=6.0)
    p.add_argument("--crash-attempt", type=int, default=1)
    p.add_argument("--crash-at-step", type=int, default=25)
    p.add_argument("--hang-attempt", type=int, default=2)
    p.add_argument("--hang-after-step", type=int, default=32)
    p.add_argument("--checkpoint-dir", default=CHECKPOINT_DIR)
    p.add_argument("--model-dir", default=MODEL_DIR)
    p.add_argument(
        "--hang-seconds",
        type=float,
        default=0.0,
        help="end the hang after this many seconds with exit code 3 (tests); 0 hangs until killed",
    )
    # SageMaker passes every hyperparameter as --name value; ignore any this script does not know
    args, _unknown = p.parse_known_args(argv)
    return args


# -- the plan's texts (drill/scenarios/selftest.json repeats them; a test keeps both equal) -------
def banner(args: argparse.Namespace) -> str:
    return (
        f"sagewarden self-test: a tiny training loop, {args.total_steps} steps, a checkpoint every "
        f"{args.checkpoint_every} steps"
    )


def watchdog_message(step: int) -> str:
    return (
        f"[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={step}, OpType=ALLREDUCE, "
        "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600042 milliseconds before timing out."
    )


def crash_lines(step: int) -> list[str]:
    """What attempt 1 writes when it dies (stderr); the last line ends SageMaker's FailureReason."""
    return [
        f"sagewarden self-test: step {step}: simulating a lost NCCL peer (this failure is on purpose)",
        f"[rank0]:[E ProcessGroupNCCL.cpp:616] {watchdog_message(step)}",
        f"RuntimeError: {watchdog_message(step)}",
    ]


def hang_line(step: int) -> str:
    return f"sagewarden self-test: after step {step}: hanging silently until sagewarden stops this job (on purpose)"


# -- the model ------------------------------------------------------------------------------------
def sgd_step(w: float, b: float) -> tuple[float, float, float]:
    """One gradient step of mean squared error; returns the new w, b and the loss before it."""
    n = len(POINTS)
    gw = gb = loss = 0.0
    for x, y in POINTS:
        err = w * x + b - y
        loss += err * err / n
        gw += 2 * err * x / n
        gb += 2 * err / n
    return w - LEARNING_RATE * gw, b - LEARNING_RATE * gb, loss


def write_safetensors(path: str, tensors: dict[str, float]) -> None:
    """A real safetensors file (float32 scalars of shape [1]) with the standard library."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    data = b""
    for name, value in tensors.items():
        header[name] = {"dtype": "F32", "shape": [1], "data_offsets": [len(data), len(data) + 4]}
        data += struct.pack("<f", value)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + data)


def read_safetensors(path: str) -> dict[str, float]:
    with open(path, "rb") as f:
        blob = f.read()
    (size,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + size])
    data = blob[8 + size :]
    out = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        start, end = spec["data_offsets"]
        (out[name],) = struct.unpack("<f", data[start:end])
    return out


# -- checkpoints ----------------------------------------------------------------------------------
def save_checkpoint(
    root: str, step: int, w: float, b: float, total: int, history: list[dict[str, float]]
) -> None:
    path = os.path.join(root, f"checkpoint-{step}")
    say(f"Saving checkpoint for global step {step} to {path}")
    os.makedirs(path, exist_ok=True)
    write_safetensors(os.path.join(path, WEIGHTS), {"w": w, "b": b})
    state = {"global_step": step, "max_steps": total, "log_history": history[-20:]}
    with open(os.path.join(path, MARKER), "w") as f:  # the completion marker, last
        json.dump(state, f)
    say(f"Checkpoint for global step {step} saved")


def load_checkpoint(resume_dir: str, resume_step: int) -> tuple[float, float]:
    """Load the checkpoint sagewarden named, and check it is the step it said."""
    with open(os.path.join(resume_dir, MARKER)) as f:
        state = json.load(f)
    found = int(state.get("global_step", -1))
    if found != resume_step:
        fail(
            f"checkpoint {resume_dir} holds global step {found}, but SAGEWARDEN_RESUME_STEP is {resume_step}",
            code=2,
        )
    weights = read_safetensors(os.path.join(resume_dir, WEIGHTS))
    say(f"Loaded {resume_dir}: {MARKER} says global step {found}, as SAGEWARDEN_RESUME_STEP does")
    return weights["w"], weights["b"]


def newest_on_disk(root: str) -> int | None:
    steps = [int(m.group(1)) for n in _listdir(root) if (m := re.fullmatch(r"checkpoint-(\d+)", n))]
    return max(steps) if steps else None


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except FileNotFoundError:
        return []


# -- output ---------------------------------------------------------------------------------------
def say(text: str) -> None:
    print(text, flush=True)


def fail(text: str, code: int) -> None:
    print(f"sagewarden self-test: {text}", file=sys.stderr, flush=True)
    sys.exit(code)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    attempt = int(os.environ.get("SAGEWARDEN_ATTEMPT") or 1)
    resume_text = os.environ.get("SAGEWARDEN_RESUME_STEP") or ""
    say(banner(args))
    try:
        torch = f"torch {metadata.version('torch')} is installed (not needed)"
    except metadata.PackageNotFoundError:
        torch = "torch is not installed (not needed)"
    say(f"attempt {attempt}, Python {sys.version.split()[0]}, {torch}")

    w, b, start = 0.0, 0.0, 0
    if resume_text:
        start = int(resume_text)
        resume_dir = os.environ.get("SAGEWARDEN_RESUME_DIR") or os.path.join(
            args.checkpoint_dir, f"checkpoint-{start}"
        )
        newest = newest_on_disk(args.checkpoint_dir)
        if newest is not None and newest != start:
            say(
                f"note: the newest directory on disk is checkpoint-{newest}; sagewarden named checkpoint-{start}"
            )
        w, b = load_checkpoint(resume_dir, start)
        say(f"Resuming training from global step {start}")
    else:
        say("Starting from scratch (no SAGEWARDEN_RESUME_STEP)")

    history: list[dict[str, float]] = []
    t0 = time.monotonic()
    for step in range(start + 1, args.total_steps + 1):
        w, b, loss = sgd_step(w, b)
        delay = t0 + (step - start) * args.seconds_per_step - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        history.append({"step": step, "loss": round(loss, 6)})
        say(f"step {step} loss {loss:.4f}")
        if step % args.checkpoint_every == 0 or step == args.total_steps:
            save_checkpoint(args.checkpoint_dir, step, w, b, args.total_steps, history)
        if attempt == args.crash_attempt and step == args.crash_at_step:
            for line in crash_lines(step)[:-1]:  # the traceback's last line is crash_lines()[-1]
                print(line, file=sys.stderr, flush=True)
            raise RuntimeError(watchdog_message(step))
        if attempt == args.hang_attempt and step == args.hang_after_step:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a rank stuck in a collective cannot react
            say(hang_line(step))
            hang(args.hang_seconds)
    os.makedirs(args.model_dir, exist_ok=True)
    write_safetensors(os.path.join(args.model_dir, WEIGHTS), {"w": w, "b": b})
    say(f"Training complete at global step {args.total_steps}: w={w:.3f} b={b:.3f} (target w=2 b=1)")
    return 0


def hang(seconds: float) -> None:
    """Stop logging and do nothing (SIGTERM is ignored by then)."""
    deadline = time.monotonic() + seconds if seconds > 0 else math.inf
    while time.monotonic() < deadline:
        time.sleep(min(60.0, max(0.0, deadline - time.monotonic())))
    print(
        f"sagewarden self-test: the hang ended after {seconds:g} s (--hang-seconds)",
        file=sys.stderr,
        flush=True,
    )
    sys.exit(HANG_EXIT_CODE)


if __name__ == "__main__":
    sys.exit(main())
