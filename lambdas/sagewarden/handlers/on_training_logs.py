"""CloudWatch Logs subscription on /aws/sagemaker/TrainingJobs -> per-job heartbeat metric (EMF).

Sees log events as they arrive (unlike LogStream lastEventTimestamp, which is eventually
consistent). For each of the supervisor's jobs it writes one Embedded Metric Format record
per minute of event time: `Sagewarden/Heartbeat LogEvents{TrainingJobName}` = number of log
events. No API calls: CloudWatch extracts the metric from this function's own log output.

Declared long phases (the training-script contract): a line
`[sagewarden] phase=<name> max_minutes=<n>` says "a silent phase of up to n minutes starts now"
(a checkpoint save, an evaluation, a data-loader restart). Its minutes are published as active
right away -- EMF accepts timestamps up to two hours ahead, so n is capped at 120 -- which keeps
the log-silence alarm quiet for that phase only, and keeps it out of the cadence the supervisor
learns its windows from. A hang inside the phase is caught once the phase's time is up.

Events of jobs that are not this deployment's are dropped before anything else is done, and so
are events of streams that are not a training stream `<job>/algo-<n>-<epoch>` (the SSM agent's
`<job>/algo-<n>-<ts>/ssm`, written with remote debugging on, keeps writing while the training
script hangs: it is not training activity).
"""

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
