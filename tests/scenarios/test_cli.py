"""Every `sagewarden` command end to end, its signed requests routed into the drill's API (the
template's routes, the real handler) and its --follow polls advancing the simulated world."""

from __future__ import annotations

import json
import re
import shlex

import pytest

from drill.account.local import LocalAccount
from drill.sim.model import Fault, JobProfile
from tests.doc_pages import documentation
from tests.scenarios.cli_support import API, REPR, CliHarness, run_body, write_yaml

SHORT = JobProfile(total_steps=600, steps_per_minute=10, checkpoint_every_steps=200)


@pytest.fixture
def acct(template):
    with LocalAccount(template, store="memory") as account:
        yield account


@pytest.fixture
def h(acct, capsys):
    return CliHarness(acct, capsys)


@pytest.mark.claim(
    "`--set KEY=VALUE` (repeatable): `instance_type`, `instance_count`, `max_runtime_seconds`, `name`, any policy field (`max_restarts=20`), or a path"
)
def test_submit_yaml_with_overrides_and_idempotency_then_get_list_events_cancel(h, tmp_path):
    path = write_yaml(tmp_path / "run.yaml", run_body("llama-8b"))
    r = h.cli(
        "submit", path, "--set", "instance_count=4", "--set", "max_restarts=7",
        "--set", "training_job.Environment.NCCL_DEBUG=1", "--idempotency-key", "k1", json_out=True,
    )  # fmt: skip
    assert r.code == 0, r.err
    run = r.json()
    assert run["status"] == "STARTING"
    assert run["attempts"][0]["instance_count"] == 4
    assert run["policy"]["max_restarts"] == 7
    assert run["training_job"]["Environment"]["NCCL_DEBUG"] == "1"  # a string, as SageMaker needs
    auth = h.seen[0]["Authorization"]
    assert auth.startswith("AWS4-HMAC-SHA256 Credential=AKIAEXAMPLE/")
    assert "/us-east-1/execute-api/aws4_request" in auth

    again = h.cli("submit", path, "--set", "instance_count=4", "--set", "max_restarts=7",
                  "--set", "training_job.Environment.NCCL_DEBUG=1", "--idempotency-key", "k1")  # fmt: skip
    assert again.code == 0 and run["run_id"] in again.out
    assert "already submitted with this Idempotency-Key" in again.err

    r = h.cli("get", run["run_id"], json_out=True)
    assert r.code == 0 and r.json()["attempts"][0]["number"] == 1
    r = h.cli("list", "--status", "starting", "--all", json_out=True)  # statuses are case-insensitive
    assert [x["run_id"] for x in r.json()] == [run["run_id"]]
    r = h.cli("events", "llama-8b", json_out=True)
    assert any("LaunchAttempt" in e["summary"] for e in r.json())
    r = h.cli("cancel", "llama-8b", "--yes", json_out=True)
    assert r.code == 0 and r.json()[0]["status"] == "STOPPING"


def test_submit_reads_json_from_stdin_and_prints_the_run(h):
    r = h.cli("submit", "-", stdin=json.dumps(run_body("gemma")))
    assert r.code == 0, r.err
    assert r.out.startswith("gemma  ") and "STARTING" in r.out.splitlines()[0]
    assert "attempt 1  2 x ml.p4d.24xlarge  from scratch" in r.out
    assert "sagewarden get gemma --follow" in r.err
    assert not REPR.search(r.out), r.out


@pytest.mark.claim("validate and review; nothing is submitted")
@pytest.mark.claim(
    "validates with the API's own code (the same strict JSON rules, the full CreateTrainingJob check against botocore's SageMaker model, the policy ranges) and submits nothing"
)
@pytest.mark.claim(
    "It lists the live runs holding the run's name or an overlapping checkpoint prefix (what the API would refuse with 409), read with `GET /runs`; when the API cannot be reached it says they were not checked."
)
@pytest.mark.claim(
    "MaxRuntime against the run's wall clock: how many chained jobs, and the 120 s SIGTERM grace"
)
@pytest.mark.claim(
    "multi-node p4d/p5 without the EFA/NCCL environment (`FI_PROVIDER=efa`, `FI_EFA_USE_DEVICE_RDMA=1`, `RDMAV_FORK_SAFE=1`, `NCCL_DEBUG`)"
)
@pytest.mark.claim(
    "no collective timeout (`TORCH_NCCL_ASYNC_ERROR_HANDLING=1` and a `timeout=` on `init_process_group`), so a dead rank would hang the job instead of failing it"
)
def test_dry_run_validates_locally_and_reviews_without_sending(h, tmp_path):
    body = run_body("llama-70b")
    body["training_job"]["Environment"] = {}
    body["training_job"]["StoppingCondition"] = {"MaxRuntimeInSeconds": 86_400}
    path = write_yaml(tmp_path / "run.yaml", body)

    def no_network(method, *_):
        assert method == "GET", "a dry run never submits"
        raise ConnectionRefusedError  # the API cannot be reached: the review says what it skipped

    r = h.cli("submit", path, "--dry-run", "--set", "instance_type=ml.p5.48xlarge", "--set", "max_wall_clock_hours=240",
              "--set", "checkpoint_layout=megatron", transport=no_network)  # fmt: skip
    assert r.code == 0, r.err
    assert "the API would accept this run (nothing was submitted)" in r.out
    flat = " ".join(r.out.split())  # the note wraps at the terminal's width, which differs between hosts
    assert "note: name and checkpoint prefix not checked against the live runs: cannot list them" in flat
    assert re.search(r"first job   sw-llama-70b-[0-9A-Z]{26}-a001\b", r.out)
    assert re.search(r"max_wall_clock_hours\s+240\n", r.out) and re.search(
        r"checkpoint_layout\s+megatron\n", r.out
    )
    review = r.out.split("preflight review")[1]
    assert "warning  [efa] 2 x ml.p5.48xlarge runs NCCL across hosts" in review
    assert "FI_PROVIDER=efa FI_EFA_USE_DEVICE_RDMA=1 RDMAV_FORK_SAFE=1 NCCL_DEBUG=WARN" in " ".join(
        review.split()
    )
    assert "[collective-timeout] no collective timeout set" in review
    # the run-time fabric check reads NCCL's INFO lines: the review says how to turn it on
    assert "note     [slow-fabric] set NCCL_DEBUG=INFO" in review
    assert "[max-runtime] MaxRuntime 1 d is shorter than the run's wall-clock budget 10 d" in " ".join(
        review.split()
    )
    assert "[checkpoint]" not in review  # the layout was named
    assert not REPR.search(r.out), r.out

    r = h.cli("submit", path, "--dry-run", json_out=True, transport=no_network)
    result = r.json()
    assert result["valid"] is True and result["policy"]["checkpoint_layout"] == "auto"
    assert {f["check"] for f in result["review"]} >= {
        "checkpoint",
        "efa",
        "collective-timeout",
        "max-runtime",
    }
    assert result["conflicts"] == [] and any(
        "not checked against the live runs" in n for n in result["notes"]
    )
    assert h.requests == []


