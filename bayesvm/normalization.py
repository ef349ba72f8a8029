"""The normalisation factor N(D) of the evidence.

P(D | C, K) = Q(D) / N(D), with N(D) = E_{theta ~ GP}[N(theta)^n] and
N(theta) = E_x[nu(theta(x))] (theory: "The normalisation factor"). With M input points
x_1..x_M standing in for the input distribution and S prior draws,

    ln N(D) ~= ln (1/S) sum_s exp( n ln( (1/M) sum_j nu(theta^(s)_j) ) ).

The GP prior is K = k0 * base + k_b: a draw is theta = sqrt(k0) f + sqrt(k_b) b
with f ~ N(0, base) and an independent scalar b ~ N(0, 1), so one Cholesky of
the base matrix serves every amplitude, offset and C, and the same standard
normals (common random numbers) make the estimate a smooth function of the
hyperparameters.

Warning, measured (theory: "The normalisation factor"): this plain estimator is biased low as n
grows, because the mean of N(theta)^n is carried by rare draws; its own
standard error then looks small. The effective sample size of the weights is
the diagnostic, and :func:`log_normalization` warns when it is low.

:func:`log_normalization` also dispatches to the better estimators:
``method="annealed"`` (tempered SMC with elliptical slice sampling over the
same integral, :mod:`bayesvm.annealing`) and ``method="ep"`` (expectation
propagation on the single-draw identity N(D) = E_theta[prod_i nu(theta(x_i))]
with the n training inputs as the draw from Q^n (theory: "The single-draw
identity"), :mod:`bayesvm.ep`;
deterministic, so its standard error is 0, but it is an approximation: 0.7-2
nats low where nu's two modes matter, and tens of nats where the latents are
strongly correlated; theory: "Expectation propagation").
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from ._linalg import psd_cholesky
from ._precision import float64
from ._validation import check_inputs, check_kernel, check_positive
from .annealing import annealed_log_normalization
from .ep import ep_log_normalization
from .kernels import Kernel, gram_matrix
from .model import log_nu

Array = jax.Array

__all__ = [
    "NormalizationEstimate",
    "PriorDraws",
    "INPUT_CHOICES",
    "normalization_inputs",
    "prior_draws",
    "log_normalization_from_draws",
    "log_normalization",
    "METHODS",
]

INPUT_CHOICES = ("training", "gaussian", "box")
#: estimators of ln N(D), each one integral: over the n training inputs ("annealed", "ep") or over M stand-in
#: inputs ("annealed-stand-in", "prior"); see :func:`log_normalization`
METHODS = ("annealed", "ep", "annealed-stand-in", "prior")
#: the methods that integrate over the n training inputs themselves (the single-draw identity)
TRAINING_INPUT_METHODS = ("annealed", "ep")
#: below this effective sample size the plain estimate is flagged as unreliable
_MIN_ESS = 100.0


class NormalizationEstimate(NamedTuple):
    """An estimate of ln N(D) with its standard error and effective sample size.

    ``method="prior"``: ``ess`` is the effective number of the ``n_samples``
    prior draws; ``"annealed"``: the effective number of the ``n_samples``
    independent SMC runs whose spread gives ``se``; ``"ep"``: deterministic,
    ``se = 0``, ``ess = inf``, ``n_samples = 0``.
    """

    value: Array
    se: Array
    ess: Array
    n_samples: Array


class PriorDraws(NamedTuple):
    """Unit-amplitude prior draws at M inputs: f (S, M) ~ N(0, base), b (S,) ~ N(0, 1)."""

    f: Array
    b: Array


def normalization_inputs(X, choice="training", *, max_inputs: int = 500, random_state=0) -> np.ndarray:
    """The M input points that stand in for the input distribution Q(x).

    ``choice``: ``"training"`` (the rows of X, subsampled without replacement
    to at most ``max_inputs``), ``"gaussian"`` (``max_inputs`` draws from a
    Gaussian with the mean and covariance of X), ``"box"`` (``max_inputs``
    uniform draws from the bounding box of X), or an explicit array.
    """
    X = check_inputs(X)
    rng = np.random.default_rng(random_state)
    if not isinstance(choice, str):
        return check_inputs(choice, name="inputs", n_features=X.shape[1])
    if choice == "training":
        if X.shape[0] <= max_inputs:
            return X
        return X[np.sort(rng.choice(X.shape[0], size=max_inputs, replace=False))]
    if choice == "gaussian":
        cov = np.atleast_2d(np.cov(X, rowvar=False))
        return rng.multivariate_normal(X.mean(axis=0), cov, size=max_inputs, method="eigh")
    if choice == "box":
        return rng.uniform(X.min(axis=0), X.max(axis=0), size=(max_inputs, X.shape[1]))
    raise ValueError(f"inputs must be one of {INPUT_CHOICES} or an array of input points; got {choice!r}")


@float64
def prior_draws(kernel: Kernel, inputs, *, n_samples: int = 2000, random_state=0) -> PriorDraws:
    """Unit-amplitude GP prior draws at ``inputs`` for the kernel's shape (one Cholesky)."""
    inputs = jnp.asarray(inputs)
    base = np.asarray(gram_matrix(kernel.replace(amplitude=1.0, offset=0.0), inputs))
    L = psd_cholesky(base)
    key_f, key_b = jax.random.split(jax.random.PRNGKey(random_state))
    z = jax.random.normal(key_f, (n_samples, inputs.shape[0]), dtype=jnp.float64)
    b = jax.random.normal(key_b, (n_samples,), dtype=jnp.float64)
    return PriorDraws(f=z @ jnp.asarray(L).T, b=b)


