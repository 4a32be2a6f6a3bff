"""Texts and JSON bounded by UTF-8 bytes, saying what was cut: `utf8_len`, `clip_text`,
`clip_lines`, `bounded_json`. Pure. Why: docs/reliability.md (*Bounded everything*, *Bounded by
bytes*)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

Keep: TypeAlias = Literal["head", "tail"]
Json: TypeAlias = "dict[str, Json] | list[Json] | str | int | float | bool | None"

LINE_MAX_BYTES: Final = 1024
MIN_JSON_BYTES: Final = 64
_MIN_STR: Final = 64  # a JSON string is never clipped below this many bytes before the last resort
_READABLE_STR: Final = 256  # strings are clipped down to this before lists lose items
_MAX_DEPTH: Final = 64


def utf8_len(text: str) -> int:
    """Bytes of ``text`` encoded as UTF-8 (lone surrogates count as U+FFFD)."""
    return len(_valid(text).encode("utf-8"))


def _valid(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in text)
    return text


def _cut_marker(cut: int, keep: Keep) -> str:
    return f"… [cut {cut:,} bytes]" if keep == "head" else f"[cut {cut:,} bytes] …"


def _prefix(data: bytes, n: int) -> str:
    """The longest whole-character prefix of UTF-8 ``data`` within ``n`` bytes."""
    return data[: max(0, n)].decode("utf-8", "ignore")


def _suffix(data: bytes, n: int) -> str:
    """The longest whole-character suffix of UTF-8 ``data`` within ``n`` bytes."""
    if n <= 0:
        return ""
    return data[-n:].decode("utf-8", "ignore")


def clip_text(text: str, max_bytes: int, *, keep: Keep = "head") -> str:
    """``text`` in at most ``max_bytes`` UTF-8 bytes.

    A text that fits is returned unchanged. Otherwise the start (``keep="head"``) or the end
    (``keep="tail"``) is kept and a marker such as ``… [cut 12,345 bytes]`` (the bytes of
    ``text`` left out) is added, counted inside ``max_bytes``. Below about 30 bytes the marker
    itself does not fit and the text is cut without one.
    """
    if max_bytes < 0:
        raise ValueError("max_bytes must be >= 0")
    return _clip(_valid(text), max_bytes, keep, 0)


def _clip(text: str, max_bytes: int, keep: Keep, already_cut: int) -> str:
    """clip_text for valid text of which ``already_cut`` bytes were cut before."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes and not already_cut:
        return text
    total = len(data) + already_cut
    room = max_bytes - len(_cut_marker(total, keep).encode("utf-8"))  # the widest marker
    if room < 0:
        return _prefix(data, max_bytes) if keep == "head" else _suffix(data, max_bytes)
    take = _prefix if keep == "head" else _suffix
    kept = take(data, room)
    marker = _cut_marker(total - len(kept.encode("utf-8")), keep)
    # The real marker may be a digit or two narrower than the widest one: use that room too.
    wider = take(data, max_bytes - len(marker.encode("utf-8")))
    wider_marker = _cut_marker(total - len(wider.encode("utf-8")), keep)
    if len(wider.encode("utf-8")) + len(wider_marker.encode("utf-8")) <= max_bytes:
        kept, marker = wider, wider_marker
    return kept + marker if keep == "head" else marker + kept


def _lines_marker(lines: int, nbytes: int) -> str:
    return f"[… {lines:,} line{'s' if lines != 1 else ''} cut, {nbytes:,} bytes]"


