"""Find the newest complete checkpoint under a `CheckpointConfig.S3Uri`: the S3 calls only.

Delimited listings, the Megatron tracker, marker probes, and retention's full view (`complete`);
the decisions live in `domain/vocabulary/layouts.py`. Works on directory buckets.
Why: docs/recovery.md (*Training-script contract*)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sagewarden.domain.vocabulary.layouts import (
    HF_MARKER,
    MEGATRON_TRACKER,
    TRAINER_STATE_READ_BYTES,
    Checkpoint,
    CheckpointLayout,
    Completion,
    LayoutKind,
    MegatronTracker,
    Probe,
    RetentionView,
    best_model_directory,
    complete_ones,
    first_complete,
    needs_megatron_tracker,
    parse_megatron_tracker,
    parse_s3_uri,
    probe_plan,
    save_seconds,
    to_checkpoint,
)
from sagewarden.ports.aws import ReadFailed

logger = logging.getLogger(__name__)

_NOT_FOUND = frozenset({"404", "NoSuchKey", "NotFound"})
_TRACKER_READ_LIMIT = 1024  # the tracker holds one integer or "release"
# a hang alarm's handler reads save activity next to its other reads: a directory of 100,000
# shards (100 pages) is cut, as unknown, rather than spend the invocation on it
SAVE_ACTIVITY_BUDGET_S = 10.0


# S3 error codes that do not heal by themselves: the bucket is missing, its name is invalid, it is
# in another region than its URI can reach, or the supervisor may not read it (its role or the
# bucket policy). A person has to fix something; retrying cannot help. Every other error
# (SlowDown, 5xx, a timeout, an expired token) is transient.
PERMANENT_CODES = frozenset(
    {
        "NoSuchBucket",
        "InvalidBucketName",
        "AccessDenied",
        "AllAccessDisabled",
        "403",
        "PermanentRedirect",
        "301",
        "AuthorizationHeaderMalformed",
    }
)


class CheckpointLookupError(ReadFailed):
    """S3 could not be asked (missing bucket, access denied, throttled, network...).

    ``code`` is the S3 error code when there is one (e.g. ``NoSuchBucket``, ``AccessDenied``);
    ``permanent`` says whether it is one that does not heal by itself (``PERMANENT_CODES``).
    """

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.permanent = code in PERMANENT_CODES


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _epoch_ms(value: Any) -> int | None:
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return None


DEFAULT_LAYOUT = CheckpointLayout()


class S3CheckpointFinder:
    def __init__(
        self,
        s3_client: Any,
        *,
        max_probes: int = 8,
        page_size: int = 1000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_probes < 1:
            raise ValueError(f"max_probes must be >= 1, got {max_probes}")
        if not 1 <= page_size <= 1000:
            raise ValueError(f"page_size must be within 1..1000, got {page_size}")
        self._s3 = s3_client
        self._max_probes = max_probes
        self._page_size = page_size
        self._clock = clock  # seconds, for time budgets

    def latest(self, s3_uri: str, layout: CheckpointLayout = DEFAULT_LAYOUT) -> Checkpoint | None:
        """The newest complete checkpoint under ``s3_uri``, or None if there is none (or none provable).

        Raises ValueError for a malformed URI and CheckpointLookupError when S3 cannot be read.
        """
        bucket, prefix = parse_s3_uri(s3_uri)
        dir_names, root_files = self._list_children(bucket, prefix)
        if not dir_names:
            logger.info("no checkpoint directories under s3://%s/%s", bucket, prefix)
            return None

        tracker: MegatronTracker = None
        tracker_ms: int | None = None
        if MEGATRON_TRACKER in root_files and needs_megatron_tracker(dir_names, layout):
            tracker, tracker_ms = self._read_tracker(bucket, prefix + MEGATRON_TRACKER)

        plan = probe_plan(dir_names, layout, megatron_tracker=tracker)

        def check(probe: Probe) -> Completion | None:
            return self._check(bucket, prefix, probe, tracker_ms)

        selection = first_complete(plan, check, self._max_probes)
        for probe in selection.rejected:
            logger.warning(
                "checkpoint s3://%s/%s%s/ (step %d, %s) is incomplete; skipping it",
                bucket,
                prefix,
                probe.name,
                probe.step,
                probe.kind,
            )
        if selection.gave_up:
            logger.warning(
                "gave up after %d incomplete checkpoint directories under s3://%s/%s",
                len(selection.rejected),
                bucket,
                prefix,
            )
        if selection.chosen is None or selection.completion is None:
            logger.info(
                "no complete checkpoint under s3://%s/%s (%d directories, %d probed, layout %s)",
                bucket,
                prefix,
                len(dir_names),
                len(selection.rejected),
                layout.kind,
            )
            return None
        return to_checkpoint(bucket, prefix, selection.chosen, selection.completion, plan)

    def complete(
        self,
        s3_uri: str,
        layout: CheckpointLayout = DEFAULT_LAYOUT,
        *,
        limit: int = 16,
        budget_s: float = SAVE_ACTIVITY_BUDGET_S,
    ) -> RetentionView:
        """For retention: the complete checkpoint directories under ``s3_uri``, newest first (at
        most ``limit``, and the walk stops after ``max_probes`` incomplete ones) with when each was
        written, every child directory present, when the newest complete one was last written to
        (every page of it, within ``budget_s``: a listing cut by it is unknown), and the "best"
        checkpoint its Hugging Face ``trainer_state.json`` names (one bounded GetObject). Every
        listing page is followed; an S3 error raises CheckpointLookupError (unknown, never "none")."""
        bucket, prefix = parse_s3_uri(s3_uri)
        dir_names, root_files = self._list_children(bucket, prefix)
        tracker: MegatronTracker = None
        tracker_ms: int | None = None
        if MEGATRON_TRACKER in root_files and needs_megatron_tracker(dir_names, layout):
            tracker, tracker_ms = self._read_tracker(bucket, prefix + MEGATRON_TRACKER)
        plan = probe_plan(dir_names, layout, megatron_tracker=tracker)
        found = complete_ones(
            plan, lambda probe: self._check(bucket, prefix, probe, tracker_ms), limit, self._max_probes
        )
        newest_write = self._last_write(bucket, f"{prefix}{found[0][0].name}/", budget_s) if found else None
        hf = next((p for p, _ in found if p.kind is LayoutKind.HF), None)
        best = self._best(bucket, f"{prefix}{hf.name}/{HF_MARKER}") if hf is not None else ""
        return RetentionView(
            complete=tuple((p.name, p.step) for p, _ in found),
            present=frozenset(dir_names),
            written_ms=tuple((p.name, c.object_ms) for p, c in found if c.object_ms is not None),
            newest_write_ms=newest_write,
            best=best,
        )

    def check_access(self, s3_uri: str) -> None:
        """One ListObjectsV2 of at most one key under ``s3_uri``: the supervisor can list the
        prefix it will look for checkpoints in. The bucket may be empty there (a fresh run).
        Raises ValueError for a malformed URI and CheckpointLookupError when S3 refuses
        (``permanent`` for no such bucket or access denied) or cannot be asked."""
        bucket, prefix = parse_s3_uri(s3_uri)
        try:
            self._s3.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)
        except ClientError as exc:
            raise self._lookup_error(exc, f"cannot list s3://{bucket}/{prefix}") from exc
        except BotoCoreError as exc:
            raise CheckpointLookupError(f"cannot list s3://{bucket}/{prefix}: {exc}") from exc

    def write_seconds(self, checkpoint: Checkpoint) -> float | None:
        """How long the checkpoint took to write, estimated from the objects of its directory's first
        listing page (up to 1,000; a sharded checkpoint's files are written together) and its
        completion time (domain/vocabulary/layouts.py, ``save_seconds``: the save's start, before its
        first object landed, is estimated). One ListObjectsV2 call; None when it cannot be told."""
        if checkpoint.written_at_ms is None:
            return None
        bucket, prefix = parse_s3_uri(checkpoint.uri)
        try:
            response = self._s3.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1000)
        except ClientError as exc:
            raise self._lookup_error(exc, f"cannot list s3://{bucket}/{prefix}") from exc
        except BotoCoreError as exc:
            raise CheckpointLookupError(f"cannot list s3://{bucket}/{prefix}: {exc}") from exc
        done = checkpoint.written_at_ms
        times = [t for t in (_epoch_ms(o.get("LastModified")) for o in response.get("Contents", ())) if t]
        times = [t for t in times if t <= done]  # a later object is not part of this save
        if not times:
            return None
        return save_seconds(times, done)

    def save_activity(
        self,
        s3_uri: str,
        layout: CheckpointLayout = DEFAULT_LAYOUT,
        *,
        active_since_ms: int | None = None,
        budget_s: float = SAVE_ACTIVITY_BUDGET_S,
    ) -> int | None:
        """When an object of the newest checkpoint directory (complete or still being written) was
        last written, epoch ms; None when there is no checkpoint directory. A save under way keeps
        landing objects (SageMaker uploads each file as the script closes it), so a recent time
        here means "saving", not "hung".

        S3 lists keys by name, not by time, so the newest write is known only once every page of
        the directory is read -- unless one at or after ``active_since_ms`` turns up first, which
        already answers "saving" (that write's time is returned). Pages are read within
        ``budget_s``: a listing cut by it without such a write is unknown, and raises
        CheckpointLookupError (the caller defers; it never reads as "no save")."""
        bucket, prefix = parse_s3_uri(s3_uri)
        dir_names, _ = self._list_children(bucket, prefix)
        plan = probe_plan(dir_names, layout)
        if not plan:
            return None
        newest = f"{prefix}{max(plan, key=lambda p: p.step).name}/"
        deadline = self._clock() + budget_s
        last: int | None = None
        pages = 0
        try:
            paginator = self._s3.get_paginator("list_objects_v2")
            for page in paginator.paginate(
                Bucket=bucket, Prefix=newest, PaginationConfig={"PageSize": self._page_size}
            ):
                pages += 1
                for obj in page.get("Contents", ()):
                    at = _epoch_ms(obj.get("LastModified"))
                    if at is not None and (last is None or at > last):
                        last = at
                if active_since_ms is not None and last is not None and last >= active_since_ms:
                    return last  # a recent write: saving, whatever the other pages hold
                if page.get("IsTruncated") and self._clock() >= deadline:
                    raise CheckpointLookupError(
                        f"listing s3://{bucket}/{newest} cut after {pages} pages by its {budget_s:g}-s "
                        "time budget: whether a save is under way is unknown"
                    )
        except ClientError as exc:
            raise self._lookup_error(exc, f"cannot list s3://{bucket}/{newest}") from exc
        except BotoCoreError as exc:
            raise CheckpointLookupError(f"cannot list s3://{bucket}/{newest}: {exc}") from exc
        return last

    # --- S3 calls ---------------------------------------------------------------------------

    def _list_children(self, bucket: str, prefix: str) -> tuple[list[str], set[str]]:
        """Child directory names and the names of files directly under ``prefix``."""
        dirs: list[str] = []
        files: set[str] = set()
        paginator = self._s3.get_paginator("list_objects_v2")
        pages = paginator.paginate(
            Bucket=bucket,
            Prefix=prefix,
            Delimiter="/",
            PaginationConfig={"PageSize": self._page_size},
        )
        try:
            for page in pages:
                for common in page.get("CommonPrefixes", ()):
                    name = str(common.get("Prefix", ""))[len(prefix) :].rstrip("/")
                    if name:
                        dirs.append(name)
                for obj in page.get("Contents", ()):
                    files.add(str(obj.get("Key", ""))[len(prefix) :])
        except ClientError as exc:
            raise self._lookup_error(exc, f"cannot list s3://{bucket}/{prefix}") from exc
        except BotoCoreError as exc:
            raise CheckpointLookupError(f"cannot list s3://{bucket}/{prefix}: {exc}") from exc
        return dirs, files

    def _last_write(self, bucket: str, dir_prefix: str, budget_s: float) -> int | None:
        """The newest LastModified among the objects under ``dir_prefix``, every page read; None
        when the listing is cut by ``budget_s`` (unknown) or holds nothing."""
        deadline = self._clock() + budget_s
        last: int | None = None
        try:
            paginator = self._s3.get_paginator("list_objects_v2")
            for page in paginator.paginate(
                Bucket=bucket, Prefix=dir_prefix, PaginationConfig={"PageSize": self._page_size}
            ):
                for obj in page.get("Contents", ()):
                    at = _epoch_ms(obj.get("LastModified"))
                    if at is not None and (last is None or at > last):
                        last = at
                if page.get("IsTruncated") and self._clock() >= deadline:
                    logger.warning(
                        "listing s3://%s/%s cut by its %g-s budget: its last write is unknown",
                        bucket,
                        dir_prefix,
                        budget_s,
                    )
                    return None
        except ClientError as exc:
            raise self._lookup_error(exc, f"cannot list s3://{bucket}/{dir_prefix}") from exc
        except BotoCoreError as exc:
            raise CheckpointLookupError(f"cannot list s3://{bucket}/{dir_prefix}: {exc}") from exc
        return last

    def _best(self, bucket: str, key: str) -> str | None:
        """The directory a trainer_state.json names as best_model_checkpoint, from its first
        TRAINER_STATE_READ_BYTES ("" none, None unknown: gone since it was probed, or not JSON)."""
        try:
            response = self._s3.get_object(
                Bucket=bucket, Key=key, Range=f"bytes=0-{TRAINER_STATE_READ_BYTES}"
            )
            body = response["Body"]
            try:
                raw = body.read(TRAINER_STATE_READ_BYTES + 1)
            finally:
                body.close()
        except ClientError as exc:
            if _error_code(exc) in _NOT_FOUND:
                return None
            raise self._lookup_error(exc, f"cannot read s3://{bucket}/{key}") from exc
        except BotoCoreError as exc:
            raise CheckpointLookupError(f"cannot read s3://{bucket}/{key}: {exc}") from exc
        text = raw[:TRAINER_STATE_READ_BYTES].decode("utf-8", errors="replace")
        return best_model_directory(text, whole=len(raw) <= TRAINER_STATE_READ_BYTES)

    def _read_tracker(self, bucket: str, key: str) -> tuple[MegatronTracker, int | None]:
        try:
            response = self._s3.get_object(Bucket=bucket, Key=key)
            body = response["Body"]
            try:
                raw = body.read(_TRACKER_READ_LIMIT)
            finally:
                body.close()
        except ClientError as exc:
            if _error_code(exc) in _NOT_FOUND:
                logger.warning("Megatron tracker s3://%s/%s vanished after listing", bucket, key)
                return None, None
            raise self._lookup_error(exc, f"cannot read s3://{bucket}/{key}") from exc
        except BotoCoreError as exc:
            raise CheckpointLookupError(f"cannot read s3://{bucket}/{key}: {exc}") from exc
        text = raw.decode("utf-8", errors="replace")
        tracker = parse_megatron_tracker(text)
        if tracker is None:
            logger.warning("Megatron tracker s3://%s/%s is unreadable: %r", bucket, key, text[:80])
        return tracker, _epoch_ms(response.get("LastModified"))

    def _check(self, bucket: str, prefix: str, probe: Probe, tracker_ms: int | None) -> Completion | None:
        dir_prefix = f"{prefix}{probe.name}/"
        if probe.marker is None:
            return self._check_has_file(bucket, dir_prefix, probe, tracker_ms)
        key = dir_prefix + probe.marker
        try:
            response = self._s3.head_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            if _error_code(exc) in _NOT_FOUND:
                return None
            raise self._lookup_error(exc, f"cannot check s3://{bucket}/{key}") from exc
        except BotoCoreError as exc:
            raise CheckpointLookupError(f"cannot check s3://{bucket}/{key}: {exc}") from exc
        at = _epoch_ms(response.get("LastModified"))
        return Completion(written_at_ms=at, object_ms=at)

    def _check_has_file(
        self, bucket: str, dir_prefix: str, probe: Probe, tracker_ms: int | None
    ) -> Completion | None:
        # Two keys, without StartAfter (S3 directory buckets refuse it and list in no order): one
        # of them is a file unless the directory holds only a zero-byte "folder" object named
        # exactly like the prefix.
        try:
            response = self._s3.list_objects_v2(Bucket=bucket, Prefix=dir_prefix, MaxKeys=2)
        except ClientError as exc:
            raise self._lookup_error(exc, f"cannot list s3://{bucket}/{dir_prefix}") from exc
        except BotoCoreError as exc:
            raise CheckpointLookupError(f"cannot list s3://{bucket}/{dir_prefix}: {exc}") from exc
        contents = [o for o in response.get("Contents") or () if o.get("Key") != dir_prefix]
        if not contents:
            return None
        # The tracker's LastModified dates the directory it names; an older directory it vouches
        # for was finished earlier, at a time we do not know. The file listed dates when the
        # directory was written (retention's ownership rule).
        return Completion(
            written_at_ms=tracker_ms if probe.tracker_named else None,
            object_ms=_epoch_ms(contents[0].get("LastModified")),
        )

    @staticmethod
    def _lookup_error(exc: ClientError, what: str) -> CheckpointLookupError:
        code = _error_code(exc)
        if code == "NoSuchBucket":
            reason = "the bucket does not exist"
        elif code in ("AccessDenied", "403", "AllAccessDisabled", "InvalidAccessKeyId"):
            reason = (
                "access denied (the supervisor's role needs s3:ListBucket and s3:GetObject on it: "
                "is the bucket in the deployment's checkpointBuckets, and does its bucket policy allow it?)"
            )
        elif code in ("PermanentRedirect", "301", "AuthorizationHeaderMalformed"):
            reason = "the bucket is in another region than the supervisor"
        else:
            reason = f"S3 error {code or 'unknown'}: {exc}"
        return CheckpointLookupError(f"{what}: {reason}", code=code or None)
