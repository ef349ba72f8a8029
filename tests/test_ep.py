"""Tests for bayesvm.inference.ep: tilted moments against quadrature, EP against exact
integrals (quadrature for n = 1, 2), brute-force Monte Carlo from the GP prior
and elliptical slice sampling; batching, determinism and NaN guards.

Tolerances for the EP approximation (not exact for n > 1) were measured with
the printed numbers (run ``pytest -s``) and set with a margin; docs/ep.md lists
the measurements.
"""

from __future__ import annotations

import itertools
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, special, stats
from scipy.special import logsumexp

from bayesvm.exceptions import ConvergenceWarning
from bayesvm._precision import float64_scope
from bayesvm.inference.ep import (
    ep_log_evidence,
    ep_log_normalization,
    ep_log_z_batch,
    ep_predict,
)
from bayesvm.kernels import RBF
from bayesvm.model import log_nu
from bayesvm.inference.tilted import (
    hinge_tilted_moments,
    log_mills_ratio,
    log_upper_tail,
    nu_tilted_moments,
    standard_tail_moments,
)

# ---------------------------------------------------------------------------
# references
# ---------------------------------------------------------------------------


def quad_moments(log_site, mu, v, breaks, scales, centres=()):
    """ln Z, mean, variance of N(theta; mu, v) exp(log_site(theta)) by scipy quad.

    The integrand is divided by its value at the log-density maximum (found on a
    grid refined around ``breaks``) and integrated over pieces between
    breakpoints placed at several multiples of each length scale.
    """
    log_f = lambda t: -0.5 * (t - mu) ** 2 / v - 0.5 * np.log(2 * np.pi * v) + log_site(t)  # noqa: E731
    cands = [c + np.sqrt(v) * np.linspace(-8.0, 8.0, 161) for c in (mu, *centres)]
    cands += [b + s * np.linspace(-20.0, 20.0, 161) for b in breaks for s in scales]
    cands = np.concatenate(cands)
    mode = cands[np.argmax(log_f(cands))]
    pts = {mode, *breaks}
    for s in scales:
        pts.update(mode + s * k for k in (-300, -40, -8, -2, -0.5, 0.5, 2, 8, 40, 300))
        for b in breaks:
            pts.update(b + s * k for k in (-40, -4, -0.5, 0.5, 4, 40))
    pts = np.array(sorted(pts))
    lo, hi = pts[0], pts[-1]
    l0 = log_f(mode)

    def integral(g):
        return sum(integrate.quad(g, a, b, epsabs=0.0, epsrel=1e-13, limit=200)[0] for a, b in zip(pts[:-1], pts[1:]))

    z = integral(lambda t: np.exp(log_f(t) - l0))
    m = mode + integral(lambda t: (t - mode) * np.exp(log_f(t) - l0)) / z
    var = integral(lambda t: (t - m) ** 2 * np.exp(log_f(t) - l0)) / z
    assert lo < m < hi
    return np.log(z) + l0, m, var


def hinge_reference(mu, v, C, sign):
    log_site = lambda t: -C * np.maximum(0.0, 1.0 - sign * t)  # noqa: E731
    scales = [np.sqrt(v), 1.0 / C, 1.0 / (C + 1.0 / np.sqrt(v))]
    return quad_moments(log_site, mu, v, [float(sign)], scales, centres=[mu + sign * C * v])


def log_nu_numpy(t, C):
    """ln nu(theta) written out in numpy (independent of bayesvm.model, and fast inside quad)."""
    return -np.logaddexp(0.0, -2.0 * C) + np.logaddexp(-C * np.maximum(0.0, 1.0 - t), -C * np.maximum(0.0, 1.0 + t))


def nu_reference(mu, v, C):
    log_site = lambda t: log_nu_numpy(t, C)  # noqa: E731
    return quad_moments(log_site, mu, v, [-1.0, 1.0], [np.sqrt(v), 1.0 / C])


def rbf_gram(n, amplitude, seed=0, length_scale=1.0, offset=0.1):
    X = np.random.default_rng(seed).normal(size=(n, 1))
    return np.asarray(RBF(length_scale=length_scale, amplitude=amplitude, offset=offset)(X)), X


def prior_draws(K, n_draws, seed):
    L = np.linalg.cholesky(K + 1e-12 * np.eye(len(K)))
    return np.random.default_rng(seed).standard_normal((n_draws, len(K))) @ L.T


