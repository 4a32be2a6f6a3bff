"""`sagewarden selftest`'s cleanup: end the run it started, then delete what it uploaded.

The order matters: a live job reads its script and writes its checkpoints under the self-test's S3
prefix, so the prefix is deleted only once the run is confirmed over (terminal) or confirmed never
created. When the answer to ``POST /runs`` was lost (a timeout, a dropped connection, a 5xx from
API Gateway after the function had stored the run), the run may exist without the self-test knowing
its id: the request is sent again with the same ``Idempotency-Key`` and body, and the API answers
with the run it created (200), or creates it now (201), or refuses the request as it refused the
first (400: nothing was created). Any other outcome leaves it unknown, and the files stay.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sagewarden_cli.errors import CliError

if TYPE_CHECKING:
    from sagewarden_cli.selftest_session import SelfTest

TERMINAL = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})
RECOVERY_ATTEMPTS = 3  # repeats of a POST /runs whose answer was lost
CANCEL_WAIT_MIN = 10.0  # server minutes to wait for a cancelled run to end (its job to stop)


def end_run(test: SelfTest, cancel_wait_min: float = CANCEL_WAIT_MIN) -> bool:
    """Cancel the self-test's run if it is live; True once no run of this self-test can be running
    (it ended, or it was never created), False when that is not known."""
    try:
        if test.run_id is None and test.pending is not None and not recover(test):
            return False
        return cancel_if_live(test, cancel_wait_min)
    except CliError as exc:
        test.env.note(f"cleanup: could not cancel run {test.run_id or test.run_name}: {exc}")
        return False


def recover(test: SelfTest) -> bool:
    """Find the run of a POST /runs whose answer was lost, by sending it again with the same
    Idempotency-Key and body. True when its id is known now or it was never created."""
    assert test.pending is not None
    body, headers = test.pending
    problem = ""
    for attempt in range(RECOVERY_ATTEMPTS):
        if attempt:
            test.env.sleep(test.interval_s * 2**attempt)
        try:
            resp = test.client.send("POST", "/runs", body=body, headers=headers)
            if 200 <= resp.status < 300:
                run = dict(test.client.decode(resp))
                test.run_id, test.pending = str(run["run_id"]), None
                test.say(
                    f"cleanup: the answer to the submission was lost; its Idempotency-Key found run {test.run_id} "
                    f"({run.get('status')})"
                )
                return True
            if resp.status == 400:  # refused, as the first request was: no run was created
                test.pending = None
                test.say("cleanup: the API refuses the submission: no run was created")
                return True
            problem = str(test.client.api_error(resp))
        except CliError as exc:
            problem = str(exc)
    key = headers.get("Idempotency-Key", "")
    test.env.note(
        f"cleanup: cannot tell whether the submission created a run ({problem}); look for run {test.run_name} "
        f"with `sagewarden ls` (Idempotency-Key {key}) and cancel it"
    )
    return False


def cancel_if_live(test: SelfTest, cancel_wait_min: float = CANCEL_WAIT_MIN) -> bool:
    """True once the run is terminal (or there is none); False when it may still be running."""
    if test.run_id is None:
        return True
    client = test.client
    run = client.call("GET", f"/runs/{test.run_id}")
    if run.get("status") in TERMINAL:
        return True
    resp = client.send("POST", f"/runs/{test.run_id}/cancel")
    if resp.status >= 400 and resp.status != 409:
        test.env.note(f"cleanup: cancelling run {test.run_id} failed: {client.api_error(resp)}")
        return False
    start = client.now_ms()
    while True:
        run = client.call("GET", f"/runs/{test.run_id}")
        if run.get("status") in TERMINAL:
            test.say(f"cleanup: run {test.run_id} is {run['status']} (its job was stopped)")
            return True
        if client.now_ms() - start > cancel_wait_min * 60_000:
            test.env.note(
                f"cleanup: run {test.run_id} is still {run.get('status')} {cancel_wait_min:g} min after the "
                f"cancel; check it with `sagewarden get {test.run_id}`"
            )
            return False
        test.env.sleep(test.interval_s)


def delete_uploads(test: SelfTest, s3: Any) -> None:
    """Delete everything under the self-test's S3 prefix (every page of the listing)."""
    bucket, root = test.target.bucket, test.target.root
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{root}/"):
        keys += [o["Key"] for o in page.get("Contents") or []]
    failed: list[str] = []
    for i in range(0, len(keys), 1000):
        resp = s3.delete_objects(
            Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[i : i + 1000]], "Quiet": True}
        )
        failed += [f"{e.get('Key')}: {e.get('Code')}" for e in resp.get("Errors") or []]
    test.say(f"cleanup: deleted {len(keys) - len(failed)} object(s) under s3://{bucket}/{root}/")
    if failed:
        test.env.note(f"cleanup: {len(failed)} object(s) were not deleted, e.g. {failed[0]}")


def keep_uploads_note(test: SelfTest) -> str:
    where = f"s3://{test.target.bucket}/{test.target.root}/"
    return (
        f"cleanup: kept {where}: the run may still be running, and its job reads its script and writes its "
        f"checkpoints there; delete it once the run has ended (aws s3 rm --recursive {where})"
    )