@pytest.mark.claim(
    "It lists the live runs holding the run's name or an overlapping checkpoint prefix (what the API would refuse with 409), read with `GET /runs`; when the API cannot be reached it says they were not checked."
)
def test_dry_run_reports_the_live_runs_holding_the_name_or_the_prefix(h, tmp_path):
    """Issue 16 items 8 and 9: the API refuses a second live run on a name or a checkpoint prefix
    (409); the dry run reads the live runs (GET /runs) and says so before anything is submitted."""
    first = h.submit(run_body("llama-8b"))
    copy = run_body("llama-8b-copy")  # run.yaml copied, name changed, same CheckpointConfig
    copy["training_job"]["CheckpointConfig"] = run_body("llama-8b")["training_job"]["CheckpointConfig"]
    path = write_yaml(tmp_path / "copy.yaml", copy)
    r = h.cli("submit", path, "--dry-run")
    assert r.code == 1
    assert r.err.splitlines()[0] == (
        "sagewarden: dry run: the API would refuse this run (HTTP 409): another live run holds its "
        "name or checkpoint prefix"
    )
    assert f"training_job.CheckpointConfig.S3Uri: live run {first} (llama-8b, STARTING) writes" in r.err
    assert {m for m, _ in h.requests} == {"GET"}  # read, never submitted
    r = h.cli("submit", write_yaml(tmp_path / "same.yaml", run_body("llama-8b")), "--dry-run", json_out=True)
    result = r.json()
    assert r.code == 1 and result["valid"] is False
    assert {(c["on"], c["run_id"]) for c in result["conflicts"]} == {
        ("name", first),
        ("checkpoint_prefix", first),
    }
    h.cli("cancel", first, "--yes")
    h.until(lambda: h.run(first)["status"] == "CANCELLED")
    r = h.cli("submit", path, "--dry-run")
    assert r.code == 0 and "the API would accept this run" in r.out  # the prefix is free again


@pytest.mark.claim(
    "none for managed spot training (SageMaker refuses a spot job that asks), none with `keep_alive_seconds` 0, else the request's own KeepAlive capped by the policy"
)
def test_dry_run_says_a_spot_run_gets_no_warm_pool(h, tmp_path):
    body = run_body("spotty")
    body["training_job"]["EnableManagedSpotTraining"] = True
    body["training_job"]["StoppingCondition"]["MaxWaitTimeInSeconds"] = 6 * 86_400
    body["training_job"]["ResourceConfig"]["KeepAlivePeriodInSeconds"] = 1800
    r = h.cli("submit", write_yaml(tmp_path / "spot.yaml", body), "--dry-run")
    assert r.code == 0, r.err
    review = " ".join(r.out.split("preflight review")[1].split())
    assert "note [warm-pool] no warm pool: managed spot training" in review
    plain = h.cli(
        "submit", write_yaml(tmp_path / "plain.yaml", run_body("plain")), "--dry-run", json_out=True
    )
    (note,) = [f for f in plain.json()["review"] if f["check"] == "warm-pool"]
    assert note["message"].startswith("warm pool: each attempt's instances are kept 600 s")
    assert all(method == "GET" for method, _ in h.requests)  # read (conflicts), never submitted


@pytest.mark.claim("It cannot know the deployment's `allowedRoleArns` and `policyDefaults`, and says so.")
def test_dry_run_says_what_it_cannot_know_about_the_deployment(h, tmp_path):
    """README: it cannot know the deployment's allowedRoleArns and policyDefaults, and says so."""
    r = h.cli("submit", write_yaml(tmp_path / "run.yaml", run_body("llama-70b")), "--dry-run")

    assert r.code == 0, r.err
    out = " ".join(r.out.split())
    assert "not checked locally: RoleArn must be one of the deployment's allowedRoleArns" in out
    assert "its policyDefaults apply under your policy" in out
    notes = h.cli(
        "submit", write_yaml(tmp_path / "run.yaml", run_body("llama-70b")), "--dry-run", json_out=True
    )
    assert any("allowedRoleArns" in n and "policyDefaults" in n for n in notes.json()["notes"])
    assert {req[0] for req in h.requests} == {"GET"}  # the live-run listing only: nothing submitted


