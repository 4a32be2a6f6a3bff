"""The fault trace of the side-by-side benchmark: what goes wrong in a long, large training run,
when, and how it shows on SageMaker.

Root causes are drawn in the proportions of the Llama 3 paper's interruption table (54 days on
16,384 H100; the counts of its table, which sum to 421 -- two more than the 419 unexpected
interruptions it reports; its "faulty GPU 30.1 %" does not match 148/419 either, so the counts
are used). Faults arrive as a Poisson process over the run's *healthy operating time* (time in
Training that is not hung) at 1.97e-5 per GPU-hour, the paper's overall rate: every supervisor
meets the same faults after the same amount of operation, however slowly it recovered from the
earlier ones.

How a root cause shows on SageMaker is the table below (``ROOT_CAUSES``, with the
manifestations in ``MANIFESTATIONS``): plain data with one comment per row saying why. The split
between manifestations is a judgement from how these failures surface in PyTorch + NCCL on
SageMaker, not a measurement -- edit the table to try another view; tests check that the
generator follows it.

Deterministic failures (a user's bug that ends every attempt the same way until a person fixes
it, quoting a real ending of the corpus) are drawn by :mod:`benchmarks.user_bugs`.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks.user_bugs import TraceBug, bug_of, draw_bugs
from drill.sim.model import Fault

GPU_FAULT_RATE_PER_GPU_HOUR = 1.97e-5  # Llama 3: 419 unexpected interruptions / (16,384 GPUs x 54 days)
RUN_NAME = "llm-30d"

XID_79 = "NVRM: Xid (PCI:0000:53:00): 79, pid=1234, GPU has fallen off the bus."
CUDA_LAUNCH = "RuntimeError: CUDA error: unspecified launch failure"
ECC = "RuntimeError: CUDA error: uncorrectable ECC error encountered"
XID_48 = "NVRM: Xid (PCI:0000:64:00): 48, pid=1234, An uncorrectable double bit error (DBE) has been detected"
WATCHDOG = (
    "[E ProcessGroupNCCL.cpp:616] [Rank 17] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=1843, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600004 milliseconds before timing out."
)
EFA = "NCCL WARN NET/OFI Request 0x7f error: libfabric EFA completion error (provider errno 15)"
SEGFAULT = "torch.distributed.elastic.multiprocessing.api: failed (exitcode: -11) local_rank: 3 (pid: 4242) of binary"
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB"
NAN = "RuntimeError: loss is NaN at step 35012 (found inf in gradients on rank 201)"


@dataclass(frozen=True)
class Manifestation:
    """How a fault shows on SageMaker: the simulated fault's fields and the report's class."""

    cls: str  # the per-class row of the report
    fault: dict[str, Any]  # drill.sim.sagemaker.Fault fields (kind, log_lines, ...)
    hang: bool = False  # the job stops making progress but does not end by itself


# Manifestations, one per way a fault surfaces. Classes group what a supervisor sees alike.
MANIFESTATIONS: dict[str, Manifestation] = {
    # SageMaker's own verdict for platform-side losses; the only thing its RetryStrategy retries
    "internal_error": Manifestation("crash: InternalServerError", {"kind": "internal_error"}),
    # SageMaker's health checks caught the instance; FailureReason names the hardware
    "hardware_reason": Manifestation("crash: hardware FailureReason", {"kind": "hardware"}),
    # the rank on the failing GPU dies with a CUDA error, the kernel logged an Xid
    "xid_crash": Manifestation(
        "crash: GPU/network error in logs", {"kind": "algorithm_error", "log_lines": (XID_79, CUDA_LAUNCH)}
    ),
    # HBM double-bit error: the CUDA context is lost with an ECC error
    "ecc_crash": Manifestation(
        "crash: GPU/network error in logs", {"kind": "algorithm_error", "log_lines": (XID_48, ECC)}
    ),
    # the EFA provider reports a completion error and NCCL aborts the communicator
    "efa_crash": Manifestation(
        "crash: GPU/network error in logs", {"kind": "algorithm_error", "log_lines": (EFA,)}
    ),
    # a collective never completes: the GPUs spin for torch's 10-minute NCCL timeout, then the
    # watchdog (TORCH_NCCL_ASYNC_ERROR_HANDLING=1) aborts the job with its line in the log
    "nccl_watchdog": Manifestation(
        "crash: NCCL watchdog after a 10-min spin",
        {"kind": "algorithm_error", "log_lines": (WATCHDOG,), "hang_before_crash_min": 10.0},
    ),
    # a collective never completes and nothing aborts it: GPUs at 100 %, no log lines
    "nccl_spin": Manifestation("hang: NCCL spin", {"kind": "hang_spin"}, hang=True),
    # a host stops (GPU wedged, host lost): its GPUs idle, the others spin waiting for it
    "dead_host": Manifestation("hang: dead host", {"kind": "dead_host"}, hang=True),
    # the input pipeline or a dependency blocks: GPUs near idle, no log lines
    "loader_hang": Manifestation("hang: stuck data loader", {"kind": "stuck_dataloader"}, hang=True),
    # a worker dies with a signal and no recognisable text
    "segfault": Manifestation("crash: unknown cause", {"kind": "algorithm_error", "log_lines": (SEGFAULT,)}),
    # corrupted numbers surface as a NaN loss the script refuses to continue with
    "nan_crash": Manifestation("crash: unknown cause", {"kind": "algorithm_error", "log_lines": (NAN,)}),
    # fragmentation or a leak after days of training; an OOM is a user error by default policy
    "oom": Manifestation("crash: CUDA OOM", {"kind": "algorithm_error", "log_lines": (OOM,)}),
}


@dataclass(frozen=True)
class RootCause:
    name: str
    count: int  # interruptions in the Llama 3 table: the weight of this cause
    hardware: bool  # an instance is bad: the replacement needs new instances (no warm restart)
    shows_as: tuple[tuple[str, float], ...]  # (manifestation, probability), summing to 1
    restart_capacity: float = 0.0  # chance the restart finds no capacity for a while
    why: str = ""


HOST_LOSS = (("internal_error", 0.4), ("hardware_reason", 0.3), ("dead_host", 0.3))
GPU_LOSS = (("xid_crash", 0.6), ("dead_host", 0.4))

ROOT_CAUSES: tuple[RootCause, ...] = (
    # most GPU failures kill their rank with a CUDA error (Xid in the log); a GPU that stops
    # answering without an error leaves its host silent while the others wait (dead host)
    RootCause("faulty GPU", 148, True, GPU_LOSS, 0.10),
    # uncorrectable HBM errors end the CUDA context (ECC error); some are caught by SageMaker's checks
    RootCause("GPU HBM3 memory", 72, True, (("ecc_crash", 0.85), ("hardware_reason", 0.15)), 0.10),
    # bugs in the training stack: unexplained deaths, deadlocks in the input pipeline, slow leaks
    RootCause("software bug", 54, False, (("segfault", 0.5), ("loader_hang", 0.3), ("oom", 0.2))),
    # a flapping link stalls a collective: the watchdog aborts it after its timeout, or it spins
    RootCause("network switch/cable", 35, False, (("nccl_watchdog", 0.6), ("nccl_spin", 0.4))),
    # the instance is taken away: SageMaker reports an internal error or names the hardware
    RootCause("host maintenance", 32, True, (("internal_error", 0.5), ("hardware_reason", 0.5)), 0.25),
    RootCause("GPU SRAM", 19, True, GPU_LOSS, 0.10),  # as a faulty GPU
    RootCause("GPU system processor", 17, True, GPU_LOSS, 0.10),  # as a faulty GPU
    # the NIC dies: EFA reports errors and NCCL aborts, or the collective just spins
    RootCause("NIC", 7, True, (("efa_crash", 0.5), ("nccl_spin", 0.5)), 0.10),
    RootCause("NCCL watchdog timeouts", 7, False, (("nccl_watchdog", 1.0),)),  # what it says
    # silent corruption is noticed only as a NaN/inf loss
    RootCause("silent data corruption", 6, True, (("nan_crash", 1.0),)),
    RootCause("GPU thermal interface + sensor", 6, True, GPU_LOSS, 0.10),  # throttling, then a GPU loss
    # host-level parts: the host is lost, reported by SageMaker or noticed as a silent host
    RootCause("SSD", 3, True, HOST_LOSS, 0.10),
    RootCause("power supply", 3, True, HOST_LOSS, 0.10),
    RootCause("server chassis", 2, True, HOST_LOSS, 0.10),
    RootCause("IO expansion board", 2, True, HOST_LOSS, 0.10),
    # an outside dependency (storage, a service) blocks the input pipeline
    RootCause("dependency", 2, False, (("loader_hang", 1.0),)),
    RootCause("CPU", 2, True, HOST_LOSS, 0.10),
    RootCause("system memory", 2, True, HOST_LOSS, 0.10),
)

# a restart that finds no capacity waits Pending this long (uniform, minutes), then fails CapacityError
RESTART_CAPACITY_MIN = (20.0, 60.0)

# Benign phases: what a healthy script does that looks like trouble. Ranges are the "wide"
# ones; each has a public report at or beyond its ends (BENCHMARKS.md lists them):
LOG_INTERVAL_S = (10.0, 600.0)  # per run, log-uniform: HF Trainer logs every 500 steps by default
COMPILE_MIN = (5.0, 70.0)  # per run, log-uniform, silent, every GPU idle: at every (re)start
SAVE_MIN, SAVE_EVERY_H = (2.0, 25.0), 12.0  # a full (optimizer) save, silent, GPUs low
PAUSE_MIN, PAUSE_EVERY_H = (1.0, 12.0), 6.0  # a data-loader pause (shard/epoch), silent, GPUs idle
EVAL_MIN, EVAL_EVERY_H = (5.0, 30.0), 8.0  # an eval: still logging, GPUs low
BENIGN_KINDS = {"save": "checkpoint_save_long", "pause": "dataloader_pause", "eval": "eval_phase"}

# Fail-slow hosts (FALCON, Wu et al. 2024, a production cluster of more than 10,000 GPUs): episodes
# last "from tens of seconds to nearly ten hours" and together lengthen the average job 1.34x. The
# paper gives that range and that total, not the law of one episode, so: durations log-uniform over
# its range, slowdowns log-uniform 10-60 % (our assumption), one host each, arriving per host-hour
# at the rate that makes an unhelped run of the bench's size (256 hosts) 1.34x longer
# (``slow_rate_per_host_hour``). A job's step waits for its slowest host; an episode ends when its
# job ends (a restart gets re-initialised instances: the kind side for a thermal host a warm pool
# keeps; docs/fidelity.md).
SLOW_DURATION_MIN = (0.5, 600.0)
SLOW_FACTOR = (0.10, 0.60)
SLOW_STRETCH = 1.34
SLOW_REFERENCE_HOSTS = 256

# Recurring bad hosts ("lemons"). A 504-GPU study found 3 of 63 nodes behind more than half of all
# exclusions, and Meta reports the same pattern at scale. If a share p of bad-instance faults are on
# lemons that come back on the run's next N cold starts and fail again, lemons cause
# p(1 + N) / (1 + pN) of those faults: p = 0.25 with N = 2 gives one half, the study's figure.
LEMON_SHARE = 0.25
LEMON_RETURNS = 2

# SageMaker's infra check (InfraCheckConfig) on a bad instance a job meets again (a lemon, or a
# warm pool's): AWS publishes neither what it finds nor what it does then, so each bad-instance
# fault draws, from its own stream, one of the three cases at equal shares -- the check finds the
# host and SageMaker replaces it, finds it and fails the job in Starting, or finds nothing.
INFRA_CHECK_SHARES: tuple[tuple[str, float], ...] = (("replace", 1 / 3), ("fail", 1 / 3), ("miss", 1 / 3))


def slow_rate_per_host_hour() -> float:
    """Episodes per host-hour of healthy operation such that an unhelped run of
    SLOW_REFERENCE_HOSTS hosts takes SLOW_STRETCH x its work: each episode loses
    D x s / (1 + s) minutes of work (D its minutes, s its slowdown), so the rate is
    (1 - 1 / SLOW_STRETCH) / E[D] / E[s / (1 + s)] per minute over the reference job."""
    d_lo, d_hi = SLOW_DURATION_MIN
    s_lo, s_hi = SLOW_FACTOR
    mean_d = (d_hi - d_lo) / math.log(d_hi / d_lo)
    mean_lost = math.log((1 + s_hi) / (1 + s_lo)) / math.log(s_hi / s_lo)
    per_min = (1.0 - 1.0 / SLOW_STRETCH) / (mean_d * mean_lost)
    return per_min * 60.0 / SLOW_REFERENCE_HOSTS


def trace_index(label: str | None) -> int | None:
    """The trace fault a simulator record's label names (None: a slow episode, a deterministic
    failure or no trace fault)."""
    head = (label or "").split(" ", 1)[0]
    return int(head) if head.isdigit() else None


def person_key(label: str | None, trace: Trace | None = None) -> int | None:
    """What the person's delays for a record are drawn by: its trace fault's index, or its
    deterministic failure's key (benchmarks/user_bugs.py); None for anything else."""
    index = trace_index(label)
    if index is not None:
        return index
    bug = bug_of(label, trace.bugs) if trace is not None else None
    return bug.person_key if bug is not None else None


