"""Scenario tests: the real handlers on the simulated account, one recovery class at a time."""

from __future__ import annotations

import pytest

from tests.scenarios.helpers import classes, decisions, run_drill, run_spec

INTERNAL = {"kind": "internal_error", "after_training_min": 45}


@pytest.mark.claim(
    "every attempt of a run resumes from the newest checkpoint under its `CheckpointConfig.S3Uri`"
)
@pytest.mark.claim("Every attempt of a run gets the **same `CheckpointConfig`**")
def test_scenario_hardware_fault_resumes_from_same_checkpoint_location(template):
    result = run_drill(
        template,
        {
            "seed": 1,
            "account": {"store": "dynamodb"},
            "runs": [run_spec("llama")],
            "faults": [{"kind": "hardware", "run": "llama", "attempt": 1, "after_training_min": 65}],
        },
    )
    run = result.runs["llama"]
    assert run["status"] == "SUCCEEDED"
    assert classes(result, "llama") == ["INFRASTRUCTURE", "SUCCEEDED"]
    assert run["attempts"][1]["resumed_from_step"] == 600  # newest complete checkpoint before the fault
    assert run["restarts"] == 1
    # the step-600 checkpoint completed ~62 min into training, the fault came at 65 min, and the
    # relaunch followed within seconds: the checkpoint was a few minutes old when it was chosen
    assert 60 <= run["attempts"][1]["resumed_checkpoint_age_s"] <= 6 * 60


@pytest.mark.claim("resume**: start a new attempt from the newest *verified* checkpoint")
@pytest.mark.claim(
    'It may differ from "the newest directory on disk", because a half-written newest directory is skipped.'
)
def test_scenario_half_written_checkpoint_is_skipped(template):
    result = run_drill(
        template,
        {
            "seed": 2,
            "runs": [
                run_spec(
                    "llama",
                    profile={
                        "total_steps": 1200,
                        "steps_per_minute": 10,
                        "checkpoint_every_steps": 300,
                        "checkpoint_layout": "dcp",
                    },
                )
            ],
            "faults": [
                {
                    "kind": "internal_error",
                    "run": "llama",
                    "attempt": 1,
                    "after_training_min": 70,
                    "half_written_checkpoint": True,
                }
            ],
        },
    )
    # step 600 completed at ~62 min; the crash at 70 min leaves a newer directory without .metadata
    assert result.runs["llama"]["attempts"][1]["resumed_from_step"] == 600
    assert result.runs["llama"]["status"] == "SUCCEEDED"


def test_scenario_nccl_watchdog_in_log_tail_is_infrastructure(template):
    line = "[E ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE)"
    result = run_drill(
        template,
        {
            "seed": 3,
            "runs": [run_spec("qwen")],
            "faults": [
                {
                    "kind": "algorithm_error",
                    "run": "qwen",
                    "attempt": 1,
                    "after_training_min": 50,
                    "log_lines": [line],
                }
            ],
        },
    )
    assert classes(result, "qwen") == ["INFRASTRUCTURE", "SUCCEEDED"]
    assert (
        "Watchdog" in decisions(result, "qwen")
        or result.runs["qwen"]["attempts"][0]["end_class"] == "INFRASTRUCTURE"
    )


def test_scenario_code_bug_fails_fast_without_retry(template):
    result = run_drill(
        template,
        {
            "seed": 4,
            "runs": [run_spec("bug")],
            "faults": [
                {
                    "kind": "algorithm_error",
                    "run": "bug",
                    "attempt": 1,
                    "after_training_min": 0.5,
                    "log_lines": ["SyntaxError: invalid syntax"],
                }
            ],
        },
    )
    assert result.runs["bug"]["status"] == "FAILED" and classes(result, "bug") == ["USER_ERROR"]


@pytest.mark.claim(
    "`max_no_progress_restarts` consecutive endings without a newer checkpoint *that are repeats* make the run FAILED"
)
def test_scenario_three_no_progress_crashes_stop_the_run(template):
    result = run_drill(
        template,
        {
            "seed": 5,
            "policy_defaults": {"max_no_progress_restarts": 3},
            "runs": [run_spec("loop")],
            "faults": [{"kind": "internal_error", "run": "loop", "after_training_min": 10, "once": False}],
        },
    )
    run = result.runs["loop"]
    assert run["status"] == "FAILED" and "crash loop" in run["outcome"]
    assert len(run["attempts"]) == 3


