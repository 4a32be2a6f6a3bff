"""Deployment ergonomics: make's prerequisite check, the deploy/destroy/bootstrap recipes, the
cdk.json app wrapper and the pinned CDK CLI. Runs `make -n` (prints, runs nothing) and the
scripts themselves against fake PATHs and fake checkouts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from infra import REPO_ROOT

CHECK = REPO_ROOT / "scripts" / "check-prereqs.sh"
WRAPPER = REPO_ROOT / "scripts" / "cdk_app.py"
ROLE = "arn:aws:iam::123456789012:role/SageMakerTrainingRole"
SH = shutil.which("sh") or "/bin/sh"

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _make(*args: str, stdin: int | None = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(REPO_ROOT), *args],
        capture_output=True,
        text=True,
        stdin=stdin,
        timeout=60,
        check=False,
    )


def _lines_starting(output: str, prefix: str) -> list[str]:
    return [line.strip() for line in output.splitlines() if line.strip().startswith(prefix)]


# --- make deploy / bootstrap / destroy ------------------------------------------------------------


@pytest.mark.claim(
    "`make deploy` runs the whole **preflight** ([docs/deploy.md](docs/deploy.md#the-preflight-make-doctor)) and stops before `cdk deploy` if anything would make the deploy fail"
)
@pytest.mark.claim(
    "Other settings go in `CONTEXT`, exactly as `cdk` takes them; the preflight reads the same ones"
)
@needs_make
def test_make_deploy_runs_the_preflight_first_with_the_same_context_and_profile() -> None:
    result = _make(
        "-n",
        "deploy",
        f'ALLOWED_ROLE_ARNS=["{ROLE}"]',
        "ALERT_EMAIL=oncall@example.com",
        "CONTEXT=-c logSubscription=false",
        "PROFILE=ml",
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    doctor = [i for i, line in enumerate(lines) if "-m sagewarden_cli.doctor" in line]
    deploy = [i for i, line in enumerate(lines) if "npx --no-install cdk deploy" in line]

    assert len(doctor) == 1 and len(deploy) == 1 and doctor[0] < deploy[0]
    for line in (lines[doctor[0]], lines[deploy[0]]):
        assert f"-c allowedRoleArns='[\"{ROLE}\"]'" in line
        assert "-c alertEmail=oncall@example.com" in line
        assert "-c logSubscription=false" in line
        assert "--profile ml" in line


@pytest.mark.claim("in CI, where there is no terminal, add `REQUIRE_APPROVAL=never`")
@pytest.mark.claim("`make deploy PREFLIGHT=0` skips it")
@needs_make
def test_make_deploy_preflight_can_be_skipped_and_approval_passed_for_ci() -> None:
    result = _make("-n", "deploy", "PREFLIGHT=0", "REQUIRE_APPROVAL=never")

    assert result.returncode == 0, result.stderr
    assert not _lines_starting(result.stdout, ".venv/bin/python -m sagewarden_cli.doctor")
    (deploy,) = [line for line in result.stdout.splitlines() if "cdk deploy" in line]
    assert deploy.rstrip().endswith("--require-approval never")


@pytest.mark.claim("once per account and region: cdk bootstrap")
@pytest.mark.claim(
    "CLI pinned in `package.json` and `package-lock.json` (`aws-cdk@^2.1148`, installed into `node_modules` by `npm ci`; 3.x does not work with aws-cdk-lib 2.275)"
)
@pytest.mark.claim("`--no-install` makes `npx` fail rather than offer to download another CDK version")
@needs_make
def test_make_bootstrap_uses_the_pinned_cli_without_an_install_prompt() -> None:
    result = _make("-n", "bootstrap", "PROFILE=ml")

    assert result.returncode == 0, result.stderr
    assert _lines_starting(result.stdout, "npx --no-install cdk bootstrap --profile ml")
    assert "npm ci" in result.stdout or (REPO_ROOT / "node_modules" / ".installed").exists()


@pytest.mark.claim(
    "`make bootstrap` first checks that your credentials and region resolve (the preflight's first check, `--credentials-only`)"
)
@pytest.mark.claim(
    "`--credentials-only` runs only the first row (`make bootstrap` runs that, and `make bootstrap PREFLIGHT=0` skips it)"
)
@needs_make
def test_make_bootstrap_runs_the_credentials_preflight_first() -> None:
    lines = _make("-n", "bootstrap", "PROFILE=ml").stdout.splitlines()
    doctor = [i for i, line in enumerate(lines) if "-m sagewarden_cli.doctor" in line]
    bootstrap = [i for i, line in enumerate(lines) if "cdk bootstrap" in line]

    assert len(doctor) == 1 and len(bootstrap) == 1 and doctor[0] < bootstrap[0]
    assert lines[doctor[0]].split("-m sagewarden_cli.doctor", 1)[1].split() == [
        "--credentials-only",
        "--profile",
        "ml",
    ]
    assert not _lines_starting(
        _make("-n", "bootstrap", "PREFLIGHT=0").stdout, ".venv/bin/python -m sagewarden_cli.doctor"
    )


@pytest.mark.claim(
    'so a missing login is one line saying what to run rather than CDK\'s "Unable to resolve AWS account"'
)
@needs_make
@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")
def test_make_bootstrap_without_credentials_stops_at_one_line_before_cdk(tmp_path: Path) -> None:
    # -o: the environments count as installed, so only the prerequisite check, the preflight and
    # (had it passed) cdk bootstrap run
    installed = ("-o", ".venv/.installed", "-o", "setup", "-o", "node_modules/.installed")
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "AWS_CONFIG_FILE": str(tmp_path / "config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_REGION": "us-east-1",
    }
    result = subprocess.run(
        ["make", "--no-print-directory", "-C", str(REPO_ROOT), *installed, "bootstrap"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
        env=env,
    )

    assert result.returncode != 0
    problems = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    assert len(problems) == 1 and "no AWS credentials found" in problems[0] and "aws configure" in problems[0]
    assert result.stdout.splitlines()[-1].startswith("preflight: 1 problem to fix before bootstrapping")
    assert "cdk bootstrap" not in result.stdout and "Unable to resolve AWS account" not in result.stderr


@pytest.mark.claim("asks first; FORCE=1 destroys without a prompt (CI)")
@needs_make
def test_make_destroy_with_force_passes_force_to_cdk() -> None:
    result = _make("-n", "destroy", "FORCE=1")

    assert result.returncode == 0, result.stderr
    (destroy,) = [line for line in result.stdout.splitlines() if "cdk destroy" in line]
    assert destroy.split()[-1] == "--force"
    assert "[ ! -t 0 ]" not in result.stdout  # no terminal check when forced


@pytest.mark.claim("asks first; FORCE=1 destroys without a prompt (CI)")
@needs_make
def test_make_destroy_without_a_terminal_says_to_use_force_and_runs_nothing() -> None:
    # -o: treat the installed environments as up to date, so only the guard and prereqs run
    result = _make("-o", ".venv/.installed", "-o", "node_modules/.installed", "-o", "setup", "destroy")

    assert result.returncode != 0
    assert "make destroy FORCE=1" in result.stderr
    assert "cdk destroy" not in result.stdout.replace("make destroy", "")


# --- make demo-serve ----------------------------------------------------------------------------


def _serve_args(*variables: str, env: dict[str, str] | None = None) -> list[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("SCENARIO", "SUBMIT", "PORT", "SPEED")}
    result = subprocess.run(
        ["make", "-n", "--no-print-directory", "-C", str(REPO_ROOT), "demo-serve", *variables],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
        env={**base, **(env or {})},
    )
    assert result.returncode == 0, result.stderr
    (line,) = [line for line in result.stdout.splitlines() if "-m drill serve" in line]
    return line.split("-m drill serve", 1)[1].split()


@pytest.mark.claim(
    "(`make demo-serve SCENARIO=NAME` loads a scenario's account, job profiles and faults, `SUBMIT=1` also submits its runs; its banner prints a command that works as printed)"
)
@needs_make
def test_make_demo_serve_takes_a_scenario_only_when_one_is_asked_for() -> None:
    plain = ["--port", "8765", "--speed", "600"]

    assert _serve_args() == plain  # make demo's default scenario is not served
    assert _serve_args("SCENARIO=") == plain
    assert _serve_args("SCENARIO=selftest") == [*plain, "--scenario", "selftest"]
    assert _serve_args("SCENARIO=default", "SUBMIT=1", "PORT=9000") == [
        "--port",
        "9000",
        "--speed",
        "600",
        "--scenario",
        "default",
        "--submit",
    ]
    assert _serve_args(env={"SCENARIO": "selftest"}) == [*plain, "--scenario", "selftest"]


# --- the prerequisite check -------------------------------------------------------------------


def _fake_bin(tmp_path: Path, tools: dict[str, str]) -> Path:
    """A directory holding only the given fake tools, each printing its version line."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, output in tools.items():
        tool = bin_dir / name
        tool.write_text(f"#!{SH}\necho '{output}'\n")
        tool.chmod(0o755)
    return bin_dir


