"""RunPolicy's numeric ranges: one table, every numeric field in it, enforced on both ends."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sagewarden.domain.vocabulary.policy import RANGES, PolicyError, Range, RunPolicy
from tests.doc_pages import documentation


def _numeric_fields() -> dict[str, str]:
    return {
        f.name: str(f.type)
        for f in dataclasses.fields(RunPolicy)
        if str(f.type).split(" ")[0] in ("int", "float")
    }


def _is_int(name: str) -> bool:
    return _numeric_fields()[name].startswith("int")


def _reject(name: str, value: object) -> PolicyError:
    with pytest.raises(PolicyError) as caught:
        RunPolicy.from_dict({name: value})
    assert caught.value.field == name
    return caught.value


def test_policy_every_numeric_field_has_a_range_and_every_range_a_field():
    assert set(_numeric_fields()) == set(RANGES)


@pytest.mark.claim("field | default | range")
@pytest.mark.claim(
    "`keep_alive_seconds` (600) asks SageMaker to keep each attempt's instances in a warm pool"
)
def test_policy_defaults_are_inside_their_ranges():
    RunPolicy().validate()
    for name, allowed in RANGES.items():
        value = getattr(RunPolicy(), name)
        assert value is None or allowed.contains(value), name


@pytest.mark.claim(
    "`policy`: unknown fields, types, the ranges in the table below, a `progress_metric` that is not the `Name` of one of `AlgorithmSpecification.MetricDefinitions`, fallback instance types SageMaker does not know, and environment defaults that SageMaker would refuse"
)
@pytest.mark.claim(
    "A value outside it, or a non-finite number, is a 400 on `policy.<field>` and nothing is stored."
)
@pytest.mark.claim("**Warm pools** are kept at most 3,600 s (SageMaker's limit).")
@pytest.mark.parametrize("name", sorted(RANGES))
def test_policy_range_ends_are_enforced(name):
    allowed = RANGES[name]
    step = 1 if _is_int(name) else 1e-6 * max(1.0, allowed.high)
    low = allowed.low + (step if allowed.low_open else 0)
    high = allowed.high - (step if allowed.high_open else 0)
    extra = {"backoff_base_seconds": 1} if name == "backoff_cap_seconds" else {}
    cap = {"backoff_cap_seconds": 86_400} if name == "backoff_base_seconds" else {}
    for ok in (low, high):
        value = int(ok) if _is_int(name) else ok
        assert getattr(RunPolicy.from_dict({name: value, **extra, **cap}), name) == value
    below = allowed.low if allowed.low_open else allowed.low - step
    above = allowed.high if allowed.high_open else allowed.high + step
    for bad in (below, above):
        err = _reject(name, int(bad) if _is_int(name) else bad)
        assert allowed.describe() in err.message


@pytest.mark.claim(
    "A value outside it, or a non-finite number, is a 400 on `policy.<field>` and nothing is stored."
)
@pytest.mark.parametrize("name", sorted(n for n in RANGES if not _is_int(n)))
@pytest.mark.parametrize(
    "value",
    [math.nan, math.inf, -math.inf, 1e306, 10**400],
    ids=[
        "not a number",
        "infinity",
        "minus infinity",
        "a finite but absurd float",
        "an int too big for a float",
    ],
)
def test_policy_float_fields_reject_non_finite_and_absurd_values(name, value):
    _reject(name, value)


@pytest.mark.parametrize("name", sorted(n for n in RANGES if _is_int(n)))
@pytest.mark.parametrize(
    "value",
    [10**30, -(10**30), math.nan, 1.5, True, "5"],
    ids=["a huge int", "a huge negative int", "not a number", "a fraction", "a bool", "a numeric string"],
)
def test_policy_int_fields_reject_huge_fractional_and_non_integers(name, value):
    _reject(name, value)


@pytest.mark.claim('"out of range: allowed 0 < x ≤ 8,760"')
def test_policy_wall_clock_1e306_is_rejected_with_its_range():
    err = _reject("max_wall_clock_hours", 1e306)
    assert "8,760" in err.message


@given(st.sampled_from(sorted(RANGES)), st.floats(allow_nan=False, allow_infinity=False, width=64))
def test_policy_range_contains_agrees_with_from_dict(name, raw):
    value = int(raw) if _is_int(name) and abs(raw) < 1e15 else raw
    if _is_int(name) and not isinstance(value, int):
        return
    extra = {}
    if name == "backoff_cap_seconds":
        extra = {"backoff_base_seconds": 1}
    elif name == "backoff_base_seconds":
        extra = {"backoff_cap_seconds": 86_400}
    if RANGES[name].contains(value):
        assert getattr(RunPolicy.from_dict({name: value, **extra}), name) == value
    else:
        _reject(name, value)


@pytest.mark.claim('"out of range: allowed 0 < x ≤ 8,760"')
def test_policy_range_describe_reads_like_math():
    assert Range(1, 1440).describe() == "1 ≤ x ≤ 1,440"
    assert Range(0, 100, low_open=True).describe() == "0 < x ≤ 100"
    assert Range(0, 1, high_open=True).describe() == "0 ≤ x < 1"
    assert Range(0, 1e9, low_open=True).describe() == "0 < x ≤ 1e9"


def test_policy_bad_checkpoint_regex_and_long_texts_are_rejected():
    _reject("checkpoint_dir_regex", "step-(\\d+")
    _reject("checkpoint_marker", "m" * 1000)
    _reject("progress_metric", "")
    err = _reject("instance_fallbacks", [{"instance_type": "ml.p5.48xlarge", "instance_count": 1}] * 11)
    assert "at most 10" in err.message
    _reject("environment_defaults", {f"V{i}": "1" for i in range(51)})


def _readme_policy_rows() -> dict[str, str]:

    text = documentation()
    table = text[text.index("### Policy fields") :].split("\n\n")[2]
    rows: dict[str, str] = {}
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        names = [n.strip(" `") for n in cells[0].split("/")]
        ranges = [r.strip() for r in cells[2].split("/")] if "/" in cells[2] else [cells[2]] * len(names)
        rows.update(zip(names, ranges, strict=True))
    return rows


@pytest.mark.claim("field | default | range")
@pytest.mark.claim(
    "`max_cost_usd` / `instance_hour_price_usd` | none | 0 < x ≤ 1e9 / 0 < x ≤ 10,000 | optional cost budget"
)
@pytest.mark.claim(
    "`straggler_threshold` / `straggler_window_minutes` | 0.15 / 6 | 0.05 ≤ x ≤ 1 / 1 ≤ x ≤ 1,440"
)
@pytest.mark.claim("**Warm pools** are kept at most 3,600 s (SageMaker's limit).")
def test_policy_readme_range_column_quotes_the_ranges_table():
    rows = _readme_policy_rows()
    assert {name: rows.get(name) for name in RANGES} == {name: r.describe() for name, r in RANGES.items()}
    assert set(rows) <= {f.name for f in dataclasses.fields(RunPolicy)}, (
        "the README names a field RunPolicy lacks"
    )


def _readme_policy_defaults() -> dict[str, str]:

    text = documentation()
    table = text[text.index("### Policy fields") :].split("\n\n")[2]
    defaults: dict[str, str] = {}
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        names = [n.strip(" `") for n in cells[0].split("/")]
        values = [v.strip() for v in cells[1].split("/")] if "/" in cells[1] else [cells[1]] * len(names)
        defaults.update(zip(names, values, strict=True))
    return defaults


def _as_readme_writes_it(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if value == ():
        return "`[]`"
    if isinstance(value, str):
        return f"`{value}`"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


@pytest.mark.claim("field | default | range")
@pytest.mark.claim("`max_no_progress_restarts` | 3 | 1 ≤ x ≤ 100 | crash-loop stop")
@pytest.mark.claim("`max_wall_clock_hours` | 2160 (90 days) | 0 < x ≤ 8,760 | whole run")
@pytest.mark.claim("`throttle_backoff_seconds` | 30 | 1 ≤ x ≤ 86,400")
@pytest.mark.claim("`quota_wait_max_hours` / `capacity_wait_max_hours` | 24 / 12")
@pytest.mark.claim("`oom_is_user_error` | true")
@pytest.mark.claim("`hang_detection` | true")
def test_policy_readme_default_column_is_the_policys_defaults():
    stated = _readme_policy_defaults()
    defaults = RunPolicy()
    assert stated.pop("environment_defaults") == "`{}`" and defaults.environment_defaults == ()
    assert stated.pop("max_wall_clock_hours") == "2160 (90 days)" and defaults.max_wall_clock_hours == 90 * 24
    assert stated, "no default column parsed"
    assert {name: stated[name] for name in stated} == {
        name: _as_readme_writes_it(getattr(defaults, name)) for name in stated
    }


@pytest.mark.claim("exponential; the cap is at least the base.")
@pytest.mark.claim(
    "`[{instance_type, instance_count}]`, tried in order on capacity errors; each type must be one SageMaker knows"
)
@pytest.mark.claim("added to every attempt; your own `Environment` wins")
def test_policy_list_limits_and_the_backoff_cap_are_enforced():
    """README: instance_fallbacks at most 10, environment_defaults at most 50, the backoff cap at
    least the base."""
    fallback = {"instance_type": "ml.p4d.24xlarge", "instance_count": 1}
    assert len(RunPolicy.from_dict({"instance_fallbacks": [fallback] * 10}).instance_fallbacks) == 10
    assert _reject("instance_fallbacks", [fallback] * 11)
    env = {f"V{i}": "1" for i in range(50)}
    assert len(RunPolicy.from_dict({"environment_defaults": env}).environment_defaults) == 50
    assert _reject("environment_defaults", {**env, "V50": "1"})
    assert (
        RunPolicy.from_dict({"backoff_base_seconds": 60, "backoff_cap_seconds": 60}).backoff_cap_seconds == 60
    )
    with pytest.raises(PolicyError) as caught:
        RunPolicy.from_dict({"backoff_base_seconds": 60, "backoff_cap_seconds": 59})
    assert caught.value.field == "backoff_cap_seconds"
