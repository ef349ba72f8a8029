"""Annealed estimates of Gaussian-process integrals.

Every quantity here has the form

    ln Z = ln E_{theta ~ N(0, K)} [ exp(L(theta)) ],

an expectation over a zero-mean Gaussian prior on a finite set of function
values. Plain prior sampling (the mean of exp(L) over prior draws) is carried
by rare draws once L is large (theory: "The normalisation factor"), so Z is instead reached by
annealing through the tempered distributions

    pi_beta(theta) ~ N(theta; 0, K) exp(beta L(theta)),  0 = beta_0 < ... < beta_T = 1,

with the identity ln Z = sum_t ln E_{pi_beta_{t-1}}[exp((beta_t - beta_{t-1}) L)].
The sampler is adaptive tempered sequential Monte Carlo (Del Moral, Doucet &
Jasra 2006; adaptive schedule as in Jasra et al. 2011): each step chooses the
next temperature by bisection, so that the effective sample size of the
incremental weights exp((beta_t - beta_{t-1}) L) equals ``target_ess`` times
the number of particles, adds the log mean weight to ln Z, resamples, and
moves every particle with elliptical slice sampling (Murray, Adams & MacKay
2010) at the new temperature.
Elliptical slice sampling needs no step size: it keeps the Gaussian prior
exactly invariant and only ever evaluates the tempered likelihood beta L.

The sampler is written here in plain JAX rather than taken from BlackJAX
(whose ``adaptive_tempered_smc`` and ``elliptical_slice`` were tried;
documentation: normalisation, "Why not BlackJAX"): the ellipse is drawn with the caller's
square-root factor (one factor serves every amplitude at a kernel shape, and each
shrinkage step costs O(M), not O(M^2)); the next temperature is chosen on the
moved, equally weighted particles; the shrinkage loop is capped, which bounds
the cost of a batched loop that otherwise runs as long as its slowest
particle; and R independent runs share one batch axis, so one matrix product
draws every momentum. The standard error comes from the runs' spread.

The three uses in bayesvm (theory: "Annealing: tempered sequential Monte Carlo"):

* normalisation factor, route "mean": theta over M stand-in inputs,
  L(theta) = n ln( mean_j nu(theta_j) );
* normalisation factor, route "product": theta over the n training inputs,
  L(theta) = sum_i ln nu(theta_i) (an unbiased single-draw estimate of N(D)
  with the training inputs as the draw from Q^n);
* naive evidence: theta over the n training inputs,
  ln Q(D) = n ln kappa(C) + ln E[exp(-C sum_i l(y_i theta_i))].
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp
from scipy.special import logsumexp as scipy_logsumexp

from .. import _linalg
from .._linalg import psd_factor
from ..exceptions import UntrustedEvidenceWarning
from .._precision import as_float64, float64
from .._validation import check_count, check_inputs, check_kernel, check_labels, check_positive
from .._warnings import warn_user
from ..kernels import Kernel, gram_matrix
from ..model import hinge, log_kappa, log_nu
from .smc import smc_runs

Array = jax.Array

__all__ = [
    "DEFAULT_MAX_SHRINKS",
    "AnnealingResult",
    "annealed_log_expectation",
    "mean_of_runs",
    "enough_effective_runs",
    "as_key",
    "annealed_log_naive_evidence",
    "annealed_log_normalization",
    "mean_route_log_likelihood",
    "naive_log_likelihood",
    "prior_factor",
    "product_route_log_likelihood",
    "runs_per_program",
]

ROUTES = ("mean", "product")
#: independent SMC runs of :func:`annealed_log_expectation` by default (their spread gives the standard error)
DEFAULT_RUNS = 16
#: particles per SMC run by default
DEFAULT_PARTICLES = 128
#: the runs agree when their effective number is at least half the runs, or at least this many: with R runs whose
#: ln Z_r spread s nats, the effective number is about R exp(-s^2) and the relative variance of the mean of the Z_r
#: about 1 / ess - 1 / R, so 8 effective runs bound the standard error of ln Z near 0.35 nats (theory:
#: "Annealing: tempered sequential Monte Carlo")
MIN_EFFECTIVE_RUNS = 8


#: the adaptive schedule's target: each step keeps this fraction of the particles effective
DEFAULT_TARGET_ESS = 0.5

#: elliptical slice moves per particle per temperature by default, and the fewest that
#: :class:`bayesvm.normalization.budget.EvidenceBudget` gives a check (more for integrals of many latents)
DEFAULT_MCMC_STEPS = 5
#: bracket shrinkages of one elliptical slice move before the particle stays put
DEFAULT_MAX_SHRINKS = 12
#: the adaptive schedule's buffer: the most temperatures a run may take
MAX_TEMPERATURES = 1000
#: on the CPU, the runs of one estimate are computed this many at a time (:func:`runs_per_program`), so that the
#: search's anchors (4 runs) and the estimate at fixed hyperparameters (16 runs, four calls) share one compiled
#: sampler; on the CPU the smaller calls cost no more in all (CHANGELOG.md, 2026-11-28)
CPU_RUNS_PER_PROGRAM = 4


@dataclasses.dataclass(frozen=True)
class AnnealingResult:
    """An annealed estimate of ln Z = ln E_prior[exp(L)] and its diagnostics.

    value
        ln of the mean of the independent runs' estimates of Z (each run's
        estimate is unbiased for Z, so their mean is too).
    se
        Standard error of ``value``: sqrt(sum_r (Z_r / Zbar - 1)^2 / (R (R - 1)))
        over the R runs (delta method for the log of a mean).
    ess
        Effective number of runs, (sum_r Z_r)^2 / sum_r Z_r^2, in [1, R]. Well
        below R means a few runs dominate and ``se`` is not to be trusted
        (an :class:`bayesvm.UntrustedEvidenceWarning` is issued when the runs do not agree, see
        ``runs_agree``: with 16 runs, a spread of ln Z_r above about 0.8 nats).
    n_temperatures
        Largest number of annealing steps taken by a run (beta = 0 excluded).
    log_z_runs
        The R runs' estimates ln Z_r.
    temperatures
        Each run's schedule beta_0 = 0, ..., beta_T = 1, padded with NaN;
        shape (R, max_temperatures + 1).
    min_particle_ess
        Smallest effective sample size of the incremental weights over all
        steps and runs, as a fraction of the particles.
    mean_slice_evaluations
        Mean number of likelihood evaluations per elliptical slice move (>= 1;
        the sampler's acceptance-free measure of how hard the moves are: it
        grows as the tempered target concentrates).
    stuck_fraction
        Fraction of slice moves that hit ``max_shrinks`` and left the particle
        where it was (valid, but a sign that the moves mix slowly).
    n_particles, n_runs, n_mcmc_steps
        The settings used.
    n_moves
        Slice moves made per particle, summed over the runs.
    likelihood_evaluations
        The work: likelihood evaluations of every particle of every run (N per run at beta = 0 and N x
        ``mean_slice_evaluations`` per slice move), summed over whatever the estimate was made of.
    rank
        The number of latent directions sampled (the columns of the prior's factor before padding), where the
        caller recorded it.
    particles
        With ``keep_particles``: the final particles (R, N, M); otherwise None.
    runs_agree
        (property) ``ess`` is at least half the runs or :data:`MIN_EFFECTIVE_RUNS`:
        below that the value is likely biased low and ``se`` is not to be trusted.
    trusted
        (property) the runs agree.
    """

    value: float
    se: float
    ess: float
    n_temperatures: int
    log_z_runs: np.ndarray
    temperatures: np.ndarray
    min_particle_ess: float
    mean_slice_evaluations: float
    stuck_fraction: float
    n_particles: int
    n_runs: int
    n_mcmc_steps: int
    n_moves: int = 0
    likelihood_evaluations: int = 0
    rank: int | None = None
    particles: Array | None = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def runs_agree(self) -> bool:
        return enough_effective_runs(self.ess, self.n_runs)

    @property
    def trusted(self) -> bool:
        return self.runs_agree


# ---------------------------------------------------------------- likelihoods


@float64
def mean_route_log_likelihood(theta: Array, C: Array | float, n: Array | float) -> Array:
    """L(theta) = n ln( (1/M) sum_j nu(theta_j) ) over M stand-in inputs (theory: "The normalisation factor")."""
    return n * (logsumexp(log_nu(theta, C)) - jnp.log(theta.shape[-1]))


@float64
def product_route_log_likelihood(theta: Array, C: Array | float, mask: Array | None = None) -> Array:
    """L(theta) = sum_i ln nu(theta_i) over the training inputs (theory: "The single-draw identity").

    ``mask`` (optional, 0/1 per entry) leaves padding entries out of the sum.
    """
    terms = log_nu(theta, C)
    return jnp.sum(terms if mask is None else mask * terms)


def padded_factor(factor: np.ndarray, size: int) -> np.ndarray:
    """The (M, r) factor padded to blockdiag(factor, I) with its columns rounded up to a power of two, at most
    ``size`` (zero columns: latents that reach no input), so that nearby sizes and ranks share one compiled sampler
    (one per doubling of the rank: a compilation costs seconds, a zero column a fraction of a move). The padding
    rows are independent N(0, 1) latents outside the likelihood; a square factor becomes blockdiag(factor, I)."""
    M, r = factor.shape
    columns = min(size, 1 << (r + size - M - 1).bit_length()) if r < M else size
    padded = np.zeros((size, columns))
    padded[:M, :r] = factor
    padded[M:, r:r + size - M] = np.eye(size - M)
    return padded


def padded(chol: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The factor padded to ``size`` rows (:func:`padded_factor`) and the 0/1 data mask."""
    return padded_factor(chol, size), _linalg.padding_mask(chol.shape[0], size).astype(np.float64)


@float64
def naive_log_likelihood(theta: Array, y: Array, C: Array | float) -> Array:
    """L(theta) = -C sum_i l(y_i theta_i); ln Q(D) = n ln kappa(C) + ln E[exp L].

    The naive-evidence integrand (theory: "Why C and k0 need the evidence").
    """
    return -C * jnp.sum(hinge(y * theta))


@float64
def prior_factor(K) -> np.ndarray:
    """A square-root factor S of the prior covariance K (S S^T = K; NumPy, host-side): theta = S z with z ~ N(0, I).

    Checks K, then uses the project's :func:`bayesvm._linalg.psd_factor`: the
    lower Cholesky factor where K is numerically positive definite, otherwise
    (duplicate inputs, low-rank or nearly constant kernels) the symmetric
    eigen-factor, which reproduces K up to rounding. A diagonal jitter would not do: it adds independent noise
    of variance k0 x jitter to every theta_i, which at the large amplitudes
    the selection explores swamps the margin |theta| <= 1 that nu and N(D)
    depend on (a relative jitter of 1e-10 at k0 = 1e12 is a noise sd of 10).
    Raises ``ValueError`` for a matrix that is not symmetric positive
    semi-definite (an eigenvalue below -1e-8 times the largest).
    """
    K = np.asarray(K, dtype=np.float64)
    if K.ndim != 2 or K.shape[0] != K.shape[1] or K.shape[0] == 0:
        raise ValueError(f"K must be a non-empty square matrix; got shape {K.shape}")
    if not np.all(np.isfinite(K)):
        raise ValueError("K contains NaN or infinite entries; a finite covariance matrix is needed")
    if not np.allclose(K, K.T, rtol=1e-10, atol=1e-12 * np.max(np.abs(K))):
        raise ValueError("K must be symmetric (a covariance matrix)")
    try:
        return psd_factor(K)
    except np.linalg.LinAlgError as err:
        raise ValueError(f"K is not a valid covariance matrix: {err}") from None


def as_key(key) -> Array:
    """A jax PRNG key from an int seed or a key (``ValueError`` for anything else)."""
    if isinstance(key, numbers.Integral) and not isinstance(key, bool):
        return jax.random.PRNGKey(int(key))
    try:
        arr = jnp.asarray(key)
    except TypeError:
        arr = jnp.zeros(())
    if jnp.issubdtype(arr.dtype, jax.dtypes.prng_key) or (arr.dtype == jnp.uint32 and arr.shape == (2,)):
        return arr
    raise ValueError(f"key must be an int seed or a jax.random PRNG key; got {key!r}")


def _check_schedule(temperatures) -> np.ndarray:
    beta = np.asarray(temperatures, dtype=np.float64)
    if beta.ndim != 1 or beta.size < 2 or beta[0] != 0.0 or beta[-1] != 1.0 or np.any(np.diff(beta) <= 0):
        raise ValueError(
            "temperatures must be a strictly increasing 1-D sequence from 0.0 to 1.0 "
            f"(at least two values); got {temperatures!r}"
        )
    return beta


@float64
def annealed_log_expectation(
    chol,
    log_likelihood: Callable,
    *,
    args: tuple = (),
    key=0,
    n_particles: int = DEFAULT_PARTICLES,
    n_runs: int = DEFAULT_RUNS,
    n_mcmc_steps: int = DEFAULT_MCMC_STEPS,
    target_ess: float = DEFAULT_TARGET_ESS,
    temperatures=None,
    max_temperatures: int = MAX_TEMPERATURES,
    max_shrinks: int = DEFAULT_MAX_SHRINKS,
    keep_particles: bool = False,
    move_last: bool = True,
    stream: int = 0,
    temperature_cap: int | None = None,
    warn: bool = True,
) -> AnnealingResult:
    """ln E_{theta ~ N(0, chol chol^T)}[exp(log_likelihood(theta, *args))] by tempered SMC.

    Parameters
    ----------
    chol
        Square-root factor (M, M) of the prior covariance, chol chol^T = K
        (see :func:`prior_factor`); theta = chol z, z ~ N(0, I). A tall factor
        (M, D), D < M, makes theta = chol z carry linear images of z for the
        likelihood to read at O(M) per evaluation (the EP-started route).
    log_likelihood
        ``log_likelihood(theta, *args) -> scalar`` for theta of shape (M,), a
        JAX-traceable function. Pass a module-level function and vary ``args``
        to reuse one compilation across hyperparameter values.
    key, stream
        int seed or ``jax.random`` key. The same key and stream give the same random
        numbers for every ``args`` (common random numbers); another stream of the same key gives runs
        independent of these (a caller that makes several estimates from one key numbers them; the stream is
        folded into the key inside the compiled sampler, which costs no program of its own).
    n_particles, n_runs
        Particles per SMC run and independent runs (batched on one axis; on the CPU in calls of
        :data:`CPU_RUNS_PER_PROGRAM` runs, each folding its index into ``key``, where that divides them,
        :func:`runs_per_program`).
    n_mcmc_steps
        Elliptical slice moves per particle per temperature.
    target_ess
        Fraction of particles kept effective by each adaptive step, in (0, 1).
    temperatures
        A fixed schedule 0 = beta_0 < ... < beta_T = 1 instead of the adaptive one.
    max_temperatures
        The schedule's buffer: cap on the number of adaptive steps; ``RuntimeError`` if a run has not
        reached beta = 1 by then.
    temperature_cap
        A cap on the steps (at most ``max_temperatures``) at which a run takes its last step to beta = 1
        instead of stopping short (:func:`bayesvm.normalization.smc.smc_runs`): the work is then bounded.
    warn
        Warn (:class:`bayesvm.UntrustedEvidenceWarning`) where the runs disagree; a caller that reports it itself
        passes False.
    max_shrinks
        Cap on the bracket shrinkages of one slice move (the particle stays put
        beyond it; see ``stuck_fraction``).
    keep_particles
        Move the particles once more at beta = 1 and return them in
        ``result.particles`` (R, N, M): equally weighted draws from the
        normalised target, for reweighting at nearby hyperparameters.
    move_last
        With ``keep_particles``: False returns them as the last resampling left them, without those moves (no
        extra work, but with duplicates: for a caller that moves them itself only where it uses them,
        :func:`bayesvm.normalization.smc.moves_at_target`). No value depends on it.
    """
    chol = as_float64(chol)
    if chol.ndim != 2 or chol.shape[0] < chol.shape[1] or chol.shape[1] == 0:
        raise ValueError(f"chol must be a square (or tall) factor of the prior covariance; got shape {chol.shape}")
    if not callable(log_likelihood):
        raise ValueError("log_likelihood must be a callable log_likelihood(theta, *args) -> scalar")
    settings = _sampler_settings(n_particles, n_runs, n_mcmc_steps, target_ess, max_temperatures, max_shrinks)
    schedule = _padded_schedule(temperatures, settings["max_temperatures"])
    args = tuple(np.asarray(a, dtype=np.float64) for a in args)  # host-side: no program to convert them
    batch = runs_per_program(settings["n_runs"])
    n_batches = settings["n_runs"] // batch
    key = as_key(key)
    batches = [smc_runs(log_likelihood, chol, key, args, schedule, np.asarray(temperatures is None),
                        move_last=np.asarray(keep_particles and move_last),
                        batch=np.int32(stream * n_batches + index),
                        temperature_cap=np.int32(min(settings["max_temperatures"],
                                                     temperature_cap or settings["max_temperatures"])),
                        **{**settings, "n_runs": batch})
               for index in range(n_batches)]  # dispatched without waiting: the batches queue on the device
    log_z, steps, schedule, min_ess, final_beta = (np.concatenate([np.asarray(getattr(b, field)) for b in batches])
                                                   for field in ("log_z", "steps", "schedule", "min_ess", "beta"))
    evals, stuck, n_moves = (sum(float(getattr(b, field)) for b in batches) for field in ("evals", "stuck", "n_moves"))
    log_z = _checked_runs(log_z, final_beta, settings["max_temperatures"])
    n_moves = max(n_moves, 1.0)
    result = _summarise(
        log_z, steps=steps, schedule=schedule, min_ess=float(np.min(min_ess)),
        slice_evals=evals / n_moves, stuck=stuck / n_moves,
        n_particles=settings["n_particles"], n_mcmc_steps=settings["n_mcmc_steps"],
    )
    work = settings["n_particles"] * (settings["n_runs"] + evals)  # each particle at beta = 0, then every slice step
    result = dataclasses.replace(result, n_moves=int(n_moves), likelihood_evaluations=int(round(work)))
    if warn and not result.runs_agree:
        warn_user(
            f"the {result.n_runs} annealing runs disagree (ln Z_r spread {np.std(log_z):.2g} nats, effective number "
            f"of runs {result.ess:.1f}): the value is likely biased low and its standard error unreliable; "
            "raise n_particles (and n_mcmc_steps)",
            UntrustedEvidenceWarning,
        )
    if not keep_particles:
        return result
    particles = batches[0].theta if n_batches == 1 else np.concatenate([np.asarray(b.theta) for b in batches])
    return dataclasses.replace(result, particles=particles)


def runs_per_program(n_runs: int) -> int:
    """How many of ``n_runs`` runs one call of the compiled sampler computes: :data:`CPU_RUNS_PER_PROGRAM` on the
    CPU where it divides ``n_runs``, otherwise all of them.

    The runs are independent, so computing them in equal batches with keys of their own leaves the estimate's
    distribution as it is; on the CPU it lets every caller with the same particles per run share one compiled
    program, since the number of runs is part of its shapes (an accelerator wants them all in one batch)."""
    if jax.default_backend() == "cpu" and n_runs % CPU_RUNS_PER_PROGRAM == 0:
        return CPU_RUNS_PER_PROGRAM
    return n_runs


def _sampler_settings(n_particles, n_runs, n_mcmc_steps, target_ess, max_temperatures, max_shrinks) -> dict:
    """The sampler's size and tuning arguments, checked (``ValueError`` otherwise), as keywords of ``smc_runs``."""
    settings = {
        "n_particles": check_count(n_particles, "n_particles", 2),
        "n_runs": check_count(n_runs, "n_runs", 2),
        "n_mcmc_steps": check_count(n_mcmc_steps, "n_mcmc_steps", 1),
        "target_ess": float(target_ess),
        "max_temperatures": check_count(max_temperatures, "max_temperatures", 1),
        "max_shrinks": check_count(max_shrinks, "max_shrinks", 1),
    }
    if not 0.0 < settings["target_ess"] < 1.0:
        raise ValueError(f"target_ess must lie strictly between 0 and 1; got {settings['target_ess']}")
    return settings


def _checked_runs(log_z, final_beta, max_temperatures: int) -> np.ndarray:
    """The runs' ln Z_r as NumPy; ``RuntimeError`` if a run stopped short of beta = 1 or is not finite."""
    log_z = np.asarray(log_z)
    if np.any(np.asarray(final_beta) < 1.0 - 1e-12):
        raise RuntimeError(
            f"annealing stopped at beta = {float(np.min(final_beta)):.3g} after {max_temperatures} "
            "temperatures; raise max_temperatures or lower target_ess"
        )
    if not np.all(np.isfinite(log_z)):
        raise RuntimeError("a run produced a non-finite ln Z; the log-likelihood is -inf or NaN somewhere")
    return log_z


def _padded_schedule(temperatures, max_temperatures: int) -> Array:
    """A fixed schedule padded with ones to max_temperatures + 1 entries (all ones for the adaptive one).

    Both kinds then share one compilation of ``smc_runs``.
    """
    schedule = np.ones(max_temperatures + 1)
    if temperatures is not None:
        temperatures = _check_schedule(temperatures)
        if temperatures.shape[0] > max_temperatures + 1:
            raise ValueError(
                f"temperatures has {temperatures.shape[0] - 1} steps, more than max_temperatures = {max_temperatures}"
            )
        schedule[: temperatures.shape[0]] = temperatures
    return schedule


def enough_effective_runs(ess: float, n_runs: int) -> bool:
    """Whether R independent runs with ``ess`` effective runs agree: ess >= min(R / 2, :data:`MIN_EFFECTIVE_RUNS`);
    below that the mean is likely biased low and its standard error not to be trusted."""
    return bool(ess >= min(0.5 * n_runs, MIN_EFFECTIVE_RUNS))


def mean_of_runs(log_z) -> tuple[float, float, float]:
    """R independent runs' estimates ln Z_r of one Z (each Z_r unbiased) as ln Zbar = ln mean_r Z_r, its standard
    error sqrt(sum_r (Z_r / Zbar - 1)^2 / (R (R - 1))) (delta method for the log of a mean) and the effective number
    of runs (sum_r Z_r)^2 / sum_r Z_r^2 (see :class:`AnnealingResult`)."""
    log_z = np.asarray(log_z, dtype=np.float64)
    R = log_z.shape[0]
    if R < 2:
        raise ValueError("at least two runs are needed for a standard error")
    value = float(scipy_logsumexp(log_z) - np.log(R))
    ratio = np.exp(log_z - value)  # Z_r / Zbar, sums to R
    se = float(np.sqrt(np.sum((ratio - 1.0) ** 2) / (R * (R - 1))))
    return value, se, float(np.sum(ratio) ** 2 / np.sum(ratio**2))


def _summarise(log_z, *, steps, schedule, min_ess, slice_evals, stuck, n_particles, n_mcmc_steps) -> AnnealingResult:
    """Combine R runs: ln mean Z_r, its delta-method error, effective number of runs."""
    value, se, ess = mean_of_runs(log_z)
    return AnnealingResult(
        value=value,
        se=se,
        ess=ess,
        n_temperatures=int(np.max(steps)),
        log_z_runs=log_z,
        temperatures=schedule,
        min_particle_ess=min_ess,
        mean_slice_evaluations=slice_evals,
        stuck_fraction=stuck,
        n_particles=n_particles,
        n_runs=int(np.shape(log_z)[0]),
        n_mcmc_steps=n_mcmc_steps,
    )


def shift(result: AnnealingResult, offset: float) -> AnnealingResult:
    """The same estimate with a constant added to ln Z (and to every run)."""
    return dataclasses.replace(result, value=result.value + offset, log_z_runs=result.log_z_runs + offset)


# ---------------------------------------------------------------- bayesvm uses


@float64
def annealed_log_normalization(
    kernel: Kernel,
    C: float,
    n: int,
    inputs,
    *,
    route: str = "mean",
    chol=None,
    key=0,
    **options,
) -> AnnealingResult:
    """ln N(D) for a data set of n points, by annealing (theory: "The normalisation factor").

    route="mean": ``inputs`` are M points standing in for Q(x) and
        ln N(D) ~= ln E_theta[(mean_j nu(theta(x_j)))^n]; n may exceed M.
    route="product": ``inputs`` are the n training inputs and
        ln N(D) ~= ln E_theta[prod_i nu(theta(x_i))] (unbiased for N(D) over draws of
        the inputs from Q); n must equal len(inputs).

    ``chol`` (optional) is the :func:`prior_factor` of ``kernel(inputs)``, to
    reuse one factor; ``options`` go to :func:`annealed_log_expectation`.
    Route "product" pads the prior to :func:`bayesvm._linalg.problem_size` (n) with independent
    entries that the likelihood leaves out, which does not change the
    integral, so data sets of nearby sizes share one compilation.
    """
    kernel = check_kernel(kernel)
    C = check_positive(C, "C")
    n = check_count(n, "n", 1)
    X = check_inputs(inputs, name="inputs")
    if route not in ROUTES:
        raise ValueError(f"route must be one of {ROUTES}; got {route!r}")
    if route == "product" and n != X.shape[0]:
        raise ValueError(
            f"route='product' integrates over the n training inputs: n = {n} but inputs has {X.shape[0]} rows"
        )
    chol = prior_factor(gram_matrix(kernel, X)) if chol is None else _check_chol(chol, X.shape[0])
    if route == "mean":
        return annealed_log_expectation(chol, mean_route_log_likelihood, args=(C, n), key=key, **options)
    chol, mask = padded(chol, _linalg.problem_size(n))
    return annealed_log_expectation(chol, product_route_log_likelihood, args=(C, mask), key=key, **options)


@float64
def annealed_log_naive_evidence(K, y, C: float, *, chol=None, key=0, **options) -> AnnealingResult:
    """ln Q(D) = n ln kappa(C) + ln E_{theta ~ N(0, K)}[exp(-C sum_i l(y_i theta_i))].

    The naive evidence (theory: "Why C and k0 need the evidence").

    ``K`` is the Gram matrix of the n training inputs (may be None when
    ``chol``, its :func:`prior_factor`, is given); ``y`` the labels (two
    classes, mapped to -1/+1 with the larger one +1).
    """
    C = check_positive(C, "C")
    if chol is None:
        if K is None:
            raise ValueError("give the Gram matrix K or its square-root factor chol")
        chol = prior_factor(K)
    chol = _check_chol(chol, np.asarray(chol).shape[0])
    n = chol.shape[0]
    result = annealed_log_expectation(chol, naive_log_likelihood, args=(_labels_pm(y, n), C), key=key, **options)
    return shift(result, n * float(log_kappa(C)))


def _labels_pm(y, n: int) -> np.ndarray:
    """Labels as -1/+1; a single class is allowed here (the integral is still defined)."""
    arr = np.asarray(y, dtype=np.float64).ravel()
    if arr.shape[0] != n:
        raise ValueError(f"y has {arr.shape[0]} labels but the prior is over {n} points; they must match")
    if np.all(np.isin(arr, (-1.0, 1.0))):
        return arr
    return check_labels(y, n)[0]


def _check_chol(chol, m: int) -> Array:
    chol = jnp.asarray(chol, dtype=jnp.float64)
    if chol.shape != (m, m):
        raise ValueError(f"chol must have shape ({m}, {m}) to match the inputs; got {chol.shape}")
    return chol