@float64
@jax.jit
def log_normalization_from_draws(draws: PriorDraws, amplitude, offset, C, n) -> NormalizationEstimate:
    """ln N(D) from common prior draws (pure; vmap over amplitude, offset, C, n).

    Returns the log-mean-exp estimate, its delta-method standard error
    sd(w) / (sqrt(S) mean(w)) and the effective sample size
    (sum w)^2 / sum w^2 of the weights w_s = N(theta^(s))^n.
    """
    theta = jnp.sqrt(amplitude) * draws.f + jnp.sqrt(offset) * draws.b[:, None]
    n_inputs = theta.shape[1]
    log_mean_nu = logsumexp(log_nu(theta, C), axis=1) - jnp.log(n_inputs)
    log_w = n * log_mean_nu
    S = log_w.shape[0]
    value = logsumexp(log_w) - jnp.log(S)
    w = jnp.exp(log_w - jnp.max(log_w))
    ess = jnp.sum(w) ** 2 / jnp.sum(w**2)
    se = jnp.std(w, ddof=1) / (jnp.sqrt(S) * jnp.mean(w))
    return NormalizationEstimate(value=value, se=se, ess=ess, n_samples=jnp.asarray(S))


@float64
def log_normalization(
    *,
    kernel: Kernel,
    C: float,
    n: int,
    inputs,
    method: str = "annealed",
    n_samples: int = 2000,
    max_inputs: int = 500,
    random_state=0,
) -> NormalizationEstimate:
    """Estimate ln N(D) for n training points; ``method`` names both the integral and the estimator.

    Over the n training inputs (``inputs`` must be those n points; theory:
    "The single-draw identity"), ln N(D) ~= ln E_theta[prod_i nu(theta(x_i))]:

    * ``"annealed"`` (default): tempered SMC with elliptical slice moves
      (:func:`bayesvm.annealing.annealed_log_normalization`, route "product"),
      with a standard error from independent runs; the reference estimator;
    * ``"ep"``: expectation propagation (:func:`bayesvm.ep.ep_log_normalization`),
      deterministic but tens of nats low where the latents are strongly
      correlated (theory: "Expectation propagation").

    Over M stand-in inputs (``inputs`` subsampled to ``max_inputs``; theory:
    "The normalisation factor"), ln N(D) ~= ln E_theta[(mean_j nu(theta(x_j)))^n]:

    * ``"annealed-stand-in"``: tempered SMC (route "mean");
    * ``"prior"``: plain sampling from the GP prior, biased low by many nats
      at realistic n (it warns when its effective sample size is low).

    Parameters
    ----------
    kernel, C : hyperparameters.
    n : number of training points (the exponent).
    inputs : the n training inputs, or M stand-in points (see above and
        :func:`normalization_inputs`).
    n_samples : prior draws S (``"prior"`` only).
    random_state : seed (fix it for common random numbers across hyperparameters).
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")
    kernel = check_kernel(kernel)
    C = check_positive(C, "C")
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer (the number of training points); got {n!r}")
    if method in TRAINING_INPUT_METHODS:
        inputs = check_inputs(inputs, name="inputs")
        if inputs.shape[0] != n:
            raise ValueError(
                f"method={method!r} integrates over the n training inputs: n = {n} but inputs has "
                f"{inputs.shape[0]} rows (use 'annealed-stand-in' for stand-in inputs)"
            )
    if method == "annealed":
        result = annealed_log_normalization(kernel, C, int(n), inputs, route="product", key=random_state)
        return _from_annealing(result)
    if method == "ep":
        # only ln Z is used: stop once it has settled (the nu sites keep creeping long after ln Z has settled)
        result = ep_log_normalization(gram_matrix(kernel, jnp.asarray(inputs)), C, log_z_tol=1e-6)
        if not bool(result.converged):
            warnings.warn("EP for ln N(D) did not converge; the value is unreliable", RuntimeWarning, stacklevel=3)
        zero = jnp.zeros(())
        return NormalizationEstimate(value=result.log_z, se=zero, ess=jnp.asarray(jnp.inf), n_samples=zero)
    inputs = normalization_inputs(inputs, "training", max_inputs=max_inputs, random_state=random_state)
    if method == "annealed-stand-in":
        return _from_annealing(annealed_log_normalization(kernel, C, int(n), inputs, route="mean", key=random_state))
    n_samples = int(check_positive(n_samples, "n_samples"))
    draws = prior_draws(kernel, inputs, n_samples=n_samples, random_state=random_state)
    estimate = log_normalization_from_draws(draws, kernel.amplitude, kernel.offset, C, n)
    warn_if_unreliable(estimate)
    return estimate


def _from_annealing(result) -> NormalizationEstimate:
    """An annealed estimate in this module's form (``n_samples`` counts the independent runs)."""
    return NormalizationEstimate(
        value=jnp.asarray(result.value), se=jnp.asarray(result.se), ess=jnp.asarray(result.ess),
        n_samples=jnp.asarray(result.n_runs),
    )


def warn_if_unreliable(estimate: NormalizationEstimate) -> None:
    """Warn when a prior-sampling estimate rests on few effective draws."""
    ess = float(estimate.ess)
    if ess < _MIN_ESS:
        warnings.warn(
            f"ln N(D) by plain prior sampling rests on {ess:.1f} effective draws of {int(estimate.n_samples)}: "
            "the estimate is likely biased low by several nats and its standard error is unreliable (the mean of "
            "N(theta)^n is carried by rare draws that a finite sample usually misses). Use more samples or an "
            "annealed estimator.",
            RuntimeWarning,
            stacklevel=4,  # warn_if_unreliable, log_normalization, its float64 wrapper, the caller
        )
