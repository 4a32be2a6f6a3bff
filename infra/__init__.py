"""CDK infrastructure of sagewarden.

In the repository this package is ``infra`` (``app.py`` deploys it); installed with
``pip install sagewarden[infra]`` it is ``sagewarden_cdk``, a construct library a platform team adds
to its own CDK app::

    from sagewarden_cdk import SagewardenSupervisor

    SagewardenSupervisor(self, "Supervisor", allowed_role_arns=["arn:aws:iam::123456789012:role/training"])

The Lambda asset is the ``sagewarden`` package: ``<repo>/lambdas`` in the repository (put on
``sys.path`` here, so that the infrastructure can import the shared names of ``sagewarden.keys``, a
dependency-free module), or a copy of the installed ``sagewarden`` package staged into a directory
of its own (the asset must hold nothing else).
"""

from __future__ import annotations

from typing import Any

from .asset import IN_REPOSITORY, REPO_ROOT, lambda_code_dir

__all__ = ["IN_REPOSITORY", "REPO_ROOT", "SagewardenSupervisor", "lambda_code_dir"]


def __getattr__(name: str) -> Any:
    # the construct is imported on first use: `import infra` (constants, config) stays light
    if name == "SagewardenSupervisor":
        from .library import SagewardenSupervisor

        return SagewardenSupervisor
    raise AttributeError(name)
