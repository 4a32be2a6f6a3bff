"""Deterministic SageMaker job names, `<prefix>-<run name>-<run id>-a<NNN>` (<= 63 chars), and the
names of a training job's log streams. Why: docs/reliability.md (*Names that lead to their run*)."""

from __future__ import annotations

import re

JOB_NAME_MAX = 63
JOB_NAME_RE = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
RUN_NAME_RE = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")
RUN_ID_LEN = 26  # ULID
ATTEMPT_DIGITS = 3
ATTEMPT_ROOM = 6  # "-a" + up to 4 digits
_TRAINING_STREAM = re.compile(r"^algo-(\d+)(?:-(\d+))?$")
_JOB_RE = re.compile(r"^(?P<prefix>[a-z0-9]+)-(?P<name>.+)-(?P<run>[0-9A-HJKMNP-TV-Z]{26})-a(?P<n>\d+)$")


def max_run_name_length(prefix: str) -> int:
    return JOB_NAME_MAX - len(prefix) - 1 - 1 - RUN_ID_LEN - ATTEMPT_ROOM


def run_name_problem(name: str, prefix: str) -> str | None:
    """Why `name` cannot be part of a job name, or None when it can."""
    limit = max_run_name_length(prefix)
    if not name:
        return "must not be empty"
    if len(name) > limit:
        return f"must be at most {limit} characters (the job name adds prefix, run id and attempt)"
    if not RUN_NAME_RE.match(name):
        return "may contain only letters, digits and hyphens, and must start and end with a letter or digit"
    return None


def job_name(prefix: str, run_name: str, run_id: str, attempt: int) -> str:
    name = f"{prefix}-{run_name}-{run_id}-a{attempt:0{ATTEMPT_DIGITS}d}"
    if len(name) > JOB_NAME_MAX or not JOB_NAME_RE.match(name):
        raise ValueError(f"cannot form a valid job name from {run_name!r}: {name!r}")
    return name


def parse_job_name(name: str) -> tuple[str, int] | None:
    """(run id, attempt) from a supervisor job name, or None if it is not one of ours."""
    m = _JOB_RE.match(name)
    if not m:
        return None
    return m.group("run"), int(m.group("n"))


def training_stream(stream: str) -> tuple[str, int, int] | None:
    """(job name, host number, epoch; -1 when the name carries none) of a training job's log
    stream `<job>/algo-<n>-<epoch>`; None for any other stream (the SSM agent's
    `<job>/algo-<n>-<ts>/ssm`, or a name that is not a training job's)."""
    job, sep, rest = stream.partition("/")
    m = _TRAINING_STREAM.match(rest)
    if not sep or not job or m is None:
        return None
    return job, int(m[1]), int(m[2]) if m[2] else -1
