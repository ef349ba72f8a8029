"""More than two classes: the coupling, the shared evidence, the estimator and the selection."""

import itertools
import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.datasets import load_iris
from sklearn.preprocessing import StandardScaler

from bayesvm.exceptions import BayesvmWarning
from bayesvm._precision import float64_scope
from bayesvm.coupling import COUPLINGS, couple_one_vs_rest
from bayesvm.estimator import BayesianSVC
from bayesvm.evidence.log_evidence import log_evidence, log_evidence_one_vs_rest
from bayesvm.kernels import RBF
from bayesvm.selection.select import select_hyperparameters

FIXED = dict(C=1.0, amplitude=3.0, length_scale=1.5, offset=3.0)
KERNEL = RBF(length_scale=1.5, amplitude=3.0, offset=3.0)


@pytest.fixture(scope="module")
def iris():
    """45 iris flowers (15 per class), standardised, with string labels; and 30 others to predict."""
    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    rng = np.random.default_rng(0)
    train = np.concatenate([rng.choice(np.flatnonzero(y == c), 15, replace=False) for c in range(3)])
    test = np.setdiff1d(np.arange(y.size), train)[::4]
    return X[train], names[train], X[test], names[test]


def _kl_objective(p, r):
    return np.sum(r * np.log(r / p) + (1 - r) * np.log((1 - r) / (1 - p)))


def test_kl_coupling_is_the_minimiser_of_the_summed_divergence():
    """Zadrozny's coupling against a general constrained minimiser (SLSQP) of the same objective."""
    r = np.random.default_rng(1).uniform(0.02, 0.98, size=(6, 4))
    p = couple_one_vs_rest(r, "kl")
    for row, coupled in zip(r, p):
        reference = minimize(lambda q: _kl_objective(q, row), np.full(4, 0.25), method="SLSQP",
                             bounds=[(1e-9, 1 - 1e-9)] * 4,
                             constraints={"type": "eq", "fun": lambda q: q.sum() - 1}, options={"ftol": 1e-14})
        np.testing.assert_allclose(coupled, reference.x, atol=1e-6)


def test_kl_coupling_beats_every_point_of_a_fine_simplex_grid():
    """Brute force at k = 3: no grid point of the simplex has a smaller divergence than the coupled p."""
    r = np.array([0.7, 0.5, 0.1])
    p = couple_one_vs_rest(r[None, :], "kl")[0]
    steps = np.linspace(0.001, 0.998, 400)
    grid = np.array([(a, b, 1 - a - b) for a, b in itertools.product(steps, steps) if 1 - a - b > 1e-4])
    values = np.sum(r * np.log(r / grid) + (1 - r) * np.log((1 - r) / (1 - grid)), axis=1)
    assert _kl_objective(p, r) <= values.min() + 1e-9
    np.testing.assert_allclose(p, grid[np.argmin(values)], atol=5e-3)


def test_the_couplings_have_their_closed_forms_and_keep_the_order():
    r = np.array([[0.9, 0.3, 0.2], [0.1, 0.1, 0.1], [0.5, 0.5, 0.6]])
    np.testing.assert_allclose(couple_one_vs_rest(r, "normalize"), r / r.sum(1, keepdims=True))
    odds = r / (1 - r)
    np.testing.assert_allclose(couple_one_vs_rest(r, "odds"), odds / odds.sum(1, keepdims=True))
    for method in COUPLINGS:
        p = couple_one_vs_rest(r, method)
        np.testing.assert_allclose(p.sum(axis=1), 1.0)
        assert np.array_equal(np.argmax(p, axis=1), np.argmax(r, axis=1))
        # equal one-vs-rest probabilities give the uniform distribution
        np.testing.assert_allclose(p[1], 1 / 3)
    # already a distribution: the KL coupling leaves it unchanged (zero divergence)
    q = np.array([[0.2, 0.3, 0.5]])
    np.testing.assert_allclose(couple_one_vs_rest(q, "kl"), q, atol=1e-12)


@pytest.mark.parametrize("r, message", [
    (np.array([0.2, 0.8]), "n_samples, n_classes"),
    (np.array([[0.2, 1.3]]), r"probabilities in \[0, 1\]"),
    (np.array([[0.2, np.nan]]), r"probabilities in \[0, 1\]"),
])
def test_bad_coupling_inputs_are_refused(r, message):
    with pytest.raises(ValueError, match=message):
        couple_one_vs_rest(r)
    with pytest.raises(ValueError, match="coupling must be one of"):
        couple_one_vs_rest(np.array([[0.5, 0.5]]), "softmax")


