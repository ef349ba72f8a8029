"""Calibration scalers against independent computations (scikit-learn, scipy, direct counts)."""

import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit, log_expit
from sklearn.base import clone
from sklearn.calibration import _sigmoid_calibration
from sklearn.exceptions import NotFittedError
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.svm import SVC

from bayesvm.calibration import (
    BetaScaler,
    HistogramBinningScaler,
    IsotonicScaler,
    PlattScaler,
    SoftmaxScaler,
    SVM01Scaler,
    SVMPPScaler,
    cross_val_decision_values,
)

ALL_SCALERS = [
    PlattScaler,
    IsotonicScaler,
    BetaScaler,
    HistogramBinningScaler,
    SoftmaxScaler,
    SVM01Scaler,
    SVMPPScaler,
]
FITTED_SCALERS = [PlattScaler, IsotonicScaler, BetaScaler, HistogramBinningScaler, SVMPPScaler]


def noisy_scores(n, *, separation=1.0, scale=1.0, positive_rate=0.5, seed=0):
    """Labels in {-1, +1} and decision-value-like scores scale * (separation * y + N(0, 1))."""
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < positive_rate, 1, -1)
    return scale * (separation * y + rng.normal(size=n)), y


def platt_objective_direct(params, f, y):
    """Platt's objective written independently: cross-entropy with targets (N+ + 1)/(N+ + 2), 1/(N- + 2)."""
    A, B = params
    n_pos, n_neg = np.sum(y > 0), np.sum(y < 0)
    target = np.where(y > 0, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))
    z = A * f + B  # P(+1) = 1 / (1 + e^z):  -ln P(+1) = ln(1 + e^z),  -ln P(-1) = ln(1 + e^-z)
    return np.sum(target * np.logaddexp(0, z) + (1 - target) * np.logaddexp(0, -z))


# --------------------------------------------------------------------------- Platt


@pytest.mark.parametrize(
    "n, separation, scale, positive_rate",
    [(40, 1.0, 1.0, 0.5), (300, 0.5, 1.0, 0.2), (500, 2.0, 1.0, 0.7), (200, 1.0, 1000.0, 0.5)],
)
def test_platt_matches_sklearn_sigmoid_calibration(n, separation, scale, positive_rate):
    f, y = noisy_scores(n, separation=separation, scale=scale, positive_rate=positive_rate, seed=n)
    scaler = PlattScaler().fit(f, y)
    A, B = _sigmoid_calibration(f, y)
    assert scaler.A_ == pytest.approx(A, abs=1e-5, rel=1e-5)
    assert scaler.B_ == pytest.approx(B, abs=1e-5)


@pytest.mark.parametrize("seed", [1, 2])
def test_platt_matches_direct_scipy_minimisation(seed):
    f, y = noisy_scores(150, separation=0.8, seed=seed)
    scaler = PlattScaler().fit(f, y)
    result = minimize(
        platt_objective_direct,
        x0=[0.0, 0.0],
        args=(f, y),
        method="Nelder-Mead",
        options={"xatol": 1e-10, "fatol": 1e-13, "maxiter": 20000},
    )
    np.testing.assert_allclose([scaler.A_, scaler.B_], result.x, atol=1e-5)
    assert platt_objective_direct([scaler.A_, scaler.B_], f, y) <= result.fun + 1e-10


def test_platt_on_separable_scores_stays_finite_and_matches_sklearn():
    f = np.r_[np.linspace(-3, -1, 20), np.linspace(1, 3, 20)]
    y = np.r_[-np.ones(20), np.ones(20)]
    scaler = PlattScaler().fit(f, y)
    A, B = _sigmoid_calibration(f, y)
    assert np.isfinite(scaler.A_) and scaler.A_ < 0
    assert scaler.A_ == pytest.approx(A, abs=1e-5)


def test_platt_extreme_scores_no_overflow():
    f, y = noisy_scores(100, separation=1.0, seed=3)
    f = f * 4e3  # |f| up to ~ 1e4
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scaler = PlattScaler().fit(f, y)
        p = scaler.predict_proba([-1e4, -1.0, 0.0, 1.0, 1e4])
    assert np.all(np.isfinite([scaler.A_, scaler.B_]))
    assert np.all(np.isfinite(p)) and np.all((p >= 0) & (p <= 1))
    assert scaler.A_ == pytest.approx(_sigmoid_calibration(f, y)[0], rel=1e-4)


