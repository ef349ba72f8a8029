"""ln N(D) at a fixed budget: the work ceiling, exact collapsing of duplicate rows, the low-rank basis, and what a
user sees where the budget runs out (bayesvm.normalization.budget)."""

from __future__ import annotations

import warnings

import jax
import numpy as np
import pytest
from scipy.special import logsumexp

import bayesvm
from bayesvm._linalg import distinct_rows, problem_size, psd_factor
from bayesvm._precision import float64_scope
from bayesvm.kernels import RBF
from bayesvm.normalization.annealing import (MAX_TEMPERATURES, annealed_log_expectation, padded,
                                             product_route_log_likelihood)
from bayesvm.normalization.budget import EvidenceBudget, budgeted_log_normalization, prior_basis

N_SE = 4.0  # allowed deviation in combined standard errors
FLOOR = 0.02  # nats: the noise of a 16-run error estimate


def _brute_force(K: np.ndarray, weights: np.ndarray, c: float, draws: int = 400_000) -> tuple[float, float]:
    """ln E[prod_u nu(theta_u)^{m_u}] by plain prior draws (exact to a few 1e-3 nats where the integrand is
    bounded away from 0, as on a handful of points) and its standard error."""
    theta = np.random.default_rng(6).normal(size=(draws, K.shape[0])) @ psd_factor(K).T
    # ln nu(t) = ln kappa(C) + ln(exp(-C l(t)) + exp(-C l(-t))), l the hinge, written out in NumPy
    log_nu = -np.log1p(np.exp(-2.0 * c)) + np.logaddexp(-c * np.maximum(0.0, 1.0 - theta),
                                                        -c * np.maximum(0.0, 1.0 + theta))
    log_terms = log_nu @ weights
    value = logsumexp(log_terms) - np.log(draws)
    return value, float(np.std(np.exp(log_terms - value)) / np.sqrt(draws))


def test_the_ceiling_bounds_the_work_and_a_run_at_the_temperature_cap_still_reaches_beta_one():
    """The work of an estimate is at most its budget's ceiling (counts, not seconds); a run whose schedule meets the
    cap takes its last step to beta = 1 instead of stopping short, and stays an unbiased estimate (here of the same
    integral as an uncapped run, within their errors). The runs are on the factor padded as the budget pads it; the
    capped one, a single importance-sampling step from the prior, takes 32 runs (4096 draws)."""
    X = np.random.default_rng(0).uniform(size=(40, 1))
    K = np.asarray(RBF(length_scale=0.1, amplitude=30.0, offset=30.0)(X))
    budget = EvidenceBudget(n_runs=8)
    with float64_scope():
        result = budgeted_log_normalization(prior_basis(K), np.ones(40), 3.0, budget=budget, key=1)
    assert 0 < result.likelihood_evaluations <= budget.ceiling(result.rank, 40, 3.0)
    assert result.n_temperatures <= budget.max_temperatures(40, 3.0)
    with float64_scope():
        factor, mask = padded(psd_factor(K), problem_size(40))
        free = annealed_log_expectation(factor, product_route_log_likelihood, args=(3.0, mask), key=2, n_runs=16,
                                        warn=False)
        capped = annealed_log_expectation(factor, product_route_log_likelihood, args=(3.0, mask), key=3, n_runs=32,
                                          temperature_cap=1, warn=False)
    assert free.n_temperatures >= 2 and capped.n_temperatures == 1
    assert np.all(np.nanmax(capped.temperatures, axis=1) == 1.0)
    assert abs(capped.value - free.value) < N_SE * np.hypot(max(capped.se, 0.1), free.se) + FLOOR


def test_collapsing_duplicate_rows_is_exact():
    """Six distinct inputs repeated 1-4 times: ln N(D) over the 15 rows (their Gram matrix singular), over the six
    with multiplicities, and by brute force over the six, all agree; ``distinct_rows`` finds them in order."""
    rng = np.random.default_rng(3)
    distinct = rng.normal(size=(6, 2))
    counts = np.array([1, 4, 2, 3, 1, 4])
    X = np.repeat(distinct, counts, axis=0)[rng.permutation(15)]
    index, found = distinct_rows(X)
    np.testing.assert_array_equal(np.sort(index), index)
    assert sorted(map(tuple, X[index])) == sorted(map(tuple, distinct))
    assert found.sum() == 15 and sorted(found) == sorted(counts)
    kernel, c = RBF(length_scale=1.5, amplitude=4.0, offset=1.0), 1.5
    K_all = np.asarray(kernel(X))
    K_distinct = np.asarray(kernel(X[index]))
    brute, brute_se = _brute_force(K_distinct, found.astype(float), c)
    with float64_scope():
        collapsed = budgeted_log_normalization(prior_basis(K_distinct), found, c, key=1)
        full = budgeted_log_normalization(psd_factor(K_all), np.ones(15), c, key=2)
    assert collapsed.trusted and full.trusted and collapsed.rank == 6
    for estimate in (collapsed, full):
        assert abs(estimate.value - brute) < N_SE * np.hypot(estimate.se, brute_se) + FLOOR
    # the public entry point collapses by itself: the same integral, fewer latents
    estimate = bayesvm.log_normalization(kernel=kernel, C=c, n=15, inputs=X)
    assert estimate.diagnostics["rank"] == 6
    assert abs(estimate.value - brute) < N_SE * np.hypot(estimate.se, brute_se) + FLOOR


