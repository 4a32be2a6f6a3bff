"""Bad hosts at the level of the pure decision (domain/hosts/bad_hosts.py): every fault that singles out a
host keeps the replacement off its warm pool and asks SageMaker for an infra check; fingerprints
of bad hosts are remembered and a later attempt printing one is stopped at once."""

from __future__ import annotations

import dataclasses

import pytest

from sagewarden.adapters.run_codec import run_from_dict, run_to_dict
from sagewarden.domain.capacity.warm_pools import watch_of
from sagewarden.domain.due import next_due_ms
from sagewarden.domain.endings.attempt_ended import LOG_SETTLE_MS, UNREAD_RETRY_MS
from sagewarden.domain.hosts.bad_hosts import (
    MAX_BAD_FINGERPRINTS,
    address_book,
    address_pattern,
    fingerprints,
    hosts_in_tail,
    peer_addresses,
)
from sagewarden.domain.vocabulary.actions import LaunchAttempt, Notify, StopJob
from sagewarden.domain.vocabulary.events import LaunchAccepted, Observations, Tick
from sagewarden.domain.vocabulary.models import RunStatus
from sagewarden.domain.vocabulary.policy import RunPolicy
from sagewarden.domain.vocabulary.reasons import StopIntent
from tests.builders import HOUR, MIN, ckpt, observed, on_pool, step, training_run

NCCL_REASON = 'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage "ncclRemoteError"'
HARDWARE = "Hardware failure: unhealthy instance algo-2"
FP2 = "[algo-2] [sagewarden] host=2 fingerprint=GPU-S21,GPU-S22"
FP1 = "[algo-1] [sagewarden] host=1 fingerprint=GPU-S11,GPU-S12"
# every peer prints NCCL errors about its own side; only a host *named* in one is singled out
NAMED_NCCL = (
    "[algo-1] algo-1:95:190 [3] NCCL WARN NET/OFI Request error: remote peer algo-2 closed the connection",
    "[algo-1] torch.distributed.DistBackendError: NCCL error: ncclRemoteError: remote process exited",
)
ANON_NCCL = (
    "[algo-1] torch.distributed.DistBackendError: NCCL error: ncclRemoteError: remote process exited",
)
ECC_TAIL = ("[algo-2] RuntimeError: CUDA error: uncorrectable ECC error encountered",)
XID_TAIL = ("[algo-2] NVRM: Xid (PCI:0000:10:1c): 79, GPU has fallen off the bus.",)


def launches(d):
    return [a for a in d.actions if isinstance(a, LaunchAttempt)]


def alerts(d, event):
    return [a for a in d.actions if isinstance(a, Notify) and a.event == event]


def end(run, reason, tail, *, fp=(FP1, FP2), fp_error=None, policy=None, seen_after=LOG_SETTLE_MS):
    """The attempt fails at `at`, observed `seen_after` later (by default once its last log lines
    have had time to reach CloudWatch Logs)."""
    at = run.current.training_started_ms + HOUR
    obs = Observations(checkpoint=ckpt(500), log_tail=tail, fingerprint_lines=fp, fingerprint_error=fp_error)
    return step(run, observed(run, "Failed", "Failed", at, reason), at + seen_after, obs), at


def next_launch(d):
    """The replacement's LaunchAttempt, once its (bad) pool is gone."""
    d = on_pool(d)
    (launch,) = launches(d)
    return d, launch


