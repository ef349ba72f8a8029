"""Sample weights, class weights and repeated rows: a row of weight w is w copies of it, through every term, and the
same data give the same answer however they arrive (row order, batches, copies or weights)."""

import contextlib
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import integrate, optimize
from scipy.special import logsumexp
from scipy.stats import norm

from bayesvm import BayesianSVC, BayesvmWarning, log_evidence, select_hyperparameters
from bayesvm.inference.ep import ep_log_evidence
from bayesvm.inference.ep_loop import merged_label_weights
from bayesvm.inference.tilted import label_tilted_moments
from bayesvm.kernels import RBF, gram_matrix
from bayesvm.model import log_kappa, log_nu
from bayesvm.solver.dual import fit_map
from test_ep import quad_moments

FIXED = dict(C=1.0, amplitude=2.0, length_scale=1.0, offset=1.0)
KERNEL = RBF(length_scale=1.0, amplitude=2.0, offset=1.0)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2))
    y = (X[:, 0] + 0.6 * rng.normal(size=30) > 0).astype(int)
    return X, y, rng.normal(size=(6, 2))


@contextlib.contextmanager
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BayesvmWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def _predictions(model, X):
    bars = model.error_bars(X)
    return np.column_stack([model.predict_proba(X)[:, 1], bars.theta, bars.sigma])


# ---------------------------------------------------------------------------
# each term against an independent computation


@pytest.mark.parametrize("weight", [0.0, 0.5, 2.5])
@pytest.mark.parametrize("mean, variance, y", [(0.3, 0.8, 1.0), (-1.2, 2.0, 1.0), (0.5, 0.1, -1.0)])
def test_weighted_label_site_moments_match_quadrature(weight, mean, variance, y):
    """N(theta; m, v) Q(y | theta)^w: ln Z, mean and variance against numerical integration of Q^w itself."""
    C = 1.7
    log_site = lambda t: weight * (float(log_kappa(C)) - C * np.maximum(0.0, 1.0 - y * t))  # noqa: E731
    scales = [np.sqrt(variance), 1.0 / (weight * C + 1e-3), 1.0 / (weight * C + 1.0 / np.sqrt(variance))]
    reference = quad_moments(log_site, mean, variance, [y], scales, centres=[mean + y * weight * C * variance])
    moments = label_tilted_moments(mean, variance, C, y, weight)
    np.testing.assert_allclose(float(moments.log_z), reference[0], rtol=1e-9, atol=1e-9)
    assert abs(float(moments.mean) - reference[1]) <= 1e-8 * max(abs(reference[1]), np.sqrt(reference[2]))
    np.testing.assert_allclose(float(moments.variance), reference[2], rtol=1e-7)


def test_weighted_ep_evidence_of_one_point_is_the_integral():
    """One latent: EP is exact, so ln Q(D) = ln INT N(theta; 0, k) Q(y | theta)^w dtheta (quadrature)."""
    k, C, w = 1.8, 0.9, 3.0
    integrand = lambda t: norm.pdf(t, 0, np.sqrt(k)) * np.exp(w * (float(log_kappa(C)) - C * max(0.0, 1.0 - t)))
    z = integrate.quad(integrand, -np.inf, 1.0, epsrel=1e-12)[0] + integrate.quad(integrand, 1.0, np.inf,
                                                                                     epsrel=1e-12)[0]
    result = ep_log_evidence(np.array([[k]]), np.array([1.0]), C, weights=np.array([w]))
    np.testing.assert_allclose(float(result.log_z), np.log(z), rtol=0, atol=1e-8)


