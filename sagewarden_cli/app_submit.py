"""`sagewarden submit`: POST /runs, or with --dry-run validate with the API's own rules and review
the run (preflight findings, Service Quotas, live runs holding its name or checkpoint prefix)."""

from __future__ import annotations

import os
from typing import Any

from sagewarden_cli import render
from sagewarden_cli.client import env_region, is_loopback
from sagewarden_cli.env import Env
from sagewarden_cli.errors import API_ERROR, OK, CliError


def cmd_submit(env: Env) -> int:
    from sagewarden_cli.submit import apply_sets, load_body

    a = env.args
    body = apply_sets(load_body(a.file, env.stdin), a.sets)
    if a.dry_run:
        return _dry_run(env, body)
    headers = {"Idempotency-Key": a.idempotency_key} if a.idempotency_key else None
    client = env.ctx().client
    resp = client.send("POST", "/runs", body=body, headers=headers)
    run = client.decode(resp)
    if env.json:
        env.emit_json(run)
        return OK
    if resp.status == 200:
        env.note("(already submitted with this Idempotency-Key: this is that run)")
    env.out(render.run_view(run, client.now_ms()))
    env.note(f"\nfollow it: sagewarden get {run['name']} --follow  |  sagewarden logs {run['name']} --follow")
    return OK


def _dry_run(env: Env, body: dict[str, Any]) -> int:
    from sagewarden_cli import preflight
    from sagewarden_cli.submit import dry_run

    result, req = dry_run(body, env.args.idempotency_key)
    findings: list[preflight.Finding] = []
    conflicts: list[dict[str, str]] = []
    if req is not None:
        findings = preflight.review(req.training_job, req.policy.to_dict())
        findings += _quota_review(env, req)
        conflicts, unchecked = _conflict_review(env, req)
        if unchecked:
            result.notes.append(unchecked)
        if conflicts:
            result.valid = False
            result.errors += [{"field": c["field"], "message": c["message"]} for c in conflicts]
    if env.json:
        out = {**result.to_json(), "conflicts": conflicts, "review": [f.to_json() for f in findings]}
        env.emit_json(out)
        return OK if result.valid else API_ERROR
    if conflicts:
        raise CliError(
            "dry run: the API would refuse this run (HTTP 409): another live run holds its name or "
            "checkpoint prefix",
            API_ERROR,
            [f"{e['field']}: {e['message']}" for e in result.errors],
        )
    if not result.valid:
        raise CliError(
            "dry run: the API would refuse this run (HTTP 400): invalid request",
            API_ERROR,
            [f"{e['field']}: {e['message']}" for e in result.errors],
        )
    assert req is not None
    (itype, count), *fallbacks = preflight.instance_choices(req.training_job, req.policy.to_dict())
    instances = f"{count} x {itype}"
    if fallbacks:
        instances += "; fallbacks " + ", ".join(f"{c} x {t}" for t, c in fallbacks)
    env.out("dry run: the API would accept this run (nothing was submitted)")
    env.out(f"  name        {result.name}")
    env.out(f"  first job   {result.first_job_name}")
    env.out(f"  instances   {instances}")
    env.out("")
    env.out("resolved policy")
    for line in render.policy_lines(result.policy or {}):
        env.out(line)
    env.out("")
    warnings = sum(1 for f in findings if f.level == "warning")
    env.out(f"preflight review: {warnings} warning(s)" if findings else "preflight review: nothing to report")
    for f in findings:
        for line in render.wrap(f"[{f.check}] {f.message}", f"  {f.level:<8} ", " " * 11):
            env.out(line)
    env.out("")
    for n in result.notes:
        for line in render.wrap(n, "  note: ", " " * 8):
            env.out(line)
    return OK


def _conflict_review(env: Env, req: Any) -> tuple[list[dict[str, str]], str | None]:
    """(live runs the submit would collide with, a note when they could not be listed). Reads
    GET /runs only; a dry run never submits."""
    from sagewarden_cli.submit import live_conflicts

    uri = str((req.training_job.get("CheckpointConfig") or {}).get("S3Uri", ""))
    try:
        return live_conflicts(env.ctx().client, req.name, uri), None
    except Exception as exc:
        from botocore.exceptions import ProfileNotFound

        if isinstance(exc, ProfileNotFound):
            raise
        why = str(exc) if isinstance(exc, CliError) else f"{type(exc).__name__}: {exc}"
        return [], (
            "name and checkpoint prefix not checked against the live runs: cannot list them through "
            f"the API ({why})"
        )


def _quota_review(env: Env, req: Any) -> list[Any]:
    from sagewarden_cli import preflight

    a = env.args
    if a.local or is_loopback(a.api_url or os.environ.get("SAGEWARDEN_API_URL") or ""):
        return [preflight.Finding("note", "quota", "quotas not checked: local mode has no Service Quotas")]
    try:
        session = env._session
        if session is None:
            import boto3

            session = boto3.Session(profile_name=a.profile)
        region = a.region or env_region() or session.region_name
        if not region:
            return [
                preflight.Finding(
                    "note", "quota", "quotas not checked: no AWS region (--region or AWS_REGION)"
                )
            ]
        if session.get_credentials() is None:
            return [preflight.Finding("note", "quota", "quotas not checked: no AWS credentials")]
        from botocore.config import Config

        # a review must not hang on a network that cannot reach Service Quotas
        config = Config(connect_timeout=3, read_timeout=10, retries={"mode": "standard", "max_attempts": 2})
        client = session.client("service-quotas", region_name=region, config=config)
    except Exception as exc:
        from botocore.exceptions import ProfileNotFound

        if isinstance(exc, ProfileNotFound):
            raise
        return [preflight.Finding("note", "quota", f"quotas not checked: {exc}")]
    return preflight.quota_findings(client, req.training_job, req.policy.to_dict())
