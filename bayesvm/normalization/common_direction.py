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
jump: the sign of every theta_i is set by s, and p(r | s) proportional to N(r; 0, F F^T) prod_i nu(s + r_i) has one
mode, which EP with the nu sites shifted by s finds (:func:`bayesvm.evidence.ep_low_rank.nu_weight_gaussian`), so
h(s) is estimated by tempered SMC started from EP's Gaussian
(:func:`bayesvm.normalization.ep_started.annealed_from_ep`'s integrand). The one-dimensional integral over s is a
quadrature on a grid that finds the peak of N(s; 0, v) h(s) by itself (:func:`quadrature_log_normalization`).
Measured at two corner points (400 rows, C 7.05 and 9.96, k0 0.020 and 0.023; documentation: normalisation,
"twenty-second session"), the inner runs at a fixed s near the peak spread by 0.15-0.20 nats from EP's Gaussian
against 0.6-6.1 from the prior, in 1.0-1.6 s against 2.4-11 s, and the prior-started value lay up to 20 nats low
where the latents are only weakly correlated.

Every run's estimate of h(s_j) is unbiased, so each run index r gives an unbiased estimate of the quadrature
sum (run r at every grid point); those R quadratures are the estimate's runs, with the same mean, standard error
and agreement rule as tempered SMC's (:class:`QuadratureResult`).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import logsumexp

from .._precision import float64
from ..evidence.ep_low_rank import nu_weight_gaussian
from ..compilation import jit
from ..low_rank import LowRankPrior
from .annealing import (
    DEFAULT_MCMC_STEPS,
    DEFAULT_RUNS,
    DEFAULT_TARGET_ESS,
    annealed_log_expectation,
    as_key,
    mean_of_runs,
    enough_effective_runs,
)
from .ep_started import RoutedEstimate, ep_started_factor, ep_started_log_likelihood

Array = jax.Array

__all__ = ["CommonDirection", "common_direction", "inner_log_z_runs", "QuadratureResult",
           "quadrature_log_normalization", "with_quadrature_fallback", "DISCRETISATION_TOLERANCE",
           "QUADRATURE_SLACK"]

#: the final grid's inner runs at the screen's peak are computed first; where their effective number is below this
#: fraction of the agreement floor (:func:`bayesvm.normalization.annealing.enough_effective_runs`: 4 of 16 runs),
#: the quadrature is abandoned there, untrusted, without the other points. Chosen from the two corners measured
#: (docs/normalisation.md): 2.1 effective runs at the peak where the whole quadrature reached 4.2 (untrusted), 7.8
#: where it reached 3.5 and 8.2 with two keys, 15.3-15.6 where it was trusted (15.8-16.0)
PROBE_RUNS_FRACTION = 0.5

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
@jit(rarely_run=True)
def common_direction(chol: Array, mask: Array) -> CommonDirection:
    """The split of the prior with square-root factor ``chol`` (M, M) along u = ``mask``: a = chol^+ u (least
    squares, so an eigen-factor of a singular K serves as well as a Cholesky factor), v = 1 / |a|^2,
    F = chol - v u a^T. Where u is not in chol's range (chol a != u) the variance is NaN."""
    a = jnp.linalg.lstsq(chol, mask)[0]
    variance = 1.0 / jnp.dot(a, a)
    resolved = jnp.allclose(chol @ a, mask, atol=1e-8 * jnp.max(jnp.abs(chol)))
    return CommonDirection(mask, jnp.where(resolved, variance, jnp.nan), chol - variance * jnp.outer(mask, a))


@float64
def inner_log_z_runs(split: CommonDirection, s: float, C: float, *, key, **options) -> np.ndarray:
    """Each tempered-SMC run's estimate of ln h(s) = ln E_r[prod_i nu(s + r_i)] (module docstring), started from
    EP's Gaussian of the whitened r = F w with the nu sites shifted by s (from the prior where EP does not
    converge); ``options`` go to :func:`bayesvm.normalization.annealing.annealed_log_expectation`."""
    F, shift = split.factor, s * split.direction
    start = nu_weight_gaussian(LowRankPrior(F, jnp.zeros(F.shape[0], dtype=F.dtype)), jnp.asarray(C, dtype=F.dtype),
                               mask=split.direction > 0, shift=shift)
    with warnings.catch_warnings():  # the inner runs' agreement is judged by the quadratures' (their sums')
        warnings.simplefilter("ignore", RuntimeWarning)
        return annealed_log_expectation(
            ep_started_factor(start, F), ep_started_log_likelihood,
            args=(start.mean, start.log_det_scale, F @ start.mean + shift, C, split.direction), key=key,
            **options).log_z_runs


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
    abandoned
        Whether the quadrature stopped after the final grid's point at the screen's peak, whose runs disagreed
        (:data:`PROBE_RUNS_FRACTION`): then ``grid`` is that point, ``log_z_runs`` its runs times the prior's
        density and the grid's span (a rough value, never trusted), and ``discretisation_error`` is infinite.
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
    abandoned: bool = False
    settled: bool = True
    guided: bool = False
    stopped_above: float | None = None
    particles: None = None

    @property
    def runs_agree(self) -> bool:
        return enough_effective_runs(self.ess, self.n_runs)

    @property
    def trusted(self) -> bool:
        return not self.abandoned and self.runs_agree and bool(self.discretisation_error <= DISCRETISATION_TOLERANCE)


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
    calls = itertools.count()

    def log_h(grid: np.ndarray, runs: int, particles: int, keys=None) -> np.ndarray:
        """ln of each run's estimate of h at every grid point, (J, runs); each point's key is the next of the
        sequence unless ``keys`` (one per point) are given."""
        keys = [jax.random.fold_in(base, next(calls)) for _ in grid] if keys is None else keys
        return np.stack([inner_log_z_runs(split, float(s), C, key=k, n_particles=particles, n_runs=runs,
                                          n_mcmc_steps=n_mcmc_steps, target_ess=target_ess)
                         for s, k in zip(grid, keys)])

    def log_prior(grid: np.ndarray) -> np.ndarray:
        return -0.5 * grid**2 / variance - 0.5 * math.log(2.0 * math.pi * variance)

    def screened(grid: np.ndarray) -> np.ndarray:
        return log_prior(grid) + logsumexp(log_h(grid, screen_runs, screen_particles), axis=1) - math.log(screen_runs)

    at_zero = float(screened(np.zeros(1))[0] - log_prior(np.zeros(1))[0])
    lower, upper = 0.0, math.sqrt(2.0 * variance * (window + 15.0 - at_zero))
    evaluations = 1
    for _ in range(max_zooms + 1):
        screen = np.linspace(lower, upper, screen_points)
        values = screened(screen)
        evaluations += screen_points
        inside = np.flatnonzero(values >= np.max(values) - window)
        lower, upper = screen[max(inside[0] - 1, 0)], screen[min(inside[-1] + 1, screen_points - 1)]
        if inside.size >= 7:
            break
    grid, spacing = np.linspace(lower, upper, grid_points, retstep=True)
    keys = [jax.random.fold_in(base, next(calls)) for _ in grid]
    # the final grid's point nearest the screen's peak first: where its runs already disagree badly, the sums over
    # the grid will too, and the other points are not computed
    peak = int(np.argmin(np.abs(grid - screen[np.argmax(values)])))
    at_peak = log_h(grid[peak:peak + 1], n_runs, n_particles, keys[peak:peak + 1])
    probe_ess = mean_of_runs(at_peak[0])[2]
    settings = dict(variance=variance, n_particles=n_particles, n_runs=n_runs, n_mcmc_steps=n_mcmc_steps)
    if not enough_effective_runs(probe_ess / PROBE_RUNS_FRACTION, n_runs):  # below the fraction of the floor
        value, se, ess = mean_of_runs(math.log(2.0) + log_prior(grid[peak]) + at_peak[0] + math.log(upper - lower))
        return QuadratureResult(value=value, se=se, ess=ess, log_z_runs=at_peak[0], grid=grid[peak:peak + 1],
                                log_integrand=np.full(1, np.nan), discretisation_error=math.inf,
                                inner_evaluations=evaluations + 1, abandoned=True, **settings)
    rest = np.delete(np.arange(grid_points), peak)
    log_h_final = np.empty((grid_points, n_runs))
    log_h_final[peak] = at_peak[0]
    log_h_final[rest] = log_h(grid[rest], n_runs, n_particles, [keys[j] for j in rest])
    log_terms = log_prior(grid)[:, None] + log_h_final  # (J, R)
    pooled_terms = logsumexp(log_terms, axis=1) - math.log(n_runs)
    rule_error = abs(_log_trapezoid(pooled_terms, spacing) - _log_trapezoid(pooled_terms[::2], 2.0 * spacing)) / 3.0
    log_runs = math.log(2.0) + _log_trapezoid(log_terms, spacing)  # the sign symmetry: twice the integral over s > 0
    value, se, ess = mean_of_runs(log_runs)
    return QuadratureResult(
        value=value, se=se, ess=ess, log_z_runs=log_runs, grid=grid,
        log_integrand=pooled_terms, discretisation_error=rule_error,
        inner_evaluations=evaluations + grid_points, **settings)


def _log_trapezoid(log_values: np.ndarray, spacing: float) -> np.ndarray:
    """ln of the trapezoid rule over exp(``log_values``) along its first axis, an even grid of ``spacing``."""
    ends = np.zeros(log_values.shape[0])
    ends[[0, -1]] = math.log(0.5)
    return math.log(spacing) + logsumexp(log_values + ends.reshape((-1,) + (1,) * (log_values.ndim - 1)), axis=0)


#: how far, in its own standard errors, the quadrature's ln N(D) may lie below the higher of the two tempered-SMC
#: routes' values, whose runs disagree (and which are therefore low), and still be taken: further below, it missed
#: mass that they found
QUADRATURE_SLACK = 3.0


def with_quadrature_fallback(routed: RoutedEstimate, chol, C: float, mask=None, *, key=0,
                             **options) -> RoutedEstimate:
    """``routed`` (:func:`bayesvm.normalization.ep_started.annealed_with_ep_fallback` on the same prior), or, where
    it is not trusted (and did not stop early by a caller's level), :func:`quadrature_log_normalization` in its
    place (route ``"quadrature"``) where the quadrature is trusted and lies no more than :data:`QUADRATURE_SLACK`
    of its standard errors below it.
    ``options``: the inner runs' budget (``n_particles``, ``n_runs``, ``n_mcmc_steps``, ``target_ess``; others,
    meant for the routes before it, are left out)."""
    if routed.result.trusted or routed.result.stopped_above is not None:
        return routed
    inner = {name: options[name] for name in ("n_particles", "n_runs", "n_mcmc_steps", "target_ess")
             if name in options}
    quadrature = quadrature_log_normalization(chol, C, mask, key=key, **inner)
    if (quadrature is not None and quadrature.trusted
            and quadrature.value >= routed.result.value - QUADRATURE_SLACK * quadrature.se):
        return RoutedEstimate(quadrature, "quadrature", None)
    return routed
