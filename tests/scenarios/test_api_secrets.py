"""Secrets never show (issue 32 items 7 and 8): a run's secrets through the API, the alert as SNS
delivers it and the audit trail, on the local account (the template's routes, the real handlers,
moto SNS -> SQS).

Item 7: text is scrubbed before any bound cuts it. Each case puts a hyperparameter's secret value
where one bound cuts it in two -- the classifier's 300-character evidence of a FailureReason that
quotes the command line, a 1,024-byte log line, an alert's 1,024-byte body line, the audit's
2,048-byte summary, a 500-character error text -- and no 8 characters of it may show anywhere.
Item 8: every newly covered key, URL, token prefix, tag and container-argument form.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from drill.account.local import BUCKET, EXECUTION_ROLE, LocalAccount
from drill.scenarios.spec import default_training_job
from drill.sim.model import Fault
from drill.sim.texts import ALGORITHM_ERROR_REASON, DEFAULT_ALGORITHM_LOG_LINE, command_args
from sagewarden.domain.vocabulary.redaction import MIN_SCRUB_CHARS, REDACTED

OWNER = "arn:aws:iam::123456789012:role/alice"
# no token prefix, no pattern: only the run's own value (and the order of scrub and cut) hides it
HP_SECRET = "Zq8x7Lm2Pw9Rt4Vb6Nc1Hj5Kd3Fs0Gy"  # 32 characters
EXIT = 'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage "RuntimeError: login refused"\n'


def _body(name: str = "llama-8b", **job: Any) -> dict[str, Any]:
    training_job = default_training_job(name, BUCKET, EXECUTION_ROLE)
    training_job["HyperParameters"] = {"epochs": "1", "hf_token": HP_SECRET}
    training_job.update(job)
    return {"name": name, "training_job": training_job}


def _windows(secret: str) -> list[str]:
    return [secret[i : i + MIN_SCRUB_CHARS] for i in range(len(secret) - MIN_SCRUB_CHARS + 1)]


def _shown(acct: LocalAccount, rid: str) -> dict[str, str]:
    """What leaves the supervisor about the run: GET /runs/{id}, its audit trail, every alert."""
    status, run = acct.api("GET", f"/runs/{rid}", caller_arn=OWNER)
    assert status == 200
    status, events = acct.api("GET", f"/runs/{rid}/events", query={"limit": "100"}, caller_arn=OWNER)
    assert status == 200
    alerts = acct.alerts_received()
    assert alerts, "no alert was published"
    return {
        "GET /runs/{id}": json.dumps(run, ensure_ascii=False),
        "GET /runs/{id}/events": json.dumps(events, ensure_ascii=False),
        "SNS": json.dumps([(a.get("Subject"), a.get("Message")) for a in alerts], ensure_ascii=False),
    }


def _assert_nothing_of(secrets: tuple[str, ...], shown: dict[str, str]) -> None:
    leaks = {where: [w for s in secrets for w in _windows(s) if w in text] for where, text in shown.items()}
    assert not any(leaks.values()), leaks


def _advance(acct: LocalAccount, minutes: float) -> None:
    from drill.scenarios.runner import AccountStepper

    world = AccountStepper(acct)
    target = acct.clock.now_ms + int(minutes * 60_000)
    while (t := world.next_time(sweeping=True)) is not None and t <= target:
        world.step(t, sweeping=lambda: True)
    acct.sagemaker.advance(target)


@pytest.fixture
def acct(template):
    with LocalAccount(template, store="memory") as account:
        yield account


def _evidence_cut() -> dict[str, Any]:
    # the classifier keeps 297 characters of the FailureReason and "...": the value starts at 285
    pad = "x" * (285 - len(EXIT) - len('Command "python3 train.py --epochs 1 --data ') - len(" --hf_token "))
    return {
        "failure_reason": f'{EXIT}Command "python3 train.py --epochs 1 --data {pad} --hf_token {HP_SECRET}"'
    }


def _log_line_cut() -> dict[str, Any]:
    # the log reader clips "[algo-1] <message>" to 1,024 bytes (its marker inside): the value
    # starts at byte 995
    head = "Invoking script with the following command: python3 train.py --epochs 1 --data "
    pad = "d" * (995 - len("[algo-1] ") - len(head) - len(" --hf_token "))
    return {
        "failure_reason": f"{EXIT}".rstrip(),
        "log_lines": (f"{head}{pad} --hf_token {HP_SECRET} --lr 0.1", "RuntimeError: login refused"),
    }


def _alert_line_cut() -> dict[str, Any]:
    # 296 characters, mostly 4-byte, make an evidence line of 1,025 bytes (the classifier keeps
    # 300 characters): the alert body keeps 1,024 bytes of a line, the value spans bytes 992-1,016
    fire = "\U0001f525"
    return {"failure_reason": f"AlgorithmError: {fire * 241} --hf_token {HP_SECRET[:24]} {fire * 2}"}


def _audit_summary_cut() -> dict[str, Any]:
    # the audit's summary is 2,048 bytes at most: 3-byte text puts the value across byte 2,048 of
    # "<job>: Failed/Failed (event): <FailureReason>"
    return {"failure_reason": "AlgorithmError: " + "\u2500" * 642 + f" --hf_token {HP_SECRET}"}


def _sagemaker_cut() -> dict[str, Any]:
    # SageMaker's own FailureReason holds 1,024 characters: the toolkit's command line (the
    # simulated account's default text) runs past it, and the value starts at character 1,010
    return {}


_PAD_BEFORE_TOKEN = {_sagemaker_cut: 1010}


@pytest.mark.claim("Text is scrubbed before any bound cuts it")
@pytest.mark.parametrize(
    ("fault", "secret"),
    [
        pytest.param(
            _evidence_cut, HP_SECRET, id="the 300-character evidence of a FailureReason quoting the command"
        ),
        pytest.param(_log_line_cut, HP_SECRET, id="a 1,024-byte log line"),
        pytest.param(_alert_line_cut, HP_SECRET[:24], id="an alert's 1,024-byte body line"),
        pytest.param(_audit_summary_cut, HP_SECRET, id="the audit's 2,048-byte summary"),
        pytest.param(_sagemaker_cut, HP_SECRET, id="SageMaker's 1,024-character FailureReason"),
    ],
)
def test_a_secret_straddling_a_bound_shows_nothing_of_itself(acct, fault, secret):
    body = _body()
    body["training_job"]["HyperParameters"]["hf_token"] = secret
    if fault in _PAD_BEFORE_TOKEN:  # a hyperparameter sorted before it pushes it to the cut
        hps = body["training_job"]["HyperParameters"]
        before = len(_toolkit_reason({**hps, "aa_data": ""}).split(" --hf_token ")[0])
        hps["aa_data"] = "d" * (_PAD_BEFORE_TOKEN[fault] - before - len(" --hf_token "))
    acct.sagemaker.inject(Fault(kind="algorithm_error", run="llama-8b", after_training_min=5, **fault()))
    status, run = acct.api("POST", "/runs", body=body, caller_arn=OWNER)
    assert status == 201, run
    _advance(acct, 60)
    shown = _shown(acct, run["run_id"])
    _assert_nothing_of((secret,), shown)
    assert REDACTED in shown["GET /runs/{id}"]  # the hyperparameter, and whatever quoted it
    if fault in _PAD_BEFORE_TOKEN:  # the premise: SageMaker's text ends inside the value
        reason = acct.sagemaker.jobs()[0].failure_reason or ""
        assert len(reason) == 1024 and reason.endswith(f" --hf_token {secret[:14]}"), reason[-40:]
    # the launched job kept the real value
    job = acct.sagemaker.jobs()[0].name
    assert acct.sagemaker.describe_training_job(TrainingJobName=job)["HyperParameters"]["hf_token"] == secret


def _toolkit_reason(hyperparameters: dict[str, str]) -> str:
    """The simulated account's script error for a 2 x p4d job (the drill's default text)."""
    return ALGORITHM_ERROR_REASON.format(
        message=DEFAULT_ALGORITHM_LOG_LINE, nodes=2, gpus=8, args=command_args(hyperparameters)
    )


class _EchoingLogs:
    """CloudWatch Logs answering GetLogEvents with an error whose message quotes a request value
    (an AWS validation message does: "Value '...' at '...' failed to satisfy constraint")."""

    def __init__(self, client: Any, message: str) -> None:
        self._client, self._message = client, message

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def get_log_events(self, **kwargs: Any) -> Any:
        raise ClientError(
            {"Error": {"Code": "InvalidParameterException", "Message": self._message}}, "GetLogEvents"
        )


@pytest.mark.claim("Text is scrubbed before any bound cuts it")
def test_an_error_text_cut_at_500_characters_shows_nothing_of_a_secret_it_quotes(acct):
    prefix = "An error occurred (InvalidParameterException) when calling the GetLogEvents operation: "
    head = "Value 'python3 train.py --epochs 1 --data "
    pad = "p" * (485 - len("ClientError: ") - len(prefix) - len(head) - len(" --hf_token "))
    message = f"{head}{pad} --hf_token {HP_SECRET}' at 'logStreamName' failed to satisfy constraint"
    reader = acct.supervisor.logs
    reader._logs = _EchoingLogs(reader._logs, message)
    acct.sagemaker.inject(
        Fault(kind="algorithm_error", run="llama-8b", after_training_min=5, failure_reason=EXIT)
    )
    status, run = acct.api("POST", "/runs", body=_body(), caller_arn=OWNER)
    assert status == 201, run
    _advance(acct, 30)
    shown = _shown(acct, run["run_id"])
    assert "failed to satisfy constraint" not in shown["GET /runs/{id}/events"]  # cut at 500 characters
    assert "InvalidParameterException" in shown["GET /runs/{id}/events"]  # the error is in the audit
    _assert_nothing_of((HP_SECRET,), shown)


# --- item 8: the forms a secret takes ---------------------------------------------------------

DB_PASS = "e7njtS5pFbUcguGv"
DB_URL_PASSWORD = "1dHS84ExMaIWYiHa"
GITHUB_PAT = "FUX1m1s97mCfvhcH"
HF_AUTH = "hUkCbBd6cJwokDtU"
PASSWD = "7FkI00VtKKKfXcLs"
TAG_TOKEN = "osvfpQz1sBSeYEa0"
ARG_TOKEN = "lCkSf3diQqdJtjyd"
ENTRY_KEY = "mLcFaG8HSu8xFE97"
HF_UNDER_PLAIN_KEY = "hf_29GiMR0wPxiNp9aFbg8aL2kX2uX9A7oDzf"
# printed by the job only: the patterns alone find them
GHP = "ghp_uBk8xtf6TGXniXSLqER6xyf0XcM93l4ad4MU"
AKIA = "AKIAM7UYOHZUMJO2D2BA"
XOXB = "xoxb-47993867310-bJeiwfU4hGoR"
STRANGER_URL_PASSWORD = "3pNuHKGooyyLUxm1"
ITEM_8 = (
    DB_PASS, DB_URL_PASSWORD, GITHUB_PAT, HF_AUTH, PASSWD, TAG_TOKEN, ARG_TOKEN, ENTRY_KEY,
    HF_UNDER_PLAIN_KEY, GHP, AKIA, XOXB, STRANGER_URL_PASSWORD,
)  # fmt: skip


@pytest.mark.claim("`DB_PASS`, `GITHUB_PAT`, `HF_AUTH`, `passwd`, `hfAuthToken`, and also `max_tokens`")
@pytest.mark.claim("Text is also searched for what the run never declared")
def test_every_secret_form_is_redacted_in_the_run_the_alert_and_the_audit(acct):
    body = _body(
        Environment={
            "DB_PASS": DB_PASS,
            "DATABASE_URL": f"postgres://app:{DB_URL_PASSWORD}@db.internal:5432/train",
            "MODEL_SOURCE": HF_UNDER_PLAIN_KEY,
            "NCCL_DEBUG": "WARN",
        },
        HyperParameters={"passwd": PASSWD, "GITHUB_PAT": GITHUB_PAT, "HF_AUTH": HF_AUTH, "epochs": "1"},
        Tags=[{"Key": "GITHUB_TOKEN", "Value": TAG_TOKEN}, {"Key": "team", "Value": "ml-research"}],
    )
    body["training_job"]["AlgorithmSpecification"] |= {
        "ContainerEntrypoint": ["env", f"WANDB_API_KEY={ENTRY_KEY}", "python3", "train.py"],
        "ContainerArguments": ["--hf-token", ARG_TOKEN, "--epochs", "1"],
    }
    printed = (
        f"env: DB_PASS={DB_PASS} DATABASE_URL=postgres://app:{DB_URL_PASSWORD}@db.internal:5432/train",
        f"args: --hf-token {ARG_TOKEN} GITHUB_PAT={GITHUB_PAT} HF_AUTH: {HF_AUTH} passwd={PASSWD}",
        f"hub: MODEL_SOURCE={HF_UNDER_PLAIN_KEY} tag GITHUB_TOKEN={TAG_TOKEN} WANDB_API_KEY={ENTRY_KEY}",
        f"git clone https://{GHP}@github.com/org/repo failed; aws key {AKIA}; slack {XOXB}",
        f"mirror redis://cache:{STRANGER_URL_PASSWORD}@cache.internal:6379 refused",
        "RuntimeError: login refused",
    )
    acct.sagemaker.inject(
        Fault(
            kind="algorithm_error",
            run="llama-8b",
            after_training_min=5,
            failure_reason=f'{EXIT}Command "python3 train.py --hf-token {ARG_TOKEN} --passwd {PASSWD}"',
            log_lines=printed,
        )
    )
    status, run = acct.api("POST", "/runs", body=body, caller_arn=OWNER)
    assert status == 201, run
    _advance(acct, 60)
    shown = _shown(acct, run["run_id"])
    _assert_nothing_of(ITEM_8, shown)
    got = json.loads(shown["GET /runs/{id}"])["training_job"]
    assert got["Environment"] == {
        "DB_PASS": REDACTED,
        "DATABASE_URL": f"postgres://app:{REDACTED}@db.internal:5432/train",
        "MODEL_SOURCE": REDACTED,
        "NCCL_DEBUG": "WARN",
    }
    assert got["HyperParameters"] == {
        "passwd": REDACTED,
        "GITHUB_PAT": REDACTED,
        "HF_AUTH": REDACTED,
        "epochs": "1",
    }
    assert {"Key": "GITHUB_TOKEN", "Value": REDACTED} in got["Tags"]
    assert {"Key": "team", "Value": "ml-research"} in got["Tags"]
    spec = got["AlgorithmSpecification"]
    assert spec["ContainerArguments"] == ["--hf-token", REDACTED, "--epochs", "1"]
    assert spec["ContainerEntrypoint"] == ["env", f"WANDB_API_KEY={REDACTED}", "python3", "train.py"]
    # the log tail still reads: only the values went
    assert "git clone https://" in shown["GET /runs/{id}/events"]
