"""`sagewarden selftest` end to end against the drill's simulated account: the CLI's own HTTP
transport and S3 calls against `python -m drill serve --scenario selftest` (in process, on an
ephemeral port, virtual time x SPEED), and the variants in which a step must fail."""

from __future__ import annotations

import copy
import io
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import boto3
import pytest

from drill.account.local import BUCKET, EXECUTION_ROLE
from drill.account.server import LocalServer
from drill.scenarios.runner import run_scenario
from drill.scenarios.spec import load, parse
from sagewarden.adapters.alarm_shapes import representative_shapes
from sagewarden.domain.vocabulary.policy import RunPolicy
from sagewarden_cli import selftest
from sagewarden_cli.app import main
from sagewarden_cli.errors import API_ERROR, NETWORK
from tests.doc_pages import documentation

REPO = Path(__file__).resolve().parents[2]
SPEED = 200.0  # 1 wall second = 3.3 virtual minutes: a loaded CI worker stalling stays inside the deadlines (at 1,000, and once at 400 with log lines landing late, a full-suite run saw a stall read as a hang)
STEP_TITLES = [
    "submitted",
    "attempt 1 training",
    "crash classified INFRASTRUCTURE",
    "resumed as attempt 2 from step 20",
    "hang detected (log silence)",
    "stopped",
    "resumed as attempt 3 from step 30",
    "succeeded",
]
NEWER_FIELDS_KNOWN = set(selftest.NEWER_POLICY) <= set(RunPolicy().to_dict())


def serve(template: Any, doc: dict[str, Any] | None = None) -> LocalServer:
    scenario = (
        load("selftest", bucket=BUCKET, role_arn=EXECUTION_ROLE)
        if doc is None
        else parse(doc, bucket=BUCKET, role_arn=EXECUTION_ROLE)
    )
    return LocalServer(template, port=0, speed=SPEED, scenario=scenario, tick_s=0.02)


def run_cli(capsys: Any, *argv: str, stdin: str = "") -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv), stdin=io.StringIO(stdin))
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return code, out.out, out.err


def api(server: LocalServer, method: str, path: str) -> Any:
    status, body = server.handle_api(method, path, None, {}, None)
    assert status == 200, body
    return body


def uploads(server: LocalServer) -> list[str]:
    with server.lock:
        resp = server.account.s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{selftest.DEFAULT_PREFIX}/")
    return [o["Key"] for o in resp.get("Contents", [])]


@pytest.mark.claim(
    "submits one run (`POST /runs`) on 1 × ml.m5.large with the region's public SageMaker PyTorch training image, `pytorch-training:2.5.1-cpu-py311`"
)
@pytest.mark.claim(
    "`log_silence_minutes` 5, `hang_grace_minutes` 1, no warm pool, at most 3 restarts and 2 hours"
)
@pytest.mark.claim(
    "cancels the run if it is still live, deletes everything under its S3 prefix once the run has ended (`--keep` keeps it), and prints a pass/fail table"
)
@pytest.mark.claim(
    "it is judged only once Training has lasted its window, or the allowance plus the 3 late minutes, whichever comes first (with a 1-minute allowance and a 5-minute window: from minute 4; with the default 45 and 30: from minute 45, as before). Judged earlier, the self-test's 1-minute allowance stopped its job, which logs every 6 seconds, 2.3 minutes into Training."
)
def test_the_selftest_passes_end_to_end_on_the_simulated_account(template, capsys):
    with serve(template) as server:
        code, out, err = run_cli(capsys, "--local", "--api-url", server.url, "selftest", "--yes")
        runs = api(server, "GET", "/runs")["runs"]
        run = api(server, "GET", f"/runs/{runs[0]['run_id']}")
        left = uploads(server)

    assert code == 0, out + err
    progress = [m.group(1) for m in re.finditer(r"^\[ *\d+:\d\d\] ok   (.+?)(?:  |$)", out, re.M)]
    assert [p.strip() for p in progress] == STEP_TITLES
    assert "FAIL" not in out and out.rstrip().splitlines()[-1].startswith("PASS: every step happened within")
    assert (
        "script loaded the named checkpoints: the script's log confirms: attempt 2 from step 20, attempt 3 from step 30"
        in out
    )
    assert "cost: about 23 ml.m5.large instance-minutes, $0.04" in err
    # one line per alarm shape, as the stack's deploy-time check reported them (drill/account/deploy.py)
    shapes = [s.name for s in representative_shapes(RunPolicy())]
    assert f"alarm shapes: CloudWatch accepted all {len(shapes)} when stack Sagewarden was deployed (" in err
    assert [line.split()[1] for line in err.splitlines() if line.startswith("  ok   ")] == shapes
    # what the API shows is what was printed
    assert len(runs) == 1 and run["status"] == "SUCCEEDED"
    assert [a["end_class"] for a in run["attempts"]] == ["INFRASTRUCTURE", "SUPERVISOR_STOP", "SUCCEEDED"]
    assert [(a["resumed_from"] or {}).get("step") for a in run["attempts"]] == [None, 20, 30]
    assert run["policy"]["log_silence_minutes"] == 5 and run["policy"]["hang_grace_minutes"] == 1
    assert run["training_job"]["AlgorithmSpecification"]["TrainingImage"].endswith(
        "pytorch-training:2.5.1-cpu-py311"
    )
    # the policy fields of a newer API are sent only where the API knows them
    if NEWER_FIELDS_KNOWN:
        assert run["policy"]["startup_silence_minutes"] == 1 and run["policy"]["adaptive_windows"] is False
        assert "does not know the policy field" not in err
    else:
        assert (
            "does not know the policy field(s) startup_silence_minutes, adaptive_windows, gpu_lone_idle_minutes"
            in err
        )
    assert left == []  # the script, checkpoints and output were deleted


