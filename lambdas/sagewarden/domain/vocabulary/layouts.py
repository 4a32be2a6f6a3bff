"""Which checkpoint directory under a run's ``CheckpointConfig.S3Uri`` is the newest complete one:
the ``hf``, ``megatron``, ``dcp``, ``regex`` and ``auto`` layouts. Pure. Why: docs/recovery.md
(*Training-script contract*, *Where the rules live*)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Literal, TypeAlias

HF_MARKER: Final = "trainer_state.json"
DCP_MARKER: Final = ".metadata"
MEGATRON_TRACKER: Final = "latest_checkpointed_iteration.txt"
MEGATRON_RELEASE_DIR: Final = "release"
MEGATRON_RELEASE_STEP: Final = 0

MegatronTracker: TypeAlias = int | Literal["release"] | None


class LayoutKind(StrEnum):
    AUTO = "auto"
    HF = "hf"
    MEGATRON = "megatron"
    DCP = "dcp"
    REGEX = "regex"


_HF_NAME: Final = re.compile(r"checkpoint-([0-9]+)")
_MEGATRON_NAME: Final = re.compile(r"iter_([0-9]+)")
_DCP_NAME: Final = re.compile(r".*?([0-9]+)")
_AUTO_ORDER: Final = (
    (LayoutKind.HF, _HF_NAME),
    (LayoutKind.MEGATRON, _MEGATRON_NAME),
    (LayoutKind.DCP, _DCP_NAME),
)
_KIND_RANK: Final = {
    LayoutKind.HF: 0,
    LayoutKind.MEGATRON: 1,
    LayoutKind.DCP: 2,
    LayoutKind.REGEX: 3,
}
_BUCKET: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{1,253}[A-Za-z0-9]")


@dataclass(frozen=True)
class CheckpointLayout:
    """How a run lays out its checkpoints.

    ``dir_regex`` and ``marker`` are for ``REGEX`` only; other kinds reset them to None (a policy
    may carry leftovers from an earlier regex setting, which must not break the lookup).
    """

    kind: LayoutKind = LayoutKind.AUTO
    dir_regex: str | None = None
    marker: str | None = None

    def __post_init__(self) -> None:
        # Accept the plain string values too ("hf"), e.g. when built from a JSON policy.
        object.__setattr__(self, "kind", LayoutKind(self.kind))
        if self.kind is not LayoutKind.REGEX:
            object.__setattr__(self, "dir_regex", None)
            object.__setattr__(self, "marker", None)
            return
        if not self.dir_regex:
            raise ValueError("the 'regex' layout needs dir_regex")
        if not self.marker or self.marker.startswith("/"):
            raise ValueError("the 'regex' layout needs a marker file name (relative to the directory)")
        try:
            compiled = re.compile(self.dir_regex)
        except re.error as exc:
            raise ValueError(f"dir_regex {self.dir_regex!r} does not compile: {exc}") from exc
        if "step" not in compiled.groupindex and compiled.groups < 1:
            raise ValueError(f"dir_regex {self.dir_regex!r} needs a group (named 'step', or group 1)")


@dataclass(frozen=True)
class Checkpoint:
    """A complete checkpoint directory.

    ``written_at_ms`` is the LastModified (epoch ms) of whatever proved completeness -- the marker
    file, or for Megatron the tracker file when it names this directory -- and None otherwise.
    """

    uri: str
    step: int
    layout: LayoutKind
    written_at_ms: int | None = None
    # how long writing it took (from its objects and marker in S3: save_seconds), when measured
    write_seconds: float | None = None
    # the step of the next older checkpoint directory (None: none listed): the checkpoint interval
    # in steps, however seldom the supervisor happens to look
    previous_step: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "layout", LayoutKind(self.layout))
        if not self.uri.startswith("s3://") or not self.uri.endswith("/"):
            raise ValueError(f"checkpoint uri must be s3://.../ (ending in '/'), got {self.uri!r}")
        if self.step < 0:
            raise ValueError(f"checkpoint step must be >= 0, got {self.step}")
        if self.layout is LayoutKind.AUTO:
            raise ValueError("a checkpoint has a concrete layout, never 'auto'")


@dataclass(frozen=True)
class Probe:
    """One look-up the adapter has to make for one candidate directory.

    ``marker`` is the file whose presence inside the directory proves completeness; None means the
    directory is vouched for by the Megatron tracker and only has to hold at least one file.
    ``tracker_named`` is True when the tracker names exactly this directory.
    """

    name: str
    step: int
    kind: LayoutKind
    marker: str | None
    tracker_named: bool = False


@dataclass(frozen=True)
class Completion:
    """Evidence that a probed directory is complete. ``written_at_ms`` dates the completion
    (``Checkpoint.written_at_ms``); ``object_ms`` is the LastModified of the object the probe saw
    (the marker, or for a directory the Megatron tracker vouches for, the file it listed): when
    that directory was written, for retention's ownership rule."""

    written_at_ms: int | None = None
    object_ms: int | None = None


