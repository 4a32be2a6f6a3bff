"""`sagewarden selftest`'s alarm-shape report: what CloudWatch made of the hang-alarm shapes when
the stack was deployed.

The stack's alarm-shape check (a custom resource, ``sagewarden.adapters.alarm_shapes``) put one alarm of
every shape the supervisor creates, with CloudWatch's own ``PutMetricAlarm``, and deleted it again,
at the last deploy that changed the shapes; a refusal fails that deploy, so a deployed stack's
report says "accepted". The report is the stack output ``AlarmShapes``. Reading it needs only
``cloudformation:DescribeStacks`` on the stack, which the CLI already uses to find the API URL when
``--api-url`` is not given; putting the alarms again with the user's credentials would need the
right to create and delete alarms.

A stack without the output (deployed before the check existed) or one the identity may not read
is "not checked", never a failure of the self-test: the self-test's own hang still goes through
a real log-silence alarm.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

OUTPUT_ALARM_SHAPES = "AlarmShapes"  # infra.constants.OUTPUT_ALARM_SHAPES
ACCEPTED, NOT_CHECKED = "accepted", "not checked"


@dataclass(frozen=True)
class ShapeLine:
    shape: str
    result: str  # accepted | not checked
    alarms: tuple[str, ...]


@dataclass(frozen=True)
class ShapeReport:
    state: str  # accepted | not checked
    stack: str
    detail: str = ""
    checked_at: str | None = None
    shapes: tuple[ShapeLine, ...] = ()

    def lines(self) -> list[str]:
        """One line per shape, after a heading."""
        if self.state != ACCEPTED:
            head = f"alarm shapes: not checked ({self.detail})"
            return [head, *(f"  -    {s.shape:<20} {', '.join(s.alarms)}" for s in self.shapes)]
        head = (
            f"alarm shapes: CloudWatch accepted all {len(self.shapes)} when stack {self.stack} was deployed"
            + (f" ({self.checked_at})" if self.checked_at else "")
        )
        return [head, *(f"  ok   {s.shape:<20} {', '.join(s.alarms)}" for s in self.shapes)]

    def to_json(self) -> dict[str, Any]:
        return {
            "result": self.state,
            "stack": self.stack,
            "checked_at": self.checked_at,
            "detail": self.detail,
            "shapes": [{"shape": s.shape, "result": s.result, "alarms": list(s.alarms)} for s in self.shapes],
        }


def read(cloudformation: Any, stack: str) -> ShapeReport:
    """The stack's alarm-shape report (DescribeStacks); "not checked" with the reason when it
    cannot be read."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        described = cloudformation.describe_stacks(StackName=stack)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        return ShapeReport(
            NOT_CHECKED,
            stack,
            f"stack {stack}: {error.get('Code', 'error')}: {error.get('Message', '')}".strip(),
        )
    except BotoCoreError as exc:
        return ShapeReport(NOT_CHECKED, stack, f"stack {stack} could not be read: {exc}")
    stacks = described.get("Stacks") or []
    outputs = (
        {o.get("OutputKey"): o.get("OutputValue") for o in (stacks[0].get("Outputs") or [])} if stacks else {}
    )
    text = outputs.get(OUTPUT_ALARM_SHAPES)
    if not text:
        return ShapeReport(
            NOT_CHECKED,
            stack,
            f"stack {stack} has no {OUTPUT_ALARM_SHAPES} output: it was deployed before the alarm-shape check; "
            "deploy it again",
        )
    return parse(str(text), stack)


def parse(text: str, stack: str) -> ShapeReport:
    try:
        report = json.loads(text)
        shapes = report["shapes"]
        state = ACCEPTED if report.get("result") == ACCEPTED else NOT_CHECKED
        lines = tuple(
            ShapeLine(str(name), state, tuple(str(a) for a in alarms)) for name, alarms in shapes.items()
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return ShapeReport(
            NOT_CHECKED, stack, f"stack {stack}'s {OUTPUT_ALARM_SHAPES} output is not a report"
        )
    detail = "" if state == ACCEPTED else str(report.get("why") or report.get("result") or "")
    return ShapeReport(state, stack, detail, report.get("checked_at"), lines)
