"""EP's Gaussian posterior over the n training latents from its site parameters, and predictions at new inputs.

The dense form (O(n^3)): the positive-precision sites through GPML's
B = I + S^1/2 K S^1/2, the negative ones (nu sites) by Woodbury on the
positive part (:func:`posterior_from_sites`); the factors predictions need
(:func:`predictor_from_sites`, :func:`ep_predict`). The EP loop itself is in
:mod:`bayesvm.inference.ep_loop`; the low-rank form in :mod:`bayesvm.inference.ep_low_rank`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

from .._precision import float64
from ..compilation import jit

Array = jax.Array

__all__ = ["EPPredictor", "GaussianPosterior", "posterior_from_sites", "predictor_from_sites", "ep_predict"]



class EPPredictor(NamedTuple):
    """What predictions at new inputs need (GPML Algorithm 3.6, with negative sites).

    Predictive mean  = K(X*, X) alpha,  alpha = nu_site - S mu = K^-1 mu.
    Predictive var   = k** - |L^-1 (s_+ * k*)|^2 + |negative_factor k*|^2,
    L = chol(I + S_+^1/2 K S_+^1/2), s_+ = sqrt(max(tau, 0)); negative_factor is
    (0, n) when no site precision can be negative (label sites).
    """

    alpha: Array
    chol_positive: Array
    sqrt_positive: Array
    negative_factor: Array


class GaussianPosterior(NamedTuple):
    """N(mu, Sigma) proportional to N(0, K) prod_i exp(-tau_i theta_i^2 / 2 + shift_i theta_i)."""

    mean: Array
    variance: Array  # diag Sigma
    log_det: Array  # ln det(I + K S) = ln det(K Sigma^-1)


def positive_part(K: Array, tau: Array) -> tuple[Array, Array, Array]:
    """s_+ = sqrt(max(tau, 0)), L = chol(B), B = I + S_+^1/2 K S_+^1/2, V = L^-1 S_+^1/2 K (GPML eq. 3.67)."""
    sqrt_pos = jnp.sqrt(jnp.maximum(tau, 0.0))
    chol = jnp.linalg.cholesky(jnp.eye(K.shape[0], dtype=K.dtype) + sqrt_pos[:, None] * K * sqrt_pos[None, :])
    return sqrt_pos, chol, solve_triangular(chol, sqrt_pos[:, None] * K, lower=True)


def _negative_part(sigma_pos: Array, tau: Array) -> tuple[Array, Array]:
    """s_- = sqrt(max(-tau, 0)) and L_- = chol(G), G = I - S_-^1/2 Sigma_+ S_-^1/2 (NaN if improper)."""
    sqrt_neg = jnp.sqrt(jnp.maximum(-tau, 0.0))
    eye = jnp.eye(tau.shape[0], dtype=tau.dtype)
    return sqrt_neg, jnp.linalg.cholesky(eye - sqrt_neg[:, None] * sigma_pos * sqrt_neg[None, :])


@float64
def posterior_from_sites(K: Array, tau: Array, shift: Array, allow_negative: bool) -> GaussianPosterior:
    """Gaussian posterior of the GP prior N(0, K) times Gaussian sites (tau, shift = tau * site mean).

    Positive part (GPML eqs. 3.67-3.68): S_+ = diag(max(tau, 0)),
      B = I + S_+^1/2 K S_+^1/2 = L L^T,  V = L^-1 S_+^1/2 K,  Sigma_+ = K - V^T V.
    Negative part (only if ``allow_negative``): S_- = diag(max(-tau, 0)), then by Woodbury
      Sigma = (Sigma_+^-1 - S_-)^-1 = Sigma_+ + W^T W,
      G = I - S_-^1/2 Sigma_+ S_-^1/2 = L_- L_-^T,  W = L_-^-1 S_-^1/2 Sigma_+.
    G is positive definite exactly when the posterior is proper; otherwise its
    Cholesky factor is NaN, and so is every output (callers test for that).
    mu = Sigma shift,  ln det(I + K S) = 2 sum ln diag L + 2 sum ln diag L_-.
    Without negative sites Sigma is never formed (only its diagonal and Sigma shift).
    """
    _, chol, V = positive_part(K, tau)
    log_det = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol)))
    if not allow_negative:
        mean = K @ shift - V.T @ (V @ shift)
        return GaussianPosterior(mean, jnp.diagonal(K) - jnp.sum(V * V, axis=0), log_det)
    sigma_pos = K - V.T @ V
    sqrt_neg, chol_neg = _negative_part(sigma_pos, tau)
    W = solve_triangular(chol_neg, sqrt_neg[:, None] * sigma_pos, lower=True)
    sigma = sigma_pos + W.T @ W
    log_det = log_det + 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol_neg)))
    return GaussianPosterior(sigma @ shift, jnp.diagonal(sigma), log_det)


@float64
def predictor_from_sites(K: Array, tau: Array, mean: Array, shift: Array, allow_negative: bool) -> EPPredictor:
    """Factors for :func:`ep_predict` (see :class:`EPPredictor`).

    alpha = shift - S mu (= K^-1 mu since (K^-1 + S) mu = shift). The negative
    part adds k*^T M^T G^-1 M k* to the variance, M = S_-^1/2 (I - K A_+),
    A_+ = S_+^1/2 B^-1 S_+^1/2 = (K + S_+^-1)^-1 (Woodbury on (K + S^-1)^-1).
    """
    n = K.shape[0]
    sqrt_pos, chol, V = positive_part(K, tau)
    if not allow_negative:
        return EPPredictor(shift - tau * mean, chol, sqrt_pos, jnp.zeros((0, n), dtype=K.dtype))
    sqrt_neg, chol_neg = _negative_part(K - V.T @ V, tau)
    k_a_pos = solve_triangular(chol, V, lower=True, trans=1).T * sqrt_pos[None, :]  # K A_+
    m = sqrt_neg[:, None] * (jnp.eye(n, dtype=K.dtype) - k_a_pos)
    return EPPredictor(shift - tau * mean, chol, sqrt_pos, solve_triangular(chol_neg, m, lower=True))


@float64
@jit(rarely_run=True)
def ep_predict(result, K_cross: Array, K_diag: Array) -> tuple[Array, Array]:
    """Approximate posterior mean and variance of theta(x*) (GPML Algorithm 3.6, eqs. 3.60-3.61).

    ``result``: an :class:`bayesvm.inference.ep_loop.EPResult` (its ``predictor``).

    K_cross: (m, n) = K(X*, X) against the training inputs; K_diag: (m,) = diag K(X*, X*).
    mean = K_cross alpha; variance = K_diag - k*^T (K + S^-1)^-1 k*, computed as
    K_diag - |L^-1 (s_+ * k*)|^2 + |negative_factor k*|^2 (see :class:`EPPredictor`).
    """
    pred = result.predictor
    mean = K_cross @ pred.alpha
    v = solve_triangular(pred.chol_positive, pred.sqrt_positive[:, None] * K_cross.T, lower=True)
    w = pred.negative_factor @ K_cross.T
    variance = K_diag - jnp.sum(v * v, axis=0) + jnp.sum(w * w, axis=0)
    return mean, variance
