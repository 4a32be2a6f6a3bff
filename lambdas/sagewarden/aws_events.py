"""Use cases triggered by AWS events: a training job's state change (EventBridge) and a hang
alarm's state change. A mixin of :class:`sagewarden.service.Supervisor` (the shared loop)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sagewarden import keys
from sagewarden.domain.vocabulary.events import Event, HangSignal
from sagewarden.domain.vocabulary.models import Run
from sagewarden.domain.vocabulary.names import parse_job_name
from sagewarden.domain.vocabulary.reasons import EventSource

log = logging.getLogger("sagewarden.service")


class AwsEvents:
    """What SageMaker and CloudWatch tell the supervisor."""

    if TYPE_CHECKING:  # the shared loop, in sagewarden.service

        def handle(self, run_id: str, event: Event, *, known: Run | None = None) -> Run | None: ...

    def on_job_state_change(self, detail: Mapping[str, Any], event_id: str | None = None) -> Run | None:
        from sagewarden.adapters.sagemaker_launcher import job_observed_from_description

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
        return self.handle(run_id, observed)

    def on_hang_signal(self, signal: HangSignal) -> Run | None:
        parsed = parse_job_name(signal.job_name)
        if parsed is None:
            log.info("alarm for unknown job %s", signal.job_name)
            return None
        return self.handle(parsed[0], dataclasses.replace(signal, attempt=parsed[1]))
