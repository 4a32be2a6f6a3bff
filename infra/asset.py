"""Where the Lambda asset comes from: ``<repo>/lambdas`` in the repository (put on ``sys.path``
here, so that the infrastructure can import the shared names of ``sagewarden.keys``), or a copy of
the installed ``sagewarden`` package staged into a directory of its own (see the package doc)."""

from __future__ import annotations

import functools
import shutil
import sys
import tempfile
from pathlib import Path

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
