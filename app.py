#!/usr/bin/env python3
"""CDK entry point of sagewarden: ``cdk synth`` / ``cdk deploy`` run ``python3 app.py``.

Reads the deployment settings from CDK context (``cdk.json`` defaults, ``-c key=value`` on the
command line), builds the stack (named by ``stackName``, default ``Sagewarden``), runs the cdk-nag AwsSolutions checks and
synthesizes. Nothing here calls AWS: synth works offline, without credentials or Docker.
"""

from __future__ import annotations

import sys

from infra.config import ConfigError
from infra.stack import build_app


def main() -> int:
    try:
        app, _ = build_app()
    except ConfigError as exc:
        print(f"sagewarden: invalid context: {exc}", file=sys.stderr)
        return 2
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
