"""Inputs and prior draws for the plain estimate of the normalisation factor N(D).

P(D | C, K) = Q(D) / N(D), with N(D) = E_{theta ~ GP}[N(theta)^n] and
N(theta) = E_x[nu(theta(x))] (theory: "The normalisation factor"). With M input points
x_1..x_M standing in for the input distribution and S prior draws,

    ln N(D) ~= ln (1/S) sum_s exp( n ln( (1/M) sum_j nu(theta^(s)_j) ) ).

The GP prior is K = k0 * base + k_b: a draw is theta = sqrt(k0) f + sqrt(k_b) b
with f ~ N(0, base) and an independent scalar b ~ N(0, 1), so one Cholesky of
the base matrix serves every amplitude, offset and C, and the same standard
normals (common random numbers) make the estimate a smooth function of the
hyperparameters.

Warning (theory: "The normalisation factor"; documentation: normalisation, "Measurements on toy problems"):
this plain estimator is biased low as n grows, because the mean of N(theta)^n is carried by rare draws; its own
standard error then looks small. The effective sample size of the weights is the diagnostic. The estimators of
ln N(D), this one included, are compared in :mod:`bayesvm.evidence.approximations`;
:func:`bayesvm.log_normalization` computes any of them.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from .._linalg import psd_factor
from .._precision import float64
from .._validation import check_inputs
from ..compilation import jit
from ..kernels import Kernel, gram_matrix
from ..model import log_nu

Array = jax.Array

__all__ = ["PriorDraws", "DrawsEstimate", "INPUT_CHOICES", "PRIOR_DRAWS", "STAND_IN_INPUTS", "GRID_PRIOR_DRAWS",
           "GRID_STAND_IN_INPUTS", "normalization_inputs", "prior_draws", "draws_from_base",
           "log_normalization_from_draws"]

INPUT_CHOICES = ("training", "gaussian", "box")

# Every default of plain prior sampling (log_evidence, log_normalization, the estimators, the grid, the command line):
# one for an estimate at one point, one for a grid, which estimates ln N(D) at each of its many cells.

#: prior draws S of one estimate at one point: its standard error falls as 1/sqrt(S), its bias at realistic n does not
PRIOR_DRAWS = 2000
#: stand-in inputs M of one estimate at one point (the training inputs subsampled to M, or M drawn); cost grows with M
STAND_IN_INPUTS = 500
#: prior draws per cell of a grid, which evaluates S x M latents at every one of its many cells: fewer than one point's
GRID_PRIOR_DRAWS = 1000
#: stand-in inputs of a grid, for the same reason
GRID_STAND_IN_INPUTS = 300


class DrawsEstimate(NamedTuple):
    """The plain estimate of ln N(D) from prior draws, its standard error and the draws' effective number."""

    value: Array
    se: Array
    ess: Array


class PriorDraws(NamedTuple):
    """Unit-amplitude prior draws at M inputs: f (S, M) ~ N(0, base), b (S,) ~ N(0, 1)."""

    f: Array
    b: Array


def normalization_inputs(X, choice="training", *, max_inputs: int = STAND_IN_INPUTS, random_state=0) -> np.ndarray:
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
def prior_draws(kernel: Kernel, inputs, *, n_samples: int = PRIOR_DRAWS, random_state=0) -> PriorDraws:
    """Unit-amplitude GP prior draws at ``inputs`` for the kernel's shape (one factorisation)."""
    base = gram_matrix(kernel.replace(amplitude=1.0, offset=0.0), jnp.asarray(inputs))
    return draws_from_base(base, n_samples=n_samples, random_state=random_state)


@float64
def draws_from_base(base, *, n_samples: int = PRIOR_DRAWS, random_state=0) -> PriorDraws:
    """S = ``n_samples`` draws f ~ N(0, base) (through :func:`bayesvm._linalg.psd_factor`) and b ~ N(0, 1)."""
    L = jnp.asarray(psd_factor(np.asarray(base, dtype=np.float64)))
    key_f, key_b = jax.random.split(jax.random.PRNGKey(random_state))
    z = jax.random.normal(key_f, (n_samples, L.shape[0]), dtype=jnp.float64)
    b = jax.random.normal(key_b, (n_samples,), dtype=jnp.float64)
    return PriorDraws(f=z @ L.T, b=b)


@float64
@jit
def log_normalization_from_draws(draws: PriorDraws, amplitude, offset, C, n) -> DrawsEstimate:
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
    return DrawsEstimate(value=value, se=se, ess=ess)
