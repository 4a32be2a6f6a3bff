"""Pure classification of how a SageMaker training attempt ended: `classify` turns what is known
of one attempt into an `EndingClass`, a reason line and its evidence. Why: docs/recovery.md (*How
an attempt's ending is handled*, *Where the rules live*)."""

from __future__ import annotations

from sagewarden.domain.vocabulary.classifier.matching import (
    EVIDENCE_TEXT_LIMIT as EVIDENCE_TEXT_LIMIT,
)
from sagewarden.domain.vocabulary.classifier.matching import (
    MAX_EVIDENCE_LOG_LINES as MAX_EVIDENCE_LOG_LINES,
)
from sagewarden.domain.vocabulary.classifier.matching import (
    _compile,
    _duration,
    _evidence,
    _first_label,
    _Hits,
    _normalise,
    _one_line,
    _scan,
    _Text,
    _trim,
    _what,
    _where,
    parse_quota_message,
)
from sagewarden.domain.vocabulary.classifier.models import Classification, Ending, EndingClass
from sagewarden.domain.vocabulary.classifier.signatures import (
    API_CLIENT_ERROR_SIGNATURES,
    API_QUOTA_CODE_SIGNATURES,
    API_QUOTA_MESSAGE_SIGNATURES,
    API_THROTTLE_CODE_SIGNATURES,
    API_THROTTLE_MESSAGE_SIGNATURES,
    CODE_BUG_ALWAYS_SIGNATURES,
    CODE_BUG_STARTUP_SIGNATURES,
    CONFIRM_LOG_SIGNATURES,
    DETERMINISTIC_LOG_SIGNATURES,
    HARDWARE_LOG_LABELS,
    HOST_MEMORY_SIGNATURES,
    INFRA_LOG_SIGNATURES,
    KILL_LABEL,
    LINK_LOG_LABELS,
    OOM_SIGNATURES,
    REASON_ALGORITHM_ERROR_SIGNATURES,
    REASON_CAPACITY_SIGNATURES,
    REASON_CLIENT_ERROR_SIGNATURES,
    REASON_HARDWARE_SIGNATURES,
    REASON_INTERNAL_ERROR_SIGNATURES,
    SHARD_LOADING_PATTERN,
)

__all__ = ["classify", "shows_kill"]

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
_DETERMINISTIC = _compile(DETERMINISTIC_LOG_SIGNATURES)
_HOST_MEMORY = _compile(HOST_MEMORY_SIGNATURES)
_CONFIRM = _compile(CONFIRM_LOG_SIGNATURES)
_SHARD_LOADING = _compile(((SHARD_LOADING_PATTERN, "loading checkpoint shards"),))
_HARDWARE = HARDWARE_LOG_LABELS | LINK_LOG_LABELS

HOST_MEMORY_FULL_PERCENT = 95.0
"""A kill after a host's MemoryUtilization reached this is the OOM killer's: a memory fault."""

HUB_LABEL = "model hub unreachable and no local copy"

