"""The API client: where the API is, how requests are signed and sent, what a failure means.

The API URL comes from --api-url, $SAGEWARDEN_API_URL, or the `ApiUrl` output of the
CloudFormation stack (--stack / $SAGEWARDEN_STACK, default "Sagewarden"). Requests are signed
with SigV4 for `execute-api` in the API's own region (read from its execute-api host name, so a
different default region does not break the signature).

Local mode (--local, or an API URL on 127.0.0.1/localhost/::1) talks to `python -m drill serve`:
requests are signed with fixed local credentials (never yours), and CloudWatch Logs are read
from the endpoint the local server announces at GET /_local. The code path is otherwise the
same as against a deployed API.
"""

from __future__ import annotations

import contextlib
import email.utils
import html
import http.client
import json
import os
import re
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from sagewarden_cli.errors import API_ERROR, NETWORK, NOT_FOUND, USAGE, CliError

# (method, url, headers, body) -> (status, body) or (status, body, headers)
Transport = Callable[[str, str, dict[str, str], bytes | None], tuple[Any, ...]]

DEFAULT_STACK = "Sagewarden"
DEFAULT_LOCAL_URL = "http://127.0.0.1:8765"
LOCAL_REGION = "us-east-1"
LOCAL_CREDENTIALS = ("local", "local")  # what local mode signs with; the local server ignores them
LOCAL_INFO_PATH = "/_local"
TIMEOUT_S = 30.0
RUN_ID_RE = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")
TERMINAL_STATUSES = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})
_EXECUTE_API_HOST = re.compile(r"^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$")
_LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


def http_transport(
    method: str, url: str, headers: dict[str, str], body: bytes | None, timeout: float = TIMEOUT_S
) -> tuple[int, bytes, dict[str, str]]:
    """Send one request with the standard library; network failures become CliError(NETWORK)."""
    request = urllib.request.Request(url, data=body, headers=headers, method=method)
    host = urlsplit(url).netloc
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return resp.status, resp.read(), dict(resp.headers.items())
    except urllib.error.HTTPError as err:
        return err.code, err.read(), dict(err.headers.items()) if err.headers else {}
    except urllib.error.URLError as err:
        raise CliError(f"cannot reach {host}: {_network_reason(err.reason)}", NETWORK) from err
    except TimeoutError as err:
        raise CliError(f"cannot reach {host}: timed out after {timeout:g} s", NETWORK) from err
    except (http.client.HTTPException, ConnectionError, OSError) as err:
        raise CliError(f"cannot reach {host}: {_network_reason(err)}", NETWORK) from err


def _network_reason(reason: Any) -> str:
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    if isinstance(reason, TimeoutError):
        return "timed out"
    if isinstance(reason, socket.gaierror):
        return "host name not found (DNS)"
    if isinstance(reason, ssl.SSLError):
        return f"TLS error ({reason.reason or reason})"
    if isinstance(reason, http.client.RemoteDisconnected):
        return "the server closed the connection without answering"
    return str(getattr(reason, "strerror", None) or reason) or type(reason).__name__


def is_loopback(url: str) -> bool:
    return (urlsplit(url).hostname or "") in _LOOPBACK


def region_of_api(url: str) -> str | None:
    """The region of an execute-api URL (the region its signature must name), else None."""
    m = _EXECUTE_API_HOST.match(urlsplit(url).hostname or "")
    return m.group(1) if m else None


@dataclass
class Response:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


