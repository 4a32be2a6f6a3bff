"""Scenario tests for issue 19's bad hosts and slow fabric on the simulated account: the real
handlers, sweep and adapters (FilterLogEvents under the account's rate limits) against a
SageMaker that keeps bad hosts in warm pools, hands a lemon back, models InfraCheckConfig and
prints NCCL's network choice (drill/sim/hosts.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from drill.scenarios.spec import SCENARIO_DIR
from tests.scenarios.helpers import classes, decisions, run_drill, run_spec

ITYPE = "ml.p4d.24xlarge"
NAMED = [
    "algo-1:95:190 [3] NCCL WARN NET/OFI Request error: remote peer algo-3 closed the connection",
    "torch.distributed.DistBackendError: NCCL error: ncclRemoteError: remote process exited",
]


def shipped(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((Path(SCENARIO_DIR) / f"{name}.json").read_text())
    return data


def jobs_of(result: Any, run: str) -> list[Any]:
    return sorted((j for j in result.jobs if j.run_name == run), key=lambda j: j.created_ms)


def alerts(result: Any, run: str, event: str) -> list[dict[str, Any]]:
    return [row for row in result.alert_rows() if row["run"] == run and row["event"] == event]


def test_scenario_an_nccl_error_naming_a_host_restarts_cold_with_the_infra_check(template):
    """A warm restart would run on the same instances and meet algo-3 again (before: attempt 2
    reused the pool and failed again 5 min into Training)."""
    result = run_drill(template, shipped("bad-host"))
    assert classes(result, "warm-again") == ["INFRASTRUCTURE", "SUCCEEDED"], decisions(result, "warm-again")
    first, second = jobs_of(result, "warm-again")
    assert first._bad_hosts and 3 in first._bad_hosts
    assert not second.warm_pool_used and second._inherited == {}  # new instances
    assert second.request["InfraCheckConfig"] == {"EnableInfraCheck": True} and second.infra_check
    assert "InfraCheckConfig" not in first.request
    attempts = result.runs["warm-again"]["attempts"]
    assert [a["infra_check"] for a in attempts] == [False, True]  # the run's GET shows it
    assert "singled out algo-3" in decisions(result, "warm-again")


def test_scenario_a_known_bad_fingerprint_is_stopped_before_it_fails_again(template):
    result = run_drill(template, shipped("bad-host"))
    assert classes(result, "lemon") == ["INFRASTRUCTURE", "SUPERVISOR_STOP", "SUCCEEDED"], decisions(
        result, "lemon"
    )
    _, second, third = jobs_of(result, "lemon")
    # host 2 printed its fingerprint: the restart asks for no infra check, its line is the guard
    assert 2 in second._inherited and "InfraCheckConfig" not in second.request
    kinds = [(f["attempt"], f["kind"]) for f in result.faults if f["run"] == "lemon"]
    assert (2, "hardware") not in kinds  # stopped before the lemon failed it again
    assert second.stop_requested_ms is not None and second.training_started_ms is not None
    assert second.stop_requested_ms - second.training_started_ms <= 5 * 60_000
    (alert,) = alerts(result, "lemon", "attempt.bad_host")
    fingerprint = ",".join(sorted(second._serials[2].split(",")))
    assert "algo-2" in alert["subject"] and fingerprint in alert["body"]
    assert third._inherited == {} and third.infra_check


def test_scenario_the_infra_check_adds_start_up_time_and_can_fail_a_job_naming_the_host(template):
    """The check's duration is drawn from an adversarial range; a bad host it finds on a warm
    pool fails the job in Starting when the account is set to ("fail")."""
    data = {
        "seed": 7,
        "account": {
            "store": "memory",
            "warm_pools": {"quotas": {ITYPE: 8}, "available_after_s": [0, 0]},
            "startup": {
                "infra_check_min_s": 600,
                "infra_check_max_s": 600,
                "infra_check_on_bad_host": "fail",
            },
        },
        "runs": [
            run_spec(
                "checked",
                instance_count=4,
                policy={"keep_alive_seconds": 1800},
                training_job={"InfraCheckConfig": {"EnableInfraCheck": True}},
            )
        ],
        "faults": [
            {"kind": "dead_host", "run": "checked", "attempt": 1, "after_training_min": 30, "host": 2}
        ],
    }
    result = run_drill(template, data)
    first = jobs_of(result, "checked")[0]
    assert first.infra_check
    start_s = (first.training_started_ms - first.created_ms) / 1000
    assert start_s >= 360 + 600 + 120  # provision + the check + download
    assert result.runs["checked"]["status"] == "SUCCEEDED"


def test_scenario_an_infra_check_that_finds_nothing_or_fails_the_job_is_survived(template):
    """Issue 32 item 15: AWS does not say that the infra check finds a bad host, nor what it does
    with one. A lemon comes back on the checked restart: where the check misses it, the job fails
    on it again and the next checked attempt trains; where the check fails the job in Starting
    naming the host, that is resumed too. Neither is taken for a code bug."""

    def drill(finds: bool) -> Any:
        fault = {
            "kind": "hardware",
            "run": "lemon",
            "attempt": 1,
            "after_training_min": 40,
            "host": 2,
            "returns_cold": 1,
            "infra_check_finds": finds,
            "infra_check_on_bad_host": "fail",
        }
        return run_drill(
            template,
            {"seed": 5, "account": {"store": "memory"}, "runs": [run_spec("lemon")], "faults": [fault]},
        )

    missed = drill(False)
    assert classes(missed, "lemon") == ["INFRASTRUCTURE", "INFRASTRUCTURE", "SUCCEEDED"]
    _, second, third = jobs_of(missed, "lemon")
    assert second.infra_check and 2 in second._inherited and second.ended_reason == "hardware"
    assert third.infra_check and third._inherited == {}  # the check asked for until one trains
    failed = drill(True)
    assert classes(failed, "lemon") == ["INFRASTRUCTURE", "INFRASTRUCTURE", "SUCCEEDED"]
    _, second, third = jobs_of(failed, "lemon")
    assert second.training_started_ms is None and "algo-2" in (second.failure_reason or "")
    assert third.infra_check and third._inherited == {}
    assert failed.runs["lemon"]["status"] == missed.runs["lemon"]["status"] == "SUCCEEDED"


def test_scenario_sockets_on_efa_are_flagged_within_5_minutes_and_look_alikes_never(template):
    result = run_drill(template, shipped("slow-fabric"))
    runs = result.runs
    assert all(runs[r]["status"] == "SUCCEEDED" for r in runs)
    (flag,) = alerts(result, "sockets", "attempt.slow_fabric")
    assert "Using network Socket" in flag["body"]
    (job,) = jobs_of(result, "sockets")
    lines_ms = job.training_started_ms  # the sim prints NCCL's lines when Training starts
    assert flag["at_ms"] - lines_ms <= 5 * 60_000
    assert job.stop_requested_ms is None  # no stop: a slow job still trains
    assert runs["sockets"]["attempts"][0]["fabric"] == "socket"  # the run's GET shows it
    assert runs["efa"]["attempts"][0]["fabric"] == "efa"
    for look_alike in ("efa", "single-node", "no-debug"):
        assert not alerts(result, look_alike, "attempt.slow_fabric"), look_alike
    (submitted,) = alerts(result, "no-debug", "run.submitted")
    assert "NCCL_DEBUG=INFO" in submitted["body"]


BIG = "ml.p5.48xlarge"


def big_job(fault: dict[str, Any]) -> dict[str, Any]:
    """One 256-host run whose script prints the contract's fingerprint lines, a warm pool kept."""
    return {
        "name": "big-job",
        "seed": 7,
        "max_days": 1,
        "account": {"store": "memory", "quotas": {BIG: 256}, "warm_pools": {"quotas": {BIG: 256}}},
        "runs": [
            run_spec(
                "big",
                instance_type=BIG,
                instance_count=256,
                policy={"keep_alive_seconds": 1800},
                profile={
                    "total_steps": 300,
                    "steps_per_minute": 5,
                    "checkpoint_every_steps": 50,
                    "fingerprints": True,
                },
            )
        ],
        "faults": [{"run": "big", "attempt": 1, "after_training_min": 20, "bad_host": True, **fault}],
    }


