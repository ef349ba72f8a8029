"""Moments of a Gaussian times the probit likelihood: the tilted distributions of EP for the GP classifier.

The probit likelihood of a label y = +-1 is Phi(y theta), Phi the standard normal CDF; it is normalised
(Phi(theta) + Phi(-theta) = 1 for every theta), so the GP classifier's evidence is EP's ln Z alone, with no
normalisation factor (theory: "The GP classifier: a normalised likelihood"). Rows with equal inputs share one latent,
so a site carries every label there: Phi(y theta)^w Phi(-y theta)^o, w the summed weight of the site's own label
and o that of the other (:func:`bayesvm.inference.ep_loop.merged_label_weights`).

* One label of weight 1 (w = 1, no o): closed form (Rasmussen & Williams 2006, eq. 3.58), written with the
  truncated-normal moments of :func:`bayesvm.inference.tilted.standard_tail_moments` so that it keeps its accuracy
  in every tail (:func:`probit_tilted_moments`).
* Any weights: the log integrand ln N(u; m, v) + w ln Phi(u) + o ln Phi(-u), u = y theta, is strictly concave;
  Newton's method, kept inside a bracket of the root of its derivative, finds its mode, and trapezoid rules in
  t with u = c + s sinh(t), centred at the mode and at the likelihood's bend u = 0 and joined by a smooth
  partition of unity, integrate it, s = (1/v + w + o)^-1/2 the narrowest width it can have
  (:func:`weighted_probit_moments`). Gauss-Hermite quadrature at the mode's curvature is not used: for a weight
  near 1 and a wide cavity (v of 10^3 and more, where the evidence's amplitudes go) the tilted distribution is a
  half-Gaussian with a soft edge, far from any Gaussian, and 64 nodes there are wrong by 10^-2 in ln Z; one sinh
  rule at the mode alone misses the edge where it lies a few cavity standard deviations out (2e-4 in ln Z at
  v = 1e5, a mean 1000 from it; documentation: GP classifier, "The probit site").

The choice between the two is static (Python level): the closed form where the weight is the Python number 1 and
no site carries both labels, the quadrature otherwise.
"""

from __future__ import annotations

import math
import numbers

import jax
import jax.numpy as jnp
import numpy as np

from .._precision import float64
from .tilted import (TiltedMoments, log_mills_ratio, log_normal_cdf_pair, log_upper_tail,
                     standard_tail_moments)

Array = jax.Array

__all__ = ["probit_tilted_moments", "weighted_probit_moments", "log_probit", "probit_mode"]

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
#: nodes of each sinh-mapped trapezoid rule (odd: one node at its centre). 257 nodes and PARTITION_POWER 6: within
#: 1e-7 of scipy's adaptive quadrature in ln Z and the moments (relative), over cavity variances from 1e-4 to
#: 1e5 and weights up to 1e4 (documentation: GP classifier, "The probit site")
QUADRATURE_NODES = 257
#: the rules reach this many cavity standard deviations beyond the mode, where the integrand is below e^-72 of its
#: peak (it falls at least as fast as the cavity Gaussian, being log-concave with curvature >= 1/v)
QUADRATURE_REACH = 12.0
#: the power of the node densities in the partition of unity between the two rules: the larger, the less of the
#: other rule's sharp place each rule sees ((s / distance)^p), the sharper the switch between them (over about
#: 1/p in the logarithm of the distance, which the rules' spacing there must resolve)
PARTITION_POWER = 6.0
#: Newton steps for the mode (each kept inside the bracket, a bisection where it would leave it)
NEWTON_STEPS = 60
_NODES = np.linspace(-1.0, 1.0, QUADRATURE_NODES)


def log_probit(u: Array) -> Array:
    """ln Phi(u), in both tails (:func:`bayesvm.inference.tilted.log_upper_tail` of -u)."""
    return log_upper_tail(-u)


def _inverse_mills(u: Array) -> Array:
    """d ln Phi(u) / du = phi(u) / Phi(u) = 1 / R(-u) (R the Mills ratio), without underflow."""
    return jnp.exp(-log_mills_ratio(-u))


