"""SNS notifier: one message per decision worth telling a person about."""

from __future__ import annotations

from typing import Any

from sagewarden.domain.actions import Notify


class SnsNotifier:
    def __init__(self, client: Any, topic_arn: str) -> None:
        self._sns = client
        self._topic = topic_arn

    def publish(self, message: Notify) -> None:
        self._sns.publish(
            TopicArn=self._topic,
            Subject=_subject(message.subject),
            Message=message.body,
            MessageAttributes={
                k: {"DataType": "String", "StringValue": v} for k, v in message.attributes.items() if v
            },
        )


def _subject(text: str) -> str:
    # SNS e-mail subjects: <100 chars, ASCII printable, no line breaks
    clean = "".join(ch if 32 <= ord(ch) < 127 else "?" for ch in text.replace("\n", " "))
    return clean[:99] or "sagewarden"
