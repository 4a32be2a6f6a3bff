"""Where a process runs and what the supervisor told it: the host from SageMaker's
`SM_CURRENT_HOST` or `resourceconfig.json`, the ranks from torchrun's or Open MPI's variables,
the contract's SAGEWARDEN_* variables. Unknown stays unknown (no host-level line)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from sagewarden_companion.env import where

from sagewarden.domain.vocabulary.launch import build_request
from tests.builders import ckpt, training_run


def config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "resourceconfig.json"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("env", "resource_config", "host"),
    [
        pytest.param({"SM_CURRENT_HOST": "algo-12"}, None, 12, id="the toolkit's SM_CURRENT_HOST"),
        pytest.param(
            {},
            json.dumps({"current_host": "algo-4", "hosts": ["algo-1", "algo-4"]}),
            4,
            id="resourceconfig.json's current_host (a container without the toolkit)",
        ),
        pytest.param({}, "{not json", None, id="a config that cannot be read: unknown, not host 1"),
        pytest.param({}, json.dumps({"current_host": "worker-a"}), None, id="a name that is not algo-<n>"),
        pytest.param({}, None, 1, id="no SageMaker config at all: a local run, host 1"),
    ],
)
def test_the_host_is_sagemakers_name_for_it_or_unknown(
    tmp_path: Path, env: dict[str, str], resource_config: str | None, host: int | None
) -> None:
    path = config(tmp_path, resource_config) if resource_config is not None else str(tmp_path / "absent.json")

    found = where(env, path)

    assert found.host == host
    assert found.prints_host_lines == (host is not None)


def test_only_local_rank_0_prints_the_hosts_lines(tmp_path: Path) -> None:
    absent = str(tmp_path / "absent.json")
    torchrun = where({"SM_CURRENT_HOST": "algo-2", "RANK": "9", "LOCAL_RANK": "1"}, absent)
    mpi = where(
        {"SM_CURRENT_HOST": "algo-2", "OMPI_COMM_WORLD_RANK": "8", "OMPI_COMM_WORLD_LOCAL_RANK": "0"}, absent
    )

    assert (torchrun.rank, torchrun.local_rank, torchrun.prints_host_lines) == (9, 1, False)
    assert (mpi.rank, mpi.local_rank, mpi.prints_host_lines) == (8, 0, True)


def test_the_supervisors_variables_are_read_as_the_launch_sets_them(tmp_path: Path) -> None:
    """The Environment of a real launch request (domain/vocabulary/launch.py), resumed and fresh."""
    absent = str(tmp_path / "absent.json")
    resumed_run, fresh_run = training_run(resume=ckpt(1200)), training_run()
    assert resumed_run.current is not None and fresh_run.current is not None
    attempt = dataclasses.replace(resumed_run.current, checkpoint_minutes=58)
    resumed_env = build_request(resumed_run, attempt)["Environment"]
    fresh_env = build_request(fresh_run, fresh_run.current)["Environment"]

    resumed, fresh = where(resumed_env, absent), where(fresh_env, absent)

    assert resumed.resume_step == 1200 and resumed.attempt == 1
    assert resumed.resume_dir == resumed_env["SAGEWARDEN_RESUME_DIR"] and resumed.resume_dir.endswith(
        "/checkpoint-1200"
    )
    assert resumed.checkpoint_minutes == 58
    assert (fresh.resume_step, fresh.resume_dir, fresh.checkpoint_minutes) == (None, None, None)
