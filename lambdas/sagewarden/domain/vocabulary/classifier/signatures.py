"""The classifier's signature tables: which texts mean which ending, as ``(pattern, label)`` rows.
Pure data. Why: docs/recovery.md (*Where the rules live*)."""

from __future__ import annotations

from typing import TypeAlias

__all__ = [
    "API_CLIENT_ERROR_SIGNATURES",
    "API_QUOTA_CODE_SIGNATURES",
    "API_QUOTA_MESSAGE_SIGNATURES",
    "API_SERVER_ERROR_LABELS",
    "API_THROTTLE_CODE_SIGNATURES",
    "API_THROTTLE_MESSAGE_SIGNATURES",
    "CODE_BUG_ALWAYS_SIGNATURES",
    "CODE_BUG_STARTUP_SIGNATURES",
    "CONFIRM_LOG_SIGNATURES",
    "DETERMINISTIC_LOG_SIGNATURES",
    "HARDWARE_LOG_LABELS",
    "HOST_MEMORY_SIGNATURES",
    "INFRA_LOG_SIGNATURES",
    "KILL_LABEL",
    "LINK_LOG_LABELS",
    "NETWORK_CONFIRM_LABELS",
    "OOM_SIGNATURES",
    "REASON_ALGORITHM_ERROR_SIGNATURES",
    "REASON_CAPACITY_SIGNATURES",
    "REASON_CLIENT_ERROR_SIGNATURES",
    "REASON_HARDWARE_SIGNATURES",
    "REASON_INTERNAL_ERROR_SIGNATURES",
    "SHARD_LOADING_PATTERN",
    "Signature",
]

# A signature: (regular expression searched in normalised text, human label for alerts).
Signature: TypeAlias = tuple[str, str]

# What may precede a log line's own text (normalised): the log reader's pointer to the first
# error-looking line and its `[algo-<n>]` prefix (adapters/cloudwatch_logs_reader.py).
_LINE_START = r"(?:\[sagewarden\] first error-looking line: )?(?:\[algo-\d+\] )?"

# Synchronous CreateTrainingJob errors. Codes are matched with all whitespace removed.

API_QUOTA_CODE_SIGNATURES: tuple[Signature, ...] = ((r"resourcelimitexceeded", "ResourceLimitExceeded"),)

API_THROTTLE_CODE_SIGNATURES: tuple[Signature, ...] = (
    (r"throttl", "ThrottlingException"),  # Throttling, ThrottlingException, ThrottledException
    (r"toomanyrequests", "TooManyRequestsException"),
    (r"requestlimitexceeded", "RequestLimitExceeded"),
    (r"internalfailure", "InternalFailure"),
    (r"internalserver", "InternalServerError"),  # InternalServerError, InternalServerException
    (r"internalerror", "InternalError"),
    (r"serviceunavailable", "ServiceUnavailable"),
    (r"^(?:429|5\d\d)$", "HTTP 429/5xx"),
)

# Labels of API_THROTTLE_CODE_SIGNATURES that are server errors (5xx), not a rate: one that repeats
# word for word on the same request backs off and gives up (domain/decide.py)
API_SERVER_ERROR_LABELS = frozenset(
    {"InternalFailure", "InternalServerError", "InternalError", "ServiceUnavailable", "HTTP 429/5xx"}
)

# Used on the API message whatever the code (after quota codes): "Rate exceeded" can come
# with codes other than ThrottlingException.
API_THROTTLE_MESSAGE_SIGNATURES: tuple[Signature, ...] = (
    (r"rate exceeded", "Rate exceeded"),
    (r"too many requests", "too many requests"),
)

# Used on the API message only when there is no error code at all.
API_QUOTA_MESSAGE_SIGNATURES: tuple[Signature, ...] = (
    (r"resourcelimitexceeded", "ResourceLimitExceeded"),
    (r"service limit '", "account-level service limit"),
)

# Only names the CLIENT_ERROR in its reason line (matched on the code, or on the message when
# there is no code): any code not matched by the tables above is a client error anyway.
API_CLIENT_ERROR_SIGNATURES: tuple[Signature, ...] = (
    (r"validationexception", "ValidationException"),
    (r"accessdenied", "AccessDenied"),
    (r"resourceinuse", "ResourceInUse"),
    (r"resourcenotfound", "ResourceNotFound"),
)

