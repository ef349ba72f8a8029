"""Tests for the choice of inducing inputs (bayesvm.low_rank.inducing_inputs / pivoted_cholesky).

Pivoted Cholesky is checked against a dense numpy transcription of the greedy
rule (Fine & Scheinberg 2001; Harbrecht et al. 2012) and against the Nystrom
trace error tr(K - K_nP K_PP^-1 K_Pn) computed densely; k-means against its
contract (m distinct centres, seeded).
"""

import numpy as np
import pytest

from bayesvm import low_rank
from bayesvm._precision import float64_scope
from bayesvm.kernels import RBF, Linear
from bayesvm.low_rank import inducing_inputs, low_rank_prior, pivoted_cholesky

LENGTH_SCALE = 0.7


def rbf_numpy(A, B, length_scale=LENGTH_SCALE):
    d2 = ((A[:, None, :] - B[None, :, :]) ** 2).sum(axis=-1)
    return np.exp(-0.5 * d2 / length_scale**2)


def dense_greedy_pivots(K, m):
    """The greedy rule on the dense matrix: pivot on the largest diagonal of the Schur complement."""
    S = K.copy()
    pivots = []
    for _ in range(m):
        p = int(np.argmax(np.diag(S)))
        pivots.append(p)
        S = S - np.outer(S[:, p], S[p, :]) / S[p, p]
    return np.array(pivots), np.diag(S)


def nystrom_trace_error(K, pivots):
    K_nP = K[:, pivots]
    Q = K_nP @ np.linalg.solve(K[np.ix_(pivots, pivots)], K_nP.T)
    return np.trace(K - Q)


@pytest.fixture(scope="module")
def points():
    return np.random.default_rng(0).uniform(-1.0, 1.0, size=(40, 2))


def test_pivoted_cholesky_matches_the_dense_greedy_rule(points):
    K = rbf_numpy(points, points)
    kernel = RBF(length_scale=LENGTH_SCALE, amplitude=3.0, offset=0.5)  # amplitude and offset are ignored
    pivots, L, residual = pivoted_cholesky(kernel, points, 8)
    ref_pivots, ref_residual = dense_greedy_pivots(K, 8)
    np.testing.assert_array_equal(pivots, ref_pivots)
    np.testing.assert_allclose(residual, np.maximum(ref_residual, 0.0), atol=1e-12)
    Q = K[:, pivots] @ np.linalg.solve(K[np.ix_(pivots, pivots)], K[pivots, :])
    np.testing.assert_allclose(L @ L.T, Q, atol=1e-10)
    np.testing.assert_array_equal(inducing_inputs(points, 8, method="pivoted-cholesky", kernel=kernel), points[pivots])


def test_pivoted_cholesky_trace_error_decreases_with_m(points):
    K = rbf_numpy(points, points)
    kernel = RBF(length_scale=LENGTH_SCALE)
    errors = []
    for m in (1, 2, 4, 8, 16):
        pivots, _, residual = pivoted_cholesky(kernel, points, m)
        assert len(set(pivots.tolist())) == m
        np.testing.assert_allclose(residual.sum(), nystrom_trace_error(K, pivots), rtol=1e-6, atol=1e-10)
        errors.append(residual.sum())
    # the FITC diagonal of low_rank_prior at unit amplitude is the same residual
    with float64_scope():  # low_rank_prior is an internal building block: float64 is the caller's job
        prior = low_rank_prior(kernel.replace(offset=0.0), points, points[pivots])
    np.testing.assert_allclose(np.asarray(prior.d), residual, atol=1e-7)  # up to its jitter 1e-8
    assert errors[0] < K.trace() and np.all(np.diff(errors) < 0)
    assert errors[-1] < 1e-2 * K.trace()


def test_pivoted_cholesky_keeps_picking_distinct_rows_past_the_rank(points):
    """The linear kernel on 2 features has rank 2: later pivots add zero columns but stay distinct rows."""
    pivots, L, residual = pivoted_cholesky(Linear(), points, 5)
    assert len(set(pivots.tolist())) == 5
    np.testing.assert_allclose(residual, 0.0, atol=1e-10)
    np.testing.assert_array_equal(L[:, 2:], 0.0)
    np.testing.assert_allclose(L @ L.T, points @ points.T, atol=1e-10)


def test_kmeans_returns_m_distinct_seeded_centres(points):
    Z = inducing_inputs(points, 6, random_state=3)
    assert Z.shape == (6, 2) and Z.dtype == np.float64
    assert np.unique(Z, axis=0).shape[0] == 6
    assert np.all((Z >= points.min(axis=0)) & (Z <= points.max(axis=0)))  # centres are means of the points
    np.testing.assert_array_equal(Z, inducing_inputs(points, 6, random_state=3))
    np.testing.assert_array_equal(Z, inducing_inputs(points, 6, kernel=RBF(), random_state=3))  # kernel ignored


def test_kmeans_switches_to_minibatch_above_the_threshold(points, monkeypatch):
    monkeypatch.setattr(low_rank, "MINIBATCH_ABOVE", 10)
    Z = inducing_inputs(points, 5, random_state=0)
    assert Z.shape == (5, 2) and np.unique(Z, axis=0).shape[0] == 5
    np.testing.assert_allclose(inducing_inputs(points + 1.7e9, 5, random_state=0), Z + 1.7e9, rtol=0.0, atol=1e-5)


@pytest.mark.parametrize(
    "m, method, kernel, match",
    [
        (0, "kmeans", None, r"m \(the number of inducing inputs\) must be an integer in \[1, n = 40\]"),
        (41, "pivoted-cholesky", RBF(), r"in \[1, n = 40\]"),
        (2.5, "kmeans", None, "must be an integer"),
        (True, "kmeans", None, "must be an integer"),
        (5, "random", None, "method must be one of 'kmeans', 'pivoted-cholesky'; got 'random'"),
        (5, "pivoted-cholesky", None, "needs the kernel"),
        (5, "pivoted-cholesky", "rbf", "kernel must be a bayesvm kernel"),
    ],
)
def test_bad_arguments_are_rejected(points, m, method, kernel, match):
    with pytest.raises(ValueError, match=match):
        inducing_inputs(points, m, method=method, kernel=kernel)


@pytest.mark.parametrize("method", ["kmeans", "pivoted-cholesky"])
def test_non_finite_inputs_are_rejected(points, method):
    X = points.copy()
    X[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        inducing_inputs(X, 5, method=method, kernel=RBF())


def test_fewer_distinct_rows_than_m_are_the_inducing_inputs():
    """12 rows of 3 distinct inputs and m = 5: the 3 inputs themselves (k-means cannot place 5 distinct centres)."""
    X = np.repeat(np.arange(3.0)[:, None], 4, axis=0)
    np.testing.assert_array_equal(inducing_inputs(X, 5), np.arange(3.0)[:, None])
