"""CloudWatchLogsReader (issue 7 item 5): every host is seen, tokens are followed, work is bounded
by time and what was not read is said. moto's Logs backend; botocore Stubber for the shapes moto
cannot produce (an empty FilterLogEvents page that still carries a nextToken)."""

from __future__ import annotations

import re
import time
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from sagewarden import keys
from sagewarden.adapters.cloudwatch_logs_reader import (
    LINE_MAX_BYTES,
    CloudWatchLogsReader,
    LogReadIncomplete,
    line_score,
)
from sagewarden.domain.vocabulary.bounded import utf8_len
from sagewarden.domain.vocabulary.classifier.classify import classify
from sagewarden.domain.vocabulary.classifier.models import Ending, EndingClass

JOB = "sw-llama-01KE5Q86000DNQ47GXEV9VZMPH-a001"
GROUP = keys.TRAINING_LOG_GROUP
XID = "NVRM: Xid (PCI:0000:a0:1c): 79, pid=4242, name=python, GPU has fallen off the bus."


class FakeClock:
    """A monotonic clock the test moves; `tick` seconds pass on every GetLogEvents call."""

    def __init__(self, tick: float = 0.0) -> None:
        self.now = 0.0
        self.tick = tick

    def __call__(self) -> float:
        return self.now


