"""Drive the `sagewarden` CLI in process against the drill's simulated account.

The CLI's signed HTTP requests are routed into `LocalAccount.api` (the template's API routes and
the real handler); its `--follow` sleeps advance the simulated world instead of waiting; its
CloudWatch Logs reads go to the account's moto backend (mock_aws intercepts the boto3 client).
"""

from __future__ import annotations

import email.utils
import io
import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import boto3
import yaml

from drill.account.local import BUCKET, EXECUTION_ROLE, LocalAccount
from drill.scenarios.runner import AccountStepper
from drill.scenarios.spec import default_training_job
from sagewarden_cli.app import main
from tests.doc_pages import documentation

API = "https://abc123.execute-api.us-east-1.amazonaws.com/prod"
RESUMABLE = ("FAILED", "CANCELLED")
REPR = re.compile(r"\bNone\b|\{'|\['|\b1[0-9]{12}\b")  # Python reprs or epoch milliseconds


REPO = Path(__file__).resolve().parents[2]


def readme_walkthrough() -> list[list[str]]:
    """The shell lines of the README's CLI section, each as its words (a line continued with a
    backslash joined to the next, comments dropped), in order: `source`, `export` and every
    `sagewarden` command, exactly as a user would type them."""
    text = documentation()
    section = re.split(r"\n#{1,2} ", text.split("### CLI\n", 1)[1], maxsplit=1)[0]
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", section, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words:
                lines.append(words)
    return lines


def session() -> Any:
    return boto3.Session(
        aws_access_key_id="AKIAEXAMPLE", aws_secret_access_key="secret", region_name="us-east-1"
    )


def run_body(name: str, **job: Any) -> dict[str, Any]:
    training_job = default_training_job(name, BUCKET, EXECUTION_ROLE)
    training_job.update(job)
    return {"name": name, "training_job": training_job}


def write_yaml(path: Any, body: dict[str, Any]) -> str:
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return str(path)


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@dataclass
class CliHarness:
    acct: LocalAccount
    capsys: Any
    seen: list[dict[str, str]] = field(default_factory=list)
    requests: list[tuple[str, str]] = field(default_factory=list)
    sleep_minutes: float = 10.0  # virtual minutes per --follow poll
    sleeps: int = 0
    max_sleeps: int = 500  # a follow that never ends fails the test instead of hanging it

    def __post_init__(self) -> None:
        from drill.alarms.evaluator import AlarmEvaluator

        self.world = AccountStepper(self.acct, AlarmEvaluator(self.acct))

    # -- the seams main() offers -------------------------------------------------------------
    def transport(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None
    ) -> tuple[Any, ...]:
        parts = urlsplit(url)
        assert parts.path.startswith("/prod"), url
        path = parts.path.removeprefix("/prod")
        self.seen.append(headers)
        self.requests.append((method, path))
        query = dict(parse_qsl(parts.query)) or None
        kept = {k: v for k, v in headers.items() if k.lower() == "idempotency-key"}
        if method == "POST" and path.endswith("/resume") and not self._has_route("POST", path):
            status, payload = self._resume_contract(path.split("/")[2])
        else:
            status, payload = self.acct.api(
                method, path, raw_body=body.decode() if body else None, query=query, headers=kept
            )
        date = email.utils.formatdate(self.acct.clock.now_ms / 1000, usegmt=True)
        return status, json.dumps(payload).encode() if payload is not None else b"", {"Date": date}

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        assert self.sleeps <= self.max_sleeps, "a --follow did not end"
        self.advance(self.sleep_minutes)

    # -- the simulated world -----------------------------------------------------------------
    def advance(self, minutes: float) -> None:
        target = self.acct.clock.now_ms + int(minutes * 60_000)
        while True:
            t = self.world.next_time(sweeping=True)
            if t is None or t > target:
                self.acct.sagemaker.advance(max(target, self.acct.clock.now_ms))
                # the CLI reads moto directly: lines that have landed by now are written out, as
                # the local server does before every read (drill/account/server.py)
                self.acct.sagemaker.flush_logs()
                return
            self.world.step(t, sweeping=lambda: True)

    def until(
        self, predicate: Callable[[], bool], *, step_minutes: float = 5, limit_minutes: float = 24 * 60
    ) -> None:
        spent = 0.0
        while not predicate():
            assert spent < limit_minutes, "the simulated world never reached the expected state"
            self.advance(step_minutes)
            spent += step_minutes

    def run(self, run_id: str) -> dict[str, Any]:
        status, run = self.acct.api("GET", f"/runs/{run_id}")
        assert status == 200, run
        return dict(run)

    def submit(self, body: dict[str, Any]) -> str:
        status, run = self.acct.api("POST", "/runs", body=body)
        assert status == 201, run
        return str(run["run_id"])

    # -- the CLI ----------------------------------------------------------------------------
    def cli(
        self, *args: str, stdin: str = "", api: bool = True, json_out: bool = False, **seams: Any
    ) -> Result:
        argv = [*(["--api-url", API] if api else []), *(["--json"] if json_out else []), *args]
        self.capsys.readouterr()
        code = main(
            argv,
            transport=seams.pop("transport", self.transport),
            session=seams.pop("session", session()),
            stdin=io.StringIO(stdin),
            sleep=seams.pop("sleep", self.sleep),
        )
        captured = self.capsys.readouterr()
        return Result(code, captured.out, captured.err)

    # -- POST /runs/{id}/resume, as the lead's route is specified (used until it exists) ------
    def _has_route(self, method: str, path: str) -> bool:
        return any(r.match(method, path) is not None for r in self.acct.router.api_routes)

    def _resume_contract(self, run_id: str) -> tuple[int, Any]:
        status, run = self.acct.api("GET", f"/runs/{run_id}")
        if status != 200:
            return status, run
        if run["status"] not in RESUMABLE:
            return 409, {"message": f"run {run_id} is {run['status']}", "status": run["status"]}
        return 202, run
