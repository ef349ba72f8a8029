"""ln N(D) with the prior's common direction integrated out by quadrature, and the rest by tempered SMC.

Split the latents theta ~ N(0, K) over the training points (entries with ``mask`` 1; padding entries are
independent and left out) along the direction u = mask:

    theta = s u + r,   s = u^T K^-1 theta / (u^T K^-1 u),

s the generalised-least-squares mean of the theta_i under K. Under the prior s ~ N(0, v), v = 1 / (u^T K^-1 u),
independently of r ~ N(0, F F^T), with F = S - v u a^T for any square-root factor S S^T = K and S a = u
(whitened, z = t a / |a| + z_perp gives s = t / |a| and r = S z_perp). nu is even, and so is the prior of (s, r)
under theta -> -theta, so

    N(D) = E_theta[prod_i nu(theta_i)] = 2 int_0^inf N(s; 0, v) h(s) ds,   h(s) = E_r[prod_i nu(s + r_i)]

(theory: "The normalisation factor", "The common direction by quadrature"). Where the amplitude is tiny, nearly
all of N(D) lies where every |theta_i| has reached the margin, at a common value s far out in the prior's tail
(s / sqrt(v) of 20 and more): tempered SMC over theta must carry its particles from s near 0 at small temperatures
to one of two far modes s ~ +-1 at the last, and its runs disagree by tens of nats. At a fixed s there is no such
jump, so h(s) is tempered SMC's ordinary kind of integral, and the one-dimensional integral over s is a
quadrature on a grid that finds the peak of N(s; 0, v) h(s) by itself (:func:`quadrature_log_normalization`).

Every run's estimate of h(s_j) is unbiased, so each run index r gives an unbiased estimate of the quadrature
sum (run r at every grid point); those R quadratures are the estimate's runs, with the same mean, standard error
and agreement rule as tempered SMC's (:class:`QuadratureResult`).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import logsumexp

from .._precision import float64
from .annealing import (
    DEFAULT_MCMC_STEPS,
    DEFAULT_RUNS,
    DEFAULT_TARGET_ESS,
    MIN_EFFECTIVE_RUNS,
    annealed_log_expectation,
    as_key,
    mean_of_runs,
    product_route_log_likelihood,
)

Array = jax.Array

__all__ = ["CommonDirection", "common_direction", "shifted_log_likelihood", "QuadratureResult",
           "quadrature_log_normalization", "DISCRETISATION_TOLERANCE"]

#: the largest error, in nats, of the quadrature rule a trusted estimate may carry: the trapezoid rule on the
#: final grid against the same rule on every other point (a third of their difference, the Richardson estimate of
#: the finer rule's error)
DISCRETISATION_TOLERANCE = 0.1


class CommonDirection(NamedTuple):
    """The prior split along the common direction u (module docstring): theta = s u + r with s ~ N(0, ``variance``)
    and r = ``factor`` z, z ~ N(0, I), independent of s."""

    direction: Array
    variance: Array
    factor: Array


@float64
@jax.jit
def common_direction(chol: Array, mask: Array) -> CommonDirection:
    """The split of the prior with square-root factor ``chol`` (M, M) along u = ``mask``: a = chol^+ u (least
    squares, so an eigen-factor of a singular K serves as well as a Cholesky factor), v = 1 / |a|^2,
    F = chol - v u a^T. Where u is not in chol's range (chol a != u) the variance is NaN."""
    a = jnp.linalg.lstsq(chol, mask)[0]
    variance = 1.0 / jnp.dot(a, a)
    resolved = jnp.allclose(chol @ a, mask, atol=1e-8 * jnp.max(jnp.abs(chol)))
    return CommonDirection(mask, jnp.where(resolved, variance, jnp.nan), chol - variance * jnp.outer(mask, a))


@float64
def shifted_log_likelihood(r: Array, s: Array | float, C: Array | float, mask: Array) -> Array:
    """ln prod_i nu(s + r_i) over the entries with ``mask`` 1."""
    return product_route_log_likelihood(r + s * mask, C, mask)


@dataclasses.dataclass(frozen=True)
class QuadratureResult:
    """ln N(D) by :func:`quadrature_log_normalization` and its diagnostics.

    value, se, ess, log_z_runs
        As :class:`bayesvm.normalization.annealing.AnnealingResult`'s, over the R quadratures (run r of the inner
        tempered SMC at every grid point, summed by the rule): ln of their mean, its delta-method standard error,
        their effective number.
    grid, log_integrand
        The final grid of s (J,) and ln[N(s_j; 0, v) h(s_j)] there, h pooled over the runs.
    discretisation_error
        |ln T_h - ln T_2h| / 3 with T_h the trapezoid rule on the grid and T_2h on every other point, in nats.
    variance
        v, the prior variance of s.
    inner_evaluations
        Grid points at which h was estimated, the screen's included.
    n_particles, n_runs, n_mcmc_steps
        The final grid's inner tempered SMC.
    """

    value: float
    se: float
    ess: float
    log_z_runs: np.ndarray
    grid: np.ndarray
    log_integrand: np.ndarray
    discretisation_error: float
    variance: float
    inner_evaluations: int
    n_particles: int
    n_runs: int
    n_mcmc_steps: int
    settled: bool = True
    guided: bool = False
    stopped_above: float | None = None
    particles: None = None

    @property
    def runs_agree(self) -> bool:
        return bool(self.ess >= min(0.5 * self.n_runs, MIN_EFFECTIVE_RUNS))

    @property
    def trusted(self) -> bool:
        return self.runs_agree and self.discretisation_error <= DISCRETISATION_TOLERANCE