@pytest.mark.claim(
    "validates with the API's own code (the same strict JSON rules, the full CreateTrainingJob check against botocore's SageMaker model, the policy ranges) and submits nothing"
)
@pytest.mark.claim(
    "`1` the API refused or failed the request (4xx except 404, 5xx, throttling), or a dry run found errors"
)
def test_dry_run_refusal_lists_every_field_error(h, tmp_path):
    body = run_body("llama")
    body["training_job"]["ResourceConfig"]["InstanceCont"] = 2
    path = write_yaml(tmp_path / "bad.yaml", body)
    r = h.cli("submit", path, "--dry-run", "--set", "max_restarts=-1", "--idempotency-key", "has space")
    assert r.code == 1
    assert (
        r.err.splitlines()[0]
        == "sagewarden: dry run: the API would refuse this run (HTTP 400): invalid request"
    )
    assert "  training_job.ResourceConfig.InstanceCont: unknown field; did you mean InstanceCount?" in r.err
    assert "  policy.max_restarts: out of range" in r.err
    assert "  Idempotency-Key: must be 1-128 printable ASCII" in r.err
    assert h.requests == []


class _Quotas:
    """A Service Quotas client: `values` by quota name, or `error` raised on every read."""

    def __init__(self, values=None, error=None):
        self.values, self.error = values or {}, error

    def get_paginator(self, operation):
        quotas = self

        class Pages:
            def paginate(self, **kw):
                assert kw == {"ServiceCode": "sagemaker"}
                if quotas.error:
                    raise quotas.error
                if operation == "list_aws_default_service_quotas":
                    return [{"Quotas": [{"QuotaName": k, "Value": 0.0} for k in quotas.values]}]
                return [{"Quotas": [{"QuotaName": k, "Value": v} for k, v in quotas.values.items()]}]

        return Pages()


class _Session:
    def __init__(self, quotas):
        import boto3

        self._real = boto3.Session(
            aws_access_key_id="AKIAEXAMPLE", aws_secret_access_key="x", region_name="us-east-1"
        )
        self.region_name = "us-east-1"
        self.quotas = quotas

    def get_credentials(self):
        return self._real.get_credentials()

    def client(self, service, **kw):
        assert service == "service-quotas"
        return self.quotas


@pytest.mark.claim(
    "instance counts (and fallbacks, and warm pools) against the account's Service Quotas, when your credentials allow. A quota that cannot be read is a note, never an error."
)
def test_dry_run_checks_instance_counts_against_service_quotas(h, tmp_path):
    from botocore.exceptions import ClientError

    body = run_body("llama")
    body["policy"] = {"instance_fallbacks": [{"instance_type": "ml.p5.48xlarge", "instance_count": 1}]}
    path = write_yaml(tmp_path / "run.yaml", body)
    quotas = _Quotas(
        {"ml.p4d.24xlarge for training job usage": 1.0, "ml.p5.48xlarge for training job usage": 4.0}
    )
    r = h.cli("submit", path, "--dry-run", session=_Session(quotas))
    text = " ".join(r.out.split())
    assert r.code == 0
    assert (
        "warning [quota] 2 x ml.p4d.24xlarge needs 2 instances but the quota 'ml.p4d.24xlarge for training job usage' is 1"
        in text
    )
    assert (
        "note [quota] 1 x ml.p5.48xlarge fits the quota 'ml.p5.48xlarge for training job usage' (4)" in text
    )

    denied = ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "ListServiceQuotas")
    r = h.cli("submit", path, "--dry-run", session=_Session(_Quotas(error=denied)))
    assert r.code == 0  # a quota that cannot be read is a note, never an error
    assert (
        "note [quota] quotas not checked: cannot read Service Quotas (AccessDeniedException: no)"
        in " ".join(r.out.split())
    )


def test_dry_run_checks_a_spot_run_against_the_spot_training_quotas(h, tmp_path):
    """Issue 32 item 14: a managed spot run is checked against Service Quotas' spot training
    quotas, not the on-demand ones of the same instance type."""
    body = run_body("llama")
    body["training_job"]["EnableManagedSpotTraining"] = True
    body["training_job"]["StoppingCondition"]["MaxWaitTimeInSeconds"] = 6 * 86_400
    path = write_yaml(tmp_path / "run.yaml", body)
    quotas = _Quotas(
        {
            "ml.p4d.24xlarge for training job usage": 8.0,
            "ml.p4d.24xlarge for spot training job usage": 1.0,
            "Number of instances across all training jobs": 8.0,
            "Number of instances across all spot training jobs": 1.0,
        }
    )
    r = h.cli("submit", path, "--dry-run", session=_Session(quotas))
    text = " ".join(r.out.split())
    assert r.code == 0
    assert (
        "warning [quota] 2 x ml.p4d.24xlarge needs 2 instances but the quota "
        "'ml.p4d.24xlarge for spot training job usage' is 1" in text
    )
    assert "the quota 'Number of instances across all spot training jobs' is 1, below 2" in text
    assert "'ml.p4d.24xlarge for training job usage'" not in text


