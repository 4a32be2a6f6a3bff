"""Byte-bounded texts and JSON (issue 7 item 6): the limit always holds, the output is valid
UTF-8 / valid JSON, inputs that fit come back unchanged, and every cut says what it cut."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sagewarden.domain.vocabulary.bounded import MIN_JSON_BYTES, bounded_json, clip_lines, clip_text, utf8_len

# Astral characters (4 UTF-8 bytes), combining marks (a cut must not care), CJK (3 bytes),
# quotes/backslashes/control characters (JSON escapes grow them up to 6x).
_SPECIAL = st.sampled_from(
    [
        "😀",
        "\U0001d538",
        "\U0010ffff",
        "\u0301",
        "\u0308",
        "\u20dd",
        "漢",
        "é",
        '"',
        "\\",
        "\n",
        "\x00",
        "\x1f",
        "…",
    ]
)
CHARS = st.one_of(st.characters(codec="utf-8"), _SPECIAL)
TEXT = st.text(CHARS, max_size=400)
JSON_LEAF = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), TEXT
)
JSON_VALUE = st.recursive(
    JSON_LEAF,
    lambda inner: st.one_of(st.lists(inner, max_size=30), st.dictionaries(TEXT, inner, max_size=12)),
    max_leaves=120,
)
PROPS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _plain_dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=str)


# --- clip_text --------------------------------------------------------------------------------


@PROPS
@given(TEXT, st.integers(min_value=0, max_value=600), st.sampled_from(["head", "tail"]))
def test_clip_text_holds_the_byte_limit_and_keeps_whole_characters(text, max_bytes, keep):
    out = clip_text(text, max_bytes, keep=keep)
    data = out.encode("utf-8")  # raises if a character were split into a lone surrogate
    assert len(data) <= max_bytes
    if utf8_len(text) <= max_bytes:
        assert out == text
    else:
        assert out != text
        if max_bytes >= 40:  # room for the marker: it says how much was cut
            assert "[cut " in out
            kept = out.split("… [cut ")[0] if keep == "head" else out.split(" bytes] …", 1)[1]
            assert text.startswith(kept) if keep == "head" else text.endswith(kept)
            cut = int(out.split("[cut ")[1].split(" bytes]")[0].replace(",", ""))
            assert cut == utf8_len(text) - utf8_len(kept)


@settings(max_examples=20, deadline=None)
@given(st.text(CHARS, min_size=1, max_size=20), st.integers(min_value=200_000, max_value=2_000_000))
def test_clip_text_huge_input(unit, repeat_bytes):
    text = unit * (repeat_bytes // max(1, utf8_len(unit)) + 1)
    out = clip_text(text, 2048)
    assert utf8_len(out) <= 2048
    assert out.encode("utf-8").decode("utf-8") == out
    assert f"[cut {utf8_len(text) - utf8_len(out.split('… [cut ')[0]):,} bytes]" in out


def test_clip_text_marks_the_cut_and_never_splits_an_astral_character():
    text = "😀" * 100  # 400 bytes
    out = clip_text(text, 50)
    assert out.endswith(" bytes]") and "[cut " in out
    assert set(out.split("…")[0]) == {"😀"}
    assert utf8_len(out) <= 50


def test_clip_text_replaces_lone_surrogates():
    out = clip_text("a\ud800b", 10)
    assert out == "a\ufffdb"
    out.encode("utf-8")


def test_clip_text_rejects_negative_limit():
    with pytest.raises(ValueError):
        clip_text("x", -1)


# --- clip_lines -------------------------------------------------------------------------------


@PROPS
@given(
    st.lists(TEXT, max_size=60),
    st.integers(min_value=0, max_value=3000),
    st.sampled_from(["head", "tail"]),
    st.integers(min_value=0, max_value=500),
)
def test_clip_lines_holds_the_byte_limit(lines, max_bytes, keep, line_max):
    out = clip_lines(lines, max_bytes, keep=keep, line_max_bytes=line_max)
    assert utf8_len("\n".join(out)) <= max_bytes
    for line in out:
        line.encode("utf-8")
    fits = all(utf8_len(x) <= line_max for x in lines) and utf8_len("\n".join(lines)) <= max_bytes
    if fits:
        assert out == tuple(lines)
    elif max_bytes >= 80 and len(out) < len(lines):
        marker = out[0] if keep == "tail" else out[-1]
        dropped = int(marker.split("[… ")[1].split(" line")[0].replace(",", ""))
        assert dropped == len(lines) - (len(out) - 1)


def test_clip_lines_keeps_the_newest_lines_and_says_how_many_were_dropped():
    lines = [f"step {i} loss 0.{i:04d}" for i in range(1000)]
    out = clip_lines(lines, 500)
    assert out[0].startswith("[… ") and "lines cut" in out[0]
    assert out[-1] == lines[-1]
    assert list(out[1:]) == lines[len(lines) - len(out) + 1 :]
    assert int(out[0].split()[1].replace(",", "")) == len(lines) - len(out) + 1
    head = clip_lines(lines, 500, keep="head")
    assert head[0] == lines[0] and "lines cut" in head[-1]


def test_clip_lines_clips_a_long_line_instead_of_dropping_it():
    out = clip_lines(["x" * 10_000, "short"], 4000, line_max_bytes=1024)
    assert out[1] == "short"
    assert utf8_len(out[0]) == 1024
    kept = out[0].split("…")[0]
    assert set(kept) == {"x"} and out[0].endswith(f"… [cut {10_000 - len(kept):,} bytes]")


# --- bounded_json -----------------------------------------------------------------------------


@pytest.mark.claim(
    "Texts stored on items or published are capped by bytes with valid JSON and a note of what was cut (400 KB items, 256 KB messages)"
)
@PROPS
@given(JSON_VALUE, st.integers(min_value=MIN_JSON_BYTES, max_value=4000))
def test_bounded_json_is_valid_json_within_the_limit(value, max_bytes):
    out = bounded_json(value, max_bytes)
    assert utf8_len(out) <= max_bytes
    assert len(out.encode("utf-8")) <= max_bytes
    parsed = json.loads(out)
    if utf8_len(_plain_dumps(value)) <= max_bytes:
        assert out == _plain_dumps(value)
        assert parsed == value


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.text(CHARS, min_size=1, max_size=8),
    st.integers(min_value=1_000, max_value=120_000),
    st.integers(min_value=MIN_JSON_BYTES, max_value=70_000),
)
def test_bounded_json_huge_inputs(unit, count, max_bytes):
    value = {
        "log_tail": [f"[algo-{i}] {unit * 20}" for i in range(count // 10)],
        "message": unit * count,
        "nested": {"items": list(range(count)), "text": unit * (count // 2)},
    }
    out = bounded_json(value, max_bytes)
    assert utf8_len(out) <= max_bytes
    json.loads(out)


def test_bounded_json_cuts_the_largest_strings_first_and_says_so():
    detail = {"type": "JobObserved", "failure_reason": "é" * 60_000, "status": "Failed"}
    out = bounded_json(detail, 65_536 // 2)
    parsed = json.loads(out)
    assert parsed["type"] == "JobObserved" and parsed["status"] == "Failed"
    assert parsed["failure_reason"].endswith(" bytes]") and "[cut " in parsed["failure_reason"]
    assert utf8_len(out) <= 65_536 // 2


def test_bounded_json_truncates_long_lists_keeping_both_ends():
    value = {"hosts_triage": [f"algo-{i}: last log {i} min ago " + "x" * 200 for i in range(1, 2001)]}
    out = bounded_json(value, 20_000)
    rows = json.loads(out)["hosts_triage"]
    assert rows[0].startswith("algo-1:") and rows[-1].startswith("algo-2000:")
    markers = [r for r in rows if r.startswith("[… ") and r.endswith(" items cut]")]
    assert len(markers) == 1
    assert int(markers[0].split()[1].replace(",", "")) == 2000 - (len(rows) - 1)


def test_bounded_json_last_resort_is_a_truncated_wrapper():
    value = {f"key-{i}": i for i in range(20_000)}  # no string or list to shrink
    out = bounded_json(value, 1000)
    parsed = json.loads(out)
    assert parsed["truncated"] is True
    assert parsed["bytes"] == utf8_len(_plain_dumps(value))
    assert parsed["preview"].startswith('{"key-0":0,')
    assert utf8_len(out) <= 1000


def test_bounded_json_handles_values_json_cannot_dump():
    loop: list[object] = []
    loop.append(loop)
    deep: list[object] = []
    node = deep
    for _ in range(5000):
        child: list[object] = []
        node.append(child)
        node = child
    value = {"nan": float("nan"), "inf": float("-inf"), "loop": loop, "deep": deep, 1: "int key", "s": "x"}
    out = bounded_json(value, 4096)
    parsed = json.loads(out)
    assert parsed["nan"] == "nan" and parsed["inf"] == "-inf" and parsed["1"] == "int key"
    assert utf8_len(out) <= 4096


def test_bounded_json_never_cuts_inside_a_string_the_old_way():
    # The audit detail used to be cut with [:50_000]: invalid JSON, an unreadable events page.
    detail = {"log_tail": ['NCCL WARN "quoted" \\ path ' + "x" * 1000] * 80}
    old = json.dumps(detail)[:50_000]
    with pytest.raises(json.JSONDecodeError):
        json.loads(old)
    json.loads(bounded_json(detail, 50_000))


def test_bounded_json_rejects_a_limit_below_the_minimum():
    with pytest.raises(ValueError):
        bounded_json({}, MIN_JSON_BYTES - 1)
