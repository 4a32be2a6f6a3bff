"""The classifier's text machinery: normalising, matching signature tables, evidence, quota
messages. Pure. Why: docs/recovery.md (*Where the rules live*)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from sagewarden.domain.vocabulary.classifier.models import QuotaInfo
from sagewarden.domain.vocabulary.classifier.signatures import Signature

EVIDENCE_TEXT_LIMIT = 300
"""Evidence texts (FailureReason, API message, log lines) are cut to about this many characters."""

MAX_EVIDENCE_LOG_LINES = 5


# --- Matching machinery -----------------------------------------------------------------------

_Compiled: TypeAlias = tuple[tuple[re.Pattern[str], str], ...]


def _compile(table: Iterable[Signature]) -> _Compiled:
    return tuple((re.compile(pattern, re.IGNORECASE | re.DOTALL), label) for pattern, label in table)


def _normalise(text: str) -> str:
    """Case-fold and collapse every whitespace run (newlines, tabs, doubled spaces) to one space."""
    return " ".join(text.split()).casefold()


def _first_label(table: _Compiled, normalised: str) -> str | None:
    for pattern, label in table:
        if pattern.search(normalised):
            return label
    return None


def _trim(text: str, limit: int = EVIDENCE_TEXT_LIMIT) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[: limit - 3] + "..."


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return f"{seconds} s"
    if abs(seconds) < 120:
        return f"{seconds:.0f} s"
    if abs(seconds) < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if abs(seconds) < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


@dataclass(frozen=True)
class _Text:
    original: str
    normalised: str
    from_reason: bool


@dataclass(frozen=True)
class _Hits:
    """Which labels of one table matched, in table order, and the texts they matched in."""

    labels: tuple[str, ...]
    texts: tuple[_Text, ...]

    def __bool__(self) -> bool:
        return bool(self.labels)

    @property
    def in_reason(self) -> bool:
        return any(t.from_reason for t in self.texts)

    @property
    def in_logs(self) -> bool:
        return any(not t.from_reason for t in self.texts)


def _scan(table: _Compiled, texts: Sequence[_Text]) -> _Hits:
    """Match each text against the table; a text counts once, under its first matching row."""
    hits: list[tuple[int, str, int]] = []
    for index, text in enumerate(texts):
        for priority, (pattern, label) in enumerate(table):
            if pattern.search(text.normalised):
                hits.append((priority, label, index))
                break
    labels: list[str] = []
    for _, label, _ in sorted(hits):
        if label not in labels:
            labels.append(label)
    return _Hits(tuple(labels), tuple(texts[i] for i in sorted({index for _, _, index in hits})))


def _where(hits: _Hits) -> str:
    if hits.in_reason and hits.in_logs:
        return "FailureReason and log tail"
    if hits.in_reason:
        return "FailureReason"
    return "log tail"


def _what(hits: _Hits) -> str:
    first, others = hits.labels[0], hits.labels[1:]
    if not others:
        return first
    return f"{first} (also: {', '.join(others)})"


def _evidence(reason: str | None, hits: Iterable[_Text] = ()) -> tuple[str, ...]:
    """The FailureReason (if any) then up to five distinct matched log lines, in tail order."""
    items: list[str] = []
    if reason is not None and reason.strip():
        items.append(_trim(reason))
    seen: set[str] = set()
    lines = 0
    for text in hits:
        if text.from_reason or lines >= MAX_EVIDENCE_LOG_LINES:
            continue
        if text.normalised in seen or not text.normalised:
            continue
        seen.add(text.normalised)
        items.append(_trim(text.original))
        lines += 1
    return tuple(items)


# --- Quota messages ---------------------------------------------------------------------------

_QUOTE = "['\"\u2018\u2019\u201c\u201d]"
_UNIT = r"(?: ?instances?\b)?"
# "The account-level service limit 'ml.p3.8xlarge for training job usage' is 2 Instances, ..." and
# the older unquoted wording (sagemaker-python-sdk #35): "The account-level service limit for
# training-job/ml.p2.xlarge is 0 Instances, with current utilization of 0 Instances and a request
# delta of 2 Instances."
_QUOTA_RE = re.compile(
    rf"limit ?(?:{_QUOTE}(?P<name>[^'\"\u2018\u2019\u201c\u201d]+){_QUOTE}|for (?P<bare>[^\s'\"]+))"
    rf" ?is ?(?P<limit>\d[\d,]*){_UNIT}"
    rf".{{0,120}}?current utili[sz]ation of ?(?P<used>\d[\d,]*){_UNIT}"
    rf".{{0,120}}?request delta of ?(?P<delta>\d[\d,]*){_UNIT}",
    re.IGNORECASE | re.DOTALL,
)


# amazon-sagemaker-examples #1001: "The requested resource training-job/ml.p2.xlarge is not
# available in this region" (a ResourceLimitExceeded that no quota increase answers)
_UNAVAILABLE_RE = re.compile(
    r"requested resource ?(?P<resource>[^\s'\"]+) ?is not available in this region", re.IGNORECASE
)


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def parse_quota_message(message: str) -> QuotaInfo | None:
    """Parse a ResourceLimitExceeded message into its quota name, limit, usage and request delta
    (the quoted and the older unquoted wording), or, for "... is not available in this region", the
    resource with `unavailable` set.

    Tolerates case, extra whitespace, singular "Instance" and missing units. Returns None when
    the message does not carry all four values.
    """
    text = " ".join(message.split())
    gone = _UNAVAILABLE_RE.search(text)
    if gone is not None:
        return QuotaInfo(quota_name=gone.group("resource"), limit=0, used=0, delta=0, unavailable=True)
    match = _QUOTA_RE.search(text)
    if match is None:
        return None
    name = (match.group("name") or match.group("bare") or "").strip()
    if not name:
        return None
    return QuotaInfo(
        quota_name=name,
        limit=_int(match.group("limit")),
        used=_int(match.group("used")),
        delta=_int(match.group("delta")),
    )
