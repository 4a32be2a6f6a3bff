"""The strongest peers of the side-by-side benchmark, (e) and (e2): what they read (the script's own
log lines, GPU datapoints that have arrived), what they detect, with the latencies their rules
imply, and what a loop of their own stops makes them do. Small synthetic traces, virtual time."""

from __future__ import annotations

import dataclasses
import random

import pytest

from benchmarks.accounting import FALSE_STOP, account
from benchmarks.baselines import NullS3, faultfree_minutes, run_baseline
from benchmarks.peers import GPU_SCRIPT, SCRIPT, GpuRules, ScriptDriver, run_script
from benchmarks.person import Person
from benchmarks.seeds import person_matters
from benchmarks.trace import Trace, TraceFault, TracePhase
from benchmarks.workload import Workload
from drill.alarms.metric_delay import MetricDelays
from drill.clock import VirtualClock
from drill.sim.cloudwatch import ScriptLogs, SimulatedLogs
from drill.sim.model import Fault
from drill.sim.sagemaker import SimSageMaker
from sagewarden.keys import TRAINING_LOG_GROUP

MIN = 60_000
# 2 hosts x 8 GPUs, one step a minute, a checkpoint every 30 steps written in 2 min, 8-min cold start
SMALL = Workload(hosts=2, days=1.0)
PERSON = Person(seed=3)
ONSET_MIN = 83  # healthy minute 75 = 30 train + 2 save + 30 train + 2 save + 11 train, after 8 min of start


def _trace(
    *faults: tuple[float, str, bool], phases: tuple[TracePhase, ...] = (), compile_min: float = 0.0
) -> Trace:
    return Trace(
        seed=0,
        gpus=SMALL.gpus,
        hosts=SMALL.hosts,
        rate_multiplier=1.0,
        horizon_hours=48,
        faults=tuple(
            TraceFault(i, healthy, "test", manifestation, 2, hardware, None)
            for i, (healthy, manifestation, hardware) in enumerate(faults, start=1)
        ),
        phases=phases,
        compile_min=compile_min,
    )


def _account(result, trace: Trace, workload: Workload = SMALL):
    return account(
        result.kind,
        workload,
        trace,
        result.jobs,
        result.sim.fault_records,
        start_ms=result.start_ms,
        end_ms=result.end_ms,
        completed=result.completed,
        faultfree_wall_min=faultfree_minutes(workload, trace),
    )


def _detect_min(result) -> float:
    (record,) = result.sim.fault_records
    job = result.sim.job(record.job)
    assert job.stop_requested_ms is not None
    return (job.stop_requested_ms - record.at_ms) / MIN


# ----------------------------------------------------------------------------------------------
# What the script reads: its log lines, GPU datapoints that have arrived
# ----------------------------------------------------------------------------------------------


def _sim(workload: Workload, faults: list[Fault], *, progress_s: int = 600) -> tuple[SimSageMaker, str]:
    sim = SimSageMaker(VirtualClock(), s3_client=NullS3(), seed=4, progress_log_interval_s=progress_s)
    sim.set_profile(workload.name, workload.profile())
    for f in faults:
        sim.inject(f)
    request = workload.training_job("b", "arn:aws:iam::123456789012:role/R")
    request.update(TrainingJobName="j-001", Tags=workload.tags("t", 1))
    sim.create_training_job(**request)
    return sim, "j-001"


def _filter(logs: object, job: str, start: int, end: int, **kw: object) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    token = None
    while True:
        page = logs.filter_log_events(  # type: ignore[attr-defined]
            logGroupName=TRAINING_LOG_GROUP,
            logStreamNamePrefix=f"{job}/",
            startTime=start,
            endTime=end,
            nextToken=token,
            **kw,
        )
        out += page["events"]
        token = page.get("nextToken")
        if token is None:
            return out


