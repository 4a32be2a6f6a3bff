"""A CloudWatch dashboard of one deployment: what the supervisor did, and whether it is healthy.

Rows, top to bottom:

1. runs by status, restarts by class, hang detections by signal;
2. time to recovery, quota/capacity waits by reason, supervision cost;
2b. the ETTR (goodput) of each run that ended, one series per run (``Ettr{service,run}``);
3. the supervisor's health alarms and the DLQ alarm, failed actions and errors, DLQ depth,
   the functions' errors and throttles.

The domain metrics are the Powertools (EMF) metrics named in ``sagewarden.keys`` (namespace
``Sagewarden``, dimension ``service = sagewarden-<jobPrefix>`` plus one per metric). The
per-value series (one per status, class, signal, reason) are CloudWatch ``SEARCH`` expressions
on the exact dimension set, so a value the supervisor starts emitting later shows up without a
redeploy. Everything is scoped to the deployment's ``service`` dimension and the dashboard is
named after the job prefix and region: two deployments in one account never share one.

Supervision cost is an estimate: the hang alarms and heartbeat metrics that exist (gauges the
sweep publishes from its periodic alarm listing) times CloudWatch's list prices in
``infra.constants`` (dated there). The fixed part of a deployment (its own alarms, the
dashboard, the supervisor's counters) is listed in the text widget.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from sagewarden import keys

from .. import constants
from .functions import SupervisorFunctions

WIDTH = 24  # the dashboard grid is 24 units wide
ROW_HEIGHT = 6

# (metric, its own dimension, widget title); each is drawn as one SEARCH per deployment.
BREAKDOWNS = (
    (keys.METRIC_RUN_STATUS, keys.DIM_STATUS, "Runs entering each status"),
    (keys.METRIC_RESTARTS, keys.DIM_CLASS, "Restarts by class"),
    (keys.METRIC_HANG_DETECTIONS, keys.DIM_SIGNAL, "Hang detections by signal"),
    (keys.METRIC_WAITS, keys.DIM_REASON, "Quota / capacity / throttle waits"),
)
# The supervisor's own trouble counters (each also has a health alarm, except EventsIgnored).
HEALTH_COUNTERS = (
    keys.METRIC_FAILED_ACTIONS,
    keys.METRIC_ALERT_PUBLISH_FAILURES,
    keys.METRIC_OBSERVATION_FAILURES,
    keys.METRIC_SWEEP_ERRORS,
    keys.METRIC_SWEEP_OUT_OF_TIME,
)


def dashboard_name(job_prefix: str, region: str) -> str:
    """Dashboard names are global to the account, so the region is part of it."""
    return f"sagewarden-{job_prefix}-{region}"


def search_expression(metric: str, dimension: str, service: str, statistic: str, period_s: int) -> str:
    """One series per value of ``dimension``, for this deployment's ``service`` only."""
    schema = "{" + f"{keys.METRICS_NAMESPACE},service,{dimension}" + "}"
    query = f'{schema} MetricName="{metric}" service="{service}"'
    return f"SEARCH('{query}', '{statistic}', {period_s})"


def cost_expression(log_subscription: bool) -> str:
    """Estimated CloudWatch cost of hang detection in USD per day, from the gauges ``a`` (hang
    alarms) and ``j`` (watched jobs, one heartbeat metric each when the log subscription is on)."""
    per_day = constants.DAYS_PER_BILLING_MONTH
    terms = [f"{constants.CW_ALARM_METRIC_MONTH_USD} * a"]
    if log_subscription:
        terms.append(f"{constants.CW_CUSTOM_METRIC_MONTH_USD} * j")
    return f"({' + '.join(terms)}) / {per_day}"


