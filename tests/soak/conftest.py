"""Prints the soak figures (examples, steps, interleavings per second, violations) at the end."""

from __future__ import annotations

import logging
from typing import Any

import sagewarden.observability  # noqa: F401 - configures the "sagewarden" logger first
from tests.soak.stats import STATS

# the service logs every decision; thousands of histories need none of it (and run faster)
logging.getLogger("sagewarden").setLevel(logging.CRITICAL)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not STATS.examples and not STATS.crash_points and not STATS.dynamodb_examples:
        return
    tr = terminalreporter
    tr.section("sagewarden soak")
    if STATS.examples:
        rate = STATS.examples / STATS.seconds if STATS.seconds else 0.0
        tr.write_line(
            f"interleavings run: {STATS.examples} ({STATS.steps} steps, "
            f"{STATS.steps / STATS.examples:.1f} per history); {rate:.1f} interleavings/s "
            f"over {STATS.seconds:.1f} s of histories"
        )
        tr.write_line(
            f"violations: {STATS.failed} failing executions (hypothesis shrinks each failure; "
            "the shrunk counterexample is in the test's failure report)"
        )
    if STATS.dynamodb_examples:
        tr.write_line(
            f"on the DynamoDB store (moto): {STATS.dynamodb_examples} interleavings, "
            f"{STATS.dynamodb_steps} steps, {STATS.dynamodb_seconds:.1f} s, "
            f"violations: {STATS.dynamodb_failed} failing executions"
        )
    if STATS.crash_points:
        tr.write_line(f"crash points covered: {STATS.crash_points} ({', '.join(STATS.crash_scenarios)})")
        tr.write_line(
            f"crash points after which an alert went out twice (same dedupe_id: SNS had it, the store "
            f"still owed it when the process died): {STATS.crash_duplicates}"
        )
