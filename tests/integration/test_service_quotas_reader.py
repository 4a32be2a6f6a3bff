"""The submit-time quota check's reader: Service Quotas' applied values over AWS's defaults,
every page read within a budget, anything short of a complete listing raised as unknown."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from sagewarden.adapters.service_quotas_reader import QuotasUnknown, ServiceQuotasReader

P5 = "ml.p5.48xlarge for training job usage"
P4D = "ml.p4d.24xlarge for training job usage"


def _quota(name: str, value: float) -> dict:
    return {"ServiceCode": "sagemaker", "QuotaName": name, "QuotaCode": "L-1", "Value": value}


def _client():
    client = boto3.client(
        "service-quotas", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    return client, Stubber(client)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.claim(
    "the sweep works through due runs in round-robin shards under a time budget, and every AWS list call follows its token"
)
def test_reader_pages_both_listings_and_applied_values_win():
    client, stub = _client()
    want = {"ServiceCode": "sagemaker", "MaxResults": 100}
    stub.add_response("list_aws_default_service_quotas", {"Quotas": [_quota(P5, 0)], "NextToken": "t"}, want)
    stub.add_response(
        "list_aws_default_service_quotas", {"Quotas": [_quota(P4D, 2)]}, {**want, "NextToken": "t"}
    )
    stub.add_response("list_service_quotas", {"Quotas": [_quota(P5, 16)]}, want)
    with stub:
        assert ServiceQuotasReader(client).sagemaker_quotas() == {P5: 16.0, P4D: 2.0}


def test_reader_caches_a_listing_and_reads_again_later():
    client, stub = _client()
    clock = Clock()
    for value in (4, 8):
        stub.add_response("list_aws_default_service_quotas", {"Quotas": []})
        stub.add_response("list_service_quotas", {"Quotas": [_quota(P5, value)]})
    reader = ServiceQuotasReader(client, clock=clock, cache_s=900)
    with stub:
        assert reader.sagemaker_quotas()[P5] == 4
        clock.now = 899
        assert reader.sagemaker_quotas()[P5] == 4  # no call: the stub would run out
        clock.now = 900
        assert reader.sagemaker_quotas()[P5] == 8


@pytest.mark.claim(
    "A throttled or failing S3 or Service Quotas is *unknown*, not a refusal: the run is accepted (its launch then waits for S3, see `deferred`)"
)
def test_reader_raises_unknown_on_an_error_and_does_not_ask_again_at_once():
    client, stub = _client()
    clock = Clock()
    stub.add_client_error("list_aws_default_service_quotas", "AccessDeniedException", "denied")
    reader = ServiceQuotasReader(client, clock=clock)
    with stub:
        with pytest.raises(QuotasUnknown, match="AccessDeniedException"):
            reader.sagemaker_quotas()
        clock.now = 30
        with pytest.raises(QuotasUnknown):
            reader.sagemaker_quotas()  # within a minute: no call (the stub has none queued)


def test_reader_cut_by_its_page_budget_is_unknown_not_a_partial_answer():
    client, stub = _client()
    for i in range(3):
        stub.add_response(
            "list_aws_default_service_quotas", {"Quotas": [_quota(f"q{i}", 1)], "NextToken": f"t{i}"}
        )
    with stub, pytest.raises(QuotasUnknown, match="cut after 3 pages"):
        ServiceQuotasReader(client, max_pages=3).sagemaker_quotas()


def test_reader_skips_quotas_service_quotas_could_not_read():
    client, stub = _client()
    failed = {
        **_quota(P5, 0),
        "ErrorReason": {"ErrorCode": "DEPENDENCY_THROTTLING_ERROR", "ErrorMessage": "x"},
    }
    stub.add_response("list_aws_default_service_quotas", {"Quotas": [failed, _quota(P4D, 2)]})
    stub.add_response("list_service_quotas", {"Quotas": []})
    with stub:
        assert ServiceQuotasReader(client).sagemaker_quotas() == {P4D: 2.0}


def test_reader_reads_the_simulated_accounts_spot_training_quotas(template):
    """The drill's account lists managed spot training's quotas beside the on-demand ones, under
    Service Quotas' names, and the supervisor's reader takes them in."""
    from drill.account.local import LocalAccount

    with LocalAccount(
        template,
        store="memory",
        quotas={"ml.p4d.24xlarge": 4},
        spot_quotas={"ml.p4d.24xlarge": 2},
        total_spot_instance_quota=3,
    ) as acct:
        quotas = acct.supervisor.quotas.sagemaker_quotas()
    assert quotas[P4D] == 4
    assert quotas["ml.p4d.24xlarge for spot training job usage"] == 2
    assert quotas["Number of instances across all spot training jobs"] == 3