def test_script_logs_hold_the_lines_the_simulator_writes_at_the_same_cadence() -> None:
    # one line a minute per host: the simulator's tails, written every minute, hold as many lines
    # per stream, each within the minute (a phase's periodic lines sit at its minute starts here, as
    # the heartbeat metric counts them, and at the minute ends in the tails)
    workload = dataclasses.replace(SMALL, log_lines_per_minute=1)
    hang = Fault(kind="stuck_dataloader", after_training_min=50, host=2)
    sim, job = _sim(workload, [hang], progress_s=60)
    sim.advance(sim.clock.now_ms + 90 * MIN)
    start, end = sim.clock.now_ms - 85 * MIN, sim.clock.now_ms
    expected = _filter(SimulatedLogs(sim), job, start, end)
    got = _filter(ScriptLogs(sim), job, start, end, limit=7)  # pages of 7
    assert [e["timestamp"] for e in got] == sorted(e["timestamp"] for e in got)  # the API's order
    for host in (1, 2):
        mine = [e["timestamp"] for e in got if f"/algo-{host}-" in str(e["logStreamName"])]
        theirs = sorted(e["timestamp"] for e in expected if f"/algo-{host}-" in str(e["logStreamName"]))
        assert len(mine) == len(theirs) > 40
        assert all(abs(a - b) <= MIN for a, b in zip(mine, theirs, strict=True))
    # nothing after the hang (58 min after submission: 8 of start, 50 of training)
    assert max(e["timestamp"] for e in got) < sim.job(job).created_ms + 58 * MIN


def test_script_logs_follow_lines_per_minute_and_every_n_minutes() -> None:
    # the last 30 minutes hold 28 of training (the 2-minute save 30 steps in is silent): 6 lines
    # in each, or a line in the 10th and 20th logging minute of Training
    for lines, every, per_host_in_30_min in ((6, 1, 168), (1, 10, 2)):
        workload = dataclasses.replace(SMALL, log_lines_per_minute=lines, log_every_minutes=every)
        sim, job = _sim(workload, [])
        sim.advance(sim.clock.now_ms + 40 * MIN)  # Training from minute 8 on
        now = sim.clock.now_ms
        events = _filter(ScriptLogs(sim), job, now - 30 * MIN, now)
        periodic = [e for e in events if e["message"] == "train step done (loss logged)"]
        assert len(periodic) == per_host_in_30_min * workload.hosts
        saving = [e for e in events if "Saving checkpoint" in str(e["message"])]
        assert len(saving) == 1  # the save 30 steps in: a discrete line, host 1


def _readings_agree(rules: GpuRules, job: str, t: int) -> None:
    fast = rules.read(job, t)
    slow = rules.read_datapoints(job, t)
    if fast is None:  # no host can be idle: neither rule has anything to hold on
        assert all(not idle for r in slow for _, idle, _ in r.points)
    else:
        assert fast == slow


def test_gpu_reads_from_bounds_are_the_datapoints_getmetricdata_answers() -> None:
    workload = Workload(hosts=4, days=1.0)
    faults = [
        Fault(kind="compile", duration_min=20),
        Fault(kind="dataloader_pause", after_training_min=60, duration_min=7),
        Fault(kind="dead_host", after_training_min=120, host=3),
    ]
    sim, job = _sim(workload, faults)
    rules = GpuRules(sim, GPU_SCRIPT, MetricDelays(seed=9))
    rng = random.Random(5)
    t = sim.clock.now_ms
    for _ in range(240):
        t += rng.randint(10_000, 70_000)
        sim.advance(t)
        _readings_agree(rules, job, t)