def test_one_vs_rest_evidence_is_the_sum_of_the_binary_evidences(iris):
    """One shared ln N(D) estimate: each problem equals log_evidence on its own labels (same seed), and the
    total is their sum."""
    X, y, _, _ = iris
    joint = log_evidence_one_vs_rest(X, y, C=1.0, kernel=KERNEL, random_state=3)
    assert joint.classes.tolist() == ["setosa", "versicolor", "virginica"]
    separate = [log_evidence(X, y == c, C=1.0, kernel=KERNEL, random_state=3) for c in joint.classes]
    for problem, alone in zip(joint.problems, separate):
        assert problem.naive == pytest.approx(alone.naive, rel=1e-10)
        assert problem.log_normalization == pytest.approx(alone.log_normalization, rel=1e-10)
    assert joint.total == pytest.approx(sum(e.total for e in separate), rel=1e-10)
    # the shared ln N(D)'s error counts three times; EP's ln Q(D) has none
    assert joint.total_se == pytest.approx(3 * separate[0].log_normalization_se)
    # two classes: the binary evidence itself
    binary = log_evidence_one_vs_rest(X[15:], y[15:], C=1.0, kernel=KERNEL)
    assert binary.total == pytest.approx(log_evidence(X[15:], y[15:], C=1.0, kernel=KERNEL).total, rel=1e-10)


def test_estimator_couples_the_binary_models(iris):
    """With fixed hyperparameters, the k-class estimator's probabilities are the coupling of k binary estimators
    fitted on their own, with string classes, rows summing to one and predict = argmax."""
    X, y, X_test, _ = iris
    model = BayesianSVC(**FIXED).fit(X, y)
    assert model.classes_.tolist() == ["setosa", "versicolor", "virginica"]
    binary = [BayesianSVC(**FIXED).fit(X, y == c).predict_proba(X_test)[:, 1] for c in model.classes_]
    for coupling in COUPLINGS:
        model.set_params(coupling=coupling)
        P = model.predict_proba(X_test)
        np.testing.assert_allclose(P, couple_one_vs_rest(np.column_stack(binary), coupling), rtol=1e-8, atol=1e-12)
        np.testing.assert_allclose(P.sum(axis=1), 1.0)
        assert np.array_equal(model.predict(X_test), model.classes_[np.argmax(P, axis=1)])
        assert np.array_equal(np.argmax(model.decision_function(X_test), axis=1), np.argmax(P, axis=1))
    bars = model.error_bars(X_test)
    assert bars.theta.shape == bars.sigma.shape == (X_test.shape[0], 3)
    assert np.all(bars.sigma > 0)
    assert model.log_evidence_ == pytest.approx(model.evidence_.total)
    assert model.log_marginal_likelihood(np.log([1.0, 3.0, 1.0, 1.5])) == pytest.approx(model.log_evidence_, rel=1e-8)


def test_shared_selection_maximises_the_summed_evidence(iris):
    """The shared search's answer is checked with the summed evidence there, which must beat the evidence at the
    default start's neighbourhood; per-class selection gives one set of hyperparameters per class."""
    X, y, X_test, y_test = iris
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", BayesvmWarning)
        selection = select_hyperparameters(X, y, grid={"C": 1.0})
    assert selection.report.trusted
    best = selection.best
    kernel = RBF(length_scale=best["length_scale"], amplitude=best["amplitude"], offset=best["offset"])
    again = log_evidence_one_vs_rest(X, y, C=best["C"], kernel=kernel)
    assert selection.best_value == pytest.approx(again.total, abs=1e-6)
    start = log_evidence_one_vs_rest(X, y, C=1.0, kernel=RBF(length_scale=2.0, amplitude=10.0, offset=10.0))
    assert selection.best_value > start.total
    record = selection.to_dict()
    assert record["classes"] == ["setosa", "versicolor", "virginica"] and len(record["log_naive_evidence"]) == 3

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", BayesvmWarning)
        model = BayesianSVC(C=1.0, amplitude=3.0, multiclass="per_class").fit(X, y)
    assert model.C_.tolist() == [1.0, 1.0, 1.0] and model.length_scale_.shape == (3,)
    assert len(model.selection_) == 3 and model.evidence_.shared_normalization is False
    assert model.log_evidence_ == pytest.approx(sum(s.best_value for s in model.selection_))
    assert np.mean(model.predict(X_test) == y_test) > 0.8


