"""Two classes: the Bayesian SVM's probabilities side by side with calibration baselines.

The question a user brings (issue 4): are the evidence-based probabilities of
the Bayesian SVM better than what I use today? :func:`compare_calibration`
answers it on one data set. Per stratified train/test split it

1. fits the MAP SVM once on the training part (hyperparameters fixed, or
   chosen on the training part by a ``select`` callable, e.g. evidence
   maximisation) and evaluates its three predictive probabilities
   (theory: "Error bars and predictive probabilities": posterior-averaged,
   MAP plug-in, simple average);
2. refits the same SVM on ``cv_folds`` stratified folds of the training part
   to get out-of-fold decision values, fits every scaler of
   :mod:`bayesvm.calibration` on them and applies it to the test decision
   values of the full-training-set SVM of step 1 (Platt's protocol);
3. fits kernel logistic regression with the same kernel and C (:mod:`bayesvm.comparison.kernel_logistic`,
   the baseline of Rüping's comparison of scaling methods) and two references: scikit-learn's
   ``GaussianProcessClassifier``
   (Laplace approximation, non-sparse, hyperparameters fitted by its own
   marginal likelihood) and ``CalibratedClassifierCV(SVC(), ensemble=False)``
   with scikit-learn's defaults (sigmoid, 5 folds), the replacement of
   ``SVC(probability=True)`` recommended since scikit-learn 1.9;

and scores all test-set probabilities with :mod:`bayesvm.metrics` (negative
log-likelihood, Brier score, expected calibration error, error rate of the
probabilities thresholded at 1/2). The result holds the per-split scores,
the test probabilities, a text table, average ranks and pooled reliability
curves.

More than two classes: :mod:`bayesvm.comparison.multiclass`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.stats
from scipy.spatial.distance import pdist
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.calibration import CalibratedClassifierCV
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.gaussian_process import kernels as gp_kernels
from sklearn.model_selection import StratifiedShuffleSplit
from sklearn.svm import SVC

from .. import metrics
from .._precision import float64
from .._validation import (
    check_count,
    check_inputs,
    check_kernel,
    check_labels,
    check_positive,
)
from ..calibration import (
    BetaScaler,
    HistogramBinningScaler,
    IsotonicScaler,
    PlattScaler,
    SoftmaxScaler,
    SVM01Scaler,
    SVMPPScaler,
    cross_val_decision_values,
)
from ..kernels import RBF, Exponential, Kernel
from ..posterior import Posterior
from ..solver.dual import MapSVM, fit_map
from .kernel_logistic import fit_kernel_logistic

__all__ = [
    "METHODS",
    "METHOD_LABELS",
    "METRICS",
    "CalibrationComparison",
    "SplitResult",
    "check_method_names",
    "check_test_size",
    "compare_calibration",
    "cross_validated_C",
    "gpc_kernel",
    "median_heuristic_kernel",
]

#: Bayesian SVM predictive probabilities (``Posterior.predict_proba`` methods)
_BAYES = {"bsvm_averaged": "averaged", "bsvm_map": "map", "bsvm_simple": "simple"}
#: scalers fitted on out-of-fold decision values of the same SVM
_SCALERS: dict[str, Callable[[], object]] = {
    "platt": PlattScaler,
    "isotonic": IsotonicScaler,
    "beta": BetaScaler,
    "binning_10": lambda: HistogramBinningScaler(n_bins=10),
    "binning_50": lambda: HistogramBinningScaler(n_bins=50),
    "softmax": SoftmaxScaler,
    "svm01": SVM01Scaler,
    "svmpp": SVMPPScaler,
}
_REFERENCES = ("klr", "gpc", "sklearn_svc_sigmoid")

METHODS: tuple[str, ...] = (*_BAYES, *_SCALERS, *_REFERENCES)
METHOD_LABELS: dict[str, str] = {
    "bsvm_averaged": "Bayesian SVM, averaged",
    "bsvm_map": "Bayesian SVM, MAP plug-in",
    "bsvm_simple": "Bayesian SVM, simple average",
    "platt": "Platt scaling",
    "isotonic": "isotonic regression",
    "beta": "beta calibration",
    "binning_10": "histogram binning, 10 bins",
    "binning_50": "histogram binning, 50 bins",
    "softmax": "softmax 1/(1+exp(-2f))",
    "svm01": "SVM-01 (clipped (1+f)/2)",
    "svmpp": "SVM-PP",
    "klr": "kernel logistic regression (same kernel and C)",
    "gpc": "GP classifier (sklearn, Laplace)",
    "sklearn_svc_sigmoid": "sklearn CalibratedClassifierCV(SVC())",
}
#: scores of the test probabilities (bayesvm.metrics); lower is better for all of them
METRICS: tuple[str, ...] = ("nll", "brier", "ece", "error")

Selector = Callable[[np.ndarray, np.ndarray], tuple[Kernel, float]]


# ---------------------------------------------------------------------------
# hyperparameter helpers (fixed choices until evidence selection is used)


def median_heuristic_kernel(X, *, max_points: int = 1000, random_state: int = 0) -> RBF:
    """RBF(length_scale = median pairwise Euclidean distance of the rows of X, amplitude 1, offset 1).

    The median heuristic (Schoelkopf & Smola 2002; Gretton et al. 2012). At
    most ``max_points`` rows (a seeded random subset) enter the median, so
    the cost stays O(max_points^2).
    """
    X = check_inputs(X)
    if X.shape[0] < 2:
        raise ValueError("the median heuristic needs at least 2 samples")
    if X.shape[0] > max_points:
        X = X[np.random.default_rng(random_state).choice(X.shape[0], max_points, replace=False)]
    distance = float(np.median(pdist(X)))
    if not distance > 0.0:
        raise ValueError("the median pairwise distance is 0 (most rows are identical); choose the kernel by hand")
    return RBF(length_scale=distance, amplitude=1.0, offset=1.0)


class _MapSVMClassifier(ClassifierMixin, BaseEstimator):
    """Minimal scikit-learn wrapper of :func:`~bayesvm.solver.dual.fit_map`, for cross-validation."""

    def __init__(self, kernel: Kernel | None = None, C: float = 1.0):
        self.kernel = kernel
        self.C = C

    def fit(self, X, y):
        self.fit_ = fit_map(X, y, C=self.C, kernel=self.kernel)
        self.classes_ = self.fit_.classes
        return self

    def decision_function(self, X) -> np.ndarray:
        return self.fit_.decision_function(X)

    def predict(self, X) -> np.ndarray:
        return self.fit_.predict(X)


@float64
def cross_validated_C(
    X, y, kernel: Kernel, C_grid: Sequence[float] = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0), *, cv: int = 5,
    random_state: int | None = 0,
) -> float:
    """The C of ``C_grid`` with the smallest k-fold cross-validated error rate of the MAP SVM.

    Stratified, shuffled folds (``random_state``); the error is that of
    sign(theta*(x)) on the held-out fold. Ties go to the smallest C (the
    most regularised fit).
    """
    X = check_inputs(X)
    y_pm, _ = check_labels(y, X.shape[0])
    grid = [check_positive(C, "C_grid entry") for C in C_grid]
    if not grid:
        raise ValueError("C_grid must hold at least one positive value")
    errors = [
        np.mean(np.sign(cross_val_decision_values(_MapSVMClassifier(kernel, C), X, y_pm, cv, random_state)) != y_pm)
        for C in sorted(grid)
    ]
    return float(sorted(grid)[int(np.argmin(errors))])


# ---------------------------------------------------------------------------
# per-split work


def gpc_kernel(kernel: Kernel, X_train: np.ndarray) -> gp_kernels.Kernel:
    """Starting kernel of the GP classifier: amplitude * stationary part of ``kernel``.

    RBF -> RBF, Exponential -> Matern(nu = 1/2), with the same length scale
    and amplitude; other families start from the median-heuristic RBF. The
    offset is left out: sklearn's GP classifier drives it to its lower bound
    anyway and optimises several times slower with it.
    """
    if isinstance(kernel, RBF):
        shape = gp_kernels.RBF(length_scale=float(kernel.length_scale))
    elif isinstance(kernel, Exponential):
        shape = gp_kernels.Matern(length_scale=float(kernel.length_scale), nu=0.5)
    else:
        shape = gp_kernels.RBF(length_scale=float(median_heuristic_kernel(X_train).length_scale))
    return gp_kernels.ConstantKernel(float(getattr(kernel, "amplitude", 1.0))) * shape


def check_method_names(methods: Sequence[str] | None, accepted: tuple[str, ...] = METHODS) -> tuple[str, ...]:
    if methods is None:
        return accepted
    if isinstance(methods, str):
        methods = [methods]
    chosen = tuple(dict.fromkeys(methods))
    unknown = [m for m in chosen if m not in accepted]
    if unknown or not chosen:
        raise ValueError(f"unknown method(s) {unknown or '(none given)'}; accepted: {', '.join(accepted)}")
    return tuple(m for m in accepted if m in chosen)


def _check_fixed_or_select(kernel, C, select) -> tuple[Kernel | None, float | None]:
    """Checked fixed ``kernel`` and ``C`` (None: the defaults), which a ``select`` callable excludes."""
    if select is not None and (kernel is not None or C is not None):
        raise ValueError("give either select or fixed kernel/C, not both")
    if select is not None and not callable(select):
        raise ValueError(f"select must be a callable (X_train, y_train) -> (kernel, C); got {type(select).__name__}")
    return (None if kernel is None else check_kernel(kernel)), (None if C is None else check_positive(C, "C"))


def check_test_size(test_size) -> None:
    if isinstance(test_size, bool) or not isinstance(test_size, (float, np.floating)) or not 0.0 < test_size < 1.0:
        raise ValueError(f"test_size must be a fraction strictly between 0 and 1; got {test_size!r}")


def _check_split_sizes(y_pm: np.ndarray, test_size, cv_folds: int, methods: tuple[str, ...]) -> None:
    """``test_size`` is a fraction and every training part has enough of each class for its folds."""
    check_test_size(test_size)
    smallest = int(min(np.sum(y_pm > 0), np.sum(y_pm < 0)))
    if round(smallest * (1.0 - test_size)) < max(cv_folds, 5 if "sklearn_svc_sigmoid" in methods else 0):
        raise ValueError(
            f"the smaller class has {smallest} samples, too few for test_size={test_size} and "
            f"cv_folds={cv_folds} folds (each training part needs at least that many of each class)"
        )


def _split_hyperparameters(
    X_train: np.ndarray, y_train: np.ndarray, kernel: Kernel | None, C: float | None, select: Selector | None
) -> tuple[Kernel, float]:
    if select is not None:
        chosen = select(X_train, y_train)
        try:
            chosen_kernel, chosen_C = chosen
        except (TypeError, ValueError):
            raise ValueError(f"select must return a (kernel, C) pair; got {chosen!r}") from None
        return check_kernel(chosen_kernel), check_positive(chosen_C, "C returned by select")
    return (median_heuristic_kernel(X_train) if kernel is None else kernel), (1.0 if C is None else C)


def _svm_probabilities(
    fit: MapSVM, X_train, y_train, X_test, methods: tuple[str, ...], cv_folds: int, random_state
) -> dict[str, np.ndarray]:
    """Bayesian SVM probabilities and every requested scaler on the test inputs."""
    out: dict[str, np.ndarray] = {}
    bayes = [m for m in methods if m in _BAYES]
    if bayes:
        posterior = Posterior.from_fit(fit)
        out.update({m: posterior.predict_proba(X_test, method=_BAYES[m]) for m in bayes})
    scalers = [m for m in methods if m in _SCALERS]
    if scalers:
        held_out = cross_val_decision_values(
            _MapSVMClassifier(fit.kernel, fit.C), X_train, y_train, cv_folds, random_state
        )
        test_scores = fit.decision_function(X_test)
        out.update({m: _SCALERS[m]().fit(held_out, y_train).predict_proba(test_scores) for m in scalers})
    return out


@dataclass(frozen=True)
class SplitResult:
    """One train/test split: indices, hyperparameters used and test probabilities of every method.

    ``probabilities[method]`` is P(y = classes[1] | x) on ``X[test_index]``.
    ``gpc_kernel`` is the GP classifier's fitted kernel (its repr), or None.
    """

    train_index: np.ndarray
    test_index: np.ndarray
    y_test: np.ndarray
    kernel: Kernel
    C: float
    probabilities: dict[str, np.ndarray]
    gpc_kernel: str | None


def _compare_on_split(
    X, y_pm, train, test, kernel: Kernel, C: float, methods: tuple[str, ...], cv_folds: int, random_state,
    gpc_start: gp_kernels.Kernel | None,
) -> tuple[SplitResult, gp_kernels.Kernel | None]:
    """Test probabilities of every method on one split, and the GP classifier's kernel to start the next from."""
    X_train, y_train, X_test = X[train], y_pm[train], X[test]
    probabilities: dict[str, np.ndarray] = {}
    if any(m in _BAYES or m in _SCALERS for m in methods):
        fit = fit_map(X_train, y_train, C=C, kernel=kernel)
        probabilities.update(_svm_probabilities(fit, X_train, y_train, X_test, methods, cv_folds, random_state))
    if "klr" in methods:
        probabilities["klr"] = fit_kernel_logistic(X_train, y_train, kernel=kernel, C=C).predict_proba(X_test)
    gpc_fitted = None
    if "gpc" in methods:
        start = gpc_kernel(kernel, X_train) if gpc_start is None else gpc_start
        gpc = GaussianProcessClassifier(start, random_state=random_state).fit(X_train, y_train)
        gpc_start, gpc_fitted = gpc.kernel_, repr(gpc.kernel_)
        probabilities["gpc"] = gpc.predict_proba(X_test)[:, 1]
    if "sklearn_svc_sigmoid" in methods:
        reference = CalibratedClassifierCV(SVC(), ensemble=False).fit(X_train, y_train)
        probabilities["sklearn_svc_sigmoid"] = reference.predict_proba(X_test)[:, 1]
    result = SplitResult(
        train_index=train, test_index=test, y_test=y_pm[test], kernel=kernel, C=float(C),
        probabilities={m: np.asarray(probabilities[m], dtype=np.float64) for m in methods},
        gpc_kernel=gpc_fitted,
    )
    return result, gpc_start


