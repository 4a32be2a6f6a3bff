"""sagewarden's in-job companion: the training-script contract's lines, printed for the script,
SIGTERM that lands, and stacks before a stop (docs/companion.md; companion/README.md).

    from sagewarden_companion import Job
    job = Job.start(total_steps=10_000)

Standard library only; torch, transformers and lightning are used where the script has them
(`sagewarden_companion.hf`, `sagewarden_companion.lightning` import theirs when imported).
"""

__version__ = "0.1.0"

from sagewarden_companion.job import Job

__all__ = ["Job", "__version__"]
