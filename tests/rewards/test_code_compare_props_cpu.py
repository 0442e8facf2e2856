"""The code kind's comparison rules under hypothesis: total (no output makes them raise), and a
non-finite value never matches a finite one. Values are drawn huge, tiny, non-finite, nested and of
mixed types; texts are numbers in every spelling Decimal reads, with exponents far beyond its limits."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from e2c.rewards.code_tests import COMPARES, numbers_close, outputs_equal, values_equal

HUGE_INTS = st.one_of(
    st.integers(),
    st.integers(min_value=-(10**4000), max_value=10**4000),
    st.sampled_from([2**1100, -(2**1100), 10**400, 2**53 + 1]),
)
FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e308, -1e308, 5e-324, float("inf"), -float("inf"), float("nan"), 0.0, -0.0]),
)
SCALARS = st.one_of(HUGE_INTS, FLOATS, st.booleans(), st.none(), st.text(max_size=8))
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(max_size=3), HUGE_INTS), inner, max_size=3),
    ),
    max_leaves=12,
)
TOLS = st.sampled_from([0.0, 1e-9, 1e-6, 0.5, 1.0])


def non_finite(v: object) -> bool:
    return isinstance(v, float) and not math.isfinite(v)


@settings(max_examples=400, deadline=None)
@given(VALUES, VALUES, TOLS)
def test_values_equal_never_raises_cpu(got, want, tol) -> None:
    assert values_equal(got, want, tol) in (True, False)


@settings(max_examples=400, deadline=None)
@given(st.one_of(HUGE_INTS, FLOATS), st.one_of(HUGE_INTS, FLOATS), TOLS)
def test_non_finite_only_matches_the_same_non_finite_cpu(got, want, tol) -> None:
    if isinstance(got, bool) or isinstance(want, bool):
        return
    same = numbers_close(got, want, tol)
    if non_finite(got) != non_finite(want):
        assert not same
    elif non_finite(got):
        assert same == (got == want or (math.isnan(got) and math.isnan(want)))
    else:  # both finite: the exact rational rule, checked against a plain reference
        from fractions import Fraction

        if isinstance(got, int) and isinstance(want, int):
            assert same == (got == want)
        else:
            d = abs(Fraction(got) - Fraction(want))
            t = Fraction(tol)
            assert same == (d <= t or d <= t * max(abs(Fraction(got)), abs(Fraction(want))))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(FLOATS, HUGE_INTS), min_size=1, max_size=4), TOLS)
def test_a_non_finite_in_a_list_never_matches_finite_answers_cpu(xs, tol) -> None:
    finite = [1] * len(xs)
    if any(non_finite(x) for x in xs):
        assert not values_equal(xs, finite, tol)


NUMBER_TEXT = st.one_of(
    st.from_regex(r"[-+]?[0-9]{1,30}(\.[0-9]{0,20})?([eE][-+]?[0-9]{1,25})?", fullmatch=True),
    st.sampled_from(["1e1000000", "1e-1000000", "-1e999999999", "9e999999999999999999", "inf", "-Infinity"]),
    st.sampled_from(["nan", "NaN", "sNaN", "1_000", "0x10", "", "1e", "\x00", "\u0663"]),
)
LINES = st.lists(st.lists(NUMBER_TEXT, max_size=4).map(" ".join), max_size=4).map("\n".join)


@settings(max_examples=400, deadline=None)
@given(LINES, LINES, st.sampled_from(COMPARES[:3]), TOLS)
def test_outputs_equal_never_raises_cpu(got, want, rule, tol) -> None:
    assert outputs_equal(got, want, rule, tol) in (True, False)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["inf", "-inf", "nan", "Infinity", "1e1000000", "9" * 120]),
    st.sampled_from([0.0, 1e-6, 0.5]),
)
def test_non_finite_or_overflowing_text_never_matches_a_finite_answer_cpu(tok, tol) -> None:
    # (A relative tolerance of 1 calls any two numbers of one sign equal: that is the rule, not a hole.)
    for want in ("2.5", "0", "1e308", "-3"):
        assert not outputs_equal(tok, want, "tokens", tol)
        assert not outputs_equal(tok, want, "lines", tol)
