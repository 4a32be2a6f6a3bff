"""Deploy preflight (`sagewarden doctor`, `python -m sagewarden_cli.doctor`, run first by `make deploy`).

With your own AWS credentials, checks what a first `cdk deploy` of sagewarden needs and says in
one line each what is wrong and how to fix it:

* credentials and region resolve (sts:GetCallerIdentity); ``--credentials-only`` stops there
  (``make bootstrap`` runs that, before ``cdk bootstrap``);
* the job prefix is not used by another sagewarden stack of the account and region, and the stack
  name is not taken by a stack that is not sagewarden or runs another prefix
  (cloudformation:DescribeStacks without a name, which also needs ListStacks; sagewarden_cli/deployments.py); hang alarms under the prefix that no stack
  claims are a warning (cloudwatch:DescribeAlarms);
* the environment is CDK-bootstrapped (SSM ``/cdk-bootstrap/<qualifier>/version``, else the
  ``CDKToolkit`` stack), recently enough for this app;
* ``allowedRoleArns`` is set, and each role is in this account, exists under exactly that ARN
  and trusts ``sagemaker.amazonaws.com`` (iam:GetRole);
* the API's logs can be written: the region's API Gateway CloudWatch Logs role is set, or the
  deployment sets it (``apiGatewayAccountRole=true``) or turns API logging off (apigateway:GET);
* the ``/aws/sagemaker/TrainingJobs`` log group has a free subscription-filter slot (it takes 2)
  when ``logSubscription`` is on (logs:DescribeSubscriptionFilters);
* each checkpoint bucket exists, who owns it, and its default encryption: an SSE-KMS bucket
  with a customer managed key needs that key in ``checkpointKmsKeyArns``; a bucket of another
  account needs a bucket policy, which is printed (s3:HeadBucket, s3:GetEncryptionConfiguration);
* warnings: the training-job and warm-pool quotas of the instance types in ``policyDefaults``
  (and ``--instance-type``), from Service Quotas.

The deployment settings are read as the CDK reads them: ``cdk.json``'s context, then
``-c key=value`` (the same flags you pass to ``cdk deploy``; ``make deploy`` passes the same).
A check this identity is not allowed to make is a warning, not a failure.

Exit codes: 0 nothing blocks the deploy (warnings may remain), 1 something does, 2 usage or
configuration error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any
from urllib.parse import unquote

from sagewarden_cli.findings import FAIL, OK, WARN, Finding
from sagewarden_cli.findings import denied as _denied
from sagewarden_cli.findings import error_code as _code

STACK_NAME = "Sagewarden"  # infra.constants.STACK_ID, the default of the stackName context
TRAINING_LOG_GROUP = "/aws/sagemaker/TrainingJobs"  # sagewarden.keys.TRAINING_LOG_GROUP
SUBSCRIPTION_SLOTS = 2
DEFAULT_QUALIFIER = "hnb659fds"
QUALIFIER_CONTEXT = "@aws-cdk/core:bootstrapQualifier"
# The synthesized template's CheckBootstrapVersion rule refuses versions 1-5.
MIN_BOOTSTRAP_VERSION = 6
SAGEMAKER_PRINCIPAL = "sagemaker.amazonaws.com"
AWS_MANAGED_S3_KEY = "alias/aws/s3"


class DoctorError(Exception):
    """A usage or configuration problem (exit 2)."""


# --- settings, as the CDK sees them -------------------------------------------------------------


def find_checkout(start: Path | None = None) -> Path:
    """The sagewarden checkout: next to this module, or the working directory or a parent of it."""
    candidates = [Path(__file__).resolve().parent.parent]
    here = (start or Path.cwd()).resolve()
    candidates += [here, *here.parents]
    for candidate in candidates:
        if (candidate / "cdk.json").is_file() and (candidate / "infra" / "config.py").is_file():
            return candidate
    raise DoctorError("cannot find the sagewarden checkout (cdk.json): run this from it")


def parse_context_args(pairs: Iterable[str]) -> dict[str, str]:
    """``key=value`` strings as ``cdk -c`` takes them (the value may contain ``=``)."""
    context: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise DoctorError(f"-c {pair!r}: expected key=value")
        context[key.strip()] = value
    return context


def load_context(checkout: Path, overrides: Mapping[str, str]) -> dict[str, Any]:
    """cdk.json's context, then cdk.context.json's, then the command line (CDK's order)."""
    context: dict[str, Any] = {}
    for name in ("cdk.json", "cdk.context.json"):
        path = checkout / name
        if path.is_file():
            data = json.loads(path.read_text(encoding="utf-8"))
            context.update(data.get("context", {}) if name == "cdk.json" else data)
    context.update(overrides)
    return context


def load_config(checkout: Path, context: Mapping[str, Any]) -> Any:
    """The deployment's ``SupervisorConfig``, validated exactly as the synth validates it."""
    for path in (str(checkout), str(checkout / "lambdas")):
        if path not in sys.path:
            sys.path.insert(0, path)
    from infra.config import ConfigError, SupervisorConfig

    try:
        return SupervisorConfig.from_mapping(context)
    except ConfigError as exc:
        raise DoctorError(f"invalid context: {exc}") from exc


# --- AWS helpers --------------------------------------------------------------------------------


def trusts_sagemaker(document: Any) -> bool:
    """Whether a role trust policy lets SageMaker assume the role (an Allow of sts:AssumeRole
    for the sagemaker.amazonaws.com service principal). Conditions are not evaluated."""
    if isinstance(document, str):
        document = json.loads(unquote(document))
    statements = document.get("Statement", [])
    if isinstance(statements, dict):
        statements = [statements]
    for statement in statements:
        if statement.get("Effect") != "Allow":
            continue
        actions = statement.get("Action", [])
        actions = [actions] if isinstance(actions, str) else actions
        if not any(a in ("sts:AssumeRole", "sts:*", "*") for a in actions):
            continue
        principal = statement.get("Principal", {})
        if principal == "*":
            return True
        services = principal.get("Service", []) if isinstance(principal, dict) else []
        services = [services] if isinstance(services, str) else services
        if SAGEMAKER_PRINCIPAL in services:
            return True
    return False


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


# --- the checks ---------------------------------------------------------------------------------


class Preflight:
    """Runs the checks for one deployment configuration with one boto3 session."""

    def __init__(
        self,
        session: Any,
        region: str,
        config: Any,
        *,
        qualifier: str = DEFAULT_QUALIFIER,
        stack_name: str | None = None,
        instance_types: Sequence[str] = (),
    ) -> None:
        self.session = session
        self.region = region
        self.config = config
        self.qualifier = qualifier
        # the deployment's stackName context, unless a caller names another
        self.stack_name = stack_name or str(getattr(config, "stack_name", None) or STACK_NAME)
        self.extra_instance_types = tuple(instance_types)
        self.account = ""
        self.partition = "aws"
        self.identity_arn = ""

    def client(self, service: str) -> Any:
        return self.session.client(service, region_name=self.region)

    def run(self, *, credentials_only: bool = False) -> list[Finding]:
        identity = self.check_identity()
        if identity.level == FAIL or credentials_only:
            return [identity]  # nothing else can be checked without credentials
        findings = [identity]
        checks: list[tuple[str, Callable[[], list[Finding]]]] = [
            ("bootstrap", self.check_bootstrap),
            ("prefix", self.check_prefix),
            ("roles", self.check_roles),
            ("api logs", self.check_api_logging),
            ("log slots", self.check_log_subscription),
            ("buckets", self.check_buckets),
            ("quotas", self.check_quotas),
        ]
        for name, check in checks:
            try:
                findings += check()
            except Exception as exc:  # an answer no check foresaw: say so, never a traceback
                first_line = (str(exc).splitlines() or [""])[0]
                findings.append(
                    Finding(
                        WARN, name, f"could not check ({type(exc).__name__}: {first_line}); check it by hand"
                    )
                )
        return findings

    # credentials -------------------------------------------------------------------------------
    def check_identity(self) -> Finding:
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

        try:
            identity = self.client("sts").get_caller_identity()
        except NoCredentialsError:
            return Finding(
                FAIL,
                "credentials",
                "no AWS credentials found: run `aws configure` (access keys) or `aws sso login --profile NAME` "
                "and pass PROFILE=NAME / --profile NAME (or set AWS_PROFILE)",
            )
        except NoRegionError:
            return Finding(FAIL, "credentials", self._no_region())
        except ClientError as exc:
            code = _code(exc)
            if code in {"ExpiredToken", "ExpiredTokenException", "RequestExpired"}:
                fix = "your session has expired: run `aws sso login` (or refresh the keys) and retry"
            else:
                fix = f"AWS rejected the credentials ({code}): check them with `aws sts get-caller-identity`"
            return Finding(FAIL, "credentials", fix)
        except BotoCoreError as exc:
            return Finding(FAIL, "credentials", f"cannot reach AWS STS in {self.region}: {exc}")
        self.account = str(identity["Account"])
        self.identity_arn = str(identity["Arn"])
        self.partition = self.identity_arn.split(":")[1] if self.identity_arn.startswith("arn:") else "aws"
        return Finding(
            OK, "credentials", f"{self.identity_arn} in account {self.account}, region {self.region}"
        )

    @staticmethod
    def _no_region() -> str:
        return (
            "no AWS region: pass --region (make: export AWS_REGION=...), or set one in your profile "
            "(`aws configure set region us-east-1`)"
        )

    # bootstrap ---------------------------------------------------------------------------------
    def check_bootstrap(self) -> list[Finding]:
        from botocore.exceptions import ClientError

        parameter = f"/cdk-bootstrap/{self.qualifier}/version"
        fix = f"run `make bootstrap` (or npx --no-install cdk bootstrap aws://{self.account}/{self.region})"
        version: int | None = None
        try:
            value = self.client("ssm").get_parameter(Name=parameter)["Parameter"]["Value"]
            version = int(value)
        except ClientError as exc:
            if _code(exc) == "ParameterNotFound":
                return [
                    Finding(
                        FAIL, "bootstrap", f"{self.region} of {self.account} is not CDK-bootstrapped: {fix}"
                    )
                ]
            if not _denied(exc):
                raise
            version = self._bootstrap_version_from_stack()
            if version is None:
                return [
                    Finding(
                        WARN,
                        "bootstrap",
                        f"cannot read {parameter} or the CDKToolkit stack (access denied); "
                        f"if the deploy says 'not bootstrapped': {fix}",
                    )
                ]
            if version < 0:
                return [
                    Finding(
                        FAIL, "bootstrap", f"{self.region} of {self.account} is not CDK-bootstrapped: {fix}"
                    )
                ]
        except ValueError:
            return [
                Finding(WARN, "bootstrap", f"{parameter} holds no version number: if the deploy fails, {fix}")
            ]
        if version < MIN_BOOTSTRAP_VERSION:
            return [
                Finding(
                    FAIL,
                    "bootstrap",
                    f"bootstrap version {version} is older than the {MIN_BOOTSTRAP_VERSION} this app needs: {fix}",
                )
            ]
        return [Finding(OK, "bootstrap", f"CDK bootstrap version {version} (qualifier {self.qualifier})")]

    def _not_bootstrapped(self, fix: str) -> str:
        return f"account {self.account} is not CDK-bootstrapped in {self.region}: {fix}"

    def _bootstrap_version_from_stack(self) -> int | None:
        """From the CDKToolkit stack's BootstrapVersion output; -1 when there is no such stack,
        None when it cannot be read."""
        from botocore.exceptions import ClientError

        try:
            stacks = self.client("cloudformation").describe_stacks(StackName="CDKToolkit")["Stacks"]
        except ClientError as exc:
            if "does not exist" in str(exc):
                return -1
            return None
        for output in stacks[0].get("Outputs", []):
            if output.get("OutputKey") == "BootstrapVersion":
                try:
                    return int(output["OutputValue"])
                except ValueError:
                    return None
        return None

    # job prefix and stack name -----------------------------------------------------------------
    def check_prefix(self) -> list[Finding]:
        from sagewarden_cli.deployments import check_prefix

        return check_prefix(
            self.client("cloudformation"),
            self.client("cloudwatch"),
            region=self.region,
            stack=self.stack_name,
            prefix=self.config.job_prefix,
        )

    # execution roles ---------------------------------------------------------------------------
    def check_roles(self) -> list[Finding]:
        from botocore.exceptions import ClientError

        roles = tuple(self.config.allowed_role_arns)
        if not roles:
            example = f'["arn:{self.partition}:iam::{self.account}:role/<your SageMaker execution role>"]'
            return [
                Finding(
                    FAIL,
                    "roles",
                    "allowedRoleArns is empty, so every run would be rejected: pass "
                    f"ALLOWED_ROLE_ARNS='{example}' to make deploy (cdk: -c allowedRoleArns=...)",
                )
            ]
        iam = self.client("iam")
        findings = []
        for arn in roles:
            role_account = arn.split(":")[4]
            name = arn.rsplit("/", 1)[-1]
            if role_account != self.account:
                findings.append(
                    Finding(
                        FAIL,
                        "roles",
                        f"{arn} is in account {role_account}, but this deploy goes to {self.account}: a training "
                        "job's execution role must belong to the job's own account; name a role of this account",
                    )
                )
                continue
            try:
                role = iam.get_role(RoleName=name)["Role"]
            except ClientError as exc:
                if _code(exc) == "NoSuchEntity":
                    findings.append(
                        Finding(
                            FAIL,
                            "roles",
                            f"{arn} does not exist: create it (a SageMaker execution role) or fix allowedRoleArns",
                        )
                    )
                elif _denied(exc):
                    findings.append(
                        Finding(
                            WARN,
                            "roles",
                            f"cannot check {arn} (iam:GetRole denied); make sure it trusts SageMaker",
                        )
                    )
                else:
                    raise
                continue
            if role["Arn"] != arn:
                findings.append(
                    Finding(
                        FAIL,
                        "roles",
                        f"role {name} is {role['Arn']}, not {arn}: allowedRoleArns must name it exactly "
                        "(iam:PassRole is granted on that ARN, path included)",
                    )
                )
            elif not trusts_sagemaker(role.get("AssumeRolePolicyDocument", {})):
                statement = {
                    "Effect": "Allow",
                    "Principal": {"Service": SAGEMAKER_PRINCIPAL},
                    "Action": "sts:AssumeRole",
                }
                findings.append(
                    Finding(
                        FAIL,
                        "roles",
                        f"{arn} does not trust {SAGEMAKER_PRINCIPAL}, so SageMaker cannot run jobs with it: add "
                        f"{json.dumps(statement, separators=(',', ':'))} to its trust policy",
                    )
                )
            else:
                findings.append(Finding(OK, "roles", f"{arn} exists and trusts {SAGEMAKER_PRINCIPAL}"))
        return findings

    # API Gateway logging -----------------------------------------------------------------------
    def check_api_logging(self) -> list[Finding]:
        from botocore.exceptions import ClientError

        if not self.config.api_logging:
            return [
                Finding(OK, "api logs", "apiLogging=false: no API Gateway logs, no account setting needed")
            ]
        try:
            current = self.client("apigateway").get_account().get("cloudwatchRoleArn")
        except ClientError as exc:
            if not _denied(exc):
                raise
            return [
                Finding(
                    WARN,
                    "api logs",
                    "cannot read the API Gateway account settings (apigateway:GET denied); if the deploy fails "
                    "with 'CloudWatch Logs role ARN must be set in account settings', redeploy with "
                    "-c apiGatewayAccountRole=true or -c apiLogging=false",
                )
            ]
        if self.config.api_gateway_account_role:
            if current:
                return [
                    Finding(
                        WARN,
                        "api logs",
                        f"apiGatewayAccountRole=true replaces the region's API Gateway CloudWatch Logs role "
                        f"{current}, which every REST API of the account in {self.region} shares; the new "
                        "setting stays after `make destroy`",
                    )
                ]
            return [
                Finding(
                    OK,
                    "api logs",
                    "apiGatewayAccountRole=true: the stack sets the region's API Gateway CloudWatch Logs role "
                    "(an account-wide setting that stays after `make destroy`)",
                )
            ]
        if not current:
            return [
                Finding(
                    FAIL,
                    "api logs",
                    f"API Gateway in {self.region} has no CloudWatch Logs role, which the API's access and "
                    "execution logs need: deploy with -c apiGatewayAccountRole=true (sets that account-wide "
                    "setting; it stays after destroy) or -c apiLogging=false",
                )
            ]
        return [Finding(OK, "api logs", f"API Gateway writes logs with the region's existing role {current}")]

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
        ours = f"{self.stack_name}-heartbeat"
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
        others = [n for n in names if n != ours]
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
        return self._check_encryption(s3, bucket)

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
        from sagewarden.domain.policy import RunPolicy

        policy = RunPolicy.from_dict(dict(self.config.policy_defaults))
        types = [c.instance_type for c in policy.instance_fallbacks] + list(self.extra_instance_types)
        return list(dict.fromkeys(types))

    def check_quotas(self) -> list[Finding]:
        from botocore.exceptions import ClientError

        from sagewarden.domain.policy import RunPolicy

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
        keep_alive = RunPolicy.from_dict(dict(self.config.policy_defaults)).keep_alive_seconds
        findings = []
        for instance_type in types:
            wanted = [f"{instance_type} for training job usage"]
            if keep_alive > 0:
                wanted.append(f"{instance_type} for training warm pool usage")
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


# --- entry points -------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser, *, include_global: bool = True) -> None:
    """The doctor's options. The `sagewarden doctor` subcommand reuses them; a CLI whose main
    parser already has --profile/--region/--json passes ``include_global=False`` (a subparser
    repeating them would overwrite the main parser's values with its own defaults)."""
    if include_global:
        parser.add_argument("--profile", help="AWS CLI profile (default: AWS_PROFILE or the default chain)")
        parser.add_argument(
            "--region", help="AWS region (default: AWS_REGION, AWS_DEFAULT_REGION or the profile's)"
        )
    parser.add_argument(
        "-c",
        "--context",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="deployment context, as for cdk deploy (repeatable), e.g. -c allowedRoleArns=arn:aws:iam::...",
    )
    parser.add_argument(
        "--instance-type",
        action="append",
        default=[],
        metavar="TYPE",
        help="also check the quotas of this instance type (repeatable), e.g. ml.p5.48xlarge",
    )
    parser.add_argument(
        "--credentials-only",
        action="store_true",
        help="check only that credentials and a region resolve (make bootstrap runs this first)",
    )
    if include_global:
        parser.add_argument("--json", action="store_true", help="print the findings as JSON")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sagewarden doctor",
        description="Check that this AWS account and region are ready for `make deploy` (one line per problem).",
        epilog="example: python -m sagewarden_cli.doctor --profile ml -c allowedRoleArns=arn:aws:iam::123456789012:role/Train",
    )
    add_arguments(parser)
    return parser