@pytest.mark.claim("Any other ending without progress starts the streak again at 1")
def test_scenario_different_faults_before_each_first_checkpoint_are_not_a_crash_loop(template):
    # attempt 1 checkpoints at step 300 (30 min), then faults; attempts 2-4 each fail 10 minutes
    # in, before their first checkpoint, each in another way: bad luck, not a loop
    nan = "loss is NaN at step 310, refusing to continue"
    result = run_drill(
        template,
        {
            "seed": 5,
            "policy_defaults": {"max_no_progress_restarts": 3},
            "runs": [run_spec("unlucky")],
            "faults": [
                {"kind": "internal_error", "run": "unlucky", "attempt": 1, "after_training_min": 40},
                {"kind": "hardware", "run": "unlucky", "attempt": 2, "after_training_min": 10, "host": 2},
                {"kind": "internal_error", "run": "unlucky", "attempt": 3, "after_training_min": 10},
                {
                    "kind": "algorithm_error",
                    "run": "unlucky",
                    "attempt": 4,
                    "after_training_min": 10,
                    "log_lines": [nan],
                },
            ],
        },
    )
    run = result.runs["unlucky"]
    assert run["status"] == "SUCCEEDED", run["outcome"]
    assert len(run["attempts"]) == 5
    assert classes(result, "unlucky")[:4] == ["INFRASTRUCTURE", "INFRASTRUCTURE", "INFRASTRUCTURE", "UNKNOWN"]


def test_scenario_quota_wait_is_woken_by_another_run_finishing(template):
    result = run_drill(
        template,
        {
            "seed": 6,
            "account": {"quotas": {"ml.p5.48xlarge": 2}},
            "policy_defaults": {"backoff_base_seconds": 3600, "backoff_cap_seconds": 7200},
            "runs": [
                run_spec(
                    "first",
                    instance_type="ml.p5.48xlarge",
                    profile={"total_steps": 600, "steps_per_minute": 10, "checkpoint_every_steps": 300},
                ),
                run_spec("second", submit_at_min=5, instance_type="ml.p5.48xlarge"),
            ],
        },
    )
    second = result.runs["second"]
    assert second["status"] == "SUCCEEDED" and len(second["attempts"]) == 1
    text = decisions(result, "second")
    assert "quota" in text and "released by another supervised job" in text
    first_end = result.runs["first"]["attempts"][-1]["ended_at"]
    assert (
        second["attempts"][0]["training_started_at"] > first_end
    )  # woken at the release, not after the 1 h backoff
    started_hours_after_first_end = _hours(second["attempts"][0]["training_started_at"]) - _hours(first_end)
    assert started_hours_after_first_end < 0.5