def _check(bin_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SH, str(CHECK), *args],
        env={"PATH": str(bin_dir)},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


@pytest.mark.claim("Every `make` target checks first and says in one line what to install")
def test_prereqs_all_present_is_silent(tmp_path: Path) -> None:
    bin_dir = _fake_bin(tmp_path, {"python3": "3.12", "node": "v22.11.0", "npm": "10.9.0"})

    result = _check(bin_dir, "python3", "--npm")

    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


@pytest.mark.claim(
    "Each command first checks its prerequisites, Python 3.11+ (3.12 in Lambda) and Node.js 18+ for CDK synthesis, and says in one line what to install if one is missing"
)
@pytest.mark.claim("Python 3.11 or newer, Node.js 18 or newer (22 LTS recommended) and npm on `PATH`")
@pytest.mark.claim("Every `make` target checks first and says in one line what to install")
@pytest.mark.parametrize(
    ("tools", "args", "expected"),
    [
        ({"node": "v22.1.0"}, ("python3",), "Python 3.11+ not found"),
        ({"python3": "3.9", "node": "v22.1.0"}, ("python3",), "is Python 3.9; sagewarden needs 3.11+"),
        ({"python3": "3.12"}, ("python3",), "Node.js not found"),
        ({"python3": "3.12", "node": "v16.20.2"}, ("python3",), "Node.js 16.20.2 is too old"),
        ({"python3": "3.12", "node": "v20.1.0"}, ("python3", "--npm"), "npm not found"),
    ],
    ids=["no-python", "old-python", "no-node", "old-node", "no-npm"],
)
def test_prereqs_each_missing_tool_is_one_line_saying_what_to_install(
    tmp_path: Path, tools: dict[str, str], args: tuple[str, ...], expected: str
) -> None:
    result = _check(_fake_bin(tmp_path, tools), *args)

    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert expected in lines[0] and "install" in lines[0]


