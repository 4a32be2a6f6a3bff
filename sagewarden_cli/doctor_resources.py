"""The deploy preflight's resource checks: the training log group's subscription-filter slots, the
checkpoint buckets (owner, encryption; with checkpointRetention, versioning) and the Service Quotas
of the policy's instance types."""

from __future__ import annotations

import json
from typing import Any

from sagewarden_cli.doctor_settings import (
    AWS_MANAGED_S3_KEY,
    HEARTBEAT_FILTER,
    LEGACY_HEARTBEAT_FILTER,
    SUBSCRIPTION_SLOTS,
    TRAINING_LOG_GROUP,
    PreflightBase,
)
from sagewarden_cli.findings import FAIL, OK, WARN, Finding
from sagewarden_cli.findings import denied as _denied
from sagewarden_cli.findings import error_code as _code


def cross_account_bucket_policy(bucket: str, account: str, partition: str, stack_name: str) -> str:
    """What the owner of a bucket in another account must add to its bucket policy."""
    policy = {
        "Sid": "SagewardenCheckpointDiscovery",
        "Effect": "Allow",
        "Principal": {"AWS": f"arn:{partition}:iam::{account}:root"},
        "Action": ["s3:ListBucket", "s3:GetObject"],
        "Resource": [f"arn:{partition}:s3:::{bucket}", f"arn:{partition}:s3:::{bucket}/*"],
        "Condition": {"ArnLike": {"aws:PrincipalArn": f"arn:{partition}:iam::{account}:role/{stack_name}-*"}},
    }
    return "bucket policy statement to add: " + json.dumps(policy, separators=(",", ":"))


