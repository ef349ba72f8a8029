"""ln N(D) under the exact prior by tempered SMC started from EP's Gaussian, not from the prior.

With the prior's factor K + jitter I = L L^T (:func:`bayesvm.normalization.annealing.prior_factor`)
and whitened latents w = L^-1 theta,

    N(D) = E_{w ~ N(0, I)}[ prod_i nu((L w)_i) ],

the low-rank form of :mod:`bayesvm.normalization.low_rank` with V = L and no
independent noise. EP with the nu sites
(:func:`bayesvm.inference.ep_low_rank.nu_weight_gaussian`) gives a Gaussian
q(w) = N(m, S S^T) close to p(w) proportional to N(w; 0, I) prod_i nu((L w)_i);
with w = m + S z, z ~ N(0, I),

    N(D) = E_z[ p(w) / q(w) ],
    ln p(w) - ln q(w) = -|w|^2 / 2 + |z|^2 / 2 + ln |det S| + sum_i ln nu((L w)_i),

an expectation under the standard normal that tempered SMC
(:mod:`bayesvm.normalization.annealing`) anneals from beta = 0 (q itself) to
beta = 1. The sampler then only has to bridge EP's error, not the whole way
from the prior to p, where the prior-started runs disagree (theory: "The
normalisation factor"). Each run's estimate of N(D) is still unbiased, for
any q. Where EP does not converge, q is the prior and this is the
prior-started estimate.

The check at the answer runs this route where the prior-started runs disagree or agree narrowly
(:func:`bayesvm.normalization.budget.budgeted_log_normalization`); the search's anchors start from the prior.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from .._precision import as_float64, float64
from .annealing import AnnealingResult, annealed_log_expectation, prior_factor
from ..inference.ep import converged_ep
from ..inference.ep_low_rank import WeightGaussian, nu_weight_gaussian
from ..inference.probit import log_probit
from ..low_rank import LowRankPrior
from ..model import log_nu

Array = jax.Array

__all__ = ["reference_log_ratio", "ep_started_factor", "ep_started_log_likelihood", "ep_weight_gaussian",
           "annealed_from_ep", "probit_weight_gaussian", "annealed_probit_from_ep"]


def reference_log_ratio(w: Array, z: Array, log_det_scale: Array) -> Array:
    """ln N(w; 0, I) - ln q(w) at w = m + S z under q = N(m, S S^T): -|w|^2 / 2 + |z|^2 / 2 + ln |det S|."""
    return -0.5 * jnp.sum(w * w, axis=-1) + 0.5 * jnp.sum(z * z, axis=-1) + log_det_scale


def ep_started_factor(start: WeightGaussian, chol) -> np.ndarray:
    """The tall factor [I; S; L S] (3M, M): its images of z ~ N(0, I) are z, S z and L S z, so that a move along
    an ellipse in z moves w - m = S z and theta - L m = L S z with it (:func:`bayesvm.normalization.smc.smc_runs`).
    The particles take three times the memory of z alone, and each move's draw three matrix-vector products
    instead of one, for slice evaluations at O(M) instead of two products each (a move makes several).
    Host-side (NumPy): built once per estimate, it compiles no program of its own."""
    chol, scale = np.asarray(chol, dtype=np.float64), np.asarray(start.scale, dtype=np.float64)
    return np.concatenate([np.eye(chol.shape[0]), scale, chol @ scale])


@float64
def ep_started_log_likelihood(images: Array, mean: Array, log_det_scale: Array, latent_mean: Array,
                              C: Array | float, mask: Array) -> Array:
    """ln p(w) - ln q(w) at w = mean + S z (module docstring), from the images (z, S z, L S z) of z that
    :func:`ep_started_factor` gives: O(M) per evaluation. ``latent_mean`` is L m; ``mask`` (0/1 per latent) leaves
    padding out of the nu product."""
    z, scaled, latent = jnp.split(images, 3, axis=-1)
    return (reference_log_ratio(mean + scaled, z, log_det_scale)
            + jnp.sum(mask * log_nu(latent_mean + latent, C), axis=-1))


def ep_weight_gaussian(chol: Array, C: float, mask: Array) -> WeightGaussian:
    """EP's Gaussian q(w) of the whitened latents w = chol^-1 theta (module docstring); the prior where EP fails."""
    size = chol.shape[0]
    C = as_float64(C)  # a Python float and a NumPy one would compile EP twice
    return nu_weight_gaussian(LowRankPrior(chol, np.zeros(size)), C, mask=np.asarray(mask) > 0)