@pytest.mark.claim(
    "On a job of hundreds of hosts the failed host is found by one FilterLogEvents for GPU hardware lines over every host, where the log tail's per-host reads run out of time before reaching it"
)
def test_scenario_a_hardware_line_past_the_log_tails_reach_still_singles_out_its_host(template):
    """256 hosts: the log tail's per-host reads run out of time in host order long before algo-250
    (GetLogEvents under the account's rate limit). One FilterLogEvents for hardware lines names
    the host: the restart is cold, and needs no infra check since its fingerprint was read
    (before: a warm restart on the same instances, which failed again, then a cold one with the
    check)."""
    fault = {
        "kind": "algorithm_error",
        "host": 250,
        "log_lines": [
            "NVRM: Xid (PCI:0000:53:00): 79, pid=1234, GPU has fallen off the bus.",
            "RuntimeError: CUDA error: unspecified launch failure",
        ],
    }
    result = run_drill(template, big_job(fault), account_options={"logs": "simulated"})
    text = decisions(result, "big")
    assert classes(result, "big") == ["INFRASTRUCTURE", "SUCCEEDED"], text
    assert "singled out algo-250 (a hardware fault)" in text
    assert "remembered the fingerprint of algo-250" in text
    first, second = jobs_of(result, "big")
    assert 250 in first._bad_hosts
    assert not second.warm_pool_used and second._inherited == {}  # new instances
    assert "InfraCheckConfig" not in second.request  # its fingerprint line is the guard


