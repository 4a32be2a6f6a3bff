"""`sagewarden`: submit, watch, inspect, cancel and resume supervised SageMaker runs.

Commands (each has --help with its arguments, allowed values and an example):

  submit FILE|-      POST /runs from YAML or JSON; --set key=value, --idempotency-key, --dry-run
  list (ls)          the runs as a table, newest first
  get (show) RUN     one run with its attempts; --follow until it finishes
  events RUN         the audit trail; --follow
  logs RUN           the current attempt's CloudWatch logs, every host; --follow, --host N
  cancel RUN...      stop runs (asks first unless --yes)
  resume RUN         continue a FAILED or CANCELLED run from its newest checkpoint
  selftest           rehearse a crash and a hang in your account through the deployed API

RUN is a run id or a run name. Global options work before or after the command.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from sagewarden_cli import render
from sagewarden_cli.client import Transport, env_region, is_loopback
from sagewarden_cli.env import Env
from sagewarden_cli.errors import API_ERROR, EXIT_CODES, INTERRUPTED, NETWORK, NOT_FOUND, OK, USAGE, CliError

VERSION = "0.1.0"
DEFAULT_INTERVAL_S = 5.0
GLOBALS = {"json": False, "profile": None, "region": None, "api_url": None, "stack": None, "local": False}
GLOBALS["logs_endpoint_url"] = None


def _statuses() -> list[str]:
    from sagewarden.domain.models import RunStatus

    return [s.value for s in RunStatus]


EXIT_TABLE = "exit codes:\n" + "\n".join(f"  {code:<4}{text}" for code, text in EXIT_CODES)


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line (and exit code 2) instead of exiting."""

    def error(self, message: str) -> Any:
        raise CliError(f"{self.prog}: {message} (see `{self.prog} --help`)", USAGE)


def _globals_parent() -> argparse.ArgumentParser:
    # SUPPRESS defaults: an option given before the command is not reset by the command's parser
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("global options (before or after the command)")
    s = argparse.SUPPRESS
    g.add_argument(
        "--json",
        action="store_true",
        default=s,
        help="print the API's JSON (one object per line when following)",
    )
    g.add_argument("--profile", default=s, help="AWS profile for credentials (default: the usual chain)")
    g.add_argument(
        "--region", default=s, help="AWS region (default: $AWS_REGION, $AWS_DEFAULT_REGION, the profile's)"
    )
    g.add_argument(
        "--api-url",
        default=s,
        metavar="URL",
        help="the API's URL (default: $SAGEWARDEN_API_URL or the stack's ApiUrl)",
    )
    g.add_argument(
        "--stack",
        default=s,
        help="CloudFormation stack to read ApiUrl from (default: $SAGEWARDEN_STACK or Sagewarden)",
    )
    g.add_argument(
        "--local",
        action="store_true",
        default=s,
        help="talk to `python -m drill serve` (default http://127.0.0.1:8765; no AWS account or credentials)",
    )
    g.add_argument(
        "--logs-endpoint-url",
        default=s,
        metavar="URL",
        help="CloudWatch Logs endpoint for `logs` (default: AWS's; in local mode the local server's)",
    )
    return p


def _command(
    sub: Any,
    name: str,
    parent: argparse.ArgumentParser,
    help_text: str,
    example: str,
    aliases: Sequence[str] = (),
) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        name,
        aliases=list(aliases),
        parents=[parent],
        help=help_text,
        description=help_text[0].upper() + help_text[1:] + ".",
        epilog=f"example:\n{example}\n\n{EXIT_TABLE}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return p


