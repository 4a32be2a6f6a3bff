"""Every `make` command the README and its docs/ pages show exists and takes the variables shown (make -n: nothing
runs), every `npx` is the pinned CLI, and every context key they name is one the app reads."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess

import pytest

from infra import REPO_ROOT
from infra.config import CONTEXT_KEYS
from tests.doc_pages import documentation

README = documentation()


def _bash_blocks() -> list[str]:
    return re.findall(r"```bash\n(.*?)```", README, flags=re.S)


def _make_commands() -> list[str]:
    commands = []
    for block in _bash_blocks():
        joined = block.replace("\\\n", " ")
        for line in joined.splitlines():
            line = line.split(" #", 1)[0].strip()
            if line.startswith("make "):
                commands.append(line)
    commands += [m for m in re.findall(r"`(make [^`]+)`", README) if "..." not in m]
    return sorted(set(commands))


MAKE_COMMANDS = _make_commands()


def _command_id(command: str) -> str:
    """The command as its id, a long or ARN value shortened to `NAME=...`."""
    words = [
        w if "=" not in w or (len(w.split("=", 1)[1]) <= 24 and ":" not in w) else w.split("=", 1)[0] + "=..."
        for w in shlex.split(command)
    ]
    return " ".join(words)


def test_readme_shows_the_deploy_commands() -> None:
    for needed in ("make bootstrap", "make doctor", "make deploy", "make destroy FORCE=1", "make synth"):
        assert any(c.startswith(needed) for c in MAKE_COMMANDS), needed


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("command", MAKE_COMMANDS, ids=_command_id)
def test_readme_make_command_dry_runs(command: str) -> None:
    args = shlex.split(command)[1:]

    result = subprocess.run(
        ["make", "-n", "--no-print-directory", "-C", str(REPO_ROOT), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )

    assert result.returncode == 0, f"{command}: {result.stderr}"
    assert "No rule to make target" not in result.stderr


@pytest.mark.claim("`--no-install` makes `npx` fail rather than offer to download another CDK version")
def test_readme_npx_always_uses_the_pinned_cli() -> None:
    uses = re.findall(r"\bnpx [^`\n;)]*", README)

    assert uses
    for use in uses:
        assert use.startswith("npx --no-install cdk"), use


def test_readme_context_keys_are_the_apps() -> None:
    named = set(re.findall(r"-c ([A-Za-z]+)=", README)) - {"key"}  # `-c key=value`, the form
    table = set(re.findall(r"^\| `([A-Za-z]+)` \|", README, flags=re.M))

    assert named <= set(CONTEXT_KEYS), named - set(CONTEXT_KEYS)
    assert set(CONTEXT_KEYS) <= table, set(CONTEXT_KEYS) - table


def test_readme_api_table_lists_every_route_of_the_api() -> None:
    from infra.constructs.api import ROUTES

    section = re.split(r"\n#{1,2} ", README.split("## The API\n", 1)[1], maxsplit=1)[0]
    rows = re.findall(r"^\| `(GET|POST|PUT|PATCH|DELETE) ([^`?]+)[^`]*` \|", section, flags=re.M)

    assert sorted(rows) == sorted(ROUTES)
