"""Checkpoints of the simulated jobs: layouts (Hugging Face, Megatron, torch DCP), progressive writes
with the marker last, modelled sizes and restore time.

Why: docs/fidelity.md."""

from __future__ import annotations

import json
from typing import Any

from drill.clock import VirtualClock
from drill.sim.logs import SimLogs
from drill.sim.model import Save, SimJob

# Per instance, S3 -> /opt/ml/checkpoints at job start. An assumption, not an AWS figure (none is
# published), on the unkind side: 1.25 GB/s = 10 Gbit/s per instance, a fraction of a p5's network
# (see docs/fidelity.md). The bench (benchmarks/retention.py) uses this same constant.
RESTORE_BYTES_PER_S = 1.25e9
# SageMaker does not document how its checkpoint sync uploads; the AWS CLI's and SDKs' transfer
# managers switch to multipart uploads above 8 MB (and PutObject takes at most 5 GB): a file whose
# modelled size is larger is written with a multipart upload
MULTIPART_THRESHOLD = 8 * 1024**2
# a Hugging Face checkpoint of a model trained with Adam in mixed precision: 2 B/param bf16
# weights (model.safetensors) and 12 B/param fp32 master weights, m and v (optimizer.pt)
HF_WEIGHT_SHARE = 2 / 14