def _curvature(u: Array, lam: Array) -> Array:
    """-d^2 ln Phi(u) / du^2 = lam (u + lam), lam = phi(u) / Phi(u): in (0, 1), clipped there against rounding."""
    return jnp.clip(lam * (u + lam), 0.0, 1.0)


def _is_one(weight) -> bool:
    return isinstance(weight, numbers.Real) and not isinstance(weight, bool) and weight == 1


@float64
def probit_tilted_moments(mean: Array, variance: Array, y: Array | float, weight: Array | float = 1.0,
                          opposite: Array | float | None = None) -> TiltedMoments:
    """ln Z, mean and variance of N(theta; mean, variance) Phi(y theta)^w Phi(-y theta)^o, w = ``weight``,
    o = ``opposite`` (None: 0), y = +-1.

    w = 1 (the Python number) and no ``opposite``: with z = y m / sqrt(1 + v) and lam = phi(z) / Phi(z) (GPML
    eq. 3.58),
      ln Z = ln Phi(z),  E[theta] = m + y v lam / sqrt(1 + v),
      Var[theta] = v - v^2 lam (z + lam) / (1 + v) = v / (1 + v) + v^2 w_z / (1 + v),
    w_z = 1 - lam (z + lam) the variance of N(0, 1) cut to [-z, inf) (:func:`bayesvm.inference.tilted.standard_tail_moments`,
    a continued fraction far in the tail): a sum of positive terms, where the direct form cancels for z << 0.
    Otherwise (any w, o >= 0, arrays included, even of ones) by quadrature (:func:`weighted_probit_moments`).
    """
    if opposite is None and _is_one(weight):
        return _one_label_moments(jnp.asarray(mean), jnp.asarray(variance), y)
    return weighted_probit_moments(mean, variance, y, weight, 0.0 if opposite is None else opposite)


def _one_label_moments(mean: Array, variance: Array, y) -> TiltedMoments:
    scale = jnp.sqrt(1.0 + variance)
    z = y * mean / scale
    lam = _inverse_mills(z)
    _, tail_variance = standard_tail_moments(-z)
    shrink = variance / (1.0 + variance)
    return TiltedMoments(log_probit(z), mean + y * variance * lam / scale,
                         shrink + variance * shrink * tail_variance)


def probit_mode(m: Array, v: Array, w: Array, o: Array) -> tuple[Array, Array]:
    """The mode of g(u) = -(u - m)^2 / (2 v) + w ln Phi(u) + o ln Phi(-u) (strictly concave) and -g'' there.

    g'(u) = -(u - m) / v + w lam(u) - o lam(-u) decreases, lam = phi / Phi decreasing, so for u >= m it is at most
    -(u - m) / v + w lam(m): the root lies in [m, m + v w lam(m)] where g'(m) > 0 and in [m - v o lam(-m), m]
    otherwise. Newton steps from m, each kept inside the bracket (which every step narrows) and a bisection where
    it would leave it; :data:`NEWTON_STEPS` of them.
    """
    def derivatives(u):
        # lam(+-u) = phi(u) / Phi(+-u), both from one Mills ratio
        log_plus, log_minus = log_normal_cdf_pair(u)
        log_density = -0.5 * u * u - _HALF_LOG_2PI
        lam_plus, lam_minus = jnp.exp(log_density - log_plus), jnp.exp(log_density - log_minus)
        slope = -(u - m) / v + w * lam_plus - o * lam_minus
        return slope, 1.0 / v + w * _curvature(u, lam_plus) + o * _curvature(-u, lam_minus)

    slope, _ = derivatives(m)
    rising = slope > 0.0
    lo = jnp.where(rising, m, m - v * o * _inverse_mills(-m))
    hi = jnp.where(rising, m + v * w * _inverse_mills(m), m)

    def step(_, state):
        u, lo, hi = state
        slope, curvature = derivatives(u)
        lo = jnp.where(slope > 0.0, u, lo)
        hi = jnp.where(slope > 0.0, hi, u)
        newton = u + slope / curvature
        inside = (newton >= lo) & (newton <= hi)
        u = jnp.where(slope == 0.0, u, jnp.where(inside, newton, 0.5 * (lo + hi)))
        return u, lo, hi

    u, _, _ = jax.lax.fori_loop(0, NEWTON_STEPS, step, (m, lo, hi))
    return u, derivatives(u)[1]


