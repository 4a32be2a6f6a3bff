"""`python -m drill SCENARIO --plot FILE`: the drawn figure matches the drill (one bar per attempt
phase, a marker per fault, per supervisor action and per resume, the waits), and the file written is
a real PNG (or SVG / HTML page) showing it."""

from __future__ import annotations

import json
import struct
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image
from matplotlib.figure import Figure

import drill.__main__ as drill_cli
from drill.account.local import BUCKET, EXECUTION_ROLE
from drill.reports import plot
from drill.scenarios.runner import DrillResult, run_scenario
from drill.scenarios.spec import load

pytestmark = pytest.mark.xdist_group("drill_plot")  # one worker runs the two drills once


@pytest.fixture(scope="module")
def drills(template: dict[str, object]) -> dict[str, DrillResult]:
    return {
        name: run_scenario(load(name, bucket=BUCKET, role_arn=EXECUTION_ROLE), template)
        for name in ("hang-dead-host", "quota-contention")
    }


def gids(fig: Figure) -> list[str]:
    (ax,) = fig.axes
    return [g for g in (a.get_gid() for a in [*ax.patches, *ax.lines, *ax.texts]) if g]


def drawn(fig: Figure, kind: str) -> list[list[str]]:
    return [g.split("/")[1:] for g in gids(fig) if g.startswith(kind + "/")]


def x_of(fig: Figure, gid: str) -> float:
    (ax,) = fig.axes
    (line,) = [ln for ln in ax.lines if ln.get_gid() == gid]
    return float(line.get_xdata()[0])


def test_plot_draws_each_attempt_its_phases_the_fault_the_detection_and_the_resume(
    drills: dict[str, DrillResult],
) -> None:
    result = drills["hang-dead-host"]
    fig = plot.figure(result)
    attempts = result.runs["llama-13b"]["attempts"]
    bars = drawn(fig, "attempt")
    assert {int(n) for _, n, _ in bars} == {a["number"] for a in attempts} == {1, 2}
    phases = {n: {p for _, m, p in bars if m == n} for n in ("1", "2")}
    assert phases["1"] == {"starting", "training", "hung", "ending"}  # the dead host: hung until stopped
    assert "hung" not in phases["2"] and {"starting", "training"} <= phases["2"]
    assert drawn(fig, "fault") == [["llama-13b", "0"]]
    assert drawn(fig, "action") == [["llama-13b", "0"]]
    assert drawn(fig, "resume") == [["llama-13b", "2"]]
    # the resume started at once on new instances (it asked for another volume size, so the dead
    # host's warm pool cannot take it): no wait is drawn
    assert drawn(fig, "wait") == []
    # the supervisor's action comes after the fault, and the resume after the action
    assert x_of(fig, "fault/llama-13b/0") < x_of(fig, "action/llama-13b/0") < x_of(fig, "resume/llama-13b/2")
    # the hung bar begins where the fault struck
    (ax,) = fig.axes
    (hung,) = [p for p in ax.patches if p.get_gid() == "attempt/llama-13b/1/hung"]
    assert hung.get_x() == pytest.approx(x_of(fig, "fault/llama-13b/0"), abs=1 / 60)  # within a minute
    texts = [t.get_text() for t in ax.texts]
    assert "resumed from 300" in texts and "dead_host (algo-3)" in texts
    assert plot._wait_reason(result, "llama-13b", result.start_ms, result.end_ms) == "waiting"  # none


def test_plot_draws_waits_for_quota_and_one_lane_per_run(drills: dict[str, DrillResult]) -> None:
    result = drills["quota-contention"]
    fig = plot.figure(result)
    (ax,) = fig.axes
    lanes = [t.get_text().split("\n")[0] for t in ax.get_yticklabels()]
    assert lanes == list(result.runs) == ["pretrain-a", "batch-eval", "hotfix-ft"]
    waits = Counter(run for run, _ in drawn(fig, "wait"))
    assert waits == {"batch-eval": 1, "hotfix-ft": 1}  # pretrain-a had its quota at once
    assert Counter(run for run, _, _ in drawn(fig, "attempt")).keys() == set(result.runs)
    assert "quota wait" in [t.get_text() for t in ax.texts]
    assert drawn(fig, "fault") == [] and drawn(fig, "resume") == []


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_plot_cli_writes_a_png_showing_the_hang(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "incident.png"
    assert drill_cli.main(["hang-dead-host", "--json", "--plot", str(path)]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["scenario"] == "hang-dead-host"  # --json output stays pure JSON
    assert f"plot written to {path}" in err
    width, height = png_size(path.read_bytes())
    assert width > 1000 and height > 200
    pixels = (image.imread(path)[..., :3] * 255).round().astype(int)
    pixels = pixels[: int(height * 0.7)]  # the lane, without the legend's colour swatches below it

    def share(colour: str) -> float:
        rgb = np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)])
        return float((np.abs(pixels - rgb).max(axis=-1) <= 2).mean())

    # training (green) dominates, the hung stretch (red) is visible
    assert share(plot.PHASES["training"][0]) > 5 * share(plot.PHASES["hung"][0]) > 0


def test_plot_html_is_one_page_with_the_picture_and_the_summary(
    drills: dict[str, DrillResult], tmp_path: Path
) -> None:
    path = tmp_path / "incident.html"
    plot.write(drills["hang-dead-host"], path)
    page = path.read_text(encoding="utf-8")
    assert page.count("<svg") == 1 and page.count("</svg>") == 1
    assert 'id="attempt/llama-13b/1/hung' in page  # the gids survive into the SVG
    assert "GPU-hours" in page and "llama-13b" in page and "<pre>" in page


@pytest.mark.claim(
    "A `--plot` path whose directory does not exist or whose suffix is not `.png`, `.svg` or `.html` is refused the same way (one line, exit 2) before the drill runs."
)
@pytest.mark.parametrize(
    ("where", "says"),
    [
        ("x.jpg", "the file must end in .png, .svg or .html"),
        ("missing-dir/x.png", "no directory {tmp}/missing-dir"),
        ("", "is a directory; name a file in it, e.g. run.png"),
        ("file.txt/x.svg", "{tmp}/file.txt is not a directory"),
    ],
    ids=["suffix", "missing-dir", "a-directory", "parent-is-a-file"],
)
def test_plot_path_is_checked_before_the_drill_runs_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, where: str, says: str
) -> None:
    (tmp_path / "file.txt").write_text("")

    def no_drill(*_: object, **__: object) -> None:
        raise AssertionError("the drill ran before the --plot path was checked")

    monkeypatch.setattr("drill.scenarios.runner.run_scenario", no_drill)
    target = tmp_path / where if where else tmp_path
    assert drill_cli.main(["hang-dead-host", "--plot", str(target)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"python -m drill: --plot {target}: {says.format(tmp=tmp_path)}\n"
    assert not (tmp_path / "missing-dir").exists()


def test_alerts_option_prints_every_alert_in_full(drills: dict[str, DrillResult]) -> None:
    from drill.reports.render import render

    result = drills["hang-dead-host"]
    plain = render(result, verbose=False, show_alerts=False)
    full = render(result, verbose=False, show_alerts=True)
    (hang,) = [a for a in result.summary()["alerts"] if a["event"] == "hang.detected"]
    body = [line for line in hang["body"].splitlines() if line.strip()]
    assert "Host triage:" in body and len(body) > 10
    assert all(line in full for line in body)  # every line of the decision, uncut
    assert not all(line in plain for line in body)
    assert "None" not in full.split() and "{" not in full  # no Python reprs in human output
