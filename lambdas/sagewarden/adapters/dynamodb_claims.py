"""Claim items of the DynamoDB run store: a live run's name, checkpoint and archive prefixes, and a
resumable run's hold (`domain/vocabulary/claims.py`).

Item shapes and the transaction actions that take and release them; long claims are keyed by SHA-256.
Why: docs/reliability.md (*One live run per name and checkpoint prefix*, *Claim keys*)."""

from __future__ import annotations

import hashlib
from typing import Any

from sagewarden import keys
from sagewarden.domain.resuming import resumable_until
from sagewarden.domain.vocabulary import claims as claim_rules
from sagewarden.domain.vocabulary.claims import (
    HOLD_OWNER,
    HOLD_RUN,
    HOLD_UNTIL,
    HOLDER,
    SETS,
    ItemRelease,
    ItemTake,
)
from sagewarden.domain.vocabulary.models import Run
from sagewarden.domain.vocabulary.ownership import principal

CLAIM_SK = "CLAIM"
_PLAIN = 200  # claims up to this many characters are keyed as they are (names)


def claim_pk(claim: str) -> str:
    if claim.startswith(claim_rules.NAME) and len(claim) <= _PLAIN:
        return keys.CLAIM_PK_PREFIX + claim
    kind, _, value = claim.partition("#")
    return f"{keys.CLAIM_PK_PREFIX}{kind}#sha256:{hashlib.sha256(value.encode()).hexdigest()}"


def _key(claim: str) -> dict[str, Any]:
    return {keys.PK: {"S": claim_pk(claim)}, keys.SK: {"S": CLAIM_SK}}


def take(table: str, run: Run, now_ms: int, *, take_held: bool = False) -> list[dict[str, Any]]:
    """TransactWriteItems actions that take the run's claims at ``now_ms``, or fail the
    transaction. ``take_held``: the run may take a prefix another principal's resumable run
    holds (an admin's run)."""
    me = {"S": run.run_id}
    values: dict[str, Any] = {":me": me}
    out: list[dict[str, Any]] = []
    for t in claim_rules.take_plan(run.claims):
        if t.item.startswith(claim_rules.NAME):
            out.append(
                {
                    "Put": {
                        "TableName": table,
                        "Item": {**_key(t.item), HOLDER: me, "claim": {"S": t.item}},
                        "ConditionExpression": "attribute_not_exists(#pk) OR run_id = :me",
                        "ExpressionAttributeNames": {"#pk": keys.PK},
                        "ExpressionAttributeValues": values,
                    }
                }
            )
            continue
        condition, vals = _take_condition(t, run, now_ms, take_held)
        sets = ["claim = :c"] + ([f"{HOLDER} = :me"] if t.holder else [])
        update = "SET " + ", ".join(sets)
        if t.joins:
            update += " ADD " + ", ".join(f"{a} :meset" for a in sorted(t.joins))
        if t.clears_hold:
            update += f" REMOVE {HOLD_RUN}, {HOLD_OWNER}, {HOLD_UNTIL}"
        action: dict[str, Any] = {"TableName": table, "Key": _key(t.item)}
        if condition:
            action["ConditionExpression"] = condition
        if t.holder or t.joins:
            action["UpdateExpression"] = update
            vals[":c"] = {"S": t.item}
            if t.holder:
                vals[":me"] = me
            if t.joins:
                vals[":meset"] = {"SS": [run.run_id]}
            action["ExpressionAttributeValues"] = vals
            out.append({"Update": action})
        elif condition:
            if vals:
                action["ExpressionAttributeValues"] = vals
            out.append({"ConditionCheck": action})
    return out


def _take_condition(t: ItemTake, run: Run, now_ms: int, take_held: bool) -> tuple[str, dict[str, Any]]:
    parts: list[str] = []
    vals: dict[str, Any] = {}
    if t.holder:
        parts.append(f"(attribute_not_exists({HOLDER}) OR {HOLDER} = :me)")
        vals[":me"] = {"S": run.run_id}
    parts += [f"attribute_not_exists({a})" for a in sorted(t.free)]
    if t.held and not take_held:
        parts.append(
            f"(attribute_not_exists({HOLD_RUN}) OR {HOLD_RUN} = :me OR {HOLD_OWNER} = :owner "
            f"OR {HOLD_UNTIL} < :now)"
        )
        vals.update(
            {":me": {"S": run.run_id}, ":owner": {"S": principal(run.owner)}, ":now": {"N": str(now_ms)}}
        )
    return " AND ".join(parts), vals


def release(table: str, run: Run) -> list[dict[str, Any]]:
    """TransactWriteItems actions that give the run's claims back (it became terminal); a run
    that may be resumed keeps its checkpoint prefix held (domain/resuming.py). Only the holder
    releases (an attribute names a run only while it is live), so no condition is needed -- and
    none can keep the run from ending."""
    until = resumable_until(run)
    hold = (principal(run.owner), until) if until is not None else None
    return [_release_action(table, r, run.run_id) for r in claim_rules.release_plan(run.claims, hold)]


def _release_action(table: str, r: ItemRelease, run_id: str) -> dict[str, Any]:
    if r.item.startswith(claim_rules.NAME):
        return {"Delete": {"TableName": table, "Key": _key(r.item)}}
    clauses: list[str] = []
    vals: dict[str, Any] = {}
    if r.hold is not None:
        clauses.append(f"SET {HOLD_RUN} = :me, {HOLD_OWNER} = :owner, {HOLD_UNTIL} = :until")
        vals.update({":me": {"S": run_id}, ":owner": {"S": r.hold[0]}, ":until": {"N": str(r.hold[1])}})
    if r.holder:
        clauses.append(f"REMOVE {HOLDER}")
    if r.leaves:
        clauses.append("DELETE " + ", ".join(f"{a} :meset" for a in sorted(r.leaves)))
        vals[":meset"] = {"SS": [run_id]}
    action: dict[str, Any] = {"TableName": table, "Key": _key(r.item), "UpdateExpression": " ".join(clauses)}
    if vals:
        action["ExpressionAttributeValues"] = vals
    return {"Update": action}


def _plain(value: dict[str, Any]) -> Any:
    if "S" in value:
        return value["S"]
    if "N" in value:
        return int(value["N"])
    if "SS" in value:
        return set(value["SS"])
    return None


def holder(
    client: Any, table: str, run: Run, now_ms: int, *, take_held: bool = False
) -> tuple[str, str] | None:
    """(another run's id, the claim it holds) that keeps ``run`` from taking its claims, or None.
    Read after a transaction was cancelled, to tell a conflict from a concurrent write."""
    plan = claim_rules.take_plan(run.claims)
    items: dict[str, dict[str, Any]] = {}
    for t in plan:
        got = client.get_item(TableName=table, Key=_key(t.item), ConsistentRead=True).get("Item") or {}
        items[t.item] = {
            name: _plain(v)
            for name, v in got.items()
            if name in (HOLDER, HOLD_RUN, HOLD_OWNER, HOLD_UNTIL, *SETS)
        }
    return claim_rules.blocking(plan, items, run.run_id, principal(run.owner), now_ms, take_held=take_held)
