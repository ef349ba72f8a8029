"""The budget of tempered SMC for ln N(D): it grows until the independent runs agree and reach a precision target.

Runs that have not mixed at each temperature spread (or, worse, agree while all missing the same mass), so
ln N(D)'s default estimate (:func:`bayesvm.normalization.annealing.annealed_log_expectation`, round after round)
has no fixed budget: its first round's slice moves grow with the number of training inputs (:func:`default_moves`),
and round by round of :data:`BUDGET_LADDER` it repeats (pooling runs of the same size) or grows the moves until the
runs agree and the standard error reaches :func:`target_standard_error` (theory: "Annealing: tempered sequential
Monte Carlo"; documentation: normalisation, "Moves, not particles"). A caller may have the rounds after the first
move round a guide instead of the prior (``escalation``; the exact prior's ln N(D) uses EP's Gaussian,
:func:`bayesvm.normalization.ep_started.annealed_with_ep_fallback`).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable
from typing import NamedTuple

import jax
import numpy as np

from .._precision import float64
from .._validation import check_count
from .annealing import (
    DEFAULT_MCMC_STEPS,
    DEFAULT_RUNS,
    DEFAULT_TARGET_ESS,
    AnnealingResult,
    annealed_log_expectation,
    as_key,
    pooled,
)
from .smc import SliceGuide

Array = jax.Array

__all__ = ["BUDGET_LADDER", "CONFIRMED_SHARE", "STOP_ERROR", "Budget", "annealed_until_runs_agree", "default_moves",
           "exceeds", "settling_tolerance", "target_standard_error"]


#: the standard error ln N(D) should reach over n training inputs, in nats: a third of an accuracy of 1 nat per
#: 1,000 points (at least 0.1). Measured (documentation, "Trusted ln N(D)"): where the runs agree but spread by
#: 0.8 nats the value was 2-3 reported standard errors below a 10x longer reference, so agreement alone is not enough
def target_standard_error(n: int) -> float:
    """The standard error of ln N(D) the default estimator's budget grows towards: max(0.1, n / 3000) nats."""
    return max(0.1, n / 3000.0)


def default_moves(n: int) -> int:
    """Elliptical slice moves per temperature for ln N(D) over n training inputs: max(5, ceil(n / 50)).

    Runs that have not mixed at each temperature can agree while all missing the same mass; only more moves show
    it. On adult at 1,000 rows (16 runs x 128 particles, runs agreeing) ln N(D) was -124.6 with 5 moves, -124.2
    with 10, -122.8 with 20, -122.7 with 40; at an easy pima point of 400 rows -47.46, -47.31, -47.22, -47.17
    (documentation: normalisation, "Moves grow with n").
    """
    return max(DEFAULT_MCMC_STEPS, math.ceil(n / 50))


class Budget(NamedTuple):
    """One round of :func:`annealed_until_runs_agree`: R runs with ``particles`` times the first round's particles
    per run and ``moves`` times its slice moves per temperature, and where ``target_ess`` is given, that target
    for the adaptive schedule in place of the caller's (a higher target takes more, smaller temperature steps; its
    cost is about ``particles * moves`` rounds times the ratio of the numbers of temperatures)."""

    particles: int = 1
    moves: int = 1
    target_ess: float | None = None


#: :func:`annealed_until_runs_agree`'s budget, round by round; a round with the same budget as the one before is
#: pooled with it, a new budget starts afresh; the last round is the cap (here about 20x the first round's work in
#: all).
#: It grows the moves, not the particles: where the first rounds' runs disagree, their spread comes from particles
#: that have not mixed at each temperature, not from too few of them. Measured at four such points (pima 400 rows,
#: Ripley's synth 560; two seeds each, 16 runs; documentation: normalisation, "Moves, not particles"), at 4x the work
#: the runs' ln Z_r spread 0.38-0.45 nats with 4x the moves against 0.54-0.87 with 4x the particles (0.77-1.53 at
#: the first round's budget); at easy points, where the particles limit it, the first round already agrees.
#: Its last rung, reached only where the value has not settled or the runs still disagree at 4x the moves, keeps
#: those moves and takes more, smaller temperature steps (target ESS 0.9, 2.2-2.8x the temperatures): at moons'
#: answer (420 rows) that brought ln N(D) from 0.8-2.1 nats below references to within their range
#: (documentation: normalisation, "The value must settle")
BUDGET_LADDER = (Budget(1, 1), Budget(1, 1), Budget(1, 4), Budget(1, 4), Budget(1, 4, 0.9))

