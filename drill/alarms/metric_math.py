"""The part of CloudWatch metric math the supervisor's alarms use: parser, exact values per period
(`value_function`) and conservative bounds over a stretch (`bound_function`).

Why: docs/drill.md (*The alarm evaluator*: the metric-math subset), docs/fidelity.md."""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

Bound = tuple[float, float]
ValueAt = Callable[[int], float | None]
LOOKBACK_PERIODS = 60  # how far DIFF and FILL(REPEAT) look for the previous datapoint
UNBOUNDED: Bound = (-math.inf, math.inf)

# --- the tree ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Num:
    value: float


@dataclass(frozen=True)
class Ref:
    id: str


@dataclass(frozen=True)
class Repeat:
    """FILL's REPEAT argument."""


@dataclass(frozen=True)
class Arr:
    items: tuple[Node, ...]


@dataclass(frozen=True)
class Call:
    name: str
    args: tuple[Node, ...]


@dataclass(frozen=True)
class Bin:
    op: str
    left: Node
    right: Node


@dataclass(frozen=True)
class Not:
    operand: Node


@dataclass(frozen=True)
class Neg:
    operand: Node


Node = Num | Ref | Repeat | Arr | Call | Bin | Not | Neg

REDUCERS: dict[str, Callable[[list[float]], float]] = {
    "MIN": min,
    "MAX": max,
    "SUM": sum,
    "AVG": lambda xs: sum(xs) / len(xs),
}
FUNCTIONS = frozenset({*REDUCERS, "FILL", "DIFF", "ABS", "IF"})
_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}
_ARITH: dict[str, Callable[[float, float], float]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
}
_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op><=|>=|==|!=|&&|\|\||[-+*/<>!(),\[\]]))"
)


class MathError(ValueError):
    pass


# --- parsing ------------------------------------------------------------------------------------------


def parse(text: str) -> Node:
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise MathError(f"cannot read {text[pos : pos + 20]!r}")
        kind = m.lastgroup or ""
        tokens.append((kind, m.group(kind)))
        pos = m.end()
    parser = _Parser(tokens)
    node = parser.expr()
    if parser.i != len(tokens):
        raise MathError(f"unexpected {tokens[parser.i][1]!r}")
    return node


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.i = 0

    def _peek(self) -> str | None:
        return self.tokens[self.i][1] if self.i < len(self.tokens) else None

    def _take(self, want: str | None = None) -> tuple[str, str]:
        if self.i >= len(self.tokens):
            raise MathError("unexpected end of expression")
        tok = self.tokens[self.i]
        if want is not None and tok[1].upper() != want:
            raise MathError(f"expected {want!r}, found {tok[1]!r}")
        self.i += 1
        return tok

    def _word(self, *words: str) -> str | None:
        nxt = self._peek()
        if nxt is not None and nxt.upper() in words:
            self.i += 1
            return nxt.upper()
        return None

    def expr(self) -> Node:
        node = self.conj()
        while self._word("OR", "||"):
            node = Bin("OR", node, self.conj())
        return node

    def conj(self) -> Node:
        node = self.negation()
        while self._word("AND", "&&"):
            node = Bin("AND", node, self.negation())
        return node

    def negation(self) -> Node:
        if self._word("NOT", "!"):
            return Not(self.negation())
        return self.comparison()

    def comparison(self) -> Node:
        node = self.total()
        op = self._peek()
        if op in _COMPARE:
            self.i += 1
            return Bin(op, node, self.total())
        return node

    def total(self) -> Node:
        node = self.product()
        while (op := self._peek()) in ("+", "-"):
            self.i += 1
            node = Bin(op, node, self.product())
        return node

    def product(self) -> Node:
        node = self.unary()
        while (op := self._peek()) in ("*", "/"):
            self.i += 1
            node = Bin(op, node, self.unary())
        return node

    def unary(self) -> Node:
        if self._peek() == "-":
            self.i += 1
            return Neg(self.unary())
        return self.atom()

    def atom(self) -> Node:
        kind, text = self._take()
        if kind == "num":
            return Num(float(text))
        if text == "(":
            node = self.expr()
            self._take(")")
            return node
        if text == "[":
            items = [self.expr()]
            while self._peek() == ",":
                self.i += 1
                items.append(self.expr())
            self._take("]")
            return Arr(tuple(items))
        if kind == "name":
            if self._peek() == "(":
                name = text.upper()
                if name not in FUNCTIONS:
                    raise MathError(f"function {text} is not supported")
                self.i += 1
                args: list[Node] = []
                if self._peek() != ")":
                    args.append(self._argument())
                    while self._peek() == ",":
                        self.i += 1
                        args.append(self._argument())
                self._take(")")
                return _check_call(Call(name, tuple(args)))
            if text.upper() == "REPEAT":
                return Repeat()
            return Ref(text)
        raise MathError(f"unexpected {text!r}")

    def _argument(self) -> Node:
        return self.expr()


