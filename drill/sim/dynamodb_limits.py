"""What DynamoDB refuses that moto accepts: a TransactWriteItems of more than 4 MB in all.

TransactWriteItems (API reference): "The aggregate size of the items in the transaction cannot
exceed 4 MB"; DynamoDB answers a ValidationException and writes nothing. moto checks the 100-action
limit and each item's 400 KB, not the aggregate. :func:`enforce_transaction_limits` adds the check
to a moto-backed client (the drill's supervisor client and the store tests): the sizes are moto's
own item sizes, not the supervisor's planner (``sagewarden.adapters.dynamodb_limits``), so a wrong
size there is not hidden by the same mistake here.
"""

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
