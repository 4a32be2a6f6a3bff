"""Hypothesis strategies for the API: schema-shaped values from docs/openapi.json, and hostile input.

`SchemaStrategies` turns the JSON Schema subset the document uses (objects, arrays, strings with
lengths, patterns and enums, numbers with bounds, anyOf, $ref) into strategies, so every route,
parameter and body is drawn from what the document says. The hostile strategies add what the
document does not allow, including every request shape of issue 11 that once escaped as a 502:
deep nesting, integers past Python's 4,300-digit limit, NaN/Infinity/1e400, lone surrogates,
250 KB of non-ASCII text, oversized bodies and forged pagination cursors.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

DOC_PATH = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
HOLE = "__HOSTILE_LITERAL__"


def load_doc() -> dict[str, Any]:
    return json.loads(DOC_PATH.read_text(encoding="utf-8"))


def operations(doc: Mapping[str, Any]) -> list[tuple[str, str, Mapping[str, Any]]]:
    """(METHOD, /path/{template}, operation) for every route the document describes."""
    return sorted(
        (method.upper(), path, op) for path, ops in doc["paths"].items() for method, op in ops.items()
    )


JSON_LEAF = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
JSON_VALUE = st.recursive(
    JSON_LEAF,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=12,
)


class SchemaStrategies:
    """Strategies for the schemas of one OpenAPI 3.1 document (components resolved by name)."""

    def __init__(self, doc: Mapping[str, Any], *, max_list: int = 3, max_text: int = 40) -> None:
        self.components: Mapping[str, Any] = doc["components"]["schemas"]
        self.max_list = max_list
        self.max_text = max_text
        self._named: dict[str, st.SearchStrategy[Any]] = {}

    def named(self, name: str) -> st.SearchStrategy[Any]:
        if name not in self._named:
            self._named[name] = st.deferred(lambda: self.of(self.components[name]))
        return self._named[name]

    def of(self, schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
        if "$ref" in schema:
            return self.named(schema["$ref"].rsplit("/", 1)[-1])
        if "anyOf" in schema:
            return st.one_of([self.of(s) for s in schema["anyOf"]])
        if "enum" in schema:
            return st.sampled_from(schema["enum"])
        if "const" in schema:
            return st.just(schema["const"])
        kind = schema.get("type")
        if kind == "object":
            return self._object(schema)
        if kind == "array":
            low = schema.get("minItems", 0)
            high = max(low, min(schema.get("maxItems", self.max_list), self.max_list))
            return st.lists(self.of(schema.get("items", {})), min_size=low, max_size=high)
        if kind == "string":
            return self._string(schema)
        if kind == "integer":
            low = schema.get("minimum", schema.get("exclusiveMinimum", -(2**63) - 1) + 1)
            high = schema.get("maximum", schema.get("exclusiveMaximum", 2**63 + 1) - 1)
            return st.integers(int(low), int(high))
        if kind == "number":
            return st.floats(
                min_value=schema.get("minimum", schema.get("exclusiveMinimum")),
                max_value=schema.get("maximum", schema.get("exclusiveMaximum")),
                exclude_min="exclusiveMinimum" in schema,
                exclude_max="exclusiveMaximum" in schema,
                allow_nan=False,
                allow_infinity=False,
            )
        if kind == "boolean":
            return st.booleans()
        if kind == "null":
            return st.none()
        return JSON_VALUE

    def _object(self, schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
        props: Mapping[str, Any] = schema.get("properties", {})
        if props:
            required = set(schema.get("required", ()))
            return st.fixed_dictionaries(
                {k: self.of(v) for k, v in props.items() if k in required},
                optional={k: self.of(v) for k, v in props.items() if k not in required},
            )
        values = schema.get("additionalProperties", True)
        keys = self.of(schema["propertyNames"]) if "propertyNames" in schema else st.text(max_size=12)
        low = schema.get("minProperties", 0)
        high = max(low, min(schema.get("maxProperties", self.max_list), self.max_list))
        return st.dictionaries(
            keys, self.of(values) if isinstance(values, Mapping) else JSON_VALUE, min_size=low, max_size=high
        )

    def _string(self, schema: Mapping[str, Any]) -> st.SearchStrategy[str]:
        low = schema.get("minLength", 0)
        high = max(low, min(schema.get("maxLength", self.max_text), self.max_text))
        pattern = schema.get("pattern")
        if pattern:
            try:
                re.compile(pattern)
                return st.from_regex(pattern, fullmatch=True).filter(
                    lambda s: low <= len(s) <= schema.get("maxLength", 10**9)
                )
            except (re.error, InvalidArgument):
                pass
        return st.text(min_size=low, max_size=high)


# --- hostile input -----------------------------------------------------------------------------

NON_FINITE = ("NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1E999", "-0.0e99999")


def _nested(n: int, kind: str) -> str:
    return "[" * n + "]" * n if kind == "list" else '{"a": ' * n + "1" + "}" * n


def hostile_literals() -> st.SearchStrategy[str]:
    """JSON text fragments that once broke the API when they appeared anywhere in a body."""
    return st.one_of(
        st.builds(_nested, st.integers(17, 12_000), st.sampled_from(["list", "object"])),
        st.integers(4_301, 12_000).map(lambda n: "9" * n),
        st.integers(31, 4_300).map(lambda n: "-" + "1" * n),
        st.sampled_from(NON_FINITE),
        st.sampled_from(['"\\ud800"', '"a\\udfffb"', '"\\ud83d"', '"\\udc00\\ud800"']),
        st.text(min_size=1, max_size=5).map(lambda t: json.dumps(t + "\ud800")),  # literal surrogate
    )


def splice(body: Any, path: list[Any], literal: str) -> str:
    """`body` as JSON text with the value at `path` replaced by the raw `literal` (no escaping)."""
    data = json.loads(json.dumps(body))
    if not path:
        return literal
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = HOLE
    return json.dumps(data).replace(json.dumps(HOLE), literal, 1)


def paths_of(value: Any, prefix: list[Any] | None = None) -> list[list[Any]]:
    """Every path to a value inside `value` (keys and list indexes), the root excluded."""
    out: list[list[Any]] = []
    prefix = prefix or []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else []
    for key, child in items:
        out.append([*prefix, key])
        out += paths_of(child, [*prefix, key])
    return out


def forged_cursors() -> st.SearchStrategy[str]:
    """Cursors nobody issued: base64 of arbitrary JSON, wrong key shapes, and garbage."""
    b64 = st.builds(lambda v: base64.urlsafe_b64encode(json.dumps(v).encode()).decode(), JSON_VALUE)
    fixed = st.sampled_from(
        [
            base64.urlsafe_b64encode(b"{}").decode(),
            base64.urlsafe_b64encode(b'{"a":1}').decode(),
            base64.urlsafe_b64encode(b'{"pk":{"N":"1"},"sk":{"S":"RUN"}}').decode(),
            base64.urlsafe_b64encode(b'{"run_id":7,"status":""}').decode(),
            base64.urlsafe_b64encode(b'{"run_id":"x","offset":true}').decode(),
            base64.urlsafe_b64encode(b"[" * 3000).decode(),
            base64.urlsafe_b64encode(b'{"pk": NaN}').decode(),
            "\ud800",
            "A" * 5000,
        ]
    )
    return st.one_of(b64, fixed, st.text(max_size=60))


HOSTILE_PARAM = st.text(max_size=40) | st.sampled_from(
    ["", "²", "٣", "1e2", "-1", "0", "101", "\ud800", "A" * 3000, "%00", "../../etc"]
)
