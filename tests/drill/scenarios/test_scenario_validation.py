"""Scenario files are checked before anything runs: one line per mistake, naming its path in the
file, and `python -m drill` exits 2 without a traceback. One test per kind of mistake."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

import drill.__main__ as drill_cli
from drill.account.local import BUCKET, EXECUTION_ROLE
from drill.scenarios.spec import ScenarioError, load, parse, shipped
from sagewarden.domain.capacity.warm_pools import POOL_WAIT_MS
from tests.doc_pages import documentation
from tests.drill.scenarios.builders import PROFILE, problems, scenario


def with_fault(**fault: Any) -> dict[str, Any]:
    return scenario(faults=[{"run": "llama-8b", "attempt": 1, **fault}])


def test_scenario_valid_example_parses() -> None:
    sc = parse(scenario(), bucket=BUCKET, role_arn=EXECUTION_ROLE)
    assert [r.name for r in sc.runs] == ["llama-8b", "qwen-sft"] and len(sc.faults) == 1


@pytest.mark.parametrize("name", shipped())
def test_scenario_every_shipped_scenario_is_valid(name: str) -> None:
    sc = load(name, bucket=BUCKET, role_arn=EXECUTION_ROLE)
    assert sc.runs and set(sc.expect) == {r.name for r in sc.runs}  # every run has an expectation


# --- JSON ------------------------------------------------------------------------------------------


@pytest.mark.claim(
    "bad JSON, a missing or unknown field (with a did-you-mean), a wrong type, a negative time, a fault or action naming a missing run, an expectation on an unknown field, a fault that can never fire"
)
def test_scenario_bad_json_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{\n  "name": "x",\n  "runs": [\n    {"name": "a"}\n    {"name": "b"}\n  ]\n}\n')
    with pytest.raises(ScenarioError) as err:
        load(path, bucket=BUCKET, role_arn=EXECUTION_ROLE)
    assert err.value.lines() == [f"{path}:5:5: invalid JSON: Expecting ',' delimiter"]


def test_scenario_repeated_key_is_an_error() -> None:
    data = json.loads('{"runs": [{"name": "a", "name": "b"}]}', object_pairs_hook=_repeated_pairs)
    assert problems(data) == ["runs[0].name: appears more than once in the object"]


def _repeated_pairs(pairs: list[tuple[str, Any]]) -> Any:
    from drill.scenarios.spec import _pairs

    return _pairs(pairs)


def test_scenario_nan_is_not_json(tmp_path: Path) -> None:
    path = tmp_path / "nan.json"
    path.write_text('{"max_days": NaN}')
    with pytest.raises(ScenarioError, match="invalid JSON: NaN is not a JSON number"):
        load(path, bucket=BUCKET, role_arn=EXECUTION_ROLE)


def test_scenario_not_an_object() -> None:
    assert problems([1, 2]) == ["expected an object, got a list"]


# --- fields ---------------------------------------------------------------------------------------


@pytest.mark.claim(
    "bad JSON, a missing or unknown field (with a did-you-mean), a wrong type, a negative time, a fault or action naming a missing run, an expectation on an unknown field, a fault that can never fire"
)
def test_scenario_missing_required_fields() -> None:
    data = scenario(faults=[{"run": "llama-8b"}], actions=[{"cancel": "llama-8b"}])
    data["runs"][1].pop("name")
    assert problems(data) == [
        "runs[1].name: required field missing",
        "faults[0].kind: required field missing",
        "actions[0].at_min: required field missing",
    ]


@pytest.mark.claim(
    "bad JSON, a missing or unknown field (with a did-you-mean), a wrong type, a negative time, a fault or action naming a missing run, an expectation on an unknown field, a fault that can never fire"
)
@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            lambda d: d["runs"][0].update(instance_count="2"),
            'runs[0].instance_count: expected an integer, got a string ("2")',
        ),
        (lambda d: d.update(seed=1.5), "seed: expected an integer, got a number (1.5)"),
        (lambda d: d.update(runs={"name": "x"}), "runs: expected a list, got an object"),
        (
            lambda d: d["runs"][0]["profile"].update(steps_per_minute=True),
            "runs[0].profile.steps_per_minute: expected a number, got a boolean (true)",
        ),
        (
            lambda d: d["faults"][0].update(log_lines="oops"),
            'faults[0].log_lines: expected a list of strings, got a string ("oops")',
        ),
        (
            lambda d: d.update(account={"quotas": {"ml.p5.48xlarge": "two"}}),
            'account.quotas.ml.p5.48xlarge: expected an integer, got a string ("two")',
        ),
        (
            lambda d: d.update(account={"store": "dynamo"}),
            'account.store: unknown value "dynamo" (did you mean "dynamodb"?)',
        ),
    ],
    ids=[
        "an instance count as a string",
        "a fractional seed",
        "runs as an object",
        "steps per minute as a bool",
        "log lines as a string",
        "a quota in words",
        "an unknown store name",
    ],
)
def test_scenario_wrong_type(change: Any, problem: str) -> None:
    data = scenario()
    change(data)
    assert problems(data) == [problem]


@pytest.mark.claim(
    "bad JSON, a missing or unknown field (with a did-you-mean), a wrong type, a negative time, a fault or action naming a missing run, an expectation on an unknown field, a fault that can never fire"
)
@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda d: d.update(max_day=3), 'max_day: unknown field (did you mean "max_days"?)'),
        (
            lambda d: d["runs"][0]["profile"].update(total_step=3),
            'runs[0].profile.total_step: unknown field (did you mean "total_steps"?)',
        ),
        (
            lambda d: d["faults"][0].update(halfwritten_checkpoint=True),
            'faults[0].halfwritten_checkpoint: unknown field (did you mean "half_written_checkpoint"?)',
        ),
        (
            lambda d: d["runs"][0].update(policy={"max_restart": 3}),
            'runs[0].policy.max_restart: unknown policy field (did you mean "max_restarts"?)',
        ),
        (
            lambda d: d.update(account={"startup": {"provision": 60}}),
            'account.startup.provision: unknown field (did you mean "provision_s"?)',
        ),
        (lambda d: d["runs"][0].update(colour="red"), "runs[0].colour: unknown field"),
    ],
    ids=[
        "a misspelt top-level field",
        "a misspelt profile field",
        "a misspelt fault field",
        "a misspelt policy field",
        "a misspelt account field",
        "a field with no near name",
    ],
)
def test_scenario_unknown_field_with_did_you_mean(change: Any, problem: str) -> None:
    data = scenario()
    change(data)
    assert problems(data) == [problem]


@pytest.mark.claim(
    "bad JSON, a missing or unknown field (with a did-you-mean), a wrong type, a negative time, a fault or action naming a missing run, an expectation on an unknown field, a fault that can never fire"
)
@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            lambda d: d["runs"][1].update(submit_at_min=-5),
            "runs[1].submit_at_min: negative time -5: times count from the scenario start (or the event)",
        ),
        (
            lambda d: d["faults"][0].update(after_training_min=-1),
            "faults[0].after_training_min: negative time -1: times count from the scenario start (or the event)",
        ),
        (
            lambda d: d.update(delivery={"max_delay_s": -3}),
            "delivery.max_delay_s: negative time -3: times count from the scenario start (or the event)",
        ),
        (
            lambda d: d.update(actions=[{"at_min": -2, "cancel": "llama-8b"}]),
            "actions[0].at_min: negative time -2: times count from the scenario start (or the event)",
        ),
        (lambda d: d.update(max_days=0), "max_days: must be greater than 0, got 0"),
    ],
    ids=[
        "a negative submit time",
        "a negative fault time",
        "a negative delivery delay",
        "a negative action time",
        "zero days",
    ],
)
def test_scenario_negative_time(change: Any, problem: str) -> None:
    data = scenario()
    change(data)
    assert problems(data) == [problem]


def test_scenario_invalid_fault_kind_has_did_you_mean() -> None:
    assert problems(with_fault(kind="hang_spn")) == [
        'faults[0].kind: unknown value "hang_spn" (did you mean "hang_spin"?)'
    ]


# --- references -----------------------------------------------------------------------------------


@pytest.mark.claim(
    "bad JSON, a missing or unknown field (with a did-you-mean), a wrong type, a negative time, a fault or action naming a missing run, an expectation on an unknown field, a fault that can never fire"
)
def test_scenario_fault_naming_an_unknown_run() -> None:
    data = scenario(faults=[{"kind": "hardware", "run": "lama-8b", "attempt": 1, "after_training_min": 5}])
    assert problems(data) == ['faults[0].run: no run named "lama-8b" (did you mean "llama-8b"?)']


def test_scenario_action_naming_an_unknown_run_or_coming_before_the_submit() -> None:
    data = scenario(actions=[{"at_min": 30, "cancel": "qwen-st"}, {"at_min": 5, "cancel": "qwen-sft"}])
    assert problems(data) == [
        'actions[0].cancel: no run named "qwen-st" (did you mean "qwen-sft"?)',
        "actions[1].at_min: cancels qwen-sft at 5 min, but it is submitted at 10 min",
    ]


def test_scenario_duplicate_run_name() -> None:
    data = scenario()
    data["runs"][1]["name"] = "llama-8b"
    assert problems(data) == ['runs[1].name: "llama-8b" is already the name of runs[0]']


# --- expectations ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expect", "problem"),
    [
        ({"llama-8b": {"atempts": 2}}, 'expect.llama-8b.atempts: unknown field (did you mean "attempts"?)'),
        ({"llama8b": {"attempts": 2}}, 'expect.llama8b: no run named "llama8b" (did you mean "llama-8b"?)'),
        (
            {"llama-8b": {"status": "SUCCEDED"}},
            'expect.llama-8b.status: unknown value "SUCCEDED" (did you mean "SUCCEEDED"?)',
        ),
        (
            {"llama-8b": {"attempts": 2, "end_classes": ["INFRASTRUCTURE"]}},
            "expect.llama-8b.end_classes: lists 1 attempt(s), but attempts is 2",
        ),
        (
            {"llama-8b": {"restarts_by_class": {"HANG": "1"}}},
            'expect.llama-8b.restarts_by_class.HANG: expected an integer, got a string ("1")',
        ),
        (
            {"llama-8b": {"hangs_detected_by": ["log silence"]}},
            'expect.llama-8b.hangs_detected_by[0]: "log silence" is not a signal name (e.g. log_silence)',
        ),
        ({"llama-8b": {"hangs_detected_by": []}}, "expect.llama-8b.hangs_detected_by: names no signal"),
        (
            {"llama-8b": {"hangs_detected_by": "gpu_idle"}},
            'expect.llama-8b.hangs_detected_by: expected a list of strings, got a string ("gpu_idle")',
        ),
    ],
    ids=[
        "a misspelt expectation",
        "a misspelt run name",
        "a misspelt status",
        "end classes not matching the attempts",
        "a restart count as a string",
        "an unknown hang signal",
        "no hang signal",
        "hang signals as a string",
    ],
)
def test_scenario_expectation_on_an_unknown_field_or_run(expect: dict[str, Any], problem: str) -> None:
    assert problems(scenario(expect=expect)) == [problem]


# --- faults that can never fire ---------------------------------------------------------------------


def test_scenario_fault_on_an_attempt_beyond_the_restart_budget() -> None:
    # max_restarts 3 (policy_defaults): attempts 1..4, plus MaxRuntime segments (one 5-day segment
    # holds the whole 2-hour run: at most 2 counted generously)
    assert problems(with_fault(kind="hardware", attempt=9, after_training_min=5)) == [
        "faults[0].attempt: llama-8b never reaches attempt 9: its restart budget (max_restarts 3) allows at "
        "most 5 attempts here"
    ]


def test_scenario_attempt_bound_counts_uncounted_restarts() -> None:
    # each capacity fault adds an attempt that the restart budget does not count
    faults = [
        {"kind": "capacity", "run": "llama-8b", "attempt": 1},
        {"kind": "capacity", "run": "llama-8b", "attempt": 2},
        {"kind": "hardware", "run": "llama-8b", "attempt": 7, "after_training_min": 5},
    ]
    parse(scenario(faults=faults), bucket=BUCKET, role_arn=EXECUTION_ROLE)


def test_scenario_training_fault_after_the_run_has_finished() -> None:
    # 1200 steps at 10/min plus 4 saves of 2 min: about 128 minutes of training
    assert problems(with_fault(kind="dead_host", after_training_min=600)) == [
        "faults[0].after_training_min: 600 min into an attempt never comes: llama-8b finishes its training "
        "in about 128 min"
    ]


@pytest.mark.claim(
    "bad JSON, a missing or unknown field (with a did-you-mean), a wrong type, a negative time, a fault or action naming a missing run, an expectation on an unknown field, a fault that can never fire"
)
def test_scenario_training_fault_after_max_runtime() -> None:
    data = with_fault(kind="hardware", after_training_min=90)
    data["runs"][0]["max_runtime_hours"] = 1
    assert problems(data) == [
        "faults[0].after_training_min: 90 min into an attempt never comes: llama-8b's MaxRuntime stops each "
        "attempt after 60 min"
    ]


@pytest.mark.parametrize("kind", ["capacity", "throttle", "quota"])
def test_scenario_start_time_fault_with_a_training_time(kind: str) -> None:
    assert problems(with_fault(kind=kind, after_training_min=30)) == [
        f"faults[0].after_training_min: {kind} acts when a job is created (CreateTrainingJob), not during "
        "training: after_training_min never applies (pick the launch with attempt)"
    ]


def test_scenario_fault_on_a_host_that_does_not_exist() -> None:
    assert problems(with_fault(kind="dead_host", host=3, after_training_min=5)) == [
        "faults[0].host: llama-8b has 2 host(s) (algo-1..algo-2); host 3 does not exist"
    ]


def test_scenario_fields_that_do_not_apply_to_the_kind() -> None:
    assert problems(with_fault(kind="hang_spin", after_training_min=5, half_written_checkpoint=True)) == [
        "faults[0].half_written_checkpoint: applies to crashes only (internal_error, hardware, algorithm_error); "
        "for a hang in a save, use during_save"
    ]
    assert problems(with_fault(kind="hardware", after_training_min=5, during_save=True)) == [
        "faults[0]: during_save applies to hang kinds only (and to a recurring crash)"
    ]
    assert problems(with_fault(kind="hardware", after_training_min=5, quota_limit=2)) == [
        "faults[0]: quota_limit applies to quota faults only"
    ]
    assert problems(with_fault(kind="quota", quota_limit=-1)) == [
        "faults[0].quota_limit: must be at least 0, got -1"
    ]


def test_scenario_hang_during_save_is_expressible_and_needs_saves() -> None:
    sc = parse(
        with_fault(kind="hang_spin", after_training_min=20, during_save=True),
        bucket=BUCKET,
        role_arn=EXECUTION_ROLE,
    )
    assert sc.faults[0].during_save
    data = with_fault(kind="hang_spin", after_training_min=20, during_save=True)
    data["runs"][0]["profile"] = {**PROFILE, "checkpoint_every_steps": 0}
    assert problems(data) == [
        "faults[0].during_save: llama-8b never saves a checkpoint (profile.checkpoint_every_steps 0)"
    ]


# --- the run's request, as the API will check it ---------------------------------------------------


def test_scenario_run_request_is_checked_as_the_api_would() -> None:
    data = scenario()
    data["runs"][0]["training_job"] = {"ResourceConfig": {"InstanceCont": 2}}
    data["runs"][0]["policy"] = {"progress_metric": "train:loss"}
    data["runs"][1]["instance_type"] = "ml.p5.48xlage"
    assert problems(data) == [
        'runs[0].training_job.ResourceConfig.InstanceCont: unknown field (did you mean "InstanceCount"?)',
        "runs[0].policy.progress_metric: must be the Name of one of training_job.AlgorithmSpecification."
        "MetricDefinitions (none defined)",
        problems_for_instance_type(),
    ]


def problems_for_instance_type() -> str:
    from sagewarden.api.sagemaker_model import value_problems

    (problem,) = value_problems("ml.p5.48xlage", "ResourceConfig", "InstanceType", "x")
    assert problem.message.endswith("; did you mean ml.p5.48xlarge?")  # the API's wording, quoted here
    return f"runs[1].instance_type: {problem.message.removesuffix('; did you mean ml.p5.48xlarge?')}" + (
        ' (did you mean "ml.p5.48xlarge"?)'
    )


# --- all at once, and the command ----------------------------------------------------------------------


def test_scenario_every_problem_is_reported_at_once_in_file_order() -> None:
    data = scenario()
    data["expect"] = {"nope": {}}
    data["faults"] = [{"kind": "dead_host", "run": "qwen", "attempt": 1}]
    data["runs"][0]["profile"] = {"total_steps": -1}
    data["max_days"] = "long"
    assert problems(copy.deepcopy(data)) == [
        'max_days: expected a number, got a string ("long")',
        "runs[0].profile.total_steps: must be at least 1, got -1",
        'faults[0].run: no run named "qwen" (did you mean "qwen-sft"?)',
        'expect.nope: no run named "nope"',
    ]


def test_scenario_unknown_name_suggests_a_shipped_scenario() -> None:
    with pytest.raises(ScenarioError) as err:
        load("hang-dead-hots", bucket=BUCKET, role_arn=EXECUTION_ROLE)
    (line,) = err.value.lines()
    assert line.startswith(
        'hang-dead-hots: no such file, and no shipped scenario by that name (did you mean "hang-dead-host"?)'
    )
    assert "default" in line


@pytest.mark.claim("Each mistake is one line naming its path in the file, and the exit code is 2.")
def test_scenario_mistakes_exit_2_with_one_line_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mine.json"
    data = scenario(faults=[{"kind": "hardware", "run": "lama-8b", "attempt": 1, "after_training_min": 5}])
    data["runs"][0]["profile"]["total_step"] = 5
    path.write_text(json.dumps(data))
    assert drill_cli.main([str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f'{path}: runs[0].profile.total_step: unknown field (did you mean "total_steps"?)',
        f'{path}: faults[0].run: no run named "lama-8b" (did you mean "llama-8b"?)',
    ]
    assert "Traceback" not in captured.err


@pytest.mark.claim("Each mistake is one line naming its path in the file, and the exit code is 2.")
def test_scenario_bad_json_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"name": "x",}')
    assert drill_cli.main([str(path)]) == 2
    assert (
        capsys.readouterr().err
        == f"{path}:1:14: invalid JSON: Expecting property name enclosed in double quotes\n"
    )


def test_every_fault_kind_is_documented_in_the_readme_and_the_scenario_docstring() -> None:
    import re

    import drill.scenarios.spec
    from drill.sim.texts import FAULT_KINDS

    readme = documentation()
    section = readme.split("Fault kinds (`drill/sim/sagemaker.py`):", 1)[1].split("\n\n", 2)[1]
    in_readme = set(re.findall(r"`([a-z_]+)`", section))
    in_docstring = set(re.findall(r"\b[a-z]+(?:_[a-z]+)*\b", drill.scenarios.spec.__doc__ or ""))
    assert set(FAULT_KINDS) <= in_readme, set(FAULT_KINDS) - in_readme
    assert set(FAULT_KINDS) <= in_docstring, set(FAULT_KINDS) - in_docstring


@pytest.mark.claim(
    "Every field is optional (0 to 3600 seconds; `late_rate` 0 to 1); all zeros is the kind model."
)
def test_scenario_metric_delay_is_set_per_source_and_checked() -> None:
    """account.metric_delay: when each source's datapoints arrive (drill/alarms/metric_delay.py), fields
    over the defaults; mistakes are reported like any other field's."""
    sc = parse(
        scenario(
            account={"metric_delay": {"gpu": {"base_s": 60, "jitter_s": 120}, "heartbeat": {"late_rate": 0}}}
        ),
        bucket=BUCKET,
        role_arn=EXECUTION_ROLE,
    )
    assert sc.metric_delay == {"gpu": {"base_s": 60, "jitter_s": 120}, "heartbeat": {"late_rate": 0}}
    from drill.alarms.metric_delay import MetricDelays

    delays = MetricDelays.from_dict(sc.metric_delay, seed=sc.seed)
    assert (delays.gpu.base_s, delays.gpu.jitter_s, delays.gpu.late_rate) == (60, 120, 0.05)
    assert delays.heartbeat.max_s == 90 and delays.progress.max_s == 180  # the defaults elsewhere
    assert parse(scenario(), bucket=BUCKET, role_arn=EXECUTION_ROLE).metric_delay == {}  # defaults: late
    found = problems(
        scenario(
            account={
                "metric_delay": {
                    "gpus": {},
                    "gpu": {"base_s": -1, "late_rate": 1.5},
                    "heartbeat": {"jiter_s": 3},
                    "progress": {"base_s": 3000, "jitter_s": 3000},
                }
            }
        )
    )
    assert found == [
        'account.metric_delay.gpus: unknown field (did you mean "gpu"?)',
        "account.metric_delay.gpu.base_s: must be within 0..3600 seconds, got -1",
        "account.metric_delay.gpu.late_rate: must be between 0 and 1, got 1.5",
        'account.metric_delay.heartbeat.jiter_s: unknown field (did you mean "jitter_s"?)',
        "account.metric_delay.progress: a delay must not exceed 3600 s",
    ]


