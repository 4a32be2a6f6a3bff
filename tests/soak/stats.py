"""Counts of the soak run, printed at the end of the pytest session (tests/soak/conftest.py)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SoakStats:
    examples: int = 0
    steps: int = 0
    seconds: float = 0.0
    failed: int = 0
    last_failure: str = ""
    dynamodb_examples: int = 0  # histories run on the DynamoDB store (moto)
    dynamodb_steps: int = 0
    dynamodb_seconds: float = 0.0
    dynamodb_failed: int = 0
    crash_points: int = 0
    crash_duplicates: int = 0  # crash points after which an alert was (allowably) published twice
    crash_scenarios: list[str] = field(default_factory=list)

    def record(self, steps: int, seconds: float, *, failed: bool = False, story: str = "") -> None:
        self.examples += 1
        self.steps += steps
        self.seconds += seconds
        if failed:
            self.failed += 1
            self.last_failure = story


STATS = SoakStats()