@pytest.mark.claim("`--limit N` (50), `--all`")
def test_list_and_ls_print_a_table_that_fits(h, acct):
    from sagewarden_cli import render

    a = h.submit(run_body("llama-8b-pretraining-longer"))
    h.advance(30)
    b = h.submit(run_body("gemma"))
    h.until(lambda: h.run(a)["status"] == "TRAINING" and h.run(b)["status"] == "TRAINING")
    for cmd in ("list", "ls"):
        r = h.cli(cmd)
        assert r.code == 0, r.err
        lines = r.out.splitlines()
        assert lines[0].split() == [
            "NAME",
            "ID",
            "STATUS",
            "ATTEMPT",
            "RESTARTS",
            "AGE",
            "DURATION",
            "ETTR",
            "EST.",
            "COST",
        ]
        assert [line.split()[1] for line in lines[1:]] == [b, a]  # newest first
        assert lines[2].split()[0] == "llama-8b-pretraining-longer"  # piped: nothing is cut
        assert "TRAINING" in lines[1] and re.search(r"\b\d+m( \d+s)?\b", lines[2])
        assert not REPR.search(r.out), r.out
    runs = h.cli("ls", json_out=True).json()
    on_terminal = render.run_table(runs, h.acct.clock.now_ms, terminal=True, max_width=100)
    assert all(len(line) <= 100 for line in on_terminal.splitlines())  # a terminal's width: it fits
    r = h.cli("list", "--status", "FAILED")
    assert r.code == 0 and r.out.strip() == "no runs"
    r = h.cli("ls", "--limit", "1")
    assert len(r.out.splitlines()) == 2 and "--all lists every run" in r.err


@pytest.mark.claim(
    "Only on a terminal are long names cut to its width; piped or redirected, nothing is; an id never is"
)
def test_ls_piped_never_cuts_names_or_ids_a_terminal_cuts_only_names(h, monkeypatch):
    from sagewarden_cli import render

    name = "llama-8b-pretrain-v2-ablate"  # as long as a run name can be (its job name has 63 chars)
    run_id = h.submit(run_body(name))
    monkeypatch.setenv("COLUMNS", "60")  # a narrow terminal's width, but stdout is a pipe here
    r = h.cli("ls")
    assert r.code == 0, r.err
    assert r.out.splitlines()[1].split()[:2] == [name, run_id] and "…" not in r.out

    runs = h.cli("ls", json_out=True).json()
    on_terminal = render.run_table(runs, h.acct.clock.now_ms, terminal=True, max_width=60).splitlines()
    assert on_terminal[1].split()[0].endswith("…") and on_terminal[1].split()[1] == run_id


@pytest.mark.claim(
    "No two live runs share a name (the API refuses the second), so a name means its one live run even when finished runs share it; when only finished runs share it, the command lists them with their ids and statuses and asks for the id."
)
def test_get_and_show_address_a_run_by_name_or_id(h):
    run_id = h.submit(run_body("llama-8b"))
    h.until(lambda: h.run(run_id)["status"] == "TRAINING")
    by_name = h.cli("get", "llama-8b")
    by_id = h.cli("show", run_id)
    assert by_name.code == by_id.code == 0
    assert by_name.out.splitlines()[0] == f"llama-8b  {run_id}  TRAINING"
    assert "attempt 1  2 x ml.p4d.24xlarge  from scratch  InProgress/Training  live" in by_name.out
    assert re.search(r"trained from \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(\d+m", by_name.out)
    assert not REPR.search(by_name.out), by_name.out
    assert by_id.out == by_name.out


def test_get_follow_prints_each_change_until_the_run_finishes(h, acct):
    acct.sagemaker.set_profile("llama-8b", SHORT)
    h.submit(run_body("llama-8b"))
    r = h.cli("get", "llama-8b", "--follow", "--interval", "60")
    assert r.code == 0, r.err
    follow = r.out.split("\n\n")[-1].splitlines()
    statuses = [line.split()[1] for line in follow if re.match(r"\d{4}-", line)]
    assert statuses[0] in ("STARTING", "TRAINING") and statuses[-1] == "SUCCEEDED"
    assert "TRAINING" in statuses
    assert len(follow) == len(set(follow))  # a line per change, no repeats
    assert not REPR.search(r.out), r.out

    r = h.cli("show", "llama-8b", "--watch", json_out=True)  # already finished: one object
    assert r.code == 0 and [json.loads(x)["status"] for x in r.out.splitlines()] == ["SUCCEEDED"]


def test_get_follow_shows_training_progress_checkpoints_and_learned_windows(h, acct):
    # 5 hours of training with nothing but progress: a checkpoint every 50 min, windows learned at 2 h
    acct.sagemaker.set_profile(
        "llama-8b", JobProfile(total_steps=3000, steps_per_minute=10, checkpoint_every_steps=500)
    )
    h.submit(run_body("llama-8b"))
    r = h.cli("get", "llama-8b", "--follow")
    assert r.code == 0, r.err
    follow = r.out.split("\n\n")[-1].splitlines()
    steps = [
        int(m.group(1))
        for line in follow
        if (m := re.search(r"Z  checkpoint step (\d+) \(written in \d+ s\)$", line))
    ]
    assert len(steps) >= 4 and steps == sorted(set(steps)) and steps[-1] == 3000, "\n".join(follow)
    (windows,) = [line for line in follow if "  windows " in line]
    assert re.search(r"Z  windows log silence \d+ min \(learned from this attempt's cadence\)$", windows)
    training = next(i for i, line in enumerate(follow) if "InProgress/Training" in line)
    done = next(i for i, line in enumerate(follow) if "  SUCCEEDED  " in line)
    first_ckpt = next(i for i, line in enumerate(follow) if "checkpoint step" in line)
    assert training < first_ckpt < follow.index(windows) < done  # as it happens, not at the end
    assert len(follow) == len(set(follow))

    acct.sagemaker.set_profile(
        "json-8b", JobProfile(total_steps=3000, steps_per_minute=10, checkpoint_every_steps=500)
    )
    h.submit(run_body("json-8b"))
    r = h.cli("get", "json-8b", "--follow", json_out=True)
    answers = [json.loads(line) for line in r.out.splitlines()]
    seen = [a["newest_checkpoint"]["step"] for a in answers if a.get("newest_checkpoint")]
    assert len(set(seen)) >= 4 and answers[-1]["status"] == "SUCCEEDED"  # one object per change