class ResourceChecks(PreflightBase):
    """Log slots, buckets and quotas (mixed into :class:`Preflight`)."""

    # log subscription slots --------------------------------------------------------------------
    def check_log_subscription(self) -> list[Finding]:
        from botocore.exceptions import ClientError

        if not self.config.log_subscription:
            return [
                Finding(
                    OK,
                    "log slots",
                    "logSubscription=false: no subscription filter; the sweep checks log silence itself",
                )
            ]
        ours = HEARTBEAT_FILTER.format(stack=self.stack_name, prefix=self.config.job_prefix)
        legacy = LEGACY_HEARTBEAT_FILTER.format(stack=self.stack_name)
        try:
            paginator = self.client("logs").get_paginator("describe_subscription_filters")
            names = [
                f["filterName"]
                for page in paginator.paginate(logGroupName=TRAINING_LOG_GROUP)
                for f in page.get("subscriptionFilters", [])
            ]
        except ClientError as exc:
            if _code(exc) == "ResourceNotFoundException":
                return [
                    Finding(OK, "log slots", f"{TRAINING_LOG_GROUP} does not exist yet; the stack creates it")
                ]
            if not _denied(exc):
                raise
            return [
                Finding(
                    WARN,
                    "log slots",
                    f"cannot list the subscription filters of {TRAINING_LOG_GROUP} (denied); if the deploy fails "
                    "with LimitExceededException, redeploy with -c logSubscription=false",
                )
            ]
        others = [n for n in names if n not in (ours, legacy)]
        if len(others) >= SUBSCRIPTION_SLOTS:
            return [
                Finding(
                    FAIL,
                    "log slots",
                    f"both subscription-filter slots of {TRAINING_LOG_GROUP} are taken ({', '.join(others)}): "
                    "deploy with -c logSubscription=false (the sweep then checks log silence itself, up to a "
                    "third of the window later: 10 minutes with the default 30) or free a slot",
                )
            ]
        if ours in names:
            return [Finding(OK, "log slots", f"the heartbeat subscription {ours} is already in place")]
        if legacy in names and len(others) + 2 > SUBSCRIPTION_SLOTS:
            # CloudFormation creates the renamed filter before it deletes the old one
            return [
                Finding(
                    FAIL,
                    "log slots",
                    f"this deploy renames the heartbeat subscription {legacy} to {ours} (the name now carries "
                    f"the job prefix), and CloudFormation creates the new filter before it deletes the old one: "
                    f"with {', '.join(others)} in the other slot of {TRAINING_LOG_GROUP} there is no room. Deploy "
                    "once with -c logSubscription=false (the old filter goes), then again without it",
                )
            ]
        if legacy in names:
            return [
                Finding(
                    OK, "log slots", f"the heartbeat subscription {legacy} is renamed {ours} (a free slot)"
                )
            ]
        free = SUBSCRIPTION_SLOTS - len(others)
        return [Finding(OK, "log slots", f"{free} of {SUBSCRIPTION_SLOTS} subscription-filter slots free")]

    # checkpoint buckets ------------------------------------------------------------------------
    def check_buckets(self) -> list[Finding]:
        buckets = tuple(self.config.checkpoint_buckets)
        if not buckets:
            return [
                Finding(
                    WARN,
                    "buckets",
                    "checkpointBuckets is empty: checkpoint discovery may read (list/get) every bucket; "
                    "name yours with -c checkpointBuckets=bucket-a,bucket-b",
                )
            ]
        s3 = self.client("s3")
        findings: list[Finding] = []
        for bucket in buckets:
            findings += self._check_bucket(s3, bucket)
        return findings

    def _check_bucket(self, s3: Any, bucket: str) -> list[Finding]:
        from botocore.exceptions import ClientError

        policy = cross_account_bucket_policy(bucket, self.account, self.partition, self.stack_name)
        try:
            s3.head_bucket(Bucket=bucket, ExpectedBucketOwner=self.account)
        except ClientError as exc:
            code = _code(exc)
            if code in {"404", "NoSuchBucket", "NotFound"}:
                return [
                    Finding(
                        FAIL,
                        "buckets",
                        f"checkpoint bucket {bucket} does not exist: fix -c checkpointBuckets",
                    )
                ]
            if code not in {"403", "AccessDenied", "Forbidden"}:
                raise
            try:
                s3.head_bucket(Bucket=bucket)
            except ClientError:
                return [
                    Finding(
                        WARN,
                        "buckets",
                        f"cannot read bucket {bucket} (403): either your credentials lack s3:ListBucket on it, or "
                        "another account owns it; then its owner must add this to the bucket policy",
                        detail=policy,
                    )
                ]
            return [
                Finding(
                    WARN,
                    "buckets",
                    f"bucket {bucket} belongs to another account: its owner must let this deployment's "
                    "functions list and read it (and, for SSE-KMS, its key policy must allow kms:Decrypt)",
                    detail=policy,
                )
            ]
        return self._check_encryption(s3, bucket) + self._check_versioning(s3, bucket)

    def _check_versioning(self, s3: Any, bucket: str) -> list[Finding]:
        """With checkpointRetention: a versioned bucket keeps what retention deletes as noncurrent
        versions (billed as before) unless a lifecycle rule expires them (the rule a retention
        run's submit checks too: domain/checkpoints/retirement.py)."""
        if not self.config.checkpoint_retention:
            return []
        from sagewarden.adapters.s3_bucket_versioning import S3BucketVersioning
        from sagewarden.domain.checkpoints.retirement import versioning_warning

        try:
            facts = S3BucketVersioning(s3).versioning(bucket)
        except Exception as exc:  # CheckpointLookupError: unknown, never "not versioned"
            return [
                Finding(
                    WARN,
                    "buckets",
                    f"{bucket}: cannot read its versioning or lifecycle rules ({exc}): if it is versioned, "
                    "checkpoint retention frees storage only where a lifecycle rule expires noncurrent versions",
                )
            ]
        if facts.status is None:
            return [
                Finding(
                    OK, "buckets", f"{bucket}: not versioned: checkpoint retention's deletes free storage"
                )
            ]
        warning = versioning_warning(f"s3://{bucket}/", facts)
        if warning is None:
            return [
                Finding(
                    OK, "buckets", f"{bucket}: versioned, and a lifecycle rule expires noncurrent versions"
                )
            ]
        covered = sorted(
            r.prefix for r in facts.rules if r.enabled and r.noncurrent_expiration and r.prefix is not None
        )
        if covered:
            warning += f" (noncurrent versions expire only under {', '.join(covered)})"
        return [Finding(WARN, "buckets", warning)]

    def _check_encryption(self, s3: Any, bucket: str) -> list[Finding]:
        from botocore.exceptions import ClientError

        try:
            rules = s3.get_bucket_encryption(Bucket=bucket, ExpectedBucketOwner=self.account)[
                "ServerSideEncryptionConfiguration"
            ]["Rules"]
        except ClientError as exc:
            if _code(exc) == "ServerSideEncryptionConfigurationNotFoundError":
                return [Finding(OK, "buckets", f"{bucket}: exists, no default encryption")]
            if not _denied(exc):
                raise
            return [
                Finding(
                    WARN,
                    "buckets",
                    f"{bucket}: exists; cannot read its encryption (denied): if it uses SSE-KMS with your own "
                    "key, pass -c checkpointKmsKeyArns=<key ARN>",
                )
            ]
        default = rules[0].get("ApplyServerSideEncryptionByDefault", {}) if rules else {}
        algorithm = default.get("SSEAlgorithm", "")
        if not algorithm.startswith("aws:kms"):
            return [Finding(OK, "buckets", f"{bucket}: exists, encrypted with {algorithm or 'no default'}")]
        key = default.get("KMSMasterKeyID")
        if not key or key.endswith(AWS_MANAGED_S3_KEY):
            return [Finding(OK, "buckets", f"{bucket}: exists, SSE-KMS with the AWS managed key aws/s3")]
        key_arn, managed_by_aws = self._resolve_key(key)
        if managed_by_aws:
            return [Finding(OK, "buckets", f"{bucket}: exists, SSE-KMS with an AWS managed key")]
        if key_arn in self.config.checkpoint_kms_key_arns:
            return [Finding(OK, "buckets", f"{bucket}: exists, SSE-KMS with {key_arn} (kms:Decrypt granted)")]
        return [
            Finding(
                FAIL,
                "buckets",
                f"{bucket} encrypts with the KMS key {key_arn}: checkpoint discovery reads objects there, which "
                f"needs kms:Decrypt: pass -c checkpointKmsKeyArns={key_arn} (the key policy must allow IAM "
                "policies of this account, as the default key policy does)",
            )
        ]

    def _resolve_key(self, key: str) -> tuple[str, bool]:
        """(key ARN, whether AWS manages the key) for a key id, key ARN, alias or alias ARN."""
        from botocore.exceptions import ClientError

        try:
            metadata = self.client("kms").describe_key(KeyId=key)["KeyMetadata"]
            return str(metadata["Arn"]), metadata.get("KeyManager") == "AWS"
        except ClientError:
            if key.startswith("arn:"):
                return key, False
            return f"arn:{self.partition}:kms:{self.region}:{self.account}:key/{key}", False

    # quotas ------------------------------------------------------------------------------------
    def instance_types(self) -> list[str]:
        from sagewarden.domain.vocabulary.policy import RunPolicy

        policy = RunPolicy.from_dict(dict(self.config.policy_defaults))
        types = [c.instance_type for c in policy.instance_fallbacks] + list(self.extra_instance_types)
        return list(dict.fromkeys(types))

    def check_quotas(self) -> list[Finding]:
        from botocore.exceptions import ClientError

        from sagewarden.domain.vocabulary.policy import RunPolicy

        types = self.instance_types()
        if not types:
            return [
                Finding(
                    OK,
                    "quotas",
                    "no instance types to check (none in policyDefaults.instance_fallbacks; "
                    "--instance-type ml.p5.48xlarge checks one)",
                )
            ]
        try:
            quotas = self._sagemaker_quotas()
        except ClientError as exc:
            if not _denied(exc):
                raise
            return [
                Finding(
                    WARN, "quotas", "cannot read SageMaker quotas (servicequotas:ListServiceQuotas denied)"
                )
            ]
        from sagewarden.domain.capacity.quotas import training_quota, warm_pool_quota

        keep_alive = RunPolicy.from_dict(dict(self.config.policy_defaults)).keep_alive_seconds
        spot = self.spot  # managed spot training: its own quotas, and no warm pool
        findings = []
        for instance_type in types:
            wanted = [training_quota(instance_type, spot=spot)]
            if keep_alive > 0 and not spot:
                wanted.append(warm_pool_quota(instance_type))
            for name in wanted:
                value = quotas.get(name)
                if value is None:
                    findings.append(
                        Finding(
                            WARN,
                            "quotas",
                            f"no quota '{name}' in {self.region}: is {instance_type} offered here?",
                        )
                    )
                elif value < 1:
                    findings.append(
                        Finding(
                            WARN,
                            "quotas",
                            f"'{name}' is 0: request an increase in Service Quotas before runs use {instance_type}",
                        )
                    )
                else:
                    findings.append(Finding(OK, "quotas", f"'{name}' is {value:g}"))
        return findings

    def _sagemaker_quotas(self) -> dict[str, float]:
        """Quota name -> value: the account's applied values, AWS's defaults where none is applied."""
        from botocore.exceptions import ClientError

        client = self.client("service-quotas")
        values: dict[str, float] = {}
        for operation in ("list_aws_default_service_quotas", "list_service_quotas"):
            try:
                for page in client.get_paginator(operation).paginate(ServiceCode="sagemaker"):
                    for quota in page.get("Quotas", []):
                        values[str(quota["QuotaName"])] = float(quota.get("Value", 0.0))
            except ClientError as exc:
                if operation == "list_service_quotas" or not (
                    _denied(exc) or _code(exc) == "NoSuchResourceException"
                ):
                    raise
        return values
