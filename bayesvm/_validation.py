"""Input checks shared by the public entry points.

Every check raises ``ValueError`` with a message that says what was wrong and
what is accepted, before any array reaches JAX.
"""

from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np
from sklearn.utils.class_weight import compute_sample_weight

from .kernels import Kernel


def check_inputs(X, *, name: str = "X", n_features: int | None = None) -> np.ndarray:
    """A finite float64 array of shape (n_samples, n_features)."""
    try:
        arr = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be numeric (an array of shape (n_samples, n_features)): {err}") from None
    if arr.ndim == 1:
        raise ValueError(
            f"{name} must be 2-D with shape (n_samples, n_features); got a 1-D array of length {arr.shape[0]}. "
            "Reshape with X.reshape(-1, 1) for one feature or X.reshape(1, -1) for one sample."
        )
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D with shape (n_samples, n_features); got shape {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape}); at least one sample and one feature are needed")
    if not np.all(np.isfinite(arr)):
        bad = int(np.sum(~np.isfinite(arr)))
        raise ValueError(f"{name} contains {bad} NaN or infinite value(s); only finite values are accepted")
    if n_features is not None and arr.shape[1] != n_features:
        raise ValueError(f"{name} has {arr.shape[1]} features but the model was fitted with {n_features}")
    return arr


def check_vector(values, *, name: str, what: str, plural: str | None = None, n: int | None = None) -> np.ndarray:
    """A finite 1-D float64 array, one ``what`` per sample (an (n, 1) column is accepted).

    ``n``: the required length (a mismatch names the labels it must match).
    ``plural`` is the plural of ``what`` for messages (default ``what + "s"``).
    """
    plural = plural or f"{what}s"
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be a numeric 1-D array ({what} per sample): {err}") from None
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr.ravel()
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one {what} per sample); got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"y has {n} labels but {name} has {arr.shape[0]} {plural}; they must match")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} is empty; at least one {what} is needed")
    if not np.all(np.isfinite(arr)):
        bad = int(np.sum(~np.isfinite(arr)))
        raise ValueError(f"{name} contains {bad} NaN or infinite value(s); only finite {plural} are accepted")
    return arr


def check_class_labels(y, n_samples: int) -> tuple[np.ndarray, np.ndarray]:
    """One label per sample, of at least two classes: ``(labels, sorted classes)``."""
    arr = np.asarray(y)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr.ravel()
    if arr.ndim != 1:
        raise ValueError(f"y must be 1-D with one label per sample; got shape {arr.shape}")
    if arr.shape[0] != n_samples:
        raise ValueError(f"X has {n_samples} samples but y has {arr.shape[0]} labels; they must match")
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise ValueError("y contains NaN or infinite labels; labels must be finite values")
    classes = np.unique(arr)
    if classes.size < 2:
        raise ValueError(
            f"y has only one class ({classes[0]!r}); a classifier needs labels of at least two classes"
        )
    return arr, classes


def check_labels(y, n_samples: int) -> tuple[np.ndarray, np.ndarray]:
    """Map two-valued labels to -1/+1.

    Returns ``(y_pm, classes)`` where ``classes`` is the sorted pair of
    original labels; ``classes[1]`` becomes +1.
    """
    arr, classes = check_class_labels(y, n_samples)
    if classes.size > 2:
        shown = ", ".join(repr(c) for c in classes[:5]) + (", ..." if classes.size > 5 else "")
        raise ValueError(
            f"y has {classes.size} classes ({shown}); this function takes exactly two (BayesianSVC and "
            "select_hyperparameters take more, as one-vs-rest problems)"
        )
    y_pm = np.where(arr == classes[1], 1.0, -1.0)
    return y_pm, classes


def one_vs_rest_labels(y, n_samples: int) -> tuple[np.ndarray, np.ndarray]:
    """Labels of two or more classes as binary problems in -1/+1: ``(Y, classes)``.

    Two classes give one problem, Y of shape (1, n) with ``classes[1]`` as +1
    (as :func:`check_labels`); k >= 3 classes give k one-vs-rest problems,
    Y of shape (k, n) with Y[c] = +1 where the label is ``classes[c]``.
    """
    arr, classes = check_class_labels(y, n_samples)
    if classes.size == 2:
        return np.where(arr == classes[1], 1.0, -1.0)[None, :], classes
    return np.where(arr[None, :] == classes[:, None], 1.0, -1.0), classes


class TrainingData(NamedTuple):
    """Training data validated once, at a public entry point, for every layer below it.

    X: finite float64 inputs (n, d); Y: the binary problems' labels in -1/+1, (1, n) for two classes (``classes[1]``
    is +1) or (k, n) one-vs-rest for k >= 3 classes (:func:`one_vs_rest_labels`); classes: the sorted labels;
    weights: (n,) positive row weights, each row's likelihood term to that power (theory: "Weights and repeated
    rows"), or None where every row has weight 1.
    """

    X: np.ndarray
    Y: np.ndarray
    classes: np.ndarray
    weights: np.ndarray | None = None

    @property
    def problems(self) -> tuple["TrainingData", ...]:
        """Each binary problem alone: for k >= 3 classes, class c (+1, ``True``) against the rest (``False``)."""
        if self.Y.shape[0] == 1:
            return (self,)
        return tuple(TrainingData(self.X, y_pm[None, :], np.array([False, True]), self.weights) for y_pm in self.Y)

    def rows(self, index: np.ndarray) -> "TrainingData":
        """The rows ``index`` alone, with their weights."""
        return TrainingData(self.X[index], self.Y[:, index], self.classes,
                            None if self.weights is None else self.weights[index])


