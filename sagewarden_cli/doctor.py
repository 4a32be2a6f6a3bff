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
  with ``checkpointRetention``, a versioned bucket without a lifecycle rule expiring noncurrent
  versions is a warning: retention's deletes would free no storage there
  (s3:GetBucketVersioning, s3:GetLifecycleConfiguration);
* warnings: the training-job and warm-pool quotas of the instance types in ``policyDefaults``
  (and ``--instance-type``), from Service Quotas; with ``--spot``, the spot training quotas
  (managed spot training has its own, and keeps no warm pool).

The deployment settings are read as the CDK reads them: ``cdk.json``'s context, then
``-c key=value`` (the same flags you pass to ``cdk deploy``; ``make deploy`` passes the same).
A check this identity is not allowed to make is a warning, not a failure.

Exit codes: 0 nothing blocks the deploy (warnings may remain), 1 something does, 2 usage or
configuration error.

Split by concern: the settings and the state the checks share (doctor_settings.py), the account
checks (doctor_account.py), the resource checks (doctor_resources.py) and, here, :class:`Preflight`
that runs them in order, the report and the entry points. Every public name of those modules is
importable from here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

from sagewarden_cli.doctor_account import AccountChecks, trusts_sagemaker
from sagewarden_cli.doctor_resources import ResourceChecks, cross_account_bucket_policy
from sagewarden_cli.doctor_settings import (
    AWS_MANAGED_S3_KEY,
    DEFAULT_QUALIFIER,
    MIN_BOOTSTRAP_VERSION,
    QUALIFIER_CONTEXT,
    SAGEMAKER_PRINCIPAL,
    STACK_NAME,
    SUBSCRIPTION_SLOTS,
    TRAINING_LOG_GROUP,
    DoctorError,
    PreflightBase,
    find_checkout,
    load_config,
    load_context,
    parse_context_args,
)
from sagewarden_cli.findings import FAIL, OK, WARN, Finding

__all__ = [
    "AWS_MANAGED_S3_KEY",
    "DEFAULT_QUALIFIER",
    "FAIL",
    "MIN_BOOTSTRAP_VERSION",
    "OK",
    "QUALIFIER_CONTEXT",
    "SAGEMAKER_PRINCIPAL",
    "STACK_NAME",
    "SUBSCRIPTION_SLOTS",
    "TRAINING_LOG_GROUP",
    "WARN",
    "AccountChecks",
    "DoctorError",
    "Finding",
    "Preflight",
    "PreflightBase",
    "ResourceChecks",
    "add_arguments",
    "build_parser",
    "cross_account_bucket_policy",
    "find_checkout",
    "load_config",
    "load_context",
    "main",
    "parse_context_args",
    "render",
    "run",
    "trusts_sagemaker",
]


# --- the checks ---------------------------------------------------------------------------------


class Preflight(AccountChecks, ResourceChecks):
    """Runs the checks for one deployment configuration with one boto3 session."""

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
        "--spot",
        action="store_true",
        help="the runs use managed spot training: check the spot training quotas instead "
        "('<type> for spot training job usage')",
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
        spot=bool(getattr(namespace, "spot", False)),
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
