"""A picture of a drill: each run's attempts on one time axis (PNG, SVG or HTML), with matplotlib's
object API; every element carries a gid for the tests. See docs/drill.md (*What the drill prints*)."""

from __future__ import annotations

import html
import io
from pathlib import Path
from typing import Any

from matplotlib.artist import Artist
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from drill.reports.render import clock, summary
from drill.reports.report import from_iso
from drill.scenarios.runner import DrillResult
from drill.sim.texts import HANG_PHASES, START_FAULTS

PHASES: dict[str, tuple[str, str]] = {  # phase -> (colour, legend label)
    "starting": ("#9ecae1", "starting (instances, download)"),
    "pending": ("#fdd0a2", "pending (no capacity)"),
    "training": ("#41ab5d", "training"),
    "hung": ("#de2d26", "hung (no progress)"),
    "ending": ("#636363", "stopping / uploading"),
}
WAIT_COLOUR = "#d9d9d9"
_STATUS_PHASE = {
    "Starting": "starting",
    "Downloading": "starting",
    "Pending": "pending",
    "Training": "training",
    "Uploading": "ending",
    "Stopping": "ending",
}
BAR_H = 0.42


def _segments(job: Any, end_ms: int) -> list[tuple[int, int, str]]:
    """(start ms, end ms, phase) of one job, Training split into training and hung."""
    out: list[tuple[int, int, str]] = []
    for tr in job.transitions:
        phase = _STATUS_PHASE.get(tr["Status"])
        start, stop = tr["StartTime"], tr["EndTime"] if tr["EndTime"] is not None else end_ms
        if phase is None or stop <= start:
            continue
        if phase != "training":
            out.append((start, stop, phase))
            continue
        cursor = start
        for p_start, p_end, kind in job.phase_intervals:
            p_end = p_end if p_end is not None else end_ms
            if kind not in HANG_PHASES or p_end <= start or p_start >= stop:
                continue
            if p_start > cursor:
                out.append((cursor, p_start, "training"))
            out.append((max(p_start, start), min(p_end, stop), "hung"))
            cursor = min(p_end, stop)
        if cursor < stop:
            out.append((cursor, stop, "training"))
    return out


def _gaps(spans: list[tuple[int, int]], start: int, end: int) -> list[tuple[int, int]]:
    gaps, cursor = [], start
    for a, b in sorted(spans):
        if a > cursor:
            gaps.append((cursor, a))
        cursor = max(cursor, b)
    if end > cursor:
        gaps.append((cursor, end))
    return [(a, b) for a, b in gaps if b - a >= 60_000]  # a minute or more: event delivery is not a wait


def _wait_reason(result: DrillResult, run: str, a: int, b: int) -> str:
    for row in result.timeline:
        if row.run == run and a <= row.at_ms <= b and row.kind == "decision" and "waiting (" in row.text:
            return row.text.split("waiting (", 1)[1].split(")", 1)[0] + " wait"
    return "waiting"


