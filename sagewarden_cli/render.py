"""Human output: ISO times and durations, tables that fit the terminal, no Python reprs."""

from __future__ import annotations

import json
import shutil
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

WIDTH = 100  # the widest a table or wrapped text gets (narrower terminals get narrower output)
TERMINAL = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})
# restart causes, shortened for the list table (restarts_by_class keys are ending classes)
_CAUSES = {
    "INFRASTRUCTURE": "infra",
    "SUPERVISOR_STOP": "hang",
    "HANG": "hang",
    "SPOT_INTERRUPTED": "spot",
    "SEGMENT_DONE": "chain",  # a MaxRuntime segment chained to the next
    "CAPACITY": "capacity",
    "QUOTA": "quota",
    "THROTTLED": "throttled",
    "UNKNOWN": "unknown",
}


def width() -> int:
    return max(60, min(WIDTH, shutil.get_terminal_size((WIDTH, 24)).columns))


def ms_of(text: str | None) -> int | None:
    if not text:
        return None
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def iso(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def duration(ms: float | None) -> str:
    """`45s`, `12m 5s`, `3h 2m`, `2d 4h` (the two largest units)."""
    if ms is None:
        return "-"
    s = max(0, int(ms // 1000))
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m {s}s" if s else f"{m}m"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h {m}m" if m else f"{h}h"
    d, h = divmod(h, 24)
    return f"{d}d {h}h" if h else f"{d}d"


def ago(when: str | None, now_ms: int) -> str:
    at = ms_of(when)
    if at is None:
        return "-"
    return "just now" if now_ms - at < 1000 else f"{duration(now_ms - at)} ago"


def money(usd: float | None) -> str:
    if usd is None:
        return "-"
    return f"${usd:,.2f}" if usd < 100 else f"${usd:,.0f}"


def value(v: Any) -> str:
    """A JSON value for people: `-` for null, true/false, compact JSON for lists and objects."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return f"{v:g}"
    if isinstance(v, list | dict):
        return json.dumps(v, separators=(", ", ": ")) if v else ("[]" if isinstance(v, list) else "{}")
    return str(v)


def causes(by_class: Mapping[str, int] | None) -> str:
    if not by_class:
        return "-"
    return ", ".join(f"{_CAUSES.get(k, k.lower())} {n}" for k, n in sorted(by_class.items()) if n) or "-"


def table(
    headers: Sequence[str], rows: Iterable[Sequence[str]], *, shrink: Sequence[str] = (), max_width: int = 0
) -> str:
    """Columns sized to their content; when too wide, the `shrink` columns are cut with `…`."""
    rows = [list(r) for r in rows]
    limit = max_width or width()
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    gap = 2
    over = sum(widths) + gap * (len(widths) - 1) - limit
    for name in shrink:
        if over <= 0:
            break
        i = list(headers).index(name)
        cut = min(over, widths[i] - max(len(name), 8))
        if cut > 0:
            widths[i] -= cut
            over -= cut

    def fit(text: str, w: int) -> str:
        return text if len(text) <= w else text[: max(0, w - 1)] + "…"

    lines = []
    for r in [list(headers), *rows]:
        cells = [fit(c, widths[i]) for i, c in enumerate(r)]
        lines.append("  ".join(c.ljust(widths[i]) for i, c in enumerate(cells)).rstrip())
    return "\n".join(lines)


def wrap(text: str, indent: str, subsequent: str | None = None) -> list[str]:
    """Wrapped at the output width; long words (URIs, ARNs) are never broken."""
    return textwrap.wrap(
        text,
        width=width(),
        initial_indent=indent,
        subsequent_indent=indent if subsequent is None else subsequent,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [indent.rstrip()]


# -- runs ------------------------------------------------------------------------------------------
def run_duration_ms(run: Mapping[str, Any], now_ms: int) -> int | None:
    start = ms_of(run.get("created_at"))
    if start is None:
        return None
    end = ms_of(run.get("updated_at")) if run.get("status") in TERMINAL else now_ms
    return None if end is None else max(0, end - start)


def run_table(
    runs: Sequence[Mapping[str, Any]], now_ms: int, *, terminal: bool = True, max_width: int = 0
) -> str:
    """The runs as a table. Only on a terminal are RESTARTS and NAME cut to fit its width; piped or
    redirected, nothing is cut. IDs are never cut: they are what a user pastes back."""
    if not runs:
        return "no runs"
    rows = [
        [
            str(r["name"]),
            str(r["run_id"]),
            str(r["status"]) + (" (deferred)" if r.get("deferred") else ""),
            str(r.get("attempt_count", "-")),
            causes(r.get("restarts_by_class")),
            ago(r.get("created_at"), now_ms).removesuffix(" ago"),
            duration(run_duration_ms(r, now_ms)),
            ettr_cell(r.get("ettr")),
            money(r.get("estimated_cost_usd")),
        ]
        for r in runs
    ]
    headers = ["NAME", "ID", "STATUS", "ATTEMPT", "RESTARTS", "AGE", "DURATION", "ETTR", "EST. COST"]
    if not terminal:
        return table(headers, rows, max_width=10**9)
    return table(headers, rows, shrink=("RESTARTS", "NAME"), max_width=max_width)


def run_line(run: Mapping[str, Any], now_ms: int) -> str:
    """One line per change of the run's state while following a run."""
    attempts = run.get("attempts") or []
    current = attempts[-1] if attempts else None
    sm = ""
    if current is not None:
        state = "/".join(s for s in (current.get("sagemaker_status"), current.get("secondary_status")) if s)
        sm = f"  attempt {current['number']} {state or current.get('launch', '')}"
    at = run.get("updated_at") or "-"
    restarts = f"  restarts {run.get('restarts', 0)}" if run.get("restarts") else ""
    wait = run.get("wait") or {}
    waiting = ""
    if wait.get("reason"):
        on = f" for {wait['instance_type']}" if wait.get("instance_type") else ""
        waiting = f"  waiting ({wait['reason']}{on}" + (
            f", until {wait['until']})" if wait.get("until") else ")"
        )
    deferred = run.get("deferred")
    why = f"  deferred: {deferred.get('reason')}" if deferred else ""
    return f"{at}  {run['status']}{sm}{restarts}{waiting}  est. {money(run.get('estimated_cost_usd'))}{why}"


def state_signature(run: Mapping[str, Any]) -> tuple[Any, ...]:
    """What a `run_line` reports: a new line when any of it changes."""
    attempts = run.get("attempts") or []
    cur = attempts[-1] if attempts else {}
    wait = run.get("wait") or {}
    return (
        run["status"],
        run.get("attempt_count"),
        run.get("restarts"),
        cur.get("sagemaker_status"),
        cur.get("secondary_status"),
        run.get("outcome"),
        wait.get("reason"),
        wait.get("until"),
        (run.get("deferred") or {}).get("reason"),
    )


def follow_lines(before: Mapping[str, Any] | None, run: Mapping[str, Any], now_ms: int) -> list[str]:
    """The lines `get --follow` prints for what changed between two answers of GET /runs/{id}: the
    run's state (status, attempt, SageMaker's status, a wait), a newer checkpoint (the training's
    progress, hours apart from any state change) and the hang windows in force."""
    lines = []
    ckpt = run.get("newest_checkpoint") or {}
    old = (before or {}).get("newest_checkpoint") or {}
    if ckpt.get("step") is not None and ckpt.get("step") != old.get("step"):
        at = ckpt.get("written_at") or run.get("updated_at") or "-"
        took = f" (written in {ckpt['write_seconds']:.0f} s)" if ckpt.get("write_seconds") is not None else ""
        lines.append(f"{at}  checkpoint step {ckpt['step']}{took}")
    windows = hang_windows_text(run.get("hang_windows"))
    if windows and before is not None and windows != hang_windows_text(before.get("hang_windows")):
        lines.append(f"{run.get('updated_at') or '-'}  windows {windows}")
    if before is None or state_signature(before) != state_signature(run):
        lines.append(run_line(run, now_ms))  # last: a run that ended saved its checkpoint before
    return lines


def ettr_cell(ettr: Mapping[str, Any] | None) -> str:
    """The run's effective training time ratio as a percentage ("-" before any wall time)."""
    percent = (ettr or {}).get("percent")
    return "-" if percent is None else f"{percent:.1f} %"


def run_view(run: Mapping[str, Any], now_ms: int) -> str:
    status = str(run["status"])
    lines = [f"{run['name']}  {run['run_id']}  {status}"]

    def row(label: str, text: str) -> None:
        lines.extend(wrap(text, f"  {label:<11}", " " * 13))

    row(
        "submitted",
        f"{run.get('created_at') or '-'} ({ago(run.get('created_at'), now_ms)}) by {run.get('owner', '-')}",
    )
    elapsed = duration(run_duration_ms(run, now_ms))
    row(
        "updated",
        f"{run.get('updated_at') or '-'}; {'ran' if status in TERMINAL else 'running for'} {elapsed}",
    )
    policy = run.get("policy") or {}
    budget = f" of {policy['max_restarts']}" if "max_restarts" in policy else ""
    by_cause = causes(run.get("restarts_by_class"))
    row(
        "restarts",
        f"{run.get('restarts', 0)}{budget}"
        + (f" ({by_cause})" if by_cause != "-" else "")
        + f"; attempts {run.get('attempt_count', 0)}; MaxRuntime segments {run.get('segments', 0)}",
    )
    wait = run.get("wait")
    if wait:
        until = wait.get("until")
        when = f" until {until} (in {duration((ms_of(until) or now_ms) - now_ms)})" if until else ""
        on = f" for {wait['instance_type']}" if wait.get("instance_type") else ""
        row("waiting", f"{wait.get('reason', '-')}{on}{when}")
    deferred = deferral_text(run.get("deferred"), now_ms)
    if deferred:
        row("deferred", deferred)
    ckpt = run.get("last_checkpoint")
    if ckpt:
        row(
            "checkpoint",
            f"step {ckpt['step']} {ckpt['uri']} ({ckpt.get('layout', '-')}, {ckpt.get('written_at') or '-'})",
        )
    advice = run.get("checkpoint_advice") or {}
    if advice.get("summary"):
        row("advice", str(advice["summary"]))
    windows = hang_windows_text(run.get("hang_windows"))
    if windows:
        row("windows", windows)
    pool = run.get("warm_pool") or {}
    if pool.get("note"):
        watched = pool.get("pools") or []
        row(
            "warm pool",
            str(pool["note"]) + (f"; {len(watched)} ended attempt(s)' pool watched" if watched else ""),
        )
    plan = plan_text(run.get("training_plan"))
    if plan:
        row("training plan", plan)
    for line in retention_lines(run.get("retention")):
        row("retention", line)
    if run.get("outcome"):
        row("outcome", str(run["outcome"]))
    attempts = run.get("attempts") or []
    # the API's one figure: ended attempts plus the live one so far (the budget counts the same)
    so_far = "" if status in TERMINAL else " so far"
    row("est. cost", f"{money(run.get('estimated_cost_usd'))}{so_far}")
    ettr = run.get("ettr") or {}
    if ettr.get("summary"):
        row("goodput", str(ettr["summary"]) + ("; ~ estimate" if "~" in str(ettr["summary"]) else ""))
    for a in attempts:
        lines += ["", *attempt_lines(a, now_ms, policy)]
    return "\n".join(lines)


def retention_lines(retention: Mapping[str, Any] | None) -> list[str]:
    """Checkpoint retention as ``get`` shows it: where the run archives, what is being retired,
    each directory retention cannot retire and why (never cut), the storage warning."""
    if not retention:
        return []
    lines = [
        f"archives to {retention['archive_prefix']}"
        if retention.get("archive_prefix")
        else "deletes retired checkpoints"
    ]
    lines += [str(r.get("summary", r.get("name", ""))) for r in retention.get("retiring") or []]
    lines += [
        f"cannot retire {s.get('name')} (since {s.get('since') or '-'}): {s.get('reason') or '-'}"
        for s in retention.get("cannot_retire") or []
    ]
    if retention.get("storage_warning"):
        lines.append(f"warning: {retention['storage_warning']}")
    return lines


def plan_text(plan: Mapping[str, Any] | None) -> str:
    """'<name> (<status>), <n> windows; next opens <time>; <h> h waited for windows', or ''."""
    if not plan:
        return ""
    name = str(plan.get("arn", "")).rsplit("training-plan/", 1)[-1]
    text = f"{name} ({plan.get('status') or 'not read yet'}), {len(plan.get('windows') or [])} window(s)"
    if plan.get("read_error"):
        text += f"; last read failed: {plan['read_error']}"
    if plan.get("next_window_start"):
        text += f"; next opens {plan['next_window_start']}"
    if plan.get("on_demand"):
        text += "; continuing on demand (the plan has no window left)"
    return text + f"; {plan.get('hours_waited_for_windows', 0):g} h waited for windows"


def deferral_text(deferred: Mapping[str, Any] | None, now_ms: int) -> str:
    """'since <time> (<ago>): <reason>; fails at <time> unless fixed', or '' when not deferred.
    The reason is never cut: it is what a person pastes into a ticket."""
    if not deferred:
        return ""
    since = deferred.get("since")
    text = f"since {since or '-'} ({ago(since, now_ms)}): {deferred.get('reason') or '-'}"
    fails_at = deferred.get("fails_at")
    if fails_at:
        text += f"; the run fails at {fails_at} (in {duration((ms_of(fails_at) or now_ms) - now_ms)}) unless fixed"
    else:
        text += "; retried every minute"
    return text


WINDOW_SOURCES = {
    "learned": "learned from this attempt's cadence",
    "carried": "learned by an earlier attempt on these instances",
    "policy": "the policy's",
}


def hang_windows_text(windows: Mapping[str, Any] | None) -> str:
    """'log silence 6 min (learned ...); progress 9 min (the policy's)', or '' when there are none."""
    parts = []
    for key, label in (("log_silence", "log silence"), ("progress_stalled", "progress")):
        w = (windows or {}).get(key)
        if w:
            source = WINDOW_SOURCES.get(str(w.get("source")), str(w.get("source")))
            parts.append(f"{label} {w.get('minutes')} min ({source})")
    return "; ".join(parts)


def attempt_lines(a: Mapping[str, Any], now_ms: int, policy: Mapping[str, Any] | None = None) -> list[str]:
    state = "/".join(s for s in (a.get("sagemaker_status"), a.get("secondary_status")) if s)
    resumed = a.get("resumed_from")
    start = f"from step {resumed['step']}" if resumed else "from scratch"
    ended = (
        f"ended {a['end_class']}" if a.get("end_class") else ("live" if not a.get("ended_at") else "ended")
    )
    out = [
        f"  attempt {a['number']}  {a['instance_count']} x {a['instance_type']}  {start}  "
        f"{state or a.get('launch', '-')}  {ended}"
    ]
    pad = " " * 4
    out.append(f"{pad}job {a['job_name']}")
    started, stopped = a.get("training_started_at"), a.get("ended_at")
    if started:
        until = stopped or None
        span = (ms_of(until) if until else now_ms) or now_ms
        out.append(
            f"{pad}trained from {started}"
            + (f" to {until}" if until else "")
            + f" ({duration(span - (ms_of(started) or span))}); est. {money(a.get('estimated_cost_usd'))}"
        )
    elif a.get("requested_at"):
        out.append(f"{pad}requested {a['requested_at']}")
    for label, key in (("reason", "end_reason"), ("failure", "failure_reason")):
        if a.get(key):
            out += wrap(f"{label}: {a[key]}", pad, pad + " " * (len(label) + 2))
    if a.get("hang_signals"):
        out.append(f"{pad}hang signals: {', '.join(a['hang_signals'])}")
    evidence = [e for e in a.get("evidence") or [] if e != a.get("failure_reason")]
    for line in evidence[:5]:
        out += wrap(f"| {line}", pad, pad + "  ")
    if len(evidence) > 5:
        out.append(f"{pad}| ... {len(evidence) - 5} more evidence lines (--json shows them)")
    return out


def event_line(e: Mapping[str, Any]) -> str:
    return f"{e.get('at') or '-'}  {e.get('kind', '-'):<8}  {e.get('summary', '')}"


def policy_lines(policy: Mapping[str, Any], indent: str = "  ") -> list[str]:
    keys = sorted(policy)
    w = max((len(k) for k in keys), default=0)
    return [f"{indent}{k:<{w}}  {value(policy[k])}" for k in keys]