# what the owner can do about a memory fault or a full disk (the alert's advice line)
MEMORY_ADVICE = (
    "host RAM ran out: use fewer DataLoader workers (num_workers), load checkpoint shards one at a "
    "time (low_cpu_mem_usage, mmap), or a larger instance type"
)
GPU_MEMORY_ADVICE = (
    "GPU memory ran out: a smaller batch or sequence length, activation checkpointing, or more GPUs"
)
DISK_ADVICE = (
    "the volume is full: raise ResourceConfig.VolumeSizeInGB, keep fewer or smaller checkpoints under "
    "/opt/ml/checkpoints (policy checkpoint_keep), or check /dev/shm"
)
# what would change a guess (UNKNOWN), per signature of CONFIRM_LOG_SIGNATURES
_GUESS = {
    "CUDA illegal memory access": "a bug (a batch size, a custom kernel) repeats at the same step; a bad GPU does not, "
    "and an Xid or ECC line would name it",
    "segmentation fault": "a native-library bug repeats at the same step; bad host memory does not",
    KILL_LABEL: "a host's MemoryUtilization near 100 % before the kill would make it a memory fault; "
    "a repeat at the same step makes it a loop",
    "NaN/inf loss": "hyperparameters or data NaN again at the same step; a bad GPU NaNs elsewhere "
    "(a repeat on the same instances at another step moves the run to new ones)",
    "the rendezvous store cannot be reached (connect timeout)": "a wrong address repeats; a master that "
    "started late does not",
    "NCCL cannot connect to a peer": "a wrong interface or a firewall repeats; a peer that restarted does not",
    HUB_LABEL: "a job without a route to the hub repeats (EnableNetworkIsolation in the request makes it "
    "a configuration error at once); a hub outage does not",
}
_NO_SIGNATURE_GUESS = (
    "nothing in the FailureReason or the log tail names a cause; a second ending the same way at the "
    "same step stops the run, and a hardware line or a host's memory near full would change the class"
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
        elif info.unavailable:
            why = (
                f"'{_one_line(info.quota_name)}' is not available in this region: no quota to wait for, "
                "pick another instance type or region"
            )
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
    return _classify_texts(
        ending,
        texts,
        reason,
        is_algorithm_error=is_algorithm_error,
        oom_is_user_error=oom_is_user_error,
        startup_window_seconds=startup_window_seconds,
    )


def _classify_texts(
    ending: Ending,
    texts: list[_Text],
    reason: str | None,
    *,
    is_algorithm_error: bool,
    oom_is_user_error: bool,
    startup_window_seconds: float,
) -> Classification:
    """The log tail (and an AlgorithmError's body), in this order: a hardware line; a deterministic
    failure (no echo of another host's fault); an out-of-memory; a line that names the failure but not
    its cause (resumed once, UNKNOWN); a transient collective or service error; a code bug at
    start-up. The first that matches decides."""
    infra = _scan(_INFRA, texts)
    hardware = _only(infra, _HARDWARE)
    if hardware:
        return Classification(
            EndingClass.INFRASTRUCTURE,
            f"{_what(hardware)} in {_where(hardware)} (hardware: restart on other instances)",
            _evidence(reason, hardware.texts),
            hardware=True,
        )
    det = _merge(_scan(_DETERMINISTIC, texts), _scan(_CODE_ALWAYS, texts), texts)
    if det:
        return Classification(
            EndingClass.USER_ERROR,
            f"{_what(det)} in {_where(det)} (deterministic: every attempt meets it again)",
            _evidence(reason, det.texts),
            advice=DISK_ADVICE if "disk full" in det.labels else None,
        )
    oom = _scan(_OOM, texts)
    if oom:
        if not oom_is_user_error:  # the policy says this job's CUDA OOMs pass (fragmentation)
            return Classification(
                EndingClass.INFRASTRUCTURE,
                f"{_what(oom)} in {_where(oom)} (infrastructure by policy)",
                _evidence(reason, oom.texts),
            )
        return _memory_fault(oom, reason, True, GPU_MEMORY_ADVICE, "GPU memory")
    confirm = _scan(_CONFIRM, texts)
    memory = _host_memory(ending, texts, confirm)
    if memory is not None:
        hits, extra = memory
        return _memory_fault(hits, reason, oom_is_user_error, MEMORY_ADVICE, "host memory", extra)
    if confirm:
        what = _what(confirm)
        if confirm.labels[0] == HUB_LABEL and ending.network_isolated:
            return Classification(
                EndingClass.USER_ERROR,
                f"{what} in {_where(confirm)}, and the job runs with EnableNetworkIsolation: it can never "
                "reach the hub (ship the model with the job or in the image)",
                _evidence(reason, confirm.texts),
            )
        guess = _GUESS.get(confirm.labels[0], _NO_SIGNATURE_GUESS)
        if confirm.labels[0] == KILL_LABEL:
            guess = _kill_guess(ending)
        return Classification(
            EndingClass.UNKNOWN,
            f"{what} in {_where(confirm)} (unknown cause: resumed once to confirm)",
            _evidence(reason, confirm.texts),
            guess=guess,
            confirmable=True,
        )
    if infra:
        return Classification(
            EndingClass.INFRASTRUCTURE,
            f"{_what(infra)} in {_where(infra)} (infrastructure)",
            _evidence(reason, infra.texts),
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
            guess="a bug repeats at the same step; bad data or a fault's consequence does not",
            confirmable=True,
        )
    if is_algorithm_error:
        why = "AlgorithmError with no known signature in FailureReason or log tail (unknown)"
    elif reason is not None and reason.strip():
        why = "unrecognised FailureReason and no known signature in the log tail (unknown)"
    else:
        why = "failed without a FailureReason and no known signature in the log tail (unknown)"
    return Classification(
        EndingClass.UNKNOWN, why, _evidence(reason), guess=_NO_SIGNATURE_GUESS, confirmable=True
    )


def _only(hits: _Hits, labels: frozenset[str]) -> _Hits:
    """The hits of `hits` whose label is one of `labels` (and the texts they matched in)."""
    kept = tuple(label for label in hits.labels if label in labels)
    if not kept:
        return _Hits((), ())
    table = {label: i for i, (_, label) in enumerate(_INFRA)}
    texts = tuple(t for t in hits.texts if _first_label(_INFRA, t.normalised) in kept)
    return _Hits(tuple(sorted(kept, key=table.__getitem__)), texts)


def _merge(first: _Hits, second: _Hits, order: list[_Text]) -> _Hits:
    """Both tables' hits: the first one's labels first, the texts in tail order."""
    labels = (*first.labels, *(label for label in second.labels if label not in first.labels))
    texts = sorted({*first.texts, *second.texts}, key=order.index)
    return _Hits(labels, tuple(texts))


def _memory_fault(
    hits: _Hits, reason: str | None, oom_is_user_error: bool, advice: str, what: str, extra: str = ""
) -> Classification:
    """A memory fault: a user error by policy (`oom_is_user_error`, the default), else (host RAM) an
    unexplained ending resumed once -- never infrastructure: new instances of the same type run out
    the same way."""
    evidence = _evidence(reason, hits.texts)
    if extra:
        evidence = (*evidence, _trim(extra))
    if oom_is_user_error:
        return Classification(
            EndingClass.USER_ERROR,
            f"{_what(hits)} in {_where(hits)} ({what} fault: user error by policy)",
            evidence,
            advice=advice,
        )
    return Classification(
        EndingClass.UNKNOWN,
        f"{_what(hits)} in {_where(hits)} ({what} fault: resumed once by policy oom_is_user_error=false)",
        evidence,
        guess="the same fault at the same step stops the run",
        confirmable=True,
        advice=advice,
    )


def _host_memory(ending: Ending, texts: list[_Text], confirm: _Hits) -> tuple[_Hits, str] | None:
    """Host RAM ran out: the OOM killer's own words, or a kill (SIGKILL, exitcode -9) while the job
    loaded checkpoint shards or after a host's memory came near full. (hits, an evidence line)."""
    named = _scan(_HOST_MEMORY, texts)
    if named:
        return named, ""
    if KILL_LABEL not in confirm.labels:
        return None
    killed = _Hits(
        (KILL_LABEL,), tuple(t for t in confirm.texts if _first_label(_CONFIRM, t.normalised) == KILL_LABEL)
    )
    shards = _scan(_SHARD_LOADING, texts)
    if shards:
        return _merge(killed, shards, texts), ""
    memory = ending.host_memory
    if memory is not None and memory[1] >= HOST_MEMORY_FULL_PERCENT:
        host, percent = memory
        return killed, f"MemoryUtilization of {host} reached {percent:.0f} % before the kill"
    return None


def shows_kill(lines: tuple[str, ...]) -> bool:
    """A line of the tail is a kill (SIGKILL, exitcode -9): the hosts' memory decides what it was."""
    texts = [_Text(line, _normalise(line), from_reason=False) for line in lines]
    return KILL_LABEL in _scan(_CONFIRM, texts).labels


def _kill_guess(ending: Ending) -> str:
    memory = ending.host_memory
    if memory is None:
        return (
            "the hosts' memory could not be read: near 100 % would make it a memory fault (fewer "
            "loader workers, a larger instance); a repeat at the same step makes it a loop"
        )
    host, percent = memory
    return (
        f"host memory peaked at {percent:.0f} % ({host}), below {HOST_MEMORY_FULL_PERCENT:.0f} %: not "
        "the OOM killer's usual mark; a repeat at the same step makes it a loop"
    )


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
