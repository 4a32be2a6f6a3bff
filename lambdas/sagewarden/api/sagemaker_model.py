"""CreateTrainingJob's request shape from the botocore service model, checked to full depth.

Reports each problem with its path (e.g. `training_job.ResourceConfig.InstanceCount`), loads the
model lazily once per container, and renders it as JSON Schema (`json_schemas`).
Why: docs/api.md (*What a cold start loads*)."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sagewarden.api.json_body import join
from sagewarden.usecases.errors import FieldError, did_you_mean

SERVICE = "sagemaker"
OPERATION = "CreateTrainingJob"
SET_BY_SAGEWARDEN = frozenset({"TrainingJobName"})
MAX_WALK_DEPTH = 24  # the model nests 7 levels; a bound so nothing can make the walk run away
MAX_PROBLEMS = 100  # stop walking once this many problems are known
ENUM_LISTED = 12  # enums up to this size are listed in full in a message
SCHEMA_PREFIX = "sagemaker."


@dataclass(frozen=True)
class Model:
    root: str
    shapes: Mapping[str, Mapping[str, Any]]
    patterns: Mapping[str, re.Pattern[str] | None]  # pattern text -> compiled, None if `re` cannot
    botocore_version: str

    def shape(self, name: str) -> Mapping[str, Any]:
        return self.shapes[name]

    def member_shape(self, structure: str, member: str) -> str:
        return str(self.shapes[structure]["members"][member]["shape"])


@functools.cache
def model() -> Model:
    """The CreateTrainingJob input shapes (documentation stripped), loaded on first use."""
    import botocore
    from botocore.loaders import create_loader

    service = create_loader().load_service_model(SERVICE, "service-2")
    all_shapes = service["shapes"]
    root = service["operations"][OPERATION]["input"]["shape"]
    keep: dict[str, dict[str, Any]] = {}
    todo = [root]
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        shape = {k: v for k, v in all_shapes[name].items() if k != "documentation"}
        if "members" in shape:
            shape["members"] = {m: {"shape": ref["shape"]} for m, ref in shape["members"].items()}
            todo += [ref["shape"] for ref in shape["members"].values()]
        todo += [shape[k]["shape"] for k in ("member", "key", "value") if k in shape]
        keep[name] = shape
    patterns: dict[str, re.Pattern[str] | None] = {}
    for shape in keep.values():
        text = shape.get("pattern")
        if text is not None and text not in patterns:
            try:
                patterns[text] = re.compile(text, re.ASCII | re.DOTALL)
            except re.error:  # e.g. \p{L}: Java/ECMAScript classes Python's re does not have
                patterns[text] = None
    return Model(root, keep, patterns, botocore.__version__)


def training_job_problems(job: Any, path: str = "training_job") -> list[FieldError]:
    """Every way `job` differs from CreateTrainingJob's input (TrainingJobName excluded)."""
    m = model()
    walk = _Walk(m)
    walk.check(job, m.root, path, 0, skip=SET_BY_SAGEWARDEN)
    return walk.problems


def value_problems(value: Any, structure: str, member: str, path: str) -> list[FieldError]:
    """Problems of one value checked against one member of a model structure (e.g. InstanceType)."""
    m = model()
    walk = _Walk(m)
    walk.check(value, m.member_shape(structure, member), path, 0)
    return walk.problems


def limit(structure: str, member: str, key: str) -> Any:
    """A limit of a member's shape, e.g. limit("CreateTrainingJobRequest", "Tags", "max") -> 50."""
    m = model()
    return m.shape(m.member_shape(structure, member)).get(key)


