"""Checkpoint retention (opt-in ``checkpoint_keep``): which complete checkpoint directories leave
the synced prefix, and when.

Each safety rule has its own test. Pure. Why: docs/checkpoints.md (*The rules*)."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence

from sagewarden.domain.checkpoints.history import writing_span
from sagewarden.domain.checkpoints.retirement import forget_stuck, stuck_names
from sagewarden.domain.decision.pending import PendingDecision
from sagewarden.domain.hangs.quiet import SAVE_ACTIVE_MS
from sagewarden.domain.vocabulary.actions import RetireCheckpoints
from sagewarden.domain.vocabulary.layouts import DCP_MARKER, HF_MARKER, RetentionView, parse_s3_uri
from sagewarden.domain.vocabulary.models import Run, RunStatus
from sagewarden.domain.vocabulary.policy import RunPolicy

# one pass moves at most this many directories (the adapter bounds objects and time as well);
# what is left is chosen again by the next pass
MAX_RETIRE_DIRS = 4
# complete directories the finder probes for retention per pass, beyond the ones kept
PROBE_SLACK = 8
# the periodic checkpoint names retention may retire (rule i): letters (or none), a separator, a step
_PERIODIC = re.compile(r"[A-Za-z_]*[-_]?[0-9]+")

__all__ = ["archive_uri", "on_retention", "run_archive_prefix", "to_retire"]


def archive_uri(s3_uri: str, policy: RunPolicy) -> str:
    """Where retired checkpoints go: the policy's ``checkpoint_archive_uri``, else the synced
    prefix's sibling ``<S3Uri without trailing slash>-archive/``."""
    uri = policy.checkpoint_archive_uri or f"{s3_uri.rstrip('/')}-archive"
    return uri if uri.endswith("/") else uri + "/"


def archive_of(run: Run) -> str | None:
    """The run's archive prefix when its retention archives (None: it keeps or deletes)."""
    policy = run.policy
    if policy.checkpoint_keep is None or policy.checkpoint_retired != "archive" or not run.checkpoint_uri:
        return None
    return archive_uri(run.checkpoint_uri, policy)


def run_archive_prefix(archive: str, run_id: str) -> str:
    """Where one run's retired checkpoints go: ``<archive uri><run_id>/``, so the archive key of
    a retired file is ``<archive uri><run_id>/<directory>/<file>``. Run ids are unique and survive
    resumes: two runs sharing one archive (a team-level ``checkpoint_archive_uri``) never write,
    check or overwrite each other's keys, even for same-named directories."""
    base = archive if archive.endswith("/") else archive + "/"
    return f"{base}{run_id}/"


def overlaps(a: str, b: str) -> bool:
    """Whether two s3:// prefixes share a bucket and one lies under (or is) the other."""
    bucket_a, prefix_a = parse_s3_uri(a)
    bucket_b, prefix_b = parse_s3_uri(b)
    return bucket_a == bucket_b and (prefix_a.startswith(prefix_b) or prefix_b.startswith(prefix_a))


def archive_problem(s3_uri: str, policy: RunPolicy) -> str | None:
    """Why this policy's archive cannot be used with this checkpoint location (None: it can)."""
    if policy.checkpoint_keep is None or policy.checkpoint_retired != "archive":
        return None
    try:
        target = archive_uri(s3_uri, policy)
        if overlaps(target, s3_uri):
            return (
                f"{target} overlaps the synced prefix {s3_uri}: SageMaker would download the archive "
                "at every start; choose a prefix outside it"
            )
    except ValueError as exc:
        return str(exc)
    return None


def may_be_read(run: Run) -> bool:
    """Rule b: whether a job of the run may be reading the synced prefix now. Only an attempt
    InProgress/Training with no stop asked has finished its download and will not be replaced
    before the sweep looks again."""
    cur = run.current
    training = (
        run.status == RunStatus.TRAINING
        and cur is not None
        and cur.in_training
        and cur.stop_intent is None
        and not cur.end_pending
    )
    return not training


def to_retire(
    complete: Sequence[tuple[str, int]], verified_step: int, keep: int, *, reading: bool
) -> tuple[str, ...]:
    """The complete directories to move out, oldest first: none while a job may be reading the
    prefix (b); never one of the ``keep`` newest complete ones nor the verified one (a); only
    complete ones older than the newest verified one (c). ``complete`` is newest first."""
    if reading or keep < 1:
        return ()
    ordered = sorted(complete, key=lambda c: -c[1])
    older = [name for name, step in ordered[keep:] if step < verified_step]
    return tuple(reversed(older))


def markers(policy: RunPolicy) -> tuple[str, ...]:
    """Files that make a directory count as complete: deleted first from a retired directory, so
    a half-moved directory never counts as complete (and copied last into the archive)."""
    names = [HF_MARKER, DCP_MARKER]
    if policy.checkpoint_marker:
        names.append(policy.checkpoint_marker)
    return tuple(dict.fromkeys(names))