def _resolve_region(args: argparse.Namespace, session: Any) -> str | None:
    region = (
        getattr(args, "region", None) or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    )
    return region or getattr(session, "region_name", None)


def render(findings: Sequence[Finding], out: IO[str], *, action: str = "deploy") -> None:
    width = max(len(f.check) for f in findings)
    for finding in findings:
        out.write(f"{finding.level:<4}  {finding.check:<{width}}  {finding.message}\n")
        if finding.detail:
            out.write(f"{'':<4}  {'':<{width}}  {finding.detail}\n")
    failed = sum(f.level == FAIL for f in findings)
    warned = sum(f.level == WARN for f in findings)
    warnings = f"{warned} warning{'s' * (warned != 1)}"
    if not failed:
        out.write(f"preflight: ready to {action} ({warnings})\n")
        return
    hint = ""
    if any(" -c " in f.message for f in findings if f.level == FAIL):
        hint = "; make deploy takes -c flags as CONTEXT='-c key=value'"
    before = {"deploy": "deploying", "bootstrap": "bootstrapping"}.get(action, action)
    out.write(f"preflight: {failed} problem{'s' * (failed != 1)} to fix before {before}, {warnings}{hint}\n")


def run(
    args: Sequence[str] | argparse.Namespace | None = None,
    *,
    session: Any = None,
    session_factory: Callable[..., Any] | None = None,
    out: IO[str] | None = None,
    checkout: Path | None = None,
) -> int:
    """Run the preflight; 0 when nothing blocks the deploy, 1 when something does, 2 on bad usage."""
    out = out or sys.stdout
    namespace = args if isinstance(args, argparse.Namespace) else build_parser().parse_args(args)
    # --credentials-only (make bootstrap): no deployment settings are needed or read
    credentials_only = bool(getattr(namespace, "credentials_only", False))
    action = "bootstrap" if credentials_only else "deploy"
    context: dict[str, Any] = {}
    config = None
    try:
        if not credentials_only:
            root = checkout or find_checkout()
            context = load_context(root, parse_context_args(getattr(namespace, "context", []) or []))
            config = load_config(root, context)
        if session is None:
            findings = _open_session(namespace, session_factory)
            if isinstance(findings, Finding):
                render([findings], out, action=action)
                return 1
            session = findings
    except DoctorError as exc:
        print(f"sagewarden doctor: {exc}", file=sys.stderr)
        return 2
    region = _resolve_region(namespace, session)
    if not region:
        render([Finding(FAIL, "credentials", Preflight._no_region())], out, action=action)
        return 1
    preflight = Preflight(
        session,
        region,
        config,
        qualifier=str(context.get(QUALIFIER_CONTEXT) or DEFAULT_QUALIFIER),
        instance_types=getattr(namespace, "instance_type", []) or [],
    )
    findings = preflight.run(credentials_only=credentials_only)
    if getattr(namespace, "json", False):
        out.write(json.dumps([asdict(f) for f in findings], indent=2) + "\n")
    else:
        render(findings, out, action=action)
    return 1 if any(f.level == FAIL for f in findings) else 0


def _open_session(namespace: argparse.Namespace, factory: Callable[..., Any] | None) -> Any:
    import boto3
    from botocore.exceptions import ProfileNotFound

    try:
        return (factory or boto3.Session)(profile_name=getattr(namespace, "profile", None))
    except ProfileNotFound as exc:
        return Finding(
            FAIL,
            "credentials",
            f"{exc}: list yours with `aws configure list-profiles`, or create it with `aws configure sso`",
        )


def main(argv: Sequence[str] | None = None) -> int:
    return run(list(argv) if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