@pytest.mark.parametrize("mean, variance, C, y, weight, opposite", [
    (0.0, 1.0, 1.0, 1.0, 1.0, 1.0),
    (0.3, 0.5, 2.0, 1.0, 3.0, 2.0),
    (-2.0, 4.0, 0.5, -1.0, 1.5, 0.7),
    (1.0, 30.0, 0.3, 1.0, 1.0, 1.0),
    (0.0, 1.0, 1.0, 1.0, 500.0, 550.0),  # 1,050 rows of one input: a kink at -1 of width 1/500
    (-0.9, 1e-3, 10.0, 1.0, 5.0, 5.0),
    (3.0, 2.0, 1.0, 1.0, 0.0, 2.0),
])
def test_two_label_site_moments_match_quadrature(mean, variance, C, y, weight, opposite):
    """One site carrying both labels of an input, N(theta; m, v) Q(y | theta)^w Q(-y | theta)^o: ln Z, mean and
    variance against numerical integration of the product itself."""
    lk = float(log_kappa(C))
    log_site = lambda t: (weight * (lk - C * np.maximum(0.0, 1.0 - y * t))  # noqa: E731
                          + opposite * (lk - C * np.maximum(0.0, 1.0 + y * t)))
    scales = [np.sqrt(variance)] + [1.0 / (C * a) for a in (weight, opposite, abs(weight - opposite)) if a > 0]
    reference = quad_moments(log_site, mean, variance, [-1.0, 1.0], scales)
    moments = label_tilted_moments(mean, variance, C, y, weight, opposite)
    np.testing.assert_allclose(float(moments.log_z), reference[0], rtol=1e-9, atol=1e-9)
    assert abs(float(moments.mean) - reference[1]) <= 1e-8 * np.sqrt(reference[2])
    np.testing.assert_allclose(float(moments.variance), reference[2], rtol=1e-7)


@pytest.mark.parametrize("mean, variance, y", [(0.3, 0.8, 1.0), (-1.2, 2.0, -1.0), (4.0, 0.01, 1.0)])
def test_a_two_label_site_without_the_other_label_is_the_one_label_site(mean, variance, y):
    one = label_tilted_moments(mean, variance, 1.3, y, 2.5)
    two = label_tilted_moments(mean, variance, 1.3, y, 2.5, 0.0)
    np.testing.assert_allclose(np.array(two), np.array(one), rtol=1e-12, atol=1e-14)


def test_rows_of_one_input_merge_into_one_site_per_problem():
    """Rows of equal input share one site, on their first row of positive weight, carrying each label's summed
    weight; the input's other rows are flat (weight 0). Worked by hand for two and three classes."""
    X = np.array([[0.0], [1.0], [0.0], [2.0], [1.0], [0.0]])
    weights, opposite = merged_label_weights(X, np.array([1, 1, -1, 1, 1, 1.0]), np.array([0, 1, 2, 3, 4, 5.0]))
    # input 0: rows 0 (w 0, +1), 2 (w 2, -1), 5 (w 5, +1): the site on row 2, its label -1 weighs 2, +1 weighs 5
    np.testing.assert_array_equal(weights, [[0, 5, 2, 3, 0, 0]])
    np.testing.assert_array_equal(opposite, [[0, 0, 5, 0, 0, 0]])
    Y = np.array([[1, 1, -1, 1, -1, -1.0], [-1, -1, 1, -1, 1, -1], [-1, -1, -1, -1, -1, 1]])  # classes a a b a b c
    weights, opposite = merged_label_weights(X, Y)
    np.testing.assert_array_equal(weights, [[1, 1, 0, 1, 0, 0], [2, 1, 0, 1, 0, 0], [2, 2, 0, 1, 0, 0]])
    np.testing.assert_array_equal(opposite, [[2, 1, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0]])
    weights, opposite = merged_label_weights(X[[0, 1, 3]], Y[:, [0, 1, 3]], np.array([1.0, 2.0, 3.0]))
    assert opposite is None
    np.testing.assert_array_equal(weights, np.tile([1.0, 2.0, 3.0], (3, 1)))


@pytest.mark.parametrize("y, sample_weight", [([0, 1], [2.0, 3.0]), ([0, 1, 1, 0, 1], None)])
def test_one_input_with_both_labels_is_one_exact_site(y, sample_weight):
    """Every row at one input: one latent with one site, on which EP is exact, so ln Q(D) is the 1-D integral
    INT N(theta; 0, k) Q(+1 | theta)^{w+} Q(-1 | theta)^{w-} dtheta (quadrature), whether the labels come as
    weighted rows or as repeated ones."""
    k, C = 2.0, 0.8
    w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight)
    w_plus, w_minus = w[np.asarray(y) == 1].sum(), w[np.asarray(y) == 0].sum()
    lk = float(log_kappa(C))
    integrand = lambda t: norm.pdf(t, 0, np.sqrt(k)) * np.exp(  # noqa: E731
        (w_plus + w_minus) * lk - C * (w_plus * max(0.0, 1.0 - t) + w_minus * max(0.0, 1.0 + t)))
    z = sum(integrate.quad(integrand, a, b, epsrel=1e-12)[0] for a, b in [(-np.inf, -1), (-1, 1), (1, np.inf)])
    with _quiet():
        evidence = log_evidence(np.zeros((len(y), 1)), y, C=C, kernel=RBF(amplitude=k, offset=0.0),
                                sample_weight=sample_weight)
    np.testing.assert_allclose(evidence.naive, np.log(z), rtol=0, atol=1e-8)


