"""`sagewarden selftest`'s pieces without a server: the image per region, the request it submits,
the policy fields it drops for an older API, the cost it announces, and the scenario file."""

from __future__ import annotations

import io
import json
import re
import tarfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from botocore.credentials import Credentials

from sagewarden.api.validation import validate_submit
from sagewarden.domain.vocabulary.policy import RunPolicy
from sagewarden_cli import selftest, selftest_cleanup
from sagewarden_cli.client import Client, Context
from sagewarden_cli.errors import NETWORK, USAGE, CliError
from tests.doc_pages import documentation

REPO = Path(__file__).resolve().parents[3]
ROLE = "arn:aws:iam::123456789012:role/SageMakerTrainingRole"


def target(region: str = "us-east-1") -> selftest.Target:
    return selftest.Target(
        region=region,
        role=ROLE,
        bucket="team-checkpoints",
        root="sagewarden-selftest/20260101T000000Z-abcdef",
        image=selftest.image_uri(region),
        instance_type="ml.m5.large",
    )


@pytest.mark.claim(
    "submits one run (`POST /runs`) on 1 × ml.m5.large with the region's public SageMaker PyTorch training image, `pytorch-training:2.5.1-cpu-py311`"
)
def test_the_image_is_the_regions_public_pytorch_training_image():
    assert selftest.image_uri("us-east-1") == (
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5.1-cpu-py311"
    )
    assert selftest.image_uri("eu-south-1").startswith("692866216735.dkr.ecr.eu-south-1.amazonaws.com/")
    assert selftest.image_uri("cn-north-1") == (
        "727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/pytorch-training:2.5.1-cpu-py311"
    )
    with pytest.raises(CliError) as unknown:
        selftest.image_uri("xx-nowhere-1")
    assert unknown.value.code == USAGE and "pass --image" in str(unknown.value)


def test_the_run_passes_the_apis_own_validation():
    body = {
        "name": selftest.RUN_NAME,
        "training_job": selftest.training_job(target()),
        "policy": selftest.POLICY,
    }

    req = validate_submit(body, allowed_roles=frozenset({ROLE}), job_prefix="sw", policy_defaults=RunPolicy())

    job = req.training_job
    assert job["HyperParameters"]["sagemaker_program"] == "train.py"
    assert job["HyperParameters"]["sagemaker_submit_directory"] == (
        "s3://team-checkpoints/sagewarden-selftest/20260101T000000Z-abcdef/source/sourcedir.tar.gz"
    )
    assert job["HyperParameters"]["crash-at-step"] == "25"
    assert job["CheckpointConfig"]["S3Uri"].endswith("20260101T000000Z-abcdef/checkpoints/")
    assert req.policy.log_silence_minutes == 5 and req.policy.hang_grace_minutes == 1
    assert not req.policy.keep_alive_seconds and req.policy.checkpoint_layout == "hf"
    # MaxRuntime must outlast the hang step's deadline, or a missed hang would end as a segment
    hang = next(s for s in selftest.steps() if s.title.startswith("hang detected"))
    assert job["StoppingCondition"]["MaxRuntimeInSeconds"] > (hang.deadline_min + 1) * 60


def test_the_source_tarball_is_what_script_mode_unpacks():
    blob = selftest.source_tarball(REPO / "examples" / "selftest")

    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:  # as the training toolkit opens it
        names = tar.getnames()
        script = tar.extractfile("train.py")
        assert script is not None and b"SAGEWARDEN_RESUME_DIR" in script.read()
    assert names == ["train.py"]


def test_the_scenario_file_is_the_plan():
    on_disk = json.loads((REPO / "drill" / "scenarios" / "selftest.json").read_text())
    assert on_disk == selftest.scenario_document(), (
        "drill/scenarios/selftest.json is stale: PYTHONPATH=lambdas:. python -m sagewarden_cli.selftest > drill/scenarios/selftest.json"
    )
    profile = on_disk["runs"][0]["profile"]
    assert profile["steps_per_minute"] * selftest.PLAN.seconds_per_step == 60
    assert profile["gpus_per_host"] == 0  # a CPU instance has no GPU metric: only log silence sees the hang


