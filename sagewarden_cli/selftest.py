"""`sagewarden selftest`: rehearse a crash and a hang in your own account, through the deployed API.

It submits one run of a tiny training job (examples/selftest/train.py, in a public SageMaker
PyTorch training image, on one ml.m5.large) whose attempts fail on purpose:

1. attempt 1 writes checkpoints, then dies with a NCCL watchdog timeout: sagewarden must class it
   INFRASTRUCTURE and resume from the newest checkpoint;
2. attempt 2 resumes, writes a checkpoint, then hangs without a word: sagewarden's log-silence
   alarm (``log_silence_minutes`` 5 for this run) must fire, and sagewarden must stop the job and
   resume it;
3. attempt 3 resumes and completes.

It prints each step as the API shows it, with the time it took against its deadline, cleans up
(cancels the run if it is still live, also one whose submission's answer was lost, then deletes
what it uploaded under the S3 prefix unless ``--keep``, never before the run has ended:
sagewarden_cli/selftest_cleanup.py) and exits 0 only when every step happened within its deadline.

Times are the server's (the ``Date`` of the API's answers), so the same code runs against a
deployed API (real minutes) and against ``python -m drill serve --scenario selftest`` (virtual
minutes, hundreds of times faster): that local rehearsal is how it is tested. In local mode the
role, the bucket and the S3 endpoint come from the local server (``GET /_local``).

The training job's plan (steps, checkpoint interval, when it crashes and hangs) is passed as
hyperparameters, so the job shows what it will do; drill/scenarios/selftest.json is the same plan
as a drill scenario (:func:`scenario_document` builds it; a test keeps the file equal to it).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import secrets
import tarfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sagewarden_cli import selftest_cleanup as cleanup
from sagewarden_cli import selftest_shapes
from sagewarden_cli.client import DEFAULT_STACK
from sagewarden_cli.errors import API_ERROR, INTERRUPTED, NETWORK, OK, USAGE, CliError

if TYPE_CHECKING:
    from sagewarden_cli.client import Client, Context
    from sagewarden_cli.env import Env

RUN_NAME = "sagewarden-selftest"
SCENARIO_NAME = "selftest"  # drill/scenarios/selftest.json, what a local server must run
DEFAULT_PREFIX = "sagewarden-selftest"
DEFAULT_INSTANCE_TYPE = "ml.m5.large"
SCRIPT = "train.py"
SOURCE_TARBALL = "sourcedir.tar.gz"
REPO = Path(__file__).resolve().parents[1]
SOURCE_DIR = Path("examples") / "selftest"  # relative to the repository (or the current directory)

# -- the training job's plan -----------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What examples/selftest/train.py does (passed to it as hyperparameters)."""

    total_steps: int = 40
    checkpoint_every: int = 10
    seconds_per_step: float = 6.0
    crash_attempt: int = 1
    crash_at_step: int = 25
    hang_attempt: int = 2
    hang_after_step: int = 32

    def hyperparameters(self) -> dict[str, str]:
        return {
            "total-steps": str(self.total_steps),
            "checkpoint-every": str(self.checkpoint_every),
            "seconds-per-step": f"{self.seconds_per_step:g}",
            "crash-attempt": str(self.crash_attempt),
            "crash-at-step": str(self.crash_at_step),
            "hang-attempt": str(self.hang_attempt),
            "hang-after-step": str(self.hang_after_step),
        }

    def last_checkpoint(self, step: int) -> int:
        """The newest checkpoint the script has written once it reached ``step``."""
        return step // self.checkpoint_every * self.checkpoint_every

    @property
    def resume_2(self) -> int:
        return self.last_checkpoint(self.crash_at_step)

    @property
    def resume_3(self) -> int:
        return self.last_checkpoint(self.hang_after_step)

    def minutes(self, steps: int) -> float:
        return steps * self.seconds_per_step / 60

    @property
    def crash_after_min(self) -> float:
        """Training minutes of attempt 1 until it crashes."""
        return self.minutes(self.crash_at_step)

    @property
    def hang_after_min(self) -> float:
        """Training minutes of attempt 2 until it falls silent."""
        return self.minutes(self.hang_after_step - self.resume_2)

    @property
    def finish_after_min(self) -> float:
        return self.minutes(self.total_steps - self.resume_3)


PLAN = Plan()

# -- the run's policy --------------------------------------------------------------------------------
# Hang detection tuned for the test: 5 silent minutes are a hang; short grace after Training starts.
# Budgets bound what a misbehaving self-test can cost even if this command dies: 3 restarts, 2 hours.
POLICY: dict[str, Any] = {
    "hang_detection": True,
    "log_silence_minutes": 5,
    "hang_grace_minutes": 1,
    "hang_confirmation": "any",
    "checkpoint_layout": "hf",
    "max_restarts": 3,
    "max_no_progress_restarts": 2,
    "max_wall_clock_hours": 2,
    "keep_alive_seconds": 0,  # no warm pool: nothing billed between attempts
}
# Fields a newer API knows (a start-up allowance, windows learned from the job's cadence, lone-idle
# GPU alarms). They are sent, and dropped one by one when the deployed API answers "unknown policy
# field", so the self-test works with deployments from before and after them.
NEWER_POLICY: dict[str, Any] = {
    "startup_silence_minutes": 1,
    "adaptive_windows": False,
    "gpu_lone_idle_minutes": 0,
}
MAX_RUNTIME_S = 40 * 60  # per job: beyond the hang step's deadline (about 25 min of Training)

