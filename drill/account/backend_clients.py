"""Large drills' shortcuts through moto: clients that answer heavy operations from moto's in-memory
backends, keeping botocore's validation and the IAM recorder; the rest goes to moto.

Used by `LocalAccount(backend_reads=True)`. Why: docs/drill.md (*The account*: shortcuts for scale)."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from datetime import UTC
from typing import Any

from botocore.validate import validate_parameters

from drill.sim.texts import client_error

Record = Callable[[str, dict[str, Any]], None]


def _validate(client: Any, operation: str, params: dict[str, Any]) -> None:
    """Reject what botocore would reject before sending (the shortcut skips its serializer)."""
    validate_parameters(params, client.meta.service_model.operation_model(operation).input_shape)


class _Shortcut:
    """A client answering some operations itself: every other call, and every paginator not
    listed in ``PAGED`` (name -> (method, page-size parameter, token in, token out)), goes to
    moto's client."""

    PAGED: dict[str, tuple[str, str, str, str]] = {}
    _moto: Any

    def get_paginator(self, name: str) -> Any:
        spec = self.PAGED.get(name)
        if spec is None:
            return self._moto.get_paginator(name)
        method, size_param, token_in, token_out = spec
        return _Paginator(getattr(self, method), size_param, token_in, token_out)

    def __getattr__(self, name: str) -> Any:
        if name == "_moto":  # not set yet: no delegation loop
            raise AttributeError(name)
        return getattr(self._moto, name)


