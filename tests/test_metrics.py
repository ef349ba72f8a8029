"""Probability metrics against scikit-learn and direct computations."""

from itertools import pairwise

import numpy as np
import pytest
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss, log_loss, zero_one_loss

from bayesvm.metrics import (
    ReliabilityCurve,
    brier_score,
    error_rate,
    expected_calibration_error,
    negative_log_likelihood,
    reliability_curve,
)


def calibrated_sample(n, seed=0):
    """p ~ U(0, 1) and y ~ Bernoulli(p) in {0, 1}: perfectly calibrated predictions."""
    rng = np.random.default_rng(seed)
    p = rng.random(n)
    return (rng.random(n) < p).astype(int), p


LABEL_CODINGS = {
    "01": lambda y: y,
    "pm1": lambda y: 2 * y - 1,
    "strings": lambda y: np.where(y > 0, "yes", "no"),
    "bool": lambda y: y.astype(bool),
}


@pytest.mark.parametrize("coding", LABEL_CODINGS)
def test_nll_and_brier_match_sklearn(coding):
    y01, p = calibrated_sample(500, seed=1)
    y = LABEL_CODINGS[coding](y01)
    assert negative_log_likelihood(y, p) == pytest.approx(log_loss(y01, y_proba=p), rel=1e-12)
    assert brier_score(y, p) == pytest.approx(brier_score_loss(y01, p), rel=1e-12)


def test_nll_is_finite_for_confident_mistakes_and_clipped_like_sklearn():
    y = np.array([0, 1, 1, 0])
    p = np.array([0.0, 1.0, 0.0, 1.0])  # two certain mistakes
    nll = negative_log_likelihood(y, p)
    assert np.isfinite(nll)
    assert nll == pytest.approx(log_loss(y, y_proba=p), rel=1e-12)
    assert nll == pytest.approx(-0.5 * np.log(np.finfo(float).eps), rel=1e-12)


@pytest.mark.parametrize("discrete", [False, True])
@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@pytest.mark.parametrize("n_bins", [5, 10, 37])
def test_reliability_curve_matches_sklearn_and_direct_counts(strategy, n_bins, discrete):
    y, p = calibrated_sample(2000, seed=2)
    p = p**2  # skewed, so that some uniform bins hold few predictions
    if discrete:  # many predictions exactly on bin edges: the (lo, hi] convention matters
        p = np.round(p * 20) / 20
    curve = reliability_curve(y, p, n_bins=n_bins, strategy=strategy)
    assert isinstance(curve, ReliabilityCurve)
    prob_true, prob_pred = calibration_curve(y, p, n_bins=n_bins, strategy=strategy)
    np.testing.assert_allclose(curve.observed_frequency, prob_true, rtol=1e-12)
    np.testing.assert_allclose(curve.mean_predicted, prob_pred, rtol=1e-12)
    edges = np.linspace(0, 1, n_bins + 1) if strategy == "uniform" else np.quantile(p, np.linspace(0, 1, n_bins + 1))
    bins = enumerate(pairwise(edges))
    direct = [np.sum((p > lo) & (p <= hi)) + (i == 0) * np.sum(p == lo) for i, (lo, hi) in bins]
    np.testing.assert_array_equal(curve.counts, [c for c in direct if c > 0])
    assert curve.counts.sum() == p.size


def direct_ece(y, p, edges):
    """ECE written as a loop over (lo, hi] bins (the first bin closed)."""
    total = 0.0
    for i, (lo, hi) in enumerate(pairwise(edges)):
        inside = (p > lo) & (p <= hi) | ((i == 0) & (p == lo))
        if inside.any():
            total += inside.sum() * abs(p[inside].mean() - y[inside].mean())
    return total / p.size


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_expected_calibration_error_matches_direct_loop(strategy):
    y, p = calibrated_sample(1000, seed=3)
    p = 0.2 + 0.6 * p  # under-confident
    edges = np.linspace(0, 1, 11) if strategy == "uniform" else np.quantile(p, np.linspace(0, 1, 11))
    assert expected_calibration_error(y, p, n_bins=10, strategy=strategy) == pytest.approx(
        direct_ece(y, p, edges), rel=1e-12
    )


def test_expected_calibration_error_small_when_calibrated_large_when_not():
    y, p = calibrated_sample(100_000, seed=4)
    assert expected_calibration_error(y, p) < 0.01
    # Predicting the constant base rate is calibrated on average but every bin but one is empty.
    assert expected_calibration_error(y, np.full_like(p, y.mean())) < 0.01
    # Swapping the probabilities: ECE = mean |p - (1 - p)| over the bins = 0.5 for uniform p.
    assert expected_calibration_error(y, 1 - p) == pytest.approx(0.5, abs=0.01)


def test_error_rate_accepts_labels_or_probabilities():
    y01, p = calibrated_sample(300, seed=5)
    labels = np.where(p >= 0.5, "yes", "no")
    y = np.where(y01 > 0, "yes", "no")
    expected = zero_one_loss(y, labels)
    assert error_rate(y, labels) == pytest.approx(expected)
    assert error_rate(y, p) == pytest.approx(expected)
    assert error_rate(2 * y01 - 1, np.where(p >= 0.5, 1, -1)) == pytest.approx(expected)
    assert error_rate(y01, p) == pytest.approx(expected)
    assert error_rate([0, 1], [0.5, 0.5]) == 0.5  # p = 1/2 predicts the positive class


def test_single_class_accepted_for_numeric_labels():
    assert brier_score([1, 1, 1], [0.5, 1.0, 0.0]) == pytest.approx((0.25 + 0 + 1) / 3)
    assert negative_log_likelihood([-1, -1], [0.5, 0.5]) == pytest.approx(np.log(2))
    with pytest.raises(ValueError, match="one class"):
        brier_score(["a", "a"], [0.5, 0.5])


METRICS = [negative_log_likelihood, brier_score, expected_calibration_error, reliability_curve, error_rate]


@pytest.mark.parametrize("metric", METRICS)
def test_bad_input_is_rejected(metric):
    y = np.array([0, 1, 1, 0])
    with pytest.raises(ValueError, match="must match"):
        metric(y, [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        metric(y, [0.1, 0.2, 1.3, 0.4])
    with pytest.raises(ValueError, match="NaN or infinite"):
        metric(y, [0.1, np.nan, 0.3, 0.4])
    with pytest.raises(ValueError, match="3 classes"):
        metric([0, 1, 2, 0], [0.1, 0.2, 0.3, 0.4])
    with pytest.raises(ValueError, match="1-D"):
        metric(y, np.full((4, 2), 0.5))


@pytest.mark.parametrize("metric", [expected_calibration_error, reliability_curve])
def test_binning_parameters_are_checked(metric):
    y, p = [0, 1, 1, 0], [0.1, 0.2, 0.3, 0.4]
    with pytest.raises(ValueError, match="n_bins"):
        metric(y, p, n_bins=0)
    with pytest.raises(ValueError, match="strategy"):
        metric(y, p, strategy="equal-width")