def check_sample_weight(sample_weight, n_samples: int) -> np.ndarray:
    """One finite, non-negative weight per sample, as float64 (None: every weight 1; a number: that weight for
    every sample, as in scikit-learn)."""
    if sample_weight is None:
        return np.ones(n_samples)
    sample_weight = np.asarray(sample_weight)
    if sample_weight.ndim == 0:
        sample_weight = np.full(n_samples, sample_weight)
    weights = check_vector(sample_weight, name="sample_weight", what="weight")
    if weights.shape[0] != n_samples:
        raise ValueError(f"X has {n_samples} samples but sample_weight has {weights.shape[0]} weights; they must match")
    if np.any(weights < 0):
        raise ValueError(f"sample_weight has {int(np.sum(weights < 0))} negative weight(s); weights must be >= 0 "
                         "(0: the row takes no part)")
    return weights


def collapsed_training_data(X, y, sample_weight=None, class_weight=None) -> tuple[TrainingData, np.ndarray]:
    """:func:`check_inputs` and :func:`collapse_rows` in one: the validation of a public entry point whose results
    are not per row."""
    return collapse_rows(check_inputs(X), y, sample_weight, class_weight)


def collapse_rows(X: np.ndarray, y, sample_weight=None, class_weight=None) -> tuple[TrainingData, np.ndarray]:
    """Training data with equal rows collapsed, from validated inputs X (n, d): ``(data, row)``, ``row[i]`` the
    collapsed row of input row i (-1 where its weight is 0).

    Each row's weight is ``sample_weight`` times its class's weight (``class_weight``: None, ``"balanced"`` (class c
    weighs n / (k n_c)) or a dict class -> weight, as in scikit-learn). Rows of weight 0 are dropped, and rows with
    equal input and label become one row whose weight is their sum: a row of weight w is w copies of it (theory:
    "Weights and repeated rows"), so every layer below sees each (input, label) once. The collapsed rows are in
    lexicographic order of (input, label), so the order of the rows changes nothing. ``weights`` is None where
    every collapsed weight is 1 (no repeated row, no weight).
    """
    Y, classes = one_vs_rest_labels(y, X.shape[0])
    code = (Y[0] > 0).astype(np.int64) if classes.size == 2 else np.argmax(Y, axis=0)
    weights = check_sample_weight(sample_weight, X.shape[0])
    if class_weight is not None:
        try:
            weights = weights * compute_sample_weight(class_weight, classes[code])
        except (KeyError, ValueError, TypeError) as error:
            raise ValueError(f"class_weight must be None, 'balanced' or a dict class -> non-negative weight; got "
                             f"{class_weight!r} ({error})") from None
        if not np.all(np.isfinite(weights) & (weights >= 0)):
            raise ValueError(f"class_weight must give finite, non-negative weights; got {class_weight!r}")
    if not np.any(weights > 0):
        raise ValueError("every row's weight is zero (sample_weight times class_weight); rows of weight zero take "
                         "no part, so at least one row of each class needs a positive weight")
    weight_of_class = np.bincount(code, weights=weights, minlength=classes.size)
    if np.any(weight_of_class <= 0):
        empty = ", ".join(repr(c.item()) for c in classes[weight_of_class <= 0])
        raise ValueError(f"every row of class {empty} has weight 0; each class needs a row of positive weight (drop "
                         "the class from y, or give its rows a positive sample_weight / class_weight)")
    kept = np.flatnonzero(weights > 0)
    # +0.0 turns -0.0 into 0.0: equal values, equal rows
    keys = np.column_stack([X[kept] + 0.0, code[kept].astype(np.float64)])
    # in lexicographic order of (input, label): the order the rows arrive in changes nothing downstream, not even
    # which random numbers of the samplers meet which input
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    totals = np.bincount(inverse, weights=weights[kept], minlength=first.size)
    row = np.full(X.shape[0], -1)
    row[kept] = inverse
    rows = kept[first]
    return TrainingData(X[rows] + 0.0, Y[:, rows], classes, None if np.all(totals == 1.0) else totals), row


def training_data(X, y, sample_weight=None) -> TrainingData:
    """:func:`check_inputs`, :func:`one_vs_rest_labels` and :func:`check_sample_weight` in one, rows kept as given
    (a zero weight stays, as a row that takes no part): the validation of an entry point whose results are per
    row (:func:`bayesvm.solver.dual.fit_map`). Entry points whose results are not per row collapse the rows
    (:func:`collapsed_training_data`)."""
    X = check_inputs(X)
    weights = None if sample_weight is None else check_sample_weight(sample_weight, X.shape[0])
    return TrainingData(X, *one_vs_rest_labels(y, X.shape[0]), weights)


def check_positive(value, name: str) -> float:
    """A finite, strictly positive scalar."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        try:
            value = float(np.asarray(value))
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a positive number; got {value!r}") from None
    value = float(value)
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be finite and > 0; got {value}")
    return value


def check_count(value, name: str, minimum: int = 1) -> int:
    """An integer (not a bool) >= ``minimum``, as a Python int."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def check_kernel(kernel, n_features: int | None = None) -> Kernel:
    """A kernel instance with hyperparameters in range (per-feature length scales: one per feature of the inputs)."""
    if not isinstance(kernel, Kernel):
        raise ValueError(
            f"kernel must be a bayesvm kernel (RBF, Exponential, Polynomial, Linear); got {type(kernel).__name__}"
        )
    return kernel.check(n_features)
