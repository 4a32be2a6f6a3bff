"""The soak's histories on the real DynamoDbRunStore (moto) instead of the in-memory store:
fewer of them (moto is slow), the same invariants. `SAGEWARDEN_SOAK_DYNAMODB_EXAMPLES` sets
how many (a handful in `make test`, more in `make soak`)."""

from __future__ import annotations

import os
import time

import boto3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from drill.account.deployment import create_table_from_template
from tests.soak.history import WEIGHTED_KINDS, History
from tests.soak.stats import STATS
from tests.soak.world import InspectableDynamoDbRunStore

EXAMPLES = int(os.environ.get("SAGEWARDEN_SOAK_DYNAMODB_EXAMPLES", "10"))
TABLE = "sagewarden-soak"

step = st.tuples(st.sampled_from(WEIGHTED_KINDS), st.integers(0, 40), st.integers(0, 40))
steps = st.integers(1, 25).flatmap(lambda n: st.lists(step, min_size=n, max_size=n))


@pytest.mark.claim(
    "10,000 histories, 0 violations (23 histories/s on the last run, which shared the machine); 200 more on the DynamoDB store (moto), 0 violations"
)
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
@given(history=steps)
def test_soak_invariants_hold_on_the_dynamodb_store(template, history):
    started = time.perf_counter()
    with mock_aws():
        client = boto3.client(
            "dynamodb", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
        )
        create_table_from_template(client, template, TABLE)
        h = History(store=InspectableDynamoDbRunStore(client, TABLE))
        try:
            for kind, a, b in history:
                h.apply(kind, a, b)
                problems = h.check()
                assert not problems, h.story(problems)
            problems = h.finish()
            assert not problems, h.story(problems)
        except AssertionError:
            STATS.dynamodb_failed += 1
            raise
        finally:
            STATS.dynamodb_examples += 1
            STATS.dynamodb_steps += len(history)
            STATS.dynamodb_seconds += time.perf_counter() - started