class BackendAlarmReads(_Shortcut):
    """The supervisor's CloudWatch client with DescribeAlarms answered from moto's in-memory alarms.

    moto serializes every alarm of every DescribeAlarms page through its generic response
    serializer (about 3 ms for a 10-metric alarm), so a sweep reading 4,000 alarms every minute
    would make the drill, not the supervisor, the bottleneck. This reads the same alarms from
    moto's backend (entries as ``describe_alarms`` returns them, see
    ``drill.alarms.config._entry_from_backend``) and pages them as CloudWatch does, which moto
    does not: ``MaxRecords`` per page (the default page size is not documented; 50 is assumed),
    ``NextToken`` to continue. Filters: ``AlarmNamePrefix`` or ``AlarmNames``, ``StateValue``,
    ``AlarmTypes`` (composite alarms are never returned). Every other call goes to moto.

    ``record`` is called with (operation, params) for each DescribeAlarms call (the drill's IAM
    recorder); the paginator goes through :meth:`describe_alarms`, so each page is one call.
    """

    DEFAULT_PAGE = 50
    PAGED = {"describe_alarms": ("describe_alarms", "MaxRecords", "NextToken", "NextToken")}

    def __init__(
        self, moto_client: Any, backend: Any, record: Callable[[str, dict[str, Any]], None] | None = None
    ) -> None:
        self._moto = moto_client
        self._backend = backend
        self._record = record
        # name -> ((alarm object id, configuration time), entry without its state): an alarm's
        # configuration is converted once, its state at every read
        self._entries: dict[str, tuple[tuple[int, Any], dict[str, Any]]] = {}
        # the listing under way: (its filters, the matching names sorted)
        self._listing: tuple[tuple[Any, frozenset[str], Any], list[str]] | None = None

    def describe_alarms(self, **params: Any) -> dict[str, Any]:
        from drill.alarms.config import _entry_from_backend

        if self._record is not None:
            self._record("DescribeAlarms", params)
        unsupported = set(params) - {
            "AlarmNamePrefix",
            "AlarmNames",
            "StateValue",
            "AlarmTypes",
            "MaxRecords",
            "NextToken",
        }
        if unsupported:
            raise NotImplementedError(f"BackendAlarmReads.describe_alarms: {sorted(unsupported)}")
        prefix = params.get("AlarmNamePrefix")
        names = set(params.get("AlarmNames") or ())
        state = params.get("StateValue")
        if "MetricAlarm" not in (params.get("AlarmTypes") or ["MetricAlarm"]):
            return {"MetricAlarms": [], "CompositeAlarms": []}
        size = int(params.get("MaxRecords") or self.DEFAULT_PAGE)
        after = params.get("NextToken")
        query = (prefix, frozenset(names), state)
        if after is None or self._listing is None or self._listing[0] != query:
            # a first page (or a token from another listing): the matching names, sorted, kept
            # for the pages that follow -- one scan per listing, not one per page
            self._listing = (
                query,
                sorted(
                    name
                    for name, alarm in self._backend.alarms.items()
                    if getattr(alarm, "rule", None) is None
                    and (prefix is None or name.startswith(prefix))
                    and (not names or name in names)
                    and (state is None or alarm.state_value == state)
                ),
            )
        listed = self._listing[1]
        start = 0 if after is None else bisect.bisect_right(listed, after)
        # alarms deleted since the listing began are not returned; alarms put since then are
        # not either (CloudWatch promises no consistency across pages: a listing is a snapshot)
        page: list[str] = []
        i = start
        while i < len(listed) and len(page) < size:
            if listed[i] in self._backend.alarms:
                page.append(listed[i])
            i += 1
        out: list[dict[str, Any]] = []
        for name in page:
            alarm = self._backend.alarms[name]
            version = (id(alarm), alarm.configuration_updated_timestamp)
            cached = self._entries.get(name)
            if cached is None or cached[0] != version:
                base = _entry_from_backend(alarm)
                base["AlarmArn"] = alarm.alarm_arn
                base["ActionsEnabled"] = bool(alarm.actions_enabled)
                put_at = alarm.configuration_updated_timestamp
                base["AlarmConfigurationUpdatedTimestamp"] = (
                    put_at if put_at.tzinfo else put_at.replace(tzinfo=UTC)
                )
                cached = self._entries[name] = (version, base)
            entry = dict(cached[1])
            entry["StateValue"] = alarm.state_value
            entry["StateReason"] = alarm.state_reason
            stamp = alarm.state_updated_timestamp
            entry["StateUpdatedTimestamp"] = stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)
            moved = getattr(alarm, "state_transitioned_timestamp", None)
            if moved is not None:
                entry["StateTransitionedTimestamp"] = moved if moved.tzinfo else moved.replace(tzinfo=UTC)
            out.append(entry)
        resp: dict[str, Any] = {"MetricAlarms": out, "CompositeAlarms": []}
        if page and any(name in self._backend.alarms for name in listed[i:]):
            resp["NextToken"] = page[-1]
        return resp

    def put_metric_alarm(self, **params: Any) -> dict[str, Any]:
        """PutMetricAlarm into moto's backend: the same alarm moto's API would store (the tests
        compare the two through DescribeAlarms), validated as botocore would."""
        from moto.cloudwatch.models import Dimension, Metric, MetricDataQuery, MetricStat

        if self._record is not None:
            self._record("PutMetricAlarm", params)
        _validate(self._moto, "PutMetricAlarm", params)
        queries = None
        if params.get("Metrics"):
            queries = []
            for q in params["Metrics"]:
                stat = q.get("MetricStat")
                metric_stat = None
                if stat:
                    m = stat["Metric"]
                    metric_stat = MetricStat(
                        metric=Metric(
                            metric_name=m.get("MetricName"),
                            namespace=m.get("Namespace"),
                            dimensions=[
                                Dimension(name=d.get("Name"), value=d.get("Value"))
                                for d in m.get("Dimensions", [])
                            ],
                        ),
                        period=stat.get("Period"),
                        stat=stat.get("Stat"),
                        unit=stat.get("Unit"),
                    )
                queries.append(
                    MetricDataQuery(
                        query_id=q.get("Id"),
                        label=q.get("Label"),
                        period=q.get("Period"),
                        return_data=q.get("ReturnData"),
                        expression=q.get("Expression"),
                        metric_stat=metric_stat,
                    )
                )
        self._backend.put_metric_alarm(
            name=params["AlarmName"],
            namespace=params.get("Namespace"),
            metric_name=params.get("MetricName"),
            metric_data_queries=queries,
            comparison_operator=params.get("ComparisonOperator"),
            evaluation_periods=params.get("EvaluationPeriods"),
            datapoints_to_alarm=params.get("DatapointsToAlarm"),
            period=params.get("Period"),
            threshold=params.get("Threshold"),
            statistic=params.get("Statistic"),
            extended_statistic=params.get("ExtendedStatistic"),
            description=params.get("AlarmDescription"),
            dimensions=params.get("Dimensions", []),
            alarm_actions=params.get("AlarmActions", []),
            ok_actions=params.get("OKActions", []),
            insufficient_data_actions=params.get("InsufficientDataActions", []),
            unit=params.get("Unit"),
            actions_enabled=params.get("ActionsEnabled", True),
            treat_missing_data=params.get("TreatMissingData"),
            evaluate_low_sample_count_percentile=params.get("EvaluateLowSampleCountPercentile"),
            threshold_metric_id=params.get("ThresholdMetricId"),
            rule=None,
            tags=params.get("Tags", []),
        )
        # whoever watches the client for alarm changes (the drill's alarm evaluator) hears of it
        # as of a put through the API
        model = self._moto.meta.service_model.operation_model("PutMetricAlarm")
        self._moto.meta.events.emit(
            "before-parameter-build.cloudwatch.PutMetricAlarm", params=params, model=model, context={}
        )
        return {}


