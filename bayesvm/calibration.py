"""Calibration baselines: maps from SVM decision values f to P(y = +1 | f).

These are the baselines that the Bayesian SVM's own class probabilities are
compared with (:func:`bayesvm.comparison.compare_calibration`; documentation:
calibration). Every scaler follows one small protocol:

    scaler.fit(scores, y)          # scores: 1-D decision values, y: two labels
    scaler.predict_proba(scores)   # -> 1-D array of P(y = +1), in [0, 1]

``y`` may be any two-valued labels; the larger of the two sorted labels is
the positive class (``bayesvm._validation.check_labels``), the same
convention as scikit-learn's ``decision_function``. A scaler should be fitted
on decision values the classifier did not train on: use
:func:`cross_val_decision_values` to get them.

Scalers that learn something (Platt, isotonic, beta, histogram binning,
SVM-PP) raise scikit-learn's ``NotFittedError`` when asked to predict before
``fit``; the fixed maps (softmax, SVM-01) need no fitting, and their ``fit``
only validates its input.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from scipy.linalg import cho_factor, cho_solve
from scipy.special import expit, log_expit
from sklearn.base import BaseEstimator, clone
from sklearn.isotonic import IsotonicRegression
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.utils.validation import check_is_fitted

from ._validation import check_labels, check_vector
from ._warnings import warn_user
from .exceptions import ConvergenceWarning

__all__ = [
    "PlattScaler",
    "IsotonicScaler",
    "BetaScaler",
    "HistogramBinningScaler",
    "SoftmaxScaler",
    "SVM01Scaler",
    "SVMPPScaler",
    "cross_val_decision_values",
    "platt_targets",
]


# ---------------------------------------------------------------------------
# input checks


def check_scores(scores, *, name: str = "scores") -> np.ndarray:
    """A finite, non-empty 1-D float64 array of decision values (an (n, 1) column is accepted)."""
    return check_vector(scores, name=name, what="decision value")


def _check_training_pair(scores, y) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(f, t, classes): validated scores, 0/1 targets (1 = classes[1]) and the two original labels."""
    f = check_scores(scores)
    y_pm, classes = check_labels(y, f.shape[0])
    return f, (y_pm > 0).astype(np.float64), classes


class _Scaler(BaseEstimator):
    """Shared ``fit`` / ``predict_proba`` plumbing: validation, then ``_fit`` / ``_proba`` on clean arrays."""

    def fit(self, scores, y):
        """Fit on decision values ``scores`` (shape (n,)) and two-valued labels ``y``; returns self."""
        f, t, classes = _check_training_pair(scores, y)
        self.classes_ = classes
        self._fit(f, t)
        return self

    def predict_proba(self, scores) -> np.ndarray:
        """P(y = classes_[1] | f) for each decision value, as a 1-D array in [0, 1]."""
        check_is_fitted(self)
        return self._proba(check_scores(scores))

    def _fit(self, f: np.ndarray, t: np.ndarray) -> None:
        raise NotImplementedError

    def _proba(self, f: np.ndarray) -> np.ndarray:
        raise NotImplementedError


class _FixedMap(_Scaler):
    """A scaler with nothing to learn: usable without ``fit``."""

    def _fit(self, f: np.ndarray, t: np.ndarray) -> None:
        pass

    def __sklearn_is_fitted__(self) -> bool:
        return True


# ---------------------------------------------------------------------------
# Newton's method for logistic regression with soft targets


def _soft_logistic_loss(z: np.ndarray, t: np.ndarray) -> float:
    """sum_i -[t_i ln sigmoid(z_i) + (1 - t_i) ln sigmoid(-z_i)], in the overflow-free form.

    -t ln s(z) - (1 - t) ln s(-z) = -t log_expit(z) - (1 - t) log_expit(-z).
    """
    return float(-np.sum(t * log_expit(z) + (1.0 - t) * log_expit(-z)))