@pytest.mark.claim('"name": "example", "seed": 7, "max_days": 60,')
def test_the_readme_scenario_example_parses() -> None:
    """README's scenario-format example (account.metric_delay included) is a valid scenario."""
    readme = documentation()
    section = readme.split("## The drill and the scenario format", 1)[1]
    example = json.loads(section.split("```json", 1)[1].split("```", 1)[0])
    sc = parse(example, bucket=BUCKET, role_arn=EXECUTION_ROLE)
    assert sc.metric_delay == {"gpu": {"base_s": 30, "jitter_s": 60, "late_rate": 0.05, "late_s": 180}}


@pytest.mark.claim(
    "The warm-pool quota is 0 per instance type by default, and then SageMaker simply keeps no pool"
)
@pytest.mark.claim(
    "The warm-pool quota per instance type is AWS's default, 0, unless named: no pool is kept."
)
@pytest.mark.claim("With AWS's default warm-pool quota, 0, read at submit, every restart starts cold")
@pytest.mark.claim(
    "the drill draws 0-10 minutes and shows nothing, and a resume waits at most 5 minutes for its pool (a later pool is not waited for: the resume starts cold)"
)
def test_scenario_warm_pool_account_fields_default_to_aws_and_are_checked() -> None:
    sc = parse(scenario(), bucket=BUCKET, role_arn=EXECUTION_ROLE)
    assert sc.warm_pools.quotas == {} and sc.warm_pools.available_after_s == (0, 600)  # AWS: quota 0
    # AWS publishes no delay to Available: the unkind range reaches past a resume's 5-minute wait
    assert sc.warm_pools.available_after_s[1] * 1000 > POOL_WAIT_MS
    account = {
        "warm_pools": {
            "quotas": {"ml.p4d.24xlarge": 8},
            "available_after_s": [30, 90],
            "bad_host_refire_min": 2,
        }
    }
    sc = parse(scenario(account=account), bucket=BUCKET, role_arn=EXECUTION_ROLE)
    assert sc.warm_pools.quotas == {"ml.p4d.24xlarge": 8} and sc.warm_pools.available_after_s == (30, 90)
    assert sc.warm_pools.bad_host_refire_min == 2
    bad = {"warm_pools": {"quotas": {"ml.p4d.24xlarge": -1}, "available_after_s": [90, 30], "quota": 1}}
    assert sorted(problems(scenario(account=bad))) == [
        "account.warm_pools.available_after_s: expected [low, high] in whole seconds with 0 <= low <= high, "
        "got [90, 30]",
        'account.warm_pools.quota: unknown field (did you mean "quotas"?)',
        "account.warm_pools.quotas.ml.p4d.24xlarge: must be at least 0, got -1",
    ]


