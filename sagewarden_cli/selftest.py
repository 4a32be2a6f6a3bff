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

The command is split by concern: the plan, the policy and the image (selftest_plan.py), the steps
and their deadlines (selftest_steps.py), the cost (selftest_cost.py), the request, the source
tarball and the scenario (selftest_job.py), the session that submits and watches
(selftest_session.py), the cleanup (selftest_cleanup.py), what CloudWatch made of the alarm shapes
(selftest_shapes.py) and, here, the command's arguments, its run and its summary. Every public
name of the first five is importable from this module.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sagewarden_cli import selftest_cleanup as cleanup
from sagewarden_cli import selftest_shapes
from sagewarden_cli.client import DEFAULT_STACK
from sagewarden_cli.errors import API_ERROR, INTERRUPTED, OK, USAGE, CliError
from sagewarden_cli.selftest_cost import (
    ALARM_TO_STOP_MIN,
    BILLED_OVERHEAD_MIN,
    KILL_MIN,
    PRICE_PER_HOUR_USD,
    PRICE_SOURCE,
    cost_lines,
    most_instance_minutes,
    price_per_hour,
    typical_instance_minutes,
)
from sagewarden_cli.selftest_job import (
    Target,
    find_source_dir,
    scenario_document,
    source_tarball,
    training_job,
)
from sagewarden_cli.selftest_plan import (
    DEFAULT_INSTANCE_TYPE,
    DEFAULT_PREFIX,
    MAX_RUNTIME_S,
    NEWER_POLICY,
    PLAN,
    POLICY,
    PYTORCH_IMAGE_REPOSITORY,
    PYTORCH_IMAGE_TAG,
    PYTORCH_TRAINING_ACCOUNTS,
    REPO,
    RUN_NAME,
    SCENARIO_NAME,
    SCRIPT,
    SOURCE_DIR,
    SOURCE_TARBALL,
    Plan,
    image_uri,
)
from sagewarden_cli.selftest_session import (
    Outcome,
    SelfTest,
    _one_line,
)
from sagewarden_cli.selftest_steps import (
    DETECTION_SLACK_MIN,
    DONE,
    ENDING_SLACK_MIN,
    FAILED,
    MAX_POLL_FAILURES,
    PENDING,
    SCRIPT_CHECK,
    START_DEADLINE_MIN,
    STOP_DEADLINE_MIN,
    TERMINAL,
    Check,
    Observation,
    Step,
    _ms,
    steps,
)

if TYPE_CHECKING:
    from sagewarden_cli.client import Context
    from sagewarden_cli.env import Env

__all__ = [
    "ALARM_TO_STOP_MIN",
    "BILLED_OVERHEAD_MIN",
    "DEFAULT_INSTANCE_TYPE",
    "DEFAULT_PREFIX",
    "DETECTION_SLACK_MIN",
    "DONE",
    "ENDING_SLACK_MIN",
    "FAILED",
    "KILL_MIN",
    "MAX_POLL_FAILURES",
    "MAX_RUNTIME_S",
    "NEWER_POLICY",
    "PENDING",
    "PLAN",
    "POLICY",
    "PRICE_PER_HOUR_USD",
    "PRICE_SOURCE",
    "PYTORCH_IMAGE_REPOSITORY",
    "PYTORCH_IMAGE_TAG",
    "PYTORCH_TRAINING_ACCOUNTS",
    "REPO",
    "RUN_NAME",
    "SCENARIO_NAME",
    "SCRIPT",
    "SCRIPT_CHECK",
    "SOURCE_DIR",
    "SOURCE_TARBALL",
    "START_DEADLINE_MIN",
    "STOP_DEADLINE_MIN",
    "TERMINAL",
    "Check",
    "Observation",
    "Outcome",
    "Plan",
    "SelfTest",
    "Step",
    "Target",
    "add_arguments",
    "cost_lines",
    "find_source_dir",
    "image_uri",
    "most_instance_minutes",
    "price_per_hour",
    "run",
    "scenario_document",
    "source_tarball",
    "steps",
    "training_job",
    "typical_instance_minutes",
]


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
        check_state, check_text = test.script_resumes_landed(final)
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
