"""What DynamoDB refuses that moto accepts: a TransactWriteItems over 4 MB (`enforce_transaction_limits`).

Why: docs/drill.md (*The simulated services*)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from botocore.exceptions import ClientError
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.utilities import bytesize

MAX_TRANSACTION_BYTES = 4 * 1024 * 1024
MESSAGE = "Transaction request cannot be larger than 4 MB"


def _size(item: Mapping[str, Any]) -> int:
    return sum(bytesize(name) + DynamoType(value).size() for name, value in item.items())


def transaction_size(actions: list[Mapping[str, Any]]) -> int:
    total = 0
    for action in actions:
        ((kind, body),) = action.items()
        total += _size(body["Item"] if kind == "Put" else body["Key"])
        if kind == "Update":
            total += sum(DynamoType(v).size() for v in body.get("ExpressionAttributeValues", {}).values())
    return total


def enforce_transaction_limits(client: Any) -> Any:
    """Refuse, as DynamoDB does, a TransactWriteItems over 4 MB; returns the client."""

    def check(params: Mapping[str, Any], **_: Any) -> None:
        if transaction_size(list(params.get("TransactItems", []))) > MAX_TRANSACTION_BYTES:
            raise ClientError(
                {
                    "Error": {"Code": "ValidationException", "Message": MESSAGE},
                    "ResponseMetadata": {"HTTPStatusCode": 400},
                },
                "TransactWriteItems",
            )

    client.meta.events.register("provide-client-params.dynamodb.TransactWriteItems", check)
    return client