# -- images ------------------------------------------------------------------------------------------
# The public SageMaker PyTorch training images ("Deep Learning Containers"): the registry account
# differs by region. Account IDs as AWS publishes them for pytorch-training 2.5.1 (the SageMaker
# Python SDK's image_uri_config/pytorch.json), read 2026-08. --image overrides.
PYTORCH_IMAGE_REPOSITORY = "pytorch-training"
PYTORCH_IMAGE_TAG = "2.5.1-cpu-py311"
PYTORCH_TRAINING_ACCOUNTS: dict[str, str] = {
    "af-south-1": "626614931356",
    "ap-east-1": "871362719292",
    "ap-east-2": "975050140332",
    "ap-northeast-1": "763104351884",
    "ap-northeast-2": "763104351884",
    "ap-northeast-3": "364406365360",
    "ap-south-1": "763104351884",
    "ap-south-2": "772153158452",
    "ap-southeast-1": "763104351884",
    "ap-southeast-2": "763104351884",
    "ap-southeast-3": "907027046896",
    "ap-southeast-4": "457447274322",
    "ap-southeast-5": "550225433462",
    "ap-southeast-7": "590183813437",
    "ca-central-1": "763104351884",
    "ca-west-1": "204538143572",
    "cn-north-1": "727897471807",
    "cn-northwest-1": "727897471807",
    "eu-central-1": "763104351884",
    "eu-central-2": "380420809688",
    "eu-north-1": "763104351884",
    "eu-south-1": "692866216735",
    "eu-south-2": "503227376785",
    "eu-west-1": "763104351884",
    "eu-west-2": "763104351884",
    "eu-west-3": "763104351884",
    "il-central-1": "780543022126",
    "me-central-1": "914824155844",
    "me-south-1": "217643126080",
    "mx-central-1": "637423239942",
    "sa-east-1": "763104351884",
    "us-east-1": "763104351884",
    "us-east-2": "763104351884",
    "us-gov-east-1": "446045086412",
    "us-gov-west-1": "442386744353",
    "us-west-1": "763104351884",
    "us-west-2": "763104351884",
}


def image_uri(region: str) -> str:
    account = PYTORCH_TRAINING_ACCOUNTS.get(region)
    if account is None:
        raise CliError(
            f"no public SageMaker PyTorch training image is known for region {region}: pass --image "
            f"<account>.dkr.ecr.{region}.amazonaws.com/{PYTORCH_IMAGE_REPOSITORY}:{PYTORCH_IMAGE_TAG}",
            USAGE,
        )
    domain = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"{account}.dkr.ecr.{region}.{domain}/{PYTORCH_IMAGE_REPOSITORY}:{PYTORCH_IMAGE_TAG}"


# -- cost --------------------------------------------------------------------------------------------
# SageMaker training, on-demand, us-east-1 list price per instance-hour as we read it in 2025 (half
# of ml.m5.xlarge's $0.23 in lambdas/sagewarden/domain/pricing.py). Other regions differ a little;
# check today's SageMaker pricing page.
PRICE_PER_HOUR_USD: dict[str, float] = {"ml.m5.large": 0.115}
PRICE_SOURCE = "us-east-1 on-demand SageMaker training list price, read 2025"
# Billed per job beyond the script's own run time: the image download (billing starts when the
# instance is ready) and the model upload, about 3 minutes together on ml.m5.large.
BILLED_OVERHEAD_MIN = 3.0
ALARM_TO_STOP_MIN = 2.0  # the alarm's evaluation and the event's delivery
KILL_MIN = 2.0  # SageMaker kills a job that ignores SIGTERM 120 s after StopTrainingJob


def price_per_hour(instance_type: str) -> float | None:
    if instance_type in PRICE_PER_HOUR_USD:
        return PRICE_PER_HOUR_USD[instance_type]
    from sagewarden.domain.pricing import ESTIMATED_PRICE_PER_INSTANCE_HOUR_USD

    return ESTIMATED_PRICE_PER_INSTANCE_HOUR_USD.get(instance_type)


def typical_instance_minutes(plan: Plan = PLAN, policy: Mapping[str, Any] = POLICY) -> float:
    """Billed instance-minutes when every step happens as it should."""
    hang = plan.hang_after_min + float(policy["log_silence_minutes"]) + ALARM_TO_STOP_MIN + KILL_MIN
    return 3 * BILLED_OVERHEAD_MIN + plan.crash_after_min + hang + plan.finish_after_min


def most_instance_minutes(plan: Plan = PLAN, policy: Mapping[str, Any] = POLICY) -> float:
    """At most: one job runs at a time and the self-test cancels the run at the first missed
    deadline, so no more than every deadline in full plus the final stop."""
    return sum(s.deadline_min for s in steps(plan, policy)) + KILL_MIN


def cost_lines(instance_type: str, plan: Plan = PLAN, policy: Mapping[str, Any] = POLICY) -> list[str]:
    typical, most = typical_instance_minutes(plan, policy), most_instance_minutes(plan, policy)
    price = price_per_hour(instance_type)
    if price is None:
        return [f"about {typical:.0f} {instance_type} instance-minutes (at most {most:.0f}); no price known"]
    return [
        f"about {typical:.0f} {instance_type} instance-minutes, ${typical / 60 * price:.2f} "
        f"(at most {most:.0f}, ${most / 60 * price:.2f}, if every step used its full deadline)",
        f"at ${price:g} per instance-hour ({PRICE_SOURCE}); CloudWatch alarms and S3 add less than a cent",
    ]


# -- the steps ---------------------------------------------------------------------------------------
PENDING, DONE, FAILED = "pending", "done", "failed"
SCRIPT_CHECK = "script loaded the named checkpoints"
TERMINAL = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})
START_DEADLINE_MIN = 20.0  # ml.m5.large provisioning and the image download; usually 3-8 minutes
ENDING_SLACK_MIN = 10.0  # an ending reaches sagewarden within seconds; room for a slow upload
# log silence is judged by the sweep instead of alarms when logSubscription=false: up to 10 minutes more
DETECTION_SLACK_MIN = 15.0
STOP_DEADLINE_MIN = 6.0
MAX_POLL_FAILURES = 5  # consecutive failed polls (network, 5xx, throttling) before giving up  # SIGKILL 120 s after the stop, then Stopping -> Stopped


