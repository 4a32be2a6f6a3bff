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

Split by concern: the argument parser (app_parser.py), the commands by group (app_submit.py,
app_inspect.py, app_control.py; doctor.py and selftest.py for theirs) and, here, the command
table and the entry point, `main`. Every public name of those modules is importable from here.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from sagewarden_cli.app_control import cmd_cancel, cmd_resume
from sagewarden_cli.app_inspect import attempt_ended, cmd_events, cmd_get, cmd_list, cmd_logs
from sagewarden_cli.app_parser import (
    DEFAULT_INTERVAL_S,
    EXIT_TABLE,
    GLOBALS,
    VERSION,
    Parser,
    build_parser,
)
from sagewarden_cli.app_submit import cmd_submit
from sagewarden_cli.client import Transport
from sagewarden_cli.env import Env
from sagewarden_cli.errors import API_ERROR, INTERRUPTED, NETWORK, NOT_FOUND, OK, USAGE, CliError

__all__ = [
    "COMMANDS",
    "DEFAULT_INTERVAL_S",
    "EXIT_TABLE",
    "GLOBALS",
    "VERSION",
    "Parser",
    "attempt_ended",
    "build_parser",
    "cmd_cancel",
    "cmd_doctor",
    "cmd_events",
    "cmd_get",
    "cmd_list",
    "cmd_logs",
    "cmd_resume",
    "cmd_selftest",
    "cmd_submit",
    "main",
]


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