@pytest.mark.claim(
    "It is opt-in and costs a few cents; it prints the cost and asks first (`--yes` does not ask)"
)
@pytest.mark.claim(
    "About 23 ml.m5.large instance-minutes, **$0.04**, at $0.115 per instance-hour (the us-east-1 on-demand SageMaker training list price, read in 2025"
)
@pytest.mark.claim("a SageMaker training quota of at least 1 ml.m5.large (`--instance-type` picks another)")
def test_the_cost_is_computed_from_the_plan():
    typical = selftest.typical_instance_minutes()
    most = selftest.most_instance_minutes()
    # 3 image downloads, the crash at 2.5 min, the hang (1.2 + 5 silent + 2 to the stop + 2 to the kill), 1 to finish
    assert typical == pytest.approx(3 * 3 + 2.5 + (1.2 + 5 + 2 + 2) + 1.0)
    assert most == pytest.approx(sum(s.deadline_min for s in selftest.steps()) + 2)
    lines = selftest.cost_lines("ml.m5.large")
    assert lines[0].startswith(
        f"about {typical:.0f} ml.m5.large instance-minutes, ${typical / 60 * 0.115:.2f}"
    )
    assert "$0.115 per instance-hour (us-east-1" in lines[1]
    assert "no price known" in selftest.cost_lines("ml.c5.xlarge")[0]


def test_policy_overrides_are_yaml_values():
    assert selftest._policy(["log_silence_minutes=10", "hang_detection=false"]) == {
        **selftest.POLICY,
        "log_silence_minutes": 10,
        "hang_detection": False,
    }
    for bad in ("log_silence_minutes", "log_silence_minutes=ten", "=3"):
        with pytest.raises(CliError) as err:
            selftest._policy([bad])
        assert err.value.code == USAGE


# -- the policy an older API does not know ------------------------------------------------------------


class FakeApi:
    """POST /runs as an API that knows RunPolicy's fields but the newer ones, plus `extra_known`."""

    def __init__(self, extra_known: set[str]) -> None:
        self.known = (set(RunPolicy().to_dict()) - set(selftest.NEWER_POLICY)) | extra_known
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, method: str, url: str, headers: dict[str, str], body: bytes | None) -> tuple[Any, ...]:
        sent = json.loads(body or b"{}")
        self.bodies.append(sent)
        for key in sent["policy"]:  # RunPolicy.from_dict reports the first unknown field only
            if key not in self.known:
                errors = [{"field": f"policy.{key}", "message": "unknown policy field; did you mean x?"}]
                return 400, json.dumps({"message": "invalid request", "errors": errors}).encode(), {}
        run = {"run_id": "01KE5Q86000000000000000000", "policy": sent["policy"], "created_at": None}
        return 201, json.dumps(run).encode(), {}


def selftest_on(api: FakeApi, policy: dict[str, Any] | None = None) -> selftest.SelfTest:
    client = Client(
        "https://x.execute-api.us-east-1.amazonaws.com/prod",
        credentials=Credentials("a", "b"),
        region="us-east-1",
        transport=api,
    )
    ctx = Context(client, None, "us-east-1", False)
    env = SimpleNamespace(json=False, out=lambda t="": None, note=lambda t: None, sleep=lambda s: None)
    return selftest.SelfTest(env, ctx, target(), dict(policy or selftest.POLICY))  # type: ignore[arg-type]


def test_an_api_that_knows_the_newer_policy_fields_gets_them():
    api = FakeApi(set(selftest.NEWER_POLICY))
    test = selftest_on(api)

    run = test.submit("stamp")

    assert len(api.bodies) == 1 and test.dropped == []
    assert run["policy"] == {**selftest.NEWER_POLICY, **selftest.POLICY}