def test_platt_is_deterministic_and_label_agnostic():
    f, y = noisy_scores(120, seed=4)
    reference = PlattScaler().fit(f, y)
    as_strings = PlattScaler().fit(f, np.where(y > 0, "spam", "ham"))
    as_01 = PlattScaler().fit(f, (y > 0).astype(int))
    assert (reference.A_, reference.B_) == (PlattScaler().fit(f, y).A_, PlattScaler().fit(f, y).B_)
    assert (as_01.A_, as_01.B_) == (reference.A_, reference.B_)
    assert (as_strings.A_, as_strings.B_) == (reference.A_, reference.B_)
    np.testing.assert_array_equal(as_strings.classes_, ["ham", "spam"])


# --------------------------------------------------------------------------- cross-validated decision values


def test_cross_val_decision_values_matches_manual_folds():
    f, y = noisy_scores(60, seed=5)
    X = np.column_stack([f, np.random.default_rng(5).normal(size=60)])
    estimator = SVC(kernel="linear", C=0.5)
    values = cross_val_decision_values(estimator, X, y, cv=3, random_state=7)
    expected = np.empty(60)
    for train, test in StratifiedKFold(n_splits=3, shuffle=True, random_state=7).split(X, y):
        expected[test] = clone(estimator).fit(X[train], y[train]).decision_function(X[test])
    np.testing.assert_allclose(values, expected, rtol=1e-12, atol=1e-12)
    assert not hasattr(estimator, "support_")  # the estimator passed in is left unfitted
    np.testing.assert_array_equal(values, cross_val_decision_values(estimator, X, y, cv=3, random_state=7))
    assert not np.array_equal(values, cross_val_decision_values(estimator, X, y, cv=3, random_state=8))


def test_cross_val_decision_values_rejects_bad_input():
    X = np.arange(20.0).reshape(-1, 1)
    y = np.r_[np.zeros(17), np.ones(3)]
    with pytest.raises(ValueError, match="decision_function"):
        cross_val_decision_values(IsotonicRegression(), X, y)
    with pytest.raises(ValueError, match="cv must be an integer"):
        cross_val_decision_values(SVC(), X, y, cv=1)
    with pytest.raises(ValueError, match="smaller class has 3"):
        cross_val_decision_values(SVC(), X, y, cv=5)
    with pytest.raises(ValueError, match="one class"):
        cross_val_decision_values(SVC(), X, np.ones(20), cv=2)


# --------------------------------------------------------------------------- isotonic


def test_isotonic_matches_sklearn_and_clips_outside_range():
    f, y = noisy_scores(200, seed=6)
    scaler = IsotonicScaler().fit(f, y)
    grid = np.linspace(f.min() - 5, f.max() + 5, 301)
    expected = IsotonicRegression(out_of_bounds="clip").fit(f, (y > 0).astype(float)).predict(grid)
    np.testing.assert_allclose(scaler.predict_proba(grid), expected, atol=1e-12)
    assert np.all(np.diff(scaler.predict_proba(grid)) >= 0)


# --------------------------------------------------------------------------- beta


def beta_objective_direct(params, f, y):
    """Beta-calibration log-loss with s = sigmoid(f): logit p = a ln s - b ln(1 - s) + c."""
    a, b, c = params
    s = expit(f)
    logit = a * np.log(s) - b * np.log1p(-s) + c
    return np.sum(np.logaddexp(0, -logit) * (y > 0) + np.logaddexp(0, logit) * (y < 0))


