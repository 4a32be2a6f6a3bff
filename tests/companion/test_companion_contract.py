"""The companion prints what the supervisor's parsers read today, and nothing they misread.

A real training loop runs with the companion in a subprocess (fake nvidia-smi: this machine has
no GPU), and its output is fed, as CloudWatch Logs would hand it over, to the supervisor's own
parsers: the fingerprint (domain/hosts/bad_hosts.py), the step lines (domain/hosts/stragglers.py), the phase
marker (domain/hangs/cadence.py), and the log filter phrases the sweep reads them with.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from sagewarden.adapters.cloudwatch_logs_reader import PHASE_PATTERN
from sagewarden.domain.hangs import cadence
from sagewarden.domain.hosts import bad_hosts as hosts
from sagewarden.domain.hosts import stragglers
from sagewarden.domain.vocabulary.classifier.signatures import INFRA_LOG_SIGNATURES
from tests.companion.processes import SERIALS, Child, interpreters, loop

STALL_AFTER = 12


def as_read(lines: list[str], host: str = "algo-3") -> list[str]:
    """Lines as the supervisor's log reader hands them over: `[algo-<n>] <message>`."""
    return [f"[{host}] {line}" for line in lines]


def phrase(pattern: str) -> str:
    """A CloudWatch Logs filter pattern of one quoted phrase -> the phrase."""
    assert pattern.startswith('"') and pattern.endswith('"')
    return pattern[1:-1]


@pytest.fixture(params=interpreters())
def stalled_run(
    request: pytest.FixtureRequest, child_env: dict[str, str], spawn: Callable[..., Child]
) -> list[str]:
    """A run of 12 steps of 20 ms (a line each), a declared save, then a stall: its output up to
    the end of the stall's evidence block."""
    child = spawn(
        loop(
            request.param,
            "--steps",
            "40",
            "--total",
            "40",
            "--phase-after",
            "6",
            "--phase-s",
            "1.5",
            "--stall-after",
            str(STALL_AFTER),
        ),
        child_env,
    )
    return child.wait_for(lambda line: line.startswith("[sagewarden] evidence end"))


def test_the_companions_fingerprint_is_the_supervisors_fingerprint_of_the_host(
    stalled_run: list[str],
) -> None:
    found = hosts.fingerprints(as_read(stalled_run))

    usable = sorted(s for s in SERIALS if s[0].isdigit())
    assert found == {"algo-3": ",".join(usable)}  # the GPU without a serial ([N/A]) is left out
    assert sum("fingerprint=" in line for line in stalled_run) == 1  # once per host


def test_the_companions_step_lines_are_the_supervisors_samples(stalled_run: list[str]) -> None:
    samples = stragglers.parse(as_read(stalled_run))

    assert [s.step for s in samples] == list(range(1, STALL_AFTER + 1))
    assert {s.host for s in samples} == {"algo-3"}
    assert all(s.total == 40 for s in samples)
    assert all(s.compute_ms is not None and 0 < s.compute_ms <= s.step_ms for s in samples)
    # the 20 ms sleep is in the step but outside `job.compute()`
    assert all(s.step_ms >= 15 for s in samples)


def test_the_companions_phase_marker_keeps_its_minutes_active_for_the_supervisor(
    stalled_run: list[str],
) -> None:
    markers = [line for line in stalled_run if cadence.phase_cover(line, 0)]

    assert markers == [cadence.phase_marker("save", 1)]
    assert len(cadence.phase_cover(markers[0], 0)) == 1
    # the phase's end is said too, and the supervisor does not read it as another phase
    ends = [line for line in stalled_run if line.startswith("[sagewarden] phase_end=save ")]
    assert len(ends) == 1 and not cadence.phase_cover(ends[0], 0)


def test_the_companions_own_lines_match_no_contract_parser(stalled_run: list[str]) -> None:
    own = [
        line
        for line in stalled_run
        if re.match(r"\[sagewarden\] (?:(?:companion|heartbeat|evidence|sigterm|launcher) |phase_end=)", line)
        or "fingerprint_unavailable=" in line
    ]
    kinds = {line.split()[1].split("=")[0] for line in own}

    assert {"companion", "heartbeat", "phase_end", "evidence"} <= kinds
    assert hosts.fingerprints(as_read(own)) == {}
    assert stragglers.parse(as_read(own)) == []
    assert not any(cadence.phase_cover(line, 0) for line in own)
    # the sweep's FilterLogEvents phrases: fingerprint and step reads must not fill up with them
    for pattern in (hosts.FINGERPRINT_PATTERN, stragglers.STEP_PATTERN, PHASE_PATTERN):
        assert not [line for line in own if phrase(pattern) in line], pattern


def test_a_stalls_evidence_reads_as_no_fault_to_the_supervisors_log_classifier(
    stalled_run: list[str],
) -> None:
    """Stacks and GPU readings in the log tail must not single out the host or read as an NCCL or
    GPU fault when the job later ends."""
    block = stalled_run[next(i for i, line in enumerate(stalled_run) if " evidence begin " in line) :]
    text = [" ".join(line.split()).casefold() for line in block]

    assert hosts.hosts_in_tail(as_read(block), 4) == ()
    assert not [
        (label, line) for pattern, label in INFRA_LOG_SIGNATURES for line in text if re.search(pattern, line)
    ]


def test_without_nvidia_smi_the_host_says_so_and_gets_no_fingerprint(
    child_env: dict[str, str], spawn: Callable[..., Child], fake_bin: Path
) -> None:
    (fake_bin / "nvidia-smi").unlink()
    child = spawn(loop(interpreters()[0].values[0], "--steps", "2"), child_env)

    assert child.wait() == 0
    lines = child.output()
    assert "[sagewarden] host=3 fingerprint_unavailable=no-nvidia-smi" in lines
    assert hosts.fingerprints(as_read(lines)) == {}