def figure(result: DrillResult) -> Figure:
    """The drill's runs on a time axis (see the module docstring)."""
    runs = list(result.runs)
    start, end = result.start_ms, result.end_ms
    span_h = max((end - start) / 3_600_000, 1 / 60)
    unit, per = ("days", 86_400_000) if span_h > 72 else ("hours", 3_600_000)

    def x(ms: float) -> float:
        return (ms - start) / per

    fig = Figure(figsize=(13, 1.6 + 1.15 * max(len(runs), 1)), layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(
        f"sagewarden drill '{result.scenario}' (seed {result.seed}): attempts, faults, detections, resumes"
    )
    ax.set_xlabel(f"virtual time since the drill started ({unit})")
    ax.set_ylim(len(runs) - 0.4, -0.8)
    ax.set_yticks(range(len(runs)), [f"{name}\n{result.runs[name]['status']}" for name in runs])
    ax.set_xlim(0, x(end) * 1.08)  # room for the last label
    ax.grid(axis="x", color="#eeeeee")
    ax.set_axisbelow(True)
    jobs_by_run: dict[str, list[Any]] = {}
    for job in result.jobs:
        if job.run_name in result.runs:
            jobs_by_run.setdefault(job.run_name, []).append(job)

    faulted = {f["job"] for f in result.faults}
    for lane, name in enumerate(runs):
        run = result.runs[name]
        jobs = sorted(jobs_by_run.get(name, []), key=lambda j: j.created_ms)
        submitted = from_iso(run["submitted_at"]) or start
        run_end = from_iso(run["ended_at"]) or end
        spans = []
        attempt_of = {a["job_name"]: a for a in run["attempts"]}
        for job in jobs:
            job_end = job.ended_ms if job.ended_ms is not None else end
            spans.append((job.created_ms, job_end))
            attempt = attempt_of.get(job.name)
            number = attempt["number"] if attempt else job.attempt
            for a, b, phase in _segments(job, end):
                bars = ax.barh(
                    lane, x(b) - x(a), left=x(a), height=BAR_H, color=PHASES[phase][0], linewidth=0
                )
                for bar in bars:
                    bar.set_gid(f"attempt/{name}/{number}/{phase}")
            ax.text(
                x(job.created_ms),
                lane + BAR_H / 2 + 0.05,
                f"a{number}",
                fontsize=7,
                va="top",
                ha="left",
                color="#333333",
                gid=f"label/{name}/{number}",
            )
            if (
                attempt
                and attempt["end_class"] not in (None, "SUCCEEDED")
                and job.name not in faulted
                and job.ended_ms is not None
            ):
                # an ending no fault explains (MaxRuntime, a cancel, a spot reclaim): say which
                ax.annotate(
                    attempt["end_class"],
                    (x(job.ended_ms), lane + BAR_H / 2 + 0.2),
                    fontsize=7,
                    color="#555555",
                    ha="right",
                    va="top",
                )
            if attempt and number and number > 1 and job.training_started_ms is not None:
                step = attempt["resumed_from_step"]
                text = f"resumed from {step}" if step is not None else "fresh start"
                ax.plot(
                    x(job.training_started_ms),
                    lane,
                    marker=">",
                    color="#08519c",
                    ms=7,
                    gid=f"resume/{name}/{number}",
                )
                ax.annotate(
                    text,
                    (x(job.training_started_ms), lane),
                    xytext=(4, 9 if number % 2 else -16),  # alternate: close resumes do not overlap
                    textcoords="offset points",
                    fontsize=7,
                    color="#08519c",
                )
        for i, (a, b) in enumerate(_gaps(spans, submitted, run_end)):
            bars = ax.barh(
                lane, x(b) - x(a), left=x(a), height=BAR_H * 0.45, color=WAIT_COLOUR, hatch="///", linewidth=0
            )
            for bar in bars:
                bar.set_gid(f"wait/{name}/{i}")
            if (b - a) / (end - start or 1) > 0.04:
                ax.text(
                    x((a + b) / 2),
                    lane,
                    _wait_reason(result, name, a, b),
                    fontsize=7,
                    ha="center",
                    va="center",
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 1},
                )
        ax.plot(x(submitted), lane, marker="|", color="black", ms=14, gid=f"submitted/{name}")

    faults_by_run: dict[str, int] = {}
    for f in result.faults:
        name = f["run"]
        if name not in result.runs:
            continue
        lane = runs.index(name)
        i = faults_by_run.get(name, 0)
        faults_by_run[name] = i + 1
        up = -(BAR_H / 2 + 0.12 + 0.16 * (i % 2))  # alternate heights so neighbours do not overlap
        ax.plot(x(f["at_ms"]), lane, marker="X", color="#a50f15", ms=9, mec="white", gid=f"fault/{name}/{i}")
        where = "" if f["kind"] in START_FAULTS else f" (algo-{f['host']})"
        ax.annotate(
            f["kind"] + where,
            (x(f["at_ms"]), lane + up),
            fontsize=7,
            color="#a50f15",
            ha="center",
            va="bottom",
        )
        if f["to_action_s"] is not None:
            acted = f["at_ms"] + f["to_action_s"] * 1000
            ax.plot(x(acted), lane, marker="v", color="black", ms=7, gid=f"action/{name}/{i}")
            label = f["classified_as"]
            if f["to_action_s"] >= 60:
                label += f", acted after {f['to_action_s'] / 60:.0f} min"
            ax.annotate(
                label,
                (x(acted), lane + BAR_H / 2 + 0.2 + 0.14 * (i % 2)),
                fontsize=7,
                color="black",
                ha="left",
                va="top",
            )
    handles: list[Artist] = [Patch(color=c, label=label) for c, label in PHASES.values()]
    handles.append(Patch(facecolor=WAIT_COLOUR, hatch="///", label="waiting (no job)"))
    handles += [
        ax.plot([], [], marker="X", color="#a50f15", ls="", label="fault")[0],
        ax.plot([], [], marker="v", color="black", ls="", label="supervisor acts (class)")[0],
        ax.plot([], [], marker=">", color="#08519c", ls="", label="resume (checkpoint step)")[0],
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=5, fontsize=8, frameon=False)
    return fig


def write(result: DrillResult, path: Path) -> None:
    """Save the figure as PNG or SVG, or as a self-contained HTML page (the SVG and the summary)."""
    fig = figure(result)
    suffix = path.suffix.lower()
    if suffix == ".png":
        fig.savefig(path, dpi=150)
    elif suffix == ".svg":
        fig.savefig(path, format="svg")
    elif suffix == ".html":
        buf = io.StringIO()
        fig.savefig(buf, format="svg")
        svg = buf.getvalue()
        svg = svg[svg.index("<svg") :]
        title = f"sagewarden drill '{result.scenario}' (seed {result.seed})"
        text = "\n".join(summary(result, 140))
        path.write_text(
            "<!doctype html>\n<html><head><meta charset='utf-8'>"
            f"<title>{html.escape(title)}</title>"
            "<style>body{font-family:sans-serif;margin:2em}pre{font-size:12px}</style></head><body>"
            f"<h1>{html.escape(title)}</h1><p>{html.escape(result.description)}</p>{svg}"
            f"<pre>{html.escape(text)}</pre>"
            f"<p>{html.escape(_footer(result))}</p></body></html>\n",
            encoding="utf-8",
        )
    else:
        raise ValueError(f"{path}: the plot must be .png, .svg or .html")


def _footer(result: DrillResult) -> str:
    return (
        f"{(result.end_ms - result.start_ms) / 3_600_000:,.1f} virtual hours, ended at "
        f"{clock(result.end_ms, result.start_ms).strip()}; {len(result.faults)} fault(s)."
    )
