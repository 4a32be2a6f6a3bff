"""sagewarden CLI.

  sagewarden submit run.json [--idempotency-key K]   POST /runs (body: {name, training_job, policy})
  sagewarden list [--status S] [--limit N] [--all]   GET /runs
  sagewarden get RUN_ID                              GET /runs/{id}
  sagewarden events RUN_ID [--all]                   GET /runs/{id}/events (the audit trail)
  sagewarden cancel RUN_ID                           POST /runs/{id}/cancel

The API URL comes from --api-url, $SAGEWARDEN_API_URL, or the `ApiUrl` output of the
CloudFormation stack named by --stack / $SAGEWARDEN_STACK (default "Sagewarden"). Requests are
signed with SigV4 using your usual AWS credentials (profile, environment, SSO, instance role).
Output is JSON (--json) or a short human view. Exit codes: 0 ok, 1 API error, 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

Transport = Callable[[str, str, dict[str, str], bytes | None], tuple[int, bytes]]


class CliError(Exception):
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def http_transport(method: str, url: str, headers: dict[str, str], body: bytes | None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


class Client:
    """Signs and sends API requests. `transport` is replaceable (tests route it into the drill)."""

    def __init__(
        self, api_url: str, *, session: Any, region: str, transport: Transport = http_transport
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self.session = session
        self.region = region
        self.transport = transport

    def call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        url = self.api_url + path + (f"?{urlencode(query)}" if query else "")
        data = json.dumps(body).encode() if body is not None else None
        req = AWSRequest(
            method=method, url=url, data=data, headers={"Content-Type": "application/json", **(headers or {})}
        )
        credentials = self.session.get_credentials()
        if credentials is None:
            raise CliError("no AWS credentials found (configure a profile, SSO or environment variables)", 2)
        SigV4Auth(credentials.get_frozen_credentials(), "execute-api", self.region).add_auth(req)
        status, raw = self.transport(method, url, dict(req.headers.items()), data)
        payload = json.loads(raw) if raw else None
        if status >= 400:
            message = (
                payload.get("message", "") if isinstance(payload, dict) else raw.decode(errors="replace")
            )
            errors = payload.get("errors", []) if isinstance(payload, dict) else []
            details = "".join(f"\n  {e['field']}: {e['message']}" for e in errors)
            raise CliError(f"HTTP {status}: {message}{details}")
        return payload

    def pages(self, path: str, key: str, query: dict[str, str], everything: bool) -> list[Any]:
        items: list[Any] = []
        while True:
            page = self.call("GET", path, query=query)
            items += page[key]
            cursor = page.get("next_cursor")
            if not everything or not cursor:
                return items
            query = {**query, "cursor": cursor}


def resolve_api_url(args: argparse.Namespace, session: Any) -> str:
    if args.api_url or os.environ.get("SAGEWARDEN_API_URL"):
        return str(args.api_url or os.environ["SAGEWARDEN_API_URL"])
    stack = args.stack or os.environ.get("SAGEWARDEN_STACK", "Sagewarden")
    try:
        described = session.client("cloudformation").describe_stacks(StackName=stack)
    except Exception as exc:
        raise CliError(
            f"cannot find the API URL: pass --api-url or deploy stack {stack!r} ({exc})", 2
        ) from exc
    for output in described["Stacks"][0].get("Outputs", []):
        if output["OutputKey"] == "ApiUrl":
            return str(output["OutputValue"])
    raise CliError(f"stack {stack!r} has no ApiUrl output", 2)


def _human_run(run: dict[str, Any]) -> str:
    lines = [
        f"{run['run_id']}  {run['name']}  {run['status']}  attempts {run['attempt_count']}  "
        f"restarts {run['restarts']}  est. ${run['estimated_cost_usd']:,.0f}"
    ]
    if run.get("outcome"):
        lines.append(f"  outcome: {run['outcome']}")
    if run.get("wait"):
        lines.append(f"  waiting for {run['wait']['reason']} until {run['wait']['until']}")
    if run.get("last_checkpoint"):
        lines.append(
            f"  last checkpoint: step {run['last_checkpoint']['step']} {run['last_checkpoint']['uri']}"
        )
    for a in run.get("attempts", []):
        resumed = a["resumed_from"]["step"] if a["resumed_from"] else "-"
        lines.append(
            f"  attempt {a['number']}: {a['instance_count']} x {a['instance_type']}  from step {resumed}  "
            f"{a['sagemaker_status'] or a['launch']}/{a['secondary_status'] or ''}  {a['end_class'] or ''}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None, *, transport: Transport | None = None, session: Any = None) -> int:
    parser = argparse.ArgumentParser(
        prog="sagewarden", description="Submit and watch supervised SageMaker runs."
    )
    parser.add_argument("--api-url")
    parser.add_argument("--stack", help="CloudFormation stack to read ApiUrl from (default Sagewarden)")
    parser.add_argument("--region")
    parser.add_argument("--profile")
    parser.add_argument("--json", action="store_true", help="print the API's JSON")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("submit", help="submit a run from a JSON file ('-' for stdin)")
    p.add_argument("file")
    p.add_argument("--idempotency-key")
    p = sub.add_parser("list", help="list runs, newest first")
    p.add_argument("--status")
    p.add_argument("--limit", type=int, default=25)
    p.add_argument("--all", action="store_true", help="follow every page")
    p = sub.add_parser("get", help="one run with its attempts")
    p.add_argument("run_id")
    p = sub.add_parser("events", help="a run's audit trail")
    p.add_argument("run_id")
    p.add_argument("--all", action="store_true")
    p = sub.add_parser("cancel", help="stop a run's job and cancel the run")
    p.add_argument("run_id")
    args = parser.parse_args(argv)

    try:
        if session is None:
            import boto3

            session = boto3.Session(profile_name=args.profile, region_name=args.region)
        region = args.region or session.region_name
        if not region:
            raise CliError("no AWS region: pass --region or configure one", 2)
        client = Client(
            resolve_api_url(args, session),
            session=session,
            region=region,
            transport=transport or http_transport,
        )
        out = _run(client, args)
    except CliError as err:
        print(f"sagewarden: {err}", file=sys.stderr)
        return err.code
    print(
        json.dumps(out, indent=2)
        if args.json or not isinstance(out, (dict, list))
        else _human(args.command, out)
    )
    return 0


def _run(client: Client, args: argparse.Namespace) -> Any:
    if args.command == "submit":
        try:
            text = sys.stdin.read() if args.file == "-" else open(args.file).read()  # noqa: SIM115
            body = json.loads(text)
        except (OSError, json.JSONDecodeError) as exc:
            raise CliError(f"cannot read {args.file}: {exc}", 2) from exc
        headers = {"Idempotency-Key": args.idempotency_key} if args.idempotency_key else None
        return client.call("POST", "/runs", body=body, headers=headers)
    if args.command == "list":
        query = {"limit": str(args.limit), **({"status": args.status} if args.status else {})}
        return client.pages("/runs", "runs", query, args.all)
    if args.command == "get":
        return client.call("GET", f"/runs/{args.run_id}")
    if args.command == "events":
        return client.pages(f"/runs/{args.run_id}/events", "events", {"limit": "100"}, args.all)
    return client.call("POST", f"/runs/{args.run_id}/cancel")


def _human(command: str, out: Any) -> str:
    if command == "list":
        return "\n".join(_human_run(r).splitlines()[0] for r in out) or "no runs"
    if command == "events":
        return "\n".join(f"{e['at']}  {e['kind']:<8} {e['summary']}" for e in out)
    return _human_run(out)


if __name__ == "__main__":
    sys.exit(main())
