"""Service Quotas for the simulated SageMaker: the two listings the supervisor reads, answered from
botocore's `before-call` event. Why: docs/drill.md (*The simulated services*)."""

from __future__ import annotations

import json
from typing import Any

from botocore.awsrequest import AWSResponse

from drill.sim.sagemaker import SimSageMaker
from sagewarden.domain.capacity.quotas import TOTAL_QUOTA, TOTAL_SPOT_QUOTA, training_quota, warm_pool_quota
from sagewarden.domain.vocabulary.pricing import ESTIMATED_PRICE_PER_INSTANCE_HOUR_USD

OPERATIONS = ("ListServiceQuotas", "ListAWSDefaultServiceQuotas")
DEFAULT_PAGE = 100


class SimServiceQuotas:
    def __init__(self, sagemaker: SimSageMaker, *, region: str, account: str, denied: bool = False) -> None:
        self._sm = sagemaker
        self._region = region
        self._account = account
        self.denied = denied

    def attach(self, client: Any) -> Any:
        """Answer the listings of `client` (a botocore service-quotas client); returns it."""
        for op in OPERATIONS:
            client.meta.events.register(f"before-call.service-quotas.{op}", self._answer)
        return client

    def quotas(self) -> list[dict[str, Any]]:
        rows = [(training_quota(itype), limit) for itype, limit in sorted(self._sm.quotas.items())]
        # managed spot training's own quotas, listed beside the on-demand ones
        rows += [
            (training_quota(itype, spot=True), limit) for itype, limit in sorted(self._sm.spot_quotas.items())
        ]
        # AWS lists a warm-pool quota for every training instance type, 0 by default: here the types
        # the account knows (its training quotas, its warm-pool quotas, the supervisor's price table)
        pools = self._sm.warm_pools.settings.quotas
        for itype in sorted({*self._sm.quotas, *pools, *ESTIMATED_PRICE_PER_INSTANCE_HOUR_USD}):
            rows.append((warm_pool_quota(itype), pools.get(itype, 0)))
        if self._sm.total_instance_quota is not None:
            rows.append((TOTAL_QUOTA, self._sm.total_instance_quota))
        if self._sm.total_spot_instance_quota is not None:
            rows.append((TOTAL_SPOT_QUOTA, self._sm.total_spot_instance_quota))
        return [
            {
                "ServiceCode": "sagemaker",
                "ServiceName": "Amazon SageMaker",
                "QuotaArn": f"arn:aws:servicequotas:{self._region}:{self._account}:sagemaker/L-SIM{i:05d}",
                "QuotaCode": f"L-SIM{i:05d}",
                "QuotaName": name,
                "Value": float(limit),
                "Unit": "None",
                "Adjustable": True,
                "GlobalQuota": False,
            }
            for i, (name, limit) in enumerate(rows)
        ]

    def _answer(self, model: Any, params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        body = params.get("body") or b"{}"  # the serialized request (JSON protocol)
        request = json.loads(body.decode() if isinstance(body, bytes) else body)
        if self.denied:
            error = {
                "Code": "AccessDeniedException",
                "Message": f"User is not authorized to perform: servicequotas:{model.name}",
            }
            return AWSResponse("", 400, {}, None), {
                "Error": error,
                "ResponseMetadata": {"HTTPStatusCode": 400},
            }
        if request.get("ServiceCode") != "sagemaker":
            error = {
                "Code": "NoSuchResourceException",
                "Message": "The request failed because the resource was not found.",
            }
            return AWSResponse("", 400, {}, None), {
                "Error": error,
                "ResponseMetadata": {"HTTPStatusCode": 400},
            }
        rows = self.quotas()
        size = int(request.get("MaxResults") or DEFAULT_PAGE)
        start = int(request.get("NextToken") or 0)
        page: dict[str, Any] = {
            "Quotas": rows[start : start + size],
            "ResponseMetadata": {"HTTPStatusCode": 200},
        }
        if start + size < len(rows):
            page["NextToken"] = str(start + size)
        return AWSResponse("", 200, {}, None), page