@dataclass(frozen=True)
class TraceFault:
    index: int
    healthy_min: float  # the run's healthy operating minutes at the onset
    cause: str
    manifestation: str
    host: int
    hardware: bool
    restart_capacity_min: float | None
    returns_cold: int = 0  # a lemon: its host comes back on the run's next this-many cold starts
    # what SageMaker's infra check does with this bad instance (INFRA_CHECK_SHARES: replace, fail
    # or miss); None: the simulated account's own defaults
    infra_check: str | None = None

    @property
    def cls(self) -> str:
        return MANIFESTATIONS[self.manifestation].cls

    @property
    def hang(self) -> bool:
        return MANIFESTATIONS[self.manifestation].hang

    @property
    def label(self) -> str:
        return f"{self.index:03d} {self.cause} / {self.manifestation}"

    def sim_fault(self, run: str = RUN_NAME) -> Fault:
        spec = MANIFESTATIONS[self.manifestation].fault
        finds = None if self.infra_check is None else self.infra_check != "miss"
        on_bad_host = self.infra_check if self.infra_check in ("replace", "fail") else None
        return Fault(
            run=run,
            after_run_training_min=self.healthy_min,
            host=self.host,
            bad_host=self.hardware,
            restart_capacity_min=self.restart_capacity_min,
            returns_cold=self.returns_cold,
            infra_check_finds=finds,
            infra_check_on_bad_host=on_bad_host,
            label=self.label,
            **spec,
        )

    def scenario_fault(self, run: str = RUN_NAME) -> dict[str, Any]:
        """The same fault as a drill scenario's ``faults`` entry."""
        return scenario_fault(self.sim_fault(run))


