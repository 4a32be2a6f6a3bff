"""Pure classification of how a SageMaker training attempt ended.

`classify` turns everything known about one attempt (terminal status, SecondaryStatus,
FailureReason, a synchronous CreateTrainingJob error, the tail of the job's logs and the
supervisor's own recorded stop intent) into one `EndingClass`, a readable reason line for an
alert and the evidence it rests on.

Matching rules: every text is case-folded and its whitespace runs collapsed to one space
before matching, and every signature is a regular expression searched anywhere in that
normalised text (a prefix or substring match, never a whole-string comparison). AWS documents
the wording of these messages as subject to change, so the tables match short, stable
fragments only. The signature tables are plain module-level data in
`sagewarden.domain.classifier_signatures` (re-exported here): add a ``(pattern, label)`` row
to extend one; patterns are written in lower case with single spaces, and gaps between
fragments are bounded (``.{0,200}``, never ``.*``) so a huge log line stays cheap to scan.

The classifier is split by concern: the data it takes and gives (`classifier_models`), the
signature tables (`classifier_signatures`), the text machinery and quota-message parser
(`classifier_matching`) and, here, the classification itself. Every public name of those
modules is importable from this one.

This module is pure: standard library only, no clock, no environment, no I/O.
"""

from __future__ import annotations

from sagewarden.domain.classifier_matching import (
    EVIDENCE_TEXT_LIMIT as EVIDENCE_TEXT_LIMIT,
)
from sagewarden.domain.classifier_matching import (
    MAX_EVIDENCE_LOG_LINES as MAX_EVIDENCE_LOG_LINES,
)
from sagewarden.domain.classifier_matching import (
    _compile,
    _duration,
    _evidence,
    _first_label,
    _normalise,
    _one_line,
    _scan,
    _Text,
    _trim,
    _what,
    _where,
    parse_quota_message,
)
from sagewarden.domain.classifier_models import Classification, Ending, EndingClass, QuotaInfo
from sagewarden.domain.classifier_signatures import (
    API_CLIENT_ERROR_SIGNATURES,
    API_QUOTA_CODE_SIGNATURES,
    API_QUOTA_MESSAGE_SIGNATURES,
    API_THROTTLE_CODE_SIGNATURES,
    API_THROTTLE_MESSAGE_SIGNATURES,
    CODE_BUG_ALWAYS_SIGNATURES,
    CODE_BUG_STARTUP_SIGNATURES,
    HARDWARE_LOG_LABELS,
    INFRA_LOG_SIGNATURES,
    OOM_SIGNATURES,
    REASON_ALGORITHM_ERROR_SIGNATURES,
    REASON_CAPACITY_SIGNATURES,
    REASON_CLIENT_ERROR_SIGNATURES,
    REASON_HARDWARE_SIGNATURES,
    REASON_INTERNAL_ERROR_SIGNATURES,
)

__all__ = [
    "Classification",
    "Ending",
    "EndingClass",
    "QuotaInfo",
    "classify",
    "parse_quota_message",
]

# --- Compiled tables ---------------------------------------------------------------------------

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
