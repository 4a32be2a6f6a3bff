"""CloudWatch Logs subscription on /aws/sagemaker/TrainingJobs -> per-job heartbeat metric (EMF).

Sees log events as they arrive (unlike LogStream lastEventTimestamp, which is eventually
consistent). For each of the supervisor's jobs it writes one Embedded Metric Format record
per minute of event time: `Sagewarden/Heartbeat LogEvents{TrainingJobName}` = number of log
events. No API calls: CloudWatch extracts the metric from this function's own log output.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
from collections import Counter
from typing import Any

from sagewarden import keys


def heartbeat_records(event: dict[str, Any], job_prefix: str) -> list[dict[str, Any]]:
    payload = json.loads(gzip.decompress(base64.b64decode(event["awslogs"]["data"])))
    if payload.get("messageType") != "DATA_MESSAGE":
        return []
    job = str(payload.get("logStream", "")).split("/", 1)[0]
    if not job.startswith(f"{job_prefix}-"):
        return []
    per_minute = Counter((int(e["timestamp"]) // 60_000) * 60_000 for e in payload.get("logEvents", []))
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