def build_parser() -> Parser:
    parent = _globals_parent()
    parser = Parser(
        prog="sagewarden",
        description="Submit, watch, inspect, cancel and resume supervised SageMaker runs.",
        epilog="RUN is a run id or a run name. `sagewarden COMMAND --help` shows each command.\n\n"
        + EXIT_TABLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[parent],
    )
    parser.add_argument("--version", action="version", version=f"sagewarden {VERSION}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    p = _command(
        sub,
        "submit",
        parent,
        "submit a run from a YAML or JSON file ('-' reads stdin): {name, training_job, policy}",
        "  sagewarden submit run.yaml --set instance_count=16 --set max_restarts=20 --idempotency-key llama-70b-v1\n"
        "  sagewarden submit run.yaml --dry-run        # validate and review; nothing is submitted\n"
        "  cat run.json | sagewarden submit -",
    )
    p.add_argument("file", metavar="FILE", help="the run as YAML (.yaml/.yml) or JSON (.json); '-' for stdin")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="sets",
        help="override a value: instance_type, instance_count, max_runtime_seconds, name, any policy field "
        "(max_restarts=20), or a dotted path (training_job.Environment.NCCL_DEBUG=WARN, "
        "training_job.InputDataConfig[0].ChannelName=train); values are YAML (20, true, [a, b]); "
        "KEY=null removes the key; repeatable",
    )
    p.add_argument(
        "--idempotency-key",
        metavar="KEY",
        help="a repeat with the same key returns the same run (1-128 printable ASCII)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="validate with the API's own rules, print the first job name, the resolved policy and a preflight "
        "review (checkpoint layout, MaxRuntime vs wall clock, EFA/NCCL environment, collective timeout, "
        "Service Quotas when your credentials allow), and list the live runs holding the name or an "
        "overlapping checkpoint prefix when the API can be reached (GET /runs); nothing is submitted",
    )

    statuses = _statuses()
    p = _command(
        sub,
        "list",
        parent,
        "list runs, newest first: name, id, status, attempt, restarts by cause, age, duration, est. cost",
        "  sagewarden list --status TRAINING\n  sagewarden ls --all --json",
        aliases=["ls"],
    )
    p.add_argument(
        "--status",
        type=str.upper,
        choices=statuses,
        metavar="STATUS",
        help=f"only runs in STATUS: {', '.join(statuses)}",
    )
    p.add_argument(
        "--limit", type=_positive_int, default=50, metavar="N", help="show at most N runs (default 50)"
    )
    p.add_argument("--all", action="store_true", help="every run (follows every page)")

    p = _command(
        sub,
        "get",
        parent,
        "show one run: status, attempts, classes, checkpoint resumed from, cost",
        "  sagewarden get llama-70b-pt\n  sagewarden show 01KE5Q86000DNQ47GXEV9VZMPH --follow",
        aliases=["show"],
    )
    p.add_argument("run", metavar="RUN", help="run id or run name")
    p.add_argument(
        "--follow",
        "-f",
        "--watch",
        "-w",
        action="store_true",
        help="print each change until the run finishes",
    )
    _interval(p, DEFAULT_INTERVAL_S)

    p = _command(
        sub,
        "events",
        parent,
        "show a run's audit trail: every event, decision and action, oldest first",
        "  sagewarden events llama-70b-pt --tail 20\n  sagewarden events llama-70b-pt --follow",
    )
    p.add_argument("run", metavar="RUN", help="run id or run name")
    p.add_argument("--tail", type=_positive_int, metavar="N", help="only the last N events")
    p.add_argument(
        "--follow", "-f", action="store_true", help="keep printing new events until the run finishes"
    )
    _interval(p, DEFAULT_INTERVAL_S)
    p.add_argument(
        "--all", action="store_true", help=argparse.SUPPRESS
    )  # the default now; kept for old scripts

    p = _command(
        sub,
        "logs",
        parent,
        "print the current attempt's training logs from CloudWatch Logs, every host, prefixed (algo-N)",
        "  sagewarden logs llama-70b-pt --follow\n  sagewarden logs llama-70b-pt --host 3 --tail 100 --timestamps\n"
        "  sagewarden logs llama-70b-pt --attempt 1     # an earlier attempt",
    )
    p.add_argument("run", metavar="RUN", help="run id or run name")
    p.add_argument(
        "--follow",
        "-f",
        action="store_true",
        help="keep printing new lines (and the next attempts') until the run finishes",
    )
    p.add_argument("--host", type=_positive_int, metavar="N", help="only host algo-N")
    p.add_argument("--attempt", type=_positive_int, metavar="N", help="attempt N instead of the current one")
    p.add_argument(
        "--tail", type=_non_negative_int, metavar="N", help="start with the last N lines of each host"
    )
    p.add_argument("--timestamps", action="store_true", help="prefix each line with its time (ISO 8601, UTC)")
    _interval(p, 2.0)

    p = _command(
        sub,
        "cancel",
        parent,
        "cancel runs: stop the live job; a run becomes CANCELLED when SageMaker confirms",
        "  sagewarden cancel llama-70b-pt\n  sagewarden cancel 01KE5Q86000DNQ47GXEV9VZMPH gemma-7b --yes",
    )
    p.add_argument("runs", nargs="+", metavar="RUN", help="run ids or run names")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")

    p = _command(
        sub,
        "resume",
        parent,
        "resume a FAILED or CANCELLED run from its newest checkpoint with a fresh restart budget",
        "  sagewarden resume llama-70b-pt",
    )
    p.add_argument("run", metavar="RUN", help="run id or run name")

    from sagewarden_cli import doctor

    p = _command(
        sub,
        "doctor",
        parent,
        "check this account and region before a deploy (credentials, bootstrap, roles, log slots, "
        "buckets, quotas)",
        "  sagewarden doctor --profile prod -c allowedRoleArns='[\"arn:aws:iam::123456789012:role/Train\"]'",
    )
    doctor.add_arguments(p, include_global=False)

    # --- selftest (sagewarden_cli/selftest.py) ---------------------------------------------------------------
    from sagewarden_cli import selftest

    p = _command(
        sub,
        "selftest",
        parent,
        "rehearse a crash and a hang in this account: a tiny ml.m5.large job, through the deployed API "
        "(costs a few cents; asks first)",
        "  sagewarden selftest --role arn:aws:iam::123456789012:role/SageMakerTrainingRole --bucket my-bucket\n"
        "  sagewarden --local selftest --yes     # against `python -m drill serve --scenario selftest`",
    )
    selftest.add_arguments(p)
    p.epilog = (p.epilog or "").replace(
        "exit codes:\n", "exit codes (1 also when a step did not happen within its deadline):\n"
    )
    # --- end selftest -----------------------------------------------------------------------------
    return parser


