"""What checkpoint retention saves per restart on a 70B-parameter job (`make bench`).

Deterministic arithmetic, no drill run: SageMaker copies everything under CheckpointConfig.S3Uri
to every instance when a job starts or resumes, so a restart downloads every checkpoint the synced
prefix holds. Sizes: 2 B/param bf16 weights + 12 B/param fp32 Adam state (master weights, m, v).
Download time uses the simulator's own throughput model (``drill.sim.checkpoints``), the figure the
checkpoint-retention drill scenario runs on.
"""

from __future__ import annotations

from dataclasses import dataclass

from drill.sim.checkpoints import RESTORE_BYTES_PER_S

PARAMS = 70e9
BYTES_PER_PARAM = 2 + 12  # bf16 weights + fp32 master, m, v
INSTANCES = 32  # 256 H100s (32 x ml.p5.48xlarge): every instance downloads the whole prefix
KEEP = 2
DAYS = (1, 7, 30)
CHECKPOINTS_PER_DAY = 24  # hourly


@dataclass(frozen=True)
class Row:
    days: int
    held: int  # checkpoints in the synced prefix without retention
    synced_bytes: float
    download_min: float
    kept_bytes: float
    kept_download_min: float

    @property
    def saved_min(self) -> float:
        return self.download_min - self.kept_download_min


def checkpoint_bytes(params: float = PARAMS) -> float:
    return params * BYTES_PER_PARAM


def download_min(nbytes: float) -> float:
    """Minutes one instance takes to restore ``nbytes`` (instances download in parallel)."""
    return nbytes / RESTORE_BYTES_PER_S / 60


def rows(params: float = PARAMS, keep: int = KEEP) -> list[Row]:
    size = checkpoint_bytes(params)
    out = []
    for days in DAYS:
        held = days * CHECKPOINTS_PER_DAY
        kept = min(keep, held) * size
        out.append(Row(days, held, held * size, download_min(held * size), kept, download_min(kept)))
    return out


def _tb(nbytes: float) -> str:
    return f"{nbytes / 1e12:,.2f} TB"


def _duration(minutes: float) -> str:
    return f"{minutes:,.0f} min" if minutes < 120 else f"{minutes / 60:,.1f} h"


def table(params: float = PARAMS, keep: int = KEEP) -> list[str]:
    size = checkpoint_bytes(params)
    lines = [
        "## Checkpoint retention: what a restart downloads",
        "",
        f"A {params / 1e9:.0f}B-parameter job checkpointing every hour: {size / 1e9:,.0f} GB per checkpoint "
        f"({BYTES_PER_PARAM} B/param: bf16 weights + fp32 Adam master weights, m and v). SageMaker copies the "
        f"whole synced prefix to every instance at every start; at the simulator's "
        f"{RESTORE_BYTES_PER_S / 1e9:g} GB/s per instance (an assumption on the unkind side, "
        f"docs/fidelity.md; the instances download in parallel). Without retention the prefix holds every "
        f"checkpoint; with `checkpoint_keep: {keep}` it holds the {keep} newest. S3 reads per restart are for "
        f"{INSTANCES} instances ({INSTANCES * 8} GPUs).",
        "",
        "| run so far | checkpoints held | download per restart | S3 reads per restart | "
        f"with keep={keep} | saved per restart |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows(params, keep):
        lines.append(
            f"| {r.days} day{'s' if r.days > 1 else ''} | {r.held} ({_tb(r.synced_bytes)}) | "
            f"{_duration(r.download_min)} | {_tb(r.synced_bytes * INSTANCES)} | "
            f"{_duration(r.kept_download_min)} ({_tb(r.kept_bytes)}; {_tb(r.kept_bytes * INSTANCES)} read) | "
            f"{_duration(r.saved_min)} |"
        )
    return lines
