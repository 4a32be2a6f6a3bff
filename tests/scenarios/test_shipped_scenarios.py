"""Every scenario shipped in drill/scenarios/ runs by name through `python -m drill NAME --json`,
meets its own `expect` (exit 0, no invariant or expectation failure), and shows the outcome its
description promises. The checks are outcomes (who succeeded, which signal caught a hang, what order
things happened in), never minute values: detection timing is allowed to improve."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest

from drill.account.local import BUCKET, EXECUTION_ROLE
from drill.account.server import DEFAULT_SPEED
from drill.scenarios.spec import load, shipped
from tests.doc_pages import documentation
from tests.scenarios.helpers import Summary, run_by_name

GPU_SIGNALS = {"gpu_idle", "gpu_lone_idle"}


def at(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00"))


def startup_s(attempt: dict[str, Any]) -> float:
    return (at(attempt["training_started_at"]) - at(attempt["requested_at"])).total_seconds()


def alert_bodies(s: Summary, run: str, event: str) -> list[str]:
    return [a["body"] for a in s["alerts"] if a["run"] == run and a["event"] == event]


def hang_stops(s: Summary, run: str) -> list[dict[str, Any]]:
    return [a for a in s["runs"][run]["attempts"] if a["stop_intent"] == "hang"]


# --- what each scenario's description promises, beyond its `expect` -------------------------------


def dead_host_on_gpu_signal(s: Summary, run: str, host: int) -> None:
    (stop,) = hang_stops(s, run)
    assert set(stop["hang_signals"]) <= GPU_SIGNALS and stop["hang_signals"]
    (body,) = alert_bodies(s, run, "hang.detected")
    idle = [line for line in body.splitlines() if line.endswith("<- idle")]
    assert idle and all(line.startswith(f"algo-{host}: ") for line in idle), body  # triage names the host


def check_hang_dead_host(s: Summary) -> None:
    dead_host_on_gpu_signal(s, "llama-13b", host=3)


def check_quiet_hang(s: Summary) -> None:
    # GPUs busy (spin) or above the idle threshold (data loader): no GPU signal, log silence catches it
    (stop,) = hang_stops(s, "llama-13b")
    assert stop["hang_signals"] and not set(stop["hang_signals"]) & GPU_SIGNALS


def check_hang_during_checkpoint_save(s: Summary) -> None:
    check_quiet_hang(s)
    # the half-written save (step 450) is skipped: the resume is from an older, complete checkpoint
    resumed = s["runs"]["llama-13b"]["attempts"][1]["resumed_from_step"]
    assert resumed is not None and resumed < 450
    # the hung save stops writing: a spin on the evidence, caught on the learned window (README:
    # "stopped 6 minutes later"; 32 on the policy's window before issue 18)
    (hang,) = [f for f in s["faults"] if f["kind"] == "hang_spin"]
    assert hang["to_action_s"] is not None and hang["to_action_s"] <= 8 * 60


def check_hang_logging_thread(s: Summary) -> None:
    (stop,) = hang_stops(s, "llama-13b")
    # logs keep flowing and GPUs stay busy: only the progress metric can see it
    assert stop["hang_signals"] == ["progress_stalled"]


def check_lossy_delivery(s: Summary) -> None:
    assert s["counters"].get("EventsIgnored", 0) > 0  # duplicates and stale events were seen and ignored
    dead_host_on_gpu_signal(s, "gpt-hang", host=4)
    crash = s["runs"]["gpt-crash"]["attempts"][0]
    assert crash["end_class"] == "INFRASTRUCTURE" and not crash["hang_signals"]


def check_quota_contention(s: Summary) -> None:
    runs = s["runs"]
    (pretrain,) = runs["pretrain-a"]["attempts"]
    (batch,) = runs["batch-eval"]["attempts"]
    (hotfix,) = runs["hotfix-ft"]["attempts"]
    assert at(runs["batch-eval"]["submitted_at"]) < at(runs["hotfix-ft"]["submitted_at"])
    # the higher priority goes first when pretrain-a releases the quota, though it asked later
    assert at(pretrain["ended_at"]) <= at(hotfix["requested_at"]) < at(batch["requested_at"])
    # 3 + 2 > 4: batch-eval waits until hotfix-ft has released its instances
    assert at(hotfix["ended_at"]) <= at(batch["requested_at"])


def check_warm_pool(s: Summary) -> None:
    first, warm, cold = s["runs"]["mixtral-ft"]["attempts"]
    assert startup_s(warm) * 4 < startup_s(cold)  # the warm pool starts in seconds, not minutes
    # the dead host's pool holds the same instances: released, and the replacement starts cold,
    # after SageMaker's infra check (the model's 5-30 min: AWS publishes no duration)
    assert [a["infra_check"] for a in (first, warm, cold)] == [False, False, True]
    assert startup_s(first) + 300 <= startup_s(cold) <= startup_s(first) * 1.1 + 1800
    decisions = s["runs"]["mixtral-ft"]["decisions"]
    assert any("singled out algo-2" in d for d in decisions)
    assert any(d.startswith(f"releasing the warm pool of {warm['job_name']}") for d in decisions)


def check_bad_host(s: Summary) -> None:
    warm_again = s["runs"]["warm-again"]["attempts"]
    # the NCCL error named algo-3: the restart is cold (no pool) and asks for the infra check
    assert [a["infra_check"] for a in warm_again] == [False, True]
    assert startup_s(warm_again[1]) > startup_s(warm_again[0])  # cold, plus the check's minutes
    assert any("singled out algo-3" in d for d in s["runs"]["warm-again"]["decisions"])
    lemon = s["runs"]["lemon"]["attempts"]
    assert [a["stop_intent"] for a in lemon] == [None, "bad_host", None]
    # its fingerprint line guards the first restart; the check follows once the host came back
    assert [a["infra_check"] for a in lemon] == [False, False, True]
    (body,) = alert_bodies(s, "lemon", "attempt.bad_host")
    assert "Host: algo-2" in body and "GPU serials: GPU-" in body
    # stopped before the lemon failed it again (the sim refires it 5 min into Training)
    assert [(f["attempt"], f["kind"]) for f in s["faults"] if f["run"] == "lemon"] == [
        (1, "hardware"),
        (2, "lemon_returns"),
    ]


def check_slow_fabric(s: Summary) -> None:
    (body,) = alert_bodies(s, "sockets", "attempt.slow_fabric")
    assert "NCCL INFO Using network Socket" in body
    assert s["runs"]["sockets"]["attempts"][0]["fabric"] == "socket"
    assert s["runs"]["efa"]["attempts"][0]["fabric"] == "efa"
    for run in ("efa", "single-node", "no-debug"):
        assert not alert_bodies(s, run, "attempt.slow_fabric"), run
    (submitted,) = alert_bodies(s, "no-debug", "run.submitted")
    assert "Set Environment NCCL_DEBUG=INFO" in submitted


def check_stragglers(s: Summary) -> None:
    for run, host in (("slow-15", "algo-3"), ("slow-30-restart", "algo-2")):
        (body,) = alert_bodies(s, run, "attempt.straggler")
        assert f"Host: {host}" in body and "A restart's cost" in body
    assert [a["end_class"] for a in s["runs"]["slow-30-restart"]["attempts"]] == [
        "SUPERVISOR_STOP",
        "SUCCEEDED",
    ]
    for run in ("slow-10", "transient", "shard-write", "uneven-shards"):
        assert not alert_bodies(s, run, "attempt.straggler"), run


def check_month_long(s: Summary) -> None:
    assert s["virtual_duration_s"] > 28 * 86_400
    assert round(s["virtual_duration_s"] / 86_400) == 29  # README: 29 virtual days
    (evaluation,) = [f for f in s["faults"] if f["kind"] == "eval_phase"]
    assert evaluation["classified_as"] == "benign" and evaluation["to_action_s"] is None
    signals = [a["hang_signals"] for a in hang_stops(s, "llm-70b")]
    assert len(signals) == 2 and set(signals[0]) <= GPU_SIGNALS and not set(signals[1]) & GPU_SIGNALS


def check_week_of_faults(s: Summary) -> None:
    # issue 20: one fault a day for a week under the recommended policy and an hourly checkpoint
    # (about the advised interval) keeps ETTR at Llama 3's level, >= 90 %, by the simulator's
    # ground truth and by the supervisor's own figure
    week = s["runs"]["week"]
    assert [a["end_class"] for a in week["attempts"]][-1] == "SUCCEEDED" and len(week["attempts"]) == 7
    assert week["ground_truth"]["ettr_percent"] >= 90.0, week["ground_truth"]
    assert week["ettr"]["percent"] >= 90.0, week["ettr"]["summary"]
    (evaluation,) = [f for f in s["faults"] if f["kind"] == "eval_phase"]
    assert evaluation["classified_as"] == "benign" and evaluation["to_action_s"] is None


def check_checkpoint_retention(s: Summary) -> None:
    # issue 20 part 2: with checkpoint_keep 2 the restart downloads only the two kept checkpoints;
    # without it, every checkpoint the run wrote (the same run, the same fault)
    keep2, keep_all = s["runs"]["keep-2"], s["runs"]["keep-all"]
    restart, restart_all = keep2["attempts"][1]["restored"], keep_all["attempts"][1]["restored"]
    resumed = keep2["attempts"][1]["resumed_from_step"]
    assert restart["dirs"] == [f"checkpoint-{resumed - 60}", f"checkpoint-{resumed}"]
    assert len(restart_all["dirs"]) == resumed // 60 > 10
    assert restart["bytes"] * 10 < restart_all["bytes"] and restart["seconds"] * 10 < restart_all["seconds"]
    # docs/drill.md's figures: the simulator's size and throughput model, not detection timing
    assert (round(restart["bytes"] / 1e12, 2), round(restart["seconds"] / 60)) == (1.96, 26)
    assert (len(restart_all["dirs"]), round(restart_all["bytes"] / 1e12, 1)) == (23, 22.5)
    assert round(restart_all["seconds"] / 3600, 1) == 5.0
    # every older checkpoint is in the archive, each move in the audit trail; keep-all moved nothing
    steps = sorted(int(d.removeprefix("checkpoint-")) for d in keep2["archived"])
    assert steps == list(range(60, steps[-1] + 60, 60)) and steps[-1] >= resumed
    for step in steps:
        assert any(
            f"checkpoint-{step}: 3 objects" in line and "moved to" in line for line in keep2["retention"]
        )
    assert keep_all["retention"] == [] and keep_all["archived"] is None
    assert keep2["ground_truth"]["ettr_percent"] > keep_all["ground_truth"]["ettr_percent"]
    # every archive copy is what the run wrote, and nothing it wrote is gone
    assert keep2["archive_mismatches"] == [] and keep2["checkpoint_files_lost"] == []


def check_team_archive(s: Summary) -> None:
    # issue 32 item 1: two runs retire same-named directories (equal sizes, different bytes, the
    # large files multipart uploads) to one team archive; before, the second run's shards were
    # deleted with no copy of their bytes anywhere and its marker overwrote the first run's
    runs = [s["runs"]["team-a"], s["runs"]["team-b"]]
    shared = set(runs[0]["archived"]) & set(runs[1]["archived"])
    assert {"checkpoint-60", "checkpoint-120", "checkpoint-180"} <= shared, shared
    for run in runs:
        assert run["archive_mismatches"] == [] and run["checkpoint_files_lost"] == []
        # the copies sit under keys that name the run
        targets = [line.split(" moved to ", 1)[1] for line in run["retention"] if " moved to " in line]
        assert targets and all(f"/team-archive/{run['run_id']}/checkpoint-" in t for t in targets), targets
        # both lose a host, resume from a checkpoint they kept, and finish; by then the checkpoint
        # each resumed from is itself in its archive, byte for byte (no mismatch above)
        first, second = run["attempts"]
        assert (first["end_class"], second["end_class"]) == ("INFRASTRUCTURE", "SUCCEEDED")
        assert f"checkpoint-{second['resumed_from_step']}" in run["archived"]


def check_training_plan(s: Summary) -> None:
    run = s["runs"]["llama-70b-plan"]
    first, second, third = run["attempts"]
    assert [a["end_class"] for a in run["attempts"]] == ["WINDOW_END", "WINDOW_END", "SUCCEEDED"]
    assert first["stop_intent"] == second["stop_intent"] == "window_end"  # stopped, never terminated
    assert run["restarts"] == 0
    start = at(s["started_at"])
    # windows open at 16 h and 36 h: training again within 10 minutes of each
    for attempt, hours in ((second, 16), (third, 36)):
        opened = (at(attempt["training_started_at"]) - start).total_seconds() - hours * 3600
        assert 0 < opened <= 600, opened
    assert len(alert_bodies(s, "llama-70b-plan", "run.waiting_for_window")) == 2


def check_default(s: Summary) -> None:
    runs = s["runs"]
    # llama-8b loses a host, leaving a half-written checkpoint: it resumes from the newest complete
    # one (step 1,200 of a 600-step cadence; the crash came at step 1,500), then chains through MaxRuntime
    llama = runs["llama-8b"]["attempts"]
    assert [a["end_class"] for a in llama] == ["INFRASTRUCTURE", "SEGMENT_DONE", "SUCCEEDED"]
    assert llama[1]["resumed_from_step"] == 1200 and llama[2]["resumed_from_step"] > 1200
    # qwen-sft's NCCL watchdog timeout is classed as infrastructure and resumed
    assert [a["end_class"] for a in runs["qwen-sft"]["attempts"]] == ["INFRASTRUCTURE", "SUCCEEDED"]
    # mistral-7b waits for the p5 quota qwen-sft holds; its backoff timer or qwen-sft's release
    # (whichever comes first) starts it once qwen-sft's job has ended
    mistral = runs["mistral-7b"]
    assert any("QUOTA: ResourceLimitExceeded" in d for d in mistral["decisions"])
    accepted = mistral["decisions"].index(
        f"attempt 1 ({mistral['attempts'][0]['job_name']}) accepted by SageMaker"
    )
    woken = mistral["decisions"][accepted - 1]
    assert woken.startswith("wake-up after quota wait; launch attempt 1") or woken.startswith(
        "2 x ml.p5.48xlarge released by another supervised job: retrying now; launch attempt 1"
    )
    assert at(runs["qwen-sft"]["attempts"][-1]["ended_at"]) <= at(mistral["attempts"][0]["requested_at"])
    # AWS's default warm-pool quota is 0, read at submit: no run asks for a pool, so none is told
    # again at an ending; each is told once, in its run.submitted alert
    assert not [a for a in s["alerts"] if a["event"] == "attempt.warm_pool_off"]
    told = [a["run"] for a in s["alerts"] if a["event"] == "run.submitted" and "Warm pool: none" in a["body"]]
    assert sorted(told) == sorted(runs) and len(told) == len(set(told))
    gemma = [a["instances"] for a in runs["gemma-2b"]["attempts"]]
    assert gemma == ["1 x ml.p4de.24xlarge", "1 x ml.p4d.24xlarge"]  # fell back after no capacity
    assert [a["end_class"] for a in runs["t5-bug"]["attempts"]] == ["USER_ERROR"]  # no retry of a bug
    dead_host_on_gpu_signal(s, "mistral-7b", host=2)
    # README: "The lone-idle-host alarm ... fires" (not the whole-job GPU-idle alarm)
    assert [a["hang_signals"] for a in hang_stops(s, "mistral-7b")] == [["gpu_lone_idle"]]


def check_selftest(s: Summary) -> None:
    # the same plan as `sagewarden selftest` (sagewarden_cli/selftest.py writes this scenario): a crash, a hang
    attempts = s["runs"]["sagewarden-selftest"]["attempts"]
    assert [a["end_class"] for a in attempts] == ["INFRASTRUCTURE", "SUPERVISOR_STOP", "SUCCEEDED"]
    (stop,) = hang_stops(s, "sagewarden-selftest")
    assert stop["hang_signals"] and not set(stop["hang_signals"]) & GPU_SIGNALS  # a CPU job: no GPU metric
    steps = [a["resumed_from_step"] for a in attempts]
    assert steps[0] is None and 0 < steps[1] < steps[2]  # each resume from a newer checkpoint
    # README: `sagewarden --local selftest --yes` takes about 3 seconds at the server's default speed
    assert 2 <= s["virtual_duration_s"] / DEFAULT_SPEED <= 4


def check_no_log_subscription(s: Summary) -> None:
    # no heartbeat metric in this deployment: a log-silence alarm would breach from its first
    # minute and stop the healthy job; the sweep's own check (and the declared save) keep it running
    assert not hang_stops(s, "healthy-long")
    (stop,) = hang_stops(s, "spin")
    assert stop["hang_signals"] == ["log_silence"]
    # caught on a window learned from the logs, sooner than the policy's 30 minutes
    (spin,) = [f for f in s["faults"] if f["kind"] == "hang_spin"]
    assert spin["to_action_s"] is not None and spin["to_action_s"] < 30 * 60
    # docs/hang-detection.md: "stopped 5 minutes after it starts (window learned: 4 minutes)" (9
    # before the drill's moto path filtered FilterLogEvents by the job's stream prefix as CloudWatch
    # does: its reads paged through the other job's lines and ran out of time, unknown: deferred)
    assert spin["to_action_s"] <= 6 * 60


def check_heartbeat_outage(s: Summary) -> None:
    # issue 32: a healthy job was stopped as hung whenever the heartbeat pipeline delivered
    # nothing while it logged (5 attempts for 1 on a 4.4-hour run). The healthy jobs train on
    for run in ("healthy-a", "healthy-b", "healthy-save"):
        assert not hang_stops(s, run), run
        assert not alert_bodies(s, run, "hang.detected"), run
    # the truly hung one is stopped, on its logs (the sweep's own check while the pipeline is broken)
    (stop,) = hang_stops(s, "spin")
    assert stop["hang_signals"] == ["log_silence"]
    (hang,) = alert_bodies(s, "spin", "hang.detected")
    assert "sweep check: heartbeat pipeline broken" in hang
    # one alert on the pipeline, not one per job, and one when it heals, in that order
    deployment = [a for a in s["alerts"] if not a["run"]]
    assert [a["event"] for a in deployment] == ["heartbeat.broken", "heartbeat.restored"]
    assert "4 training job(s)" in deployment[0]["subject"]
    broke, healed = (at(a["at"]) for a in deployment)
    start = at(s["runs"]["spin"]["attempts"][0]["requested_at"])
    # docs/hang-detection.md: "one heartbeat.broken alert 8 minutes after it breaks", "the
    # spinning job is stopped 9 minutes after it starts", "heartbeat.restored 2 minutes after it heals"
    assert 0 < (broke - start).total_seconds() / 60 - 90 <= 10  # the outage began at minute 90
    assert 0 <= (healed - start).total_seconds() / 60 - 240 <= 4  # ... and ended at minute 240
    (spin,) = [f for f in s["faults"] if f["kind"] == "hang_spin"]
    assert spin["to_action_s"] is not None and spin["to_action_s"] <= 10 * 60


CHECKS: dict[str, Callable[[Summary], None]] = {
    "bad-host": check_bad_host,
    "checkpoint-retention": check_checkpoint_retention,
    "default": check_default,
    "hang-dead-host": check_hang_dead_host,
    "heartbeat-outage": check_heartbeat_outage,
    "hang-during-checkpoint-save": check_hang_during_checkpoint_save,
    "hang-logging-thread": check_hang_logging_thread,
    "hang-nccl-spin": check_quiet_hang,
    "hang-stuck-dataloader": check_quiet_hang,
    "lossy-delivery": check_lossy_delivery,
    "month-long": check_month_long,
    "no-log-subscription": check_no_log_subscription,
    "quota-contention": check_quota_contention,
    "selftest": check_selftest,
    "slow-fabric": check_slow_fabric,
    "stragglers": check_stragglers,
    "team-archive": check_team_archive,
    "training-plan": check_training_plan,
    "warm-pool": check_warm_pool,
    "week-of-faults": check_week_of_faults,
}
SLOW = {"month-long"}  # ~30 virtual days: several seconds of wall time (deselect with -m "not slow")


def test_shipped_every_scenario_has_its_outcome_checks() -> None:
    assert set(shipped()) == set(CHECKS)


@pytest.mark.claim("a local drill on a simulated AWS account: no AWS account, no credentials")
@pytest.mark.claim("It submits five runs through the real API handler to a simulated account")
@pytest.mark.claim(
    "SageMaker would keep no pool, so no attempt asks for one, the resume starts cold at once, and each run is told once, in its `run.submitted` alert"
)
@pytest.mark.claim("GPU 0 %, no error, the other hosts waiting")
@pytest.mark.claim("about 3 seconds at the server's default speed")
@pytest.mark.claim("A save that hangs stops writing and is stopped within minutes")
@pytest.mark.claim("a save that hangs 80 minutes into training is stopped 6 minutes later")
@pytest.mark.claim(
    "honouring declared phases (it looks for phase markers of the last two hours once a job is silent)"
)
@pytest.mark.claim(
    "a healthy 4.4-hour job with a declared 35-minute save runs on one attempt, and a spinning collective is stopped 5 minutes after it starts (window learned: 4 minutes)"
)
@pytest.mark.claim(
    "the three healthy jobs train on their first attempt, one heartbeat.broken alert comes 8 minutes after it breaks, the spinning job is stopped 9 minutes after it starts and resumed, and heartbeat.restored comes 2 minutes after it heals"
)
@pytest.mark.claim("each resumed attempt trains within 10 minutes of its window opening")
@pytest.mark.claim("Duplicate and stale events are counted (`EventsIgnored`) and logged, not acted on")
@pytest.mark.claim(
    "the demo: five teams, a crash, an NCCL timeout, a quota wait, a dead host, a capacity fallback, a code bug"
)
@pytest.mark.claim("GPUs at 100 %, no step, no log line: log silence catches it")
@pytest.mark.claim("a hang half-way through a save: the resume skips the half-written checkpoint")
@pytest.mark.claim("three runs share a quota; the waiting runs are woken highest priority first")
@pytest.mark.claim(
    "events late, out of order, 30 % duplicated and 30 % lost; the reconciler and alarm read-back catch up"
)
@pytest.mark.claim("29 virtual days on 128 GPUs, six faults and a MaxRuntime chain")
@pytest.mark.claim("the same restart takes 26 minutes with `checkpoint_keep: 2` and 5.0 hours without")
@pytest.mark.claim("Every run archives under its own run id")
@pytest.mark.claim(
    "Every pass that retires something adds a decision line and an action line to the run's audit trail"
)
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else []) for n in sorted(CHECKS)]
)
def test_shipped_scenario_runs_by_name_and_meets_its_expectations(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = load(name, bucket=BUCKET, role_arn=EXECUTION_ROLE)
    summary = run_by_name(name, capsys)
    assert summary["scenario"] == scenario.name
    assert set(summary["runs"]) == {r.name for r in scenario.runs}
    for run, expect in scenario.expect.items():  # met (exit 0 says so); the obvious ones re-read
        got = summary["runs"][run]
        assert got["status"] == expect.get("status", got["status"])
        assert len(got["attempts"]) == expect.get("attempts", len(got["attempts"]))
        if "hangs_detected_by" in expect:
            assert hang_stops(summary, run), f"{run}: no hang detected"
    CHECKS[name](summary)


NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8}


def counted_runs(text: str) -> list[int]:
    """Every "<number word> teams/runs" a text states."""
    found = re.findall(rf"\b({'|'.join(NUMBERS)})\s+(?:teams|runs)\b", text, flags=re.IGNORECASE)
    return [NUMBERS[word.lower()] for word in found]


@pytest.mark.claim("It submits five runs through the real API handler to a simulated account")
@pytest.mark.claim(
    "the demo: five teams, a crash, an NCCL timeout, a quota wait, a dead host, a capacity fallback, a code bug"
)
@pytest.mark.claim("three runs share a quota; the waiting runs are woken highest priority first")
def test_shipped_descriptions_and_readme_rows_count_the_runs_they_have() -> None:
    readme = documentation()
    rows = dict(re.findall(r"^\| `([a-z0-9-]+)` \| (.*) \|$", readme, flags=re.MULTILINE))
    stated = 0
    for name in shipped():
        scenario = load(name, bucket=BUCKET, role_arn=EXECUTION_ROLE)
        for text in (scenario.description, rows.get(name, "")):
            for n in counted_runs(text):
                stated += 1
                assert n == len(scenario.runs), f"{name}: says {n} teams or runs, has {len(scenario.runs)}"
    assert stated >= 4  # the demo's banner and README row, quota-contention's two


def test_shipped_hang_scenarios_expect_the_signal_that_catches_them() -> None:
    hangs = [name for name in shipped() if name.startswith("hang-")]
    assert len(hangs) == 5
    for name in hangs:
        expect = load(name, bucket=BUCKET, role_arn=EXECUTION_ROLE).expect
        assert all(e.get("hangs_detected_by") for e in expect.values()), name


@pytest.mark.claim(
    "events late, out of order, 30 % duplicated and 30 % lost; the reconciler and alarm read-back catch up"
)
@pytest.mark.claim("29 virtual days on 128 GPUs, six faults and a MaxRuntime chain")
def test_shipped_readme_rows_state_what_their_scenarios_hold() -> None:
    """The numbers README's shipped-scenario rows state, read from the scenario files."""
    lossy = load("lossy-delivery", bucket=BUCKET, role_arn=EXECUTION_ROLE)
    assert (lossy.delivery["duplicate_rate"], lossy.delivery["drop_rate"]) == (0.3, 0.3)  # 30 % and 30 %
    month = load("month-long", bucket=BUCKET, role_arn=EXECUTION_ROLE)
    (run,) = month.runs
    resources = run.body["training_job"]["ResourceConfig"]
    # 128 GPUs: 16 x ml.p5.48xlarge, 8 H100s each
    assert (resources["InstanceType"], resources["InstanceCount"]) == ("ml.p5.48xlarge", 16)
    assert len(month.faults) == 6
    max_runtime_s = run.body["training_job"]["StoppingCondition"]["MaxRuntimeInSeconds"]
    assert max_runtime_s < 29 * 86_400  # a month needs a MaxRuntime chain
    assert "month-long" in SLOW