def clip_lines(
    lines: Iterable[str], max_bytes: int, *, keep: Keep = "tail", line_max_bytes: int = LINE_MAX_BYTES
) -> tuple[str, ...]:
    """Whole lines whose ``"\\n".join`` is at most ``max_bytes`` UTF-8 bytes.

    Each line is first clipped to ``line_max_bytes`` (its start is kept). Lines are then kept from
    the end (``keep="tail"``, newest log lines) or the start (``keep="head"``); when some are
    dropped, one marker line such as ``[… 7 lines cut, 1,024 bytes]`` takes their place (first
    for ``"tail"``, last for ``"head"``) and is counted inside the limit. Lines that already fit
    come back unchanged.
    """
    if max_bytes < 0 or line_max_bytes < 0:
        raise ValueError("byte limits must be >= 0")
    original = tuple(lines)
    if all(utf8_len(line) <= line_max_bytes for line in original) and _joined_len(original) <= max_bytes:
        return original
    if not original:
        return ()
    sizes = [utf8_len(line) for line in original]
    widest_marker = utf8_len(_lines_marker(len(original), sum(sizes)))
    if max_bytes < widest_marker + 2:  # not even the marker and one byte of a line
        return (clip_text(_lines_marker(len(original), sum(sizes)), max_bytes),) if max_bytes else ()
    per_line = min(line_max_bytes, max_bytes)
    clipped = [clip_text(line, per_line) for line in original]
    order = range(len(clipped) - 1, -1, -1) if keep == "tail" else range(len(clipped))
    chosen: list[int] = []
    used = 0
    for i in order:
        cost = utf8_len(clipped[i]) + (1 if chosen else 0)
        if used + cost > max_bytes:
            break
        chosen.append(i)
        used += cost
    if len(chosen) == len(clipped):
        return tuple(clipped)
    # Make room for the marker line (counted in the limit), dropping more lines if needed;
    # a single remaining line is clipped instead of dropped so something of the text survives.
    total_bytes = sum(sizes)
    while True:
        kept_bytes = sum(sizes[i] for i in chosen)
        marker = _lines_marker(len(clipped) - len(chosen), total_bytes - kept_bytes)
        total = used + utf8_len(marker) + (1 if chosen else 0)
        if total <= max_bytes:
            break
        if len(chosen) == 1:
            i = chosen[0]
            room = max_bytes - utf8_len(marker) - 1
            clipped[i] = clip_text(original[i], min(per_line, room))
            used = utf8_len(clipped[i])
            break
        i = chosen.pop()
        used -= utf8_len(clipped[i]) + 1
    kept = sorted(chosen)
    body = [clipped[i] for i in kept]
    return (marker, *body) if keep == "tail" else (*body, marker)


def _joined_len(lines: Sequence[str]) -> int:
    return sum(utf8_len(line) for line in lines) + max(0, len(lines) - 1)


# --- JSON ------------------------------------------------------------------------------------


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False)


def _fast_dumps(value: object) -> str | None:
    """The plain serialisation, or None when ``value`` is not plain JSON data as it stands."""
    try:
        text = json.dumps(
            value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False, default=str
        )
        text.encode("utf-8")
    except (TypeError, ValueError, RecursionError):
        return None
    return text


def _key(key: object) -> str:
    if isinstance(key, str):
        return _valid(key)
    if key is None or isinstance(key, bool):
        return json.dumps(key)
    if isinstance(key, float) and not math.isfinite(key):
        return repr(key)
    if isinstance(key, int | float):
        return json.dumps(key)
    return _valid(str(key))


@dataclass
class _Seq:
    """A list while shrinking: ``items`` are its first and last items (halves around the middle)
    and ``missing`` the items already cut from the middle."""

    items: list[_Node]
    missing: int = 0


@dataclass
class _Text:
    """A string longer than any limit while shrinking: its first bytes and how many were cut."""

    text: str
    missing: int


_Node: TypeAlias = "dict[str, _Node] | _Seq | _Text | str | int | float | bool | None"