@float64
def quadrature_log_normalization(chol, C: float, mask=None, *, key=0, n_particles: int = 128,
                                 n_runs: int = DEFAULT_RUNS, n_mcmc_steps: int = DEFAULT_MCMC_STEPS,
                                 target_ess: float = DEFAULT_TARGET_ESS, screen_particles: int = 64,
                                 screen_runs: int = 4, screen_points: int = 17, grid_points: int = 25,
                                 window: float = 15.0, max_zooms: int = 4) -> QuadratureResult | None:
    """ln N(D) = ln 2 + ln int_0^inf N(s; 0, v) h(s) ds (module docstring) on the prior with square-root factor
    ``chol`` (M, M), the training entries ``mask`` (0/1, default all), at ``C``; None where the prior has no common
    direction (u outside chol's range).

    The grid finds the integrand's peak by itself: a screen of ``screen_points`` points over [0, s_max] with a
    small inner budget (``screen_runs`` x ``screen_particles``), where s_max = sqrt(2 v (window + 15 - ln h(0)))
    bounds the integrand below its value at 0 by more than ``window`` + 15 nats (ln nu <= 0, so
    ln[N(s; 0, v) h(s)] <= ln N(s; 0, v)); then the screen zooms, up to ``max_zooms`` times, onto the span of its
    points within ``window`` nats of its largest value and one point either side, until at least 7 points lie in
    it. The final grid (``grid_points``, odd, on that span) takes the full inner budget (``n_runs`` x
    ``n_particles``, ``n_mcmc_steps`` slice moves per temperature, schedule by ``target_ess``), and the trapezoid
    rule sums it. The mass outside the span lies more than ``window`` nats below the peak by the screen's
    estimates.
    """
    chol = jnp.asarray(chol, dtype=jnp.float64)
    mask = jnp.ones(chol.shape[0], dtype=chol.dtype) if mask is None else jnp.asarray(mask, dtype=chol.dtype)
    if grid_points < 5 or grid_points % 2 == 0:
        raise ValueError(f"grid_points must be an odd number of at least 5; got {grid_points}")
    split = common_direction(chol, mask)
    variance = float(split.variance)
    if not math.isfinite(variance):
        return None
    base = as_key(key)
    calls = iter(range(1 << 30))

    def log_h(grid: np.ndarray, runs: int, particles: int) -> np.ndarray:
        """ln of each run's estimate of h at every grid point, (J, runs)."""
        with warnings.catch_warnings():  # the inner runs' agreement is judged by the quadratures' (their sum's)
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.stack([annealed_log_expectation(
                split.factor, shifted_log_likelihood, args=(s, C, mask), key=jax.random.fold_in(base, next(calls)),
                n_particles=particles, n_runs=runs, n_mcmc_steps=n_mcmc_steps, target_ess=target_ess).log_z_runs
                for s in grid])

    def log_prior(grid: np.ndarray) -> np.ndarray:
        return -0.5 * grid**2 / variance - 0.5 * math.log(2.0 * math.pi * variance)

    def screened(grid: np.ndarray) -> np.ndarray:
        return log_prior(grid) + logsumexp(log_h(grid, screen_runs, screen_particles), axis=1) - math.log(screen_runs)

    at_zero = float(screened(np.zeros(1))[0] - log_prior(np.zeros(1))[0])
    lower, upper = 0.0, math.sqrt(2.0 * variance * (window + 15.0 - at_zero))
    evaluations = 1
    for _ in range(max_zooms + 1):
        grid = np.linspace(lower, upper, screen_points)
        values = screened(grid)
        evaluations += screen_points
        inside = np.flatnonzero(values >= np.max(values) - window)
        lower, upper = grid[max(inside[0] - 1, 0)], grid[min(inside[-1] + 1, screen_points - 1)]
        if inside.size >= 7:
            break
    grid = np.linspace(lower, upper, grid_points)
    log_terms = log_prior(grid)[:, None] + log_h(grid, n_runs, n_particles)  # (J, R)
    log_weights = np.log(np.diff(grid)[0]) + np.log(np.r_[0.5, np.ones(grid_points - 2), 0.5])
    log_runs = math.log(2.0) + logsumexp(log_weights[:, None] + log_terms, axis=0)
    pooled_terms = logsumexp(log_terms, axis=1) - math.log(n_runs)
    coarse = math.log(2.0) + math.log(2.0 * np.diff(grid)[0]) + logsumexp(
        np.log(np.r_[0.5, np.ones(grid_points // 2 - 1), 0.5]) + pooled_terms[::2])
    fine = math.log(2.0) + logsumexp(log_weights + pooled_terms)
    value, se, ess = mean_of_runs(log_runs)
    return QuadratureResult(
        value=value, se=se, ess=ess, log_z_runs=log_runs, grid=grid,
        log_integrand=pooled_terms, discretisation_error=abs(fine - coarse) / 3.0, variance=variance,
        inner_evaluations=evaluations + grid_points, n_particles=n_particles, n_runs=n_runs,
        n_mcmc_steps=n_mcmc_steps)