def scenario_fault(f: Fault) -> dict[str, Any]:
    """A simulator fault as a drill scenario's ``faults`` entry (its non-default fields)."""
    out = {
        k: getattr(f, k)
        for k in f.__dataclass_fields__
        if getattr(f, k) != Fault.__dataclass_fields__[k].default
    }
    out["kind"] = f.kind
    if "log_lines" in out:
        out["log_lines"] = list(out["log_lines"])
    return out


@dataclass(frozen=True)
class TracePhase:
    """A benign phase at a point of the run's healthy operation (it pauses progress, nothing fails)."""

    index: int
    phase: str  # save | pause | eval (BENIGN_KINDS)
    healthy_min: float
    duration_min: float

    def sim_fault(self, run: str = RUN_NAME) -> Fault:
        return Fault(
            kind=BENIGN_KINDS[self.phase],
            run=run,
            after_run_training_min=self.healthy_min,
            duration_min=self.duration_min,
            label=f"benign {self.index:03d} {self.phase}",
        )


@dataclass(frozen=True)
class TraceSlow:
    """A fail-slow episode: a host ``slowdown`` slower for ``duration_min`` from a point of the
    run's healthy operation (its job waits for it; the episode ends early if the job ends)."""

    index: int
    healthy_min: float
    host: int
    slowdown: float
    duration_min: float

    @property
    def label(self) -> str:
        return f"slow {self.index:03d}"

    def sim_fault(self, run: str = RUN_NAME) -> Fault:
        return Fault(
            kind="slow_host",
            run=run,
            after_run_training_min=self.healthy_min,
            host=self.host,
            slowdown=self.slowdown,
            duration_min=self.duration_min,
            label=self.label,
        )


