"""DynamoDB's limits on one write (100 actions, 4 MB, 400 KB an item), checked before it is sent.

`split_transaction` plans the actions that must commit together and those that may follow;
what cannot fit is refused with `WriteTooLarge`, never trimmed.
Why: docs/reliability.md (*Writes within DynamoDB's limits*)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from sagewarden.ports.aws import WriteTooLarge

MAX_TRANSACTION_ACTIONS = 100
MAX_TRANSACTION_BYTES = 4 * 1024 * 1024
MAX_ITEM_BYTES = 400 * 1024


def _number_size(text: str) -> int:
    """1 byte per two significant digits, plus 1 (leading and trailing zeros trimmed)."""
    try:
        digits = Decimal(text).normalize().as_tuple().digits
    except InvalidOperation:
        digits = tuple(ch for ch in text if ch.isdigit())  # type: ignore[misc]
    significant = len(digits) or 1
    return (significant + 1) // 2 + 1


def value_size(value: Mapping[str, Any]) -> int:
    """The size DynamoDB counts for one attribute value (without its name)."""
    (kind, v), *_ = value.items()
    if kind == "S":
        return len(str(v).encode())
    if kind == "N":
        return _number_size(str(v))
    if kind == "B":
        return len(v)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(str(s).encode()) for s in v)
    if kind == "NS":
        return sum(_number_size(str(n)) for n in v)
    if kind == "BS":
        return sum(len(b) for b in v)
    if kind == "L":
        return 3 + sum(1 + value_size(e) for e in v)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + value_size(e) for k, e in v.items())
    raise ValueError(f"unknown attribute type {kind!r}")


def item_size(item: Mapping[str, Mapping[str, Any]]) -> int:
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def _target(action: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    (kind, body), *_ = action.items()
    return kind, body


def action_key(action: Mapping[str, Any], key_names: Sequence[str]) -> tuple[str, ...]:
    kind, body = _target(action)
    item = body["Item"] if kind == "Put" else body["Key"]
    return (str(body["TableName"]), *(str(item[name]) for name in key_names))


def action_size(action: Mapping[str, Any]) -> int:
    """What an action adds to the transaction's aggregate size: a Put its item; an Update its key
    and the values it writes; a Delete or ConditionCheck its key (the item's stored size is not
    known before the write: small claim items here)."""
    kind, body = _target(action)
    if kind == "Put":
        return item_size(body["Item"])
    size = item_size(body["Key"])
    if kind == "Update":
        size += sum(value_size(v) for v in body.get("ExpressionAttributeValues", {}).values())
    return size


def split_transaction(
    required: Sequence[Mapping[str, Any]],
    optional: Sequence[Mapping[str, Any]],
    *,
    key_names: Sequence[str],
    what: str,
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """(The transaction, the actions written after it commits). `required` all go into the
    transaction; `optional` (in order) as many as still fit, the rest after. Raises WriteTooLarge,
    naming what does not fit, when `required` alone breaks a limit or any item is over 400 KB."""
    seen: set[tuple[str, ...]] = set()
    for action in (*required, *optional):
        kind, body = _target(action)
        if kind == "Put" and (size := item_size(body["Item"])) > MAX_ITEM_BYTES:
            raise WriteTooLarge(
                f"{what}: an item of {size:,} bytes is over DynamoDB's {MAX_ITEM_BYTES:,}-byte item limit"
            )
        key = action_key(action, key_names)
        if key in seen:
            raise WriteTooLarge(f"{what}: two actions on one item ({key[1:]}) in one transaction")
        seen.add(key)
    size = sum(action_size(a) for a in required)
    if len(required) > MAX_TRANSACTION_ACTIONS or size > MAX_TRANSACTION_BYTES:
        raise WriteTooLarge(
            f"{what}: {len(required)} actions and {size:,} bytes must commit together; one DynamoDB "
            f"transaction takes at most {MAX_TRANSACTION_ACTIONS} actions and {MAX_TRANSACTION_BYTES:,} bytes"
        )
    transaction = list(required)
    after: list[Mapping[str, Any]] = []
    for action in optional:
        extra = action_size(action)
        if not after and len(transaction) < MAX_TRANSACTION_ACTIONS and size + extra <= MAX_TRANSACTION_BYTES:
            transaction.append(action)
            size += extra
        else:
            after.append(action)  # in order: once one follows the commit, so do the rest
    return transaction, after
