"""Every failure of `sagewarden` is one clear line on stderr and a documented exit code: bad
files, bad --set, what API Gateway or a proxy answers, the network, the AWS configuration,
Ctrl-C. No traceback, ever."""

from __future__ import annotations

import json
import socket

import pytest

from sagewarden_cli.app import main
from sagewarden_cli.errors import API_ERROR, INTERRUPTED, NETWORK, NOT_FOUND, USAGE
from tests.scenarios.cli_support import API, run_body, session, write_yaml

RUN_ID = "01KE5Q86000DNQ47GXEV9VZMPH"


def cli(capsys, *argv, transport=None, sess="default", stdin=None, sleep=None):
    import io

    capsys.readouterr()
    code = main(
        list(argv),
        transport=transport,
        session=session() if sess == "default" else sess,
        stdin=io.StringIO(stdin or ""),
        sleep=sleep or (lambda s: None),
    )
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return code, out.out, out.err


def answer(status, body, content_type="application/json"):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()

    def transport(method, url, headers, payload):
        return status, data, {"Content-Type": content_type}

    return transport


def one_line(err):
    assert err.endswith("\n") and err.count("\n") == 1, err
    return err.strip()


# -- the API and what stands in front of it ----------------------------------------------------------
@pytest.mark.claim(
    "Every failure is one line on stderr (a refused request adds one line per field error), never a traceback: API Gateway's own `{\"Message\": ...}` 403 and 429 answers and a proxy's HTML error page included."
)
def test_api_gateway_403_message_is_one_line_with_a_hint(capsys):
    body = {"Message": "User: arn:aws:sts::123456789012:assumed-role/dev/alice is not authorized to perform: "
                       "execute-api:Invoke on resource: arn:aws:execute-api:us-east-1:123456789012:abc123/prod/GET/runs"}  # fmt: skip
    code, _, err = cli(capsys, "--api-url", API, "list", transport=answer(403, body))
    assert code == API_ERROR
    line = one_line(err)
    assert line.startswith(
        "sagewarden: HTTP 403: User: arn:aws:sts::123456789012:assumed-role/dev/alice is not"
    )
    assert line.endswith("(your IAM identity needs execute-api:Invoke on this API)")

    code, _, err = cli(
        capsys, "--api-url", API, "list", transport=answer(403, {"message": "Missing Authentication Token"})
    )
    assert code == API_ERROR and "no such route at this URL: check --api-url" in one_line(err)

    sig = {"message": "The request signature we calculated does not match the signature you provided."}
    code, _, err = cli(capsys, "--api-url", API, "list", transport=answer(403, sig))
    assert "check your credentials, and that the API is in us-east-1" in one_line(err)


@pytest.mark.claim(
    "`1` the API refused or failed the request (4xx except 404, 5xx, throttling), or a dry run found errors"
)
@pytest.mark.claim(
    "Every failure is one line on stderr (a refused request adds one line per field error), never a traceback: API Gateway's own `{\"Message\": ...}` 403 and 429 answers and a proxy's HTML error page included."
)
def test_throttling_html_502_and_5xx(capsys):
    code, _, err = cli(
        capsys, "--api-url", API, "list", transport=answer(429, {"message": "Too Many Requests"})
    )
    assert code == API_ERROR
    assert (
        one_line(err)
        == "sagewarden: HTTP 429: Too Many Requests (throttled by API Gateway: retry in a moment)"
    )

    page = b"<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>"
    code, _, err = cli(capsys, "--api-url", API, "get", RUN_ID, transport=answer(502, page, "text/html"))
    assert code == API_ERROR
    assert one_line(err) == (
        "sagewarden: HTTP 502 from abc123.execute-api.us-east-1.amazonaws.com: not JSON: '502 Bad Gateway' "
        "(a proxy or load balancer answered, not the API)"
    )

    code, _, err = cli(capsys, "--api-url", API, "list", transport=answer(503, b""))
    assert code == API_ERROR and "HTTP 503 from abc123" in one_line(err) and "an empty body" in err

    code, _, err = cli(
        capsys,
        "--api-url",
        API,
        "list",
        transport=answer(500, {"message": "internal error", "request_id": "r-1"}),
    )
    assert one_line(err) == "sagewarden: HTTP 500: internal error (request id r-1)"

    code, _, err = cli(
        capsys, "--api-url", API, "list", transport=answer(200, b"<html>hello</html>", "text/html")
    )
    assert code == API_ERROR and "is not JSON ('hello')" in one_line(err)


