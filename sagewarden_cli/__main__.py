"""`python -m sagewarden_cli` and the `sagewarden` command: see sagewarden_cli/app.py for the commands."""

from __future__ import annotations

import sys

from sagewarden_cli.app import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
