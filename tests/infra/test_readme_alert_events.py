"""README's list of alert events is the list of events the code can send (issue 16 item 6: it
omitted run.deferred, run.resumed and attempt.warm_pool_off)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.doc_pages import documentation

ROOT = Path(__file__).resolve().parents[2]
EVENT = re.compile(r'"((?:run|attempt|hang|heartbeat)\.[a-z_]+)"')


def _sent_by_code() -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "lambdas" / "sagewarden").rglob("*.py"):
        found |= set(EVENT.findall(path.read_text(encoding="utf-8")))
    return found


def _listed_in_readme() -> set[str]:
    text = documentation()
    section = text[text.index("## Alerts") :]
    listing = section[section.index("Events:") : section.index("For example")]
    return set(re.findall(r"`((?:run|attempt|hang|heartbeat)\.[a-z_]+)`", listing))


def test_readme_lists_every_alert_event_the_code_sends_and_no_other():
    sent = _sent_by_code()
    assert {
        "run.deferred",
        "run.resumed",
        "attempt.warm_pool_off",
        "hang.detected",
        "heartbeat.broken",
    } <= sent
    assert _listed_in_readme() == sent
