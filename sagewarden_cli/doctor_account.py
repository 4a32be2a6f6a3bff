"""The deploy preflight's account checks: credentials, CDK bootstrap, the job prefix and stack name,
the execution roles and API Gateway's logging role."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote

from sagewarden_cli.doctor_settings import MIN_BOOTSTRAP_VERSION, SAGEMAKER_PRINCIPAL, PreflightBase
from sagewarden_cli.findings import FAIL, OK, WARN, Finding
from sagewarden_cli.findings import denied as _denied
from sagewarden_cli.findings import error_code as _code

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


class AccountChecks(PreflightBase):
    """Credentials, bootstrap, prefix, roles and API logging (mixed into :class:`Preflight`)."""

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