class _Paginator:
    """A botocore-like paginator over one list call: PaginationConfig's PageSize becomes the call's
    page-size parameter, and each page's token is passed back until a page has none."""

    def __init__(
        self, call: Callable[..., dict[str, Any]], size_param: str, token_in: str, token_out: str
    ) -> None:
        self._call = call
        self._size_param = size_param
        self._token_in = token_in
        self._token_out = token_out

    def paginate(self, **params: Any) -> Iterator[dict[str, Any]]:
        config = params.pop("PaginationConfig", None) or {}
        if config.get("PageSize"):
            params[self._size_param] = int(config["PageSize"])
        token = None
        while True:
            page = self._call(**params, **({self._token_in: token} if token else {}))
            yield page
            token = page.get(self._token_out)
            if not token:
                return


class BackendS3Reads(_Shortcut):
    """The checkpoint finder's S3 client with ListObjectsV2 and HeadObject answered from moto's
    in-memory buckets through a sorted key index.

    moto lists a prefix by scanning every key of the bucket and serializing the answer as XML: with
    1,000 runs writing checkpoints all day, each sweep tick's listing would cost time in proportion
    to every checkpoint of every run (the drill's quadratic hot spot, not the supervisor's). Keys
    are indexed as the simulator and the account write them (``watch`` a client: PutObject,
    DeleteObject(s)); a listing bisects to its prefix and skips each common prefix in one step.

    Supported: ListObjectsV2 with Prefix, Delimiter, MaxKeys (<= 1,000), StartAfter and
    ContinuationToken (its paginator with PaginationConfig PageSize), and HeadObject (a ``404``
    ClientError for a missing key). Every other call goes to moto. ``record`` gets (operation,
    params) for each answered call (the drill's IAM recorder).
    """

    PAGED = {"list_objects_v2": ("list_objects_v2", "MaxKeys", "ContinuationToken", "NextContinuationToken")}

    def __init__(
        self, moto_client: Any, backend: Any, record: Callable[[str, dict[str, Any]], None] | None = None
    ) -> None:
        self._moto = moto_client
        self._backend = backend
        self._record = record
        self._keys: dict[str, list[str]] = {}  # bucket -> sorted keys

    def watch(self, client: Any) -> None:
        """Index the keys ``client`` writes or deletes from now on."""
        events = client.meta.events

        def put(params: dict[str, Any], **_: Any) -> None:
            self.index(str(params["Bucket"]), str(params["Key"]))

        def delete(params: dict[str, Any], **_: Any) -> None:
            keys = self._keys.get(str(params["Bucket"]), [])
            names = (
                [str(params["Key"])]
                if "Key" in params
                else [str(o["Key"]) for o in params.get("Delete", {}).get("Objects", [])]
            )
            for key in names:
                i = bisect.bisect_left(keys, key)
                if i < len(keys) and keys[i] == key:
                    del keys[i]

        events.register("before-parameter-build.s3.PutObject", put)
        events.register("before-parameter-build.s3.CopyObject", put)  # checkpoint retention's archive
        events.register("before-parameter-build.s3.CompleteMultipartUpload", put)
        events.register("before-parameter-build.s3.DeleteObject", delete)
        events.register("before-parameter-build.s3.DeleteObjects", delete)

    def index(self, bucket: str, key: str) -> None:
        """Index a key written without a watched client (``BackendS3Writes``)."""
        keys = self._keys.setdefault(bucket, [])
        i = bisect.bisect_left(keys, key)
        if i == len(keys) or keys[i] != key:
            keys.insert(i, key)

    def _object(self, bucket: str, key: str, operation: str) -> Any:
        found = self._backend.buckets.get(bucket)
        if found is None:
            raise client_error("NoSuchBucket", "The specified bucket does not exist", operation)
        return found.keys.get(key)

    def head_object(self, *, Bucket: str, Key: str, **params: Any) -> dict[str, Any]:
        if self._record is not None:
            self._record("HeadObject", {"Bucket": Bucket, "Key": Key, **params})
        obj = self._object(Bucket, Key, "HeadObject")
        if obj is None:
            raise client_error("404", "Not Found", "HeadObject")
        return {
            "LastModified": obj.last_modified.replace(tzinfo=UTC),
            "ContentLength": obj.size,
            "ETag": obj.etag,
        }

    def list_objects_v2(self, **params: Any) -> dict[str, Any]:
        if self._record is not None:
            self._record("ListObjectsV2", params)
        bucket = str(params["Bucket"])
        self._object(bucket, "", "ListObjectsV2")
        prefix = str(params.get("Prefix") or "")
        delimiter = str(params.get("Delimiter") or "")
        limit = min(int(params.get("MaxKeys") or 1000), 1000)
        after = params.get("ContinuationToken") or params.get("StartAfter") or ""
        keys = self._keys.get(bucket, [])
        i = bisect.bisect_left(keys, prefix)
        if after:
            i = max(i, bisect.bisect_right(keys, after))
            if delimiter and after.endswith(delimiter):  # continue after a common prefix
                i = max(i, bisect.bisect_left(keys, after[:-1] + chr(ord(delimiter[-1]) + 1)))
        contents: list[dict[str, Any]] = []
        common: list[dict[str, str]] = []
        last = ""
        while i < len(keys) and keys[i].startswith(prefix) and len(contents) + len(common) < limit:
            key = keys[i]
            cut = key.find(delimiter, len(prefix)) if delimiter else -1
            if cut >= 0:
                last = key[: cut + len(delimiter)]
                common.append({"Prefix": last})
                i = bisect.bisect_left(keys, last[:-1] + chr(ord(last[-1]) + 1))
                continue
            obj = self._backend.buckets[bucket].keys.get(key)
            i += 1
            if obj is None:
                continue
            last = key
            contents.append(
                {
                    "Key": key,
                    "LastModified": obj.last_modified.replace(tzinfo=UTC),
                    "ETag": obj.etag,
                    "Size": obj.size,
                    "StorageClass": "STANDARD",
                }
            )
        truncated = i < len(keys) and keys[i].startswith(prefix)
        resp: dict[str, Any] = {
            "IsTruncated": truncated,
            "Name": bucket,
            "Prefix": prefix,
            "MaxKeys": limit,
            "KeyCount": len(contents) + len(common),
        }
        if contents:
            resp["Contents"] = contents
        if common:
            resp["CommonPrefixes"] = common
        if delimiter:
            resp["Delimiter"] = delimiter
        if truncated:
            resp["NextContinuationToken"] = last
        return resp


