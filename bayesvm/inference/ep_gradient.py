"""EP's naive evidence ln Q(D) with its exact gradient in the search coordinates (and the GP classifier's ln P(D)).

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

The GP classifier's probit sites Phi(y_i theta_i) have no C: for them the
first part is the whole gradient, from the same program (``likelihood="probit"``).

The EP run itself starts from the sites of the previous point of the search
(a warm start), which is what makes an evaluation cost a few factorisations
rather than a cold run's dozens. It is the compiled program of
:func:`bayesvm.inference.ep.padded_label_run`, on the Gram matrix, which also
serves the checks at the search's answer and the posterior; here K(x) is
built, the run made for each of k binary problems on the same inputs (one per
class, one-vs-rest), and the derivatives it returns carried to the search
coordinates by the vector-Jacobian product of x -> K(x).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import _linalg
from .._precision import float64
from .ep import label_penalty_derivative, padded_label_run
from .ep_posterior import GaussianPosterior
from ..compilation import jit
from ..hyperparameters import kernel_at, penalty_at
from ..kernels import Kernel

Array = jax.Array

__all__ = ["EPSites", "NaiveEvidenceGradient", "batched_sites", "first_problem", "ep_naive_evidence_and_gradient",
           "ep_naive_evidences_and_gradient", "zero_sites"]


class EPSites(NamedTuple):
    """Gaussian EP sites exp(-precision theta^2 / 2 + shift theta), one per training point."""

    precision: Array
    shift: Array


def zero_sites(n: int) -> EPSites:
    """Sites that leave the prior unchanged (a cold start), as float64 host arrays whatever the caller's precision
    scope."""
    zeros = np.zeros(n, dtype=np.float64)
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
                    weights: Array | float = 1.0, opposite: Array | None = None) -> Array:
    """d/dx of sum_i ln Z_i(m_i, v_i; C) at the fixed cavities (m_i, v_i): only x_0 = ln C moves it
    (:func:`bayesvm.inference.ep.label_penalty_derivative` times dC/dx_0 = C).

    x: the search coordinates (any length); ``weights``: each site's weight (0 at padding entries, which then add
    nothing); ``opposite``: the other label's weight at each site (None: no site carries both labels).
    """
    C = penalty_at(x)
    return jnp.zeros_like(x).at[0].set(label_penalty_derivative(post, tau, shift, y, C, weights, opposite) * C)


@float64
def ep_naive_evidence_and_gradient(x: Array, X: Array, y: Array, template: Kernel, sites: EPSites,
                                   weights=None, **loop) -> NaiveEvidenceGradient:
    """EP's ln Q(D) = sum_i w_i ln kappa(C) + ln INT N(theta; 0, K) exp(-C sum_i w_i l(y_i theta_i)) dtheta and d/dx.

    x: the search coordinates (:mod:`bayesvm.hyperparameters`); X, y: the
    training inputs and labels in {-1, +1}; weights: the rows' weights w_i (None: all 1); template: the kernel family;
    sites: the warm start (:func:`zero_sites` for a cold one); ``loop``: EP's damping, max_iter, tol and
    log_z_tol, as in :func:`ep_naive_evidences_and_gradient` (see :func:`bayesvm.inference.ep_loop.ep_loop`). The
    gradient is exact at the fixed point, so it is as accurate as the sites
    are converged. The one-problem case of :func:`ep_naive_evidences_and_gradient`.
    """
    batch = ep_naive_evidences_and_gradient(x, X, np.asarray(y)[None, :], template, batched_sites([sites]),
                                            weights=weights, **loop)
    return first_problem(batch)


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
    weights=None,
    opposite=None,
    likelihood: str = "hinge",
    damping: float = 0.5,
    max_iter: int = 200,
    tol: float = 1e-6,
    log_z_tol: float = 1e-7,
) -> NaiveEvidenceGradient:
    """EP's ln Q(D_c) of k binary problems on the same inputs, and the gradient of their sum sum_c ln Q(D_c).

    ``likelihood``: ``"hinge"`` (ln Q(D), the SVM's naive evidence) or ``"probit"`` (the GP classifier's ln P(D);
    its site has no C, so the gradient's ln C entry is 0: hold that coordinate fixed).
    Y: (k, n) labels in {-1, +1}; weights: (n,) the rows' weights (None: all 1), shared by the problems, or (k, n)
    one row per problem; opposite: None, or (k, n) each site's weight of the other label
    (:func:`bayesvm.inference.ep_loop.merged_label_weights`, which gives both (k, n) arrays); sites:
    their warm starts as (k, n) arrays (:func:`batched_sites`). K(x) is
    built once; each problem runs EP on it from its sites (:func:`bayesvm.inference.ep.padded_label_run`, one
    after the other), and the runs' summed d ln Z / dK is carried to the coordinates by one vector-Jacobian
    product of x -> K(x), their d ln Z / dC by C = exp(x_0). Returns value,
    sites, converged, n_iter and n_factorizations per problem and the summed gradient. The problem is padded to
    :func:`bayesvm._linalg.problem_size` (n) with flat sites (:func:`bayesvm.inference.ep_loop.flat_at_padding`),
    which changes neither the values nor the gradient, so that nearby n share one compiled program (the same
    one as EP at full tolerance, :func:`bayesvm.inference.ep.ep_log_evidence`); the returned sites are the n
    data entries'.
    """
    X = np.asarray(X, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    n = X.shape[0]
    size = _linalg.problem_size(n)
    mask = _linalg.padding_mask(n, size)
    Y = np.asarray(Y, dtype=np.float64)
    per_problem = np.ones(Y.shape) if weights is None else np.broadcast_to(weights, Y.shape)
    weights = [_linalg.pad_weights(w, n, size) for w in per_problem]
    opposite = [None] * Y.shape[0] if opposite is None else [_linalg.pad_weights(o, n, size) for o in opposite]
    X = _linalg.pad_rows(X, size)
    K = _padded_gram(x, X, mask, template)
    C = float(np.exp(x[0]))
    runs = [padded_label_run(K, _linalg.pad_labels(y, size), w, C,
                             (_linalg.pad_vector(np.asarray(p, dtype=np.float64), size),
                              _linalg.pad_vector(np.asarray(h, dtype=np.float64), size)),
                             damping, max_iter, tol, log_z_tol, o, likelihood=likelihood)
            for y, w, o, p, h in zip(Y, weights, opposite, sites.precision, sites.shift)]
    # the derivatives summed over the problems (on the host: no program for a sum), carried to the coordinates by
    # one vector-Jacobian product (linear in its cotangent)
    cotangent = sum(np.asarray(run.gram_cotangent) for run in runs)
    gradient = np.array(_gram_vjp(x, X, mask, template, cotangent))
    gradient[0] += C * sum(float(run.penalty_derivative) for run in runs)
    results = [run.result for run in runs]
    return NaiveEvidenceGradient(
        value=np.array([float(r.log_z) for r in results]), gradient=gradient,
        sites=EPSites(*(np.stack([np.asarray(getattr(r, f))[:n] for r in results])
                        for f in ("site_precision", "site_shift"))),
        converged=np.array([bool(r.converged) for r in results]),
        n_iter=np.array([int(r.n_iter) for r in results]),
        # per sweep one factorisation of B; besides them the posterior of the starting sites and B's final factor
        n_factorizations=np.array([int(r.n_iter) + 2 for r in results]),
    )


def _gram(x, X, mask, template: Kernel) -> Array:
    """K(x) on the padded inputs: the template's kernel at the coordinates x on the data block, I on the padding."""
    return _linalg.unit_padding(kernel_at(template, x)(X), mask)


_padded_gram = jit(_gram)


@jit
def _gram_vjp(x, X, mask, template: Kernel, cotangent) -> Array:
    """The vector-Jacobian product of x -> K(x) (:func:`_gram`) with ``cotangent`` (d ln Z / dK): d ln Z / dx."""
    return jax.vjp(lambda x: _gram(x, X, mask, template), x)[1](cotangent)[0]