@dataclass(frozen=True)
class Selection:
    """Outcome of walking a probe plan.

    ``chosen``/``completion`` are None when nothing complete was found; ``rejected`` are the probed
    but incomplete directories (newest first); ``gave_up`` tells that the walk stopped because
    ``max_probes`` incomplete directories were seen, not because the plan ran out.
    """

    chosen: Probe | None
    completion: Completion | None
    rejected: tuple[Probe, ...]
    gave_up: bool


def save_seconds(object_ms: Sequence[int], done_ms: int) -> float:
    """How long a save took, from the LastModified times (epoch ms, none after ``done_ms``) of its
    directory's objects and its completion time ``done_ms``. The first object lands in S3 only once
    the script has written it, so the save's start is never seen: the objects land through the
    save, and the time before the first is estimated as one mean gap between its writes (what it
    is when they land evenly). The completion marker counts as a write when it is listed
    elsewhere (Megatron's tracker file). Only the marker listed: 0. An estimate: a save whose
    first file is most of its bytes reads short."""
    first = min(object_ms)
    seen = max(0, done_ms - first)
    writes = len(object_ms) + (0 if max(object_ms) >= done_ms else 1)
    gaps = writes - 1
    return (seen + (seen / gaps if gaps > 0 else 0.0)) / 1000


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """Split ``s3://bucket/some/prefix`` into ``("bucket", "some/prefix/")``.

    The prefix always ends with "/" unless it is empty (bucket root). Raises ValueError for
    anything that is not an ``s3://`` URI with a plausible bucket name.
    """
    if not isinstance(uri, str):
        raise ValueError(f"S3 URI must be a string, got {type(uri).__name__}")
    if not uri.startswith("s3://"):
        raise ValueError(f"not an s3:// URI: {uri!r}")
    if any(ch.isspace() or ord(ch) < 0x20 for ch in uri):
        raise ValueError(f"S3 URI contains whitespace or control characters: {uri!r}")
    bucket, _, prefix = uri[len("s3://") :].partition("/")
    if not _BUCKET.fullmatch(bucket):
        raise ValueError(f"S3 URI has no valid bucket name: {uri!r}")
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    return bucket, prefix


# S3 directory buckets (S3 Express One Zone) are named <base>--<zone-id>--x-s3
DIRECTORY_BUCKET_SUFFIX: Final = "--x-s3"


def directory_bucket_problem(uri: str) -> str | None:
    """Why an s3:// URI in an S3 directory bucket cannot be used here (None: it is not in one).
    The supervisor reads and moves checkpoints with s3:ListBucket, s3:GetObject (and retention's
    writes) granted on general purpose bucket ARNs; a directory bucket is reached only through
    s3express:CreateSession on its own ARN, which the deployment does not grant."""
    bucket = uri.removeprefix("s3://").partition("/")[0]
    if not bucket.endswith(DIRECTORY_BUCKET_SUFFIX):
        return None
    return (
        f"{bucket} is an S3 directory bucket (S3 Express One Zone): sagewarden's role reads and moves "
        "checkpoints with s3:ListBucket and s3:GetObject on general purpose buckets, and a directory "
        "bucket is reached only through s3express:CreateSession, which the deployment does not grant. "
        "Use a general purpose bucket"
    )


def checkpoint_uri(bucket: str, prefix: str, name: str) -> str:
    """``s3://bucket/<prefix><name>/`` (``prefix`` as returned by :func:`parse_s3_uri`)."""
    return f"s3://{bucket}/{prefix}{name}/"


def _to_step(digits: str | None) -> int | None:
    if digits is None or not digits.isascii() or not digits.isdigit():
        return None
    try:
        return int(digits)
    except ValueError:  # absurdly long digit strings exceed int conversion limits
        return None


def _match(name: str, layout: CheckpointLayout) -> tuple[int, LayoutKind] | None:
    if layout.kind is LayoutKind.REGEX:
        assert layout.dir_regex is not None  # guaranteed by CheckpointLayout
        found = re.fullmatch(layout.dir_regex, name)
        if found is None:
            return None
        group: str | int = "step" if "step" in found.re.groupindex else 1
        step = _to_step(found.group(group))
        return None if step is None else (step, LayoutKind.REGEX)
    tries = _AUTO_ORDER if layout.kind is LayoutKind.AUTO else [p for p in _AUTO_ORDER if p[0] is layout.kind]
    for kind, pattern in tries:
        found = pattern.fullmatch(name)
        if found is not None:
            step = _to_step(found.group(1))
            return None if step is None else (step, kind)
    return None


