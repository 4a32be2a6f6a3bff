"""The drill's human output: the timeline, the alerts (`--alerts`) and the summary per run and fault.

See docs/drill.md (*What the drill prints*)."""

from __future__ import annotations

import re
import shutil
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from drill.scenarios.runner import DrillResult, TimelineRow
from drill.sim.texts import START_FAULTS

_JOB = re.compile(r"\bsw-[a-z0-9-]+?-[0-9a-z]{26}-a(\d+)\b", re.IGNORECASE)
_DEDUPE = re.compile(r"\s*\[[0-9A-Z]{26}-\d{6}-\d{2}\]$")
_ALARM = re.compile(r"\bsagewarden-(?:hang-)?job a\d+--([a-z0-9-]+)")
_DURATION = re.compile(r"\b\d[\d,.]* (s|min|h)\b")  # masked when rows are compared for repeats
TIMES = "\N{MULTIPLICATION SIGN}"
MAX_BLOCK = 8  # the longest block of rows recognised as repeating


def width() -> int:
    """The terminal's width (COLUMNS when set; 120 when not a terminal), at least 80."""
    return max(80, shutil.get_terminal_size((120, 24)).columns)


def clock(ms: int, start: int) -> str:
    """Virtual time since the start of the drill: ``0d 02:38:14``."""
    s = (ms - start) // 1000
    days, rem = divmod(s, 86_400)
    h, rem = divmod(rem, 3600)
    m, sec = divmod(rem, 60)
    return f"{days:>2}d {h:02d}:{m:02d}:{sec:02d}"