def log_label_likelihood_numpy(y, theta, C):
    """ln Q(y | theta) = ln kappa(C) - C max(0, 1 - y theta) written out in numpy (independent of bayesvm.model)."""
    return -np.logaddexp(0.0, -2.0 * C) - C * np.maximum(0.0, 1.0 - y * theta)


def compiled(function):
    """``function`` traced once per input shape in float64, as the package's compiled programs (EP's loop, the
    samplers) run it; called eagerly, every operation in it would compile a program of its own."""
    jitted = jax.jit(function)

    def call(*args):
        with float64_scope():
            return jitted(*args)

    return call


def log_mean_exp_with_se(log_w):
    """ln mean exp(log_w) and its delta-method standard error."""
    w = np.exp(log_w - log_w.max())
    return logsumexp(log_w) - np.log(len(log_w)), np.std(w) / np.mean(w) / np.sqrt(len(w))


# ---------------------------------------------------------------------------
# tilted moments
# ---------------------------------------------------------------------------


_log_nu_with_derivatives = compiled(
    lambda theta, C: (log_nu(theta, C), jax.vmap(jax.grad(log_nu, argnums=(0, 1)), (0, None))(theta[:4001], C))
)


@pytest.mark.parametrize("C", [1e-4, 0.3, 1.0, 7.0, 300.0])
def test_log_nu_is_its_definition_with_its_derivatives(C):
    """ln nu against its definition (two exponents, numpy's logaddexp) on a grid that crosses the kinks at
    |theta| = 1 and reaches the far tails, 0 exactly at |theta| = 1, and its derivatives in theta and C against
    central differences of the definition away from the kinks."""
    theta = np.concatenate([np.linspace(-60.0, 60.0, 4001), [-1.0, 1.0, 0.0, 1e-300, 1e300, -1e300]])
    value, (d_theta, d_C) = _log_nu_with_derivatives(theta, C)
    value = np.asarray(value)
    np.testing.assert_allclose(value, log_nu_numpy(theta, C), rtol=1e-14, atol=1e-14)
    assert value[4001] == 0.0 and value[4002] == 0.0
    smooth = np.abs(np.abs(theta[:4001]) - 1.0) > 1e-3
    h = 1e-6
    fd_theta = (log_nu_numpy(theta[:4001] + h, C) - log_nu_numpy(theta[:4001] - h, C)) / (2 * h)
    fd_C = (log_nu_numpy(theta[:4001], C * (1 + h)) - log_nu_numpy(theta[:4001], C * (1 - h))) / (2 * h * C)
    scale = 1.0 + np.abs(fd_theta) + np.abs(fd_C)
    assert np.max((np.abs(np.asarray(d_theta) - fd_theta) / scale)[smooth]) < 1e-6
    assert np.max((np.abs(np.asarray(d_C) - fd_C) / scale)[smooth]) < 1e-6


_standard_tail_moments = compiled(standard_tail_moments)