@pytest.mark.claim(
    "`1` the API refused or failed the request (4xx except 404, 5xx, throttling), or a dry run found errors"
)
@pytest.mark.claim(
    "Every failure is one line on stderr (a refused request adds one line per field error), never a traceback: API Gateway's own `{\"Message\": ...}` 403 and 429 answers and a proxy's HTML error page included."
)
def test_a_refused_submission_lists_its_field_errors(capsys, tmp_path):
    path = write_yaml(tmp_path / "run.yaml", run_body("x"))
    body = {"message": "invalid request", "errors": [{"field": "name", "message": "too short"}, {"field": "policy.x", "message": "unknown field"}]}  # fmt: skip
    code, _, err = cli(capsys, "--api-url", API, "submit", path, transport=answer(400, body))
    assert code == API_ERROR
    assert err.splitlines() == [
        "sagewarden: HTTP 400: invalid request",
        "  name: too short",
        "  policy.x: unknown field",
    ]


@pytest.mark.claim("`4` not found (no such run, attempt or logs yet); `130` interrupted")
def test_not_found_is_exit_code_4(capsys):
    code, _, err = cli(
        capsys,
        "--api-url",
        API,
        "events",
        RUN_ID,
        transport=answer(404, {"message": f"run {RUN_ID} not found"}),
    )
    assert code == NOT_FOUND and one_line(err) == f"sagewarden: HTTP 404: run {RUN_ID} not found"


# -- the network -------------------------------------------------------------------------------------
def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.claim("`3` network (connection refused, timeout, DNS, TLS)")
def test_connection_refused_uses_the_real_http_transport(capsys):
    port = _closed_port()
    code, _, err = cli(capsys, "--api-url", f"http://127.0.0.1:{port}", "list", sess=None)
    assert code == NETWORK
    assert one_line(err) == f"sagewarden: cannot reach 127.0.0.1:{port}: connection refused"
    code, _, err = cli(capsys, "--local", "--api-url", f"http://127.0.0.1:{port}", "ls", sess=None)
    assert code == NETWORK and "connection refused" in one_line(err)


@pytest.mark.claim("`3` network (connection refused, timeout, DNS, TLS)")
@pytest.mark.parametrize(
    ("error", "text"),
    [
        (TimeoutError("timed out"), "timed out"),
        (ConnectionResetError(104, "Connection reset by peer"), "Connection reset by peer"),
    ],
    ids=[
        "a timeout",
        "a connection reset",
    ],
)
def test_timeouts_and_resets_are_network_errors(capsys, error, text):
    def transport(*_):
        raise error

    code, _, err = cli(capsys, "--api-url", API, "get", RUN_ID, transport=transport)
    assert (
        code == NETWORK
        and one_line(err) == f"sagewarden: cannot reach abc123.execute-api.us-east-1.amazonaws.com: {text}"
    )


# -- configuration -----------------------------------------------------------------------------------
@pytest.mark.claim(
    "`2` usage or configuration (arguments, an unreadable file, a bad `--set`, an unknown profile, no credentials, region or API URL, an ambiguous run name)"
)
def test_unknown_profile(capsys, monkeypatch, tmp_path):
    config = tmp_path / "config"
    config.write_text("[profile dev]\nregion = eu-west-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    code, _, err = cli(capsys, "list", "--profile", "nope", "--api-url", API, sess=None)
    assert code == USAGE
    assert (
        one_line(err)
        == "sagewarden: AWS profile 'nope' not found (`aws configure list-profiles` lists yours)"
    )


@pytest.mark.claim(
    "`2` usage or configuration (arguments, an unreadable file, a bad `--set`, an unknown profile, no credentials, region or API URL, an ambiguous run name)"
)
def test_no_credentials_and_no_region(capsys, monkeypatch, tmp_path):
    import boto3

    for key in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
    ):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    bare = boto3.Session()
    code, _, err = cli(capsys, "--api-url", API, "list", sess=bare)
    assert code == USAGE and one_line(err).startswith(
        "sagewarden: no AWS credentials found: configure a profile"
    )
    code, _, err = cli(capsys, "list", sess=bare)  # no --api-url: the stack's output needs a region
    assert code == USAGE and "no AWS region: pass --region or set AWS_REGION" in one_line(err)


