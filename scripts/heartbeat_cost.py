"""What the heartbeat subscription costs for training jobs that are not sagewarden's.

The subscription filter on /aws/sagemaker/TrainingJobs has an empty pattern (a filter pattern
matches message text, not the stream name, so it cannot select the supervisor's jobs): every
training job of the region invokes the heartbeat function, which drops foreign jobs by their
stream name. This measures the handler on a CloudWatch Logs subscription batch of about 1 KB
of log text from a foreign job, and prints the cost per million such events.

    .venv/bin/python scripts/heartbeat_cost.py [--events-per-batch 10] [--runs 20000]

Prices are constants below, with the date they were read; the local timing is scaled to a
256 MB Lambda (a 256/1769 share of a vCPU) and rounded up to Lambda's 1 ms billing unit.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import io
import json
import math
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "lambdas"))

from sagewarden.handlers import on_training_logs

PRICES_AS_OF = "AWS list prices for us-east-1 as read in 2025"
LAMBDA_REQUEST_USD = 0.20 / 1e6  # per invocation
LAMBDA_GB_SECOND_ARM_USD = 0.0000133334  # arm64
LOGS_INGEST_USD_PER_GB = 0.50  # CloudWatch Logs standard ingestion (the function's own log lines)
XRAY_TRACE_USD = 5.00 / 1e6  # per trace recorded
XRAY_SAMPLED_SHARE = 0.05  # the default sampling rule beyond its 1 request/second reservoir
MEMORY_MB = 256
FULL_VCPU_MB = 1769  # Lambda gives one vCPU at 1,769 MB, CPU share in proportion below
# START, END and REPORT lines Lambda writes for every invocation (untraced: no XRAY line), plus
# CloudWatch Logs' 26 billable bytes per event.
PLATFORM_LOG_BYTES = 70 + 50 + 180 + 3 * 26


def subscription_event(job: str, events: int, line_bytes: int) -> dict[str, Any]:
    """A CloudWatch Logs subscription delivery, as Lambda receives it."""
    base_ms = 1_764_547_200_000
    message = "x" * line_bytes
    payload = {
        "messageType": "DATA_MESSAGE",
        "owner": "123456789012",
        "logGroup": "/aws/sagemaker/TrainingJobs",
        "logStream": f"{job}/algo-1-1764547200",
        "subscriptionFilters": ["Sagewarden-heartbeat"],
        "logEvents": [
            {
                "id": str(36000000000000000000000000000000000000000000000000000000 + i),
                "timestamp": base_ms + i * 100,
                "message": message,
            }
            for i in range(events)
        ],
    }
    data = base64.b64encode(gzip.compress(json.dumps(payload).encode())).decode()
    return {"awslogs": {"data": data}}


def per_call_seconds(event: dict[str, Any], runs: int) -> float:
    sink = io.StringIO()
    with redirect_stdout(sink):  # the own-job case prints EMF lines
        for _ in range(min(runs, 1000)):  # warm up
            on_training_logs.handler(event, None)
        start = time.perf_counter()
        for _ in range(runs):
            on_training_logs.handler(event, None)
        elapsed = time.perf_counter() - start
    return elapsed / runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events-per-batch", type=int, default=10)
    parser.add_argument("--runs", type=int, default=20_000)
    args = parser.parse_args(argv)
    line_bytes = 1024 // args.events_per_batch

    foreign = subscription_event("someone-elses-job-2025-12-01", args.events_per_batch, line_bytes)
    own = subscription_event("sw-llama-8b-01KE5Q86000DNQ47GXEV9VZMPH-a001", args.events_per_batch, line_bytes)
    local_foreign = per_call_seconds(foreign, args.runs)
    local_own = per_call_seconds(own, args.runs)

    slowdown = FULL_VCPU_MB / MEMORY_MB
    lambda_ms = local_foreign * 1000 * slowdown
    billed_ms = max(1, math.ceil(lambda_ms))
    invocations = 1e6 / args.events_per_batch
    requests = invocations * LAMBDA_REQUEST_USD
    duration = invocations * billed_ms / 1000 * MEMORY_MB / 1024 * LAMBDA_GB_SECOND_ARM_USD
    own_logs = invocations * PLATFORM_LOG_BYTES / 1e9 * LOGS_INGEST_USD_PER_GB
    traces = invocations * XRAY_SAMPLED_SHARE * XRAY_TRACE_USD

    print(
        f"batch: {args.events_per_batch} events of {line_bytes} B of log text ({len(foreign['awslogs']['data'])} B delivered)"
    )
    print(
        f"handler, local (Python {sys.version.split()[0]}): foreign job {local_foreign * 1e6:.1f} us, "
        f"own job {local_own * 1e6:.1f} us per invocation"
    )
    print(f"at {MEMORY_MB} MB (x{slowdown:.1f} slower): ~{lambda_ms:.2f} ms -> billed {billed_ms} ms")
    print(f"per million foreign log events = {invocations:,.0f} invocations ({PRICES_AS_OF}):")
    print(f"  Lambda requests     ${requests:.4f}")
    print(f"  Lambda duration     ${duration:.4f}")
    print(f"  function's own log lines (START/END/REPORT) ${own_logs:.4f}")
    print(f"  X-Ray traces        ${traces:.4f} if it were traced (5% sampled; it is not)")
    print(f"  total               ${requests + duration + own_logs:.4f} (+${traces:.4f} with X-Ray)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