def test_weighted_map_svm_solves_the_weighted_dual(data):
    """fit_map's alpha against scipy's bounded quasi-Newton on the dual max sum a - a^T Q a / 2, 0 <= a_i <= C w_i."""
    X, y, _ = data
    w = np.random.default_rng(1).uniform(0.0, 3.0, size=X.shape[0])
    C = 2.0
    fit = fit_map(X, y, C=C, kernel=KERNEL, sample_weight=w)
    y_pm = np.where(y == 1, 1.0, -1.0)
    Q = np.asarray(gram_matrix(KERNEL, X)) * np.outer(y_pm, y_pm)
    dual = optimize.minimize(lambda a: (0.5 * a @ Q @ a - a.sum(), Q @ a - 1.0), np.zeros(X.shape[0]), jac=True,
                             method="L-BFGS-B", bounds=[(0.0, C * wi) for wi in w],
                             options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 20000})
    np.testing.assert_allclose(fit.alpha, dual.x, rtol=0, atol=1e-5)
    assert np.all(fit.alpha <= C * w + 1e-12)


def test_weighted_normalization_matches_brute_force_monte_carlo():
    """ln N(D) = ln E[prod_i nu(theta_i)^w_i] on four inputs: tempered SMC against 10^6 prior draws."""
    rng = np.random.default_rng(1)
    X, y, w = rng.normal(size=(4, 1)), np.array([0, 1, 0, 1]), np.array([1.0, 3.0, 0.5, 2.0])
    C = 1.5
    theta = rng.multivariate_normal(np.zeros(4), np.asarray(gram_matrix(KERNEL, X)), size=1_000_000)
    log_f = np.sum(w * np.asarray(log_nu(theta, C)), axis=1)
    reference = logsumexp(log_f) - np.log(log_f.size)
    evidence = log_evidence(X, y, C=C, kernel=KERNEL, sample_weight=w)
    assert abs(evidence.log_normalization - reference) < 4 * evidence.log_normalization_se + 0.01


def test_weighted_low_rank_evidence_through_every_input_is_the_full_one(data):
    """The low-rank prior through every (distinct) input is the full prior: the same weighted ln Q(D) and, within
    the samplers' errors, ln N(D)."""
    X, y, _ = data
    w = np.random.default_rng(2).integers(1, 4, size=X.shape[0]).astype(float)
    full = log_evidence(X, y, C=1.0, kernel=KERNEL, sample_weight=w)
    low_rank = log_evidence(X, y, C=1.0, kernel=KERNEL, sample_weight=w, inducing=X)
    assert low_rank.naive == pytest.approx(full.naive, abs=1e-5)
    assert abs(low_rank.log_normalization - full.log_normalization) < 4 * np.hypot(
        low_rank.log_normalization_se, full.log_normalization_se)


# ---------------------------------------------------------------------------
# copies, weights and penalties


@pytest.mark.parametrize("posterior", ["ep", "laplace"])
def test_every_row_twice_at_C_is_every_row_once_at_2C(data, posterior):
    """The hinge terms add: rows twice at C have the posterior of theta of rows once at 2C (mean and sd, 1e-6)."""
    X, y, X_new = data
    twice = BayesianSVC(posterior=posterior, **FIXED).fit(np.vstack([X, X]), np.concatenate([y, y]))
    once = BayesianSVC(posterior=posterior, **{**FIXED, "C": 2.0}).fit(X, y)
    bars_twice, bars_once = twice.error_bars(X_new), once.error_bars(X_new)
    np.testing.assert_allclose(bars_twice.theta, bars_once.theta, rtol=0, atol=1e-6)
    np.testing.assert_allclose(bars_twice.sigma, bars_once.sigma, rtol=0, atol=1e-6)


