"""`python -m drill serve`: the sagewarden API on a simulated account, over HTTP, in real time.

    python -m drill serve [--port 8765] [--speed 600] [--scenario NAME|FILE [--submit]]
    sagewarden --local submit examples/run.yaml      # or SAGEWARDEN_API_URL=http://127.0.0.1:8765

Holds the HTTP API, the virtual-time thread and moto's AWS endpoint. Why: docs/drill.md (*The account*)."""

from __future__ import annotations

import argparse
import email.utils
import json
import shlex
import shutil
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import parse_qsl, urlsplit

from drill.account.deploy import stack_outputs
from drill.account.local import (
    ACCOUNT,
    BUCKET,
    EXECUTION_ROLE,
    REGION,
    STACK_NAME,
    Delivery,
    LocalAccount,
    template_for,
)
from drill.clock import from_ms
from drill.scenarios.runner import AccountStepper
from sagewarden import keys

DEFAULT_PORT = 8765
DEFAULT_SPEED = 600.0
INFO_PATH = "/_local"
MAX_BODY_BYTES = 10 * 1024 * 1024  # API Gateway's payload limit
MINUTE_MS = 60_000


class LocalServer:
    """The simulated account behind an HTTP API and an AWS endpoint, stepping in real time."""

    def __init__(
        self,
        template: Mapping[str, Any],
        *,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        speed: float = DEFAULT_SPEED,
        scenario: Any = None,  # drill.scenarios.spec.Scenario: its account, profiles and faults
        submit: bool = False,  # also submit the scenario's runs at their submit_at_min
        tick_s: float = 0.05,
        start_ms: int | None = None,
        verbose: bool = False,
        log: TextIO | None = None,
    ) -> None:
        if speed <= 0:
            raise ValueError("speed must be positive")
        self.template = template
        self.host = host
        self.port = port
        self.speed = speed
        self.scenario = scenario
        self.tick_s = tick_s
        self.verbose = verbose
        self.log = log or sys.stderr
        self.lock = threading.RLock()
        self.start_ms = start_ms if start_ms is not None else int(time.time()) * 1000
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._scheduled: list[tuple[int, Any]] = []
        self._want_submit = submit
        self.error: str | None = None  # the step that failed, when the clock had to stop
        self.submitted: dict[str, str] = {}  # scenario run name -> run id (--submit)

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        from drill.alarms.evaluator import AlarmEvaluator

        sc = self.scenario
        options: dict[str, Any] = {}
        if sc is not None:
            options = {
                "seed": sc.seed,
                "quotas": sc.quotas,
                "total_instance_quota": sc.total_instance_quota,
                "spot_quotas": sc.spot_quotas,
                "total_spot_instance_quota": sc.total_spot_instance_quota,
                "startup": sc.startup,
                "warm_pools": sc.warm_pools,
                "metric_delay": sc.metric_delay,
                "delivery": Delivery(**sc.delivery) if sc.delivery else Delivery(),
                "timestamp_form": sc.timestamp_form,
                "policy_defaults": sc.policy_defaults,
                "reconcile_interval_min": sc.reconcile_interval_min,
                "heartbeat_outages": sc.heartbeat_outages,
            }
        # the IAM replay is the drill's and the tests' job; a long-lived server only serves
        template = (
            self.template
            if sc is None
            else template_for(dict(self.template), log_subscription=sc.log_subscription)
        )
        self.account = LocalAccount(
            template, store="memory", start_ms=self.start_ms, iam_replay=False, **options
        )
        self.account.__enter__()
        try:
            if sc is not None:
                for spec in sc.runs:
                    self.account.sagemaker.set_profile(spec.name, spec.profile)
                for fault in sc.faults:
                    self.account.sagemaker.inject(fault)
                if self._want_submit:
                    self._scheduled = sorted(
                        ((self.start_ms + int(s.submit_at_min * MINUTE_MS), s) for s in sc.runs),
                        key=lambda item: item[0],
                    )
            self.world = AccountStepper(self.account, AlarmEvaluator(self.account))
            self._wall0 = time.monotonic()
            self._start_aws_endpoint()
            self._start_api()
            self._publish_stack(template)
            clock = threading.Thread(target=self._run_clock, name="drill-clock", daemon=True)
            clock.start()
            self._threads.append(clock)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        self._stop.set()
        for server in (getattr(self, "_api", None), getattr(self, "_aws", None)):
            if server is not None:
                server.shutdown()
                server.server_close()
        for t in self._threads:
            t.join(timeout=5)
        self._threads.clear()
        account = getattr(self, "account", None)
        if account is not None:
            self.account = None  # type: ignore[assignment]
            account.__exit__(None, None, None)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self._api.server_address[1]}"

    @property
    def aws_url(self) -> str:
        return f"http://{self.host}:{self._aws.server_port}"

    # -- virtual time -----------------------------------------------------------------------
    def virtual_target_ms(self) -> int:
        return self.start_ms + int((time.monotonic() - self._wall0) * self.speed * 1000)

    def advance_to(self, target_ms: int) -> None:
        """Let everything due up to ``target_ms`` happen, one step at a time (the lock is released
        between steps so API requests are served while the clock catches up)."""
        while not self._stop.is_set():
            with self.lock:
                acct = self.account
                now = acct.clock.now_ms
                due = [
                    t for t in (self.world.next_time(sweeping=True), self._next_scheduled()) if t is not None
                ]
                nxt = max(min(due), now) if due else None
                if nxt is None or nxt > target_ms:
                    if target_ms > now:
                        acct.sagemaker.advance(target_ms)
                    return
                self.world.step(nxt, sweeping=lambda: True, scripted=self._submit_due)

    def _run_clock(self) -> None:
        while not self._stop.wait(self.tick_s):
            if self.error is not None:
                continue
            try:
                self.advance_to(self.virtual_target_ms())
            except Exception:
                self.error = traceback.format_exc()
                print(
                    "drill serve: the simulated world failed a step and its clock stopped (the API still "
                    f"answers):\n{self.error}",
                    file=self.log,
                    flush=True,
                )

    def _next_scheduled(self) -> int | None:
        return self._scheduled[0][0] if self._scheduled else None

    def _submit_due(self) -> None:
        while self._scheduled and self._scheduled[0][0] <= self.account.clock.now_ms:
            _, spec = self._scheduled.pop(0)
            headers = {"Idempotency-Key": spec.idempotency_key} if spec.idempotency_key else {}
            status, body = self.account.api("POST", "/runs", body=spec.body, headers=headers)
            if status in (200, 201):
                self.submitted[spec.name] = body["run_id"]
            else:
                print(
                    f"drill serve: submitting {spec.name} failed: HTTP {status} {body}",
                    file=self.log,
                    flush=True,
                )

    # -- API ----------------------------------------------------------------------------------
    def _start_api(self) -> None:
        server = ThreadingHTTPServer((self.host, self.port), _ApiHandler)
        server.daemon_threads = True
        server.local = self  # type: ignore[attr-defined]
        self._api = server
        t = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="drill-api", daemon=True
        )
        t.start()
        self._threads.append(t)

    def info(self) -> dict[str, Any]:
        now = self.account.clock.now_ms
        return {
            "api_url": self.url,
            "logs_endpoint_url": self.aws_url,
            "aws_endpoint_url": self.aws_url,
            "region": REGION,
            "account": ACCOUNT,
            "virtual_time": from_ms(now).isoformat(timespec="seconds").replace("+00:00", "Z"),
            "speed": self.speed,
            "allowed_role_arns": [EXECUTION_ROLE],
            "checkpoint_buckets": [BUCKET],
            "scenario": self.scenario.name if self.scenario is not None else None,
            "clock_stopped": self.error is not None,
        }

    def handle_api(
        self, method: str, path: str, query: dict[str, str] | None, headers: dict[str, str], body: str | None
    ) -> tuple[int, Any]:
        with self.lock:
            return self.account.api(method, path, raw_body=body, query=query, headers=headers)

    # -- the deployed stack, as CloudFormation describes it ------------------------------------
    def _publish_stack(self, template: Mapping[str, Any]) -> None:
        """The stack's outputs in the simulated CloudFormation (``DescribeStacks`` at the AWS
        endpoint), as a deploy leaves them: the API URL, the job prefix, and the alarm-shape
        check's report (``sagewarden selftest`` prints it)."""
        import boto3

        outputs = stack_outputs(
            template, api_url=self.url, job_prefix=keys.DEFAULT_JOB_PREFIX, shapes=self.account.alarm_shapes
        )
        body = {"Resources": {}, "Outputs": {k: {"Value": v} for k, v in outputs.items()}}
        with self.lock:
            cloudformation = boto3.client("cloudformation", region_name=REGION)
            cloudformation.create_stack(StackName=STACK_NAME, TemplateBody=json.dumps(body))

    # -- AWS endpoint (moto's server app) -----------------------------------------------------
    def _start_aws_endpoint(self) -> None:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
        from werkzeug.serving import WSGIRequestHandler, make_server

        class Quiet(WSGIRequestHandler):
            def log_request(self, *args: Any, **kwargs: Any) -> None:
                pass

        app = DomainDispatcherApplication(create_backend_app)
        local = self

        def locked(environ: dict[str, Any], start_response: Any) -> list[bytes]:
            with local.lock:
                local.account.sagemaker.flush_logs()  # the simulator buffers log lines until read
                return list(app(environ, start_response))

        self._aws = make_server(self.host, 0, locked, threaded=True, request_handler=Quiet)
        t = threading.Thread(
            target=self._aws.serve_forever, kwargs={"poll_interval": 0.1}, name="drill-aws", daemon=True
        )
        t.start()
        self._threads.append(t)

    # -- banner -------------------------------------------------------------------------------
    def banner(self) -> str:
        virtual = from_ms(self.start_ms).isoformat(timespec="seconds").replace("+00:00", "Z")
        lines = [
            f"sagewarden local API on a simulated account: virtual time x{self.speed:g} from {virtual}",
            f"  API            {self.url}",
            f"  AWS endpoint   {self.aws_url}   (moto: CloudWatch Logs for `sagewarden logs`)",
            f"  allowed role   {EXECUTION_ROLE}",
            f"  bucket         s3://{BUCKET}/",
        ]
        if self.scenario is not None:
            what = "runs submitted on schedule" if self._want_submit else "runs not submitted"
            lines.append(f"  scenario       {self.scenario.name} (account, profiles and faults; {what})")
        command = cli_command()
        lines += [
            "",
            "Use it without AWS credentials:",
            f"  {command} --local --api-url {self.url} submit {shlex.quote(_from_here(EXAMPLE_RUN))}",
            f"  export SAGEWARDEN_API_URL={self.url}   # a loopback URL means local mode",
        ]
        if command != "sagewarden":
            activate = Path(sys.executable).parent / "activate"
            how = (
                f"source {shlex.quote(_from_here(activate))}" if activate.is_file() else "install the project"
            )
            lines.append(f"  ({how} to type `sagewarden` alone: it is not on your PATH)")
        lines += [
            "Other SigV4 clients (awscurl, SDKs) may sign with any keys, e.g.",
            f"  AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local AWS_REGION={REGION}",
            "Ctrl-C stops the server (the simulated account lives in memory only).",
        ]
        return "\n".join(lines)