@dataclass(frozen=True)
class Trace:
    seed: int
    gpus: int
    hosts: int
    rate_multiplier: float
    horizon_hours: float
    faults: tuple[TraceFault, ...] = field(default_factory=tuple)
    # the benign side (none unless drawn: see ``generate``)
    phases: tuple[TracePhase, ...] = field(default_factory=tuple)
    compile_min: float = 0.0  # at the start of every attempt's Training
    log_interval_s: float = 10.0  # how often each host logs a line
    slows: tuple[TraceSlow, ...] = field(default_factory=tuple)  # fail-slow episodes (if drawn)
    # deterministic failures (user bugs, benchmarks/user_bugs.py; if drawn)
    bugs: tuple[TraceBug, ...] = field(default_factory=tuple)

    @property
    def mtbf_hours(self) -> float:
        return 1.0 / (GPU_FAULT_RATE_PER_GPU_HOUR * self.gpus * self.rate_multiplier)

    def benign_faults(self, run: str = RUN_NAME) -> list[Fault]:
        """The benign phases as simulator faults: the compile of every attempt, then the rest."""
        out = [p.sim_fault(run) for p in self.phases]
        if self.compile_min > 0:
            compile_ = Fault(
                kind="compile", run=run, once=False, duration_min=self.compile_min, label="compile"
            )
            out.insert(0, compile_)
        return out

    def sim_faults(self, run: str = RUN_NAME) -> list[Fault]:
        """Everything the simulator is armed with: the faults, the benign phases, the slow hosts,
        the deterministic failures."""
        return (
            [f.sim_fault(run) for f in self.faults]
            + self.benign_faults(run)
            + [x.sim_fault(run) for x in self.slows]
            + [b.sim_fault(run) for b in self.bugs]
        )

    def scenario_faults(self, run: str = RUN_NAME) -> list[dict[str, Any]]:
        """The same as a drill scenario's ``faults`` entries."""
        return [scenario_fault(f) for f in self.sim_faults(run)]

    def script(self, workload: Any) -> Any:
        """``workload`` logging at this trace's cadence (a Workload; typed loosely: no import cycle)."""
        if self.log_interval_s < 60:
            lines, every = max(1, round(60 / self.log_interval_s)), 1
        else:
            lines, every = 1, max(1, round(self.log_interval_s / 60))
        return dataclasses.replace(workload, log_lines_per_minute=lines, log_every_minutes=every)