# FailureReason of a Failed job, checked in this order.

REASON_CAPACITY_SIGNATURES: tuple[Signature, ...] = (
    (r"capacityerror", "CapacityError"),
    (r"insufficientinstancecapacity", "InsufficientInstanceCapacity"),
    (r"insufficient (?:instance )?capacity", "insufficient capacity"),
)

REASON_INTERNAL_ERROR_SIGNATURES: tuple[Signature, ...] = (
    (r"internalservererror", "InternalServerError"),
    (r"we encountered an internal error", "internal error"),
)

REASON_HARDWARE_SIGNATURES: tuple[Signature, ...] = (
    (r"\brepairs?\b.{0,120}\bexhausted", "cluster repair attempts exhausted"),
    (r"cluster repair", "cluster repair"),
    (r"unhealthy (?:instance|node|host)", "unhealthy instance"),
    (r"instances? failure", "instance failure"),
    (r"hardware", "hardware failure"),
)

REASON_CLIENT_ERROR_SIGNATURES: tuple[Signature, ...] = ((r"\bclienterror\b", "ClientError"),)

# An AlgorithmError reason carries the user script's own output (exit code, error message,
# sometimes a traceback), so capacity / internal / hardware words inside it are not SageMaker's
# verdict: such a reason goes straight to the log signatures below.
REASON_ALGORITHM_ERROR_SIGNATURES: tuple[Signature, ...] = ((r"^algorithmerror\b", "AlgorithmError"),)

# Log tail (and the body of an AlgorithmError FailureReason). Earlier rows name the alert when
# several match.

# Labels of INFRA_LOG_SIGNATURES that mean a GPU or its host failed (the job restarts cold, with
# SageMaker's infra check; the host whose log printed the line is singled out: domain/hosts/bad_hosts.py).
# A GPU fault that no host flag names still points at the hardware: an uncorrectable NVLink error,
# a cuDNN internal error, an unspecified launch failure (benchmarks/corpus: these resumed on the
# same warm pool before and met the same GPU again).
HARDWARE_LOG_LABELS = frozenset(
    {
        "uncorrectable ECC error",
        "GPU ECC error",
        "NVIDIA Xid error",
        "GPU is lost",
        "GPU fell off the bus",
        "uncorrectable NVLink error",
        "GPU unreachable (NVML)",
        "CUDA unspecified launch failure",
        "cuDNN internal error",
    }
)
# Labels of INFRA_LOG_SIGNATURES that mean a network link failed (cold restart with the infra check
# too), but name the *peer* at the other end of the link, not the printer (domain/hosts/bad_hosts.py).
LINK_LOG_LABELS = frozenset({"InfiniBand completion error (retry exceeded)"})