def test_beta_unconstrained_matches_sklearn_logistic_regression():
    rng = np.random.default_rng(7)
    y = np.where(rng.random(400) < 0.5, 1, -1)
    # skewed class-conditional scores, so that the fitted a and b differ clearly
    f = np.where(y > 0, rng.gamma(2.0, 1.0, 400), -rng.gamma(1.0, 0.5, 400)) + rng.normal(scale=0.5, size=400)
    scaler = BetaScaler().fit(f, y)
    features = np.column_stack([log_expit(f), -log_expit(-f)])
    reference = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10000).fit(features, y)
    assert np.all(reference.coef_ > 0)  # the constraint is inactive here
    np.testing.assert_allclose([scaler.a_, scaler.b_], reference.coef_[0], rtol=1e-5, atol=1e-6)
    assert scaler.c_ == pytest.approx(reference.intercept_[0], abs=1e-5)
    np.testing.assert_allclose(scaler.predict_proba(f), reference.predict_proba(features)[:, 1], atol=1e-7)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beta_constrained_fit_matches_bounded_scipy_minimisation(seed):
    # Non-monotone truth (positives in the middle) drives an unconstrained coefficient negative.
    rng = np.random.default_rng(seed)
    f = rng.normal(scale=2.0, size=300)
    y = np.where(rng.random(300) < expit(1.5 * f - 0.4 * f**2 + 0.5 * seed), 1, -1)
    scaler = BetaScaler().fit(f, y)
    result = minimize(
        beta_objective_direct,
        x0=[1.0, 1.0, 0.0],
        args=(f, y),
        method="L-BFGS-B",
        bounds=[(0, None), (0, None), (None, None)],
        options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 10000},
    )
    ours = beta_objective_direct([scaler.a_, scaler.b_, scaler.c_], f, y)
    assert scaler.a_ >= 0 and scaler.b_ >= 0
    assert ours <= result.fun + 1e-8
    np.testing.assert_allclose([scaler.a_, scaler.b_, scaler.c_], result.x, atol=1e-4)


def test_beta_with_uninformative_scores_is_the_base_rate():
    f, y = noisy_scores(300, separation=1.0, seed=8)
    scaler = BetaScaler().fit(-f, y)  # scores anti-correlated with the labels: both slopes clamp at 0
    assert (scaler.a_, scaler.b_) == (0.0, 0.0)
    np.testing.assert_allclose(scaler.predict_proba([-3.0, 0.0, 3.0]), np.mean(y > 0), rtol=1e-9)


# --------------------------------------------------------------------------- histogram binning


def direct_bin_frequencies(f, y, edges):
    """Positive fraction per bin, bin i = (edges[i], edges[i+1]] with the first bin closed; NaN if empty."""
    out = []
    for i in range(len(edges) - 1):
        inside = (f > edges[i]) & (f <= edges[i + 1])
        if i == 0:
            inside |= f == edges[0]
        out.append(np.mean(y[inside] > 0) if inside.any() else np.nan)
    return np.array(out)


@pytest.mark.parametrize("strategy, n_bins", [("uniform", 10), ("quantile", 10), ("uniform", 50)])
def test_histogram_binning_matches_direct_counts(strategy, n_bins):
    f, y = noisy_scores(1000, seed=9)
    scaler = HistogramBinningScaler(n_bins=n_bins, strategy=strategy).fit(f, y)
    if strategy == "uniform":
        edges = np.linspace(f.min(), f.max(), n_bins + 1)
    else:
        edges = np.percentile(f, np.linspace(0, 100, n_bins + 1))
        assert np.ptp(scaler.bin_counts_) <= 1  # equal mass
    np.testing.assert_allclose(scaler.bin_edges_, edges, rtol=1e-12)
    direct = direct_bin_frequencies(f, y, edges)
    filled = ~np.isnan(direct)
    np.testing.assert_allclose(scaler.bin_probabilities_[filled], direct[filled], atol=1e-12)
    centres = 0.5 * (edges[:-1] + edges[1:])
    np.testing.assert_allclose(scaler.predict_proba(centres[filled]), direct[filled], atol=1e-12)
    # beyond the training range: the end bins
    np.testing.assert_allclose(scaler.predict_proba([-1e4, 1e4]), scaler.bin_probabilities_[[0, -1]])


def test_histogram_binning_fills_empty_bins_from_neighbours():
    f = np.r_[np.linspace(0.0, 1.0, 50), 4.0 - np.arange(50) / 50]  # the bins over (1, 3] are empty
    y = np.r_[np.where(np.arange(50) % 5 == 0, 1, -1), np.where(np.arange(50) % 5 == 0, -1, 1)]
    scaler = HistogramBinningScaler(n_bins=8).fit(f, y)
    assert list(scaler.bin_counts_) == [25, 25, 0, 0, 0, 0, 25, 25]
    left, right = scaler.bin_probabilities_[1], scaler.bin_probabilities_[6]
    np.testing.assert_allclose(scaler.bin_probabilities_[2:6], left + (right - left) * np.arange(1, 5) / 5)
    np.testing.assert_allclose(scaler.predict_proba([1.75, 2.25]), left + (right - left) * np.array([2, 3]) / 5)


