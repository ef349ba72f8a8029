"""Moments of a Gaussian times one SVM likelihood site (the "tilted" distributions of EP).

For a Gaussian N(theta; mean, variance) times a hinge factor exp(-C l(s theta)),
a label likelihood Q(y | theta) or the label-emission probability nu(theta),
the normaliser ln Z and the mean and variance of the product, in closed form
(Gaussian CDF and Mills-ratio terms), stable in every tail. They are the
building blocks of expectation propagation (:mod:`bayesvm.inference.ep`, theory:
"Expectation propagation") and of the posterior-averaged class
probabilities (:mod:`bayesvm.posterior`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import erfcx

from .._precision import float64
from ..model import log_kappa

Array = jax.Array

__all__ = [
    "TiltedMoments",
    "log_mills_ratio",
    "log_upper_tail",
    "log_normal_cdf_pair",
    "standard_tail_moments",
    "hinge_tilted_moments",
    "label_tilted_moments",
    "nu_tilted_moments",
]

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_HALF_LOG_HALF_PI = 0.5 * math.log(0.5 * math.pi)
# Above this standardised truncation point the tail shift and variance come
# from Laplace's continued fraction (the direct forms lose ~eps * alpha^2).
_CONTINUED_FRACTION_FROM = 4.0
_CONTINUED_FRACTION_TERMS = 60
# from here on log_mills_ratio uses the asymptotic series of R (see there)
_ASYMPTOTIC_FROM = 30.0


def _as_float(x) -> Array:
    """x as a floating-point array (integers promoted to the default float)."""
    return jnp.asarray(x, dtype=jnp.result_type(float, x))


def _log_mills_ratio_abs(x: Array) -> Array:
    """ln R(|x|): sqrt(pi/2) erfcx(|x| / sqrt 2), an asymptotic series far out (one erfcx serves both tails)."""
    ax = jnp.abs(x)
    # (jnp.where, not jnp.minimum / jnp.clip, whose gradient is halved at a tie)
    near = jnp.where(ax < _ASYMPTOTIC_FROM, ax, 0.0)
    right = _HALF_LOG_HALF_PI + jnp.log(erfcx(near / math.sqrt(2.0)))
    # jax's erfcx returns 0 for float64 arguments in [26.54, 26.64] (jax 0.10.2; checked), i.e. x near 37.6;
    # from x = 30 on, R(x) = (1/x) sum_k (-1)^k (2k-1)!! / x^(2k) is exact to rounding with 8 terms
    far = jnp.where(ax >= _ASYMPTOTIC_FROM, ax, _ASYMPTOTIC_FROM)
    inv2 = 1.0 / (far * far)
    series = 0.0
    for k in range(8, 0, -1):
        series = -(2 * k - 1) * inv2 * (1.0 + series)
    return jnp.where(ax >= _ASYMPTOTIC_FROM, jnp.log1p(series) - jnp.log(far), right)


def _log_upper_tail_from(x: Array, log_mills_abs: Array) -> Array:
    """ln Phi(-x) given ln R(|x|): t = ln Phi(-|x|) = ln R(|x|) - x^2/2 - ln sqrt(2 pi) for x >= 0, ln(1 - e^t) below."""
    t = log_mills_abs - 0.5 * x * x - _HALF_LOG_2PI
    return jnp.where(x >= 0.0, t, jnp.log1p(-jnp.exp(t)))  # t <= ln 1/2: no cancellation


@float64
def log_mills_ratio(x: Array) -> Array:
    """ln R(x), R(x) = Phi(-x) / phi(x) (the Mills ratio of the standard normal).

    x >= 0: R = sqrt(pi/2) erfcx(x / sqrt 2) (no underflow in the far tail);
    x < 0: ln R = ln Phi(-x) + x^2/2 + ln sqrt(2 pi), ln Phi(-x) = ln(1 - Phi(-|x|))
    with Phi(-|x|) <= 1/2 from the same erfcx (no cancellation).
    """
    x = _as_float(x)
    log_mills_abs = _log_mills_ratio_abs(x)
    left = _log_upper_tail_from(x, log_mills_abs) + 0.5 * x * x + _HALF_LOG_2PI
    return jnp.where(x >= 0.0, log_mills_abs, left)


@float64
def log_upper_tail(x: Array) -> Array:
    """ln Phi(-x) = ln P(Z > x) for a standard normal Z, in every tail, from one erfcx.

    ln R(|x|) - x^2/2 - ln sqrt(2 pi) = ln Phi(-|x|), which is the answer for
    x >= 0 and gives ln(1 - Phi(-|x|)) for x < 0 (:func:`log_mills_ratio`).
    The values of ``jax.scipy.special.log_ndtr(-x)`` at a fraction of its cost
    (that cost would dominate the low-rank ln N(D)'s smoothed nu; checked
    against scipy in the tests).
    """
    x = _as_float(x)
    return _log_upper_tail_from(x, _log_mills_ratio_abs(x))


@float64
def log_normal_cdf_pair(u: Array) -> tuple[Array, Array]:
    """(ln Phi(u), ln Phi(-u)) from one Mills ratio R(|u|) (the forms of :func:`log_upper_tail`):
    ln Phi(-|u|) = ln R(|u|) - u^2 / 2 - ln sqrt(2 pi), and the other side ln(1 - Phi(-|u|)), without cancellation."""
    u = _as_float(u)
    near = _log_upper_tail_from(jnp.abs(u), _log_mills_ratio_abs(u))  # ln Phi(-|u|)
    far = jnp.log1p(-jnp.exp(near))  # ln Phi(|u|)
    positive = u >= 0.0
    return jnp.where(positive, far, near), jnp.where(positive, near, far)


def _continued_fraction_step(carry: tuple[Array, Array], k: Array) -> tuple[tuple[Array, Array], None]:
    """d_k = k / (alpha + d_{k+1}), one term of :func:`_continued_fraction_tail`'s backward recursion. A module-level
    function, so that an eager call traces and compiles its scan once per shape, not once per call."""
    d_next, alpha = carry
    return (k / (alpha + d_next), alpha), None


def _continued_fraction_tail(alpha: Array) -> tuple[Array, Array]:
    """Shift t = lambda - alpha and variance w of N(0,1) truncated to [alpha, inf), large alpha.

    Laplace's continued fraction R(alpha) = 1/(alpha + d_1), d_k = k / (alpha + d_{k+1}),
    evaluated backwards, gives t = d_1 and, without cancellation,
    w = 1 - lambda t = d_1^2 d_2 (alpha + 2 d_2 - d_3) / 2 (derived in the
    documentation: expectation propagation, "Tilted moments of the hinge site").
    """

    ks = jnp.arange(_CONTINUED_FRACTION_TERMS, 2, -1, dtype=alpha.dtype)
    (d3, _), _ = jax.lax.scan(_continued_fraction_step, (jnp.zeros_like(alpha), alpha), ks)
    d2 = 2.0 / (alpha + d3)
    d1 = 1.0 / (alpha + d2)
    return d1, 0.5 * d1 * d1 * d2 * (alpha + 2.0 * d2 - d3)


@float64
def standard_tail_moments(alpha: Array) -> tuple[Array, Array]:
    """Moments of a standard normal truncated to [alpha, inf).

    Returns (t, w) with mean = alpha + t and variance = w, where
    lambda = phi(alpha) / Phi(-alpha) = 1 / R(alpha) is the inverse Mills ratio,
    t = lambda - alpha > 0 and w = 1 - lambda t in (0, 1]
    (Johnson, Kotz & Balakrishnan, Continuous Univariate Distributions 1, ch. 13).
    Stable for every real alpha: continued fraction above alpha = 4.
    """
    alpha = _as_float(alpha)
    lam = jnp.exp(-log_mills_ratio(alpha))
    t_direct = lam - alpha
    w_direct = 1.0 - lam * t_direct
    t_cf, w_cf = _continued_fraction_tail(jnp.maximum(alpha, _CONTINUED_FRACTION_FROM))
    far = alpha >= _CONTINUED_FRACTION_FROM
    return jnp.where(far, t_cf, t_direct), jnp.where(far, w_cf, w_direct)


class TiltedMoments(NamedTuple):
    """ln Z, mean and variance of cavity(theta) * site(theta) / Z."""

    log_z: Array
    mean: Array
    variance: Array


@float64
def hinge_tilted_moments(mean: Array, variance: Array, C: Array | float, sign: Array | float = 1.0) -> TiltedMoments:
    """Moments of N(theta; mean, variance) exp(-C l(s theta)), l(z) = max(0, 1 - z), s = +-1.

    With u = s theta ~ N(m, v), m = s mean, sigma = sqrt(v), b = (1 - m) / sigma:
      Z_1 = INT_{u>=1} N(u; m, v) du            = Phi(-b),
      Z_2 = INT_{u<1} N(u; m, v) e^{-C(1-u)} du = e^{C sigma (C sigma / 2 - b)} Phi(-a),
            a = C sigma - b  (the shifted Gaussian N(m + C v, v) cut at u = 1)
          = phi(b) R(a)     (R the Mills ratio; used when a >= 0).
    The tilted distribution is the mixture (weights Z_k / Z) of N(m, v) cut to
    [1, inf) and N(m + C v, v) cut to (-inf, 1); with (t_k, w_k) the standard
    tail moments at alpha_1 = b and alpha_2 = a,
      E[u] = 1 + sigma (p_1 t_1 - p_2 t_2),
      Var[u] = v [p_1 w_1 + p_2 w_2 + p_1 p_2 (t_1 + t_2)^2],
    which has no cancellation anywhere. Returns moments of theta = s u.
    The site carries no kappa(C) factor here.
    """
    mean, variance = _as_float(mean), _as_float(variance)
    sigma = jnp.sqrt(variance)
    m = sign * mean
    b = (1.0 - m) / sigma
    c_sigma = C * sigma
    a = c_sigma - b
    log_z1 = log_upper_tail(b)
    log_mills_a = _log_mills_ratio_abs(a)
    log_z2 = jnp.where(
        a >= 0.0,
        -0.5 * b * b - _HALF_LOG_2PI + log_mills_a,
        c_sigma * (0.5 * c_sigma - b) + _log_upper_tail_from(a, log_mills_a),
    )
    log_z = jnp.logaddexp(log_z1, log_z2)
    p1 = jax.nn.sigmoid(log_z1 - log_z2)
    p2 = jax.nn.sigmoid(log_z2 - log_z1)
    t1, w1 = standard_tail_moments(b)
    t2, w2 = standard_tail_moments(a)
    mean_u = 1.0 + sigma * (p1 * t1 - p2 * t2)
    var_u = variance * (p1 * w1 + p2 * w2 + p1 * p2 * (t1 + t2) ** 2)
    return TiltedMoments(log_z, sign * mean_u, var_u)


def _exponential_tail(mean: Array, variance: Array, sigma: Array, slope: Array, cut: Array) -> TiltedMoments:
    """ln INT_{u >= cut} N(u; mean, variance) e^{slope u} du, with the mean and variance of the normalised integrand.

    The integrand is e^{slope mean + slope^2 variance / 2} times N(u; mean + slope variance, variance), cut at
    ``cut``; with beta = (cut - mean) / sigma and alpha = beta - slope sigma (the cut in the shifted Gaussian's
    standard units), ln Z = slope cut - beta^2 / 2 - ln sqrt(2 pi) + ln R(alpha) for alpha >= 0 (R the Mills ratio:
    no overflow of the exponent far in the tail) and slope mean + slope^2 variance / 2 + ln Phi(-alpha) below; the
    moments are those of the truncated shifted Gaussian (:func:`standard_tail_moments`).
    """
    beta = (cut - mean) / sigma
    alpha = beta - slope * sigma
    log_mills = _log_mills_ratio_abs(alpha)
    log_z = jnp.where(alpha >= 0.0,
                      slope * cut - 0.5 * beta * beta - _HALF_LOG_2PI + log_mills,
                      slope * (mean + 0.5 * slope * variance) + _log_upper_tail_from(alpha, log_mills))
    shift, scaled_variance = standard_tail_moments(alpha)
    return TiltedMoments(log_z, cut + sigma * shift, variance * scaled_variance)


def _mirrored(moments: TiltedMoments) -> TiltedMoments:
    """The moments of -u from those of u."""
    return moments._replace(mean=-moments.mean)


def _interval_piece(mean: Array, variance: Array, sigma: Array, slope: Array) -> TiltedMoments:
    """ln INT_{-1 <= u < 1} N(u; mean, variance) e^{slope u} du and the normalised integrand's moments.

    The interval is the difference of two tails T1 - T2 taken on the side away from the shifted Gaussian's mean
    (upper tails from -1 and from 1 when it is <= 0, lower tails from 1 and from -1 above), so that
    r = Z_2 / Z_1 < 1 is small unless the interval is narrow next to sigma. With (mu_k, v_k) the tails' moments:
      ln Z = ln Z_1 + ln(1 - r),
      mean = mu_1 + r (mu_1 - mu_2) / (1 - r),
      var = v_1 + r (v_1 - v_2) / (1 - r) - r (mu_1 - mu_2)^2 / (1 - r)^2
    (the moments of the signed mixture (T1 - r T2) / (1 - r)).
    """
    # mirrored (u -> -u, the interval is symmetric) where the shifted centre lies above 0: then always upper tails
    sign = jnp.where(mean + slope * variance <= 0.0, 1.0, -1.0)
    first = _exponential_tail(sign * mean, variance, sigma, sign * slope, -1.0)
    second = _exponential_tail(sign * mean, variance, sigma, sign * slope, 1.0)
    r = jnp.exp(second.log_z - first.log_z)
    odds = r / (1.0 - r)
    gap = first.mean - second.mean
    return TiltedMoments(first.log_z + jnp.log1p(-r),
                         sign * (first.mean + odds * gap),
                         first.variance + odds * (first.variance - second.variance) - odds * gap * gap / (1.0 - r))


def _two_label_moments(mean: Array, variance: Array, C: Array | float, own: Array | float,
                       other: Array | float) -> TiltedMoments:
    """Moments of N(u; mean, variance) exp(-C [w l(u) + o l(-u)]), w = ``own``, o = ``other`` (no kappa).

    The exponent is piecewise linear with kinks at u = -1 and u = 1:
      u >= 1:       -C o (1 + u),
      -1 <= u < 1:  -C (w + o) + C (w - o) u,
      u < -1:       -C w (1 - u),
    so the tilted distribution is the mixture (weights Z_k / Z) of a Gaussian times an exponential on each piece:
    the upper tail from 1 and the lower tail from -1 (:func:`_exponential_tail`) and the interval
    (:func:`_interval_piece`); mean and variance by the law of total variance, which has no cancellation.
    """
    mean, variance = _as_float(mean), _as_float(variance)
    sigma = jnp.sqrt(variance)
    right = _exponential_tail(mean, variance, sigma, -C * other, 1.0)
    middle = _interval_piece(mean, variance, sigma, C * (own - other))
    left = _mirrored(_exponential_tail(-mean, variance, sigma, -C * own, 1.0))
    log_z = jnp.stack([right.log_z - C * other, middle.log_z - C * (own + other), left.log_z - C * own])
    total = jax.nn.logsumexp(log_z, axis=0)
    p = jnp.exp(log_z - total)
    means = jnp.stack([right.mean, middle.mean, left.mean])
    mean_t = jnp.sum(p * means, axis=0)
    variances = jnp.stack([right.variance, middle.variance, left.variance])
    return TiltedMoments(total, mean_t, jnp.sum(p * (variances + (means - mean_t) ** 2), axis=0))


@float64
def label_tilted_moments(mean: Array, variance: Array, C: Array | float, y: Array | float,
                         weight: Array | float = 1.0, opposite: Array | float | None = None) -> TiltedMoments:
    """Moments of N(theta; mean, variance) Q(y | theta)^w Q(-y | theta)^o, Q = kappa(C) exp(-C l(y theta)),
    w = ``weight`` >= 0, o = ``opposite`` >= 0.

    A weighted label's likelihood term is Q to the power w (theory: "Weights and repeated rows"):
    kappa(C)^w exp(-w C l(y theta)), the hinge site at penalty w C with w ln kappa(C) added to ln Z. An integer
    w is w copies of the label at one input; w = 0 is a flat site (ln Z = 0, the cavity's moments).
    ``opposite``: the weight of the other label at the same input, whose rows share the latent; one site then
    carries both labels' terms (a piecewise-linear exponent with three pieces, :func:`_two_label_moments`).
    None: no input carries both labels (the one-label site of :func:`hinge_tilted_moments`).
    """
    if opposite is None:
        hinge = hinge_tilted_moments(mean, variance, weight * C, y)
        return hinge._replace(log_z=hinge.log_z + weight * log_kappa(C))
    both = _two_label_moments(y * _as_float(mean), variance, C, weight, opposite)
    return TiltedMoments(both.log_z + (weight + opposite) * log_kappa(C), y * both.mean, both.variance)


@float64
def nu_tilted_moments(mean: Array, variance: Array, C: Array | float) -> TiltedMoments:
    """Moments of N(theta; mean, variance) nu(theta), nu = Q(+1 | theta) + Q(-1 | theta).

    The tilted distribution is the mixture of the two label-tilted ones with
    weights p_+- = Z_+- / (Z_+ + Z_-); ln Z = logsumexp of the two ln Z's,
    mean = p_+ m_+ + p_- m_-, variance = p_+ v_+ + p_- v_- + p_+ p_- (m_+ - m_-)^2.
    """
    plus = label_tilted_moments(mean, variance, C, 1.0)
    minus = label_tilted_moments(mean, variance, C, -1.0)
    log_z = jnp.logaddexp(plus.log_z, minus.log_z)
    p_plus = jax.nn.sigmoid(plus.log_z - minus.log_z)
    p_minus = jax.nn.sigmoid(minus.log_z - plus.log_z)
    mean_t = p_plus * plus.mean + p_minus * minus.mean
    var_t = p_plus * plus.variance + p_minus * minus.variance + p_plus * p_minus * (plus.mean - minus.mean) ** 2
    return TiltedMoments(log_z, mean_t, var_t)
