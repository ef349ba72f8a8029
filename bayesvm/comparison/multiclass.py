"""More than two classes: ``BayesianSVC`` against the one-vs-rest wrapper, grid search + Platt and a GP classifier.

:func:`compare_multiclass` fits ``BayesianSVC`` (shared and per-class
hyperparameters, each scored under every coupling of :mod:`bayesvm.coupling`
from one fit), scikit-learn's one-vs-rest wrapper of it, a grid-searched SVC
with sigmoid calibration and a GP classifier per stratified split, and scores
their k-class probabilities (error, NLL, Brier) and fit times.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.calibration import CalibratedClassifierCV
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.model_selection import GridSearchCV, StratifiedShuffleSplit
from sklearn.multiclass import OneVsRestClassifier
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from .._precision import float64
from .._validation import check_class_labels, check_count, check_inputs
from ..coupling import COUPLINGS
from ..estimator import BayesianSVC
from .two_classes import check_method_names, check_test_size, gpc_kernel, median_heuristic_kernel

__all__ = [
    "MULTICLASS_LABELS",
    "MULTICLASS_METHODS",
    "MULTICLASS_METRICS",
    "SVC_GRID",
    "MulticlassComparison",
    "MulticlassSplit",
    "compare_multiclass",
    "multiclass_scores",
]

#: arms of :func:`compare_multiclass`, each fitted once per split
MULTICLASS_METHODS: tuple[str, ...] = ("bayesvm", "bayesvm_per_class", "one_vs_rest_wrapper", "svc_platt", "gpc")
MULTICLASS_LABELS: dict[str, str] = {
    "bayesvm": "BayesianSVC() (shared hyperparameters)",
    "bayesvm_per_class": "BayesianSVC(multiclass='per_class')",
    "one_vs_rest_wrapper": "OneVsRestClassifier(BayesianSVC())",
    "svc_platt": "5-fold grid search SVC + sigmoid calibration",
    "gpc": "GP classifier (sklearn, one-vs-rest)",
}
#: scores of each split; lower is better for all of them (``fit_s`` is wall-clock seconds of the fit)
MULTICLASS_METRICS: tuple[str, ...] = ("error", "nll", "brier", "fit_s")
#: the grid of the ``svc_platt`` arm: 11 x 11, half a decade apart (as benchmarks/selection.py)
SVC_GRID: dict[str, list[float]] = {"C": np.logspace(-2, 3, 11).tolist(), "gamma": np.logspace(-4, 1, 11).tolist()}
#: folds of the ``svc_platt`` arm's grid search and of its calibration
_SVC_FOLDS = 5
_BAYESVM_ARMS = {"bayesvm": {}, "bayesvm_per_class": {"multiclass": "per_class"}}
_DEFAULT_COUPLING = BayesianSVC().coupling


def _coupling_variant(arm: str, coupling: str) -> str:
    """Name of a bayesvm arm's scores under ``coupling``: the arm itself for BayesianSVC's default coupling,
    ``arm[coupling]`` for the others (the same fit, probabilities coupled differently)."""
    return arm if coupling == _DEFAULT_COUPLING else f"{arm}[{coupling}]"


def multiclass_scores(y_index: np.ndarray, P: np.ndarray) -> dict[str, float]:
    """Error, NLL and Brier score of class probabilities ``P`` (n, k) for true class indices ``y_index`` (n,).

    error: fraction with argmax_c P[i, c] != y_i; NLL: -(1/n) sum_i ln P[i, y_i], the probability of the
    observed class clipped below at the float64 machine epsilon (as :func:`bayesvm.metrics.negative_log_likelihood`);
    Brier: (1/n) sum_i sum_c (P[i, c] - [y_i = c])^2 (Brier 1950, summed over the classes).
    """
    P = np.asarray(P, dtype=np.float64)
    rows = np.arange(P.shape[0])
    observed = np.clip(P[rows, y_index], np.finfo(np.float64).eps, 1.0)
    onehot = np.zeros_like(P)
    onehot[rows, y_index] = 1.0
    return {"error": float(np.mean(np.argmax(P, axis=1) != y_index)), "nll": float(-np.mean(np.log(observed))),
            "brier": float(np.mean(np.sum((P - onehot) ** 2, axis=1)))}


def _summed_work(selections) -> dict[str, float] | None:
    """``summary_counts()`` of evidence searches (one, or one per one-vs-rest problem), summed; None if none ran."""
    selections = [s for s in selections if s is not None]
    if not selections:
        return None
    counts = [s.summary_counts() for s in selections]
    return {key: float(sum(c[key] for c in counts)) for key in counts[0]}


def _hyperparameters_of(model) -> dict[str, object]:
    """C, amplitude, length scale and offset of a fitted BayesianSVC (lists where each problem chose its own)."""
    return {name: np.asarray(getattr(model, f"{name}_")).tolist() for name in ("C", "amplitude", "length_scale",
                                                                                "offset")}


def _fit_multiclass_arm(arm: str, X_train, y_train, random_state: int, bayesvm_options: dict):
    """The fitted model of ``arm``, its fit seconds, hyperparameters and evidence-search work (None for sklearn's)."""
    started = time.perf_counter()
    if arm in _BAYESVM_ARMS:
        model = BayesianSVC(random_state=random_state, **bayesvm_options, **_BAYESVM_ARMS[arm]).fit(X_train, y_train)
        fit_s = time.perf_counter() - started
        selections = model.selection_ if isinstance(model.selection_, tuple) else (model.selection_,)
        return model, fit_s, _hyperparameters_of(model), _summed_work(selections)
    if arm == "one_vs_rest_wrapper":
        model = OneVsRestClassifier(BayesianSVC(random_state=random_state, **bayesvm_options)).fit(X_train, y_train)
        fit_s = time.perf_counter() - started
        hyper = {"per_class": [_hyperparameters_of(e) for e in model.estimators_]}
        return model, fit_s, hyper, _summed_work([e.selection_ for e in model.estimators_])
    if arm == "svc_platt":
        search = GridSearchCV(SVC(kernel="rbf"), SVC_GRID, cv=_SVC_FOLDS).fit(X_train, y_train)
        model = CalibratedClassifierCV(SVC(kernel="rbf", **search.best_params_), method="sigmoid",
                                       cv=_SVC_FOLDS).fit(X_train, y_train)
        fit_s = time.perf_counter() - started
        return model, fit_s, {k: float(v) for k, v in search.best_params_.items()}, None
    start = gpc_kernel(median_heuristic_kernel(X_train), X_train)
    model = GaussianProcessClassifier(start, multi_class="one_vs_rest", random_state=random_state).fit(X_train, y_train)
    fit_s = time.perf_counter() - started
    return model, fit_s, {"kernels": [repr(e.kernel_) for e in model.base_estimator_.estimators_]}, None


@dataclass(frozen=True)
class MulticlassSplit:
    """One train/test split of :func:`compare_multiclass`.

    ``y_test`` holds class indices into the comparison's ``classes``; ``probabilities[name]`` is the (n_test, k)
    class-probability matrix of each scored name (columns in the order of ``classes``); ``fit_seconds``,
    ``hyperparameters`` and ``work`` (summed ``summary_counts()`` of the evidence searches; bayesvm arms only)
    are per arm, shared by an arm's coupling variants.
    """

    train_index: np.ndarray
    test_index: np.ndarray
    y_test: np.ndarray
    probabilities: dict[str, np.ndarray]
    fit_seconds: dict[str, float]
    hyperparameters: dict[str, dict[str, object]]
    work: dict[str, dict[str, float]]


def _multiclass_split(X, y_index, train, test, arms: tuple[str, ...], random_state: int,
                      bayesvm_options: dict) -> MulticlassSplit:
    """Standardise on the training part, fit every arm, and keep its test probabilities (bayesvm arms: under every
    coupling, from the one fit)."""
    scaler = StandardScaler().fit(X[train])
    X_train, X_test, y_train = scaler.transform(X[train]), scaler.transform(X[test]), y_index[train]
    probabilities, seconds, hyper, work = {}, {}, {}, {}
    for arm in arms:
        model, seconds[arm], hyper[arm], arm_work = _fit_multiclass_arm(arm, X_train, y_train, random_state,
                                                                              bayesvm_options)
        if arm_work is not None:
            work[arm] = arm_work
        for coupling in COUPLINGS if arm in _BAYESVM_ARMS else (None,):
            if coupling is not None:
                model.set_params(coupling=coupling)
            name = arm if coupling is None else _coupling_variant(arm, coupling)
            probabilities[name] = np.asarray(model.predict_proba(X_test), dtype=np.float64)
    return MulticlassSplit(train_index=train, test_index=test, y_test=y_index[test], probabilities=probabilities,
                           fit_seconds=seconds, hyperparameters=hyper, work=work)


def _arm_of(name: str) -> str:
    return name.split("[", 1)[0]


@dataclass(frozen=True)
class MulticlassComparison:
    """Per-split scores of every scored name of :func:`compare_multiclass`.

    ``methods`` are the arms and, for the bayesvm arms, their coupling variants (``bayesvm[normalize]``, ...);
    ``scores[metric]`` has shape (len(methods), n_splits), lower is better for every metric of
    :data:`MULTICLASS_METRICS`; a coupling variant's ``fit_s`` is its arm's (the same fit).
    """

    methods: tuple[str, ...]
    classes: np.ndarray
    splits: tuple[MulticlassSplit, ...]
    scores: dict[str, np.ndarray]
    settings: dict[str, object]

    def _per_method(self, reduce) -> dict[str, dict[str, float]]:
        return {k: dict(zip(self.methods, reduce(v).tolist())) for k, v in self.scores.items()}

    def mean(self) -> dict[str, dict[str, float]]:
        """metric -> method -> mean over splits."""
        return self._per_method(lambda v: v.mean(axis=1))

    def std(self) -> dict[str, dict[str, float]]:
        """metric -> method -> sample standard deviation over splits (0 for a single split)."""
        return self._per_method(lambda v: v.std(axis=1, ddof=1 if v.shape[1] > 1 else 0))

    def median(self) -> dict[str, dict[str, float]]:
        """metric -> method -> median over splits (the table's fit seconds)."""
        return self._per_method(lambda v: np.median(v, axis=1))

    def table(self) -> str:
        """Methods as rows; error, NLL and Brier as ``mean +- std`` over the splits, fit seconds as the median."""
        mean, std, median = self.mean(), self.std(), self.median()
        width = max(len("method"), *(len(m) for m in self.methods))
        header = f"{'method':<{width}}" + "".join(f"  {h:>17}" for h in ("error", "NLL", "Brier")) + \
            f"  {'fit s (median)':>14}"
        lines = [header, "-" * len(header)]
        for m in self.methods:
            cells = "".join(f"  {f'{mean[k][m]:.4f} +- {std[k][m]:.4f}':>17}" for k in ("error", "nll", "brier"))
            lines.append(f"{m:<{width}}{cells}  {median['fit_s'][m]:>14.2f}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, object]:
        """A JSON-serialisable summary: per-split scores, means, stds, medians, per-split hyperparameters and work."""
        return {
            "methods": list(self.methods),
            "labels": {m: MULTICLASS_LABELS[_arm_of(m)] for m in self.methods},
            "classes": self.classes.tolist(),
            "metrics": list(MULTICLASS_METRICS),
            "scores": {k: {m: v[i].tolist() for i, m in enumerate(self.methods)} for k, v in self.scores.items()},
            "mean": self.mean(),
            "std": self.std(),
            "median": self.median(),
            "splits": [{"n_train": int(s.train_index.size), "n_test": int(s.test_index.size),
                        "hyperparameters": s.hyperparameters, "work": s.work} for s in self.splits],
            "settings": dict(self.settings),
        }


def _check_multiclass_sizes(counts: np.ndarray, test_size, arms: tuple[str, ...]) -> None:
    """At least three classes, and every training part holds enough of each class for the arms' folds."""
    check_test_size(test_size)
    if counts.size < 3:
        raise ValueError(f"y has {counts.size} classes; compare_multiclass takes three or more "
                         "(compare_calibration takes two)")
    needed = _SVC_FOLDS if "svc_platt" in arms else 2
    smallest = int(counts.min())
    if int(np.floor(smallest * (1.0 - test_size))) < needed or int(np.floor(smallest * test_size)) < 1:
        raise ValueError(f"the smallest class has {smallest} samples, too few for test_size={test_size}: each "
                         f"training part needs {needed} of every class and each test part one")


@float64
def compare_multiclass(
    X, y, *, n_splits: int = 3, test_size: float = 0.3, methods: Sequence[str] | None = None, random_state: int = 0,
    bayesvm_options: dict | None = None,
) -> MulticlassComparison:
    """Compare k-class probabilities of the Bayesian SVM with the one-vs-rest wrapper and two baselines on (X, y).

    Per stratified shuffle split (``n_splits``, ``test_size`` the test fraction) the inputs are standardised
    by the training part's mean and standard deviation, every arm of ``methods`` (names from
    :data:`MULTICLASS_METHODS`, default all) is fitted on the training part and its class probabilities on the
    test part are scored (:func:`multiclass_scores`: error, NLL, Brier) with the fit's wall-clock seconds:

    * ``bayesvm``: ``BayesianSVC()``, one set of hyperparameters for the k one-vs-rest problems (their summed
      evidence), its default coupling;
    * ``bayesvm_per_class``: ``BayesianSVC(multiclass="per_class")``, each problem selects its own;
    * ``one_vs_rest_wrapper``: ``sklearn.multiclass.OneVsRestClassifier(BayesianSVC())`` (normalised one-vs-rest
      probabilities);
    * ``svc_platt``: 5-fold ``GridSearchCV(SVC(kernel="rbf"))`` over :data:`SVC_GRID`, then
      ``CalibratedClassifierCV(SVC(**best), method="sigmoid", cv=5)`` (one-vs-rest sigmoids, normalised);
    * ``gpc``: ``GaussianProcessClassifier(ConstantKernel * RBF, multi_class="one_vs_rest")``, started at
      amplitude 1 and the median-heuristic length scale, fitted by its marginal likelihood.

    The two bayesvm arms are scored under every coupling of :mod:`bayesvm.coupling` from the same fit
    (``set_params(coupling=...)``, no refit): ``bayesvm`` (the default coupling), ``bayesvm[kl]``, ..., and
    likewise for ``bayesvm_per_class``. ``random_state`` seeds the splits and the estimators.
    ``bayesvm_options``: further ``BayesianSVC`` parameters of the three bayesvm arms (e.g. fixed
    hyperparameters ``C``, ``amplitude``, ``length_scale``, ``offset``; not ``multiclass``, which the arm sets).
    """
    X = check_inputs(X)
    labels, classes = check_class_labels(y, X.shape[0])
    y_index = np.searchsorted(classes, labels)
    arms = check_method_names(methods, MULTICLASS_METHODS)
    n_splits = check_count(n_splits, "n_splits", 1)
    _check_multiclass_sizes(np.bincount(y_index), test_size, arms)
    bayesvm_options = dict(bayesvm_options or {})
    if {"multiclass", "random_state"} & set(bayesvm_options):
        raise ValueError("bayesvm_options cannot set multiclass (each arm sets its own) or random_state (use "
                         "compare_multiclass's random_state)")

    splitter = StratifiedShuffleSplit(n_splits=n_splits, test_size=test_size, random_state=random_state)
    splits = tuple(_multiclass_split(X, y_index, train, test, arms, random_state, bayesvm_options)
                   for train, test in splitter.split(X, y_index))
    names = tuple(splits[0].probabilities)
    scores = {k: np.empty((len(names), n_splits)) for k in MULTICLASS_METRICS}
    for j, split in enumerate(splits):
        for i, name in enumerate(names):
            for k, v in multiclass_scores(split.y_test, split.probabilities[name]).items():
                scores[k][i, j] = v
            scores["fit_s"][i, j] = split.fit_seconds[_arm_of(name)]
    settings = {"n_samples": int(X.shape[0]), "n_features": int(X.shape[1]), "n_classes": int(classes.size),
                "n_splits": n_splits, "test_size": float(test_size), "random_state": random_state,
                "svc_grid": SVC_GRID, "svc_folds": _SVC_FOLDS,
                "bayesvm_options": bayesvm_options}
    return MulticlassComparison(methods=names, classes=classes, splits=splits, scores=scores, settings=settings)