def _interval(p: argparse.ArgumentParser, default: float) -> None:
    p.add_argument(
        "--interval",
        type=float,
        default=default,
        metavar="SECONDS",
        help=f"poll every SECONDS when following (default {default:g})",
    )


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be 1 or more")
    return value


def _non_negative_int(text: str) -> int:
    return 0 if text.strip() == "0" else _positive_int(text)


# -- commands -------------------------------------------------------------------------------------
def cmd_submit(env: Env) -> int:
    from sagewarden_cli.submit import apply_sets, load_body

    a = env.args
    body = apply_sets(load_body(a.file, env.stdin), a.sets)
    if a.dry_run:
        return _dry_run(env, body)
    headers = {"Idempotency-Key": a.idempotency_key} if a.idempotency_key else None
    client = env.ctx().client
    resp = client.send("POST", "/runs", body=body, headers=headers)
    run = client.decode(resp)
    if env.json:
        env.emit_json(run)
        return OK
    if resp.status == 200:
        env.note("(already submitted with this Idempotency-Key: this is that run)")
    env.out(render.run_view(run, client.now_ms()))
    env.note(f"\nfollow it: sagewarden get {run['name']} --follow  |  sagewarden logs {run['name']} --follow")
    return OK


def _dry_run(env: Env, body: dict[str, Any]) -> int:
    from sagewarden_cli import preflight
    from sagewarden_cli.submit import dry_run

    result, req = dry_run(body, env.args.idempotency_key)
    findings: list[preflight.Finding] = []
    conflicts: list[dict[str, str]] = []
    if req is not None:
        findings = preflight.review(req.training_job, req.policy.to_dict())
        findings += _quota_review(env, req)
        conflicts, unchecked = _conflict_review(env, req)
        if unchecked:
            result.notes.append(unchecked)
        if conflicts:
            result.valid = False
            result.errors += [{"field": c["field"], "message": c["message"]} for c in conflicts]
    if env.json:
        out = {**result.to_json(), "conflicts": conflicts, "review": [f.to_json() for f in findings]}
        env.emit_json(out)
        return OK if result.valid else API_ERROR
    if conflicts:
        raise CliError(
            "dry run: the API would refuse this run (HTTP 409): another live run holds its name or "
            "checkpoint prefix",
            API_ERROR,
            [f"{e['field']}: {e['message']}" for e in result.errors],
        )
    if not result.valid:
        raise CliError(
            "dry run: the API would refuse this run (HTTP 400): invalid request",
            API_ERROR,
            [f"{e['field']}: {e['message']}" for e in result.errors],
        )
    assert req is not None
    (itype, count), *fallbacks = preflight.instance_choices(req.training_job, req.policy.to_dict())
    instances = f"{count} x {itype}"
    if fallbacks:
        instances += "; fallbacks " + ", ".join(f"{c} x {t}" for t, c in fallbacks)
    env.out("dry run: the API would accept this run (nothing was submitted)")
    env.out(f"  name        {result.name}")
    env.out(f"  first job   {result.first_job_name}")
    env.out(f"  instances   {instances}")
    env.out("")
    env.out("resolved policy")
    for line in render.policy_lines(result.policy or {}):
        env.out(line)
    env.out("")
    warnings = sum(1 for f in findings if f.level == "warning")
    env.out(f"preflight review: {warnings} warning(s)" if findings else "preflight review: nothing to report")
    for f in findings:
        for line in render.wrap(f"[{f.check}] {f.message}", f"  {f.level:<8} ", " " * 11):
            env.out(line)
    env.out("")
    for n in result.notes:
        for line in render.wrap(n, "  note: ", " " * 8):
            env.out(line)
    return OK