@pytest.mark.claim(
    "After a fault that singles out a host the replacement starts cold at once (it asks for a volume size 1 GB off the one the bad host's warm pool has, so SageMaker cannot match that pool) and asks SageMaker's infra check first (modelled as 5-30 extra minutes, since AWS publishes no duration), unless the host printed the contract's fingerprint line"
)
@pytest.mark.parametrize(
    ("reason", "tail", "host"),
    [
        (NCCL_REASON, NAMED_NCCL, "algo-2"),  # an NCCL error naming a host
        (NCCL_REASON, ECC_TAIL, "algo-2"),  # an ECC error in a host's log
        (NCCL_REASON, XID_TAIL, "algo-2"),  # an Xid
        (HARDWARE, (), "algo-2"),  # a hardware FailureReason naming its instance
        ("ClientError: Hardware failure: repair exhausted", (), None),  # ... or not
    ],
    ids=[
        "an nccl error naming a host",
        "an ecc error in a host's log",
        "an xid in a host's log",
        "a hardware reason naming its instance",
        "a hardware reason naming no instance",
    ],
)
def test_a_fault_singling_out_a_host_restarts_cold_with_the_infra_check(reason, tail, host):
    run = training_run(policy=RunPolicy(keep_alive_seconds=600))
    d, _ = end(run, reason, tail, fp=(FP1,))  # the host printed no fingerprint line
    job = run.current.job_name
    assert watch_of(d.run, job).bad_host, d.notes  # the pool holding it is never reused
    assert d.run.infra_check_pending
    if host is not None:
        assert d.run.attempts[0].suspect_hosts == (host,)
    d, launch = next_launch(d)
    assert launch.request["InfraCheckConfig"] == {"EnableInfraCheck": True}
    assert d.run.current.infra_check


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: CUDA error: uncorrectable NVLink error detected during the execution",
        "RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR",
        "RuntimeError: CUDA error: unspecified launch failure",
    ],
    ids=["an uncorrectable NVLink error", "a cuDNN internal error", "an unspecified launch failure"],
)
def test_a_gpu_fault_naming_no_host_restarts_cold_with_the_infra_check(line):
    """No host flag, no Xid: still the hardware (before: a warm restart on the same GPUs)."""
    run = training_run(policy=RunPolicy(keep_alive_seconds=600))
    d, _ = end(run, NCCL_REASON, (line,))  # the reader's tail without a host prefix
    assert watch_of(d.run, run.current.job_name).bad_host, d.notes
    d, launch = next_launch(d)
    assert launch.request["InfraCheckConfig"] == {"EnableInfraCheck": True}


def test_an_nccl_error_naming_no_host_restarts_warm_without_an_infra_check():
    run = training_run(policy=RunPolicy(keep_alive_seconds=600))
    d, _ = end(run, NCCL_REASON, ANON_NCCL)
    assert not watch_of(d.run, run.current.job_name).bad_host
    assert not d.run.infra_check_pending
    d, launch = next_launch(d)
    assert "InfraCheckConfig" not in launch.request


@pytest.mark.claim("whose job leaves a warm pool to reuse is not decided until a minute after the job's end")
def test_a_crash_naming_no_host_seen_at_its_end_waits_for_its_last_log_lines():
    """CloudWatch Logs ingests a line some time after it is written (AWS publishes no bound): the
    Xid line that names the failed host can land after the Failed event. Decided at once, the
    resume would run on the same warm pool and meet the bad GPU again; instead the decision waits
    LOG_SETTLE_MS after the end, and the read then finds the line."""
    run = training_run(policy=RunPolicy(keep_alive_seconds=600))
    early, at = end(run, NCCL_REASON, ANON_NCCL, seen_after=10_000)
    assert early.run.current.end_pending and not early.actions
    assert "may still be on their way" in (early.run.deferred_reason or "")
    assert next_due_ms(early.run, at + 10_000) is not None  # the sweep looks again
    failed = observed(early.run, "Failed", "Failed", at, NCCL_REASON)
    obs = Observations(checkpoint=ckpt(500), log_tail=(*ANON_NCCL, *ECC_TAIL), fingerprint_lines=(FP1, FP2))
    later = step(early.run, failed, at + LOG_SETTLE_MS, obs)
    assert watch_of(later.run, run.current.job_name).bad_host  # the late line named the host
    assert later.run.deferred_since_ms is None
    # with nothing more to read by then, it is decided as the lines stand: warm, no host
    plain = step(
        early.run, failed, at + LOG_SETTLE_MS, Observations(checkpoint=ckpt(500), log_tail=ANON_NCCL)
    )
    assert not watch_of(plain.run, run.current.job_name).bad_host and plain.run.deferred_since_ms is None


