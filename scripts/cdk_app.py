"""The CDK app command of cdk.json: run app.py with the project's own interpreter.

``npx cdk <command>`` runs ``python3 scripts/cdk_app.py``. The system ``python3`` usually lacks
the pinned aws-cdk-lib, so this hands over to ``.venv/bin/python`` (what ``make setup``
creates) when it exists; otherwise it runs app.py with the current interpreter if that has the
CDK packages (an activated virtualenv, CI), and otherwise says in one line what to do.

Standard library only, and kept runnable by any Python 3: it runs before the project's
interpreter is known.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
MISSING = (
    "sagewarden: no project environment: run `make setup` first (it creates .venv with the "
    "pinned CDK packages; Python >= 3.11 needed), then retry the cdk command."
)


def venv_python(repo_root: Path) -> Path | None:
    for candidate in (repo_root / ".venv" / "bin" / "python", repo_root / ".venv" / "Scripts" / "python.exe"):
        if candidate.exists():
            return candidate
    return None


def command(repo_root: Path, current: str, current_has_cdk: bool) -> list[str] | None:
    """The command that runs the app, or None when no interpreter has the project's packages."""
    app = str(repo_root / "app.py")
    venv = venv_python(repo_root)
    if venv is not None:
        return [str(venv), app]
    if current_has_cdk:
        return [current, app]
    return None


def main() -> int:
    argv = command(REPO_ROOT, sys.executable, importlib.util.find_spec("aws_cdk") is not None)
    if argv is None:
        print(MISSING, file=sys.stderr)
        return 1
    os.chdir(REPO_ROOT)
    os.execv(argv[0], argv)
    return 0  # pragma: no cover - execv does not return


if __name__ == "__main__":
    sys.exit(main())