class Timed:
    """The Logs client, with the fake clock advancing on every read (a slow CloudWatch)."""

    def __init__(self, client: Any, clock: FakeClock, fail_streams: frozenset[str] = frozenset()) -> None:
        self._client = client
        self._clock = clock
        self._fail = fail_streams

    def get_log_events(self, **kwargs: Any) -> Any:
        self._clock.now += self._clock.tick
        if kwargs["logStreamName"] in self._fail:
            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "GetLogEvents"
            )
        return self._client.get_log_events(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@pytest.fixture
def logs(aws):
    client = boto3.client("logs", region_name="us-east-1")
    client.create_log_group(logGroupName=GROUP)
    return client


def _write(client: Any, stream: str, events: list[tuple[int, str]]) -> None:
    client.create_log_stream(logGroupName=GROUP, logStreamName=stream)
    client.put_log_events(
        logGroupName=GROUP,
        logStreamName=stream,
        logEvents=[{"timestamp": ts, "message": msg} for ts, msg in events],
    )


def _base_ms() -> int:
    return (int(time.time()) - 3600) * 1000  # moto accepts events from the last 14 days


def _job_of_hosts(client: Any, hosts: int, lines: int = 5, epoch: int = 1767607200) -> int:
    base = _base_ms()
    for h in range(1, hosts + 1):
        _write(
            client,
            f"{JOB}/algo-{h}-{epoch}",
            [(base + i * 1000 + h, f"step {i} loss 1.{i:03d}") for i in range(lines)],
        )
    return base


# --- every host, numerically, newest stream --------------------------------------------------


def test_tail_of_a_64_host_job_keeps_the_xid_line_of_algo_37(logs):
    base = _base_ms()
    for h in range(1, 65):
        events = [(base + i * 1000 + h, f"step {i} loss 1.{i:03d}") for i in range(30)]
        if h == 37:  # algo-37 loses a GPU at step 30 and says nothing more
            events.append((base + 30_000, XID))
        else:  # its peers keep printing for a while before the job is torn down
            events += [(base + 40_000 + i * 1000 + h, f"waiting for rank {h * 8} step 30") for i in range(30)]
        _write(logs, f"{JOB}/algo-{h}-1767607200", events)

    tail = CloudWatchLogsReader(logs).tail(JOB, 40)

    assert len(tail) <= 40
    assert f"[algo-37] {XID}" in tail
    assert tail[-1] == f"[sagewarden] first error-looking line: [algo-37] {XID}"
    ending = Ending(
        status="Failed",
        failure_reason="AlgorithmError: ExecuteUserScriptError: ExitCode 1",
        log_tail=tail,
        reached_training=True,
        training_seconds=86_400,
    )
    verdict = classify(ending)
    assert verdict.kind == EndingClass.INFRASTRUCTURE
    assert "Xid" in verdict.reason


def test_tail_points_at_the_host_that_failed_first_and_keeps_peers_and_newest_lines(logs):
    base = _base_ms()
    for h in range(1, 17):
        events = [(base + i * 1000 + h, f"step {i}") for i in range(20)]
        if h == 12:
            events.append(
                (base + 20_500, "RuntimeError: CUDA error: an illegal memory access was encountered")
            )
        elif h == 3:
            events.append((base + 21_500, "Traceback (most recent call last):"))
        else:
            events.append((base + 600_000 + h, f"[Rank {h}] Watchdog caught collective operation timeout"))
        events.append((base + 700_000 + h, f"algo-{h} shutting down"))
        _write(logs, f"{JOB}/algo-{h}-1767607200", events)

    tail = CloudWatchLogsReader(logs).tail(JOB, 30)

    assert len(tail) == 30
    assert (
        tail[-1]
        == "[sagewarden] first error-looking line: [algo-12] RuntimeError: CUDA error: an illegal memory access was encountered"
    )
    assert "[algo-3] Traceback (most recent call last):" in tail
    assert sum("Watchdog" in line for line in tail) >= 5  # peers' symptoms are shown ...
    assert "[algo-16] algo-16 shutting down" in tail  # ... and so are the newest lines
    body = tail[:-1]
    stamps = [_stamp(line, base) for line in body]
    assert stamps == sorted(stamps)  # the tail reads in time order


def _stamp(line: str, base: int) -> int:
    host = int(line.split("]")[0].removeprefix("[algo-"))
    text = line.split("] ", 1)[1]
    if text.startswith("step "):
        return base + int(text.split()[1]) * 1000 + host
    if text.startswith("RuntimeError"):
        return base + 20_500
    if text.startswith("Traceback"):
        return base + 21_500
    if "Watchdog" in text:
        return base + 600_000 + host
    return base + 700_000 + host


@pytest.mark.claim(
    "the sweep works through due runs in round-robin shards under a time budget, and every AWS list call follows its token"
)
def test_streams_are_read_across_pages_and_grouped_per_host(logs):
    _job_of_hosts(logs, 120)  # DescribeLogStreams returns at most 50 per page

    rows = CloudWatchLogsReader(logs).host_triage(JOB, _base_ms() + 3_600_000, max_rows=500)

    hosts = sorted(int(r.split(":")[0].removeprefix("algo-")) for r in rows)
    assert hosts == list(range(1, 121))


def test_hosts_are_read_in_numeric_order_until_the_budget_runs_out(logs):
    _job_of_hosts(logs, 64)
    clock = FakeClock(tick=1.0)
    reader = CloudWatchLogsReader(Timed(logs, clock), clock=clock)

    rows = reader.host_triage(JOB, _base_ms(), budget_s=10)

    assert rows[0].startswith(
        "[sagewarden] host triage: 54 of 64 hosts not read (time budget ran out: algo-11, algo-12,"
    )
    read = sorted(int(r.split(":")[0].removeprefix("algo-")) for r in rows[1:])
    assert read == list(range(1, 11))  # algo-1..algo-10, not algo-1, algo-10, algo-100...


@pytest.mark.claim(
    "The hosts the GPU metrics single out (no metrics, or idle while others are not) are read first, then the rest in numeric order"
)
@pytest.mark.claim(
    "The hosts the GPU metrics single out are read first, and the alert names the hosts not read; a whole-job hang (every host idle, no suspect) then reads about 150 of 250 hosts."
)
def test_suspect_hosts_are_read_first_so_a_budget_cut_never_loses_them(logs):
    """A 64-host job whose budget reads 10 hosts: the hosts the GPU metrics singled out (algo-57,
    algo-33) are among them, in the triage and in the tail, and the notice names the others."""
    _job_of_hosts(logs, 64)
    clock = FakeClock(tick=1.0)
    reader = CloudWatchLogsReader(Timed(logs, clock), clock=clock)

    rows = reader.host_triage(JOB, _base_ms(), budget_s=10, first=["algo-57", "algo-33", "algo-57"])

    read = {r.split(":")[0] for r in rows[1:]}
    assert {"algo-57", "algo-33"} <= read and len(read) == 10
    assert "algo-57" not in rows[0] and "algo-33" not in rows[0] and "54 of 64" in rows[0]
    clock = FakeClock(tick=1.0)
    tail = CloudWatchLogsReader(Timed(logs, clock), clock=clock).tail(
        JOB, 200, budget_s=10, first=["algo-57"]
    )
    assert any(line.startswith("[algo-57]") for line in tail)


@pytest.mark.claim("the triage names the hosts it did not read")
@pytest.mark.claim(
    "The hosts the GPU metrics single out are read first, and the alert names the hosts not read; a whole-job hang (every host idle, no suspect) then reads about 150 of 250 hosts."
)
def test_tail_says_how_many_hosts_it_did_not_read(logs):
    _job_of_hosts(logs, 64)
    clock = FakeClock(tick=1.0)
    reader = CloudWatchLogsReader(Timed(logs, clock), clock=clock)

    tail = reader.tail(JOB, 40, budget_s=10)

    assert len(tail) <= 40
    assert tail[-1].startswith(
        "[sagewarden] log tail: 54 of 64 hosts not read (time budget ran out: algo-11,"
    )
    assert {line.split("]")[0] for line in tail[:-1]} <= {f"[algo-{h}" for h in range(1, 11)}


def test_a_restarted_host_is_read_from_its_newest_stream(logs):
    base = _base_ms()
    _write(logs, f"{JOB}/algo-1-1767600000", [(base + 5_000, "old container: step 900")])
    _write(logs, f"{JOB}/algo-1-1767607200", [(base, "new container: step 1000")])
    _write(logs, f"{JOB}/algo-2-1767600000", [(base, "step 1000")])
    reader = CloudWatchLogsReader(logs)

    rows = reader.host_triage(JOB, base + 60_000)
    tail = reader.tail(JOB, 10)

    assert len(rows) == 2
    assert "algo-1: last log 1 min ago: new container: step 1000" in rows
    assert "[algo-1] new container: step 1000" in tail
    assert not any("old container" in line for line in tail)


def test_one_unreadable_host_is_named_and_the_others_are_read(logs):
    _job_of_hosts(logs, 4)
    reader = CloudWatchLogsReader(Timed(logs, FakeClock(), frozenset({f"{JOB}/algo-3-1767607200"})))

    tail = reader.tail(JOB, 20)

    assert tail[-1] == "[sagewarden] log tail: 1 of 4 hosts not read (ThrottlingException: algo-3)"
    assert {line.split("]")[0] for line in tail[:-1]} == {"[algo-1", "[algo-2", "[algo-4"}


def test_a_job_whose_hosts_cannot_be_read_is_an_error_not_an_empty_log(logs):
    _job_of_hosts(logs, 2)
    streams = frozenset(f"{JOB}/algo-{h}-1767607200" for h in (1, 2))
    reader = CloudWatchLogsReader(Timed(logs, FakeClock(), streams))

    with pytest.raises(ClientError):
        reader.tail(JOB, 20)


def test_a_job_without_logs_has_an_empty_tail(logs):
    assert CloudWatchLogsReader(logs).tail(JOB, 40) == ()
    assert CloudWatchLogsReader(logs).host_triage(JOB, 0) == ()


def test_tail_lines_are_bounded_in_bytes(logs):
    base = _base_ms()
    _write(logs, f"{JOB}/algo-1-1767607200", [(base, "x" * 200_000), (base + 1, "é" * 100_000)])

    tail = CloudWatchLogsReader(logs).tail(JOB, 40)

    assert len(tail) == 2
    assert all(utf8_len(line) <= LINE_MAX_BYTES and "[cut " in line for line in tail)


# --- triage -----------------------------------------------------------------------------------


def test_triage_puts_the_host_that_went_quiet_first_first(logs):
    base = _base_ms()
    _write(logs, f"{JOB}/algo-1-1767607200", [(base + 600_000, "step 60")])
    _write(logs, f"{JOB}/algo-2-1767607200", [(base + 60_000, "step 6: allreduce")])
    _write(logs, f"{JOB}/algo-10-1767607200", [(base + 300_000, "step 30")])
    logs.create_log_stream(logGroupName=GROUP, logStreamName=f"{JOB}/algo-3-1767607200")

    rows = CloudWatchLogsReader(logs).host_triage(JOB, base + 660_000)

    assert rows == (
        "algo-3: no log events",
        "algo-2: last log 10 min ago: step 6: allreduce",
        "algo-10: last log 6 min ago: step 30",
        "algo-1: last log 1 min ago: step 60",
    )


def test_triage_folds_the_healthiest_hosts_into_one_row(logs):
    base = _job_of_hosts(logs, 80, lines=1)

    rows = CloudWatchLogsReader(logs).host_triage(JOB, base + 120_000, max_rows=10)

    assert len(rows) == 10
    assert rows[-1] == "[sagewarden] ... and 71 more hosts; last log 2-2 min ago"


SSM = "2026-01-05 10:01:00 INFO [ssm-agent-worker] [MessageService] agent health: OK"


def _job_with_remote_debugging(logs: Any, base: int) -> None:
    """Two training streams, and the SSM agent's stream of algo-1 (remote debugging), which keeps
    writing after the training script went quiet at base + 60 s."""
    _write(logs, f"{JOB}/algo-1-1767607200", [(base, "step 1"), (base + 60_000, "step 2: allreduce")])
    _write(logs, f"{JOB}/algo-2-1767607200", [(base + 60_000, "step 2: allreduce")])
    _write(logs, f"{JOB}/algo-1-1767607200/ssm", [(base + m * 60_000, SSM) for m in range(1, 11)])


@pytest.mark.claim("Only a job's training streams (`<job>/algo-<n>-<epoch>`) count")
def test_the_ssm_agents_stream_is_no_host_in_the_tail_or_the_triage(logs):
    """Item 13 of issue 32: remote debugging's `<job>/algo-<n>-<ts>/ssm` is not a host."""
    base = _base_ms()
    _job_with_remote_debugging(logs, base)
    reader = CloudWatchLogsReader(logs)

    rows = reader.host_triage(JOB, base + 600_000)
    assert rows == (
        "algo-1: last log 9 min ago: step 2: allreduce",
        "algo-2: last log 9 min ago: step 2: allreduce",
    )
    tail = reader.tail(JOB, 40)
    assert tail and not any("ssm" in line for line in tail)
    assert reader.newest_event_ms(JOB) == base + 60_000


@pytest.mark.claim("Only a job's training streams (`<job>/algo-<n>-<epoch>`) count")
def test_the_ssm_agents_lines_are_not_activity_nor_an_end_to_silence(logs):
    base = _base_ms() // 60_000 * 60_000
    _job_with_remote_debugging(logs, base)
    reader = CloudWatchLogsReader(logs)

    assert reader.has_events_since(JOB, base + 120_000) is False  # only the agent wrote since
    assert dict(reader.activity(JOB, base, base + 11 * 60_000)) == {base: 1.0, base + 60_000: 2.0}
    assert reader.matching_lines(JOB, base, '"INFO"') == ()


# --- log silence ------------------------------------------------------------------------------


def test_has_events_since_on_moto(logs):
    base = _base_ms()
    _write(logs, f"{JOB}/algo-1-1767607200", [(base, "step 1"), (base + 60_000, "step 2")])
    _write(logs, "other-job/algo-1-1767607200", [(base + 600_000, "step 9")])
    reader = CloudWatchLogsReader(logs)

    assert reader.has_events_since(JOB, base + 30_000) is True
    assert reader.has_events_since(JOB, base + 120_000) is False  # other-job's event is not ours


def test_has_events_since_without_the_log_group_is_silence(aws):
    reader = CloudWatchLogsReader(boto3.client("logs", region_name="us-east-1"))
    assert reader.has_events_since(JOB, 0) is False


def _stubbed(aws) -> tuple[Any, Stubber]:
    client = boto3.client("logs", region_name="us-east-1")
    return client, Stubber(client)


def _filter_params(token: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {
        "logGroupName": GROUP,
        "logStreamNamePrefix": f"{JOB}/",
        "startTime": 1000,
        "limit": 1,
    }
    if token:
        params["nextToken"] = token
    return params


def test_an_empty_filter_page_with_a_token_is_not_silence(aws):
    client, stub = _stubbed(aws)
    stub.add_response("filter_log_events", {"events": [], "nextToken": "t1"}, _filter_params())
    stub.add_response("filter_log_events", {"events": [], "nextToken": "t2"}, _filter_params("t1"))
    event = {"logStreamName": f"{JOB}/algo-7-1", "timestamp": 2000, "message": "step 7", "eventId": "1"}
    stub.add_response("filter_log_events", {"events": [event]}, _filter_params("t2"))

    with stub:
        assert CloudWatchLogsReader(client).has_events_since(JOB, 1000) is True
    stub.assert_no_pending_responses()


def test_silence_needs_every_page_read(aws):
    client, stub = _stubbed(aws)
    stub.add_response("filter_log_events", {"events": [], "nextToken": "t1"}, _filter_params())
    stub.add_response("filter_log_events", {"events": []}, _filter_params("t1"))

    with stub:
        assert CloudWatchLogsReader(client).has_events_since(JOB, 1000) is False
    stub.assert_no_pending_responses()


@pytest.mark.parametrize(
    "code", ["ThrottlingException", "AccessDeniedException", "ServiceUnavailableException"]
)
def test_a_read_error_is_not_silence(aws, code):
    client, stub = _stubbed(aws)
    stub.add_response("filter_log_events", {"events": [], "nextToken": "t1"}, _filter_params())
    stub.add_client_error("filter_log_events", service_error_code=code, expected_params=_filter_params("t1"))

    with stub, pytest.raises(ClientError):
        CloudWatchLogsReader(client).has_events_since(JOB, 1000)


def test_silence_check_out_of_time_is_unknown(aws):
    client, stub = _stubbed(aws)
    clock = FakeClock()
    for i in range(3):
        stub.add_response(
            "filter_log_events",
            {"events": [], "nextToken": f"t{i + 1}"},
            _filter_params(f"t{i}" if i else None),
        )

    def slow_clock() -> float:
        clock.now += 2.0  # every look at the clock: 2 s later
        return clock.now

    with stub, pytest.raises(LogReadIncomplete):
        CloudWatchLogsReader(client, clock=slow_clock).has_events_since(JOB, 1000, budget_s=5)


# --- relevance heuristic ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "score"),
    [
        ("step 100 loss 1.23", 0),
        (XID, 3),
        ("RuntimeError: CUDA error: uncorrectable ECC error encountered", 3),
        ("[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9)", 1),
        ("Traceback (most recent call last):", 2),
        ("torch.OutOfMemoryError: CUDA out of memory.", 2),
    ],
    ids=[
        "a step line scores nothing",
        "an xid scores highest",
        "an ecc error scores highest",
        "a collective timeout scores low",
        "a traceback scores in between",
        "a cuda oom scores in between",
    ],
)
def test_line_score(line, score):
    assert line_score(line) == score


def _counting_reader(logs: Any) -> tuple[CloudWatchLogsReader, list[str], FakeClock]:
    """A reader on a fake clock, and the streams its GetLogEvents calls read, in order."""
    clock = FakeClock()
    calls: list[str] = []

    class Counting(Timed):
        def get_log_events(self, **kwargs: Any) -> Any:
            calls.append(kwargs["logStreamName"])
            return super().get_log_events(**kwargs)

    return CloudWatchLogsReader(Counting(logs, clock), clock=clock), calls, clock


@pytest.mark.claim(
    "a 250-host job's hang triage reads each host's log tail once (250 GetLogEvents, ≈ 25 s at the documented 10 TPS), beyond its 15-second budget"
)
def test_a_hangs_triage_reuses_the_reads_of_its_tail(logs):
    """On a hang the service reads the tail, then the triage: one GetLogEvents per host, not two."""
    base = _job_of_hosts(logs, 12, lines=3)
    reader, calls, clock = _counting_reader(logs)
    tail = reader.tail(JOB, 20)
    rows = reader.host_triage(JOB, base + 60_000)
    assert len(calls) == 12 and len(tail) == 20
    assert rows[0].startswith("algo-1: last log 1 min ago: step 2")  # the newest line of each host
    clock.now += 31  # later looks read afresh
    reader.host_triage(JOB, base + 60_000)
    assert len(calls) == 24


# --- without a log subscription: activity and declared phases read from the logs (issue 16) ------


@pytest.mark.claim(
    "honouring declared phases (it looks for phase markers of the last two hours once a job is silent)"
)
def test_activity_counts_events_per_minute_and_declared_phase_minutes_like_the_heartbeat(logs):
    base = _base_ms() // 60_000 * 60_000
    _write(
        logs,
        f"{JOB}/algo-1-1767607200",
        [
            (base, "step 1"),
            (base + 10_000, "step 2"),
            (base + 120_000, "[sagewarden] phase=save max_minutes=3"),
        ],
    )
    _write(logs, f"{JOB}/algo-2-1767607200", [(base + 60_000, "step 1")])
    _write(logs, "other-job/algo-1-1767607200", [(base + 60_000, "step 9")])
    reader = CloudWatchLogsReader(logs)
    series = dict(reader.activity(JOB, base, base + 10 * 60_000))
    # minute 0: two lines; minute 1: algo-2's line; minute 2: the marker; 3-4: declared active
    assert series == {
        base: 2.0,
        base + 60_000: 1.0,
        base + 120_000: 1.0,
        base + 180_000: 1.0,
        base + 240_000: 1.0,
    }
    assert reader.declared_phase_until(JOB, base) == base + 300_000
    assert reader.declared_phase_until(JOB, base + 180_000) is None  # the marker is older


@pytest.mark.claim(
    "a read cut by its 10-second budget or 50 pages is unknown, and nothing is learned from it"
)
def test_activity_follows_every_page_and_an_unfinished_read_is_unknown(aws):
    client, stub = _stubbed(aws)
    params = {"logGroupName": GROUP, "logStreamNamePrefix": f"{JOB}/", "startTime": 0, "endTime": 600_000}
    ev = {"logStreamName": f"{JOB}/algo-1-1", "message": "step", "eventId": "1"}
    stub.add_response(
        "filter_log_events", {"events": [{**ev, "timestamp": 1_000}], "nextToken": "t1"}, params
    )
    stub.add_response(
        "filter_log_events", {"events": [{**ev, "timestamp": 300_000}]}, {**params, "nextToken": "t1"}
    )
    with stub:
        assert CloudWatchLogsReader(client).activity(JOB, 0, 600_000) == ((0, 1.0), (300_000, 1.0))
    # a read the budget cuts is not "fewer events": it raises, and nothing is learned from it
    clock = FakeClock()

    class SlowPages:  # every page takes a minute and points at one more
        def filter_log_events(self, **kwargs: Any) -> Any:
            clock.now += 60.0
            return {"events": [{**ev, "timestamp": 1_000}], "nextToken": f"t{clock.now:.0f}"}

    with pytest.raises(LogReadIncomplete):
        CloudWatchLogsReader(SlowPages(), clock=clock).activity(JOB, 0, 600_000)


@pytest.mark.claim(
    "The hosts the GPU metrics single out are read first, and the alert names the hosts not read; a whole-job hang (every host idle, no suspect) then reads about 150 of 250 hosts."
)
def test_a_whole_job_hang_of_250_hosts_reads_about_150_in_the_triage_budget(logs):
    """README: a whole-job hang (every host idle, no suspect) of a 250-host job reads about 150
    of 250 hosts: GetLogEvents at the documented 10 TPS (0.1 s a call) in the triage's 15-second
    budget, and the notice names how many were not read."""
    from sagewarden.adapters.cloudwatch_logs_reader import TRIAGE_BUDGET_S

    _job_of_hosts(logs, 250, lines=2)
    clock = FakeClock(tick=0.1)
    reader = CloudWatchLogsReader(Timed(logs, clock), clock=clock)

    rows = reader.host_triage(JOB, _base_ms())

    assert TRIAGE_BUDGET_S == 15.0
    (not_read,) = re.findall(r"(\d+) of 250 hosts not read \(time budget ran out", rows[0])
    assert 140 <= 250 - int(not_read) <= 155


# --- matching lines (domain/hosts/fabric.py's start-up scan, domain/hosts/bad_hosts.py's fingerprints) ----------


def test_matching_lines_on_moto_names_the_host_and_keeps_only_the_phrase(logs):
    base = _base_ms()
    _write(
        logs,
        f"{JOB}/algo-2-1767607200",
        [(base, "algo-2:92:182 [0] NCCL INFO Using network Socket"), (base + 1, "step 1")],
    )
    _write(logs, f"{JOB}/algo-1-1767607200", [(base + 2, "[sagewarden] host=1 fingerprint=GPU-A")])
    reader = CloudWatchLogsReader(logs)
    assert reader.matching_lines(JOB, base, '"Using network"') == (
        "[algo-2] algo-2:92:182 [0] NCCL INFO Using network Socket",
    )
    assert reader.matching_lines(JOB, base, '"[sagewarden] host="') == (
        "[algo-1] [sagewarden] host=1 fingerprint=GPU-A",
    )


def test_matching_lines_past_its_page_bound_is_unknown_not_fewer_lines(aws):
    client, stub = _stubbed(aws)
    params: dict[str, Any] = {
        "logGroupName": GROUP,
        "logStreamNamePrefix": f"{JOB}/",
        "startTime": 1000,
        "filterPattern": '"Using network"',
    }
    for i in range(5):  # MATCH_MAX_PAGES pages, each with a further token
        stub.add_response(
            "filter_log_events",
            {"events": [], "nextToken": f"t{i + 1}"},
            {**params, **({"nextToken": f"t{i}"} if i else {})},
        )
    with stub, pytest.raises(LogReadIncomplete):
        CloudWatchLogsReader(client).matching_lines(JOB, 1000, '"Using network"')


@pytest.mark.claim("the later ones the newest lines of their window, at most 4,000 a read")
def test_matching_lines_keeps_the_first_or_the_newest_as_asked_within_its_cap(logs):
    base = _base_ms()
    for host in range(1, 33):  # 32 hosts x 10 lines: more than the default 200 first lines
        _write(
            logs,
            f"{JOB}/algo-{host}-1767607200",
            [
                (base + step * 60_000 + host, f"[sagewarden] host={host} step={step} step_ms=1")
                for step in range(10)
            ],
        )
    reader = CloudWatchLogsReader(logs)
    first = reader.matching_lines(JOB, base, '"step_ms="')
    assert len(first) == 200 and first[0].startswith("[algo-1] ") and "step=0 " in first[0]
    newest = reader.matching_lines(JOB, base, '"step_ms="', keep=40, newest=True)
    assert len(newest) == 40 and all("step=8 " in line or "step=9 " in line for line in newest)
    assert newest[-1] == "[algo-32] [sagewarden] host=32 step=9 step_ms=1"
    assert len(reader.matching_lines(JOB, base, '"step_ms="', keep=10**6, newest=True)) == 320
    assert len(reader.matching_lines(JOB, base, '"step_ms="', keep=10**6)) == 320


# --- when the job last wrote a line: a log silence's onset for goodput -------------------------


def test_newest_event_is_the_latest_line_of_any_host_and_reuses_the_tails_read(logs):
    base = _job_of_hosts(logs, 4, lines=3)  # host h writes its line i at base + i s + h ms
    reader, calls, _ = _counting_reader(logs)
    reader.tail(JOB, 20)
    assert reader.newest_event_ms(JOB) == base + 2_000 + 4
    assert reader.newest_event_ms(JOB, "algo-2") == base + 2_000 + 2
    assert len(calls) == 4  # one GetLogEvents per host, for the tail and both answers


def test_newest_event_with_a_host_unread_is_unknown_not_older(logs):
    _job_of_hosts(logs, 4)
    reader = CloudWatchLogsReader(Timed(logs, FakeClock(), frozenset({f"{JOB}/algo-3-1767607200"})))
    assert reader.newest_event_ms(JOB) is None  # algo-3 may have written later than the others
    assert reader.newest_event_ms(JOB, "algo-3") is None
    assert reader.newest_event_ms(JOB, "algo-1") is not None


def test_newest_event_of_a_job_without_logs_is_none(logs):
    assert CloudWatchLogsReader(logs).newest_event_ms(JOB) is None