def test_events_follow_prints_every_event_once_until_the_run_finishes(h, acct):
    acct.sagemaker.set_profile("llama-8b", SHORT)
    acct.sagemaker.warm_pools.settings.quotas["ml.p4d.24xlarge"] = 8  # the job leaves a warm pool
    run_id = h.submit(run_body("llama-8b"))
    r = h.cli("events", "llama-8b", "--follow")
    assert r.code == 0, r.err
    everything = h.cli("events", run_id, json_out=True).json()
    assert r.out.splitlines() == [f"{e['at']}  {e['kind']:<8}  {e['summary']}" for e in everything]
    lines = r.out.splitlines()
    done = max(i for i, line in enumerate(lines) if "run SUCCEEDED" in line)
    # after the end, only its actions and the bookkeeping of the job's warm pool until it is gone
    after = [line.split("  ", 2)[1:] for line in lines[done + 1 :]]
    assert any("warm pool of" in summary for kind, summary in after if kind.strip() == "decision")
    assert all(
        kind.strip() == "action" or "(describe)" in summary or "warm pool of" in summary
        for kind, summary in after
    ), after
    tail = h.cli("events", run_id, "--tail", "2")
    assert tail.out.splitlines() == r.out.splitlines()[-2:]


@pytest.mark.claim("the last 5 lines of every host, (algo-N) prefixed")
def test_logs_prints_every_host_prefixed_in_numeric_order(h, acct):
    body = run_body("wide")
    body["training_job"]["ResourceConfig"]["InstanceCount"] = 11
    run_id = h.submit(body)
    h.until(lambda: h.run(run_id)["status"] == "TRAINING")
    h.advance(60)
    r = h.cli("logs", "wide")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    hosts = [int(m.group(1)) for m in (re.match(r"\(algo-(\d+)\) ", line) for line in lines) if m]
    assert len(hosts) == len(lines) and set(hosts) == set(range(1, 12))
    assert list(dict.fromkeys(hosts)) == list(range(1, 12))  # algo-2 before algo-10
    assert "==> attempt 1: sw-wide-" in r.err

    one = h.cli("logs", run_id, "--host", "10", "--timestamps")
    assert one.code == 0 and one.out
    assert all(
        re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(algo-10\) ", line) for line in one.out.splitlines()
    )
    tail = h.cli("logs", run_id, "--host", "3", "--tail", "2")
    assert len(tail.out.splitlines()) == 2
    missing = h.cli("logs", run_id, "--host", "12")
    assert missing.code == 4 and "no host algo-12" in missing.err and "algo-11" in missing.err
    js = h.cli("logs", run_id, "--host", "1", "--tail", "1", json_out=True)
    assert json.loads(js.out)["host"] == "algo-1"


def test_logs_follow_continues_into_the_next_attempt_until_the_run_ends(h, acct):
    acct.sagemaker.set_profile("llama-8b", SHORT)
    watchdog = (
        "[rank8] NCCL watchdog thread terminated with exception: Watchdog caught collective operation timeout"
    )
    acct.sagemaker.inject(
        Fault(
            kind="hardware", run="llama-8b", attempt=1, after_training_min=25, host=2, log_lines=(watchdog,)
        )
    )
    h.submit(run_body("llama-8b"))
    r = h.cli("logs", "llama-8b", "--follow")
    assert r.code == 0, r.err
    assert "==> attempt 1: sw-llama-8b-" in r.err and "==> attempt 2: sw-llama-8b-" in r.err
    assert "==> run llama-8b is SUCCEEDED" in r.err
    assert "waiting: run llama-8b has not launched a job yet" not in r.err
    first, second = r.out.split(f"(algo-2) {watchdog}\n")  # the crash, in the host's own stream
    assert re.search(r"\(algo-1\) step \d+ ", first) and re.search(r"\(algo-1\) step \d+ ", second)
    resumed = [int(x) for x in re.findall(r"\(algo-1\) step (\d+) ", second)]
    assert min(resumed) >= 200 and max(resumed) >= 500  # attempt 2 resumed from a checkpoint and finished


@pytest.mark.claim(
    "and reads the attempt that ended for 3 more minutes: its last lines, the crash, may land in CloudWatch Logs late"
)
def test_logs_follow_prints_the_last_lines_of_an_attempt_that_land_after_the_next_one_started(
    template, capsys
):
    """CloudWatch Logs ingests a line some time after it is written: here every line lands 3
    minutes late and the follow polls every minute. The crash's line lands after the replacement
    was launched (a hardware fault restarts at once); the follow keeps reading the ended
    attempt for a while, so the crash is printed (before: the old stream was read once, at the
    switch, and the crash was never shown)."""
    watchdog = (
        "[rank8] NCCL watchdog thread terminated with exception: Watchdog caught collective operation timeout"
    )
    late = {"logs": {"late_rate": 1, "late_s": 180}}
    with LocalAccount(template, store="memory", metric_delay=late) as acct:
        h = CliHarness(acct, capsys, sleep_minutes=1.0, max_sleeps=5_000)
        acct.sagemaker.set_profile("llama-8b", SHORT)
        acct.sagemaker.inject(
            Fault(
                kind="hardware",
                run="llama-8b",
                attempt=1,
                after_training_min=25,
                host=2,
                log_lines=(watchdog,),
            )
        )
        h.submit(run_body("llama-8b"))
        r = h.cli("logs", "llama-8b", "--follow", "--interval", "60")
        assert r.code == 0, r.err
        assert r.err.index("==> attempt 2: sw-llama-8b-") < r.err.index("==> run llama-8b is SUCCEEDED")
        assert f"(algo-2) {watchdog}" in r.out