@float64
def weighted_probit_moments(mean: Array, variance: Array, y: Array | float, weight: Array | float,
                            opposite: Array | float) -> TiltedMoments:
    """ln Z, mean and variance of N(theta; mean, variance) Phi(y theta)^w Phi(-y theta)^o (w, o >= 0), by
    quadrature.

    In u = y theta ~ N(m, v) (m = y mean) the log integrand g(u) = ln N(u; m, v) + w ln Phi(u) + o ln Phi(-u)
    is strictly concave with curvature between 1/v and 1/v + w + o, so nothing in it is narrower than
    s = (1/v + w + o)^-1/2. Its sharp places are its mode u* (:func:`probit_mode`) and the likelihood's bend at
    u = 0 (where ln Phi goes from quadratic to flat), which can lie far apart next to s when the cavity is wide.
    Two trapezoid rules in t, u = c + s sinh(t), one centred at each c in (u*, 0), have nodes a distance s apart
    at their centre and apart in proportion to the distance from it further out, out to 12 cavity standard
    deviations beyond the mode (T = asinh((12 sqrt(v) + |u* - c|) / s), :data:`QUADRATURE_NODES` nodes each). A
    smooth partition of unity shares the integrand between them, rule c taking the share
    rho_c^p / (rho_u*^p + rho_0^p), rho_c = (s^2 + (u - c)^2)^-1/2 the density of its nodes
    (p = :data:`PARTITION_POWER`), so that each integrates the part around its own centre. ln Z is the logsumexp of
    g(u_k) + ln share + ln(s cosh t_k dt) over both; the moments are weighted sums of u_k - u* (no cancellation).
    """
    mean, variance, y, w, o = jnp.broadcast_arrays(*(jnp.asarray(a, dtype=jnp.float64)
                                                     for a in (mean, variance, y, weight, opposite)))
    m = y * mean
    mode, _ = probit_mode(m, variance, w, o)
    width = 1.0 / jnp.sqrt(1.0 / variance + w + o)
    centres = jnp.stack([mode, jnp.zeros_like(mode)], axis=-1)[..., None]  # (..., 2, 1): the mode and the bend
    width, m, variance, mode, w, o = (a[..., None, None] for a in (width, m, variance, mode, w, o))
    reach = jnp.arcsinh((QUADRATURE_REACH * jnp.sqrt(variance) + jnp.abs(mode - centres)) / width)
    t = reach * jnp.asarray(_NODES)
    u = centres + width * jnp.sinh(t)  # (..., 2, N)
    log_density = -0.5 * jnp.log(width[..., None] ** 2 + (u[..., None, :] - centres[..., None, :, :]) ** 2)  # (..., 2, 2, N)
    log_share = (PARTITION_POWER * jnp.diagonal(log_density, axis1=-3, axis2=-2).swapaxes(-1, -2)
                 - jax.nn.logsumexp(PARTITION_POWER * log_density, axis=-2))
    log_plus, log_minus = log_normal_cdf_pair(u)
    log_terms = (-0.5 * (u - m) ** 2 / variance - 0.5 * jnp.log(variance) - _HALF_LOG_2PI
                 + w * log_plus + o * log_minus
                 + log_share + jnp.log(width * jnp.cosh(t) * reach * (_NODES[1] - _NODES[0])))
    log_z = jax.nn.logsumexp(log_terms, axis=(-2, -1))
    p = jnp.exp(log_terms - log_z[..., None, None])
    offset = u - mode
    shift = jnp.sum(p * offset, axis=(-2, -1))
    spread = jnp.sum(p * (offset - shift[..., None, None]) ** 2, axis=(-2, -1))
    return TiltedMoments(log_z, y * (mode[..., 0, 0] + shift), spread)
