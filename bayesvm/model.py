"""The probabilistic model behind the SVM (Sollich 2002), in one place.

Notation (theory: "From the SVM objective to a prior and a likelihood"): latent output theta = theta(x), labels
y in {-1, +1}, hinge loss l(z) = max(0, 1 - z) and the unnormalised
likelihood

    Q(y | theta) = kappa(C) exp(-C l(y theta)),  kappa(C) = 1 / (1 + exp(-2C)).

nu(theta) = Q(+1 | theta) + Q(-1 | theta) <= 1 is the probability that a
label is emitted at all; 1 - nu is the "don't know" probability. Everything
is computed in log space with stable primitives.

Reference: P. Sollich, "Bayesian methods for support vector machines:
evidence and predictive class probabilities", Machine Learning 46 (2002).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ._precision import float64

Array = jax.Array

__all__ = [
    "log_kappa",
    "hinge",
    "log_label_likelihood",
    "log_nu",
    "label_log_odds",
    "label_probability",
]


@float64
def log_kappa(C: Array | float) -> Array:
    """ln kappa(C) = -ln(1 + exp(-2C)), the largest log-constant keeping nu <= 1."""
    return -jnp.logaddexp(0.0, -2.0 * jnp.asarray(C))


@float64
def hinge(z: Array) -> Array:
    """Hinge loss l(z) = max(0, 1 - z)."""
    return jnp.maximum(0.0, 1.0 - z)


@float64
def log_label_likelihood(y: Array, theta: Array, C: Array | float) -> Array:
    """ln Q(y | theta) = ln kappa(C) - C l(y theta)."""
    return log_kappa(C) - C * hinge(y * theta)


@float64
def log_nu(theta: Array, C: Array | float) -> Array:
    """ln nu(theta) = ln kappa(C) + ln[exp(-C l(theta)) + exp(-C l(-theta))]
                    = ln kappa(C) - C l(|theta|) + log1p(exp(-C |g(theta)|)),  |g(theta)| = |theta| + min(|theta|, 1),

    the larger of the two exponents, -C l(|theta|), taken out (g as in :func:`label_log_odds`: the two exponents
    differ by C g). Equals 0 exactly at |theta| = 1 and is negative elsewhere.

    This is the integrand of ln N(D) that tempered SMC evaluates at every slice step, on every particle and
    training input: one exp and one log1p per entry, rather than a ``logaddexp`` of the two exponents.
    """
    magnitude = jnp.abs(theta)
    return log_kappa(C) - C * hinge(magnitude) + jnp.log1p(jnp.exp(-C * (magnitude + jnp.minimum(magnitude, 1.0))))


@float64
def label_log_odds(theta: Array, C: Array | float) -> Array:
    """ln[Q(+1|theta) / Q(-1|theta)] = C g(theta).

    g(theta) = 2 theta for |theta| <= 1 and sign(theta) (1 + |theta|) beyond;
    it is odd and increasing, so the log-odds have the sign of theta.
    """
    g = jnp.where(jnp.abs(theta) <= 1.0, 2.0 * theta, jnp.sign(theta) * (1.0 + jnp.abs(theta)))
    return C * g


@float64
def label_probability(theta: Array, C: Array | float) -> Array:
    """P(y = +1 | theta) = Q(+1) / (Q(+1) + Q(-1)) = sigmoid(C g(theta))."""
    return jax.nn.sigmoid(label_log_odds(theta, C))