@pytest.mark.claim("`4` not found (no such run, attempt or logs yet); `130` interrupted")
def test_logs_before_a_job_logs_and_of_an_unknown_attempt(h):
    run_id = h.submit(run_body("llama-8b"))  # the job is Starting: no stream yet
    r = h.cli("logs", run_id)
    assert r.code == 4 and "no logs yet for job sw-llama-8b-" in r.err and "use --follow" in r.err
    r = h.cli("logs", run_id, "--attempt", "3")
    assert r.code == 4 and "has no attempt 3 (it has 1)" in r.err


@pytest.mark.claim(
    "stop one or more runs; asks first. A run that already finished is not asked about: it is named with its status (`run X already finished (SUCCEEDED)`), exit 1"
)
def test_cancel_asks_first_and_takes_several_runs(h, acct):
    a, b, c = (h.submit(run_body(n)) for n in ("a1", "b2", "c3"))
    r = h.cli("cancel", "a1", b, stdin="n\n")
    assert r.code == 1 and "Cancel 2 run(s): a1 (" in r.err and "nothing cancelled" in r.err
    assert h.run(a)["status"] == "STARTING"
    r = h.cli("cancel", "a1")  # no answer at all (stdin closed): refuse, do not guess
    assert r.code == 2 and "pass --yes" in r.err
    r = h.cli("cancel", "a1", b, stdin="y\n")
    assert r.code == 0, r.err
    assert [line.split()[2] for line in r.out.splitlines()] == ["STOPPING;", "STOPPING;"]
    h.until(lambda: h.run(a)["status"] == "CANCELLED" and h.run(b)["status"] == "CANCELLED")
    r = h.cli("cancel", "a1", c, "--yes")  # a1 finished: said so (exit 1, the API's 409); c3 cancelled
    assert r.code == 1
    assert f"sagewarden: run a1 ({a}) already finished (CANCELLED): nothing to cancel" in r.err
    assert h.run(c)["status"] == "STOPPING"


@pytest.mark.claim(
    "stop one or more runs; asks first. A run that already finished is not asked about: it is named with its status (`run X already finished (SUCCEEDED)`), exit 1"
)
def test_cancel_of_a_finished_run_says_so_without_asking(h, acct):
    acct.sagemaker.set_profile("done", SHORT)
    run_id = h.submit(run_body("done"))
    h.until(lambda: h.run(run_id)["status"] == "SUCCEEDED")
    r = h.cli("cancel", "done")  # no --yes and nothing on stdin: a prompt would refuse (exit 2)
    assert r.code == 1 and "?" not in r.err
    assert r.err == f"sagewarden: run done ({run_id}) already finished (SUCCEEDED): nothing to cancel\n"
    assert ("POST", f"/runs/{run_id}/cancel") not in h.requests
    r = h.cli("cancel", "done", json_out=True)
    assert r.code == 1 and r.json() == []


@pytest.mark.claim(
    "stop one or more runs; asks first. A run that already finished is not asked about: it is named with its status (`run X already finished (SUCCEEDED)`), exit 1"
)
def test_cancel_of_a_run_that_finishes_after_it_was_read_says_so(h, acct):
    acct.sagemaker.set_profile("racer", SHORT)
    run_id = h.submit(run_body("racer"))

    def finishes_first(method, url, headers, body):
        if method == "POST" and url.endswith("/cancel"):  # it succeeds between the GET and the POST
            h.until(lambda: h.run(run_id)["status"] == "SUCCEEDED")
        return h.transport(method, url, headers, body)

    r = h.cli("cancel", "racer", "--yes", transport=finishes_first)
    assert r.code == 1
    assert r.err == f"sagewarden: run racer ({run_id}) already finished (SUCCEEDED): nothing to cancel\n"


@pytest.mark.claim(
    "`POST /runs/{id}/resume`: a FAILED or CANCELLED run continues from its newest checkpoint with a fresh restart budget"
)
def test_resume_a_failed_or_cancelled_run(h, acct):
    run_id = h.submit(run_body("llama-8b"))
    r = h.cli("resume", "llama-8b")
    assert r.code == 1 and "HTTP 409" in r.err and "only a FAILED or CANCELLED run can be resumed" in r.err
    assert r.err.count("only a FAILED or CANCELLED") == 1, r.err  # said once, not twice
    h.cli("cancel", run_id, "--yes")
    h.until(lambda: h.run(run_id)["status"] == "CANCELLED")
    r = h.cli("resume", "llama-8b")
    assert r.code == 0, r.err
    assert r.out.startswith(f"llama-8b  {run_id}  ") and "sagewarden get llama-8b --follow" in r.err
    assert ("POST", f"/runs/{run_id}/resume") in h.requests
    r = h.cli("resume", "01KE5Q86000000000000000000")
    assert r.code == 4 and "no run with id 01KE5Q86000000000000000000" in r.err


@pytest.mark.claim(
    "No two live runs share a name (the API refuses the second), so a name means its one live run even when finished runs share it; when only finished runs share it, the command lists them with their ids and statuses and asks for the id."
)
def test_a_name_resolves_to_its_one_live_run_when_finished_runs_share_it(h):
    """Issue 16 item 9: a repeated name made every `get`/`cancel` by name demand the id, even
    with only one of the runs live."""
    first = h.submit(run_body("llama-8b"))
    h.cli("cancel", first, "--yes")
    h.until(lambda: h.run(first)["status"] == "CANCELLED")
    second = h.submit(run_body("llama-8b"))
    r = h.cli("get", "llama-8b")
    assert r.code == 0 and r.out.splitlines()[0].startswith(f"llama-8b  {second}  "), r.err
    r = h.cli("cancel", "llama-8b", "--yes")
    assert r.code == 0 and h.run(second)["status"] == "STOPPING"


