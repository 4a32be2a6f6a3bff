"""SNS notifier: one message per decision worth telling a person about.

SNS takes at most 256 KiB per message, body, subject and message attributes together. A
message is published within SNS_MESSAGE_BUDGET (8 KiB of margin): attribute values are short
ids (a value past ATTRIBUTE_MAX_BYTES is clipped), the subject is ASCII-printable and under 100
characters (e-mail subjects), and the body gets the rest: a body that does not fit keeps its
first lines (each at most BODY_LINE_MAX_BYTES) and ends with a line saying how many lines and
bytes were cut. Every attribute of `Notify.attributes` passes through as a String attribute
(e.g. `dedupe_id`, which lets subscribers drop a repeated delivery).
"""

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