@pytest.mark.claim(
    "cancels the run if it is still live, deletes everything under its S3 prefix once the run has ended (`--keep` keeps it), and prints a pass/fail table"
)
@pytest.mark.claim(
    "It exits 0 only when every step happened within its deadline, and 1 otherwise, naming the step that failed and what it saw instead"
)
@pytest.mark.claim(
    "It cannot exceed 114 instance-minutes ($0.22): one job runs at a time, and the self-test cancels the run at the first missed deadline"
)
@pytest.mark.claim("`hang_detection` | true")
def test_a_hang_that_is_not_detected_fails_the_selftest(template, capsys):
    with serve(template) as server:
        code, out, err = run_cli(
            capsys,
            "--local",
            "--api-url",
            server.url,
            "--json",
            "selftest",
            "--yes",
            "--policy",
            "hang_detection=false",
        )
        run = api(server, "GET", "/runs")["runs"][0]

    assert code == 1
    report = json.loads(out)
    results = {s["step"]: s for s in report["steps"]}
    assert report["passed"] is False
    assert [s["result"] for s in report["steps"][:5]] == ["done", "done", "done", "done", "failed"]
    assert report["alarm_shapes"]["result"] == "accepted" and report["alarm_shapes"]["stack"] == "Sagewarden"
    assert [(s["shape"], s["result"]) for s in report["alarm_shapes"]["shapes"]] == [
        (s.name, "accepted") for s in representative_shapes(RunPolicy())
    ]
    hang = results["hang detected (log silence)"]
    assert hang["detail"].startswith(
        "did not happen within 22.2 min; seen instead: attempt 2 is still InProgress/Training"
    )
    assert "with no hang detected (hang_detection false, log_silence_minutes 5)" in hang["detail"]
    assert hang["took_s"] > hang["deadline_s"]
    assert [results[t]["result"] for t in STEP_TITLES[5:]] == ["not reached"] * 3
    # the progress went to stderr, and the cleanup stopped the hung job
    assert "FAIL hang detected (log silence)" in err and f"cleanup: run {run['run_id']} is CANCELLED" in err
    assert run["status"] == "CANCELLED"


def _scenario(change: Any) -> dict[str, Any]:
    doc = copy.deepcopy(selftest.scenario_document())
    change(doc)
    return doc


@pytest.mark.claim(
    "cancels the run if it is still live, deletes everything under its S3 prefix once the run has ended (`--keep` keeps it), and prints a pass/fail table"
)
@pytest.mark.claim(
    "It exits 0 only when every step happened within its deadline, and 1 otherwise, naming the step that failed and what it saw instead"
)
def test_a_job_that_never_hangs_fails_the_selftest_and_keep_keeps_its_files(template, capsys):
    def no_hang(doc: dict[str, Any]) -> None:
        doc["faults"] = [f for f in doc["faults"] if f["kind"] != "stuck_dataloader"]

    with serve(template, _scenario(no_hang)) as server:
        code, out, _ = run_cli(capsys, "--local", "--api-url", server.url, "selftest", "--yes", "--keep")
        left = uploads(server)

    assert code == 1
    assert 'FAIL: step "hang detected (log silence)": attempt 2 completed: the job never hung' in out
    assert re.search(r"^\[ *\d+:\d\d\] FAIL hang detected \(log silence\)", out, re.M)
    assert any(k.endswith("/source/sourcedir.tar.gz") for k in left)
    assert any("/checkpoints/checkpoint-40/" in k for k in left)