@pytest.mark.claim(
    "On a job of hundreds of hosts the failed host is found by one FilterLogEvents for GPU hardware lines over every host, where the log tail's per-host reads run out of time before reaching it"
)
def test_scenario_every_hosts_fingerprint_is_read_on_a_job_of_more_hosts_than_the_default(template):
    """256 hosts print 256 fingerprint lines at once; algo-76's comes after the first 200 in the
    order FilterLogEvents returns them (stream names sort as text). A read keeping 200 lost it: the
    dead host was singled out with 'no fingerprint line' and the restart paid the infra check."""
    result = run_drill(
        template, big_job({"kind": "dead_host", "host": 76}), account_options={"logs": "simulated"}
    )
    text = decisions(result, "big")
    assert classes(result, "big") == ["SUPERVISOR_STOP", "SUCCEEDED"], text
    assert "singled out algo-76" in text and "remembered the fingerprint of algo-76" in text
    _, second = jobs_of(result, "big")
    assert not second.warm_pool_used and "InfraCheckConfig" not in second.request


def test_scenario_one_late_host_on_sockets_is_flagged_on_a_job_of_hundreds_of_hosts(template):
    """256 EFA hosts, NCCL_DEBUG=INFO, algo-99 alone falls back to sockets. Its 'Using network
    Socket' line comes after the first 200 'Using network' lines (stream names sort as text), which
    is all the transport read keeps; the socket-only read finds it (before: the job was judged on
    EFA and never flagged)."""
    data = {
        "name": "big-fabric",
        "seed": 7,
        "max_days": 1,
        "account": {"store": "memory", "quotas": {BIG: 256}},
        "runs": [
            run_spec(
                "big",
                instance_type=BIG,
                instance_count=256,
                training_job={"Environment": {"NCCL_DEBUG": "INFO"}},
                profile={
                    "total_steps": 150,
                    "steps_per_minute": 5,
                    "checkpoint_every_steps": 50,
                    "nccl_socket_host": 99,
                },
            )
        ],
    }
    result = run_drill(template, data, account_options={"logs": "simulated"})
    assert result.runs["big"]["status"] == "SUCCEEDED"
    (flag,) = alerts(result, "big", "attempt.slow_fabric")
    assert "algo-99" in flag["body"] and "Socket" in flag["body"]
    assert result.runs["big"]["attempts"][0]["fabric"] == "socket"


def _late_xid_drill(template, name: str, *, log_delay_s: int, available_s: int, policy: dict) -> Any:
    """A 4-host run whose attempt 1 crashes 40 minutes into Training on a bad GPU of algo-3 (an
    Xid line, then the CUDA error), every log line landing ``log_delay_s`` late and the job's
    warm pool Available ``available_s`` after its end."""
    xid = "NVRM: Xid (PCI:0000:53:00): 79, pid=1234, GPU has fallen off the bus."
    data = {
        "seed": 5,
        "max_days": 1,
        "account": {
            "store": "memory",
            "warm_pools": {"quotas": {ITYPE: 8}, "available_after_s": [available_s, available_s]},
            "metric_delay": {"logs": {"base_s": log_delay_s, "jitter_s": 0, "late_rate": 0}},
        },
        "delivery": {"min_delay_s": 1, "max_delay_s": 5},
        "runs": [
            run_spec(
                name,
                instance_count=4,
                policy=policy,
                profile={"total_steps": 1200, "steps_per_minute": 5, "checkpoint_every_steps": 150},
            )
        ],
        "faults": [
            {
                "kind": "algorithm_error",
                "run": name,
                "attempt": 1,
                "after_training_min": 40,
                "host": 3,
                "bad_host": True,
                # the Xid names the host; the other line names none (an unspecified launch failure
                # would: it is a GPU fault on its own)
                "log_lines": [xid, "RuntimeError: NCCL communicator was aborted on rank 17."],
            }
        ],
    }
    return run_drill(template, data)