def test_an_older_api_gets_the_run_without_them():
    api = FakeApi(set())
    test = selftest_on(api)

    run = test.submit("stamp")

    assert len(api.bodies) == 1 + len(selftest.NEWER_POLICY)  # one field per 400, as the API reports them
    assert sorted(test.dropped) == sorted(selftest.NEWER_POLICY)
    assert run["policy"] == selftest.POLICY


def test_a_field_the_user_set_is_never_dropped():
    api = FakeApi(set())
    test = selftest_on(api, {**selftest.POLICY, "startup_silence_minutes": 3})

    with pytest.raises(CliError) as refused:
        test.submit("stamp")

    assert "policy.startup_silence_minutes: unknown policy field" in refused.value.details[0]
    assert len(api.bodies) == 1


def test_any_other_refusal_is_reported_at_once():
    api = FakeApi(set(selftest.NEWER_POLICY))
    api.known.discard("hang_grace_minutes")  # stands for any other 400
    test = selftest_on(api)

    with pytest.raises(CliError) as refused:
        test.submit("stamp")

    assert len(api.bodies) == 1 and "policy.hang_grace_minutes" in refused.value.details[0]


# -- cleanup after a lost answer (the server's side is tests/scenarios/test_selftest.py) ----------------


def test_a_refused_submission_leaves_nothing_for_the_cleanup_to_find():
    api = FakeApi(set(selftest.NEWER_POLICY))
    api.known.discard("hang_grace_minutes")
    test = selftest_on(api)

    with pytest.raises(CliError):
        test.submit("stamp")

    assert test.pending is None and test.run_id is None
    assert (
        selftest_cleanup.end_run(test) is True and len(api.bodies) == 1
    )  # nothing repeated, nothing to cancel


@pytest.mark.claim(
    "the cleanup sends the request again with the same `Idempotency-Key`, which returns the run the first one created, and cancels it"
)
def test_a_lost_answer_is_repeated_with_the_same_key_and_body_and_a_refusal_means_no_run():
    answers: list[Any] = [TimeoutError(), (400, b'{"message": "invalid request", "errors": []}', {})]
    sent: list[tuple[str, str, str | None, bytes | None]] = []

    def transport(method: str, url: str, headers: dict[str, str], body: bytes | None) -> tuple[Any, ...]:
        sent.append((method, url.rsplit("/", 1)[1], headers.get("Idempotency-Key"), body))
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return tuple(answer)

    test = selftest_on(transport)  # type: ignore[arg-type]
    with pytest.raises(CliError) as lost:
        test.submit("stamp")
    assert lost.value.code == NETWORK and test.pending is not None

    assert selftest_cleanup.end_run(test) is True  # the repeat was refused: no run was ever created
    assert [(m, path) for m, path, _, _ in sent] == [("POST", "runs"), ("POST", "runs")]
    assert sent[0][2:] == sent[1][2:] and sent[0][2] == "selftest-stamp"
    assert test.pending is None and test.run_id is None


def _readme_selftest() -> str:
    text = documentation()
    return text.split("### Self-test\n", 1)[1].split("\n### ", 1)[0]