# Hardware rows first: when a GPU fault and its collective echo share a tail, the fault names it.
INFRA_LOG_SIGNATURES: tuple[Signature, ...] = (
    (
        r"uncorrectable ecc error|cudaerroreccuncorrectable|cuda_error_ecc_uncorrectable",
        "uncorrectable ECC error",
    ),
    (r"\becc errors?\b", "GPU ECC error"),
    (r"\bxid\b", "NVIDIA Xid error"),
    (r"\bgpu is lost\b", "GPU is lost"),
    (r"\b(?:fell|fallen) off the bus\b", "GPU fell off the bus"),
    # corpus: nnunet-1519 "RuntimeError: CUDA error: uncorrectable NVLink error detected during the execution"
    (r"uncorrectable nvlink error", "uncorrectable NVLink error"),
    # corpus: returnn-1486 "Unable to determine the device handle for GPU0000:03:00.0: Unknown Error"
    (r"unable to determine the device handle for gpu", "GPU unreachable (NVML)"),
    (r"unspecified launch failure", "CUDA unspecified launch failure"),
    # corpus: cyclegan-638 "cuDNN error: CUDNN_STATUS_INTERNAL_ERROR"
    (r"cudnn_status_internal_error", "cuDNN internal error"),
    # corpus: nccl-1405 "NET/IB : Got completion from peer 10.216.210.236<54862> with status=12"
    # (IBV_WC_RETRY_EXC_ERR: the peer stopped answering on the link)
    (r"got completion from peer .{0,120}status ?= ?12\b", "InfiniBand completion error (retry exceeded)"),
    (r"watchdog caught collective operation timeout", "NCCL watchdog timeout"),
    (r"ncclsystemerror", "ncclSystemError"),
    (r"ncclinternalerror", "ncclInternalError"),
    (r"ncclremoteerror", "ncclRemoteError"),
    (r"nccl communicator was aborted", "NCCL communicator aborted"),
    (r"\bnccl error\b", "NCCL error"),
    (
        r"^(?=.*connection (?:reset|closed) by (?:remote )?peer)(?=.*(?:nccl|gloo|c10d|tcpstore|collective"
        r"|distributed|\brank\b|pair\.cc))",
        "connection reset by peer in a collective",
    ),
    # corpus: aws-nccl-795 "NCCL WARN Net : Call to recv from 10.200.84.247<58355> failed : Broken pipe"
    (r"\bnccl\b.{0,200}call to (?:recv|send) from .{0,120}failed", "NCCL socket call failed"),
    (r"tcpstore", "TCPStore failure"),
    (r"rendezvous ?timeout", "rendezvous timeout"),
    (
        r"\branks? \d+(?:(?:, ?| and )\d+)* (?:has |have |is |are )?(?:failed|dead|died|crashed)",
        "rank failed",
    ),
    (r"\branks? (?:are|is) dead\b|\bdead ranks?\b", "dead rank"),
    (r"\blibfabric\b.{0,200}(?:error|fail)", "libfabric error"),
    (r"\bnet/ofi\b.{0,200}(?:error|fail)", "aws-ofi-nccl error"),
    (r"\befa\b.{0,200}(?:error|fail)|(?:error|fail).{0,200}\befa\b", "EFA error"),
    # S3 asked the client to slow down (a checkpoint write or a shard read under load): transient.
    # corpus: datatrove-302 "{'Error': {'Code': 'SlowDown', 'Message': 'Please reduce your request
    # rate.'}", cockpit-3991 "urllib.error.HTTPError: HTTP Error 503: Slow Down"
    (r"\bslowdown\b|please reduce your request rate|http error 503: slow down", "S3 SlowDown (throttled)"),
)

# Deterministic failures: the code, its data, its configuration or its image is wrong, and every
# attempt meets it again at full price -- a resume from the same checkpoint reaches the same line.
# None of them is the echo of another host's fault, so they win over the collective errors their
# peers print (a rank that cannot save takes the others down with an NCCL timeout); a hardware
# line still wins over them. Each row cites the corpus case it was taken from (benchmarks/corpus).
DETERMINISTIC_LOG_SIGNATURES: tuple[Signature, ...] = (
    # dolly-139 "OSError: [Errno 28] No space left on device"; llamafactory-5155 "IoError(Os { code:
    # 28, kind: StorageFull, message: \"No space left on device\" })"
    (r"no space left on device|\bstoragefull\b|disk quota exceeded", "disk full"),
    # deepspeed-5570 "size mismatch for model.layers.21...: copying a param with shape ... from
    # checkpoint"; interacte-5 "RuntimeError: Error(s) in loading state_dict for InteractE:"
    (
        r"error\(s\) in loading state_dict|size mismatch for .{1,200}(?:copying a param|from checkpoint)",
        "the checkpoint does not fit the model (state_dict mismatch)",
    ),
    # deepspeed-6914 "AssertionError: Check batch related parameters. train_batch_size is not equal to
    # micro_batch_per_gpu * gradient_acc_step * world_size 8 != 2 * 1 * 1"; instructerc-16 "Micro batch
    # size per gpu: 0 has to be greater than 0"
    (
        r"check batch related parameters|micro batch size per gpu: ?\d+ has to be greater than 0",
        "batch size inconsistent with the world size",
    ),
    # rave-169 "lightning_fabric.utilities.exceptions.MisconfigurationException: `Trainer(devices=[])`"
    (r"misconfigurationexception", "framework configuration check (MisconfigurationException)"),
    # open-instruct-738 "Exception: data did not match any variant of untagged enum ModelWrapper"
    (r"did not match any variant of untagged enum", "tokenizer file and library disagree"),
    # longchat-31 "ValueError: Asking to pad but the tokenizer does not have a padding token."
    (r"asking to pad but the tokenizer does not have a padding token", "tokenizer has no padding token"),
    # sagemaker-dlc-1157 "standard_init_linux.go:219: exec user process caused: exec format error"
    (r"exec format error", "image built for another CPU architecture (exec format error)"),
    # seqnet-36 "RuntimeError: The NVIDIA driver on your system is too old (found version 11040)";
    # nunif-702 "CUDA error: CUDA driver version is insufficient for CUDA runtime version"
    (
        r"nvidia driver on your system is too old|cuda driver version is insufficient",
        "the image needs a newer GPU driver",
    ),
    # nccl-1241 "ncclInvalidUsage: This usually reflects invalid usage of NCCL library." / "Duplicate
    # GPU detected : rank 3 and rank 2 both on CUDA device e2000"
    (r"ncclinvalidusage|duplicate gpu detected", "NCCL invalid usage (ranks and GPUs misassigned)"),
    # trtllm-953 "NCCL WARN Error : no algorithm/protocol available"
    (r"no algorithm/protocol available", "NCCL: no algorithm/protocol available"),
    # reid-372 "Assertion `t >= 0 && t < n_classes` failed." / widedeep-186 "RuntimeError: CUDA error:
    # device-side assert triggered"
    (
        r"device-side assert triggered|assertion `[^`]{1,200}` failed",
        "device-side assertion (labels or indices out of range)",
    ),
    # vision-138 "OSError: image file is truncated (54 bytes not processed)"; nsfw-66
    # "PIL.UnidentifiedImageError: cannot identify image file"
    (r"image file is truncated|cannot identify image file", "corrupt training data (image)"),
    # pytorch-16203 "_pickle.UnpicklingError: invalid load key, '<'."
    (r"unpicklingerror: invalid load key", "not a readable checkpoint file (invalid load key)"),
    # glem-11 "sh: 1: /home/user/miniconda/envs/ct/bin/torchrun: not found"
    (
        r"\b(?:sh|bash): (?:\d+: |line \d+: )?\S{1,300}: (?:command )?not found",
        "launcher not found in the image",
    ),
    # uoais-16 "FloatingPointError: Loss became infinite or NaN at iteration=0!": nothing trained yet
    (r"(?:nan|infinite).{0,40}\bat iteration ?= ?0\b", "NaN loss at the first iteration"),
)

