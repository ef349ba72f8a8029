"""The MAP SVM dual solver: exact KKT, agreement with an independent QP, invariances, robustness."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize

from bayesvm import RBF, ConvergenceWarning, Exponential, Linear, Polynomial
from bayesvm._precision import float64_scope
from bayesvm.kernels import gram_matrix
from bayesvm.solver.dual import fit_map, kkt_tolerance, solve_dual, solve_dual_batch


def _problem(n, d=2, seed=0, noise=0.3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] ** 2 + noise * rng.normal(size=n) > 0.3, 1.0, -1.0)
    return X, y


def _numpy_kkt(K, y, C, alpha):
    """KKT violation recomputed from scratch in numpy (margin units)."""
    g = 1.0 - y * (K @ (alpha * y))
    free = (alpha > 0) & (alpha < C)
    viol = np.where(free, np.abs(g), np.where(alpha <= 0, np.maximum(g, 0), np.maximum(-g, 0)))
    assert np.all(alpha >= 0) and np.all(alpha <= C)
    return viol.max()


@pytest.mark.parametrize(
    "kernel",
    [RBF(0.7, 2.0, 0.5), Exponential(1.5, 1.0, 1.0), Polynomial(gamma=0.5, coef0=1.0, degree=3), Linear(0.5, 1.0)],
    ids=["rbf", "ou", "poly", "linear"],
)
@pytest.mark.parametrize("C", [0.05, 1.0, 30.0])
def test_kkt_conditions_hold_exactly(kernel, C):
    X, y = _problem(60, seed=1)
    fit = fit_map(X, y, C=C, kernel=kernel)
    K = np.asarray(gram_matrix(kernel, X))
    assert fit.converged
    assert _numpy_kkt(K, fit.y, C, fit.alpha) <= 1e-8
    # the marginal set is exactly the points on the margin
    np.testing.assert_allclose((fit.y * fit.theta)[fit.marginal], 1.0, atol=1e-8)
    np.testing.assert_allclose(fit.theta, K @ (fit.alpha * fit.y), atol=1e-10)


def _scipy_dual(K, y, C):
    """Independent solve of the box QP: L-BFGS-B on the negated dual with its exact gradient."""
    Q = (y[:, None] * y[None, :]) * K
    res = minimize(
        lambda a: (0.5 * a @ Q @ a - a.sum(), Q @ a - 1.0),
        np.full(len(y), C / 2),
        jac=True,
        method="L-BFGS-B",
        bounds=[(0.0, C)] * len(y),
        options={"ftol": 1e-16, "gtol": 1e-13, "maxiter": 50000, "maxcor": 50},
    )
    return res.x


@pytest.mark.parametrize("C", [0.5, 5.0])
def test_alpha_agrees_with_independent_qp(C):
    X, y = _problem(40, seed=2)
    kernel = RBF(length_scale=1.0, amplitude=1.0, offset=1.0)
    fit = fit_map(X, y, C=C, kernel=kernel)
    reference = _scipy_dual(np.asarray(gram_matrix(kernel, X)), fit.y, C)
    np.testing.assert_allclose(fit.alpha, reference, atol=1e-6 * C)


def test_theta_invariant_under_C_amplitude_rescaling():
    X, y = _problem(50, seed=3)
    base = fit_map(X, y, C=2.0, kernel=RBF(0.8, amplitude=1.5, offset=0.5))
    for s in (0.1, 7.0):
        scaled = fit_map(X, y, C=2.0 / s, kernel=RBF(0.8, amplitude=1.5 * s, offset=0.5 * s))
        np.testing.assert_allclose(scaled.theta, base.theta, atol=1e-9)
        np.testing.assert_allclose(scaled.alpha, base.alpha / s, atol=1e-9 / s)
        np.testing.assert_array_equal(scaled.marginal, base.marginal)


def test_decision_function_reproduces_training_outputs():
    X, y = _problem(30, seed=4)
    fit = fit_map(X, y, C=3.0, kernel=RBF(0.9))
    np.testing.assert_allclose(fit.decision_function(X), fit.theta, atol=1e-10)
    assert set(np.unique(fit.predict(X))) <= set(fit.classes)


@pytest.mark.parametrize("C", [1e-4, 1e-2, 1.0, 1e2, 1e4])
def test_extreme_C_gives_valid_solution(C):
    X, y = _problem(40, seed=5)
    fit = fit_map(X, y, C=C, kernel=RBF(0.5))
    assert np.all(np.isfinite(fit.alpha)) and np.all(np.isfinite(fit.theta))
    assert fit.converged and fit.kkt_violation <= 1e-8


def test_tiny_C_puts_every_point_at_the_bound():
    X, y = _problem(25, seed=6)
    fit = fit_map(X, y, C=1e-4, kernel=RBF(0.5))
    np.testing.assert_array_equal(fit.alpha, 1e-4)
    assert not fit.marginal.any()


def test_duplicate_inputs_and_singular_gram():
    X, y = _problem(20, seed=7)
    X = np.vstack([X, X[:5], X[:5]])  # triplicates: rank-deficient Gram matrix
    y = np.concatenate([y, y[:5], y[:5]])
    for kernel in (RBF(0.6, offset=0.0), Linear(1.0, offset=0.0)):
        fit = fit_map(X, y, C=10.0, kernel=kernel)
        assert fit.converged
        assert _numpy_kkt(np.asarray(gram_matrix(kernel, X)), fit.y, 10.0, fit.alpha) <= 1e-8


def test_conflicting_duplicates():
    # the same input with both labels: theta there must lie in [-1, 1]
    X = np.array([[0.0], [0.0], [2.0], [-2.0]])
    y = np.array([1, -1, 1, -1])
    fit = fit_map(X, y, C=5.0, kernel=RBF(1.0))
    assert fit.converged and abs(fit.theta[0]) <= 1 + 1e-8


def test_separable_data_and_two_points():
    X = np.array([[-1.0], [1.0]])
    fit = fit_map(X, [0, 1], C=100.0, kernel=Linear(1.0, offset=1.0))
    # K = 2 I: the hard-margin solution is theta = +-1 exactly, alpha = 1/2 each
    np.testing.assert_allclose(fit.theta, [-1.0, 1.0], atol=1e-12)
    np.testing.assert_allclose(fit.alpha, [0.5, 0.5], atol=1e-12)
    assert fit.marginal.all()


def test_vmap_over_hyperparameters_matches_single_solves():
    X, y = _problem(30, seed=8)
    with float64_scope():  # jnp arrays built here, and the user's own vmap, need float64 on
        Cs = jnp.array([0.1, 1.0, 10.0])
        kernels = RBF(length_scale=jnp.array([0.5, 1.0, 2.0]), amplitude=jnp.ones(3), offset=jnp.ones(3))
        Ks = jax.vmap(lambda k: k(jnp.asarray(X)))(kernels)
        batched = jax.vmap(lambda K, C: solve_dual(K, jnp.asarray(y), C))(Ks, Cs)
    adaptive = solve_dual_batch(Ks, y, Cs, strategy="vmap")
    sequential = solve_dual_batch(Ks, y, Cs, strategy="map")
    for b in range(3):
        single = fit_map(X, y, C=float(Cs[b]), kernel=RBF(float(kernels.length_scale[b]), 1.0, 1.0))
        np.testing.assert_allclose(batched.alpha[b], single.alpha, atol=1e-9)
        np.testing.assert_allclose(adaptive.alpha[b], single.alpha, atol=1e-9)
        np.testing.assert_allclose(sequential.alpha[b], single.alpha, atol=1e-9)
        np.testing.assert_array_equal(adaptive.marginal[b], single.marginal)
    assert bool(jnp.all(batched.converged))


def test_small_free_buffer_falls_back_correctly():
    X, y = _problem(50, seed=9)
    K = gram_matrix(RBF(0.3), X)
    full = solve_dual(K, y, 50.0)
    tight = solve_dual(K, y, 50.0, max_free=2)  # far fewer than the marginal count
    assert int(full.marginal.sum()) > 2
    assert bool(tight.converged)
    np.testing.assert_allclose(tight.alpha, full.alpha, atol=1e-7)


@pytest.mark.parametrize(
    "X, y, C, match",
    [
        (np.array([[0.0], [np.nan]]), [0, 1], 1.0, "NaN"),
        (np.array([[0.0], [np.inf]]), [0, 1], 1.0, "NaN or infinite"),
        (np.zeros((3, 1)), [1, 1, 1], 1.0, "one class"),
        (np.zeros((3, 1)), [0, 1], 1.0, "3 samples but y has 2"),
        (np.zeros((3, 1)), [0, 1, 2], 1.0, "exactly two"),
        (np.zeros(3), [0, 1, 0], 1.0, "2-D"),
        (np.zeros((2, 1)), [0, 1], 0.0, "C must be"),
        (np.zeros((2, 1)), [0, 1], -1.0, "C must be"),
    ],
)
def test_bad_input_gives_clear_error(X, y, C, match):
    with pytest.raises(ValueError, match=match):
        fit_map(X, y, C=C)


def test_bad_kernel_gives_clear_error():
    with pytest.raises(ValueError, match="length_scale"):
        fit_map(np.zeros((2, 1)), [0, 1], kernel=RBF(length_scale=0.0))
    with pytest.raises(ValueError, match="kernel must be"):
        fit_map(np.zeros((2, 1)), [0, 1], kernel="rbf")


def test_numerically_singular_gram_matrices_still_converge():
    """1-D inputs much denser than the length scale: cond(K) ~ 1e300, near-duplicate points.

    The first problem is one on which a primal-dual active-set polish alone
    cycles (its free-set solution lies far outside the box) and coordinate
    ascent stalls at a KKT violation of 2e-5; the others share its size, so one
    compilation serves all.
    """
    rng = np.random.default_rng(0)
    for _ in range(11):  # the stream up to the problem that failed
        n = int(rng.integers(40, 120))
        rng.uniform(0, 1, (n, 1)), rng.uniform(size=n), rng.choice([0.25, 1.0, 2.0, 8.0])
    n = int(rng.integers(40, 120))
    problems = [(rng.uniform(0, 1, (n, 1)), np.where(rng.uniform(size=n) > 0.5, 1, -1), float(rng.choice([0.25, 1.0, 2.0, 8.0])))]
    for C in (0.25, 2.0, 8.0):
        problems.append((rng.uniform(0, 1, (n, 1)), np.where(rng.uniform(size=n) > 0.5, 1, -1), C))
    assert problems[0][2] == 0.25 and n == 102
    for X, y, C in problems:
        kernel = RBF(0.1, 2.0 / C, 0.0)
        fit = fit_map(X, y, C=C, kernel=kernel)
        assert fit.converged
        assert _numpy_kkt(np.asarray(gram_matrix(kernel, X)), fit.y, C, fit.alpha) <= 1e-8


def _dual_objective(K, y, alpha):
    beta = alpha * y
    return alpha.sum() - 0.5 * beta @ K @ beta


def test_offset_dominated_dual_converges_and_agrees_with_an_independent_qp():
    """A bias prior variance (offset) 50 times the amplitude: single-coordinate steps stall there (each moves the
    bias by a K_ii-sized step), the pair steps, along which the offset cancels, converge. The solution reaches the
    requested 1e-8 and is at least as good as L-BFGS-B's on the same bounded dual, with the same outputs."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=40) > 0, 1.0, -1.0)
    kernel, C = RBF(length_scale=5.0, amplitude=3e3, offset=1.5e5), 0.2
    fit = fit_map(X, y, C=C, kernel=kernel)
    K = np.asarray(gram_matrix(kernel, X))
    assert fit.converged and float(fit.solution.tolerance) == 1e-8
    assert _numpy_kkt(K, fit.y, C, fit.alpha) <= 1e-8
    reference = _scipy_dual(K, fit.y, C)
    assert _dual_objective(K, fit.y, fit.alpha) >= _dual_objective(K, fit.y, reference) - 1e-9
    np.testing.assert_allclose(fit.theta, K @ (reference * fit.y), atol=1e-3)


