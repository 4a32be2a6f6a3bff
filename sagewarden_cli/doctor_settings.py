"""The deploy preflight's settings: the names it checks against, the deployment context as the CDK
reads it, and the state every check shares (:class:`PreflightBase`). sagewarden_cli/doctor.py runs
the checks (sagewarden_cli/doctor_account.py, sagewarden_cli/doctor_resources.py)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

STACK_NAME = "Sagewarden"  # infra.constants.STACK_ID, the default of the stackName context
TRAINING_LOG_GROUP = "/aws/sagemaker/TrainingJobs"  # sagewarden.keys.TRAINING_LOG_GROUP
SUBSCRIPTION_SLOTS = 2
HEARTBEAT_FILTER = "{stack}-{prefix}-heartbeat"  # sagewarden.keys.heartbeat_filter_name
LEGACY_HEARTBEAT_FILTER = "{stack}-heartbeat"  # sagewarden.keys.legacy_heartbeat_filter_name
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


class PreflightBase:
    """The deployment configuration and boto3 session the checks run against, and what the
    identity check learns (account, partition, caller ARN)."""

    def __init__(
        self,
        session: Any,
        region: str,
        config: Any,
        *,
        qualifier: str = DEFAULT_QUALIFIER,
        stack_name: str | None = None,
        instance_types: Sequence[str] = (),
        spot: bool = False,
    ) -> None:
        self.session = session
        self.region = region
        self.config = config
        self.qualifier = qualifier
        # the deployment's stackName context, unless a caller names another
        self.stack_name = stack_name or str(getattr(config, "stack_name", None) or STACK_NAME)
        self.extra_instance_types = tuple(instance_types)
        self.spot = spot  # the runs use managed spot training: its own quotas are the ones checked
        self.account = ""
        self.partition = "aws"
        self.identity_arn = ""

    def client(self, service: str) -> Any:
        return self.session.client(service, region_name=self.region)
