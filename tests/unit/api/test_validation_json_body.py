"""Strict JSON parsing of request bodies: every hostile shape is a field-level problem, never a crash."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sagewarden.api.json_body import MAX_BODY_BYTES, MAX_DEPTH, body_text, parse_json
from sagewarden.usecases.errors import InvalidRequest, RequestTooLarge


def _fields(text: str) -> dict[str, str]:
    with pytest.raises(InvalidRequest) as caught:
        parse_json(text)
    return {e.field: e.message for e in caught.value.errors}


@pytest.mark.claim(
    'the body as JSON: malformed JSON, not an object, over 256 KiB (413), `NaN`/`Infinity`/`1e400` anywhere, integers of more than 30 digits, lone surrogates (`"\\ud800"`), repeated keys, and nesting deeper than 16 levels'
)
@pytest.mark.claim(
    "The API's JSON parser rejects deep nesting, huge integers, non-finite numbers, lone surrogates and forged cursors with a 400 naming the field (413 for size); the stored item is checked against DynamoDB's size as stored before anything is written."
)
@pytest.mark.parametrize(
    ("text", "field", "says"),
    [
        ('{"policy": {"max_cost_usd": NaN}}', "policy.max_cost_usd", "NaN is not a JSON number"),
        ('{"policy": {"max_cost_usd": Infinity}}', "policy.max_cost_usd", "finite"),
        ('{"policy": {"max_cost_usd": -Infinity}}', "policy.max_cost_usd", "finite"),
        ('{"policy": {"gpu_idle_percent": 1e400}}', "policy.gpu_idle_percent", "finite"),
        ('{"a": [1, 2, -1E999]}', "a[2]", "finite"),
        ("NaN", "body", "finite"),
        ('{"n": ' + "7" * 4301 + "}", "n", "4301 digits"),
        ('{"n": -' + "7" * 31 + "}", "n", "31 digits"),
        ('{"name": "\\ud800"}', "name", "lone surrogate"),
        ('{"a": {"\\udfff": 1}}', "a", "a key contains a lone surrogate"),
        ('{"a": 1, "a": 2}', "body", "repeats key(s) a"),
        ('{"x": {"b": 1, "b": 1}}', "x", "repeats key(s) b"),
        ("[" * 5000 + "]" * 5000, "body", "nested deeper"),
        ('{"a": ' * 3000 + "1" + "}" * 3000, "body", "nested deeper"),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "body", f"nested deeper than {MAX_DEPTH} levels"),
        ("{not json", "body", "malformed JSON"),
        ('{"a": 1} trailing', "body", "malformed JSON"),
    ],
    ids=[
        "a NaN",
        "an infinity",
        "a minus infinity",
        "a float that overflows to infinity",
        "an overflowing float in a list",
        "a bare NaN body",
        "an int of 4301 digits",
        "a negative int of 31 digits",
        "a lone surrogate in a value",
        "a lone surrogate in a key",
        "a repeated top-level key",
        "a repeated nested key",
        "5000 nested lists",
        "3000 nested objects",
        "one level deeper than allowed",
        "malformed json",
        "trailing text after the json",
    ],
)
def test_json_body_hostile_shape_is_a_field_problem(text, field, says):
    errors = _fields(text)
    assert field in errors, errors
    assert says in errors[field], errors[field]


def test_json_body_nesting_up_to_the_limit_is_fine():
    assert parse_json("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None


def test_json_body_reports_every_bad_number_with_its_path():
    errors = _fields('{"p": {"a": NaN, "b": Infinity, "c": 1}, "q": [1e400]}')
    assert set(errors) == {"p.a", "p.b", "q[0]"}


def test_json_body_long_keys_are_cut_in_paths():
    errors = _fields(json.dumps({"k" * 10_000: 1}).replace("1}", "NaN}"))
    (field,) = errors
    assert len(field) < 100 and field.endswith("…")


def test_json_body_size_is_counted_in_utf8_bytes_and_oversize_is_413():
    text = '"' + "é" * (MAX_BODY_BYTES // 2) + '"'
    with pytest.raises(RequestTooLarge) as caught:
        body_text(text, False)
    assert caught.value.status == 413
    with pytest.raises(RequestTooLarge):
        body_text('"' + "\ud800" * (MAX_BODY_BYTES // 2) + '"', False)  # surrogates are counted, not fatal


def test_json_body_empty_base64_and_non_utf8_bodies():
    for empty in (None, ""):
        with pytest.raises(InvalidRequest):
            body_text(empty, False)
    assert body_text(base64.b64encode(b'{"a": 1}').decode(), True) == '{"a": 1}'
    for bad in ("%%%", base64.b64encode(b"\xff\xfe").decode()):
        with pytest.raises(InvalidRequest) as caught:
            body_text(bad, True)
        assert caught.value.errors[0].field == "body"


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)


def _depth(value) -> int:
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
    return 0 if children is None else 1 + max((_depth(c) for c in children), default=0)


@given(JSON)
def test_json_body_round_trips_any_storable_value(value):
    if _depth(value) <= MAX_DEPTH:
        assert parse_json(json.dumps(value)) == value
    else:
        assert "body" in _fields(json.dumps(value))


@given(st.text(max_size=200))
def test_json_body_any_text_parses_or_is_a_field_problem(text):
    try:
        parse_json(text)
    except InvalidRequest as exc:
        assert exc.errors and all(e.field and e.message for e in exc.errors)


def test_json_body_empty_key_has_a_visible_path():
    assert set(_fields('{"": {"x": NaN}}')) == {'"".x'}


@pytest.mark.claim(
    'the body as JSON: malformed JSON, not an object, over 256 KiB (413), `NaN`/`Infinity`/`1e400` anywhere, integers of more than 30 digits, lone surrogates (`"\\ud800"`), repeated keys, and nesting deeper than 16 levels'
)
def test_json_body_limits_are_the_readmes():
    """README: over 256 KiB is 413, integers of more than 30 digits and nesting deeper than 16
    levels are refused; the limits themselves pass."""
    assert parse_json("[" * 16 + "]" * 16) is not None
    assert "nested deeper than 16 levels" in _fields("[" * 17 + "]" * 17)["body"]
    assert parse_json('{"n": ' + "9" * 30 + "}") == {"n": int("9" * 30)}
    assert "31 digits" in _fields('{"n": ' + "9" * 31 + "}")["n"]
    fits = '"' + "a" * (256 * 1024 - 2) + '"'
    assert body_text(fits, False) == fits
    with pytest.raises(RequestTooLarge) as caught:
        body_text(fits + " ", False)
    assert caught.value.status == 413