@pytest.mark.claim(
    "a partly arrived minute may read lone-idle, but at most 2 of them at an evaluation, fewer than the 3 needed"
)
def test_lone_idle_compares_the_same_minutes_so_late_datapoints_after_a_pause_are_no_alarm() -> None:
    # every host idle for 7 minutes, then busy again: the newest busy datapoints of some hosts arrive
    # later than others'; minute by minute no host was ever idle while a peer was busy
    workload = Workload(hosts=8, days=1.0)
    sim, job = _sim(workload, [Fault(kind="dataloader_pause", after_training_min=60, duration_min=7)])
    rules = GpuRules(sim, GPU_SCRIPT, MetricDelays(seed=2))
    start = sim.clock.now_ms + 8 * MIN  # Training
    verdicts = set()
    for minute in range(60, 80):
        for second in (0, 20, 40):
            t = start + minute * MIN + second * 1000
            sim.advance(t)
            verdicts.add(rules.verdict(rules.read(job, t), start, t))
    assert verdicts == {None}


# ----------------------------------------------------------------------------------------------
# What (e) and (e2) detect, and how fast
# ----------------------------------------------------------------------------------------------


@pytest.mark.claim("Six supervisors each really call the simulated SageMaker")
@pytest.mark.claim(
    "a competent polling script (e: 15 minutes of log silence, resubmission from the newest checkpoint, a warm pool)"
)
@pytest.mark.parametrize(
    ("seed", "warm"),
    [(3, True), (1, False)],
    ids=["a seed whose pool is still warm", "a seed whose pool is gone"],
)
def test_script_resubmits_a_crash_at_its_next_poll_from_the_checkpoint_with_a_warm_pool(
    seed: int, warm: bool
) -> None:
    trace = _trace((75.0, "segfault", False))
    result, driver = run_script("script", SMALL, trace, PERSON, seed=seed)
    assert result.completed
    first, second = sorted(result.jobs, key=lambda j: j.created_ms)
    assert first.status == "Failed"
    assert second.created_ms == result.start_ms + 85 * MIN  # the crash at 83 min, the poll at 85
    assert second.start_step == 60
    assert second.request["ResourceConfig"]["KeepAlivePeriodInSeconds"] == SCRIPT.keep_alive_seconds
    # the segfault (an AlgorithmError) keeps the instances; the account has the quota (as
    # sagewarden's drill has); the resubmission takes the pool when it is Available by then
    # (AWS's rule as the simulator models it: 0-10 min after the end, drawn)
    pool = driver.sim.warm_pools.pool_of(first.name)
    assert pool is not None and pool.kept
    assert second.warm_pool_used == (pool.settles_ms <= second.created_ms) == warm
    assert not any(who.startswith("person") for _, who, _ in result.actions)


@pytest.mark.claim(
    "a competent polling script (e: 15 minutes of log silence, resubmission from the newest checkpoint, a warm pool)"
)
def test_script_stops_a_silent_hang_after_its_log_silence_window_at_a_poll() -> None:
    trace = _trace((75.0, "loader_hang", False))
    result, driver = run_script("script", SMALL, trace, PERSON)
    assert result.completed
    detect = _detect_min(result)
    # the last line lands in minute 82; 15 minutes of silence, then up to 5 to the next poll
    assert 15 <= detect < 15 + 5 + 1
    (stop,) = driver.stops
    assert stop[1] == "log_silence" and (stop[0] - result.start_ms) % (5 * MIN) == 0
    first, second = sorted(result.jobs, key=lambda j: j.created_ms)
    assert first.status == "Stopped" and second.start_step == 60


def test_gpu_script_stops_a_dead_host_on_the_lone_idle_rule_within_its_window_and_the_delays() -> None:
    trace = _trace((75.0, "dead_host", True))
    result, driver = run_script("gpuscript", SMALL, trace, PERSON)
    assert result.completed
    detect = _detect_min(result)
    # 3 idle datapoints while the peer is busy; the third arrives 30 s to 3 min after its minute;
    # then the next one-minute poll
    assert 3 < detect <= 3 + 1 + 3 + 1
    assert [rule for _, rule, _ in driver.stops] == ["gpu_lone_idle"]


def test_gpu_script_catches_a_stuck_loader_by_log_silence_polled_every_minute() -> None:
    # a stuck loader keeps the GPUs at 2 % each: not idle by the 1 % rule; silence catches it
    trace = _trace((75.0, "loader_hang", False))
    result, driver = run_script("gpuscript", SMALL, trace, PERSON)
    assert 15 <= _detect_min(result) <= 15 + 1 + 1
    assert [rule for _, rule, _ in driver.stops] == ["log_silence"]