#: the share of effective runs (:attr:`AnnealingResult.ess` / R) from which a budget's agreeing runs are taken on their
#: own; below it (ln Z_r spread by more than about a third of a nat: ess ~ R exp(-s^2)) the next larger budget must
#: confirm the value by the settling rule (at the cap, agreement is enough). Measured (documentation: normalisation,
#: "twelfth session"): at 2,000 adult rows (C 1.62, k0 26.4, k_b 92.5, length scale 14.1) the first round's 16 runs
#: agreed with 8.1 effective runs and lay 3.1 nats below two long references that agreed with each other; at the
#: moons fit's answer (420 rows) the check's pooled 32 runs agreed with 20.2 effective and lay 1.2-2.1 nats below
#: references. Every accepted round of the maps at 345-2,000 rows but three had at least 12.6 effective runs of 16;
#: those three had escalated to 4x the moves (synth, 18.8 of 32; adult at 1,000 rows, 12.0 of 16; synth.te at
#: 1,000 rows, 9.9 of 16 and 0.40 nats low). It was 0.75 until the map of 387 points at 351-400 rows (twenty-sixth
#: session) showed first rounds taken on their own with 12-14.4 effective runs of 16 lying lower than the rest: a
#: median 0.29 nats below the references at 12-13 (worst 0.84, Pima at C 0.42, k0 12,600), 0.08-0.09 at 13-14.5
#: (worst 0.50), 0.02-0.05 above 14.5 (worst 0.26); 31 of the 300 first rounds fell below 14.4
CONFIRMED_SHARE = 0.9


#: the probability, at most, that :func:`annealed_until_runs_agree` stops early by ``stop_above`` where ln Z in truth
#: lies below the level (:func:`exceeds`)
STOP_ERROR = 1e-3


def exceeds(result: AnnealingResult, level: float, checks: int) -> bool:
    """Whether ln Z exceeds ``level`` with probability at least 1 - :data:`STOP_ERROR`, whether or not the runs agree,
    for an estimate that is one of at most ``checks`` such tests: ``value`` - ln(``checks`` / STOP_ERROR) > level.

    The mean of the runs' estimates Zbar is unbiased for Z and positive, so by Markov's inequality
    P(Zbar >= e^t Z) <= e^-t, and ln Z > ln Zbar - t except with probability e^-t; over ``checks`` tests the
    union bound takes t = ln(checks / STOP_ERROR) (about 8 nats for four). Runs that disagree are biased low, so
    the bound errs towards not stopping (theory: "Hyperparameter selection").
    """
    return result.value - math.log(checks / STOP_ERROR) > level


