"""CDK infrastructure of sagewarden.

The Lambda asset root (``<repo>/lambdas``) is put on ``sys.path`` here so that the
infrastructure can import the shared names from ``sagewarden.keys`` (the one module the
constructs, the adapters and the test fixtures share). Importing ``keys`` pulls in nothing
else: it is a dependency-free module.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
LAMBDAS_DIR = REPO_ROOT / "lambdas"

if str(LAMBDAS_DIR) not in sys.path:
    sys.path.insert(0, str(LAMBDAS_DIR))
