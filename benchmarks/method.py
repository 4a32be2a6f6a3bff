"""BENCHMARKS.md's "how the trace is made and how it is scored": the trace's sources, its internal
consistency, the supervisors and the scoring, in one place next to the numbers they explain."""

from __future__ import annotations

from benchmarks.peers import GPU_SCRIPT, SCRIPT
from benchmarks.person import Person
from benchmarks.sidebyside import RETRY_ATTEMPTS, mapping_table
from benchmarks.supervised import RECOMMENDED_POLICY
from benchmarks.trace import (
    COMPILE_MIN,
    EVAL_EVERY_H,
    EVAL_MIN,
    INFRA_CHECK_SHARES,
    LEMON_RETURNS,
    LEMON_SHARE,
    LOG_INTERVAL_S,
    PAUSE_EVERY_H,
    PAUSE_MIN,
    RESTART_CAPACITY_MIN,
    SAVE_EVERY_H,
    SAVE_MIN,
    SLOW_DURATION_MIN,
    SLOW_FACTOR,
    SLOW_REFERENCE_HOSTS,
    SLOW_STRETCH,
    slow_rate_per_host_hour,
)
from benchmarks.user_bugs import BUG_KINDS
from benchmarks.user_bugs import RATE_PER_HEALTHY_HOUR as BUG_RATE

# (phase, range, how often, public reports at or beyond the range's ends)
BENIGN_SOURCES: tuple[tuple[str, str, str, str], ...] = (
    (
        "first-step compile (silent, every GPU idle)",
        f"{COMPILE_MIN[0]:g}-{COMPILE_MIN[1]:g} min, log-uniform",
        "at every start of Training (per seed)",
        "torch.compile taking 17-30 min despite a warm cache (github.com/pytorch/pytorch/issues/108971); "
        "compilation running through the first 1 h 3 min of training (github.com/pytorch/pytorch/issues/97783); "
        "NVIDIA's resiliency extension waits 60 min for a first heartbeat by default",
    ),
    (
        "long checkpoint save (silent, GPUs low)",
        f"{SAVE_MIN[0]:g}-{SAVE_MIN[1]:g} min, uniform",
        f"every {SAVE_EVERY_H:g} h of operation on average (Poisson), besides the 2-min save every 30 min",
        "'minute-level stalls' saving large-model checkpoints (ByteCheckpoint, arxiv.org/abs/2407.20143); "
        "3-8 min for a 13B model's 130 GB to network storage (deepiix.com/blog/smart-checkpointing-failed-training-runs.html); "
        "15-30 min for a 70B model's 280 GB (remainingproblems.com, 'Checkpointing a 70B model takes 20-30 minutes')",
    ),
    (
        "data-loader pause (silent, every GPU idle)",
        f"{PAUSE_MIN[0]:g}-{PAUSE_MIN[1]:g} min, uniform",
        f"every {PAUSE_EVERY_H:g} h of operation on average (Poisson)",
        "about 10 min idle after each epoch (github.com/mosaicml/streaming/issues/643); 4 min 20 s between "
        "epochs (github.com/visionml/pytracking/issues/374); 30 s at each epoch start "
        "(github.com/frank-xwang/RIDE-LongTailRecognition/issues/33)",
    ),
    (
        "eval (still logging, GPUs low)",
        f"{EVAL_MIN[0]:g}-{EVAL_MIN[1]:g} min, uniform",
        f"every {EVAL_EVERY_H:g} h of operation on average (Poisson)",
        "an eval of about 30 min (github.com/Rudrabha/Wav2Lip/issues/338); evals taking 15-30 % of training "
        "time (github.com/databrickslabs/dolly/pull/31)",
    ),
    (
        "log cadence",
        f"a line every {LOG_INTERVAL_S[0]:g} s to {LOG_INTERVAL_S[1]:g} s, log-uniform",
        "per seed",
        "the Hugging Face Trainer logs every 500 steps by default (logging_steps); Megatron-style trainers every "
        "100 iterations (e.g. Fast-LLM's metrics interval, servicenow.github.io/Fast-LLM); with steps of 1-6 s "
        "that is every 100 s to 50 min; 10 s is a script that logs every step",
    ),
)


