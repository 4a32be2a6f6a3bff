"""What AWS authorises for each API call the supervisor makes: the IAM replay's mapping table.

One row per (service, operation), following the Service Authorization Reference; an unmapped call
is an error. Pure. Why: docs/deploy.md (*IAM proven by replay*)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SAR = "https://docs.aws.amazon.com/service-authorization/latest/reference/"

Context = tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True)
class AuthorizationRequest:
    """One IAM authorization request: ``action`` on ``resource`` with its request context.

    ``context`` maps lower-cased condition-key names to their values; ``()`` means the key is
    modelled and absent from this request. Hashable, so identical requests are deduplicated.
    """

    action: str
    resource: str
    context: Context = ()

    def context_dict(self) -> dict[str, tuple[str, ...]]:
        return dict(self.context)

    def describe(self) -> str:
        ctx = ", ".join(f"{k}={'|'.join(v) if v else '(absent)'}" for k, v in self.context)
        return f"{self.action} on {self.resource}" + (f" [{ctx}]" if ctx else "")


@dataclass(frozen=True)
class AccountFacts:
    """What a row needs to know about the account besides the call's parameters."""

    region: str
    account: str
    partition: str = "aws"
    # topic ARN -> ARN of the KMS key the topic is encrypted with (SSE-KMS topics only)
    topic_keys: Mapping[str, str] = field(default_factory=dict)

    def arn(
        self, service: str, resource: str, *, region: str | None = None, account: str | None = None
    ) -> str:
        return (
            f"arn:{self.partition}:{service}:{self.region if region is None else region}:"
            f"{self.account if account is None else account}:{resource}"
        )


class UnmappedCall(LookupError):
    """The table has no row for this (service, operation)."""

    def __init__(self, service: str, operation: str) -> None:
        super().__init__(f"unmapped call: {service}.{operation} has no row in drill/iam/requests.py")
        self.service = service
        self.operation = operation


Params = Mapping[str, Any]
Builder = Callable[[Params, AccountFacts], list[AuthorizationRequest]]


@dataclass(frozen=True)
class Row:
    service: str
    operation: str
    actions: str  # what the row asks for, for the printed table
    resource: str
    source: str  # the SAR page (or AWS guide) the row follows
    build: Builder


ROWS: dict[tuple[str, str], Row] = {}


def row(
    service: str, operation: str, actions: str, resource: str, source: str
) -> Callable[[Builder], Builder]:
    def register(build: Builder) -> Builder:
        key = (service, operation)
        if key in ROWS:
            raise ValueError(f"duplicate row {key}")
        ROWS[key] = Row(service, operation, actions, resource, source, build)
        return build

    return register


def authorization_requests(
    service: str, operation: str, params: Params, facts: AccountFacts
) -> list[AuthorizationRequest]:
    """The requests AWS authorises for one call. Raises :class:`UnmappedCall` for unknown calls."""
    entry = ROWS.get((service, operation))
    if entry is None:
        raise UnmappedCall(service, operation)
    return entry.build(params, facts)


def render_table() -> str:
    """The table as text (printed by ``make iam-report``)."""
    rows = sorted(ROWS.values(), key=lambda r: (r.service, r.operation))
    calls = [f"{r.service}.{r.operation}" for r in rows]
    w1 = max(len(c) for c in calls)
    w2 = max(len(r.actions) for r in rows)
    lines = [f"{'call':<{w1}}  {'authorises':<{w2}}  resource"]
    lines += [f"{c:<{w1}}  {r.actions:<{w2}}  {r.resource}" for c, r in zip(calls, rows, strict=True)]
    return "\n".join(lines)


# -- helpers ------------------------------------------------------------------------------------


