"""Pure classification of how a SageMaker training attempt ended.

`classify` turns everything known about one attempt (terminal status, SecondaryStatus,
FailureReason, a synchronous CreateTrainingJob error, the tail of the job's logs and the
supervisor's own recorded stop intent) into one `EndingClass`, a readable reason line for an
alert and the evidence it rests on.

Matching rules: every text is case-folded and its whitespace runs collapsed to one space
before matching, and every signature is a regular expression searched anywhere in that
normalised text (a prefix or substring match, never a whole-string comparison). AWS documents
the wording of these messages as subject to change, so the tables below match short,
stable fragments only. The signature tables are plain module-level data: add a
``(pattern, label)`` row to extend one; patterns are written in lower case with single spaces,
and gaps between fragments are bounded (``.{0,200}``, never ``.*``) so a huge log line stays
cheap to scan.

This module is pure: standard library only, no clock, no environment, no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
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
    "Classification",
    "Ending",
    "EndingClass",
    "QuotaInfo",
    "Signature",
    "classify",
    "parse_quota_message",
]

# A signature: (regular expression searched in normalised text, human label for alerts).
Signature: TypeAlias = tuple[str, str]

EVIDENCE_TEXT_LIMIT = 300
"""Evidence texts (FailureReason, API message, log lines) are cut to about this many characters."""

MAX_EVIDENCE_LOG_LINES = 5


class EndingClass(StrEnum):
    """What kind of ending an attempt had; decides what the supervisor does next."""

    SUCCEEDED = "SUCCEEDED"
    INFRASTRUCTURE = "INFRASTRUCTURE"
    SPOT_INTERRUPTED = "SPOT_INTERRUPTED"
    USER_ERROR = "USER_ERROR"
    UNKNOWN = "UNKNOWN"
    CAPACITY = "CAPACITY"
    QUOTA = "QUOTA"
    THROTTLED = "THROTTLED"
    SEGMENT_DONE = "SEGMENT_DONE"
    SUPERVISOR_STOP = "SUPERVISOR_STOP"
    USER_STOPPED = "USER_STOPPED"
    CLIENT_ERROR = "CLIENT_ERROR"


@dataclass(frozen=True)
class QuotaInfo:
    """A parsed ResourceLimitExceeded message."""

    quota_name: str
    limit: int
    used: int
    delta: int

    @property
    def can_ever_fit(self) -> bool:
        """False when the request alone is larger than the quota: only a quota increase helps."""
        return self.delta <= self.limit


@dataclass(frozen=True)
class Ending:
    """Everything known about how an attempt ended (or why it could not start)."""

    status: str | None = None
    secondary_status: str | None = None
    failure_reason: str | None = None
    api_error_code: str | None = None
    api_error_message: str | None = None
    log_tail: tuple[str, ...] = ()
    stop_intent: str | None = None
    reached_training: bool = False
    training_seconds: float = 0.0
    pending_seconds: float = 0.0
    max_pending_seconds: int | None = None


@dataclass(frozen=True)
class Classification:
    """The verdict: a class, one readable line for humans, and the texts it rests on."""

    kind: EndingClass
    reason: str
    evidence: tuple[str, ...]
    quota: QuotaInfo | None = None
    hardware: bool = False  # an instance or GPU failed: restart cold, never on a warm pool


# --- Signature tables -------------------------------------------------------------------------
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


# --- Matching machinery -----------------------------------------------------------------------

_Compiled: TypeAlias = tuple[tuple[re.Pattern[str], str], ...]


def _compile(table: Iterable[Signature]) -> _Compiled:
    return tuple((re.compile(pattern, re.IGNORECASE | re.DOTALL), label) for pattern, label in table)


_API_QUOTA_CODES = _compile(API_QUOTA_CODE_SIGNATURES)
_API_THROTTLE_CODES = _compile(API_THROTTLE_CODE_SIGNATURES)
_API_THROTTLE_MESSAGES = _compile(API_THROTTLE_MESSAGE_SIGNATURES)
_API_QUOTA_MESSAGES = _compile(API_QUOTA_MESSAGE_SIGNATURES)
_API_CLIENT_ERRORS = _compile(API_CLIENT_ERROR_SIGNATURES)
_REASON_CAPACITY = _compile(REASON_CAPACITY_SIGNATURES)
_REASON_INTERNAL = _compile(REASON_INTERNAL_ERROR_SIGNATURES)
_REASON_HARDWARE = _compile(REASON_HARDWARE_SIGNATURES)
_REASON_CLIENT = _compile(REASON_CLIENT_ERROR_SIGNATURES)
_REASON_ALGORITHM = _compile(REASON_ALGORITHM_ERROR_SIGNATURES)
_INFRA = _compile(INFRA_LOG_SIGNATURES)
_OOM = _compile(OOM_SIGNATURES)
_CODE_ALWAYS = _compile(CODE_BUG_ALWAYS_SIGNATURES)
_CODE_STARTUP = _compile(CODE_BUG_STARTUP_SIGNATURES)


def _normalise(text: str) -> str:
    """Case-fold and collapse every whitespace run (newlines, tabs, doubled spaces) to one space."""
    return " ".join(text.split()).casefold()


def _first_label(table: _Compiled, normalised: str) -> str | None:
    for pattern, label in table:
        if pattern.search(normalised):
            return label
    return None


def _trim(text: str, limit: int = EVIDENCE_TEXT_LIMIT) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[: limit - 3] + "..."


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return f"{seconds} s"
    if abs(seconds) < 120:
        return f"{seconds:.0f} s"
    if abs(seconds) < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if abs(seconds) < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


@dataclass(frozen=True)
class _Text:
    original: str
    normalised: str
    from_reason: bool


@dataclass(frozen=True)
class _Hits:
    """Which labels of one table matched, in table order, and the texts they matched in."""

    labels: tuple[str, ...]
    texts: tuple[_Text, ...]

    def __bool__(self) -> bool:
        return bool(self.labels)

    @property
    def in_reason(self) -> bool:
        return any(t.from_reason for t in self.texts)

    @property
    def in_logs(self) -> bool:
        return any(not t.from_reason for t in self.texts)


def _scan(table: _Compiled, texts: Sequence[_Text]) -> _Hits:
    """Match each text against the table; a text counts once, under its first matching row."""
    hits: list[tuple[int, str, int]] = []
    for index, text in enumerate(texts):
        for priority, (pattern, label) in enumerate(table):
            if pattern.search(text.normalised):
                hits.append((priority, label, index))
                break
    labels: list[str] = []
    for _, label, _ in sorted(hits):
        if label not in labels:
            labels.append(label)
    return _Hits(tuple(labels), tuple(texts[i] for i in sorted({index for _, _, index in hits})))


def _where(hits: _Hits) -> str:
    if hits.in_reason and hits.in_logs:
        return "FailureReason and log tail"
    if hits.in_reason:
        return "FailureReason"
    return "log tail"


def _what(hits: _Hits) -> str:
    first, others = hits.labels[0], hits.labels[1:]
    if not others:
        return first
    return f"{first} (also: {', '.join(others)})"


def _evidence(reason: str | None, hits: Iterable[_Text] = ()) -> tuple[str, ...]:
    """The FailureReason (if any) then up to five distinct matched log lines, in tail order."""
    items: list[str] = []
    if reason is not None and reason.strip():
        items.append(_trim(reason))
    seen: set[str] = set()
    lines = 0
    for text in hits:
        if text.from_reason or lines >= MAX_EVIDENCE_LOG_LINES:
            continue
        if text.normalised in seen or not text.normalised:
            continue
        seen.add(text.normalised)
        items.append(_trim(text.original))
        lines += 1
    return tuple(items)


# --- Quota messages ---------------------------------------------------------------------------

_QUOTE = "['\"\u2018\u2019\u201c\u201d]"
_UNIT = r"(?: ?instances?\b)?"
_QUOTA_RE = re.compile(
    rf"limit ?{_QUOTE}(?P<name>[^'\"\u2018\u2019\u201c\u201d]+){_QUOTE}"
    rf" ?is ?(?P<limit>\d[\d,]*){_UNIT}"
    rf".{{0,120}}?current utili[sz]ation of ?(?P<used>\d[\d,]*){_UNIT}"
    rf".{{0,120}}?request delta of ?(?P<delta>\d[\d,]*){_UNIT}",
    re.IGNORECASE | re.DOTALL,
)


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def parse_quota_message(message: str) -> QuotaInfo | None:
    """Parse a ResourceLimitExceeded message into its quota name, limit, usage and request delta.

    Tolerates case, extra whitespace, singular "Instance" and missing units. Returns None when
    the message does not carry all four values.
    """
    match = _QUOTA_RE.search(" ".join(message.split()))
    if match is None:
        return None
    name = match.group("name").strip()
    if not name:
        return None
    return QuotaInfo(
        quota_name=name,
        limit=_int(match.group("limit")),
        used=_int(match.group("used")),
        delta=_int(match.group("delta")),
    )


# --- Classification ---------------------------------------------------------------------------


def _blank(text: str | None) -> bool:
    return text is None or not text.strip()


def _classify_api_error(code: str | None, message: str | None) -> Classification:
    code_text = "" if code is None else "".join(code.split())
    message_text = "" if message is None else message
    norm_code = code_text.casefold()
    norm_message = _normalise(message_text)
    shown = f"{code_text}: {message_text.strip()}" if code_text else message_text.strip()
    evidence = (_trim(shown),) if shown else ()

    def quota() -> Classification:
        info = parse_quota_message(message_text)
        if info is None:
            why = "quota exceeded (ResourceLimitExceeded); the message could not be parsed"
        elif info.can_ever_fit:
            why = (
                f"quota '{_one_line(info.quota_name)}' exceeded: limit {info.limit}, in use {info.used}, "
                f"request {info.delta}; wait for the account's jobs to release capacity"
            )
        else:
            why = (
                f"quota '{_one_line(info.quota_name)}' is {info.limit} but the request needs "
                f"{info.delta}: it can never fit, ask for a quota increase"
            )
        return Classification(EndingClass.QUOTA, why, evidence, info)

    if code_text:
        if _first_label(_API_QUOTA_CODES, norm_code) is not None:
            return quota()
        label = _first_label(_API_THROTTLE_CODES, norm_code)
        if label is not None:
            return Classification(
                EndingClass.THROTTLED, f"API error {label}: transient, retry later", evidence
            )
    label = _first_label(_API_THROTTLE_MESSAGES, norm_message)
    if label is not None:
        return Classification(EndingClass.THROTTLED, f"API throttled ({label}): retry later", evidence)
    if not code_text and (
        _first_label(_API_QUOTA_MESSAGES, norm_message) is not None
        or parse_quota_message(message_text) is not None
    ):
        return quota()
    if code_text:
        what = _first_label(_API_CLIENT_ERRORS, norm_code) or _one_line(code_text)[:80]
    else:
        what = _first_label(_API_CLIENT_ERRORS, norm_message) or "error without a code"
    return Classification(
        EndingClass.CLIENT_ERROR, f"CreateTrainingJob rejected the request ({what})", evidence
    )


def _classify_stopped(ending: Ending) -> Classification:
    secondary = "" if ending.secondary_status is None else "".join(ending.secondary_status.split())
    norm_secondary = secondary.casefold()
    status_evidence = (_trim(f"SecondaryStatus: {secondary}"),) if secondary else ()
    if ending.stop_intent is not None:
        intent = _one_line(ending.stop_intent) or "unspecified"
        return Classification(
            EndingClass.SUPERVISOR_STOP,
            f"stopped by the supervisor ({intent[:120]})",
            (_trim(f"stop intent: {intent}"), *status_evidence),
        )
    if norm_secondary == "maxruntimeexceeded":
        return Classification(
            EndingClass.SEGMENT_DONE,
            "stopped at MaxRuntimeInSeconds (MaxRuntimeExceeded): segment done, chain the next one",
            status_evidence,
        )
    if norm_secondary in ("interrupted", "maxwaittimeexceeded"):
        return Classification(
            EndingClass.SPOT_INTERRUPTED,
            f"managed spot training ended with {secondary}: resume on new capacity",
            status_evidence,
        )
    limit = ending.max_pending_seconds
    if not ending.reached_training and limit is not None and ending.pending_seconds >= limit:
        return Classification(
            EndingClass.CAPACITY,
            f"stopped after {_duration(ending.pending_seconds)} pending without capacity "
            f"(MaxPendingTimeInSeconds {limit})",
            (
                *status_evidence,
                _trim(f"pending {ending.pending_seconds:.0f} s >= MaxPendingTimeInSeconds {limit} s"),
            ),
        )
    return Classification(
        EndingClass.USER_STOPPED,
        "stopped with no supervisor intent recorded: stopped by a user",
        status_evidence,
    )


def _classify_failed(
    ending: Ending, *, oom_is_user_error: bool, startup_window_seconds: float
) -> Classification:
    reason = ending.failure_reason
    norm_reason = "" if reason is None else _normalise(reason)
    evidence = _evidence(reason)
    is_algorithm_error = _first_label(_REASON_ALGORITHM, norm_reason) is not None

    if norm_reason and not is_algorithm_error:
        label = _first_label(_REASON_CAPACITY, norm_reason)
        if label is not None:
            return Classification(EndingClass.CAPACITY, f"{label} in FailureReason (capacity)", evidence)
        label = _first_label(_REASON_INTERNAL, norm_reason)
        if label is not None:
            return Classification(
                EndingClass.INFRASTRUCTURE, f"{label} in FailureReason (infrastructure)", evidence
            )
        label = _first_label(_REASON_HARDWARE, norm_reason)
        if label is not None:
            return Classification(
                EndingClass.INFRASTRUCTURE,
                f"{label} in FailureReason (infrastructure)",
                evidence,
                hardware=True,
            )
        label = _first_label(_REASON_CLIENT, norm_reason)
        if label is not None:
            return Classification(
                EndingClass.CLIENT_ERROR, f"{label} in FailureReason (fix the job configuration)", evidence
            )

    texts: list[_Text] = []
    if norm_reason:
        texts.append(_Text(reason or "", norm_reason, from_reason=True))
    texts.extend(_Text(line, _normalise(line), from_reason=False) for line in ending.log_tail)

    infra = _scan(_INFRA, texts)
    if infra:
        return Classification(
            EndingClass.INFRASTRUCTURE,
            f"{_what(infra)} in {_where(infra)} (infrastructure)",
            _evidence(reason, infra.texts),
            hardware=any(label in HARDWARE_LOG_LABELS for label in infra.labels),
        )
    oom = _scan(_OOM, texts)
    if oom:
        kind = EndingClass.USER_ERROR if oom_is_user_error else EndingClass.INFRASTRUCTURE
        policy = "user error by policy" if oom_is_user_error else "infrastructure by policy"
        return Classification(kind, f"{_what(oom)} in {_where(oom)} ({policy})", _evidence(reason, oom.texts))
    always = _scan(_CODE_ALWAYS, texts)
    if always:
        return Classification(
            EndingClass.USER_ERROR,
            f"{_what(always)} in {_where(always)} (code bug)",
            _evidence(reason, always.texts),
        )
    startup = _scan(_CODE_STARTUP, texts)
    if startup:
        trained = _duration(ending.training_seconds)
        if ending.training_seconds < startup_window_seconds:
            return Classification(
                EndingClass.USER_ERROR,
                f"{_what(startup)} in {_where(startup)} after {trained} of training (code bug at start-up)",
                _evidence(reason, startup.texts),
            )
        return Classification(
            EndingClass.UNKNOWN,
            f"{_what(startup)} in {_where(startup)} after {trained} of training, outside the "
            f"{_duration(startup_window_seconds)} start-up window (unknown, not treated as a code bug)",
            _evidence(reason, startup.texts),
        )
    if is_algorithm_error:
        why = "AlgorithmError with no known signature in FailureReason or log tail (unknown)"
    elif norm_reason:
        why = "unrecognised FailureReason and no known signature in the log tail (unknown)"
    else:
        why = "failed without a FailureReason and no known signature in the log tail (unknown)"
    return Classification(EndingClass.UNKNOWN, why, evidence)


def classify(
    ending: Ending, *, oom_is_user_error: bool = True, startup_window_seconds: float = 900.0
) -> Classification:
    """Classify how an attempt ended.

    Precedence: a synchronous API error first, then the terminal status (Completed, Stopped,
    Failed); anything else is UNKNOWN. See the module docstring for the matching rules.
    """
    if not _blank(ending.api_error_code) or not _blank(ending.api_error_message):
        return _classify_api_error(ending.api_error_code, ending.api_error_message)

    status = "" if ending.status is None else "".join(ending.status.split()).casefold()
    if status == "completed":
        return Classification(EndingClass.SUCCEEDED, "training job completed", ())
    if status == "stopped":
        return _classify_stopped(ending)
    if status == "failed":
        return _classify_failed(
            ending, oom_is_user_error=oom_is_user_error, startup_window_seconds=startup_window_seconds
        )
    shown = _one_line(ending.status or "")[:60] or "none"
    return Classification(
        EndingClass.UNKNOWN,
        f"no terminal status to classify (status {shown})",
        _evidence(ending.failure_reason),
    )
