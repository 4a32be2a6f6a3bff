"""Who may do what, and what the API, the audit trail and the alerts show of a run's secrets
(issue 21 part 4), through the template's IAM-authorised routes and the real handler."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from drill.account.local import BUCKET, CALLER, EXECUTION_ROLE, LocalAccount
from drill.scenarios.spec import default_training_job
from drill.sim.model import Fault, JobProfile
from sagewarden import keys
from sagewarden.domain.vocabulary.redaction import REDACTED
from tests.scenarios.cli_support import CliHarness

ACCT = "123456789012"
ALICE_ROLE = f"arn:aws:iam::{ACCT}:role/alice"
BOB_ROLE = f"arn:aws:iam::{ACCT}:role/bob"
TEAM_SESSION_1 = f"arn:aws:sts::{ACCT}:assumed-role/ml-team/alice@example.com"
TEAM_SESSION_2 = f"arn:aws:sts::{ACCT}:assumed-role/ml-team/ci-build-4711"
OTHER_TEAM_SESSION = f"arn:aws:sts::{ACCT}:assumed-role/vision-team/alice@example.com"
ADMIN_ROLE = f"arn:aws:iam::{ACCT}:role/platform/platform-admin"
ADMIN_SESSION = f"arn:aws:sts::{ACCT}:assumed-role/platform-admin/oncall"

HF_TOKEN = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
WANDB_KEY = "0123456789abcdef0123456789abcdef01234567"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
HP_KEY = "sk-live-hyperparameter-secret-42"
DEFAULT_TOKEN = "ghp_policyDefaultSecretValue000111"
SECRETS = (HF_TOKEN, WANDB_KEY, AWS_SECRET, HP_KEY, DEFAULT_TOKEN)


def _body(name="llama-8b", **job_changes):
    job = default_training_job(name, BUCKET, EXECUTION_ROLE)
    job.update(job_changes)
    return {"name": name, "training_job": job}


def _secret_body(name="llama-8b"):
    body = _body(
        name,
        Environment={
            "HF_TOKEN": HF_TOKEN,
            "WANDB_API_KEY": WANDB_KEY,
            "AWS_SECRET_ACCESS_KEY": AWS_SECRET,
            "db_password": "pw1",  # short: redacted by key only
            "EPOCHS": "3",
        },
        HyperParameters={"api_key": HP_KEY, "lr": "0.0003"},
    )
    body["policy"] = {"environment_defaults": {"GITHUB_TOKEN": DEFAULT_TOKEN, "NCCL_DEBUG": "WARN"}}
    return body


@pytest.fixture
def acct(template, monkeypatch):
    with LocalAccount(template, store="memory") as account:
        monkeypatch.setenv(keys.ENV_ADMIN_ROLE_ARNS, json.dumps([ADMIN_ROLE]))
        yield account


def _submit(acct, caller, body=None):
    status, run = acct.api("POST", "/runs", body=body or _body(), caller_arn=caller)
    assert status == 201, run
    return run


def _cancelled(acct, caller) -> str:
    rid = _submit(acct, caller)["run_id"]
    assert acct.api("POST", f"/runs/{rid}/cancel", caller_arn=caller)[0] == 202
    _advance(acct, 15)
    assert acct.api("GET", f"/runs/{rid}")[1]["status"] == "CANCELLED"
    return str(rid)


def _events(acct, rid, caller=ALICE_ROLE):
    status, body = acct.api("GET", f"/runs/{rid}/events", query={"limit": "100"}, caller_arn=caller)
    assert status == 200
    return body["events"]


# --- ownership: cancel and resume -------------------------------------------------------------


@pytest.mark.claim("only the owner or an admin may cancel or resume the run")
@pytest.mark.claim("403 unless the caller owns the run or is an admin.")
@pytest.mark.claim("Only the run's owner or an admin may cancel or resume it; anyone else gets **403**")
def test_cancel_by_a_principal_that_is_neither_owner_nor_admin_is_403_and_changes_nothing(acct):
    rid = _submit(acct, ALICE_ROLE)["run_id"]
    status, body = acct.api("POST", f"/runs/{rid}/cancel", caller_arn=BOB_ROLE)
    assert status == 403
    assert set(body) == {"message"}
    assert ALICE_ROLE in body["message"] and BOB_ROLE in body["message"] and "cancel" in body["message"]
    run = acct.api("GET", f"/runs/{rid}", caller_arn=BOB_ROLE)[1]
    assert run["status"] == "STARTING" and run["attempts"][-1]["stop_intent"] is None
    assert not any("cancel requested" in e["summary"] for e in _events(acct, rid))
    assert acct.api("POST", f"/runs/{rid}/cancel", caller_arn=ALICE_ROLE)[0] == 202


@pytest.mark.claim("only the owner or an admin may cancel or resume the run")
@pytest.mark.claim("403 unless the caller owns the run or is an admin.")
@pytest.mark.claim("Only the run's owner or an admin may cancel or resume it; anyone else gets **403**")
def test_resume_by_a_principal_that_is_neither_owner_nor_admin_is_403_and_changes_nothing(acct):
    rid = _cancelled(acct, ALICE_ROLE)
    jobs = len(acct.sagemaker.jobs())
    status, body = acct.api("POST", f"/runs/{rid}/resume", caller_arn=BOB_ROLE)
    assert status == 403 and "resume" in body["message"]
    assert acct.api("GET", f"/runs/{rid}")[1]["status"] == "CANCELLED"
    assert len(acct.sagemaker.jobs()) == jobs
    assert not any("resume requested" in e["summary"] for e in _events(acct, rid))
    assert acct.api("POST", f"/runs/{rid}/resume", caller_arn=ALICE_ROLE)[0] == 202


@pytest.mark.claim("whoever can assume the role that submitted a run may cancel and resume it")
def test_any_session_of_the_role_that_submitted_may_cancel_and_resume(acct):
    rid = _submit(acct, TEAM_SESSION_1)["run_id"]
    assert acct.api("POST", f"/runs/{rid}/cancel", caller_arn=OTHER_TEAM_SESSION)[0] == 403
    assert acct.api("POST", f"/runs/{rid}/cancel", caller_arn=TEAM_SESSION_2)[0] == 202
    _advance(acct, 15)
    assert acct.api("POST", f"/runs/{rid}/resume", caller_arn=OTHER_TEAM_SESSION)[0] == 403
    assert acct.api("POST", f"/runs/{rid}/resume", caller_arn=f"arn:aws:iam::{ACCT}:role/ml-team")[0] == 202


def test_iam_users_own_their_runs_by_user_name(acct):
    carol, dave = f"arn:aws:iam::{ACCT}:user/carol", f"arn:aws:iam::{ACCT}:user/dave"
    rid = _submit(acct, carol)["run_id"]
    assert acct.api("POST", f"/runs/{rid}/cancel", caller_arn=dave)[0] == 403
    # a role session named like the user is not the user
    assert (
        acct.api("POST", f"/runs/{rid}/cancel", caller_arn=f"arn:aws:sts::{ACCT}:assumed-role/x/carol")[0]
        == 403
    )
    assert acct.api("POST", f"/runs/{rid}/cancel", caller_arn=carol)[0] == 202


@pytest.mark.claim("The same role name in another account is someone else.")
def test_the_same_role_name_in_another_account_owns_nothing(acct):
    rid = _submit(acct, TEAM_SESSION_1)["run_id"]
    stranger = "arn:aws:sts::210987654321:assumed-role/ml-team/alice@example.com"
    assert acct.api("POST", f"/runs/{rid}/cancel", caller_arn=stranger)[0] == 403


@pytest.mark.claim("IAM roles whose sessions may cancel and resume any run (everyone else: only their own")
def test_an_admin_role_may_cancel_and_resume_any_run(acct):
    rid = _submit(acct, ALICE_ROLE)["run_id"]
    status, run = acct.api("POST", f"/runs/{rid}/cancel", caller_arn=ADMIN_SESSION)
    assert status == 202 and run["owner"] == ALICE_ROLE
    _advance(acct, 15)
    assert acct.api("POST", f"/runs/{rid}/resume", caller_arn=ADMIN_SESSION)[0] == 202
    assert any(f"cancel requested by {ADMIN_SESSION}" in e["summary"] for e in _events(acct, rid))


@pytest.mark.claim("Every caller the API's IAM policy admits may list runs and read any run and its events")
def test_reading_stays_open_to_every_caller_the_api_admits(acct):
    rid = _submit(acct, ALICE_ROLE)["run_id"]
    assert acct.api("GET", f"/runs/{rid}", caller_arn=BOB_ROLE)[0] == 200
    assert acct.api("GET", f"/runs/{rid}/events", caller_arn=BOB_ROLE)[0] == 200
    assert [r["run_id"] for r in acct.api("GET", "/runs", caller_arn=BOB_ROLE)[1]["runs"]] == [rid]


@pytest.mark.claim("The CLI prints that message as one line.")
def test_the_cli_prints_one_clear_line_for_a_403(acct, capsys):
    rid = _submit(acct, ALICE_ROLE)["run_id"]  # the CLI harness signs as the drill's ml-engineer role
    cli = CliHarness(acct, capsys)
    result = cli.cli("cancel", rid, "--yes")
    assert result.code != 0
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert len(lines) == 1, result.err
    assert "HTTP 403: only the run's owner" in lines[0] and ALICE_ROLE in lines[0], lines[0]
    assert acct.api("GET", f"/runs/{rid}")[1]["status"] == "STARTING"


# --- checkpoints another principal's run may not touch (issue 32 item 5) ------------------------

# a checkpoint every 5 minutes of training, written in 30 s: a run writes several in an hour
FAST = JobProfile(
    total_steps=100_000, steps_per_minute=10, checkpoint_every_steps=50, checkpoint_write_seconds=30
)
PREFIX = f"s3://{BUCKET}/llama-8b/checkpoints/"


def _retaining(name, prefix=PREFIX):
    body = _body(name)
    body["training_job"]["CheckpointConfig"]["S3Uri"] = prefix
    body["policy"] = {"checkpoint_keep": 1, "checkpoint_retired": "delete", "checkpoint_layout": "hf"}
    return body


def _complete(acct, prefix=PREFIX) -> set[str]:
    """The checkpoint directories under ``prefix`` that hold their trainer_state.json."""
    root = prefix.removeprefix(f"s3://{BUCKET}/")
    keys_ = [
        o["Key"]
        for page in acct.s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=root)
        for o in page.get("Contents", ())
    ]
    return {k[len(root) :].split("/")[0] for k in keys_ if k.endswith("/trainer_state.json")}


def _put_checkpoint(acct, step, prefix=PREFIX):
    """A complete checkpoint written by a job that is not one of the runs' (virtual now)."""
    root = prefix.removeprefix(f"s3://{BUCKET}/")
    for name in ("model.safetensors", "trainer_state.json"):
        acct.s3.put_object(Bucket=BUCKET, Key=f"{root}checkpoint-{step}/{name}", Body=b"{}")


