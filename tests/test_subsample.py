"""Selection on a subsample of the rows, the posterior on all of them (bayesvm.selection.subsample)."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_iris

from bayesvm import BayesianSVC, log_evidence
from bayesvm._validation import training_data
from bayesvm.datasets import load_dataset
from bayesvm.kernels import RBF
from bayesvm.posterior import Posterior
from bayesvm.selection import search_priors, subsample
from bayesvm.exceptions import LowRankWarning, SubsampleWarning
from bayesvm.selection.subsample import selection_subset

FIXED = dict(C=1.0, amplitude=30.0, offset=30.0, length_scale=6.0)


def fitted_rows(posterior) -> int:
    """The number of training rows a posterior was fitted on (the MAP SVM's on the full prior)."""
    return posterior.fit.X.shape[0] if isinstance(posterior, Posterior) else posterior.n


@pytest.fixture(scope="module")
def data():
    X, y = load_dataset("breast_cancer", return_X_y=True)
    index = np.random.default_rng(0).permutation(len(y))
    return X[index[:60]], y[index[:60]], X[index[60:120]]


def test_the_subsample_keeps_every_class_share_and_its_rows():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 2))
    y = np.repeat(["a", "b", "c"], [200, 150, 50])
    data = training_data(X, y)
    subset, rows = selection_subset(data, 80, random_state=1)
    assert rows.shape == (80,) and np.all(np.diff(rows) > 0)
    np.testing.assert_array_equal(np.unique(y[rows], return_counts=True)[1], [40, 30, 10])
    np.testing.assert_array_equal(subset.X, X[rows])
    np.testing.assert_array_equal(subset.Y, data.Y[:, rows])
    np.testing.assert_array_equal(subset.classes, data.classes)
    # another seed draws other rows; as many rows as there are (or more) is every row
    assert not np.array_equal(selection_subset(data, 80, random_state=2)[1], rows)
    for size in (None, 400, 1000):
        same, none = selection_subset(data, size)
        assert same is data and none is None


def test_a_rare_class_keeps_two_rows_in_the_subsample():
    rng = np.random.default_rng(0)
    y = np.r_[np.zeros(300, int), np.ones(296, int), np.full(4, 2)]  # class 2 would round to 0 of 50
    data = training_data(rng.normal(size=(600, 2)), y)
    _, rows = selection_subset(data, 50, random_state=0)
    counts = np.bincount(y[rows], minlength=3)
    assert counts[2] == 2 and counts[:2].sum() == 50 and np.unique(rows).size == rows.size


def test_auto_selects_on_at_most_the_default_number_of_rows():
    """The default: every row up to DEFAULT_SELECTION_SIZE (and one row above it with two classes, where no stratified
    draw of that many exists), a stratified subsample of exactly that many above, with a notice."""
    size = subsample.DEFAULT_SELECTION_SIZE
    X, y = np.random.default_rng(0).normal(size=(size + 2, 2)), np.arange(size + 2) % 3 == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert selection_subset(training_data(X[:size], y[:size]), "auto")[1] is None
        assert selection_subset(training_data(X[:size + 1], y[:size + 1]), "auto")[1] is None
    with pytest.warns(SubsampleWarning, match=f"subsample of {size} rows"):
        subset, rows = selection_subset(training_data(X, y), "auto")
    assert rows.size == size == subset.X.shape[0] and np.array_equal(subset.X, X[rows])
    assert abs(y[rows].mean() - y.mean()) < 1 / size  # stratified


