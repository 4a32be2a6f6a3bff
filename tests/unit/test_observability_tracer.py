"""X-Ray is opt-in (issue 18, cheaper per call): Powertools' Tracer imports the X-Ray SDK, about
0.35 s of every cold start; the handlers import it only when tracing is on, at the first call."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HANDLERS = ("api", "on_alarm_state_change", "on_training_job_state_change", "on_training_logs", "sweep")


def _python(code: str, trace_disabled: str) -> str:
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT / "lambdas"),
        "AWS_DEFAULT_REGION": "us-east-1",
        "POWERTOOLS_TRACE_DISABLED": trace_disabled,
    }
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.mark.claim(
    "Off by default: Powertools' Tracer imports the X-Ray SDK, about 0.35 s of every cold start; without it the handlers never import the SDK."
)
def test_no_handler_imports_the_xray_sdk_when_tracing_is_off():
    code = "import sys\n" + "".join(f"import sagewarden.handlers.{h}\n" for h in HANDLERS)
    code += "print('aws_xray_sdk' in sys.modules)"
    assert _python(code, "true") == "False"


@pytest.mark.claim(
    "Off by default: Powertools' Tracer imports the X-Ray SDK, about 0.35 s of every cold start; without it the handlers never import the SDK."
)
def test_tracing_on_creates_the_tracer_at_the_first_call_not_at_import():
    code = """
import sys
from sagewarden.observability import LazyTracer
tracer = LazyTracer("t")
@tracer.capture_method
def f(x):
    return x + 1
print('aws_xray_sdk' in sys.modules, end=' ')
print(f(1), type(tracer.real()).__name__, 'aws_xray_sdk' in sys.modules)
"""
    assert _python(code, "false") == "False 2 Tracer True"
    # off: the function runs undecorated and nothing is imported
    assert _python(code, "true") == "False 2 NoneType False"
