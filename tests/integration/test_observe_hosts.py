"""The bad-host look-ups the service makes (sagewarden/usecases/observe_hosts.py, domain/lookups.py): the
hardware-line read at a failure, the fingerprint reads sized to the job, and when fingerprints
are read at all. An error is unknown: it concludes nothing."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import pytest

from drill.account.local import MemoryCounters
from sagewarden.domain.hosts.bad_hosts import (
    ADDRESS_LINES,
    ADDRESS_WINDOW_MS,
    FINGERPRINT_MIN_LINES,
    FINGERPRINT_PATTERN,
    HARDWARE_LINES,
    HARDWARE_PATTERN,
)
from sagewarden.domain.hosts.fabric import SOCKET_PATTERN, TRANSPORT_PATTERN
from sagewarden.domain.lookups import wants_fingerprints
from sagewarden.domain.vocabulary.events import Tick
from sagewarden.usecases.observe_hosts import (
    read_addresses,
    read_fingerprints,
    read_hardware_printers,
    read_scan,
)
from tests.builders import HOUR, observed, training_run

XID = "[algo-250] NVRM: Xid (PCI:0000:53:00): 79, pid=1234, GPU has fallen off the bus."
FAILED = 'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage "CUDA error: unspecified launch failure"'


class _Logs:
    def __init__(
        self, lines: tuple[str, ...] = (), error: Exception | None = None, *, fails: str | None = None
    ) -> None:
        self.lines, self.error, self.fails, self.calls = lines, error, fails, []

    def matching_lines(self, job: str, since: int, pattern: str, **kw: Any) -> tuple[str, ...]:
        self.calls.append((job, since, pattern, kw))
        if self.error is not None and self.fails in (None, pattern):
            raise self.error
        return self.lines


def _sup(logs: _Logs, now: int) -> Any:
    return SimpleNamespace(logs=logs, counters=MemoryCounters(), clock=lambda: now)


def test_the_hardware_lines_of_the_last_half_hour_name_their_printer_first() -> None:
    run = training_run(instance_count=256)
    end = run.current.training_started_ms + 5 * HOUR
    logs = _Logs((XID, "[algo-250] RuntimeError: CUDA error: unspecified launch failure"))
    event = dataclasses.replace(observed(run, "Failed", "Failed", end, FAILED), ended_ms=end)
    assert read_hardware_printers(_sup(logs, end + 60_000), run, event, "failures") == (("algo-250",), None)
    ((job, since, pattern, kw),) = logs.calls
    assert job == run.current.job_name and pattern == HARDWARE_PATTERN
    assert since == end - 30 * 60_000 and kw == {"keep": HARDWARE_LINES, "newest": True, "secrets": ()}


@pytest.mark.claim(
    "When that look-up fails (throttled: many runs ending at once share the account's FilterLogEvents rate) and nothing names a host, the ending waits for one that succeeds, on the sweep's looks for up to 3 minutes after the job's end, then is decided with what the tail shows"
)
@pytest.mark.claim(
    'each one unknown, never "none printed", and read again for up to 3 minutes before the ending is decided without it'
)
def test_a_failed_hardware_read_is_counted_names_nobody_and_says_why() -> None:
    run = training_run(instance_count=256)
    end = run.current.training_started_ms + HOUR
    sup = _sup(_Logs(error=TimeoutError("budget ran out")), end)
    hosts, error = read_hardware_printers(
        sup, run, observed(run, "Failed", "Failed", end, FAILED), "failures"
    )
    assert hosts == () and error is not None and "budget ran out" in error
    assert sup.counters.values == {"failures": 1.0}


def test_a_single_host_job_needs_no_hardware_read() -> None:
    run = training_run(instance_count=1)
    logs = _Logs((XID,))
    end = run.current.training_started_ms + HOUR
    assert read_hardware_printers(
        _sup(logs, end), run, observed(run, "Failed", "Failed", end, FAILED), "f"
    ) == ((), None)
    assert logs.calls == []


def test_a_fingerprint_read_keeps_a_line_per_host_on_a_large_job() -> None:
    kept = {}
    for hosts in (2, 256, 512):
        run = training_run(instance_count=hosts)
        logs = _Logs(("[algo-1] [sagewarden] host=1 fingerprint=GPU-a",))
        lines, error = read_fingerprints(_sup(logs, 0), run, run.current.job_name, "f")
        assert error is None and lines and logs.calls[0][2] == FINGERPRINT_PATTERN
        kept[hosts] = logs.calls[0][3]["keep"]
    # the reader's default of 200 lost the fingerprints of the 56 hosts past it on a 256-host job
    assert kept == {2: FINGERPRINT_MIN_LINES, 256: 256, 512: 512}


def test_fingerprints_are_read_at_the_end_of_a_stop_that_singled_out_a_host() -> None:
    run = training_run(instance_count=16)
    end = run.current.training_started_ms + HOUR
    stopped = observed(run, "Stopped", "Stopped", end)
    assert not wants_fingerprints(run, stopped)  # a stop that named no host
    named = dataclasses.replace(run, attempts=(dataclasses.replace(run.current, suspect_hosts=("algo-7",)),))
    assert wants_fingerprints(named, stopped)
    assert wants_fingerprints(run, observed(run, "Failed", "Failed", end, FAILED))  # with the log tail
    assert not wants_fingerprints(named, observed(named, "InProgress", "Training", end))


def _fabric_run() -> Any:
    run = training_run(instance_count=64)
    request = {**run.request, "Environment": {"NCCL_DEBUG": "INFO"}}
    return dataclasses.replace(run, request=request)


def test_the_socket_only_read_adds_evidence_and_its_failure_leaves_the_scan_as_it_was() -> None:
    run = _fabric_run()
    line = "[algo-3] algo-3:93:183 [0] NCCL INFO Using network AWS Libfabric"
    ok = _Logs((line,))
    lines, error = read_scan(_sup(ok, 0), run, Tick(), "f")
    assert error is None and lines == (line,)  # matched by both reads, listed once (the alert's evidence)
    assert [(c[2], c[3]) for c in ok.calls] == [
        (TRANSPORT_PATTERN, {"keep": None, "secrets": ()}),
        (SOCKET_PATTERN, {"keep": 5, "secrets": ()}),
    ]
    failing = _Logs((line,), TimeoutError("budget"), fails=SOCKET_PATTERN)
    sup = _sup(failing, 0)
    lines, error = read_scan(sup, run, Tick(), "f")
    assert (
        error is None and lines == (line,) and sup.counters.values == {"f": 1.0}
    )  # what the first read made
    main_fails = _Logs((line,), TimeoutError("budget"), fails=TRANSPORT_PATTERN)
    assert read_scan(_sup(main_fails, 0), run, Tick(), "f") == (None, "TimeoutError: budget")  # unknown


def test_without_an_end_time_the_window_is_dated_from_the_jobs_last_change_not_from_now() -> None:
    """A describe hours after the failure (a reconcile) without TrainingEndTime: the job ended at
    its LastModifiedTime, as domain/endings/attempt_ended.py dates it; the window must not slide to now."""
    run = training_run(instance_count=256)
    end = run.current.training_started_ms + 5 * HOUR
    logs = _Logs((XID,))
    event = observed(run, "Failed", "Failed", end, FAILED)  # modified at `end`, no ended_ms
    assert event.ended_ms is None
    assert read_hardware_printers(_sup(logs, end + 3 * HOUR), run, event, "f") == (("algo-250",), None)
    assert logs.calls[0][1] == end - 30 * 60_000


BY_IP = (
    "[algo-1] algo-1:91:220 [1] NCCL WARN Net : Call to recv from 10.0.9.42<58355> failed : Broken pipe",
    "[algo-1] torch.distributed.DistBackendError: NCCL error: ncclRemoteError: remote process exited",
)


def test_the_peer_addresses_a_failure_names_are_looked_up_in_the_attempts_first_minutes() -> None:
    run = training_run(instance_count=4)
    start = run.current.training_started_ms
    end = start + 5 * HOUR
    boot = ("[algo-2] algo-2:92:182 [0] NCCL INFO Bootstrap : Using eth0:10.0.9.42<0>",)
    logs = _Logs(boot)
    event = dataclasses.replace(observed(run, "Failed", "Failed", end, FAILED), ended_ms=end)
    assert read_addresses(_sup(logs, end), run, event, BY_IP, "failures") == (boot, None)
    ((job, since, pattern, kw),) = logs.calls
    assert job == run.current.job_name and pattern == '":10.0.9.42<"' and since == start - 60_000
    assert kw == {"keep": ADDRESS_LINES, "until_ms": start + ADDRESS_WINDOW_MS}
    quiet = _Logs()
    assert read_addresses(_sup(quiet, end), run, event, ("[algo-1] epoch 3",), "failures") == ((), None)
    assert quiet.calls == []  # no address named: nothing read


def test_a_failed_address_look_up_is_unknown_and_counted() -> None:
    run = training_run(instance_count=4)
    end = run.current.training_started_ms + HOUR
    sup = _sup(_Logs(error=TimeoutError("budget ran out")), end)
    event = dataclasses.replace(observed(run, "Failed", "Failed", end, FAILED), ended_ms=end)
    lines, error = read_addresses(sup, run, event, BY_IP, "failures")
    assert lines == () and error is not None and "budget ran out" in error
    assert sup.counters.values.get("failures") == 1
