"""Checkpoint retention's S3 side: move (copy, prove, delete) or delete the directories
`domain/checkpoints/retention.py` chose, resuming where earlier passes stopped.

One pass is bounded by `max_objects` and `budget_s`; its answer is a RetirementReported.
Why: docs/checkpoints.md (*The rules*)."""

from __future__ import annotations

import hashlib
import logging
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sagewarden.adapters.s3_checkpoint_finder import CheckpointLookupError, S3CheckpointFinder
from sagewarden.domain.checkpoints.retirement import progress_text
from sagewarden.domain.vocabulary.actions import RetireCheckpoints
from sagewarden.domain.vocabulary.events import RetirementReported, RetireOutcome
from sagewarden.domain.vocabulary.layouts import CheckpointLayout, RetentionView, parse_s3_uri
from sagewarden.domain.vocabulary.models import RetireProgress

logger = logging.getLogger(__name__)

MAX_OBJECTS_PER_PASS = 2_000
RETIRE_BUDGET_S = 15.0  # of the sweep's pass (its function has about a minute); the rest waits
# one CopyObject call copies up to this much; larger objects are copied in parts of COPY_PART_BYTES
# (CopyObject itself takes up to 5 GB, but one call for 5 GB can outlast what is left of a pass:
# parts keep every call short, and a pass cut between parts is resumed)
COPY_OBJECT_MAX = 1024**3
COPY_PART_BYTES = 1024**3
MAX_PARTS = 10_000  # S3's limit per multipart upload: larger objects get larger parts
DELETE_BATCH = 1_000  # DeleteObjects' limit per request
# additional checksums, strongest first; a multipart copy keeps a full-object checksum of the
# source's algorithm when it has one S3 can compute for a whole multipart object
CHECKSUMS = ("CRC64NVME", "SHA256", "SHA1", "CRC32C", "CRC32")
FULL_OBJECT_MULTIPART = ("CRC64NVME", "CRC32C", "CRC32")
_NOT_FOUND = frozenset({"404", "NoSuchKey", "NotFound"})
_COMPOSITE = re.compile(r"-\d+$")


class CheckpointRetireError(CheckpointLookupError):
    """S3 refused or failed a listing, copy, verification or delete: the pass stops here.
    ``blocks``: the error will not heal by itself (``permanent``, or a copy that does not match
    its source), so a directory that meets it at every pass cannot be retired."""

    def __init__(self, message: str, *, code: str | None = None, mismatch: bool = False) -> None:
        super().__init__(message, code=code)
        self.blocks = self.permanent or mismatch


@dataclass(frozen=True)
class _Object:
    rel: str  # the key below the directory's prefix
    size: int
    etag: str


@dataclass(frozen=True)
class _Head:
    size: int
    etag: str
    checksums: Mapping[str, tuple[str, str]]  # algorithm -> (value, FULL_OBJECT | COMPOSITE)
    content_type: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)


