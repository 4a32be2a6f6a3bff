"""`sagewarden list`, `get`, `events` and `logs`: read runs, their audit trail and their jobs' logs,
optionally following them until the run finishes."""

from __future__ import annotations

from typing import Any, TextIO

from sagewarden_cli import render
from sagewarden_cli.env import Env
from sagewarden_cli.errors import NOT_FOUND, OK, CliError


def cmd_list(env: Env) -> int:
    a = env.args
    client = env.ctx().client
    query = {"status": a.status} if a.status else {}
    runs: list[Any] = []
    cursor = None
    while True:
        want = 100 if a.all else min(100, a.limit - len(runs))
        page = client.call(
            "GET", "/runs", query={**query, "limit": str(want), **({"cursor": cursor} if cursor else {})}
        )
        runs += page["runs"]
        cursor = page.get("next_cursor")
        if not cursor or (not a.all and len(runs) >= a.limit):
            break
    if env.json:
        env.emit_json(runs)
    else:
        env.out(render.run_table(runs, client.now_ms(), terminal=_is_terminal(env.stdout)))
        if cursor and not a.all:
            env.note(f"(showing the newest {len(runs)}; --all lists every run)")
    return OK


def _is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or stream-like object
        return False


def cmd_get(env: Env) -> int:
    a = env.args
    client = env.ctx().client
    run = client.run(a.run)
    if env.json:
        env.emit_json(run, compact=a.follow)
    else:
        env.out(render.run_view(run, client.now_ms()))
    if not a.follow:
        return OK
    followed = run["status"] not in render.TERMINAL
    while run["status"] not in render.TERMINAL:
        env.sleep(a.interval)
        before, run = run, client.run(run["run_id"])
        lines = render.follow_lines(before, run, client.now_ms())
        if lines and env.json:
            env.emit_json(run, compact=True)
        elif lines:
            for line in lines:
                env.out(line)
    if followed and not env.json and run.get("outcome"):
        env.out(f"outcome: {run['outcome']}")
    return OK


def cmd_events(env: Env) -> int:
    a = env.args
    client = env.ctx().client
    run_id = client.resolve(a.run)
    path = f"/runs/{run_id}/events"
    # keep the cursor of the page being read: events are append-only, so a later poll re-reads
    # that page from its cursor and skips the events already printed
    page_cursor: str | None = None
    seen_on_page = 0
    printed: list[Any] = []

    def poll() -> list[Any]:
        nonlocal page_cursor, seen_on_page
        new: list[Any] = []
        cursor = page_cursor
        skip = seen_on_page
        while True:
            page = client.call("GET", path, query={"limit": "100", **({"cursor": cursor} if cursor else {})})
            items = page["events"]
            new += items[skip:]
            nxt = page.get("next_cursor")
            if not nxt:
                page_cursor, seen_on_page = cursor, len(items)
                return new
            cursor, skip = nxt, 0

    def show(events: list[Any]) -> None:
        for e in events:
            if env.json:
                env.emit_json(e, compact=True)
            else:
                env.out(render.event_line(e))

    first = poll()
    if a.tail:
        first = first[-a.tail :]
    if env.json and not a.follow:
        env.emit_json(first)
    else:
        show(first)
    printed += first
    if not a.follow:
        return OK
    while True:
        env.sleep(a.interval)
        status = client.call("GET", f"/runs/{run_id}")["status"]
        new = poll()
        show(new)
        if status in render.TERMINAL and not new:
            return OK


