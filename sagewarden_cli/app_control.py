"""`sagewarden cancel` and `resume`: act on runs (cancel asks first unless --yes)."""

from __future__ import annotations

import json
from typing import Any

from sagewarden_cli import render
from sagewarden_cli.env import Env
from sagewarden_cli.errors import API_ERROR, NOT_FOUND, OK, USAGE, CliError


def cmd_cancel(env: Env) -> int:
    a = env.args
    client = env.ctx().client
    targets, worst = [], OK
    for ref in dict.fromkeys(a.runs):
        run = client.run(ref)
        if run["status"] in render.TERMINAL:
            # nothing to stop, nothing to confirm: say so (the API would answer 409, hence exit 1)
            env.note(_already_finished(run["name"], run["run_id"], run["status"]))
            worst = API_ERROR
            continue
        targets.append(run)
    if not targets:
        if env.json:
            env.emit_json([])
        return worst
    if not a.yes:
        listed = ", ".join(f"{r['name']} ({r['run_id']}, {r['status']})" for r in targets)
        env.stderr.write(f"Cancel {len(targets)} run(s): {listed}? [y/N] ")
        env.stderr.flush()
        answer = env.stdin.readline()
        if not answer:
            raise CliError("not confirmed (no answer on stdin): pass --yes to cancel without asking", USAGE)
        if answer.strip().lower() not in ("y", "yes"):
            env.note("nothing cancelled")
            return API_ERROR
    results: list[Any] = []
    for run in targets:
        resp = client.send("POST", f"/runs/{run['run_id']}/cancel")
        if resp.status == 409:  # it finished since it was read
            status = _json_field(resp.body, "status")
            if status in render.TERMINAL:
                env.note(_already_finished(run["name"], run["run_id"], status))
                worst = worst or API_ERROR
                continue
        if resp.status >= 400:
            err = client.api_error(resp)
            env.note(f"sagewarden: {run['name']} ({run['run_id']}): {err}")
            worst = worst or err.code
            continue
        after = client.decode(resp)
        results.append(after)
        if not env.json:
            if after["status"] == "CANCELLED":
                env.out(f"{after['name']} ({after['run_id']}): CANCELLED")
            else:
                env.out(
                    f"{after['name']} ({after['run_id']}): {after['status']}; CANCELLED once SageMaker confirms the stop"
                )
    if env.json:
        env.emit_json(results)
    return worst


def _already_finished(name: str, run_id: str, status: str) -> str:
    return f"sagewarden: run {name} ({run_id}) already finished ({status}): nothing to cancel"


def _json_field(body: bytes, key: str) -> Any:
    try:
        payload = json.loads(body) if body else None
    except ValueError:
        return None
    return payload.get(key) if isinstance(payload, dict) else None


def cmd_resume(env: Env) -> int:
    a = env.args
    client = env.ctx().client
    run_id = client.resolve(a.run)
    resp = client.send("POST", f"/runs/{run_id}/resume")
    if resp.status == 404:
        raise CliError(f"no run with id {run_id}", NOT_FOUND)
    if resp.status == 409:
        raise client.api_error(resp)  # the API says why, once
    run = client.decode(resp)
    if env.json:
        env.emit_json(run)
    else:
        env.out(render.run_view(run, client.now_ms()))
        env.note(f"\nfollow it: sagewarden get {run['name']} --follow")
    return OK
