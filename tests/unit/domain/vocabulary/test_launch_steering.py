"""The volume size a replacement asks for so that SageMaker cannot match a warm pool holding a bad
host (domain/vocabulary/launch.py ``steered_volume_gb``; domain/capacity/warm_pools.py)."""

from __future__ import annotations

import copy

import pytest

from sagewarden.domain.vocabulary.launch import build_request, steered_volume_gb
from tests.builders import REQUEST, training_run


@pytest.mark.claim(
    "the replacement asks for `VolumeSizeInGB` 1 GB less than the request's (1 GB more when it asks for 1; the next replacement after a bad host goes back to the request's own size) and starts at once on new instances, while the pool is released as soon as it is `Available`"
)
@pytest.mark.parametrize(
    ("size", "steered"),
    [(100, 99), (2, 1), (1, 2), (None, None), (0, None), (True, None), ("100", None)],
    ids=[
        "a 100 gb volume",
        "a 2 gb volume",
        "a 1 gb volume steps up",
        "no volume size",
        "a zero size",
        "a bool size",
        "a size as a string",
    ],
)
def test_the_steered_volume_is_one_less_or_one_more_at_one_and_none_without_a_size(size, steered):
    request = copy.deepcopy(REQUEST)
    if size is None:
        del request["ResourceConfig"]["VolumeSizeInGB"]
    else:
        request["ResourceConfig"]["VolumeSizeInGB"] = size
    assert steered_volume_gb(request) == steered


def test_only_a_steered_attempt_changes_the_volume_and_the_users_request_is_untouched():
    run = training_run()
    att = run.current
    plain = build_request(run, att)
    steered = build_request(run, att.__class__(**{**att.__dict__, "volume_steer": True}))
    assert (
        plain["ResourceConfig"]["VolumeSizeInGB"] == 100 and steered["ResourceConfig"]["VolumeSizeInGB"] == 99
    )
    assert run.request["ResourceConfig"]["VolumeSizeInGB"] == 100
    # everything else a warm pool matches on is the same (role, instances, KMS key, VPC, network)
    for key in ("RoleArn", "VpcConfig", "EnableNetworkIsolation", "EnableInterContainerTrafficEncryption"):
        assert plain.get(key) == steered.get(key)
    for key in ("InstanceType", "InstanceCount", "VolumeKmsKeyId"):
        assert plain["ResourceConfig"].get(key) == steered["ResourceConfig"].get(key)