@pytest.mark.claim(
    "So is a bad-GPU crash that does not say which host, while the policy skips the infra check for a fingerprinted host"
)
def test_a_hardware_crash_naming_no_host_yet_waits_for_the_line_that_spares_the_infra_check():
    """The crash's CUDA error (in the FailureReason) says a bad GPU, but not which host: decided at
    once, the host has no name, so no fingerprint is remembered and the next attempt pays the
    infra check. A minute after the end the Xid line of algo-2 has landed: its fingerprint is
    remembered and the next attempt starts without the check (a return is stopped at its line)."""
    run = training_run(policy=RunPolicy(keep_alive_seconds=600))
    ecc = 'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage "CUDA error: uncorrectable ECC error encountered"'
    early, at = end(run, ecc, (), seen_after=5_000)
    assert early.run.current.end_pending and "may still be on their way" in (early.run.deferred_reason or "")
    failed = observed(early.run, "Failed", "Failed", at, ecc)
    obs = Observations(checkpoint=ckpt(500), log_tail=XID_TAIL, fingerprint_lines=(FP1, FP2))
    later = step(early.run, failed, at + LOG_SETTLE_MS, obs)
    ended = next(a for a in later.run.attempts if a.number == run.current.number)
    assert ended.suspect_hosts == ("algo-2",) and not later.run.infra_check_pending
    # nothing named a minute on: the bad instance is decided unnamed, with the check
    blind = step(early.run, failed, at + LOG_SETTLE_MS, Observations(checkpoint=ckpt(500)))
    assert blind.run.deferred_since_ms is None and blind.run.infra_check_pending
    # a policy that asks for the check anyway has nothing to wait for
    always = training_run(policy=RunPolicy(keep_alive_seconds=600, infra_check_unless_fingerprinted=False))
    now, _ = end(always, ecc, (), seen_after=5_000)
    assert now.run.deferred_since_ms is None and now.run.infra_check_pending


def test_a_crash_that_names_its_host_or_keeps_no_pool_is_decided_at_once():
    run = training_run(policy=RunPolicy(keep_alive_seconds=600))
    named, _ = end(run, NCCL_REASON, ECC_TAIL, seen_after=0)  # the Xid line is there already
    assert watch_of(named.run, run.current.job_name).bad_host and named.run.deferred_since_ms is None
    no_pool = training_run(policy=RunPolicy(keep_alive_seconds=0))
    cold, _ = end(no_pool, NCCL_REASON, ANON_NCCL, seen_after=0)  # new instances anyway
    assert cold.run.deferred_since_ms is None and launches(cold)


def test_the_policy_turns_the_infra_check_off_and_the_pool_still_is_not_reused():
    run = training_run(policy=RunPolicy(keep_alive_seconds=600, infra_check_after_bad_host=False))
    d, _ = end(run, NCCL_REASON, ECC_TAIL)
    assert watch_of(d.run, run.current.job_name).bad_host
    d, launch = next_launch(d)
    assert "InfraCheckConfig" not in launch.request


def test_a_users_own_infra_check_config_is_kept():
    run = training_run(policy=RunPolicy(keep_alive_seconds=600))
    run = dataclasses.replace(run, request={**run.request, "InfraCheckConfig": {"EnableInfraCheck": False}})
    d, _ = end(run, NCCL_REASON, ECC_TAIL)
    d, launch = next_launch(d)
    assert launch.request["InfraCheckConfig"] == {"EnableInfraCheck": False}


def test_the_infra_check_spell_ends_once_an_attempt_trains_with_it():
    run = training_run(policy=RunPolicy(keep_alive_seconds=0))
    d, at = end(run, NCCL_REASON, ECC_TAIL, fp=())
    (launch,) = launches(d)  # no pool: at once, cold
    assert launch.request["InfraCheckConfig"] == {"EnableInfraCheck": True}
    run = step(d.run, LaunchAccepted(2), at + 1).run
    run = step(run, observed(run, "InProgress", "Training", at + 20 * MIN), at + 20 * MIN).run
    assert not run.infra_check_pending
    d, _ = end(run, NCCL_REASON, ANON_NCCL)  # a fault that singles out no host
    (launch,) = launches(d)
    assert "InfraCheckConfig" not in launch.request