def _is_array(node: Node) -> bool:
    """Whether a node is an array of series: ``[...]``, or FILL of one."""
    return isinstance(node, Arr) or (
        isinstance(node, Call) and node.name == "FILL" and bool(node.args) and _is_array(node.args[0])
    )


def _array_size(node: Node) -> int:
    while isinstance(node, Call):  # FILL of an array
        node = node.args[0]
    assert isinstance(node, Arr)
    return len(node.items)


def _check_call(call: Call) -> Call:
    n = len(call.args)
    if call.name in REDUCERS:
        if not (n == 1 and _is_array(call.args[0])):
            raise MathError(
                f"{call.name} of a single series is a scalar, not a series; {call.name} takes one array "
                f"of series here, e.g. {call.name}([m1, m2])"
            )
        if _array_size(call.args[0]) < 2:
            raise MathError(
                f"{call.name} of a one-series array is not a documented form: use the series' id itself"
            )
    if call.name == "FILL" and not (n == 2 and (isinstance(call.args[1], (Num, Repeat)))):
        raise MathError("FILL takes a series (or an array of series) and a number or REPEAT")
    if call.name in ("DIFF", "ABS") and n != 1:
        raise MathError(f"{call.name} takes one argument")
    if call.name == "IF" and n not in (2, 3):
        raise MathError("IF takes a condition, a value and optionally an else value")
    return call


def references(node: Node) -> list[str]:
    """Ids the expression refers to, in order."""
    if isinstance(node, Ref):
        return [node.id]
    children: tuple[Node, ...] = ()
    if isinstance(node, Arr):
        children = node.items
    elif isinstance(node, Call):
        children = node.args
    elif isinstance(node, Bin):
        children = (node.left, node.right)
    elif isinstance(node, (Not, Neg)):
        children = (node.operand,)
    return [ref for child in children for ref in references(child)]


# --- exact values -------------------------------------------------------------------------------------


def value_function(node: Node, refs: Mapping[str, ValueAt], period_ms: int) -> ValueAt:
    """bucket (ms) -> the expression's value for that period (None = missing)."""

    def items(n: Node) -> list[ValueAt]:
        """The series of an array node (``[...]`` or FILL of one)."""
        if isinstance(n, Arr):
            return [build(item) for item in n.items]
        assert isinstance(n, Call) and n.name == "FILL"
        return [_fill(part, n.args[1], period_ms) for part in items(n.args[0])]

    def build(n: Node) -> ValueAt:
        if _is_array(n):
            raise MathError("an array of series is not a single series here")
        if isinstance(n, Num):
            constant = n.value
            return lambda b: constant
        if isinstance(n, Ref):
            return refs[n.id]
        if isinstance(n, Neg):
            inner = build(n.operand)
            return lambda b: None if (v := inner(b)) is None else -v
        if isinstance(n, Not):
            inner = build(n.operand)
            return lambda b: None if (v := inner(b)) is None else float(v == 0)
        if isinstance(n, Bin):
            return _binary(n.op, build(n.left), build(n.right))
        if isinstance(n, Call):
            return _call(n, build, items, period_ms)
        raise MathError(f"{n!r} is not a value")  # REPEAT outside FILL

    return build(node)