def _hours(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() / 3600


def test_scenario_quota_delta_above_limit_fails_fast(template):
    # Service Quotas cannot be read at submit (or the API would refuse the run with a 400): the
    # launch's ResourceLimitExceeded is where the supervisor learns the quota can never fit
    result = run_drill(
        template,
        {
            "seed": 7,
            "account": {"quotas": {"ml.p5.48xlarge": 2}},
            "runs": [run_spec("huge", instance_type="ml.p5.48xlarge", instance_count=4)],
        },
        account_options={"service_quotas": "denied"},
    )
    run = result.runs["huge"]
    assert run["status"] == "FAILED"
    assert "raise it to at least 4" in run["outcome"]


@pytest.mark.claim(
    "A quota- or throttle-rejected launch keeps its number. No job was created, so the name is free. Numbers stay contiguous, and no number is ever used for two jobs."
)
@pytest.mark.claim(
    "where N is `quota_limit` (default: the request's own M, so the run waits and retries; below M it can never fit and the run fails, naming the increase)"
)
def test_scenario_quota_fault_on_a_resume_waits_then_trains_with_the_same_attempt_number(template):
    result = run_drill(
        template,
        {
            "seed": 12,
            "runs": [run_spec("llama")],
            "faults": [
                {"kind": "hardware", "run": "llama", "attempt": 1, "after_training_min": 65},
                {"kind": "quota", "run": "llama", "attempt": 2},  # the resume finds the quota taken
            ],
            "expect": {"llama": {"status": "SUCCEEDED", "attempts": 2, "alerts_include": ["run.waiting"]}},
        },
    )
    run = result.runs["llama"]
    assert run["status"] == "SUCCEEDED" and classes(result, "llama") == ["INFRASTRUCTURE", "SUCCEEDED"]
    assert run["restarts"] == 1  # the quota wait is not a restart
    text = decisions(result, "llama")
    assert "rejected" in text and "QUOTA: ResourceLimitExceeded: The account-level service limit " in text
    assert "is 2 Instances, with current utilization of 2 Instances and a request delta of 2" in text
    (quota,) = [f for f in result.faults if f["kind"] == "quota"]
    assert (quota["run"], quota["attempt"], quota["classified_as"]) == ("llama", 2, "QUOTA")
    assert quota["then"] == "waited, then trained"


@pytest.mark.claim(
    "where N is `quota_limit` (default: the request's own M, so the run waits and retries; below M it can never fit and the run fails, naming the increase)"
)
def test_scenario_quota_fault_below_the_request_fails_the_run_naming_the_quota(template):
    result = run_drill(
        template,
        {
            "seed": 13,
            "runs": [run_spec("huge", instance_count=4)],
            "faults": [{"kind": "quota", "run": "huge", "quota_limit": 2}],
        },
    )
    run = result.runs["huge"]
    assert run["status"] == "FAILED" and "raise it to at least 4" in run["outcome"]


@pytest.mark.claim(
    "switch to the next `instance_fallbacks` entry at once; after the last one, back off and go round again (the backoff counts from the refused attempt's request: one that sat Pending for capacity longer than the backoff asks again at once) | `capacity_wait_max_hours`"
)
def test_scenario_capacity_falls_back_to_second_instance_type(template):
    result = run_drill(
        template,
        {
            "seed": 8,
            "runs": [
                run_spec(
                    "gemma",
                    instance_type="ml.p4de.24xlarge",
                    instance_count=1,
                    policy={
                        "instance_fallbacks": [{"instance_type": "ml.p4d.24xlarge", "instance_count": 1}]
                    },
                )
            ],
            "faults": [
                {
                    "kind": "capacity",
                    "run": "gemma",
                    "instance_type": "ml.p4de.24xlarge",
                    "duration_min": 20,
                    "once": False,
                }
            ],
        },
    )
    run = result.runs["gemma"]
    assert run["status"] == "SUCCEEDED"
    assert [a["instances"] for a in run["attempts"]] == ["1 x ml.p4de.24xlarge", "1 x ml.p4d.24xlarge"]
    assert run["restarts"] == 0


@pytest.mark.claim("`Stopped/Interrupted`, `MaxWaitTimeExceeded` | resume | no-progress streak only")
def test_scenario_spot_interruption_resumes_uncounted(template):
    result = run_drill(
        template,
        {
            "seed": 9,
            "runs": [run_spec("spot")],
            "faults": [{"kind": "spot_interruption", "run": "spot", "attempt": 1, "after_training_min": 70}],
        },
    )
    run = result.runs["spot"]
    assert classes(result, "spot") == ["SPOT_INTERRUPTED", "SUCCEEDED"] and run["restarts"] == 0


@pytest.mark.claim(
    '`ThrottlingException` / "Rate exceeded" / a 5xx from CreateTrainingJob | short jittered retry'
)
def test_scenario_throttled_create_retries_shortly(template):
    result = run_drill(
        template,
        {
            "seed": 10,
            "runs": [run_spec("busy")],
            "faults": [{"kind": "throttle", "run": "busy"}],
        },
    )
    run = result.runs["busy"]
    assert run["status"] == "SUCCEEDED" and len(run["attempts"]) == 1 and run["restarts"] == 0
    assert "throttle" in decisions(result, "busy")


@pytest.mark.claim(
    "chain the next segment from the newest checkpoint. Runs longer than SageMaker's 28-day cap work; each segment's MaxRuntime is capped by the run's remaining wall clock."
)
def test_scenario_forty_day_run_chains_through_max_runtime(template):
    result = run_drill(
        template,
        {
            "seed": 11,
            "max_days": 60,
            "account": {"store": "memory", "reconcile_interval_min": 60},
            "runs": [
                run_spec(
                    "long",
                    max_runtime_hours=24 * 5,
                    instance_count=1,
                    profile={
                        "total_steps": 40 * 24 * 60,
                        "steps_per_minute": 1,
                        "checkpoint_every_steps": 600,
                    },
                )
            ],
            "faults": [{"kind": "hardware", "run": "long", "attempt": 3, "after_training_min": 600}],
        },
    )
    run = result.runs["long"]
    assert run["status"] == "SUCCEEDED"
    assert run["segments"] >= 8 and run["restarts"] == 1
    assert run["last_checkpoint_step"] == 40 * 24 * 60
    assert result.end_ms - result.start_ms > 40 * 86_400_000


@pytest.mark.claim("`Stopped` with no recorded intent (a person stopped it) | CANCELLED")
@pytest.mark.claim("Intended: a stop without a sagewarden intent is treated as yours.")
def test_scenario_user_stop_outside_sagewarden_cancels(template):
    from drill.account.local import LocalAccount  # noqa: F401  (documented path: a person stops the job)

    result = run_drill(
        template,
        {
            "seed": 12,
            "runs": [run_spec("stopme")],
            "actions": [{"at_min": 30, "cancel": "stopme"}],
        },
    )
    run = result.runs["stopme"]
    assert run["status"] == "CANCELLED" and len(run["attempts"]) == 1


@pytest.mark.claim("Events arrive late, duplicated and out of order.")
def test_scenario_duplicate_late_and_lost_events_are_survived(template):
    result = run_drill(
        template,
        {
            "seed": 13,
            "delivery": {"min_delay_s": 1, "max_delay_s": 600, "duplicate_rate": 0.5, "drop_rate": 0.3},
            "runs": [run_spec("messy")],
            "faults": [{"kind": "internal_error", "run": "messy", "attempt": 1, "after_training_min": 65}],
        },
    )
    run = result.runs["messy"]
    assert run["status"] == "SUCCEEDED" and classes(result, "messy") == ["INFRASTRUCTURE", "SUCCEEDED"]
    assert result.counters["EventsIgnored"] > 0  # duplicates and stale deliveries were counted, not acted on


def test_scenario_string_timestamps_are_accepted(template):
    result = run_drill(
        template,
        {
            "seed": 14,
            "account": {"timestamp_form": "string"},
            "runs": [run_spec("iso")],
            "faults": [{"kind": "internal_error", "run": "iso", "attempt": 1, "after_training_min": 40}],
        },
    )
    assert classes(result, "iso") == ["INFRASTRUCTURE", "SUCCEEDED"]


def test_scenario_a_run_whose_checkpoint_prefix_is_1000_characters_resumes(template):
    """CheckpointConfig.S3Uri may be 1,024 characters, an Environment value 512: the resumed
    attempt must not carry the checkpoint's full URI into SAGEWARDEN_RESUME_CHECKPOINT, or
    SageMaker refuses the launch and the run fails as a client error (issue 17 item 9)."""
    from drill.account.local import BUCKET

    prefix = f"s3://{BUCKET}/" + "/".join(["p" * 120] * 8) + "/"
    assert 950 < len(prefix) <= 1024
    result = run_drill(
        template,
        {
            "seed": 1,
            "runs": [run_spec("llama", training_job={"CheckpointConfig": {"S3Uri": prefix}})],
            "faults": [{"kind": "hardware", "run": "llama", "attempt": 1, "after_training_min": 65}],
        },
    )
    run = result.runs["llama"]
    assert run["status"] == "SUCCEEDED", decisions(result, "llama")
    assert classes(result, "llama") == ["INFRASTRUCTURE", "SUCCEEDED"]
    assert run["attempts"][1]["resumed_from_step"] == 600


class CleanupThatDeletesAndReuses:
    """Someone else's tooling in the account: it deletes the run's first job as soon as the job
    has ended (DeleteTrainingJob), and once the name is free creates its own job under it."""

    def __init__(self) -> None:
        self.deleted: str | None = None
        self.free_at: int | None = None  # when the deleted job's name is free again
        self.reused = False

    def next_time(self) -> int | None:
        return self.free_at if not self.reused else None

    def done(self) -> bool:
        return self.reused

    def step(self, runner) -> None:
        sim = runner.acct.sagemaker
        first = next((j for j in sim.jobs() if j.run_name == "llama" and j.attempt == 1), None)
        if first is None:
            return
        if self.deleted is None and first.is_terminal:
            sim.delete_training_job(TrainingJobName=first.name)
            self.deleted = first.name
            self.free_at = sim.clock.now_ms + sim.startup.delete_s * 1000
        elif self.deleted is not None and not self.reused and first in sim.deleted_jobs:
            theirs = dict(first.request, Tags=[{"Key": "team", "Value": "other"}])
            theirs["StoppingCondition"] = {"MaxRuntimeInSeconds": 1800}
            sim.create_training_job(**theirs)
            self.reused = True


def test_scenario_a_job_deleted_outside_sagewarden_resumes_under_a_new_name_and_its_reused_name_is_left_alone(
    template,
):
    """Issue 32 item 11: a job deleted after it ended (its end event lost) is an ending the
    supervisor names, DELETED; the run resumes from its newest checkpoint as a new attempt, and
    the job someone else then creates under the freed name -- before the supervisor looks again,
    so the name's next read shows that job -- is never stopped or waited on."""
    cleanup = CleanupThatDeletesAndReuses()
    result = run_drill(
        template,
        {
            "seed": 3,
            "account": {"store": "memory"},
            "delivery": {"drop_rate": 1.0},  # every event lost: the sweep's reads are all there is
            "runs": [run_spec("llama")],
            # between two of the sweep's minutes: the cleanup deletes the job before any read
            "faults": [{"kind": "internal_error", "after_training_min": 45.5, "run": "llama", "attempt": 1}],
        },
        hooks=[cleanup],
    )
    run = result.runs["llama"]
    assert run["status"] == "SUCCEEDED"
    assert classes(result, "llama") == ["DELETED", "SUCCEEDED"]
    first, second = run["attempts"]
    assert "deleted outside sagewarden" in first["end_reason"]
    assert "now holds another job" in decisions(result, "llama")
    assert second["job_name"] != first["job_name"] and second["resumed_from_step"] == 300
    (theirs,) = [j for j in result.jobs if j.name == cleanup.deleted and j.run_name is None]
    assert theirs.ended_reason == "max_runtime"  # ran its own course: never the run's to stop
    assert not [r for r in result.timeline if r.kind == "action" and r.text.startswith("StopJob")]
    (resumed,) = [n for _, n in result.alerts_sent if n.event == "attempt.resumed"]
    assert "Class: DELETED" in resumed.body and "deleted outside sagewarden" in resumed.body


@pytest.mark.claim(
    "a memory fault: CUDA out-of-memory, or host RAM (the OOM killer's words, a DataLoader worker killed, a kill while loading checkpoint shards or after a host's `MemoryUtilization` reached 95 %), unless `oom_is_user_error=false`"
)
@pytest.mark.claim(
    "FAILED at once, with the matched lines in the alert and advice for a full disk (`VolumeSizeInGB`, checkpoint size) or host RAM (loader workers, shard loading, a larger instance)"
)
def test_scenario_a_host_that_ran_out_of_ram_is_a_memory_fault_not_infrastructure(template):
    """The kernel's OOM killer ends a rank: the log says only 'Killed'. The supervisor reads the
    hosts' MemoryUtilization before the end (near 100 % on algo-2) and fails the run with the memory
    advice at once (before: 'worker killed' was infrastructure, resumed three times)."""
    result = run_drill(
        template,
        {
            "seed": 4,
            "runs": [run_spec("oom")],
            "faults": [
                {
                    "kind": "algorithm_error",
                    "run": "oom",
                    "after_training_min": 40,
                    "host": 2,
                    "memory_full": True,
                    "once": False,
                    "log_lines": [
                        "torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 (pid: 4242)"
                    ],
                }
            ],
        },
    )
    run = result.runs["oom"]
    assert run["status"] == "FAILED" and classes(result, "oom") == ["USER_ERROR"], decisions(result, "oom")
    assert "host memory fault" in run["outcome"]
    (failed,) = [row for row in result.alert_rows() if row["run"] == "oom" and row["event"] == "run.failed"]
    assert "MemoryUtilization of algo-2 reached" in failed["body"] and "num_workers" in failed["body"]


def test_scenario_the_same_kill_without_memory_evidence_is_confirmed_once_then_stops(template):
    kill = "torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 (pid: 4242)"
    result = run_drill(
        template,
        {
            "seed": 4,
            "runs": [run_spec("killed")],
            # attempt 1 saves step 300, then is killed; attempt 2 resumes from it and is killed the
            # same way before its first checkpoint
            "faults": [
                {
                    "kind": "algorithm_error",
                    "run": "killed",
                    "attempt": 1,
                    "after_training_min": 40,
                    "log_lines": [kill],
                },
                {
                    "kind": "algorithm_error",
                    "run": "killed",
                    "attempt": 2,
                    "after_training_min": 5,
                    "log_lines": [kill],
                },
            ],
        },
    )
    run = result.runs["killed"]
    assert run["status"] == "FAILED" and classes(result, "killed") == ["UNKNOWN", "UNKNOWN"], decisions(
        result, "killed"
    )
    assert "deterministic failure: attempt 2 ended as attempt 1 did" in run["outcome"]
    # GET /runs/{id}: each attempt shows the class and why, and that it is a guess
    first = run["attempts"][0]
    assert first["end_class"] == "UNKNOWN"
    assert "process killed (SIGKILL)" in first["end_reason"] and "a guess (UNKNOWN)" in first["end_reason"]
    (failed,) = [
        row for row in result.alert_rows() if row["run"] == "killed" and row["event"] == "run.failed"
    ]
    assert "Attempt 1:" in failed["body"] and "Attempt 2:" in failed["body"]