def _cancelled_with_checkpoints(acct, caller):
    acct.sagemaker.set_profile("llama-8b", FAST)
    rid = _submit(acct, caller)["run_id"]
    _advance(acct, 45)
    assert acct.api("POST", f"/runs/{rid}/cancel", caller_arn=caller)[0] == 202
    _advance(acct, 15)
    assert acct.api("GET", f"/runs/{rid}")[1]["status"] == "CANCELLED"
    written = _complete(acct)
    assert len(written) >= 4, written
    return rid, written


@pytest.mark.claim(
    "**409** too when another live run holds the name or an overlapping checkpoint prefix, when a retention archive overlaps another live run's checkpoint prefix (or the checkpoint prefix another live run's archive), or when a resumable run of another principal holds the checkpoint prefix (`conflict` names the run, never its owner)"
)
@pytest.mark.claim(
    "a FAILED or CANCELLED run that may still be resumed (30 days, [Resuming a run](recovery.md#resuming-a-run)) holds its checkpoint prefix against runs of other principals, at the prefix and inside it (409 naming it, not its owner); runs of the same principal and an admin's may take it"
)
def test_another_principal_may_not_take_a_resumable_runs_checkpoint_prefix(acct):
    """Measured before: B's run on A's cancelled run's prefix (checkpoint_keep 1, delete) was
    accepted and its retention deleted 6 of 6 of A's checkpoint directories. Now it is a 409
    naming A's run -- not A -- and A's checkpoints stay; A resumes from its own newest."""
    rid, alices = _cancelled_with_checkpoints(acct, ALICE_ROLE)
    jobs = len(acct.sagemaker.jobs())
    for prefix in (PREFIX, PREFIX + "bob/"):
        status, body = acct.api("POST", "/runs", body=_retaining("bob-run", prefix), caller_arn=BOB_ROLE)
        assert status == 409, body
        assert body["conflict"] == {
            "run_id": rid,
            "name": "llama-8b",
            "status": "CANCELLED",
            "on": "checkpoint_prefix",
        }
        assert "may still be resumed" in body["message"] and "alice" not in json.dumps(body).lower()
    assert len(acct.sagemaker.jobs()) == jobs and _complete(acct) == alices
    status, resumed = acct.api("POST", f"/runs/{rid}/resume", caller_arn=ALICE_ROLE)
    assert status == 202
    newest = max(alices, key=lambda d: int(d.removeprefix("checkpoint-")))
    assert resumed["attempts"][-1]["resumed_from"]["uri"] == PREFIX + newest + "/"


