"""CDK infrastructure of sagewarden.

In the repository this package is ``infra`` (``app.py`` deploys it); installed with
``pip install sagewarden[infra]`` it is ``sagewarden_cdk``, a construct library a platform team adds
to its own CDK app::

    from sagewarden_cdk import SagewardenSupervisor

    SagewardenSupervisor(self, "Supervisor", allowed_role_arns=["arn:aws:iam::123456789012:role/training"])

The Lambda asset is the ``sagewarden`` package: ``<repo>/lambdas`` in the repository (put on
``sys.path`` here, so that the infrastructure can import the shared names of ``sagewarden.keys``, a
dependency-free module), or a copy of the installed ``sagewarden`` package staged into a directory
of its own (the asset must hold nothing else).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
_REPO_LAMBDAS = REPO_ROOT / "lambdas"
IN_REPOSITORY = (_REPO_LAMBDAS / "sagewarden" / "keys.py").is_file()

if IN_REPOSITORY and str(_REPO_LAMBDAS) not in sys.path:
    sys.path.insert(0, str(_REPO_LAMBDAS))


def _staged_installed_package() -> Path:
    """A directory holding only a copy of the installed ``sagewarden`` package (no byte code)."""
    import sagewarden

    source = Path(sagewarden.__file__).resolve().parent
    root = Path(tempfile.mkdtemp(prefix="sagewarden-asset-"))
    shutil.copytree(source, root / "sagewarden", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return root


LAMBDAS_DIR = _REPO_LAMBDAS if IN_REPOSITORY else _staged_installed_package()


def __getattr__(name: str) -> Any:
    # the construct is imported on first use: `import infra` (constants, config) stays light
    if name == "SagewardenSupervisor":
        from .library import SagewardenSupervisor

        return SagewardenSupervisor
    raise AttributeError(name)
