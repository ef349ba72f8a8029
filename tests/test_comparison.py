"""The calibration comparison on a small synthetic problem, checked against direct recomputation."""

import json

import matplotlib
import numpy as np
import pytest
from scipy.spatial.distance import cdist
from sklearn.calibration import CalibratedClassifierCV
from sklearn.metrics import brier_score_loss, log_loss
from sklearn.svm import SVC

from bayesvm.comparison import (
    METHOD_LABELS,
    METHODS,
    METRICS,
    compare_calibration,
    median_heuristic_kernel,
)
from bayesvm.kernels import RBF
from bayesvm.posterior import Posterior
from bayesvm.solver.dual import fit_map

matplotlib.use("Agg")

KERNEL = RBF(length_scale=1.5, amplitude=1.0, offset=1.0)
# 72 points: 50 for training split into 2 folds of 25, so the solver compiles for only two problem sizes
SETTINGS = {"kernel": KERNEL, "C": 2.0, "n_splits": 2, "test_size": 0.3, "cv_folds": 2, "random_state": 3}


def two_blobs(n=72, seed=0):
    """Two overlapping Gaussian classes in 2-D with labels 'a' / 'b' (not -1/+1, to exercise label handling)."""
    rng = np.random.default_rng(seed)
    y = np.where(np.arange(n) % 2 == 0, "b", "a")
    X = rng.standard_normal((n, 2)) + np.where(y == "b", 1.0, -1.0)[:, None]
    return X, y


@pytest.fixture(scope="module")
def data():
    return two_blobs()


@pytest.fixture(scope="module")
def result(data):
    X, y = data
    return compare_calibration(X, y, **SETTINGS)


def test_every_method_scored_in_valid_ranges(result):
    assert result.methods == METHODS
    assert len(result.splits) == 2
    for split in result.splits:
        assert set(split.probabilities) == set(METHODS)
        for p in split.probabilities.values():
            assert p.shape == split.y_test.shape
            assert np.all((p >= 0) & (p <= 1))
    for metric in METRICS:
        values = result.scores[metric]
        assert values.shape == (len(METHODS), 2)
        assert np.all(np.isfinite(values))
        assert np.all(values >= 0)
        if metric != "nll":
            assert np.all(values <= 1)


def test_bayesian_map_probabilities_and_scores_match_a_direct_recomputation(result, data):
    X, y = data
    y_pm = np.where(y == "b", 1, -1)
    m = METHODS.index("bsvm_map")
    for s, split in enumerate(result.splits):
        fit = fit_map(X[split.train_index], y[split.train_index], C=SETTINGS["C"], kernel=KERNEL)
        p = Posterior.from_fit(fit).predict_proba(X[split.test_index], method="map")
        np.testing.assert_allclose(split.probabilities["bsvm_map"], p, rtol=1e-10, atol=1e-12)
        t = y_pm[split.test_index] > 0
        assert result.scores["nll"][m, s] == pytest.approx(log_loss(t, p, labels=[False, True]), rel=1e-10)
        assert result.scores["brier"][m, s] == pytest.approx(brier_score_loss(t, p), rel=1e-10)
        assert result.scores["error"][m, s] == pytest.approx(np.mean((p >= 0.5) != t))
        edges = np.linspace(0, 1, 11)
        index = np.clip(np.digitize(p, edges[1:-1], right=True), 0, 9)
        ece = sum(abs(p[index == b].mean() - t[index == b].mean()) * np.sum(index == b) for b in np.unique(index))
        assert result.scores["ece"][m, s] == pytest.approx(ece / p.size, rel=1e-10)


def test_sklearn_reference_matches_calibrated_svc(result, data):
    X, y = data
    for split in result.splits:
        y_pm = np.where(y == "b", 1, -1)
        reference = CalibratedClassifierCV(SVC(), ensemble=False).fit(X[split.train_index], y_pm[split.train_index])
        np.testing.assert_allclose(
            split.probabilities["sklearn_svc_sigmoid"], reference.predict_proba(X[split.test_index])[:, 1]
        )