def _plain(value: object, max_bytes: int, depth: int, path: frozenset[int]) -> _Node:
    """``value`` as plain JSON data: non-JSON objects become ``str()``, non-finite floats
    strings, cycles and deep nesting a marker; lists and strings already longer than could ever
    fit in ``max_bytes`` are cut here (a list of n items takes at least 2n bytes)."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, str):
        return _text(value, max_bytes)
    if depth >= _MAX_DEPTH:
        return "[… nested too deep, cut]"
    if id(value) in path:
        return "[… circular reference, cut]"
    inner = path | {id(value)}
    if isinstance(value, dict):
        return {_key(k): _plain(v, max_bytes, depth + 1, inner) for k, v in value.items()}
    if isinstance(value, list | tuple):
        head, tail, missing = _ends(len(value), max_bytes // 2)
        kept = [*value[:head], *value[len(value) - tail :]]
        return _Seq([_plain(v, max_bytes, depth + 1, inner) for v in kept], missing)
    return _text(str(value), max_bytes)


def _text(value: str, max_bytes: int) -> str | _Text:
    data = _valid(value).encode("utf-8")
    if len(data) <= max_bytes:
        return _valid(value)
    kept = _prefix(data, max_bytes)
    return _Text(kept, len(data) - len(kept.encode("utf-8")))


def _ends(length: int, cap: int) -> tuple[int, int, int]:
    """How many items to keep from the start and the end of a list, and how many to cut."""
    if length <= cap:
        return length, 0, 0
    head = (cap + 1) // 2
    return head, cap - head, length - cap


def _shape(node: _Node, str_cap: int, list_cap: int) -> Json:
    """``node`` as JSON data with every string (and key) clipped to ``str_cap`` bytes and every
    list to ``list_cap`` items, the cut middle of a list replaced by ``"[… N items cut]"``."""
    if isinstance(node, str):
        return clip_text(node, str_cap)
    if isinstance(node, _Text):
        return _clip(node.text, str_cap, "head", node.missing)
    if isinstance(node, _Seq):
        total = len(node.items) + node.missing
        head, tail, _ = _ends(len(node.items), list_cap)
        out = [_shape(v, str_cap, list_cap) for v in node.items[:head]]
        if head + tail < total:
            out.append(f"[… {total - head - tail:,} items cut]")
        out += [_shape(v, str_cap, list_cap) for v in node.items[len(node.items) - tail :]]
        return out
    if isinstance(node, dict):
        shaped: dict[str, Json] = {}
        for k, v in node.items():
            key = clip_text(k, str_cap)
            n = 2
            while key in shaped:  # two long keys with one prefix: keep both
                key = clip_text(k, str_cap - 8) + f" ({n})"
                n += 1
            shaped[key] = _shape(v, str_cap, list_cap)
        return shaped
    return node


def _longest(node: _Node) -> tuple[int, int]:
    """(bytes of the longest string or key, items of the longest list) in ``node``."""
    if isinstance(node, str):
        return utf8_len(node), 0
    if isinstance(node, _Text):
        return utf8_len(node.text), 0
    if isinstance(node, _Seq):
        s, n = 0, len(node.items)
        for v in node.items:
            vs, vn = _longest(v)
            s, n = max(s, vs), max(n, vn)
        return s, n
    if isinstance(node, dict):
        s, n = 0, 0
        for k, v in node.items():
            vs, vn = _longest(v)
            s, n = max(s, vs, utf8_len(k)), max(n, vn)
        return s, n
    return 0, 0


def _largest(lo: int, hi: int, fits: Callable[[int], bool]) -> int | None:
    """The largest x in [lo, hi] with fits(x), or None. Binary search: fits is monotone up to
    the few bytes a cut marker's digits vary by, and the caller only uses values it checked."""
    if hi < lo or not fits(lo):
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def bounded_json(value: object, max_bytes: int) -> str:
    """``value`` as compact JSON (sorted keys, UTF-8, ``default=str``) of at most ``max_bytes``
    UTF-8 bytes; always valid JSON (``json.loads`` reads it back).

    A value that fits comes back exactly as ``json.dumps(value, ensure_ascii=False,
    separators=(",", ":"), sort_keys=True, default=str)``. Otherwise, in this order:

    1. the longest strings (and keys) are clipped, none below 256 bytes (``clip_text`` marker);
    2. long lists keep their first and last items around a ``"[… N items cut]"`` item, with
       strings clipped to 256 bytes, and strings get back what room is left;
    3. steps 1 and 2 again with strings down to 64 bytes;
    4. the last resort: ``{"truncated": true, "bytes": N, "preview": "<clipped JSON text>"}``
       where N is the size of the full serialisation.

    Non-finite floats become strings, cycles and nesting deeper than 64 levels a marker string.
    ``max_bytes`` must be at least ``MIN_JSON_BYTES`` (64).
    """
    if max_bytes < MIN_JSON_BYTES:
        raise ValueError(f"max_bytes must be >= {MIN_JSON_BYTES}")
    text = _fast_dumps(value)
    if text is not None and utf8_len(text) <= max_bytes:
        return text
    tree = _plain(value, max_bytes, 0, frozenset())
    longest_str, longest_list = _longest(tree)
    longest_list = max(longest_list, 1)

    def fits(str_cap: int, list_cap: int) -> bool:
        return utf8_len(_dumps(_shape(tree, str_cap, list_cap))) <= max_bytes

    if fits(_MIN_STR, 1):  # otherwise no search can succeed: skip the probes
        for floor in (_READABLE_STR, _MIN_STR):
            top = max(longest_str, floor)
            cap = _largest(floor, top, lambda c: fits(c, longest_list))
            if cap is not None:
                return _dumps(_shape(tree, cap, longest_list))
            items = _largest(1, longest_list, lambda n: fits(floor, n))  # noqa: B023 - used at once
            if items is not None:
                cap = _largest(floor, top, lambda c: fits(c, items))  # noqa: B023 - used at once
                assert cap is not None  # fits(floor, items) holds
                return _dumps(_shape(tree, cap, items))
    return _last_resort(text if text is not None else _dumps(_shape(tree, max_bytes, max_bytes)), max_bytes)


def _last_resort(full: str, max_bytes: int) -> str:
    total = utf8_len(full)
    room = max_bytes
    while True:
        out = _dumps({"truncated": True, "bytes": total, "preview": clip_text(full, max(0, room))})
        excess = utf8_len(out) - max_bytes
        if excess <= 0:
            return out
        room -= max(excess, 1)