def req(
    action: str, resource: str, context: Mapping[str, Iterable[str] | str | None] | None = None
) -> AuthorizationRequest:
    items: list[tuple[str, tuple[str, ...]]] = []
    for key, value in (context or {}).items():
        if value is None:
            values: tuple[str, ...] = ()
        elif isinstance(value, str):
            values = (value,)
        else:
            values = tuple(value)
        items.append((key.lower(), values))
    return AuthorizationRequest(action, resource, tuple(sorted(items)))


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _tag_context(tags: Sequence[Mapping[str, str]] | None) -> dict[str, Iterable[str] | str | None]:
    """aws:RequestTag/<key> and aws:TagKeys for a Tags=[{Key, Value}] parameter."""
    tags = tags or []
    ctx: dict[str, Iterable[str] | str | None] = {"aws:TagKeys": [t["Key"] for t in tags]}
    for t in tags:
        ctx[f"aws:RequestTag/{t['Key']}"] = str(t.get("Value", ""))
    return ctx


# -- DynamoDB -------------------------------------------------------------------------------------
# No DynamoDB condition keys (dynamodb:LeadingKeys, dynamodb:Attributes, ...) are modelled: a
# policy that uses them makes the statement "unknown".
_DDB = SAR + "list_amazondynamodb.html"


def _table_arn(facts: AccountFacts, table: str) -> str:
    return table if table.startswith("arn:") else facts.arn("dynamodb", f"table/{table}")