@float64
def annealed_until_runs_agree(chol, log_likelihood: Callable, *, key=0, n_particles: int = 128,
                              n_runs: int = DEFAULT_RUNS, n_mcmc_steps: int = DEFAULT_MCMC_STEPS,
                              ladder=BUDGET_LADDER, max_se: float = np.inf, settle: bool = True,
                              stop_above: float = np.inf,
                              escalation: Callable[[], tuple[Array, SliceGuide] | None] | None = None,
                              **options) -> AnnealingResult:
    """:func:`annealed_log_expectation`, with a budget that grows until the runs agree and the value settles, up to a
    cap.

    Round by round of ``ladder`` (:class:`Budget` multiples of ``n_particles`` and ``n_mcmc_steps``, optionally
    with their own target ESS; a plain integer multiplies the particles alone): ``n_runs`` runs of that size,
    pooled (:func:`pooled`) with the rounds before it of the same budget; it stops at the first round after which
    the pooled runs agree (:attr:`AnnealingResult.runs_agree`), the standard error is at most ``max_se`` (a
    precision target; past the cap a larger error is returned without a warning, as the error says it) and, with
    ``settle``, the value has settled: it lies at most :func:`settling_tolerance` above the value of the budget
    before it (whose runs may disagree: those are low too). Runs that agree while all missing the same mass are low
    together, and only a larger budget shows it (documentation: normalisation, "The value must settle"); where it
    rises by more, the next larger budget follows at once, and so it does where the runs agree only narrowly (fewer
    than :data:`CONFIRMED_SHARE` of them effective) and a larger budget is left to confirm the value. The first
    round is exactly :func:`annealed_log_expectation` with ``key``; later rounds are its later streams. Runs that still
    disagree, or a value still rising, after the last round are returned with a ``RuntimeWarning`` (and
    ``settled`` False in the latter case). ``options`` go to every round (``keep_particles`` returns the pooled
    particles; ``target_ess`` is the rounds' target where their budget names none).

    ``stop_above`` is a level of ln Z the caller needs no more than to know exceeded (a search's point whose ln N(D)
    exceeds it is worse than one met before): after a round whose runs disagree, where ln Z exceeds it with
    probability at least 1 - :data:`STOP_ERROR` (:func:`exceeds`, one test per round of ``ladder``), that round is
    returned at once, its runs disagreeing, with ``stopped_above`` set (no warning).

    ``escalation`` (optional, no arguments) is called once, after the first round that misses agreement or
    precision: where it returns ``(factor, guide)``, every later round's slice moves go round ``guide`` (a
    :class:`SliceGuide`) with ``factor`` in place of ``chol`` (same prior, see :func:`annealed_log_expectation`),
    pooled only with each other (the guided moves count as a larger budget); where it returns None, the ladder goes
    on with the prior's moves.
    """
    base = as_key(key)
    budgets = _budgets(ladder)
    target_ess = options.pop("target_ess", DEFAULT_TARGET_ESS)
    factor, guide = chol, None
    same_size: list[AnnealingResult] = []
    size = result = smaller = None  # smaller: the last smaller budget's pooled estimate
    index = 0
    while index < len(budgets):
        budget = budgets[index]
        previous, size = size, (budget.particles * n_particles, budget.moves * n_mcmc_steps,
                                target_ess if budget.target_ess is None else budget.target_ess)
        if size != previous and same_size:
            smaller, same_size = result, []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            same_size.append(annealed_log_expectation(
                factor, log_likelihood, key=base, stream=index,
                n_particles=size[0], n_mcmc_steps=size[1], target_ess=size[2], n_runs=n_runs, guide=guide,
                **options))
        result = pooled(same_size)
        if result.runs_agree and result.se <= max_se:
            if not (settle and _unconfirmed(smaller, result, max_se)):
                return result
            index = _next_budget(budgets, index)  # a repeat of this budget cannot show a bias its runs share
            continue
        if not result.runs_agree and exceeds(result, stop_above, len(budgets)):
            return dataclasses.replace(result, stopped_above=float(stop_above))
        guided = escalation() if escalation is not None and index + 1 < len(budgets) else None
        escalation = None
        if guided is not None:  # the guided rounds start afresh: nothing to skip
            smaller, (factor, guide), same_size, index = result, guided, [], index + 1
        else:
            index = _next_round(budgets, index, len(same_size), result.se, max_se)
    if not result.runs_agree:
        warnings.warn(
            f"the annealing runs still disagree at the largest budget ({result.n_runs} runs of {result.n_particles} "
            f"particles, {result.n_mcmc_steps} moves per temperature; ln Z_r spread {np.std(result.log_z_runs):.2g} "
            f"nats, effective number of runs {result.ess:.1f}): the value is likely biased low and its standard "
            "error unreliable",
            RuntimeWarning, stacklevel=3,
        )
    elif settle and _still_rising(smaller, result, max_se):
        warnings.warn(
            f"the annealed value still rose by {result.value - smaller.value:.2f} nats at the largest budget "
            f"({smaller.value:.2f} -> {result.value:.2f}; {result.n_runs} runs of {result.n_particles} particles, "
            f"{result.n_mcmc_steps} moves per temperature): it is likely still biased low",
            RuntimeWarning, stacklevel=3,
        )
        return dataclasses.replace(result, settled=False)
    return result