@pytest.mark.claim(
    "No two live runs share a name (the API refuses the second), so a name means its one live run even when finished runs share it; when only finished runs share it, the command lists them with their ids and statuses and asks for the id."
)
@pytest.mark.claim(
    "`2` usage or configuration (arguments, an unreadable file, a bad `--set`, an unknown profile, no credentials, region or API URL, an ambiguous run name)"
)
def test_a_run_name_that_is_unknown_or_ambiguous(h):
    first = h.submit(run_body("llama-8b"))
    h.cli("cancel", first, "--yes")
    h.until(lambda: h.run(first)["status"] == "CANCELLED")
    second = h.submit(run_body("llama-8b"))
    h.cli("cancel", second, "--yes")
    h.until(lambda: h.run(second)["status"] == "CANCELLED")
    r = h.cli("get", "llama-8b")  # two finished runs share the name: which one is meant?
    assert r.code == 2
    listed = {f"{first} (CANCELLED)", f"{second} (CANCELLED)"}
    assert r.err.startswith("sagewarden: 2 runs are named 'llama-8b': ") and r.err.count("\n") == 1
    assert set(r.err.split(": ", 2)[2].split("; ")[0].split(", ")) == listed
    assert r.err.strip().endswith("; give the run id instead")
    r = h.cli("logs", "gemma")
    assert r.code == 4 and "no run named 'gemma'" in r.err
    r = h.cli("get", "01KE5Q86000000000000000000")
    assert r.code == 4 and r.err.strip() == "sagewarden: no run with id 01KE5Q86000000000000000000"
    r = h.cli("events", "01KE5Q86000000000000000000")
    assert r.code == 4 and "HTTP 404" in r.err


@pytest.mark.claim("Global options work before or after the command")
def test_global_options_work_after_the_command(h):
    run_id = h.submit(run_body("llama-8b"))
    r = h.cli("get", run_id, "--json", "--api-url", API, api=False)
    assert r.code == 0 and r.json()["run_id"] == run_id
    r = h.cli("--json", "list", "--api-url", API, api=False)  # one before, one after
    assert r.code == 0 and [x["run_id"] for x in r.json()] == [run_id]


@pytest.mark.claim(
    "give the Young/Daly interval √(2 × write time × MTBF) and the GPU-hours per day it would save over the current interval"
)
def test_get_shows_the_checkpoint_interval_advice(h, acct):
    acct.sagemaker.set_profile("llama-8b", SHORT)
    acct.sagemaker.inject(Fault(kind="hardware", run="llama-8b", attempt=1, after_training_min=45, host=2))
    run_id = h.submit(run_body("llama-8b"))
    h.until(lambda: h.run(run_id)["status"] == "SUCCEEDED")
    advice = h.run(run_id)["checkpoint_advice"]
    r = h.cli("get", "llama-8b")
    assert r.code == 0, r.err
    shown = re.search(r"\n  advice\s+(Checkpoint interval: every \d+ min.*)", r.out)
    assert shown, r.out
    assert advice["summary"].startswith(shown.group(1)[:40])
    assert advice["faults"] == 1 and advice["observed_interval_min"] is not None


