"""Session fixtures: the stack synthesized once per configuration (jsii synthesis is slow).

``synth_full``: two allowed roles, an alert e-mail, one checkpoint bucket, a custom job prefix
and ``logSubscription=false``. ``synth_default``: ``cdk.json`` defaults (no roles, no e-mail,
all buckets, subscription on). ``synth_opt_in``: the account-wide API Gateway role and an SSE-KMS
checkpoint key; ``synth_no_api_logs``: ``apiLogging=false``. All apps carry the cdk-nag AwsSolutions plugin, so the same
synthesis feeds the template assertions, cdk-nag and cfn-lint.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from infra_synth import FULL_CONTEXT, NO_API_LOGS_CONTEXT, OPT_IN_CONTEXT, SynthResult, synthesize


@pytest.fixture(scope="session")
def synth_full(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SynthResult]:
    yield synthesize(FULL_CONTEXT, tmp_path_factory.mktemp("synth-full"))


@pytest.fixture(scope="session")
def synth_default(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SynthResult]:
    yield synthesize({}, tmp_path_factory.mktemp("synth-default"))


@pytest.fixture(scope="session")
def synth_opt_in(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SynthResult]:
    yield synthesize(OPT_IN_CONTEXT, tmp_path_factory.mktemp("synth-opt-in"))


@pytest.fixture(scope="session")
def synth_no_api_logs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SynthResult]:
    yield synthesize(NO_API_LOGS_CONTEXT, tmp_path_factory.mktemp("synth-no-api-logs"))


@pytest.fixture(scope="session", params=["full", "default"])
def synth_any(request: pytest.FixtureRequest) -> SynthResult:
    """Both configurations, for properties every deployment must have."""
    return request.getfixturevalue(f"synth_{request.param}")