def test_a_hang_that_keeps_logging_waits_for_the_person_under_the_script() -> None:
    # a thread still logs while the loop is stuck: no silence, GPUs busy; the person notices
    trace = dataclasses.replace(_trace((75.0, "nccl_spin", False)), faults=())
    spin = Fault(kind="hang_spin_logging", run=SMALL.name, after_run_training_min=75.0, host=2, label="001 x")
    driver = ScriptDriver("gpuscript", SMALL, trace, PERSON)
    driver.sim.inject(spin)
    result = driver.run()
    (record,) = result.sim.fault_records
    job = result.sim.job(record.job)
    assert driver.stops == []
    assert job.stop_requested_ms == record.at_ms + PERSON.hang_notice_delay_ms(1)


def test_script_loop_on_a_long_compile_pages_the_person_who_doubles_the_allowance() -> None:
    trace = _trace(compile_min=70.0)  # every start compiles 70 silent minutes: past 45 + 15
    result, driver = run_script("script", SMALL, trace, PERSON)
    assert result.completed
    assert [rule for _, rule, _ in driver.stops] == ["log_silence", "log_silence"]
    whats = [who for _, who, _ in result.actions]
    assert "page: script loops on log_silence" in whats and "person: retune the script (log_silence)" in whats
    assert driver.rules.startup_allowance_minutes == 2 * SCRIPT.startup_allowance_minutes
    jobs = sorted(result.jobs, key=lambda j: j.created_ms)
    assert [j.status for j in jobs] == ["Stopped", "Stopped", "Completed"]


# ----------------------------------------------------------------------------------------------
# The scoring of a false stop, and of a restart that compiles again
# ----------------------------------------------------------------------------------------------


@pytest.mark.claim("One function scores them all; a stop where no fault was costs its GPU-hours in full")
@pytest.mark.claim("False stops on the benign phases count in full (their floor is 0)")
def test_a_false_stop_in_a_long_save_is_scored_from_the_stop_with_a_zero_floor() -> None:
    trace = _trace(phases=(TracePhase(1, "save", 75.0, 20.0),))
    result, driver = run_script("script", SMALL, trace, PERSON)
    a = _account(result, trace)
    (loss,) = a.losses
    assert loss.fault is None and loss.cls == f"{FALSE_STOP}: save"
    # stopped at the poll at 100 min (silent since 82:50); SIGKILL at 102 cuts the 20-minute save
    # (SIGTERM cannot end it sooner); relaunched at once from step 60 (the 11 steps before the save
    # are redone), warm (35 s) if the stopped job's pool was Available by then, else cold (8 min)
    first, second = sorted(result.jobs, key=lambda j: j.created_ms)
    start_min = 35 / 60 if second.warm_pool_used else 8.0
    pool = driver.sim.warm_pools.pool_of(first.name)
    assert pool is not None and pool.kept
    assert second.warm_pool_used == (pool.settles_ms <= second.created_ms)
    assert loss.onset_ms == result.start_ms + 100 * MIN
    assert loss.minutes == pytest.approx((0.0, 2.0, start_min, 11.0))
    assert loss.floor == (0.0, 0.0, 0.0, 0.0)
    assert a.excess_gpu_hours() == pytest.approx(a.gpu_hours(2.0 + start_min + 11.0))
    assert [rule for _, rule, _ in driver.stops] == ["log_silence"]


def test_a_restart_is_scored_until_past_its_compile_and_the_floor_counts_the_compile() -> None:
    trace = _trace((75.0, "xid_crash", True), compile_min=10.0)
    result = run_baseline("poll", SMALL, trace, PERSON)
    a = _account(result, trace)
    (loss,) = a.losses
    # 10 min of compile before the healthy minute 75: the crash 93 min in, the poll at 95, a cold
    # start of 8 min, then the 10-minute compile of the replacement
    assert loss.minutes[:3] == pytest.approx((2.0, 0.0, 8.0 + 10.0))
    assert loss.floor[2] == pytest.approx(8.0 + 10.0)


