"""ln N(D) under a low-rank prior: the smoothed nu, the annealed estimate and its search path.

References are independent computations: adaptive quadrature of
N(eps; 0, d) nu(u + eps); the exact prior's tempered SMC (route "product")
where the low-rank prior is exact (inducing inputs at the training inputs);
plain Monte Carlo over theta ~ N(0, V V^T + diag d) on a tiny problem (no
convolution identity involved); central finite differences of the path's own
deterministic estimate; fresh low-rank tempered SMC with another seed.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate
from sklearn.model_selection import train_test_split

from bayesvm._precision import float64_scope
from bayesvm.normalization.annealing import annealed_log_normalization
from bayesvm.normalization.budget import EvidenceBudget
from bayesvm.datasets import load_dataset
from bayesvm.hyperparameters import coordinates_of, kernel_hyperparameters_at
from bayesvm.kernels import RBF
from bayesvm.low_rank import low_rank_prior
from bayesvm.normalization.low_rank import (
    LowRankNormalizationPath,
    annealed_log_normalization_low_rank,
    log_nu_smoothed,
)


def nu_np(theta, C):
    """nu(theta) = kappa(C) [exp(-C l(theta)) + exp(-C l(-theta))], written out independently."""
    kappa = 1.0 / (1.0 + np.exp(-2.0 * C))
    return kappa * (np.exp(-C * np.maximum(0.0, 1.0 - theta)) + np.exp(-C * np.maximum(0.0, 1.0 + theta)))


def log_nu_smoothed_quad(u, d, C):
    """ln INT N(eps; 0, d) nu(u + eps) d eps by adaptive quadrature, split at the kinks u + eps = +-1."""
    if d == 0.0:
        return float(np.log(nu_np(u, C)))
    s = np.sqrt(d)
    kinks = [k for k in (-1.0 - u, 1.0 - u) if abs(k) < 12 * s]
    value, _ = integrate.quad(  # the normal density written out, cheap at every node of the rule
        lambda e: np.exp(-0.5 * (e / s) ** 2) / (s * np.sqrt(2.0 * np.pi)) * nu_np(u + e, C), -12 * s, 12 * s,
        points=kinks or None, limit=400, epsabs=0.0, epsrel=1e-12,
    )
    return float(np.log(value))


def _subsample(name, n, seed=0):
    data = load_dataset(name)
    X, _, _, _ = train_test_split(data.X, data.y, train_size=n, stratify=data.y, random_state=seed)
    return X


#: entries of the (u, d) grid on which ln nubar is checked: the checks evaluate it in one compiled program of this size
GRID = 81


@jax.jit
def _smoothed_and_gradients(u, d, C):
    """ln nubar(u_i; d_i, C_i) and its gradients in u, d and C, elementwise over (GRID,) arrays, compiled once."""
    return log_nu_smoothed(u, d, C), jax.vmap(jax.grad(log_nu_smoothed, argnums=(0, 1, 2)))(u, d, C)


def _on_grid(u, d, C):
    """ln nubar and its gradients at the given points (each argument a scalar or an array of up to GRID entries),
    as NumPy arrays, the points repeated to the grid's size so that every check shares one compiled program."""
    u, d, C = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (u, d, C)))
    size = u.size
    with float64_scope():
        values, grads = _smoothed_and_gradients(*(np.resize(a.ravel(), GRID) for a in (u, d, C)))
    return np.asarray(values)[:size].reshape(u.shape), [np.asarray(g)[:size] for g in grads]


@pytest.mark.parametrize("C", [0.1, 1.0, 10.0])
def test_smoothed_nu_is_the_gaussian_convolution_of_nu(C):
    us = np.array([-3.0, -1.0, -0.999, -0.2, 0.0, 0.5, 1.0, 1.001, 2.5])
    ds = np.array([0.0, 5e-324, 1e-300, 1e-30, 1e-12, 1e-6, 1e-2, 0.3, 4.0])
    U, D = np.meshgrid(us, ds)
    values, grads = _on_grid(U, D, C)
    reference = np.vectorize(log_nu_smoothed_quad)(U, D, C)
    np.testing.assert_allclose(values, reference, rtol=0, atol=1e-9)
    # the guard at d -> 0 leaves no NaN in the gradients either (in u, d and C)
    assert all(np.all(np.isfinite(g)) for g in grads)


def test_smoothed_nu_where_the_mills_ratio_argument_is_near_37_6():
    """jax's erfcx(y) is 0 for y in [26.54, 26.64] (jax-ml/jax#38607): the Mills ratio there must not use it.

    (u, d, C) chosen so that the hinge term's a = C sqrt(d) - (1 - u) / sqrt(d) falls in that band; at
    n = 5000 such entries occur in every particle, and one NaN spoils the path's gradient.
    """
    cases = [(1.0, 0.376**2, 100.0), (-2.15035368893004, 0.000938832064174, 1.0)]
    values, grads = _on_grid(*zip(*cases))
    for (u, d, C), value in zip(cases, values):
        assert abs(value - log_nu_smoothed_quad(u, d, C)) < 1e-9
    assert all(np.all(np.isfinite(g)) for g in grads)