def fit_soft_logistic(
    Z: np.ndarray,
    t: np.ndarray,
    w0: np.ndarray,
    *,
    max_iter: int = 100,
    decrement_tol: float = 1e-12,
    min_step: float = 1e-10,
    hessian_ridge: float = 1e-12,
) -> np.ndarray:
    """Minimise F(w) = sum_i CE(t_i, sigmoid((Z w)_i)) by Newton's method with backtracking.

    The algorithm of Lin, Lin & Weng, "A note on Platt's probabilistic
    outputs for support vector machines", Machine Learning 68 (2007),
    written for a general design matrix Z (Platt: Z = -[f, 1], w = (A, B)):
    Newton direction d = -(H + sigma I)^-1 g, H = Z^T diag(p (1 - p)) Z
    (sigma = ``hessian_ridge`` keeps H positive definite), step halved from
    1 until the Armijo condition F(w + s d) < F(w) + 1e-4 s g^T d holds.

    Stopping rule: instead of Lin et al.'s absolute |g| < 1e-5 (which
    depends on n and on the scale of Z) the iteration stops when the Newton
    decrement -g^T d, twice the predicted remaining decrease of F, falls
    below ``decrement_tol`` (1 + F); that last, tiny Newton step is taken in
    full. Deterministic; warns if the line search fails or ``max_iter`` is
    reached.
    """
    w = np.asarray(w0, dtype=np.float64).copy()
    loss = _soft_logistic_loss(Z @ w, t)
    for _ in range(max_iter):
        z = Z @ w
        gradient = Z.T @ (expit(z) - t)
        hessian = (Z.T * (expit(z) * expit(-z))) @ Z + hessian_ridge * np.eye(w.size)
        direction = -cho_solve(cho_factor(hessian), gradient)
        slope = float(gradient @ direction)
        if -slope < decrement_tol * (1.0 + loss):
            return w + direction
        step = 1.0
        while step >= min_step:
            candidate = w + step * direction
            candidate_loss = _soft_logistic_loss(Z @ candidate, t)
            if candidate_loss < loss + 1e-4 * step * slope:
                w, loss = candidate, candidate_loss
                break
            step /= 2.0
        else:
            warn_user(
                "Newton's line search could not decrease the logistic loss, so the last iterate is returned; if the "
                "decision values separate the classes, fit on out-of-fold ones (cross_val_decision_values)",
                ConvergenceWarning,
            )
            return w
    warn_user(f"Newton's method reached max_iter={max_iter} before converging; pass a larger max_iter (fit_soft_logistic)",
              ConvergenceWarning)
    return w


# ---------------------------------------------------------------------------
# Platt scaling


def platt_targets(t: np.ndarray) -> np.ndarray:
    """Platt's regularised targets: (N+ + 1)/(N+ + 2) for positives, 1/(N- + 2) for negatives.

    The maximum a posteriori estimate of the label probability under a
    uniform prior (Platt 1999, section 2.2); keeps the sigmoid from
    overfitting a separable set of outputs. ``t`` holds 0/1 labels.
    """
    n_pos = float(np.sum(t))
    n_neg = t.shape[0] - n_pos
    return np.where(t > 0, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))


class PlattScaler(_Scaler):
    """Platt scaling: P(+1 | f) = 1 / (1 + exp(A f + B)).

    A and B minimise the cross-entropy between the sigmoid and Platt's
    regularised targets (:func:`platt_targets`), by the Newton method with
    backtracking line search of Lin, Lin & Weng (2007), started from
    A = 0, B = ln((N- + 1)/(N+ + 1)). The loss is evaluated through
    log-sigmoids, so decision values in the thousands do not overflow.

    References: J. Platt, "Probabilistic outputs for support vector machines
    and comparisons to regularized likelihood methods" (1999);
    H.-T. Lin, C.-J. Lin, R. C. Weng, Machine Learning 68:267-276 (2007).

    Attributes: ``A_``, ``B_`` (floats), ``classes_``.
    """

    def _fit(self, f: np.ndarray, t: np.ndarray) -> None:
        n_pos = float(np.sum(t))
        n_neg = t.shape[0] - n_pos
        design = -np.column_stack([f, np.ones_like(f)])
        start = np.array([0.0, np.log((n_neg + 1.0) / (n_pos + 1.0))])
        self.A_, self.B_ = (float(v) for v in fit_soft_logistic(design, platt_targets(t), start))

    def _proba(self, f: np.ndarray) -> np.ndarray:
        return expit(-(self.A_ * f + self.B_))