def _binary(op: str, left: ValueAt, right: ValueAt) -> ValueAt:
    if op == "AND":

        def both(b: int) -> float | None:
            a, c = left(b), right(b)
            if a == 0 or c == 0:
                return 0.0
            return None if a is None or c is None else 1.0

        return both
    if op == "OR":

        def either(b: int) -> float | None:
            a, c = left(b), right(b)
            if (a is not None and a != 0) or (c is not None and c != 0):
                return 1.0
            return None if a is None or c is None else 0.0

        return either
    if op in _COMPARE:
        compare = _COMPARE[op]

        def cmp(b: int) -> float | None:
            a, c = left(b), right(b)
            return None if a is None or c is None else float(compare(a, c))

        return cmp
    arith = _ARITH[op]

    def calc(b: int) -> float | None:
        a, c = left(b), right(b)
        if a is None or c is None or (op == "/" and c == 0):
            return None
        return arith(a, c)

    return calc


def _previous(series: ValueAt, bucket: int, period_ms: int) -> float | None:
    for k in range(1, LOOKBACK_PERIODS + 1):
        v = series(bucket - k * period_ms)
        if v is not None:
            return v
    return None


def _fill(inner: ValueAt, fill: Node, period_ms: int) -> ValueAt:
    if isinstance(fill, Num):
        constant = fill.value
        return lambda b: v if (v := inner(b)) is not None else constant
    return lambda b: v if (v := inner(b)) is not None else _previous(inner, b, period_ms)


def _call(
    n: Call,
    build: Callable[[Node], ValueAt],
    items: Callable[[Node], list[ValueAt]],
    period_ms: int,
) -> ValueAt:
    if n.name in REDUCERS:
        parts = items(n.args[0])
        reduce = REDUCERS[n.name]

        def reduced(b: int) -> float | None:
            present = [v for part in parts if (v := part(b)) is not None]
            return reduce(present) if present else None

        return reduced
    if n.name == "FILL":
        return _fill(build(n.args[0]), n.args[1], period_ms)
    if n.name == "DIFF":
        inner = build(n.args[0])

        def diff(b: int) -> float | None:
            v = inner(b)
            if v is None:
                return None
            prev = _previous(inner, b, period_ms)
            return None if prev is None else v - prev

        return diff
    if n.name == "ABS":
        inner = build(n.args[0])
        return lambda b: None if (v := inner(b)) is None else abs(v)
    # IF
    cond, then = build(n.args[0]), build(n.args[1])
    other = build(n.args[2]) if len(n.args) == 3 else None

    def choose(b: int) -> float | None:
        c = cond(b)
        if c is None:
            return None
        if c != 0:
            return then(b)
        return other(b) if other is not None else None

    return choose


# --- bounds over a stretch ------------------------------------------------------------------------------

BoundAt = Callable[[Mapping[str, Bound | None]], Bound | None]


def bound_function(node: Node, refs: Mapping[str, BoundAt]) -> BoundAt:
    """Each referenced id's (lo, hi) over a stretch (None: no datapoint in it) -> the expression's
    (lo, hi), None when it is missing throughout, UNBOUNDED when that cannot be told."""

    def items(n: Node) -> list[BoundAt]:
        if isinstance(n, Arr):
            return [build(item) for item in n.items]
        assert isinstance(n, Call) and n.name == "FILL"
        return [_fill_bound(part, n.args[1]) for part in items(n.args[0])]

    def build(n: Node) -> BoundAt:
        if _is_array(n):
            raise MathError("an array of series is not a single series here")
        if isinstance(n, Num):
            pair = (n.value, n.value)
            return lambda s: pair
        if isinstance(n, Ref):
            return refs[n.id]
        if isinstance(n, Neg):
            inner = build(n.operand)
            return lambda s: None if (v := inner(s)) is None else (-v[1], -v[0])
        if isinstance(n, Not):
            inner = build(n.operand)
            return lambda s: None if (v := inner(s)) is None else _not(v)
        if isinstance(n, Bin):
            left, right = build(n.left), build(n.right)
            return lambda s: _bin_bound(n.op, left(s), right(s))
        if isinstance(n, Call):
            return _call_bound(n, build, items)
        raise MathError(f"{n!r} is not a value")

    return build(node)


