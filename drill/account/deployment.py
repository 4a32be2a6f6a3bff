"""What the drill reads from the deployment's synthesized template: whether it grants checkpoint
retention, whether it feeds the heartbeat from a log subscription, who may read runs, and its state table's shape
(the drill and the soak create the table exactly as declared)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sagewarden import keys


def template_checkpoint_retention(template: Mapping[str, Any]) -> bool:
    """Whether the deployment `template` describes grants checkpoint retention (its functions are
    told by their environment, ``ENV_CHECKPOINT_RETENTION``)."""
    return _functions_told(template, keys.ENV_CHECKPOINT_RETENTION)


def template_log_subscription(template: Mapping[str, Any]) -> bool:
    """Whether the deployment `template` describes feeds the heartbeat from a log subscription:
    its functions are told otherwise by their environment (``ENV_LOG_SILENCE_FALLBACK``)."""
    return not _functions_told(template, keys.ENV_LOG_SILENCE_FALLBACK)


def template_read_scope(template: Mapping[str, Any]) -> str:
    """Who the deployment `template` describes lets read runs (the API function's
    ``ENV_READ_SCOPE``; a template from before the setting: "all")."""
    for res in template.get("Resources", {}).values():
        if res.get("Type") != "AWS::Lambda::Function":
            continue
        env = (res.get("Properties", {}).get("Environment") or {}).get("Variables") or {}
        if isinstance(env.get(keys.ENV_READ_SCOPE), str):
            return str(env[keys.ENV_READ_SCOPE])
    return "all"


def _functions_told(template: Mapping[str, Any], variable: str) -> bool:
    """Whether a Lambda function of `template` has the environment variable `variable` "true"."""
    for res in template.get("Resources", {}).values():
        if res.get("Type") != "AWS::Lambda::Function":
            continue
        env = (res.get("Properties", {}).get("Environment") or {}).get("Variables") or {}
        if env.get(variable) == "true":
            return True
    return False


def _table_props(template: Mapping[str, Any]) -> Mapping[str, Any]:
    for res in template["Resources"].values():
        if res["Type"] in ("AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable"):
            return res["Properties"]
    raise AssertionError("the template has no DynamoDB table")


def create_table_from_template(ddb: Any, template: Mapping[str, Any], name: str) -> None:
    """Create the state table exactly as the template declares it (keys, attributes, GSIs)."""
    props = _table_props(template)
    args: dict[str, Any] = {
        "TableName": name,
        "KeySchema": props["KeySchema"],
        "AttributeDefinitions": props["AttributeDefinitions"],
        "BillingMode": "PAY_PER_REQUEST",
    }
    gsis = props.get("GlobalSecondaryIndexes", [])
    if gsis:
        args["GlobalSecondaryIndexes"] = [
            {"IndexName": g["IndexName"], "KeySchema": g["KeySchema"], "Projection": g["Projection"]}
            for g in gsis
        ]
    ddb.create_table(**args)
