"""The side-by-side chart: lost GPU-hours by cause, stacked, per supervisor (matplotlib, Agg)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from benchmarks.accounting import Account
from drill.reports.history import BUCKETS

COLORS = ("#d62728", "#ff7f0e", "#1f77b4", "#7f7f7f")  # detection, stop, instance start, work lost


def write_chart(
    panels: Sequence[tuple[str, Mapping[str, Account]]], labels: Mapping[str, str], path: Path
) -> Path:
    """One panel per trace (title, accounts by supervisor key): stacked bars of the four buckets,
    the physical floor as a dashed mark on each bar. Writes a PNG and returns its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(6.2 * len(panels), 5.2), squeeze=False)
    for ax, (title, accounts) in zip(axes[0], panels, strict=True):
        keys = list(accounts)
        bottoms = [0.0] * len(keys)
        for i, bucket in enumerate(BUCKETS):
            heights = [accounts[k].bucket_gpu_hours()[i] / 1000.0 for k in keys]
            ax.bar(keys, heights, bottom=bottoms, color=COLORS[i], label=bucket, width=0.6)
            bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
        floors = [accounts[k].floor_gpu_hours() / 1000.0 for k in keys]
        ax.scatter(keys, floors, marker="_", s=900, color="black", zorder=3, label="physical floor")
        for x, total in enumerate(bottoms):
            ax.annotate(f"{total:,.0f}", (x, total), ha="center", va="bottom", fontsize=9)
        ax.set_title(title, fontsize=10)
        ax.set_ylabel("lost GPU-hours (thousands)")
        ax.set_xticks(range(len(keys)), [labels[k] for k in keys], fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path