def cmd_logs(env: Env) -> int:
    from sagewarden_cli.logs import LATE_LINES_MS, JobLogReader, format_lines

    a = env.args
    ctx = env.ctx()
    client = ctx.client
    logs = ctx.aws_client("logs")
    run = client.run(a.run)
    attempt = _pick_attempt(run, a.attempt)
    if attempt is None and not a.follow:
        raise CliError(_no_attempt(run), NOT_FOUND)
    reader: JobLogReader | None = None
    announced_wait = False

    def start(att: dict[str, Any]) -> JobLogReader:
        if not env.json:
            env.note(
                f"==> attempt {att['number']}: {att['job_name']} ({att['instance_count']} x {att['instance_type']})"
            )
        return JobLogReader(logs, att["job_name"], host=a.host, tail=a.tail)

    def drain(r: JobLogReader) -> None:
        hosts = r.refresh_streams()
        if a.host is not None and hosts and a.host not in hosts and not a.follow:
            raise CliError(
                f"no host algo-{a.host} in job {r.job_name}: hosts are {', '.join(f'algo-{h}' for h in hosts)}",
                NOT_FOUND,
            )
        lines = r.read_new()
        if env.json:
            for line in lines:
                env.emit_json(
                    {
                        "host": f"algo-{line.host}",
                        "timestamp": render.iso(line.timestamp_ms),
                        "message": line.message,
                    },
                    compact=True,
                )
        else:
            for text in format_lines(lines, timestamps=a.timestamps):
                env.out(text)

    if attempt is not None:
        reader = start(attempt)
        drain(reader)
        if not reader.hosts() and not a.follow:
            state = "/".join(
                s for s in (attempt.get("sagemaker_status"), attempt.get("secondary_status")) if s
            )
            raise CliError(
                f"no logs yet for job {attempt['job_name']} ({state or attempt.get('launch')}): "
                "a job logs once its instances start; use --follow to wait",
                NOT_FOUND,
            )
    if not a.follow:
        return OK
    # an attempt that ended keeps being read for a while: CloudWatch Logs ingests a line some time
    # after it is written (AWS publishes no bound), so its last lines -- the crash -- may land late
    closing: list[tuple[JobLogReader, int]] = []
    while True:
        env.sleep(a.interval)
        run = client.run(run["run_id"])
        for old, until in list(closing):
            drain(old)
            if client.now_ms() >= until:
                closing.remove((old, until))
        latest = _pick_attempt(run, a.attempt)
        if latest is not None and (attempt is None or latest["number"] != attempt["number"]):
            if reader is not None:
                drain(reader)  # the rest of the attempt that ended, and what lands later
                closing.append((reader, client.now_ms() + LATE_LINES_MS))
            attempt, reader = latest, start(latest)
        if reader is None:
            if not announced_wait and not env.json:
                env.note(f"waiting: {_no_attempt(run)}")
                announced_wait = True
        else:
            drain(reader)
        # a finished run has no live job left; a chosen earlier attempt is done once it ended
        finished = run["status"] in render.TERMINAL or (
            a.attempt is not None and attempt is not None and attempt_ended(run, attempt)
        )
        if finished:
            if reader is not None:
                drain(reader)
                env.sleep(a.interval)  # CloudWatch ingests the last lines a few seconds late
                drain(reader)
            if not env.json:
                env.note(
                    f"==> run {run['name']} is {run['status']}"
                    + (f": {run['outcome']}" if run.get("outcome") else "")
                )
            return OK


def attempt_ended(run: dict[str, Any], attempt: dict[str, Any]) -> bool:
    for a in run.get("attempts") or []:
        if a["number"] == attempt["number"]:
            return bool(a.get("ended_at")) or a.get("sagemaker_status") in ("Completed", "Failed", "Stopped")
    return True


def _pick_attempt(run: dict[str, Any], number: int | None) -> dict[str, Any] | None:
    attempts = run.get("attempts") or []
    if number is None:
        return attempts[-1] if attempts else None
    for a in attempts:
        if a["number"] == number:
            return dict(a)
    raise CliError(f"run {run['name']} has no attempt {number} (it has {len(attempts)})", NOT_FOUND)


def _no_attempt(run: dict[str, Any]) -> str:
    wait = run.get("wait") or {}
    why = f", waiting for {wait['reason']}" if wait.get("reason") else ""
    return f"run {run['name']} has not launched a job yet ({run['status']}{why})"