def test_tolerance_is_raised_to_the_rounding_floor():
    """The tolerance is max(tol, n eps C max K_ii), invariant under (C, k0) -> (C / s, s k0); a huge box on
    nearly repeated inputs converges to that floor, not to an unreachable 1e-8."""
    K = np.diag([1.0, 4.0, 2.0])
    eps = np.finfo(np.float64).eps
    assert float(kkt_tolerance(K, 10.0, 1e-8)) == 1e-8
    assert float(kkt_tolerance(K, 1e12, 1e-8)) == pytest.approx(3 * eps * 4e12)
    assert float(kkt_tolerance(K * 1e3, 1e9, 1e-8)) == pytest.approx(float(kkt_tolerance(K, 1e12, 1e-8)))
    rng = np.random.default_rng(0)
    X = np.repeat(rng.normal(size=(8, 3)), 5, axis=0) + 1e-3 * rng.normal(size=(40, 3))
    y = rng.choice([-1, 1], size=40)
    kernel, C = RBF(length_scale=2.0, amplitude=1e5, offset=1e5), 1e3
    fit = fit_map(X, y, C=C, kernel=kernel)
    floor = float(fit.solution.tolerance)
    assert floor == pytest.approx(64 * eps * C * 2e5)  # n is the padded size, 64
    K = np.asarray(gram_matrix(kernel, X))
    assert fit.converged and _numpy_kkt(K, fit.y, C, fit.alpha) <= floor