@pytest.mark.claim("attempt 1 training | 20")
@pytest.mark.claim("crash classified INFRASTRUCTURE | 12.5")
@pytest.mark.claim("resumed as attempt 2 from step 20 | 20")
@pytest.mark.claim("hang detected (log silence) | 22.2")
@pytest.mark.claim("stopped | 6")
@pytest.mark.claim("resumed as attempt 3 from step 30 | 20")
@pytest.mark.claim("succeeded | 11")
@pytest.mark.claim(
    "About 23 ml.m5.large instance-minutes, **$0.04**, at $0.115 per instance-hour (the us-east-1 on-demand SageMaker training list price, read in 2025"
)
@pytest.mark.claim(
    "It cannot exceed 114 instance-minutes ($0.22): one job runs at a time, and the self-test cancels the run at the first missed deadline"
)
def test_the_readme_states_the_deadlines_and_the_cost_the_code_uses():
    section = _readme_selftest()
    table = dict(re.findall(r"^  \| ([a-z][^|]+?) \| ([\d.]+) \|$", section, re.M))
    assert table == {s.title: f"{round(s.deadline_min, 1):g}" for s in selftest.steps()}

    typical, most = selftest.typical_instance_minutes(), selftest.most_instance_minutes()
    price = selftest.PRICE_PER_HOUR_USD["ml.m5.large"]
    flat = " ".join(section.split())
    assert (
        f"About {typical:.0f} ml.m5.large instance-minutes, **${typical / 60 * price:.2f}**, at ${price:g} per"
        in flat
    )
    assert f"cannot exceed {most:.0f} instance-minutes (${most / 60 * price:.2f})" in flat
    assert "read in 2025" in flat and selftest.PRICE_SOURCE.endswith("read 2025")
    for key, value in selftest.POLICY.items():
        if key in ("log_silence_minutes", "hang_grace_minutes"):
            assert f"`{key}` {value}" in flat


@pytest.mark.claim(
    "`log_silence_minutes` 5, `hang_grace_minutes` 1, no warm pool, at most 3 restarts and 2 hours"
)
def test_the_readme_states_the_selftests_policy():
    """README: `log_silence_minutes` 5, `hang_grace_minutes` 1, no warm pool, at most 3 restarts
    and 2 hours."""
    flat = " ".join(_readme_selftest().split())
    assert (
        "`log_silence_minutes` 5, `hang_grace_minutes` 1, no warm pool, at most 3 restarts and 2 hours"
        in flat
    )
    policy = selftest.POLICY
    assert (policy["log_silence_minutes"], policy["hang_grace_minutes"]) == (5, 1)
    assert policy["keep_alive_seconds"] == 0  # no warm pool
    assert policy["max_restarts"] == 3 and policy["max_wall_clock_hours"] == 2
    run = validate_submit(
        {"name": "sagewarden-selftest", "training_job": selftest.training_job(target()), "policy": policy},
        allowed_roles=frozenset({ROLE}),
        job_prefix="sw",
        policy_defaults=RunPolicy(),
    )
    assert "KeepAlivePeriodInSeconds" not in run.training_job["ResourceConfig"]


def test_cloudwatch_and_s3_add_less_than_a_cent():
    """README: "CloudWatch alarms and S3 add less than a cent", bounded generously: each of the 3
    attempts' hang alarms and heartbeat series billed for the whole worst-case self-test, every
    object the self-test and its jobs write, and five S3 requests a minute by the supervisor (the
    scale benchmark measures well under one per run-minute)."""
    from infra.constants import CW_ALARM_METRIC_MONTH_USD, CW_CUSTOM_METRIC_MONTH_USD
    from sagewarden.adapters.cloudwatch_hang_alarms import alarm_specs
    from sagewarden.domain.vocabulary.actions import EnsureHangAlarms

    s3_request_usd = 0.005 / 1000  # S3 Standard PUT/LIST, us-east-1 list price (GETs cost less)
    hours_per_month = 730
    minutes = selftest.most_instance_minutes()
    attempts = 3
    spec = EnsureHangAlarms(
        "sw-sagewarden-selftest-01KE5Q86000DNQ47GXEV9VZMPH-a001",
        1,
        1,
        0,  # a CPU instance: no GPU metric
        selftest.POLICY["log_silence_minutes"],
        1.0,
        20,
        gpu_lone_idle_minutes=0,
    )
    metrics = sum(
        max(1, len([m for m in a.get("Metrics", []) if "MetricStat" in m]))
        for a in alarm_specs(spec, "p-", "RUN")
    )
    alarms_usd = attempts * metrics * minutes / 60 * CW_ALARM_METRIC_MONTH_USD / hours_per_month
    heartbeat_usd = attempts * minutes / 60 * CW_CUSTOM_METRIC_MONTH_USD / hours_per_month
    objects = 1 + 2 * 4 + attempts  # the script's tarball, 4 checkpoints of 2 files, each job's output
    s3_usd = (objects + 5 * minutes) * s3_request_usd

    assert 0 < metrics <= 3
    assert alarms_usd + heartbeat_usd + s3_usd < 0.01
    assert "CloudWatch alarms and S3 add less than a cent" in " ".join(_readme_selftest().split())
    assert "CloudWatch alarms and S3 add less than a cent" in " ".join(selftest.cost_lines("ml.m5.large"))


