"""ln N(D)'s work, fixed before it starts: one policy object, the factor it samples in, and the estimate it buys.

ln N(D) = ln E_{theta ~ N(0, K)}[prod_u nu(theta_u)^{m_u}] over the distinct training inputs u with multiplicities
m_u (duplicate rows share one latent, so collapsing them is exact) is estimated by tempered SMC
(:func:`bayesvm.normalization.annealing.annealed_log_expectation`) with a budget that :class:`EvidenceBudget`
fixes from the number of points, the dimension of the integral and C before the sampler starts: R runs of N
particles, a number of slice moves per temperature and a cap on the temperatures; at a check, where the runs from
the prior disagree or agree only narrowly, one second route of the same size from EP's Gaussian. The sampler never does more than
:meth:`EvidenceBudget.ceiling` likelihood evaluations. Where the runs have not agreed when the budget is spent, the
value (biased low) comes back with the spread of a single run as its standard error and ``runs_agree`` False, for
the caller to warn with :class:`bayesvm.EvidenceBudgetWarning`; a larger ``scale`` (the user's
``evidence_budget``) buys more moves (documentation: normalisation, "Cost: a fixed budget").

The prior is sampled in its own dimension (:func:`prior_basis`): where the Gram matrix has low numerical rank
(few features, clustered inputs) the factor keeps the r leading eigen-directions whose dropped variance leaves every
latent within :data:`RANK_TOLERANCE` of the full prior's, and a move costs O(M r) instead of O(M^2).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from .. import _linalg
from .._precision import float64
from .annealing import (DEFAULT_MAX_SHRINKS, DEFAULT_MCMC_STEPS, DEFAULT_PARTICLES, DEFAULT_RUNS, DEFAULT_TARGET_ESS,
                        MAX_TEMPERATURES, AnnealingResult, annealed_log_expectation, padded_factor, prior_factor,
                        product_route_log_likelihood)
from .ep_started import annealed_from_ep

__all__ = ["LOW_RANK_SHARE", "RANK_TOLERANCE", "ROLES", "EvidenceBudget", "budgeted_log_normalization", "prior_basis",
           "widened"]

#: what an estimate is for: the check at an answer (and any estimate at fixed hyperparameters), a search's anchor,
#: or an anchor after a refinement found the path's anchors low (the anchors' runs, the check's moves)
ROLES = ("check", "anchor", "refined anchor")

#: the low-rank basis is sampled where its rank is at most this share of the inputs: there it at least halves a
#: move's work; above it the square factor shares the search anchors' compiled sampler, a compilation saved
LOW_RANK_SHARE = 0.5

#: the largest standard deviation, in units of the margin |theta| = 1, that the low-rank basis may drop from any
#: latent: a thousandth of the width over which nu changes
RANK_TOLERANCE = 1e-3


@dataclass(frozen=True)
class EvidenceBudget:
    """The work of every ln N(D) estimate of a fit, fixed before it starts (module docstring).

    scale
        The user's ``evidence_budget``: multiplies the slice moves per temperature of every estimate (the search's
        anchors and the check at the answer). 1 is the default fit; ``BayesianSVC.certify_evidence`` uses 4.
    n_runs, n_particles
        Independent runs and particles per run of an estimate at fixed hyperparameters: the runs' spread is the
        standard error, and 16 runs tell an effective 8 from a dominant few.
    anchor_runs, anchor_moves
        Runs and moves per temperature at a search anchor: 4 x 128 particles to reweight; the anchors steer the
        search, the check at the answer measures.
    confirmed_share
        A check whose runs from the prior have fewer effective runs than this share of them agrees only narrowly:
        its second route runs too (:func:`budgeted_log_normalization`): runs that agree only narrowly lie low more
        often than runs that agree widely (documentation: normalisation, "What to trust").
    target_ess
        The adaptive schedule's share of effective particles kept at each temperature.
    max_shrinks
        Bracket shrinkages of one slice move before the particle stays put.
    """

    scale: float = 1.0
    n_runs: int = DEFAULT_RUNS
    n_particles: int = DEFAULT_PARTICLES
    anchor_runs: int = 4
    anchor_moves: int = 3
    confirmed_share: float = 0.9
    target_ess: float = DEFAULT_TARGET_ESS
    max_shrinks: int = DEFAULT_MAX_SHRINKS

    def __post_init__(self):
        if not (isinstance(self.scale, (int, float)) and math.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"evidence_budget must be a positive number (1 is the default work); got {self.scale!r}")

    def moves(self, dimension: int, role: str = "check") -> int:
        """Slice moves per temperature for an integral of ``dimension`` latents: ``scale`` times
        max(DEFAULT_MCMC_STEPS, ceil(dimension / 50)) (at a search's anchor, ``scale`` times ``anchor_moves``). Runs
        that have not mixed at each temperature agree while all missing the same mass; more latents need more moves
        to mix."""
        _check_role(role)
        base = self.anchor_moves if role == "anchor" else max(DEFAULT_MCMC_STEPS, math.ceil(dimension / 50))
        return max(1, math.ceil(self.scale * base))

    @staticmethod
    def max_temperatures(n: float, C: float) -> int:
        """The cap on the adaptive schedule's temperatures for n points (duplicates counted) at penalty C:
        min(ceil(0.6 n h(C)) + 2, MAX_TEMPERATURES), h(C) = max(ln cosh C, ln(1 + e^{-2C})).

        L = sum_i ln nu(theta_i) lies in [-n h(C), 0] (theory: "The normalisation factor"), so its standard
        deviation under any tempered target is at most n h(C) / 2; a step that keeps half the particles effective
        is at least sqrt(ln 2) / sd(L) long (Gaussian L), hence at most n h(C) / (2 sqrt(ln 2)) ~ 0.6 n h(C)
        steps. Where a run reaches the cap its last step goes to beta = 1 (still unbiased, with a wider error)."""
        h = max(math.log(math.cosh(min(C, 350.0))), math.log1p(math.exp(-2.0 * C)))
        return min(int(math.ceil(0.6 * n * h)) + 2, MAX_TEMPERATURES)

    def plan(self, dimension: int, n: float, C: float, role: str = "check") -> dict:
        """The sampler's settings (keywords of :func:`annealed_log_expectation`) for one estimate in ``role``
        (:data:`ROLES`)."""
        return {"n_runs": self.n_runs if role == "check" else self.anchor_runs, "n_particles": self.n_particles,
                "n_mcmc_steps": self.moves(dimension, role), "target_ess": self.target_ess,
                "temperature_cap": self.max_temperatures(n, C), "max_shrinks": self.max_shrinks}

    def ceiling(self, dimension: int, n: float, C: float, role: str = "check") -> int:
        """The most likelihood evaluations one estimate can make: R N (1 + T moves (max_shrinks + 1)) per route,
        each of O(M r) work (M distinct inputs, r the basis' rank); the check has two routes
        (:func:`budgeted_log_normalization`), an anchor one."""
        plan = self.plan(dimension, n, C, role)
        per_particle = 1 + plan["temperature_cap"] * plan["n_mcmc_steps"] * (plan["max_shrinks"] + 1)
        return (2 if role == "check" else 1) * plan["n_runs"] * plan["n_particles"] * per_particle


def _check_role(role: str) -> None:
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}; got {role!r}")


@float64
def prior_basis(K, tolerance: float = RANK_TOLERANCE) -> np.ndarray:
    """A square-root factor S (M, r) of the prior covariance K (M, M), S S^T ~= K, in its numerical rank r.

    The eigen-factor V_r diag(sqrt(lambda_r)) of the r leading eigen-pairs, with r the smallest rank at which
    the variance dropped from every latent, sum_{j > r} lambda_j V_ij^2, is at most ``tolerance``^2 (the
    residual's standard deviation at most ``tolerance`` in units of the margin). Where r exceeds
    :data:`LOW_RANK_SHARE` of M, the square factor of :func:`bayesvm.normalization.annealing.prior_factor`
    (Cholesky where K is positive definite) instead.
    """
    K = np.asarray(K, dtype=np.float64)
    eigenvalues, vectors = np.linalg.eigh(0.5 * (K + K.T))
    eigenvalues, vectors = np.clip(eigenvalues[::-1], 0.0, None), vectors[:, ::-1]
    # dropped[r, i]: the variance of latent i outside the r leading directions
    contributions = eigenvalues[None, :] * vectors**2
    dropped = np.concatenate([np.cumsum(contributions[:, ::-1], axis=1)[:, ::-1], np.zeros((K.shape[0], 1))], axis=1)
    rank = max(1, int(np.argmax(np.max(dropped, axis=0) <= tolerance**2)))
    if rank > LOW_RANK_SHARE * K.shape[0]:
        return prior_factor(K)
    return vectors[:, :rank] * np.sqrt(eigenvalues[:rank])


@float64
def budgeted_log_normalization(factor, weights, C: float, *, budget: EvidenceBudget = EvidenceBudget(), key=0,
                               role: str = "check", keep_particles: bool = False, move_last: bool = False,
                               stream: int = 0) -> AnnealingResult:
    """ln E_{w ~ N(0, I)}[prod_u nu((S w)_u; C)^{weights_u}] by tempered SMC at ``budget``'s fixed work.

    factor: S (M, D), a square-root factor of the prior covariance of the distinct inputs (:func:`prior_basis`,
    or a Cholesky factor); weights: (M,) their multiplicities, 0 at padding entries (which then take no part).
    The factor is padded to :func:`bayesvm._linalg.problem_size` (M)
    (:func:`bayesvm.normalization.annealing.padded_factor`); the moves per
    temperature follow the integral's dimension, min(D, the entries of positive weight). ``role``: what the
    estimate is for (:data:`ROLES`, :meth:`EvidenceBudget.plan`).

    Tempered SMC starts from the prior. For the check (``role="check"``), where those runs disagree or agree only
    narrowly (fewer than ``budget.confirmed_share`` of them effective), a second route of the same plan starts from
    EP's Gaussian of the latents (:func:`bayesvm.normalization.ep_started.annealed_from_ep`), which bridges only EP's
    error and settles where the prior's runs cannot (a large amplitude or offset, or a tiny amplitude with a large
    C); both are unbiased for N(D), and runs that miss mass are low, so the higher of the routes whose runs agree
    is kept (the higher of both where neither does). At most two routes: the work is at most
    :meth:`EvidenceBudget.ceiling`. Where the kept runs disagree, ``se`` is
    the spread of a single run (:func:`widened`). ``keep_particles``: the particles theta (R, N, size) over the
    padded inputs (moved once more at beta = 1 with ``move_last``, otherwise as the last resampling left them).
    The result's ``rank`` is D; its ``likelihood_evaluations`` count both routes' work.
    """
    factor = np.asarray(factor, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    M, D = factor.shape
    size = _linalg.problem_size(M)
    chol = padded_factor(factor, size)
    mask = np.zeros(size)
    mask[:M] = weights
    dimension = min(D, int(np.count_nonzero(weights)))
    plan = budget.plan(dimension, float(np.sum(weights)), float(C), role)
    options = {"key": key, "stream": stream, "keep_particles": keep_particles, "move_last": move_last, "warn": False}
    result = annealed_log_expectation(chol, product_route_log_likelihood, args=(float(C), mask), **options, **plan)
    if role == "check" and result.ess < budget.confirmed_share * result.n_runs:
        square = np.pad(chol, ((0, 0), (0, size - chol.shape[1])))  # the same theta, one weight per latent
        started, _ = annealed_from_ep(square, float(C), mask, **options, **plan)
        work = result.likelihood_evaluations + started.likelihood_evaluations
        agreeing = [r for r in (result, started) if r.runs_agree] or [result, started]
        result = dataclasses.replace(max(agreeing, key=lambda r: r.value), likelihood_evaluations=work)
    return widened(dataclasses.replace(result, rank=dimension))


def widened(result: AnnealingResult) -> AnnealingResult:
    """The estimate as a fixed budget reports it: where its runs disagree, with the standard deviation of the runs'
    ln Z_r as its standard error (the mean then rests on one run or a few, biased low, and its delta-method error
    says nothing); otherwise as it is."""
    if result.runs_agree:
        return result
    return dataclasses.replace(result, se=max(result.se, float(np.std(result.log_z_runs, ddof=1))))