def _split_scores(splits: list[SplitResult], methods: tuple[str, ...], n_bins: int) -> dict[str, np.ndarray]:
    """metric -> scores (:mod:`bayesvm.metrics`; ECE with ``n_bins`` equal-width bins), shape (n_methods, n_splits)."""
    scorers = {
        "nll": metrics.negative_log_likelihood,
        "brier": metrics.brier_score,
        "ece": lambda y, p: metrics.expected_calibration_error(y, p, n_bins=n_bins),
        "error": metrics.error_rate,
    }
    return {
        k: np.array([[scorers[k](s.y_test, s.probabilities[m]) for s in splits] for m in methods]) for k in METRICS
    }


def _kernel_dict(kernel: Kernel) -> dict[str, object]:
    return {"family": kernel.name, **{k: (v if isinstance(v, int) else float(v)) for k, v in
                                      kernel.hyperparameters.items()}}


# ---------------------------------------------------------------------------
# the result


@dataclass(frozen=True)
class CalibrationComparison:
    """Per-split scores of every method, with summaries.

    ``scores[metric]`` has shape (n_methods, n_splits), rows in the order of
    ``methods``; every metric is "lower is better". ``n_bins`` is the number
    of equal-width bins of the ECE and of the reliability curves.
    """

    methods: tuple[str, ...]
    splits: tuple[SplitResult, ...]
    scores: dict[str, np.ndarray]
    n_bins: int
    settings: dict[str, object]

    def mean(self) -> dict[str, dict[str, float]]:
        """metric -> method -> mean over splits."""
        return {k: dict(zip(self.methods, v.mean(axis=1).tolist())) for k, v in self.scores.items()}

    def std(self) -> dict[str, dict[str, float]]:
        """metric -> method -> sample standard deviation over splits (0 for a single split)."""
        ddof = 1 if len(self.splits) > 1 else 0
        return {k: dict(zip(self.methods, v.std(axis=1, ddof=ddof).tolist())) for k, v in self.scores.items()}

    def ranks(self) -> dict[str, dict[str, float]]:
        """metric -> method -> rank of its mean score among the methods (1 = best; ties share the average rank)."""
        return {
            k: dict(zip(self.methods, scipy.stats.rankdata(v.mean(axis=1), method="average").tolist()))
            for k, v in self.scores.items()
        }

    def table(self, *, labels: bool = True) -> str:
        """Methods as rows, metrics as columns: ``mean +- std (rank)`` over the splits."""
        mean, std, ranks = self.mean(), self.std(), self.ranks()
        names = [METHOD_LABELS[m] if labels else m for m in self.methods]
        width = max(len("method"), *(len(n) for n in names))
        header = f"{'method':<{width}}" + "".join(f"  {name:>22}" for name in ("NLL", "Brier", f"ECE ({self.n_bins} bins)", "error"))
        lines = [header, "-" * len(header)]
        for method, name in zip(self.methods, names):
            cells = "".join(
                f"  {f'{mean[k][method]:.4f} +- {std[k][method]:.4f} ({ranks[k][method]:g})':>22}" for k in METRICS
            )
            lines.append(f"{name:<{width}}{cells}")
        return "\n".join(lines)

    def reliability(self) -> dict[str, metrics.ReliabilityCurve]:
        """method -> reliability curve of the test predictions pooled over all splits."""
        y = np.concatenate([s.y_test for s in self.splits])
        return {
            m: metrics.reliability_curve(y, np.concatenate([s.probabilities[m] for s in self.splits]), self.n_bins)
            for m in self.methods
        }

    def plot(self, methods: Sequence[str] | None = None, *, ax=None):
        """Reliability diagram (pooled over splits) of ``methods`` (default: a readable handful) via
        :func:`bayesvm.plotting.plot_reliability`; returns the figure."""
        from ..plotting import plot_reliability

        default = ("bsvm_averaged", "platt", "isotonic", "gpc", "sklearn_svc_sigmoid")
        chosen = [m for m in default if m in self.methods] if methods is None else list(methods)
        missing = [m for m in chosen if m not in self.methods]
        if missing or not chosen:
            raise ValueError(f"methods to plot must be among {list(self.methods)}; got {chosen}")
        curves = self.reliability()
        return plot_reliability({METHOD_LABELS[m]: tuple(curves[m]) for m in chosen}, ax=ax)

    def to_dict(self) -> dict[str, object]:
        """A JSON-serialisable summary: per-split scores, means, stds, ranks, pooled reliability curves."""
        return {
            "methods": list(self.methods),
            "labels": {m: METHOD_LABELS[m] for m in self.methods},
            "metrics": list(METRICS),
            "scores": {k: {m: v[i].tolist() for i, m in enumerate(self.methods)} for k, v in self.scores.items()},
            "mean": self.mean(),
            "std": self.std(),
            "ranks": self.ranks(),
            "reliability": {m: {f: c.tolist() for f, c in curve._asdict().items()}
                            for m, curve in self.reliability().items()},
            "splits": [
                {"n_train": int(s.train_index.size), "n_test": int(s.test_index.size),
                 "kernel": _kernel_dict(s.kernel), "C": s.C, "gpc_kernel": s.gpc_kernel}
                for s in self.splits
            ],
            "settings": dict(self.settings),
        }


