"""Shared fixtures: the synthesized template (synthesized once, cached on disk by content hash)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from moto import mock_aws

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")


@pytest.fixture(scope="session")
def template():
    # Synthesized for the deployment the drill's account represents (allowed training role,
    # checkpoint bucket): the IAM replay checks every scenario's AWS calls against it.
    from drill.account.local import drill_template

    return drill_template()


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A moto account (us-east-1) with fake credentials, for adapter and simulator tests."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        yield