@pytest.mark.claim(
    'optionally `logs:DescribeLogStreams` and `logs:GetLogEvents` (the log check; without them it says "not checked")'
)
def test_logs_the_identity_may_not_read_leave_the_log_check_not_checked(monkeypatch):
    """README: logs:DescribeLogStreams and logs:GetLogEvents are optional (the log check; without
    them it says "not checked"): an AccessDenied is no failure of the self-test."""
    import boto3
    from botocore.stub import Stubber

    logs = boto3.client("logs", region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b")
    stub = Stubber(logs)
    stub.add_client_error(
        "describe_log_streams", "AccessDeniedException", "not authorized to perform logs:DescribeLogStreams"
    )
    stub.activate()
    test = selftest_on(FakeApi(set()))
    monkeypatch.setattr(test.ctx, "aws_client", lambda service: logs)
    run = {
        "attempts": [
            {
                "number": 1,
                "job_name": "sw-x-a001",
                "resumed_from": None,
                "training_started_at": "2026-01-05T00:10:00Z",
            },
            {
                "number": 2,
                "job_name": "sw-x-a002",
                "resumed_from": {"step": 20},
                "training_started_at": "2026-01-05T00:40:00Z",
            },
        ]
    }

    state, text = test.script_resumes(run)

    assert state == "not checked" and state != selftest.FAILED
    assert text.startswith("its logs could not be read (") and "AccessDenied" in text


def test_the_script_check_reads_again_while_a_resuming_line_may_still_land(monkeypatch):
    """CloudWatch Logs ingests a line late: the last attempt's 'Resuming training' line may not be
    there when the run ends. The check reads again (server time) for up to LATE_LINES_MS before it
    says "not checked"; a line that lands meanwhile is checked (before: one read, "not checked")."""
    from sagewarden_cli.logs import LATE_LINES_MS
    from sagewarden_cli.selftest_session import NOT_YET

    def run_with(answers: list[tuple[str, str]], clock: list[int]) -> tuple[tuple[str, str], int]:
        test = selftest_on(FakeApi(set()))
        test.run_id = "01KE5Q86000000000000000000"
        reads = iter(answers)
        monkeypatch.setattr(test, "script_resumes", lambda run: next(reads))
        monkeypatch.setattr(test.client, "call", lambda method, path, **kw: {"attempts": []})
        monkeypatch.setattr(test.client, "now_ms", lambda: clock[0])
        slept = []

        def sleep(s: float) -> None:
            slept.append(s)
            clock[0] += 60_000  # a minute of server time between reads

        test.env.sleep = sleep
        return test.script_resumes_landed({"attempts": []}), len(slept)

    late = (NOT_YET, "attempt 3's log has no 'Resuming training' line (yet)")
    landed = (selftest.DONE, "the script's log confirms: attempt 3 from step 30")
    assert run_with([late, late, landed], [0]) == (landed, 2)
    never = [late] * 10
    (state, text), sleeps = run_with(never, [0])
    assert state == "not checked" and "(yet)" in text and sleeps == LATE_LINES_MS // 60_000
    assert run_with([(selftest.FAILED, "wrong step")], [0]) == ((selftest.FAILED, "wrong step"), 0)
