"""Sollich's Laplace-style approximation around the MAP solution.

Naive evidence (theory: "The naive evidence: a Laplace-style approximation"). Split the training points at the MAP
solution into the marginal set m = {i : 0 < a_i < C} and the rest. Keeping
the linear kinks of the marginal points and dropping their quadratic
couplings gives

    ln Q(D) ~= n ln kappa(C) - 1/2 sum_i y_i a_i theta_i - C sum_i l(y_i theta_i)
               - 1/2 ln det(L_m K_m),

    L_m = diag(2 pi [a_i (C - a_i) / C]^2)   (marginal points only).

det(L_m K_m) diverges as a marginal a_i approaches 0 or C; the regularised
form (the default) uses det(I + L_m K_m), which treats each kink as a
Gaussian of unit height and the same area (precision L_ii) and keeps the
evidence continuous as points enter and leave the marginal set.

Posterior variance (theory: "Error bars and predictive probabilities"), consistent with that form:

    sigma^2(x) = K(x, x) - k_m(x)^T (K_m + L_m^-1)^-1 k_m(x).

Both use the symmetric, well-conditioned matrix
B = I + L^1/2 K_m L^1/2 (eigenvalues >= 1): det(I + L K_m) = det B and
(K_m + L^-1)^-1 = L^1/2 B^-1 L^1/2, so no inverse of L or K_m is formed.

Reference: P. Sollich, "Bayesian methods for support vector machines:
evidence and predictive class probabilities", Machine Learning 46 (2002).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .. import _linalg
from .._precision import float64
from ..compilation import jit
from ..model import hinge, log_kappa
from ..solver.dual import DualSolution

Array = jax.Array

__all__ = [
    "DETERMINANTS",
    "LaplaceFactor",
    "NaiveEvidenceTerms",
    "marginal_precision",
    "laplace_factor",
    "laplace_log_naive_evidence",
    "laplace_latent_variance",
]

DETERMINANTS = ("regularized", "raw")


class LaplaceFactor(NamedTuple):
    """The marginal set, gathered into a padded buffer, with the Cholesky factor of B."""

    index: Array  # (size,) positions of the marginal points
    valid: Array  # (size,) which slots hold a marginal point
    sqrt_precision: Array  # (size,) L_ii^1/2, zero on padding
    chol: Array  # (size, size) lower Cholesky factor of B = I + L^1/2 K_m L^1/2


class NaiveEvidenceTerms(NamedTuple):
    """The terms of the Laplace-style ln Q(D); ``value`` is their sum."""

    value: Array
    log_kappa_term: Array  # sum_i w_i ln kappa(C) (n ln kappa(C) unweighted)
    quadratic_term: Array  # -1/2 sum_i y_i a_i theta_i
    hinge_term: Array  # -C sum_i w_i l(y_i theta_i)
    log_det_term: Array  # -1/2 ln det(I + L_m K_m)  (or det(L_m K_m))
    n_marginal: Array


@float64
def marginal_precision(alpha: Array, C: Array | float) -> Array:
    """L_ii = 2 pi [a_i (C - a_i) / C]^2, the precision of the Gaussian with the kink's area.

    The kink of marginal point i integrates to 1/a_i + 1/(C - a_i) = C / (a_i (C - a_i));
    a unit-height Gaussian of that area has precision 2 pi (a_i (C - a_i) / C)^2.
    """
    return 2.0 * jnp.pi * (alpha * (C - alpha) / C) ** 2


@float64
@jit(rarely_run=True, static_argnames=("size",))
def laplace_factor(K: Array, solution: DualSolution, boxes: Array | float, size: int) -> LaplaceFactor:
    """Gather the marginal set (at most ``size`` points) and factor B; ``boxes``: each point's upper bound C w_i on
    a_i (a scalar C where every weight is 1), whose kink has precision :func:`marginal_precision` at that box."""
    index, valid = _linalg.subset_indices(solution.marginal, size)
    K_m = _linalg.padded_submatrix(K, index, valid)
    box = jnp.broadcast_to(jnp.asarray(boxes, dtype=K.dtype), solution.alpha.shape)[index]
    sqrt_precision = jnp.where(valid, jnp.sqrt(marginal_precision(solution.alpha[index], box)), 0.0)
    B = jnp.eye(size, dtype=K.dtype) + sqrt_precision[:, None] * K_m * sqrt_precision[None, :]
    return LaplaceFactor(index, valid, sqrt_precision, jnp.linalg.cholesky(B))


@float64
@jit(rarely_run=True, static_argnames=("determinant",))
def laplace_log_naive_evidence(
    K: Array,
    y: Array,
    C: Array | float,
    solution: DualSolution,
    factor: LaplaceFactor,
    determinant: str = "regularized",
    weights: Array | None = None,
) -> NaiveEvidenceTerms:
    """Sollich's Laplace-style ln Q(D) and its terms (pure; jit/vmap-able).

    With row weights w_i (``weights``; None: every w_i = 1) each label term is to the power w_i: the kappa term is
    sum_i w_i ln kappa(C), the hinge term -C sum_i w_i l(y_i theta_i), and point i's box C w_i (theory: "Weights
    and repeated rows"; ``solution`` and ``factor`` at those boxes).

    ``determinant="regularized"`` uses det(I + L_m K_m) (default),
    ``"raw"`` the original det(L_m K_m), which is +inf evidence when K_m is
    singular and diverges as a marginal a_i -> 0 or C.
    """
    if determinant not in DETERMINANTS:
        raise ValueError(f"determinant must be one of {DETERMINANTS}; got {determinant!r}")
    weights = jnp.ones_like(y) if weights is None else weights
    alpha, theta = solution.alpha, solution.theta
    log_kappa_term = jnp.sum(weights) * log_kappa(C)
    quadratic_term = -0.5 * jnp.sum(y * alpha * theta)
    hinge_term = -C * jnp.sum(weights * hinge(y * theta))
    if determinant == "regularized":
        log_det = _linalg.cholesky_logdet(factor.chol)
    else:
        K_m = _linalg.padded_submatrix(K, factor.index, factor.valid)
        log_precision = jnp.where(factor.valid, 2.0 * jnp.log(jnp.where(factor.valid, factor.sqrt_precision, 1.0)), 0.0)
        sign, log_det_K = jnp.linalg.slogdet(K_m)
        log_det = jnp.sum(log_precision) + jnp.where(sign > 0, log_det_K, -jnp.inf)
    log_det_term = -0.5 * log_det
    value = log_kappa_term + quadratic_term + hinge_term + log_det_term
    return NaiveEvidenceTerms(
        value=value,
        log_kappa_term=log_kappa_term,
        quadratic_term=quadratic_term,
        hinge_term=hinge_term,
        log_det_term=log_det_term,
        n_marginal=jnp.sum(solution.marginal),
    )


@float64
@jit(rarely_run=True)
def laplace_latent_variance(factor: LaplaceFactor, K_cross: Array, K_diag: Array) -> Array:
    """sigma^2(x) = K(x, x) - |chol(B)^-1 (L^1/2 k_m(x))|^2 for each row of ``K_cross``.

    ``K_cross`` is K(X*, X_train) (all training columns; the marginal ones are
    gathered here) and ``K_diag`` is K(x, x) for each x in X*. Clipped at 0
    against rounding.
    """
    k_m = jnp.where(factor.valid[None, :], K_cross[:, factor.index], 0.0) * factor.sqrt_precision[None, :]
    v = jax.scipy.linalg.solve_triangular(factor.chol, k_m.T, lower=True)
    return jnp.maximum(K_diag - jnp.sum(v * v, axis=0), 0.0)
