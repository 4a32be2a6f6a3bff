"""The CLI's local mode through the real HTTP server (`python -m drill serve`) on an ephemeral
port: real sockets, the CLI's own transport, virtual time running in a background thread, and
CloudWatch Logs read through moto's server app (which shares the in-process account's backends)."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from drill.account.server import LocalServer
from drill.sim.model import JobProfile
from sagewarden_cli.app import main
from tests.scenarios.cli_support import readme_walkthrough

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = str(REPO / "examples" / "run.yaml")


@pytest.fixture
def server(template):
    with LocalServer(template, port=0, speed=3000, tick_s=0.02) as srv:
        yield srv


def cli(capsys, *argv):
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return code, out.out, out.err


@pytest.mark.claim(
    "(or `python -m drill serve [--port 8765] [--speed 600]`) serves the API on the drill's simulated account"
)
def test_every_command_through_the_local_http_server(server, capsys, monkeypatch):
    with server.lock:  # llama-8b finishes in about a wall second; "second" runs until cancelled
        server.account.sagemaker.set_profile(
            "llama-8b", JobProfile(total_steps=600, steps_per_minute=10, checkpoint_every_steps=200)
        )
        server.account.sagemaker.set_profile("second", JobProfile(total_steps=10**7))
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)  # local mode needs no credentials of yours
    url = server.url
    code, out, err = cli(
        capsys, "--local", "--api-url", url, "submit", EXAMPLE, "--idempotency-key", "readme-1"
    )
    assert code == 0, err
    run_id = re.match(r"llama-8b  ([0-9A-Z]{26})  ", out).group(1)

    monkeypatch.setenv("SAGEWARDEN_API_URL", url)  # a loopback URL means local mode, no --local needed
    code, out, err = cli(capsys, "ls")
    assert code == 0 and out.splitlines()[1].split()[:2] == ["llama-8b", run_id]
    code, out, err = cli(capsys, "get", "llama-8b", "--follow", "--interval", "0.1")
    assert code == 0, err
    assert "SUCCEEDED" in out  # the last change line, or the view itself if it finished already
    code, out, err = cli(capsys, "--json", "get", run_id)
    assert json.loads(out)["status"] == "SUCCEEDED"
    code, out, err = cli(capsys, "logs", "llama-8b", "--timestamps")
    assert code == 0, err
    hosts = {m.group(1) for m in re.finditer(r"Z \((algo-\d+)\) ", out)}
    assert hosts == {"algo-1", "algo-2"} and re.search(r"\(algo-2\) step \d+ loss", out)
    assert "(algo-1) Checkpoint for global step 600 saved" in out
    code, out, err = cli(capsys, "--json", "events", run_id)
    assert code == 0 and any("SUCCEEDED" in e["summary"] for e in json.loads(out))

    code, out, err = cli(capsys, "submit", EXAMPLE, "--set", "name=second", "--json")
    second = json.loads(out)["run_id"]
    code, out, err = cli(capsys, "cancel", "second", "--yes")
    assert code == 0 and out.startswith(f"second ({second}): ")
    code, out, err = cli(capsys, "logs", second, "--follow", "--interval", "0.1")
    assert code == 0 and "==> run second is CANCELLED" in err

    code, out, err = cli(capsys, "get", "01KE5Q86000000000000000000")
    assert code == 4 and "no run with id" in err


@pytest.mark.claim(
    "A request without a SigV4 signature gets API Gateway's 403; the signature itself is not checked."
)
def test_the_server_speaks_like_api_gateway(server):
    info = json.loads(urllib.request.urlopen(f"{server.url}/_local", timeout=5).read())
    assert info["logs_endpoint_url"] == server.aws_url and info["region"] == "us-east-1"
    with pytest.raises(urllib.error.HTTPError) as unsigned:
        urllib.request.urlopen(f"{server.url}/runs", timeout=5)
    assert unsigned.value.code == 403
    assert json.loads(unsigned.value.read()) == {"message": "Missing Authentication Token"}
    signed = urllib.request.Request(
        f"{server.url}/no/such/route", headers={"Authorization": "AWS4-HMAC-SHA256 Credential=x"}
    )
    with pytest.raises(urllib.error.HTTPError) as unknown:
        urllib.request.urlopen(signed, timeout=5)
    assert unknown.value.code == 403


def test_the_server_dates_its_answers_in_virtual_time(server):
    """README: responses carry the virtual time in `Date`, so ages and durations follow the
    simulated clock (which runs 3,000 times faster than the wall clock here)."""
    import email.utils

    for _ in range(200):  # until the virtual clock is well ahead of the wall clock
        if server.account.clock.now_ms > time.time() * 1000 + 60 * 60_000:
            break
        time.sleep(0.05)
    signed = urllib.request.Request(
        f"{server.url}/runs", headers={"Authorization": "AWS4-HMAC-SHA256 Credential=x"}
    )
    before = server.account.clock.now_ms
    with urllib.request.urlopen(signed, timeout=5) as resp:
        dated = email.utils.parsedate_to_datetime(resp.headers["Date"]).timestamp() * 1000
    after = server.account.clock.now_ms

    assert before - 1000 <= dated <= after + 1000  # the virtual time (to the second)
    assert dated > time.time() * 1000 + 30 * 60_000  # not the wall clock's


@pytest.mark.claim("Local mode signs with fixed local credentials, never yours.")
def test_local_mode_signs_with_fixed_local_credentials_never_yours(server, capsys, monkeypatch):
    """README: local mode signs with fixed local credentials, never yours."""
    from sagewarden_cli import client

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAYOURSNOTLOCAL")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "yours")
    seen: list[str] = []
    real = client.http_transport

    def recording(method, url, headers, body, **kwargs):
        seen.append(headers.get("Authorization", ""))
        return real(method, url, headers, body, **kwargs)

    monkeypatch.setattr(client, "http_transport", recording)
    code, _, err = cli(capsys, "--local", "--api-url", server.url, "ls")

    assert code == 0, err
    assert seen and all(f"Credential={client.LOCAL_CREDENTIALS[0]}/" in h for h in seen)
    assert not any("AKIAYOURSNOTLOCAL" in h for h in seen)


@pytest.mark.claim(
    "(or `python -m drill serve [--port 8765] [--speed 600]`) serves the API on the drill's simulated account"
)
def test_python_m_drill_serve_prints_its_url_and_stops_on_ctrl_c(capsys):
    # a fresh shell after `make setup`: .venv/bin (where the `sagewarden` command is) not on PATH
    env = {**os.environ, "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "drill", "serve", "--port", "0", "--speed", "600"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        banner = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            banner.append(line)
            if line.startswith("  API "):
                break
        url = banner[-1].split()[-1]
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url), banner
        code, out, err = cli(capsys, "--local", "--api-url", url, "list")
        assert code == 0 and out.strip() == "no runs"
        rest = [proc.stdout.readline()]
        while rest[-1] and "Ctrl-C" not in rest[-1]:
            rest.append(proc.stdout.readline())
        assert any("AWS_ACCESS_KEY_ID=local" in line for line in rest)  # the profile-free hint
        # the banner's example works as printed, typed in that shell
        (example,) = [line.strip() for line in rest if " submit " in line]
        argv = shlex.split(example)
        try:
            done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
        except FileNotFoundError:
            pytest.fail(f"the banner's command is not found in a shell after make setup: {example}")
        assert done.returncode == 0, (example, done.stderr)
        assert done.stdout.startswith("llama-8b  ") and "STARTING" in done.stdout.splitlines()[0]
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "stopped" in out and "Traceback" not in err


@pytest.mark.claim(
    "It finds the API from `--api-url`, `$SAGEWARDEN_API_URL`, or the `ApiUrl` output of the stack (`--stack`, `$SAGEWARDEN_STACK`, default `Sagewarden`)"
)
@pytest.mark.claim(
    "This walk-through runs as written, typed as slowly or as quickly as you like (a test replays it with no pause and with a minute between commands)"
)
def test_the_readme_cli_walkthrough_runs_as_written_over_http(server, capsys, monkeypatch):
    # every command exactly as the README writes it (tests/scenarios/test_cli_walkthrough.py
    # replays it in process at typing speeds); here over real sockets, the server's own clock
    # running (5x the default speed), the README's export pointed at this server's port
    lines = readme_walkthrough()
    commands = [words for words in lines if words[0] == "sagewarden"]
    assert {c[1] for c in commands} == {"submit", "ls", "get", "logs", "events", "cancel", "resume"}
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("SAGEWARDEN_API_URL", server.url)
    for words in commands:
        code, out, err = cli(capsys, *words[1:])
        assert code == 0, (" ".join(words), out, err)
        assert out or err, words
    code, out, err = cli(capsys, "--json", "get", "llama-8b-b")
    run = json.loads(out)
    assert run["attempt_count"] == 2 and run["status"] in ("SUBMITTED", "STARTING", "TRAINING")


@pytest.mark.claim(
    "(`make demo-serve SCENARIO=NAME` loads a scenario's account, job profiles and faults, `SUBMIT=1` also submits its runs; its banner prints a command that works as printed)"
)
def test_serve_a_scenario_with_its_runs_and_read_logs_from_a_named_endpoint(template, capsys, monkeypatch):
    from drill.account.local import BUCKET, EXECUTION_ROLE
    from drill.scenarios.spec import parse

    scenario = parse(
        {
            "name": "served",
            "runs": [{"name": "demo", "submit_at_min": 0, "profile": {"total_steps": 10**7}}],
            "faults": [{"kind": "hardware", "run": "demo", "attempt": 1, "after_training_min": 5}],
        },
        bucket=BUCKET,
        role_arn=EXECUTION_ROLE,
    )
    with LocalServer(template, port=0, speed=3000, tick_s=0.02, scenario=scenario, submit=True) as srv:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            code, out, _ = cli(capsys, "--api-url", srv.url, "--json", "get", "demo")
            if code == 0 and json.loads(out)["attempt_count"] >= 2:
                break
            time.sleep(0.1)
        run = json.loads(out)
        assert run["restarts_by_class"] == {"INFRASTRUCTURE": 1}  # the scenario's fault, resumed
        assert (
            "scenario       served (account, profiles and faults; runs submitted on schedule)" in srv.banner()
        )
        # --logs-endpoint-url names the endpoint instead of asking the server for it
        code, out, _ = cli(
            capsys, "--api-url", srv.url, "--logs-endpoint-url", srv.aws_url, "logs", "demo", "--attempt", "1"
        )
        assert code == 0 and "(algo-1) " in out