def _truth(v: Bound) -> tuple[bool, bool]:
    """(may be false, may be true) of a bounded value (zero is false)."""
    may_false = v[0] <= 0 <= v[1]
    may_true = not (v[0] == 0 and v[1] == 0)
    return may_false, may_true


def _of(may_false: bool, may_true: bool) -> Bound:
    return (0.0 if may_false else 1.0, 1.0 if may_true else 0.0)


def _not(v: Bound) -> Bound:
    may_false, may_true = _truth(v)
    return _of(may_true, may_false)


def _bin_bound(op: str, a: Bound | None, c: Bound | None) -> Bound | None:
    if op in ("AND", "OR"):
        if a is None or c is None:
            # a missing operand: 0 AND x is 0 and 1 OR x is 1, otherwise missing
            present = a if a is not None else c
            if present is None:
                return None
            may_false, may_true = _truth(present)
            if op == "AND" and not may_true:
                return (0.0, 0.0)
            if op == "OR" and not may_false:
                return (1.0, 1.0)
            return UNBOUNDED
        fa, ta = _truth(a)
        fc, tc = _truth(c)
        if op == "AND":
            return _of(fa or fc, ta and tc)
        return _of(fa and fc, ta or tc)
    if a is None or c is None:
        return None
    if op in ("<", "<=", ">", ">="):  # monotone: the corners hold every outcome possible
        outcomes = {_COMPARE[op](x, y) for x in a for y in c}
        return _of(False in outcomes, True in outcomes)
    if op in ("==", "!="):
        may_equal = a[0] <= c[1] and c[0] <= a[1]
        may_differ = not (a[0] == a[1] == c[0] == c[1])
        return _of(may_differ, may_equal) if op == "==" else _of(may_equal, may_differ)
    if UNBOUNDED in (a, c) or (op == "/" and c[0] <= 0 <= c[1]):
        return UNBOUNDED
    arith = _ARITH[op]
    values = [arith(x, y) for x in a for y in c]
    return (min(values), max(values))


def _fill_bound(inner: BoundAt, fill: Node) -> BoundAt:
    if isinstance(fill, Num):
        pair = (fill.value, fill.value)
        return lambda s: v if (v := inner(s)) is not None else pair
    return lambda s: UNBOUNDED  # REPEAT depends on earlier stretches


def _call_bound(n: Call, build: Callable[[Node], BoundAt], items: Callable[[Node], list[BoundAt]]) -> BoundAt:
    if n.name in REDUCERS:
        parts = items(n.args[0])
        name = n.name

        def reduced(s: Mapping[str, Bound | None]) -> Bound | None:
            present = [b for part in parts if (b := part(s)) is not None]
            if not present:
                return None
            if any(b == UNBOUNDED for b in present):
                return UNBOUNDED
            los, his = [b[0] for b in present], [b[1] for b in present]
            if name == "MIN":
                return min(los), min(his)
            if name == "MAX":
                return max(los), max(his)
            if name == "SUM":
                return sum(los), sum(his)
            return sum(los) / len(los), sum(his) / len(his)

        return reduced
    if n.name == "FILL":
        return _fill_bound(build(n.args[0]), n.args[1])
    if n.name == "DIFF":
        return lambda s: UNBOUNDED  # depends on the previous datapoint, maybe of another stretch
    if n.name == "ABS":
        inner = build(n.args[0])

        def absolute(s: Mapping[str, Bound | None]) -> Bound | None:
            v = inner(s)
            if v is None:
                return None
            if v[0] >= 0:
                return v
            if v[1] <= 0:
                return (-v[1], -v[0])
            return (0.0, max(-v[0], v[1]))

        return absolute
    cond, then = build(n.args[0]), build(n.args[1])
    other = build(n.args[2]) if len(n.args) == 3 else None

    def choose(s: Mapping[str, Bound | None]) -> Bound | None:
        c = cond(s)
        if c is None:
            return None
        may_false, may_true = _truth(c)
        t = then(s) if may_true else None
        e = other(s) if (may_false and other is not None) else None
        if may_true and may_false:
            if t is None or e is None:
                return UNBOUNDED  # maybe missing, maybe not
            return (min(t[0], e[0]), max(t[1], e[1]))
        return t if may_true else e

    return choose