@dataclass(frozen=True)
class Check:
    state: str  # pending | done | failed
    at_ms: int | None = None  # when it happened (server time)
    detail: str = ""


@dataclass(frozen=True)
class Step:
    title: str
    deadline_min: float  # from the previous step
    check: Callable[[Observation], Check]


@dataclass
class Observation:
    run: dict[str, Any]
    events: list[dict[str, Any]]
    now_ms: int

    def attempt(self, number: int) -> dict[str, Any] | None:
        for a in self.run.get("attempts") or []:
            if a.get("number") == number:
                return dict(a)
        return None


def _ms(text: Any) -> int | None:
    from sagewarden_cli.render import ms_of

    return ms_of(text) if isinstance(text, str) else None


def _ended(a: Mapping[str, Any]) -> bool:
    return a.get("sagemaker_status") in ("Completed", "Failed", "Stopped") or bool(a.get("ended_at"))


def _state(a: Mapping[str, Any]) -> str:
    parts = [p for p in (a.get("sagemaker_status"), a.get("secondary_status")) if p]
    return "/".join(parts) or str(a.get("launch") or "not launched")


def _ending(a: Mapping[str, Any]) -> str:
    text = f"attempt {a['number']} ended {_state(a)}"
    if a.get("end_class"):
        text += f", classed {a['end_class']}"
    if a.get("end_reason"):
        text += f": {a['end_reason']}"
    return text


def _run_over(o: Observation, wanted: str) -> Check | None:
    run = o.run
    if run.get("status") in TERMINAL:
        outcome = f": {run['outcome']}" if run.get("outcome") else ""
        return Check(FAILED, detail=f"the run is {run['status']}{outcome} (waiting for {wanted})")
    return None


def _training(number: int, resume_step: int | None) -> Callable[[Observation], Check]:
    def check(o: Observation) -> Check:
        a = o.attempt(number)
        if a is None:
            return _run_over(o, f"attempt {number}") or Check(
                PENDING, detail=f"no attempt {number} yet (run {o.run.get('status')})"
            )
        if resume_step is not None:
            got = (a.get("resumed_from") or {}).get("step")
            if got != resume_step:
                where = f"step {got}" if got is not None else "no checkpoint"
                return Check(
                    FAILED,
                    detail=f"attempt {number} was launched from {where}; the script's newest checkpoint "
                    f"is step {resume_step}",
                )
        started = _ms(a.get("training_started_at"))
        if started is not None:
            source = (a.get("resumed_from") or {}).get("uri")
            return Check(DONE, started, f"{a.get('job_name')}" + (f" from {source}" if source else ""))
        if _ended(a):
            return Check(FAILED, detail=_ending(a) + " before it trained")
        return _run_over(o, f"attempt {number} to train") or Check(
            PENDING, detail=f"attempt {number} is {_state(a)}"
        )

    return check


def _crash_classified(o: Observation) -> Check:
    a = o.attempt(1)
    if a is None or not _ended(a) or not a.get("end_class"):
        if a is not None and a.get("sagemaker_status") == "InProgress":
            return Check(PENDING, detail=f"attempt 1 is still {_state(a)}")
        return _run_over(o, "attempt 1 to end") or Check(PENDING, detail="attempt 1 has not ended yet")
    if a.get("sagemaker_status") == "Failed" and a.get("end_class") == "INFRASTRUCTURE":
        return Check(DONE, _ms(a.get("ended_at")), str(a.get("end_reason") or ""))
    return Check(FAILED, detail=_ending(a))


def _hang_stop(o: Observation, job_name: Any) -> int | None:
    """When sagewarden recorded the hang intent and asked SageMaker to stop the job (StopJob)."""
    for e in o.events:
        d = e.get("detail") or {}
        if e.get("kind") == "action" and d.get("intent") == "hang" and d.get("job_name") == job_name:
            return int(e["at_ms"]) if isinstance(e.get("at_ms"), int) else _ms(e.get("at"))
    return None


def _hang_detected(policy: Mapping[str, Any]) -> Callable[[Observation], Check]:
    def check(o: Observation) -> Check:
        a = o.attempt(2)
        if a is None:
            return _run_over(o, "attempt 2") or Check(PENDING, detail="no attempt 2")
        signals = list(a.get("hang_signals") or [])
        if a.get("stop_intent") == "hang":
            if signals and "log_silence" not in signals:
                return Check(
                    FAILED, detail=f"a hang was detected by {', '.join(signals)}, not by log silence"
                )
            shown = ", ".join(signals) or "log_silence"
            return Check(
                DONE,
                _hang_stop(o, a.get("job_name")) or o.now_ms,
                f"signals: {shown}; stopping {a.get('job_name')}",
            )
        if _ended(a):
            if a.get("sagemaker_status") == "Completed":
                return Check(
                    FAILED, detail="attempt 2 completed: the job never hung, so there was nothing to detect"
                )
            return Check(FAILED, detail=_ending(a) + "; no hang was detected")
        run_policy = o.run.get("policy") or {}
        started = _ms(a.get("training_started_at"))
        silent = f"{(o.now_ms - started) / 60_000:.1f} min after it started training" if started else ""
        return _run_over(o, "the hang detection") or Check(
            PENDING,
            detail=f"attempt 2 is still {_state(a)} {silent}, with no hang detected (hang_detection "
            f"{str(run_policy.get('hang_detection', policy['hang_detection'])).lower()}, log_silence_minutes "
            f"{run_policy.get('log_silence_minutes', policy['log_silence_minutes'])})",
        )

    return check


