"""BENCHMARKS.md's section on the corpus of real endings (benchmarks/corpus_eval.py
``bench_section``), rendered from a tiny input."""

from __future__ import annotations

import dataclasses

from benchmarks.corpus_eval import BENCH_HEADING, bench_section, load

CASES = {c.id: c for c in load()}
FAIL_FAST = CASES["disk-full-torch-save-dolly-139"]
RESUME = CASES["nccl-timeout-llamafactory-7396"]
AMBIGUOUS = CASES["nccl-timeout-alltoall-threads-nccl-1610"]  # labelled confirm-once; resumed


def _section(cases: list) -> list[str]:
    return bench_section(cases)


def _under(lines: list[str], heading: str) -> list[str]:
    start = lines.index(heading) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("#")), len(lines))
    return lines[start:end]


def test_the_section_gives_accuracy_confusion_and_attempts_per_case() -> None:
    lines = _section([FAIL_FAST, RESUME, AMBIGUOUS])
    assert lines[0] == BENCH_HEADING
    assert "3 endings of real training jobs (2 unambiguous, 1 ambiguous; 2 categories)" in lines[2]
    assert all(not line.startswith("# ") for line in lines)  # the report's headings sit below it
    accuracy = _under(lines, "### Accuracy per label (unambiguous cases)")
    assert "| fail-fast | 1 | 1 | 100 % |" in accuracy and "| all | 2 | 2 | 100 % |" in accuracy
    confusion = _under(
        lines, "### Confusion matrix (unambiguous; rows expected, columns what the supervisor did)"
    )
    assert "| resume | 1 | . | . | . | . |" in confusion and "| fail-fast | . | . | 1 | . | . |" in confusion
    # nothing unambiguous is wrong: the ambiguous case treated otherwise is listed, with both reasons
    wrong = "\n".join(_under(lines, "### Wrong (unambiguous), grouped by expected -> did (class)"))
    assert wrong.startswith("\nNone.") and f"`{AMBIGUOUS.id}`" in wrong and AMBIGUOUS.why in wrong
    per_case = _under(lines, "### Attempts until the run stopped, per case")
    assert f"| fail-fast | 1 | 1 | {FAIL_FAST.id} |" in per_case
    assert any(
        row.startswith("| confirm-once |") and f"{AMBIGUOUS.id} (ambiguous)" in row for row in per_case
    )


def test_a_case_the_supervisor_gets_wrong_is_listed_with_its_reason() -> None:
    mislabelled = dataclasses.replace(RESUME, id="relabelled-watchdog", label="fail-fast")
    lines = _section([FAIL_FAST, mislabelled])
    assert "| fail-fast | 2 | 1 | 50 % |" in _under(lines, "### Accuracy per label (unambiguous cases)")
    wrong = _under(lines, "### Wrong (unambiguous), grouped by expected -> did (class)")
    assert not any(line.startswith("None.") for line in wrong)
    groups = [line for line in lines if line.startswith("#### fail-fast -> resume")]
    assert groups == ["#### fail-fast -> resume (INFRASTRUCTURE): 1"]
    item = next(line for line in lines if "`relabelled-watchdog`" in line)
    assert "watchdog" in item.lower()  # the classifier's reason line