def draw_cause(rng: random.Random) -> RootCause:
    return rng.choices(ROOT_CAUSES, weights=[c.count for c in ROOT_CAUSES])[0]


def draw_manifestation(rng: random.Random, cause: RootCause) -> str:
    names = [m for m, _ in cause.shows_as]
    return rng.choices(names, weights=[p for _, p in cause.shows_as])[0]


def draw_benign(seed: int, horizon_hours: float) -> tuple[tuple[TracePhase, ...], float, float]:
    """(phases, compile minutes, log interval seconds) of a run: drawn from their own stream, so a
    seed's faults are the same with or without them."""
    rng = random.Random(seed * 1_000_003 + 29)
    log_interval = math.exp(rng.uniform(*map(math.log, LOG_INTERVAL_S)))
    compile_min = math.exp(rng.uniform(*map(math.log, COMPILE_MIN)))
    events: list[tuple[float, str, float]] = []
    for phase, every_h, span in (
        ("save", SAVE_EVERY_H, SAVE_MIN),
        ("pause", PAUSE_EVERY_H, PAUSE_MIN),
        ("eval", EVAL_EVERY_H, EVAL_MIN),
    ):
        t = 0.0
        while True:
            t += rng.expovariate(1.0 / every_h)
            if t >= horizon_hours:
                break
            events.append((round(t * 60.0, 3), phase, round(rng.uniform(*span), 1)))
    events.sort()
    phases = tuple(
        TracePhase(i, phase, at, minutes) for i, (at, phase, minutes) in enumerate(events, start=1)
    )
    return phases, round(compile_min, 1), round(log_interval, 1)


def draw_slow(seed: int, hosts: int, horizon_hours: float) -> tuple[TraceSlow, ...]:
    """Fail-slow episodes over the horizon, from their own stream (a seed's faults stay the same)."""
    rng = random.Random(seed * 1_000_003 + 61)
    rate = slow_rate_per_host_hour() * hosts
    out: list[TraceSlow] = []
    t = 0.0
    while True:
        t += rng.expovariate(rate)
        if t >= horizon_hours:
            break
        duration = math.exp(rng.uniform(*map(math.log, SLOW_DURATION_MIN)))
        slowdown = math.exp(rng.uniform(*map(math.log, SLOW_FACTOR)))
        out.append(
            TraceSlow(
                len(out) + 1,
                round(t * 60.0, 3),
                rng.randint(1, hosts),
                round(slowdown, 3),
                round(duration, 1),
            )
        )
    return tuple(out)