def _stopped(o: Observation) -> Check:
    a = o.attempt(2)
    if a is None:
        return Check(FAILED, detail="no attempt 2")
    if a.get("sagemaker_status") == "Stopped":
        return Check(DONE, _ms(a.get("ended_at")) or o.now_ms, f"{_state(a)}, classed {a.get('end_class')}")
    if _ended(a):
        return Check(FAILED, detail=_ending(a))
    return _run_over(o, "attempt 2 to stop") or Check(PENDING, detail=f"attempt 2 is {_state(a)}")


def _succeeded(o: Observation) -> Check:
    run = o.run
    if run.get("status") == "SUCCEEDED":
        a = o.attempt(3)
        return Check(
            DONE,
            _ms((a or {}).get("ended_at")) or _ms(run.get("updated_at")) or o.now_ms,
            str(run.get("outcome") or ""),
        )
    extra = o.attempt(4)
    if extra is not None:
        previous = o.attempt(3) or {"number": 3}
        return Check(FAILED, detail=_ending(previous) + "; sagewarden launched attempt 4")
    a = o.attempt(3)
    state = f"attempt 3 is {_state(a)}" if a else "no attempt 3"
    return _run_over(o, "the run to succeed") or Check(PENDING, detail=state)


def steps(plan: Plan = PLAN, policy: Mapping[str, Any] = POLICY) -> list[Step]:
    silence = float(policy["log_silence_minutes"])
    return [
        Step("attempt 1 training", START_DEADLINE_MIN, _training(1, None)),
        Step("crash classified INFRASTRUCTURE", plan.crash_after_min + ENDING_SLACK_MIN, _crash_classified),
        Step(
            f"resumed as attempt 2 from step {plan.resume_2}", START_DEADLINE_MIN, _training(2, plan.resume_2)
        ),
        Step(
            "hang detected (log silence)",
            plan.hang_after_min + silence + float(policy["hang_grace_minutes"]) + DETECTION_SLACK_MIN,
            _hang_detected(policy),
        ),
        Step("stopped", STOP_DEADLINE_MIN, _stopped),
        Step(
            f"resumed as attempt 3 from step {plan.resume_3}", START_DEADLINE_MIN, _training(3, plan.resume_3)
        ),
        Step("succeeded", plan.finish_after_min + ENDING_SLACK_MIN, _succeeded),
    ]


# -- the request ---------------------------------------------------------------------------------------


@dataclass
class Target:
    """Where the self-test runs and what it needs there."""

    region: str
    role: str
    bucket: str
    root: str  # the S3 prefix of everything this self-test writes: <prefix>/<stamp>
    image: str
    instance_type: str
    s3_endpoint: str | None = None  # local mode: the local server's AWS endpoint

    @property
    def source_key(self) -> str:
        return f"{self.root}/source/{SOURCE_TARBALL}"

    def uri(self, suffix: str) -> str:
        return f"s3://{self.bucket}/{self.root}/{suffix}"