def _order_key(item: tuple[int, str, LayoutKind]) -> tuple[int, int, str]:
    step, name, kind = item
    return (-step, _KIND_RANK[kind], name)


def candidates(dir_names: Iterable[str], layout: CheckpointLayout) -> list[tuple[int, str, LayoutKind]]:
    """Child directory names that look like checkpoints, as ``(step, name, kind)``, newest first.

    Names that do not match the layout are ignored, as are empty names and names with "/".
    Duplicate names are reported once.
    """
    found: list[tuple[int, str, LayoutKind]] = []
    for name in set(dir_names):
        if not name or "/" in name:
            continue
        matched = _match(name, layout)
        if matched is not None:
            found.append((matched[0], name, matched[1]))
    found.sort(key=_order_key)
    return found


def parse_megatron_tracker(text: str) -> MegatronTracker:
    """Content of ``latest_checkpointed_iteration.txt``: an iteration, "release", or None if garbage."""
    value = text.strip()
    if value == "release":
        return "release"
    return _to_step(value)


def is_complete(
    kind: LayoutKind,
    file_names: Collection[str],
    marker: str | None = None,
    *,
    step: int | Literal["release"] | None = None,
    tracker: MegatronTracker = None,
) -> bool:
    """Whether a directory holding ``file_names`` (paths relative to it) is a complete checkpoint.

    HF: ``trainer_state.json``; DCP: ``.metadata``; REGEX: ``marker``. MEGATRON needs ``step`` (the
    ``iter_`` directory's iteration, or "release" for the ``release/`` directory) and the parsed
    ``tracker``: complete iff the tracker is an iteration >= ``step`` (or both are "release") and the
    directory holds at least one file. Without a tracker, Megatron falls back to torch-DCP's
    ``.metadata``.
    """
    files = set(file_names)
    if kind is LayoutKind.HF:
        return HF_MARKER in files
    if kind is LayoutKind.DCP:
        return DCP_MARKER in files
    if kind is LayoutKind.REGEX:
        if not marker:
            raise ValueError("the 'regex' layout needs a marker")
        return marker in files
    if kind is LayoutKind.MEGATRON:
        if tracker is None:
            return DCP_MARKER in files
        if step is None:
            raise ValueError("a Megatron directory needs its step to be judged against the tracker")
        if tracker == "release" or step == "release":
            return tracker == step and bool(files)
        return step <= tracker and bool(files)
    raise ValueError("'auto' is not a concrete layout; match the directory name first")


def needs_megatron_tracker(dir_names: Iterable[str], layout: CheckpointLayout) -> bool:
    """True if the tracker file matters for this listing (so it is worth one read)."""
    if layout.kind not in (LayoutKind.AUTO, LayoutKind.MEGATRON):
        return False
    names = set(dir_names)
    if MEGATRON_RELEASE_DIR in names:
        return True
    return any(kind is LayoutKind.MEGATRON for _, _, kind in candidates(names, layout))


def probe_plan(
    dir_names: Iterable[str], layout: CheckpointLayout, *, megatron_tracker: MegatronTracker = None
) -> list[Probe]:
    """The directories worth probing, newest first, and what to look for in each.

    ``megatron_tracker`` is the parsed tracker file (None when absent or unreadable). Megatron
    directories newer than the tracker, and all ``iter_`` directories when it says "release", are
    left out: they cannot be proven complete.
    """
    names = set(dir_names)
    plan: list[tuple[int, str, LayoutKind]] = []
    probes: dict[str, Probe] = {}
    for step, name, kind in candidates(names, layout):
        if kind is LayoutKind.HF:
            probe = Probe(name, step, kind, HF_MARKER)
        elif kind is LayoutKind.DCP:
            probe = Probe(name, step, kind, DCP_MARKER)
        elif kind is LayoutKind.REGEX:
            probe = Probe(name, step, kind, layout.marker)
        elif megatron_tracker is None:
            probe = Probe(name, step, kind, DCP_MARKER)
        elif megatron_tracker == "release" or step > megatron_tracker:
            continue
        else:
            probe = Probe(name, step, kind, None, tracker_named=step == megatron_tracker)
        plan.append((step, name, kind))
        probes[name] = probe
    if (
        megatron_tracker == "release"
        and layout.kind in (LayoutKind.AUTO, LayoutKind.MEGATRON)
        and MEGATRON_RELEASE_DIR in names
        and MEGATRON_RELEASE_DIR not in probes
    ):
        probes[MEGATRON_RELEASE_DIR] = Probe(
            MEGATRON_RELEASE_DIR, MEGATRON_RELEASE_STEP, LayoutKind.MEGATRON, None, tracker_named=True
        )
        plan.append((MEGATRON_RELEASE_STEP, MEGATRON_RELEASE_DIR, LayoutKind.MEGATRON))
        plan.sort(key=_order_key)
    return [probes[name] for _, name, _ in plan]


