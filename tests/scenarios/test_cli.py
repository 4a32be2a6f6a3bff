"""The sagewarden CLI, its signed requests routed into the drill's API (the template's routes)."""

from __future__ import annotations

import json
from urllib.parse import parse_qsl, urlsplit

import boto3
import pytest

from cli.__main__ import main
from drill.account import BUCKET, EXECUTION_ROLE, LocalAccount
from drill.scenario import default_training_job

API = "https://abc123.execute-api.us-east-1.amazonaws.com/prod"


@pytest.fixture
def acct(template):
    with LocalAccount(template, store="memory") as account:
        yield account


@pytest.fixture
def session():
    return boto3.Session(
        aws_access_key_id="AKIAEXAMPLE", aws_secret_access_key="secret", region_name="us-east-1"
    )


def _transport(acct, seen):
    def send(method, url, headers, body):
        parts = urlsplit(url)
        assert parts.path.startswith("/prod")
        seen.append(headers)
        status, payload = acct.api(
            method,
            parts.path.removeprefix("/prod"),
            raw_body=body.decode() if body else None,
            query=dict(parse_qsl(parts.query)) or None,
            headers={k: v for k, v in headers.items() if k == "Idempotency-Key"},
        )
        return status, json.dumps(payload).encode() if payload is not None else b""

    return send


def _cli(acct, session, seen, *args):
    return main(["--api-url", API, "--json", *args], transport=_transport(acct, seen), session=session)


def test_cli_submit_get_list_events_cancel(acct, session, tmp_path, capsys):
    seen: list[dict] = []
    run_file = tmp_path / "run.json"
    run_file.write_text(
        json.dumps(
            {"name": "llama-8b", "training_job": default_training_job("llama-8b", BUCKET, EXECUTION_ROLE)}
        )
    )
    assert _cli(acct, session, seen, "submit", str(run_file), "--idempotency-key", "k1") == 0
    run = json.loads(capsys.readouterr().out)
    assert run["status"] == "STARTING"
    assert seen[0]["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIAEXAMPLE/")
    assert "/us-east-1/execute-api/aws4_request" in seen[0]["Authorization"]
    assert _cli(acct, session, seen, "submit", str(run_file), "--idempotency-key", "k1") == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == run["run_id"]

    assert _cli(acct, session, seen, "get", run["run_id"]) == 0
    assert json.loads(capsys.readouterr().out)["attempts"][0]["number"] == 1
    assert _cli(acct, session, seen, "list", "--status", "STARTING", "--all") == 0
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)] == [run["run_id"]]
    assert _cli(acct, session, seen, "events", run["run_id"]) == 0
    assert any("LaunchAttempt" in e["summary"] for e in json.loads(capsys.readouterr().out))
    assert _cli(acct, session, seen, "cancel", run["run_id"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "STOPPING"


def test_cli_reports_field_errors_and_exit_codes(acct, session, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "bad name", "training_job": {}}))
    assert _cli(acct, session, [], "submit", str(bad)) == 1
    err = capsys.readouterr().err
    assert "HTTP 400" in err and "name:" in err and "training_job.RoleArn: required" in err
    assert _cli(acct, session, [], "get", "01JNOPE0000000000000000000") == 1
    assert "HTTP 404" in capsys.readouterr().err
    assert _cli(acct, session, [], "submit", str(tmp_path / "missing.json")) == 2


def test_cli_human_output_for_a_run(acct, session, tmp_path, capsys):
    run_file = tmp_path / "run.json"
    run_file.write_text(
        json.dumps({"name": "gemma", "training_job": default_training_job("gemma", BUCKET, EXECUTION_ROLE)})
    )
    seen: list[dict] = []
    assert (
        main(["--api-url", API, "submit", str(run_file)], transport=_transport(acct, seen), session=session)
        == 0
    )
    out = capsys.readouterr().out
    assert "gemma  STARTING  attempts 1" in out and "attempt 1: 2 x ml.p4d.24xlarge" in out


def test_cli_needs_an_api_url_or_a_stack(session, capsys):
    class NoStack:
        region_name = "us-east-1"

        def client(self, name):
            raise RuntimeError("no credentials for CloudFormation")

    assert main(["get", "x"], session=NoStack()) == 2
    assert "pass --api-url" in capsys.readouterr().err