def test_kernel_logistic_regression_is_the_minimum_of_its_objective(result, data):
    """KLR's Newton iteration against scipy's quasi-Newton on the same objective in the coefficients a
    (f = K a: C sum ln(1 + e^{-y f}) + a^T K a / 2): no higher, the same f, and at its stationary point
    a = C y sigma(-y f) exactly; the comparison's KLR probabilities are sigma(k(x)^T a)."""
    from scipy.optimize import minimize
    from scipy.special import expit

    from bayesvm.comparison.kernel_logistic import fit_kernel_logistic
    from bayesvm.kernels import gram_matrix

    X, y = data
    y_pm = np.where(y == "b", 1.0, -1.0)
    split = result.splits[0]
    X_train, y_train = X[split.train_index], y_pm[split.train_index]
    C = SETTINGS["C"]
    K = np.asarray(gram_matrix(KERNEL, X_train))

    def objective(a):
        f = K @ a
        return C * np.sum(np.logaddexp(0.0, -y_train * f)) + 0.5 * a @ f, K @ (-C * y_train * expit(-y_train * f) + a)

    reference = minimize(objective, np.zeros(len(y_train)), jac=True, method="L-BFGS-B",
                         options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 10_000})
    klr = fit_kernel_logistic(X_train, y_train, kernel=KERNEL, C=C)
    assert klr.converged
    f = K @ klr.a
    np.testing.assert_allclose(klr.a, C * y_train * expit(-y_train * f), rtol=0, atol=1e-10)
    np.testing.assert_allclose(f, K @ reference.x, atol=1e-4)
    assert objective(klr.a)[0] <= reference.fun + 1e-9
    np.testing.assert_allclose(split.probabilities["klr"], klr.predict_proba(X[split.test_index]), rtol=1e-10)


def test_splits_are_stratified_disjoint_and_of_the_requested_size(result, data):
    X, y = data
    for split in result.splits:
        assert np.intersect1d(split.train_index, split.test_index).size == 0
        assert split.train_index.size + split.test_index.size == X.shape[0]
        assert split.test_index.size == int(np.ceil(0.3 * X.shape[0]))
        assert abs(np.mean(y[split.test_index] == "b") - 0.5) < 0.05


def test_ranks_follow_the_mean_scores(result):
    n = len(METHODS)
    means, ranks = result.mean(), result.ranks()
    for metric in METRICS:
        r = np.array([ranks[metric][m] for m in METHODS])
        v = np.array([means[metric][m] for m in METHODS])
        assert r.sum() == pytest.approx(n * (n + 1) / 2)
        assert np.all((r >= 1) & (r <= n))
        for i in range(n):
            for j in range(n):
                if v[i] < v[j]:
                    assert r[i] < r[j]
                if v[i] == v[j]:
                    assert r[i] == r[j]


def test_summaries_table_dict_reliability_and_plot(result):
    table = result.table()
    for m in METHODS:
        assert METHOD_LABELS[m] in table
    d = json.loads(json.dumps(result.to_dict()))
    assert d["methods"] == list(METHODS)
    np.testing.assert_allclose(d["scores"]["brier"]["platt"], result.scores["brier"][METHODS.index("platt")])
    n_test = sum(s.test_index.size for s in result.splits)
    for curve in result.reliability().values():
        assert curve.counts.sum() == n_test
    assert result.std()["nll"]["platt"] == pytest.approx(np.std(result.scores["nll"][METHODS.index("platt")], ddof=1))
    fig = result.plot()
    assert fig.axes


def test_deterministic_and_method_subsets_give_the_same_numbers(result, data):
    X, y = data
    subset = ("bsvm_averaged", "isotonic", "gpc")
    again = compare_calibration(X, y, methods=list(reversed(subset)), **SETTINGS)
    assert again.methods == subset
    for metric in METRICS:
        np.testing.assert_array_equal(again.scores[metric], result.scores[metric][[METHODS.index(m) for m in subset]])


def test_select_callable_is_run_on_each_training_part(data):
    X, y = data
    seen = []

    def select(X_train, y_train):
        seen.append(X_train.shape[0])
        return KERNEL.replace(length_scale=1.0 + len(seen)), 0.5 * len(seen)

    out = compare_calibration(X, y, select=select, methods=["softmax"], n_splits=2, cv_folds=2, random_state=3)
    assert seen == [s.train_index.size for s in out.splits]
    assert [s.C for s in out.splits] == [0.5, 1.0]
    assert [float(s.kernel.length_scale) for s in out.splits] == [2.0, 3.0]


