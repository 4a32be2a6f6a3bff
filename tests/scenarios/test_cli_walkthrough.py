"""The README's local walk-through, replayed exactly as written: every command of its code blocks,
in order, through the CLI against the drill's simulated account (`python -m drill serve`'s account,
in process), with the simulated clock moving between commands as it does for a person typing at the
server's default speed (600 virtual seconds per wall second): no pause, 10 seconds and a minute.
`--follow` polls advance the clock by their interval at that speed. Nothing is tuned for the test:
the jobs train as examples/run.yaml and the commands' --set ask."""

from __future__ import annotations

import re
import tomllib

import pytest

from drill.account.local import LocalAccount
from drill.account.server import DEFAULT_SPEED
from sagewarden_cli.app import main
from tests.scenarios.cli_support import API, REPO, CliHarness, Result, readme_walkthrough, session

GAPS_S = (0, 10, 60)  # wall seconds between two commands


def _virtual_min(wall_s: float) -> float:
    return wall_s * DEFAULT_SPEED / 60


@pytest.mark.claim(
    "This walk-through runs as written, typed as slowly or as quickly as you like (a test replays it with no pause and with a minute between commands)"
)
@pytest.mark.claim(
    "`llama-8b-b` trains for about a week (some 17 minutes of your time), so it is still training when you cancel it"
)
@pytest.mark.parametrize("gap_s", GAPS_S, ids=[f"{g}s-between-commands" for g in GAPS_S])
def test_the_readme_walkthrough_works_as_written_at_any_typing_speed(template, capsys, monkeypatch, gap_s):
    lines = readme_walkthrough()
    commands = [words for words in lines if words[0] == "sagewarden"]
    assert [c[1] for c in commands] == [
        "submit", "submit", "ls", "get", "logs", "events", "submit", "cancel", "logs", "resume",
    ]  # fmt: skip
    # before the first command the reader puts `sagewarden` on PATH: make setup installs it there
    assert lines[0] == ["source", ".venv/bin/activate"]
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert scripts["sagewarden"] == "sagewarden_cli.__main__:main"
    (export,) = [words for words in lines if words[0] == "export"]
    assert export[1].startswith("SAGEWARDEN_API_URL=http://127.0.0.1:")
    monkeypatch.chdir(REPO)
    # the README's export, pointed at this in-process account instead of a loopback port
    monkeypatch.setenv("SAGEWARDEN_API_URL", API)

    with LocalAccount(template, store="memory", iam_replay=False) as acct:
        h = CliHarness(acct, capsys)
        polls = 0

        def sleep(seconds: float) -> None:  # a --follow poll: its interval at the server's speed
            nonlocal polls
            polls += 1
            assert polls < 2_000, "a --follow did not end"
            h.advance(_virtual_min(seconds))

        results: list[Result] = []
        for words in commands:
            capsys.readouterr()
            code = main(words[1:], transport=h.transport, session=session(), sleep=sleep)
            out = capsys.readouterr()
            result = Result(code, out.out, out.err)
            assert code == 0, (" ".join(words), result.out[-2000:], result.err)
            assert "Traceback" not in result.err
            results.append(result)
            h.advance(_virtual_min(gap_s))
        # what the README says of the two runs' lengths at the default speed
        jobs = {j.run_name: j for j in acct.sagemaker.jobs()}
        first_job = jobs["llama-8b"]
        wall_s = (first_job.ended_ms - first_job.created_ms) / 1000 / DEFAULT_SPEED
        assert 60 <= wall_s <= 70  # "about a minute"
        long = jobs["llama-8b-b"].profile
        training_min = long.total_steps / long.steps_per_minute
        assert 6.5 <= training_min / 1440 <= 7.5 and 15 <= training_min * 60 / DEFAULT_SPEED / 60 <= 18

    dry, first, ls, follow, logs, events, second, cancel, logs_b, resume = results
    assert "the API would accept this run (nothing was submitted)" in dry.out
    run_id = re.match(r"llama-8b  ([0-9A-Z]{26})  ", first.out).group(1)
    assert ls.out.splitlines()[1].split()[:2] == ["llama-8b", run_id]
    # the run trains 6,000 steps for 10 virtual hours: followed while it trains, each checkpoint is
    # shown as it is seen, then the end; typed an hour of virtual time later, it has finished
    steps = [int(m) for m in re.findall(r"Z  checkpoint step (\d+)", follow.out)]
    if follow.out.startswith(f"llama-8b  {run_id}  SUCCEEDED"):
        assert gap_s * 2 * DEFAULT_SPEED / 60 > 600 and steps == []
    else:
        assert steps[-1] == 6000 and len(steps) >= 3 and steps == sorted(steps)
        assert re.search(r"Z  SUCCEEDED  attempt 1 Completed/Completed", follow.out)
    assert {"(algo-1)", "(algo-2)"} <= set(re.findall(r"\(algo-\d\)", logs.out))
    assert len(events.out.splitlines()) == 20
    # the second run starts from scratch on its own prefix, and is still live when cancelled
    assert "attempt 1  4 x ml.p4d.24xlarge  from scratch" in second.out
    b_id = re.match(r"llama-8b-b  ([0-9A-Z]{26})  ", second.out).group(1)
    assert re.fullmatch(
        rf"llama-8b-b \({b_id}\): (STOPPING; CANCELLED once SageMaker confirms the stop|CANCELLED)\n",
        cancel.out,
    ), cancel.out
    assert "==> run llama-8b-b is CANCELLED" in logs_b.err
    assert resume.out.startswith(f"llama-8b-b  {b_id}  ")
    assert "attempt 2  4 x ml.p4d.24xlarge" in resume.out
