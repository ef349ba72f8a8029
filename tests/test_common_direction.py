"""ln N(D) with the common direction integrated out by quadrature, against independent references.

References: the Gaussian identity K = v u u^T + F F^T for the split of the prior; a two-point integral by a tensor
Gauss-Legendre rule where nearly all the mass lies in the two far modes of the common value (the corner tempered
SMC cannot cross); 10^6 plain prior draws on six points at an ordinary setting.
"""

from __future__ import annotations

import numpy as np
import pytest

from bayesvm._precision import float64_scope
from bayesvm.kernels import RBF
from bayesvm.normalization.annealing import padded, prior_factor
from bayesvm.normalization.common_direction import common_direction, quadrature_log_normalization

from test_annealing import FLOOR, N_SE, _brute_force_log_normalization, log_quad_2d, nu_np


def _split(K: np.ndarray, size: int):
    with float64_scope():
        chol, mask = padded(prior_factor(K), size)
        return common_direction(chol, mask), np.asarray(chol), np.asarray(mask)


@pytest.mark.parametrize("duplicates", [False, True])
def test_the_split_of_the_prior_reproduces_its_covariance(duplicates):
    """v u u^T + F F^T = K over the data block and the identity over the padding, for a Cholesky factor and for the
    eigen-factor of a singular K (duplicate inputs); F's columns carry nothing along K^-1 u (s and r independent)."""
    X = np.random.default_rng(0).normal(size=(5, 2))
    if duplicates:
        X = np.vstack([X, X[:2]])
    K = np.asarray(RBF(length_scale=1.2, amplitude=0.3, offset=0.05)(X))
    split, chol, mask = _split(K, 8 + 2 * duplicates)
    v, F, u = float(split.variance), np.asarray(split.factor), np.asarray(split.direction)
    expected = chol @ chol.T
    np.testing.assert_allclose(v * np.outer(u, u) + F @ F.T, expected, atol=1e-10)
    np.testing.assert_allclose(u, mask)
    a = np.linalg.lstsq(chol, u, rcond=None)[0]
    np.testing.assert_allclose(F @ a, 0.0, atol=1e-10)  # Cov(r, s) = F F^T K^+ u v = 0
    np.testing.assert_allclose(v, 1.0 / (u[mask > 0] @ np.linalg.pinv(K) @ u[mask > 0]), rtol=1e-8)


def test_a_prior_without_a_common_direction_is_declined():
    """A rank-one K along b, not along 1: s is not defined, so there is no estimate (None), not a wrong one."""
    b = np.array([1.0, -1.0, 0.5])
    with float64_scope():
        assert quadrature_log_normalization(np.column_stack([b, np.zeros(3), np.zeros(3)]), 2.0) is None


def test_at_a_corner_of_two_points_the_quadrature_matches_a_gauss_legendre_rule():
    """Tiny amplitude, large C: ln nu(0) ~ -C, so the prior's bulk carries exp(-2C) and nearly all of N(D) lies where
    both latents have reached the margin, about 7 prior standard deviations out along the common direction (at
    C = 30 the far modes carry ~e^30 times the bulk's mass). The quadrature finds that peak by itself."""
    X = np.array([[0.0], [0.6]])
    K = np.asarray(RBF(length_scale=1.0, amplitude=0.015, offset=0.005)(X))
    c = 30.0
    exact = log_quad_2d(lambda t1, t2: np.log(nu_np(t1, c)) + np.log(nu_np(t2, c)), K, nodes=200)
    split, chol, mask = _split(K, 4)
    with float64_scope():
        result = quadrature_log_normalization(chol, c, mask, key=0)
    assert result.trusted, result
    peak = result.grid[np.argmax(result.log_integrand)]
    assert peak > 5.0 * np.sqrt(result.variance)  # found far out, not at s = 0
    assert abs(result.value - exact) < N_SE * result.se + FLOOR, (result.value, result.se, exact)


def test_at_an_ordinary_point_of_six_points_the_quadrature_matches_brute_force_monte_carlo():
    X = np.random.default_rng(5).normal(size=(6, 2))
    K = np.asarray(RBF(length_scale=1.5, amplitude=4.0, offset=1.0)(X))
    c = 1.5
    brute, brute_se = _brute_force_log_normalization(K, c)
    _, chol, mask = _split(K, 8)
    with float64_scope():
        result = quadrature_log_normalization(chol, c, mask, key=1)
    assert result.trusted, result
    assert result.grid[0] == 0.0  # the mass at s = 0 is kept, and counted twice by the sign symmetry
    assert abs(result.value - brute) < N_SE * np.hypot(result.se, brute_se) + FLOOR, (result.value, brute)


def test_the_grid_must_have_an_odd_number_of_points():
    with float64_scope():
        with pytest.raises(ValueError, match="odd"):
            quadrature_log_normalization(np.eye(3), 1.0, grid_points=24)
