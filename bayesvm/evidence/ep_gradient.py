"""EP's naive evidence ln Q(D) with its exact gradient in the search coordinates.

At a fixed point of expectation propagation the EP estimate ln Z_EP is
stationary in the site parameters (Seeger 2005, "Expectation propagation for
exponential families"; Rasmussen & Williams 2006, GPML section 5.5.2), so its
gradient needs no differentiation through the iterations: hold the sites
(precisions tau, shifts h) and the cavities fixed and differentiate what is
left. Two parts depend on the hyperparameters:

* the Gaussian part ln INT N(theta; 0, K) exp(-1/2 theta^T S theta + h^T theta) dtheta,
  S = diag(tau), through K:
      d/dK = 1/2 (b b^T - R),  b = h - S mu = K^-1 mu,  R = S^1/2 B^-1 S^1/2,
      B = I + S^1/2 K S^1/2  (GPML eq. 5.27 in natural parameters);
  the derivative along each coordinate is the vector-Jacobian product of
  x -> K(x) with that matrix, so one product serves every coordinate (four,
  or 3 + d with per-feature length scales);
* the tilted normalisers ln Z_i(m_i, v_i; C) of the sites at their fixed
  cavities (m_i, v_i), through C (the hinge likelihood's constant
  kappa(C) included): sum_i d ln Z_i / dC times dC/dx.

The EP run itself starts from the sites of the previous point of the search
(a warm start), which is what makes an evaluation cost a few factorisations
rather than a cold run's dozens. k binary problems on the same inputs (one
per class, one-vs-rest) share one K(x) and one vector-Jacobian product.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_solve

from .. import _linalg
from .._precision import float64
from .ep import cavity, ep_loop_gram, flat_at_padding, label_sites
from .ep_posterior import GaussianPosterior, positive_part
from .tilted import label_tilted_moments
from ..compilation import jit
from ..hyperparameters import kernel_at, penalty_at
from ..kernels import Kernel

Array = jax.Array

__all__ = ["EPSites", "NaiveEvidenceGradient", "batched_sites", "first_problem", "summed_over_problems", "ep_naive_evidence_and_gradient",
           "ep_naive_evidences_and_gradient", "zero_sites"]


class EPSites(NamedTuple):
    """Gaussian EP sites exp(-precision theta^2 / 2 + shift theta), one per training point."""

    precision: Array
    shift: Array


def zero_sites(n: int) -> EPSites:
    """Sites that leave the prior unchanged (a cold start)."""
    zeros = jnp.zeros(n, dtype=jnp.float64)
    return EPSites(zeros, zeros)


class NaiveEvidenceGradient(NamedTuple):
    """ln Q(D) by EP at one point, its gradient in the search coordinates, and the work it took.

    For k problems at once (:func:`ep_naive_evidences_and_gradient`) every field but the gradient (that of the
    sum of their ln Q(D)) has a leading axis of k.
    sites: the converged sites (the next evaluation's warm start).
    n_iter: EP sweeps (parallel updates of every site); each factorises B once.
    n_factorizations: Cholesky factorisations of n x n matrices, sweeps included.
    """

    value: Array
    gradient: Array
    sites: EPSites
    converged: Array
    n_iter: Array
    n_factorizations: Array


def tilted_gradient(post: GaussianPosterior, tau: Array, shift: Array, y: Array, x: Array,
                    mask: Array | None = None) -> Array:
    """d/dx of sum_i ln Z_i(m_i, v_i; C) at the fixed cavities (m_i, v_i): only x_0 = ln C moves it.

    x: the search coordinates (any length); ``mask`` (optional, bool per entry) leaves padding entries out of the sum.
    """
    cav = cavity(post, tau, shift)
    cav_var = 1.0 / cav.precision

    def log_z_sites(c):
        log_z = label_tilted_moments(cav.shift * cav_var, cav_var, c, y).log_z
        return jnp.sum(log_z if mask is None else jnp.where(mask, log_z, 0.0))

    C = penalty_at(x)
    return jnp.zeros_like(x).at[0].set(jax.grad(log_z_sites)(C) * C)


@float64
def ep_naive_evidence_and_gradient(x: Array, X: Array, y: Array, template: Kernel, sites: EPSites,
                                   **loop) -> NaiveEvidenceGradient:
    """EP's ln Q(D) = n ln kappa(C) + ln INT N(theta; 0, K) exp(-C sum_i l(y_i theta_i)) dtheta and d/dx.

    x: the search coordinates (:mod:`bayesvm.hyperparameters`); X, y: the
    training inputs and labels in {-1, +1}; template: the kernel family;
    sites: the warm start (:func:`zero_sites` for a cold one); ``loop``: EP's damping, max_iter, tol and
    log_z_tol, as in :func:`ep_naive_evidences_and_gradient` (see :func:`bayesvm.evidence.ep.run_ep`). The
    gradient is exact at the fixed point, so it is as accurate as the sites
    are converged. The one-problem case of :func:`ep_naive_evidences_and_gradient`.
    """
    batch = ep_naive_evidences_and_gradient(x, X, np.asarray(y)[None, :], template, batched_sites([sites]), **loop)
    return first_problem(batch)


def summed_over_problems(prior, prior_vjp, x: Array, Y: Array, sites: EPSites, solve,
                         extra_factorizations: int) -> NaiveEvidenceGradient:
    """Run EP on each of k problems one after the other (a scan) and apply the prior's vector-Jacobian product once.

    prior: the prior's parameters at x (K(x), or a low-rank prior), ``prior_vjp`` the VJP of x -> prior;
    ``solve(y, (precision, shift))`` -> (EP's final state, d ln Z_Gauss / d prior, the tilted part of the
    gradient) for one problem's labels from its warm sites. Returns the per-problem values, sites, convergence and
    sweeps, with ``extra_factorizations`` per problem beyond its sweeps, and the gradient of the summed ln Q(D).
    """

    def problem(summed, inputs):
        y, precision, shift = inputs
        state, prior_cotangent, tilted = solve(y, (precision, shift))
        summed = (jax.tree_util.tree_map(jnp.add, summed[0], prior_cotangent), summed[1] + tilted)
        return summed, (state.log_z, EPSites(state.site_precision, state.site_shift), state.converged, state.n_iter)

    zero = (jax.tree_util.tree_map(jnp.zeros_like, prior), jnp.zeros_like(x))
    (cotangent, tilted), (log_z, new_sites, converged, n_iter) = jax.lax.scan(
        problem, zero, (Y, sites.precision, sites.shift))
    (grad_prior,) = prior_vjp(cotangent)
    return NaiveEvidenceGradient(value=log_z, gradient=grad_prior + tilted, sites=new_sites, converged=converged,
                                 n_iter=n_iter, n_factorizations=n_iter + extra_factorizations)


def batched_sites(sites: list[EPSites]) -> EPSites:
    """The sites of k problems stacked into (k, n) NumPy arrays."""
    return EPSites(*(np.stack([np.asarray(s[i], dtype=np.float64) for s in sites]) for i in range(2)))


def first_problem(batch: NaiveEvidenceGradient) -> NaiveEvidenceGradient:
    """The one problem of a batch of one, as NumPy values (no eager JAX operation to compile)."""
    first = jax.tree_util.tree_map(lambda v: np.asarray(v)[0], batch._replace(gradient=None))
    return first._replace(gradient=np.asarray(batch.gradient))


@float64
def ep_naive_evidences_and_gradient(
    x: Array,
    X: Array,
    Y: Array,
    template: Kernel,
    sites: EPSites,
    *,
    damping: float = 0.5,
    max_iter: int = 200,
    tol: float = 1e-6,
    log_z_tol: float = 1e-7,
) -> NaiveEvidenceGradient:
    """EP's ln Q(D_c) of k binary problems on the same inputs, and the gradient of their sum sum_c ln Q(D_c).

    Y: (k, n) labels in {-1, +1}; sites: their warm starts as (k, n) arrays (:func:`batched_sites`). K(x) is
    built once and its vector-Jacobian product applied once, to the summed d ln Z / dK of the k problems; the
    problems run one after the other (a scan: one n x n posterior in memory at a time). Returns value, sites,
    converged, n_iter and n_factorizations per problem and the summed gradient. The problem is padded to
    :func:`bayesvm._linalg.problem_size` (n) with flat sites (:func:`bayesvm.evidence.ep.flat_at_padding`),
    which changes neither the values nor the gradient, so that nearby n share one compiled program; the returned
    sites are the n data entries'.
    """
    X = jnp.asarray(X, dtype=jnp.float64)
    n = X.shape[0]
    size = _linalg.problem_size(n)
    mask = _linalg.padding_mask(n, size)
    # padded in NumPy: labels +1 and flat (zero) sites at the padding
    Y = np.pad(np.asarray(Y, dtype=np.float64), [(0, 0), (0, size - n)], constant_values=1.0)
    padded_sites = EPSites(*(np.pad(np.asarray(s, dtype=np.float64), [(0, 0), (0, size - n)]) for s in sites))
    result = _padded_naive_evidences_and_gradient(
        jnp.asarray(x, dtype=X.dtype), _linalg.pad_rows(X, size), Y, mask, template, padded_sites,
        damping, max_iter, tol, log_z_tol,
    )
    return result._replace(sites=EPSites(*(np.asarray(s)[:, :n] for s in result.sites)))


@jit
def _padded_naive_evidences_and_gradient(x, X, Y, mask, template, sites, damping, max_iter, tol, log_z_tol):
    """:func:`ep_naive_evidences_and_gradient` on inputs padded to a static size, with the 0/1 data ``mask``."""
    K, gram_vjp = jax.vjp(lambda x: _linalg.unit_padding(kernel_at(template, x)(X), mask), x)
    C = penalty_at(x)

    def solve(y, start):
        state = ep_loop_gram(K, flat_at_padding(label_sites(y, C), mask), False, damping, max_iter, tol, log_z_tol,
                             start)
        tau, shift, post = state.site_precision, state.site_shift, state.posterior
        # Gaussian part: d ln Z / dK = 1/2 (b b^T - R)
        sqrt_pos, chol, _ = positive_part(K, tau)
        b = shift - tau * post.mean
        R = sqrt_pos[:, None] * cho_solve((chol, True), jnp.diag(sqrt_pos))
        return state, 0.5 * (jnp.outer(b, b) - R), tilted_gradient(post, tau, shift, y, x, mask)

    return summed_over_problems(K, gram_vjp, x, Y, sites, solve, extra_factorizations=2)
