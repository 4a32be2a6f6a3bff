"""ULID run ids: 26 Crockford base32 characters, sortable by creation time."""

from __future__ import annotations

import os
from collections.abc import Callable

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def ulid(now_ms: int, randomness: bytes | None = None) -> str:
    rand = int.from_bytes(randomness if randomness is not None else os.urandom(10), "big")
    value = (now_ms & ((1 << 48) - 1)) << 80 | (rand & ((1 << 80) - 1))
    chars = []
    for _ in range(26):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def ulid_factory(clock: Callable[[], int], rand: Callable[[int], bytes] = os.urandom) -> Callable[[], str]:
    return lambda: ulid(clock(), rand(10))
