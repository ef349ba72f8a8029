"""Predictive probabilities and error bars against quadrature and direct linear algebra."""

import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import expit

from bayesvm import RBF
from bayesvm.kernels import gram_matrix
from bayesvm.posterior import Posterior, predictive_probability
from bayesvm.solver.dual import fit_map


def _q(theta, C, s):
    """Q(s | theta) without kappa (it cancels in every ratio here)."""
    return np.exp(-C * max(0.0, 1.0 - s * theta))


def _gauss_average(f, mean, var):
    sd = np.sqrt(var)
    value, _ = integrate.quad(
        lambda t: stats.norm.pdf(t, mean, sd) * f(t),
        mean - 14 * sd,
        mean + 14 * sd,
        points=[p for p in (-1.0, 1.0) if abs(p - mean) < 14 * sd],
        limit=400,
        epsabs=1e-15,
        epsrel=1e-12,
    )
    return value


CASES = [(m, v, C) for m in (-2.5, -0.4, 0.0, 0.3, 1.0, 4.0) for v in (1e-4, 0.2, 3.0) for C in (0.5, 4.0)]


@pytest.mark.parametrize("mean, var, C", CASES)
def test_averaged_probability_against_quadrature(mean, var, C):
    plus = _gauss_average(lambda t: _q(t, C, 1), mean, var)
    minus = _gauss_average(lambda t: _q(t, C, -1), mean, var)
    p = float(predictive_probability(np.array([mean]), np.array([var]), C, "averaged")[0])
    np.testing.assert_allclose(p, plus / (plus + minus), rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("mean, var, C", CASES[::3])
def test_simple_average_against_quadrature(mean, var, C):
    def p_plus(t):
        g = 2 * t if abs(t) <= 1 else np.sign(t) * (1 + abs(t))
        return expit(C * g)

    p = float(predictive_probability(np.array([mean]), np.array([var]), C, "simple")[0])
    np.testing.assert_allclose(p, _gauss_average(p_plus, mean, var), atol=2e-4)


def test_probabilities_are_on_the_side_of_the_map_output():
    rng = np.random.default_rng(0)
    mean = np.concatenate([rng.normal(scale=3, size=500), [0.0, -0.0, 1e-300, -1e-300]])
    var = np.exp(rng.uniform(-20, 5, size=mean.size))
    for method in ("map", "averaged", "simple"):
        for C in (0.01, 1.0, 100.0):
            p = np.asarray(predictive_probability(mean, var, C, method))
            assert np.all((p >= 0) & (p <= 1))
            np.testing.assert_array_equal(np.sign(p - 0.5), np.sign(mean))


def test_averaging_moderates_towards_one_half():
    mean, var = np.array([0.8, -2.0]), np.array([2.0, 2.0])
    p_map = np.asarray(predictive_probability(mean, var, 2.0, "map"))
    for method in ("averaged", "simple"):
        p = np.asarray(predictive_probability(mean, var, 2.0, method))
        assert np.all(np.abs(p - 0.5) < np.abs(p_map - 0.5))


def test_variance_matches_direct_formula_and_error_bars_bracket_the_map():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 2))
    y = np.where(X[:, 0] + 0.4 * rng.normal(size=40) > 0, 1, -1)
    C, kernel = 3.0, RBF(0.8, 1.5, 0.5)
    fit = fit_map(X, y, C=C, kernel=kernel)
    post = Posterior.from_fit(fit)
    X_new = rng.normal(size=(7, 2))
    mean, var = post.latent(X_new)
    # sigma^2 = K(x,x) - k_m^T (K_m + L_m^-1)^-1 k_m, with an explicit solve (the RBF kernel written out in NumPy)
    def rbf(A, B):
        squared = ((A[:, None] - B[None]) ** 2).sum(-1) / kernel.length_scale**2
        return kernel.amplitude * np.exp(-0.5 * squared) + kernel.offset

    m = fit.marginal
    a = fit.alpha[m]
    L = 2 * np.pi * (a * (C - a) / C) ** 2
    K_cross = rbf(X_new, X[m])
    K_m = rbf(X[m], X[m])
    direct = (kernel.amplitude + kernel.offset) - np.einsum("ij,ij->i", K_cross, np.linalg.solve(K_m + np.diag(1 / L), K_cross.T).T)
    assert m.sum() >= 3
    np.testing.assert_allclose(var, direct, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(mean, fit.decision_function(X_new), atol=1e-12)
    bars = post.error_bars(X_new)
    p_map = post.predict_proba(X_new, "map")
    assert np.all(bars.p_lower <= p_map) and np.all(p_map <= bars.p_upper)
    np.testing.assert_allclose(bars.sigma, np.sqrt(var))


def test_unknown_probability_method():
    with pytest.raises(ValueError, match="method must be one of"):
        predictive_probability(np.zeros(1), np.ones(1), 1.0, "platt")


def test_predictions_at_any_number_of_inputs_are_the_rows_own_and_share_compiled_programs():
    """The inputs' rows are predicted in blocks of a fixed size: every row's prediction is what it is alone, and a
    second number of inputs compiles nothing."""
    from bayesvm.inference.ep import ep_predict

    rng = np.random.default_rng(5)
    X = rng.normal(size=(40, 2))
    y = np.where(X[:, 0] + 0.4 * rng.normal(size=40) > 0, 1, -1)
    fit = fit_map(X, y, C=2.0, kernel=RBF(0.9, 1.2, 0.5))
    post = Posterior.from_fit(fit, "ep")
    X_new = rng.normal(size=(9, 2))
    together = post.predict_proba(X_new)
    programs = gram_matrix._cache_size(), ep_predict._cache_size()
    alone = np.concatenate([post.predict_proba(X_new[i:i + 1]) for i in range(9)])
    np.testing.assert_allclose(together, alone, rtol=1e-12)
    mean, var = post.latent(X_new[:5])
    np.testing.assert_allclose(mean, post.latent(X_new)[0][:5], rtol=1e-12)
    assert (gram_matrix._cache_size(), ep_predict._cache_size()) == programs
    assert together.shape == (9,) and mean.shape == var.shape == (5,)
    np.testing.assert_allclose(fit.decision_function(X_new[:5]), fit.decision_function(X_new)[:5], rtol=1e-12)
