"""A scenario's `expect` checked against a drill's run summaries (drill.reports.report.check_expectations)."""

from __future__ import annotations

from typing import Any

import pytest

from drill.reports.report import check_expectations


def attempt(
    number: int, end_class: str | None, *, signals: tuple[str, ...] = (), hang: bool = False
) -> dict[str, Any]:
    return {
        "number": number,
        "end_class": end_class,
        "resumed_from_step": None if number == 1 else 300,
        "hang_signals": list(signals),
        "stop_intent": "hang" if hang else None,
    }


def runs(*attempts: dict[str, Any], restarts_by_class: dict[str, int] | None = None) -> dict[str, Any]:
    return {
        "r": {
            "status": "SUCCEEDED",
            "attempts": list(attempts),
            "restarts": len(attempts) - 1,
            "restarts_by_class": restarts_by_class or {},
            "gpu_hours_lost": 12.5,
        }
    }


HUNG_ON_GPU = runs(
    attempt(1, "SUPERVISOR_STOP", signals=("gpu_lone_idle",), hang=True),
    attempt(2, "SUCCEEDED"),
    restarts_by_class={"HANG": 1},
)


def test_expect_hang_caught_by_one_of_the_accepted_signals_is_met() -> None:
    expect = {"r": {"status": "SUCCEEDED", "attempts": 2, "hangs_detected_by": ["gpu_idle", "gpu_lone_idle"]}}
    assert check_expectations(expect, HUNG_ON_GPU, {}) == []


@pytest.mark.claim(
    "`expect` per run: `status`, `attempts`, `restarts`, `restarts_by_class`, `end_classes`, `resumed_from_steps`, `max_gpu_hours_lost`, `alerts_include`, and `hangs_detected_by`"
)
def test_expect_hang_caught_by_another_signal_is_reported() -> None:
    expect = {"r": {"hangs_detected_by": ["log_silence"]}}
    assert check_expectations(expect, HUNG_ON_GPU, {}) == [
        "expect: r attempt 1 was stopped as hung on gpu_lone_idle, expected log_silence"
    ]


@pytest.mark.claim(
    "`expect` per run: `status`, `attempts`, `restarts`, `restarts_by_class`, `end_classes`, `resumed_from_steps`, `max_gpu_hours_lost`, `alerts_include`, and `hangs_detected_by`"
)
def test_expect_hang_that_was_never_detected_is_reported() -> None:
    crashed = runs(
        attempt(1, "INFRASTRUCTURE"), attempt(2, "SUCCEEDED"), restarts_by_class={"INFRASTRUCTURE": 1}
    )
    assert check_expectations(
        {"r": {"hangs_detected_by": ["log_silence", "progress_stalled"]}}, crashed, {}
    ) == ["expect: r had no attempt stopped as hung (expected one caught by log_silence or progress_stalled)"]


@pytest.mark.claim(
    "`expect` per run: `status`, `attempts`, `restarts`, `restarts_by_class`, `end_classes`, `resumed_from_steps`, `max_gpu_hours_lost`, `alerts_include`, and `hangs_detected_by`"
)
def test_expect_other_fields_report_actual_and_expected() -> None:
    expect = {
        "r": {
            "attempts": 3,
            "restarts_by_class": {"HANG": 2},
            "max_gpu_hours_lost": 10,
            "alerts_include": ["hang.detected", "attempt.resumed"],
        }
    }
    assert check_expectations(expect, HUNG_ON_GPU, {"r": ["hang.detected"]}) == [
        "expect: r attempts 2, expected 3",
        "expect: r restarts_by_class HANG 1, expected HANG 2",
        "expect: r lost 12.5 GPU-hours, more than 10",
        "expect: r published no attempt.resumed alert",
    ]
