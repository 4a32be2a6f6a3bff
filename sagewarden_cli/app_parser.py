"""The `sagewarden` command line: the global options, every command's arguments and help, and the
argument types they share. sagewarden_cli/app.py runs what it parses."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from sagewarden_cli.errors import EXIT_CODES, USAGE, CliError

VERSION = "0.1.0"
DEFAULT_INTERVAL_S = 5.0
GLOBALS = {"json": False, "profile": None, "region": None, "api_url": None, "stack": None, "local": False}
GLOBALS["logs_endpoint_url"] = None


def _statuses() -> list[str]:
    from sagewarden.domain.vocabulary.models import RunStatus

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