# Host RAM exhausted: the kernel's (or the container's cgroup) OOM killer ended a process. A memory
# fault of the configuration (fewer loader workers, a larger instance, loading shards one at a
# time), classed like a CUDA out-of-memory by `oom_is_user_error` -- never as infrastructure.
HOST_MEMORY_SIGNATURES: tuple[Signature, ...] = (
    # arjuna-52 "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=191.batch cgroup. Some of
    # your processes may have been killed by the cgroup out-of-memory handler."
    (r"oom-kill event|out-of-memory handler|out of memory: killed? process", "kernel OOM killer"),
    # dcpdn-12 "RuntimeError: DataLoader worker (pid 19597) is killed by signal: Killed."
    (r"dataloader worker \(pid \d+\) is killed by signal: killed", "DataLoader worker killed (host RAM)"),
    (r"\bmemoryerror\b", "MemoryError (host RAM)"),
)
# A kill (KILL_LABEL in CONFIRM_LOG_SIGNATURES) in a tail that also shows the job loading checkpoint
# shards is host RAM too: chatglm2-520 "Loading checkpoint shards:  57% 4/7 [00:40<00:29,
# 9.96s/it]ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9)".
SHARD_LOADING_PATTERN = r"loading checkpoint shards"

KILL_LABEL = "process killed (SIGKILL)"

