"""The local drill: a simulated AWS account (moto + a simulated SageMaker) on a virtual clock."""

import sys
from pathlib import Path

_LAMBDAS = str(Path(__file__).resolve().parent.parent / "lambdas")
if _LAMBDAS not in sys.path:
    sys.path.insert(0, _LAMBDAS)
