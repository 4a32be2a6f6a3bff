"""The supervisor's ETTR against the simulator's ground truth (drill summary: per run `ettr`, the
supervisor's, and `ground_truth`, the time its jobs spent training steps none had trained before).

Target (issue 20): within +-1 percentage point on every shipped scenario; every run of every one is
within -0.22 to +0.80 points. What made it hold (it read 0 to 12 points high before): a save's write
time counts the time before its first object landed in S3 (domain/vocabulary/layouts.py,
`save_seconds`), a save the supervisor measured counts at its own length (a 35-minute save is not
the median's 2), a slow host's held-back work is the straggler bucket (domain/hosts/stragglers.py,
`slowdown_ms`), work a replacement stopped minutes in did not redo is carried to the next attempt,
and a log-silence hang dates from the job's newest log line, not from its alarm (domain/hangs/confirm.py,
`hang_onset_ms`: 2 minutes of the 25-minute `selftest` run, +5.3 points before)."""

from __future__ import annotations

import pytest

from drill.scenarios.spec import shipped
from tests.scenarios.helpers import run_by_name


@pytest.mark.claim("within 1 point on every run of every shipped scenario")
@pytest.mark.parametrize("name", shipped())
def test_goodput_ettr_within_1_point_of_ground_truth(name, capsys):
    s = run_by_name(name, capsys)
    found = {
        run: r["ettr"]["percent"] - r["ground_truth"]["ettr_percent"]
        for run, r in s["runs"].items()
        if r["ground_truth"]["ettr_percent"] is not None
    }
    assert found and all(abs(g) <= 1.0 for g in found.values()), found