# Endings the text names but cannot explain: a code bug and a transient fault print the same line
# (an illegal memory access from a batch-size bug or a bad GPU; a segfault from a native library or
# bad memory; a kill from the OOM killer or something else). They are resumed once and stopped when
# the next attempt ends the same way at the same step (domain/endings/loops.py): the class is UNKNOWN, the
# reason names the line and what would change the verdict.
CONFIRM_LOG_SIGNATURES: tuple[Signature, ...] = (
    # pytorch-34220 "RuntimeError: CUDA error: an illegal memory access was encountered"
    (
        r"illegal memory access|cudaerrorillegaladdress|cuda_error_illegal_address",
        "CUDA illegal memory access",
    ),
    # pytorch-12376 "segmentation fault (core dumped)"; megatron-1880 "exitcode  : -11 (pid: 6421)";
    # sdk-134 "AlgorithmError: Exit Code: 139"
    (r"segmentation fault|\bsigsegv\b|\bexitcode ?:? ?-11\b|\bexit code:? ?139\b", "segmentation fault"),
    # chatglm2-520 "failed (exitcode: -9) local_rank: 0"; kingdra-2 "/bin/bash: line 27: 318 Killed
    # sh start.sh"; hedwig-70 "Killed"; dreamerv3-203 "已杀死"
    (
        r"\bexitcode ?:? ?-9\b|signals\.sigkill|\bline \d+: +\d+ killed\b"
        rf"|^{_LINE_START}(?:killed\b|已杀死)",
        KILL_LABEL,
    ),
    # opendet2-29 "FloatingPointError: Loss became infinite or NaN at iteration=166!"; deim-96 "Loss is
    # nan, stopping training"; yolov5-673 "WARNING: non-finite loss, ending training"
    (
        r"loss (?:became|is) (?:infinite or )?nan|non-finite loss|\bnan loss\b|loss is (?:nan|inf)\b",
        "NaN/inf loss",
    ),
    # vllm-19670 "torch.distributed.DistNetworkError: The client socket has timed out after 600000ms
    # while trying to connect to (172.17.0.9, 46229)."
    (
        r"client socket has timed out after .{0,40}while trying to connect",
        "the rendezvous store cannot be reached (connect timeout)",
    ),
    # sglang-5594 "NCCL WARN socketStartConnect: Connect to 10.0.0.82<38455> failed : Software caused
    # connection abort"
    (r"connect to .{0,120}failed ?: ?software caused connection abort", "NCCL cannot connect to a peer"),
    # filo-10 "OSError: We couldn't connect to 'https://huggingface.co' to load this file, couldn't find
    # it in the cached files"; automate-104 "huggingface_hub.errors.LocalEntryNotFoundError"
    (
        r"couldn't connect to '?https?://huggingface\.co|localentrynotfounderror",
        "model hub unreachable and no local copy",
    ),
)
# Rows of CONFIRM_LOG_SIGNATURES whose line may name a peer by address (domain/hosts/bad_hosts.py reads them).
NETWORK_CONFIRM_LABELS = frozenset({"NCCL cannot connect to a peer"})

OOM_SIGNATURES: tuple[Signature, ...] = (
    (r"cuda out of memory", "CUDA out of memory"),
    (r"outofmemoryerror", "OutOfMemoryError"),
    # older wordings -- yolo2-14 "THCudaCheck FAIL file=/pytorch/torch/lib/THC/generic/THCStorage.cu
    # line=66 error=2 : out of memory"; detectron-11 "RuntimeError: CUDA error: out of memory";
    # pytorch-4844 "RuntimeError: cuda runtime error (2) : out of memory at ..."
    (
        r"cuda error: out of memory|cuda runtime error \(2\) ?: ?out of memory|thcudacheck fail.{0,200}: out of memory",
        "CUDA out of memory (older wording)",
    ),
)

# Code bugs that are a bug whenever they show up.
CODE_BUG_ALWAYS_SIGNATURES: tuple[Signature, ...] = (
    (r"\bmodulenotfounderror\b", "ModuleNotFoundError"),
    (r"\bimporterror\b", "ImportError"),
    (r"\bsyntaxerror\b", "SyntaxError"),
    (r"\bindentationerror\b", "IndentationError"),  # a SyntaxError subclass
    (r"error: unrecognized arguments", "argparse: unrecognized arguments"),
    (r"error: the following arguments are required", "argparse: missing required arguments"),
    (r"error: argument \S+: (?:invalid|expected)", "argparse: invalid argument"),
)

# Code bugs only when the attempt failed within the start-up window: after days of training a
# KeyError is more likely bad data or a consequence of something else.
CODE_BUG_STARTUP_SIGNATURES: tuple[Signature, ...] = (
    (r"\bnameerror\b", "NameError"),
    (r"\bkeyerror\b", "KeyError"),
    (r"\battributeerror\b", "AttributeError"),
    (r"\btypeerror\b", "TypeError"),
    (r"can't open file .{0,300}no such file or directory", "entry point not found"),
    (r"\bfilenotfounderror\b.{0,300}\.(?:py|sh)\b", "FileNotFoundError for a script"),
    (r"\bassertionerror\b", "AssertionError"),
)