def test_repeated_rows_cost_as_the_distinct_rows(data):
    """Thirteen distinct rows repeated to 390: the posterior runs over 13 collapsed rows, and the fit equals the
    one with the copies as weights."""
    X, y, X_new = data
    copies = np.tile(np.arange(13), 30)
    model = BayesianSVC(**FIXED).fit(X[copies], y[copies])
    weighted = BayesianSVC(**FIXED).fit(X[:13], y[:13], sample_weight=np.full(13, 30.0))
    assert model.fit_.X.shape[0] == 13
    np.testing.assert_allclose(_predictions(model, X_new), _predictions(weighted, X_new), rtol=0, atol=1e-12)
    assert set(model.support_) <= set(range(13))  # each collapsed row is indexed by its first training row


def test_selected_fit_with_rows_twice_is_the_fit_with_weight_two(data):
    """The whole default fit (the evidence search, its checks, the posterior): rows twice and sample_weight=2 give
    the same hyperparameters, evidence and probabilities."""
    X, y, X_new = data
    with _quiet():
        twice = BayesianSVC().fit(np.vstack([X, X]), np.concatenate([y, y]))
        weighted = BayesianSVC().fit(X, y, sample_weight=np.full(X.shape[0], 2.0))
    assert twice.C_ == weighted.C_ and twice.log_evidence_ == weighted.log_evidence_
    np.testing.assert_allclose(twice.predict_proba(X_new), weighted.predict_proba(X_new), rtol=0, atol=1e-6)


def test_a_zero_weight_is_a_row_that_is_not_there(data):
    X, y, X_new = data
    w = np.ones(X.shape[0])
    w[[3, 7, 11]] = 0.0
    kept = w > 0
    weighted = BayesianSVC(**FIXED).fit(X, y, sample_weight=w)
    removed = BayesianSVC(**FIXED).fit(X[kept], y[kept])
    np.testing.assert_allclose(_predictions(weighted, X_new), _predictions(removed, X_new), rtol=0, atol=1e-6)
    assert weighted.log_evidence_ == pytest.approx(removed.log_evidence_, abs=1e-9)


def test_balanced_class_weight_is_the_equivalent_sample_weight(data):
    X, y, X_new = data
    counts = np.bincount(y)
    w = (y.size / (2 * counts))[y]
    balanced = BayesianSVC(class_weight="balanced", **FIXED).fit(X, y)
    weighted = BayesianSVC(**FIXED).fit(X, y, sample_weight=w)
    by_dict = BayesianSVC(class_weight={0: w[y == 0][0], 1: w[y == 1][0]}, **FIXED).fit(X, y)
    for other in (weighted, by_dict):
        np.testing.assert_allclose(_predictions(balanced, X_new), _predictions(other, X_new), rtol=0, atol=1e-12)


def test_upweighting_a_class_moves_the_probabilities_towards_it(data):
    """Class 1 weighed three times: its mean probability over the training inputs rises."""
    X, y, _ = data
    plain = BayesianSVC(**FIXED).fit(X, y).predict_proba(X)[:, 1]
    favoured = BayesianSVC(class_weight={0: 1.0, 1: 3.0}, **FIXED).fit(X, y).predict_proba(X)[:, 1]
    assert favoured.mean() > plain.mean() + 0.05


def test_grid_selection_takes_whole_number_weights_as_repeated_rows(data):
    X, y, _ = data
    grid = {"C": [0.5, 2.0], "C_k0": [4.0], "offset_ratio": [1.0], "length_scale": [1.0]}
    options = dict(method="grid", grid=grid, random_state=0)
    with _quiet():
        weighted = select_hyperparameters(X[:12], y[:12], sample_weight=np.full(12, 2.0), **options)
        repeated = select_hyperparameters(np.vstack([X[:12]] * 2), np.concatenate([y[:12]] * 2), **options)
    np.testing.assert_allclose(weighted.total, repeated.total, rtol=0, atol=1e-9)
    with pytest.raises(ValueError, match="whole-number sample weights"):
        select_hyperparameters(X, y, sample_weight=np.full(X.shape[0], 0.5), **options)