def method_lines(person: Person) -> list[str]:
    out = ["### How the trace is made and how it is scored", ""]
    out += [
        "**Faults.** Root causes in the proportions of the Llama 3 interruption table, each shown on "
        "SageMaker as `benchmarks/trace.py` says (edit its table to try another view):",
        "",
        *mapping_table(),
        "",
        "**Capacity errors.** After a fault with a bad instance, the restart may find no capacity: the "
        f"job waits Pending {RESTART_CAPACITY_MIN[0]:g}-{RESTART_CAPACITY_MIN[1]:g} min, then ends Failed "
        "with a `CapacityError` FailureReason -- the form AWS documents for SageMaker training jobs (AWS "
        "Batch user guide, 'Jobs stuck in RUNNABLE due to capacity': FailureReason beginning `CapacityError`, "
        "or Stopped after timing out Pending). AWS publishes no rate or duration: the shares in the table "
        "above and the wait are our assumptions.",
        "",
        "**Benign phases.** What a healthy job does that looks like trouble, drawn per seed from wide "
        "ranges (the issue's); the ranges reach what public reports describe, the frequencies are our "
        "assumptions:",
        "",
        "| phase | minutes | how often | reported |",
        "|---|---|---|---|",
        *(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in BENIGN_SOURCES),
        "",
        "**Slow hosts** (fail-slow). Alibaba's FALCON study (a production cluster of more than 10,000 "
        "GPUs) found fail-slow episodes lasting from tens of seconds to nearly ten hours that together "
        "lengthen the average job 1.34x; it gives that range and that total, not the law of one episode. "
        f"The trace draws durations log-uniform over {SLOW_DURATION_MIN[0]:g}-{SLOW_DURATION_MIN[1]:g} min, "
        f"slowdowns log-uniform {SLOW_FACTOR[0]:.0%}-{SLOW_FACTOR[1]:.0%} (our assumption), one host each, "
        f"at {slow_rate_per_host_hour():.5f} episodes per host-hour of healthy operation "
        f"({slow_rate_per_host_hour() * SLOW_REFERENCE_HOSTS:.2f} an hour on the 256-host job): the rate "
        f"that makes an unhelped run of that size {SLOW_STRETCH}x longer. An episode ends when its job "
        "ends (a restart gets re-initialised instances; for a thermal host kept by a warm pool this is "
        "the kind side).",
        "",
        f"**Bad hosts that come back** (lemons). A 504-GPU study found 3 of 63 nodes behind more than half "
        f"of all exclusions. {LEMON_SHARE:.0%} of the bad-instance faults are lemons: their host comes back "
        f"on the run's next {LEMON_RETURNS} starts on new instances and fails the same way again "
        "5 minutes into Training, unless SageMaker's infra check (`InfraCheckConfig`) finds it first; with "
        f"a share p of lemons each back N times, lemons cause p(1 + N) / (1 + pN) of those faults: "
        f"{LEMON_SHARE:g} and {LEMON_RETURNS} give one half. A bad host a warm pool keeps is met again "
        "by whoever reuses the pool, lemon or not. What the infra check does with such a host AWS does "
        "not publish: each bad-instance fault draws it, "
        + ", ".join(f"{name} {share:.0%}" for name, share in INFRA_CHECK_SHARES)
        + " (replace: SageMaker swaps the host before Training; fail: the job fails in Starting naming "
        "it; miss: the check finds nothing and the job meets the host). A warm pool takes 0-10 minutes "
        "to be `Available` (drawn per pool), past a resume's 5-minute wait for it.",
        "",
        f"**Deterministic failures** (a user's bug; benchmarks/user_bugs.py), about one per "
        f"{1 / BUG_RATE:g} hours of healthy operation, from their own random stream: "
        + "; ".join(f"{k.what} ({', '.join(k.cases)})" for k in BUG_KINDS.values())
        + " -- each quoting the log tail (and FailureReason, if any) of that corpus case. A bug ends "
        "every later attempt the same way at the same point (the restore, minutes after the compile "
        "before the next checkpoint, the start-up, the first save), resumed from the same checkpoint, "
        "until the person fixes it: when they resubmit after a page, or when they see the loop after "
        "their hang-notice delay (the only way for (b), whose script resubmits a failure at once).",
        "",
        "**Internal consistency.** Faults and phases arrive over the run's *healthy operating time* "
        "(training, saving, evaluating, compiling; not hung), so every supervisor meets the same faults "
        "and phases at the same point of the work, however slowly it recovered from earlier ones; a phase "
        "due while a job hangs waits for the next job. What the trace does not make consistent: it is a "
        "mix of job configurations, not one job. A network fault ends as an NCCL watchdog crash after a "
        "10-minute spin 60 % of the time and spins for good 40 %; a dead host always hangs until someone "
        "stops it. One job with PyTorch's NCCL watchdog on (`TORCH_NCCL_ASYNC_ERROR_HANDLING`, a 10-minute "
        "collective timeout) would see every spin and every dead host end as a watchdog crash 10 minutes "
        "in -- which SageMaker reports, so every supervisor would catch it -- and one with it off would "
        "see none. What a warm pool does with a bad instance is the simulated account's rule, the same "
        "for every supervisor; capacity errors follow only faults with a bad instance; benign phases are "
        "independent of faults.",
        "",
        f"**Person on call** (the same for every supervisor): {person.describe()}. Delays are drawn per "
        "fault, so two supervisors that need the person for the same fault wait the same time.",
        "",
        "**The supervisors.**",
        "",
        f"- **(a)** sets `RetryStrategy.MaximumRetryAttempts` = {RETRY_ATTEMPTS}; SageMaker retries only an "
        "InternalServerError, within the same job (the simulator's assumptions: status stays InProgress, "
        "SecondaryStatus goes back to Starting, cold instances, the script resumes from the newest complete "
        "checkpoint, MaxRuntimeInSeconds counts every try). Every other failure pages the person. **(b)** "
        "calls DescribeTrainingJob every 5 minutes and resubmits a Failed job from the newest complete "
        "checkpoint at once. Neither detects hangs: they last until the person notices.",
        f"- **(e)** a competent polling script (`benchmarks/peers.py`): every {SCRIPT.poll_minutes:g} min "
        "DescribeTrainingJob; a Failed or Stopped job is resubmitted at once from the newest complete "
        f"checkpoint with a warm pool (`KeepAlivePeriodInSeconds` = {SCRIPT.keep_alive_seconds}); a job in "
        f"Training gets one FilterLogEvents over its streams for the last {SCRIPT.log_silence_minutes:g} min "
        f"and is stopped and resubmitted when there is no line, after a start-up allowance of "
        f"{SCRIPT.startup_allowance_minutes:g} min (sagewarden's default). **(e2)** the same every "
        f"{GPU_SCRIPT.poll_minutes:g} min, plus sagewarden's GPU rules on GetMetricData (late datapoints "
        f"honoured): a host idle (< {GPU_SCRIPT.idle_percent:g} % per GPU) for its last "
        f"{GPU_SCRIPT.lone_idle_minutes} datapoints while a peer is busy (> {GPU_SCRIPT.busy_percent:g} %) "
        f"in the same minutes ({GPU_SCRIPT.lone_idle_startup_minutes} during start-up), or every host idle "
        f"for {GPU_SCRIPT.whole_idle_minutes} datapoints after the start-up allowance. Both page the person "
        f"when an ending repeats {SCRIPT.loop_after} times with no new checkpoint: their own stop (a save "
        "or compile longer than the rule; the rule is left off) or a failure (a bad host back on the warm "
        "pool the resubmission took: AWS keeps a pool's instances, bad ones too). The person, after their "
        "paged delay, doubles a looping rule's threshold and resubmits, cold: they release the run's warm "
        "pools first (UpdateTrainingJob, KeepAlive 0). A fault met again on a reused pool is scored in its "
        "class with a zero floor. Their logs are the script's lines at its cadence (`drill.sim.cloudwatch.ScriptLogs`).",
        "- **(c), (d)** run the real handlers, service and adapters in the drill (state in memory, log "
        "reads answered by the simulator, an hourly reconcile). When sagewarden gives up on the run "
        "(restart budget, crash loop, a user error by policy) it pages, and the person resubmits it. "
        f"(d)'s policy: `{RECOMMENDED_POLICY}` (`benchmarks/supervised.py`). Their script follows "
        "sagewarden's training-script contract (`CONTRACT`: it prints the fingerprint line at start, and "
        "checkpoints at `SAGEWARDEN_CHECKPOINT_MINUTES` when told, which only (d)'s policy does); no "
        "peer reads either, as no polling script would.",
        "",
        "**Scoring** (`benchmarks/accounting.py`, one function for every supervisor). Buckets per fault: "
        "*detection* = onset -> first decision (stop, relaunch, or SageMaker's own retry); *stop* = "
        "decision -> replacement requested; *instance start* = requested -> training again, past the "
        "restart's compile (capacity errors included); *work lost* = steps since the resumed checkpoint. "
        "**Physical floor**: detection one metric period (60 s) + event delivery (10.5 s) for anything that "
        "does not end the job by itself, delivery only for a crash; stop 120 s (SIGKILL of a hung script) + "
        "delivery; instance start cold (8 min) after a bad instance, warm (35 s) otherwise, plus the compile "
        "and any capacity wait; work since the newest complete checkpoint at onset. A **false stop** (a stop "
        "of a job in Training that no fault had hit) is scored like a fault whose floor is 0: from the stop "
        "to training again, plus the work redone; one inside another loss's recovery (a replacement stopped "
        "while it compiles) is counted there. A stop of a job that holds a bad host of the trace (a lemon "
        "back on new instances, known by its fingerprint line before it fails the job again) is that fault "
        "met again: its whole cost, no floor. *Above the floor* is what a supervisor controls. **Effective "
        "training** = the work's training time / the run's wall clock; the fault-free run is simulated "
        "(benign phases included).",
    ]
    return out