class _Walk:
    def __init__(self, m: Model) -> None:
        self.m = m
        self.problems: list[FieldError] = []

    def add(self, path: str, message: str) -> None:
        self.problems.append(FieldError(path, message))

    def full(self) -> bool:
        return len(self.problems) >= MAX_PROBLEMS

    def check(
        self, value: Any, shape_name: str, path: str, depth: int, skip: frozenset[str] = frozenset()
    ) -> None:
        if self.full():
            return
        if depth > MAX_WALK_DEPTH:
            self.add(path, f"nested deeper than {MAX_WALK_DEPTH} levels")
            return
        shape = self.m.shape(shape_name)
        kind = shape["type"]
        if value is None:
            self.add(path, f"must not be null: {_expected(kind)}")
            return
        if kind == "structure":
            self._structure(value, shape, path, depth, skip)
        elif kind == "list":
            self._list(value, shape, path, depth)
        elif kind == "map":
            self._map(value, shape, path, depth)
        elif kind == "string":
            self._string(value, shape, shape_name, path)
        elif kind in ("integer", "long"):
            if not isinstance(value, int) or isinstance(value, bool):
                self.add(path, "must be an integer")
            else:
                before = len(self.problems)
                self._range(value, shape, path)
                type_low, type_high = INT_BOUNDS[kind]
                if len(self.problems) == before and not type_low <= value <= type_high:
                    bits = 32 if kind == "integer" else 64
                    limit = f"at most {type_high}" if value > type_high else f"at least {type_low}"
                    self.add(path, f"must be {limit} (a {bits}-bit integer)")
        elif kind in ("float", "double"):
            if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
                self.add(path, "must be a finite number")
            else:
                self._range(value, shape, path)
        elif kind == "boolean":
            if not isinstance(value, bool):
                self.add(path, "must be true or false")
        elif kind == "timestamp":
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                self.add(path, "must be an ISO 8601 timestamp or epoch seconds")
        elif not isinstance(value, str):  # blob
            self.add(path, "must be a base64 string")

    def _structure(
        self, value: Any, shape: Mapping[str, Any], path: str, depth: int, skip: frozenset[str]
    ) -> None:
        if not isinstance(value, Mapping):
            self.add(path, "must be an object")
            return
        members: Mapping[str, Any] = shape.get("members", {})
        for key in value:
            if key not in members and key not in skip:
                self.add(join(path, key), "unknown field" + did_you_mean(key, [*members]))
        for name in shape.get("required", ()):
            if name not in value and name not in skip:
                self.add(join(path, name), "required")
        for key, child in value.items():
            if key in members and key not in skip:
                self.check(child, members[key]["shape"], join(path, key), depth + 1)

    def _list(self, value: Any, shape: Mapping[str, Any], path: str, depth: int) -> None:
        if not isinstance(value, list):
            self.add(path, "must be a list")
            return
        if not self._size(len(value), shape, path, "items"):
            return  # an oversized list is not walked item by item
        for i, item in enumerate(value):
            self.check(item, shape["member"]["shape"], f"{path}[{i}]", depth + 1)

    def _map(self, value: Any, shape: Mapping[str, Any], path: str, depth: int) -> None:
        if not isinstance(value, Mapping):
            self.add(path, "must be an object")
            return
        if not self._size(len(value), shape, path, "entries"):
            return
        for key, child in value.items():
            before = len(self.problems)
            self.check(key, shape["key"]["shape"], join(path, key), depth + 1)
            for i in range(before, len(self.problems)):
                p = self.problems[i]
                self.problems[i] = FieldError(p.field, f"key {p.message}")
            self.check(child, shape["value"]["shape"], join(path, key), depth + 1)

    def _size(self, n: int, shape: Mapping[str, Any], path: str, what: str) -> bool:
        low, high = shape.get("min"), shape.get("max")
        if low is not None and n < low:
            self.add(path, f"needs at least {low} {what}")
            return False
        if high is not None and n > high:
            self.add(path, f"at most {high} {what} (has {n})")
            return False
        return True

    def _string(self, value: Any, shape: Mapping[str, Any], shape_name: str, path: str) -> None:
        if not isinstance(value, str):
            self.add(path, "must be a string")
            return
        low, high = shape.get("min"), shape.get("max")
        if (low is not None and len(value) < low) or (high is not None and len(value) > high):
            self.add(path, _length(low, high, len(value)))
            return
        enum = shape.get("enum")
        if enum is not None and value not in enum:
            if len(enum) <= ENUM_LISTED:
                self.add(path, f"must be one of {', '.join(enum)}")
            else:
                self.add(path, f"not a valid {shape_name} ({len(enum)} values)" + did_you_mean(value, enum))
            return
        text = shape.get("pattern")
        compiled = self.m.patterns.get(text) if text is not None else None
        if compiled is not None and not compiled.fullmatch(value):
            self.add(path, f"must match {text}")

    def _range(self, value: float, shape: Mapping[str, Any], path: str) -> None:
        low, high = shape.get("min"), shape.get("max")
        if (low is not None and value < low) or (high is not None and value > high):
            if low is not None and high is not None:
                self.add(path, f"must be from {low} to {high}")
            elif low is not None:
                self.add(path, f"must be at least {low}")
            else:
                self.add(path, f"must be at most {high}")