def _conflict_review(env: Env, req: Any) -> tuple[list[dict[str, str]], str | None]:
    """(live runs the submit would collide with, a note when they could not be listed). Reads
    GET /runs only; a dry run never submits."""
    from sagewarden_cli.submit import live_conflicts

    uri = str((req.training_job.get("CheckpointConfig") or {}).get("S3Uri", ""))
    try:
        return live_conflicts(env.ctx().client, req.name, uri), None
    except Exception as exc:
        from botocore.exceptions import ProfileNotFound

        if isinstance(exc, ProfileNotFound):
            raise
        why = str(exc) if isinstance(exc, CliError) else f"{type(exc).__name__}: {exc}"
        return [], (
            "name and checkpoint prefix not checked against the live runs: cannot list them through "
            f"the API ({why})"
        )


def _quota_review(env: Env, req: Any) -> list[Any]:
    from sagewarden_cli import preflight

    a = env.args
    if a.local or is_loopback(a.api_url or os.environ.get("SAGEWARDEN_API_URL") or ""):
        return [preflight.Finding("note", "quota", "quotas not checked: local mode has no Service Quotas")]
    try:
        session = env._session
        if session is None:
            import boto3

            session = boto3.Session(profile_name=a.profile)
        region = a.region or env_region() or session.region_name
        if not region:
            return [
                preflight.Finding(
                    "note", "quota", "quotas not checked: no AWS region (--region or AWS_REGION)"
                )
            ]
        if session.get_credentials() is None:
            return [preflight.Finding("note", "quota", "quotas not checked: no AWS credentials")]
        from botocore.config import Config

        # a review must not hang on a network that cannot reach Service Quotas
        config = Config(connect_timeout=3, read_timeout=10, retries={"mode": "standard", "max_attempts": 2})
        client = session.client("service-quotas", region_name=region, config=config)
    except Exception as exc:
        from botocore.exceptions import ProfileNotFound

        if isinstance(exc, ProfileNotFound):
            raise
        return [preflight.Finding("note", "quota", f"quotas not checked: {exc}")]
    return preflight.quota_findings(client, req.training_job, req.policy.to_dict())


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
    from sagewarden_cli.logs import JobLogReader, format_lines

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
    while True:
        env.sleep(a.interval)
        run = client.run(run["run_id"])
        latest = _pick_attempt(run, a.attempt)
        if latest is not None and (attempt is None or latest["number"] != attempt["number"]):
            if reader is not None:
                drain(reader)  # the rest of the attempt that ended
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