@float64
def annealed_from_ep(chol, C: float, mask=None, *, key=0, start: WeightGaussian | None = None,
                     **options) -> tuple[AnnealingResult, WeightGaussian]:
    """ln N(D) = ln E_{w ~ N(0, I)}[prod_i nu((chol w)_i)] by tempered SMC from EP's Gaussian of w.

    chol: the prior's square-root factor (M, M), padded or not; mask: a weight per latent (the multiplicity of
    its input, default 1; 0 leaves the padding's independent N(0, 1) latents out of the product, and flat in EP);
    ``start``: :func:`ep_weight_gaussian` (chol, C, mask) where the caller has it already.
    ``options`` go to :func:`bayesvm.normalization.annealing.annealed_log_expectation`; the particles
    (``keep_particles``) are theta = chol (m + S z), (R, N, M).
    """
    chol = np.asarray(chol, dtype=np.float64)
    size = chol.shape[0]
    mask = np.asarray(np.ones(size) if mask is None else mask, dtype=np.float64)
    start = ep_weight_gaussian(chol, C, mask) if start is None else start
    latent_mean = chol @ np.asarray(start.mean, dtype=np.float64)
    result = annealed_log_expectation(
        ep_started_factor(start, chol), ep_started_log_likelihood,
        args=(start.mean, start.log_det_scale, latent_mean, C, mask), key=key, **options,
    )
    if result.particles is not None:  # the images (z, S z, L S z): theta = L m + L S z
        result = dataclasses.replace(result, particles=latent_mean + np.asarray(result.particles)[..., 2 * size:])
    return result, start


# ---------------------------------------------------------------------------
# the GP classifier's evidence, the same way


@float64
def ep_started_probit_log_likelihood(images: Array, mean: Array, log_det_scale: Array, latent_mean: Array,
                                     y: Array, weights: Array) -> Array:
    """ln p(w) - ln q(w) for the GP classifier, p(w) = N(w; 0, I) prod_i Phi(y_i (L w)_i)^{w_i}, at
    w = mean + S z from the images (z, S z, L S z) (:func:`ep_started_factor`), as :func:`ep_started_log_likelihood`
    for nu."""
    z, scaled, latent = jnp.split(images, 3, axis=-1)
    return (reference_log_ratio(mean + scaled, z, log_det_scale)
            + jnp.sum(weights * log_probit(y * (latent_mean + latent)), axis=-1))


def probit_weight_gaussian(chol, site_precision, site_shift, converged=True) -> WeightGaussian:
    """EP's Gaussian of the whitened latents w (theta = chol w) from its sites (precision tau, shift nu~) on theta:
    precision A = I + chol^T diag(tau) chol, mean A^-1 chol^T nu~, scale R^-T with A = R R^T (so that
    scale scale^T = A^-1; no inverse of chol, which may be singular). Host-side (NumPy)."""
    chol = np.asarray(chol, dtype=np.float64)
    tau, shift = np.asarray(site_precision, dtype=np.float64), np.asarray(site_shift, dtype=np.float64)
    R = np.linalg.cholesky(np.eye(chol.shape[1]) + chol.T @ (tau[:, None] * chol))
    scale = np.linalg.inv(R).T
    mean = scale @ (scale.T @ (chol.T @ shift))
    return WeightGaussian(mean, scale, -np.sum(np.log(np.diagonal(R))), np.asarray(bool(converged)))


@float64
def annealed_probit_from_ep(K, y, weights=None, *, ep=None, key=0, **options) -> AnnealingResult:
    """ln P(D) = ln E_{theta ~ N(0, K)}[prod_i Phi(y_i theta_i)^{w_i}] of the GP classifier by tempered SMC from EP's
    Gaussian (the module docstring's route, with the probit in place of nu): the sampled reference for EP's value,
    which the sampler only has to correct (each run's estimate is unbiased whatever the start).

    K: (n, n) prior covariance of the training inputs (equal inputs allowed: the prior's factor is then singular);
    y: (n,) labels in -1/+1; weights: (n,) the rows' weights (None: 1 each); ``ep``: EP's run for the same problem
    whose sites give the start (an :class:`~bayesvm.inference.ep_loop.EPResult`, its rows of one input possibly
    merged into one site; None: :func:`bayesvm.inference.ep.converged_ep` with ``likelihood="probit"`` here).
    ``options`` go to :func:`bayesvm.normalization.annealing.annealed_log_expectation`.
    """
    K = np.asarray(K, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    weights = np.ones(y.size) if weights is None else np.asarray(weights, dtype=np.float64)
    if ep is None:
        ep = converged_ep(K, y, likelihood="probit", weights=None if np.all(weights == 1.0) else weights)
    chol = prior_factor(K)
    start = probit_weight_gaussian(chol, ep.site_precision, ep.site_shift, ep.converged)
    return annealed_log_expectation(ep_started_factor(start, chol), ep_started_probit_log_likelihood,
                                    args=(start.mean, start.log_det_scale, chol @ start.mean, y, weights), key=key,
                                    **options)
