"""Claim items of the DynamoDB run store: a live run's name and checkpoint prefix (domain.claims).

Item shapes (keys from `sagewarden.keys`):
  exclusive  pk=CLAIM#<claim>  sk=CLAIM   run_id, claim   (``name#<name>``, ``ckpt#<prefix>``)
  shared     pk=CLAIM#<claim>  sk=CLAIM   holders (string set of run ids), claim   (``under#<prefix>``)
A claim longer than a name (every prefix) is keyed by its SHA-256, so a 1,024-character S3 URI
of multi-byte text stays far inside DynamoDB's 2,048-byte partition key.

They ride in the transaction that writes the run: taken with the run's creation (and on a
resume, the save that reopens it), released with the save that makes it terminal. A claim item
therefore exists exactly while its holder is live, and two transactions that would both take
one claim cannot both commit. The items carry no index attributes (no GSI holds them).
"""

from __future__ import annotations

import hashlib
from typing import Any

from sagewarden import keys
from sagewarden.domain import claims as claim_rules

CLAIM_SK = "CLAIM"
_PLAIN = 200  # claims up to this many characters are keyed as they are (names)


def claim_pk(claim: str) -> str:
    if claim.startswith(claim_rules.NAME) and len(claim) <= _PLAIN:
        return keys.CLAIM_PK_PREFIX + claim
    kind, _, value = claim.partition("#")
    return f"{keys.CLAIM_PK_PREFIX}{kind}#sha256:{hashlib.sha256(value.encode()).hexdigest()}"


def _key(claim: str) -> dict[str, Any]:
    return {keys.PK: {"S": claim_pk(claim)}, keys.SK: {"S": CLAIM_SK}}


def take(table: str, run_id: str, claims: tuple[str, ...]) -> list[dict[str, Any]]:
    """TransactWriteItems actions that take `claims` for `run_id`, or fail the transaction."""
    plan = claim_rules.plan(claims)
    me = {"S": run_id}
    out: list[dict[str, Any]] = []
    for c in plan.exclusive:
        out.append(
            {
                "Put": {
                    "TableName": table,
                    "Item": {**_key(c), "run_id": me, "claim": {"S": c}},
                    "ConditionExpression": "attribute_not_exists(#pk) OR run_id = :me",
                    "ExpressionAttributeNames": {"#pk": keys.PK},
                    "ExpressionAttributeValues": {":me": me},
                }
            }
        )
    for c in plan.shared:
        out.append(
            {
                "Update": {
                    "TableName": table,
                    "Key": _key(c),
                    "UpdateExpression": "ADD holders :me SET claim = :c",
                    "ExpressionAttributeValues": {":me": {"SS": [run_id]}, ":c": {"S": c}},
                }
            }
        )
    for c in plan.vacant:
        out.append(
            {
                "ConditionCheck": {
                    "TableName": table,
                    "Key": _key(c),
                    "ConditionExpression": "attribute_not_exists(run_id) AND attribute_not_exists(holders)",
                }
            }
        )
    return out


def release(table: str, run_id: str, claims: tuple[str, ...]) -> list[dict[str, Any]]:
    """TransactWriteItems actions that give `claims` back (the run became terminal). Only the
    holder releases (a claim item exists only while its holder is live), so no condition is
    needed -- and none can keep the run from ending."""
    plan = claim_rules.plan(claims)
    out: list[dict[str, Any]] = [{"Delete": {"TableName": table, "Key": _key(c)}} for c in plan.exclusive]
    out += [
        {
            "Update": {
                "TableName": table,
                "Key": _key(c),
                "UpdateExpression": "DELETE holders :me",
                "ExpressionAttributeValues": {":me": {"SS": [run_id]}},
            }
        }
        for c in plan.shared
    ]
    return out


def holder(client: Any, table: str, run_id: str, claims: tuple[str, ...]) -> tuple[str, str] | None:
    """(another live run's id, the claim it holds) that keeps `run_id` from taking `claims`, or
    None. Read after a transaction was cancelled, to tell a conflict from a concurrent write."""
    plan = claim_rules.plan(claims)
    for c in (*plan.exclusive, *plan.vacant):
        item = client.get_item(TableName=table, Key=_key(c), ConsistentRead=True).get("Item") or {}
        other = item.get("run_id", {}).get("S")
        if other and other != run_id:
            return other, c
        others = sorted(h for h in item.get("holders", {}).get("SS", ()) if h != run_id)
        if others:
            return others[0], c
    return None
