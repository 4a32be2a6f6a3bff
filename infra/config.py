"""Deployment configuration of sagewarden, parsed and validated from CDK context.

Context comes from three places, later ones winning: the defaults in ``cdk.json``, the CDK
CLI (``cdk deploy -c allowedRoleArns='["arn:aws:iam::123456789012:role/Train"]'``) and
programmatic callers (tests). CLI values always arrive as strings, so list values accept a
real list, a JSON list, or a comma-separated string, and booleans accept the usual spellings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from sagewarden import keys
from sagewarden.domain.vocabulary.policy import PolicyError, RunPolicy
from sagewarden.domain.vocabulary.redaction import secret_key, secret_text

from . import constants

# Context keys (camelCase, as typed on the command line)
CTX_ALERT_EMAIL = "alertEmail"
CTX_ALLOWED_ROLE_ARNS = "allowedRoleArns"
CTX_JOB_PREFIX = "jobPrefix"
CTX_POLICY_DEFAULTS = "policyDefaults"
CTX_CHECKPOINT_BUCKETS = "checkpointBuckets"
CTX_LOG_SUBSCRIPTION = "logSubscription"
CTX_POWERTOOLS_VERSION = "powertoolsVersion"
CTX_ARCHITECTURE = "architecture"
CTX_API_GATEWAY_ACCOUNT_ROLE = "apiGatewayAccountRole"
CTX_API_LOGGING = "apiLogging"
CTX_CHECKPOINT_KMS_KEY_ARNS = "checkpointKmsKeyArns"
CTX_STACK_NAME = "stackName"
CTX_TRACING = "tracing"
CTX_ADMIN_ROLE_ARNS = "adminRoleArns"
CTX_TABLE_KMS_KEY_ARN = "tableKmsKeyArn"
CTX_RESERVED_CONCURRENCY = "reservedConcurrency"
CTX_CHECKPOINT_RETENTION = "checkpointRetention"
CTX_READ_SCOPE = "readScope"

CONTEXT_KEYS = (
    CTX_STACK_NAME,
    CTX_ALERT_EMAIL,
    CTX_ALLOWED_ROLE_ARNS,
    CTX_JOB_PREFIX,
    CTX_POLICY_DEFAULTS,
    CTX_CHECKPOINT_BUCKETS,
    CTX_LOG_SUBSCRIPTION,
    CTX_POWERTOOLS_VERSION,
    CTX_ARCHITECTURE,
    CTX_API_GATEWAY_ACCOUNT_ROLE,
    CTX_API_LOGGING,
    CTX_CHECKPOINT_KMS_KEY_ARNS,
    CTX_TRACING,
    CTX_ADMIN_ROLE_ARNS,
    CTX_TABLE_KMS_KEY_ARN,
    CTX_RESERVED_CONCURRENCY,
    CTX_CHECKPOINT_RETENTION,
    CTX_READ_SCOPE,
)

# An IAM role ARN, any partition, optional path (e.g. arn:aws:iam::123456789012:role/ml/Train).
_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/(?:[\w+=,.@-]+/)*[\w+=,.@-]{1,64}$")
_JOB_PREFIX = re.compile(r"^[a-z0-9]{1,8}$")
# A CloudFormation stack name is [A-Za-z][A-Za-z0-9-]{0,127}. Shorter here: the names CloudFormation
# generates for the stack's IAM roles (64 characters at most) keep the stack name whole only up to
# about 25 characters (observed, not documented), and the cross-account bucket policy the preflight
# prints matches the roles by `role/<stack name>-*`.
STACK_NAME_MAX = 25
_STACK_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]*$")
# S3 general purpose bucket naming rules (no upper case, no underscores, 3-63 chars).
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
# A KMS key ARN (not an alias: IAM authorises kms:Decrypt against the key's ARN).
_KMS_KEY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/(?:mrk-)?[0-9a-fA-F-]{32,36}$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_SEMVER = re.compile(r"^\d+\.\d+\.\d+$")
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


class ConfigError(ValueError):
    """A context value is missing, malformed or out of range."""


@dataclass(frozen=True)
class SupervisorConfig:
    """Validated settings of one sagewarden deployment. Several may share an account and region
    when each has its own stack name and job prefix."""

    # The CloudFormation stack (also the prefix of its generated resource names)
    stack_name: str = constants.STACK_ID
    alert_email: str | None = None
    # IAM roles runs may pass to SageMaker. Empty: PassRole is granted on nothing and every
    # submission is rejected by SageMaker (synth still works, e.g. for CI).
    allowed_role_arns: tuple[str, ...] = ()
    job_prefix: str = keys.DEFAULT_JOB_PREFIX
    policy_defaults: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    # Buckets the supervisor may read for checkpoint discovery. Empty: all buckets.
    checkpoint_buckets: tuple[str, ...] = ()
    log_subscription: bool = True
    powertools_version: str = constants.DEFAULT_POWERTOOLS_VERSION
    architecture: str = constants.DEFAULT_ARCHITECTURE
    # Set the region's account-wide API Gateway CloudWatch Logs role (AWS::ApiGateway::Account).
    # Off by default: it changes a setting shared by every REST API of the account and region
    # and outlives the stack. The API's logs need that role to be set, by this stack or otherwise.
    api_gateway_account_role: bool = False
    # API Gateway access and execution logs (need the account role above to be set in the region).
    api_logging: bool = True
    # X-Ray active tracing of the functions and the API stage: opt-in, since the X-Ray SDK adds
    # about 0.35 s to every cold start (observability.LazyTracer)
    tracing: bool = False
    # KMS keys of SSE-KMS checkpoint buckets: checkpoint discovery gets kms:Decrypt on them.
    checkpoint_kms_key_arns: tuple[str, ...] = ()
    # IAM roles whose sessions may cancel and resume any run (everyone else: only their own)
    admin_role_arns: tuple[str, ...] = ()
    # A customer-managed KMS key (same region) for the state table, which stores every run's
    # request; None: the AWS-managed DynamoDB key
    table_kms_key_arn: str | None = None
    # Reserved concurrency for each function (constants.FunctionSpec.reserved_concurrency, 33 in
    # all). Off by default: AWS refuses a reservation that leaves fewer than 100 unreserved
    # executions in the region, and a new account has 10 in all.
    reserved_concurrency: bool = False
    # Checkpoint retention (policy checkpoint_keep): the control functions may copy and delete
    # objects in the checkpoint buckets. Off by default (discovery only reads); runs asking for
    # retention are refused by a deployment without it.
    checkpoint_retention: bool = False
    # Who may list and read runs: "all" (every caller the API's IAM policy admits: a team's shared
    # view) or "owner" (a run's owner and the admins; anyone else is answered 404)
    read_scope: str = "all"

    def __post_init__(self) -> None:
        if not _STACK_NAME.match(self.stack_name) or len(self.stack_name) > STACK_NAME_MAX:
            raise ConfigError(
                f"{CTX_STACK_NAME}: 1-{STACK_NAME_MAX} letters, digits and hyphens, starting with a letter, "
                f"got {self.stack_name!r}"
            )
        if self.alert_email is not None and not _EMAIL.match(self.alert_email):
            raise ConfigError(f"{CTX_ALERT_EMAIL}: not an e-mail address: {self.alert_email!r}")
        for arn in self.allowed_role_arns:
            if not _ROLE_ARN.match(arn):
                raise ConfigError(
                    f"{CTX_ALLOWED_ROLE_ARNS}: not an IAM role ARN: {arn!r} "
                    "(expected arn:aws:iam::<12-digit account>:role/<name>)"
                )
        if len(set(self.allowed_role_arns)) != len(self.allowed_role_arns):
            raise ConfigError(f"{CTX_ALLOWED_ROLE_ARNS}: duplicate entries")
        for arn in self.admin_role_arns:
            if not _ROLE_ARN.match(arn):
                raise ConfigError(
                    f"{CTX_ADMIN_ROLE_ARNS}: not an IAM role ARN: {arn!r} "
                    "(expected arn:aws:iam::<12-digit account>:role/<name>)"
                )
        if self.table_kms_key_arn is not None and not _KMS_KEY_ARN.match(self.table_kms_key_arn):
            raise ConfigError(
                f"{CTX_TABLE_KMS_KEY_ARN}: not a KMS key ARN: {self.table_kms_key_arn!r} "
                "(expected arn:aws:kms:<region>:<account>:key/<key id>; an alias does not work in IAM)"
            )
        if self.read_scope not in keys.READ_SCOPES:
            raise ConfigError(
                f"{CTX_READ_SCOPE}: one of {', '.join(keys.READ_SCOPES)}, got {self.read_scope!r}"
            )
        if not _JOB_PREFIX.match(self.job_prefix):
            raise ConfigError(f"{CTX_JOB_PREFIX}: must be 1-8 characters [a-z0-9], got {self.job_prefix!r}")
        if self.checkpoint_retention and not self.checkpoint_buckets:
            raise ConfigError(
                f"{CTX_CHECKPOINT_RETENTION} needs {CTX_CHECKPOINT_BUCKETS}: retention copies and deletes "
                "checkpoint objects, and those writes are never granted on every bucket"
            )
        for bucket in self.checkpoint_buckets:
            if not _BUCKET.match(bucket) or ".." in bucket:
                raise ConfigError(f"{CTX_CHECKPOINT_BUCKETS}: not an S3 bucket name: {bucket!r}")
        for key_arn in self.checkpoint_kms_key_arns:
            if not _KMS_KEY_ARN.match(key_arn):
                raise ConfigError(
                    f"{CTX_CHECKPOINT_KMS_KEY_ARNS}: not a KMS key ARN: {key_arn!r} "
                    "(expected arn:aws:kms:<region>:<account>:key/<key id>; an alias does not work in IAM)"
                )
        if not isinstance(self.policy_defaults, Mapping) or not all(
            isinstance(k, str) for k in self.policy_defaults
        ):
            raise ConfigError(f"{CTX_POLICY_DEFAULTS}: must be a JSON object")
        try:
            json.dumps(dict(self.policy_defaults))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{CTX_POLICY_DEFAULTS}: not JSON-serialisable: {exc}") from exc
        try:  # the functions parse it at cold start: a typo must fail the synth, not every invocation
            defaults = RunPolicy.from_dict(dict(self.policy_defaults))
        except PolicyError as exc:
            raise ConfigError(f"{CTX_POLICY_DEFAULTS}.{exc.field}: {exc.message}") from exc
        _refuse_secret_defaults(defaults.environment_defaults)
        if not _SEMVER.match(self.powertools_version):
            raise ConfigError(
                f"{CTX_POWERTOOLS_VERSION}: must be an exact version such as "
                f"{constants.DEFAULT_POWERTOOLS_VERSION!r}, got {self.powertools_version!r}"
            )
        if self.architecture not in constants.SUPPORTED_ARCHITECTURES:
            raise ConfigError(
                f"{CTX_ARCHITECTURE}: one of {', '.join(constants.SUPPORTED_ARCHITECTURES)}, "
                f"got {self.architecture!r}"
            )
        # Freeze the mapping so the dataclass is immutable all the way down.
        object.__setattr__(self, "policy_defaults", MappingProxyType(dict(self.policy_defaults)))

    @property
    def policy_defaults_json(self) -> str:
        return json.dumps(dict(self.policy_defaults), sort_keys=True, separators=(",", ":"))

    @property
    def allowed_role_arns_json(self) -> str:
        return json.dumps(list(self.allowed_role_arns), separators=(",", ":"))

    @property
    def admin_role_arns_json(self) -> str:
        return json.dumps(list(self.admin_role_arns), separators=(",", ":"))

    @property
    def powertools_layer_parameter(self) -> str:
        return constants.POWERTOOLS_LAYER_PARAMETER.format(
            arch=self.architecture, version=self.powertools_version
        )

    @classmethod
    def from_context(cls, get: Callable[[str], Any]) -> SupervisorConfig:
        """Build from a context getter such as ``app.node.try_get_context``."""
        return cls.from_mapping({key: get(key) for key in CONTEXT_KEYS})

    @classmethod
    def from_mapping(cls, context: Mapping[str, Any]) -> SupervisorConfig:
        """Build from a mapping of context keys; missing or ``None`` values take defaults."""
        kwargs: dict[str, Any] = {}
        stack_name = _optional_str(context.get(CTX_STACK_NAME))
        if stack_name is not None:
            kwargs["stack_name"] = stack_name
        email = _optional_str(context.get(CTX_ALERT_EMAIL))
        if email is not None:
            kwargs["alert_email"] = email
        roles = context.get(CTX_ALLOWED_ROLE_ARNS)
        if roles is not None:
            kwargs["allowed_role_arns"] = parse_str_list(roles, CTX_ALLOWED_ROLE_ARNS)
        prefix = _optional_str(context.get(CTX_JOB_PREFIX))
        if prefix is not None:
            kwargs["job_prefix"] = prefix
        policy = context.get(CTX_POLICY_DEFAULTS)
        if policy is not None:
            kwargs["policy_defaults"] = parse_object(policy, CTX_POLICY_DEFAULTS)
        buckets = context.get(CTX_CHECKPOINT_BUCKETS)
        if buckets is not None:
            kwargs["checkpoint_buckets"] = parse_str_list(buckets, CTX_CHECKPOINT_BUCKETS)
        subscription = context.get(CTX_LOG_SUBSCRIPTION)
        if subscription is not None:
            kwargs["log_subscription"] = parse_bool(subscription, CTX_LOG_SUBSCRIPTION)
        version = _optional_str(context.get(CTX_POWERTOOLS_VERSION))
        if version is not None:
            kwargs["powertools_version"] = version
        arch = _optional_str(context.get(CTX_ARCHITECTURE))
        if arch is not None:
            kwargs["architecture"] = arch
        for ctx_key, attr in (
            (CTX_API_GATEWAY_ACCOUNT_ROLE, "api_gateway_account_role"),
            (CTX_API_LOGGING, "api_logging"),
            (CTX_TRACING, "tracing"),
            (CTX_RESERVED_CONCURRENCY, "reserved_concurrency"),
            (CTX_CHECKPOINT_RETENTION, "checkpoint_retention"),
        ):
            flag = context.get(ctx_key)
            if flag is not None:
                kwargs[attr] = parse_bool(flag, ctx_key)
        kms_keys = context.get(CTX_CHECKPOINT_KMS_KEY_ARNS)
        if kms_keys is not None:
            kwargs["checkpoint_kms_key_arns"] = parse_str_list(kms_keys, CTX_CHECKPOINT_KMS_KEY_ARNS)
        admins = context.get(CTX_ADMIN_ROLE_ARNS)
        if admins is not None:
            kwargs["admin_role_arns"] = parse_str_list(admins, CTX_ADMIN_ROLE_ARNS)
        scope = _optional_str(context.get(CTX_READ_SCOPE))
        if scope is not None:
            kwargs["read_scope"] = scope
        table_key = _optional_str(context.get(CTX_TABLE_KMS_KEY_ARN))
        if table_key is not None:
            kwargs["table_kms_key_arn"] = table_key
        return cls(**kwargs)


# a reference to a secret, not the secret: what the training script reads with the execution role
_SECRET_REFERENCE = re.compile(
    r"^arn:aws[a-z-]*:(?:secretsmanager|ssm):[a-z0-9-]+:\d{12}:(?:secret|parameter)[:/]\S+$"
)


def _refuse_secret_defaults(environment: tuple[tuple[str, str], ...]) -> None:
    """policyDefaults goes into every function's environment, in plain text, and into every
    attempt's: a secret-looking key (or a value that looks secret by itself, whatever its key) is
    refused, unless the value is a Secrets Manager or Parameter Store ARN (a reference)."""
    for key, value in environment:
        if _SECRET_REFERENCE.match(value):
            continue
        why = None
        if secret_key(key):
            why = "the key looks like it names a secret"
        elif secret_text(value):
            why = "the value looks like a secret (a token, or a URL with a password)"
        if why:
            raise ConfigError(
                f"{CTX_POLICY_DEFAULTS}.environment_defaults.{key}: {why}, and {CTX_POLICY_DEFAULTS} is "
                "written in plain text into every function's environment (and every training job's). "
                "Keep the value in AWS Secrets Manager and pass its ARN instead (e.g. "
                f"{key}=arn:aws:secretsmanager:<region>:<account>:secret:<name>), for the training "
                "script to read with its execution role"
            )


def _optional_str(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"expected a string, got {type(value).__name__}: {value!r}")
    value = value.strip()
    return value or None


def parse_str_list(value: Any, name: str) -> tuple[str, ...]:
    """A list of strings from a list, a JSON list string or a comma-separated string."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{name}: invalid JSON list: {exc}") from exc
        else:
            value = [part for part in (p.strip() for p in text.split(",")) if part]
    if not isinstance(value, list | tuple):
        raise ConfigError(f"{name}: expected a list of strings, got {type(value).__name__}")
    items = []
    for item in value:
        if not isinstance(item, str):
            raise ConfigError(f"{name}: expected strings, got {type(item).__name__}: {item!r}")
        if item.strip():
            items.append(item.strip())
    return tuple(items)


def parse_bool(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ConfigError(f"{name}: expected true or false, got {value!r}")


def parse_object(value: Any, name: str) -> Mapping[str, Any]:
    if isinstance(value, str):
        text = value.strip() or "{}"
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{name}: invalid JSON object: {exc}") from exc
    if not isinstance(value, Mapping):
        raise ConfigError(f"{name}: expected a JSON object, got {type(value).__name__}")
    return value