def test_the_convergence_warning_says_why_and_what_to_pass():
    """A solve cut short (max_iter=1) on a huge box names its violation, its tolerance, the exhausted budget, the
    box times the prior variance that makes the dual hard, and the remedies."""
    rng = np.random.default_rng(0)
    X = np.repeat(rng.normal(size=(8, 3)), 5, axis=0) + 1e-3 * rng.normal(size=(40, 3))
    y = rng.choice([-1, 1], size=40)
    weights = np.where(np.arange(40) == 0, 2.0, 1.0)
    kernel = RBF(length_scale=2.0, amplitude=1e5, offset=1e5)
    with pytest.warns(ConvergenceWarning) as caught:
        fit = fit_map(X, y, C=1e3, kernel=kernel, sample_weight=weights, max_iter=1)
    assert not fit.converged
    message = str(caught[0].message)
    assert f"KKT violation {fit.kkt_violation:.2e} > {float(fit.solution.tolerance):.2e} (tol=1e-08" in message
    assert "after 1 coordinate steps (all of max_iter)" in message
    assert "C max w_i K(x_i, x_i) = 4e+08, is large" in message
    assert "near-singular Gram matrix" in message
    assert "Pass a smaller C or a smaller kernel amplitude and offset" in message
    assert "or a larger max_iter (it was 1), or a looser tol" in message