def test_the_bad_hosts_fingerprint_is_remembered_and_survives_the_store():
    run = training_run(policy=RunPolicy(keep_alive_seconds=0, infra_check_unless_fingerprinted=False))
    d, _ = end(run, NCCL_REASON, ECC_TAIL)
    assert d.run.bad_fingerprints == (("algo-2", "GPU-S21,GPU-S22", 1),)
    again = run_from_dict(run_to_dict(d.run), d.run.attempts)
    assert again.bad_fingerprints == d.run.bad_fingerprints and again.infra_check_pending
    assert again.current.infra_check


@pytest.mark.claim(
    "When that fingerprint would spare the next attempt the infra check, the ending waits for a read that succeeds, on the sweep's looks for up to 3 minutes after the job's end, then is decided with the fingerprint unknown and the check"
)
@pytest.mark.claim(
    'each one unknown, never "none printed", and read again for up to 3 minutes before the ending is decided without it'
)
def test_an_unreadable_fingerprint_is_read_again_then_unknown_not_absent():
    """A throttled fingerprint read is unknown, not "none printed": the ending waits for a read
    that succeeds (the fingerprint remembered, no infra check for the next attempt), for up to
    UNREAD_RETRY_MS after the job's end; still unreadable then, it is decided with the
    fingerprint unknown and the check."""
    run = training_run(policy=RunPolicy(keep_alive_seconds=0))
    throttled = "ThrottlingException: Rate exceeded"
    d, at = end(run, NCCL_REASON, ECC_TAIL, fp=(), fp_error=throttled)
    assert d.run.deferred_since_ms is not None and "fingerprint could not be read" in d.run.deferred_reason
    assert not launches(d) and d.run.bad_fingerprints == ()
    failed = observed(d.run, "Failed", "Failed", at, NCCL_REASON)
    read = step(
        d.run,
        failed,
        at + 2 * MIN,
        Observations(checkpoint=ckpt(500), log_tail=ECC_TAIL, fingerprint_lines=(FP2,)),
    )
    assert read.run.deferred_since_ms is None and launches(read)
    assert [host for host, _, _ in read.run.bad_fingerprints] == [
        "algo-2"
    ] and not read.run.infra_check_pending
    late = Observations(checkpoint=ckpt(500), log_tail=ECC_TAIL, fingerprint_error=throttled)
    blind = step(d.run, failed, at + UNREAD_RETRY_MS, late)
    assert blind.run.deferred_since_ms is None and launches(blind)
    assert blind.run.bad_fingerprints == ()
    assert any("fingerprint of algo-2 unknown" in n for n in blind.notes)
    assert blind.run.infra_check_pending  # the host is still singled out


@pytest.mark.claim(
    "When that look-up fails (throttled: many runs ending at once share the account's FilterLogEvents rate) and nothing names a host, the ending waits for one that succeeds, on the sweep's looks for up to 3 minutes after the job's end, then is decided with what the tail shows"
)
@pytest.mark.claim(
    'each one unknown, never "none printed", and read again for up to 3 minutes before the ending is decided without it'
)
def test_a_crash_naming_no_host_waits_while_the_hardware_line_look_up_fails():
    """On a job of 2+ hosts the failed host is found by one FilterLogEvents for GPU hardware lines
    (the tail reads hosts in order and may not reach it). A throttled look-up is unknown, not "no
    host printed one": the ending waits for one that succeeds, for up to UNREAD_RETRY_MS after the
    job's end; the one that succeeds names algo-2, kept off the next attempt."""
    run = training_run(policy=RunPolicy(keep_alive_seconds=0))
    assert run.current.instance_count >= 2
    throttled = "ThrottlingException: Rate exceeded"
    at = run.current.training_started_ms + HOUR
    failed = observed(run, "Failed", "Failed", at, NCCL_REASON)
    blind = Observations(checkpoint=ckpt(500), log_tail=ANON_NCCL, hardware_printers_error=throttled)
    early = step(run, failed, at + LOG_SETTLE_MS, blind)
    assert "which host printed a GPU hardware line is unknown" in (early.run.deferred_reason or "")
    assert not launches(early)
    named = step(early.run, failed, at + 2 * MIN, Observations(checkpoint=ckpt(500), log_tail=XID_TAIL))
    assert named.run.deferred_since_ms is None and named.run.attempts[0].suspect_hosts == ("algo-2",)
    assert launches(named)
    # still unknown 3 minutes on: decided with what the tail shows, nothing named
    late = step(early.run, failed, at + UNREAD_RETRY_MS, blind)
    assert late.run.deferred_since_ms is None and late.run.attempts[0].suspect_hosts == () and launches(late)
    # the look-up answered: decided at the event, as before
    answered = step(run, failed, at + LOG_SETTLE_MS, Observations(checkpoint=ckpt(500), log_tail=ANON_NCCL))
    assert answered.run.deferred_since_ms is None and launches(answered)


