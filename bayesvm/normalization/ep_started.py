"""ln N(D) under the exact prior by tempered SMC started from EP's Gaussian, not from the prior.

With the prior's factor K + jitter I = L L^T (:func:`bayesvm.normalization.annealing.prior_factor`)
and whitened latents w = L^-1 theta,

    N(D) = E_{w ~ N(0, I)}[ prod_i nu((L w)_i) ],

the low-rank form of :mod:`bayesvm.normalization.low_rank` with V = L and no
independent noise. EP with the nu sites
(:func:`bayesvm.evidence.ep_low_rank.nu_weight_gaussian`) gives a Gaussian
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

Measured on 560 standardised rows of Ripley's synth.te, two seeds: at C 0.3,
k0 = k_b = 100, length scale 0.5 the prior-started runs disagreed at the
budget's cap (-86.8 and -90.2, 60 s each) and the EP-started ones agreed
(-81.81 +- 0.05 and -81.77 +- 0.03); at k0 = 10 the prior-started value of
one seed was 0.8 nats low (-40.62 +- 0.18 against -39.84 +- 0.02); at a
length scale of 3 the two routes agreed within their errors.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._precision import as_float64, float64
from .annealing import AnnealingResult, product_route_log_likelihood
from .budget import annealed_until_runs_agree
from .smc import SliceGuide
from ..evidence.ep_low_rank import WeightGaussian, nu_weight_gaussian
from ..compilation import jit
from ..low_rank import LowRankPrior
from ..model import log_nu

Array = jax.Array

__all__ = ["reference_log_ratio", "ep_started_factor", "ep_started_log_likelihood", "ep_weight_gaussian",
           "annealed_from_ep", "ep_slice_guide", "FALLBACK_LADDER", "RoutedEstimate", "annealed_with_ep_fallback"]


def reference_log_ratio(w: Array, z: Array, log_det_scale: Array) -> Array:
    """ln N(w; 0, I) - ln q(w) at w = m + S z under q = N(m, S S^T): -|w|^2 / 2 + |z|^2 / 2 + ln |det S|."""
    return -0.5 * jnp.sum(w * w, axis=-1) + 0.5 * jnp.sum(z * z, axis=-1) + log_det_scale


def ep_started_factor(start: WeightGaussian, chol: Array) -> Array:
    """The tall factor [I; S; L S] (3M, M): its images of z ~ N(0, I) are z, S z and L S z, so that a move along
    an ellipse in z moves w - m = S z and theta - L m = L S z with it (:func:`bayesvm.normalization.smc.smc_runs`).
    The particles take three times the memory of z alone, and each move's draw three matrix-vector products
    instead of one, for slice evaluations at O(M) instead of two products each (3.4-7 per move measured)."""
    return jnp.concatenate([jnp.eye(chol.shape[0], dtype=chol.dtype), start.scale, chol @ start.scale])


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

    chol: the prior's square-root factor (M, M), padded or not; mask: 0/1 per latent, 1 for the training
    points (default all), the padding's independent N(0, 1) latents out of the product and flat in EP;
    ``start``: :func:`ep_weight_gaussian` (chol, C, mask) where the caller has it already.
    ``options`` go to :func:`bayesvm.normalization.budget.annealed_until_runs_agree` (its budget grows until
    the runs agree); the particles (``keep_particles``) are z, w = mean + z scale^T with the returned Gaussian.
    """
    chol = as_float64(chol)
    size = chol.shape[0]
    mask = as_float64(np.ones(size) if mask is None else mask)
    start = ep_weight_gaussian(chol, C, mask) if start is None else start
    result = annealed_until_runs_agree(
        ep_started_factor(start, chol), ep_started_log_likelihood,
        args=(start.mean, start.log_det_scale, chol @ start.mean, C, mask), key=key, **options,
    )
    if result.particles is not None:
        result = dataclasses.replace(result, particles=result.particles[..., :size])
    return result, start


#: the EP-started fallback's budget: at most two rounds of the first round's size, pooled. Its runs are costlier
#: than the prior-started ones where the length scale is long (on synth.te at C 1, k0 10, length scale 3: 600-700 s
#: for 16,384 particle-runs against 46-66 s), so it does not climb the full ladder
FALLBACK_LADDER = (1, 1)


class RoutedEstimate(NamedTuple):
    """A ln N(D) and the route it took: ``"prior"`` (tempered SMC from the prior, particles theta), ``"guided"``
    (from the prior, its later rounds' slice moves round EP's Gaussian; particles theta), ``"ep"`` (from EP's
    Gaussian ``start``, particles z with w = start.mean + z start.scale^T) or ``"quadrature"`` (the common
    direction by quadrature, :func:`bayesvm.normalization.common_direction.with_quadrature_fallback`: a
    :class:`~bayesvm.normalization.common_direction.QuadratureResult`, no particles)."""

    result: AnnealingResult
    route: str
    start: WeightGaussian | None

    def latents(self, chol: Array) -> Array:
        """The final particles (``keep_particles``) as the latents theta (R, N, M), whatever the route: on ``"ep"``
        theta = chol w with w = start.mean + z start.scale^T; ``chol`` is the factor the estimate used."""
        if self.route != "ep":
            return self.result.particles
        return (self.start.mean + self.result.particles @ self.start.scale.T) @ chol.T


