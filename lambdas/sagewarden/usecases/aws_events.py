"""Use cases triggered by AWS events: a training job's state change and a hang alarm's state change.

Reached as `Supervisor.aws`."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sagewarden import keys
from sagewarden.domain.vocabulary.events import (
    HangSignal,
    JobObserved,
)
from sagewarden.domain.vocabulary.models import Run
from sagewarden.domain.vocabulary.names import parse_job_name
from sagewarden.domain.vocabulary.reasons import EventSource

if TYPE_CHECKING:
    from sagewarden.usecases.supervisor import Supervisor

log = logging.getLogger("sagewarden.service")


class AwsEvents:
    """What SageMaker and CloudWatch tell the supervisor (`Supervisor.aws`)."""

    def __init__(self, sup: Supervisor) -> None:
        self._sup = sup

    def on_job_state_change(self, detail: Mapping[str, Any], event_id: str | None = None) -> Run | None:

        name = str(detail.get("TrainingJobName", ""))
        parsed = parse_job_name(name)
        tags = detail.get("Tags") or {}
        if isinstance(tags, list):  # API shape, in case a caller forwards DescribeTrainingJob output
            tags = {t.get("Key"): t.get("Value") for t in tags if isinstance(t, Mapping)}
        if parsed is None:
            run_id, attempt = tags.get(keys.TAG_RUN_ID), tags.get(keys.TAG_ATTEMPT)
            if not run_id or not str(attempt or "").isdigit():
                log.info("ignoring state change of %s: not a sagewarden job", name)
                return None
            parsed = (str(run_id), int(str(attempt)))
        run_id, attempt = parsed
        observed = job_observed_from_description(detail, attempt, source=EventSource.EVENT, event_id=event_id)
        return self._sup.handle(run_id, observed)

    def on_hang_signal(self, signal: HangSignal) -> Run | None:
        parsed = parse_job_name(signal.job_name)
        if parsed is None:
            log.info("alarm for unknown job %s", signal.job_name)
            return None
        return self._sup.handle(parsed[0], dataclasses.replace(signal, attempt=parsed[1]))


def job_observed_from_description(
    desc: Mapping[str, Any], attempt: int, source: str, event_id: str | None = None
) -> JobObserved:
    """Build a JobObserved from a DescribeTrainingJob result or an event's `detail`."""
    modified = to_ms(desc.get("LastModifiedTime")) or to_ms(desc.get("CreationTime")) or 0
    warm = desc.get("WarmPoolStatus") or {}  # DescribeTrainingJob only: events do not carry it
    billable = warm.get("ResourceRetainedBillableTimeInSeconds")
    return JobObserved(
        job_name=str(desc["TrainingJobName"]),
        attempt=attempt,
        status=str(desc.get("TrainingJobStatus", "")),
        secondary=desc.get("SecondaryStatus"),
        modified_ms=modified,
        failure_reason=desc.get("FailureReason"),
        created_ms=to_ms(desc.get("CreationTime")),
        training_started_ms=to_ms(desc.get("TrainingStartTime")),
        ended_ms=to_ms(desc.get("TrainingEndTime")),
        source=source,
        event_id=event_id,
        warm_pool_status=str(warm["Status"]) if warm.get("Status") else None,
        warm_pool_billable_s=int(billable) if billable is not None else None,
        warm_pool_reused_by=str(warm["ReusedByJob"]) if warm.get("ReusedByJob") else None,
    )


def to_ms(value: Any) -> int | None:
    """Timestamps arrive as epoch ms numbers (events), ISO strings (doc samples) or datetimes (API)."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, (int, float)):
        number = float(value)
        return int(number * 1000) if number < 1e11 else int(number)  # seconds vs milliseconds
    text = str(value).strip()
    try:
        return to_ms(float(text))
    except ValueError:
        pass
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
