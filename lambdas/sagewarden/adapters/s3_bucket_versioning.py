"""Whether checkpoint retention can free storage in a bucket: its versioning status and lifecycle rules.

Read at a retention run's submit and by `make doctor`; the rule is `domain/checkpoints/retirement.py`'s
`versioning_warning`. An error raises CheckpointLookupError (unknown). Why: docs/checkpoints.md."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sagewarden.adapters.s3_checkpoint_finder import CheckpointLookupError
from sagewarden.domain.checkpoints.retirement import BucketVersioning, LifecycleRule

_NO_RULES = "NoSuchLifecycleConfiguration"


def lifecycle_rule(rule: Mapping[str, Any]) -> LifecycleRule:
    """A lifecycle rule as retention cares for it: its filter's prefix when the filter is a key
    prefix alone (the whole bucket: ""), None when it also filters on tags or object sizes."""
    prefix: str | None
    if "Filter" in rule:
        found = dict(rule.get("Filter") or {})
        both = dict(found.get("And") or {}) if set(found) == {"And"} else None
        if not found:
            prefix = ""
        elif set(found) == {"Prefix"}:
            prefix = str(found.get("Prefix") or "")
        elif both is not None and not both.get("Tags") and set(both) - {"Tags"} <= {"Prefix"}:
            prefix = str(both.get("Prefix") or "")
        else:
            prefix = None  # a tag or size filter: some checkpoint objects may be outside it
    else:
        prefix = str(rule.get("Prefix") or "")  # the older rule-level prefix
    return LifecycleRule(
        prefix=prefix,
        enabled=rule.get("Status") == "Enabled",
        noncurrent_expiration=bool(rule.get("NoncurrentVersionExpiration")),
    )


class S3BucketVersioning:
    def __init__(self, s3_client: Any) -> None:
        self._s3 = s3_client

    def versioning(self, bucket: str) -> BucketVersioning:
        try:
            status = self._s3.get_bucket_versioning(Bucket=bucket).get("Status") or None
        except (ClientError, BotoCoreError) as exc:
            raise _error(exc, f"cannot read the versioning of s3://{bucket}") from exc
        if status not in ("Enabled", "Suspended"):
            return BucketVersioning(bucket, None)
        try:
            rules = self._s3.get_bucket_lifecycle_configuration(Bucket=bucket).get("Rules", ())
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code", "")) != _NO_RULES:
                raise _error(exc, f"cannot read the lifecycle rules of s3://{bucket}") from exc
            rules = ()
        except BotoCoreError as exc:
            raise _error(exc, f"cannot read the lifecycle rules of s3://{bucket}") from exc
        return BucketVersioning(bucket, str(status), tuple(lifecycle_rule(r) for r in rules))


def _error(exc: Exception, what: str) -> CheckpointLookupError:
    code = str(exc.response.get("Error", {}).get("Code", "")) if isinstance(exc, ClientError) else ""
    return CheckpointLookupError(f"{what}: {code or exc}", code=code or None)
