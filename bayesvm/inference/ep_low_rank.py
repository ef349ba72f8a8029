"""Expectation propagation over a low-rank prior, in O(n r^2) time and O(n r) memory.

The prior of :mod:`bayesvm.low_rank` is theta ~ N(0, V V^T + diag(d)), V of
shape (n, r), r = m + 1, read as theta = V w + eps with w ~ N(0, I_r) and
independent eps_i ~ N(0, d_i) (FITC: Snelson & Ghahramani 2006; d = 0 is
DTC / subset of regressors). EP with such a prior (Naish-Guzman & Holden
2008, "The generalized FITC approximation") is the dense EP of
:mod:`bayesvm.inference.ep` with one change: the Gaussian posterior of the prior times
the sites exp(-tau_i theta_i^2 / 2 + h_i theta_i) is computed in weight space.

Integrating eps_i out of site i (it appears in no other factor) leaves a
Gaussian factor in u_i = v_i^T w,

    INT N(eps; 0, d) exp(-tau (u + eps)^2 / 2 + h (u + eps)) deps
      = (1 + d tau)^-1/2 exp(d h^2 / (2 (1 + d tau))) exp(-tau~ u^2 / 2 + h~ u),
    tau~ = tau / (1 + d tau),  h~ = h / (1 + d tau),

which needs 1 + d_i tau_i > 0 (the posterior of eps_i given w is then
proper; since K >= diag(d), K^-1 + S > 0 implies it, so it is necessary
for a proper posterior). The weight posterior is N(m_w, A^-1),

    A = I_r + V^T diag(tau~) V = L_A L_A^T,  m_w = A^-1 V^T h~,

proper exactly when A is positive definite. Given w, eps_i has precision
1/d_i + tau_i and mean d_i (h_i - tau_i u_i) / (1 + d_i tau_i), so the marginals
of theta_i = u_i + eps_i are

    mean_i = (v_i^T m_w + d_i h_i) / (1 + d_i tau_i),
    var_i  = d_i / (1 + d_i tau_i) + v_i^T A^-1 v_i / (1 + d_i tau_i)^2,

and by the matrix determinant lemma

    ln det(I + K S) = sum_i ln(1 + d_i tau_i) + ln det A.

Each is O(n r^2 + r^3); nothing n x n is formed. Where the posterior is
improper the Cholesky factor or a logarithm is NaN, which is what
:func:`bayesvm.inference.ep_loop.ep_loop` tests for: its damped parallel updates, step
control and convergence tests are used unchanged (labels' site precisions
are never negative, so 1 + d tau >= 1 there).

Gradient (:func:`low_rank_naive_evidence_and_gradient`): at the EP fixed
point ln Z_EP is stationary in the sites (Seeger 2005; Rasmussen & Williams
2006, GPML section 5.5.2), so with sites and cavities held fixed

    d ln Z_EP / dx = d/dx [-1/2 ln det(I + K S) + 1/2 h^T mu](V(x), d(x))
                     + sum_i d ln Z_i / dC  dC/dx,

the first term by reverse mode through the weight-space formulas above
(O(n r^2)) and the prior's construction, the second as in
:mod:`bayesvm.inference.ep_gradient`. With Z = X and FITC, V V^T + diag(d) = K up to
the inducing jitter and both the value and the gradient are those of the
dense path.

Predictions (:func:`low_rank_predict`, GPML section 3.6 with the FITC test
conditional): a new input has its own v* and an independent eps* ~ N(0, d*)
that no site touches, so w carries everything the data say about it:

    mean* = v*^T m_w,  var* = v*^T A^-1 v* + d*,  d* = k** - q**,

O(r^2) per point. No site-integration correction enters, because the
training eps_i were integrated out exactly and the posterior of w is exact
for the low-rank model. (At a training input itself the fitted marginal
above is not this: there eps_i is the training point's own noise, informed
by its site, giving the 1 + d_i tau_i factors.) d* = k** - q** is the exact
test conditional for both kinds: FITC's, and DTC's as Quinonero-Candela &
Rasmussen (2005) define it (subset of regressors would take d* = 0 and
predict vanishing variance far from Z).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_solve, solve_triangular

from .._precision import as_float64, as_int64, float64
from .ep_loop import ep_loop, flat_at_padding, label_sites, nu_sites, shifted_sites
from .ep_posterior import GaussianPosterior
from .ep_gradient import EPSites, NaiveEvidenceGradient, batched_sites, first_problem, tilted_gradient
from ..compilation import jit
from ..hyperparameters import kernel_at, penalty_at
from ..kernels import Kernel
from ..low_rank import LowRankPrior, low_rank_prior, low_rank_prior_at

Array = jax.Array

__all__ = [
    "LowRankEPPredictor",
    "low_rank_posterior",
    "prior_variances",
    "low_rank_naive_evidence_and_gradient",
    "low_rank_naive_evidences_and_gradient",
    "low_rank_predictor",
    "low_rank_predict",
    "WeightGaussian",
    "nu_weight_gaussian",
]


class _WeightPosterior(NamedTuple):
    """N(m_w, A^-1) of the weights, with 1 + d tau and the site-integrated shifts h~."""

    one_plus: Array  # 1 + d tau, (n,)
    chol: Array  # L_A, A = I + V^T diag(tau~) V, (r, r)
    weight_mean: Array  # m_w, (r,)
    shift_w: Array  # h~ = h / (1 + d tau), (n,)


def _weight_posterior(prior: LowRankPrior, tau: Array, shift: Array) -> _WeightPosterior:
    V, d = prior
    one_plus = 1.0 + d * tau
    tau_w, shift_w = tau / one_plus, shift / one_plus
    A = jnp.eye(V.shape[1], dtype=V.dtype) + V.T @ (tau_w[:, None] * V)
    chol = jnp.linalg.cholesky(A)
    return _WeightPosterior(one_plus, chol, cho_solve((chol, True), V.T @ shift_w), shift_w)


def _log_det(w: _WeightPosterior) -> Array:
    """ln det(I + K S) = sum ln(1 + d tau) + ln det A (NaN where improper)."""
    return jnp.sum(jnp.log(w.one_plus)) + 2.0 * jnp.sum(jnp.log(jnp.diagonal(w.chol)))


def prior_variances(prior: LowRankPrior) -> Array:
    """diag(V V^T + diag(d))."""
    return jnp.sum(prior.V * prior.V, axis=1) + prior.d


@float64
def low_rank_posterior(prior: LowRankPrior, tau: Array, shift: Array) -> GaussianPosterior:
    """Posterior of N(0, V V^T + diag(d)) times sites exp(-tau theta^2 / 2 + shift theta) (module docstring).

    tau may be negative wherever the posterior stays proper (1 + d tau > 0
    and A positive definite); elsewhere log_det (and possibly every output)
    is NaN or infinite. Returns the marginal means and variances and
    ln det(I + K S), in O(n r^2) time and O(n r) memory.
    """
    w = _weight_posterior(prior, tau, shift)
    V, d = prior
    W = solve_triangular(w.chol, V.T, lower=True)  # |W[:, i]|^2 = v_i^T A^-1 v_i
    mean = (V @ w.weight_mean + d * shift) / w.one_plus
    variance = d / w.one_plus + jnp.sum(W * W, axis=0) / w.one_plus**2
    return GaussianPosterior(mean, variance, _log_det(w))


def _gaussian_log_z(prior: LowRankPrior, tau: Array, shift: Array) -> Array:
    """ln INT N(theta; 0, V V^T + diag(d)) exp(-theta^T S theta / 2 + h^T theta) = -1/2 ln det(I + K S) + 1/2 h^T mu.

    h^T mu = h~^T V m_w + sum_i d_i h_i^2 / (1 + d_i tau_i).
    """
    w = _weight_posterior(prior, tau, shift)
    shift_mean = jnp.dot(w.shift_w, prior.V @ w.weight_mean) + jnp.sum(prior.d * shift * w.shift_w)
    return 0.5 * shift_mean - 0.5 * _log_det(w)


@float64
def low_rank_naive_evidence_and_gradient(x: Array, X: Array, Z: Array, y: Array, template: Kernel, sites: EPSites,
                                         weights=None, **options) -> NaiveEvidenceGradient:
    """EP's ln Q(D) over the low-rank prior through the inducing inputs Z, and its exact gradient in x.

    As :func:`bayesvm.inference.ep_gradient.ep_naive_evidence_and_gradient` with the
    prior :func:`bayesvm.low_rank.low_rank_prior_at` (x, X, Z, template, kind)
    in place of K(x): x the search coordinates, X (n, p) and y (n,) in
    {-1, +1} the training data, ``weights`` (n,) the rows' weights (None: all 1), Z (m, p) the inducing inputs
    (held fixed),
    sites the warm start (:func:`bayesvm.inference.ep_gradient.zero_sites` for a cold one); ``options``:
    ``kind`` ("fitc" or "dtc") and EP's loop, as in :func:`low_rank_naive_evidences_and_gradient`. O(n r^2 + r^3)
    per sweep and O(n r) memory, r = m + 1. The gradient is exact at the
    fixed point (module docstring). ``n_factorizations`` counts r x r
    Cholesky factorisations: K_mm, the start, one per sweep, one for the
    gradient (a warm start whose posterior is improper adds one). The one-problem case of
    :func:`low_rank_naive_evidences_and_gradient`.
    """
    batch = low_rank_naive_evidences_and_gradient(x, X, Z, np.asarray(y)[None, :], template, batched_sites([sites]),
                                                  weights=weights, **options)
    return first_problem(batch)


@float64
def low_rank_naive_evidences_and_gradient(
    x: Array,
    X: Array,
    Z: Array,
    Y: Array,
    template: Kernel,
    sites: EPSites,
    *,
    weights=None,
    opposite=None,
    kind: str = "fitc",
    damping: float = 0.5,
    max_iter: int = 200,
    tol: float = 1e-6,
    log_z_tol: float = 1e-7,
) -> NaiveEvidenceGradient:
    """:func:`low_rank_naive_evidence_and_gradient` for k binary problems on the same inputs (Y (k, n), sites as
    (k, n) arrays; ``weights`` (n,) or (k, n) and ``opposite`` None or (k, n), as
    :func:`bayesvm.inference.ep_gradient.ep_naive_evidences_and_gradient` takes them): the low-rank prior is built once and its vector-Jacobian product applied once, to the summed
    cotangent; the problems run one after the other. Per-problem fields and the gradient of the summed ln Q(D),
    as :func:`bayesvm.inference.ep_gradient.ep_naive_evidences_and_gradient`.

    One compiled program per input shapes and ``kind``: the inputs enter as float64 and EP's loop options as
    arguments of fixed types, so that callers passing other options (the search, the posterior) or other dtypes
    share it."""
    weights = np.broadcast_to(1.0 if weights is None else weights, np.shape(Y))
    x, X, Z, Y, weights, precision, shift = (as_float64(a) for a in (x, X, Z, Y, weights, *sites))
    opposite = None if opposite is None else as_float64(opposite)
    loop = (as_float64(damping), as_int64(max_iter), as_float64(tol), as_float64(log_z_tol))
    return _low_rank_naive_evidences_and_gradient(x, X, Z, Y, weights, opposite, template,
                                                  EPSites(precision, shift), *loop, kind=kind)


@jit(static_argnames=("kind",))
def _low_rank_naive_evidences_and_gradient(x: Array, X: Array, Z: Array, Y: Array, weights: Array,
                                           opposite: Array | None, template: Kernel, sites: EPSites,
                                           damping: Array, max_iter: Array, tol: Array, log_z_tol: Array, *,
                                           kind: str) -> NaiveEvidenceGradient:
    """The compiled body of :func:`low_rank_naive_evidences_and_gradient` (every argument but ``kind`` traced)."""
    prior, prior_vjp = jax.vjp(lambda x: low_rank_prior_at(x, X, Z, template, kind), x)
    C = penalty_at(x)
    posterior = partial(low_rank_posterior, prior)

    def solve(labels, start):
        y, w, o = labels
        state = ep_loop(posterior, prior_variances(prior), label_sites(y, C, w, o), False, damping, max_iter,
                        tol, log_z_tol, start)
        tau, shift, post = state.site_precision, state.site_shift, state.posterior
        return state, jax.grad(_gaussian_log_z)(prior, tau, shift), tilted_gradient(post, tau, shift, y, x, w, o)

    return _summed_over_problems(prior, prior_vjp, x, (Y, weights, opposite), sites, solve, extra_factorizations=3)


def _summed_over_problems(prior, prior_vjp, x: Array, labels, sites: EPSites, solve,
                         extra_factorizations: int) -> NaiveEvidenceGradient:
    """Run EP on each of k problems one after the other (a scan) and apply the prior's vector-Jacobian product once.

    prior: the low-rank prior's parameters at x, ``prior_vjp`` the VJP of x -> prior; ``labels``: the problems'
    (Y, weights, opposite), (k, n) arrays (opposite may be None);
    ``solve((y, w, o), (precision, shift))`` -> (EP's final state, d ln Z_Gauss / d prior, the tilted part of the
    gradient) for one problem's labels from its warm sites. Returns the per-problem values, sites, convergence and
    sweeps, with ``extra_factorizations`` per problem beyond its sweeps, and the gradient of the summed ln Q(D).
    """

    def problem(summed, inputs):
        labels, precision, shift = inputs
        state, prior_cotangent, tilted = solve(labels, (precision, shift))
        summed = (jax.tree_util.tree_map(jnp.add, summed[0], prior_cotangent), summed[1] + tilted)
        return summed, (state.log_z, EPSites(state.site_precision, state.site_shift), state.converged, state.n_iter)

    zero = (jax.tree_util.tree_map(jnp.zeros_like, prior), jnp.zeros_like(x))
    (cotangent, tilted), (log_z, new_sites, converged, n_iter) = jax.lax.scan(
        problem, zero, (labels, sites.precision, sites.shift))
    (grad_prior,) = prior_vjp(cotangent)
    return NaiveEvidenceGradient(value=log_z, gradient=grad_prior + tilted, sites=new_sites, converged=converged,
                                 n_iter=n_iter, n_factorizations=n_iter + extra_factorizations)


class LowRankEPPredictor(NamedTuple):
    """What predictions at new inputs need: the kernel, the inducing inputs and the weight posterior N(m_w, A^-1)."""

    kernel: Kernel
    inducing: Array
    weight_mean: Array  # m_w, (r,)
    weight_chol: Array  # L_A, A = L_A L_A^T, (r, r)


@float64
@jit(static_argnames=("kind",))
def low_rank_predictor(
    x: Array, X: Array, Z: Array, template: Kernel, sites: EPSites, *, kind: str = "fitc"
) -> LowRankEPPredictor:
    """The weight posterior of the low-rank prior at x with the given (converged) sites; O(n r^2)."""
    X, Z = jnp.asarray(X, dtype=jnp.float64), jnp.asarray(Z, dtype=jnp.float64)
    x = jnp.asarray(x, dtype=jnp.float64)
    w = _weight_posterior(low_rank_prior_at(x, X, Z, template, kind), sites.precision, sites.shift)
    return LowRankEPPredictor(kernel_at(template, x), Z, w.weight_mean, w.chol)


@float64
@jit
def low_rank_predict(predictor: LowRankEPPredictor, X_new: Array) -> tuple[Array, Array]:
    """Predictive mean v*^T m_w and variance v*^T A^-1 v* + d* of theta at the rows of X_new (module docstring).

    v* and d* = k** - q** come from the FITC construction at X_new (the exact
    test conditional, for either kind of training prior); O(m^3) once, then
    O(r^2) per point.
    """
    test = low_rank_prior(predictor.kernel, jnp.asarray(X_new, dtype=jnp.float64), predictor.inducing, "fitc")
    W = solve_triangular(predictor.weight_chol, test.V.T, lower=True)
    return test.V @ predictor.weight_mean, jnp.sum(W * W, axis=0) + test.d


class WeightGaussian(NamedTuple):
    """A Gaussian N(mean, scale scale^T) over the weights w, with ln |det scale| and whether EP converged."""

    mean: Array
    scale: Array
    log_det_scale: Array
    converged: Array


@float64
@jit(static_argnames=("max_iter",), rarely_run=True)
def nu_weight_gaussian(prior: LowRankPrior, C: Array | float, *, mask: Array | None = None,
                       shift: Array | None = None, max_iter: int = 200) -> WeightGaussian:
    """EP's Gaussian approximation of the weights' distribution proportional to N(w; 0, I) prod_i nubar_i(v_i^T w).

    EP with the nu sites (negative precisions allowed) over the low-rank
    prior; the weight posterior N(m_w, A^-1) with scale L_A^-T (A = L_A L_A^T).
    ``mask`` (bool per row, optional) makes the sites of the rows it leaves out flat (padding); ``shift``
    (optional, per row) makes the sites nubar_i(v_i^T w + shift_i).
    Where EP does not converge, or its posterior is improper, the prior
    N(0, I) itself (``converged`` False). It is the reference distribution the
    tempered-SMC ln N(D) of :mod:`bayesvm.normalization.low_rank` and
    :mod:`bayesvm.normalization.ep_started` starts from.
    """
    sites = nu_sites(C) if shift is None else shifted_sites(nu_sites(C), shift)
    sites = sites if mask is None else flat_at_padding(sites, mask)
    state = ep_loop(partial(low_rank_posterior, prior), prior_variances(prior), sites, True, 0.5, max_iter,
                     1e-4, 1e-3)
    w = _weight_posterior(prior, state.site_precision, state.site_shift)
    eye = jnp.eye(prior.V.shape[1], dtype=prior.V.dtype)
    scale = solve_triangular(w.chol, eye, lower=True).T
    usable = state.converged & jnp.all(jnp.isfinite(scale)) & jnp.all(jnp.isfinite(w.weight_mean))
    return WeightGaussian(
        mean=jnp.where(usable, w.weight_mean, 0.0),
        scale=jnp.where(usable, scale, eye),
        log_det_scale=jnp.where(usable, -jnp.sum(jnp.log(jnp.diagonal(w.chol))), 0.0),
        converged=usable,
    )
