"""The whole supervisor as one reusable construct.

``Supervisor`` composes the per-concern constructs and wires them: environment of the
functions, event rules, API, heartbeat subscription, asynchronous-failure destination and
permissions. It creates no resource of its own, so it can be dropped into any stack.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_lambda_destinations as destinations
from constructs import Construct

from sagewarden import keys

from .. import constants
from ..config import SupervisorConfig
from .alarm_shape_check import AlarmShapeCheck
from .alerts import Alerts
from .api import SupervisorApi
from .dashboard import SupervisorDashboard
from .event_rules import EventRules
from .functions import SupervisorFunctions
from .hang_signals import HangSignals
from .health import SupervisorHealth
from .permissions import SupervisorPermissions
from .state_table import StateTable


class Supervisor(Construct):
    """sagewarden: state table, alerts, functions, event rules, API, hang signals, grants.

    Attributes:
        config: the ``SupervisorConfig`` it was built from.
        state: ``StateTable`` (``state.table``).
        alerts: ``Alerts`` (``alerts.topic``, ``alerts.key``, ``alerts.email_subscription``).
        functions: ``SupervisorFunctions`` (``api``, ``job_state``, ``alarm_state``, ``sweep``,
            ``heartbeat``; each with ``.function``, ``.role``, ``.log_group``).
        event_rules: ``EventRules`` (the three rules, ``dead_letter_queue``, ``dead_letter_alarm``).
        api: ``SupervisorApi`` (``rest_api``, ``methods``, ``url``).
        hang_signals: ``HangSignals`` (subscription filter when ``config.log_subscription``).
        permissions: ``SupervisorPermissions`` (one policy per capability).
        dashboard: ``SupervisorDashboard`` (``dashboard``: the deployment's CloudWatch dashboard).
        alarm_shape_check: ``AlarmShapeCheck`` (CloudWatch judges every hang-alarm shape at deploy
            time; ``report`` is what it made of them).
    """

    def __init__(self, scope: Construct, construct_id: str, *, config: SupervisorConfig) -> None:
        super().__init__(scope, construct_id)
        self.config = config

        self.state = StateTable(self, constants.STATE_TABLE_ID, kms_key_arn=config.table_kms_key_arn)
        self.alerts = Alerts(self, constants.ALERTS_ID, alert_email=config.alert_email)
        self.functions = SupervisorFunctions(
            self,
            constants.FUNCTIONS_ID,
            config=config,
            environment={
                keys.ENV_TABLE_NAME: self.state.table.table_name,
                keys.ENV_TOPIC_ARN: self.alerts.topic.topic_arn,
                keys.ENV_ALLOWED_ROLE_ARNS: config.allowed_role_arns_json,
                keys.ENV_JOB_PREFIX: config.job_prefix,
                keys.ENV_POLICY_DEFAULTS: config.policy_defaults_json,
                keys.ENV_ALARM_PREFIX: keys.alarm_prefix(config.job_prefix),
                keys.ENV_HEARTBEAT_NAMESPACE: keys.HEARTBEAT_NAMESPACE,
                keys.ENV_LOG_SILENCE_FALLBACK: "false" if config.log_subscription else "true",
                keys.ENV_CHECKPOINT_RETENTION: "true" if config.checkpoint_retention else "false",
            },
            log_key=self.alerts.key,
        )
        # the API function's alone: who may cancel and resume any run (domain/vocabulary/ownership.py)
        self.functions.api.function.add_environment(keys.ENV_ADMIN_ROLE_ARNS, config.admin_role_arns_json)
        # ... and who may read runs (readScope)
        self.functions.api.function.add_environment(keys.ENV_READ_SCOPE, config.read_scope)
        self.event_rules = EventRules(
            self,
            constants.EVENT_RULES_ID,
            job_prefix=config.job_prefix,
            job_state_function=self.functions.job_state.function,
            alarm_state_function=self.functions.alarm_state.function,
            sweep_function=self.functions.sweep.function,
            alert_topic=self.alerts.topic,
        )
        # Failed asynchronous invocations (after Lambda's own retries) land in the same queue
        # as undeliverable events, so one alarm covers both.
        for fn in (
            self.functions.job_state,
            self.functions.alarm_state,
            self.functions.sweep,
            self.functions.heartbeat,
        ):
            fn.function.configure_async_invoke(
                on_failure=destinations.SqsDestination(self.event_rules.dead_letter_queue),
                retry_attempts=constants.ASYNC_RETRY_ATTEMPTS,
                max_event_age=Duration.seconds(constants.ASYNC_MAX_EVENT_AGE_SECONDS),
            )
        self.api = SupervisorApi(
            self,
            constants.API_ID,
            handler=self.functions.api.function,
            account_cloud_watch_role=config.api_gateway_account_role,
            logging=config.api_logging,
            tracing=config.tracing,
            log_key=self.alerts.key,
        )
        self.hang_signals = HangSignals(
            self,
            constants.HANG_SIGNALS_ID,
            heartbeat_function=self.functions.heartbeat.function,
            log_subscription=config.log_subscription,
            job_prefix=config.job_prefix,
        )
        self.health = SupervisorHealth(
            self, constants.HEALTH_ID, job_prefix=config.job_prefix, alert_topic=self.alerts.topic
        )
        self.permissions = SupervisorPermissions(
            self,
            constants.PERMISSIONS_ID,
            config=config,
            functions=self.functions,
            state_table=self.state,
            alerts=self.alerts,
        )

        # --- Dashboard (infra/constructs/dashboard.py) -----------------------------------------
        # Reads only: the health alarms, the DLQ and its alarm, the functions' metrics and the
        # domain metrics named in sagewarden.keys. It grants nothing and changes no other construct.
        self.dashboard = SupervisorDashboard(
            self,
            constants.DASHBOARD_ID,
            job_prefix=config.job_prefix,
            health_alarms=list(self.health.alarms.values()),
            dead_letter_queue=self.event_rules.dead_letter_queue,
            dead_letter_alarm=self.event_rules.dead_letter_alarm,
            functions=self.functions,
            log_subscription=config.log_subscription,
        )
        # --- end of dashboard ------------------------------------------------------------------

        # --- CloudWatch judges the hang-alarm shapes at deploy time ----------------------------
        self.alarm_shape_check = AlarmShapeCheck(
            self,
            constants.ALARM_SHAPE_CHECK_ID,
            config=config,
            functions=self.functions,
            dead_letter_queue=self.event_rules.dead_letter_queue,
        )
        self.hang_signals.send_failures_to(self.event_rules.dead_letter_queue)