def _table_op(action: str) -> Builder:
    def build(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
        return [req(action, _table_arn(f, p["TableName"]))]

    return build


for _op in ("GetItem", "PutItem", "UpdateItem", "DeleteItem"):
    row("dynamodb", _op, f"dynamodb:{_op}", "table", _DDB)(_table_op(f"dynamodb:{_op}"))


@row("dynamodb", "Query", "dynamodb:Query", "table, or table/<t>/index/<IndexName>", _DDB)
def _ddb_query(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    arn = _table_arn(f, p["TableName"])
    return [req("dynamodb:Query", f"{arn}/index/{p['IndexName']}" if p.get("IndexName") else arn)]


@row("dynamodb", "Scan", "dynamodb:Scan", "table, or table/<t>/index/<IndexName>", _DDB)
def _ddb_scan(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    arn = _table_arn(f, p["TableName"])
    return [req("dynamodb:Scan", f"{arn}/index/{p['IndexName']}" if p.get("IndexName") else arn)]


@row("dynamodb", "BatchWriteItem", "dynamodb:BatchWriteItem", "each table in RequestItems", _DDB)
def _ddb_batch_write(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    return [req("dynamodb:BatchWriteItem", _table_arn(f, t)) for t in p["RequestItems"]]


@row("dynamodb", "BatchGetItem", "dynamodb:BatchGetItem", "each table in RequestItems", _DDB)
def _ddb_batch_get(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    return [req("dynamodb:BatchGetItem", _table_arn(f, t)) for t in p["RequestItems"]]


# TransactWriteItems is no IAM action of its own: each item is authorised as the item action.
_TRANSACT_ITEM_ACTIONS = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
}


@row(
    "dynamodb",
    "TransactWriteItems",
    "per item: Put->PutItem, Update->UpdateItem, Delete->DeleteItem, ConditionCheck->ConditionCheckItem",
    "each item's table",
    _DDB,
)
def _ddb_transact_write(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    out: list[AuthorizationRequest] = []
    for item in p["TransactItems"]:
        ((kind, body),) = item.items()
        out.append(req(_TRANSACT_ITEM_ACTIONS[kind], _table_arn(f, body["TableName"])))
    return out


@row("dynamodb", "TransactGetItems", "dynamodb:GetItem per item", "each item's table", _DDB)
def _ddb_transact_get(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    return [req("dynamodb:GetItem", _table_arn(f, i["Get"]["TableName"])) for i in p["TransactItems"]]


# -- S3 -------------------------------------------------------------------------------------------
_S3 = SAR + "list_amazons3.html"


def _bucket_arn(f: AccountFacts, bucket: str) -> str:
    return f"arn:{f.partition}:s3:::{bucket}"


@row("s3", "ListObjectsV2", "s3:ListBucket [s3:prefix, s3:delimiter, s3:max-keys]", "bucket", _S3)
def _s3_list_v2(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    return [
        req(
            "s3:ListBucket",
            _bucket_arn(f, p["Bucket"]),
            {
                "s3:prefix": _text(p.get("Prefix")),
                "s3:delimiter": _text(p.get("Delimiter")),
                "s3:max-keys": _text(p.get("MaxKeys")),
            },
        )
    ]


row("s3", "ListObjects", "s3:ListBucket [s3:prefix, s3:delimiter, s3:max-keys]", "bucket", _S3)(_s3_list_v2)


def _object_read(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    action = "s3:GetObjectVersion" if p.get("VersionId") else "s3:GetObject"
    return [req(action, f"{_bucket_arn(f, p['Bucket'])}/{p['Key']}")]


row("s3", "GetObject", "s3:GetObject (s3:GetObjectVersion with VersionId)", "object", _S3)(_object_read)
# HeadObject has no action of its own: it needs read access to the object.
row("s3", "HeadObject", "s3:GetObject (s3:GetObjectVersion with VersionId)", "object", _S3)(_object_read)


def _object_arn(f: AccountFacts, bucket: str, key: str) -> str:
    return f"{_bucket_arn(f, bucket)}/{key}"


def _copy_source(p: Params, f: AccountFacts) -> AuthorizationRequest:
    source = p["CopySource"]
    return req("s3:GetObject", _object_arn(f, source["Bucket"], source["Key"]))


@row("s3", "CopyObject", "s3:GetObject on the source, s3:PutObject on the target", "objects", _S3)
def _s3_copy(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    return [_copy_source(p, f), req("s3:PutObject", _object_arn(f, p["Bucket"], p["Key"]))]


@row("s3", "UploadPartCopy", "s3:GetObject on the source, s3:PutObject on the target", "objects", _S3)
def _s3_part_copy(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    return _s3_copy(p, f)


def _object_put(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    return [req("s3:PutObject", _object_arn(f, p["Bucket"], p["Key"]))]


row("s3", "CreateMultipartUpload", "s3:PutObject", "object", _S3)(_object_put)
row("s3", "CompleteMultipartUpload", "s3:PutObject", "object", _S3)(_object_put)


@row("s3", "AbortMultipartUpload", "s3:AbortMultipartUpload", "object", _S3)
def _s3_abort(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    return [req("s3:AbortMultipartUpload", _object_arn(f, p["Bucket"], p["Key"]))]


@row("s3", "DeleteObject", "s3:DeleteObject (s3:DeleteObjectVersion with VersionId)", "object", _S3)
def _s3_delete(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    action = "s3:DeleteObjectVersion" if p.get("VersionId") else "s3:DeleteObject"
    return [req(action, _object_arn(f, p["Bucket"], p["Key"]))]


@row(
    "s3",
    "DeleteObjects",
    "s3:DeleteObject on each key (s3:DeleteObjectVersion with VersionId)",
    "objects",
    _S3,
)
def _s3_delete_many(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    # DeleteObjects has no action of its own: S3 authorises a delete of each key it names
    # (the S3 API Reference, DeleteObjects, "Permissions")
    return [
        req(
            "s3:DeleteObjectVersion" if o.get("VersionId") else "s3:DeleteObject",
            _object_arn(f, p["Bucket"], o["Key"]),
        )
        for o in p["Delete"]["Objects"]
    ]


@row("s3", "ListMultipartUploads", "s3:ListBucketMultipartUploads", "bucket", _S3)
def _s3_list_uploads(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    return [req("s3:ListBucketMultipartUploads", _bucket_arn(f, p["Bucket"]))]


@row("s3", "ListParts", "s3:ListMultipartUploadParts", "object", _S3)
def _s3_list_parts(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    return [req("s3:ListMultipartUploadParts", _object_arn(f, p["Bucket"], p["Key"]))]


@row("s3", "GetBucketVersioning", "s3:GetBucketVersioning", "bucket", _S3)
def _s3_versioning(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    return [req("s3:GetBucketVersioning", _bucket_arn(f, p["Bucket"]))]


@row("s3", "GetBucketLifecycleConfiguration", "s3:GetLifecycleConfiguration", "bucket", _S3)
def _s3_lifecycle(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    return [req("s3:GetLifecycleConfiguration", _bucket_arn(f, p["Bucket"]))]


# -- SNS (+ KMS for SSE-KMS topics) ---------------------------------------------------------------
_SNS = SAR + "list_amazonsns.html"
_KMS = SAR + "list_awskeymanagementservice.html"


@row(
    "sns",
    "Publish",
    "sns:Publish; SSE-KMS topic: kms:GenerateDataKey, kms:Decrypt on its key",
    "topic; key",
    f"{_SNS} ; SNS Developer Guide, 'Key management' (publishers need kms:GenerateDataKey* and kms:Decrypt)",
)
def _sns_publish(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    topic = p.get("TopicArn") or p.get("TargetArn")
    if not topic:  # a direct SMS publish (PhoneNumber) is not something the supervisor does
        raise UnmappedCall("sns", "Publish(PhoneNumber)")
    out = [req("sns:Publish", topic)]
    key = f.topic_keys.get(topic)
    if key:
        # SNS asks KMS on the publisher's behalf (kms:ViaService), with the topic as the
        # encryption context (the key-policy example in the SNS guide conditions on it).
        ctx = {
            "kms:ViaService": f"sns.{f.region}.amazonaws.com",
            "kms:CallerAccount": f.account,
            "kms:EncryptionContext:aws:sns:topicArn": topic,
        }
        out += [req("kms:GenerateDataKey", key, ctx), req("kms:Decrypt", key, ctx)]
    return out


# -- CloudWatch -----------------------------------------------------------------------------------
_CW = SAR + "list_amazoncloudwatch.html"


def _alarm_arn(f: AccountFacts, name: str) -> str:
    return f.arn("cloudwatch", f"alarm:{name}")


@row(
    "cloudwatch",
    "PutMetricAlarm",
    "cloudwatch:PutMetricAlarm [cloudwatch:AlarmActions, tags]; with Tags also cloudwatch:TagResource",
    "alarm:<AlarmName>",
    _CW,
)
def _cw_put_alarm(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    arn = _alarm_arn(f, p["AlarmName"])
    actions = [*p.get("AlarmActions", []), *p.get("OKActions", []), *p.get("InsufficientDataActions", [])]
    tags = _tag_context(p.get("Tags"))
    out = [req("cloudwatch:PutMetricAlarm", arn, {"cloudwatch:AlarmActions": actions, **tags})]
    if p.get("Tags"):
        out.append(req("cloudwatch:TagResource", arn, tags))
    return out


@row("cloudwatch", "DeleteAlarms", "cloudwatch:DeleteAlarms per alarm", "alarm:<name> for each name", _CW)
def _cw_delete_alarms(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    return [req("cloudwatch:DeleteAlarms", _alarm_arn(f, n)) for n in p["AlarmNames"]]


@row(
    "cloudwatch",
    "DescribeAlarms",
    "cloudwatch:DescribeAlarms",
    "alarm:* (prefix, state or names alike)",
    f"{_CW} ; aws-facts 2026-11-30: AlarmNamePrefix listing is authorised against alarm:*",
)
def _cw_describe_alarms(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    # Listing by prefix or state (or all) is authorised against alarm:*, not the prefix; listing
    # by AlarmNames is modelled the same way (the conservative reading: alarm:* covers both).
    return [req("cloudwatch:DescribeAlarms", _alarm_arn(f, "*"))]


@row("cloudwatch", "GetMetricData", "cloudwatch:GetMetricData", "* (no resource-level permissions)", _CW)
def _cw_get_metric_data(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    return [req("cloudwatch:GetMetricData", "*")]


@row("cloudwatch", "PutMetricData", "cloudwatch:PutMetricData [cloudwatch:namespace]", "*", _CW)
def _cw_put_metric_data(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    return [req("cloudwatch:PutMetricData", "*", {"cloudwatch:namespace": p["Namespace"]})]


@row("cloudwatch", "TagResource", "cloudwatch:TagResource", "ResourceARN", _CW)
def _cw_tag(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    return [req("cloudwatch:TagResource", p["ResourceARN"], _tag_context(p.get("Tags")))]


# -- CloudWatch Logs ------------------------------------------------------------------------------
# The SAR lists log groups as ``log-group:<name>``; the CloudWatch Logs guide says policies use
# ``log-group:<name>:*`` for most actions. Both forms are emitted and must both be allowed.
_LOGS = (
    SAR + "list_amazoncloudwatchlogs.html ; CloudWatch Logs guide, 'Overview of managing access "
    "permissions' (log-group ARN with and without :*)"
)


def _group_name(p: Params) -> str:
    ident = p.get("logGroupIdentifier")
    if ident:
        # an ARN (arn:...:log-group:<name>[:*]) or a name
        return (
            str(ident).split(":log-group:", 1)[1].removesuffix(":*") if ":log-group:" in ident else str(ident)
        )
    return str(p["logGroupName"])


def _group_arns(f: AccountFacts, group: str) -> list[str]:
    arn = f.arn("logs", f"log-group:{group}")
    return [arn, f"{arn}:*"]


def _log_group_op(action: str) -> Builder:
    def build(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
        return [req(action, arn) for arn in _group_arns(f, _group_name(p))]

    return build


for _op in ("DescribeLogStreams", "FilterLogEvents"):
    row("logs", _op, f"logs:{_op}", "log-group:<name> and log-group:<name>:*", _LOGS)(
        _log_group_op(f"logs:{_op}")
    )


@row("logs", "GetLogEvents", "logs:GetLogEvents", "log-group:<name>:log-stream:<stream>", _LOGS)
def _logs_get_events(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    group = _group_name(p)
    return [req("logs:GetLogEvents", f.arn("logs", f"log-group:{group}:log-stream:{p['logStreamName']}"))]


# -- SageMaker (+ iam:PassRole) -------------------------------------------------------------------
_SM = SAR + "list_amazonsagemaker.html"
_IAM = SAR + "list_awsidentityandaccessmanagementiam.html"
SAGEMAKER_SERVICE = "sagemaker.amazonaws.com"


def _job_arns(f: AccountFacts, name: str) -> list[str]:
    # SageMaker returns job ARNs with the name lower-cased; which form IAM sees is not spelled
    # out, so both are emitted (identical for lower-case names).
    arns = [f.arn("sagemaker", f"training-job/{name}")]
    if name.lower() != name:
        arns.append(f.arn("sagemaker", f"training-job/{name.lower()}"))
    return arns


def _create_training_job_context(p: Params) -> dict[str, Iterable[str] | str | None]:
    rc = p.get("ResourceConfig") or {}
    types = [rc["InstanceType"]] if rc.get("InstanceType") else []
    types += [g["InstanceType"] for g in rc.get("InstanceGroups", []) if g.get("InstanceType")]
    vpc = p.get("VpcConfig") or {}
    return {
        "sagemaker:InstanceTypes": types,
        "sagemaker:MaxRuntimeInSeconds": _text((p.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds")),
        "sagemaker:KeepAlivePeriod": _text(rc.get("KeepAlivePeriodInSeconds")),
        "sagemaker:VolumeKmsKey": _text(rc.get("VolumeKmsKeyId")),
        "sagemaker:OutputKmsKey": _text((p.get("OutputDataConfig") or {}).get("KmsKeyId")),
        "sagemaker:NetworkIsolation": _text(p.get("EnableNetworkIsolation")),
        "sagemaker:InterContainerTrafficEncryption": _text(p.get("EnableInterContainerTrafficEncryption")),
        "sagemaker:VpcSubnets": list(vpc.get("Subnets", [])),
        "sagemaker:VpcSecurityGroupIds": list(vpc.get("SecurityGroupIds", [])),
        **_tag_context(p.get("Tags")),
    }


@row(
    "sagemaker",
    "CreateTrainingJob",
    "sagemaker:CreateTrainingJob; with Tags sagemaker:AddTags; iam:PassRole on RoleArn",
    "training-job/<name>; role [iam:PassedToService=sagemaker.amazonaws.com]",
    f"{_SM} ; {_IAM}",
)
def _sm_create_training_job(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    arns = _job_arns(f, p["TrainingJobName"])
    out = [req("sagemaker:CreateTrainingJob", a, _create_training_job_context(p)) for a in arns]
    if p.get("Tags"):
        out += [req("sagemaker:AddTags", a, _tag_context(p["Tags"])) for a in arns]
    out.append(
        req(
            "iam:PassRole",
            p["RoleArn"],
            {"iam:PassedToService": SAGEMAKER_SERVICE, "iam:AssociatedResourceArn": arns[0]},
        )
    )
    return out


def _job_op(action: str) -> Builder:
    def build(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
        return [req(action, a) for a in _job_arns(f, p["TrainingJobName"])]

    return build


for _op in ("DescribeTrainingJob", "StopTrainingJob"):
    row("sagemaker", _op, f"sagemaker:{_op}", "training-job/<name>", _SM)(_job_op(f"sagemaker:{_op}"))


@row("sagemaker", "DescribeTrainingPlan", "sagemaker:DescribeTrainingPlan", "training-plan/<name>", _SM)
def _sm_describe_training_plan(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    plan = str(p["TrainingPlanName"])  # the plan's name or its ARN
    arn = plan if plan.startswith("arn:") else f.arn("sagemaker", f"training-plan/{plan}")
    return [req("sagemaker:DescribeTrainingPlan", arn)]


@row("sagemaker", "UpdateTrainingJob", "sagemaker:UpdateTrainingJob", "training-job/<name>", _SM)
def _sm_update_training_job(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    keep_alive = (p.get("ResourceConfig") or {}).get("KeepAlivePeriodInSeconds")
    return [
        req("sagemaker:UpdateTrainingJob", a, {"sagemaker:KeepAlivePeriod": _text(keep_alive)})
        for a in _job_arns(f, p["TrainingJobName"])
    ]


@row("sagemaker", "ListTrainingJobs", "sagemaker:ListTrainingJobs", "*", _SM)
def _sm_list_training_jobs(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    return [req("sagemaker:ListTrainingJobs", "*")]


@row("sagemaker", "AddTags", "sagemaker:AddTags", "ResourceArn", _SM)
def _sm_add_tags(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    return [req("sagemaker:AddTags", p["ResourceArn"], _tag_context(p.get("Tags")))]


# -- Service Quotas -------------------------------------------------------------------------------
_SQ = SAR + "list_servicequotas.html"


@row("service-quotas", "GetServiceQuota", "servicequotas:GetServiceQuota", "<ServiceCode>/<QuotaCode>", _SQ)
def _sq_get(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    return [
        req("servicequotas:GetServiceQuota", f.arn("servicequotas", f"{p['ServiceCode']}/{p['QuotaCode']}"))
    ]


@row("service-quotas", "ListServiceQuotas", "servicequotas:ListServiceQuotas", "*", _SQ)
def _sq_list(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    return [req("servicequotas:ListServiceQuotas", "*")]


@row("service-quotas", "ListAWSDefaultServiceQuotas", "servicequotas:ListAWSDefaultServiceQuotas", "*", _SQ)
def _sq_list_defaults(p: Params, f: AccountFacts) -> list[AuthorizationRequest]:
    return [req("servicequotas:ListAWSDefaultServiceQuotas", "*")]
