"""Where the process runs: its host (`algo-<n>`), its ranks, and what the supervisor told it.

- The host: `SM_CURRENT_HOST` (set by SageMaker's training toolkit), else `current_host` in
  `/opt/ml/input/config/resourceconfig.json` (SageMaker writes it into every training container,
  "Distributed Training Configuration"); neither, and no SageMaker config at all: a local run,
  host 1. A name that is not `algo-<n>` is unknown: no host-level line is printed for it.
- The ranks: `RANK` / `LOCAL_RANK` (torchrun, accelerate, DeepSpeed), else Open MPI's
  `OMPI_COMM_WORLD_RANK` / `OMPI_COMM_WORLD_LOCAL_RANK`. Host-level lines (fingerprint, step
  lines, phase markers, heartbeat) come from local rank 0 only.
- The supervisor's variables (docs/recovery.md, *Training-script contract*): `SAGEWARDEN_ATTEMPT`,
  `SAGEWARDEN_RESUME_STEP`, `SAGEWARDEN_RESUME_DIR`, `SAGEWARDEN_CHECKPOINT_MINUTES`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

RESOURCE_CONFIG = "/opt/ml/input/config/resourceconfig.json"
LAUNCHER_DIR_ENV = "SAGEWARDEN_COMPANION_LAUNCHER_DIR"  # set by the launcher for its ranks
_ALGO = re.compile(r"^algo-(\d{1,5})$")


@dataclass(frozen=True)
class Where:
    host: int | None  # n of algo-<n>; None: unknown (no host-level line is printed)
    host_name: str | None  # as SageMaker named it, for a note when it is not algo-<n>
    rank: int | None
    local_rank: int | None
    attempt: int | None
    resume_step: int | None
    resume_dir: str | None
    checkpoint_minutes: int | None
    launcher_dir: str | None

    @property
    def prints_host_lines(self) -> bool:
        return self.host is not None and (self.local_rank or 0) == 0


def _int(value: str | None) -> int | None:
    text = (value or "").strip()
    return int(text) if text.isdigit() else None


def _current_host(env: Mapping[str, str], resource_config: str) -> tuple[str | None, bool]:
    """(the host's name, whether a SageMaker config said anything at all)."""
    if env.get("SM_CURRENT_HOST"):
        return env["SM_CURRENT_HOST"], True
    try:
        with open(resource_config, encoding="utf-8") as f:
            config = json.load(f)
    except FileNotFoundError:
        return None, False
    except (OSError, ValueError):
        return None, True  # there, but unreadable: unknown, not "a local run"
    name = config.get("current_host") if isinstance(config, dict) else None
    return (str(name) if name else None), True


def where(env: Mapping[str, str] | None = None, resource_config: str = RESOURCE_CONFIG) -> Where:
    env = os.environ if env is None else env
    name, on_sagemaker = _current_host(env, resource_config)
    match = _ALGO.match(name or "")
    host = int(match.group(1)) if match else (None if on_sagemaker else 1)
    rank = _int(env.get("RANK")) if "RANK" in env else _int(env.get("OMPI_COMM_WORLD_RANK"))
    local = (
        _int(env.get("LOCAL_RANK")) if "LOCAL_RANK" in env else _int(env.get("OMPI_COMM_WORLD_LOCAL_RANK"))
    )
    minutes = _int(env.get("SAGEWARDEN_CHECKPOINT_MINUTES"))
    return Where(
        host=host,
        host_name=name,
        rank=rank,
        local_rank=local,
        attempt=_int(env.get("SAGEWARDEN_ATTEMPT")),
        resume_step=_int(env.get("SAGEWARDEN_RESUME_STEP")),
        resume_dir=(env.get("SAGEWARDEN_RESUME_DIR") or None)
        if _int(env.get("SAGEWARDEN_RESUME_STEP")) is not None
        else None,
        checkpoint_minutes=minutes if minutes and minutes > 0 else None,
        launcher_dir=env.get(LAUNCHER_DIR_ENV) or None,
    )
