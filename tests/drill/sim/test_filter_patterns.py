"""The simulated CloudWatch Logs' filter patterns: the forms the service writes, matched as the
filter-pattern syntax documents (a quoted phrase as written, case included; `?`-marked phrases:
any of them), and anything else refused rather than matched as AWS would not."""

from __future__ import annotations

import pytest

from drill.sim.cloudwatch import phrase_matcher
from sagewarden.domain.hosts.bad_hosts import FINGERPRINT_PATTERN, HARDWARE_PATTERN

XID = "NVRM: Xid (PCI:0000:53:00): 79, pid=1234, GPU has fallen off the bus."
ECC = "RuntimeError: CUDA error: uncorrectable ECC error encountered"


def test_no_pattern_matches_every_event() -> None:
    assert phrase_matcher("")("anything") and phrase_matcher("")("")


def test_a_quoted_phrase_matches_as_written_case_included() -> None:
    m = phrase_matcher(FINGERPRINT_PATTERN)
    assert m("[sagewarden] host=3 fingerprint=GPU-1,GPU-2")
    assert not m("[SAGEWARDEN] host=3 fingerprint=GPU-1")
    assert not m("step 12 loss 2.1")


def test_question_marked_phrases_match_any_of_them() -> None:
    m = phrase_matcher(HARDWARE_PATTERN)
    assert m(XID) and m(ECC) and m("the GPU fell off the bus") and m("GPU is lost")
    assert not m("RuntimeError: CUDA error: unspecified launch failure")
    assert not m("NCCL WARN NET/OFI Request error") and not m("ecc error (lower case)")


@pytest.mark.parametrize(
    "pattern",
    ["ERROR Exception", '{ $.level = "error" }', '"a" "b"', '?"a" b', "%Xid%"],
    ids=["two words", "a json pattern", "two quoted terms", "an or of terms", "a regex pattern"],
)
def test_other_pattern_forms_are_refused(pattern: str) -> None:
    with pytest.raises(NotImplementedError):
        phrase_matcher(pattern)