@pytest.mark.claim("Python 3.11 or newer, Node.js 18 or newer (22 LTS recommended) and npm on `PATH`")
def test_prereqs_npm_is_only_required_for_the_cdk_cli(tmp_path: Path) -> None:
    bin_dir = _fake_bin(tmp_path, {"python3": "3.11", "node": "v18.20.0"})

    assert _check(bin_dir, "python3").returncode == 0
    assert _check(bin_dir, "python3", "--npm").returncode == 1


@pytest.mark.claim(
    "Each command first checks its prerequisites, Python 3.11+ (3.12 in Lambda) and Node.js 18+ for CDK synthesis, and says in one line what to install if one is missing"
)
def test_prereqs_reports_every_problem_at_once(tmp_path: Path) -> None:
    result = _check(_fake_bin(tmp_path, {"python3": "3.8"}), "python3", "--npm")

    assert result.returncode == 1
    assert len(result.stderr.splitlines()) == 3  # old Python, no Node, no npm


# --- cdk.json's app: the project's interpreter ----------------------------------------------------


@pytest.mark.claim(
    "CLI pinned in `package.json` and `package-lock.json` (`aws-cdk@^2.1148`, installed into `node_modules` by `npm ci`; 3.x does not work with aws-cdk-lib 2.275)"
)
def test_cdk_json_runs_the_wrapper_and_package_json_pins_cdk_2() -> None:
    cdk_json = json.loads((REPO_ROOT / "cdk.json").read_text())
    package = json.loads((REPO_ROOT / "package.json").read_text())
    lock = json.loads((REPO_ROOT / "package-lock.json").read_text())

    assert cdk_json["app"] == "python3 scripts/cdk_app.py"
    assert package["devDependencies"]["aws-cdk"].startswith("^2.")
    assert lock["packages"]["node_modules/aws-cdk"]["version"].startswith("2.")