# ---------------------------------------------------------------------------
# the comparison


@float64
def compare_calibration(
    X,
    y,
    *,
    kernel: Kernel | None = None,
    C: float | None = None,
    select: Selector | None = None,
    methods: Sequence[str] | None = None,
    n_splits: int = 5,
    test_size: float = 0.3,
    cv_folds: int = 5,
    n_bins: int = 10,
    random_state: int = 0,
) -> CalibrationComparison:
    """Compare the Bayesian SVM's class probabilities with calibration baselines on (X, y).

    Parameters
    ----------
    X, y : inputs (n_samples, n_features) and two-valued labels; the larger
        label is the positive class.
    kernel, C : fixed SVM hyperparameters for every split. ``kernel=None``
        uses :func:`median_heuristic_kernel` of each training part; ``C=None``
        means 1.
    select : alternatively, a callable ``select(X_train, y_train) -> (kernel, C)``
        run on each training part (e.g. evidence maximisation); it excludes
        ``kernel`` and ``C``.
    methods : names from :data:`METHODS` (default: all). The Bayesian SVM
        (``bsvm_*``) and the scalers share one SVM fit per split.
    n_splits, test_size : stratified shuffle splits (scikit-learn's
        ``StratifiedShuffleSplit``) and the test fraction of each.
    cv_folds : folds of the out-of-fold decision values the scalers are
        fitted on.
    n_bins : equal-width bins of the ECE and the reliability curves.
    random_state : seeds the splits, the folds and the GP classifier; the
        result is deterministic for a fixed value.

    Notes
    -----
    The GP classifier's hyperparameters (amplitude * RBF, started from the
    SVM kernel's amplitude and length scale; see ``gpc_kernel``) are fitted
    by its marginal likelihood on each training part, warm-started from the
    previous split's optimum.
    """
    X = check_inputs(X)
    y_pm, classes = check_labels(y, X.shape[0])
    kernel, C = _check_fixed_or_select(kernel, C, select)
    chosen = check_method_names(methods)
    n_splits = check_count(n_splits, "n_splits", 1)
    cv_folds = check_count(cv_folds, "cv_folds", 2)
    n_bins = check_count(n_bins, "n_bins", 1)
    _check_split_sizes(y_pm, test_size, cv_folds, chosen)

    splitter = StratifiedShuffleSplit(n_splits=n_splits, test_size=test_size, random_state=random_state)
    gpc_start: gp_kernels.Kernel | None = None
    results = []
    for train, test in splitter.split(X, y_pm):
        split_kernel, split_C = _split_hyperparameters(X[train], y_pm[train], kernel, C, select)
        result, gpc_start = _compare_on_split(
            X, y_pm, train, test, split_kernel, split_C, chosen, cv_folds, random_state, gpc_start
        )
        results.append(result)

    settings = {"n_samples": int(X.shape[0]), "n_features": int(X.shape[1]), "classes": classes.tolist(),
                "n_splits": n_splits, "test_size": float(test_size), "cv_folds": cv_folds, "n_bins": n_bins,
                "random_state": random_state, "hyperparameters": "select" if select is not None else "fixed"}
    return CalibrationComparison(methods=chosen, splits=tuple(results), scores=_split_scores(results, chosen, n_bins),
                                 n_bins=n_bins, settings=settings)