@pytest.mark.claim("`--region` (else `$AWS_REGION`, then `$AWS_DEFAULT_REGION`, then the profile's)")
def test_region_from_aws_region_then_aws_default_region(capsys, monkeypatch):
    import boto3

    signed = []

    def transport(method, url, headers, body):
        signed.append(headers["Authorization"])
        return 200, b'{"runs": [], "next_cursor": null}'

    other = "https://api.example.com/prod"  # not an execute-api host: the region comes from config
    no_region = boto3.Session(aws_access_key_id="AKIAEXAMPLE", aws_secret_access_key="x")
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-south-1")
    assert cli(capsys, "--api-url", other, "list", transport=transport, sess=no_region)[0] == 0
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    assert cli(capsys, "--api-url", other, "list", transport=transport, sess=no_region)[0] == 0
    assert (
        cli(capsys, "list", "--region", "us-west-2", "--api-url", other, transport=transport, sess=no_region)[
            0
        ]
        == 0
    )
    # an execute-api URL names its region: the signature must use it, whatever the default is
    assert cli(capsys, "--api-url", API, "list", transport=transport, sess=no_region)[0] == 0
    scopes = [a.split("Credential=")[1].split(",")[0].split("/")[2] for a in signed]
    assert scopes == ["ap-south-1", "eu-west-1", "us-west-2", "us-east-1"]


@pytest.mark.claim(
    "It finds the API from `--api-url`, `$SAGEWARDEN_API_URL`, or the `ApiUrl` output of the stack (`--stack`, `$SAGEWARDEN_STACK`, default `Sagewarden`)"
)
def test_the_stack_lookup_failure_says_what_to_do(capsys):
    class NoStack:
        region_name = "us-east-1"

        def client(self, name, **kw):
            from botocore.exceptions import ClientError

            raise ClientError(
                {"Error": {"Code": "ValidationError", "Message": "Stack with id Sagewarden does not exist"}},
                "DescribeStacks",
            )

    code, _, err = cli(capsys, "get", "x", sess=NoStack())
    assert code == USAGE
    assert one_line(err) == (
        "sagewarden: cannot find the API URL: stack 'Sagewarden' in us-east-1: Stack with id Sagewarden does not exist; "
        "pass --api-url or --stack"
    )


# -- files and --set ---------------------------------------------------------------------------------
@pytest.mark.claim(
    "`2` usage or configuration (arguments, an unreadable file, a bad `--set`, an unknown profile, no credentials, region or API URL, an ambiguous run name)"
)
def test_bad_run_files(capsys, tmp_path):
    def submit(name, text):
        path = tmp_path / name
        path.write_text(text)
        return cli(capsys, "--api-url", API, "submit", str(path), "--dry-run")

    code, _, err = cli(capsys, "--api-url", API, "submit", str(tmp_path / "missing.yaml"))
    assert code == USAGE and one_line(err) == f"sagewarden: {tmp_path / 'missing.yaml'}: no such file"
    code, _, err = submit("bad.yaml", "name: x\ntraining_job: {a: 1\n")
    assert code == USAGE and f"{tmp_path / 'bad.yaml'}:3:1: invalid YAML" in one_line(err)
    code, _, err = submit("bad.json", '{"name": "x",}')
    assert (
        code == USAGE
        and f"{tmp_path / 'bad.json'}:1:14: invalid JSON: Expecting property name" in one_line(err)
    )
    code, _, err = submit("list.yaml", "- a\n- b\n")
    assert code == USAGE and "expected a mapping with name, training_job and policy, got a list" in one_line(
        err
    )
    code, _, err = submit("twice.yaml", "name: a\nname: b\n")
    assert code == USAGE and "key 'name' appears twice in one mapping" in one_line(err)
    code, _, err = submit("date.yaml", "name: x\npolicy: {priority: 2026-01-05}\n")
    assert code == USAGE and "policy.priority is a date, which JSON cannot carry; quote it" in one_line(err)
    code, _, err = submit("empty.yaml", "\n")
    assert code == USAGE and "empty; expected a run" in one_line(err)
    code, _, err = cli(capsys, "--api-url", API, "submit", str(tmp_path))
    assert code == USAGE and "is a directory" in one_line(err)