@pytest.mark.claim(
    "It exits 0 only when every step happened within its deadline, and 1 otherwise, naming the step that failed and what it saw instead"
)
def test_a_crash_classed_as_a_code_bug_fails_the_selftest(template, capsys):
    def import_error(doc: dict[str, Any]) -> None:
        doc["faults"][0]["log_lines"] = ["ModuleNotFoundError: No module named 'flash_attn'"]
        doc["faults"][0]["after_training_min"] = 0.5

    with serve(template, _scenario(import_error)) as server:
        code, out, _ = run_cli(capsys, "--local", "--api-url", server.url, "selftest", "--yes")

    assert code == 1
    assert re.search(
        r'FAIL: step "crash classified INFRASTRUCTURE": attempt 1 ended Failed/Failed, classed USER_ERROR: '
        r"ModuleNotFoundError",
        out,
    )


def test_the_selftest_rides_out_a_network_blip_while_it_watches(template, capsys):
    from sagewarden_cli.client import http_transport

    polls = 0

    def flaky(method: str, url: str, headers: dict[str, str], body: bytes | None) -> tuple[Any, ...]:
        nonlocal polls
        if method == "GET" and re.search(r"/runs/[0-9A-Z]{26}$", url):
            polls += 1
            if polls in (3, 4):
                raise ConnectionRefusedError
        return http_transport(method, url, headers, body)

    with serve(template) as server:
        capsys.readouterr()
        code = main(["--local", "--api-url", server.url, "selftest", "--yes"], transport=flaky)
        out = capsys.readouterr()

    assert code == 0, out.out + out.err
    assert out.err.count("(polling the API failed: cannot reach 127.0.0.1:") == 2
    assert "PASS" in out.out


def _lose_answers(drop: str, posts_to_lose: int) -> Any:
    """A transport that lets the server process a POST /runs, then loses its answer: a timeout, or
    API Gateway's 504 (its integration timed out while the function went on and stored the run)."""
    from sagewarden_cli.client import http_transport

    lost = 0

    def transport(method: str, url: str, headers: dict[str, str], body: bytes | None) -> tuple[Any, ...]:
        nonlocal lost
        answer = http_transport(method, url, headers, body)
        if method == "POST" and url.endswith("/runs") and lost < posts_to_lose:
            lost += 1
            if drop == "timeout":
                raise TimeoutError
            return 504, b'{"message": "Endpoint request timed out"}', {}
        return answer

    return transport


@pytest.mark.claim(
    "the cleanup sends the request again with the same `Idempotency-Key`, which returns the run the first one created, and cancels it"
)
@pytest.mark.parametrize(
    ("drop", "exit_code"),
    [("timeout", NETWORK), ("504", API_ERROR)],
    ids=["the answer times out", "the gateway answers 504"],
)
def test_a_lost_submission_answer_is_recovered_by_its_key_and_cancelled_before_the_files_go(
    template, capsys, monkeypatch, drop, exit_code
):
    from sagewarden_cli import selftest_cleanup

    statuses_at_delete: list[str] = []
    delete = selftest_cleanup.delete_uploads

    def watched_delete(test: Any, s3: Any) -> None:
        statuses_at_delete.append(api(server, "GET", f"/runs/{test.run_id}")["status"])
        delete(test, s3)

    monkeypatch.setattr(selftest_cleanup, "delete_uploads", watched_delete)
    with serve(template) as server:
        capsys.readouterr()
        code = main(
            ["--local", "--api-url", server.url, "selftest", "--yes"], transport=_lose_answers(drop, 1)
        )
        out = capsys.readouterr()
        runs = api(server, "GET", "/runs")["runs"]
        left = uploads(server)

    text = out.out + out.err
    assert code == exit_code, text
    assert "Traceback" not in out.err
    (run,) = runs  # the repeated request found the run the first one created; it made no second
    assert run["status"] == "CANCELLED"
    assert (
        f"cleanup: the answer to the submission was lost; its Idempotency-Key found run {run['run_id']}"
        in text
    )
    assert f"cleanup: run {run['run_id']} is CANCELLED" in text
    assert statuses_at_delete == ["CANCELLED"] and left == []  # deleted, and only once the run had ended


