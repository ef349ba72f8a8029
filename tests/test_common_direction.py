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


@pytest.mark.parametrize("routed_trusted, stopped, quadrature, route", [
    (True, None, (-9.0, True), "prior"),           # a trusted route: no quadrature
    (False, -30.0, (-9.0, True), "prior"),         # stopped early by the caller's level: no quadrature either
    (False, None, (-9.0, True), "quadrature"),     # untrusted: the trusted quadrature above it
    (False, None, (-10.2, True), "quadrature"),    # ... or within 3 of its standard errors (0.1) below it
    (False, None, (-11.0, True), "prior"),         # ... not where it missed mass the route found
    (False, None, (-9.0, False), "prior"),         # ... nor where it is not trusted itself
    (False, None, None, "prior"),                  # ... nor where the prior has no common direction
])
def test_the_quadrature_is_the_last_resort_that_keeps_the_higher_value(monkeypatch, routed_trusted, stopped,
                                                                      quadrature, route):
    import types

    import bayesvm.normalization.common_direction as module
    from bayesvm.normalization.ep_started import RoutedEstimate

    calls = []

    def fake_quadrature(*args, **kwargs):
        calls.append(kwargs)
        return None if quadrature is None else types.SimpleNamespace(value=quadrature[0], se=0.1,
                                                                     trusted=quadrature[1])

    monkeypatch.setattr(module, "quadrature_log_normalization", fake_quadrature)
    routed = RoutedEstimate(types.SimpleNamespace(value=-10.0, trusted=routed_trusted, stopped_above=stopped),
                            "prior", None)
    result = module.with_quadrature_fallback(routed, np.eye(3), 1.0, n_runs=8, max_se=0.2, ladder=(1,))
    assert result.route == route
    assert len(calls) == (not routed_trusted and stopped is None)
    assert all(set(c) == {"key", "n_runs"} for c in calls)  # the inner budget only, not the routes' ladder


@pytest.mark.slow
def test_at_a_real_corner_two_seeds_agree_where_tempered_smc_over_theta_is_far_off():
    """Digits 3 vs 8 (357 rows, the agreement map's subsample), C 9.96, k0 0.023, k_b 0.0026, length scale 2.95:
    where tempered SMC from the prior and from EP's Gaussian both disagree at their caps (the default was -255.4,
    untrusted; long references -254.4 and -254.1, their runs disagreeing). Two seeds of the quadrature are trusted
    and agree within 0.1 nats (measured -252.95 +- 0.02), and tempered SMC over theta with the same first-round
    budget lies far below them."""
    import warnings

    from sklearn.model_selection import train_test_split

    from bayesvm import _linalg
    from bayesvm.datasets import load_dataset
    from bayesvm.hyperparameters import kernel_hyperparameters_at
    from bayesvm.normalization.annealing import annealed_log_expectation, product_route_log_likelihood
    from bayesvm.normalization.budget import default_moves

    data = load_dataset("digits_3v8")
    X = data.X
    if X.shape[0] > 400:
        X = train_test_split(data.X, data.y, train_size=400, stratify=data.y, random_state=0)[0]
    x = np.array([2.2983, -3.7685, -2.1808, 1.0808])
    template = RBF()
    kernel, c = template.replace(**kernel_hyperparameters_at(template, x)), float(np.exp(x[0]))
    moves = default_moves(X.shape[0])
    _, chol, mask = _split(np.asarray(kernel(X)), _linalg.problem_size(X.shape[0]))
    with float64_scope():
        first, second = (quadrature_log_normalization(chol, c, mask, key=key, n_mcmc_steps=moves) for key in (0, 1))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            over_theta = annealed_log_expectation(chol, product_route_log_likelihood, args=(c, mask), key=0,
                                                  n_mcmc_steps=moves)
    assert first.trusted and second.trusted
    assert abs(first.value - second.value) <= 0.1
    assert over_theta.value < first.value - 10.0


@pytest.mark.parametrize("last_resort", [True, False])
def test_the_default_estimator_turns_to_the_quadrature_only_as_its_last_resort(monkeypatch, last_resort):
    """AnnealedNormalization asks for the quadrature after the tempered-SMC routes (an untrusted cell here), unless
    a cheap screen of many cells (the grid's) turns ``last_resort`` off or particles are kept (the search's)."""
    import bayesvm.evidence.approximations as approximations
    from bayesvm.evidence.log_evidence import point_cells
    from bayesvm.normalization.ep_started import RoutedEstimate

    from bayesvm.normalization.annealing import AnnealingResult

    untrusted = AnnealingResult(value=-10.0, se=0.5, ess=2.0, n_temperatures=4, log_z_runs=np.zeros(8),
                                temperatures=np.zeros((8, 5)), min_particle_ess=0.5, mean_slice_evaluations=3.0,
                                stuck_fraction=0.0, n_particles=64, n_runs=8, n_mcmc_steps=3)  # 2 of 8 effective
    assert not untrusted.trusted
    asked = []
    monkeypatch.setattr(approximations, "annealed_with_ep_fallback",
                        lambda *a, **k: RoutedEstimate(untrusted, "prior", None))
    monkeypatch.setattr(approximations, "with_quadrature_fallback", lambda routed, *a, **k: asked.append(k) or routed)
    cells = point_cells(np.random.default_rng(0).normal(size=(5, 2)), RBF(), 1.0)
    for keep_particles in (False, True):
        asked.clear()
        approximations.AnnealedNormalization(keep_particles=keep_particles, last_resort=last_resort)(cells)
        assert len(asked) == (last_resort and not keep_particles)


@pytest.mark.parametrize("scatter, abandoned", [(0.0, False), (0.3, False), (12.0, True)])
def test_the_quadrature_is_abandoned_where_its_runs_at_the_screens_peak_disagree(monkeypatch, scatter, abandoned):
    """The final grid's point at the screen's peak is computed first; where its runs disagree badly (one run 12 nats
    above the others: 1 effective run of 16) the other points are not computed and the result is untrusted; where
    they agree (or scatter a little) every point is, the peak once."""
    from bayesvm.normalization import common_direction as module

    calls = []

    def fake_inner(split, s, C, *, key, n_particles, n_runs, **options):
        calls.append((round(s, 12), n_runs))
        runs = np.full(n_runs, -20.0 * (s - 0.8) ** 2)
        if n_runs == 16:
            runs[0] += scatter
        return runs

    monkeypatch.setattr(module, "inner_log_z_runs", fake_inner)
    result = module.quadrature_log_normalization(np.eye(3), 1.0, key=0, n_runs=16)
    full = [s for s, runs in calls if runs == 16]
    assert result.abandoned is abandoned and result.trusted is (not abandoned)
    assert len(full) == (1 if abandoned else 25) and len(set(full)) == len(full)
    assert result.inner_evaluations == len(calls)

    def log_integrand(s):  # ln[N(s; 0, 1/3) h(s)] up to a constant, its peak at s = 32/43
        return -1.5 * s**2 - 20.0 * (s - 0.8) ** 2

    assert log_integrand(full[0]) > log_integrand(32 / 43) - 0.5  # the probe: a point at the integrand's peak