def duration(seconds: float | None) -> str:
    """``45s``, ``12m``, ``3h 05m``, ``2d 04h``; ``-`` for none or zero."""
    if seconds is None or seconds <= 0:
        return "-"
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    m = s // 60
    if m < 60:
        return f"{m}m {s % 60:02d}s" if m < 10 and s % 60 else f"{m}m"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h {m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d {h:02d}h"


def minutes(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 60:,.1f} min"


def gpu_hours(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if v >= 100 else f"{v:,.1f}"


def short(text: str) -> str:
    """`sw-llama-8b-01KE...-a002` -> `job a002` (the run column already names the run); the alert
    dedupe id after a Notify row goes (it is for subscribers, not people)."""
    text = _ALARM.sub(r"\1", _JOB.sub(r"job a\1", text))
    return " ".join(_DEDUPE.sub("", text).split())


def event_text(row: TimelineRow) -> str:
    """An audit entry in words: events the audit trail keeps as a field list get a sentence."""
    detail = row.detail or {}
    kind = detail.get("type")
    if row.kind != "event" or not kind or not row.text.startswith(f"{kind}("):
        return row.text
    if kind == "Tick":
        return "timer due (the sweep)"
    if kind == "Submitted":
        return "run submitted"
    if kind == "LaunchAccepted":
        return f"CreateTrainingJob accepted attempt {detail.get('attempt')}" + (
            " (it already existed)" if detail.get("already_existed") else ""
        )
    if kind == "LaunchRejected":  # the decision right after it quotes the message in full
        return f"CreateTrainingJob refused attempt {detail.get('attempt')}: {detail.get('code')}"
    fields = ", ".join(f"{k} {v}" for k, v in detail.items() if k != "type" and v not in (None, "", [], {}))
    return f"{kind}: {fields}" if fields else kind


# ------------------------------------------------------------------------------------------------
# Timeline
# ------------------------------------------------------------------------------------------------


@dataclass
class _Line:
    row: TimelineRow
    text: str
    repeats: int = 1  # this row (block_len 1) or the block ending here occurs this many times in a row
    block_len: int = 1
    last_ms: int = 0
    varies: bool = False  # the repeats differ in a duration (e.g. a growing backoff)


def collapse(rows: Sequence[tuple[TimelineRow, str]]) -> list[_Line]:
    """Rows in time order with repeats folded: per run, a row or block of up to MAX_BLOCK rows
    that comes again right after itself (same kind and text, any time) is kept once."""
    lines = [_Line(row, text, last_ms=row.at_ms) for row, text in rows]
    by_run: dict[str, list[int]] = {}
    for i, line in enumerate(lines):
        by_run.setdefault(line.row.run, []).append(i)
    hidden: set[int] = set()
    for idx in by_run.values():
        keys = [(lines[i].row.kind, _DURATION.sub("#", lines[i].text)) for i in idx]
        pos = 0
        while pos < len(idx):
            best_len, best_count = 1, 1
            for size in range(1, MAX_BLOCK + 1):
                block = keys[pos : pos + size]
                if len(block) < size:
                    break
                count = 1
                while keys[pos + count * size : pos + (count + 1) * size] == block:
                    count += 1
                if count > 1 and count * size > best_count * best_len:
                    best_len, best_count = size, count
            if best_count > 1:
                last_block_start = pos + (best_count - 1) * best_len
                anchor = lines[idx[pos + best_len - 1]]
                anchor.repeats, anchor.block_len = best_count, best_len
                anchor.last_ms = lines[idx[last_block_start]].row.at_ms
                anchor.varies = any(
                    lines[idx[pos + k * best_len + o]].text != lines[idx[pos + o]].text
                    for k in range(1, best_count)
                    for o in range(best_len)
                )
                hidden.update(idx[pos + best_len : pos + best_count * best_len])
                pos += best_count * best_len
            else:
                pos += 1
    return [line for i, line in enumerate(lines) if i not in hidden]


def timeline(result: DrillResult, *, verbose: bool, cols: int) -> list[str]:
    run_w = max([3, *(len(r) for r in result.runs)])
    run_w = min(run_w, 16)
    head = f"{'virtual time':<12} {'run':<{run_w}} {'kind':<8} what happened"
    out = [head, "-" * min(cols, 120)]
    rows = []
    for row in result.timeline:
        if row.routine and not verbose:
            continue
        text = event_text(row)
        rows.append((row, text if verbose else short(text)))
    indent = 12 + 1 + run_w + 1 + 8 + 1
    wrap_at = max(40, cols - indent)
    for line in collapse(rows):
        row = line.row
        text = line.text
        vary = " (durations differ)" if line.varies else ""
        if line.repeats > 1 and line.block_len == 1:
            text += (
                f"  {TIMES} {line.repeats}, the last at {clock(line.last_ms, result.start_ms).strip()}{vary}"
            )
        prefix = f"{clock(row.at_ms, result.start_ms):<12} {row.run[:run_w]:<{run_w}} {row.kind:<8} "
        out += _wrapped(prefix, text, indent, wrap_at)
        if line.repeats > 1 and line.block_len > 1:
            note = (
                f"↑ these {line.block_len} rows {TIMES} {line.repeats} in all, the last time at "
                f"{clock(line.last_ms, result.start_ms).strip()}{vary}"
            )
            out += _wrapped(" " * 13 + f"{row.run[:run_w]:<{run_w}} {'':<8} ", note, indent, wrap_at)
    return out


def _wrapped(prefix: str, text: str, indent: int, wrap_at: int) -> list[str]:
    parts = textwrap.wrap(text, wrap_at, break_long_words=True, break_on_hyphens=False) or [""]
    return [prefix + parts[0], *(" " * indent + p for p in parts[1:])]


# ------------------------------------------------------------------------------------------------
# Alerts
# ------------------------------------------------------------------------------------------------


def alerts(result: DrillResult, cols: int) -> list[str]:
    rows = result.alert_rows()
    out = [f"Alerts: {len(rows)} published, in time order (subject, then body)", "-" * min(cols, 120)]
    for a in rows:
        out.append(f"{clock(a['at_ms'], result.start_ms)}  {a['run']}  {a['severity']} {a['event']}")
        out.append(f"    {a['subject']}")
        # as sent, never wrapped: a wrapped console link or log line can no longer be copied
        out += [f"      {line}".rstrip() for line in a["body"].splitlines()]
        out.append("")
    return out


# ------------------------------------------------------------------------------------------------
# Summary tables
# ------------------------------------------------------------------------------------------------


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, right: set[int], cols: int) -> list[str]:
    """Columns as wide as their widest cell; the last column wraps to fit ``cols``."""
    n = len(headers)
    widths = [max(len(headers[i]), *(len(r[i]) for r in rows)) for i in range(n)]
    lead = sum(widths[:-1]) + 2 * (n - 1)
    last = max(1, min(widths[-1], max(20, cols - lead)))
    widths[-1] = last
    out = []
    for cells in [list(headers), *rows]:
        wrapped = textwrap.wrap(cells[-1], last, break_on_hyphens=False) or [""]
        head = [(c.rjust(widths[i]) if i in right else c.ljust(widths[i])) for i, c in enumerate(cells[:-1])]
        out.append("  ".join([*head, wrapped[0]]).rstrip())
        out += [" " * lead + "  " + w for w in wrapped[1:]] if n > 1 else wrapped[1:]
    out.insert(1, "  ".join("-" * w for w in widths))
    return out


def _classes(by_class: dict[str, int]) -> str:
    return ", ".join(f"{c} {n}" for c, n in by_class.items()) or "none"


def _resumed(run: dict[str, Any]) -> str:
    return " → ".join(
        "fresh" if a["resumed_from_step"] is None else str(a["resumed_from_step"]) for a in run["attempts"]
    )


def _fault_name(f: dict[str, Any]) -> str:
    if f["kind"] in START_FAULTS:
        return f"{f['kind']} (attempt {f['attempt']})" if f["attempt"] else f["kind"]
    return f"{f['kind']} on algo-{f['host']}"


def summary(result: DrillResult, cols: int) -> list[str]:
    out = ["Runs", ""]
    rows = []
    for name, run in result.runs.items():
        rows.append(
            [
                name,
                run["status"],
                str(len(run["attempts"])),
                f"{run['restarts']} of {run['max_restarts']}",
                _classes(run["restarts_by_class"]),
                gpu_hours(run["gpu_hours_lost"]),
                f"${run['estimated_cost_usd']:,.0f}",
                _resumed(run),
            ]
        )
    out += table(
        [
            "run",
            "status",
            "attempts",
            "budget used",
            "restarts by class",
            "GPU-h lost",
            "est. cost",
            "resumed from step",
        ],
        rows,
        right={2, 3, 5, 6},
        cols=cols,
    )
    out += ["", "Where the time went (virtual: submission to the run's end, or to the end of the drill)", ""]
    rows = []
    for name, run in result.runs.items():
        t = run["time_s"]
        span = sum(t.values())
        rows.append(
            [
                name,
                duration(span),
                duration(t["training_s"]),
                duration(t["hung_s"]),
                duration(t["starting_s"]),
                duration(t["waiting_s"]),
                duration(t["ending_s"]),
                run["outcome"] or run["status"].lower(),
            ]
        )
    out += table(
        ["run", "total", "training", "hung", "starting", "waiting", "ending", "outcome"],
        rows,
        right={1, 2, 3, 4, 5, 6},
        cols=cols,
    )
    if result.faults:
        out += [
            "",
            "Faults: how the supervisor classed each one, and what followed (virtual minutes after the fault)",
            "",
        ]
        rows = [
            [
                clock(f["at_ms"], result.start_ms).strip(),
                f["run"] or "-",
                _fault_name(f),
                f["classified_as"],
                f["then"],
                minutes(f["to_action_s"]),
                minutes(f["to_healthy_replacement_s"]),
            ]
            for f in result.faults
        ]
        out += table(
            ["virtual time", "run", "fault", "classified as", "then", "acted after", "training again"],
            rows,
            right={5, 6},
            cols=cols,
        )
        costly = [f for f in result.faults if f["gpu_hours_lost"] is not None]
        if costly:
            out += [
                "",
                "GPU-hours lost per fault: the faulted job's GPUs x the time from the fault to its detection, the",
                "stop, the replacement's instance start, plus the work redone since the checkpoint it resumed",
                "(capacity and throttle faults hold no instances; benign phases cost nothing). A fault the run",
                "did not recover from counts the GPUs it held from the fault to the job's end.",
                "",
            ]
            rows = []
            for f in costly:
                g = f["gpu_hours_lost"]
                parts = [gpu_hours(g[k]) for k in ("detection", "stop", "instance_start", "work_lost")]
                note = "" if f["recovered"] else "not recovered"
                rows.append(
                    [f["run"] or "-", _fault_name(f), str(f["gpus"]), *parts, gpu_hours(g["total"]), note]
                )
            total = sum(f["gpu_hours_lost"]["total"] for f in costly)
            rows.append(["total", "", "", "", "", "", "", gpu_hours(total), ""])
            headers = [
                "run",
                "fault",
                "GPUs",
                "detection",
                "stop",
                "instance start",
                "work redone",
                "total",
                "",
            ]
            if not any(r[-1] for r in rows):
                headers, rows = headers[:-1], [r[:-1] for r in rows]
            out += table(headers, rows, right={2, 3, 4, 5, 6, 7}, cols=cols)
    return out


def render(
    result: DrillResult, *, verbose: bool = False, show_alerts: bool = False, cols: int | None = None
) -> str:
    cols = cols or width()
    lines = [f"sagewarden drill: scenario '{result.scenario}' (seed {result.seed})"]
    if result.description:
        lines += textwrap.wrap(result.description, min(cols, 120))
    lines.append("")
    lines += timeline(result, verbose=verbose, cols=cols)
    if show_alerts:
        lines += ["", *alerts(result, cols)]
    lines += ["", *summary(result, cols)]
    virtual_h = (result.end_ms - result.start_ms) / 3_600_000
    lines += [
        "",
        f"{virtual_h:,.1f} virtual hours in {result.wall_seconds:.1f} s; {result.events_delivered} events "
        f"delivered; {result.alerts} alerts published"
        + ("" if show_alerts else " (--alerts shows them in full)"),
    ]
    if result.invariant_violations:
        lines += ["", "VIOLATIONS:", *[f"    {v}" for v in result.invariant_violations]]
    else:
        lines.append("Invariants held: at most one live job per run; every expectation met.")
    return "\n".join(lines)
