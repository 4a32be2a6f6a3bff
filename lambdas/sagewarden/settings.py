"""The deployment's settings of the supervisor (from the functions' environment, or a test's)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sagewarden.domain.vocabulary.policy import RunPolicy


@dataclass(frozen=True)
class SupervisorSettings:
    job_prefix: str = "sw"
    policy_defaults: RunPolicy = field(default_factory=RunPolicy)
    reconcile_interval_ms: int = 10 * 60_000
    log_silence_fallback: bool = False  # no log subscription: the sweep checks log silence itself
    sweep_lease_ms: int = 70_000  # a sweep holds the lease at most this long (its timeout + margin)
    # the deployment grants checkpoint retention's S3 writes (-c checkpointRetention=true)
    checkpoint_retention: bool = False
    region: str = ""  # for the console links in alerts (none when empty)
    # who may list and read runs through the API: "all" callers, or only a run's "owner" and the
    # admins (readScope; anyone else is answered as if the run did not exist)
    read_scope: str = "all"
