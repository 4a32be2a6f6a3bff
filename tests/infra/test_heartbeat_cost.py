"""scripts/heartbeat_cost.py: the price arithmetic behind the README's heartbeat-cost figures."""

from __future__ import annotations

import sys

import pytest

from infra import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "scripts"))
import heartbeat_cost


@pytest.mark.claim("10 events (~1 KB) per batch")
@pytest.mark.claim("so it is always billed Lambda's 1 ms minimum")
@pytest.mark.claim(
    "other teams' jobs writing 100 lines per second in total are about 260 M events a month: between $10 and $100 a month, depending on batching"
)
def test_heartbeat_cost_prices_a_million_foreign_events(capsys: pytest.CaptureFixture[str]) -> None:
    assert heartbeat_cost.main(["--events-per-batch", "10", "--runs", "50"]) == 0

    out = capsys.readouterr().out
    assert "per million foreign log events = 100,000 invocations" in out
    assert "Lambda requests     $0.0200" in out  # 100,000 x $0.20 per million
    # billed at Lambda's 1 ms minimum at 256 MB: 100,000 x 0.001 s x 0.25 GB x $0.0000133334
    assert "Lambda duration     $0.0003" in out
    # the function's own START/END/REPORT lines: 100,000 x 378 B at $0.50/GB
    assert heartbeat_cost.PLATFORM_LOG_BYTES == 378
    assert "own log lines (START/END/REPORT) $0.0189" in out


@pytest.mark.claim("1 event per batch (worst case)")
@pytest.mark.claim("so it is always billed Lambda's 1 ms minimum")
@pytest.mark.claim("at the default 5 % sampling traces would add about $0.25 per million invocations")
@pytest.mark.claim(
    "other teams' jobs writing 100 lines per second in total are about 260 M events a month: between $10 and $100 a month, depending on batching"
)
def test_heartbeat_cost_of_one_event_per_batch_is_the_worst_case_row(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """docs/hang-detection.md's table: 1 event per batch is a million invocations per million
    foreign events, about $0.39; X-Ray at 5 % sampling would add about $0.25."""
    assert heartbeat_cost.main(["--events-per-batch", "1", "--runs", "50"]) == 0

    out = capsys.readouterr().out
    assert "per million foreign log events = 1,000,000 invocations" in out
    assert "Lambda requests     $0.2000" in out and "Lambda duration     $0.0033" in out
    assert "own log lines (START/END/REPORT) $0.1890" in out
    assert "total               $0.3923" in out
    assert "X-Ray traces        $0.2500 if it were traced" in out


@pytest.mark.claim(
    "the heartbeat function, which drops events of jobs without the deployment's prefix at its first check and publishes nothing for them"
)
def test_heartbeat_cost_event_is_a_foreign_subscription_delivery_the_handler_drops() -> None:
    from sagewarden.handlers.on_training_logs import heartbeat_records

    foreign = heartbeat_cost.subscription_event("someone-elses-job", 10, 100)
    own = heartbeat_cost.subscription_event("sw-run-01KE5Q86000DNQ47GXEV9VZMPH-a001", 10, 100)

    assert heartbeat_records(foreign, "sw") == []
    assert len(heartbeat_records(own, "sw")) == 1  # ten events within one minute: one record