def test_faultfree_run_includes_the_benign_phases() -> None:
    plain = faultfree_minutes(SMALL, _trace())
    assert plain == pytest.approx(SMALL.faultfree_minutes, abs=0.1)
    busy = _trace(phases=(TracePhase(1, "eval", 100.0, 20.0),), compile_min=10.0)
    assert faultfree_minutes(SMALL, busy) == pytest.approx(plain + 20.0 + 10.0, abs=0.1)


def test_person_delay_variants_reuse_a_run_only_when_the_person_could_not_have_acted() -> None:
    # (e) stops a stuck loader 15-20 minutes after onset: a person who would have looked sooner
    # changes the run (they stop it first), one who looks later does not
    trace = _trace((75.0, "loader_hang", False))
    base = run_script("script", SMALL, trace, PERSON)[0]
    a = _account(base, trace)
    detect = a.losses[0].minutes[0]
    seen = set()
    for seed in range(12):
        person = Person(seed=seed, hang_notice_median_h=0.25)
        matters = person_matters(a, 0, person)
        assert matters == (person.hang_notice_delay_ms(1) <= detect * MIN)
        again = _account(run_script("script", SMALL, trace, person)[0], trace)
        if not matters:
            assert again.losses == a.losses
        seen.add(matters)
    assert seen == {True, False}
    assert person_matters(a, 1, Person())  # the person stopped a hang in it: always


def test_the_simulators_stream_lookup_finds_what_its_stream_listing_holds() -> None:
    # GetLogEvents in the drill looks a stream up by name instead of listing every host's
    sim, job = _sim(Workload(hosts=12, days=1.0), [])
    sim.advance(sim.clock.now_ms + 20 * MIN)
    listed = sim.log_streams(f"{job}/")
    assert len(listed) == 12
    for name, j, host in listed:
        assert sim.log_stream(name) == (j, host)
    for bad in (
        f"{job}/algo-13-1",
        f"{job}/algo-1-0",
        f"{job}/algo-x",
        "nope/algo-1-1",
        f"{job}",
        listed[0][0] + "9",
    ):
        assert sim.log_stream(bad) is None
    with pytest.raises(Exception, match="ResourceNotFoundException"):
        SimulatedLogs(sim).get_log_events(logGroupName=TRAINING_LOG_GROUP, logStreamName=f"{job}/algo-13-1")


# ----------------------------------------------------------------------------------------------
# A bad host on the warm pool the resubmission took (AWS keeps a pool's instances, bad ones too)
# ----------------------------------------------------------------------------------------------


def test_a_bad_host_back_on_the_reused_pool_is_a_failure_loop_the_person_resubmits_cold() -> None:
    # seed 5: the GPU crash's pool is Available before the poll at 85 min, so the resubmission
    # takes it and the bad host fails it again 5 min into Training; no checkpoint in between (and
    # the second job's pool is not Available yet when the person answers: nothing to release)
    trace = _trace((75.0, "xid_crash", True))
    result, _ = run_script("script", SMALL, trace, PERSON, seed=5)
    assert result.completed
    jobs = sorted(result.jobs, key=lambda j: j.created_ms)
    assert [(j.status, j.warm_pool_used) for j in jobs] == [
        ("Failed", False),
        ("Failed", True),
        ("Completed", False),
    ]
    whats = [who for _, who, _ in result.actions]
    # the second failure in a row pages; the script resubmits nothing until the person does
    assert whats == [
        "start: resubmit",
        "script: resubmit",
        "page: script loops on failures",
        "person: resubmit",
    ]
    a = _account(result, trace)
    first, again = a.losses
    assert first.fault is again.fault and not first.again and again.again
    assert first.floor_min > 0 and again.floor == (0.0, 0.0, 0.0, 0.0)  # nothing forced the pool's reuse
    assert a.fault_count() == 1 and a.count(first.cls) == 1
    # the first recovery, onto the bad pool, looked quick (warm); the loss it led to is all excess
    assert a.excess_gpu_hours() == pytest.approx(
        a.gpu_hours(first.total_min - first.floor_min + again.total_min)
    )
    assert again.total_min > first.floor_min - first.total_min