@pytest.mark.claim(
    "when the pool is `Available`, before a job runs on it, the hosts that printed a GPU hardware line are looked up once more (one bounded FilterLogEvents, with the fingerprint lines); a host named now is recorded as at the ending, the pool is released and the resume starts on new instances"
)
def test_scenario_an_xid_line_later_than_the_settle_keeps_the_resume_off_the_pool_it_waits_for(template):
    """The Xid line lands 150 s late, past the minute the ending waits for it: the crash is decided
    naming no host, and the run waits to resume on its warm pool (Available 4 minutes after the
    end). Before a job runs on it, the hardware lines are looked up again: algo-3's has landed, so
    the pool is released and the resume starts on new instances -- the bad GPU is not met again
    (before: it ran on the pool and failed there a second time)."""
    policy = {"keep_alive_seconds": 1800, "log_silence_minutes": 30}
    result = _late_xid_drill(template, "later-xid", log_delay_s=150, available_s=240, policy=policy)
    notes = decisions(result, "later-xid")
    assert classes(result, "later-xid") == ["INFRASTRUCTURE", "SUCCEEDED"], notes
    first, second = jobs_of(result, "later-xid")
    assert not second.warm_pool_used and second._inherited == {}  # new instances
    assert "landed after its ending was decided" in notes and first._pool.reused_by is None
    kinds = [(f["attempt"], f["kind"]) for f in result.faults if f["run"] == "later-xid"]
    assert kinds.count((2, "algorithm_error")) == 0  # the bad GPU was not met again


@pytest.mark.claim("whose job leaves a warm pool to reuse is not decided until a minute after the job's end")
@pytest.mark.claim(
    "a crash that names no host yet is decided a minute after the job's end, so a late Xid line can still name the bad host"
)
def test_scenario_an_xid_line_that_lands_after_the_failed_event_still_singles_out_its_host(template):
    """CloudWatch Logs ingests a line some time after the script writes it (AWS publishes no
    figure): here every line lands 40 s late and the Failed event arrives within 5 s, so a read
    at the event sees no Xid line and the crash names no host. A warm restart would then run on
    the same instances and meet the bad GPU again; the decision waits a minute after the end
    (domain/endings/attempt_ended.py, LOG_SETTLE_MS), reads again, finds algo-3 and restarts on new instances."""
    result = _late_xid_drill(
        template, "late-xid", log_delay_s=40, available_s=0, policy={"keep_alive_seconds": 1800}
    )
    assert classes(result, "late-xid") == ["INFRASTRUCTURE", "SUCCEEDED"], decisions(result, "late-xid")
    _, second = jobs_of(result, "late-xid")
    assert not second.warm_pool_used and second._inherited == {}  # new instances
    notes = decisions(result, "late-xid")
    assert "may still be on their way" in notes and "singled out algo-3" in notes
    kinds = [(f["attempt"], f["kind"]) for f in result.faults if f["run"] == "late-xid"]
    assert kinds.count((2, "algorithm_error")) == 0  # the bad GPU was not met again


def test_scenario_an_nccl_error_naming_a_peer_by_address_singles_out_that_host(template):
    """NCCL names peers by IP address, never algo-<n>. The job prints each host's address at its
    first collective (NCCL_DEBUG=INFO: 'NCCL INFO Bootstrap : Using eth0:<ip><0>'); at the failure
    the supervisor looks the named address up in the hosts' streams, and algo-3 is singled out: the
    restart is cold with the infra check (before: the address named nobody, and the warm restart ran
    on algo-3 again)."""
    fault = {
        "kind": "algorithm_error",
        "run": "by-ip",
        "attempt": 1,
        "after_training_min": 40,
        "host": 3,
        "log_host": 1,
        "bad_host": True,
        "log_lines": [
            "algo-1:91:220 [1] misc/socket.cc:518 NCCL WARN Net : Call to recv from {host_ip}<58355> "
            "failed : Connection reset by peer",
            "torch.distributed.DistBackendError: NCCL error: ncclRemoteError: remote process exited",
        ],
    }
    scenario = {
        "seed": 11,
        "runs": [run_spec("by-ip", instance_count=4, training_job={"Environment": {"NCCL_DEBUG": "INFO"}})],
        "faults": [fault],
    }
    result = run_drill(template, scenario, account_options={"logs": "simulated"})
    text = decisions(result, "by-ip")
    assert classes(result, "by-ip") == ["INFRASTRUCTURE", "SUCCEEDED"], text
    assert "singled out algo-3" in text
    _, second = jobs_of(result, "by-ip")
    assert not second.warm_pool_used and second.request["InfraCheckConfig"] == {"EnableInfraCheck": True}
