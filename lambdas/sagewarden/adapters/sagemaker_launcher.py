"""SageMaker adapter: create, stop and describe training jobs, mapping errors to domain events.

ResourceInUse on create means the deterministic job name was already submitted (a retry of
the same attempt): that is success, not an error. A stop of a job that already ended is fine.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sagewarden.domain.vocabulary.events import JobMissing, JobObserved, LaunchAccepted, LaunchRejected
from sagewarden.domain.vocabulary.plan_windows import PlanView, plan_name
from sagewarden.domain.vocabulary.reasons import EventSource
from sagewarden.ports.aws import StopOutcome
from sagewarden.usecases.aws_events import job_observed_from_description, to_ms

log = logging.getLogger(__name__)

REJECTION_CODES = frozenset(
    {
        "ResourceLimitExceeded",
        "ThrottlingException",
        "Throttling",
        "ValidationException",
        "AccessDeniedException",
        "ResourceNotFound",
        "InternalFailure",
        "ServiceUnavailable",
    }
)


class SageMakerLauncher:
    def __init__(self, client: Any) -> None:
        self._sm = client

    def launch(self, attempt: int, request: Mapping[str, Any]) -> LaunchAccepted | LaunchRejected | None:
        try:
            resp = self._sm.create_training_job(**request)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            message = exc.response.get("Error", {}).get("Message", "")
            if code == "ResourceInUse":
                return LaunchAccepted(attempt, already_existed=True)
            if (
                code in REJECTION_CODES
                or exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 500) < 500
            ):
                return LaunchRejected(attempt, code, message)
            log.warning("CreateTrainingJob failed transiently (%s); the sweep will retry", code)
            return None
        except BotoCoreError as exc:
            log.warning("CreateTrainingJob did not complete (%s); the sweep will retry", exc)
            return None
        return LaunchAccepted(attempt, job_arn=str(resp.get("TrainingJobArn", "")))

    def stop(self, job_name: str) -> StopOutcome:
        """Ask SageMaker to stop the job. A refusal ("job is in status Failed", "not found") is
        not an error but evidence: the caller looks at the job again instead of waiting."""
        try:
            self._sm.stop_training_job(TrainingJobName=job_name)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in ("ValidationException", "ResourceNotFound"):
                return StopOutcome(False, f"not stoppable ({exc.response['Error'].get('Message', code)})")
            raise
        return StopOutcome(True, "stop requested")

    def release_warm_pool(self, job_name: str) -> str:
        """Terminate the warm pool an ended job left (KeepAlivePeriodInSeconds -> 0). SageMaker
        accepts it only while the pool is Available; otherwise it answers a ValidationException
        (not yet Available, already reused or terminated): the caller looks at the job again and
        the sweep asks again while the pool is Available (domain/capacity/warm_pools.py)."""
        try:
            self._sm.update_training_job(
                TrainingJobName=job_name, ResourceConfig={"KeepAlivePeriodInSeconds": 0}
            )
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in ("ValidationException", "ResourceNotFound"):
                return f"not released ({exc.response['Error'].get('Message', code)})"
            raise
        return "warm pool terminated"

    def observe(self, job_name: str, attempt: int) -> JobObserved | JobMissing:
        try:
            desc = self._sm.describe_training_job(TrainingJobName=job_name)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            message = exc.response.get("Error", {}).get("Message", "")
            if code in ("ValidationException", "ResourceNotFound") and "not found" in message.lower():
                return JobMissing(job_name, attempt)
            raise
        return job_observed_from_description(desc, attempt, source=EventSource.DESCRIBE)

    def describe_plan(self, plan: str) -> PlanView:
        """DescribeTrainingPlan of the plan named by its ARN (a run's TrainingPlanArn) or its name:
        its status and one window per reserved capacity. The request carries the plan's *name*:
        the API Reference's TrainingPlanName is "the name of the training plan" (at most 64
        characters, no ARN), though botocore's shape would also take the ARN (docs/fidelity.md).
        Errors propagate: the plan is then unknown."""
        desc = self._sm.describe_training_plan(TrainingPlanName=plan_name(plan))
        windows = []
        for rc in desc.get("ReservedCapacitySummaries") or []:
            start, end = to_ms(rc.get("StartTime")), to_ms(rc.get("EndTime"))
            if start is not None and end is not None and end > start:
                windows.append((start, end))
        if not windows:  # no summaries: the plan's own span is its one window
            start, end = to_ms(desc.get("StartTime")), to_ms(desc.get("EndTime"))
            if start is not None and end is not None and end > start:
                windows.append((start, end))
        types = {
            str(rc["InstanceType"])
            for rc in desc.get("ReservedCapacitySummaries") or []
            if rc.get("InstanceType")
        }
        total = desc.get("TotalInstanceCount")
        return PlanView(
            arn=str(desc.get("TrainingPlanArn", plan)),
            status=str(desc.get("Status", "")),
            windows=tuple(sorted(windows)),
            instance_type=types.pop() if len(types) == 1 else None,
            total_count=int(total) if total is not None else None,
        )