def _fake_checkout(tmp_path: Path, *, with_venv: bool) -> Path:
    repo = tmp_path / "checkout"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(WRAPPER, repo / "scripts" / "cdk_app.py")
    (repo / "app.py").write_text("raise SystemExit('the real app must not run here')\n")
    if with_venv:
        python = repo / ".venv" / "bin" / "python"
        python.parent.mkdir(parents=True)
        python.write_text(f'#!{SH}\necho "venv python ran: $*"\necho "cwd: $(pwd)"\n')
        python.chmod(0o755)
    return repo


def test_cdk_app_wrapper_hands_over_to_the_project_venv(tmp_path: Path) -> None:
    repo = _fake_checkout(tmp_path, with_venv=True)

    result = subprocess.run(
        [sys.executable, "-S", str(repo / "scripts" / "cdk_app.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert f"venv python ran: {repo / 'app.py'}" in result.stdout
    assert f"cwd: {repo}" in result.stdout


def test_cdk_app_wrapper_without_venv_or_cdk_says_to_run_make_setup(tmp_path: Path) -> None:
    repo = _fake_checkout(tmp_path, with_venv=False)

    # -S: no site-packages, so this interpreter has no aws_cdk (like a system python3)
    result = subprocess.run(
        [sys.executable, "-S", str(repo / "scripts" / "cdk_app.py")],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={**os.environ, "PYTHONPATH": ""},
    )

    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "sagewarden: no project environment: run `make setup` first (it creates .venv with the pinned CDK "
        "packages; Python >= 3.11 needed), then retry the cdk command."
    ]


def test_cdk_app_wrapper_uses_the_current_interpreter_when_it_has_the_cdk(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    try:
        import cdk_app
    finally:
        sys.path.remove(str(REPO_ROOT / "scripts"))
    repo = _fake_checkout(tmp_path, with_venv=False)

    assert cdk_app.command(repo, "/opt/py/bin/python3", True) == ["/opt/py/bin/python3", str(repo / "app.py")]
    assert cdk_app.command(repo, "/opt/py/bin/python3", False) is None
    venv_repo = _fake_checkout(tmp_path / "other", with_venv=True)
    assert cdk_app.command(venv_repo, "/opt/py/bin/python3", True) == [
        str(venv_repo / ".venv" / "bin" / "python"),
        str(venv_repo / "app.py"),
    ]


# --- what README says each target runs (docs/claims.md) --------------------------------------------


@pytest.mark.claim("a local drill on a simulated AWS account: no AWS account, no credentials")
@pytest.mark.claim("`make demo` runs `drill/scenarios/default.json`")
@pytest.mark.claim(
    "`make test` runs 300 requests; `make soak-api` runs 20,000 (`FUZZ_REQUESTS=` to change) and prints one summary line"
)
@pytest.mark.claim(
    "10,000 histories, 0 violations (23 histories/s on the last run, which shared the machine); 200 more on the DynamoDB store (moto), 0 violations"
)
@pytest.mark.claim(
    "20,000 requests in 427 s on the last run (240 s on an earlier one), 0 responses ≥ 500, 0 refusals that stored anything"
)
@pytest.mark.claim("`make test` runs everything CI runs (pytest with 2 workers).")
@needs_make
@pytest.mark.parametrize(
    ("args", "runs"),
    [
        # `make demo` runs drill/scenarios/default.json
        (["demo"], [".venv/bin/python -m drill default"]),
        # `make test` runs everything CI runs (pytest with 2 workers): no marker, path or -k filter
        (["test"], [".venv/bin/python -m pytest -n 2 --dist loadgroup"]),
        # `make lint` runs ruff (lint and format check), `mypy --strict` on `domain/`, mypy
        # elsewhere, and checkov on a fresh synth of the template with the checked-in config
        (
            ["lint"],
            [
                ".venv/bin/python -m ruff check .",
                ".venv/bin/python -m ruff format --check .",
                ".venv/bin/python -m mypy --strict lambdas/sagewarden/domain",
                ".venv/bin/python -m mypy lambdas/sagewarden drill infra app.py benchmarks sagewarden_cli scripts",
                ".venv/bin/python -m mypy examples/platform-app/app.py",
                "CDK_OUTDIR=.cache/checkov-synth .venv/bin/python app.py",
                ".venv-checkov/bin/checkov --config-file .checkov.yaml -f .cache/checkov-synth/",
            ],
        ),
        # make soak: 10,000 histories, 200 more on the DynamoDB store, then the API fuzzer at 20,000
        (
            ["soak"],
            [
                "SAGEWARDEN_SOAK_EXAMPLES=10000 SAGEWARDEN_SOAK_DYNAMODB_EXAMPLES=200 SAGEWARDEN_CRASH_CALLS=0 "
                ".venv/bin/python -m pytest tests/soak -p no:randomly",
                "SAGEWARDEN_FUZZ_REQUESTS=20000 .venv/bin/python -m pytest tests/fuzz -m fuzz -s -q",
            ],
        ),
        (
            ["soak-api", "FUZZ_REQUESTS=500"],
            ["SAGEWARDEN_FUZZ_REQUESTS=500 .venv/bin/python -m pytest tests/fuzz"],
        ),
        # make bench -> BENCHMARKS.md, docs/bench-*.png
        (["bench"], [".venv/bin/python -m benchmarks --write"]),
        # STACK= and JOB_PREFIX= set both for make doctor, make deploy and make destroy
        (
            ["doctor", "STACK=SagewardenTeamB", "JOB_PREFIX=tb"],
            [".venv/bin/python -m sagewarden_cli.doctor -c stackName=SagewardenTeamB -c jobPrefix=tb"],
        ),
        (
            ["deploy", "STACK=SagewardenTeamB", "JOB_PREFIX=tb"],
            ["npx --no-install cdk deploy -c stackName=SagewardenTeamB -c jobPrefix=tb"],
        ),
        (
            ["destroy", "STACK=SagewardenTeamB", "JOB_PREFIX=tb", "FORCE=1"],
            ["npx --no-install cdk destroy -c stackName=SagewardenTeamB -c jobPrefix=tb"],
        ),
    ],
    ids=["demo", "test", "lint", "soak", "soak-api", "bench", "doctor", "deploy", "destroy"],
)
def test_make_targets_run_what_the_readme_says(args: list[str], runs: list[str]) -> None:
    result = _make("-n", *args)

    assert result.returncode == 0, result.stderr
    lines = [" ".join(line.split()) for line in result.stdout.replace("\\\n", " ").splitlines()]
    for command in runs:
        assert any(line.startswith(command) for line in lines), (
            f"make {' '.join(args)} never runs {command!r}"
        )


@pytest.mark.claim(
    "`make test` runs 300 requests; `make soak-api` runs 20,000 (`FUZZ_REQUESTS=` to change) and prints one summary line"
)
@needs_make
def test_make_help_lists_the_targets_and_ci_runs_make_test() -> None:
    result = _make("help")

    assert result.returncode == 0, result.stderr
    listed = {line.split()[0] for line in result.stdout.splitlines() if line.strip()}
    assert {
        "setup",
        "demo",
        "test",
        "lint",
        "soak",
        "soak-api",
        "bench",
        "doctor",
        "deploy",
        "destroy",
    } <= listed
    ci = (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert "make test" in [line.strip() for line in ci]  # `.ci/run` runs `make test`
    # the fuzzer's share of `make test` (`make soak-api` sets its own size)
    fuzz = (REPO_ROOT / "tests" / "fuzz" / "test_api_fuzz.py").read_text(encoding="utf-8")
    assert 'int(os.environ.get("SAGEWARDEN_FUZZ_REQUESTS", "300"))' in fuzz


@pytest.mark.claim("`PYTHON=/path/to/python3.12` picks another interpreter")
@needs_make
def test_setup_installs_the_locked_packages_and_the_sagewarden_command(tmp_path: Path) -> None:
    import tomllib

    venv = tmp_path / "venv"
    result = _make("-n", "setup", "PYTHON=/path/to/python3.12", f"VENV={venv}")

    assert result.returncode == 0, result.stderr
    lines = [line.strip() for line in result.stdout.splitlines()]
    # PYTHON=/path/to/python3.12 picks the interpreter the environment is made with
    assert f"/path/to/python3.12 -m venv {venv}" in lines
    # the exact versions come from the lock; the project itself adds no other package
    lock = lines.index(f"{venv}/bin/python -m pip install --progress-bar off -r requirements.lock")
    project_line = lines.index(
        f'{venv}/bin/python -m pip install --progress-bar off --no-deps ".[infra,dev]"'
    )
    assert lock < project_line
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    # installing the project installs the `sagewarden` command
    assert project["scripts"] == {"sagewarden": "sagewarden_cli.__main__:main"}
    from sagewarden_cli.app import main

    assert callable(main)
