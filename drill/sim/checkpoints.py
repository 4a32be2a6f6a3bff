"""Checkpoints of the simulated jobs: the layouts (Hugging Face, Megatron, torch DCP) and their
progressive writes to the job's CheckpointConfig.S3Uri, completion marker last.

A save takes ``checkpoint_write_seconds``: its objects appear at evenly spaced times and the
marker is the last one, so a crash or SIGKILL in the middle leaves a half-written directory.
"""

from __future__ import annotations

import json
from typing import Any

from drill.clock import VirtualClock
from drill.sim.logs import SimLogs
from drill.sim.model import Save, SimJob


def parse_s3_uri(uri: str) -> tuple[str, str]:
    if not uri.startswith("s3://"):
        raise ValueError(f"not an s3 uri: {uri}")
    bucket, _, prefix = uri[5:].partition("/")
    return bucket, prefix.strip("/")


def checkpoint_files(layout: str, step: int, total_steps: int) -> list[tuple[str, bytes]]:
    """Relative keys and tiny bodies of one checkpoint; the completion marker is the last entry."""
    if layout == "hf":
        d = f"checkpoint-{step}"
        state = {"global_step": step, "max_steps": total_steps, "log_history": []}
        return [
            (f"{d}/model.safetensors", f"sim-weights:{step}".encode()),
            (f"{d}/optimizer.pt", f"sim-optimizer:{step}".encode()),
            (f"{d}/trainer_state.json", json.dumps(state).encode()),
        ]
    if layout == "megatron":
        d = f"iter_{step:07d}"
        return [
            (f"{d}/mp_rank_00/model_optim_rng.pt", f"sim-rank0:{step}".encode()),
            (f"{d}/mp_rank_01/model_optim_rng.pt", f"sim-rank1:{step}".encode()),
            ("latest_checkpointed_iteration.txt", str(step).encode()),
        ]
    if layout == "dcp":
        d = f"step_{step}"
        return [
            (f"{d}/__0_0.distcp", f"sim-shard0:{step}".encode()),
            (f"{d}/__1_0.distcp", f"sim-shard1:{step}".encode()),
            (f"{d}/.metadata", json.dumps({"step": step}).encode()),
        ]
    raise ValueError(f"unknown checkpoint layout {layout!r}")


class CheckpointWriter:
    def __init__(self, s3_client: Any, logs: SimLogs, clock: VirtualClock) -> None:
        self.s3 = s3_client
        self.logs = logs
        self.clock = clock

    def begin_save(self, job: SimJob, t: int, step: int, duration_ms: int, reason: str) -> None:
        files = checkpoint_files(job.profile.checkpoint_layout, step, job.profile.total_steps)
        job._save = Save(step=step, start_ms=t, end_ms=t + max(duration_ms, 0), files=files, reason=reason)
        where = self._local_dir(job, files)
        self.logs.write_line(job, 1, t, f"Saving checkpoint for global step {step} to {where}")

    @staticmethod
    def _local_dir(job: SimJob, files: list[tuple[str, bytes]]) -> str:
        local = str((job.request.get("CheckpointConfig") or {}).get("LocalPath", "/opt/ml/checkpoints"))
        return f"{local.rstrip('/')}/{files[0][0].split('/')[0]}"

    def write_next_file(self, job: SimJob, t: int) -> None:
        save = job._save
        assert save is not None
        rel, body = save.files[save.written]
        self.put_object(job, rel, body)
        save.written += 1
        if save.written == len(save.files):
            if save.step not in job.checkpoints:
                job.checkpoints.append(save.step)
            job._last_saved_step = max(job._last_saved_step, save.step)
            self.logs.write_line(job, 1, t, f"Checkpoint for global step {save.step} saved")
            job._save = None

    def put_object(self, job: SimJob, rel: str, body: bytes) -> None:
        cfg = job.request.get("CheckpointConfig")
        if not cfg:
            return
        bucket, prefix = parse_s3_uri(str(cfg["S3Uri"]))
        key = f"{prefix}/{rel}" if prefix else rel
        self.s3.put_object(Bucket=bucket, Key=key, Body=body)

    def write_half(self, job: SimJob) -> None:
        """At a crash: the newest checkpoint directory without its completion marker."""
        save = job._save
        if save is None:
            step = max(job.current_step(self.clock.now_ms), job._last_saved_step + 1)
            files = checkpoint_files(job.profile.checkpoint_layout, step, job.profile.total_steps)
            save = Save(step=step, start_ms=0, end_ms=0, files=files, reason="half")
        for rel, body in save.files[save.written : len(save.files) - 1]:
            self.put_object(job, rel, body)
        job._save = None
