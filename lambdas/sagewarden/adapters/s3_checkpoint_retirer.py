"""Checkpoint retention's S3 side: read the synced prefix, and move (or delete) the checkpoint
directories ``domain/retention.py`` chose.

A move, per directory, is made so that every step survives its own retry and a job starting
half-way never sees a half-moved checkpoint as complete:

1. copy every object to the archive (server-side; the completion markers last), skipping an
   object whose archive copy is already there with the same size (and the same ETag where S3's
   ETags are comparable: both single-part and not SSE-KMS) -- copy is idempotent;
2. verify each copy the same way (HeadObject) before anything is deleted;
3. delete the source's completion markers (``trainer_state.json``, ``.metadata``, the regex
   layout's marker) first -- from then on no finder counts the directory as complete -- then the
   rest.

Mode "delete" skips 1-2. One pass is bounded by ``max_objects`` objects touched (checked and
copied, or deleted) and ``budget_s`` seconds; what is left is finished by the next pass (the run records
the directory until the synced prefix no longer holds it). Every listing follows every page.
Any S3 error stops the pass with CheckpointRetireError: nothing is taken as "not there".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sagewarden.adapters.s3_checkpoint_finder import CheckpointLookupError, S3CheckpointFinder
from sagewarden.domain.actions import RetireCheckpoints
from sagewarden.domain.checkpoints import CheckpointLayout, RetentionView, parse_s3_uri

logger = logging.getLogger(__name__)

MAX_OBJECTS_PER_PASS = 2_000
RETIRE_BUDGET_S = 15.0  # of the sweep's pass (its function has about a minute); the rest waits
COPY_OBJECT_MAX = 5 * 1024**3  # CopyObject's limit; larger objects are copied in parts
COPY_PART_BYTES = 1024**3
_NOT_FOUND = frozenset({"404", "NoSuchKey", "NotFound"})


class CheckpointRetireError(CheckpointLookupError):
    """S3 refused or failed a listing, copy, verification or delete: the pass stops here."""


@dataclass(frozen=True)
class _Object:
    key: str
    size: int
    etag: str


class _OutOfBudget(Exception):
    pass


class S3CheckpointRetirer:
    def __init__(
        self,
        s3_client: Any,
        *,
        max_objects: int = MAX_OBJECTS_PER_PASS,
        budget_s: float = RETIRE_BUDGET_S,
        copy_object_max: int = COPY_OBJECT_MAX,
        copy_part_bytes: int = COPY_PART_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._s3 = s3_client
        self._finder = S3CheckpointFinder(s3_client)
        self._max_objects = max_objects
        self._budget_s = budget_s
        self._copy_object_max = copy_object_max
        self._part = copy_part_bytes
        self._clock = clock
        self._left = 0
        self._deadline = 0.0

    def view(self, s3_uri: str, layout: CheckpointLayout, *, limit: int) -> RetentionView:
        return self._finder.complete(s3_uri, layout, limit=limit)

    def retire(self, action: RetireCheckpoints) -> str:
        """Carry out one pass of ``action``; returns one line per directory (the audit's)."""
        bucket, prefix = parse_s3_uri(action.s3_uri)
        archive = parse_s3_uri(action.archive_uri) if action.archive_uri else None
        self._left, self._deadline = self._max_objects, self._clock() + self._budget_s
        lines: list[str] = []
        for name in action.names:
            source = f"{prefix}{name}/"
            try:
                lines.append(self._retire_one(bucket, source, name, archive, action.markers))
            except _OutOfBudget:
                lines.append(f"{name}: unfinished (this pass's bound reached); the next pass continues")
                break
        return "; ".join(lines)

    # --- one directory ---------------------------------------------------------------------

    def _retire_one(
        self,
        bucket: str,
        source: str,
        name: str,
        archive: tuple[str, str] | None,
        markers: tuple[str, ...],
    ) -> str:
        objects = self._list(bucket, source)
        if not objects:
            return f"{name}: already gone from s3://{bucket}/{source}"
        is_marker = {o.key: o.key[len(source) :] in markers for o in objects}
        total = sum(o.size for o in objects)
        if archive is not None:
            dst_bucket, dst_prefix = archive
            # markers last: the archive copy only looks complete once everything else is there
            for obj in sorted(objects, key=lambda o: is_marker[o.key]):
                target = f"{dst_prefix}{name}/{obj.key[len(source) :]}"
                self._spend()  # a look (and maybe a copy): a re-run pays for what it checks
                if not self._same(dst_bucket, target, obj):
                    self._copy(bucket, obj, dst_bucket, target)
                    if not self._same(dst_bucket, target, obj):
                        raise CheckpointRetireError(
                            f"the archive copy s3://{dst_bucket}/{target} does not match its source "
                            f"({obj.size} bytes): not deleting s3://{bucket}/{obj.key}"
                        )
        # markers first: from here on the directory is not complete for any finder
        for obj in sorted(objects, key=lambda o: not is_marker[o.key]):
            self._spend()
            self._delete(bucket, obj.key)
        where = f"moved to s3://{archive[0]}/{archive[1]}{name}/" if archive else "deleted"
        return f"{name}: {len(objects)} objects, {total:,} bytes {where}"

    def _spend(self) -> None:
        if self._left <= 0 or self._clock() >= self._deadline:
            raise _OutOfBudget
        self._left -= 1

    # --- S3 calls ----------------------------------------------------------------------------

    def _list(self, bucket: str, prefix: str) -> list[_Object]:
        out: list[_Object] = []
        try:
            for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
                for o in page.get("Contents", ()):
                    out.append(_Object(str(o["Key"]), int(o.get("Size", 0)), str(o.get("ETag", ""))))
                if page.get("IsTruncated") and self._clock() >= self._deadline:
                    raise _OutOfBudget  # a directory too large to list in this pass: the next continues
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, f"cannot list s3://{bucket}/{prefix}") from exc
        return out

    def _same(self, bucket: str, key: str, obj: _Object) -> bool:
        """Whether s3://bucket/key holds a copy of ``obj``: the same size, and the same ETag when
        both are comparable (single-part MD5s; SSE-KMS ETags are not MD5s)."""
        try:
            head = self._s3.head_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code", "")) in _NOT_FOUND:
                return False
            raise self._error(exc, f"cannot check s3://{bucket}/{key}") from exc
        except BotoCoreError as exc:
            raise self._error(exc, f"cannot check s3://{bucket}/{key}") from exc
        if int(head.get("ContentLength", -1)) != obj.size:
            return False
        etag = str(head.get("ETag", ""))
        comparable = (
            "-" not in etag
            and "-" not in obj.etag
            and not str(head.get("ServerSideEncryption", "")).startswith("aws:kms")
        )
        return etag == obj.etag if comparable else True

    def _copy(self, bucket: str, obj: _Object, dst_bucket: str, key: str) -> None:
        source = {"Bucket": bucket, "Key": obj.key}
        try:
            if obj.size <= self._copy_object_max:
                self._s3.copy_object(Bucket=dst_bucket, Key=key, CopySource=source)
                return
            upload = self._s3.create_multipart_upload(Bucket=dst_bucket, Key=key)["UploadId"]
            try:
                parts = []
                for number, start in enumerate(range(0, obj.size, self._part), start=1):
                    if self._clock() >= self._deadline:
                        raise _OutOfBudget  # aborted below; the next pass copies it again
                    end = min(start + self._part, obj.size) - 1
                    answer = self._s3.upload_part_copy(
                        Bucket=dst_bucket,
                        Key=key,
                        UploadId=upload,
                        PartNumber=number,
                        CopySource=source,
                        CopySourceRange=f"bytes={start}-{end}",
                    )
                    parts.append({"PartNumber": number, "ETag": answer["CopyPartResult"]["ETag"]})
                self._s3.complete_multipart_upload(
                    Bucket=dst_bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": parts}
                )
            except Exception:
                self._s3.abort_multipart_upload(Bucket=dst_bucket, Key=key, UploadId=upload)
                raise
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, f"cannot copy s3://{bucket}/{obj.key} to s3://{dst_bucket}/{key}") from exc

    def _delete(self, bucket: str, key: str) -> None:
        try:
            self._s3.delete_object(Bucket=bucket, Key=key)  # deleting a missing key succeeds
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, f"cannot delete s3://{bucket}/{key}") from exc

    @staticmethod
    def _error(exc: Exception, what: str) -> CheckpointRetireError:
        code = str(exc.response.get("Error", {}).get("Code", "")) if isinstance(exc, ClientError) else ""
        logger.warning("%s: %s", what, exc)
        return CheckpointRetireError(f"{what}: {code or exc}", code=code or None)