@pytest.mark.slow
def test_inducing_inputs_at_the_training_inputs_reproduce_the_exact_prior():
    """Z = X: FITC's V V^T + diag(d) is K itself, so ln N(D) must agree with the exact prior's annealing."""
    X = _subsample("breast_cancer", 70)
    C, kernel = 1.0, RBF(length_scale=5.0, amplitude=10.0, offset=10.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with float64_scope():
            prior = low_rank_prior(kernel, jnp.asarray(X), jnp.asarray(X), "fitc")
            low_rank, _ = annealed_log_normalization_low_rank(prior, C, key=3)
            exact = annealed_log_normalization(kernel, C, 70, X, route="product", key=4)
    assert low_rank.runs_agree and exact.runs_agree
    assert abs(low_rank.value - exact.value) < 4 * np.hypot(low_rank.se, exact.se) + 0.02, (low_rank, exact)


#: n = 4 inputs, one inducing input (r = 2), C and the kernel: a problem small enough for plain Monte Carlo over theta
TINY = (np.array([[-1.0], [-0.2], [0.5], [1.5]]), np.array([[0.3]]), 2.0, RBF(length_scale=0.8, amplitude=2.0,
                                                                               offset=0.3))


@pytest.mark.parametrize("kind", ["fitc", "dtc"])
def test_tiny_problem_matches_plain_monte_carlo_over_theta(kind):
    """n = 4 inputs, one inducing input (r = 2): mean of prod_i nu(theta_i) over theta ~ N(0, V V^T + diag d)."""
    X, Z, C, kernel = TINY
    with float64_scope():
        V, d = (np.asarray(a) for a in low_rank_prior(kernel, jnp.asarray(X), jnp.asarray(Z), kind))
        result, _ = annealed_log_normalization_low_rank((V, d), C, key=0)
    assert V.shape == (4, 2) and (np.min(d) > 0.1 if kind == "fitc" else np.all(d == 0))
    rng = np.random.default_rng(0)
    draws = 2_000_000
    theta = rng.standard_normal((draws, 2)) @ V.T + rng.standard_normal((draws, 4)) * np.sqrt(d)
    f = np.prod(nu_np(theta, C), axis=1)
    reference, reference_se = np.log(np.mean(f)), np.std(f) / (np.sqrt(draws) * np.mean(f))
    assert abs(result.value - reference) < 4 * np.hypot(result.se, reference_se) + 0.005, (result, reference)


@pytest.fixture(scope="module")
def low_rank_path_data():
    X = _subsample("pima", 80)
    Z = X[np.linspace(0, 79, 12).astype(int)]
    return X, Z


def test_path_gradient_is_the_gradient_of_its_estimate():
    """The path's gradient in all four coordinates (C, k0, k_b / k0, length scale) against central finite
    differences of its own deterministic estimate, anchored at the tiny problem's point (whose anchor is the
    tiny problem's tempered SMC)."""
    X, Z, C, kernel = TINY
    x0 = coordinates_of(C, kernel)
    with float64_scope():
        path = LowRankNormalizationPath(jnp.asarray(X), jnp.asarray(Z), RBF(), key=0)
        estimate = path.estimate(x0)
        h = 1e-5
        numeric = []
        for j in range(4):
            step = np.zeros(4)
            step[j] = h
            numeric.append((path.estimate(x0 + step).value - path.estimate(x0 - step).value) / (2 * h))
    assert path.n_anchors == 1 and estimate.anchored and estimate.resolved
    assert np.max(np.abs(estimate.gradient)) > 0.1 and np.min(np.abs(estimate.gradient)) > 0.01
    np.testing.assert_allclose(estimate.gradient, numeric, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_path_reweighting_matches_fresh_low_rank_annealing(low_rank_path_data):
    X, Z = low_rank_path_data
    template = RBF()
    x0 = np.log([1.0, 5.0, 1.0, 3.0])
    x = x0 + np.array([0.2, 0.3, -0.2, -0.2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with float64_scope():
            path = LowRankNormalizationPath(jnp.asarray(X), jnp.asarray(Z), template, key=1)
            path.estimate(x0)
            estimate = path.estimate(x)
            kernel = template.replace(**kernel_hyperparameters_at(template, x))
            prior = low_rank_prior(kernel, jnp.asarray(X), jnp.asarray(Z), "fitc")
            reference, _ = annealed_log_normalization_low_rank(prior, float(np.exp(x[0])), key=7,
                                                               budget=EvidenceBudget(n_particles=64))
    assert not estimate.anchored and path.n_anchors == 1
    assert reference.runs_agree
    assert abs(estimate.value - reference.value) <= 3 * np.hypot(estimate.se, reference.se) + 0.05


def test_path_rejects_an_unknown_kind():
    with pytest.raises(ValueError, match="kind"):
        LowRankNormalizationPath(np.zeros((3, 1)), np.zeros((1, 1)), RBF(), kind="sor")


@pytest.mark.slow
def test_starting_from_ep_estimates_the_same_integral_as_starting_from_the_prior():
    """The EP reference only changes where the annealing starts: both estimate ln N(D) (independent seeds)."""
    X = _subsample("breast_cancer", 90)
    C, kernel = 0.5, RBF(length_scale=6.0, amplitude=30.0, offset=30.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with float64_scope():
            prior = low_rank_prior(kernel, jnp.asarray(X), jnp.asarray(X[::3]), "fitc")
            from_ep, reference = annealed_log_normalization_low_rank(prior, C, key=1)
            from_prior, _ = annealed_log_normalization_low_rank(prior, C, key=2, reference=False)
    assert bool(reference.converged) and from_ep.runs_agree and from_prior.runs_agree
    assert abs(from_ep.value - from_prior.value) < 4 * np.hypot(from_ep.se, from_prior.se) + 0.02
    # starting closer to the target takes no more temperatures
    assert from_ep.n_temperatures <= from_prior.n_temperatures