@pytest.mark.claim(
    "a FAILED or CANCELLED run that may still be resumed (30 days, [Resuming a run](recovery.md#resuming-a-run)) holds its checkpoint prefix against runs of other principals, at the prefix and inside it (409 naming it, not its owner); runs of the same principal and an admin's may take it"
)
def test_the_same_principal_or_an_admin_may_take_a_resumable_runs_prefix(acct):
    _cancelled_with_checkpoints(acct, TEAM_SESSION_1)
    status, body = acct.api("POST", "/runs", body=_retaining("next-try"), caller_arn=TEAM_SESSION_2)
    assert status == 201, body  # another session of the same role
    assert acct.api("POST", f"/runs/{body['run_id']}/cancel", caller_arn=TEAM_SESSION_2)[0] == 202
    _advance(acct, 15)
    status, body = acct.api("POST", "/runs", body=_retaining("oncall-fix"), caller_arn=ADMIN_SESSION)
    assert status == 201, body


@pytest.mark.claim("Only what the run's own attempts wrote.")
def test_retention_never_deletes_what_was_there_before_the_runs_first_attempt(acct):
    """Measured before: on a prefix no run had used, 4 of 5 directories were deleted though the
    run's job never wrote one. Only what its own attempts wrote goes."""
    for step in (100, 200, 300, 400, 500):
        _put_checkpoint(acct, step)
    acct.clock.advance_by(60_000)
    before = _complete(acct)
    acct.sagemaker.set_profile("llama-8b", FAST)
    rid = _submit(acct, BOB_ROLE, _retaining("llama-8b"))["run_id"]
    _advance(acct, 60)
    run = acct.api("GET", f"/runs/{rid}")[1]
    assert run["status"] == "TRAINING" and run["attempts"][0]["resumed_from"]["step"] == 500
    now = _complete(acct)
    assert before <= now  # every directory that was there before is still complete
    own = sorted(int(d.removeprefix("checkpoint-")) for d in now - before)
    # the run's own older ones were retired: what is left is the newest, the one kept beside it
    # while it settles, and one the same pass verified
    assert own and own[0] > 600 and len(own) <= 3, own
    assert any("retiring checkpoint-550" in e["summary"] for e in _events(acct, rid, BOB_ROLE))