def training_job(t: Target, plan: Plan = PLAN) -> dict[str, Any]:
    """The CreateTrainingJob request (without TrainingJobName) of the self-test's run."""
    return {
        "AlgorithmSpecification": {"TrainingImage": t.image, "TrainingInputMode": "File"},
        "RoleArn": t.role,
        "OutputDataConfig": {"S3OutputPath": t.uri("output/")},
        "ResourceConfig": {"InstanceType": t.instance_type, "InstanceCount": 1, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": MAX_RUNTIME_S},
        "CheckpointConfig": {"S3Uri": t.uri("checkpoints/"), "LocalPath": "/opt/ml/checkpoints"},
        # the framework image's script mode: fetch the source tarball, run the program with the rest
        # of the hyperparameters as --name value arguments
        "HyperParameters": {
            "sagemaker_program": SCRIPT,
            "sagemaker_submit_directory": f"s3://{t.bucket}/{t.source_key}",
            "sagemaker_region": t.region,
            **plan.hyperparameters(),
        },
        "Environment": {"PYTHONUNBUFFERED": "1"},
        "Tags": [{"Key": "purpose", "Value": RUN_NAME}],
    }


def source_tarball(source_dir: Path) -> bytes:
    """The source directory as SageMaker's script mode takes it: a gzipped tar of its files."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path in sorted(source_dir.iterdir()):
            if path.is_file() and path.suffix == ".py":
                info = tar.gettarinfo(str(path), arcname=path.name)
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                with path.open("rb") as f:
                    tar.addfile(info, f)
    return buf.getvalue()


def find_source_dir(given: str | None) -> Path:
    candidates = [Path(given)] if given else [Path.cwd() / SOURCE_DIR, REPO / SOURCE_DIR]
    for c in candidates:
        if (c / SCRIPT).is_file():
            return c
    where = " or ".join(str(c) for c in candidates)
    raise CliError(
        f"the self-test's training script {SCRIPT} is not in {where}: run from the sagewarden repository "
        "or pass --source-dir",
        USAGE,
    )


# -- the scenario: the same plan for the drill -----------------------------------------------------------


def scenario_document(plan: Plan = PLAN, policy: Mapping[str, Any] = POLICY) -> dict[str, Any]:
    """drill/scenarios/selftest.json: the account, the job profile and the faults that do in the
    simulated account what examples/selftest/train.py does in a real one (same log lines, same
    checkpoints, same moments), for ``python -m drill serve --scenario selftest``. The run's policy
    (used by ``python -m drill selftest``) has the NEWER_POLICY fields this code's API knows.

    Rewrite the file with ``PYTHONPATH=lambdas:. python -m sagewarden_cli.selftest > drill/scenarios/selftest.json``."""
    from sagewarden.domain.policy import RunPolicy

    known = set(RunPolicy().to_dict())
    policy = {**{k: v for k, v in NEWER_POLICY.items() if k in known}, **policy}
    script = _load_script()
    args = script.parse_args([f"--{k}={v}" for k, v in plan.hyperparameters().items()])
    write_s = 1  # a checkpoint of a few bytes
    saves_before_crash = plan.crash_at_step // plan.checkpoint_every
    saves_before_hang = plan.hang_after_step // plan.checkpoint_every - plan.resume_2 // plan.checkpoint_every
    return {
        "name": SCENARIO_NAME,
        "description": (
            "What `sagewarden selftest` rehearses, on the simulated account: one ml.m5.large job "
            "(examples/selftest/train.py) that dies of a NCCL watchdog timeout on attempt 1, hangs "
            "silently on attempt 2 and completes on attempt 3. Serve it with `python -m drill serve "
            "--scenario selftest` and run `sagewarden --local selftest --yes`. Generated by "
            "sagewarden_cli.selftest.scenario_document (a test keeps this file equal to it)."
        ),
        "seed": 11,
        "max_days": 0.1,
        "account": {
            "startup": {"provision_s": 120, "download_s": 90, "upload_s": 30, "stop_s": 30},
            "store": "memory",
        },
        "runs": [
            {
                "name": RUN_NAME,
                "submit_at_min": 0,
                "instance_type": DEFAULT_INSTANCE_TYPE,
                "instance_count": 1,
                "training_job": {"StoppingCondition": {"MaxRuntimeInSeconds": MAX_RUNTIME_S}},
                "policy": dict(policy),
                "profile": {
                    "total_steps": plan.total_steps,
                    "steps_per_minute": round(60 / plan.seconds_per_step, 6),
                    "checkpoint_every_steps": plan.checkpoint_every,
                    "checkpoint_layout": "hf",
                    "checkpoint_write_seconds": write_s,
                    "checkpoint_on_sigterm": False,
                    "gpus_per_host": 0,
                    "gpu_util_per_host": 0.0,
                    "log_lines_per_minute": round(60 / plan.seconds_per_step),
                    "startup_log_lines": [script.banner(args)],
                },
            }
        ],
        "faults": [
            {
                "kind": "algorithm_error",
                "run": RUN_NAME,
                "attempt": plan.crash_attempt,
                "after_training_min": round(plan.crash_after_min + saves_before_crash * write_s / 60, 4),
                "log_lines": script.crash_lines(plan.crash_at_step),
                "once": False,  # every self-test's attempt 1, however often it runs on one server
                "label": "the self-test script's NCCL watchdog timeout",
            },
            {
                "kind": "stuck_dataloader",
                "run": RUN_NAME,
                "attempt": plan.hang_attempt,
                "after_training_min": round(plan.hang_after_min + saves_before_hang * write_s / 60, 4),
                "log_lines": [script.hang_line(plan.hang_after_step)],
                "once": False,
                "label": "the self-test script's silent hang",
            },
        ],
        "expect": {RUN_NAME: {"status": "SUCCEEDED", "attempts": 3}},
    }


def _load_script() -> Any:
    import importlib.util

    path = REPO / SOURCE_DIR / SCRIPT
    spec = importlib.util.spec_from_file_location("sagewarden_selftest_train", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- the command -----------------------------------------------------------------------------------------


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--role",
        metavar="ARN",
        help="SageMaker execution role for the job: one of the deployment's allowedRoleArns; it must read "
        "and write the bucket (default in local mode: the local server's)",
    )
    p.add_argument(
        "--bucket",
        help="S3 bucket for the script, checkpoints and output, in the API's region (the deployment's "
        "checkpointBuckets must include it, when set; default in local mode: the local server's)",
    )
    p.add_argument(
        "--prefix",
        default=DEFAULT_PREFIX,
        help=f"S3 prefix; each self-test writes under <prefix>/<time>-<random>/ (default {DEFAULT_PREFIX})",
    )
    p.add_argument(
        "--image",
        metavar="URI",
        help=f"training image (default: the public {PYTORCH_IMAGE_REPOSITORY}:{PYTORCH_IMAGE_TAG} image of "
        "the API's region)",
    )
    p.add_argument(
        "--instance-type",
        default=DEFAULT_INSTANCE_TYPE,
        help=f"default {DEFAULT_INSTANCE_TYPE} (a CPU instance)",
    )
    p.add_argument(
        "--policy",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a field of the self-test run's policy (YAML value), e.g. log_silence_minutes=10; "
        "repeatable",
    )
    p.add_argument(
        "--source-dir", help=f"directory holding {SCRIPT} (default: {SOURCE_DIR} of the repository)"
    )
    p.add_argument(
        "--yes", "-y", action="store_true", help="do not ask before spending (the cost is printed)"
    )
    p.add_argument(
        "--keep", action="store_true", help="keep what the self-test wrote to S3 (script, checkpoints)"
    )
    p.add_argument(
        "--interval",
        type=float,
        metavar="SECONDS",
        help="poll the API every SECONDS, backing off to 4x while nothing changes (default 10; in local mode "
        "10 virtual seconds)",
    )


def _policy(overrides: list[str]) -> dict[str, Any]:
    import yaml

    policy = dict(POLICY)
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--policy {item!r}: expected KEY=VALUE", USAGE)
        try:
            policy[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise CliError(f"--policy {item!r}: not a YAML value ({exc})", USAGE) from exc
    for key in ("log_silence_minutes", "hang_grace_minutes"):
        if not isinstance(policy.get(key), int | float) or isinstance(policy.get(key), bool):
            raise CliError(f"--policy {key}: must be a number", USAGE)
    return policy


@dataclass
class Outcome:
    title: str
    state: str  # done | failed | not reached
    at_ms: int | None = None
    took_ms: int | None = None
    deadline_min: float | None = None
    detail: str = ""


@dataclass
class SelfTest:
    env: Env
    ctx: Context
    target: Target
    policy: dict[str, Any]
    plan: Plan = PLAN
    interval_s: float = 10.0
    outcomes: list[Outcome] = field(default_factory=list)
    run_id: str | None = None
    dropped: list[str] = field(default_factory=list)
    # The POST /runs (body, headers) whose answer has not come: the run may exist without its id
    # being known here (sagewarden_cli/selftest_cleanup.py finds it by the request's Idempotency-Key).
    pending: tuple[dict[str, Any], dict[str, str]] | None = None
    shapes: selftest_shapes.ShapeReport | None = None  # what CloudWatch made of the alarm shapes at deploy
    _events: list[dict[str, Any]] = field(default_factory=list)
    _cursor: str | None = None
    _seen_on_page: int = 0

    @property
    def client(self) -> Client:
        return self.ctx.client

    @property
    def run_name(self) -> str:
        return RUN_NAME

    def say(self, text: str) -> None:
        if self.env.json:
            self.env.note(text)
        else:
            self.env.out(text)

    # -- submit ------------------------------------------------------------------------------
    def submit(self, stamp: str) -> dict[str, Any]:
        """POST /runs; policy fields the deployed API does not know (NEWER_POLICY) are dropped."""
        policy: dict[str, Any] = {**NEWER_POLICY, **self.policy}
        job = training_job(self.target, self.plan)
        headers = {"Idempotency-Key": f"selftest-{stamp}"}
        for _ in range(len(NEWER_POLICY) + 1):
            body = {"name": RUN_NAME, "training_job": job, "policy": dict(policy)}
            # until an answer says otherwise, this request may have created the run
            self.pending = (body, headers)
            resp = self.client.send("POST", "/runs", body=body, headers=headers)
            if resp.status >= 500:  # e.g. API Gateway's 504 while the function stored the run
                raise self.client.api_error(resp)
            if resp.status < 400:
                run = dict(self.client.decode(resp))
                self.pending = None
                return run
            self.pending = None  # refused: nothing was created
            if resp.status != 400:
                raise self.client.api_error(resp)
            unknown = _unknown_newer_fields(resp.body, policy, self.policy)
            if not unknown:
                raise self.client.api_error(resp)
            for key in unknown:
                policy.pop(key)
            self.dropped += unknown
        raise self.client.api_error(resp)

    # -- watch -------------------------------------------------------------------------------
    def observe(self) -> Observation:
        run = dict(self.client.call("GET", f"/runs/{self.run_id}"))
        now = self.client.now_ms()
        self._poll_events()
        return Observation(run, self._events, now)

    def _poll_events(self) -> None:
        path = f"/runs/{self.run_id}/events"
        cursor, skip = self._cursor, self._seen_on_page
        while True:
            page = self.client.call(
                "GET", path, query={"limit": "100", **({"cursor": cursor} if cursor else {})}
            )
            items = list(page.get("events") or [])
            self._events += items[skip:]
            nxt = page.get("next_cursor")
            if not nxt:
                self._cursor, self._seen_on_page = cursor, len(items)
                return
            cursor, skip = nxt, 0

    def watch(self, submitted_ms: int) -> bool:
        plan = steps(self.plan, self.policy)
        self.outcomes = [Outcome("submitted", "done", submitted_ms, 0, None, f"run {self.run_id}")]
        self._print(self.outcomes[0], submitted_ms)
        prev = submitted_ms
        index = 0
        wait = self.interval_s
        failures = 0
        while index < len(plan):
            try:
                obs = self.observe()
                failures = 0
            except CliError as err:  # a network blip must not end a half-hour test
                failures += 1
                if err.code not in (NETWORK, API_ERROR) or failures > MAX_POLL_FAILURES:
                    raise
                self.env.note(f"(polling the API failed: {err}; retrying)")
                self.env.sleep(self.interval_s * 4)
                continue
            progressed = False
            while index < len(plan):
                step = plan[index]
                result = step.check(obs)
                deadline_ms = step.deadline_min * 60_000
                if result.state == DONE:
                    at = max(result.at_ms if result.at_ms is not None else obs.now_ms, prev)
                    took = at - prev
                    if took > deadline_ms:
                        out = Outcome(
                            step.title,
                            FAILED,
                            at,
                            took,
                            step.deadline_min,
                            f"happened after {took / 60_000:.1f} min, beyond its deadline: {result.detail}",
                        )
                        self._finish_failed(out, plan[index + 1 :], submitted_ms)
                        return False
                    out = Outcome(step.title, DONE, at, took, step.deadline_min, result.detail)
                    self.outcomes.append(out)
                    self._print(out, submitted_ms)
                    prev, index, progressed = at, index + 1, True
                    continue
                if result.state == FAILED:
                    out = Outcome(
                        step.title, FAILED, obs.now_ms, obs.now_ms - prev, step.deadline_min, result.detail
                    )
                    self._finish_failed(out, plan[index + 1 :], submitted_ms)
                    return False
                if obs.now_ms - prev > deadline_ms:
                    out = Outcome(
                        step.title,
                        FAILED,
                        obs.now_ms,
                        obs.now_ms - prev,
                        step.deadline_min,
                        f"did not happen within {step.deadline_min:g} min; seen instead: {result.detail}",
                    )
                    self._finish_failed(out, plan[index + 1 :], submitted_ms)
                    return False
                break
            if index >= len(plan):
                return True
            wait = self.interval_s if progressed else min(wait * 2, self.interval_s * 4)
            self.env.sleep(wait)
        return True

    def _finish_failed(self, out: Outcome, rest: list[Step], submitted_ms: int) -> None:
        self.outcomes.append(out)
        self._print(out, submitted_ms)
        self.outcomes += [Outcome(s.title, "not reached", deadline_min=s.deadline_min) for s in rest]

    def _print(self, o: Outcome, submitted_ms: int) -> None:
        clock = _clock((o.at_ms or submitted_ms) - submitted_ms)
        mark = "ok  " if o.state == DONE else "FAIL"
        took = f"{o.took_ms / 60_000:5.1f} min" if o.took_ms and o.title != "submitted" else " " * 9
        detail = f"  {o.detail}" if o.detail else ""
        self.say(f"[{clock}] {mark} {o.title:<36} {took}{detail}")

    # -- the script's own word ---------------------------------------------------------------
    def script_resumes(self, run: dict[str, Any]) -> tuple[str, str]:
        """(state, text): did the script load the checkpoint sagewarden named (its log says so)?"""
        from sagewarden_cli.logs import JobLogReader

        found: list[str] = []
        for a in run.get("attempts") or []:
            want = (a.get("resumed_from") or {}).get("step")
            if want is None or not a.get("training_started_at"):
                continue
            try:
                reader = JobLogReader(self.ctx.aws_client("logs"), str(a["job_name"]))
                reader.refresh_streams()
                lines = [line.message for line in reader.read_new()]
            except Exception as exc:  # a missing permission must not fail the self-test
                return "not checked", f"its logs could not be read ({_one_line(str(exc))})"
            said = [
                int(m.group(1))
                for t in lines
                if (m := re.search(r"Resuming training from global step (\d+)", t))
            ]
            if not said:
                return "not checked", f"attempt {a['number']}'s log has no 'Resuming training' line (yet)"
            if said[0] != want:
                return (
                    FAILED,
                    f"attempt {a['number']} resumed from step {said[0]}, but sagewarden named step {want}",
                )
            found.append(f"attempt {a['number']} from step {want}")
        if not found:
            return "not checked", "no resumed attempt trained"
        return DONE, "the script's log confirms: " + ", ".join(found)


def _unknown_newer_fields(raw: bytes, sent: Mapping[str, Any], ours: Mapping[str, Any]) -> list[str]:
    """The NEWER_POLICY fields a 400 calls unknown, when they are all it complains about."""
    try:
        errors = json.loads(raw).get("errors") or []
    except (ValueError, AttributeError):
        return []
    unknown: list[str] = []
    for e in errors:
        f = str(e.get("field", "")) if isinstance(e, dict) else ""
        name = f.removeprefix("policy.")
        message = str(e.get("message", "")) if isinstance(e, dict) else ""
        if (
            name in NEWER_POLICY
            and name in sent
            and name not in ours
            and message.startswith("unknown policy field")
        ):
            unknown.append(name)
        else:
            return []
    return unknown


def _clock(ms: int) -> str:
    s = max(0, ms) // 1000
    return f"{s // 60:3d}:{s % 60:02d}"


def _one_line(text: str) -> str:
    return " ".join(text.split())[:200]


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def _s3_client(t: Target, ctx: Context) -> Any:
    from botocore.config import Config

    config = Config(retries={"mode": "standard", "max_attempts": 3}, connect_timeout=5, read_timeout=60)
    return ctx.session.client("s3", region_name=t.region, endpoint_url=t.s3_endpoint, config=config)


def _check_bucket(s3: Any, t: Target) -> None:
    from botocore.exceptions import ClientError

    try:
        where = s3.get_bucket_location(Bucket=t.bucket).get("LocationConstraint") or "us-east-1"
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "error")
        raise CliError(
            f"bucket {t.bucket}: {code}: {exc.response.get('Error', {}).get('Message', '')}", USAGE
        ) from exc
    where = {"EU": "eu-west-1"}.get(where, where)
    if where != t.region:
        raise CliError(
            f"bucket {t.bucket} is in {where}, the API and its jobs in {t.region}: use a bucket in {t.region}",
            USAGE,
        )


def run(env: Env) -> int:
    a = env.args
    ctx = env.ctx()
    client = ctx.client
    policy = _policy(a.policy)
    source_dir = find_source_dir(a.source_dir)
    info = client.local_info() if ctx.local else {}
    if ctx.local and info.get("scenario") != SCENARIO_NAME:
        # any other simulated job neither crashes nor hangs as the script does: every step would FAIL
        running = f"scenario {info['scenario']!r}" if info.get("scenario") else "no scenario"
        raise CliError(
            f"the local server at {client.api_url} runs {running}, not the self-test's: its simulated job "
            f"would not crash and hang as the self-test expects. Start it with `make demo-serve "
            f"SCENARIO={SCENARIO_NAME}` (or `python -m drill serve --scenario {SCENARIO_NAME}`) and run this again",
            USAGE,
        )
    role = a.role or (info.get("allowed_role_arns") or [None])[0]
    bucket = a.bucket or (info.get("checkpoint_buckets") or [None])[0]
    if not role:
        raise CliError(
            "--role is required: a SageMaker execution role in the deployment's allowedRoleArns", USAGE
        )
    if not bucket:
        raise CliError(
            "--bucket is required: an S3 bucket in the API's region (e.g. a checkpoint bucket)", USAGE
        )
    region = client.region
    stamp = _stamp()
    target = Target(
        region=region,
        role=role,
        bucket=bucket,
        root=f"{a.prefix.strip('/')}/{stamp}" if a.prefix.strip("/") else stamp,
        image=a.image or image_uri(region),
        instance_type=a.instance_type,
        s3_endpoint=info.get("aws_endpoint_url") if ctx.local else None,
    )
    if a.interval is not None:
        interval = a.interval
    elif ctx.local:
        interval = min(1.0, max(0.02, 10.0 / float(info.get("speed") or 600)))
    else:
        interval = 10.0
    if interval <= 0:
        raise CliError("--interval must be positive", USAGE)
    test = SelfTest(env, ctx, target, policy, interval_s=interval)

    where = (
        "the local simulated account (nothing is billed)"
        if ctx.local
        else f"{region} (billed to this account)"
    )
    intro = [
        f"sagewarden selftest: one run of a tiny training job on 1 x {target.instance_type} in {where},",
        f"  through {client.api_url}. It crashes once (NCCL watchdog timeout, attempt 1), hangs once (silent,",
        "  attempt 2) and completes on attempt 3; sagewarden must resume it from its checkpoints, detect the",
        f"  hang by log silence ({policy['log_silence_minutes']} min) and stop it.",
        "  cost: " + "\n        ".join(cost_lines(target.instance_type, PLAN, policy)),
        f"  image {target.image}",
        f"  role  {target.role}",
        f"  S3    s3://{target.bucket}/{target.root}/ (deleted afterwards unless --keep)",
    ]
    for line in intro:
        env.note(line)
    # what CloudWatch made of the hang-alarm shapes when the stack was deployed (free to read)
    stack = a.stack or os.environ.get("SAGEWARDEN_STACK") or DEFAULT_STACK
    test.shapes = selftest_shapes.read(ctx.aws_client("cloudformation"), stack)
    for line in test.shapes.lines():
        env.note(line)
    if not a.yes:
        env.stderr.write("Run the self-test? [y/N] ")
        env.stderr.flush()
        answer = env.stdin.readline()
        if not answer:
            raise CliError("not confirmed (no answer on stdin): pass --yes to run without asking", USAGE)
        if answer.strip().lower() not in ("y", "yes"):
            env.note("nothing was run")
            return API_ERROR

    s3 = _s3_client(target, ctx)
    _check_bucket(s3, target)
    s3.put_object(Bucket=target.bucket, Key=target.source_key, Body=source_tarball(source_dir))
    passed = False
    interrupted = False
    try:
        run_json = test.submit(stamp)
        test.run_id = str(run_json["run_id"])
        if test.dropped:
            env.note(
                f"(this deployment's API does not know the policy field(s) {', '.join(test.dropped)}: "
                "submitted without them)"
            )
        submitted = _ms(run_json.get("created_at")) or client.now_ms()
        test.say(f"run {test.run_id} ({RUN_NAME}) submitted; watching it (server time, minutes:seconds)")
        passed = test.watch(submitted)
        final = client.call("GET", f"/runs/{test.run_id}")
        check_state, check_text = test.script_resumes(final)
        if check_state == FAILED:
            passed = False
        test.outcomes.append(Outcome(SCRIPT_CHECK, check_state, detail=check_text))
    except KeyboardInterrupt:
        interrupted = True
    finally:
        ended = cleanup.end_run(test)
        if not a.keep and not ended:  # its job may still read the script and write checkpoints there
            env.note(cleanup.keep_uploads_note(test))
        elif not a.keep:
            try:
                cleanup.delete_uploads(test, s3)
            except Exception as exc:
                env.note(
                    f"cleanup: could not delete s3://{target.bucket}/{target.root}/: {_one_line(str(exc))}"
                )
    if interrupted:
        env.note(
            f"sagewarden: interrupted ({'the run was cancelled' if ended else 'the run may still be live'})"
        )
        return INTERRUPTED
    _summary(test, passed)
    return OK if passed else API_ERROR


def _summary(test: SelfTest, passed: bool) -> None:
    env = test.env
    if env.json:
        env.emit_json(
            {
                "passed": passed,
                "run_id": test.run_id,
                "dropped_policy_fields": test.dropped,
                "alarm_shapes": test.shapes.to_json() if test.shapes is not None else None,
                "steps": [
                    {
                        "step": o.title,
                        "result": o.state,
                        "took_s": None if o.took_ms is None else round(o.took_ms / 1000),
                        "deadline_s": None if o.deadline_min is None else round(o.deadline_min * 60),
                        "detail": o.detail,
                    }
                    for o in test.outcomes
                ],
            }
        )
        return
    env.out("")
    env.out(f"{'step':<38} {'took':>9} {'deadline':>9}  result")
    for o in test.outcomes:
        took = f"{o.took_ms / 60_000:.1f} min" if o.took_ms is not None and o.title != "submitted" else "-"
        deadline = f"{round(o.deadline_min, 1):g} min" if o.deadline_min is not None else "-"
        result = {"done": "ok", "failed": "FAIL"}.get(o.state, o.state)
        env.out(f"{o.title:<38} {took:>9} {deadline:>9}  {result}")
    for o in test.outcomes:
        if o.title == SCRIPT_CHECK:
            env.out(f"{SCRIPT_CHECK}: {o.detail}")
    failed = next((o for o in test.outcomes if o.state == FAILED), None)
    total = next((o.at_ms for o in reversed(test.outcomes) if o.at_ms), None)
    start = test.outcomes[0].at_ms if test.outcomes else None
    if passed and failed is None:
        span = f" ({(total - start) / 60_000:.1f} min from submission)" if total and start else ""
        env.out(f"PASS: every step happened within its deadline{span}")
    else:
        assert failed is not None
        env.out(f'FAIL: step "{failed.title}": {failed.detail}')


if __name__ == "__main__":  # the scenario file, from the plan
    print(json.dumps(scenario_document(), indent=2))