def with_lemons(seed: int, faults: Sequence[TraceFault]) -> tuple[TraceFault, ...]:
    """LEMON_SHARE of the bad-instance faults made lemons, from their own stream."""
    rng = random.Random(seed * 1_000_003 + 97)
    out = []
    for f in faults:
        lemon = rng.random() < LEMON_SHARE  # drawn for every fault: the stream does not shift
        out.append(dataclasses.replace(f, returns_cold=LEMON_RETURNS) if f.hardware and lemon else f)
    return tuple(out)


def with_infra_checks(seed: int, faults: Sequence[TraceFault]) -> tuple[TraceFault, ...]:
    """What the infra check does with each bad-instance fault's host, at INFRA_CHECK_SHARES, from
    its own stream (a seed's faults stay the same)."""
    rng = random.Random(seed * 1_000_003 + 131)
    names = [name for name, _ in INFRA_CHECK_SHARES]
    weights = [share for _, share in INFRA_CHECK_SHARES]
    out = []
    for f in faults:
        case = rng.choices(names, weights=weights)[0]  # drawn for every fault: the stream does not shift
        out.append(dataclasses.replace(f, infra_check=case) if f.hardware else f)
    return tuple(out)


def generate(
    *,
    seed: int,
    hosts: int = 256,
    gpus_per_host: int = 8,
    horizon_hours: float,
    rate_multiplier: float = 1.0,
    benign: bool = False,
    hosts_fail: bool = False,
    bugs: bool = False,
) -> Trace:
    """Faults over ``horizon_hours`` of healthy operation (deterministic for a seed), each
    bad-instance fault with what the infra check does with it (:func:`with_infra_checks`); with
    ``benign`` the run's benign phases (:func:`draw_benign`); with ``hosts_fail`` fail-slow
    episodes (:func:`draw_slow`) and lemons among the bad-instance faults (:func:`with_lemons`);
    with ``bugs`` deterministic failures (:func:`benchmarks.user_bugs.draw_bugs`, at their own
    rate: a user's bugs do not grow with the GPU count or the fault-rate multiplier)."""
    for cause in ROOT_CAUSES:
        total = sum(p for _, p in cause.shows_as)
        if abs(total - 1.0) > 1e-9 or any(m not in MANIFESTATIONS for m, _ in cause.shows_as):
            raise ValueError(f"root cause {cause.name!r}: manifestations must be known and sum to 1")
    gpus = hosts * gpus_per_host
    rate_per_hour = GPU_FAULT_RATE_PER_GPU_HOUR * gpus * rate_multiplier
    rng = random.Random(seed)
    faults: list[TraceFault] = []
    t_hours = 0.0
    while True:
        t_hours += rng.expovariate(rate_per_hour)
        if t_hours >= horizon_hours:
            break
        cause = draw_cause(rng)
        manifestation = draw_manifestation(rng, cause)
        host = rng.randint(1, hosts)
        capacity = None
        if rng.random() < cause.restart_capacity:
            capacity = round(rng.uniform(*RESTART_CAPACITY_MIN), 1)
        faults.append(
            TraceFault(
                index=len(faults) + 1,
                healthy_min=round(t_hours * 60.0, 3),
                cause=cause.name,
                manifestation=manifestation,
                host=host,
                hardware=cause.hardware,
                restart_capacity_min=capacity,
            )
        )
    trace = Trace(seed, gpus, hosts, rate_multiplier, horizon_hours, with_infra_checks(seed, faults))
    if benign:
        phases, compile_min, log_interval = draw_benign(seed, horizon_hours)
        trace = dataclasses.replace(
            trace, phases=phases, compile_min=compile_min, log_interval_s=log_interval
        )
    if hosts_fail:
        trace = dataclasses.replace(
            trace, faults=with_lemons(seed, trace.faults), slows=draw_slow(seed, hosts, horizon_hours)
        )
    if bugs:
        trace = dataclasses.replace(trace, bugs=draw_bugs(seed, hosts, horizon_hours, trace.compile_min))
    return trace


def class_order() -> list[str]:
    """Report classes in table order (first appearance in MANIFESTATIONS)."""
    out: list[str] = []
    for m in MANIFESTATIONS.values():
        if m.cls not in out:
            out.append(m.cls)
    return out
