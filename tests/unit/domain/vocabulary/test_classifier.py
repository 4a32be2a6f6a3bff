"""Tests of the pure failure classifier (sagewarden.domain.vocabulary.classifier.classify)."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sagewarden.domain.vocabulary.classifier import signatures as classifier_signatures
from sagewarden.domain.vocabulary.classifier.classify import classify
from sagewarden.domain.vocabulary.classifier.matching import parse_quota_message
from sagewarden.domain.vocabulary.classifier.models import Classification, Ending, EndingClass, QuotaInfo

# --- Fixtures: realistic texts, one or more per signature label, in table order --------------

ALGO_REASON = (
    'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage ""\n'
    'Command "/opt/conda/bin/python3.10 train.py --epochs 3"'
)
TWO_DAYS = 2 * 86400.0

QUOTA_P3 = (
    "The account-level service limit 'ml.p3.8xlarge for training job usage' is 2 Instances, with "
    "current utilization of 3 Instances and a request delta of 1 Instances. Please contact AWS "
    "support to request an increase for this limit."
)
QUOTA_ALL_JOBS = (
    "The account-level service limit 'Number of instances across all training jobs' is 4 Instances, "
    "with current utilization of 0 Instances and a request delta of 8 Instances. Please contact AWS "
    "support to request an increase for this limit."
)

API_QUOTA_CODE_EXAMPLES: dict[str, tuple[str, ...]] = {
    "ResourceLimitExceeded": ("ResourceLimitExceeded",),
}

API_THROTTLE_CODE_EXAMPLES: dict[str, tuple[str, ...]] = {
    "ThrottlingException": ("ThrottlingException", "Throttling", "ThrottledException"),
    "TooManyRequestsException": ("TooManyRequestsException",),
    "RequestLimitExceeded": ("RequestLimitExceeded",),
    "InternalFailure": ("InternalFailure",),
    "InternalServerError": ("InternalServerError", "InternalServerException"),
    "InternalError": ("InternalError",),
    "ServiceUnavailable": ("ServiceUnavailable", "ServiceUnavailableException"),
    "HTTP 429/5xx": ("500", "503", "429"),
}

API_THROTTLE_MESSAGE_EXAMPLES: dict[str, tuple[str, ...]] = {
    "Rate exceeded": ("Rate exceeded", "rate  exceeded for CreateTrainingJob"),
    "too many requests": ("Too Many Requests, slow down",),
}

API_QUOTA_MESSAGE_EXAMPLES: dict[str, tuple[str, ...]] = {
    "ResourceLimitExceeded": ("ResourceLimitExceeded: too many training jobs",),
    "account-level service limit": ("The account-level service limit 'ml.p5.48xlarge for training' hit",),
}

API_CLIENT_ERROR_EXAMPLES: dict[str, tuple[str, ...]] = {
    "ValidationException": ("ValidationException",),
    "AccessDenied": ("AccessDeniedException", "AccessDenied"),
    "ResourceInUse": ("ResourceInUse",),
    "ResourceNotFound": ("ResourceNotFound",),
}

REASON_CAPACITY_EXAMPLES: dict[str, tuple[str, ...]] = {
    "CapacityError": (
        "CapacityError: Unable to provision requested ML compute capacity. Please retry using a "
        "different ML instance type.",
    ),
    "InsufficientInstanceCapacity": ("Launch failed: InsufficientInstanceCapacity for ml.p5.48xlarge",),
    "insufficient capacity": ("Training job failed: Insufficient capacity error from EC2 while launching",),
}

REASON_INTERNAL_ERROR_EXAMPLES: dict[str, tuple[str, ...]] = {
    "InternalServerError": (
        "InternalServerError: We encountered an internal error.  Please try again.",
        "InternalServerError: We encountered an internal error. Please try again.",
    ),
    "internal error": ("We encountered an internal error. Please try again.",),
}

REASON_HARDWARE_EXAMPLES: dict[str, tuple[str, ...]] = {
    "cluster repair attempts exhausted": ("Training job failed: cluster repair attempts were exhausted",),
    "cluster repair": ("Training job failed during cluster repair of algo-2",),
    "unhealthy instance": ("Training job failed: algo-3 was marked as an unhealthy instance",),
    "instance failure": ("Training job failed due to an instance failure on algo-1.",),
    "hardware failure": ("Training job failed due to hardware problems on algo-2",),
}

REASON_CLIENT_ERROR_EXAMPLES: dict[str, tuple[str, ...]] = {
    "ClientError": (
        "ClientError: Data download failed:Failed to download data. 403 Forbidden",
        "ClientError: Artifact upload failed:Insufficient disk space",
    ),
}

REASON_ALGORITHM_ERROR_EXAMPLES: dict[str, tuple[str, ...]] = {
    "AlgorithmError": (ALGO_REASON, "AlgorithmError: framework error"),
}

INFRA_LOG_EXAMPLES: dict[str, tuple[str, ...]] = {
    "uncorrectable ECC error": (
        "RuntimeError: CUDA error: uncorrectable ECC error encountered",
        "cudaErrorECCUncorrectable reported by device 2",
        "failed call to cuDevicePrimaryCtxRetain: CUDA_ERROR_ECC_UNCORRECTABLE: uncorrectable ECC error",
    ),
    "GPU ECC error": ("nvidia-smi reports ECC errors on GPU 3",),
    "NVIDIA Xid error": ("NVRM: Xid (PCI:0000:a0:1c): 79, pid=1234, GPU has fallen off the bus.",),
    "GPU is lost": ("Unable to determine the device handle for GPU0000:10:1c.0: GPU is lost.  Reboot",),
    "GPU fell off the bus": ("kernel: NVRM: GPU at PCI:0000:10:1c: GPU has fallen off the bus.",),
    "uncorrectable NVLink error": (
        "RuntimeError: CUDA error: uncorrectable NVLink error detected during the execution",
    ),
    "GPU unreachable (NVML)": ("Unable to determine the device handle for GPU0000:03:00.0: Unknown Error",),
    "CUDA unspecified launch failure": ("RuntimeError: CUDA error: unspecified launch failure",),
    "cuDNN internal error": ("RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR",),
    "InfiniBand completion error (retry exceeded)": (
        "NCCL WARN NET/IB : Got completion from peer 10.216.210.236<54862> with status=12 opcode=0 len=0",
    ),
    "NCCL watchdog timeout": (
        "[Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=48211, "
        "OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.",
    ),
    "ncclSystemError": (
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled "
        "system error, NCCL version 2.19.3 ncclSystemError: System call failed",
    ),
    "ncclInternalError": ("ncclInternalError: Internal check failed.",),
    "ncclRemoteError": ("ncclRemoteError: A call failed possibly due to a remote process exiting",),
    "NCCL communicator aborted": ("RuntimeError: NCCL communicator was aborted on rank 3.",),
    "NCCL error": ("RuntimeError: NCCL error in: NCCLUtils.hpp:219, unhandled cuda error",),
    "connection reset by peer in a collective": (
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection reset by peer "
        "[10.0.12.7]:25874",
        "[c10d] recv from peer failed: Connection reset by peer",
        "algo-2:88:120 [3] NCCL WARN socket: connection closed by peer",
        "[0] misc/socket.cc:71 NCCL WARN socketProgress: Connection closed by remote peer 10.10.1.3<36138>",
    ),
    "NCCL socket call failed": (
        "a100-22:183006:183220 [1] misc/socket.cc:518 NCCL WARN Net : Call to recv from "
        "10.200.84.247<58355> failed : Broken pipe",
    ),
    "TCPStore failure": ("RuntimeError: TCPStore client could not get key after 1800 s",),
    "rendezvous timeout": (
        "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError",
        "Rendezvous timeout while waiting for workers",
    ),
    "rank failed": ("Rank 3 failed: process exited unexpectedly", "ranks 1, 2 and 7 have failed"),
    "dead rank": ("Detected dead ranks [4, 5], aborting", "2 ranks are dead, giving up"),
    "libfabric error": ("libfabric:4412:1712000000::efa:cq:efa_rdm_cq_proc_error():123<warn> Error writing",),
    "aws-ofi-nccl error": ("algo-1:55:66 [2] NCCL WARN NET/OFI Request completed with error. RC: 21",),
    "EFA error": ("EFA device error: failed to post send",),
    "S3 SlowDown (throttled)": (
        "{'Error': {'Code': 'SlowDown', 'Message': 'Please reduce your request rate.'}",
        "botocore.exceptions.ClientError: An error occurred (SlowDown) when calling the CompleteMultipartUpload operation",
        "urllib.error.HTTPError: HTTP Error 503: Slow Down",
    ),
}

HARDWARE_EXAMPLE_LABELS = frozenset(
    label
    for label in INFRA_LOG_EXAMPLES
    if label in classifier_signatures.HARDWARE_LOG_LABELS | classifier_signatures.LINK_LOG_LABELS
)

DETERMINISTIC_LOG_EXAMPLES: dict[str, tuple[str, ...]] = {
    "disk full": (
        "OSError: [Errno 28] No space left on device",
        'safetensors_rust.SafetensorError: Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })',
    ),
    "the checkpoint does not fit the model (state_dict mismatch)": (
        "RuntimeError: Error(s) in loading state_dict for InteractE:",
        "size mismatch for conv14.weight: copying a param with shape torch.Size([96, 96, 3, 3]) from checkpoint, "
        "the shape in current model is torch.Size([96, 48, 3, 3]).",
    ),
    "batch size inconsistent with the world size": (
        "AssertionError: Check batch related parameters. train_batch_size is not equal to "
        "micro_batch_per_gpu * gradient_acc_step * world_size 256 != 2 * 18 * 7",
        "AssertionError: Micro batch size per gpu: 0 has to be greater than 0",
    ),
    "framework configuration check (MisconfigurationException)": (
        "lightning_fabric.utilities.exceptions.MisconfigurationException: You requested gpu: [1]",
    ),
    "tokenizer file and library disagree": (
        "Exception: data did not match any variant of untagged enum ModelWrapper at line 1251012 column 3",
    ),
    "tokenizer has no padding token": (
        "ValueError: Asking to pad but the tokenizer does not have a padding token. Please select a token",
    ),
    "image built for another CPU architecture (exec format error)": (
        "standard_init_linux.go:219: exec user process caused: exec format error",
    ),
    "the image needs a newer GPU driver": (
        "RuntimeError: The NVIDIA driver on your system is too old (found version 11040).",
        "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version",
    ),
    "NCCL invalid usage (ranks and GPUs misassigned)": (
        "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
        "init.cc:497 NCCL WARN Duplicate GPU detected : rank 2 and rank 0 both on CUDA device 1000",
    ),
    "NCCL: no algorithm/protocol available": (
        "dc:255756:255756 [3] enqueue.cc:1182 NCCL WARN Error : no algorithm/protocol available",
    ),
    "device-side assertion (labels or indices out of range)": (
        "ClassNLLCriterion.cu:108: block: [0,0,0], thread: [31,0,0] Assertion `t >= 0 && t < n_classes` failed.",
        "RuntimeError: CUDA error: device-side assert triggered",
    ),
    "corrupt training data (image)": (
        "OSError: image file is truncated (54 bytes not processed)",
        "PIL.UnidentifiedImageError: cannot identify image file <_io.BytesIO object at 0x7f9c489460a0>",
    ),
    "not a readable checkpoint file (invalid load key)": ("_pickle.UnpicklingError: invalid load key, '<'.",),
    "launcher not found in the image": ("sh: 1: /home/user/miniconda/envs/ct/bin/torchrun: not found",),
    "NaN loss at the first iteration": ("FloatingPointError: Loss became infinite or NaN at iteration=0!",),
}

CONFIRM_LOG_EXAMPLES: dict[str, tuple[str, ...]] = {
    "CUDA illegal memory access": (
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "RuntimeError: merge_sort: failed to synchronize: cudaErrorIllegalAddress: an illegal memory access",
    ),
    "segmentation fault": (
        "segmentation fault (core dumped)",
        "  exitcode  : -11 (pid: 6421)",
        "AlgorithmError: Exit Code: 139",
    ),
    "process killed (SIGKILL)": (
        "torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 (pid: 311)",
        "  exitcode  : -9 (pid: 311)",
        "Worker 0 (pid 311) died with <Signals.SIGKILL: 9>",
        "/bin/bash: line 27: 318 Killed sh start.sh",
        "Killed",
        "[algo-3] Killed",
        "已杀死",
    ),
    "NaN/inf loss": (
        "FloatingPointError: Loss became infinite or NaN at iteration=166!",
        "Loss is nan, stopping training",
        "WARNING: non-finite loss, ending training  tensor([nan, nan, nan, nan], device='cuda:0')",
    ),
    "the rendezvous store cannot be reached (connect timeout)": (
        "torch.distributed.DistNetworkError: The client socket has timed out after 600000ms while trying "
        "to connect to (172.17.0.9, 46229).",
    ),
    "NCCL cannot connect to a peer": (
        "h100-15:139:1092 [7] socket.c:485 NCCL WARN socketStartConnect: Connect to 10.0.0.82<38455> "
        "failed : Software caused connection abort",
    ),
    "model hub unreachable and no local copy": (
        "OSError: We couldn't connect to 'https://huggingface.co' to load this file, couldn't find it in the cached files",
        "huggingface_hub.errors.LocalEntryNotFoundError: An error happened while trying to locate the file on the Hub",
    ),
}

HOST_MEMORY_EXAMPLES: dict[str, tuple[str, ...]] = {
    "kernel OOM killer": (
        "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=191.batch cgroup.",
        "Out of memory: Killed process 4242 (python3) total-vm:812345678kB",
    ),
    "DataLoader worker killed (host RAM)": (
        "RuntimeError: DataLoader worker (pid 19597) is killed by signal: Killed.",
    ),
    "MemoryError (host RAM)": ("MemoryError: Unable to allocate 12.0 GiB for an array",),
}

OOM_EXAMPLES: dict[str, tuple[str, ...]] = {
    "CUDA out of memory": ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",),
    "OutOfMemoryError": ("torch.cuda.OutOfMemoryError: allocation on device 3 failed",),
    "CUDA out of memory (older wording)": (
        "RuntimeError: CUDA error: out of memory",
        "RuntimeError: cuda runtime error (2) : out of memory at /pytorch/THC/generic/THCStorage.cu:66",
        "THCudaCheck FAIL file=/pytorch/torch/lib/THC/generic/THCStorage.cu line=66 error=2 : out of memory",
    ),
}

CODE_BUG_ALWAYS_EXAMPLES: dict[str, tuple[str, ...]] = {
    "ModuleNotFoundError": ("ModuleNotFoundError: No module named 'flash_attn'",),
    "ImportError": ("ImportError: cannot import name 'LlamaForCausalLM' from 'transformers'",),
    "SyntaxError": ("SyntaxError: invalid syntax",),
    "IndentationError": ("IndentationError: unexpected indent",),
    "argparse: unrecognized arguments": ("train.py: error: unrecognized arguments: --lr-warmup 100",),
    "argparse: missing required arguments": (
        "train.py: error: the following arguments are required: --model",
    ),
    "argparse: invalid argument": ("train.py: error: argument --epochs: invalid int value: 'ten'",),
}

CODE_BUG_STARTUP_EXAMPLES: dict[str, tuple[str, ...]] = {
    "NameError": ("NameError: name 'optimzer' is not defined",),
    "KeyError": ("KeyError: 'input_ids'",),
    "AttributeError": ("AttributeError: 'NoneType' object has no attribute 'shape'",),
    "TypeError": ("TypeError: forward() got an unexpected keyword argument 'labels'",),
    "entry point not found": (
        "/opt/conda/bin/python3.10: can't open file '/opt/ml/code/train.py': "
        "[Errno 2] No such file or directory",
    ),
    "FileNotFoundError for a script": (
        "FileNotFoundError: [Errno 2] No such file or directory: '/opt/ml/code/launch.sh'",
    ),
    "AssertionError": ("AssertionError: expected 8 shards, found 7",),
}

TABLES: tuple[tuple[str, dict[str, tuple[str, ...]]], ...] = (
    ("API_QUOTA_CODE_SIGNATURES", API_QUOTA_CODE_EXAMPLES),
    ("API_THROTTLE_CODE_SIGNATURES", API_THROTTLE_CODE_EXAMPLES),
    ("API_THROTTLE_MESSAGE_SIGNATURES", API_THROTTLE_MESSAGE_EXAMPLES),
    ("API_QUOTA_MESSAGE_SIGNATURES", API_QUOTA_MESSAGE_EXAMPLES),
    ("API_CLIENT_ERROR_SIGNATURES", API_CLIENT_ERROR_EXAMPLES),
    ("REASON_CAPACITY_SIGNATURES", REASON_CAPACITY_EXAMPLES),
    ("REASON_INTERNAL_ERROR_SIGNATURES", REASON_INTERNAL_ERROR_EXAMPLES),
    ("REASON_HARDWARE_SIGNATURES", REASON_HARDWARE_EXAMPLES),
    ("REASON_CLIENT_ERROR_SIGNATURES", REASON_CLIENT_ERROR_EXAMPLES),
    ("REASON_ALGORITHM_ERROR_SIGNATURES", REASON_ALGORITHM_ERROR_EXAMPLES),
    ("INFRA_LOG_SIGNATURES", INFRA_LOG_EXAMPLES),
    ("DETERMINISTIC_LOG_SIGNATURES", DETERMINISTIC_LOG_EXAMPLES),
    ("HOST_MEMORY_SIGNATURES", HOST_MEMORY_EXAMPLES),
    ("CONFIRM_LOG_SIGNATURES", CONFIRM_LOG_EXAMPLES),
    ("OOM_SIGNATURES", OOM_EXAMPLES),
    ("CODE_BUG_ALWAYS_SIGNATURES", CODE_BUG_ALWAYS_EXAMPLES),
    ("CODE_BUG_STARTUP_SIGNATURES", CODE_BUG_STARTUP_EXAMPLES),
)


def _cases(examples: dict[str, tuple[str, ...]]) -> list[object]:
    """(label, text) cases, each named by its label and, if the label has several, its number."""
    return [
        pytest.param(label, text, id=label if len(texts) == 1 else f"{label} #{n}")
        for label, texts in examples.items()
        for n, text in enumerate(texts, start=1)
    ]


# Odd spellings every signature must survive: case, whitespace runs, newlines, leading
# whitespace and trailing junk.
Spelling = Callable[[str], str]
SPELLINGS: dict[str, Spelling] = {
    "as-is": lambda s: s,
    "upper": str.upper,
    "lower": str.lower,
    "double-spaces": lambda s: s.replace(" ", "  "),
    "tabs-and-newlines": lambda s: s.replace(" ", " \t\n "),
    "leading-whitespace": lambda s: "  \n\t" + s,
    "trailing-junk": lambda s: s + " \x00 ### trailing junk 0xdeadbeef\n\n",
}
SPELLING_IDS = list(SPELLINGS)
SPELLING_FUNCS = list(SPELLINGS.values())


def _failed(
    tail: tuple[str, ...] = (), *, reason: str | None = ALGO_REASON, training_seconds: float = 60.0
) -> Ending:
    return Ending(
        status="Failed",
        failure_reason=reason,
        log_tail=tail,
        reached_training=training_seconds > 0,
        training_seconds=training_seconds,
    )


def _log_lines(result: Classification, ending: Ending) -> tuple[str, ...]:
    """Evidence items after the FailureReason (which always comes first when there is one)."""
    if ending.failure_reason is not None and ending.failure_reason.strip():
        return result.evidence[1:]
    return result.evidence


# --- Tables are complete and every entry is exercised ------------------------------------------


@pytest.mark.claim(
    "It matches reasons and log lines by case- and whitespace-insensitive substring, never by whole string, and its tables are plain data you can extend."
)
@pytest.mark.parametrize(("table_name", "examples"), TABLES, ids=[name for name, _ in TABLES])
def test_classify_every_signature_entry_has_examples(
    table_name: str, examples: dict[str, tuple[str, ...]]
) -> None:
    table = getattr(classifier_signatures, table_name)
    labels = [label for _, label in table]
    assert len(labels) == len(set(labels)), "labels must be unique within a table"
    assert labels == list(examples), "every table row needs examples in this file, in table order"
    assert all(examples[label] for label in labels)


def test_classify_signature_tables_are_exported() -> None:
    exported = {name for name in classifier_signatures.__all__ if name.endswith("_SIGNATURES")}
    assert exported == {name for name, _ in TABLES}


# --- Synchronous API errors ---------------------------------------------------------------------


@pytest.mark.claim(
    '`ThrottlingException` / "Rate exceeded" / a 5xx from CreateTrainingJob | short jittered retry'
)
@pytest.mark.parametrize("spell", [str.upper, str.lower, lambda s: f"  {s}\n"], ids=["upper", "lower", "ws"])
@pytest.mark.parametrize(("label", "code"), _cases(API_THROTTLE_CODE_EXAMPLES))
def test_classify_throttle_codes(label: str, code: str, spell: Spelling) -> None:
    result = classify(Ending(api_error_code=spell(code), api_error_message="Something went wrong"))
    assert result.kind is EndingClass.THROTTLED
    assert label in result.reason
    assert result.quota is None


@pytest.mark.claim(
    '`ThrottlingException` / "Rate exceeded" / a 5xx from CreateTrainingJob | short jittered retry'
)
@pytest.mark.parametrize(
    "code",
    [None, "", "LimitExceededException", "ValidationException"],
    ids=["no code", "an empty code", "a limit code", "a validation code"],
)
@pytest.mark.parametrize(("label", "message"), _cases(API_THROTTLE_MESSAGE_EXAMPLES))
def test_classify_throttle_messages_whatever_the_code(label: str, message: str, code: str | None) -> None:
    result = classify(Ending(api_error_code=code, api_error_message=message))
    assert result.kind is EndingClass.THROTTLED
    assert label in result.reason


@pytest.mark.claim(
    'synchronous `ResourceLimitExceeded`: limit, utilisation and delta are parsed from the message (the quoted wording and the older unquoted one), and "... is not available in this region" is recognised'
)
@pytest.mark.parametrize("spell", SPELLING_FUNCS, ids=SPELLING_IDS)
@pytest.mark.parametrize(("label", "code"), _cases(API_QUOTA_CODE_EXAMPLES))
def test_classify_quota_code_parses_message(label: str, code: str, spell: Spelling) -> None:
    result = classify(Ending(api_error_code=code, api_error_message=spell(QUOTA_P3)))
    assert result.kind is EndingClass.QUOTA
    assert result.quota is not None
    assert result.quota.quota_name.casefold() == "ml.p3.8xlarge for training job usage"
    assert (result.quota.limit, result.quota.used, result.quota.delta) == (2, 3, 1)
    assert result.quota.can_ever_fit
    assert "wait" in result.reason
    assert label in result.evidence[0]


def test_classify_quota_that_can_never_fit_says_so() -> None:
    result = classify(Ending(api_error_code="ResourceLimitExceeded", api_error_message=QUOTA_ALL_JOBS))
    assert result.kind is EndingClass.QUOTA
    assert result.quota == QuotaInfo("Number of instances across all training jobs", 4, 0, 8)
    assert not result.quota.can_ever_fit
    assert "quota increase" in result.reason


@pytest.mark.parametrize(
    "message",
    ["", None, "Limit exceeded.", "service limit 'x' is many Instances"],
    ids=["an empty message", "no message", "a message without numbers", "a count in words"],
)
def test_classify_quota_with_unparseable_message_is_still_quota(message: str | None) -> None:
    result = classify(Ending(api_error_code="ResourceLimitExceeded", api_error_message=message))
    assert result.kind is EndingClass.QUOTA
    assert result.quota is None
    assert "could not be parsed" in result.reason


@pytest.mark.parametrize(("label", "message"), _cases(API_QUOTA_MESSAGE_EXAMPLES))
def test_classify_quota_message_without_code(label: str, message: str) -> None:
    result = classify(Ending(api_error_message=message))
    assert result.kind is EndingClass.QUOTA
    assert result.quota is None
    assert result.evidence == (message,)
    assert "quota exceeded" in result.reason


def test_classify_parseable_quota_message_without_code() -> None:
    result = classify(Ending(api_error_message=QUOTA_ALL_JOBS))
    assert result.kind is EndingClass.QUOTA
    assert result.quota is not None
    assert result.quota.delta == 8


@pytest.mark.parametrize("spell", [str.upper, str.lower, lambda s: f" {s} "], ids=["upper", "lower", "ws"])
@pytest.mark.parametrize(("label", "code"), _cases(API_CLIENT_ERROR_EXAMPLES))
def test_classify_client_error_codes(label: str, code: str, spell: Spelling) -> None:
    result = classify(Ending(status="Failed", api_error_code=spell(code), api_error_message="Bad request"))
    assert result.kind is EndingClass.CLIENT_ERROR
    assert label in result.reason
    assert result.evidence == (f"{spell(code).strip()}: Bad request",)


@pytest.mark.parametrize(
    "code",
    ["ConflictException", "InvalidParameterValue", "400", "BadRequest"],
    ids=["ConflictException", "InvalidParameterValue", "an http status as code", "BadRequest"],
)
def test_classify_any_other_code_is_client_error(code: str) -> None:
    result = classify(Ending(api_error_code=code, api_error_message="nope"))
    assert result.kind is EndingClass.CLIENT_ERROR
    assert code in result.reason
    assert result.evidence == (f"{code}: nope",)


def test_classify_message_without_code_is_client_error() -> None:
    message = "Could not assume role arn:aws:iam::123456789012:role/x. Please ensure it exists."
    result = classify(Ending(api_error_message=message))
    assert result.kind is EndingClass.CLIENT_ERROR
    assert result.evidence == (message,)


def test_classify_api_error_beats_any_status() -> None:
    for status in ("Completed", "Failed", "Stopped", None):
        ending = Ending(status=status, api_error_code="ThrottlingException", stop_intent="hang")
        assert classify(ending).kind is EndingClass.THROTTLED


def test_classify_blank_api_fields_are_ignored() -> None:
    result = classify(Ending(status="Completed", api_error_code="  ", api_error_message="\n\t"))
    assert result.kind is EndingClass.SUCCEEDED


# --- parse_quota_message ----------------------------------------------------------------------


@pytest.mark.claim(
    'synchronous `ResourceLimitExceeded`: limit, utilisation and delta are parsed from the message (the quoted wording and the older unquoted one), and "... is not available in this region" is recognised'
)
@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (QUOTA_P3, QuotaInfo("ml.p3.8xlarge for training job usage", 2, 3, 1)),
        (QUOTA_ALL_JOBS, QuotaInfo("Number of instances across all training jobs", 4, 0, 8)),
        (
            "The account-level service limit 'ml.g5.xlarge for training job usage' is 1 Instance, with "
            "current utilization of 1 Instance and a request delta of 1 Instance.",
            QuotaInfo("ml.g5.xlarge for training job usage", 1, 1, 1),
        ),
        (
            "THE ACCOUNT-LEVEL SERVICE LIMIT 'ML.P4D.24XLARGE FOR TRAINING JOB USAGE'   IS 16 INSTANCES,\n"
            "WITH CURRENT UTILIZATION OF 8 INSTANCES AND A REQUEST DELTA OF   16 INSTANCES.",
            QuotaInfo("ML.P4D.24XLARGE FOR TRAINING JOB USAGE", 16, 8, 16),
        ),
        (
            "  The account-level service limit \u2018ml.trn1.32xlarge   for training job usage\u2019 is "
            "1,000 Instances, with current utilisation of 999 Instances and a request delta of 2 "
            "Instances. trailing junk",
            QuotaInfo("ml.trn1.32xlarge for training job usage", 1000, 999, 2),
        ),
        (
            "service limit 'Number of instances across all training jobs' is 4, with current "
            "utilization of 3 and a request delta of 2.",
            QuotaInfo("Number of instances across all training jobs", 4, 3, 2),
        ),
        (  # sagemaker-python-sdk #35: the older, unquoted wording
            "The account-level service limit for training-job/ml.p2.xlarge is 0 Instances, with current "
            "utilization of 0 Instances and a request delta of 2 Instances. Please contact AWS support to "
            "request an increase for this limit.",
            QuotaInfo("training-job/ml.p2.xlarge", 0, 0, 2),
        ),
        (  # amazon-sagemaker-examples #1001: no quota to raise at all
            "The requested resource training-job/ml.p2.xlarge is not available in this region",
            QuotaInfo("training-job/ml.p2.xlarge", 0, 0, 0, unavailable=True),
        ),
    ],
    ids=[
        "p3",
        "all-jobs",
        "singular",
        "upper-and-spaces",
        "curly-quotes-commas",
        "no-units",
        "older-unquoted",
        "not-in-region",
    ],
)
def test_classify_parses_quota_message_variants(message: str, expected: QuotaInfo) -> None:
    assert parse_quota_message(message) == expected


@pytest.mark.parametrize(
    "message",
    [
        "",
        "Rate exceeded",
        "ResourceLimitExceeded",
        "The account-level service limit 'x' is two Instances, with current utilization of 1 "
        "Instance and a request delta of 1 Instance.",
        "The account-level service limit 'x' is 2 Instances, with current utilization of 1 Instance.",
        "The account-level service limit '' is 2 Instances, with current utilization of 1 Instance "
        "and a request delta of 1 Instance.",
        "The account-level service limit ml.p3 is 2 Instances, with current utilization of 1 Instance "
        "and a request delta of 1 Instance.",
    ],
    ids=["empty", "throttle", "code-only", "words", "no-delta", "empty-name", "no-quotes"],
)
def test_classify_unparseable_quota_messages_return_none(message: str) -> None:
    assert parse_quota_message(message) is None


def test_classify_a_resource_the_region_does_not_offer_can_never_fit() -> None:
    msg = "The requested resource training-job/ml.p2.xlarge is not available in this region"
    result = classify(Ending(api_error_code="ResourceLimitExceeded", api_error_message=msg))
    assert result.kind is EndingClass.QUOTA and result.quota is not None and not result.quota.can_ever_fit
    assert "not available in this region" in result.reason and "quota increase" not in result.reason


@pytest.mark.parametrize(
    ("limit", "delta", "fits"),
    [(2, 1, True), (2, 2, True), (2, 3, False), (0, 1, False)],
    ids=["delta under the limit", "delta equal to the limit", "delta over the limit", "a zero limit"],
)
def test_classify_quota_can_ever_fit_is_delta_within_limit(limit: int, delta: int, fits: bool) -> None:
    assert QuotaInfo("q", limit=limit, used=99, delta=delta).can_ever_fit is fits


# --- Completed / Stopped ----------------------------------------------------------------------


@pytest.mark.parametrize("status", ["Completed", "completed", " COMPLETED "])
def test_classify_completed_is_succeeded(status: str) -> None:
    result = classify(Ending(status=status, secondary_status="Completed", log_tail=("NCCL error",)))
    assert result.kind is EndingClass.SUCCEEDED
    assert result.evidence == ()


@pytest.mark.parametrize(
    "secondary",
    ["MaxRuntimeExceeded", "Interrupted", "MaxWaitTimeExceeded", "Stopped", "Pending", None],
    ids=[
        "MaxRuntimeExceeded",
        "Interrupted",
        "MaxWaitTimeExceeded",
        "Stopped",
        "Pending",
        "no secondary status",
    ],
)
@pytest.mark.parametrize(
    "intent",
    ["hang", "budget", "cancel", "progress stalled\nfor 2 h", ""],
    ids=["hang", "budget", "cancel", "a free-text intent over two lines", "an empty intent"],
)
def test_classify_stop_intent_beats_everything_when_stopped(secondary: str | None, intent: str) -> None:
    ending = Ending(
        status="Stopped",
        secondary_status=secondary,
        stop_intent=intent,
        reached_training=False,
        pending_seconds=7200.0,
        max_pending_seconds=3600,
    )
    result = classify(ending)
    assert result.kind is EndingClass.SUPERVISOR_STOP
    shown = " ".join(intent.split()) or "unspecified"
    assert result.evidence[0] == f"stop intent: {shown}"
    assert shown in result.reason
    assert "\n" not in result.reason


@pytest.mark.claim(
    "chain the next segment from the newest checkpoint. Runs longer than SageMaker's 28-day cap work; each segment's MaxRuntime is capped by the run's remaining wall clock."
)
@pytest.mark.parametrize("secondary", ["MaxRuntimeExceeded", "maxruntimeexceeded", " MaxRuntime Exceeded "])
def test_classify_max_runtime_exceeded_is_segment_done(secondary: str) -> None:
    result = classify(Ending(status="Stopped", secondary_status=secondary, reached_training=True))
    assert result.kind is EndingClass.SEGMENT_DONE
    assert result.evidence == ("SecondaryStatus: " + "".join(secondary.split()),)


@pytest.mark.claim("`Stopped/Interrupted`, `MaxWaitTimeExceeded` | resume | no-progress streak only")
@pytest.mark.parametrize(
    "secondary", ["Interrupted", "MaxWaitTimeExceeded", "INTERRUPTED", "maxwaittimeexceeded"]
)
def test_classify_spot_interruption(secondary: str) -> None:
    result = classify(Ending(status="Stopped", secondary_status=secondary, reached_training=True))
    assert result.kind is EndingClass.SPOT_INTERRUPTED
    assert secondary in result.reason


def test_classify_segment_done_beats_pending_capacity() -> None:
    ending = Ending(
        status="Stopped", secondary_status="MaxRuntimeExceeded", pending_seconds=9e9, max_pending_seconds=60
    )
    assert classify(ending).kind is EndingClass.SEGMENT_DONE


@pytest.mark.parametrize(
    ("reached", "pending", "limit", "expected"),
    [
        (False, 3600.0, 3600, EndingClass.CAPACITY),
        (False, 7200.0, 3600, EndingClass.CAPACITY),
        (False, 3599.0, 3600, EndingClass.USER_STOPPED),
        (False, 7200.0, None, EndingClass.USER_STOPPED),
        (True, 7200.0, 3600, EndingClass.USER_STOPPED),
    ],
    ids=["at-limit", "over-limit", "under-limit", "no-limit", "reached-training"],
)
def test_classify_stopped_pending_capacity(
    reached: bool, pending: float, limit: int | None, expected: EndingClass
) -> None:
    ending = Ending(
        status="Stopped",
        secondary_status="Stopped",
        reached_training=reached,
        pending_seconds=pending,
        max_pending_seconds=limit,
    )
    result = classify(ending)
    assert result.kind is expected
    if expected is EndingClass.CAPACITY:
        assert "MaxPendingTimeInSeconds" in result.reason


@pytest.mark.claim("`Stopped` with no recorded intent (a person stopped it) | CANCELLED")
@pytest.mark.claim("Intended: a stop without a sagewarden intent is treated as yours.")
@pytest.mark.parametrize(
    "secondary",
    ["Stopped", None, "Training", "something new"],
    ids=["Stopped", "no secondary status", "Training", "an unknown secondary status"],
)
def test_classify_stopped_without_intent_is_user_stopped(secondary: str | None) -> None:
    result = classify(Ending(status="Stopped", secondary_status=secondary, reached_training=True))
    assert result.kind is EndingClass.USER_STOPPED
    assert "user" in result.reason


# --- Failed: FailureReason tables -------------------------------------------------------------


@pytest.mark.parametrize("spell", SPELLING_FUNCS, ids=SPELLING_IDS)
@pytest.mark.parametrize(("label", "reason"), _cases(REASON_CAPACITY_EXAMPLES))
def test_classify_capacity_failure_reasons(label: str, reason: str, spell: Spelling) -> None:
    result = classify(_failed(reason=spell(reason), training_seconds=0.0))
    assert result.kind is EndingClass.CAPACITY
    assert result.reason.startswith(label)
    assert result.evidence == (spell(reason).strip(),)


@pytest.mark.claim(
    "`InternalServerError`; hardware texts (unhealthy instance, cluster repair exhausted); `AlgorithmError` whose log tail shows an NCCL watchdog or NCCL error, a lost rank, EFA/libfabric errors or an S3 SlowDown (transient)"
)
@pytest.mark.parametrize("spell", SPELLING_FUNCS, ids=SPELLING_IDS)
@pytest.mark.parametrize(("label", "reason"), _cases(REASON_INTERNAL_ERROR_EXAMPLES))
def test_classify_internal_server_error_reasons(label: str, reason: str, spell: Spelling) -> None:
    result = classify(_failed(reason=spell(reason)))
    assert result.kind is EndingClass.INFRASTRUCTURE
    assert result.reason.startswith(label)
    assert "FailureReason" in result.reason


@pytest.mark.claim(
    "`InternalServerError`; hardware texts (unhealthy instance, cluster repair exhausted); `AlgorithmError` whose log tail shows an NCCL watchdog or NCCL error, a lost rank, EFA/libfabric errors or an S3 SlowDown (transient)"
)
@pytest.mark.parametrize("spell", SPELLING_FUNCS, ids=SPELLING_IDS)
@pytest.mark.parametrize(("label", "reason"), _cases(REASON_HARDWARE_EXAMPLES))
def test_classify_hardware_failure_reasons(label: str, reason: str, spell: Spelling) -> None:
    result = classify(_failed(reason=spell(reason), training_seconds=TWO_DAYS))
    assert result.kind is EndingClass.INFRASTRUCTURE
    assert result.reason.startswith(label)


@pytest.mark.parametrize("spell", SPELLING_FUNCS, ids=SPELLING_IDS)
@pytest.mark.parametrize(("label", "reason"), _cases(REASON_CLIENT_ERROR_EXAMPLES))
def test_classify_client_error_failure_reasons(label: str, reason: str, spell: Spelling) -> None:
    result = classify(_failed(("KeyError: 'x'",), reason=spell(reason)))
    assert result.kind is EndingClass.CLIENT_ERROR
    assert result.reason.startswith(label)
    assert result.evidence == (spell(reason).strip(),)


@pytest.mark.claim(
    "an `AlgorithmError` with nothing recognisable, or a line a bug and a fault print alike: an illegal memory access, a segfault, a kill without memory evidence, a NaN loss, a store connect timeout, a connect abort, the model hub unreachable (a guess: the alert and `GET /runs/{id}` say what would change it)"
)
@pytest.mark.parametrize(("label", "reason"), _cases(REASON_ALGORITHM_ERROR_EXAMPLES))
def test_classify_algorithm_error_without_signature_is_unknown(label: str, reason: str) -> None:
    result = classify(_failed(("step 100 loss 2.31", "saving checkpoint"), reason=reason))
    assert result.kind is EndingClass.UNKNOWN
    assert result.reason.startswith(label)
    assert result.evidence == (reason.strip(),)


@pytest.mark.parametrize(
    "reason",
    [
        ALGO_REASON + '\nErrorMessage "ValueError: hardware acceleration unavailable"',
        'AlgorithmError: ErrorMessage "InternalServerError from my HTTP client"',
        'AlgorithmError: ErrorMessage "ClientError: bucket not found"',
        'AlgorithmError: ErrorMessage "CapacityError in my scheduler"',
    ],
    ids=[
        "hardware words in the user's message",
        "InternalServerError in the user's message",
        "ClientError in the user's message",
        "CapacityError in the user's message",
    ],
)
def test_classify_algorithm_error_body_is_not_read_as_sagemaker_verdict(reason: str) -> None:
    result = classify(_failed(reason=reason))
    assert result.kind is EndingClass.UNKNOWN


def test_classify_capacity_beats_internal_error_in_reason() -> None:
    result = classify(_failed(reason="CapacityError: retry later. InternalServerError"))
    assert result.kind is EndingClass.CAPACITY


def test_classify_hardware_beats_client_error_in_reason() -> None:
    result = classify(_failed(reason="ClientError: training stopped after a hardware fault"))
    assert result.kind is EndingClass.INFRASTRUCTURE


@pytest.mark.parametrize(
    "reason",
    [None, "", "   ", "Something unexpected happened"],
    ids=["no reason", "an empty reason", "a blank reason", "an unknown reason"],
)
def test_classify_failed_without_known_reason_reads_log_tail(reason: str | None) -> None:
    infra = classify(
        _failed(("RuntimeError: CUDA error: uncorrectable ECC error encountered",), reason=reason)
    )
    assert infra.kind is EndingClass.INFRASTRUCTURE
    nothing = classify(_failed(("epoch 3 done",), reason=reason))
    assert nothing.kind is EndingClass.UNKNOWN
    assert nothing.evidence == ((reason.strip(),) if reason and reason.strip() else ())


# --- Failed: log tail tables ------------------------------------------------------------------


@pytest.mark.claim(
    "`InternalServerError`; hardware texts (unhealthy instance, cluster repair exhausted); `AlgorithmError` whose log tail shows an NCCL watchdog or NCCL error, a lost rank, EFA/libfabric errors or an S3 SlowDown (transient)"
)
@pytest.mark.parametrize("spell", SPELLING_FUNCS, ids=SPELLING_IDS)
@pytest.mark.parametrize(("label", "line"), _cases(INFRA_LOG_EXAMPLES))
def test_classify_infrastructure_log_signatures(label: str, line: str, spell: Spelling) -> None:
    tail = (
        "step 41000 loss 1.92",
        spell(line),
        "sagemaker-training-toolkit ERROR Reporting training FAILURE",
    )
    ending = _failed(tail, training_seconds=TWO_DAYS)
    result = classify(ending)
    assert result.kind is EndingClass.INFRASTRUCTURE
    assert result.reason.startswith(label)
    assert "log tail" in result.reason
    assert _log_lines(result, ending) == (spell(line).strip(),)


@pytest.mark.claim(
    "`InternalServerError`; hardware texts (unhealthy instance, cluster repair exhausted); `AlgorithmError` whose log tail shows an NCCL watchdog or NCCL error, a lost rank, EFA/libfabric errors or an S3 SlowDown (transient)"
)
@pytest.mark.parametrize(("label", "line"), _cases(INFRA_LOG_EXAMPLES))
def test_classify_infrastructure_signature_inside_algorithm_error_reason(label: str, line: str) -> None:
    ending = _failed(reason=f'{ALGO_REASON}\nErrorMessage "{line}"')
    result = classify(ending)
    assert result.kind is EndingClass.INFRASTRUCTURE
    assert result.reason.startswith(label)
    assert "in FailureReason" in result.reason
    assert len(result.evidence) == 1
    assert ALGO_REASON.startswith(result.evidence[0].removesuffix("...")[:50])


@pytest.mark.claim(
    "a memory fault: CUDA out-of-memory, or host RAM (the OOM killer's words, a DataLoader worker killed, a kill while loading checkpoint shards or after a host's `MemoryUtilization` reached 95 %), unless `oom_is_user_error=false`"
)
@pytest.mark.claim("`oom_is_user_error` | true")
@pytest.mark.parametrize("oom_is_user_error", [True, False], ids=["oom as user error", "oom as unknown"])
@pytest.mark.parametrize("spell", SPELLING_FUNCS, ids=SPELLING_IDS)
@pytest.mark.parametrize(("label", "line"), _cases(OOM_EXAMPLES))
def test_classify_cuda_oom_follows_policy(
    label: str, line: str, spell: Spelling, oom_is_user_error: bool
) -> None:
    ending = _failed(("loading shards", spell(line)), training_seconds=TWO_DAYS)
    result = classify(ending, oom_is_user_error=oom_is_user_error)
    expected = EndingClass.USER_ERROR if oom_is_user_error else EndingClass.INFRASTRUCTURE
    assert result.kind is expected
    assert result.reason.startswith(label)
    assert ("user error" in result.reason) is oom_is_user_error
    assert _log_lines(result, ending) == (spell(line).strip(),)


@pytest.mark.claim(
    "whenever it shows, a deterministic failure (no echo of a peer's fault, so it wins over the collective errors its peers print)"
)
@pytest.mark.parametrize(
    "training_seconds", [0.0, 60.0, TWO_DAYS], ids=["at once", "after a minute", "after two days"]
)
@pytest.mark.parametrize("spell", SPELLING_FUNCS, ids=SPELLING_IDS)
@pytest.mark.parametrize(("label", "line"), _cases(CODE_BUG_ALWAYS_EXAMPLES))
def test_classify_code_bug_always_user_error(
    label: str, line: str, spell: Spelling, training_seconds: float
) -> None:
    ending = _failed(("Traceback (most recent call last):", spell(line)), training_seconds=training_seconds)
    result = classify(ending)
    assert result.kind is EndingClass.USER_ERROR
    assert result.reason.startswith(label)
    assert _log_lines(result, ending) == (spell(line).strip(),)


@pytest.mark.parametrize("spell", SPELLING_FUNCS, ids=SPELLING_IDS)
@pytest.mark.parametrize(("label", "line"), _cases(CODE_BUG_STARTUP_EXAMPLES))
def test_classify_code_bug_at_startup_is_user_error(label: str, line: str, spell: Spelling) -> None:
    ending = _failed(("Traceback (most recent call last):", spell(line)), training_seconds=30.0)
    result = classify(ending)
    assert result.kind is EndingClass.USER_ERROR
    assert result.reason.startswith(label)
    assert "start-up" in result.reason


@pytest.mark.parametrize(("label", "line"), _cases(CODE_BUG_STARTUP_EXAMPLES))
def test_classify_code_bug_late_is_unknown(label: str, line: str) -> None:
    ending = _failed(("Traceback (most recent call last):", line), training_seconds=TWO_DAYS)
    result = classify(ending)
    assert result.kind is EndingClass.UNKNOWN
    assert result.reason.startswith(label)
    assert "outside" in result.reason
    assert _log_lines(result, ending) == (line,)


@pytest.mark.parametrize(
    ("training_seconds", "window", "expected"),
    [
        (0.0, 900.0, EndingClass.USER_ERROR),
        (899.9, 900.0, EndingClass.USER_ERROR),
        (900.0, 900.0, EndingClass.UNKNOWN),
        (TWO_DAYS, 900.0, EndingClass.UNKNOWN),
        (1800.0, 3600.0, EndingClass.USER_ERROR),
        (60.0, 0.0, EndingClass.UNKNOWN),
    ],
    ids=[
        "at once",
        "just inside the window",
        "at the window's end",
        "after two days",
        "inside a longer window",
        "no window",
    ],
)
def test_classify_keyerror_early_vs_late(
    training_seconds: float, window: float, expected: EndingClass
) -> None:
    ending = _failed(("KeyError: 'labels'",), training_seconds=training_seconds)
    assert classify(ending, startup_window_seconds=window).kind is expected


def test_classify_syntax_error_late_is_still_user_error() -> None:
    ending = _failed(("SyntaxError: invalid syntax",), training_seconds=TWO_DAYS)
    assert classify(ending).kind is EndingClass.USER_ERROR


def test_classify_code_bug_in_algorithm_error_message() -> None:
    reason = (
        "AlgorithmError: ExecuteUserScriptError:\nExitCode 1\n"
        "ErrorMessage \"ModuleNotFoundError: No module named 'x'\""
    )
    result = classify(_failed(reason=reason))
    assert result.kind is EndingClass.USER_ERROR
    assert "ModuleNotFoundError in FailureReason" in result.reason


# --- Precedence inside the log tail -------------------------------------------------------------


TRANSIENT_LINES = [
    texts[0] for label, texts in INFRA_LOG_EXAMPLES.items() if label not in HARDWARE_EXAMPLE_LABELS
]
HARDWARE_LINES = [texts[0] for label, texts in INFRA_LOG_EXAMPLES.items() if label in HARDWARE_EXAMPLE_LABELS]
TRANSIENT_IDS = [
    f"an echo of {label}" for label in INFRA_LOG_EXAMPLES if label not in HARDWARE_EXAMPLE_LABELS
]
HARDWARE_IDS = [label for label in INFRA_LOG_EXAMPLES if label in HARDWARE_EXAMPLE_LABELS]


@pytest.mark.parametrize("infra_line", TRANSIENT_LINES, ids=TRANSIENT_IDS)
def test_classify_infrastructure_beats_a_startup_code_bug_in_same_tail(infra_line: str) -> None:
    # a KeyError or an AttributeError after a collective failed is its consequence, not a bug
    tail = (
        "KeyError: 'rank_3_state'",
        infra_line,
        "AttributeError: 'NoneType' object has no attribute 'wait'",
    )
    result = classify(_failed(tail, training_seconds=10.0))
    assert result.kind is EndingClass.INFRASTRUCTURE and not result.hardware
    assert infra_line in result.evidence


@pytest.mark.claim(
    "whenever it shows, a deterministic failure (no echo of a peer's fault, so it wins over the collective errors its peers print)"
)
@pytest.mark.parametrize("echo", TRANSIENT_LINES, ids=TRANSIENT_IDS)
@pytest.mark.parametrize(
    ("label", "line"), _cases(DETERMINISTIC_LOG_EXAMPLES) + _cases(CODE_BUG_ALWAYS_EXAMPLES)[:2]
)
def test_classify_a_deterministic_failure_beats_the_collective_echo_of_its_peers(
    label: str, line: str, echo: str
) -> None:
    # one rank cannot save (or load, or start); the others time out waiting for it
    result = classify(_failed((line, echo, echo), training_seconds=TWO_DAYS))
    assert result.kind is EndingClass.USER_ERROR
    assert result.reason.startswith(label) and "deterministic" in result.reason
    assert result.evidence[1] == line


@pytest.mark.parametrize("hardware_line", HARDWARE_LINES, ids=HARDWARE_IDS)
@pytest.mark.parametrize(
    "other",
    [
        "OSError: [Errno 28] No space left on device",
        "torch.OutOfMemoryError: CUDA out of memory.",
        "RuntimeError: CUDA error: device-side assert triggered",
        "segmentation fault (core dumped)",
        "[Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9)",
    ],
    ids=[
        "over a full disk",
        "over a cuda oom",
        "over a device-side assert",
        "over a segfault",
        "over a collective timeout",
    ],
)
def test_classify_a_hardware_line_beats_everything_else_in_the_tail(hardware_line: str, other: str) -> None:
    result = classify(_failed((other, hardware_line)))
    assert result.kind is EndingClass.INFRASTRUCTURE and result.hardware
    assert "hardware" in result.reason and hardware_line in result.evidence


@pytest.mark.parametrize("oom_is_user_error", [True, False], ids=["oom as user error", "oom as unknown"])
def test_classify_oom_beats_a_collective_echo(oom_is_user_error: bool) -> None:
    tail = ("CUDA out of memory. Tried to allocate 1 GiB", "NCCL communicator was aborted on rank 1")
    result = classify(_failed(tail), oom_is_user_error=oom_is_user_error)
    assert result.kind is (EndingClass.USER_ERROR if oom_is_user_error else EndingClass.INFRASTRUCTURE)
    assert result.reason.startswith("CUDA out of memory")


@pytest.mark.parametrize("oom_is_user_error", [True, False], ids=["oom as user error", "oom as unknown"])
def test_classify_oom_beats_code_bug(oom_is_user_error: bool) -> None:
    tail = ("KeyError: 'x'", "torch.OutOfMemoryError: CUDA out of memory.")
    result = classify(_failed(tail), oom_is_user_error=oom_is_user_error)
    assert result.reason.startswith("CUDA out of memory")
    assert result.kind is (EndingClass.USER_ERROR if oom_is_user_error else EndingClass.INFRASTRUCTURE)


def test_classify_reports_several_infra_signatures_in_one_line() -> None:
    tail = (
        "[Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9)",
        "RuntimeError: NCCL communicator was aborted on rank 3.",
    )
    result = classify(_failed(tail))
    assert result.reason == (
        "NCCL watchdog timeout (also: NCCL communicator aborted) in log tail (infrastructure)"
    )
    assert result.evidence[1:] == tail


# --- Deterministic failures, memory faults and endings resumed once to confirm ------------------


@pytest.mark.claim(
    "whenever it shows, a deterministic failure (no echo of a peer's fault, so it wins over the collective errors its peers print)"
)
@pytest.mark.parametrize("spell", SPELLING_FUNCS, ids=SPELLING_IDS)
@pytest.mark.parametrize(("label", "line"), _cases(DETERMINISTIC_LOG_EXAMPLES))
def test_classify_deterministic_log_signatures_fail_at_once(label: str, line: str, spell: Spelling) -> None:
    ending = _failed(("step 41000 loss 1.92", spell(line)), training_seconds=TWO_DAYS)
    result = classify(ending)
    assert result.kind is EndingClass.USER_ERROR
    assert result.reason.startswith(label)
    assert _log_lines(result, ending) == (spell(line).strip(),)
    assert (result.advice is not None) is (label == "disk full")


@pytest.mark.claim(
    "FAILED at once, with the matched lines in the alert and advice for a full disk (`VolumeSizeInGB`, checkpoint size) or host RAM (loader workers, shard loading, a larger instance)"
)
def test_classify_a_full_disk_advises_the_volume_size() -> None:
    result = classify(_failed(("OSError: [Errno 28] No space left on device",)))
    assert result.advice is not None and "VolumeSizeInGB" in result.advice


@pytest.mark.claim(
    "a memory fault: CUDA out-of-memory, or host RAM (the OOM killer's words, a DataLoader worker killed, a kill while loading checkpoint shards or after a host's `MemoryUtilization` reached 95 %), unless `oom_is_user_error=false`"
)
@pytest.mark.parametrize("oom_is_user_error", [True, False], ids=["oom as user error", "oom as unknown"])
@pytest.mark.parametrize(("label", "line"), _cases(HOST_MEMORY_EXAMPLES))
def test_classify_host_memory_is_a_memory_fault_never_infrastructure(
    label: str, line: str, oom_is_user_error: bool
) -> None:
    result = classify(_failed(("epoch 3", line)), oom_is_user_error=oom_is_user_error)
    assert result.kind is (EndingClass.USER_ERROR if oom_is_user_error else EndingClass.UNKNOWN)
    assert result.reason.startswith(label) and "host memory fault" in result.reason
    assert result.advice is not None and "num_workers" in result.advice


KILL = "torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 (pid: 31631)"


def test_classify_a_kill_while_loading_checkpoint_shards_is_host_memory() -> None:
    tail = ("Loading checkpoint shards:  57% 4/7 [00:40<00:29,  9.96s/it]", KILL)
    result = classify(_failed(tail))
    assert result.kind is EndingClass.USER_ERROR and "host memory fault" in result.reason
    assert result.evidence[1:] == tail


@pytest.mark.claim(
    "a memory fault: CUDA out-of-memory, or host RAM (the OOM killer's words, a DataLoader worker killed, a kill while loading checkpoint shards or after a host's `MemoryUtilization` reached 95 %), unless `oom_is_user_error=false`"
)
@pytest.mark.parametrize(
    ("memory", "kind"),
    [
        (("algo-2", 99.4), EndingClass.USER_ERROR),
        (("algo-2", 95.0), EndingClass.USER_ERROR),
        (("algo-2", 61.0), EndingClass.UNKNOWN),
        (None, EndingClass.UNKNOWN),
    ],
    ids=["a host at 99 % memory", "a host at 95 % memory", "a host at 61 % memory", "no memory reading"],
)
def test_classify_a_kill_reads_the_hosts_memory(memory: tuple[str, float] | None, kind: EndingClass) -> None:
    ending = dataclasses.replace(_failed((KILL,)), host_memory=memory)
    result = classify(ending)
    assert result.kind is kind and not result.hardware
    if kind is EndingClass.USER_ERROR:
        assert "MemoryUtilization of algo-2 reached" in result.evidence[-1]
    elif memory is None:
        assert result.guess is not None and "could not be read" in result.guess
    else:
        assert result.guess is not None and "61 %" in result.guess


@pytest.mark.claim(
    "an `AlgorithmError` with nothing recognisable, or a line a bug and a fault print alike: an illegal memory access, a segfault, a kill without memory evidence, a NaN loss, a store connect timeout, a connect abort, the model hub unreachable (a guess: the alert and `GET /runs/{id}` say what would change it)"
)
@pytest.mark.parametrize("spell", SPELLING_FUNCS, ids=SPELLING_IDS)
@pytest.mark.parametrize(("label", "line"), _cases(CONFIRM_LOG_EXAMPLES))
def test_classify_confirm_signatures_are_a_named_guess(label: str, line: str, spell: Spelling) -> None:
    ending = _failed(("step 41000 loss 1.92", spell(line)), training_seconds=TWO_DAYS)
    result = classify(ending)
    assert result.kind is EndingClass.UNKNOWN and result.confirmable
    assert result.reason.startswith(label) and "resumed once" in result.reason
    assert result.guess
    assert _log_lines(result, ending) == (spell(line).strip(),)


@pytest.mark.parametrize("echo", TRANSIENT_LINES[:3], ids=TRANSIENT_IDS[:3])
def test_classify_a_confirm_signature_beats_the_collective_echo(echo: str) -> None:
    result = classify(_failed((echo, "segmentation fault (core dumped)", echo)))
    assert result.kind is EndingClass.UNKNOWN and result.reason.startswith("segmentation fault")


def test_classify_a_hub_failure_in_a_network_isolated_job_is_a_configuration_error() -> None:
    line = CONFIRM_LOG_EXAMPLES["model hub unreachable and no local copy"][0]
    assert classify(_failed((line,))).kind is EndingClass.UNKNOWN
    isolated = classify(dataclasses.replace(_failed((line,)), network_isolated=True))
    assert isolated.kind is EndingClass.USER_ERROR and "EnableNetworkIsolation" in isolated.reason


@pytest.mark.claim(
    "an `AlgorithmError` with nothing recognisable, or a line a bug and a fault print alike: an illegal memory access, a segfault, a kill without memory evidence, a NaN loss, a store connect timeout, a connect abort, the model hub unreachable (a guess: the alert and `GET /runs/{id}` say what would change it)"
)
def test_classify_every_unknown_is_a_guess_that_says_what_would_change_it() -> None:
    result = classify(_failed(("epoch 3 done",)))
    assert result.kind is EndingClass.UNKNOWN and result.confirmable
    assert result.guess and "same step" in result.guess


@pytest.mark.claim(
    "`InternalServerError`; hardware texts (unhealthy instance, cluster repair exhausted); `AlgorithmError` whose log tail shows an NCCL watchdog or NCCL error, a lost rank, EFA/libfabric errors or an S3 SlowDown (transient)"
)
@pytest.mark.parametrize("line", TRANSIENT_LINES, ids=TRANSIENT_IDS)
def test_classify_transient_faults_are_not_confirmable(line: str) -> None:
    result = classify(_failed((line,)))
    assert result.kind is EndingClass.INFRASTRUCTURE and not result.confirmable and result.guess is None


@pytest.mark.parametrize(
    "line",
    [
        "requests.exceptions.ConnectionError: ('Connection aborted.', Connection reset by peer)",
        "loading /data/oxidation_corpus.jsonl",
        "metric keyerror_count=0 typeerror_rate=0.0",
        "exitcode: -90 is not a thing",
        "Saving model checkpoint to /opt/ml/checkpoints/checkpoint-500",
        "NCCL INFO NET/OFI Selected Provider is efa",
    ],
    ids=[
        "a connection reset by a web client",
        "xid inside a word of a file name",
        "metric names holding error words",
        "an exit code that only starts like a kill",
        "a checkpoint save line",
        "nccl choosing efa",
    ],
)
def test_classify_near_misses_do_not_match(line: str) -> None:
    result = classify(_failed((line,)))
    assert result.kind is EndingClass.UNKNOWN
    assert result.evidence == (ALGO_REASON,)


# --- Evidence -----------------------------------------------------------------------------------


def test_classify_evidence_caps_log_lines_at_five_in_tail_order() -> None:
    tail = tuple(
        f"[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7)" for r in range(20)
    )
    ending = _failed(tail)
    result = classify(ending)
    assert result.evidence[0] == ALGO_REASON
    assert _log_lines(result, ending) == tail[:5]


def test_classify_evidence_deduplicates_identical_lines() -> None:
    line = "RuntimeError: NCCL error in: NCCLUtils.hpp:219, unhandled system error"
    ending = _failed((line, line, f"  {line}  ", line.upper(), "ok"))
    result = classify(ending)
    assert _log_lines(result, ending) == (line,)


def test_classify_evidence_trims_long_texts() -> None:
    reason = "AlgorithmError: " + "x" * 5000
    line = "ncclInternalError: " + "y" * 5000
    result = classify(_failed((line,), reason=reason))
    assert result.kind is EndingClass.INFRASTRUCTURE
    assert all(len(item) <= 300 for item in result.evidence)
    assert result.evidence[0].startswith("AlgorithmError: xxx")
    assert result.evidence[0].endswith("...")
    assert line.startswith(result.evidence[1].removesuffix("..."))


def test_classify_unmatched_lines_are_not_evidence() -> None:
    tail = ("epoch 1", "Xid 79 on GPU 3", "epoch 2")
    ending = _failed(tail)
    assert _log_lines(classify(ending), ending) == ("Xid 79 on GPU 3",)


# --- Other statuses -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "status",
    [None, "InProgress", "Stopping", "", "weird"],
    ids=["no status", "InProgress", "Stopping", "an empty status", "an unknown status"],
)
def test_classify_non_terminal_or_missing_status_is_unknown(status: str | None) -> None:
    ending = Ending(status=status, failure_reason="CapacityError: x", log_tail=("ncclInternalError",))
    result = classify(ending)
    assert result.kind is EndingClass.UNKNOWN
    assert "no terminal status" in result.reason


def test_classify_failed_status_is_case_and_space_insensitive() -> None:
    result = classify(Ending(status=" FAILED\n", failure_reason="CapacityError: no capacity"))
    assert result.kind is EndingClass.CAPACITY


# --- Property tests -----------------------------------------------------------------------------

ALL_LOG_EXAMPLES = tuple(
    text
    for table in (
        INFRA_LOG_EXAMPLES,
        DETERMINISTIC_LOG_EXAMPLES,
        HOST_MEMORY_EXAMPLES,
        CONFIRM_LOG_EXAMPLES,
        OOM_EXAMPLES,
        CODE_BUG_ALWAYS_EXAMPLES,
        CODE_BUG_STARTUP_EXAMPLES,
    )
    for texts in table.values()
    for text in texts
)
ALL_REASON_EXAMPLES = tuple(
    text
    for table in (
        REASON_CAPACITY_EXAMPLES,
        REASON_INTERNAL_ERROR_EXAMPLES,
        REASON_HARDWARE_EXAMPLES,
        REASON_CLIENT_ERROR_EXAMPLES,
        REASON_ALGORITHM_ERROR_EXAMPLES,
    )
    for texts in table.values()
    for text in texts
)
ALL_CODES = tuple(
    code
    for table in (API_QUOTA_CODE_EXAMPLES, API_THROTTLE_CODE_EXAMPLES, API_CLIENT_ERROR_EXAMPLES)
    for codes in table.values()
    for code in codes
)

_lines = st.one_of(
    st.text(max_size=200),
    st.sampled_from(ALL_LOG_EXAMPLES),
    st.builds(
        lambda a, b, c: a + b + c,
        st.text(max_size=30),
        st.sampled_from(ALL_LOG_EXAMPLES),
        st.text(max_size=30),
    ),
)
_reasons = st.one_of(
    st.none(),
    st.text(max_size=400),
    st.sampled_from(ALL_REASON_EXAMPLES),
    st.builds(
        lambda r, line: f"{r}\n{line}",
        st.sampled_from(ALL_REASON_EXAMPLES),
        st.sampled_from(ALL_LOG_EXAMPLES),
    ),
)
_statuses = st.one_of(
    st.none(),
    st.sampled_from(["Completed", "Failed", "Stopped", "InProgress", "Stopping"]),
    st.text(max_size=20),
)
_secondaries = st.one_of(
    st.none(),
    st.sampled_from(
        ["MaxRuntimeExceeded", "Interrupted", "MaxWaitTimeExceeded", "Stopped", "Failed", "Training"]
    ),
    st.text(max_size=30),
)
_floats = st.floats(allow_nan=True, allow_infinity=True)

_endings = st.builds(
    Ending,
    status=_statuses,
    secondary_status=_secondaries,
    failure_reason=_reasons,
    api_error_code=st.one_of(
        st.none(), st.none(), st.just(""), st.sampled_from(ALL_CODES), st.text(max_size=30)
    ),
    api_error_message=st.one_of(
        st.none(),
        st.none(),
        st.sampled_from([QUOTA_P3, QUOTA_ALL_JOBS, "Rate exceeded"]),
        st.text(max_size=300),
    ),
    log_tail=st.lists(_lines, max_size=12).map(tuple),
    stop_intent=st.one_of(st.none(), st.text(max_size=40)),
    reached_training=st.booleans(),
    training_seconds=_floats,
    pending_seconds=_floats,
    max_pending_seconds=st.one_of(st.none(), st.integers(min_value=-(10**9), max_value=10**9)),
)


@settings(max_examples=300, deadline=None)
@given(ending=_endings, oom_is_user_error=st.booleans(), window=_floats)
def test_classify_never_raises_on_arbitrary_input(
    ending: Ending, oom_is_user_error: bool, window: float
) -> None:
    result = classify(ending, oom_is_user_error=oom_is_user_error, startup_window_seconds=window)
    assert isinstance(result, Classification)
    assert isinstance(result.kind, EndingClass)
    assert result.reason.strip()
    assert "\n" not in result.reason
    assert isinstance(result.evidence, tuple)
    assert all(isinstance(item, str) and len(item) <= 300 for item in result.evidence)
    if result.quota is not None:
        assert result.kind is EndingClass.QUOTA


@settings(max_examples=300, deadline=None)
@given(
    reason=_reasons,
    tail=st.lists(_lines, max_size=15).map(tuple),
    training_seconds=_floats,
    oom_is_user_error=st.booleans(),
)
def test_classify_evidence_log_lines_come_from_the_tail(
    reason: str | None, tail: tuple[str, ...], training_seconds: float, oom_is_user_error: bool
) -> None:
    ending = _failed(tail, reason=reason, training_seconds=training_seconds)
    result = classify(ending, oom_is_user_error=oom_is_user_error)
    items = list(result.evidence)
    if reason is not None and reason.strip():
        assert items, "the FailureReason is always evidence"
        assert items.pop(0).removesuffix("...") in reason
    assert len(items) <= 5
    for item in items:
        assert any(item.removesuffix("...") in line for line in tail)


def _respell(text: str, rnd: random.Random) -> str:
    """Flip the case of ASCII letters at random and widen every space into a random whitespace run."""
    out: list[str] = []
    for ch in text:
        if ch == " ":
            out.append("".join(rnd.choice(" \t\n\r\x0b\x0c") for _ in range(rnd.randint(1, 4))))
        elif ch.isascii() and ch.isalpha():
            out.append(ch.upper() if rnd.random() < 0.5 else ch.lower())
        else:
            out.append(ch)
    return "".join(out)


@pytest.mark.claim(
    "It matches reasons and log lines by case- and whitespace-insensitive substring, never by whole string, and its tables are plain data you can extend."
)
@settings(max_examples=300, deadline=None)
@given(line=st.sampled_from(ALL_LOG_EXAMPLES), rnd=st.randoms(use_true_random=False), seconds=_floats)
def test_classify_log_matching_ignores_case_and_whitespace_runs(
    line: str, rnd: random.Random, seconds: float
) -> None:
    baseline = classify(_failed(("noise", line), training_seconds=seconds))
    respelled = classify(_failed(("noise", _respell(line, rnd)), training_seconds=seconds))
    assert "no known signature" not in baseline.reason, "the example must match a signature"
    assert (respelled.kind, respelled.reason) == (baseline.kind, baseline.reason)


@pytest.mark.claim(
    "It matches reasons and log lines by case- and whitespace-insensitive substring, never by whole string, and its tables are plain data you can extend."
)
@settings(max_examples=300, deadline=None)
@given(reason=st.sampled_from(ALL_REASON_EXAMPLES), rnd=st.randoms(use_true_random=False))
def test_classify_reason_matching_ignores_case_and_whitespace_runs(reason: str, rnd: random.Random) -> None:
    baseline = classify(_failed(reason=reason))
    respelled = classify(_failed(reason=_respell(reason, rnd)))
    assert (respelled.kind, respelled.reason) == (baseline.kind, baseline.reason)


@settings(max_examples=200, deadline=None)
@given(message=st.sampled_from([QUOTA_P3, QUOTA_ALL_JOBS]), rnd=st.randoms(use_true_random=False))
def test_classify_quota_parse_ignores_case_and_whitespace_runs(message: str, rnd: random.Random) -> None:
    baseline = parse_quota_message(message)
    respelled = parse_quota_message(_respell(message, rnd))
    assert baseline is not None
    assert respelled is not None
    assert respelled.quota_name.casefold() == baseline.quota_name.casefold()
    assert (respelled.limit, respelled.used, respelled.delta) == (
        baseline.limit,
        baseline.used,
        baseline.delta,
    )


@settings(max_examples=200, deadline=None)
@given(code=st.sampled_from(ALL_CODES), rnd=st.randoms(use_true_random=False))
def test_classify_api_code_matching_ignores_case(code: str, rnd: random.Random) -> None:
    baseline = classify(Ending(api_error_code=code, api_error_message="m"))
    respelled = classify(Ending(api_error_code=_respell(code, rnd), api_error_message="m"))
    assert respelled.kind is baseline.kind
