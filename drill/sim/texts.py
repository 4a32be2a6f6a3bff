"""Texts the simulated SageMaker shows (failure reasons, status messages) and its constants."""

from __future__ import annotations

import re

from botocore.exceptions import ClientError

from drill.clock import from_ms

INTERNAL_ERROR_REASON = "InternalServerError: We encountered an internal error.  Please try again."
HARDWARE_FAILURE_REASON = (
    "HardwareError: Instance algo-{host} failed its health checks (unhealthy instance) and "
    "automatic training cluster repair was exhausted. Please retry the training job."
)
CAPACITY_FAILURE_REASON = (
    "CapacityError: Unable to provision requested ML compute capacity. "
    "Please retry using a different ML instance type."
)
CAPACITY_STATUS_MESSAGE = "Insufficient capacity error from EC2 while launching instances, retrying!"
# the training toolkit's script error quotes the command, to which it passes every hyperparameter
# as `--name value` (sorted; a one-letter name as `-n`): sagemaker-training-toolkit's errors.py
# (ExitCode / ErrorMessage / Command) and mapping.to_cmd_args
ALGORITHM_ERROR_REASON = (
    'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage "{message}"\n'
    'Command "torchrun --nnodes {nodes} --nproc_per_node {gpus} train.py{args}", exit code: 1'
)
FAILURE_REASON_MAX_CHARS = 1024  # DescribeTrainingJob's FailureReason (botocore: max 1024)
DEFAULT_ALGORITHM_LOG_LINE = "RuntimeError: simulated failure in the user training script"


def command_args(hyperparameters: object) -> str:
    """The hyperparameters as the training toolkit puts them on the script's command line."""
    if not isinstance(hyperparameters, dict):
        return ""
    parts = []
    for name in sorted(hyperparameters):
        parts += [f"--{name}" if len(name) > 1 else f"-{name}", str(hyperparameters[name])]
    return "".join(f" {part}" for part in parts)


STATUS_MESSAGES = {
    "Starting": "Launching requested ML instances",
    "Downloading": "Downloading the training image and input data",
    "Training": "Training image download completed. Training in progress.",
    "Uploading": "Uploading the generated training model",
    "Completed": "Training job completed",
    "Failed": "Training job failed",
    "Stopping": "Stopping the training job",
    "Stopped": "The training job was stopped",
    "MaxRuntimeExceeded": "The training job was stopped because it reached its maximum runtime",
    "Interrupted": "The training job was interrupted because spot capacity was reclaimed",
}
WARM_STARTING_MESSAGE = "Reusing instances from a warm pool"
SPOT_WARM_POOL_MESSAGE = (
    "SageMaker managed warm pools cannot be used with managed spot training: "
    "ResourceConfig.KeepAlivePeriodInSeconds must not be set when EnableManagedSpotTraining is true."
)
RETRY_STARTING_MESSAGE = "Retrying the training job after an internal error (retry {n} of {limit})"

# ----------------------------------------------------------------------------------------------
# Constants
# ----------------------------------------------------------------------------------------------