@pytest.mark.claim(
    "409 with the reason if the run is not FAILED or CANCELLED, it ended more than 30 days ago, its checkpoints cannot be read right now, its newest checkpoint was written after it ended (by another run or job: a resume never continues another run's training), or another live run took its name or checkpoint prefix meanwhile; nothing is stored then"
)
@pytest.mark.claim(
    "A checkpoint written since, by another run or by a job that is not one of the run's, makes the resume a 409 that names it and when it was written"
)
def test_a_resume_never_continues_from_a_checkpoint_written_after_the_run_ended(acct):
    """Measured before: A's resume answered 202 and silently continued from B's checkpoint."""
    rid, _ = _cancelled_with_checkpoints(acct, ALICE_ROLE)
    acct.clock.advance_by(10 * 60_000)
    _put_checkpoint(acct, 99_000)  # a job that is not one of A's wrote here since A ended
    jobs = len(acct.sagemaker.jobs())
    status, body = acct.api("POST", f"/runs/{rid}/resume", caller_arn=ALICE_ROLE)
    assert status == 409, body
    assert "checkpoint-99000" in body["message"] and "after the run ended" in body["message"]
    assert len(acct.sagemaker.jobs()) == jobs and acct.api("GET", f"/runs/{rid}")[1]["status"] == "CANCELLED"


