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

import functools
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


@functools.cache
def lambda_code_dir() -> Path:
    """The Lambda asset's directory: ``<repo>/lambdas``, or (installed) a directory holding only a
    copy of the installed ``sagewarden`` package, no byte code, staged once per process when the
    first function is built (not at import: ``import sagewarden_cdk`` for its config stays free)."""
    if IN_REPOSITORY:
        return _REPO_LAMBDAS
    import sagewarden

    source = Path(sagewarden.__file__).resolve().parent
    root = Path(tempfile.mkdtemp(prefix="sagewarden-asset-"))
    shutil.copytree(source, root / "sagewarden", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return root


def __getattr__(name: str) -> Any:
    # the construct is imported on first use: `import infra` (constants, config) stays light
    if name == "SagewardenSupervisor":
        from .library import SagewardenSupervisor

        return SagewardenSupervisor
    raise AttributeError(name)