def kept_by_name(name: str, policy: RunPolicy, best: str) -> str | None:
    """Rule i: why the directory ``name`` is never retired (None: it may be, once old enough).
    ``best`` is the directory the framework marks as best ("" none)."""
    if best and name == best:
        return "the training framework marks it as the best checkpoint"
    if "best" in name.lower():
        return "its name says best"
    if any(fnmatch.fnmatchcase(name, pattern) for pattern in policy.checkpoint_keep_dirs):
        return "policy.checkpoint_keep_dirs keeps it"
    if policy.checkpoint_layout != "regex" and not _PERIODIC.fullmatch(name):
        return "not a periodic checkpoint name"
    return None


def own(run: Run, step: int, written_ms: int | None, now_ms: int) -> bool:
    """Rule j: whether a directory at ``step`` written at ``written_ms`` is the run's own: one of
    its attempts was training then and had resumed from an older step."""
    if written_ms is None:
        return False
    spans = list(run.checkpoint_spans)
    cur = run.current
    live = writing_span(cur, now_ms) if cur is not None and not cur.ended else None
    if live is not None:
        spans.append(live)
    return any(step > after and start <= written_ms <= end for after, start, end in spans)


def unsettled(view: RetentionView, now_ms: int) -> str | None:
    """Rule h: why the newest complete directory may still be uploading (None: settled)."""
    if not view.complete:
        return None
    name = view.complete[0][0]
    marker = view.written(name)
    if marker is None or view.newest_write_ms is None:
        return f"when {name} was last written to is unknown"
    last = max(marker, view.newest_write_ms)
    if now_ms - last < SAVE_ACTIVE_MS:
        return f"{name} was written to {max(0, now_ms - last) // 1000} s ago: its save may still be uploading"
    return None


def wants_retention(run: Run, policy: RunPolicy) -> bool:
    """The sweep reads the synced prefix for retention only when it may act on it."""
    return policy.checkpoint_keep is not None and not run.status.terminal and not may_be_read(run)


def on_retention(d: PendingDecision) -> bool:
    """On a sweep tick: choose what to retire and ask for it (RetireCheckpoints); True when the
    decision changed the run or acts."""
    run, policy, obs = d.run, d.policy, d.obs
    keep = policy.checkpoint_keep
    view = obs.retention
    if keep is None or run.status.terminal or view is None or obs.retention_error:
        return False  # off, final (f), or unknown (d): nothing this pass
    if may_be_read(run) or obs.checkpoint is None or obs.checkpoint_error:
        return False  # a job may be reading it (b), or the newest verified one is unknown (a)
    if view.best is None:
        return False  # the framework's best is unknown (i): keep everything this pass
    # (h) a newest directory that may still be uploading is not one of the ``keep``: the ``keep``
    # settled ones below it stay too
    keep += 1 if unsettled(view, d.now) is not None else 0
    verified = obs.checkpoint
    protected = {name for name, _ in sorted(view.complete, key=lambda c: -c[1])[:keep]}
    protected.add(verified.uri.rstrip("/").rsplit("/", 1)[-1])
    protected |= {n for n in view.present if kept_by_name(n, policy, view.best) is not None}
    steps = dict(view.complete)
    protected |= stuck_names(run)  # retirement.py: shown in the run, no longer tried
    leftovers = tuple(n for n in run.retiring if n in view.present and n not in protected)
    fresh = [
        n
        for n in to_retire(view.complete, verified.step, keep, reading=False)
        if n not in leftovers and n not in protected and own(run, steps[n], view.written(n), d.now)
    ]
    chosen = (leftovers + tuple(fresh))[:MAX_RETIRE_DIRS]
    forgotten = forget_stuck(d, view.present)
    if not chosen:
        if not run.retiring:
            return forgotten
        d.set(retiring=(), retire_progress=())
        d.note(f"retired {', '.join(run.retiring)}: no longer in the synced prefix")
        return True
    done = [n for n in run.retiring if n not in chosen]
    progress = tuple(p for p in run.retire_progress if p.name in chosen)
    d.set(retiring=chosen, retire_progress=progress)
    mode = policy.checkpoint_retired
    target = (
        run_archive_prefix(archive_uri(run.checkpoint_uri, policy), run.run_id) if mode == "archive" else None
    )
    d.act(
        RetireCheckpoints(
            s3_uri=run.checkpoint_uri,
            names=chosen,
            mode=mode,
            archive_uri=target,
            markers=markers(policy),
            progress=progress,
        )
    )
    where = f"to {target}" if target else "(deleted)"
    d.note(
        f"retention keeps {keep} newest complete checkpoints and step {verified.step}: "
        f"retiring {', '.join(chosen)} {where}" + (f"; retired {', '.join(done)}" if done else "")
    )
    return True