# --- redaction --------------------------------------------------------------------------------


def _assert_no_secret(payload):
    text = json.dumps(payload)
    leaked = [s for s in SECRETS if s in text]
    assert not leaked, f"secret values in {text[:400]}"


@pytest.mark.claim("reads `<redacted>` in every API answer")
@pytest.mark.claim("The stored request keeps the real values, because every attempt is launched with them")
def test_secret_values_never_leave_the_api_and_the_launched_job_keeps_them(acct):
    status, submitted = acct.api("POST", "/runs", body=_secret_body(), caller_arn=ALICE_ROLE)
    assert status == 201
    rid = submitted["run_id"]
    _, got = acct.api("GET", f"/runs/{rid}")
    _, listed = acct.api("GET", "/runs")
    events = _events(acct, rid)
    _, cancelled = acct.api("POST", f"/runs/{rid}/cancel", caller_arn=ALICE_ROLE)
    _advance(acct, 15)
    _, resumed = acct.api("POST", f"/runs/{rid}/resume", caller_arn=ALICE_ROLE)
    for answer in (submitted, got, listed, events, cancelled, resumed, _events(acct, rid)):
        _assert_no_secret(answer)
    env = got["training_job"]["Environment"]
    assert env == {
        "HF_TOKEN": REDACTED,
        "WANDB_API_KEY": REDACTED,
        "AWS_SECRET_ACCESS_KEY": REDACTED,
        "db_password": REDACTED,
        "EPOCHS": "3",
    }
    assert got["training_job"]["HyperParameters"] == {"api_key": REDACTED, "lr": "0.0003"}
    assert got["policy"]["environment_defaults"] == {"GITHUB_TOKEN": REDACTED, "NCCL_DEBUG": "WARN"}
    # the stored run keeps the real values: every attempt is launched with them
    for job in acct.sagemaker.jobs():
        described = acct.sagemaker.describe_training_job(TrainingJobName=job.name)
        assert described["Environment"]["HF_TOKEN"] == HF_TOKEN
        assert described["Environment"]["GITHUB_TOKEN"] == DEFAULT_TOKEN
        assert described["HyperParameters"]["api_key"] == HP_KEY


@pytest.mark.claim("Such a value of 8 characters or more is also replaced wherever it appears in text")
@pytest.mark.claim("the audit trail (redacted before it is stored) and the subject and body of every alert")
def test_a_secret_echoed_in_failure_text_and_logs_is_scrubbed_from_audit_alerts_and_api(acct):
    leak = f"RuntimeError: login to the hub failed with token {HF_TOKEN} (401)"
    acct.sagemaker.inject(
        Fault(
            kind="algorithm_error",
            run="llama-8b",
            after_training_min=5,
            failure_reason=f"AlgorithmError: {leak}",
            log_lines=(f"env: HF_TOKEN={HF_TOKEN} WANDB_API_KEY={WANDB_KEY}", leak),
        )
    )
    rid = _submit(acct, ALICE_ROLE, _secret_body())["run_id"]
    _advance(acct, 60)
    _, run = acct.api("GET", f"/runs/{rid}")
    assert run["status"] == "FAILED", run["status"]
    assert any(REDACTED in (a["failure_reason"] or "") for a in run["attempts"])
    _assert_no_secret(run)
    events = _events(acct, rid)
    _assert_no_secret(events)
    assert any(REDACTED in json.dumps(e) and "login to the hub failed" in json.dumps(e) for e in events)
    # redacted when written, not only when shown: the table holds no secret in its audit trail
    stored = acct.supervisor.store.list_audit(rid, 1000, None).items
    assert stored and all(not any(s in json.dumps(e.detail) + e.summary for s in SECRETS) for e in stored)
    alerts = acct.alerts_received()
    assert alerts and any("failed" in a.get("Subject", "").lower() for a in alerts), alerts
    _assert_no_secret(alerts)


