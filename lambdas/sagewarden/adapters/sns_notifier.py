"""SNS notifier: one message per decision worth telling a person about, fitted to SNS's 256 KiB.

Clips attributes, subject and body within SNS_MESSAGE_BUDGET and passes `Notify.attributes`
through (e.g. `dedupe_id`). Why: docs/reliability.md (*Bounded everything*, *SNS messages*)."""

from __future__ import annotations

from typing import Any

from sagewarden.domain.vocabulary.actions import Notify
from sagewarden.domain.vocabulary.bounded import clip_lines, clip_text, utf8_len

SNS_MAX_BYTES = 256 * 1024
SNS_MESSAGE_BUDGET = SNS_MAX_BYTES - 8 * 1024
ATTRIBUTE_MAX_BYTES = 1024
BODY_LINE_MAX_BYTES = 4096
SUBJECT_MAX_CHARS = 99


class SnsNotifier:
    def __init__(self, client: Any, topic_arn: str) -> None:
        self._sns = client
        self._topic = topic_arn

    def publish(self, message: Notify) -> None:
        attributes = {
            k: {"DataType": "String", "StringValue": clip_text(v, ATTRIBUTE_MAX_BYTES)}
            for k, v in message.attributes.items()
            if v
        }
        subject = _subject(message.subject)
        room = SNS_MESSAGE_BUDGET - utf8_len(subject) - _attributes_bytes(attributes)
        self._sns.publish(
            TopicArn=self._topic,
            Subject=subject,
            Message=_body(message.body, room),
            MessageAttributes=attributes,
        )


def _attributes_bytes(attributes: dict[str, dict[str, str]]) -> int:
    return sum(
        utf8_len(k) + utf8_len(v["DataType"]) + utf8_len(v["StringValue"]) for k, v in attributes.items()
    )


def _body(text: str, max_bytes: int) -> str:
    if utf8_len(text) <= max_bytes:
        return text
    return "\n".join(clip_lines(text.split("\n"), max_bytes, keep="head", line_max_bytes=BODY_LINE_MAX_BYTES))


def _subject(text: str) -> str:
    # SNS subjects: no line breaks or control characters, < 100 chars (older documentation: ASCII
    # only, starting with a letter, digit or punctuation mark); printable ASCII, trimmed, meets both
    clean = "".join(ch if 32 <= ord(ch) < 127 else "?" for ch in " ".join(text.split()))
    return clean[:SUBJECT_MAX_CHARS].rstrip() or "sagewarden"
