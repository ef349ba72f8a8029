"""The evidence, the selection and the estimator on the low-rank prior, against the full-Gram path."""

import warnings

import numpy as np
import pytest

from bayesvm import BayesianSVC, log_evidence
from bayesvm.datasets import load_dataset
from bayesvm.kernels import RBF
from bayesvm.posterior import Posterior
from bayesvm.exceptions import LowRankWarning
from bayesvm.selection.search_priors import AUTO_INDUCING_ABOVE, FullPrior, InducingPrior, prior_for


@pytest.fixture(scope="module")
def data():
    X, y = load_dataset("breast_cancer", return_X_y=True)
    rng = np.random.default_rng(0)
    index = rng.permutation(len(y))
    return X[index[:120]], y[index[:120]], X[index[120:220]], y[index[120:220]]


KERNEL = RBF(length_scale=6.0, amplitude=30.0, offset=30.0)


@pytest.mark.slow
def test_inducing_at_every_training_input_reproduces_the_full_evidence(data):
    """With Z = X the FITC prior is the exact prior: ln Q(D) equal, ln N(D) within the samplers' errors."""
    X, y, X_test, _ = data
    full = log_evidence(X, y, C=1.0, kernel=KERNEL)
    low = log_evidence(X, y, C=1.0, kernel=KERNEL, inducing=X)
    assert low.fit is None and low.n == len(y) and full.normalization_trusted and low.normalization_trusted
    assert low.naive == pytest.approx(full.naive, abs=1e-5)
    assert abs(low.log_normalization - full.log_normalization) < 4 * np.hypot(low.total_se, full.total_se) + 0.05
    # the predictions of the two EP posteriors agree as well
    mean_low, var_low = low.posterior.latent(X_test)
    mean_full, var_full = Posterior.from_fit(full.fit, "ep").latent(X_test)
    np.testing.assert_allclose(mean_low, mean_full, atol=1e-5)
    np.testing.assert_allclose(var_low, var_full, rtol=1e-5, atol=1e-8)


@pytest.mark.slow
def test_low_rank_evidence_converges_to_the_full_one_as_m_grows(data):
    """k-means inducing inputs: the evidence error shrinks with m and is within half a nat at m = 80 of 120."""
    X, y, _, _ = data
    full = log_evidence(X, y, C=1.0, kernel=KERNEL)
    errors = {m: abs(log_evidence(X, y, C=1.0, kernel=KERNEL, inducing=m).total - full.total) for m in (10, 80)}
    assert errors[80] < 0.5, errors
    assert errors[80] < errors[10], errors


def test_estimator_on_the_low_rank_prior_predicts_like_the_full_one(data):
    """BayesianSVC at fixed hyperparameters on the low-rank prior (30 inducing inputs) predicts like the one on the
    full prior, and its ln P(D) is its log_marginal_likelihood there; 60 training rows (within the smallest problem
    size)."""
    X, y, X_test, y_test = data
    X, y = X[:60], y[:60]
    fixed = dict(C=1.0, amplitude=30.0, offset=30.0, length_scale=6.0)
    low = BayesianSVC(n_inducing=30, **fixed).fit(X, y)
    full = BayesianSVC(n_inducing=None, **fixed).fit(X, y)
    assert low.fit_ is None and low.support_ is None and low.inducing_.shape == (30, X.shape[1])
    assert full.inducing_ is None and full.fit_ is not None
    p_low, p_full = low.predict_proba(X_test)[:, 1], full.predict_proba(X_test)[:, 1]
    assert np.max(np.abs(p_low - p_full)) < 0.1
    assert np.mean(low.predict(X_test) == y_test) > 0.9
    # the evidence at theta is the same estimator as the fitted one
    theta = np.log([1.0, 30.0, 1.0, 6.0])
    assert low.log_marginal_likelihood(theta) == pytest.approx(low.log_evidence_, abs=1e-9)
    with pytest.raises(ValueError, match="laplace"):
        BayesianSVC(n_inducing=20, posterior="laplace", **fixed).fit(X, y)


def test_prior_for_switches_to_the_low_rank_prior_above_the_threshold():
    rng = np.random.default_rng(1)
    small = rng.normal(size=(50, 2))
    assert isinstance(prior_for(small, "auto"), FullPrior)
    assert isinstance(prior_for(small, None), FullPrior)
    chosen = prior_for(small, 7)
    assert isinstance(chosen, InducingPrior) and chosen.n_inducing == 7
    large = rng.normal(size=(AUTO_INDUCING_ABOVE + 1, 2))
    with pytest.warns(LowRankWarning, match="low-rank prior"):
        assert isinstance(prior_for(large, "auto"), InducingPrior)
    for bad in ("many", 0, 3.5):
        with pytest.raises(ValueError):
            prior_for(small, bad)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="inducing"):
            prior_for(small, np.zeros((3, 5)))