def _advance(acct, minutes):
    from drill.scenarios.runner import AccountStepper

    world = AccountStepper(acct)
    target = acct.clock.now_ms + int(minutes * 60_000)
    while (t := world.next_time(sweeping=True)) is not None and t <= target:
        world.step(t, sweeping=lambda: True)
    acct.sagemaker.advance(target)


# --- readScope=owner: reads scoped to the owner and the admins (issue 32 item 10) --------------------

BOB_SESSION = f"arn:aws:sts::{ACCT}:assumed-role/vision-team/bob@example.com"


def _owner_scoped(template: dict[str, Any]) -> dict[str, Any]:
    """The drill's template as `-c readScope=owner` synthesizes it (the API function is told)."""
    scoped = copy.deepcopy(template)
    for res in scoped["Resources"].values():
        if (
            res.get("Type") == "AWS::Lambda::Function"
            and res["Properties"].get("Handler") == keys.HANDLER_API
        ):
            res["Properties"]["Environment"]["Variables"][keys.ENV_READ_SCOPE] = "owner"
    return scoped


@pytest.fixture
def scoped(template, monkeypatch):
    with LocalAccount(_owner_scoped(template), store="memory") as account:
        monkeypatch.setenv(keys.ENV_ADMIN_ROLE_ARNS, json.dumps([ADMIN_ROLE]))
        yield account


@pytest.mark.claim("A caller lists only the runs it owns (any session of its role) and reads only those")
@pytest.mark.claim(
    "Any other run answers **404** to `GET /runs/{id}`, its events, cancel and resume, the same answer as for a run that does not exist"
)
def test_under_read_scope_owner_another_principal_meets_every_run_route_as_404(scoped):
    rid = _submit(scoped, TEAM_SESSION_1)["run_id"]
    missing = "01KE5Q86000000000000000000"
    _, nothing = scoped.api("GET", f"/runs/{missing}", caller_arn=BOB_SESSION)
    for method, path in (
        ("GET", f"/runs/{rid}"),
        ("GET", f"/runs/{rid}/events"),
        ("POST", f"/runs/{rid}/cancel"),
    ):
        status, body = scoped.api(method, path, caller_arn=BOB_SESSION)
        assert status == 404, (method, path, body)
        assert body == {"message": nothing["message"].replace(missing, rid)}  # as a run that does not exist
    assert scoped.api("GET", "/runs", caller_arn=BOB_SESSION)[1]["runs"] == []
    # the owner (any session of its role) and the admins read, list and change it
    assert scoped.api("GET", f"/runs/{rid}", caller_arn=TEAM_SESSION_2)[0] == 200
    assert [r["run_id"] for r in scoped.api("GET", "/runs", caller_arn=TEAM_SESSION_2)[1]["runs"]] == [rid]
    assert [r["run_id"] for r in scoped.api("GET", "/runs", caller_arn=ADMIN_SESSION)[1]["runs"]] == [rid]
    assert scoped.api("GET", f"/runs/{rid}/events", caller_arn=ADMIN_SESSION)[0] == 200
    assert scoped.api("POST", f"/runs/{rid}/cancel", caller_arn=TEAM_SESSION_2)[0] == 202
    _advance(scoped, 15)
    assert scoped.api("POST", f"/runs/{rid}/resume", caller_arn=BOB_SESSION)[0] == 404
    assert scoped.api("GET", f"/runs/{rid}", caller_arn=TEAM_SESSION_1)[1]["status"] == "CANCELLED"
    assert scoped.api("POST", f"/runs/{rid}/resume", caller_arn=ADMIN_SESSION)[0] == 202


