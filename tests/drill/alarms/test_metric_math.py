"""The metric-math subset the drill's alarm evaluator understands: parsing, exact values, and
bounds that always contain the exact value (the evaluator's fast path relies on that)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drill.alarms import metric_math as mm

P = 60_000


def _value(expr: str, series: dict[str, dict[int, float]], bucket: int) -> float | None:
    node = mm.parse(expr)
    refs = {k: v.get for k, v in series.items()}
    return mm.value_function(node, refs, P)(bucket)


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("MIN([a,b])", 1.0),
        ("MAX([a, b])", 5.0),
        ("IF(MIN([a,b]) < 2 AND MAX([a,b]) > 4, 1, 0)", 1.0),
        ("IF(a > 2 || b > 2, 7, 8)", 7.0),
        ("IF(NOT (a > 2), 3)", 3.0),
        ("ABS(a - b)", 4.0),
        ("FILL(c, 0)", 0.0),
        ("FILL(c, REPEAT)", 9.0),
        ("DIFF(b)", 2.0),
        ("IF(FILL(c, 0) <= 0, 1, IF(ABS(DIFF(b)) <= 0, 1, 0))", 1.0),
        ("c + 1", None),  # arithmetic with a missing operand is missing
        ("IF(a > 2, 1)", None),  # no else branch: a false condition is missing
        ("MIN([c, c])", None),  # nothing present
        # FILL of an array is an array (the documented form of filling several series at once)
        ("MIN(FILL([a, c], 0))", 0.0),
        ("MAX(FILL([a, c], 0))", 1.0),
        ("MIN(FILL([b, c], REPEAT))", 5.0),
        ("IF(MIN(FILL([a,b,c], 0)) < 2 AND MAX(FILL([a,b,c], 0)) > 4, 1, 0)", 1.0),
    ],
    ids=[
        "min of an array",
        "max of an array with spaces",
        "if with and",
        "if with or",
        "if with not and no else",
        "abs of a difference",
        "fill with a constant",
        "fill with repeat",
        "diff of a series",
        "nested if fill abs diff",
        "arithmetic with a missing operand",
        "if without else on a false condition",
        "min with nothing present",
        "min of a filled array",
        "max of a filled array",
        "min of an array filled with repeat",
        "if over filled arrays",
    ],
)
def test_metric_math_values(expr, expected):
    series = {"a": {10 * P: 1.0}, "b": {9 * P: 3.0, 10 * P: 5.0}, "c": {8 * P: 9.0}}
    assert _value(expr, series, 10 * P) == expected


@pytest.mark.parametrize(
    "expr",
    [
        "SQRT(a)",
        "MIN(a)",  # MIN of one series is a scalar: never an alarm's series
        "MAX(a) - a",
        "MAX([a])",  # a one-series array: not a documented form (the alarm watches `a` itself)
        "MAX(FILL([a], 0))",
        "FILL([a, b], 0)",  # an array where one series is needed
        "FILL(a)",
        "IF(a)",
        "a +",
        pytest.param("[a, b]", id="a bare array"),
        "a ? b",
        "DIFF(a, b)",
    ],
)
def test_metric_math_rejects_what_it_does_not_model(expr):
    with pytest.raises(mm.MathError):
        node = mm.parse(expr)
        mm.value_function(node, {"a": {}.get, "b": {}.get}, P)(0)


EXPRESSIONS = [
    "IF(MIN([FILL(a, 0),FILL(b, 0),FILL(c, 0)]) < 8 AND MAX([FILL(a, 0),FILL(b, 0),FILL(c, 0)]) > 400, 1, 0)",
    "IF(MIN(FILL([a,b,c], 0)) < 8 AND MAX(FILL([a,b,c], 0)) > 400, 1, 0)",
    "MAX([a,b])",
    "AVG([a,b,c])",
    "IF(a < 100 || b >= 300, a * 2, c - b)",
    "ABS(a - c) / 2",
    "NOT(a == b) AND c != 5",
]

maybe = st.one_of(st.none(), st.tuples(st.floats(0, 800), st.floats(0, 800)).map(lambda t: (min(t), max(t))))


@settings(max_examples=300, deadline=None)
@given(
    expr=st.sampled_from(EXPRESSIONS),
    bounds=st.fixed_dictionaries({"a": maybe, "b": maybe, "c": maybe}),
    data=st.data(),
)
def test_metric_math_bounds_contain_every_exact_value(expr, bounds, data):
    node = mm.parse(expr)
    bound = mm.bound_function(node, {k: (lambda s, k=k: s[k]) for k in "abc"})(bounds)
    values = {
        k: (None if b is None else data.draw(st.floats(b[0], b[1]), label=k)) for k, b in bounds.items()
    }
    exact = mm.value_function(node, {k: (lambda _b, v=v: v) for k, v in values.items()}, P)(0)
    if bound is None:
        assert exact is None
    elif exact is not None and not math.isnan(exact):
        assert bound[0] - 1e-9 <= exact <= bound[1] + 1e-9, (bound, exact)