@pytest.mark.claim(
    "`--set KEY=VALUE` (repeatable): `instance_type`, `instance_count`, `max_runtime_seconds`, `name`, any policy field (`max_restarts=20`), or a path"
)
@pytest.mark.claim(
    "`2` usage or configuration (arguments, an unreadable file, a bad `--set`, an unknown profile, no credentials, region or API URL, an ambiguous run name)"
)
@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("instance_count", "--set 'instance_count': expected key=value, e.g. --set instance_count=4"),
        ("max_restart=3", "--set max_restart: not a shortcut (instance_type, instance_count, max_runtime_seconds), `name`, or a policy field; did you mean max_restarts?"),
        ("training_jobs.RoleArn=x", "--set training_jobs.RoleArn: the body has only name, training_job, policy; did you mean training_job?"),
        ("training_job.InputDataConfig[0].ChannelName=a", "--set 'training_job.InputDataConfig[0].ChannelName=a': training_job.InputDataConfig has no list to index"),
        ("training_job.RoleArn.x=1", "--set 'training_job.RoleArn.x=1': training_job.RoleArn is not an object"),
        ("policy.instance_fallbacks=[a", "--set 'policy.instance_fallbacks=[a': cannot read the value"),
    ],
    ids=[
        "no equals sign",
        "a misspelt policy field",
        "a misspelt body key",
        "an index into no list",
        "a key under a string",
        "a value that does not parse",
    ],
)  # fmt: skip
def test_bad_set_assignments(capsys, tmp_path, assignment, message):
    path = write_yaml(tmp_path / "run.yaml", run_body("x"))
    code, _, err = cli(capsys, "--api-url", API, "submit", path, "--set", assignment)
    assert code == USAGE
    assert one_line(err).startswith(f"sagewarden: {message}")


def _unreachable(method, url, headers, body):
    raise ConnectionRefusedError  # the dry run's look at the live runs: noted as not checked


@pytest.mark.claim(
    "`--set KEY=VALUE` (repeatable): `instance_type`, `instance_count`, `max_runtime_seconds`, `name`, any policy field (`max_restarts=20`), or a path"
)
@pytest.mark.claim("Values are YAML (`20`, `true`, `[a, b]`); `KEY=null` removes the key.")
def test_set_paths_indexes_and_removal(capsys, tmp_path, aws):  # aws: the quota look-up stays in moto
    body = run_body("x")
    body["training_job"]["InputDataConfig"] = [{"ChannelName": "train", "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://sagewarden-drill/d/"}}}]  # fmt: skip
    path = write_yaml(tmp_path / "run.yaml", body)
    code, out, err = cli(
        capsys, "--api-url", API, "--json", "submit", path, "--dry-run",
        "--set", "training_job.InputDataConfig[0].ChannelName=data", "--set", "training_job.HyperParameters=null",
        "--set", "name=renamed", "--set", "instance_fallbacks=[{instance_type: ml.p5.48xlarge, instance_count: 1}]",
        "--set", "training_job.StoppingCondition.MaxWaitTimeInSeconds=null", transport=_unreachable,
    )  # fmt: skip
    assert code == 0, err
    result = json.loads(out)
    assert result["name"] == "renamed" and result["first_job_name"].startswith("sw-renamed-")
    assert result["policy"]["instance_fallbacks"] == [
        {"instance_type": "ml.p5.48xlarge", "instance_count": 1}
    ]