def test_grid_and_cv_take_two_classes_only(iris):
    X, y, _, _ = iris
    for method in ("grid", "cv"):
        with pytest.raises(ValueError, match="takes two classes"):
            select_hyperparameters(X, y, method=method)
    with pytest.raises(ValueError, match="only one class"):
        BayesianSVC(**FIXED).fit(X, np.zeros(X.shape[0]))
    with pytest.raises(ValueError, match="exactly two"):
        log_evidence(X, y, C=1.0, kernel=KERNEL)


@pytest.mark.parametrize("prior", ["full", "low-rank"])
def test_k_problems_in_one_ep_batch_equal_k_separate_runs(prior):
    """The search's ln Q(D) of k one-vs-rest problems (one K(x), one vector-Jacobian product for the summed
    cotangent) gives each problem's value and sites as its own run does, and the sum of their gradients."""
    from bayesvm.inference.ep_gradient import (
        batched_sites, ep_naive_evidence_and_gradient, ep_naive_evidences_and_gradient, zero_sites)
    from bayesvm.inference.ep_low_rank import (
        low_rank_naive_evidence_and_gradient, low_rank_naive_evidences_and_gradient)

    X, y = load_iris(return_X_y=True)
    # the full prior: 50 rows (padded to 64, the size of the module's other fits); the low-rank one: 75 rows
    # through 30 inducing inputs
    X, y = (X[::3], y[::3]) if prior == "full" else (X[::2], y[::2])
    Y = np.where(y[None, :] == np.arange(3)[:, None], 1.0, -1.0)
    x = np.log([1.0, 3.0, 1.0, 1.5])
    template = RBF()
    loop = {"tol": 1e-10, "log_z_tol": 0.0}
    Z = X[np.arange(X.shape[0]) % 5 < 2]
    with float64_scope():
        if prior == "full":
            single = [ep_naive_evidence_and_gradient(x, X, y_pm, template, zero_sites(X.shape[0]), **loop)
                      for y_pm in Y]
            batch = ep_naive_evidences_and_gradient(x, X, Y, template, batched_sites([zero_sites(X.shape[0])] * 3),
                                                    **loop)
        else:
            single = [low_rank_naive_evidence_and_gradient(x, X, Z, y_pm, template, zero_sites(X.shape[0]), **loop)
                      for y_pm in Y]
            batch = low_rank_naive_evidences_and_gradient(x, X, Z, Y, template,
                                                          batched_sites([zero_sites(X.shape[0])] * 3), **loop)
    assert np.all(np.asarray(batch.converged))
    np.testing.assert_allclose(np.asarray(batch.value), [float(s.value) for s in single], rtol=0, atol=1e-9)
    np.testing.assert_allclose(np.asarray(batch.sites.precision), np.stack([s.sites.precision for s in single]),
                               rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(np.asarray(batch.gradient), np.sum([np.asarray(s.gradient) for s in single], axis=0),
                               rtol=1e-7, atol=1e-8)
    assert list(np.asarray(batch.n_iter)) == [int(s.n_iter) for s in single]


def test_the_search_takes_only_estimators_with_a_gradient_along_a_path():
    from bayesvm.evidence.approximations import AnnealedNormalization, EPNaive, path_estimators
    from bayesvm.normalization.budget import EvidenceBudget

    budget = EvidenceBudget(n_particles=8)
    naive, normalization = path_estimators("ep", "annealed", tol=1e-3, key=7, budget=budget)
    assert naive == EPNaive(tol=1e-3) and normalization == AnnealedNormalization(key=7, budget=budget)
    with pytest.raises(ValueError, match=r"approximation 'laplace' has none along a path. Use one of \('ep',\)"):
        path_estimators("laplace", "annealed")
    with pytest.raises(ValueError, match=r"normalization 'prior' has none along a path. Use one of \('annealed',\)"):
        path_estimators("ep", "prior")