@pytest.mark.claim(
    "When that fingerprint would spare the next attempt the infra check, the ending waits for a read that succeeds, on the sweep's looks for up to 3 minutes after the job's end, then is decided with the fingerprint unknown and the check"
)
def test_an_unreadable_fingerprint_does_not_hold_an_ending_whose_next_attempt_is_checked_anyway():
    run = training_run(policy=RunPolicy(keep_alive_seconds=0, infra_check_unless_fingerprinted=False))
    d, _ = end(run, NCCL_REASON, ECC_TAIL, fp=(), fp_error="ThrottlingException: Rate exceeded")
    assert d.run.deferred_since_ms is None and launches(d) and d.run.infra_check_pending


def _second_attempt_training():
    run = training_run(policy=RunPolicy(keep_alive_seconds=0))
    d, at = end(run, NCCL_REASON, ECC_TAIL)
    run = step(d.run, LaunchAccepted(2), at + 1).run
    t = at + 20 * MIN
    return step(run, observed(run, "InProgress", "Training", t), t).run, t


def test_a_later_attempt_printing_a_known_bad_fingerprint_is_stopped_fast_and_resumed_cold():
    run, t = _second_attempt_training()
    lines = (
        "[algo-1] [sagewarden] host=1 fingerprint=GPU-N11,GPU-N12",
        "[algo-2] [sagewarden] host=2 fingerprint=GPU-S22,GPU-S21",  # the lemon, back
    )
    d = step(run, Tick(), t + MIN, Observations(scan_lines=lines))
    (stop,) = [a for a in d.actions if isinstance(a, StopJob)]
    assert stop.intent == StopIntent.BAD_HOST and d.run.status == RunStatus.STOPPING
    (alert,) = alerts(d, "attempt.bad_host")
    assert "algo-2" in alert.subject and "GPU-S21,GPU-S22" in alert.body
    # the stop ends the attempt: resumed on new instances with the infra check
    stopped = step(
        d.run,
        observed(d.run, "Stopped", "Stopped", t + 3 * MIN),
        t + 3 * MIN,
        Observations(checkpoint=ckpt(600)),
    )
    (launch,) = launches(stopped)
    assert launch.request["InfraCheckConfig"] == {"EnableInfraCheck": True}
    assert stopped.run.attempts[1].end_class == "SUPERVISOR_STOP"
    assert stopped.run.restarts_by_class.get("BAD_HOST") == 1


def test_the_fingerprint_scan_ends_once_every_host_printed_a_good_one():
    run, t = _second_attempt_training()
    one = ("[algo-1] [sagewarden] host=1 fingerprint=GPU-N1",)
    d = step(run, Tick(), t + MIN, Observations(scan_lines=one))
    assert not d.run.current.scan_done  # algo-2 not seen yet: it may still be the lemon
    both = (*one, "[algo-2] [sagewarden] host=2 fingerprint=GPU-N2")
    d = step(d.run, Tick(), t + 2 * MIN, Observations(scan_lines=both))
    assert d.run.current.scan_done and d.run.status == RunStatus.TRAINING


