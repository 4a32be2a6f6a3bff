"""SnsNotifier (issue 7 items 6 and 11): a published message fits SNS's 256 KiB (body, subject
and attributes together) and says what was cut; the subject is a valid e-mail subject; a
`dedupe_id` attribute passes through."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from sagewarden.adapters.sns_notifier import SNS_MAX_BYTES, SNS_MESSAGE_BUDGET, SnsNotifier
from sagewarden.domain.vocabulary.actions import Notify
from sagewarden.domain.vocabulary.bounded import utf8_len


class Recording:
    """The moto SNS client, keeping what was published."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.published: list[dict[str, Any]] = []

    def publish(self, **kwargs: Any) -> Any:
        self.published.append(kwargs)
        return self._client.publish(**kwargs)


@pytest.fixture
def sns(aws):
    client = boto3.client("sns", region_name="us-east-1")
    arn = client.create_topic(Name="sagewarden-alerts")["TopicArn"]
    return Recording(client), arn


def _size(published: dict[str, Any]) -> int:
    attrs = published["MessageAttributes"]
    return (
        utf8_len(published["Message"])
        + utf8_len(published["Subject"])
        + sum(utf8_len(k) + utf8_len(v["DataType"]) + utf8_len(v["StringValue"]) for k, v in attrs.items())
    )


def _notify(body: str, subject: str = "llama-8b: hang on attempt 3", **attributes: str) -> Notify:
    return Notify("critical", "hang.detected", subject, body, {"run_id": "01KE5Q86", **attributes})


@pytest.mark.claim(
    "Texts stored on items or published are capped by bytes with valid JSON and a note of what was cut (400 KB items, 256 KB messages)"
)
def test_a_huge_alert_body_is_clipped_to_fit_sns_and_says_what_was_cut(sns):
    recording, arn = sns
    triage = [
        f"algo-{h}: last log {h % 30} min ago: step 4000 loss 1.2345 " + "é" * 200 for h in range(1, 2001)
    ]
    body = "\n".join(["Signal: gpu_idle on algo-17 for 12 min", "Host triage:", *triage])
    assert utf8_len(body) > SNS_MAX_BYTES

    SnsNotifier(recording, arn).publish(_notify(body))

    sent = recording.published[0]
    assert _size(sent) <= SNS_MESSAGE_BUDGET
    lines = sent["Message"].split("\n")
    assert lines[:3] == ["Signal: gpu_idle on algo-17 for 12 min", "Host triage:", triage[0]]
    assert lines[-1].startswith("[… ") and "lines cut" in lines[-1]
    assert int(lines[-1].split()[1].replace(",", "")) == len(body.split("\n")) - (len(lines) - 1)


def test_a_body_that_fits_is_sent_unchanged(sns):
    recording, arn = sns
    body = "Run llama-8b succeeded after 3 attempts.\n" + "x" * 10_000
    SnsNotifier(recording, arn).publish(_notify(body))
    assert recording.published[0]["Message"] == body


def test_the_subject_is_a_valid_email_subject(sns):
    recording, arn = sns
    SnsNotifier(recording, arn).publish(_notify("body", subject="\n  😀 run llama-8b\tfailed: " + "é" * 300))
    subject = recording.published[0]["Subject"]
    assert 0 < len(subject) < 100
    assert all(32 <= ord(ch) < 127 for ch in subject)
    assert subject[0] != " " and subject.startswith("? run llama-8b failed: ???")


@pytest.mark.claim(
    "Alerts are written in the same DynamoDB transaction as the decision that owes them and published (with a dedupe id) until confirmed"
)
def test_a_dedupe_id_passes_through_as_a_string_attribute(sns):
    recording, arn = sns
    SnsNotifier(recording, arn).publish(_notify("body", dedupe_id="01KE5Q86#a003#hang.detected", empty=""))
    attrs = recording.published[0]["MessageAttributes"]
    assert attrs["dedupe_id"] == {"DataType": "String", "StringValue": "01KE5Q86#a003#hang.detected"}
    assert attrs["run_id"] == {"DataType": "String", "StringValue": "01KE5Q86"}
    assert "empty" not in attrs  # SNS rejects an empty attribute value


def test_a_huge_attribute_value_is_clipped_and_the_message_still_fits(sns):
    recording, arn = sns
    SnsNotifier(recording, arn).publish(_notify("y" * 300_000, note="z" * 100_000))
    sent = recording.published[0]
    assert _size(sent) <= SNS_MESSAGE_BUDGET
    assert "[cut " in sent["MessageAttributes"]["note"]["StringValue"]