def test_median_heuristic_matches_brute_force():
    X = np.random.default_rng(1).standard_normal((40, 3))
    D = cdist(X, X)
    kernel = median_heuristic_kernel(X)
    assert float(kernel.length_scale) == pytest.approx(np.median(D[np.triu_indices(40, 1)]))
    assert (float(kernel.amplitude), float(kernel.offset)) == (1.0, 1.0)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"y": np.zeros(72)}, "one class"),
        ({"y": np.r_[np.zeros(36), np.ones(35)]}, "must match"),
        ({"X": np.full((72, 2), np.nan)}, "NaN"),
        ({"methods": ["platt", "svm"]}, "unknown method"),
        ({"methods": []}, "unknown method"),
        ({"test_size": 1.5}, "test_size"),
        ({"test_size": 20}, "test_size"),
        ({"n_splits": 0}, "n_splits"),
        ({"cv_folds": 1}, "cv_folds"),
        ({"C": -1.0}, "C"),
        ({"select": lambda X, y: (KERNEL, 1.0)}, "either select"),
        ({"kernel": "rbf"}, "kernel"),
        ({"cv_folds": 30}, "too few"),
    ],
)
def test_bad_input_raises_a_clear_value_error(data, change, message):
    X, y = data
    kwargs = {"X": X, "y": y, "kernel": KERNEL, "C": 1.0}
    kwargs.update(change)
    with pytest.raises(ValueError, match=message):
        compare_calibration(kwargs.pop("X"), kwargs.pop("y"), **kwargs)


def test_select_returning_garbage_raises(data):
    X, y = data
    with pytest.raises(ValueError, match="select must return"):
        compare_calibration(X, y, select=lambda X, y: KERNEL, methods=["softmax"])


# ---------------------------------------------------------------------------
# more than two classes: compare_multiclass and `bayesvm compare` on a 3-class CSV

from sklearn.datasets import load_iris  # noqa: E402
from sklearn.metrics import accuracy_score  # noqa: E402

from bayesvm.cli import main  # noqa: E402
from bayesvm.comparison import MULTICLASS_METHODS, compare_multiclass  # noqa: E402

#: fixed hyperparameters keep the bayesvm arms to one evidence evaluation per problem (no search)
FIXED = dict(C=1.0, amplitude=3.0, length_scale=1.5, offset=3.0)
CHEAP_ARMS = ("bayesvm", "one_vs_rest_wrapper", "svc_platt", "gpc")


@pytest.fixture(scope="module")
def iris45():
    """45 iris flowers, 15 per class, with string labels (31 train / 14 test in one 70/30 split)."""
    X, y = load_iris(return_X_y=True)
    keep = np.concatenate([np.flatnonzero(y == c)[:15] for c in range(3)])
    return X[keep], np.array(["setosa", "versicolor", "virginica"])[y[keep]]


@pytest.fixture(scope="module")
def multiclass(iris45):
    X, y = iris45
    return compare_multiclass(X, y, n_splits=1, methods=CHEAP_ARMS, bayesvm_options=FIXED, random_state=1)