def test_the_low_rank_basis_keeps_every_latent_within_its_tolerance_and_matches_the_full_sampler():
    """At a point of low numerical rank (one feature, a long length scale: 60 inputs, a handful of directions) the
    basis reproduces K's diagonal to within the tolerance's variance, and its estimate agrees with the full factor's
    within their errors."""
    X = np.random.default_rng(4).uniform(-1, 1, size=(60, 1))
    K = np.asarray(RBF(length_scale=1.0, amplitude=4.0, offset=1.0)(X))
    tolerance = 1e-3
    basis = prior_basis(K, tolerance)
    assert basis.shape[1] < 15
    assert np.max(np.diag(K) - np.sum(basis**2, axis=1)) <= tolerance**2 * (1 + 1e-6)
    assert np.max(np.abs(K - basis @ basis.T)) <= tolerance**2 * 60
    with float64_scope():
        low = budgeted_log_normalization(basis, np.ones(60), 1.0, key=1)
        full = budgeted_log_normalization(psd_factor(K), np.ones(60), 1.0, key=2)
    assert low.trusted and full.trusted and low.rank == basis.shape[1] and full.rank == 60
    assert abs(low.value - full.value) < N_SE * np.hypot(low.se, full.se) + FLOOR
    assert low.likelihood_evaluations < EvidenceBudget().ceiling(low.rank, 60, 1.0)


def test_where_the_budget_runs_out_the_estimate_says_so_and_widens_its_error():
    """A hard point at a tiny budget (a large C with a small amplitude: the tempered target sits far from the
    prior, and EP's Gaussian does not settle it either): the runs disagree, the estimate is untrusted, its error is
    the spread of a single run (not the mean's), and the public entry point warns with EvidenceBudgetWarning naming
    the remedy."""
    from bayesvm.datasets import load_breast_cancer

    X = load_breast_cancer().X[:64]
    kernel, c = RBF(length_scale=3.18, amplitude=2.64, offset=0.0563), 341.0
    with float64_scope():
        result = budgeted_log_normalization(prior_basis(np.asarray(kernel(X))), np.ones(64), c,
                                            budget=EvidenceBudget(scale=0.2), key=0)
    assert not result.runs_agree
    assert result.se == pytest.approx(np.std(result.log_z_runs, ddof=1))
    assert result.likelihood_evaluations <= EvidenceBudget(scale=0.2).ceiling(result.rank, 64, c)
    with pytest.warns(bayesvm.EvidenceBudgetWarning, match="evidence_budget"):
        estimate = bayesvm.log_normalization(kernel=kernel, C=c, n=64, inputs=X, evidence_budget=0.2)
    assert not estimate.trusted and estimate.se > 0.3


def test_where_the_prior_started_runs_disagree_the_check_takes_eps_gaussian_as_its_start():
    """A large amplitude and offset at a small C (the latents' common shift two-moded), at a fifth of the default
    moves: from the prior the runs disagree, from EP's Gaussian they agree, and the estimate is that route's; both
    routes' work is counted (the prior route alone: the same plan and random numbers, as a refined anchor of 16
    runs)."""
    from bayesvm.datasets import load_breast_cancer

    X = load_breast_cancer().X[:64]
    factor = prior_basis(np.asarray(RBF(length_scale=14.0, amplitude=3000.0, offset=3000.0)(X)))
    with float64_scope():
        prior_only = budgeted_log_normalization(factor, np.ones(64), 0.1, role="refined anchor", key=0,
                                                budget=EvidenceBudget(scale=0.2, anchor_runs=16))
        check = budgeted_log_normalization(factor, np.ones(64), 0.1, key=0, budget=EvidenceBudget(scale=0.2))
    assert not prior_only.runs_agree and check.runs_agree
    assert check.value > prior_only.value - 1.0  # the prior route is biased low, not high
    assert check.likelihood_evaluations > prior_only.likelihood_evaluations


