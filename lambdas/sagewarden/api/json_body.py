"""Parse a request body as strict JSON: no non-finite numbers, over-long integers, deep nesting,
lone surrogates or repeated keys, each reported as a field-level problem with its path.

Why: docs/api.md (*Why the body parser is strict*)."""

from __future__ import annotations

import base64
import binascii
import json
import math
from typing import Any

from sagewarden.usecases.errors import FieldError, InvalidRequest, RequestTooLarge

MAX_BODY_BYTES = 256 * 1024
MAX_DEPTH = 16  # CreateTrainingJob nests 6 levels below `training_job`
MAX_INT_DIGITS = 30  # no field takes more than a 64-bit integer (19 digits)
MAX_KEY_IN_PATH = 80  # longer keys are cut in error paths, so a hostile key cannot bloat a response


class _Rejected:
    """A value the parser refused; reported with its path once parsing is done."""

    __slots__ = ("problem",)

    def __init__(self, problem: str) -> None:
        self.problem = problem


class _RepeatedKeys(dict[str, Any]):
    repeated: list[str]


def _constant(name: str) -> _Rejected:
    return _Rejected(f"{name} is not a JSON number: must be a finite number")


def _float(text: str) -> float | _Rejected:
    value = float(text)
    return (
        value if math.isfinite(value) else _Rejected(f"{text[:40]} is out of range: must be a finite number")
    )


def _int(text: str) -> int | _Rejected:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        return _Rejected(f"an integer of {len(text.lstrip('-'))} digits: at most {MAX_INT_DIGITS} allowed")
    return int(text)


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) == len(pairs):
        return out
    seen: set[str] = set()
    marked = _RepeatedKeys(out)
    marked.repeated = sorted({k for k, _ in pairs if k in seen or seen.add(k)})  # type: ignore[func-returns-value]
    return marked


def loads_strict(text: str) -> Any:
    """json.loads with the markers above; raises ValueError (incl. JSONDecodeError) or RecursionError."""
    return json.loads(
        text, parse_constant=_constant, parse_float=_float, parse_int=_int, object_pairs_hook=_pairs
    )


def body_text(raw: str | None, is_base64: bool) -> str:
    """The request body as text, at most MAX_BODY_BYTES of UTF-8."""
    if raw is None or raw == "":
        raise InvalidRequest([FieldError("body", "required: a JSON object")])
    if is_base64:
        try:
            data = base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise InvalidRequest([FieldError("body", "not valid base64")]) from exc
        if len(data) > MAX_BODY_BYTES:
            raise RequestTooLarge(_too_large(len(data)))
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidRequest([FieldError("body", f"not UTF-8 at byte {exc.start}")]) from exc
    size = len(raw.encode("utf-8", "surrogatepass"))
    if size > MAX_BODY_BYTES:
        raise RequestTooLarge(_too_large(size))
    return raw


def _too_large(size: int) -> list[FieldError]:
    return [FieldError("body", f"{size:,} bytes: larger than {MAX_BODY_BYTES // 1024} KiB")]


def parse_json(text: str) -> Any:
    """The JSON value of `text`, or InvalidRequest naming every problem (field paths where known)."""
    try:
        value = loads_strict(text)
    except RecursionError as exc:
        raise InvalidRequest([FieldError("body", f"nested deeper than {MAX_DEPTH} levels")]) from exc
    except json.JSONDecodeError as exc:
        raise InvalidRequest(
            [FieldError("body", f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")]
        ) from exc
    except ValueError as exc:  # pragma: no cover - the hooks above turn the known ValueErrors into markers
        raise InvalidRequest([FieldError("body", "malformed JSON")]) from exc
    errors = problems(value)
    if errors:
        raise InvalidRequest(errors)
    return value


def problems(value: Any) -> list[FieldError]:
    """Walk a parsed value without recursion: depth, markers, repeated keys, unencodable text."""
    errors: list[FieldError] = []
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        node, path, depth = stack.pop()
        if isinstance(node, _Rejected):
            errors.append(FieldError(path or "body", node.problem))
        elif isinstance(node, str):
            if not _encodable(node):
                errors.append(FieldError(path or "body", "contains a lone surrogate: not valid Unicode text"))
        elif isinstance(node, dict | list):
            if depth >= MAX_DEPTH:
                errors.append(
                    FieldError("body", f"nested deeper than {MAX_DEPTH} levels at {path or 'the top'}")
                )
                continue
            if isinstance(node, _RepeatedKeys):
                where = path or "body"
                errors.append(FieldError(where, f"repeats key(s) {', '.join(map(_show_key, node.repeated))}"))
            if isinstance(node, dict):
                for key, child in reversed(list(node.items())):
                    if not _encodable(key):
                        errors.append(
                            FieldError(
                                path or "body", "a key contains a lone surrogate: not valid Unicode text"
                            )
                        )
                        continue
                    stack.append((child, join(path, key), depth + 1))
            else:
                for i in reversed(range(len(node))):
                    stack.append((node[i], f"{path or 'body'}[{i}]", depth + 1))
    errors.sort(key=lambda e: e.field)
    return errors


def join(path: str, key: str) -> str:
    shown = _show_key(key)
    return f"{path}.{shown}" if path else shown


def _show_key(key: str) -> str:
    if not key:
        return '""'  # an empty key still names a place
    return key if len(key) <= MAX_KEY_IN_PATH else key[:MAX_KEY_IN_PATH] + "…"


def _encodable(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
