"""``SagewardenSupervisor``: the whole supervisor as a construct for a platform team's own CDK app.

Keyword arguments are the settings of :class:`~.config.SupervisorConfig` (the same the deployable
stack reads from CDK context: ``allowed_role_arns``, ``alert_email``, ``job_prefix``,
``policy_defaults``, ``checkpoint_buckets``, ``log_subscription``, ...), validated the same way: a
wrong value fails the synth with the setting's name, never a deploy. Outputs are the embedding
stack's business: the construct exposes ``api.url``, ``state.table``, ``alerts.topic`` and the rest
(see :class:`~.constructs.supervisor.Supervisor`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from constructs import Construct

from .config import SupervisorConfig
from .constructs.supervisor import Supervisor


class SagewardenSupervisor(Supervisor):
    """sagewarden in any stack: ``SagewardenSupervisor(self, "Supervisor", allowed_role_arns=[...])``.

    Several may live in one account and region when their ``job_prefix`` differs (the job prefix
    scopes the event rules, alarms and IAM grants).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        allowed_role_arns: Sequence[str],
        policy_defaults: Mapping[str, Any] | None = None,
        **settings: Any,
    ) -> None:
        tuples = {k: tuple(v) for k, v in settings.items() if isinstance(v, list | tuple)}
        config = SupervisorConfig(
            allowed_role_arns=tuple(allowed_role_arns),
            policy_defaults=dict(policy_defaults or {}),
            **{**settings, **tuples},
        )
        super().__init__(scope, construct_id, config=config)