@float64
@jit(rarely_run=True)
def ep_slice_guide(start: WeightGaussian, chol: Array) -> tuple[SliceGuide, Array]:
    """EP's Gaussian q(w) = N(m, S S^T) as the guide of the prior-started route's slice moves, and the factor
    chol V that carries the guide's coordinates z = V^T w to theta.

    With q's precision A = (S S^T)^-1 = V diag(1 + lambda) V^T, the guide at temperature beta
    (:class:`bayesvm.normalization.smc.SliceGuide`) has precision 1 + beta^2 max(lambda, 0) and, at beta = 1,
    mean V^T m: EP's site terms scaled by beta^2, and the prior wherever q is wider than the prior (lambda < 0,
    where EP's nu sites have negative precisions). Erring wide is what keeps the moves safe: the target's
    ratio to a guide wider than itself is bounded, to a narrower one it is not. Measured (documentation:
    normalisation, "seventh session: slice moves round EP's Gaussian"): scaling the sites by beta instead of beta^2 spread the runs
    three times as much as the prior's moves at Ripley's synth (560 rows, C 0.3, k0 100, length scale 0.5).
    :func:`annealed_with_ep_fallback` uses it for the rounds after the first.
    """
    variance, basis = jnp.linalg.eigh(start.scale @ start.scale.T)  # S S^T = V diag(1 / (1 + lambda)) V^T
    excess = jnp.maximum(1.0 / variance - 1.0, 0.0)
    return SliceGuide(excess, (1.0 + excess) * (basis.T @ start.mean)), chol @ basis


@float64
def annealed_with_ep_fallback(chol, C: float, mask=None, *, key=0, **options) -> RoutedEstimate:
    """ln N(D) from the prior (:func:`bayesvm.normalization.annealing.product_route_log_likelihood`), its budget's
    later rounds moving round EP's Gaussian, and from EP's Gaussian (:func:`annealed_from_ep`) where the runs still
    disagree at the budget's cap, or agree with a value still rising there.

    Every round starts from the prior. Where the first round's runs disagree or miss the precision target, EP's
    Gaussian of the whitened latents is computed once and, where EP converged, the later rounds' slice moves go
    round it (:func:`ep_slice_guide`): the same targets, so each run stays unbiased and keeps the mass the prior's
    start reaches, but the moves cross the target in fewer steps (documentation: normalisation, "eighth session").
    Where those runs too disagree at the cap, or agree but their value still rose with the budget (not
    ``settled``), tempered SMC starts again from that Gaussian, within :data:`FALLBACK_LADDER`. Such runs are
    biased low, so the higher of the two values is kept: the EP-started one where it is at least the prior-started
    one (trusted if its own runs agree), otherwise the prior-started one (untrusted: EP's start then found less mass
    than the prior-started runs, so it is biased low too). Measured (documentation: normalisation, "sixteenth
    session"): at four points of a tiny amplitude (k0 0.011-0.025, 400 rows), where the integrand's mass lies in two
    far modes of the common value of theta, the prior-started value still rose at the cap after 20-119 s; EP's start
    (wider than the prior along that direction) agreed in one round, 1.3-6 s, within 0.03-0.11 nats of long
    references. EP's start is the last resort, not the first: it can be a worse start than the prior (on
    synth.te at C 1, k0 1, length scale 0.5 the EP-started value was 0.5-0.7 nats below the prior-started one and
    took 2-7x longer; at C 1, k0 10 its runs agreed 0.8 nats below the disagreeing prior-started runs).
    Where the prior-started budget stopped early by ``stop_above`` (ln N(D) certainly above the caller's level),
    EP's start is not tried either.
    """
    chol = as_float64(chol)
    mask = as_float64(np.ones(chol.shape[0]) if mask is None else mask)
    starts: list[WeightGaussian] = []

    def guide_from_ep() -> tuple[Array, SliceGuide] | None:
        start = ep_weight_gaussian(chol, C, mask)
        starts.append(start)  # for the fallback below
        if not bool(start.converged):
            return None
        guide, factor = ep_slice_guide(start, chol)
        # EP no narrower than the prior anywhere (lambda <= 0): the guide is the prior, whose moves go on
        return (factor, guide) if bool(np.any(np.asarray(guide.excess_precision) > 0)) else None

    with warnings.catch_warnings():  # disagreeing runs are the result's runs_agree, and the reason to go on
        warnings.simplefilter("ignore", RuntimeWarning)
        prior = annealed_until_runs_agree(chol, product_route_log_likelihood, args=(C, mask), key=key,
                                          escalation=guide_from_ep, **options)
        route = "guided" if prior.guided else "prior"
        if prior.trusted or prior.stopped_above is not None:
            return RoutedEstimate(prior, route, None)
        ep, start = annealed_from_ep(chol, C, mask, key=key, start=starts[0] if starts else None,
                                     **{**options, "ladder": FALLBACK_LADDER})
    if ep.value >= prior.value:
        return RoutedEstimate(ep, "ep", start)
    return RoutedEstimate(prior, route, None)
