"""The environment a command runs in: its parsed arguments, its streams and its connection to the
API (made on first use). Its own module so that commands living elsewhere (selftest) take it
without importing the command table."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any, TextIO

from sagewarden_cli.client import Context, Transport, connect


class Env:
    def __init__(
        self,
        args: argparse.Namespace,
        *,
        transport: Transport | None,
        session: Any,
        stdin: TextIO,
        stdout: TextIO,
        stderr: TextIO,
        sleep: Callable[[float], None],
    ) -> None:
        self.args = args
        self.json = bool(args.json)
        self._transport = transport
        self._session = session
        self.stdin, self.stdout, self.stderr, self.sleep = stdin, stdout, stderr, sleep
        self._ctx: Context | None = None

    def ctx(self) -> Context:
        if self._ctx is None:
            a = self.args
            self._ctx = connect(
                api_url=a.api_url,
                stack=a.stack,
                region=a.region,
                profile=a.profile,
                local=bool(a.local),
                logs_endpoint_url=a.logs_endpoint_url,
                transport=self._transport,
                session=self._session,
            )
        return self._ctx

    def out(self, text: str = "") -> None:
        print(text, file=self.stdout, flush=True)

    def note(self, text: str) -> None:
        print(text, file=self.stderr, flush=True)

    def emit_json(self, value: Any, *, compact: bool = False) -> None:
        self.out(json.dumps(value, separators=(",", ":")) if compact else json.dumps(value, indent=2))
