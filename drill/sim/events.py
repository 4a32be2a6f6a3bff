"""The simulated SageMaker's EventBridge events ("SageMaker Training Job State Change", the shape
aws-facts.md records) and the timestamps and StoppingCondition its answers share: a mixin of
``drill.sim.lifecycle.SimCore`` whose attributes these are."""

from __future__ import annotations

import copy
import random
import uuid
from typing import Any

from drill.sim.model import SimJob
from drill.sim.texts import DEFAULT_MAX_RUNTIME_S, TERMINAL, iso_ms, iso_s


class SimEvents:
    """Events of the simulated jobs (a mixin: the attributes are the simulator's)."""

    timestamp_form: str
    account_id: str
    region: str
    _rng: random.Random
    _outbox: list[tuple[int, int, dict[str, Any]]]
    _out_seq: int

    def _stopping_condition(self, job: SimJob) -> dict[str, Any]:
        sc = copy.deepcopy(job.request.get("StoppingCondition") or {})
        sc.setdefault("MaxRuntimeInSeconds", DEFAULT_MAX_RUNTIME_S)
        return sc

    def _ts(self, ms: int | None) -> Any:
        if ms is None:
            return None
        return ms if self.timestamp_form == "millis" else iso_ms(ms)

    def _queue_event(self, job: SimJob, t: int) -> None:
        r = job.request
        detail: dict[str, Any] = {
            "TrainingJobName": job.name,
            "TrainingJobArn": job.arn,
            "TrainingJobStatus": job.status,
            "SecondaryStatus": job.secondary,
        }
        if job.status == "Failed":
            detail["FailureReason"] = job.failure_reason
        detail["HyperParameters"] = copy.deepcopy(r.get("HyperParameters", {}))
        detail["AlgorithmSpecification"] = copy.deepcopy(r["AlgorithmSpecification"])
        detail["RoleArn"] = r["RoleArn"]
        if "InputDataConfig" in r:
            detail["InputDataConfig"] = copy.deepcopy(r["InputDataConfig"])
        detail["OutputDataConfig"] = copy.deepcopy(r["OutputDataConfig"])
        detail["ResourceConfig"] = copy.deepcopy(r["ResourceConfig"])
        detail["StoppingCondition"] = self._stopping_condition(job)
        detail["CreationTime"] = self._ts(job.created_ms)
        if job.provisioned_ms is not None:
            detail["TrainingStartTime"] = self._ts(job.provisioned_ms)
        if job.status in TERMINAL:
            detail["TrainingEndTime"] = self._ts(t)
        detail["LastModifiedTime"] = self._ts(t)
        detail["SecondaryStatusTransitions"] = [
            {k: (self._ts(v) if k in ("StartTime", "EndTime") else v) for k, v in tr.items() if v is not None}
            for tr in job.transitions
        ]
        detail["Tags"] = dict(job.tags)
        event = {
            "version": "0",
            "id": str(uuid.UUID(int=self._rng.getrandbits(128), version=4)),
            "detail-type": "SageMaker Training Job State Change",
            "source": "aws.sagemaker",
            "account": self.account_id,
            "time": iso_s(t),
            "region": self.region,
            "resources": [job.arn],
            "detail": detail,
        }
        self._outbox.append((t, self._out_seq, event))
        self._outbox.sort(key=lambda o: (o[0], o[1]))
        self._out_seq += 1