@pytest.mark.parametrize("alpha", [-30.0, -3.0, 0.0, 1.5, 3.99, 4.0, 7.0, 10.0])
def test_standard_tail_moments_match_scipy_truncnorm(alpha):
    dist = stats.truncnorm(alpha, np.inf)
    t, w = _standard_tail_moments(alpha)
    np.testing.assert_allclose(alpha + float(t), dist.mean(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(float(w), dist.var(), rtol=1e-8)


def test_log_upper_tail_and_mills_ratio_match_scipy():
    # ln Phi(-x) and ln R(x) = ln Phi(-x) - ln phi(x) from one erfcx, against scipy's log_ndtr over both tails,
    # the erfcx band near x = 37.6, and far out; the gradient against -phi(x) / Phi(-x)
    x = np.concatenate([np.linspace(-37.0, 40.0, 20001), [-1e-12, 0.0, 1e-12, 37.55, 37.6, 37.65, 1e3, 1e5]])
    reference = special.log_ndtr(-x)
    value, mills, gradient = (np.asarray(a) for a in compiled(
        lambda x: (log_upper_tail(x), log_mills_ratio(x), jax.vmap(jax.grad(log_upper_tail))(x))
    )(x))
    np.testing.assert_allclose(value, reference, rtol=1e-12, atol=1e-300)
    inner = np.abs(x) <= 1e3  # beyond, scipy's difference of two huge logs loses the digits: the series there
    np.testing.assert_allclose(mills[inner], (reference - stats.norm.logpdf(x))[inner], rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(mills[-1], -np.log(1e5) + np.log1p(-1e-10 + 3e-20), rtol=1e-15)
    inner = np.abs(x) <= 37.0
    np.testing.assert_allclose(gradient[inner], -np.exp(stats.norm.logpdf(x) - reference)[inner], rtol=1e-10)


def test_tail_moments_far_tail_follow_asymptotics():
    # N(0,1) cut at alpha -> exponential of rate alpha: t ~ 1/alpha - 2/alpha^3, w ~ 1/alpha^2 - 6/alpha^4
    alpha = np.array([1e3, 1e6, 1e9])
    t, w = np.array([[float(a) for a in _standard_tail_moments(float(x))] for x in alpha]).T
    np.testing.assert_allclose(t, 1 / alpha - 2 / alpha**3, rtol=1e-9)
    np.testing.assert_allclose(w, 1 / alpha**2 - 6 / alpha**4, rtol=1e-9)


HINGE_CASES = [
    (mu, v, C, s)
    for mu, v, C, s in itertools.product(
        [-1e3, -3.0, 0.0, 0.999, 1.0, 2.5, 1e3], [1e-6, 1e-2, 1e4], [1e-3, 1.0, 1e3], [1.0, -1.0]
    )
    if (mu, s) in {(-1e3, 1.0), (1e3, -1.0), (0.0, 1.0), (0.999, 1.0), (1.0, -1.0), (2.5, 1.0)} or mu in (-3.0,)
]


_hinge_tilted_moments = compiled(hinge_tilted_moments)
_nu_tilted_moments = compiled(nu_tilted_moments)


@pytest.mark.parametrize("mu,v,C,sign", HINGE_CASES)
def test_hinge_tilted_moments_match_quadrature(mu, v, C, sign):
    log_z, mean, var = (float(a) for a in _hinge_tilted_moments(mu, v, C, sign))
    ref = hinge_reference(mu, v, C, sign)
    np.testing.assert_allclose(log_z, ref[0], rtol=1e-9, atol=1e-9)
    assert abs(mean - ref[1]) <= 1e-8 * max(abs(ref[1]), np.sqrt(ref[2]))
    np.testing.assert_allclose(var, ref[2], rtol=1e-7)


def test_hinge_tilted_moments_sign_symmetry():
    # exp(-C l(-theta)) under N(mu, v) is the mirror image of exp(-C l(theta)) under N(-mu, v).
    C = 1.3
    for mu, v in [(-2.0, 0.1), (0.3, 2.0), (7.0, 50.0)]:
        plus = [float(a) for a in _hinge_tilted_moments(-mu, v, C, 1.0)]
        minus = [float(a) for a in _hinge_tilted_moments(mu, v, C, -1.0)]
        np.testing.assert_allclose(minus, [plus[0], -plus[1], plus[2]], rtol=1e-14)


@pytest.mark.parametrize(
    "mu,v,C", [(0.0, 0.05, 1.0), (0.0, 4.0, 10.0), (0.7, 0.3, 3.0), (-2.0, 1.0, 0.5), (30.0, 1e2, 1e-3), (-1.0, 1e-4, 1e2)]
)
def test_nu_tilted_moments_match_quadrature(mu, v, C):
    log_z, mean, var = (float(a) for a in _nu_tilted_moments(mu, v, C))
    ref = nu_reference(mu, v, C)
    np.testing.assert_allclose(log_z, ref[0], rtol=1e-9, atol=1e-9)
    assert abs(mean - ref[1]) <= 1e-8 * max(abs(ref[1]), np.sqrt(ref[2]))
    np.testing.assert_allclose(var, ref[2], rtol=1e-7)


# ---------------------------------------------------------------------------
# EP against exact integrals
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("k11,C", [(0.05, 0.1), (0.05, 10.0), (0.5, 1.0), (2.0, 10.0), (20.0, 1.0)])
def test_normalization_exact_for_one_site(k11, C):
    """One site: the EP cavity is the prior, so ln Z_EP is the exact 1-D integral."""
    result = ep_log_normalization(np.array([[k11]]), C)
    assert bool(result.converged)
    ref = nu_reference(0.0, k11, C)
    np.testing.assert_allclose(float(result.log_z), ref[0], rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(float(result.mean[0]), ref[1], atol=1e-9)
    np.testing.assert_allclose(float(result.variance[0]), ref[2], rtol=1e-7)


@pytest.mark.parametrize("y,C", [(1.0, 0.5), (-1.0, 5.0)])
def test_evidence_exact_for_one_site(y, C):
    k11 = 1.7
    result = ep_log_evidence(np.array([[k11]]), np.array([y]), C)
    ref = hinge_reference(0.0, k11, C, y)
    np.testing.assert_allclose(float(result.log_z), ref[0] - np.logaddexp(0.0, -2.0 * C), rtol=1e-9)
    np.testing.assert_allclose(float(result.variance[0]), ref[2], rtol=1e-7)


# measured EP - exact for the two-site cases below: -2.0e-5, -5.6e-2, -3.05e-2 nats
@pytest.mark.parametrize("amplitude,rho,C,tol", [(3.0, 0.3, 1.0, 2e-4), (0.5, 0.8, 2.0, 0.1), (10.0, 0.9, 3.0, 0.06)])
def test_normalization_two_sites_vs_dense_grid(amplitude, rho, C, tol):
    K = amplitude * np.array([[1.0, rho], [rho, 1.0]])
    result = ep_log_normalization(K, C)
    assert bool(result.converged)
    # dense trapezoid grid in whitened coordinates (integrand is smooth up to kinks at |theta| = 1)
    z = np.linspace(-9.0, 9.0, 3001)
    z1, z2 = z[:, None], z[None, :]  # the grid's axes, broadcast against each other
    L = np.linalg.cholesky(K)
    t1, t2 = L[0, 0] * z1, L[1, 0] * z1 + L[1, 1] * z2
    log_f = log_nu_numpy(t1, C) + log_nu_numpy(t2, C) - 0.5 * (z1**2 + z2**2)
    dz = z[1] - z[0]
    exact = logsumexp(log_f) + 2 * np.log(dz) - np.log(2 * np.pi)
    print(f"\nn=2 normalisation amp={amplitude} rho={rho} C={C}: EP {float(result.log_z):.6f} exact {exact:.6f}")
    assert abs(float(result.log_z) - exact) < tol


# (amplitude, C, tolerance in nats); measured EP - MC (MC standard error), 1e6 draws:
# +2.1e-5 (2.2e-4), -3.0e-3 (7.1e-4), +7.5e-3 (1.5e-3), +3.9e-3 (1.5e-2).
EVIDENCE_MC_CASES = [(0.3, 0.3, 0.005), (0.3, 1.0, 0.01), (3.0, 1.0, 0.02), (30.0, 5.0, 0.03)]


@pytest.mark.parametrize("amplitude,C,tol", EVIDENCE_MC_CASES)
def test_evidence_vs_prior_monte_carlo(amplitude, C, tol):
    n = 5
    K, X = rbf_gram(n, amplitude)
    y = np.sign(X[:, 0] + 0.3 * np.random.default_rng(1).normal(size=n))
    result = ep_log_evidence(K, y, C)
    assert bool(result.converged)
    theta = prior_draws(K, 1_000_000, seed=2)
    log_w = np.sum(log_label_likelihood_numpy(y, theta, C), axis=1)
    mc, se = log_mean_exp_with_se(log_w)
    diff = float(result.log_z) - mc
    print(f"\nevidence n={n} amp={amplitude} C={C}: EP {float(result.log_z):.5f} MC {mc:.5f} +- {se:.1e} diff {diff:+.2e}")
    assert abs(diff) < tol + 4 * se


# measured EP - MC: -1.5e-3, -5.1e-2, -2.1e-2 (se <= 5.3e-4); EP undershoots when the
# correlated latents are pushed to the same side of 0 (bimodal posterior, docs/ep.md).
@pytest.mark.parametrize("amplitude,C,tol", [(3.0, 0.3, 0.005), (3.0, 1.0, 0.1), (30.0, 0.3, 0.05)])
def test_normalization_vs_prior_monte_carlo(amplitude, C, tol):
    K, _ = rbf_gram(5, amplitude)
    result = ep_log_normalization(K, C)
    assert bool(result.converged)
    theta = prior_draws(K, 1_000_000, seed=3)
    mc, se = log_mean_exp_with_se(np.sum(log_nu_numpy(theta, C), axis=1))
    diff = float(result.log_z) - mc
    print(f"\nnormalisation n=5 amp={amplitude} C={C}: EP {float(result.log_z):.5f} MC {mc:.5f} +- {se:.1e} diff {diff:+.2e}")
    assert abs(diff) < tol + 4 * se


# ---------------------------------------------------------------------------
# EP posterior against elliptical slice sampling
# ---------------------------------------------------------------------------


def elliptical_slice_chain(K, log_lik, n_samples, seed):
    """Murray, Adams & MacKay (2010) elliptical slice sampling of N(0, K) exp(log_lik) (one compiled program)."""
    return np.asarray(jax.jit(partial(_elliptical_slice_samples, log_lik, n_samples))(K, seed))[n_samples // 10 :]


def _elliptical_slice_samples(log_lik, n_samples, K, seed):
    L = jnp.linalg.cholesky(K + 1e-10 * jnp.eye(len(K)))

    def step(theta, key):
        k_nu, k_u, k_angle = jax.random.split(key, 3)
        nu = L @ jax.random.normal(k_nu, theta.shape)
        log_y = log_lik(theta) + jnp.log(jax.random.uniform(k_u))
        angle = jax.random.uniform(k_angle, minval=0.0, maxval=2 * jnp.pi)

        def shrink(state):
            angle, lo, hi, key, _ = state
            key, sub = jax.random.split(key)
            lo, hi = jnp.where(angle < 0, angle, lo), jnp.where(angle < 0, hi, angle)
            return jax.random.uniform(sub, minval=lo, maxval=hi), lo, hi, key, False

        def proposal(angle):
            return theta * jnp.cos(angle) + nu * jnp.sin(angle)

        def rejected(state):
            return state[4] | (log_lik(proposal(state[0])) <= log_y)

        state = (angle, angle - 2 * jnp.pi, angle, k_angle, True)
        angle = jax.lax.while_loop(rejected, shrink, state)[0]
        new = proposal(angle)
        return new, new

    keys = jax.random.split(jax.random.PRNGKey(seed), n_samples)
    return jax.lax.scan(step, jnp.zeros(len(K)), keys)[1]


def _posterior_check(n, n_samples, mean_tol, var_rtol):
    K, X = rbf_gram(n, 2.0, seed=4)
    y = np.sign(X[:, 0] + 0.5 * np.random.default_rng(5).normal(size=n))
    C = 1.5
    result = ep_log_evidence(K, y, C)
    with float64_scope():  # the reference sampler is the test's own JAX code
        samples = elliptical_slice_chain(K, lambda t: -C * jnp.sum(jnp.maximum(0.0, 1.0 - y * t)), n_samples, seed=6)
    mean_err = np.max(np.abs(np.asarray(result.mean) - samples.mean(0)) / np.sqrt(samples.var(0)))
    var_err = np.max(np.abs(np.asarray(result.variance) / samples.var(0) - 1.0))
    print(f"\nEP vs ESS n={n}: max |mean diff|/sd {mean_err:.3f}, max |var ratio - 1| {var_err:.3f}")
    assert mean_err < mean_tol and var_err < var_rtol


def test_posterior_moments_vs_elliptical_slice_fast():
    # measured: 0.017 (mean, in posterior sd) / 0.025 (variance ratio) with 40k samples
    _posterior_check(n=5, n_samples=40_000, mean_tol=0.08, var_rtol=0.1)


@pytest.mark.slow
def test_posterior_moments_vs_elliptical_slice_long():
    # measured: 0.007 (mean) / 0.080-0.088 (variance ratio, EP too small at 2 of 10 points; sampler seeds 6-8
    # agree within 0.01, so this is EP's own error, not the sampler's): the first tolerance, 0.06, failed; 0.12
    # still fails a posterior that is wrong by more than EP's own error
    _posterior_check(n=10, n_samples=1_000_000, mean_tol=0.05, var_rtol=0.12)


# ---------------------------------------------------------------------------
# prediction, batching, determinism, guards
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("family", ["evidence", "normalization"])
def test_predict_matches_dense_gaussian_algebra(family):
    n = 5
    X = np.random.default_rng(7).normal(size=(n + 3, 1))
    kern = RBF(length_scale=0.8, amplitude=0.7, offset=0.2)
    K_all = np.asarray(kern(X))
    K, K_cross, K_diag = K_all[:n, :n], K_all[n:, :n], np.diag(K_all)[n:]
    if family == "evidence":
        result = ep_log_evidence(K, np.sign(X[:n, 0]), 2.0)
    else:
        result = ep_log_normalization(K, 2.0)
        assert np.any(np.asarray(result.site_precision) < 0)  # the negative-site path is exercised
    tau, shift = np.asarray(result.site_precision), np.asarray(result.site_shift)
    sigma = np.linalg.inv(np.linalg.inv(K) + np.diag(tau))
    np.testing.assert_allclose(result.mean, sigma @ shift, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(result.variance, np.diag(sigma), rtol=1e-8)
    # joint Gaussian conditioning: theta* | theta has mean K* K^-1 theta, variance k** - K* K^-1 K*^T
    proj = K_cross @ np.linalg.inv(K)
    mean_ref = proj @ (sigma @ shift)
    var_ref = K_diag - np.sum(proj * K_cross, 1) + np.sum((proj @ sigma) * proj, 1)
    mean, var = ep_predict(result, K_cross, K_diag)
    np.testing.assert_allclose(mean, mean_ref, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(var, var_ref, rtol=1e-7)
    mean_train, var_train = ep_predict(result, K, np.diag(K))
    np.testing.assert_allclose(mean_train, result.mean, atol=1e-9)
    np.testing.assert_allclose(var_train, result.variance, rtol=1e-8)


def test_vmap_over_gram_and_C_batches_and_determinism():
    K, X = rbf_gram(5, 2.0, seed=8)
    y = np.sign(X[:, 0])
    Ks = np.stack([K, K, 3.0 * K])
    Cs = np.array([0.1, 10.0, 1.0])
    run = jax.jit(jax.vmap(lambda k, c: ep_log_evidence(k, y, c)))  # one compiled program for the batch
    with float64_scope():  # the transformation converts its numpy arguments on entry, before ep_log_evidence runs
        batched = jax.tree_util.tree_map(np.asarray, run(Ks, Cs))
    assert np.all(batched.converged)
    for i in range(3):
        single = ep_log_evidence(Ks[i], y, Cs[i])
        np.testing.assert_allclose(batched.log_z[i], single.log_z, rtol=1e-12)
        assert int(batched.n_iter[i]) == int(single.n_iter)
    with float64_scope():
        again = run(Ks, Cs)
    np.testing.assert_array_equal(batched.log_z, again.log_z)
    np.testing.assert_array_equal(batched.site_precision, again.site_precision)


def test_problem_sizes_cover_n_with_bounded_padding():
    from bayesvm._linalg import SMALLEST_PROBLEM_SIZE, problem_size

    sizes = [problem_size(n) for n in range(1, 5000)]
    assert all(size >= n for n, size in enumerate(sizes, start=1))
    assert all(a <= b for a, b in zip(sizes, sizes[1:]))
    assert all(size <= max(SMALLEST_PROBLEM_SIZE, 1.125 * n) for n, size in enumerate(sizes, start=1))
    assert len(set(sizes)) <= 8 * 7  # eight per doubling from 64 to 8192


def test_padding_to_the_compiled_size_changes_nothing():
    # The entry points pad n to a shared compiled size (here 5 -> 64, the size every problem of up to 64 points
    # shares) with flat sites under a unit-variance prior block. Reference: EP's own loop on the unpadded problem.
    from bayesvm._linalg import problem_size
    from bayesvm.inference.ep_loop import label_sites, nu_sites, run_ep

    assert problem_size(5) == 64
    K, X = rbf_gram(5, 3.0, seed=21)
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    with float64_scope():
        for padded, (moments, negative) in [
            (ep_log_evidence(K, y, 2.0), (label_sites(y, 2.0), False)),
            (ep_log_normalization(K, 2.0), (nu_sites(2.0), True)),
        ]:
            reference = jax.jit(lambda K: run_ep(K, moments, negative, 0.5, 200, 1e-8, 0.0))(K)
            assert int(padded.n_iter) == int(reference.n_iter)
            assert bool(padded.converged) == bool(reference.converged)
            assert float(padded.log_z) == pytest.approx(float(reference.log_z), rel=1e-10, abs=1e-10)
            for name in ("mean", "variance", "site_precision", "site_shift"):
                np.testing.assert_allclose(getattr(padded, name), getattr(reference, name), rtol=1e-9, atol=1e-12)
            for got, want in zip(padded.predictor, reference.predictor):
                np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_label_site_precisions_are_nonnegative_and_iterations_bounded():
    K, X = rbf_gram(5, 5.0, seed=9)
    result = ep_log_evidence(K, np.sign(X[:, 0]), 1.0, max_iter=3)
    assert int(result.n_iter) == 3 and not bool(result.converged)
    assert np.all(np.asarray(result.site_precision) >= 0)


def test_nan_input_reports_not_converged():
    K = np.eye(5)
    K[0, 1] = K[1, 0] = np.nan
    result = ep_log_evidence(K, np.ones(5), 1.0)
    assert not bool(result.converged)
    assert not bool(ep_log_normalization(K, 1.0).converged)



# ---------------------------------------------------------------------------
# batches over hyperparameters (the selection grid)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("sites", ["labels", "nu"])
def test_batch_matches_strict_single_runs(sites):
    X = np.random.default_rng(11).normal(size=(30, 2))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] ** 2 - 0.5 + 0.3 * np.random.default_rng(12).normal(size=30) > 0, 1.0, -1.0)
    base = np.asarray(RBF(length_scale=1.2, amplitude=1.0, offset=0.5)(X))
    scales = np.array([30.0, 3.0, 1.0, 100.0, 0.3])
    Cs = np.array([0.1, 1.0, 3.0, 1.0, 10.0])
    # in batches of three cells (the selection's batch size), the last filled up by repeating its last cell
    batches = [np.minimum(np.arange(start, start + 3), len(scales) - 1) for start in (0, 3)]
    runs = [ep_log_z_batch(base, scales[i], Cs[i], y if sites == "labels" else None, sites=sites) for i in batches]
    batch = jax.tree_util.tree_map(lambda *runs: np.concatenate([np.asarray(r) for r in runs])[: len(scales)], *runs)
    assert np.all(batch.converged)
    for t, (scale, C) in enumerate(zip(scales, Cs)):
        K = scale * base
        # reference: label sites converged on the site parameters; nu sites, whose parameters keep creeping
        # long after ln Z has settled (docs/ep.md), with ln Z settled to 1e-7 nats
        if sites == "labels":
            strict = ep_log_evidence(K, y, C)
        else:
            strict = ep_log_normalization(K, C, max_iter=1000, log_z_tol=1e-7)
        assert bool(strict.converged)
        # the batch stops once ln Z changes by < 1e-3 nats an iteration; the slow, linear convergence of
        # the nu sites leaves it up to 0.022 nats short here (measured)
        assert float(batch.log_z[t]) == pytest.approx(float(strict.log_z), abs=5e-2)


def test_batch_rejects_unknown_site_family():
    with pytest.raises(ValueError, match="sites must be one of"):
        ep_log_z_batch(np.eye(2), np.ones(1), np.ones(1), np.ones(2), sites="logit")


def _equicorrelated_log_normalization(n: int, amplitude: float, independent: float, C: float) -> float:
    """ln E[prod_i nu(theta_i)] for theta_i = b + e_i, b ~ N(0, (1 - f) k0), e_i ~ N(0, f k0) iid (f = independent).

    Exact up to quadrature: = ln E_b[g(b)^n], g(b) = E_e[nu(b + e)] (Gauss-Hermite in e, a fine grid in b
    that resolves both the prior's width and the margin region |b| <~ 1/C).
    """
    sd_b, sd_e = np.sqrt((1.0 - independent) * amplitude), np.sqrt(independent * amplitude)
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    b = np.union1d(np.linspace(-10 * sd_b, 10 * sd_b, 20_001), np.linspace(-3 / C - 10 * sd_e, 3 / C + 10 * sd_e, 20_001))
    log_g = logsumexp(log_nu_numpy(b[:, None] + sd_e * nodes, C) + np.log(weights / weights.sum()), axis=1)
    log_prior = stats.norm.logpdf(b, scale=sd_b) + np.log(np.gradient(b))
    return float(logsumexp(log_prior + n * log_g))


def _equicorrelated_ep(n: int, amplitude: float, independent: float, C: float):
    """ln Z by EP (the selection's batched nu sites) on the equicorrelated prior, in a batch of three copies of the
    cell (the batch size of the module's other batches: they share one compiled program)."""
    base = (1.0 - independent) * np.ones((n, n)) + independent * np.eye(n)
    return jax.tree_util.tree_map(np.asarray, ep_log_z_batch(base, np.full(3, amplitude), np.full(3, C), None, sites="nu"))


def test_nu_ep_convergence_test_is_scale_free():
    # With a huge amplitude the site precisions are O(1 / k0): a residual in raw units called the first,
    # factorised iterate converged (one iteration, ln Z = -17.4 here against the exact -5.06).
    n, amplitude, independent, C = 30, 1e6, 1e-6, 0.01
    batch = _equicorrelated_ep(n, amplitude, independent, C)
    assert int(batch.n_iter[0]) > 5 and bool(batch.converged[0])
    assert float(batch.log_z[0]) == pytest.approx(_equicorrelated_log_normalization(n, amplitude, independent, C), abs=0.15)


@pytest.mark.xfail(strict=True, reason="known EP failure (docs/selection-benchmark.md): with a nearly constant, "
                   "huge-amplitude prior EP settles on the factorised fixed point and misses the event that every "
                   "theta_i lies in the margin together; the selection checks EP's ln N(D) against annealing")
def test_nu_ep_misses_joint_margin_mass_of_a_nearly_constant_prior():
    n, amplitude, independent, C = 30, 1e6, 1e-6, 0.1
    exact = _equicorrelated_log_normalization(n, amplitude, independent, C)  # -6.86; EP: -17.7
    assert float(_equicorrelated_ep(n, amplitude, independent, C).log_z[0]) == pytest.approx(exact, abs=1.0)


# ---------------------------------------------------------------- slower loops where EP's default does not converge


def _breast_cancer_fit(n=60):
    from bayesvm.datasets import load_breast_cancer
    from bayesvm.solver.dual import fit_map

    X, y = load_breast_cancer(return_X_y=True)
    return fit_map(X[:n], y[:n], C=1.0, kernel=RBF(length_scale=5.0, amplitude=10.0, offset=10.0))


def test_an_unconverged_ep_loop_is_followed_by_the_next_one(monkeypatch):
    """The evidence's and the posterior's EP (one cell: ``converged_ep``; a batch of cells: the grid's loop): one
    sweep cannot converge, so the second loop must run; the result is then the converged loop's own, as if it had
    run alone, with the sweeps of both counted."""
    import bayesvm.evidence.approximations as approximations
    import bayesvm.inference.ep as ep_module
    import bayesvm.posterior as posterior
    from bayesvm.evidence.approximations import naive_estimator
    from bayesvm.evidence.log_evidence import naive_evidence, point_cells

    fit = _breast_cancer_fit()
    alone = naive_evidence(fit, "ep")
    cells = point_cells(fit.X, fit.kernel, [fit.C, 2.0 * fit.C, 4.0 * fit.C], y=fit.y)  # one batch of three cells
    batch_alone = naive_estimator("ep")(cells)
    monkeypatch.setattr(ep_module, "EP_LOOPS", ((0.5, 1), (0.5, 200)))
    monkeypatch.setattr(approximations, "EP_LOOPS", ((0.5, 1), (0.5, 200)))
    followed = naive_evidence(fit, "ep")
    assert followed.trusted and followed.value == pytest.approx(alone.value, abs=1e-9)
    assert followed.diagnostics["n_iter"] == alone.diagnostics["n_iter"] + 1
    batch_followed = naive_estimator("ep")(cells)
    assert np.all(batch_followed.trusted)
    np.testing.assert_allclose(batch_followed.value, batch_alone.value, atol=1e-9)
    np.testing.assert_array_equal(batch_followed.diagnostics["n_iter"], batch_alone.diagnostics["n_iter"] + 1)
    recovered = posterior.Posterior.from_fit(fit, "ep").ep
    assert bool(recovered.converged)
    np.testing.assert_allclose(recovered.mean, alone.diagnostics["ep"].mean, atol=1e-10)
    monkeypatch.setattr(ep_module, "EP_LOOPS", ((0.5, 1),))
    monkeypatch.setattr(approximations, "EP_LOOPS", ((0.5, 1),))
    assert not naive_evidence(fit, "ep").trusted
    assert not np.any(naive_estimator("ep")(cells).trusted)
    with pytest.warns(ConvergenceWarning, match="EP for the posterior did not converge"):
        posterior.Posterior.from_fit(fit, "ep")
