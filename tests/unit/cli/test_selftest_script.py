"""examples/selftest/train.py, run as SageMaker runs it (a subprocess with sagewarden's environment
variables) in a temporary directory, with a short step time; and its crash, as the real classifier
sees it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from sagewarden.domain.vocabulary.classifier.classify import classify
from sagewarden.domain.vocabulary.classifier.models import Ending, EndingClass
from sagewarden_cli.selftest_plan import PLAN

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "examples" / "selftest" / "train.py"
TIMEOUT_S = 60


@dataclass
class Ran:
    code: int
    out: list[str]
    err: list[str]


def run_script(
    tmp: Path, attempt: int, resume: int | None = None, *args: str, resume_dir: Path | None = None
) -> Ran:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAGEWARDEN_")}
    env["SAGEWARDEN_ATTEMPT"] = str(attempt)
    env["SAGEWARDEN_RESUME_STEP"] = "" if resume is None else str(resume)
    if resume is not None:
        env["SAGEWARDEN_RESUME_DIR"] = str(resume_dir or tmp / "ckpt" / f"checkpoint-{resume}")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *_plan_args(), *args],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    return Ran(proc.returncode, proc.stdout.splitlines(), proc.stderr.splitlines())


def _plan_args() -> list[str]:
    # the job's own hyperparameters (as SageMaker passes them), with a short step time
    args = [f"--{k}={v}" for k, v in PLAN.hyperparameters().items()]
    return [*args, "--seconds-per-step=0.005", "--checkpoint-dir=ckpt", "--model-dir=model"]


def markers(tmp: Path) -> list[int]:
    return sorted(
        int(p.parent.name.split("-")[1]) for p in (tmp / "ckpt").glob("checkpoint-*/trainer_state.json")
    )


def toolkit_error_message(stderr: list[str]) -> str:
    """What SageMaker's training toolkit puts in ErrorMessage: stderr from the first line that
    names a Python exception class on."""
    for i, line in enumerate(stderr):
        if re.search(r"\b[A-Za-z]*(?:Error|Exception)\b", line):
            return "\n".join(stderr[i:])
    return ""


def failure_reason(stderr: list[str]) -> str:
    return (
        f'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage "{toolkit_error_message(stderr)}"\n'
        'Command "/opt/conda/bin/python3.11 train.py --checkpoint-every 10 --crash-at-step 25", exit code: 1'
    )


@pytest.mark.claim(
    "attempt 1 writes checkpoints 10 and 20, then dies at step 25 with a NCCL watchdog timeout"
)
def test_attempt_1_writes_checkpoints_then_dies_of_a_nccl_watchdog_timeout(tmp_path):
    ran = run_script(tmp_path, 1)

    assert ran.code == 1
    assert markers(tmp_path) == [10, 20]  # complete checkpoints, marker last; none after the crash
    assert (tmp_path / "ckpt" / "checkpoint-20" / "model.safetensors").stat().st_size > 8
    assert ran.out[-1].startswith(f"step {PLAN.crash_at_step} loss ")
    assert "Starting from scratch (no SAGEWARDEN_RESUME_STEP)" in ran.out
    assert [f"step {n}" for n in range(1, 26)] == [
        line.rsplit(" loss", 1)[0] for line in ran.out if line.startswith("step ")
    ]
    watchdog = [line for line in ran.err if "Watchdog caught collective operation timeout" in line]
    assert watchdog[0].startswith("[rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog")
    assert ran.err[-1].startswith("RuntimeError: [Rank 0] Watchdog caught collective operation timeout")


@pytest.mark.claim(
    "attempt 1 writes checkpoints 10 and 20, then dies at step 25 with a NCCL watchdog timeout"
)
def test_the_crash_is_infrastructure_to_the_real_classifier(tmp_path):
    ran = run_script(tmp_path, 1)
    tail = tuple(ran.out + ran.err)

    both = classify(
        Ending(
            status="Failed",
            secondary_status="Failed",
            failure_reason=failure_reason(ran.err),
            log_tail=tail[-50:],
            reached_training=True,
            training_seconds=PLAN.crash_after_min * 60,
        )
    )
    reason_only = classify(
        Ending(status="Failed", failure_reason=failure_reason(ran.err), reached_training=True)
    )
    logs_only = classify(
        Ending(status="Failed", failure_reason=failure_reason([]), log_tail=tail[-50:], reached_training=True)
    )

    message = toolkit_error_message(ran.err)  # from the traceback's `raise RuntimeError(...)` line
    assert message.splitlines()[-1].startswith("RuntimeError: [Rank 0] Watchdog caught collective")
    for verdict in (both, reason_only, logs_only):
        assert verdict.kind is EndingClass.INFRASTRUCTURE, verdict
        assert verdict.reason.startswith("NCCL watchdog timeout in ")
    assert any("Watchdog caught collective operation timeout" in e for e in both.evidence)


def test_an_exit_without_the_watchdog_line_is_not_infrastructure(tmp_path):
    # the control: the same classification of the script's hang ending (test mode) finds nothing
    run_script(tmp_path, 1)
    ran = run_script(tmp_path, 2, 20, "--hang-seconds=0.05")
    verdict = classify(
        Ending(
            status="Failed",
            failure_reason=failure_reason(ran.err),
            log_tail=tuple(ran.out + ran.err),
            reached_training=True,
        )
    )
    assert ran.code == 3 and verdict.kind is EndingClass.UNKNOWN


@pytest.mark.claim(
    "attempt 2 checks that it was given checkpoint 20, writes checkpoint 30, and after step 32 stops logging and ignores SIGTERM"
)
def test_attempt_2_resumes_from_the_named_checkpoint_then_falls_silent(tmp_path):
    run_script(tmp_path, 1)
    ran = run_script(tmp_path, 2, PLAN.resume_2, "--hang-seconds=0.2")
    (tmp_path / "fresh").mkdir()
    fresh = run_script(tmp_path / "fresh", 3, None)  # no crash, no hang: 40 steps in one go

    assert ran.code == 3  # only because --hang-seconds ends the hang
    assert f"Resuming training from global step {PLAN.resume_2}" in ran.out
    loaded = next(line for line in ran.out if line.startswith("Loaded "))
    assert loaded.endswith("trainer_state.json says global step 20, as SAGEWARDEN_RESUME_STEP does")
    assert markers(tmp_path) == [10, 20, 30]
    assert ran.out[-1] == (
        "sagewarden self-test: after step 32: hanging silently until sagewarden stops this job (on purpose)"
    )
    assert ran.out[-2].startswith("step 32 loss ")
    assert ran.err == ["sagewarden self-test: the hang ended after 0.2 s (--hang-seconds)"]
    # the weights really came from the checkpoint: the losses go on as in one uninterrupted run
    resumed = [line for line in ran.out if line.startswith("step ")]
    assert resumed[0].startswith("step 21 ")
    assert resumed == [line for line in fresh.out if line.startswith("step ")][20:32]


@pytest.mark.claim(
    "attempt 2 checks that it was given checkpoint 20, writes checkpoint 30, and after step 32 stops logging and ignores SIGTERM"
)
def test_attempt_2_refuses_a_checkpoint_that_is_not_the_named_step(tmp_path):
    run_script(tmp_path, 1)
    ran = run_script(tmp_path, 2, 20, "--hang-seconds=0.05", resume_dir=tmp_path / "ckpt" / "checkpoint-10")

    assert ran.code == 2
    assert "holds global step 10, but SAGEWARDEN_RESUME_STEP is 20" in ran.err[-1]
    assert not any(line.startswith("step ") for line in ran.out)


@pytest.mark.claim(
    "attempt 2 checks that it was given checkpoint 20, writes checkpoint 30, and after step 32 stops logging and ignores SIGTERM"
)
def test_the_hang_ignores_sigterm(tmp_path):
    run_script(tmp_path, 1)
    env = {**os.environ, "SAGEWARDEN_ATTEMPT": "2", "SAGEWARDEN_RESUME_STEP": "20"}
    env["SAGEWARDEN_RESUME_DIR"] = str(tmp_path / "ckpt" / "checkpoint-20")
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), *_plan_args(), "--hang-seconds=1.5"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "hanging silently" in line:
                break
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        alive_after_sigterm = proc.poll() is None
        out, _ = proc.communicate(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert alive_after_sigterm  # SageMaker's SIGKILL, 120 s later, is what ends a real one
    assert proc.returncode == 3 and out == ""


@pytest.mark.claim("attempt 3 resumes from 30 and completes at step 40")
def test_attempt_3_resumes_and_completes(tmp_path):
    run_script(tmp_path, 1)
    run_script(tmp_path, 2, 20, "--hang-seconds=0.05")
    ran = run_script(tmp_path, 3, PLAN.resume_3)

    assert ran.code == 0 and ran.err == []
    assert f"Resuming training from global step {PLAN.resume_3}" in ran.out
    assert markers(tmp_path) == [10, 20, 30, 40]
    assert ran.out[-1].startswith("Training complete at global step 40: ")
    assert (tmp_path / "model" / "model.safetensors").is_file()


@pytest.mark.claim(
    'It may differ from "the newest directory on disk", because a half-written newest directory is skipped.'
)
def test_a_newer_directory_on_disk_than_the_named_one_is_reported(tmp_path):
    # sagewarden names the newest *verified* checkpoint; a half-written newer one is skipped
    run_script(tmp_path, 1)
    (tmp_path / "ckpt" / "checkpoint-25").mkdir()
    ran = run_script(tmp_path, 3, 20)

    assert "note: the newest directory on disk is checkpoint-25; sagewarden named checkpoint-20" in ran.out
    assert ran.code == 0


@pytest.mark.parametrize(
    "attempt", [1, 2, 3], ids=["the first attempt", "the second attempt", "the third attempt"]
)
def test_unknown_hyperparameters_are_ignored(tmp_path, attempt):
    # SageMaker passes every hyperparameter; the script must not die of one it does not know
    if attempt > 1:
        run_script(tmp_path, 1)
    ran = run_script(tmp_path, attempt, None if attempt == 1 else 20, "--epochs", "1", "--hang-seconds=0.05")
    assert "error: unrecognized arguments" not in "\n".join(ran.err)
    assert ran.code == {1: 1, 2: 3, 3: 0}[attempt]
