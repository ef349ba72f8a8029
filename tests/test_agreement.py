"""The rule that says when two estimates agree within their errors (bayesvm.normalization.agreement).

Every expected value is worked by hand in the comment beside it, on numbers exact in binary floating point, so that
each boundary is hit exactly.
"""

import math

import pytest

from bayesvm.normalization.agreement import (N_STANDARD_ERRORS, beyond_error, clearly_above, combined_se,
                                             within_error)


def test_three_standard_errors():
    assert N_STANDARD_ERRORS == 3.0


def test_the_standard_error_of_a_difference_combines_both_in_quadrature():
    assert combined_se(3.0, 4.0) == 5.0  # sqrt(9 + 16)
    assert combined_se(0.75, 1.0) == 1.25  # sqrt(0.5625 + 1)
    assert combined_se(2.0, 0.0) == 2.0  # an estimate without error adds nothing
    assert combined_se(0.0, 0.0) == 0.0
    assert isinstance(combined_se(3.0, 4.0), float)


# one estimate against a reference taken as given: the checks at a selected point and at a grid's argmax
# (floor 1 nat, se the fresh estimate's)

@pytest.mark.parametrize("a, b, se, expected", [
    (10.0, 11.0, 0.125, True),    # |d| = 1 = max(1, 0.375): the floor, reached exactly, agrees
    (10.0, 11.5, 0.125, False),   # |d| = 1.5 > max(1, 0.375)
    (11.5, 10.0, 0.125, False),   # the same, the other way round
    (0.0, 6.0, 2.0, True),        # |d| = 6 = max(1, 6): three standard errors, reached exactly, agree
    (0.0, -6.0, 2.0, True),       # the same below
    (0.0, 6.5, 2.0, False),       # |d| = 6.5 > max(1, 6)
    (0.0, 0.5, 0.0, True),        # no error at all: the floor still holds, 0.5 <= 1
    (-120.0, -120.0, 0.0, True),  # equal values
])
def test_within_error_against_a_reference(a, b, se, expected):
    assert within_error(a, b, se=se, floor=1.0) is expected
    assert beyond_error(a, b, se=se, floor=1.0) is (not expected)  # complements on numbers


def test_within_error_with_no_floor_is_three_standard_errors_alone():
    assert within_error(0.0, 0.75, se=0.25, floor=0.0)       # 0.75 = 3 x 0.25
    assert not within_error(0.0, 0.875, se=0.25, floor=0.0)  # 0.875 > 0.75
    assert within_error(1.0, 1.0, se=0.0, floor=0.0)         # 0 <= 0
    assert not within_error(1.0, 1.5, se=0.0, floor=0.0)


# two estimates that both carry an error: a search path's anchors (floor: the caller's tolerance, se combined)

@pytest.mark.parametrize("old, new, expected_beyond", [
    (-50.0, -46.25, False),  # |d| = 3.75 = max(1, 3 x 1.25): not beyond, the anchor is kept
    (-50.0, -53.75, False),  # the same below
    (-50.0, -46.0, True),    # |d| = 4 > 3.75: it contradicts the new anchor and is dropped
    (-50.0, -54.0, True),
])
def test_beyond_error_of_two_estimates_with_errors(old, new, expected_beyond):
    se = combined_se(0.75, 1.0)  # 1.25
    assert beyond_error(old, new, se=se, floor=1.0) is expected_beyond
    assert within_error(old, new, se=se, floor=1.0) is (not expected_beyond)
    # one error alone would have given a bound of max(1, 3 x 1) = 3: the combined one is wider
    assert beyond_error(-50.0, -46.25, se=1.0, floor=1.0)


def test_a_tolerance_above_three_standard_errors_sets_the_bound():
    se = combined_se(0.0625, 0.0)  # 3 se = 0.1875
    assert not beyond_error(2.0, 4.0, se=se, floor=2.0)  # |d| = 2 = max(2, 0.1875)
    assert beyond_error(2.0, 4.125, se=se, floor=2.0)    # 2.125 > 2


def test_a_nan_difference_neither_agrees_nor_contradicts():
    for a, b in ((math.nan, 0.0), (0.0, math.nan), (math.inf, math.inf)):  # inf - inf is NaN too
        assert within_error(a, b, se=1.0, floor=1.0) is False
        assert beyond_error(a, b, se=1.0, floor=1.0) is False


# one fresh ln P(D) clearly above another: 1 nat plus three standard errors of the difference, strictly

@pytest.mark.parametrize("a, expected", [
    (-5.25, False),  # -10 + 1 + 3 x 1.25 = -5.25 exactly: not above it
    (-5.0, True),    # above -5.25
    (-5.5, False),
    (-20.0, False),  # below
])
def test_clearly_above_is_strict_and_adds_the_margin(a, expected):
    assert clearly_above(a, -10.0, se=combined_se(0.75, 1.0), margin=1.0) is expected


def test_clearly_above_adds_the_margin_to_the_errors_rather_than_taking_the_larger():
    # b + 1 + 3 x 1 = 4: a = 3.5 clears both max(1, 3) = 3 and the margin alone, but not their sum
    assert not clearly_above(3.5, 0.0, se=1.0, margin=1.0)
    assert clearly_above(4.5, 0.0, se=1.0, margin=1.0)
    assert within_error(3.5, 0.0, se=1.0, floor=1.0) is False  # yet it is outside the agreement bound of 3


def test_clearly_above_is_one_sided_and_false_on_nan():
    assert not clearly_above(-10.0, 0.0, se=0.0, margin=1.0)  # far below is not above
    assert clearly_above(1.5, 0.0, se=0.0, margin=1.0)        # 1.5 > 0 + 1 + 0
    assert not clearly_above(1.0, 0.0, se=0.0, margin=1.0)    # 1 = 1: strict
    assert not clearly_above(math.nan, 0.0, se=0.0, margin=1.0)
    assert not clearly_above(0.0, math.nan, se=0.0, margin=1.0)
    assert not clearly_above(5.0, 0.0, se=math.inf, margin=1.0)  # an infinite error clears nothing