def test_multiclass_probabilities_are_distributions_and_scores_recompute(multiclass):
    assert multiclass.methods == ("bayesvm", "bayesvm[kl]", "bayesvm[normalize]", "one_vs_rest_wrapper",
                                  "svc_platt", "gpc")
    assert multiclass.classes.tolist() == ["setosa", "versicolor", "virginica"]
    (split,) = multiclass.splits
    assert split.y_test.size == 14 and np.all(np.bincount(split.y_test) >= 4)
    for i, name in enumerate(multiclass.methods):
        P = split.probabilities[name]
        assert P.shape == (split.y_test.size, 3) and np.all(P >= 0)
        np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)
        # independent recomputation of the scores from the stored probabilities
        assert multiclass.scores["nll"][i, 0] == pytest.approx(log_loss(split.y_test, P, labels=[0, 1, 2]), rel=1e-12)
        onehot = np.eye(3)[split.y_test]
        assert multiclass.scores["brier"][i, 0] == pytest.approx(np.mean(np.sum((P - onehot) ** 2, axis=1)))
        assert multiclass.scores["error"][i, 0] == pytest.approx(1 - accuracy_score(split.y_test, P.argmax(axis=1)))
    # coupling variants share their arm's fit (and its time); the couplings keep the order of the r_c
    seconds = dict(zip(multiclass.methods, multiclass.scores["fit_s"][:, 0]))
    assert seconds["bayesvm[normalize]"] == seconds["bayesvm[kl]"] == seconds["bayesvm"] > 0
    assert len({tuple(split.probabilities[m].argmax(axis=1)) for m in multiclass.methods[:3]}) == 1
    assert not np.allclose(split.probabilities["bayesvm"], split.probabilities["bayesvm[kl]"])


def test_multiclass_normalised_coupling_is_the_one_vs_rest_wrapper_at_fixed_hyperparameters(multiclass):
    """At the same fixed hyperparameters the shared fit's k binary problems are the wrapper's, and scikit-learn's
    wrapper normalises: bayesvm[normalize] must reproduce it (the variant is a re-coupling of the same fit)."""
    (split,) = multiclass.splits
    np.testing.assert_allclose(split.probabilities["bayesvm[normalize]"], split.probabilities["one_vs_rest_wrapper"],
                               atol=1e-8)
    assert split.work == {}  # fixed hyperparameters: no evidence search ran
    assert split.hyperparameters["bayesvm"]["C"] == FIXED["C"]
    assert set(split.hyperparameters["svc_platt"]) == {"C", "gamma"}


def test_multiclass_table_and_dict(multiclass):
    table = multiclass.table()
    for name in multiclass.methods:
        assert name in table
    d = json.loads(json.dumps(multiclass.to_dict()))
    assert d["methods"] == list(multiclass.methods) and d["classes"] == ["setosa", "versicolor", "virginica"]
    assert d["mean"]["nll"]["svc_platt"] == pytest.approx(multiclass.scores["nll"][4, 0])
    assert d["splits"][0]["n_train"] + d["splits"][0]["n_test"] == 45


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"y": np.repeat(["a", "b"], [22, 23])}, "three or more"),
        ({"methods": ["bayesvm", "svm"]}, "unknown method"),
        ({"methods": []}, "unknown method"),
        ({"test_size": 0.9}, "too few"),
        ({"y": np.repeat(["a", "b", "c"], [20, 20, 5])}, "too few"),
        ({"n_splits": 0}, "n_splits"),
        ({"bayesvm_options": {"multiclass": "per_class"}}, "bayesvm_options"),
        ({"X": np.full((45, 4), np.nan)}, "NaN"),
    ],
)
def test_multiclass_bad_input_raises_a_clear_value_error(iris45, change, message):
    X, y = iris45
    kwargs = {"X": X, "y": y, "methods": ["svc_platt"]}
    kwargs.update(change)
    with pytest.raises(ValueError, match=message):
        compare_multiclass(kwargs.pop("X"), kwargs.pop("y"), **kwargs)


def test_compare_command_with_three_classes_runs_the_multiclass_comparison(tmp_path, iris45, capsys):
    X, y = iris45
    data = tmp_path / "iris.csv"
    data.write_text("\n".join(["a,b,c,d,species", *(",".join([*map(repr, row.tolist()), label])
                                                   for row, label in zip(X, y))]) + "\n")
    out = tmp_path / "out.json"
    assert main(["compare", str(data), "--target", "species", "--splits", "1", "--methods", "svc_platt", "gpc",
                 "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "3 classes" in printed and "svc_platt" in printed and "gpc" in printed
    payload = json.loads(out.read_text())
    assert payload["methods"] == ["svc_platt", "gpc"] and len(payload["scores"]["nll"]["gpc"]) == 1
    assert set(MULTICLASS_METHODS) >= set(payload["methods"])
    # options of the two-class comparison are refused in one line
    assert main(["compare", str(data), "--target", "species", "--C", "2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bayesvm: error: 3 classes: --C") and len(err.splitlines()) == 1
