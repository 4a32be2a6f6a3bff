"""S3 directory buckets over moto's general purpose buckets: their names, listing rules and unordered
pages. Why: docs/fidelity.md (S3 directory buckets)."""

from __future__ import annotations

import hashlib
import random
import re
from typing import Any

from drill.account.backend_clients import _Shortcut
from drill.sim.texts import client_error

# <base>--<zone-id>--x-s3: the zone an Availability Zone (usw2-az1) or a Local Zone (use1-lax1-az1)
DIRECTORY_BUCKET = re.compile(r"[a-z0-9][a-z0-9-]*?--[a-z0-9]+(?:-[a-z0-9]+)*-az[0-9]+--x-s3")
_TOKEN = "dirbucket:"


def is_directory_bucket(name: str) -> bool:
    return DIRECTORY_BUCKET.fullmatch(name) is not None


def backing_name(name: str) -> str:
    """The moto bucket a directory bucket's objects are kept in."""
    return "sim-dir-" + hashlib.sha256(name.encode()).hexdigest()[:24]


class DirectoryBucketS3(_Shortcut):
    """An S3 client for tests and drills with directory buckets: ``create_bucket`` of a
    ``--x-s3`` name makes one, ``list_objects_v2`` (and its paginator) follow its rules."""

    PAGED = {"list_objects_v2": ("list_objects_v2", "MaxKeys", "ContinuationToken", "NextContinuationToken")}

    def __init__(self, moto_client: Any) -> None:
        self._moto = moto_client
        self.calls: list[tuple[str, dict[str, Any]]] = []  # every call, as sent (tests read it)

    def __getattr__(self, name: str) -> Any:
        if name == "_moto":
            raise AttributeError(name)
        method = getattr(self._moto, name)
        if not callable(method):
            return method

        def call(**params: Any) -> Any:
            self.calls.append((name, dict(params)))
            return method(**self._renamed(params))

        return call

    @staticmethod
    def _renamed(params: dict[str, Any]) -> dict[str, Any]:
        out = dict(params)
        if is_directory_bucket(str(out.get("Bucket", ""))):
            out["Bucket"] = backing_name(str(out["Bucket"]))
        source = out.get("CopySource")
        if isinstance(source, dict) and is_directory_bucket(str(source.get("Bucket", ""))):
            out["CopySource"] = {**source, "Bucket": backing_name(str(source["Bucket"]))}
        return out

    def list_objects_v2(self, **params: Any) -> dict[str, Any]:
        self.calls.append(("list_objects_v2", dict(params)))
        bucket = str(params.get("Bucket", ""))
        if not is_directory_bucket(bucket):
            return dict(self._moto.list_objects_v2(**params))
        op = "ListObjectsV2"
        prefix = str(params.get("Prefix") or "")
        delimiter = params.get("Delimiter")
        if "StartAfter" in params:
            raise client_error("InvalidRequest", "StartAfter is not supported for directory buckets", op)
        if prefix and not prefix.endswith("/"):
            raise client_error(
                "InvalidRequest", "Prefixes must end in a delimiter (/) for directory buckets", op
            )
        if delimiter is not None and delimiter != "/":
            raise client_error(
                "InvalidRequest", "/ is the only supported delimiter for directory buckets", op
            )
        entries = self._entries(backing_name(bucket), prefix, delimiter)
        random.Random(f"{bucket}\n{prefix}\n{delimiter}").shuffle(entries)
        token = str(params.get("ContinuationToken") or "")
        start = int(token.removeprefix(_TOKEN)) if token.startswith(_TOKEN) else 0
        limit = min(int(params.get("MaxKeys") or 1000), 1000)
        page = entries[start : start + limit]
        truncated = start + limit < len(entries)
        out: dict[str, Any] = {
            "IsTruncated": truncated,
            "Name": bucket,
            "Prefix": prefix,
            "MaxKeys": limit,
            "KeyCount": len(page),
        }
        contents = [e for e in page if "Key" in e]
        common = [e for e in page if "Prefix" in e]
        if contents:
            out["Contents"] = contents
        if common:
            out["CommonPrefixes"] = common
        if delimiter is not None:
            out["Delimiter"] = delimiter
        if truncated:
            out["NextContinuationToken"] = f"{_TOKEN}{start + limit}"
        return out

    def _entries(self, backing: str, prefix: str, delimiter: str | None) -> list[dict[str, Any]]:
        """Every object under ``prefix`` (every moto page), rolled up into common prefixes at
        ``delimiter``: one list to shuffle and page."""
        contents: list[dict[str, Any]] = []
        common: dict[str, dict[str, str]] = {}
        for page in self._moto.get_paginator("list_objects_v2").paginate(Bucket=backing, Prefix=prefix):
            for obj in page.get("Contents", ()):
                key = str(obj["Key"])
                cut = key.find(delimiter, len(prefix)) if delimiter else -1
                if cut >= 0:
                    rolled = key[: cut + len(delimiter or "")]
                    common.setdefault(rolled, {"Prefix": rolled})
                else:
                    contents.append({**obj, "StorageClass": "EXPRESS_ONEZONE"})
        return contents + list(common.values())