@pytest.mark.claim(
    "A run it cannot confirm ended keeps its files (its job reads them), and the self-test says how to find the run"
)
def test_a_run_that_cannot_be_confirmed_ended_keeps_its_files(template, capsys):
    with serve(template) as server:
        capsys.readouterr()
        code = main(
            ["--local", "--api-url", server.url, "selftest", "--yes", "--interval", "0.01"],
            transport=_lose_answers("timeout", 1 + selftest_cleanup_attempts()),
        )
        out = capsys.readouterr()
        runs = api(server, "GET", "/runs")["runs"]
        left = uploads(server)

    assert code == NETWORK
    (run,) = runs
    assert run["status"] not in ("SUCCEEDED", "FAILED", "CANCELLED")  # live, and nobody could cancel it
    assert "cleanup: cannot tell whether the submission created a run" in out.err
    assert "Idempotency-Key selftest-" in out.err and "`sagewarden ls`" in out.err
    assert "cleanup: kept s3://" in out.err and "cleanup: deleted" not in out.out + out.err
    assert "Traceback" not in out.err
    assert any(k.endswith("/source/sourcedir.tar.gz") for k in left)  # the live job's script stays


def selftest_cleanup_attempts() -> int:
    from sagewarden_cli.selftest_cleanup import RECOVERY_ATTEMPTS

    return RECOVERY_ATTEMPTS


@pytest.mark.claim("the self-test runs nothing and says so, with the command that starts the right one")
@pytest.mark.parametrize("scenario", [None, "other"], ids=["no-scenario", "another-scenario"])
def test_a_local_server_without_the_selftest_scenario_is_named_as_the_problem(template, capsys, scenario):
    doc = None if scenario is None else {"name": scenario, "runs": [], "faults": []}
    parsed = None if doc is None else parse(doc, bucket=BUCKET, role_arn=EXECUTION_ROLE)
    with LocalServer(template, port=0, speed=SPEED, scenario=parsed, tick_s=0.02) as server:
        code, out, err = run_cli(capsys, "--local", "--api-url", server.url, "selftest", "--yes")
        runs = api(server, "GET", "/runs")["runs"]
        left = uploads(server)

    running = "no scenario" if scenario is None else "scenario 'other'"
    assert code == 2 and out == ""
    assert err.splitlines() == [
        f"sagewarden: the local server at {server.url} runs {running}, not the self-test's: its simulated job "
        "would not crash and hang as the self-test expects. Start it with `make demo-serve SCENARIO=selftest` "
        "(or `python -m drill serve --scenario selftest`) and run this again"
    ]
    assert runs == [] and left == []  # nothing submitted, nothing uploaded


@pytest.mark.claim(
    "It is opt-in and costs a few cents; it prints the cost and asks first (`--yes` does not ask)"
)
def test_the_selftest_asks_before_spending(template, capsys):
    with serve(template) as server:
        code, out, err = run_cli(capsys, "--local", "--api-url", server.url, "selftest", stdin="n\n")
        runs = api(server, "GET", "/runs")["runs"]
        left = uploads(server)
        code_eof, _, err_eof = run_cli(capsys, "--local", "--api-url", server.url, "selftest")

    assert code == 1 and "Run the self-test? [y/N] " in err and "nothing was run" in err
    assert runs == [] and left == [] and out == ""
    assert code_eof == 2 and "pass --yes to run without asking" in err_eof


@pytest.mark.claim(
    'A stack deployed before the shape check, or one your identity may not read, shows "not checked" and the reason; that never fails the self-test'
)
@pytest.mark.parametrize("stack", ["without the output", "missing"])
def test_a_stack_without_the_alarm_shape_report_is_not_checked_and_says_why(template, capsys, stack):
    # A stack deployed before the alarm-shape check has no AlarmShapes output; a wrong --stack (or an
    # identity that may not read it) gets CloudFormation's error: "not checked", never a failure.
    argv = ["--local", "--api-url", "<url>", "selftest"]
    with serve(template) as server:
        argv[2] = server.url
        if stack == "missing":
            argv[3:3] = ["--stack", "Elsewhere"]
        else:  # the outputs of a stack deployed before the check
            body = {"Resources": {}, "Outputs": {"ApiUrl": {"Value": server.url}}}
            with server.lock:
                boto3.client("cloudformation", region_name="us-east-1").update_stack(
                    StackName="Sagewarden", TemplateBody=json.dumps(body)
                )
        code, out, err = run_cli(capsys, *argv, stdin="n\n")

    assert (
        code == 1 and "nothing was run" in err and out == ""
    )  # declined: the report is read before the question
    if stack == "missing":
        assert (
            "alarm shapes: not checked (stack Elsewhere: ValidationError: Stack with id Elsewhere does not exist)"
            in err
        )
    else:
        assert (
            "alarm shapes: not checked (stack Sagewarden has no AlarmShapes output: it was deployed before the "
            "alarm-shape check; deploy it again)" in err
        )
    assert "  ok   " not in err


