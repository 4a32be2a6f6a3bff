"""The deployment's CloudWatch dashboard: every widget reads a metric that exists, scoped to it."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from infra_synth import FULL_CONTEXT, SynthResult

from infra import constants
from infra.constructs.dashboard import BREAKDOWNS, cost_expression, dashboard_name
from infra.constructs.health import HEALTH_ALARMS
from sagewarden import keys
from tests.doc_pages import documentation

REGION = "eu-west-1"
# Every metric name sagewarden.keys defines for the supervisor's namespace.
KEY_METRICS = {value for name, value in vars(keys).items() if name.startswith("METRIC_")}
_SEARCH = re.compile(
    r"SEARCH\('\{(?P<schema>[^}]*)\} MetricName=\"(?P<metric>[^\"]+)\" service=\"(?P<service>[^\"]+)\"'"
)


def _render(value: Any, synth: SynthResult) -> str:
    """Fn::Join/Ref/GetAtt as text: the region becomes REGION, a resource becomes `<logical id>`."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return REGION if value["Ref"] == "AWS::Region" else f"<{value['Ref']}>"
    if "Fn::GetAtt" in value:
        return f"<{value['Fn::GetAtt'][0]}>"
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_render(p, synth) for p in parts)
    raise AssertionError(f"unexpected intrinsic {value!r}")


def _dashboard(synth: SynthResult) -> tuple[str, dict[str, Any]]:
    _, resource = synth.one("AWS::CloudWatch::Dashboard")
    props = resource["Properties"]
    return _render(props["DashboardName"], synth), json.loads(_render(props["DashboardBody"], synth))


def _prefix(synth: SynthResult) -> str:
    return str(synth.context.get("jobPrefix", keys.DEFAULT_JOB_PREFIX))


def _metric_widgets(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [w["properties"] for w in body["widgets"] if w["type"] == "metric"]


@pytest.mark.claim(
    "The EventBridge rules, the IAM policies, the hang alarms (`sagewarden-<prefix>-hang-*`) and the dashboard are scoped to it; no two deployments of a region may share one."
)
def test_dashboard_is_named_per_deployment_and_region(
    synth_full: SynthResult, synth_default: SynthResult
) -> None:
    full_name, _ = _dashboard(synth_full)
    default_name, _ = _dashboard(synth_default)

    assert full_name == dashboard_name(FULL_CONTEXT["jobPrefix"], REGION) == f"sagewarden-ml7-{REGION}"
    assert default_name == f"sagewarden-sw-{REGION}"
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,255}", full_name)


@pytest.mark.claim(
    "time to recovery, from an attempt's ending to its replacement training (median, p90, max)"
)
def test_dashboard_plain_metrics_exist_and_are_scoped_to_this_deployment(synth_any: SynthResult) -> None:
    _, body = _dashboard(synth_any)
    service = constants.powertools_service_name(_prefix(synth_any))
    seen = set()
    for widget in _metric_widgets(body):
        for line in widget["metrics"]:
            if isinstance(line[0], dict):  # an expression
                continue
            namespace, name, *rest = [p for p in line if not isinstance(p, dict)]
            dims = dict(zip(rest[::2], rest[1::2], strict=True))
            if namespace == keys.METRICS_NAMESPACE:
                assert name in KEY_METRICS, f"{name} is not a metric sagewarden.keys defines"
                assert dims == {"service": service}
                seen.add(name)
    assert {
        keys.METRIC_RECOVERY_SECONDS,
        keys.METRIC_HANG_ALARMS,
        keys.METRIC_WATCHED_JOBS,
        keys.METRIC_FAILED_ACTIONS,
        keys.METRIC_ALERT_PUBLISH_FAILURES,
        keys.METRIC_OBSERVATION_FAILURES,
        keys.METRIC_SWEEP_ERRORS,
        keys.METRIC_SWEEP_OUT_OF_TIME,
    } <= seen


def test_dashboard_breakdowns_search_each_metric_by_its_dimension_for_this_service_only(
    synth_any: SynthResult,
) -> None:
    _, body = _dashboard(synth_any)
    service = constants.powertools_service_name(_prefix(synth_any))
    searches = {}
    for widget in _metric_widgets(body):
        for line in widget["metrics"]:
            expression = line[0].get("expression", "") if isinstance(line[0], dict) else ""
            match = _SEARCH.search(expression)
            if match:
                searches[match["metric"]] = (match["schema"], match["service"], widget["title"])

    # the breakdowns, and the ETTR of each run that ended (one series per run)
    assert set(searches) == {metric for metric, _, _ in BREAKDOWNS} | {keys.METRIC_ETTR}
    ettr_schema, ettr_service, ettr_title = searches[keys.METRIC_ETTR]
    assert ettr_schema == f"{keys.METRICS_NAMESPACE},service,{keys.DIM_RUN}" and ettr_service == service
    assert "ETTR" in ettr_title
    for metric, dimension, _ in BREAKDOWNS:
        schema, searched_service, _ = searches[metric]
        assert metric in KEY_METRICS
        assert schema == f"{keys.METRICS_NAMESPACE},service,{dimension}"
        assert searched_service == service
    titles = " | ".join(title for _, _, title in searches.values())
    for topic in ("status", "Restarts", "Hang detections", "waits"):
        assert topic in titles