def test_scenario_api_limits_default_to_the_unkind_model_and_are_checked() -> None:
    """account.api_rates / api_retry_wait_s / describe_after_create_s (issue 17 item 10): on by
    default, over the documented rates; mistakes reported like any other field's."""
    sc = parse(scenario(), bucket=BUCKET, role_arn=EXECUTION_ROLE)
    assert sc.api_rates == {} and sc.api_retry_wait_s == 35.5 and sc.describe_after_create_s == (0, 10)
    account = {
        "api_rates": {"sagemaker.DescribeTrainingJob": 0.5, "logs.GetLogEvents": None},
        "api_retry_wait_s": 5,
        "describe_after_create_s": [30, 60],
    }
    sc = parse(scenario(account=account), bucket=BUCKET, role_arn=EXECUTION_ROLE)
    assert sc.api_rates == {"sagemaker.DescribeTrainingJob": 0.5, "logs.GetLogEvents": None}
    assert sc.api_retry_wait_s == 5 and sc.describe_after_create_s == (30, 60)
    bad = {
        "api_rates": {"sagemaker.DescribeTrainingJobs": 1, "cloudwatch.PutMetricAlarm": 0},
        "api_retry_wait_s": 901,
        "describe_after_create_s": [60, 30],
    }
    assert sorted(problems(scenario(account=bad))) == [
        "account.api_rates.cloudwatch.PutMetricAlarm: must be a positive number of calls per second, got 0",
        'account.api_rates.sagemaker.DescribeTrainingJobs: unknown field (did you mean "sagemaker.DescribeTrainingJob"?)',
        "account.api_retry_wait_s: must be within 0..900 seconds, got 901",
        "account.describe_after_create_s: expected [low, high] in seconds with 0 <= low <= high <= 600, got [60, 30]",
    ]