MINUTE_MS = 60_000
KILL_AFTER_MS = 120_000  # StopTrainingJob: SIGTERM, then SIGKILL after 120 s
DEFAULT_MAX_RUNTIME_S = 86_400
MAX_RUNTIME_LIMIT_S = 2_419_200
MAX_PENDING_RANGE_S = (1_800, 2_419_200)
DEFAULT_CAPACITY_WAIT_MIN = 30.0
DEFAULT_SAVE_LONG_MIN = 12.0
DEFAULT_EVAL_MIN = 10.0
# silent phases with every GPU idle: a first-step compile, NCCL init on many hosts, a data-loader
# pause at an epoch boundary (default minutes), and the Training phase each one opens
IDLE_PAUSE_MIN = {"compile": 30.0, "nccl_init": 8.0, "dataloader_pause": 4.0}
IDLE_PAUSE_PHASE = {"compile": "compile", "nccl_init": "nccl_init", "dataloader_pause": "data_pause"}
NAME_RE = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
NAME_PATTERN = "^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"
TERMINAL = frozenset({"Completed", "Failed", "Stopped"})
CRASH_KINDS = frozenset({"internal_error", "hardware", "algorithm_error"})
HANG_KINDS = frozenset({"hang_spin", "dead_host", "stuck_dataloader", "hang_spin_logging"})
PAUSE_KINDS = frozenset({"checkpoint_save_long", "eval_phase", *IDLE_PAUSE_MIN})
SLOW_KINDS = frozenset({"slow_host"})  # a host alive but slow (drill/sim/stragglers.py)
TRAINING_FAULTS = CRASH_KINDS | HANG_KINDS | PAUSE_KINDS | SLOW_KINDS | {"spot_interruption"}
# at CreateTrainingJob: a long Pending (capacity), or a synchronous error: ThrottlingException
# (throttle) or ResourceLimitExceeded (quota)
START_FAULTS = frozenset({"capacity", "throttle", "quota"})
FAULT_KINDS = TRAINING_FAULTS | START_FAULTS
# faults whose host is bad hardware whatever the fault says (others only with ``bad_host``)
BAD_HOST_KINDS = frozenset({"dead_host", "hardware"})
HANG_PHASES = frozenset({"hang_spin", "dead_host", "stuck", "spin_logging"})
# How a benign phase looks in the instance metrics, per occurrence (drill/sim/series.py draws one
# from the job's salt unless a fault pins it with ``variant``): the unkind overlaps are in here
PHASE_VARIANTS = {
    "save": ("busy", "light"),  # light: little CPU on every host, and only algo-1 writes (rank 0)
    "compile": ("parallel", "serial"),  # serial: one core per rank, as a spinning collective uses
    "data_pause": ("workers", "light"),  # light: the loader's workers mostly wait on storage
    "eval": ("even", "uneven"),  # uneven: some hosts (never all) load data with little CPU
    "eval_silent": ("even", "uneven"),
}
FAULT_PHASE = {"checkpoint_save_long": "save", "eval_phase": "eval", **IDLE_PAUSE_PHASE}
# benign phases that end on a timer (a save ends when its files are written): faults due meanwhile
# wait for their end
TIMED_PHASES = frozenset({"eval", "eval_silent", *IDLE_PAUSE_PHASE.values()})
# spin_logging: the training loop is stuck in a collective (GPUs spin) while another thread keeps
# writing lines, so neither log silence nor idle GPUs show it; only the progress metric stops
LOGGING_PHASES = frozenset({"train", "eval", "spin_logging"})
HEALTHY_PHASES = frozenset({"train", "save", *TIMED_PHASES})  # the run's operating clock for trace faults
STATS = frozenset({"Average", "Minimum", "Maximum", "Sum", "SampleCount"})
MASK64 = (1 << 64) - 1


def client_error(code: str, message: str, operation: str) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {
                "RequestId": "sim-error",
                "HostId": "",
                "HTTPStatusCode": 400,
                "HTTPHeaders": {},
                "RetryAttempts": 0,
            },
        },
        operation,
    )


def limit_error(what: str, limit: int, used: int, delta: int, op: str) -> ClientError:
    """ResourceLimitExceeded in SageMaker's words (aws-facts): the quota, its limit, what is in use
    and what the request asks for."""
    return client_error(
        "ResourceLimitExceeded",
        f"The account-level service limit '{what}' is {limit} Instances, with current utilization of "
        f"{used} Instances and a request delta of {delta} Instances. Please contact AWS support to "
        "request an increase for this limit.",
        op,
    )


def iso_ms(ms: int) -> str:
    return from_ms(ms).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def iso_s(ms: int) -> str:
    return from_ms(ms).strftime("%Y-%m-%dT%H:%M:%SZ")