class Client:
    """Signs and sends API requests. `transport` is replaceable (tests route it into the drill)."""

    def __init__(
        self,
        api_url: str,
        *,
        credentials: Any,
        region: str,
        transport: Transport = http_transport,
        local: bool = False,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self.credentials = credentials  # botocore Credentials (or anything with get_frozen_credentials)
        self.region = region
        self.transport = transport
        self.local = local
        self.server_now_ms: int | None = None  # the Date of the last response (the server's "now")

    # -- requests ------------------------------------------------------------------------------
    def send(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        url = self.api_url + path + (f"?{urlencode(dict(query))}" if query else "")
        data = json.dumps(body).encode() if body is not None else None
        req = AWSRequest(
            method=method,
            url=url,
            data=data,
            headers={"Content-Type": "application/json", "Accept": "application/json", **(headers or {})},
        )
        SigV4Auth(self.credentials.get_frozen_credentials(), "execute-api", self.region).add_auth(req)
        try:
            result = self.transport(method, url, dict(req.headers.items()), data)
        except CliError:
            raise
        except OSError as err:  # a test transport's ConnectionRefusedError, TimeoutError ...
            raise CliError(f"cannot reach {urlsplit(url).netloc}: {_network_reason(err)}", NETWORK) from err
        resp = Response(int(result[0]), result[1] or b"", dict(result[2]) if len(result) > 2 else {})
        self._note_date(resp.headers)
        return resp

    def call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """The JSON body of a 2xx answer; any other answer raises CliError (see `api_error`)."""
        return self.decode(self.send(method, path, body=body, query=query, headers=headers))

    def decode(self, resp: Response) -> Any:
        """The JSON body of a 2xx answer; any other answer raises CliError (see `api_error`)."""
        if resp.status >= 400:
            raise self.api_error(resp)
        if not resp.body:
            return None
        try:
            return json.loads(resp.body)
        except ValueError as exc:
            raise CliError(
                f"HTTP {resp.status} from {self.api_url} is not JSON ({_snippet(resp)}): "
                "is --api-url the sagewarden API (it ends with the stage, e.g. /prod)?",
                API_ERROR,
            ) from exc

    def api_error(self, resp: Response) -> CliError:
        """One clear line for a failed answer: the API's own JSON, API Gateway's {"Message": ...},
        or a proxy's HTML page."""
        status = resp.status
        code = NOT_FOUND if status == 404 else API_ERROR
        try:
            payload = json.loads(resp.body) if resp.body else None
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            what = "an empty body" if not resp.body else f"not JSON: {_snippet(resp)}"
            hint = " (a proxy or load balancer answered, not the API)" if status >= 500 else ""
            return CliError(f"HTTP {status} from {urlsplit(self.api_url).netloc}: {what}{hint}", code)
        # the API says "message"; API Gateway's own errors (authorizer, throttling) say "Message"
        message = str(payload.get("message") or payload.get("Message") or _REASONS.get(status, "error"))
        details = [
            f"{e.get('field', '?')}: {e.get('message', '')}"
            for e in payload.get("errors", []) or []
            if isinstance(e, dict)
        ]
        hint = _hint(status, message, self.region)
        if payload.get("request_id"):
            hint += f" (request id {payload['request_id']})"
        return CliError(f"HTTP {status}: {message}{hint}", code, details)

    def pages(
        self, path: str, key: str, query: Mapping[str, str] | None = None, *, everything: bool = True
    ) -> list[Any]:
        items: list[Any] = []
        q = dict(query or {})
        while True:
            page = self.call("GET", path, query=q)
            items += page[key]
            cursor = page.get("next_cursor")
            if not everything or not cursor:
                return items
            q["cursor"] = cursor

    # -- runs ----------------------------------------------------------------------------------
    def resolve(self, ref: str) -> str:
        """A run id for `ref`: a run id as given, else the one run with that name, else the one
        *live* run with that name (at most one live run holds a name; finished runs may share it)."""
        if RUN_ID_RE.match(ref):
            return ref
        if not ref or "/" in ref:
            raise CliError(f"no run {ref!r}: give a run id or a run name", NOT_FOUND)
        matches = [r for r in self.pages("/runs", "runs", {"limit": "100"}) if r.get("name") == ref]
        if not matches:
            raise CliError(f"no run named {ref!r} (and it is not a run id); see `sagewarden list`", NOT_FOUND)
        live = [r for r in matches if r.get("status") not in TERMINAL_STATUSES]
        if len(matches) > 1 and len(live) == 1:
            return str(live[0]["run_id"])
        if len(matches) > 1:
            listed = ", ".join(f"{r['run_id']} ({r['status']})" for r in matches)
            raise CliError(f"{len(matches)} runs are named {ref!r}: {listed}; give the run id instead", USAGE)
        return str(matches[0]["run_id"])

    def run(self, ref: str) -> dict[str, Any]:
        run_id = self.resolve(ref)
        try:
            return dict(self.call("GET", f"/runs/{quote(run_id, safe='')}"))
        except CliError as err:
            if err.code == NOT_FOUND:
                raise CliError(f"no run with id {run_id}", NOT_FOUND) from err
            raise

    def local_info(self) -> dict[str, Any]:
        """What the local server announces (its logs endpoint, virtual time); local mode only."""
        resp = self.send("GET", LOCAL_INFO_PATH)
        try:
            info = json.loads(resp.body) if resp.status == 200 else None
        except ValueError:
            info = None
        if not isinstance(info, dict) or "logs_endpoint_url" not in info:
            raise CliError(
                f"{self.api_url} does not answer like `python -m drill serve` (GET {LOCAL_INFO_PATH} "
                f"gave HTTP {resp.status}); pass --logs-endpoint-url to read logs elsewhere",
                USAGE,
            )
        return info

    def now_ms(self) -> int:
        """The server's clock when known (a local server runs on virtual time), else this host's."""
        return self.server_now_ms if self.server_now_ms is not None else int(time.time() * 1000)

    def _note_date(self, headers: Mapping[str, str]) -> None:
        value = next((v for k, v in headers.items() if k.lower() == "date"), None)
        if value:
            with contextlib.suppress(TypeError, ValueError, IndexError):
                self.server_now_ms = int(email.utils.parsedate_to_datetime(value).timestamp() * 1000)


_REASONS = {400: "bad request", 403: "forbidden", 404: "not found", 429: "too many requests"}


def _hint(status: int, message: str, region: str) -> str:
    low = message.lower()
    if status == 403 and "missing authentication token" in low:
        return " (no such route at this URL: check --api-url; it ends with the stage, e.g. /prod)"
    if status == 403 and "signature" in low:
        return f" (check your credentials, and that the API is in {region})"
    if status == 403 and ("security token" in low or "expired" in low):
        return " (your credentials are invalid or expired: `aws sso login` or refresh them)"
    if status == 403 and "not authorized" in low:
        return " (your IAM identity needs execute-api:Invoke on this API)"
    if status == 429:
        return " (throttled by API Gateway: retry in a moment)"
    return ""


def _snippet(resp: Response) -> str:
    text = resp.body.decode("utf-8", errors="replace")
    title = re.search(r"<title[^>]*>(.*?)</title>", text, re.IGNORECASE | re.DOTALL)
    if title:
        text = title.group(1)
    elif "<" in text and ">" in text:
        text = re.sub(r"<[^>]+>", " ", text)
    text = " ".join(html.unescape(text).split())
    return repr(text[:80] + ("..." if len(text) > 80 else "")) if text else "an empty body"


# -- configuration ---------------------------------------------------------------------------------
@dataclass
class Context:
    """Everything a command needs: the API client, the AWS session for direct reads (logs,
    Service Quotas), and whether this is local mode."""

    client: Client
    session: Any
    region: str
    local: bool
    logs_endpoint_url: str | None = None

    def aws_client(self, service: str) -> Any:
        from botocore.config import Config

        endpoint = None
        if service == "logs":
            endpoint = self.logs_endpoint_url
            if endpoint is None and self.local:
                endpoint = self.logs_endpoint_url = str(self.client.local_info()["logs_endpoint_url"])
        elif self.local:  # the local server's simulated account (e.g. its CloudFormation stack)
            endpoint = str(self.client.local_info()["aws_endpoint_url"])
        config = Config(retries={"mode": "standard", "max_attempts": 3}, connect_timeout=5, read_timeout=30)
        return self.session.client(service, region_name=self.region, endpoint_url=endpoint, config=config)


def env_region() -> str | None:
    """$AWS_REGION wins over $AWS_DEFAULT_REGION, as in the AWS CLI v2."""
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None


def connect(
    *,
    api_url: str | None,
    stack: str | None,
    region: str | None,
    profile: str | None,
    local: bool,
    logs_endpoint_url: str | None,
    transport: Transport | None = None,
    session: Any = None,
) -> Context:
    import boto3
    from botocore.credentials import Credentials

    url = api_url or os.environ.get("SAGEWARDEN_API_URL") or None
    logs_url = logs_endpoint_url or os.environ.get("SAGEWARDEN_LOGS_ENDPOINT_URL") or None
    if local or (url and is_loopback(url)):
        url = url or DEFAULT_LOCAL_URL
        if urlsplit(url).scheme not in ("http", "https"):
            raise CliError(f"--api-url {url!r} is not an http(s) URL", USAGE)
        the_region = region or env_region() or LOCAL_REGION
        if session is None:
            session = boto3.Session(
                aws_access_key_id=LOCAL_CREDENTIALS[0],
                aws_secret_access_key=LOCAL_CREDENTIALS[1],
                region_name=the_region,
            )
        client = Client(
            url,
            credentials=Credentials(*LOCAL_CREDENTIALS),
            region=the_region,
            transport=transport or http_transport,
            local=True,
        )
        return Context(client, session, the_region, True, logs_url)

    if session is None:
        session = boto3.Session(profile_name=profile)  # ProfileNotFound is reported by main
    the_region = region or env_region() or session.region_name
    if url is None:
        if not the_region:
            raise CliError(
                "no AWS region: pass --region or set AWS_REGION (needed to find the stack's ApiUrl)", USAGE
            )
        url = stack_api_url(session, stack or os.environ.get("SAGEWARDEN_STACK") or DEFAULT_STACK, the_region)
    if urlsplit(url).scheme not in ("http", "https"):
        raise CliError(f"API URL {url!r} is not an http(s) URL", USAGE)
    signing_region = region_of_api(url) or the_region
    if not signing_region:
        raise CliError("no AWS region: pass --region or set AWS_REGION", USAGE)
    credentials = session.get_credentials()
    if credentials is None:
        raise CliError(
            "no AWS credentials found: configure a profile (`aws configure` or `aws sso login`) or set "
            "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY; for the local server use --local",
            USAGE,
        )
    client = Client(
        url, credentials=credentials, region=signing_region, transport=transport or http_transport
    )
    return Context(client, session, the_region or signing_region, False, logs_url)


def stack_api_url(session: Any, stack: str, region: str) -> str:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        described = session.client("cloudformation", region_name=region).describe_stacks(StackName=stack)
    except ClientError as exc:
        message = exc.response.get("Error", {}).get("Message", str(exc))
        raise CliError(
            f"cannot find the API URL: stack {stack!r} in {region}: {message}; pass --api-url or --stack",
            USAGE,
        ) from exc
    except BotoCoreError:
        raise  # credentials, endpoint: reported by main with their own exit codes
    except Exception as exc:
        raise CliError(
            f"cannot find the API URL: pass --api-url or deploy stack {stack!r} ({exc})", USAGE
        ) from exc
    for output in described["Stacks"][0].get("Outputs", []):
        if output["OutputKey"] == "ApiUrl":
            return str(output["OutputValue"])
    raise CliError(f"stack {stack!r} has no ApiUrl output (is it the sagewarden stack?)", USAGE)
