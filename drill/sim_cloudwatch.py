"""CloudWatch as the simulated account sees it: moto for alarms, the simulator for metric data.

SageMaker's per-host metrics and the heartbeat metric are answered analytically by the
simulated SageMaker (weeks of one-minute datapoints would be too slow to push into moto), so
GetMetricData for those namespaces is served from it; every other call goes to moto.

Training-job logs reach the supervisor one of two ways: written to moto's CloudWatch Logs and
read back from it (:class:`FlushOnReadLogs`, the default), or read straight from the simulator's
in-memory lines (:class:`SimulatedLogs`) -- hundreds of hosts over weeks would otherwise cost
one moto call per host stream at every flush.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from drill.sim.texts import client_error
from drill.sim_sagemaker import SimSageMaker
from sagewarden.keys import TRAINING_LOG_GROUP


class SimulatedCloudWatch:
    def __init__(self, moto_client: Any, sim: SimSageMaker) -> None:
        self._moto = moto_client
        self._sim = sim

    def get_metric_data(
        self, *, MetricDataQueries: list[dict[str, Any]], StartTime: datetime, EndTime: datetime, **_: Any
    ) -> dict[str, Any]:
        start, end = int(StartTime.timestamp() * 1000), int(EndTime.timestamp() * 1000)
        results = []
        for q in MetricDataQueries:
            stat = q["MetricStat"]
            metric = stat["Metric"]
            dims = {d["Name"]: d["Value"] for d in metric.get("Dimensions", [])}
            points = self._sim.metric_datapoints(
                metric["Namespace"], metric["MetricName"], dims, start, end, int(stat["Period"]), stat["Stat"]
            )
            results.append(
                {
                    "Id": q["Id"],
                    "Label": metric["MetricName"],
                    "Timestamps": [datetime.fromtimestamp(t / 1000) for t, _ in reversed(points)],
                    "Values": [v for _, v in reversed(points)],
                    "StatusCode": "Complete",
                }
            )
        return {"MetricDataResults": results, "Messages": []}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._moto, name)


class FlushOnReadLogs:
    """CloudWatch Logs for the supervisor: the simulator's buffered log lines are written to moto
    right before anything reads them, so reads are always current and quiet stretches of
    virtual time cost no log writes."""

    READS = frozenset({"get_log_events", "filter_log_events", "describe_log_streams"})

    def __init__(self, moto_client: Any, sim: SimSageMaker) -> None:
        self._moto = moto_client
        self._sim = sim

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._moto, name)
        if name in self.READS:
            self._sim.flush_logs()
        return attr


class SimulatedLogs:
    """The CloudWatch Logs reads the supervisor makes, answered from the simulator's own lines.

    Supports DescribeLogStreams (by name prefix, ordered by name), GetLogEvents (from the end or
    the head, with a limit and a time window) and FilterLogEvents (by stream prefix and time
    window, no pattern), in the API's response shapes. Each host's newest 2,000 lines are kept; a
    read reaching further back sees only those. Anything else is not supported.
    """

    def __init__(self, sim: SimSageMaker, group: str = TRAINING_LOG_GROUP) -> None:
        self._sim = sim
        self._group = group

    def _check_group(self, group: str, operation: str) -> None:
        if group != self._group or not self._sim.has_logs():
            raise client_error(
                "ResourceNotFoundException", "The specified log group does not exist.", operation
            )

    def describe_log_streams(
        self,
        *,
        logGroupName: str,
        logStreamNamePrefix: str = "",
        orderBy: str = "LogStreamName",
        descending: bool = False,
        limit: int = 50,
        nextToken: str | None = None,
    ) -> dict[str, Any]:
        self._check_group(logGroupName, "DescribeLogStreams")
        if orderBy != "LogStreamName" or descending:
            raise NotImplementedError("SimulatedLogs lists streams by name, ascending")
        streams = self._sim.log_streams(logStreamNamePrefix)
        if nextToken is not None:
            streams = [s for s in streams if s[0] > nextToken]
        page = streams[:limit]
        out: list[dict[str, Any]] = []
        for name, job, host in page:
            events = self._sim.log_events(job, host)
            entry: dict[str, Any] = {
                "logStreamName": name,
                "creationTime": events[0][0] if events else job.created_ms,
                "arn": f"arn:aws:logs:{self._sim.region}:{self._sim.account_id}:log-group:{self._group}:log-stream:{name}",
                "storedBytes": 0,
            }
            if events:
                entry["firstEventTimestamp"] = events[0][0]
                entry["lastEventTimestamp"] = events[-1][0]
                entry["lastIngestionTime"] = events[-1][0]
            out.append(entry)
        resp: dict[str, Any] = {"logStreams": out}
        if len(streams) > limit and page:
            resp["nextToken"] = page[-1][0]
        return resp

    def get_log_events(
        self,
        *,
        logGroupName: str,
        logStreamName: str,
        startTime: int | None = None,
        endTime: int | None = None,
        limit: int = 10_000,
        startFromHead: bool = False,
        **_: Any,
    ) -> dict[str, Any]:
        self._check_group(logGroupName, "GetLogEvents")
        match = [s for s in self._sim.log_streams(logStreamName) if s[0] == logStreamName]
        if not match:
            raise client_error(
                "ResourceNotFoundException", "The specified log stream does not exist.", "GetLogEvents"
            )
        job, host = match[0][1], match[0][2]
        events = [
            (t, m)
            for t, m in self._sim.log_events(job, host)
            if (startTime is None or t >= startTime) and (endTime is None or t < endTime)
        ]
        events = events[:limit] if startFromHead else events[-limit:]
        return {
            "events": [{"timestamp": t, "message": m, "ingestionTime": t} for t, m in events],
            "nextForwardToken": f"f/{events[-1][0] if events else 0:020d}",
            "nextBackwardToken": f"b/{events[0][0] if events else 0:020d}",
        }

    def filter_log_events(
        self,
        *,
        logGroupName: str,
        logStreamNamePrefix: str = "",
        startTime: int | None = None,
        endTime: int | None = None,
        limit: int = 10_000,
        **kwargs: Any,
    ) -> dict[str, Any]:
        self._check_group(logGroupName, "FilterLogEvents")
        if kwargs.get("filterPattern"):
            raise NotImplementedError("SimulatedLogs does not match filter patterns")
        found: list[tuple[int, str, str]] = []
        for name, job, host in self._sim.log_streams(logStreamNamePrefix):
            for t, m in self._sim.log_events(job, host):
                if (startTime is None or t >= startTime) and (endTime is None or t < endTime):
                    found.append((t, name, m))
        found.sort(key=lambda e: (e[0], e[1]))
        return {
            "events": [
                {
                    "logStreamName": name,
                    "timestamp": t,
                    "message": m,
                    "ingestionTime": t,
                    "eventId": f"{t}-{i}",
                }
                for i, (t, name, m) in enumerate(found[:limit])
            ],
            "searchedLogStreams": [],
        }


class BackendAlarmReads:
    """The supervisor's CloudWatch client with DescribeAlarms answered from moto's in-memory alarms.

    moto serializes every alarm of every DescribeAlarms page through its generic response
    serializer (about 3 ms for a 10-metric alarm), so a sweep reading 4,000 alarms every minute
    would make the drill, not the supervisor, the bottleneck. This reads the same alarms from
    moto's backend (entries as ``describe_alarms`` returns them, see
    ``drill.alarm_evaluator._entry_from_backend``) and pages them as CloudWatch does, which moto
    does not: ``MaxRecords`` per page (the default page size is not documented; 50 is assumed),
    ``NextToken`` to continue. Filters: ``AlarmNamePrefix`` or ``AlarmNames``, ``StateValue``,
    ``AlarmTypes`` (composite alarms are never returned). Every other call goes to moto.

    ``record`` is called with (operation, params) for each DescribeAlarms call (the drill's IAM
    recorder); the paginator goes through :meth:`describe_alarms`, so each page is one call.
    """

    DEFAULT_PAGE = 50

    def __init__(
        self, moto_client: Any, backend: Any, record: Callable[[str, dict[str, Any]], None] | None = None
    ) -> None:
        self._moto = moto_client
        self._backend = backend
        self._record = record
        # name -> ((alarm object id, configuration time), entry without its state): an alarm's
        # configuration is converted once, its state at every read
        self._entries: dict[str, tuple[tuple[int, Any], dict[str, Any]]] = {}

    def describe_alarms(self, **params: Any) -> dict[str, Any]:
        from drill.alarm_evaluator import _entry_from_backend

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
        found = sorted(
            name
            for name, alarm in self._backend.alarms.items()
            if getattr(alarm, "rule", None) is None
            and (prefix is None or name.startswith(prefix))
            and (not names or name in names)
            and (state is None or alarm.state_value == state)
            and (after is None or name > after)
        )
        page = found[:size]
        out: list[dict[str, Any]] = []
        for name in page:
            alarm = self._backend.alarms[name]
            version = (id(alarm), alarm.configuration_updated_timestamp)
            cached = self._entries.get(name)
            if cached is None or cached[0] != version:
                base = _entry_from_backend(alarm)
                base["AlarmArn"] = alarm.alarm_arn
                base["ActionsEnabled"] = bool(alarm.actions_enabled)
                cached = self._entries[name] = (version, base)
            entry = dict(cached[1])
            entry["StateValue"] = alarm.state_value
            entry["StateReason"] = alarm.state_reason
            stamp = alarm.state_updated_timestamp
            entry["StateUpdatedTimestamp"] = stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)
            out.append(entry)
        resp: dict[str, Any] = {"MetricAlarms": out, "CompositeAlarms": []}
        if len(found) > size:
            resp["NextToken"] = page[-1]
        return resp

    def get_paginator(self, name: str) -> Any:
        if name != "describe_alarms":
            return self._moto.get_paginator(name)
        return _Paginator(self.describe_alarms, "MaxRecords", "NextToken", "NextToken")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._moto, name)


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


class BackendS3Reads:
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
            keys = self._keys.setdefault(str(params["Bucket"]), [])
            key = str(params["Key"])
            i = bisect.bisect_left(keys, key)
            if i == len(keys) or keys[i] != key:
                keys.insert(i, key)

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
        events.register("before-parameter-build.s3.DeleteObject", delete)
        events.register("before-parameter-build.s3.DeleteObjects", delete)

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

    def get_paginator(self, name: str) -> Any:
        if name != "list_objects_v2":
            return self._moto.get_paginator(name)
        return _Paginator(self.list_objects_v2, "MaxKeys", "ContinuationToken", "NextContinuationToken")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._moto, name)