def settling_tolerance(smaller: AnnealingResult, larger: AnnealingResult, max_se: float) -> float:
    """How far a larger budget's value may lie above a smaller one's before the smaller counts as biased low:
    max(3 ``max_se``, 2 sqrt(se_smaller^2 + se_larger^2)) nats (infinite without a precision target).

    Three times the precision target is the accuracy the target stands for (1 nat per 1,000 points at
    :func:`target_standard_error`); twice the combined standard error keeps the runs' own noise from
    passing for a bias."""
    return max(3.0 * max_se, 2.0 * math.hypot(smaller.se, larger.se))


def _still_rising(smaller: AnnealingResult | None, larger: AnnealingResult, max_se: float) -> bool:
    """Whether ``larger`` lies more than :func:`settling_tolerance` above the smaller budget's value (False without
    one)."""
    return smaller is not None and larger.value - smaller.value > settling_tolerance(smaller, larger, max_se)


def _unconfirmed(smaller: AnnealingResult | None, result: AnnealingResult, max_se: float) -> bool:
    """Whether a precise round whose runs agree still needs a larger budget: its value lies more than
    :func:`settling_tolerance` above the smaller budget's, or, with a precision target, its runs agree only narrowly
    (fewer than :data:`CONFIRMED_SHARE` of them effective)."""
    narrow = np.isfinite(max_se) and result.ess < CONFIRMED_SHARE * result.n_runs
    return bool(narrow or _still_rising(smaller, result, max_se))


def _next_budget(budgets: tuple[Budget, ...], index: int) -> int:
    """The index of the first round after ``index`` with a budget other than its own (``len(budgets)`` if none)."""
    following = index + 1
    while following < len(budgets) and budgets[following] == budgets[index]:
        following += 1
    return following


def _next_round(budgets: tuple[Budget, ...], index: int, pooled_rounds: int, se: float, max_se: float) -> int:
    """The ladder's round after ``index``, skipping the repeats of its budget that cannot reach ``max_se``.

    Pooling r more rounds of R runs with the ``pooled_rounds`` (k) made at this budget leaves at least the
    k R runs' squared deviations in the standard error's numerator over (k + r) R runs, so the pooled error
    stays above about ``se`` k / (k + r) however closely the new runs agree (unless their mean lies far above
    the first rounds', which then did not hold the estimate anyway). Where even that bound misses
    ``max_se`` and a larger budget follows, the repeats are skipped for it (at 400 pima rows the check's first
    round reached 0.39 nats against a target of 0.13: its repeat cost 3.5 s of a 25 s estimate and was always
    followed by the larger round; documentation: normalisation, "Repeats that cannot reach the target").
    A repeat that is the ladder's last round is kept: past the cap only the runs' agreement counts.
    """
    following = _next_budget(budgets, index)
    repeats = following - index - 1
    if repeats and following < len(budgets) and se * pooled_rounds / (pooled_rounds + repeats) > max_se:
        return following
    return index + 1


def _budgets(ladder) -> tuple[Budget, ...]:
    """The ladder as :class:`Budget` rounds (an integer entry multiplies the particles alone); ``ValueError``
    for an empty ladder or a multiple that is not a positive integer."""
    budgets = tuple(Budget(*entry) if isinstance(entry, tuple) else Budget(entry) for entry in ladder)
    if not budgets:
        raise ValueError("ladder must have at least one round")
    for budget in budgets:
        check_count(budget.particles, "a ladder's particle multiple", 1)
        check_count(budget.moves, "a ladder's move multiple", 1)
        if budget.target_ess is not None and not 0.0 < budget.target_ess < 1.0:
            raise ValueError(f"a ladder's target ESS must lie strictly between 0 and 1; got {budget.target_ess}")
    return budgets