# --------------------------------------------------------------------------- fixed maps and SVM-PP


def test_softmax_and_svm01_fixed_maps():
    f = np.array([-1e4, -3.0, -1.0, -0.2, 0.0, 0.7, 1.0, 2.5, 1e4])
    np.testing.assert_allclose(SoftmaxScaler().predict_proba(f), 0.5 * (1 + np.tanh(f)), atol=1e-15)
    np.testing.assert_array_equal(SVM01Scaler().predict_proba(f), [0, 0, 0, 0.4, 0.5, 0.85, 1, 1, 1])


def test_svmpp_uses_empirical_rates_beyond_the_margins():
    f, y = noisy_scores(500, seed=10)
    scaler = SVMPPScaler().fit(f, y)
    upper, lower = np.mean(y[f > 1] > 0), np.mean(y[f < -1] > 0)
    np.testing.assert_allclose(
        scaler.predict_proba([-50.0, -1.5, -1.0, 0.3, 1.0, 1.5, 50.0]),
        [lower, lower, 0.0, 0.65, 1.0, upper, upper],
    )
    inside_only = SVMPPScaler().fit([-0.5, 0.5, 0.9], [0, 1, 1])
    np.testing.assert_array_equal(inside_only.predict_proba([-3.0, 3.0]), [0.0, 1.0])


# --------------------------------------------------------------------------- shared behaviour


@pytest.mark.parametrize("scaler_class", ALL_SCALERS)
def test_probabilities_finite_in_unit_interval_and_monotone(scaler_class):
    f, y = noisy_scores(300, seed=11)
    scaler = scaler_class().fit(f, y)
    grid = np.r_[-1e4, np.linspace(-6, 6, 241), 1e4]
    p = scaler.predict_proba(grid)
    assert p.shape == grid.shape
    assert np.all(np.isfinite(p)) and np.all((p >= 0) & (p <= 1))
    if scaler_class is not SVMPPScaler:  # SVM-PP jumps at the margins by construction
        assert np.all(np.diff(p) >= -1e-12)
    clone(scaler)  # scikit-learn parameter protocol


@pytest.mark.parametrize("scaler_class", ALL_SCALERS)
def test_bad_input_is_rejected(scaler_class):
    f, y = noisy_scores(30, seed=12)
    with pytest.raises(ValueError, match="one class"):
        scaler_class().fit(f, np.ones(30))
    with pytest.raises(ValueError, match="NaN or infinite"):
        scaler_class().fit(np.r_[f[:-1], np.nan], y)
    with pytest.raises(ValueError, match="NaN or infinite"):
        scaler_class().fit(np.r_[f[:-1], np.inf], y)
    with pytest.raises(ValueError, match="must match"):
        scaler_class().fit(f, y[:-1])
    with pytest.raises(ValueError, match="1-D"):
        scaler_class().fit(np.ones((30, 2)), y)
    with pytest.raises(ValueError, match="3 classes"):
        scaler_class().fit(f, np.arange(30) % 3)
    fitted = scaler_class().fit(f, y)
    with pytest.raises(ValueError, match="NaN or infinite"):
        fitted.predict_proba([0.0, np.nan])


@pytest.mark.parametrize("scaler_class", FITTED_SCALERS)
def test_predict_before_fit_raises_not_fitted(scaler_class):
    with pytest.raises(NotFittedError):
        scaler_class().predict_proba([0.0, 1.0])


@pytest.mark.parametrize("params", [{"n_bins": 0}, {"n_bins": 2.5}, {"strategy": "equal"}])
def test_histogram_binning_rejects_bad_parameters(params):
    f, y = noisy_scores(30, seed=13)
    with pytest.raises(ValueError, match="n_bins|strategy"):
        HistogramBinningScaler(**params).fit(f, y)