def test_good_fingerprints_are_not_stopped_and_an_unreadable_scan_decides_nothing():
    run, t = _second_attempt_training()
    d = step(
        run, Tick(), t + MIN, Observations(scan_lines=("[algo-2] [sagewarden] host=2 fingerprint=GPU-N1",))
    )
    assert not [a for a in d.actions if isinstance(a, StopJob)]
    d = step(run, Tick(), t + MIN, Observations(scan_error="ThrottlingException"))
    assert not [a for a in d.actions if isinstance(a, StopJob)]
    assert d.run.current == run.current  # nothing judged: the next minute reads again


def test_the_remembered_fingerprints_are_bounded():
    run = training_run(policy=RunPolicy(keep_alive_seconds=0))
    many = tuple((f"algo-{i}", f"GPU-{i}", 1) for i in range(MAX_BAD_FINGERPRINTS))
    run = dataclasses.replace(run, bad_fingerprints=many)
    d, _ = end(run, NCCL_REASON, ECC_TAIL)
    assert len(d.run.bad_fingerprints) == MAX_BAD_FINGERPRINTS
    assert d.run.bad_fingerprints[-1][1] == "GPU-S21,GPU-S22"


def test_parsing_hosts_and_fingerprints():
    assert hosts_in_tail(NAMED_NCCL, 4) == ("algo-2",)
    assert hosts_in_tail(ANON_NCCL, 4) == ()
    assert hosts_in_tail(("[sagewarden] first error-looking line: " + XID_TAIL[0],), 4) == ("algo-2",)
    assert hosts_in_tail(("[algo-9] Xid 79",), 4) == ()  # not a host of this job
    fabric_wide = tuple(f"[algo-{i}] uncorrectable ECC error" for i in range(1, 5))
    assert hosts_in_tail(fabric_wide, 4) == ()  # more than two hosts: not one bad host
    assert fingerprints((FP2, FP1, "[algo-2] [sagewarden] host=2 fingerprint=OTHER")) == {
        "algo-2": "GPU-S21,GPU-S22",
        "algo-1": "GPU-S11,GPU-S12",
    }


@pytest.mark.claim(
    "After a fault that singles out a host the replacement starts cold at once (it asks for a volume size 1 GB off the one the bad host's warm pool has, so SageMaker cannot match that pool) and asks SageMaker's infra check first (modelled as 5-30 extra minutes, since AWS publishes no duration), unless the host printed the contract's fingerprint line"
)
def test_a_bad_host_that_printed_its_fingerprint_restarts_without_the_check():
    run = training_run(policy=RunPolicy(keep_alive_seconds=0))
    d, _ = end(run, NCCL_REASON, ECC_TAIL)  # algo-2 printed its fingerprint line
    assert d.run.bad_fingerprints == (("algo-2", "GPU-S21,GPU-S22", 1),)
    assert not d.run.infra_check_pending, d.notes  # its fingerprint line catches it if it comes back
    (launch,) = launches(d)
    assert "InfraCheckConfig" not in launch.request
    assert any("no infra check for the next attempt" in n for n in d.notes)
    # (it comes back: test_a_later_attempt_printing_a_known_bad_fingerprint_... -- the check follows)


def test_the_fingerprint_exception_is_a_policy_and_needs_every_singled_out_hosts_fingerprint():
    strict = training_run(policy=RunPolicy(keep_alive_seconds=0, infra_check_unless_fingerprinted=False))
    d, _ = end(strict, NCCL_REASON, ECC_TAIL)
    assert d.run.infra_check_pending  # the check whatever the fingerprint
    d, _ = end(training_run(policy=RunPolicy(keep_alive_seconds=0)), NCCL_REASON, ECC_TAIL, fp=(FP1,))
    assert d.run.infra_check_pending  # algo-2 printed none: the check is the only guard


# --- peers by address (hosts.address_book, hosts.peer_addresses) ------------------------------------