# -- Ctrl-C, usage, help -----------------------------------------------------------------------------
@pytest.mark.claim("`4` not found (no such run, attempt or logs yet); `130` interrupted")
def test_ctrl_c_exits_130_without_a_traceback(capsys):
    def interrupted(*_):
        raise KeyboardInterrupt

    code, _, err = cli(capsys, "--api-url", API, "get", RUN_ID, transport=interrupted)
    assert code == INTERRUPTED and one_line(err) == "sagewarden: interrupted"

    run = {"run_id": RUN_ID, "name": "x", "status": "TRAINING", "attempts": []}
    code, _, err = cli(
        capsys, "--api-url", API, "get", RUN_ID, "--follow", transport=answer(200, run), sleep=interrupted
    )
    assert code == INTERRUPTED and err.strip().endswith("sagewarden: interrupted")


@pytest.mark.claim(
    "`2` usage or configuration (arguments, an unreadable file, a bad `--set`, an unknown profile, no credentials, region or API URL, an ambiguous run name)"
)
def test_usage_errors_are_one_line(capsys):
    code, _, err = cli(capsys, "list", "--status", "RUNNING")
    assert code == USAGE
    assert one_line(err).startswith(
        "sagewarden list: argument --status: invalid choice: 'RUNNING' (choose from 'SUBMITTED', 'STARTING'"
    )
    code, _, err = cli(capsys, "frobnicate")
    assert code == USAGE and "invalid choice: 'frobnicate'" in one_line(err)
    code, _, err = cli(capsys, "logs", "x", "--host", "0")
    assert code == USAGE and "argument --host: 0 must be 1 or more" in one_line(err)
    code, _, err = cli(capsys)
    assert code == USAGE and "COMMAND" in err


@pytest.mark.parametrize(
    "command", ["submit", "list", "ls", "get", "show", "events", "logs", "cancel", "resume"]
)
def test_every_command_has_help_with_arguments_values_and_an_example(capsys, command):
    code, out, _ = cli(capsys, command, "--help")
    assert code == 0
    assert "example:\n  sagewarden " in out and "exit codes:" in out
    assert "global options" in out and "--api-url" in out and "--local" in out
    if command in ("list", "ls"):
        assert (
            "SUBMITTED, STARTING, TRAINING, RETRY_WAIT, STOPPING, SUCCEEDED, FAILED, CANCELLED"
            in " ".join(out.split())
        )
    if command == "submit":
        assert "--set KEY=VALUE" in out and "--dry-run" in out and "--idempotency-key" in out


def test_top_level_help_and_version(capsys):
    code, out, _ = cli(capsys, "--help")
    assert code == 0
    for command in ("submit", "list (ls)", "get (show)", "events", "logs", "cancel", "resume"):
        assert command in out
    code, out, _ = cli(capsys, "--version")
    assert code == 0 and out.startswith("sagewarden ")


def test_local_mode_against_something_that_is_not_the_drill_server(capsys):
    run = {"run_id": RUN_ID, "name": "x", "status": "TRAINING", "attempts": [{"number": 1, "job_name": "j", "instance_count": 1, "instance_type": "ml.m5.xlarge"}]}  # fmt: skip

    def transport(method, url, headers, body):
        if url.endswith("/_local"):
            return 403, b'{"message": "Missing Authentication Token"}'
        return 200, json.dumps(run).encode()

    code, _, err = cli(capsys, "--local", "logs", RUN_ID, transport=transport)
    assert code == USAGE
    assert one_line(err) == (
        "sagewarden: http://127.0.0.1:8765 does not answer like `python -m drill serve` (GET /_local gave "
        "HTTP 403); pass --logs-endpoint-url to read logs elsewhere"
    )


@pytest.mark.claim(
    "Every failure is one line on stderr (a refused request adds one line per field error), never a traceback: API Gateway's own `{\"Message\": ...}` 403 and 429 answers and a proxy's HTML error page included."
)
def test_an_unforeseen_error_is_one_line_too(capsys, monkeypatch):
    def transport(*_):
        raise ValueError("something nobody expected")

    monkeypatch.delenv("SAGEWARDEN_DEBUG", raising=False)
    code, _, err = cli(capsys, "--api-url", API, "list", transport=transport)
    assert code == API_ERROR
    assert one_line(err) == (
        "sagewarden: internal error: ValueError: something nobody expected (SAGEWARDEN_DEBUG=1 shows the traceback)"
    )