def first_complete(
    plan: Sequence[Probe], check: Callable[[Probe], Completion | None], max_probes: int
) -> Selection:
    """Walk ``plan`` newest first; ``check`` returns evidence of completeness or None.

    Stops at the first complete directory, or after ``max_probes`` incomplete ones.
    """
    if max_probes < 1:
        raise ValueError(f"max_probes must be >= 1, got {max_probes}")
    rejected: list[Probe] = []
    for probe in plan:
        if len(rejected) >= max_probes:
            return Selection(None, None, tuple(rejected), gave_up=True)
        completion = check(probe)
        if completion is not None:
            return Selection(probe, completion, tuple(rejected), gave_up=False)
        rejected.append(probe)
    return Selection(None, None, tuple(rejected), gave_up=False)


def to_checkpoint(
    bucket: str, prefix: str, probe: Probe, completion: Completion, plan: Iterable[Probe] = ()
) -> Checkpoint:
    """The chosen probe as a Checkpoint; ``plan`` (every candidate) gives the next older step."""
    return Checkpoint(
        uri=checkpoint_uri(bucket, prefix, probe.name),
        step=probe.step,
        layout=probe.kind,
        written_at_ms=completion.written_at_ms,
        previous_step=max((p.step for p in plan if p.step < probe.step), default=None),
    )


@dataclass(frozen=True)
class RetentionView:
    """What the synced prefix holds, read for retention (domain/checkpoints/retention.py).

    ``complete``: the complete checkpoint directories found, newest first, as (name, step);
    ``present``: every child directory name (a directory recorded in ``Run.retiring`` is done once
    it is no longer present); ``written_ms``: when each complete directory was written (its
    ``Completion.object_ms``; a directory missing here was written at an unknown time);
    ``newest_write_ms``: the newest LastModified among the newest complete directory's objects,
    every page read (None: unknown, its listing was cut or there is none); ``best``: the directory
    the newest complete Hugging Face directory's ``trainer_state.json`` names as
    ``best_model_checkpoint`` ("" none named or no such directory, None unknown)."""

    complete: tuple[tuple[str, int], ...]
    present: frozenset[str]
    written_ms: tuple[tuple[str, int], ...] = ()
    newest_write_ms: int | None = None
    best: str | None = ""

    def written(self, name: str) -> int | None:
        return next((ms for n, ms in self.written_ms if n == name), None)


def complete_ones(
    plan: Sequence[Probe], check: Callable[[Probe], Completion | None], limit: int, max_probes: int
) -> tuple[tuple[Probe, Completion], ...]:
    """Walk ``plan`` newest first and collect complete directories with their evidence, until
    ``limit`` are found or ``max_probes`` incomplete ones were seen. What is left out is always
    older than everything returned, so the newest complete ones are never missed."""
    found: list[tuple[Probe, Completion]] = []
    incomplete = 0
    for probe in plan:
        if len(found) >= limit or incomplete >= max_probes:
            break
        completion = check(probe)
        if completion is None:
            incomplete += 1
        else:
            found.append((probe, completion))
    return tuple(found)


# trainer_state.json is written by Hugging Face's Trainer with sorted keys, so best_model_checkpoint
# (after best_global_step and best_metric) comes in its first bytes even when log_history makes
# the file megabytes long; retention reads this much of it
TRAINER_STATE_READ_BYTES = 65_536
_BEST_KEY: Final = re.compile(r'"best_model_checkpoint"\s*:\s*(null|"(?:[^"\\]|\\.)*")')


def best_model_directory(text: str, *, whole: bool) -> str | None:
    """The directory name ``trainer_state.json``'s ``best_model_checkpoint`` names (the last part of
    its path), "" when it names none (null, or no such key in a whole file), None when unknown
    (not JSON, or the key is not in the part read). ``whole``: ``text`` is the entire file."""
    if whole:
        try:
            state = json.loads(text)
        except ValueError:
            return None
        if not isinstance(state, dict):
            return None
        value = state.get("best_model_checkpoint")
    else:
        found = _BEST_KEY.search(text)
        if found is None:
            return None
        value = json.loads(found.group(1))
    if value is None:
        return ""
    if not isinstance(value, str):
        return None
    return value.rstrip("/").rsplit("/", 1)[-1]