def test_auto_subsamples_above_the_threshold_and_says_so(monkeypatch, data):
    X, y = data[0][:30], data[1][:30]
    data = training_data(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert selection_subset(data, "auto")[1] is None
    monkeypatch.setattr(subsample, "DEFAULT_SELECTION_SIZE", 10)
    with pytest.warns(SubsampleWarning, match="subsample of 10 rows"):
        _, rows = selection_subset(data, "auto")
    assert rows.size == 10
    monkeypatch.setattr(search_priors, "AUTO_INDUCING_ABOVE", 20)  # the posterior of all 30 rows: low rank
    monkeypatch.setattr(search_priors, "DEFAULT_INDUCING", 30)  # as test_low_rank_posterior_of_every_row's evidence
    with pytest.warns((SubsampleWarning, LowRankWarning)) as record:  # the estimator's warnings point at the caller's line
        BayesianSVC(**FIXED).fit(X, y)
    notices = [w for w in record if w.category in (SubsampleWarning, LowRankWarning)]
    assert sorted(w.category.__name__ for w in notices) == ["LowRankWarning", "SubsampleWarning"]
    assert all(w.filename == __file__ for w in notices), [(w.category, w.filename) for w in notices]
    # every hyperparameter fixed: nothing is selected, the subsample serves the evidence alone
    assert "the evidence is computed" in next(str(w.message) for w in notices if w.category is SubsampleWarning)


def test_bad_subsample_sizes_are_refused_with_what_is_accepted():
    data = training_data(np.random.default_rng(0).normal(size=(30, 2)), np.r_[np.zeros(29), 1])
    for bad in ("half", 1, 0, 2.5, True):
        with pytest.raises(ValueError, match="selection_size must be"):
            selection_subset(data, bad)
    with pytest.raises(ValueError, match="selection_size=None"):  # one row of a class cannot be stratified
        selection_subset(data, 10)
    with pytest.raises(ValueError):  # the estimator's own parameter validation
        BayesianSVC(selection_size=1, **FIXED).fit(data.X, np.r_[np.zeros(15), np.ones(15)])


def test_evidence_of_the_subsample_posterior_of_every_row(data):
    """Fixed hyperparameters: ln P(D) is that of the subsample's rows, the posterior that of all rows."""
    X, y, X_test = data
    model = BayesianSVC(selection_size=30, **FIXED).fit(X, y)
    rows = model.selection_rows_
    assert rows.size == 30
    kernel = RBF(length_scale=6.0, amplitude=30.0, offset=30.0)
    assert model.log_evidence_ == pytest.approx(log_evidence(X[rows], y[rows], C=1.0, kernel=kernel).total,
                                                abs=1e-9)
    everything = BayesianSVC(selection_size=None, **FIXED).fit(X, y)
    assert everything.selection_rows_ is None
    assert model.fit_.X.shape == X.shape
    np.testing.assert_array_equal(model.support_, everything.support_)
    # EP on every row runs to the looser tolerance of a posterior used for its predictions alone: fewer sweeps,
    # the same probabilities but for that tolerance's effect (about 1e-5 here)
    assert int(model.posterior_.ep.n_iter) < int(everything.posterior_.ep.n_iter)
    np.testing.assert_allclose(model.predict_proba(X_test), everything.predict_proba(X_test), atol=2e-5)
    laplace = BayesianSVC(selection_size=30, posterior="laplace", **FIXED).fit(X, y)
    assert laplace.posterior_.approximation == "laplace" and laplace.fit_.X.shape == X.shape


def test_low_rank_posterior_of_every_row(data):
    X, y, X_test = data
    model = BayesianSVC(selection_size=30, n_inducing=30, **FIXED).fit(X, y)
    rows = model.selection_rows_
    kernel = RBF(length_scale=6.0, amplitude=30.0, offset=30.0)
    reference = log_evidence(X[rows], y[rows], C=1.0, kernel=kernel, inducing=30)
    assert model.log_evidence_ == pytest.approx(reference.total, abs=1e-9)
    everything = BayesianSVC(selection_size=None, n_inducing=30, **FIXED).fit(X, y)
    np.testing.assert_array_equal(model.inducing_, everything.inducing_)
    assert model.posterior_.n == X.shape[0] and model.fit_ is None
    np.testing.assert_allclose(model.predict_proba(X_test), everything.predict_proba(X_test), atol=1e-7)


def test_the_selection_is_that_of_the_subsample(data):
    """The hyperparameters selected with selection_size are those selected on the subsample's rows alone."""
    X, y, X_test = data
    fixed = dict(C=1.0, amplitude=30.0, offset=30.0)
    model = BayesianSVC(selection_size=30, **fixed).fit(X, y)
    alone = BayesianSVC(selection_size=None, **fixed).fit(X[model.selection_rows_], y[model.selection_rows_])
    assert model.length_scale_ == pytest.approx(alone.length_scale_, rel=1e-9)
    assert model.log_evidence_ == pytest.approx(alone.log_evidence_, abs=1e-9)
    theta = np.log([1.0, 30.0, 1.0, model.length_scale_])
    assert model.log_marginal_likelihood(theta) == pytest.approx(alone.log_evidence_, abs=1e-9)
    assert not np.allclose(model.predict_proba(X_test), alone.predict_proba(X_test), atol=1e-3)


@pytest.mark.parametrize("options", [{}, {"multiclass": "per_class"}, {"n_inducing": 15}])
def test_more_than_two_classes_on_a_subsample(options):
    """Every problem's posterior is fitted on all rows: one run for shared hyperparameters (full or low-rank
    prior), one per problem with per-class ones."""
    X, y = load_iris(return_X_y=True)
    X, y = X[::3], y[::3]  # 17, 17 and 16 rows of the classes
    fixed = dict(C=1.0, amplitude=1.0, offset=1.0, length_scale=2.0, **options)
    model = BayesianSVC(selection_size=30, **fixed).fit(X, y)
    everything = BayesianSVC(selection_size=None, **fixed).fit(X, y)
    assert np.bincount(y[model.selection_rows_]).tolist() == [10, 10, 10]
    assert [fitted_rows(posterior) for posterior in model.posterior_] == [50, 50, 50]
    # the full prior's EP on every row stops at PREDICTION_TOLERANCE, the evidence's at 1e-8
    np.testing.assert_allclose(model.predict_proba(X), everything.predict_proba(X), atol=2e-5)