class BackendS3Writes(_Shortcut):
    """The simulator's S3 client for large drills: PutObject straight into moto's in-memory bucket
    (virtual LastModified, as through the API) and into a ``BackendS3Reads`` index, without
    botocore's request building and moto's XML round trip -- a 1,000-run day writes tens of
    thousands of checkpoint shards. These writes are SageMaker's, never the supervisor's calls, so
    nothing is recorded. Every other call goes to moto.
    """

    def __init__(self, moto_client: Any, backend: Any, reads: BackendS3Reads) -> None:
        self._moto = moto_client
        self._backend = backend
        self._reads = reads

    def put_object(self, *, Bucket: str, Key: str, Body: bytes = b"", **_: Any) -> dict[str, Any]:
        if Bucket not in self._backend.buckets:
            raise client_error("NoSuchBucket", "The specified bucket does not exist", "PutObject")
        obj = self._backend.put_object(Bucket, Key, bytes(Body))
        self._reads.index(Bucket, Key)
        return {"ETag": obj.etag}


class BackendSnsPublish(_Shortcut):
    """The supervisor's SNS client with Publish handed to moto's backend (validated as botocore
    would, recorded for the IAM replay). Every other call goes to moto."""

    def __init__(self, moto_client: Any, backend: Any, record: Record | None = None) -> None:
        self._moto = moto_client
        self._backend = backend
        self._record = record

    def publish(self, **params: Any) -> dict[str, Any]:
        if self._record is not None:
            self._record("Publish", params)
        _validate(self._moto, "Publish", params)
        attributes = {
            k: {"Type": v["DataType"], "Value": v.get("StringValue")}
            for k, v in (params.get("MessageAttributes") or {}).items()
        }
        try:
            message_id = self._backend.publish(
                message=params["Message"],
                arn=params.get("TopicArn"),
                subject=params.get("Subject"),
                message_attributes=attributes,
            )
        except ValueError as exc:  # moto's API answers these as InvalidParameter
            raise client_error("InvalidParameter", str(exc), "Publish") from exc
        return {"MessageId": message_id}