def cross_val_decision_values(estimator, X, y, cv: int = 5, random_state: int | None = 0) -> np.ndarray:
    """Out-of-fold decision values: an unbiased training set for a scaler.

    Stratified, shuffled k-fold cross-validation (k = ``cv``; Platt used 3,
    libsvm uses 5): for each fold a clone of ``estimator`` is fitted on the
    other folds and its ``decision_function`` evaluated on the held-out one.
    ``random_state`` seeds the shuffle, so the result is reproducible.
    Returns a 1-D array with one value per sample, in the input order.
    """
    if not hasattr(estimator, "decision_function"):
        raise ValueError(f"estimator must have a decision_function method; {type(estimator).__name__} has none")
    if isinstance(cv, bool) or not isinstance(cv, (int, np.integer)) or cv < 2:
        raise ValueError(f"cv must be an integer number of folds >= 2; got {cv!r}")
    n_samples = X.shape[0] if hasattr(X, "shape") else len(X)
    y_pm, _ = check_labels(y, n_samples)
    smallest_class = int(min(np.sum(y_pm > 0), np.sum(y_pm < 0)))
    if smallest_class < cv:
        raise ValueError(
            f"cv={cv} folds need at least {cv} samples of each class; the smaller class has {smallest_class}"
        )
    folds = StratifiedKFold(n_splits=int(cv), shuffle=True, random_state=random_state)
    values = cross_val_predict(clone(estimator), X, y, cv=folds, method="decision_function")
    return check_scores(values, name="decision_function output")


# ---------------------------------------------------------------------------
# isotonic and beta calibration


class IsotonicScaler(_Scaler):
    """Isotonic regression of the 0/1 labels on f (Zadrozny & Elkan 2002).

    The non-decreasing step function minimising squared error (pool
    adjacent violators), via scikit-learn's ``IsotonicRegression`` with
    ``out_of_bounds="clip"``: decision values outside the training range get
    the value at the nearest end. Attributes: ``isotonic_``, ``classes_``.
    """

    def _fit(self, f: np.ndarray, t: np.ndarray) -> None:
        self.isotonic_ = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip").fit(f, t)

    def _proba(self, f: np.ndarray) -> np.ndarray:
        return np.clip(self.isotonic_.predict(f), 0.0, 1.0)


def beta_features(f: np.ndarray) -> np.ndarray:
    """The beta-calibration design [ln s, -ln(1 - s), 1] at s = sigmoid(f).

    ln s = log_expit(f) and -ln(1 - s) = -log_expit(-f), both exact for any
    finite f (no clipping of s away from 0 and 1 needed).
    """
    return np.column_stack([log_expit(f), -log_expit(-f), np.ones_like(f)])


class BetaScaler(_Scaler):
    """Three-parameter beta calibration (Kull, Silva Filho & Flach, AISTATS 2017).

    The decision value is first mapped into (0, 1) by s = sigmoid(f); then

        logit P(+1 | s) = a ln s - b ln(1 - s) + c,   a, b >= 0,

    a logistic regression of the 0/1 labels on [ln s, -ln(1 - s)]. With
    s = sigmoid(f) the map is logit P = a log_expit(f) - b log_expit(-f) + c;
    a = b gives logit P = a f + c, so the family contains Platt's sigmoid.

    The constraint a, b >= 0 keeps the map monotone. The paper refits with
    the offending feature removed when the unconstrained fit has a < 0 or
    b < 0; this class makes that rule exact: it fits the unconstrained model
    and its restrictions a = 0, b = 0 and a = b = 0 (each by Newton's method,
    :func:`fit_soft_logistic`) and keeps the feasible fit with the smallest
    loss. The loss is convex, so that is the constrained maximum-likelihood
    estimate; it coincides with the paper's refit whenever the unconstrained
    fit is feasible or the paper's single refit is feasible and optimal.
    Labels are used as plain 0/1 targets, as in the paper.

    Attributes: ``a_``, ``b_``, ``c_`` (floats), ``classes_``.
    """

    def _fit(self, f: np.ndarray, t: np.ndarray) -> None:
        design = beta_features(f)
        start_intercept = np.log((np.sum(t) + 0.5) / (t.shape[0] - np.sum(t) + 0.5))
        best_loss, best = np.inf, None
        for free in ([0, 1, 2], [1, 2], [0, 2], [2]):
            start = np.zeros(len(free))
            start[-1] = start_intercept
            w = np.zeros(3)
            w[free] = fit_soft_logistic(design[:, free], t, start)
            loss = _soft_logistic_loss(design @ w, t)
            if w[0] >= 0.0 and w[1] >= 0.0 and loss < best_loss:
                best_loss, best = loss, w
        self.a_, self.b_, self.c_ = (float(v) for v in best)

    def _proba(self, f: np.ndarray) -> np.ndarray:
        return expit(beta_features(f) @ np.array([self.a_, self.b_, self.c_]))


# ---------------------------------------------------------------------------
# histogram binning


