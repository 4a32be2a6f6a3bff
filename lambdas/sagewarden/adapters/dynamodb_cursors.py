"""Pagination cursors of the run store: opaque base64 JSON, accepted only as a key of the listing paged.

Shared by the DynamoDB store and the in-memory one. Why: docs/reliability.md (*Cursors*)."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Sequence
from typing import Any

from sagewarden import keys
from sagewarden.adapters.run_codec import compact_json

RUN_SK = "RUN"
AUDIT_PREFIX = "AUDIT#"


def run_pk(run_id: str) -> str:
    return f"RUN#{run_id}"


def audit_pk(run_id: str) -> str:
    return f"AUDIT#{run_id}"


MAX_CURSOR_CHARS = 1024  # a real cursor is a few hundred characters


def encode_cursor(value: Any) -> str | None:
    """An opaque pagination cursor (base64 JSON); None when there is nothing more."""
    return None if not value else base64.urlsafe_b64encode(compact_json(value).encode()).decode()


def _not_json_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def decode_cursor(cursor: str) -> Any:
    """The JSON value inside a cursor; ValueError for anything that is not one of our encodings."""
    if not isinstance(cursor, str) or not 0 < len(cursor) <= MAX_CURSOR_CHARS:
        raise ValueError("invalid cursor")
    try:
        raw = base64.urlsafe_b64decode(cursor.encode("ascii"))
        return json.loads(raw.decode("utf-8"), parse_constant=_not_json_constant)
    except (ValueError, RecursionError) as exc:  # binascii.Error and UnicodeError are ValueErrors
        raise ValueError("invalid cursor") from exc


def _string_key(cursor: str, names: Sequence[str]) -> dict[str, str]:
    """The cursor's key as {attribute: string value}: exactly `names`, each {"S": <non-empty string>}."""
    value = decode_cursor(cursor)
    if not isinstance(value, dict) or set(value) != set(names):
        raise ValueError("invalid cursor")
    out: dict[str, str] = {}
    for name in names:
        attr = value[name]
        if (
            not isinstance(attr, dict)
            or set(attr) != {"S"}
            or not isinstance(attr["S"], str)
            or not attr["S"]
        ):
            raise ValueError("invalid cursor")
        out[name] = attr["S"]
    return out


def runs_start_key(cursor: str, pk_name: str, pk_value: str) -> dict[str, Any]:
    """ExclusiveStartKey for a listing on the runs or by_status index, from a cursor it produced.

    The key must be a run item's: pk RUN#<id>, sk RUN, the index's sort key the same run id, and
    the index's partition key the partition being listed (a cursor of another listing is refused).
    """
    key = _string_key(cursor, [keys.PK, keys.SK, pk_name, keys.GSI_RUNS_SK])
    run_id = key[keys.GSI_RUNS_SK]
    if not (
        _RUN_ID.fullmatch(run_id)
        and key[keys.PK] == run_pk(run_id)
        and key[keys.SK] == RUN_SK
        and key[pk_name] == pk_value
    ):
        raise ValueError("invalid cursor: not a cursor of this listing")
    return {name: {"S": value} for name, value in key.items()}


def audit_start_key(cursor: str, run_id: str) -> dict[str, Any]:
    """ExclusiveStartKey for a run's audit trail; a cursor of another run's trail is refused."""
    key = _string_key(cursor, [keys.PK, keys.SK])
    if key[keys.PK] != audit_pk(run_id):
        raise ValueError("invalid cursor: not a cursor of this run's events")
    if not key[keys.SK].startswith(AUDIT_PREFIX) or len(key[keys.SK]) > 256:
        raise ValueError("invalid cursor")
    return {name: {"S": value} for name, value in key.items()}


_RUN_ID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")