# The model's "integer" is a 32-bit signed integer and "long" a 64-bit one (Smithy's types): a
# member without a documented min or max is still bounded by its type, which SageMaker enforces.
INT_BOUNDS = {"integer": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}


def _int_shape(kind: str, shape: Mapping[str, Any]) -> Mapping[str, Any]:
    low, high = INT_BOUNDS[kind]
    return {
        **shape,
        "min": low if shape.get("min") is None else shape["min"],
        "max": high if shape.get("max") is None else shape["max"],
    }


def _expected(kind: str) -> str:
    return {
        "structure": "an object",
        "map": "an object",
        "list": "a list",
        "string": "a string",
        "integer": "an integer",
        "long": "an integer",
        "boolean": "true or false",
    }.get(kind, "a value")


def _length(low: int | None, high: int | None, n: int) -> str:
    low = low or None  # "0 to N characters" reads as "at most N"
    if low is not None and high is not None:
        return f"must be {low} to {high} characters (has {n})"
    if low is not None:
        return f"must be at least {low} characters"
    return f"must be at most {high} characters (has {n})"


# --- JSON Schema for the OpenAPI document --------------------------------------------------------


def json_schemas(required_extra: Mapping[str, list[str]] | None = None) -> tuple[str, dict[str, Any]]:
    """(root schema name, {name: JSON Schema}) of the CreateTrainingJob input minus TrainingJobName.

    Names are prefixed `sagemaker.`; `required_extra` adds required members that sagewarden
    demands beyond the model (e.g. CheckpointConfig), keyed by shape name.
    """
    m = model()
    extra = required_extra or {}
    out: dict[str, Any] = {}
    for name, shape in sorted(m.shapes.items()):
        out[SCHEMA_PREFIX + name] = _schema(m, name, shape, list(extra.get(name, ())))
    return SCHEMA_PREFIX + m.root, out


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{SCHEMA_PREFIX}{name}"}


def _schema(m: Model, name: str, shape: Mapping[str, Any], required_extra: list[str]) -> dict[str, Any]:
    kind = shape["type"]
    low, high = shape.get("min"), shape.get("max")
    out: dict[str, Any]
    if kind == "structure":
        skip = SET_BY_SAGEWARDEN if name == m.root else frozenset()
        props = {k: _ref(v["shape"]) for k, v in shape.get("members", {}).items() if k not in skip}
        required = [r for r in shape.get("required", ()) if r not in skip]
        required += [r for r in required_extra if r not in required]
        out = {"type": "object", "properties": props, "additionalProperties": False}
        if required:
            out["required"] = required
    elif kind == "list":
        out = {"type": "array", "items": _ref(shape["member"]["shape"])}
        out |= _bounds("minItems", low, "maxItems", high)
    elif kind == "map":
        out = {"type": "object", "additionalProperties": _ref(shape["value"]["shape"])}
        out["propertyNames"] = _ref(shape["key"]["shape"])
        out |= _bounds("minProperties", low, "maxProperties", high)
    elif kind == "string":
        out = {"type": "string"} | _bounds("minLength", low, "maxLength", high)
        if "enum" in shape:
            out["enum"] = list(shape["enum"])
        elif m.patterns.get(shape.get("pattern", "")) is not None:
            out["pattern"] = f"^(?:{shape['pattern']})$"
    elif kind in ("integer", "long"):
        bounded = _int_shape(kind, shape)
        out = {"type": "integer"} | _bounds("minimum", bounded["min"], "maximum", bounded["max"])
    elif kind in ("float", "double"):
        out = {"type": "number"} | _bounds("minimum", low, "maximum", high)
    elif kind == "boolean":
        out = {"type": "boolean"}
    else:
        out = {"type": "string"}
    return out


def _bounds(low_key: str, low: Any, high_key: str, high: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if low is not None:
        out[low_key] = low
    if high is not None:
        out[high_key] = high
    return out
