"""Shared builders of the integration tests: a stubbed AWS session, the run table."""

from __future__ import annotations

from typing import Any

import boto3

from sagewarden import keys

ACCOUNT = "123456789012"  # moto's account


REGION = "us-east-1"


ROLE_NAME = "SageMakerTrainingRole"


ROLE = f"arn:aws:iam::{ACCOUNT}:role/{ROLE_NAME}"


class StubbedSession:
    """A boto3 session whose named clients are replaced (by stubbed ones)."""

    def __init__(self, session: boto3.Session, **clients: Any) -> None:
        self._session = session
        self._clients = {name.replace("_", "-"): client for name, client in clients.items()}
        self.region_name = session.region_name

    def client(self, service: str, **kwargs: Any) -> Any:
        return self._clients.get(service) or self._session.client(service, **kwargs)


TABLE = "runs"


def _create_table(ddb):
    attr = lambda n, t="S": {"AttributeName": n, "AttributeType": t}  # noqa: E731
    key = lambda h, r: [{"AttributeName": h, "KeyType": "HASH"}, {"AttributeName": r, "KeyType": "RANGE"}]  # noqa: E731
    ddb.create_table(
        TableName=TABLE,
        BillingMode="PAY_PER_REQUEST",
        KeySchema=key(keys.PK, keys.SK),
        AttributeDefinitions=[
            attr(keys.PK),
            attr(keys.SK),
            attr(keys.GSI_RUNS_PK),
            attr(keys.GSI_RUNS_SK),
            attr(keys.GSI_STATUS_PK),
            attr(keys.GSI_DUE_PK),
            attr(keys.GSI_DUE_SK, "N"),
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": keys.GSI_RUNS,
                "KeySchema": key(keys.GSI_RUNS_PK, keys.GSI_RUNS_SK),
                "Projection": {"ProjectionType": "ALL"},
            },
            {
                "IndexName": keys.GSI_STATUS,
                "KeySchema": key(keys.GSI_STATUS_PK, keys.GSI_STATUS_SK),
                "Projection": {"ProjectionType": "ALL"},
            },
            {
                "IndexName": keys.GSI_DUE,
                "KeySchema": key(keys.GSI_DUE_PK, keys.GSI_DUE_SK),
                "Projection": {"ProjectionType": "ALL"},
            },
        ],
    )
