"""The drill scenario format's checker: walks an object against its field specifications and
collects one problem per line, each naming its path (with a did-you-mean for unknown names)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from drill.scenarios.fields import (
    Spec,
    _did_you_mean,
    _show,
)


def _type_name(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int):
        return "an integer"
    if isinstance(v, float):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list | tuple):
        return "a list"
    return "an object"


_EXPECTED = {
    "int": "an integer",
    "number": "a number",
    "str": "a string",
    "bool": "true or false",
    "object": "an object",
    "list": "a list",
    "str[]": "a list of strings",
    "null": "null",
}


def _matches(v: Any, t: str) -> bool:
    if t == "null":
        return v is None
    if t == "int":
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "number":
        return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    if t == "str":
        return isinstance(v, str)
    if t == "bool":
        return isinstance(v, bool)
    if t == "object":
        return isinstance(v, dict)
    if t == "list":  # a tuple too: Python callers build scenarios from dataclasses.asdict
        return isinstance(v, list | tuple)
    if t == "str[]":
        return isinstance(v, list | tuple) and all(isinstance(x, str) for x in v)
    raise AssertionError(f"unknown spec type {t}")


class _Checker:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def add(self, path: str, message: str) -> None:
        line = f"{path}: {message}" if path else message
        if line not in self.problems:
            self.problems.append(line)

    def obj(self, path: str, value: Any, specs: Mapping[str, Spec]) -> dict[str, Any]:
        """Check an object against ``specs``; returns its fields that passed (others dropped)."""
        if not isinstance(value, dict):
            self.add(path, f"expected an object, got {_type_name(value)}")
            return {}
        for key in getattr(value, "repeated", ()):
            self.add(_join(path, key), "appears more than once in the object")
        good: dict[str, Any] = {}
        for key, v in value.items():
            spec = specs.get(key)
            where = _join(path, key)
            if spec is None:
                self.add(where, "unknown field" + _did_you_mean(key, list(specs)))
                continue
            if self.value(where, v, spec):
                good[key] = v
        for key, spec in specs.items():
            if spec.required and key not in value:
                self.add(_join(path, key), "required field missing")
        return good

    def value(self, path: str, v: Any, spec: Spec) -> bool:
        types = spec.types.split("|")
        if not any(_matches(v, t) for t in types):
            want = " or ".join(_EXPECTED[t] for t in types)
            shown = "" if isinstance(v, dict | list | tuple) else f" ({_show(v)})"
            self.add(path, f"expected {want}, got {_type_name(v)}{shown}")
            return False
        if v is not None and spec.check is not None and not isinstance(v, dict | list | tuple):
            problem = spec.check(v)
            if problem:
                self.add(path, problem)
                return False
        return True


def _tuples(data: dict[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list | tuple) else v for k, v in data.items()}


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _list(check: _Checker, path: str, value: Any) -> list[Any]:
    if not isinstance(value, list | tuple):
        return []  # the type is reported by the top-level check
    return list(value)