@pytest.mark.slow
def test_the_stand_in_route_takes_moves_for_its_exponent_and_lands_near_a_long_reference():
    """ln E[(mean_j nu(theta_j))^500] over 200 grid inputs (RBF length scale 0.1, k0 = 2, no offset, C = 2): the
    exponent makes the integrand sharp, so the budget's moves follow n = 500, not the 200 inputs. A long annealed
    importance sampling run puts it at -22.5; five moves per temperature left the value 1.6 nats low."""
    X = np.linspace(-1, 1, 200)[:, None]
    kernel = RBF(length_scale=0.1, amplitude=2.0, offset=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bayesvm.EvidenceBudgetWarning)
        estimate = bayesvm.log_normalization(kernel=kernel, C=2.0, n=500, inputs=X, method="annealed-stand-in")
    assert estimate.diagnostics["n_mcmc_steps"] == EvidenceBudget().moves(500) == 10
    assert abs(estimate.value - (-22.5)) < 1.0


def test_the_anchor_plan_and_the_full_plan_share_one_compiled_sampler():
    """On the CPU the full plan's 16 runs go in calls of the anchors' 4, so a search's anchors and the check at its
    answer compile the sampler once for a problem size."""
    if jax.default_backend() != "cpu":
        pytest.skip("the runs are batched into one program's shapes on the CPU")
    from bayesvm.normalization.smc import smc_runs

    X = np.random.default_rng(1).uniform(size=(23, 1))  # a size no other test compiles for
    factor = psd_factor(np.asarray(RBF(length_scale=0.3, amplitude=3.0, offset=1.0)(X)))
    with float64_scope():
        budgeted_log_normalization(factor, np.ones(23), 1.0, role="anchor", keep_particles=True, move_last=True)
        compiled = smc_runs._cache_size()
        full = budgeted_log_normalization(factor, np.ones(23), 1.0, keep_particles=True)
    assert smc_runs._cache_size() == compiled
    assert full.n_runs == 16 and len(np.unique(full.log_z_runs)) == 16


def test_the_users_budget_reaches_the_check_at_the_answer():
    """``evidence_budget`` scales the moves of the check's tempered SMC (what a fit's checks and certify_evidence
    run), and the check computes one Gram matrix for ln Q(D) and ln N(D)."""
    from bayesvm._validation import training_data
    from bayesvm.datasets import load_breast_cancer
    from bayesvm.selection.trust import check_point

    data = load_breast_cancer()
    train = training_data(data.X[:40], data.y[:40])
    kernel = RBF(length_scale=5.0, amplitude=10.0, offset=10.0)
    with warnings.catch_warnings(), float64_scope():  # as a fit calls it: in float64
        warnings.simplefilter("ignore", bayesvm.BayesvmWarning)
        evidence, report, reference = check_point(train, 1.0, kernel, 0.0, budget=EvidenceBudget(scale=3.0))
    assert reference.n_mcmc_steps == EvidenceBudget(scale=3.0).moves(reference.rank) == 15
    assert evidence.log_normalization == reference.value and np.isfinite(evidence.total)


@pytest.mark.parametrize("scale", [0, -1.0, float("nan"), "4"])
def test_a_budget_that_is_not_a_positive_number_is_refused(scale):
    with pytest.raises(ValueError, match="evidence_budget must be a positive number"):
        EvidenceBudget(scale)


def test_a_default_fit_in_process_returns_its_answer_its_work_and_a_certificate():
    """A default BayesianSVC() on 60 rows: probabilities, an evidence with its error, the fit's ln N(D) work within
    the budget's ceilings (the search's anchors and the check), and certify_evidence re-estimating ln P(D) with more
    work: a value consistent with the fit's."""
    from bayesvm.datasets import load_breast_cancer

    data = load_breast_cancer()
    X, y = data.X[:60], data.y[:60]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bayesvm.BayesvmWarning)
        model = bayesvm.BayesianSVC().fit(X, y)
    p = model.predict_proba(X)
    assert p.shape == (60, 2) and np.all((p > 0) & (p < 1))
    assert np.isfinite(model.log_evidence_) and model.log_evidence_se_ >= 0
    work = model.selection_.summary_counts()
    budget = EvidenceBudget()
    # every anchor's work is at most the full plan's (refined anchors take it) with the schedule's whole buffer
    per_anchor = budget.n_runs * budget.n_particles * (1 + MAX_TEMPERATURES * budget.moves(60) * (budget.max_shrinks + 1))
    assert 0 < work["normalization_evaluations_search"] <= work["anchors"] * per_anchor
    assert 0 < work["normalization_evaluations_check"]
    before = (model.log_evidence_, model.log_evidence_se_)
    evidence = model.certify_evidence(budget=4.0)
    assert model.log_evidence_ == evidence.total and model.C_ == float(model.selection_.best["C"])
    assert abs(model.log_evidence_ - before[0]) < N_SE * np.hypot(model.log_evidence_se_, before[1]) + 0.1
    with pytest.raises(ValueError, match="budget must be a positive number"):
        model.certify_evidence(budget=0)