def checksums_of(answer: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """The additional checksums of a HeadObject answer (ChecksumMode=ENABLED). A value without
    ChecksumType is COMPOSITE when S3 suffixed it with its part count ("...-3"), else FULL_OBJECT."""
    declared = answer.get("ChecksumType")
    out: dict[str, tuple[str, str]] = {}
    for algorithm in CHECKSUMS:
        value = answer.get(f"Checksum{algorithm}")
        if value:
            kind = (
                str(declared)
                if declared
                else ("COMPOSITE" if _COMPOSITE.search(str(value)) else "FULL_OBJECT")
            )
            out[algorithm] = (str(value), kind)
    return out


def same_content(a: Mapping[str, tuple[str, str]], b: Mapping[str, tuple[str, str]]) -> bool | None:
    """Whether two objects' additional checksums prove them equal (True) or different (False);
    None when they cannot tell (no algorithm in common, or checksums of different types: a
    composite checksum depends on the part sizes). Never decided from sizes or ETags."""
    verdict: bool | None = None
    for algorithm in CHECKSUMS:
        if algorithm not in a or algorithm not in b or a[algorithm][1] != b[algorithm][1]:
            continue
        if a[algorithm][0] != b[algorithm][0]:
            if a[algorithm][1] == "FULL_OBJECT":
                return False  # one algorithm over the whole object disagrees: different bytes
            continue  # composite values also differ with other part sizes
        verdict = True
    return verdict


class _Digest:
    """A running fingerprint of proven objects: key, size, source ETag and archive ETag each."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()

    def add(self, obj: _Object, copy_etag: str) -> None:
        self._hash.update(f"{obj.rel}\0{obj.size}\0{obj.etag}\0{copy_etag}\n".encode())

    @property
    def value(self) -> str:
        return self._hash.hexdigest()[:32]


def _digest(objects: Iterable[_Object], copies: Mapping[str, _Object]) -> str | None:
    digest = _Digest()
    for obj in objects:
        copy = copies.get(obj.rel)
        if copy is None:
            return None  # an archive copy an earlier pass proved is gone: not trusted
        digest.add(obj, copy.etag)
    return digest.value


class _OutOfBudget(Exception):
    def __init__(self, listing: str | None = None) -> None:
        super().__init__(listing or "bound")
        self.listing = listing  # what could not be listed within the pass (None: the bound was reached)


@dataclass
class _Work:
    """One directory within one pass: where it stands, and what the pass did to it."""

    state: RetireProgress
    progressed: bool = False

    def outcome(self, line: str, *, done: bool = False, blocked: str | None = None) -> RetireOutcome:
        return RetireOutcome(self.state.name, self.state, done, self.progressed, blocked, line)


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

    def retire(self, action: RetireCheckpoints) -> RetirementReported:
        """Carry out one pass of ``action``: one outcome per directory reached, in order."""
        bucket, prefix = parse_s3_uri(action.s3_uri)
        archive = parse_s3_uri(action.archive_uri) if action.archive_uri else None
        recorded = {p.name: p for p in action.progress}
        self._left, self._deadline = self._max_objects, self._clock() + self._budget_s
        outcomes: list[RetireOutcome] = []
        for index, name in enumerate(action.names):
            # the decision counts passes without progress (domain/checkpoints/retirement.py), not the adapter
            work = _Work(replace(recorded.get(name) or RetireProgress(name), stalled=0))
            try:
                outcomes.append(self._retire_one(bucket, prefix, work, archive, action.markers))
            except _OutOfBudget as cut:
                if cut.listing is not None:
                    why = f"listing {cut.listing} takes longer than a pass ({self._budget_s:g} s)"
                    # only a directory that had the whole pass is blocked by its size
                    blocked = why if index == 0 and not work.progressed else None
                    outcomes.append(
                        work.outcome(f"{name}: unfinished ({why}); the next pass continues", blocked=blocked)
                    )
                else:
                    outcomes.append(
                        work.outcome(
                            f"{name}: unfinished (this pass's bound reached; {progress_text(work.state)}); "
                            "the next pass continues"
                        )
                    )
                break
            except CheckpointRetireError as exc:
                line = f"{name}: stopped ({progress_text(work.state)})"
                outcomes.append(work.outcome(line, blocked=str(exc) if exc.blocks else None))
                return RetirementReported(action.s3_uri, tuple(outcomes), str(exc))
        return RetirementReported(action.s3_uri, tuple(outcomes))

    # --- one directory ---------------------------------------------------------------------

    def _retire_one(
        self,
        bucket: str,
        prefix: str,
        work: _Work,
        archive: tuple[str, str] | None,
        markers: tuple[str, ...],
    ) -> RetireOutcome:
        name = work.state.name
        source = f"{prefix}{name}/"
        objects = self._list(bucket, source)
        if not objects:
            return work.outcome(f"{name}: already gone from s3://{bucket}/{source}", done=True)
        total = sum(o.size for o in objects)
        order = _copy_order(objects, markers)
        if archive is None:
            self._delete(bucket, source, order, markers, work, {})
            return work.outcome(f"{name}: {len(objects)} objects, {total:,} bytes deleted", done=True)
        dst_bucket, dst_root = archive
        target = f"{dst_root}{name}/"
        copies = {o.rel: o for o in self._list(dst_bucket, target)}
        proven = self._trusted(work, order, copies)
        digest = _Digest()
        for obj in order[:proven]:
            digest.add(obj, copies[obj.rel].etag)
        for obj in order[proven:]:
            self._spend()  # a proof or a copy: what an earlier pass proved is not charged again
            etag = self._prove_or_copy(
                bucket, source + obj.rel, obj, dst_bucket, target + obj.rel, copies, work
            )
            copies[obj.rel] = _Object(obj.rel, obj.size, etag)
            digest.add(obj, etag)
            proven += 1
            work.state = replace(work.state, verified=proven, digest=digest.value, upload=None, parts=0)
            work.progressed = True
        self._delete(bucket, source, order, markers, work, copies)
        where = f"moved to s3://{dst_bucket}/{target}"
        return work.outcome(f"{name}: {len(objects)} objects, {total:,} bytes {where}", done=True)

    @staticmethod
    def _trusted(work: _Work, order: list[_Object], copies: Mapping[str, _Object]) -> int:
        """How many objects (from the start of ``order``) earlier passes proved and both listings
        still show unchanged; the progress is reset to what this pass trusts."""
        st = work.state
        if st.phase == "delete":
            # every object still in the synced prefix was proven before deletes began
            trusted = len(order) if st.verified == len(order) and _digest(order, copies) == st.digest else 0
        else:
            n = st.verified
            trusted = n if 0 < n <= len(order) and _digest(order[:n], copies) == st.digest else 0
        upload = st.upload if trusted < len(order) and st.phase == "copy" else None
        work.state = replace(
            st,
            phase="copy",
            verified=trusted,
            digest=_digest(order[:trusted], copies) or "",
            upload=upload,
            parts=st.parts if upload is not None else 0,
        )
        return trusted

    def _prove_or_copy(
        self,
        bucket: str,
        key: str,
        obj: _Object,
        dst_bucket: str,
        dst_key: str,
        copies: Mapping[str, _Object],
        work: _Work,
    ) -> str:
        """The archive ETag of a proven copy of ``obj``: the one already there when the checksums
        of both prove it, else a new copy, checked."""
        there = copies.get(obj.rel)
        if there is not None and there.size == obj.size:
            src, dst = self._head(bucket, key), self._head(dst_bucket, dst_key)
            # a copy no record of ours names counts only when S3's checksums prove it
            if (
                src is not None
                and dst is not None
                and src.etag == obj.etag
                and same_content(src.checksums, dst.checksums)
            ):
                return dst.etag
        source_head: _Head | None = None
        if obj.size <= self._copy_object_max:
            written = self._copy_object(bucket, key, obj, dst_bucket, dst_key)
        else:
            written, source_head = self._copy_in_parts(bucket, key, obj, dst_bucket, dst_key, work)
        copy = self._head(dst_bucket, dst_key)
        differs = (
            copy is not None
            and source_head is not None
            and same_content(source_head.checksums, copy.checksums) is False
        )
        if copy is None or written is None or copy.etag != written or copy.size != obj.size or differs:
            raise CheckpointRetireError(
                f"the archive copy s3://{dst_bucket}/{dst_key} does not match its source "
                f"({obj.size} bytes): not deleting s3://{bucket}/{key}",
                code="CopyMismatch",
                mismatch=True,
            )
        return copy.etag

    def _spend(self) -> None:
        if self._left <= 0 or self._clock() >= self._deadline:
            raise _OutOfBudget
        self._left -= 1

    def _part_size(self, size: int) -> int:
        mib = 1024**2
        least = math.ceil(size / MAX_PARTS / mib) * mib  # 10,000 parts at most
        return max(self._part, least)

    # --- S3 calls ----------------------------------------------------------------------------

    def _list(self, bucket: str, prefix: str) -> list[_Object]:
        out: list[_Object] = []
        try:
            for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
                for o in page.get("Contents", ()):
                    key = str(o["Key"])
                    out.append(_Object(key[len(prefix) :], int(o.get("Size", 0)), str(o.get("ETag", ""))))
                if page.get("IsTruncated") and self._clock() >= self._deadline:
                    # a directory too large to list in what is left of this pass
                    raise _OutOfBudget(f"s3://{bucket}/{prefix} ({len(out):,}+ objects)")
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, f"cannot list s3://{bucket}/{prefix}") from exc
        return out

    def _head(self, bucket: str, key: str) -> _Head | None:
        try:
            answer = self._s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code", "")) in _NOT_FOUND:
                return None
            raise self._error(exc, f"cannot check s3://{bucket}/{key}") from exc
        except BotoCoreError as exc:
            raise self._error(exc, f"cannot check s3://{bucket}/{key}") from exc
        return _Head(
            int(answer.get("ContentLength", -1)),
            str(answer.get("ETag", "")),
            checksums_of(answer),
            answer.get("ContentType"),
            dict(answer.get("Metadata") or {}),
        )

    def _copy_object(self, bucket: str, key: str, obj: _Object, dst_bucket: str, dst_key: str) -> str | None:
        """One CopyObject of the listed version; the ETag S3 says it wrote (None: no answer).
        Without ChecksumAlgorithm the copy keeps the source's checksum, which S3 computes on the
        source as it copies: a composite one stays comparable."""
        try:
            answer = self._s3.copy_object(
                Bucket=dst_bucket,
                Key=dst_key,
                CopySource={"Bucket": bucket, "Key": key},
                CopySourceIfMatch=obj.etag,
            )
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, f"cannot copy s3://{bucket}/{key} to s3://{dst_bucket}/{dst_key}") from exc
        result = (answer or {}).get("CopyObjectResult") or {}
        etag = result.get("ETag")
        return str(etag) if etag else None

    def _copy_in_parts(
        self, bucket: str, key: str, obj: _Object, dst_bucket: str, dst_key: str, work: _Work
    ) -> tuple[str | None, _Head]:
        """A multipart copy of the listed version, resumed from the upload the progress names;
        (the ETag S3 says it wrote, the source as HeadObject saw it)."""
        what = f"cannot copy s3://{bucket}/{key} to s3://{dst_bucket}/{dst_key}"
        source = self._head(bucket, key)
        if source is None or source.etag != obj.etag:
            raise CheckpointRetireError(
                f"{what}: the source changed after it was listed; the next pass lists it again"
            )
        algorithm = next(
            (a for a in FULL_OBJECT_MULTIPART if source.checksums.get(a, ("", ""))[1] == "FULL_OBJECT"),
            "CRC64NVME",
        )
        part = self._part_size(obj.size)
        done = self._resumable(dst_bucket, dst_key, obj, part, work)
        try:
            if done is None:
                self._abort_others(dst_bucket, dst_key)
                extra: dict[str, Any] = {"Metadata": dict(source.metadata)}
                if source.content_type:
                    extra["ContentType"] = source.content_type
                upload = str(
                    self._s3.create_multipart_upload(
                        Bucket=dst_bucket,
                        Key=dst_key,
                        ChecksumAlgorithm=algorithm,
                        ChecksumType="FULL_OBJECT",
                        **extra,
                    )["UploadId"]
                )
                done = {}
                work.state = replace(work.state, upload=(obj.rel, upload, obj.etag), parts=0)
            assert work.state.upload is not None
            upload = work.state.upload[1]
            for number, start in enumerate(range(0, obj.size, part), start=1):
                if number in done:
                    continue
                if self._clock() >= self._deadline:
                    raise _OutOfBudget  # the upload stays open: the next pass resumes it
                end = min(start + part, obj.size) - 1
                answer = self._s3.upload_part_copy(
                    Bucket=dst_bucket,
                    Key=dst_key,
                    UploadId=upload,
                    PartNumber=number,
                    CopySource={"Bucket": bucket, "Key": key},
                    CopySourceIfMatch=obj.etag,
                    CopySourceRange=f"bytes={start}-{end}",
                )
                result = answer["CopyPartResult"]
                done[number] = {"PartNumber": number, "ETag": result["ETag"], **_part_checksums(result)}
                work.state = replace(work.state, parts=len(done))
                work.progressed = True
            completed = self._s3.complete_multipart_upload(
                Bucket=dst_bucket,
                Key=dst_key,
                UploadId=upload,
                ChecksumType="FULL_OBJECT",
                MultipartUpload={"Parts": [done[n] for n in sorted(done)]},
            )
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, what) from exc
        etag = completed.get("ETag")
        return (str(etag) if etag else None), source

    def _resumable(
        self, bucket: str, key: str, obj: _Object, part: int, work: _Work
    ) -> dict[int, dict[str, Any]] | None:
        """The parts already copied of the upload the progress names for ``obj`` (None: there is
        none to resume: not recorded, of another version of the source, gone, or cut into other
        parts than this pass would make). An upload that cannot be resumed is aborted."""
        recorded = work.state.upload
        if recorded is None or recorded[0] != obj.rel:
            return None
        upload = recorded[1]
        parts = self._list_parts(bucket, key, upload) if recorded[2] == obj.etag else None
        expected = {n: min(part, obj.size - (n - 1) * part) for n in range(1, math.ceil(obj.size / part) + 1)}
        if parts is None or any(expected.get(n) != size for n, (size, _) in parts.items()):
            if parts is not None or recorded[2] != obj.etag:
                self._abort(bucket, key, upload)
            work.state = replace(work.state, upload=None, parts=0)
            return None
        return {n: entry for n, (_, entry) in parts.items()}

    def _list_parts(self, bucket: str, key: str, upload: str) -> dict[int, tuple[int, dict[str, Any]]] | None:
        """Part number -> (size, the part as CompleteMultipartUpload takes it); None when S3 no
        longer has the upload (completed or aborted)."""
        out: dict[int, tuple[int, dict[str, Any]]] = {}
        try:
            pages = self._s3.get_paginator("list_parts").paginate(Bucket=bucket, Key=key, UploadId=upload)
            for page in pages:
                for p in page.get("Parts", ()):
                    number = int(p["PartNumber"])
                    out[number] = (
                        int(p.get("Size", 0)),
                        {"PartNumber": number, "ETag": p["ETag"], **_part_checksums(p)},
                    )
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code", "")) in ("NoSuchUpload", "404"):
                return None
            raise self._error(exc, f"cannot list the parts of the copy to s3://{bucket}/{key}") from exc
        except BotoCoreError as exc:
            raise self._error(exc, f"cannot list the parts of the copy to s3://{bucket}/{key}") from exc
        return out

    def _abort_others(self, bucket: str, key: str) -> None:
        """Abort the open uploads of exactly ``key`` (it names the run: they are this run's, left
        by an invocation that died before it could report them), every page."""
        try:
            pages = self._s3.get_paginator("list_multipart_uploads").paginate(Bucket=bucket, Prefix=key)
            stale = [
                str(u["UploadId"]) for page in pages for u in page.get("Uploads", ()) if u.get("Key") == key
            ]
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, f"cannot list the open copies to s3://{bucket}/{key}") from exc
        for upload in stale:
            self._abort(bucket, key, upload)

    def _abort(self, bucket: str, key: str, upload: str) -> None:
        try:
            self._s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload)
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code", "")) == "NoSuchUpload":
                return
            raise self._error(exc, f"cannot abort the copy to s3://{bucket}/{key}") from exc
        except BotoCoreError as exc:
            raise self._error(exc, f"cannot abort the copy to s3://{bucket}/{key}") from exc

    def _delete(
        self,
        bucket: str,
        source: str,
        order: list[_Object],
        markers: tuple[str, ...],
        work: _Work,
        copies: Mapping[str, _Object],
    ) -> None:
        """Delete ``order`` from the synced prefix, the markers first (their own request), then
        the rest in batches; after each batch the progress names what is left (all proven)."""
        left = list(order)
        if copies:
            work.state = replace(
                work.state, phase="delete", verified=len(left), digest=_digest(left, copies) or ""
            )
        first = [o for o in left if o.rel in markers]
        rest = [o for o in left if o.rel not in markers]
        batches = ([first] if first else []) + [
            rest[i : i + DELETE_BATCH] for i in range(0, len(rest), DELETE_BATCH)
        ]
        for batch in batches:
            self._spend()
            self._delete_batch(bucket, [source + o.rel for o in batch])
            gone = {o.rel for o in batch}
            left = [o for o in left if o.rel not in gone]
            work.progressed = True
            if copies:
                work.state = replace(work.state, verified=len(left), digest=_digest(left, copies) or "")

    def _delete_batch(self, bucket: str, keys: list[str]) -> None:
        try:
            answer = self._s3.delete_objects(
                Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True}
            )
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, f"cannot delete s3://{bucket}/{keys[0]} ({len(keys)} keys)") from exc
        errors = (answer or {}).get("Errors") or []
        if errors:  # DeleteObjects answers 200 with an error per key it could not delete
            first = errors[0]
            code = str(first.get("Code", ""))
            logger.warning("DeleteObjects on s3://%s: %d keys not deleted: %s", bucket, len(errors), first)
            raise CheckpointRetireError(
                f"cannot delete s3://{bucket}/{first.get('Key', '')}: {code or 'error'} "
                f"({len(errors)} of {len(keys)} keys not deleted)",
                code=code or None,
            )

    @staticmethod
    def _error(exc: Exception, what: str) -> CheckpointRetireError:
        code = str(exc.response.get("Error", {}).get("Code", "")) if isinstance(exc, ClientError) else ""
        logger.warning("%s: %s", what, exc)
        return CheckpointRetireError(f"{what}: {code or exc}", code=code or None)


def _copy_order(objects: Iterable[_Object], markers: tuple[str, ...]) -> list[_Object]:
    """The order objects are copied and proven in: the completion markers last, so the archive
    copy only looks complete once everything else is there; by key otherwise."""
    return sorted(objects, key=lambda o: (o.rel in markers, o.rel))


def _part_checksums(part: Mapping[str, Any]) -> dict[str, str]:
    return {f"Checksum{a}": str(part[f"Checksum{a}"]) for a in CHECKSUMS if part.get(f"Checksum{a}")}