def test_dashboard_shows_every_health_alarm_and_the_dlq(synth_any: SynthResult) -> None:
    _, body = _dashboard(synth_any)
    alarm_widgets = [w["properties"] for w in body["widgets"] if w["type"] == "alarm"]
    alarm_refs = {a for w in alarm_widgets for a in w["alarms"]}
    cw_alarms = synth_any.resources("AWS::CloudWatch::Alarm")
    health_ids = {
        logical_id
        for logical_id, alarm in cw_alarms.items()
        if alarm["Properties"].get("MetricName") in {spec.metric for spec in HEALTH_ALARMS}
    }
    dlq_alarm_ids = {
        logical_id
        for logical_id, alarm in cw_alarms.items()
        if alarm["Properties"].get("MetricName") == "ApproximateNumberOfMessagesVisible"
    }

    assert len(health_ids) == len(HEALTH_ALARMS) and len(dlq_alarm_ids) == 1
    assert alarm_refs == {f"<{logical_id}>" for logical_id in health_ids | dlq_alarm_ids}
    (queue_id,) = synth_any.resources("AWS::SQS::Queue")
    dlq_lines = [
        line
        for widget in _metric_widgets(body)
        for line in widget["metrics"]
        if line[:2] == ["AWS/SQS", "ApproximateNumberOfMessagesVisible"]
    ]
    assert len(dlq_lines) == 1 and f"<{queue_id}>" in dlq_lines[0]


def test_dashboard_function_errors_cover_every_function(synth_any: SynthResult) -> None:
    _, body = _dashboard(synth_any)
    # the supervisor's functions; the deploy-time alarm-shape check runs only inside a deploy,
    # whose failure is where its errors show (infra/constructs/alarm_shape_check.py)
    functions = {
        logical_id
        for logical_id, fn in synth_any.resources("AWS::Lambda::Function").items()
        if str(fn["Properties"].get("Handler", "")).startswith("sagewarden.")
        and fn["Properties"]["Handler"] != keys.HANDLER_ALARM_SHAPE_CHECK
    }
    lines = [
        line for widget in _metric_widgets(body) for line in widget["metrics"] if line[0] == "AWS/Lambda"
    ]

    errors = {line[3] for line in lines if line[1] == "Errors"}
    throttles = {line[3] for line in lines if line[1] == "Throttles"}
    assert len(functions) == 5
    assert errors == throttles == {f"<{logical_id}>" for logical_id in functions}


def test_dashboard_cost_estimate_uses_the_gauges_and_drops_heartbeats_without_a_subscription(
    synth_full: SynthResult, synth_default: SynthResult
) -> None:
    def cost_line(synth: SynthResult) -> dict[str, Any]:
        _, body = _dashboard(synth)
        (widget,) = [w for w in _metric_widgets(body) if w["title"].startswith("Supervision cost")]
        (expression,) = [line[0] for line in widget["metrics"] if "expression" in line[0]]
        return expression

    with_subscription = cost_line(synth_default)  # logSubscription=true
    without = cost_line(synth_full)  # logSubscription=false

    assert with_subscription["expression"] == cost_expression(True)
    assert without["expression"] == cost_expression(False)
    assert "j" in cost_expression(True) and "j" not in cost_expression(False)
    # the estimate's arithmetic: 10 alarms and 2 watched jobs -> (0.1*10 + 0.3*2) / 30 USD/day
    a, j = 10, 2
    assert (
        eval(cost_expression(True), {}, {"a": a, "j": j})
        == (constants.CW_ALARM_METRIC_MONTH_USD * a + constants.CW_CUSTOM_METRIC_MONTH_USD * j)
        / constants.DAYS_PER_BILLING_MONTH
    )


@pytest.mark.claim("A dashboard costs $3 per month beyond the account's three free ones.")
@pytest.mark.claim(
    "$0.30 per custom metric-month, $0.10 per standard alarm metric-month, and $0.50/GB of log ingestion for EMF"
)
def test_dashboard_cost_price_is_the_readmes(synth_default: SynthResult) -> None:
    """README: "A dashboard costs $3 per month beyond the account's three free ones." The
    dashboard states the same price in its own text widget (infra/constants.py, dated)."""

    _, body = _dashboard(synth_default)
    texts = " ".join(w["properties"]["markdown"] for w in body["widgets"] if w["type"] == "text")
    readme = " ".join(documentation().split())
    (stated,) = re.findall(
        r"A dashboard costs \$(\d+(?:\.\d+)?) per month beyond the account's three free ones", readme
    )

    assert float(stated) == constants.CW_DASHBOARD_MONTH_USD
    assert (
        f"this dashboard (${constants.CW_DASHBOARD_MONTH_USD:.2f}/month beyond the account's free three)"
        in texts
    )
    assert constants.CW_PRICES_AS_OF in texts
