"""Goodput (ETTR) where people look: `sagewarden get` (a line, and the object in --json), `ls`
(an ETTR column), the run-end alert and the per-run metric, through the CLI against the drill."""

from __future__ import annotations

import re

import pytest

from drill.account.local import LocalAccount
from drill.sim.model import Fault, JobProfile
from sagewarden import keys
from tests.scenarios.cli_support import REPR, CliHarness, run_body

SHORT = JobProfile(total_steps=600, steps_per_minute=10, checkpoint_every_steps=200)


@pytest.fixture
def acct(template):
    with LocalAccount(template, store="memory") as account:
        yield account


@pytest.fixture
def h(acct, capsys):
    return CliHarness(acct, capsys)


def test_cli_get_ls_alert_and_metric_show_the_runs_ettr(h, acct):
    acct.sagemaker.set_profile("llama-8b", SHORT)
    acct.sagemaker.inject(Fault(kind="hardware", run="llama-8b", attempt=1, after_training_min=30, host=2))
    run_id = h.submit(run_body("llama-8b"))
    h.until(lambda: h.run(run_id)["status"] == "SUCCEEDED")

    obj = h.cli("get", run_id, json_out=True).json()["ettr"]
    seconds = {b["name"]: b["seconds"] for b in obj["buckets"]}
    assert abs(sum(seconds.values()) - obj["wall_seconds"]) <= 0.1 * len(seconds)  # rounding only
    assert seconds["restarts"] > 0 and seconds["checkpoint_saves"] > 0 and seconds["provisioning"] > 0
    assert {b["name"]: b["how"] for b in obj["buckets"]}["straggler"] == "not measured"
    assert not obj["live"] and 0 < obj["percent"] < 100

    text = h.cli("get", run_id).out
    (line,) = [x for x in text.splitlines() if x.strip().startswith("goodput")]
    assert f"ETTR {obj['percent']:.1f} %: " in line and "restarts (work redone)" in line
    assert not REPR.search(text), text

    table = h.cli("ls").out.splitlines()
    assert "ETTR" in table[0].split()
    assert re.search(rf"\b{obj['percent']:.1f} %", table[1]), table

    (body,) = [m.body for _, m in acct.notifier.sent if m.event == "run.succeeded"]
    assert f"ETTR {obj['percent']:.1f} %" in body
    ettr = [v for name, run, v in acct.counters.samples if name == keys.METRIC_ETTR]
    assert ettr == [pytest.approx(obj["percent"], abs=0.05)]
