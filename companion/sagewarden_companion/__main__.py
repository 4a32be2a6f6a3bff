"""`python -m sagewarden_companion [--grace-s S] -- COMMAND [ARGS...]`: the launcher (launcher.py)."""

import sys

from sagewarden_companion.launcher import main

sys.exit(main())