def cmd_cancel(env: Env) -> int:
    a = env.args
    client = env.ctx().client
    targets, worst = [], OK
    for ref in dict.fromkeys(a.runs):
        run = client.run(ref)
        if run["status"] in render.TERMINAL:
            # nothing to stop, nothing to confirm: say so (the API would answer 409, hence exit 1)
            env.note(_already_finished(run["name"], run["run_id"], run["status"]))
            worst = API_ERROR
            continue
        targets.append(run)
    if not targets:
        if env.json:
            env.emit_json([])
        return worst
    if not a.yes:
        listed = ", ".join(f"{r['name']} ({r['run_id']}, {r['status']})" for r in targets)
        env.stderr.write(f"Cancel {len(targets)} run(s): {listed}? [y/N] ")
        env.stderr.flush()
        answer = env.stdin.readline()
        if not answer:
            raise CliError("not confirmed (no answer on stdin): pass --yes to cancel without asking", USAGE)
        if answer.strip().lower() not in ("y", "yes"):
            env.note("nothing cancelled")
            return API_ERROR
    results: list[Any] = []
    for run in targets:
        resp = client.send("POST", f"/runs/{run['run_id']}/cancel")
        if resp.status == 409:  # it finished since it was read
            status = _json_field(resp.body, "status")
            if status in render.TERMINAL:
                env.note(_already_finished(run["name"], run["run_id"], status))
                worst = worst or API_ERROR
                continue
        if resp.status >= 400:
            err = client.api_error(resp)
            env.note(f"sagewarden: {run['name']} ({run['run_id']}): {err}")
            worst = worst or err.code
            continue
        after = client.decode(resp)
        results.append(after)
        if not env.json:
            if after["status"] == "CANCELLED":
                env.out(f"{after['name']} ({after['run_id']}): CANCELLED")
            else:
                env.out(
                    f"{after['name']} ({after['run_id']}): {after['status']}; CANCELLED once SageMaker confirms the stop"
                )
    if env.json:
        env.emit_json(results)
    return worst


def _already_finished(name: str, run_id: str, status: str) -> str:
    return f"sagewarden: run {name} ({run_id}) already finished ({status}): nothing to cancel"


def _json_field(body: bytes, key: str) -> Any:
    try:
        payload = json.loads(body) if body else None
    except ValueError:
        return None
    return payload.get(key) if isinstance(payload, dict) else None


def cmd_resume(env: Env) -> int:
    a = env.args
    client = env.ctx().client
    run_id = client.resolve(a.run)
    resp = client.send("POST", f"/runs/{run_id}/resume")
    if resp.status == 404:
        raise CliError(f"no run with id {run_id}", NOT_FOUND)
    if resp.status == 409:
        raise client.api_error(resp)  # the API says why, once
    run = client.decode(resp)
    if env.json:
        env.emit_json(run)
    else:
        env.out(render.run_view(run, client.now_ms()))
        env.note(f"\nfollow it: sagewarden get {run['name']} --follow")
    return OK