def test_the_person_releases_the_runs_warm_pools_before_resubmitting() -> None:
    # a person quick to answer the page finds the second job's pool Available (bad host inside):
    # they release it (UpdateTrainingJob KeepAlivePeriodInSeconds 0), so their resubmission is cold
    quick = Person(seed=3, paged_median_min=6.0, paged_sigma=0.0)
    trace = _trace((75.0, "xid_crash", True))
    result, driver = run_script("script", SMALL, trace, quick, seed=3)
    assert result.completed
    jobs = sorted(result.jobs, key=lambda j: j.created_ms)
    released = [job for _, who, job in result.actions if who == "person: release the warm pool"]
    assert released == [jobs[1].name]
    assert driver.sim.warm_pools.pool_of(jobs[1].name).status == "Terminated"
    assert not jobs[2].warm_pool_used and jobs[2].status == "Completed"


# ----------------------------------------------------------------------------------------------
# Seeds: reproducible, and the per-seed ratio to the best peer summarised by median and range
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["script", "gpuscript"])
def test_a_seeds_peer_run_is_reproducible(kind: str) -> None:
    trace = _trace((75.0, "xid_crash", True), (300.0, "dead_host", True), compile_min=7.0)
    runs = [_account(run_script(kind, SMALL, trace, PERSON, seed=5)[0], trace) for _ in range(2)]
    assert runs[0] == runs[1] and runs[0].losses


def test_benign_draws_are_reproducible_per_seed_and_differ_between_seeds() -> None:
    from benchmarks.trace import generate

    def draw(seed: int) -> Trace:
        return generate(seed=seed, hosts=256, gpus_per_host=8, horizon_hours=240, benign=True)

    assert draw(4) == draw(4)
    assert (draw(4).phases, draw(4).compile_min) != (draw(5).phases, draw(5).compile_min)


@pytest.mark.claim(
    "Above the physical floor, sagewarden's recommended policy (d) loses, per seed and then the median (lowest-highest)"
)
def test_the_ratio_to_the_best_peer_is_taken_per_seed_then_summarised() -> None:
    from benchmarks.accounting import Account, FaultLoss
    from benchmarks.seeds import SeedResult, _ratios, best_peer, med
    from benchmarks.sidebyside import SideBySide

    def acct(excess_min: float) -> Account:
        tf = TraceFault(1, 10.0, "test", "xid_crash", 2, False, None)
        loss = FaultLoss(tf, 0, (excess_min + 1.0, 0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0))
        return Account("x", 16, [loss], 100.0, 90.0, 95.0, True)

    # seed 1: (e) is the best peer; seed 2: (e2) is; (a) and (b) lose more in both
    per_seed = {
        1: {"a": 90, "b": 80, "e": 10, "e2": 20, "d": 5},
        2: {"a": 90, "b": 80, "e": 40, "e2": 20, "d": 30},
    }
    results = []
    for seed, minutes in per_seed.items():
        sbs = SideBySide(f"seed {seed}", SMALL, _trace())
        sbs.accounts = {k: acct(m) for k, m in minutes.items()}
        results.append(SeedResult(seed, sbs))
    assert [best_peer(r.sbs.accounts)[0] for r in results] == ["e", "e2"]
    assert _ratios(results, "d", None, excess=True) == pytest.approx([0.5, 1.5])
    assert _ratios(results, "d", "e", excess=True) == pytest.approx([0.5, 0.75])
    assert med(_ratios(results, "d", None, excess=True)) == "1.000 (0.500-1.500)"
