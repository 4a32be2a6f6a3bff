"""Warm pools as SageMaker keeps them, at the level of the pure decision (domain/capacity/warm_pools.py):
what an attempt asks for, the wait for a pool, a cold restart after a bad host, the release
retried until the pool is gone, and no warm-pool quota told once."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from sagewarden.domain.capacity.warm_pools import POOL_SETTLE_MAX_MS, POOL_WAIT_MS, watch_of
from sagewarden.domain.due import next_due_ms
from sagewarden.domain.endings.attempt_ended import LOG_SETTLE_MS
from sagewarden.domain.vocabulary.actions import LaunchAttempt, Notify, ReleaseWarmPool
from sagewarden.domain.vocabulary.events import (
    AlarmsObserved,
    LaunchAccepted,
    LaunchRejected,
    Observations,
    Submitted,
    Tick,
)
from sagewarden.domain.vocabulary.launch import warm_pool_request
from sagewarden.domain.vocabulary.models import RunStatus
from sagewarden.domain.vocabulary.policy import RunPolicy
from tests.builders import (
    HOUR,
    MIN,
    REQUEST,
    ckpt,
    make_run,
    observed,
    pool_seen,
    spot_request,
    step,
    training_run,
)

NCCL = 'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage "Watchdog caught collective operation timeout"'
INTERNAL = "InternalServerError: We encountered an internal error.  Please try again."
SEGFAULT = 'AlgorithmError: ExecuteUserScriptError:\nExitCode -11\nErrorMessage ""'  # nothing explains it
XID_TAIL = ("NVRM: Xid (PCI:0000:10:1c): 79, GPU has fallen off the bus.",)


def launches(d):
    return [a for a in d.actions if isinstance(a, LaunchAttempt)]


def volume(launch: LaunchAttempt) -> int | None:
    return launch.request["ResourceConfig"].get("VolumeSizeInGB")


def keep_alive(launch: LaunchAttempt) -> int | None:
    return launch.request["ResourceConfig"].get("KeepAlivePeriodInSeconds")


def ended(run, status="Failed", secondary="Failed", reason=NCCL, *, tail=(), at=None):
    """The attempt ends at `end`, observed once its last log lines have had time to land."""
    end = at if at is not None else run.current.training_started_ms + HOUR
    d = step(
        run,
        observed(run, status, secondary, end, reason),
        end + LOG_SETTLE_MS,
        Observations(checkpoint=ckpt(500), log_tail=tail),
    )
    return d, end


# --- what an attempt asks for -----------------------------------------------------------------------


@pytest.mark.claim(
    "It also governs the request's own KeepAlive: 0 strips it, another value caps it. Never asked for managed spot training."
)
@pytest.mark.claim("Managed spot training gets no pool (SageMaker refuses a spot job that asks for one)")
def test_a_managed_spot_run_asks_for_no_warm_pool_even_if_its_request_does():
    """Item 4: SageMaker keeps no warm pools for spot; asking fails every launch."""
    request = spot_request()
    request["ResourceConfig"]["KeepAlivePeriodInSeconds"] = 1800  # the user's own
    d = step(make_run(request=request), Submitted(), 0)
    (launch,) = launches(d)
    assert keep_alive(launch) is None and d.run.current.keep_alive_s == 0
    seconds, why = warm_pool_request(request, RunPolicy())
    assert seconds == 0 and "spot" in why


@pytest.mark.claim(
    "none for managed spot training (SageMaker refuses a spot job that asks), none with `keep_alive_seconds` 0, else the request's own KeepAlive capped by the policy"
)
@pytest.mark.claim(
    "It also governs the request's own KeepAlive: 0 strips it, another value caps it. Never asked for managed spot training."
)
@pytest.mark.claim(
    "`keep_alive_seconds` (600) asks SageMaker to keep each attempt's instances in a warm pool"
)
@pytest.mark.parametrize(
    ("own", "policy_s", "sent"),
    [
        (3600, 0, None),  # the policy turns pools off: the request's own is stripped (item 6)
        (3600, 600, 600),  # the policy caps it
        (300, 600, 300),  # a shorter one of the user's own is kept
        (0, 600, None),  # the user asked for none
        (None, 600, 600),  # the policy's, by default
    ],
    ids=[
        "the policy turns pools off",
        "the policy caps it",
        "a shorter one of the user's own is kept",
        "the user asked for none",
        "the policy's by default",
    ],
)
def test_the_requests_own_keep_alive_is_governed_by_the_policy(own, policy_s, sent):
    request = copy.deepcopy(REQUEST)
    if own is not None:
        request["ResourceConfig"]["KeepAlivePeriodInSeconds"] = own
    d = step(make_run(RunPolicy(keep_alive_seconds=policy_s), request=request), Submitted(), 0)
    (launch,) = launches(d)
    assert keep_alive(launch) == sent


# --- a resume waits for its pool, then runs on it ---------------------------------------------------------


@pytest.mark.claim(
    "Run statuses: `SUBMITTED → STARTING → TRAINING → SUCCEEDED`, with `RETRY_WAIT` (quota, capacity, throttling, a warm pool), `STOPPING` (hang, budget, cancel), and the terminal states `SUCCEEDED`, `FAILED` and `CANCELLED`"
)
@pytest.mark.claim(
    "resume from the newest verified checkpoint, at once (or once the attempt's warm pool is `Available`; after a bad host at once, on another volume size so as never to match that pool: *Warm restarts*) | `max_restarts`"
)
@pytest.mark.claim(
    "SageMaker warm pool (`ResourceConfig.KeepAlivePeriodInSeconds`), on by default: a resume on the same instances waits for the pool and starts in seconds"
)
@pytest.mark.claim(
    "So the sweep describes each ended attempt's job every minute until its pool is `Terminated` or `Reused`"
)
@pytest.mark.claim(
    "a resume on the same instances waits up to 5 minutes for the pool to be `Available` and then starts on it in seconds"
)
def test_a_resume_waits_for_its_pool_and_runs_on_it_once_available():
    run = training_run()
    d, end = ended(run)  # an NCCL watchdog timeout: the instances are fine, the pool is kept
    assert d.run.status == RunStatus.RETRY_WAIT and d.run.wait_reason == "warm_pool"
    assert not launches(d) and d.run.wake_at_ms == end + POOL_WAIT_MS
    assert next_due_ms(d.run, end) == end + MIN  # the sweep describes the pool every minute
    waiting = step(d.run, pool_seen(d.run, None), end + MIN)  # not Available yet: no status at all
    assert waiting.ignored and not waiting.actions
    now = end + 2 * MIN
    warm = step(d.run, pool_seen(d.run, "Available"), now)
    (launch,) = launches(warm)
    assert warm.run.status == RunStatus.STARTING and launch.attempt == 2 and keep_alive(launch) == 600
    assert not any(isinstance(a, ReleaseWarmPool) for a in warm.actions)
    # the new job took it: the old job's pool is Reused, and no longer watched
    old = dataclasses.replace(warm.run, attempts=warm.run.attempts[:1])
    gone = step(warm.run, pool_seen(old, "Reused", billable_s=60, reused_by=launch.job_name), now + MIN)
    assert gone.run.warm_pools == () and not gone.actions and not gone.run.warm_pool_off


@pytest.mark.claim(
    "when the pool is `Available`, before a job runs on it, the hosts that printed a GPU hardware line are looked up once more (one bounded FilterLogEvents, with the fingerprint lines); a host named now is recorded as at the ending, the pool is released and the resume starts on new instances"
)
@pytest.mark.claim("A look-up that fails leaves the ending's decision as it was")
def test_a_hardware_line_that_lands_while_the_run_waits_for_its_pool_keeps_it_off_that_pool():
    """The ending named no host (its Xid line had not reached CloudWatch Logs a minute after the
    end), so the run waits to resume on its pool. When the pool is Available the hosts that
    printed a GPU hardware line are looked up again: algo-2 has one by now. The pool is released
    and the replacement starts on new instances (another volume size), not on the bad host; its
    fingerprint is remembered, so no infra check is asked. Before: it ran on the pool and met the
    bad GPU again minutes later (the bench's "met again" on a pool)."""
    run = training_run()
    d, end = ended(run)  # an NCCL watchdog timeout, nothing names a host yet
    assert d.run.wait_reason == "warm_pool" and not watch_of(d.run, run.current.job_name).bad_host
    fp = "[algo-2] [sagewarden] host=2 fingerprint=GPU-S21,GPU-S22"
    late = Observations(checkpoint=ckpt(500), suspect_hosts=("algo-2",), fingerprint_lines=(fp,))
    warm = step(d.run, pool_seen(d.run, "Available"), end + 3 * MIN, late)
    job = run.current.job_name
    assert ReleaseWarmPool(job) in warm.actions
    (launch,) = launches(warm)
    assert launch.attempt == 2 and volume(launch) == 99  # never the pool's instances
    assert warm.run.attempts[0].suspect_hosts == ("algo-2",) and watch_of(warm.run, job).bad_host
    assert [b[:2] for b in warm.run.bad_fingerprints] == [("algo-2", "GPU-S21,GPU-S22")]
    assert not warm.run.infra_check_pending  # fingerprinted: stopped at its line if it comes back
    # the look-up failed: unknown, and the decision taken at the ending stands (it runs on the pool)
    blind = step(
        d.run,
        pool_seen(d.run, "Available"),
        end + 3 * MIN,
        Observations(checkpoint=ckpt(500), hardware_printers_error="throttled"),
    )
    (reuse,) = launches(blind)
    assert volume(reuse) == 100 and not any(isinstance(a, ReleaseWarmPool) for a in blind.actions)
    assert any("still unknown (throttled)" in n for n in blind.notes)


@pytest.mark.claim(
    "a resume on the same instances waits up to 5 minutes for the pool to be `Available` and then starts on it in seconds"
)
@pytest.mark.claim("a pool nothing will reuse (the run ended, waits, falls back to another type) is released")
@pytest.mark.claim(
    "the drill draws 0-10 minutes and shows nothing, and a resume waits at most 5 minutes for its pool (a later pool is not waited for: the resume starts cold)"
)
def test_a_resume_starts_cold_when_its_pool_is_not_available_in_time_and_the_pool_is_released():
    run = training_run()
    d, end = ended(run)
    cold = step(d.run, Tick(), end + POOL_WAIT_MS)
    (launch,) = launches(cold)
    assert cold.run.status == RunStatus.STARTING and launch.attempt == 2
    old = dataclasses.replace(cold.run, attempts=cold.run.attempts[:1])
    late = step(cold.run, pool_seen(old, "Available"), end + POOL_WAIT_MS + MIN)
    assert ReleaseWarmPool(run.current.job_name) in late.actions  # nothing will take it now


def test_an_ending_that_keeps_no_pool_resumes_at_once():
    d, end = ended(training_run(), reason=INTERNAL)  # SageMaker keeps no pool after this
    (launch,) = launches(d)
    assert launch.attempt == 2 and d.run.status == RunStatus.STARTING
    watch = watch_of(d.run, run_job(d.run, 1))
    assert watch is not None and not watch.kept_by_ending
    old = dataclasses.replace(d.run, attempts=d.run.attempts[:1])
    gone = step(d.run, pool_seen(old, "Terminated"), end + 3 * MIN)
    assert gone.run.warm_pools == () and not gone.run.warm_pool_off  # expected: nothing to tell


def run_job(run, number):
    return next(a.job_name for a in run.attempts if a.number == number)


# --- a bad host: the replacement never runs on its pool ---------------------------------------------------


def _hang_stopped(run, alarm: str, obs: Observations):
    t0 = run.current.training_started_ms
    now = t0 + 3 * HOUR
    alarms = AlarmsObserved(run.current.job_name, 1, ((alarm, "ALARM", now - MIN),))
    stopping = step(run, alarms, now, obs)
    assert stopping.run.status == RunStatus.STOPPING
    end = now + 2 * MIN
    d = step(
        stopping.run,
        observed(stopping.run, "Stopped", "Stopped", end),
        end,
        Observations(checkpoint=ckpt(500)),
    )
    return d, end


@pytest.mark.claim(
    "resume from the newest verified checkpoint, at once (or once the attempt's warm pool is `Available`; after a bad host at once, on another volume size so as never to match that pool: *Warm restarts*) | `max_restarts`"
)
@pytest.mark.claim(
    "the replacement asks for `VolumeSizeInGB` 1 GB less than the request's (1 GB more when it asks for 1; the next replacement after a bad host goes back to the request's own size) and starts at once on new instances, while the pool is released as soon as it is `Available`"
)
@pytest.mark.claim(
    "the replacement must never run on that pool (it would meet the same dead host), and it does not wait for it either"
)
@pytest.mark.claim(
    "We assume a job can take only a pool that is `Available` when it is created; after a bad host the replacement does not rely on it (it asks for another volume size, which the matching rule never gives that pool; the matching rule itself is only proven on a real account)."
)
@pytest.mark.parametrize(
    ("alarm", "obs"),
    [
        ("gpu_lone_idle", Observations()),  # one host idle while its peers spin
        ("gpu_idle", Observations(suspect_hosts=("algo-2",))),  # the GPU triage names a host
    ],
    ids=[
        "one host idle while its peers spin",
        "the gpu triage names a host",
    ],
)
def test_a_hang_that_singles_out_a_host_never_resumes_on_its_pool(alarm, obs):
    """Item 2: the pool keeps the same instances; a resume on it meets the dead host again. The
    replacement starts at once, asking for a volume 1 GB off the pool's: SageMaker matches a pool
    only to a job with the same volume size, so it cannot take this one (before: it waited until
    the pool was gone, up to 5 minutes for SageMaker to report it and a look to release it)."""
    run = training_run()
    d, end = _hang_stopped(run, alarm, obs)
    job = run.current.job_name
    assert d.run.restarts_by_class == {"HANG": 1} and watch_of(d.run, job).bad_host
    (launch,) = launches(d)
    assert launch.attempt == 2 and volume(launch) == 99 and d.run.current.volume_steer
    available = step(d.run, pool_seen(d.run, "Available", attempt=1), end + 2 * MIN)
    assert ReleaseWarmPool(job) in available.actions and not launches(available)  # still released
    gone = step(available.run, pool_seen(d.run, "Terminated", billable_s=45, attempt=1), end + 2 * MIN)
    assert not launches(gone) and gone.run.warm_pools == ()
    assert not gone.run.warm_pool_off  # it was kept (billed 45 s): the quota is fine


@pytest.mark.claim(
    "Pools nothing will reuse are released once SageMaker reports them `Available`; after a bad host the replacement starts cold at once, asking for a volume size 1 GB off the pool's so SageMaker cannot match it (it waits for the pool to be gone when the request names no `VolumeSizeInGB`)."
)
@pytest.mark.claim(
    "It waits until the pool is gone only when the request names no volume size, or when pools holding a bad host already have both sizes"
)
def test_without_a_volume_size_to_steer_by_the_replacement_waits_until_the_bad_pool_is_gone():
    run = training_run()
    request = copy.deepcopy(run.request)
    del request["ResourceConfig"]["VolumeSizeInGB"]
    run = dataclasses.replace(run, request=request)
    d, end = _hang_stopped(run, "gpu_lone_idle", Observations())
    job = run.current.job_name
    assert not launches(d) and d.run.status == RunStatus.RETRY_WAIT and watch_of(d.run, job).bad_host
    available = step(d.run, pool_seen(d.run, "Available"), end + 2 * MIN)
    assert ReleaseWarmPool(job) in available.actions and not launches(available)
    gone = step(available.run, pool_seen(d.run, "Terminated", billable_s=45), end + 2 * MIN)
    (launch,) = launches(gone)
    assert launch.attempt == 2 and "VolumeSizeInGB" not in launch.request["ResourceConfig"]


@pytest.mark.claim(
    "Pools nothing will reuse are released once SageMaker reports them `Available`; after a bad host the replacement starts cold at once, asking for a volume size 1 GB off the pool's so SageMaker cannot match it (it waits for the pool to be gone when the request names no `VolumeSizeInGB`)."
)
@pytest.mark.claim(
    "the replacement must never run on that pool (it would meet the same dead host), and it does not wait for it either"
)
def test_a_bad_gpu_crash_that_ends_as_an_algorithm_error_is_a_bad_host():
    run = training_run()
    d, _ = ended(run, tail=XID_TAIL)  # AlgorithmError: SageMaker keeps the pool, Xid and all
    assert watch_of(d.run, run.current.job_name).bad_host
    (launch,) = launches(d)
    assert volume(launch) == 99  # never the pool's instances


@pytest.mark.claim(
    "resume from the newest verified checkpoint, at once (or once the attempt's warm pool is `Available`; after a bad host at once, on another volume size so as never to match that pool: *Warm restarts*) | `max_restarts`"
)
@pytest.mark.claim(
    "the replacement asks for `VolumeSizeInGB` 1 GB less than the request's (1 GB more when it asks for 1; the next replacement after a bad host goes back to the request's own size) and starts at once on new instances, while the pool is released as soon as it is `Available`"
)
@pytest.mark.claim(
    "It waits until the pool is gone only when the request names no volume size, or when pools holding a bad host already have both sizes"
)
def test_steering_alternates_and_never_lands_on_a_bad_pool_still_held():
    """Attempt 2 (99 GB) runs while attempt 1's bad pool (100 GB) is still kept; attempt 2 ends with
    a bad host too: its replacement cannot take 100 GB (attempt 1's bad pool) nor 99 GB (its own),
    so it waits until attempt 1's pool is gone, and then asks for 100 GB."""
    run = training_run()
    d, end = ended(run, tail=XID_TAIL)
    assert len(launches(d)) == 1
    run2 = step(d.run, LaunchAccepted(2), end + MIN).run
    t = end + 15 * MIN
    run2 = step(run2, observed(run2, "InProgress", "Training", t), t).run
    d2, end2 = ended(run2, tail=XID_TAIL, at=t + 5 * MIN)
    assert not launches(d2) and d2.run.status == RunStatus.RETRY_WAIT
    first = run.current.job_name
    assert {w.job_name for w in d2.run.warm_pools} == {first, run2.current.job_name}
    gone = step(d2.run, pool_seen(d.run, "Terminated", billable_s=60, attempt=1), end2 + 2 * MIN)
    (again,) = launches(gone)
    assert again.attempt == 3 and volume(again) == 100 and not gone.run.current.volume_steer


@pytest.mark.claim(
    "a launch refused for quota (`ResourceLimitExceeded`) while such a pool of its instance type is kept -- idle pool instances count towards the training-job quotas -- waits until that pool is gone, not a backoff"
)
def test_a_launch_refused_for_quota_while_a_bad_pool_is_held_waits_for_that_pool_not_a_backoff():
    """Idle warm-pool instances count towards the training-job quotas: in an account whose quota
    fits one job, the steered replacement is refused while the bad pool is kept. It waits until the
    pool is gone (released as soon as it is Available), then launches the same attempt again."""
    run = training_run()
    d, end = ended(run, tail=XID_TAIL)
    assert len(launches(d)) == 1
    msg = (
        "The account-level service limit 'ml.p4d.24xlarge for training job usage' is 2 Instances, with "
        "current utilization of 2 Instances and a request delta of 2 Instances. Please use AWS Service "
        "Quotas to request an increase for this quota."
    )
    refused = step(d.run, LaunchRejected(2, "ResourceLimitExceeded", msg), end + MIN)
    assert refused.run.status == RunStatus.RETRY_WAIT and refused.run.wait_reason == "warm_pool"
    job = run.current.job_name
    available = step(refused.run, pool_seen(d.run, "Available", attempt=1), end + 3 * MIN)
    assert ReleaseWarmPool(job) in available.actions and not launches(available)
    gone = step(available.run, pool_seen(d.run, "Terminated", billable_s=60, attempt=1), end + 4 * MIN)
    (again,) = launches(gone)
    assert again.attempt == 2 and volume(again) == 99


# --- the release: level-triggered, retried until the pool is gone -------------------------------------------


@pytest.mark.claim(
    "A terminal run never changes again, except for the bookkeeping of jobs still to stop and warm pools still to release (their billed time is added to its cost)"
)
@pytest.mark.claim(
    "Pools nothing will reuse are released once SageMaker reports them `Available`; after a bad host the replacement starts cold at once, asking for a volume size 1 GB off the pool's so SageMaker cannot match it (it waits for the pool to be gone when the request names no `VolumeSizeInGB`)."
)
@pytest.mark.claim(
    "So the sweep describes each ended attempt's job every minute until its pool is `Terminated` or `Reused`"
)
@pytest.mark.claim("a pool nothing will reuse (the run ended, waits, falls back to another type) is released")
@pytest.mark.claim(
    "which AWS accepts only while the pool is `Available`) and released again each minute until it is gone"
)
def test_a_finished_runs_pool_is_released_once_available_and_again_until_gone():
    """Item 3: AWS accepts the release only while the pool is Available."""
    run = training_run()
    d, end = ended(run, "Completed", "Completed", None)
    job = run.current.job_name
    assert d.run.status == RunStatus.SUCCEEDED and not any(isinstance(a, ReleaseWarmPool) for a in d.actions)
    assert next_due_ms(d.run, end) == end + MIN  # a terminal run is looked at while its pool is watched
    early = step(d.run, pool_seen(d.run, None), end + MIN)
    assert not early.actions
    first = step(d.run, pool_seen(d.run, "Available"), end + 3 * MIN)
    assert first.actions == (ReleaseWarmPool(job),) and first.run.status == RunStatus.SUCCEEDED
    soon = step(first.run, pool_seen(d.run, "Available"), end + 3 * MIN + 30_000)
    assert soon.ignored and not soon.actions  # asked 30 s ago
    again = step(first.run, pool_seen(d.run, "Available", billable_s=60), end + 4 * MIN)
    assert again.actions == (ReleaseWarmPool(job),) and watch_of(again.run, job).releases == 2
    gone = step(again.run, pool_seen(d.run, "Terminated", billable_s=90), end + 5 * MIN)
    assert gone.run.warm_pools == () and next_due_ms(gone.run, end + 5 * MIN) is None
    assert gone.run.cost_usd > d.run.cost_usd  # 90 s x 2 instances were billed
    assert gone.run.outcome == d.run.outcome and gone.run.status == RunStatus.SUCCEEDED


@pytest.mark.claim(
    "So the sweep describes each ended attempt's job every minute until its pool is `Terminated` or `Reused`"
)
def test_a_watch_is_dropped_after_its_bound_whatever_was_seen():
    run = training_run()
    d, end = ended(run, "Completed", "Completed", None)
    later = step(d.run, Tick(), end + POOL_SETTLE_MAX_MS + 600_000 + MIN)
    assert later.run.warm_pools == () and any("stopped watching" in n for n in later.notes)


# --- no warm-pool quota: told once ------------------------------------------------------------------------


@pytest.mark.claim(
    "Needs warm-pool quota (0 by default: read at submit, or learned at the first ending; the run is told once and asks for none)."
)
@pytest.mark.claim(
    "Where the quota cannot be read, the run asks; after an ending that keeps a pool, the first resume then waits until SageMaker reports it not kept, the run is told once and asks for none again"
)
def test_no_pool_after_an_ending_that_keeps_one_means_no_quota_told_once():
    """Item 5: with the default quota 0 SageMaker runs the job and keeps no pool, no error."""
    run = training_run()
    d, end = ended(run)
    cold = step(d.run, pool_seen(d.run, "Terminated", billable_s=0), end + 2 * MIN)
    (launch,) = launches(cold)
    (alert,) = [a for a in cold.actions if isinstance(a, Notify)]
    assert alert.event == "attempt.warm_pool_off" and alert.severity == "info"
    assert "ml.p4d.24xlarge for training warm pool usage" in alert.body and "Service Quotas" in alert.body
    assert cold.run.warm_pool_off and keep_alive(launch) is None  # the run asks for none again
    # the next attempt ends the same way: no pool to wait for, no second alert
    run2 = step(cold.run, LaunchAccepted(2), end + 3 * MIN).run
    run2 = step(run2, observed(run2, "InProgress", "Training", end + 10 * MIN), end + 10 * MIN).run
    again, _ = ended(run2, at=end + 2 * HOUR)
    assert launches(again) and not any(
        isinstance(a, Notify) and a.event == "attempt.warm_pool_off" for a in again.actions
    )


@pytest.mark.claim(
    "Where the quota cannot be read, the run asks; after an ending that keeps a pool, the first resume then waits until SageMaker reports it not kept, the run is told once and asks for none again"
)
def test_a_pool_that_is_never_reported_also_means_no_quota():
    run = training_run()
    d, end = ended(run)
    still = step(d.run, pool_seen(d.run, None), end + POOL_SETTLE_MAX_MS - MIN)
    assert not still.actions
    d = step(d.run, Tick(), end + POOL_WAIT_MS)  # the resume started cold meanwhile
    none = step(
        d.run,
        pool_seen(dataclasses.replace(d.run, attempts=d.run.attempts[:1]), None),
        end + POOL_SETTLE_MAX_MS,
    )
    assert any(isinstance(a, Notify) and a.event == "attempt.warm_pool_off" for a in none.actions)
    assert none.run.warm_pool_off and none.run.warm_pools == ()


# --- the same fault again on a reused pool: the pool is suspect as a whole ----------------------------------


def _second_attempt_on_the_pool(reused: bool = True, reason: str = NCCL, resume=None):
    """Attempt 1 ends with an NCCL watchdog timeout (or `reason`; nothing names a host: the pool is
    kept); attempt 2 runs on its pool (WarmPoolStatus Reused by attempt 2's job, unless `reused` is
    False: the pool was Terminated and attempt 2 started cold) and is in Training."""
    d, end = ended(training_run(resume=resume), reason=reason)
    warm = step(d.run, pool_seen(d.run, "Available"), end + 2 * MIN)
    (launch,) = launches(warm)
    run = step(warm.run, LaunchAccepted(2), end + 2 * MIN + 1).run
    old = dataclasses.replace(run, attempts=run.attempts[:1])
    seen = (
        pool_seen(old, "Reused", billable_s=60, reused_by=launch.job_name)
        if reused
        else pool_seen(old, "Terminated")
    )
    run = step(run, seen, end + 3 * MIN).run
    t = end + 4 * MIN
    return step(run, observed(run, "InProgress", "Training", t), t).run


@pytest.mark.claim("makes the pool suspect as a whole, though no host is named")
def test_the_same_fault_again_on_a_reused_pool_makes_the_pool_suspect_and_the_next_attempt_cold():
    run = _second_attempt_on_the_pool()
    assert run.current.number == 2 and run.current.pool_of == 1 and run.current.pool_fault == "INFRASTRUCTURE"
    d, _ = ended(run)  # the same NCCL watchdog timeout, on the same instances
    job = run.current.job_name
    assert watch_of(d.run, job).bad_host and d.run.attempts[1].pool_suspect
    (launch,) = launches(d)  # at once, on new instances (never the suspect pool: another volume size)
    assert launch.request["InfraCheckConfig"] == {"EnableInfraCheck": True} and volume(launch) == 99
    assert any("the same ending as attempt 1, on its warm pool" in n for n in d.notes)


@pytest.mark.claim(
    "resume once to confirm; FAILED when the next attempt ends the same way at the same step after resuming from the checkpoint this one left, on whatever instances (see *Deterministic failure*), or at once when the run never wrote a checkpoint"
)
def test_an_unexplained_crash_again_at_the_same_step_on_the_same_pool_stops_the_run_at_once():
    """Two unexplained crashes in a row, the second after a resume from the checkpoint the first left
    and without progress past it: the code fails, whatever instances it runs on. The run stops at the
    repeat with both attempts' lines (before: the repeat on the first one's warm pool made the pool
    suspect, and a third attempt, cold with the infra check, paid a full-cluster restart to say the
    same)."""
    run = _second_attempt_on_the_pool(reason=SEGFAULT, resume=ckpt(500))
    assert run.status != RunStatus.FAILED and run.current.number == 2 and run.current.pool_of == 1
    d, _ = ended(run, reason=SEGFAULT)  # the same crash, no newer checkpoint, same instances
    assert d.run.status == RunStatus.FAILED and not launches(d)
    assert "deterministic failure: attempt 2 ended as attempt 1 did" in (d.run.outcome or "")
    (alert,) = [a for a in d.actions if isinstance(a, Notify) and a.event == "run.failed"]
    assert "Attempt 1:" in alert.body and "Attempt 2:" in alert.body and "A guess (UNKNOWN)" in alert.body


def test_the_same_kind_of_crash_at_another_step_on_the_same_pool_moves_to_new_instances():
    """A NaN loss at step 512, then on the same instances at step 530: not one point of the data
    (a bad GPU corrupting numbers NaNs wherever it likes). The pool is suspect and the next attempt
    starts cold with the infra check."""
    nan = 'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage "loss is NaN at step {n}"'
    run = _second_attempt_on_the_pool(reason=nan.format(n=512), resume=ckpt(500))
    d, _ = ended(run, reason=nan.format(n=530))
    assert d.run.status != RunStatus.FAILED and d.run.attempts[1].pool_suspect
    (launch,) = launches(d)
    assert launch.request["InfraCheckConfig"] == {"EnableInfraCheck": True}


def test_a_different_ending_or_a_cold_second_attempt_keeps_the_pool_trusted():
    other, _ = ended(_second_attempt_on_the_pool(), reason=SEGFAULT)  # a crash of another class
    assert not other.run.attempts[1].pool_suspect and not other.run.infra_check_pending
    cold = _second_attempt_on_the_pool(reused=False)
    assert cold.current.pool_of is None
    d, _ = ended(cold)  # the same ending, but on other instances: nothing says they are bad
    assert not watch_of(d.run, cold.current.job_name).bad_host and not d.run.infra_check_pending