EXAMPLE_RUN = Path(__file__).resolve().parents[2] / "examples" / "run.yaml"


def _from_here(path: Path) -> str:
    """``path`` as typed from the current directory: relative below it, else absolute."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def cli_command() -> str:
    """How to type the `sagewarden` command here, so that the banner's example works as printed:
    `sagewarden` when PATH finds this environment's script, else that script's path (make setup
    installs it as .venv/bin/sagewarden), else this interpreter with `-m sagewarden_cli`."""
    script = Path(sys.executable).parent / "sagewarden"
    found = shutil.which("sagewarden")
    if script.is_file():
        if found is not None and Path(found).resolve() == script.resolve():
            return "sagewarden"
        return shlex.quote(_from_here(script))
    return f"{shlex.quote(_from_here(Path(sys.executable)))} -m sagewarden_cli"


class _ApiHandler(BaseHTTPRequestHandler):
    server_version = "sagewarden-local/1"

    @property
    def local(self) -> LocalServer:
        return self.server.local  # type: ignore[attr-defined]

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def date_time_string(self, timestamp: float | None = None) -> str:
        account = self.local.account
        now = account.clock.now_ms / 1000 if account is not None else time.time()
        return email.utils.formatdate(now, usegmt=True)

    def log_message(self, format: str, *args: Any) -> None:
        if self.local.verbose:
            print(f"drill serve: {self.address_string()} {format % args}", file=self.local.log, flush=True)

    def _handle(self, method: str) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            self._send(413, {"message": "Request Too Long"})
            return
        raw = self.rfile.read(length) if length else b""
        if method == "GET" and parts.path == INFO_PATH:
            self._send(200, self.local.info())
            return
        if not (self.headers.get("Authorization") or "").startswith("AWS4-HMAC-SHA256 "):
            # what API Gateway answers an unsigned request to an AWS_IAM route
            self._send(403, {"message": "Missing Authentication Token"})
            return
        query = dict(parse_qsl(parts.query, keep_blank_values=True)) or None
        headers = {"Content-Type": self.headers.get("Content-Type") or "application/json"}
        if self.headers.get("Idempotency-Key") is not None:
            headers["Idempotency-Key"] = self.headers["Idempotency-Key"]
        body = raw.decode("utf-8", errors="replace") if raw else None
        try:
            status, payload = self.local.handle_api(
                method, parts.path.rstrip("/") or "/", query, headers, body
            )
        except Exception:
            traceback.print_exc(file=self.local.log)
            status, payload = 502, {"message": "Internal server error"}  # API Gateway's text for a crash
        self._send(status, payload)

    def _send(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode() if payload is not None else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m drill serve",
        description="Serve the sagewarden API on a simulated account (no AWS needed) for the CLI's local mode.",
        epilog="example:\n  python -m drill serve --speed 600 --scenario default --submit\n"
        "  sagewarden --local list",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"API port (default {DEFAULT_PORT}; 0 picks one)"
    )
    parser.add_argument(
        "--speed",
        type=float,
        default=DEFAULT_SPEED,
        help=f"virtual seconds per wall-clock second (default {DEFAULT_SPEED:g}: ten minutes per second)",
    )
    parser.add_argument(
        "--scenario",
        help="a scenario (name in drill/scenarios/ or a file): its account, job profiles and faults",
    )
    parser.add_argument(
        "--submit", action="store_true", help="also submit the scenario's runs on its schedule"
    )
    parser.add_argument("--verbose", action="store_true", help="print every API request")
    args = parser.parse_args(argv)
    if args.speed <= 0:
        parser.error("--speed must be positive")
    if args.submit and not args.scenario:
        parser.error("--submit needs --scenario")

    from drill.account.local import drill_template

    scenario = None
    if args.scenario:
        from drill.scenarios.spec import load

        try:
            scenario = load(args.scenario, bucket=BUCKET, role_arn=EXECUTION_ROLE)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"python -m drill serve: cannot load scenario {args.scenario!r}: {exc}", file=sys.stderr)
            return 2
    server = LocalServer(
        drill_template(),
        host=args.host,
        port=args.port,
        speed=args.speed,
        scenario=scenario,
        submit=args.submit,
        verbose=args.verbose,
    )
    try:
        server.start()
    except OSError as exc:
        print(
            f"python -m drill serve: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        return 2
    print(server.banner(), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("\nstopped", flush=True)
    finally:
        server.stop()
    return 0