@pytest.mark.claim("A caller lists only the runs it owns (any session of its role) and reads only those")
def test_under_read_scope_owner_a_listing_shows_only_the_callers_runs_across_pages(scoped):
    mine, theirs = [], []
    for i in range(5):
        caller, bucket = (BOB_SESSION, theirs) if i % 2 else (TEAM_SESSION_1, mine)
        bucket.append(_submit(scoped, caller, _body(f"run-{i}"))["run_id"])
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        query = {"limit": "1", **({"cursor": cursor} if cursor else {})}
        status, page = scoped.api("GET", "/runs", query=query, caller_arn=BOB_SESSION)
        assert status == 200 and len(page["runs"]) <= 1
        seen += [r["run_id"] for r in page["runs"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(theirs)
    everything = scoped.api("GET", "/runs", query={"limit": "100"}, caller_arn=ADMIN_SESSION)[1]["runs"]
    assert sorted(r["run_id"] for r in everything) == sorted(mine + theirs)


@pytest.mark.claim("A caller lists only the runs it owns (any session of its role) and reads only those")
def test_the_cli_lists_and_reads_only_its_own_runs_under_read_scope_owner(scoped, capsys):
    other = _submit(scoped, TEAM_SESSION_1, _body("not-mine"))["run_id"]
    own = _submit(scoped, CALLER, _body("mine"))["run_id"]  # the CLI's own identity
    cli = CliHarness(scoped, capsys)
    listed = cli.cli("ls")
    assert listed.code == 0 and own in listed.out and other not in listed.out and "not-mine" not in listed.out
    got = cli.cli("get", other)
    assert got.code != 0 and f"no run with id {other}" in got.err  # as for a run that does not exist


@pytest.mark.claim("A 403 names the owner by identity")
@pytest.mark.claim("A 409 names the other run by id, name and status only.")
def test_no_error_names_another_principals_session(acct):
    # the owner signed as a session named after her e-mail address; the caller is someone else
    rid = _submit(acct, TEAM_SESSION_1)["run_id"]
    status, body = acct.api("POST", f"/runs/{rid}/cancel", caller_arn=BOB_SESSION)
    assert status == 403
    assert (
        f"arn:aws:iam::{ACCT}:role/ml-team" in body["message"] and "alice@example.com" not in body["message"]
    )
    assert acct.api("POST", f"/runs/{rid}/cancel", caller_arn=TEAM_SESSION_1)[0] == 202
    _advance(acct, 15)
    status, body = acct.api("POST", f"/runs/{rid}/resume", caller_arn=BOB_SESSION)
    assert status == 403 and "alice@example.com" not in json.dumps(body)
    # a live run of hers holds the name: the 409 names the run, not who submitted it
    _submit(acct, TEAM_SESSION_1, _body("llama-70b"))
    status, body = acct.api("POST", "/runs", body=_body("llama-70b"), caller_arn=BOB_SESSION)
    assert status == 409 and "alice@example.com" not in json.dumps(body) and "ml-team" not in json.dumps(body)


@pytest.mark.claim("A listing reads at most 10 pages of the table per request")
def test_under_read_scope_owner_a_listing_reads_a_bounded_number_of_pages_per_request(scoped):
    from sagewarden.usecases.run_requests import LIST_SCAN_PAGES

    bobs = _submit(scoped, BOB_SESSION, _body("bobs-run"))["run_id"]  # the oldest: listed last
    _advance(scoped, 1)
    for i in range(LIST_SCAN_PAGES + 1):
        _submit(scoped, TEAM_SESSION_1, _body(f"alices-{i}"))
    status, first = scoped.api("GET", "/runs", query={"limit": "1"}, caller_arn=BOB_SESSION)
    assert status == 200 and first["runs"] == [] and first["next_cursor"]  # none yet: follow the cursor
    _, second = scoped.api(
        "GET", "/runs", query={"limit": "1", "cursor": first["next_cursor"]}, caller_arn=BOB_SESSION
    )
    assert [r["run_id"] for r in second["runs"]] == [bobs]