def _windows_row(out: str) -> str:
    """The `windows` row of `sagewarden get`, its wrapped lines joined (wrapping follows the width)."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  windows "))
    row = [lines[start][len("  windows ") :]]
    for line in lines[start + 1 :]:
        if not line.startswith(" " * 13):
            break
        row.append(line)
    return " ".join(" ".join(row).split())


def test_get_shows_the_hang_windows_in_force_and_where_they_come_from(h, acct):
    acct.sagemaker.set_profile("llama-8b", JobProfile(total_steps=10**7, steps_per_minute=10))
    acct.sagemaker.inject(Fault(kind="hardware", run="llama-8b", attempt=1, after_training_min=240, host=2))
    run_id = h.submit(run_body("llama-8b"))
    h.until(lambda: (h.run(run_id)["hang_windows"] or {}).get("log_silence", {}).get("source") == "learned")
    learned = h.run(run_id)["hang_windows"]["log_silence"]["minutes"]
    assert learned < 30  # the job logs every minute: shorter than the policy's 30
    r = h.cli("get", "llama-8b")
    assert _windows_row(r.out) == f"log silence {learned} min (learned from this attempt's cadence)"

    # the hardware fault ends attempt 1; attempt 2 on the same instances starts with that window
    def attempt_two_training():
        run = h.run(run_id)
        cur = run["attempts"][-1]
        return cur["number"] == 2 and cur["secondary_status"] == "Training"

    h.until(attempt_two_training)
    run = h.run(run_id)
    assert run["hang_windows"]["log_silence"] == {"minutes": learned, "source": "carried"}
    assert run["attempts"][-1]["learned_windows_min"] == {}  # not its own yet
    r = h.cli("get", "llama-8b")
    assert (
        _windows_row(r.out) == f"log silence {learned} min (learned by an earlier attempt on these instances)"
    )
    h.cli("cancel", run_id, "--yes")


def test_one_cost_figure_in_ls_get_and_the_attempt_line_while_training(h, acct):
    """Issue 16 item 3: `ls` showed $0.00 for a run that had trained for hours while `get` showed
    a figure for the live attempt and its attempt line `est. $0.00`."""
    acct.sagemaker.set_profile("llama-8b", JobProfile(total_steps=100_000, steps_per_minute=10))
    run_id = h.submit(run_body("llama-8b"))
    h.until(lambda: h.run(run_id)["status"] == "TRAINING")
    h.advance(180)
    listed = h.cli("ls", json_out=True).json()
    shown = h.cli("get", run_id, json_out=True).json()
    (row,) = [r for r in listed if r["run_id"] == run_id]
    (attempt,) = shown["attempts"]
    assert row["estimated_cost_usd"] > 100  # ~3 h of 1 x p4d at $37.69/h
    assert row["estimated_cost_usd"] == pytest.approx(shown["estimated_cost_usd"], rel=0.02)
    assert attempt["estimated_cost_usd"] == pytest.approx(shown["estimated_cost_usd"], rel=0.02)
    # and the text views print that one figure
    table = h.cli("ls").out
    view = h.cli("get", run_id).out
    money = re.search(r"\$[0-9,]+", next(line for line in table.splitlines() if run_id in line)).group(0)
    assert re.search(rf"est\. cost +{re.escape(money)} so far", view), view
    assert f"est. {money}" in view  # the attempt line


@pytest.mark.claim(
    "the CloudFormation stack (at most 25 characters: letters, digits, hyphens). The CLI finds its API by it (`--stack`)."
)
@pytest.mark.claim(
    "It finds the API from `--api-url`, `$SAGEWARDEN_API_URL`, or the `ApiUrl` output of the stack (`--stack`, `$SAGEWARDEN_STACK`, default `Sagewarden`)"
)
def test_the_cli_finds_the_api_of_a_second_deployment_by_its_stack_name(h, monkeypatch):
    """Two deployments side by side: --stack or $SAGEWARDEN_STACK picks the one whose ApiUrl to use."""
    import boto3

    cloudformation = boto3.client("cloudformation", region_name="us-east-1")
    for stack, url in (
        ("Sagewarden", "https://first111.execute-api.us-east-1.amazonaws.com/prod"),
        ("SagewardenTeamB", API),
    ):
        template = {
            "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
            "Outputs": {"ApiUrl": {"Value": url}},
        }
        cloudformation.create_stack(StackName=stack, TemplateBody=json.dumps(template))
    hosts: list[str] = []

    def recording(method, url, headers, body):
        hosts.append(url.split("/")[2])
        return h.transport(method, url, headers, body)

    monkeypatch.delenv("SAGEWARDEN_API_URL", raising=False)
    monkeypatch.delenv("SAGEWARDEN_STACK", raising=False)
    readme = documentation()
    section = readme.split("### Two deployments side by side\n", 1)[1].split("\n### ", 1)[0]
    (command,) = [line for line in section.splitlines() if line.startswith("sagewarden ")]
    argv = shlex.split(command, comments=True)[1:]
    assert argv == ["--stack", "SagewardenTeamB", "ls"]
    assert h.cli(*argv, api=False, transport=recording).code == 0
    monkeypatch.setenv("SAGEWARDEN_STACK", "SagewardenTeamB")
    assert h.cli("ls", api=False, transport=recording).code == 0
    monkeypatch.delenv("SAGEWARDEN_STACK")
    assert h.cli("ls", api=False, transport=recording).code == 0

    assert hosts == [
        "abc123.execute-api.us-east-1.amazonaws.com",
        "abc123.execute-api.us-east-1.amazonaws.com",
        "first111.execute-api.us-east-1.amazonaws.com",
    ]


def test_get_and_ls_show_a_deferral_and_its_whole_reason(h, acct, monkeypatch):
    """Issue 16 item 2: a run waiting on an observation that failed said nothing about it (the
    reason was stored, never shown): `get` prints it whole, `ls` marks the status."""
    from sagewarden.adapters.s3_checkpoint_finder import CheckpointLookupError

    finder = acct.supervisor.checkpoints
    reason = "cannot list s3://sagewarden-drill/llama-8b/checkpoints/: S3 error SlowDown: " + "x" * 150

    class Throttled:
        def __getattr__(self, name):
            if name == "latest":

                def fail(*_, **__):
                    raise CheckpointLookupError(reason, code="SlowDown")

                return fail
            return getattr(finder, name)

    monkeypatch.setattr(acct.supervisor, "checkpoints", Throttled())
    run_id = h.submit(run_body("llama-8b"))
    r = h.cli("get", "llama-8b")
    assert r.code == 0, r.err
    text = " ".join(r.out.split())
    assert "deferred since " in text and "S3 error SlowDown: " + "x" * 150 + "; retried every minute" in text
    r = h.cli("get", "llama-8b", json_out=True)
    assert reason in r.json()["deferred"]["reason"] and r.json()["deferred"]["permanent"] is False
    r = h.cli("ls")
    (row,) = [line for line in r.out.splitlines() if run_id in line]
    assert "SUBMITTED (deferred)" in row


def test_get_shows_where_retention_archives_and_the_storage_warning(h, acct):
    from drill.account.local import BUCKET

    acct.s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    body = run_body("llama-8b")
    body["policy"] = {"checkpoint_keep": 2}
    run_id = h.submit(body)
    r = h.cli("get", "llama-8b")
    assert r.code == 0, r.err
    flat = " ".join(r.out.split())
    assert f"retention archives to s3://{BUCKET}/llama-8b/checkpoints-archive/{run_id}/" in flat, r.out
    assert "retention warning: the checkpoint bucket" in flat and "NoncurrentVersionExpiration" in flat
