"""The `sagewarden` command line: submit, watch, inspect, cancel and resume runs through the
IAM-authorised API (or the drill's local server)."""

import sys
from pathlib import Path

# From a checkout, the API's own validation (used by `submit --dry-run`) lives in lambdas/;
# an installed CLI carries it as the `sagewarden` package.
_LAMBDAS = Path(__file__).resolve().parent.parent / "lambdas"
if (_LAMBDAS / "sagewarden").is_dir() and str(_LAMBDAS) not in sys.path:
    sys.path.append(str(_LAMBDAS))
