"""The classifier's signature tables: which texts mean which ending.

Every signature is a ``(pattern, label)`` row: a regular expression searched anywhere in the
case-folded, whitespace-collapsed text (a prefix or substring match, never a whole-string
comparison) and a human label for alerts. AWS documents the wording of these messages as subject
to change, so the tables match short, stable fragments only. The tables are plain module-level
data: add a row to extend one; patterns are written in lower case with single spaces, and gaps
between fragments are bounded (``.{0,200}``, never ``.*``) so a huge log line stays cheap to
scan. `sagewarden.domain.classifier` uses them, in the order its docstring describes.

This module is pure data: standard library only.
"""

from __future__ import annotations

from typing import TypeAlias

__all__ = [
    "API_CLIENT_ERROR_SIGNATURES",
    "API_QUOTA_CODE_SIGNATURES",
    "API_QUOTA_MESSAGE_SIGNATURES",
    "API_THROTTLE_CODE_SIGNATURES",
    "API_THROTTLE_MESSAGE_SIGNATURES",
    "CODE_BUG_ALWAYS_SIGNATURES",
    "CODE_BUG_STARTUP_SIGNATURES",
    "HARDWARE_LOG_LABELS",
    "INFRA_LOG_SIGNATURES",
    "OOM_SIGNATURES",
    "REASON_ALGORITHM_ERROR_SIGNATURES",
    "REASON_CAPACITY_SIGNATURES",
    "REASON_CLIENT_ERROR_SIGNATURES",
    "REASON_HARDWARE_SIGNATURES",
    "REASON_INTERNAL_ERROR_SIGNATURES",
    "Signature",
]

# A signature: (regular expression searched in normalised text, human label for alerts).
Signature: TypeAlias = tuple[str, str]

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

# Labels of INFRA_LOG_SIGNATURES that mean a GPU or its host failed (the job restarts cold).
HARDWARE_LOG_LABELS = frozenset(
    {
        "uncorrectable ECC error",
        "GPU ECC error",
        "NVIDIA Xid error",
        "GPU is lost",
        "GPU fell off the bus",
    }
)

INFRA_LOG_SIGNATURES: tuple[Signature, ...] = (
    (r"watchdog caught collective operation timeout", "NCCL watchdog timeout"),
    (r"ncclsystemerror", "ncclSystemError"),
    (r"ncclinternalerror", "ncclInternalError"),
    (r"ncclremoteerror", "ncclRemoteError"),
    (r"nccl communicator was aborted", "NCCL communicator aborted"),
    (r"\bnccl error\b", "NCCL error"),
    (r"uncorrectable ecc error|cudaerroreccuncorrectable", "uncorrectable ECC error"),
    (r"\becc errors?\b", "GPU ECC error"),
    (r"\bxid\b", "NVIDIA Xid error"),
    (r"unspecified launch failure", "CUDA unspecified launch failure"),
    (r"\bgpu is lost\b", "GPU is lost"),
    (r"\b(?:fell|fallen) off the bus\b", "GPU fell off the bus"),
    (
        r"^(?=.*connection (?:reset|closed) by peer)(?=.*(?:nccl|gloo|c10d|tcpstore|collective"
        r"|distributed|\brank\b|pair\.cc))",
        "connection reset by peer in a collective",
    ),
    (r"tcpstore", "TCPStore failure"),
    (r"rendezvous ?timeout", "rendezvous timeout"),
    (
        r"\branks? \d+(?:(?:, ?| and )\d+)* (?:has |have |is |are )?(?:failed|dead|died|crashed)",
        "rank failed",
    ),
    (r"\branks? (?:are|is) dead\b|\bdead ranks?\b", "dead rank"),
    (r"\bexitcode ?:? ?-9\b", "worker killed (exitcode -9)"),
    (r"signals\.sigkill", "worker killed (SIGKILL)"),
    (r"\blibfabric\b.{0,200}(?:error|fail)", "libfabric error"),
    (r"\bnet/ofi\b.{0,200}(?:error|fail)", "aws-ofi-nccl error"),
    (r"\befa\b.{0,200}(?:error|fail)|(?:error|fail).{0,200}\befa\b", "EFA error"),
)

OOM_SIGNATURES: tuple[Signature, ...] = (
    (r"cuda out of memory", "CUDA out of memory"),
    (r"outofmemoryerror", "OutOfMemoryError"),
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
)
