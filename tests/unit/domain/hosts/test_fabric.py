"""Slow fabric at the level of the pure decision (domain/hosts/fabric.py): an EFA multi-node attempt
whose NCCL selects sockets is flagged (no stop); EFA, a single node, or no NCCL_DEBUG=INFO never
are; the scan reads every minute of its window and never again once it has an answer."""

from __future__ import annotations

import copy
import dataclasses

from sagewarden.domain.due import next_due_ms
from sagewarden.domain.hosts.fabric import (
    SCAN_WINDOW_MS,
    SOCKET_PATTERN,
    TRANSPORT_PATTERN,
    scan_due_ms,
    scan_patterns,
    transport,
)
from sagewarden.domain.vocabulary.actions import Notify, StopJob
from sagewarden.domain.vocabulary.events import LaunchAccepted, Observations, Submitted, Tick
from sagewarden.domain.vocabulary.models import RunStatus
from sagewarden.domain.vocabulary.policy import RunPolicy
from tests.builders import MIN, REQUEST, make_run, observed, step

SOCKET = (
    "[algo-1] algo-1:95:190 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.1.23<0>",
    "[algo-1] algo-1:95:190 [0] NCCL INFO Using network Socket",
)
EFA = (
    "[algo-1] algo-1:95:190 [0] NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)",
    "[algo-1] algo-1:95:190 [0] NCCL INFO Using network AWS Libfabric",
)


def run_training(*, itype="ml.p4d.24xlarge", count=2, debug="INFO", policy=None):
    request = copy.deepcopy(REQUEST)
    request["ResourceConfig"].update(InstanceType=itype, InstanceCount=count)
    if debug is not None:
        request["Environment"] = {**request["Environment"], "NCCL_DEBUG": debug}
    d0 = step(make_run(policy, request=request), Submitted(), 0)
    run = step(d0.run, LaunchAccepted(1), 1).run
    t = 10 * MIN
    return d0, step(run, observed(run, "InProgress", "Training", t), t).run, t


def slow(d):
    return [a for a in d.actions if isinstance(a, Notify) and a.event == "attempt.slow_fabric"]


def test_sockets_on_efa_instances_are_flagged_with_the_lines_and_the_job_keeps_training():
    _, run, t = run_training()
    assert scan_patterns(run) == (TRANSPORT_PATTERN, SOCKET_PATTERN)  # the socket lines of any host too
    assert next_due_ms(run, t) <= t + MIN  # looked at every minute while the scan is open
    d = step(run, Tick(), t + 2 * MIN, Observations(scan_lines=SOCKET))
    (alert,) = slow(d)
    assert alert.severity == "warning" and "Using network Socket" in alert.body
    assert not [a for a in d.actions if isinstance(a, StopJob)] and d.run.status == RunStatus.TRAINING
    cur = d.run.current
    assert cur.fabric == "socket" and cur.fabric_evidence == SOCKET and cur.scan_done
    assert scan_patterns(d.run) == ()  # never again for this attempt
    assert scan_due_ms(d.run, t + 2 * MIN) is None


def test_nccl_on_efa_is_never_flagged():
    _, run, t = run_training()
    d = step(run, Tick(), t + 2 * MIN, Observations(scan_lines=EFA))
    assert not slow(d) and d.run.current.fabric == "efa" and d.run.current.scan_done


def test_no_answer_yet_keeps_scanning_until_the_window_closes():
    _, run, t = run_training()
    d = step(run, Tick(), t + 2 * MIN, Observations(scan_lines=()))
    assert not slow(d) and not d.run.current.scan_done
    d = step(d.run, Tick(), t + SCAN_WINDOW_MS, Observations(scan_lines=()))
    assert d.run.current.scan_done and d.run.current.fabric is None


def test_an_unreadable_log_is_unknown_and_read_again():
    _, run, t = run_training()
    d = step(run, Tick(), t + 2 * MIN, Observations(scan_error="ThrottlingException: Rate exceeded"))
    assert not slow(d) and d.run.current.fabric is None and scan_patterns(d.run)


def test_single_node_jobs_non_efa_instances_and_the_policy_switch_are_never_scanned():
    for kwargs in (
        {"count": 1},
        {"itype": "ml.g5.48xlarge"},
        {"itype": "ml.trn1.32xlarge"},  # Neuron collectives, not NCCL
        {"policy": RunPolicy(slow_fabric_check=False)},
    ):
        _, run, t = run_training(**kwargs)
        assert scan_patterns(run) == (), kwargs
        d = step(run, Tick(), t + 2 * MIN, Observations(scan_lines=SOCKET))
        assert not slow(d), kwargs


def test_without_nccl_debug_info_the_submit_alert_says_how_to_enable_the_check():
    for debug in (None, "WARN"):
        d0, run, _ = run_training(debug=debug)
        (submitted,) = [a for a in d0.actions if isinstance(a, Notify) and a.event == "run.submitted"]
        assert "NCCL_DEBUG=INFO" in submitted.body and "Fabric check: off" in submitted.body
        assert scan_patterns(run) == ()
    d0, _, _ = run_training()
    (submitted,) = [a for a in d0.actions if isinstance(a, Notify) and a.event == "run.submitted"]
    assert "Fabric check: on" in submitted.body


def test_transport_verdicts():
    assert transport(SOCKET)[0] == "socket"
    assert transport(EFA)[0] == "efa"
    assert transport((*EFA, "[algo-3] NCCL INFO Using network Socket"))[0] == "socket"  # any host
    assert transport(("[algo-1] NCCL INFO NET/OFI Selected Provider is tcp",))[0] == "socket"
    assert transport(("[algo-1] step 10 loss 2.0",)) == (None, ())
    assert dataclasses.is_dataclass(RunPolicy())
