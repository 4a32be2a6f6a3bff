"""benchmarks/retention.py: the table of what checkpoint retention saves per restart on a 70B job."""

from __future__ import annotations

import pytest

from benchmarks import retention
from drill.sim import checkpoints as sim


@pytest.mark.claim("that is 23.5 TB after a day and 706 TB after a month")
def test_bench_retention_sizes_a_70b_checkpoint_at_14_bytes_per_parameter() -> None:
    assert retention.checkpoint_bytes() == pytest.approx(980e9)


def test_bench_retention_uses_the_simulators_restore_throughput(monkeypatch: pytest.MonkeyPatch) -> None:
    assert retention.download_min(sim.RESTORE_BYTES_PER_S * 60) == pytest.approx(1.0)
    monkeypatch.setattr(retention, "RESTORE_BYTES_PER_S", sim.RESTORE_BYTES_PER_S * 2)
    assert retention.download_min(sim.RESTORE_BYTES_PER_S * 60) == pytest.approx(0.5)


@pytest.mark.claim("that is 23.5 TB after a day and 706 TB after a month")
def test_bench_retention_rows_hold_every_hourly_checkpoint_without_retention_and_two_with() -> None:
    day, week, month = retention.rows()
    assert [r.held for r in (day, week, month)] == [24, 168, 720]
    assert month.synced_bytes == pytest.approx(720 * 980e9)
    assert [r.kept_bytes for r in (day, week, month)] == [pytest.approx(2 * 980e9)] * 3
    assert day.kept_download_min == pytest.approx(2 * 980e9 / 1.25e9 / 60)  # 26 min, as in the drill
    assert month.download_min == pytest.approx(720 * 980e9 / 1.25e9 / 60)
    assert month.saved_min == pytest.approx(month.download_min - month.kept_download_min)


def test_bench_retention_table_renders_one_row_per_horizon() -> None:
    lines = retention.table()
    rows = [line for line in lines if line.startswith("| ") and "day" in line]
    assert len(rows) == 3 and lines[0] == "## Checkpoint retention: what a restart downloads"
    assert "| 1 day | 24 (23.52 TB) | 5.2 h |" in rows[0] and "| 26 min (1.96 TB;" in rows[0]
    assert "| 30 days | 720 (705.60 TB) | 156.8 h |" in rows[2]