def modelled_sizes(layout: str, files: list[tuple[str, bytes]], total: int) -> list[int]:
    """Each file's modelled size for a checkpoint of ``total`` bytes; the marker (last) keeps its
    own. Hugging Face splits weights and optimizer state 2:12; other layouts split evenly."""
    data = files[:-1]
    if layout == "hf" and len(data) == 2:
        weights = int(total * HF_WEIGHT_SHARE)
        shares = [weights, total - weights]
    else:
        shares = [total // len(data)] * len(data)
        shares[-1] += total - sum(shares)
    return [*shares, len(files[-1][1])]


def parse_s3_uri(uri: str) -> tuple[str, str]:
    if not uri.startswith("s3://"):
        raise ValueError(f"not an s3 uri: {uri}")
    bucket, _, prefix = uri[5:].partition("/")
    return bucket, prefix.strip("/")


def checkpoint_files(layout: str, step: int, total_steps: int, run: str = "") -> list[tuple[str, bytes]]:
    """Relative keys and tiny bodies of one checkpoint; the completion marker is the last entry.
    ``run`` (the job's CheckpointConfig.S3Uri) is in every data file's body: two runs' same-named
    files hold different bytes, of equal sizes when their URIs are equally long."""
    tag = f":{run}" if run else ""
    if layout == "hf":
        d = f"checkpoint-{step}"
        state = {"global_step": step, "max_steps": total_steps, "log_history": []}
        return [
            (f"{d}/model.safetensors", f"sim-weights:{step}{tag}".encode()),
            (f"{d}/optimizer.pt", f"sim-optimizer:{step}{tag}".encode()),
            (f"{d}/trainer_state.json", json.dumps(state).encode()),
        ]
    if layout == "megatron":
        d = f"iter_{step:07d}"
        return [
            (f"{d}/mp_rank_00/model_optim_rng.pt", f"sim-rank0:{step}{tag}".encode()),
            (f"{d}/mp_rank_01/model_optim_rng.pt", f"sim-rank1:{step}{tag}".encode()),
            ("latest_checkpointed_iteration.txt", str(step).encode()),
        ]
    if layout == "dcp":
        d = f"step_{step}"
        return [
            (f"{d}/__0_0.distcp", f"sim-shard0:{step}{tag}".encode()),
            (f"{d}/__1_0.distcp", f"sim-shard1:{step}{tag}".encode()),
            (f"{d}/.metadata", json.dumps({"step": step}).encode()),
        ]
    raise ValueError(f"unknown checkpoint layout {layout!r}")


def _sync_uri(job: SimJob) -> str:
    return str((job.request.get("CheckpointConfig") or {}).get("S3Uri", ""))


class CheckpointWriter:
    def __init__(self, s3_client: Any, logs: SimLogs, clock: VirtualClock) -> None:
        self.s3 = s3_client
        self.logs = logs
        self.clock = clock
        self.sizes: dict[tuple[str, str], int] = {}  # (bucket, key) -> modelled bytes
        self.written: dict[tuple[str, str], bytes] = {}  # (bucket, key) -> the bytes a job wrote there

    def begin_save(self, job: SimJob, t: int, step: int, duration_ms: int, reason: str) -> None:
        files = checkpoint_files(job.profile.checkpoint_layout, step, job.profile.total_steps, _sync_uri(job))
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
        self.put_object(job, rel, body, self._size(job, save.files, save.written))
        save.written += 1
        if save.written == len(save.files):
            if save.step not in job.checkpoints:
                job.checkpoints.append(save.step)
            job._last_saved_step = max(job._last_saved_step, save.step)
            self.logs.write_line(job, 1, t, f"Checkpoint for global step {save.step} saved")
            job._save = None

    def put_object(self, job: SimJob, rel: str, body: bytes, size: int | None = None) -> None:
        cfg = job.request.get("CheckpointConfig")
        if not cfg:
            return
        bucket, prefix = parse_s3_uri(str(cfg["S3Uri"]))
        key = f"{prefix}/{rel}" if prefix else rel
        if size is not None and size > MULTIPART_THRESHOLD:
            self._put_in_parts(bucket, key, body)
        else:
            self.s3.put_object(Bucket=bucket, Key=key, Body=body)
        self.written[(bucket, key)] = body
        if size is not None:
            self.sizes[(bucket, key)] = size

    def _put_in_parts(self, bucket: str, key: str, body: bytes) -> None:
        """A file whose modelled size is a multipart upload's: one part (the body is tiny), so its
        ETag is a multipart one ("<md5>-1") and, made without a checksum algorithm, moto gives it
        no additional checksum (the unkind case for retention's copy proofs)."""
        upload = self.s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        part = self.s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1, Body=body)
        self.s3.complete_multipart_upload(
            Bucket=bucket,
            Key=key,
            UploadId=upload,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
        )

    @staticmethod
    def _size(job: SimJob, files: list[tuple[str, bytes]], i: int) -> int | None:
        total = job.profile.checkpoint_bytes
        return modelled_sizes(job.profile.checkpoint_layout, files, total)[i] if total > 0 else None

    def restore(self, job: SimJob) -> int:
        """At Downloading: the modelled bytes under the job's CheckpointConfig.S3Uri (every page),
        recorded on the job, and how long restoring them takes in ms (0 when not modelled)."""
        cfg = job.request.get("CheckpointConfig")
        if not cfg or job.profile.checkpoint_bytes <= 0:
            return 0
        bucket, prefix = parse_s3_uri(str(cfg["S3Uri"]))
        root = f"{prefix}/" if prefix else ""
        total, dirs = 0, set()
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=root):
            for obj in page.get("Contents", ()):
                key = str(obj["Key"])
                total += self.sizes.get((bucket, key), int(obj.get("Size", 0)))
                if "/" in key[len(root) :]:
                    dirs.add(key[len(root) :].split("/", 1)[0])
        job.restored_bytes, job.restored_dirs = total, tuple(sorted(dirs))
        job.restore_ms = int(total / RESTORE_BYTES_PER_S * 1000)
        return job.restore_ms

    def write_half(self, job: SimJob) -> None:
        """At a crash: the newest checkpoint directory without its completion marker."""
        save = job._save
        if save is None:
            step = max(job.current_step(self.clock.now_ms), job._last_saved_step + 1)
            files = checkpoint_files(
                job.profile.checkpoint_layout, step, job.profile.total_steps, _sync_uri(job)
            )
            save = Save(step=step, start_ms=0, end_ms=0, files=files, reason="half")
        for i in range(save.written, len(save.files) - 1):
            rel, body = save.files[i]
            self.put_object(job, rel, body, self._size(job, save.files, i))
        job._save = None
