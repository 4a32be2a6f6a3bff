"""`submit`: read a run from YAML or JSON, apply `--set` overrides, validate locally (--dry-run).

The dry run uses the API's own validation (lambdas/sagewarden/api): the same strict JSON rules,
the same full-depth CreateTrainingJob check against botocore's SageMaker model, the same policy
ranges. What it cannot know locally is said as a note: the deployment's `allowedRoleArns`, its
`policyDefaults` and its job prefix. The live runs holding the run's name or an overlapping
checkpoint prefix (the API's 409) are read from the API (`live_conflicts`, GET /runs only) when
it can be reached; when it cannot, a note says they were not checked.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import json
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

import yaml

from sagewarden_cli.errors import USAGE, CliError

BODY_KEYS = ("name", "training_job", "policy")
# --set shortcuts: key -> path in the POST /runs body
SHORTCUTS = {
    "instance_type": ("training_job", "ResourceConfig", "InstanceType"),
    "instance_count": ("training_job", "ResourceConfig", "InstanceCount"),
    "max_runtime_seconds": ("training_job", "StoppingCondition", "MaxRuntimeInSeconds"),
}
# maps of strings in SageMaker's model: a --set value there stays the text as typed
_STRING_MAPS = (
    ("training_job", "Environment"),
    ("training_job", "HyperParameters"),
    ("policy", "environment_defaults"),
)
_INDEX = re.compile(r"^(?P<key>[^\[\]]*)((\[\d+\])*)$")


# -- reading -----------------------------------------------------------------------------------------
def load_body(path: str, stdin: TextIO) -> dict[str, Any]:
    """The run in `path` ('-' = stdin): JSON for *.json, else YAML (JSON is also read from stdin)."""
    where = "stdin" if path == "-" else path
    try:
        text = stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise CliError(f"{where}: no such file", USAGE) from exc
    except IsADirectoryError as exc:
        raise CliError(f"{where}: is a directory, not a run file", USAGE) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"{where}: cannot read it ({exc})", USAGE) from exc
    if not text.strip():
        raise CliError(f"{where}: empty; expected a run (name, training_job, policy)", USAGE)
    as_json = path.endswith(".json") or (path == "-" and text.lstrip().startswith("{"))
    if as_json:
        try:
            data = json.loads(text, object_pairs_hook=_no_repeats_json(where))
        except json.JSONDecodeError as exc:
            raise CliError(f"{where}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}", USAGE) from exc
    else:
        try:
            data = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark
            at = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
            raise CliError(f"{where}{at}: invalid YAML: {exc.problem or exc}", USAGE) from exc
        except yaml.YAMLError as exc:
            raise CliError(f"{where}: invalid YAML: {exc}", USAGE) from exc
    if not isinstance(data, dict):
        raise CliError(
            f"{where}: expected a mapping with name, training_job and policy, got {_kind(data)}", USAGE
        )
    _check_plain(data, where, "")
    return data


def _no_repeats_json(where: str) -> Any:
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        for k, _ in items:
            if k in seen:
                raise CliError(f"{where}: key {k!r} appears twice in one object", USAGE)
            seen.add(k)
        return dict(items)

    return pairs


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key repeated in one mapping (YAML would keep the last one)."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice in one mapping", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _check_plain(value: Any, where: str, path: str) -> None:
    """YAML can produce what JSON cannot carry: dates, binary, non-string keys."""
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise CliError(f"{where}: key {k!r} at {path or 'top level'} must be text; quote it", USAGE)
            _check_plain(v, where, f"{path}.{k}" if path else k)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_plain(v, where, f"{path}[{i}]")
    elif isinstance(value, dt.date | dt.datetime | dt.time | bytes | set):
        raise CliError(f"{where}: {path} is a {_kind(value)}, which JSON cannot carry; quote it", USAGE)


def _kind(value: Any) -> str:
    return {
        type(None): "nothing",
        list: "a list",
        str: "text",
        int: "a number",
        float: "a number",
        bool: "true/false",
    }.get(type(value), type(value).__name__)


# -- --set ---------------------------------------------------------------------------------------------
def apply_sets(body: dict[str, Any], assignments: list[str]) -> dict[str, Any]:
    """`key=value` overrides: a shortcut (instance_type, instance_count, max_runtime_seconds),
    `name`, a policy field (max_restarts=20), or a dotted path into the body
    (training_job.Environment.NCCL_DEBUG=WARN, training_job.InputDataConfig[0].ChannelName=train).
    Values are YAML scalars (20, true, [a, b], {k: v}); `null` removes the key."""
    out = copy.deepcopy(body)
    for raw in assignments:
        key, sep, text = raw.partition("=")
        key = key.strip()
        if not sep or not key:
            raise CliError(f"--set {raw!r}: expected key=value, e.g. --set instance_count=4", USAGE)
        path = _path_of(key)
        remove = text.strip() in ("null", "~")
        new = text if _is_string_map(path) else _scalar(raw, text)
        _assign(out, path, new, remove=remove, raw=raw)
    return out


def _policy_fields() -> list[str]:
    from sagewarden.domain.vocabulary.policy import RunPolicy

    return [f.name for f in dataclasses.fields(RunPolicy) if f.name != "extra"]


def _path_of(key: str) -> list[str | int]:
    from sagewarden.usecases.errors import did_you_mean

    if key in SHORTCUTS:
        return list(SHORTCUTS[key])
    if "." not in key and "[" not in key:
        if key in BODY_KEYS:
            return [key]
        fields = _policy_fields()
        if key in fields:
            return ["policy", key]
        hint = did_you_mean(key, [*SHORTCUTS, *fields, "name"])
        raise CliError(
            f"--set {key}: not a shortcut ({', '.join(SHORTCUTS)}), `name`, or a policy field{hint}; "
            "use a dotted path such as training_job.ResourceConfig.VolumeSizeInGB",
            USAGE,
        )
    path: list[str | int] = []
    for part in key.split("."):
        m = _INDEX.match(part)
        if not m or (not m.group("key") and not path):
            raise CliError(f"--set {key}: cannot read {part!r} as a key or key[index]", USAGE)
        if m.group("key"):
            path.append(m.group("key"))
        path += [int(i) for i in re.findall(r"\[(\d+)\]", part)]
    if path[0] not in BODY_KEYS:
        from sagewarden.usecases.errors import did_you_mean as dym

        raise CliError(
            f"--set {key}: the body has only {', '.join(BODY_KEYS)}{dym(str(path[0]), BODY_KEYS)}", USAGE
        )
    return path


def _is_string_map(path: list[str | int]) -> bool:
    return len(path) == 3 and tuple(path[:2]) in _STRING_MAPS


def _scalar(raw: str, text: str) -> Any:
    if text == "":
        return ""
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise CliError(
            f"--set {raw!r}: cannot read the value: {getattr(exc, 'problem', exc)}", USAGE
        ) from exc
    _check_plain(value, f"--set {raw!r}", "value")
    return value


def _assign(body: dict[str, Any], path: list[str | int], new: Any, *, remove: bool, raw: str) -> None:
    node: Any = body
    for i, step in enumerate(path[:-1]):
        nxt = path[i + 1]
        if isinstance(step, int):
            if not isinstance(node, list) or step >= len(node):
                raise CliError(f"--set {raw!r}: no item [{step}] at {_dotted(path[:i])}", USAGE)
            node = node[step]
            continue
        if not isinstance(node, dict):
            raise CliError(f"--set {raw!r}: {_dotted(path[:i])} is not an object", USAGE)
        if step not in node or node[step] is None:
            if isinstance(nxt, int):
                raise CliError(f"--set {raw!r}: {_dotted(path[: i + 1])} has no list to index", USAGE)
            node[step] = {}
        node = node[step]
    last = path[-1]
    if isinstance(last, int):
        if not isinstance(node, list) or last >= len(node):
            raise CliError(f"--set {raw!r}: no item [{last}] at {_dotted(path[:-1])}", USAGE)
        if remove:
            del node[last]
        else:
            node[last] = new
        return
    if not isinstance(node, dict):
        raise CliError(f"--set {raw!r}: {_dotted(path[:-1])} is not an object", USAGE)
    if remove:
        node.pop(last, None)
    else:
        node[last] = new


def _dotted(path: list[str | int]) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out or "the body"


# -- dry run -------------------------------------------------------------------------------------------
@dataclasses.dataclass
class DryRun:
    valid: bool
    errors: list[dict[str, str]]
    name: str | None = None
    first_job_name: str | None = None
    policy: dict[str, Any] | None = None
    notes: list[str] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def dry_run(body: Mapping[str, Any], idempotency_key: str | None) -> tuple[DryRun, Any]:
    """Validate `body` exactly as POST /runs would (nothing is sent). Returns the result and the
    validated request (`SubmitRun`, None when invalid)."""
    from sagewarden import keys
    from sagewarden.api.json_body import body_text, parse_json
    from sagewarden.api.validation import idempotency_key_problem, validate_submit
    from sagewarden.domain.vocabulary.names import job_name
    from sagewarden.domain.vocabulary.policy import RunPolicy
    from sagewarden.ids import ulid
    from sagewarden.usecases.errors import InvalidRequest

    errors: list[dict[str, str]] = []
    if idempotency_key is not None and (problem := idempotency_key_problem(idempotency_key)):
        errors.append({"field": "Idempotency-Key", "message": problem})
    role = body.get("training_job", {}).get("RoleArn") if isinstance(body.get("training_job"), dict) else None
    try:
        parsed = parse_json(body_text(json.dumps(body, ensure_ascii=False), False))
        req = validate_submit(
            parsed,
            # the deployment's allowedRoleArns is not known here: the role is checked at submit
            allowed_roles=frozenset([role]) if isinstance(role, str) else frozenset(),
            job_prefix=keys.DEFAULT_JOB_PREFIX,
            policy_defaults=RunPolicy(),
        )
    except InvalidRequest as exc:
        errors += [{"field": e.field, "message": e.message} for e in exc.errors]
        return DryRun(False, errors), None
    if errors:
        return DryRun(False, errors), None
    sample_id = ulid(int(time.time() * 1000))
    notes = [
        f"the run id in the job name is an example: the API assigns it (job prefix {keys.DEFAULT_JOB_PREFIX!r} "
        "unless the deployment sets jobPrefix)",
        "not checked locally: RoleArn must be one of the deployment's allowedRoleArns, and its "
        "policyDefaults apply under your policy (the policy above uses the built-in defaults)",
    ]
    return (
        DryRun(
            True,
            [],
            name=req.name,
            first_job_name=job_name(keys.DEFAULT_JOB_PREFIX, req.name, sample_id, 1),
            policy=req.policy.to_dict(),
            notes=notes,
        ),
        req,
    )


# -- the live runs a submit would collide with ---------------------------------------------------------
LIVE_STATUSES = ("SUBMITTED", "STARTING", "TRAINING", "RETRY_WAIT", "STOPPING")


def live_conflicts(client: Any, name: str, s3_uri: str) -> list[dict[str, str]]:
    """The live runs (GET /runs, every page of each live status) holding `name` or a checkpoint
    prefix that is `s3_uri`'s, inside it or around it: the API would refuse the submit (409)."""
    from sagewarden.domain.vocabulary.claims import overlaps

    found: list[dict[str, str]] = []
    for status in LIVE_STATUSES:
        for r in client.pages("/runs", "runs", {"status": status, "limit": "100"}):
            theirs = str(r.get("checkpoint_uri") or "")
            for on in overlaps(name, s3_uri, str(r.get("name", "")), theirs):
                found.append(_conflict(r, on, name, s3_uri, theirs))
    return found


def _conflict(r: Any, on: str, name: str, s3_uri: str, theirs: str) -> dict[str, str]:
    from sagewarden.domain.vocabulary.claims import checkpoint_prefix as prefix

    who = f"run {r['run_id']} ({r.get('name')}, {r.get('status')})"
    if on == "name":
        message = f"the name {name!r} is used by live {who}"
    else:
        message = (
            f"live {who} writes its checkpoints to {prefix(theirs)}, which overlaps {prefix(s3_uri)}: "
            "the runs would overwrite or download each other's checkpoints"
        )
    return {
        "field": "name" if on == "name" else "training_job.CheckpointConfig.S3Uri",
        "on": on,
        "run_id": str(r["run_id"]),
        "message": message,
    }
