"""`make lint`'s layer check: no import upward, none across concerns except the declared order.

Layers are listed bottom-up in LAYERS; a module may import its own layer and any layer below it.
What the layers are and why: docs/development.md (*Layers*). Exit 1 and one line per violation.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "lambdas" / "sagewarden"

# bottom-up; the domain's concerns in their declared order, then the packages around the domain
LAYERS: tuple[tuple[str, str], ...] = (
    ("sagewarden.keys", "names the stack, the adapters and the domain share (tags, metrics, keys)"),
    ("sagewarden.domain.vocabulary", "entities, events, actions, policy, names, texts, the classifier"),
    ("sagewarden.domain.decision", "the decision under way, and how a run leaves it"),
    ("sagewarden.domain.hangs", "hang windows, alarms, signals and the heartbeat"),
    ("sagewarden.domain.checkpoints", "checkpoint history, retention and retirement"),
    ("sagewarden.domain.capacity", "launching, warm pools, Training Plans, quotas"),
    ("sagewarden.domain.hosts", "bad hosts, fabric, stragglers"),
    ("sagewarden.domain.endings", "an attempt's ending, crash loops, deletions"),
    ("sagewarden.domain", "the entry points: decide, due, lookups, goodput, resuming"),
    ("sagewarden.ids", "shared leaves: ids, settings, observability"),
    ("sagewarden.ports", "the Protocols the use cases need"),
    ("sagewarden.usecases", "the supervisor's use cases"),
    ("sagewarden.adapters", "AWS behind the ports"),
    ("sagewarden.api", "the HTTP API's parsing and representation"),
    ("sagewarden.composition", "wiring adapters into the use cases"),
    ("sagewarden.handlers", "the Lambda entry points"),
    ("sagewarden.openapi", "docs/openapi.json from the API's routes"),
)
# modules of the package root that form one layer with sagewarden.ids
SHARED_LEAVES = ("sagewarden.settings", "sagewarden.observability")


def layer_of(module: str) -> int | None:
    """The index in LAYERS of the most specific layer holding `module`, None if none does."""
    if module in SHARED_LEAVES:
        module = "sagewarden.ids"
    best: int | None = None
    for i, (prefix, _) in enumerate(LAYERS):
        if (module == prefix or module.startswith(prefix + ".")) and (
            best is None or len(prefix) > len(LAYERS[best][0])
        ):
            best = i
    return best


def module_name(path: Path, package: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> Iterator[tuple[int, str]]:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.lineno, node.module
            for alias in node.names:  # `from pkg import module`
                yield node.lineno, f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name


def violations(package: Path = PACKAGE) -> Iterator[str]:
    """One line per import that breaks the layers, for the package tree at `package`."""
    root = package.parent.parent
    for path in sorted(package.rglob("*.py")):
        here = module_name(path, package)
        if here == "sagewarden":
            continue
        mine = layer_of(here)
        if mine is None:
            yield f"{path.relative_to(root)}: module {here} is in no layer (scripts/check_layers.py LAYERS)"
            continue
        seen: set[int] = set()  # one line per import statement
        for line, target in imports(path):
            if not target.startswith("sagewarden.") or line in seen:
                continue
            theirs = layer_of(target)
            if theirs is not None and theirs > mine:
                seen.add(line)
                yield (
                    f"{path.relative_to(root)}:{line}: {here} ({LAYERS[mine][0]}) imports {target} "
                    f"({LAYERS[theirs][0]}), a layer above it"
                )
        if here.startswith("sagewarden.domain"):
            for line, target in imports(path):
                top = target.split(".")[0]
                if top in ("boto3", "botocore", "aws_lambda_powertools", "pydantic") or (
                    target.startswith("sagewarden.")
                    and not target.startswith(("sagewarden.domain", "sagewarden.keys"))
                ):
                    yield f"{path.relative_to(root)}:{line}: the domain imports {target}: it stays pure"


def main() -> int:
    found = list(violations())
    for v in found:
        print(v)
    print(f"layer check: {len(found)} violation(s)", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