def test_the_drill_runs_the_selftest_scenario_with_the_scripts_own_lines(template, tmp_path):
    """The scenario does what the script does: every line the simulated job writes (but its
    periodic progress lines) is a line the real script prints, in the same order."""
    result = run_scenario(load("selftest", bucket=BUCKET, role_arn=EXECUTION_ROLE), template)
    assert not result.invariant_violations
    run = result.runs[selftest.RUN_NAME]
    assert run["status"] == "SUCCEEDED" and len(run["attempts"]) == 3

    script = REPO / "examples" / "selftest" / "train.py"
    args = [f"--{k}={v}" for k, v in selftest.PLAN.hyperparameters().items()]
    args += ["--seconds-per-step=0.001", f"--checkpoint-dir={tmp_path}/ckpt", f"--model-dir={tmp_path}/model"]
    for job in sorted(result.jobs, key=lambda j: j.attempt):
        resume = job.start_step or None
        env = {
            **os.environ,
            "SAGEWARDEN_ATTEMPT": str(job.attempt),
            "SAGEWARDEN_RESUME_STEP": str(resume or ""),
        }
        env["SAGEWARDEN_RESUME_DIR"] = f"{tmp_path}/ckpt/checkpoint-{resume}"
        proc = subprocess.run(
            [sys.executable, str(script), *args, "--hang-seconds=0.01"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        printed = [
            line.replace(f"{tmp_path}/ckpt", "/opt/ml/checkpoints")
            for line in (proc.stdout + proc.stderr).splitlines()
        ]
        simulated = [t for _, t in job._tails[1] if not re.fullmatch(r"step \d+ loss [\d.]+", t)]
        assert simulated, job.name
        it = iter(printed)
        missing = [line for line in simulated if not any(line == p for p in it)]
        assert missing == [], f"attempt {job.attempt}: the simulated job writes lines the script does not"


def _readme_selftest_commands() -> list[str]:
    text = documentation()
    section = re.split(r"\n#{1,3} ", text.split("### Self-test\n", 1)[1], maxsplit=1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    lines = [line.split("  #", 1)[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def test_the_readme_selftest_commands_run_as_written(capsys, monkeypatch):
    commands = _readme_selftest_commands()
    serve_cmd = next(c for c in commands if c.startswith("python -m drill serve"))
    real_cmd = next(c for c in commands if c.startswith("sagewarden selftest"))
    local_cmd = next(c for c in commands if c.startswith("sagewarden --local selftest"))
    assert len(commands) == 3, commands
    assert "--role" in real_cmd and "--bucket" in real_cmd

    # the README's server (an ephemeral port instead of 8765, so tests never collide)
    argv = [*shlex.split(serve_cmd.removesuffix("&").strip())[1:], "--port", "0", "--speed", str(SPEED)]
    proc = subprocess.Popen(
        [sys.executable, *argv],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'lambdas'}"},
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        line = ""
        while time.monotonic() < deadline and not line.startswith("  API "):
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else "the server stopped"
        url = line.split()[-1]
        info = json.loads(__import__("urllib.request").request.urlopen(f"{url}/_local", timeout=10).read())
        assert info["scenario"] == "selftest"
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
            monkeypatch.delenv(key, raising=False)

        # the local rehearsal, exactly as shown
        code, out, err = run_cli(capsys, *shlex.split(local_cmd)[1:], "--api-url", url)
        assert code == 0, out + err
        assert "PASS" in out

        # the real-account command, with the deployed API's URL replaced by the local one; it asks first
        bucket = shlex.split(real_cmd)[shlex.split(real_cmd).index("--bucket") + 1]
        s3 = boto3.client(
            "s3",
            endpoint_url=info["aws_endpoint_url"],
            region_name="us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",
        )
        s3.create_bucket(Bucket=bucket)
        monkeypatch.setenv("SAGEWARDEN_API_URL", url)  # a loopback URL means local mode
        code, out, err = run_cli(capsys, *shlex.split(real_cmd)[1:], stdin="y\n")
        assert code == 0, out + err
        assert "Run the self-test? [y/N] " in err and "PASS" in out
        assert f"s3://{bucket}/sagewarden-selftest/" in err
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