# what NCCL prints at its first collective with NCCL_DEBUG=INFO, per host stream (docs/fidelity.md)
BOOT = (
    "[algo-1] algo-1:91:181 [0] NCCL INFO Bootstrap : Using eth0:10.0.7.11<0>",
    "[algo-2] algo-2:92:182 [0] NCCL INFO Bootstrap : Using eth0:10.0.9.42<0>",
    "[algo-3] algo-3:93:183 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.3.5<0>",
)
# printed by algo-1 about its peer, named only by address (aws-ofi-nccl #795's wording)
BY_ADDRESS = (
    "[algo-1] algo-1:91:220 [1] misc/socket.cc:518 NCCL WARN Net : Call to recv from 10.0.9.42<58355> failed : Broken pipe",
    "[algo-1] torch.distributed.DistBackendError: NCCL error: ncclRemoteError: remote process exited",
)


def test_the_hosts_own_startup_lines_map_addresses_to_hosts():
    assert address_book(BOOT) == {"10.0.7.11": "algo-1", "10.0.9.42": "algo-2", "10.0.3.5": "algo-3"}
    assert address_book(("NCCL INFO Bootstrap : Using eth0:10.0.7.11<0>",)) == {}  # no host to tie it to
    assert peer_addresses(BY_ADDRESS) == ("10.0.9.42",)
    assert peer_addresses(BOOT) == ()  # a host declaring its own address names no peer
    many = tuple(f"[algo-1] NCCL WARN Net : Call to recv from 10.0.0.{i}<5> failed" for i in range(1, 5))
    assert peer_addresses(many) == ()  # more than two peers: a fabric-wide fault, nothing to look up
    assert address_pattern("10.0.9.42") == '":10.0.9.42<"'


def test_an_nccl_line_naming_a_peer_by_address_singles_out_that_host():
    assert hosts_in_tail(BY_ADDRESS, 4) == ()  # before: an address names nobody
    assert hosts_in_tail(BY_ADDRESS, 4, address_book(BOOT)) == ("algo-2",)
    gloo = (
        "[algo-3] RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.7.11]:28048",
    )
    assert hosts_in_tail(gloo, 4, address_book(BOOT)) == ("algo-1",)
    own = ("[algo-2] NCCL WARN Net : Call to recv from 10.0.9.42<1> failed",)  # its own address: not a peer
    assert hosts_in_tail(own, 4, address_book(BOOT)) == ()


def test_nccls_own_host_prefix_names_the_printer_when_the_reader_gave_none():
    line = "algo-1:249:249 [0] ofi_init:1339 NCCL WARN NET/OFI aws-ofi-nccl initialization failed"
    assert hosts_in_tail((line,), 4) == ()  # algo-1 printed it about itself


def test_a_failure_naming_a_peer_by_address_keeps_the_replacement_off_its_host():
    run = training_run(policy=RunPolicy(keep_alive_seconds=0))
    at = run.current.training_started_ms + HOUR
    obs = Observations(
        checkpoint=ckpt(500), log_tail=BY_ADDRESS, address_lines=BOOT, fingerprint_lines=(FP1, FP2)
    )
    d = step(run, observed(run, "Failed", "Failed", at, NCCL_REASON), at + LOG_SETTLE_MS, obs)
    assert d.run.attempts[0].suspect_hosts == ("algo-2",)
    assert any("singled out algo-2" in n for n in d.notes)
    assert d.run.bad_fingerprints == (("algo-2", "GPU-S21,GPU-S22", 1),)


def test_an_address_look_up_that_failed_is_read_again_before_the_ending_is_decided():
    run = training_run(policy=RunPolicy(keep_alive_seconds=0))
    at = run.current.training_started_ms + HOUR
    unread = Observations(checkpoint=ckpt(500), log_tail=BY_ADDRESS, address_error="ThrottlingException")
    d = step(run, observed(run, "Failed", "Failed", at, NCCL_REASON), at + LOG_SETTLE_MS, unread)
    assert d.run.current.end_class is None and "peer address" in (d.run.deferred_reason or "")
    late = step(d.run, observed(d.run, "Failed", "Failed", at, NCCL_REASON), at + UNREAD_RETRY_MS, unread)
    assert late.run.current.number == 2  # decided without it after the bound: resumed