def bin_edges(
    values: np.ndarray, n_bins: int, strategy: Literal["uniform", "quantile"], span: tuple[float, float]
) -> np.ndarray:
    """n_bins + 1 bin edges: equal width over ``span`` ("uniform") or equal mass of ``values`` ("quantile").

    Quantile edges of tied values may coincide; the bins between them are
    then empty.
    """
    if strategy == "uniform":
        return np.linspace(span[0], span[1], n_bins + 1)
    if strategy == "quantile":
        return np.quantile(values, np.linspace(0.0, 1.0, n_bins + 1))
    raise ValueError(f"strategy must be 'uniform' (equal width) or 'quantile' (equal mass); got {strategy!r}")


def bin_index(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Bin of each value: i such that edges[i] < v <= edges[i+1]; values beyond the ends go to the end bins.

    The same convention as scikit-learn's ``calibration_curve``.
    """
    return np.searchsorted(edges[1:-1], values, side="left")


def check_n_bins(n_bins) -> int:
    """An integer number of bins >= 1."""
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ValueError(f"n_bins must be an integer >= 1; got {n_bins!r}")
    return int(n_bins)


class HistogramBinningScaler(_Scaler):
    """Histogram binning (Zadrozny & Elkan 2001): P(+1 | f) = fraction of positives in f's bin.

    Bins span the training decision values, of equal width
    (``strategy="uniform"``) or equal mass (``"quantile"``); decision values
    outside the training range fall in the end bins. An empty bin takes the
    value interpolated linearly (by bin index) between the nearest non-empty
    bins on either side, or the nearest one's value beyond the last non-empty
    bin, so it never predicts an arbitrary 0 or 1.

    Attributes: ``bin_edges_``, ``bin_counts_``, ``bin_probabilities_``, ``classes_``.
    """

    def __init__(self, n_bins: int = 10, strategy: Literal["uniform", "quantile"] = "uniform"):
        self.n_bins = n_bins
        self.strategy = strategy

    def _fit(self, f: np.ndarray, t: np.ndarray) -> None:
        n_bins = check_n_bins(self.n_bins)
        edges = bin_edges(f, n_bins, self.strategy, (float(f.min()), float(f.max())))
        index = bin_index(f, edges)
        counts = np.bincount(index, minlength=n_bins)
        positives = np.bincount(index, weights=t, minlength=n_bins)
        filled = counts > 0
        self.bin_edges_ = edges
        self.bin_counts_ = counts
        self.bin_probabilities_ = np.interp(
            np.arange(n_bins), np.flatnonzero(filled), positives[filled] / counts[filled]
        )

    def _proba(self, f: np.ndarray) -> np.ndarray:
        return self.bin_probabilities_[bin_index(f, self.bin_edges_)]


# ---------------------------------------------------------------------------
# fixed maps and SVM-PP


class SoftmaxScaler(_FixedMap):
    """P(+1 | f) = 1 / (1 + exp(-2 f)): the two-class softmax of the outputs (f, -f). No fitting."""

    def _proba(self, f: np.ndarray) -> np.ndarray:
        return expit(2.0 * f)


def svm01_probability(f: np.ndarray) -> np.ndarray:
    """(1 + f) / 2 clipped to [0, 1]: linear inside the margin |f| <= 1, 0 or 1 beyond."""
    return np.clip(0.5 * (1.0 + f), 0.0, 1.0)


class SVM01Scaler(_FixedMap):
    """SVM-01: P(+1 | f) = clip((1 + f) / 2, 0, 1). No fitting."""

    def _proba(self, f: np.ndarray) -> np.ndarray:
        return svm01_probability(f)


class SVMPPScaler(_Scaler):
    """SVM-PP: (1 + f)/2 inside the margin, empirical positive rates beyond it.

    P(+1 | f) = (1 + f)/2 for |f| <= 1; for f > 1 the fraction of positives
    among the training points with f > 1 (``upper_rate_``), for f < -1 the
    fraction among those with f < -1 (``lower_rate_``). A side with no
    training points keeps the SVM-01 value there (1 above, 0 below).

    Attributes: ``upper_rate_``, ``lower_rate_``, ``classes_``.
    """

    def _fit(self, f: np.ndarray, t: np.ndarray) -> None:
        above, below = f > 1.0, f < -1.0
        self.upper_rate_ = float(np.mean(t[above])) if above.any() else 1.0
        self.lower_rate_ = float(np.mean(t[below])) if below.any() else 0.0

    def _proba(self, f: np.ndarray) -> np.ndarray:
        return np.where(f > 1.0, self.upper_rate_, np.where(f < -1.0, self.lower_rate_, svm01_probability(f)))