# ---------------------------------------------------------------------------
# invariances (property-based, at fixed hyperparameters: each draw is one posterior on one padded size)

_PROPERTY = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_PROPERTY
@given(seed=st.integers(0, 2**16))
def test_row_order_changes_nothing(data, seed):
    X, y, X_new = data
    order = np.random.default_rng(seed).permutation(X.shape[0])
    w = np.arange(1.0, X.shape[0] + 1.0)
    first = BayesianSVC(**FIXED).fit(X, y, sample_weight=w)
    shuffled = BayesianSVC(**FIXED).fit(X[order], y[order], sample_weight=w[order])
    np.testing.assert_allclose(_predictions(shuffled, X_new), _predictions(first, X_new), rtol=0, atol=1e-9)


@_PROPERTY
@given(copies=st.lists(st.integers(1, 3), min_size=30, max_size=30))
def test_copies_of_rows_are_weights(data, copies):
    X, y, X_new = data
    copies = np.array(copies)
    repeated = BayesianSVC(**FIXED).fit(np.repeat(X, copies, axis=0), np.repeat(y, copies))
    weighted = BayesianSVC(**FIXED).fit(X, y, sample_weight=copies)
    np.testing.assert_allclose(_predictions(repeated, X_new), _predictions(weighted, X_new), rtol=0, atol=1e-6)


@_PROPERTY
@given(split=st.integers(1, 5), shift=st.floats(-1e9, 1e9))
def test_batches_and_offsets_change_nothing(data, split, shift):
    """A row's prediction is the same in any batch, and an offset of every input changes no probability (RBF)."""
    X, y, X_new = data
    model = BayesianSVC(**FIXED).fit(X, y)
    whole = _predictions(model, X_new)
    parts = np.vstack([_predictions(model, X_new[:split]), _predictions(model, X_new[split:])])
    np.testing.assert_allclose(parts, whole, rtol=0, atol=1e-9)
    shifted = BayesianSVC(**FIXED).fit(X + shift, y).predict_proba(X_new + shift)
    np.testing.assert_allclose(shifted, model.predict_proba(X_new), rtol=0, atol=1e-6)


# ---------------------------------------------------------------------------
# bad weights


@pytest.mark.parametrize("weights, message", [
    (-np.ones(30), "negative weight"),
    (np.full(30, np.nan), "NaN or infinite"),
    (np.ones(29), "30 samples but sample_weight has 29"),
    (np.zeros(30), "every row's weight is zero"),
    (np.ones((30, 2)), "1-D"),
])
def test_bad_sample_weights_are_refused_with_a_clear_message(data, weights, message):
    X, y, _ = data
    with pytest.raises(ValueError, match=message):
        BayesianSVC(**FIXED).fit(X, y, sample_weight=weights)


def test_a_class_of_zero_weight_is_refused(data):
    X, y, _ = data
    with pytest.raises(ValueError, match="every row of class 1 has weight 0"):
        BayesianSVC(**FIXED).fit(X, y, sample_weight=(y == 0).astype(float))
    with pytest.raises(ValueError, match="class_weight"):
        BayesianSVC(class_weight={0: 1.0, 7: 2.0}, **FIXED).fit(X, y)


def test_weighted_rows_refuse_the_estimators_that_cannot_take_them(data):
    X, y, _ = data
    with pytest.raises(ValueError, match="normalization='annealed'"):
        log_evidence(X, y, C=1.0, kernel=KERNEL, sample_weight=np.full(X.shape[0], 2.0), normalization="ep")


@pytest.mark.parametrize("check", ["check_sample_weight_equivalence_on_dense_data", "check_sample_weights_shape",
                                   "check_sample_weights_not_overwritten", "check_sample_weights_list",
                                   "check_all_zero_sample_weights_error"])
def test_scikit_learn_sample_weight_checks_on_the_default_estimator(check):
    """scikit-learn's sample-weight checks on BayesianSVC() as users fit it: the evidence search included."""
    from sklearn.utils import estimator_checks

    with _quiet():
        getattr(estimator_checks, check)("BayesianSVC", BayesianSVC())
