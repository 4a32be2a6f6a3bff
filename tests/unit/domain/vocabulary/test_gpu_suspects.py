"""Which hosts a hang's triage reads first: the ones the GPU metrics single out."""

from __future__ import annotations

import pytest

from sagewarden.domain.vocabulary.evidence import gpu_suspects, gpu_triage_lines


@pytest.mark.claim(
    "The hosts the GPU metrics single out (no metrics, or idle while others are not) are read first, then the rest in numeric order"
)
def test_hosts_without_metrics_then_idle_hosts_idlest_first() -> None:
    by_host = {
        "algo-1": (700.0, 690.0, 720.0),
        "algo-2": (300.0, 0.0, 12.0),  # idle now
        "algo-4": (600.0, 0.0, 0.0),  # idle now, idler
        "algo-5": (710.0, 700.0, 705.0),
    }
    # algo-3 and algo-6 reported nothing (a dead host publishes no metric)
    assert gpu_suspects(by_host, threshold=40.0, hosts=6) == ("algo-3", "algo-6", "algo-4", "algo-2")
    assert gpu_triage_lines(by_host, 40.0, 6)[-1] == "2 host(s) reported no GPU metrics in the window"


def test_no_suspect_when_every_host_looks_the_same() -> None:
    busy = {f"algo-{n}": (700.0, 690.0, 700.0) for n in range(1, 9)}
    idle = {f"algo-{n}": (0.0, 0.0, 0.0) for n in range(1, 9)}
    assert gpu_suspects(busy, 40.0, 8) == ()
    assert gpu_suspects(idle, 40.0, 8) == ()  # a whole-job hang: no host stands out
    assert gpu_suspects({}, 40.0, 8) == ()
