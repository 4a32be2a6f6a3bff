"""The length limits SageMaker enforces on a request and botocore does not check, from the service
model. Why: docs/fidelity.md."""

from __future__ import annotations

from typing import Any


def _camel(name: str) -> str:
    return name[:1].lower() + name[1:]


def _over(path: str, limit: int, *, map_value: bool = False) -> str:
    where = "Map value must satisfy constraint: [" if map_value else ""
    end = "]" if map_value else ""
    return (
        f"Value at '{path}' failed to satisfy constraint: {where}Member must have length less than "
        f"or equal to {limit}{end}"
    )


def length_problems(value: Any, shape: Any, path: str = "") -> list[str]:
    """Every member of `value` longer than its shape's maximum, as SageMaker words it."""
    kind = shape.type_name
    limit = shape.metadata.get("max")
    out: list[str] = []
    if kind == "structure" and isinstance(value, dict):
        for name, member in shape.members.items():
            if name in value:
                out += length_problems(
                    value[name], member, f"{path}.{_camel(name)}" if path else _camel(name)
                )
    elif kind == "list" and isinstance(value, list):
        if limit is not None and len(value) > limit:
            out.append(_over(path, limit))
        for i, item in enumerate(value):
            out += length_problems(item, shape.member, f"{path}.{i + 1}.member")
    elif kind == "map" and isinstance(value, dict):
        if limit is not None and len(value) > limit:
            out.append(_over(path, limit))
        value_limit = shape.value.metadata.get("max")
        for key, item in value.items():
            if shape.value.type_name == "string" and value_limit is not None and len(str(item)) > value_limit:
                out.append(_over(path, value_limit, map_value=True))
            elif shape.value.type_name != "string":
                out += length_problems(item, shape.value, f"{path}.{key}")
            key_limit = shape.key.metadata.get("max")
            if key_limit is not None and len(str(key)) > key_limit:
                out.append(_over(path, key_limit, map_value=True))
    elif kind == "string" and isinstance(value, str) and limit is not None and len(value) > limit:
        out.append(_over(path, limit))
    return out


def validation_message(problems: list[str]) -> str:
    n = len(problems)
    return f"{n} validation error{'s' if n != 1 else ''} detected: " + "; ".join(problems)
