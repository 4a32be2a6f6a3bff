"""CloudWatch Logs subscription on /aws/sagemaker/TrainingJobs: the per-job heartbeat metric (EMF).

Writes one `Sagewarden/Heartbeat LogEvents` record per job-minute, marks declared phases active
ahead, and drops other deployments' jobs and non-training streams.
Why: docs/hang-detection.md (*Declared long phases*, *Log silence*)."""

from __future__ import annotations

import base64
import gzip
import json
import os
from typing import Any

from sagewarden import keys
from sagewarden.domain.hangs.cadence import activity_per_minute
from sagewarden.domain.vocabulary.names import training_stream


def heartbeat_records(event: dict[str, Any], job_prefix: str) -> list[dict[str, Any]]:
    payload = json.loads(gzip.decompress(base64.b64decode(event["awslogs"]["data"])))
    if payload.get("messageType") != "DATA_MESSAGE":
        return []
    stream = str(payload.get("logStream", ""))
    if not stream.startswith(f"{job_prefix}-"):
        return []
    parsed = training_stream(stream)
    if parsed is None:  # only the training streams are the script's activity (not the SSM agent's)
        return []
    job = parsed[0]
    per_minute = activity_per_minute(
        (int(e["timestamp"]), str(e.get("message", ""))) for e in payload.get("logEvents", [])
    )
    return [
        {
            "_aws": {
                "Timestamp": minute,
                "CloudWatchMetrics": [
                    {
                        "Namespace": keys.HEARTBEAT_NAMESPACE,
                        "Dimensions": [[keys.HEARTBEAT_DIMENSION]],
                        "Metrics": [{"Name": keys.HEARTBEAT_METRIC, "Unit": "Count"}],
                    }
                ],
            },
            keys.HEARTBEAT_DIMENSION: job,
            keys.HEARTBEAT_METRIC: count,
        }
        for minute, count in sorted(per_minute.items())
    ]


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    records = heartbeat_records(event, os.environ.get(keys.ENV_JOB_PREFIX, keys.DEFAULT_JOB_PREFIX))
    for record in records:
        print(json.dumps(record, separators=(",", ":")))  # EMF: one JSON object per line on stdout
    return {"records": len(records)}
