"""`python -m drill`: what README says it prints and how it exits (docs/claims.md). A small
scenario of two runs (a host failure that is resumed, a code bug that fails fast) keeps each
drill to a few virtual hours."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import drill.__main__ as drill_cli
from drill.reports.render import TIMES, collapse
from drill.scenarios.runner import TimelineRow
from drill.scenarios.spec import shipped

pytestmark = pytest.mark.xdist_group("drill_cli")

BUG = {"name": "bug", "submit_at_min": 0, "instance_type": "ml.p4d.24xlarge", "instance_count": 1, "profile": {"total_steps": 600}}  # fmt: skip
BUG_FAULT = {
    "kind": "algorithm_error",
    "run": "bug",
    "attempt": 1,
    "after_training_min": 0.5,
    "log_lines": ["ModuleNotFoundError: No module named 'flash_attn'"],
}
LLAMA = {
    "name": "llama",
    "submit_at_min": 1,
    "instance_type": "ml.p4d.24xlarge",
    "instance_count": 2,
    "profile": {"total_steps": 900, "steps_per_minute": 10, "checkpoint_every_steps": 300},
}
LLAMA_FAULT = {"kind": "hardware", "run": "llama", "attempt": 1, "after_training_min": 45, "host": 2}


def scenario(
    tmp_path: Path, runs: list[dict[str, Any]], faults: list[dict[str, Any]], expect: dict[str, Any]
) -> str:
    path = tmp_path / "small.json"
    path.write_text(
        json.dumps(
            {"name": "small", "seed": 3, "max_days": 1, "runs": runs, "faults": faults, "expect": expect}
        ),
        encoding="utf-8",
    )
    return str(path)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> str:
    return scenario(
        tmp_path_factory.mktemp("drill"),
        [BUG, LLAMA],
        [BUG_FAULT, LLAMA_FAULT],
        {"bug": {"status": "FAILED"}, "llama": {"status": "SUCCEEDED", "attempts": 2}},
    )


def drill(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = drill_cli.main(argv)
    return code, capsys.readouterr().out


@pytest.mark.claim("The demo exits non-zero if an invariant or an expectation fails.")
@pytest.mark.claim("A failed invariant or `expect` exits 1.")
def test_drill_exits_1_when_an_expectation_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wrong = scenario(tmp_path, [BUG], [BUG_FAULT], {"bug": {"status": "SUCCEEDED"}})
    code, out = drill([wrong], capsys)

    assert code == 1
    assert "VIOLATIONS:" in out and "bug" in out.split("VIOLATIONS:")[1]

    right = scenario(tmp_path, [BUG], [BUG_FAULT], {"bug": {"status": "FAILED", "attempts": 1}})
    assert drill([right], capsys)[0] == 0


def test_drill_prints_a_timeline_and_a_summary_per_run_and_fault(
    two_runs: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = drill([two_runs], capsys)

    assert code == 0, out
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("virtual time"))
    assert lines[head].split() == ["virtual", "time", "run", "kind", "what", "happened"]
    rows = [line for line in lines[head + 2 :] if re.match(r" *\d+d \d\d:\d\d:\d\d ", line)]
    assert {row.split()[2] for row in rows} == {"bug", "llama"}
    assert {row.split()[3] for row in rows} >= {"event", "decision", "action", "FAULT"}
    # a summary per run: status, attempts, restarts by class, GPU-hours lost, cost, resumed-from step
    runs = out.split("\nRuns\n")[1]
    assert re.search(r"\nllama +SUCCEEDED +2 .*INFRASTRUCTURE 1 .*fresh → 300", runs)
    assert re.search(r"\nbug +FAILED +1 ", runs)
    # the faults, how each was classed, how long to act and to train again, and GPU-hours lost
    faults = out.split("\nFaults:")[1]
    assert re.search(
        r"llama +hardware on algo-2 +INFRASTRUCTURE +attempt 2 from step 300 +[\d.]+ min +[\d.]+ min", faults
    )
    assert re.search(r"bug +algorithm_error on algo-1 +USER_ERROR +run FAILED", faults)
    lost = out.split("GPU-hours lost per fault")[1]
    assert re.search(r"llama +hardware on algo-2 +16 +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+", lost)


def test_drill_timeline_collapses_repeated_rows_as_times_n() -> None:
    waits = [TimelineRow(i * 60_000, "r", "decision", "quota wait: retry in 2 min") for i in range(5)]
    other = TimelineRow(9 * 60_000, "r", "decision", "attempt 1 accepted")

    lines = collapse([(row, row.text) for row in [*waits, other]])

    assert [(line.text, line.repeats) for line in lines] == [
        ("quota wait: retry in 2 min", 5),
        ("attempt 1 accepted", 1),
    ]
    assert TIMES == "\N{MULTIPLICATION SIGN}"


def test_drill_verbose_adds_the_raw_events_and_full_job_names(
    two_runs: str, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = drill([two_runs], capsys)[1]
    verbose = drill([two_runs, "--verbose"], capsys)[1]

    def timeline(out: str) -> list[str]:
        return [line for line in out.split("\nRuns\n")[0].splitlines() if re.match(r" *\d+d \d\d:", line)]

    # the sweep's routine look-ups are not audited, so no timeline has them; --verbose adds the
    # events each decision repeats (the submit, each accepted launch) and names jobs in full
    assert len(timeline(verbose)) > len(timeline(plain))
    accepted = [line for line in timeline(verbose) if "CreateTrainingJob accepted" in line]
    assert len(accepted) == 3 and not any("CreateTrainingJob accepted" in line for line in timeline(plain))
    full_name = re.compile(r"\bsw-llama-[0-9a-z]{26}-a001\b", re.IGNORECASE)
    assert full_name.search(verbose) and not full_name.search("\n".join(timeline(plain)))
    assert "job a001" in "\n".join(timeline(plain))


@pytest.mark.claim(
    "The JSON summary (`--json`) has, per run: final status, outcome, attempts (instances, resumed-from step, class, hang signals, SageMaker state, ISO times), restarts by class, segments, last checkpoint step, time per phase (`*_s`), GPU-hours lost, estimated cost and decisions"
)
@pytest.mark.claim(
    "Per fault it has its classification, GPU-hours lost, `to_action_s` (fault to the supervisor's action) and `to_healthy_replacement_s` (fault to a replacement attempt in Training)."
)
@pytest.mark.claim("Times are ISO 8601, durations seconds.")
def test_drill_json_summary_has_the_documented_fields(
    two_runs: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = drill([two_runs, "--json"], capsys)

    assert code == 0
    summary = json.loads(out)
    run = summary["runs"]["llama"]
    assert {
        "status",
        "outcome",
        "attempts",
        "restarts_by_class",
        "segments",
        "last_checkpoint_step",
        "time_s",
        "gpu_hours_lost",
        "estimated_cost_usd",
        "decisions",
    } <= set(run)
    first, second = run["attempts"]
    assert {
        "instances",
        "resumed_from_step",
        "end_class",
        "hang_signals",
        "sagemaker",
        "requested_at",
    } <= set(first)
    assert second["resumed_from_step"] == 300 and first["end_class"] == "INFRASTRUCTURE"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", first["ended_at"])  # ISO 8601
    assert all(key.endswith("_s") for key in run["time_s"])  # durations in seconds
    (fault,) = [f for f in summary["faults"] if f["run"] == "llama"]
    assert fault["classified_as"] == "INFRASTRUCTURE" and fault["gpu_hours_lost"]["total"] > 0
    assert 0 <= fault["to_action_s"] < fault["to_healthy_replacement_s"]  # 0: a sweep due at that instant


def test_drill_help_lists_the_shipped_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        drill_cli.main(["--help"])

    assert done.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    listed = out.split("shipped scenarios:")[1]
    assert all(name in listed for name in shipped())