class SupervisorDashboard(Construct):
    """The deployment's dashboard.

    Attributes:
        dashboard: the ``cloudwatch.Dashboard``.
        service: the ``service`` dimension its metrics are filtered on.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        job_prefix: str,
        health_alarms: Sequence[cloudwatch.IAlarm],
        dead_letter_queue: sqs.IQueue,
        dead_letter_alarm: cloudwatch.IAlarm,
        functions: SupervisorFunctions,
        log_subscription: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        self.service = constants.powertools_service_name(job_prefix)
        period = Duration.minutes(constants.DASHBOARD_PERIOD_MINUTES)
        period_s = int(period.to_seconds())

        def metric(name: str, statistic: str = "Sum", label: str | None = None) -> cloudwatch.Metric:
            return cloudwatch.Metric(
                namespace=keys.METRICS_NAMESPACE,
                metric_name=name,
                dimensions_map={"service": self.service},
                statistic=statistic,
                period=period,
                label=label,
            )

        def breakdown(metric_name: str, dimension: str, title: str) -> cloudwatch.GraphWidget:
            return cloudwatch.GraphWidget(
                title=f"{title} (per {constants.DASHBOARD_PERIOD_MINUTES} min)",
                left=[
                    cloudwatch.MathExpression(
                        expression=search_expression(metric_name, dimension, self.service, "Sum", period_s),
                        using_metrics={},
                        label="",
                        period=period,
                    )
                ],
                stacked=True,
                width=8,
                height=ROW_HEIGHT,
            )

        status, restarts, hangs, waits = (breakdown(*b) for b in BREAKDOWNS)
        recovery = cloudwatch.GraphWidget(
            title="Time to recovery: fault -> replacement training (seconds)",
            left=[
                metric(keys.METRIC_RECOVERY_SECONDS, "p50", "median"),
                metric(keys.METRIC_RECOVERY_SECONDS, "p90", "p90"),
                metric(keys.METRIC_RECOVERY_SECONDS, "Maximum", "max"),
            ],
            width=8,
            height=ROW_HEIGHT,
        )
        alarms_gauge = metric(keys.METRIC_HANG_ALARMS, "Maximum", "hang alarm metrics (billed)")
        jobs_gauge = metric(keys.METRIC_WATCHED_JOBS, "Maximum", "watched jobs")
        cost = cloudwatch.GraphWidget(
            title="Supervision cost (estimate)",
            left=[
                cloudwatch.MathExpression(
                    expression=cost_expression(log_subscription),
                    using_metrics={"a": alarms_gauge, "j": jobs_gauge},
                    label="CloudWatch USD/day for hang detection",
                    period=period,
                )
            ],
            right=[alarms_gauge, jobs_gauge],
            width=8,
            height=ROW_HEIGHT,
        )
        alarm_status = cloudwatch.AlarmStatusWidget(
            title="Supervisor health alarms",
            alarms=[*health_alarms, dead_letter_alarm],
            width=6,
            height=ROW_HEIGHT,
        )
        failures = cloudwatch.GraphWidget(
            title="Failed actions and supervisor errors",
            left=[metric(name) for name in HEALTH_COUNTERS],
            right=[metric(keys.METRIC_EVENTS_IGNORED, label="events ignored (duplicate/stale)")],
            width=6,
            height=ROW_HEIGHT,
        )
        dlq = cloudwatch.GraphWidget(
            title="Dead-letter queue depth",
            left=[
                dead_letter_queue.metric_approximate_number_of_messages_visible(
                    statistic="Maximum", period=period, label="messages"
                )
            ],
            width=6,
            height=ROW_HEIGHT,
        )
        function_errors = cloudwatch.GraphWidget(
            title="Function errors and throttles",
            left=[
                f.function.metric_errors(period=period, label=f"{f.spec.construct_id} errors")
                for f in functions.all
            ],
            right=[
                f.function.metric_throttles(period=period, label=f"{f.spec.construct_id} throttles")
                for f in functions.all
            ],
            width=6,
            height=ROW_HEIGHT,
        )
        ettr = cloudwatch.GraphWidget(
            title="ETTR of each run that ended (%, productive training / wall time)",
            left=[
                cloudwatch.MathExpression(
                    expression=search_expression(
                        keys.METRIC_ETTR, keys.DIM_RUN, self.service, "Minimum", period_s
                    ),
                    using_metrics={},
                    label="",
                    period=period,
                )
            ],
            left_y_axis=cloudwatch.YAxisProps(min=0, max=100),
            width=WIDTH,
            height=ROW_HEIGHT,
        )
        header = cloudwatch.TextWidget(
            markdown=self._header(job_prefix, log_subscription, own_alarms=len(health_alarms) + 1),
            width=WIDTH,
            height=3,
        )

        self.dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            dashboard_name=dashboard_name(job_prefix, Stack.of(self).region),
            default_interval=Duration.days(constants.DASHBOARD_DEFAULT_DAYS),
            widgets=[
                [header],
                [status, restarts, hangs],
                [recovery, waits, cost],
                [ettr],
                [alarm_status, failures, dlq, function_errors],
            ],
        )

    def _header(self, job_prefix: str, log_subscription: bool, *, own_alarms: int) -> str:
        heartbeat = (
            f"+ ${constants.CW_CUSTOM_METRIC_MONTH_USD:.2f} per watched job (heartbeat metric)"
            if log_subscription
            else "(no heartbeat metrics: logSubscription=false)"
        )
        return (
            f"# sagewarden `{job_prefix}` ({self.service})\n"
            "Runs, restarts, hangs and waits come from the supervisor's metrics "
            f"(namespace `{keys.METRICS_NAMESPACE}`); `sagewarden list` / `sagewarden get RUN` show the runs. "
            f"Cost estimate: ${constants.CW_ALARM_METRIC_MONTH_USD:.2f} per hang-alarm metric-month "
            f"{heartbeat}, {constants.CW_PRICES_AS_OF}. Fixed per deployment: this dashboard "
            f"(${constants.CW_DASHBOARD_MONTH_USD:.2f}/month beyond the account's free three), "
            f"{own_alarms} health alarms (${constants.CW_ALARM_METRIC_MONTH_USD:.2f} each/month), "
            "and the supervisor's own counters."
        )