def cmd_doctor(env: Env) -> int:
    from sagewarden_cli import doctor

    return int(doctor.run(env.args))


def cmd_selftest(env: Env) -> int:  # --- selftest (sagewarden_cli/selftest.py) ---
    from sagewarden_cli import selftest

    return selftest.run(env)


COMMANDS: dict[str, Callable[[Env], int]] = {
    "submit": cmd_submit,
    "list": cmd_list,
    "ls": cmd_list,
    "get": cmd_get,
    "show": cmd_get,
    "events": cmd_events,
    "logs": cmd_logs,
    "cancel": cmd_cancel,
    "resume": cmd_resume,
    "doctor": cmd_doctor,
    "selftest": cmd_selftest,  # --- selftest ---
}


# -- entry point ------------------------------------------------------------------------------------
def main(
    argv: list[str] | None = None,
    *,
    transport: Transport | None = None,
    session: Any = None,
    stdin: TextIO | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Run the CLI; returns the exit code. `transport`, `session`, `stdin` and `sleep` are seams
    for tests (the drill's account behind the API, a virtual clock behind --follow)."""
    stdout, stderr = sys.stdout, sys.stderr
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help and --version
            return int(exc.code) if isinstance(exc.code, int) else OK
        for name, default in GLOBALS.items():
            if not hasattr(args, name):
                setattr(args, name, default)
        if not args.command:
            parser.print_help(stderr)
            return USAGE
        env = Env(
            args,
            transport=transport,
            session=session,
            stdin=stdin or sys.stdin,
            stdout=stdout,
            stderr=stderr,
            sleep=sleep,
        )
        return COMMANDS[args.command](env)
    except CliError as err:
        text = str(err)
        print(text if text.startswith("sagewarden") else f"sagewarden: {text}", file=stderr)
        for line in err.details:
            print(f"  {line}", file=stderr)
        return err.code
    except KeyboardInterrupt:
        print("sagewarden: interrupted", file=stderr)
        return INTERRUPTED
    except BrokenPipeError:  # `sagewarden logs RUN | head`
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return OK
    except Exception as exc:
        code, message = _aws_failure(exc)
        if code is None:
            if os.environ.get("SAGEWARDEN_DEBUG"):
                raise
            message = f"internal error: {type(exc).__name__}: {exc} (SAGEWARDEN_DEBUG=1 shows the traceback)"
            code = API_ERROR
        print(f"sagewarden: {message}", file=stderr)
        return code


def _aws_failure(exc: Exception) -> tuple[int | None, str]:
    """Exit code and one line for the AWS SDK's own failures (profile, credentials, endpoints)."""
    try:
        from botocore import exceptions as bx
    except ImportError:  # pragma: no cover
        return None, ""
    if isinstance(exc, bx.ProfileNotFound):
        return (
            USAGE,
            f"AWS profile {exc.kwargs.get('profile')!r} not found (`aws configure list-profiles` lists yours)",
        )
    if isinstance(exc, bx.NoCredentialsError | bx.PartialCredentialsError):
        return USAGE, f"no usable AWS credentials ({exc}); configure a profile or use --local"
    if isinstance(exc, bx.NoRegionError):
        return USAGE, "no AWS region: pass --region or set AWS_REGION"
    if isinstance(exc, bx.EndpointConnectionError | bx.ConnectTimeoutError | bx.ReadTimeoutError):
        return NETWORK, f"cannot reach AWS: {exc}"
    if isinstance(exc, bx.ClientError):
        err = exc.response.get("Error", {})
        code = NOT_FOUND if "NotFound" in str(err.get("Code", "")) else API_ERROR
        return code, f"AWS {exc.operation_name}: {err.get('Code', 'error')}: {err.get('Message', '')}"
    if isinstance(exc, bx.BotoCoreError):
        return USAGE, f"AWS configuration: {exc}"
    return None, ""