def test_scenario_heartbeat_outages_are_minutes_of_a_deployment_with_the_subscription() -> None:
    """account.heartbeat_outages: stretches of minutes in which the heartbeat pipeline delivers
    nothing; checked like any other field, and only where a log subscription feeds the heartbeat."""
    assert parse(scenario(), bucket=BUCKET, role_arn=EXECUTION_ROLE).heartbeat_outages == []
    sc = parse(
        scenario(account={"heartbeat_outages": [[60, 240], [300, None]]}),
        bucket=BUCKET,
        role_arn=EXECUTION_ROLE,
    )
    assert sc.heartbeat_outages == [(60.0, 240.0), (300.0, None)]
    bad = {"heartbeat_outages": [[60, 30], [-1, None], "soon"]}
    assert sorted(problems(scenario(account=bad))) == [
        f"account.heartbeat_outages[{i}]: expected [from_min, until_min] with 0 <= from < until "
        f"(until null: never ends), got {shown}"
        for i, shown in ((0, "[60, 30]"), (1, "[-1, null]"), (2, '"soon"'))
    ]
    assert problems(scenario(account={"log_subscription": False, "heartbeat_outages": [[0, None]]})) == [
        "account.heartbeat_outages: needs the log subscription (log_subscription: true)"
    ]
