"""Scores for predicted class probabilities: likelihood, Brier, calibration error, reliability curves.

Every function takes true labels ``y`` and predicted probabilities ``p`` of
the positive class. Labels are two-valued: the larger of the two sorted
labels is positive (``bayesvm._validation.check_labels``). A set holding only
one class is accepted when its labels are 0/1, -1/+1 or booleans, where the
positive label (1 / True) is unambiguous. Probabilities must be finite and in
[0, 1], one per label; anything else raises ``ValueError``.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import numpy as np

from ._validation import check_labels, check_vector
from .calibration import bin_edges, bin_index, check_n_bins

__all__ = [
    "negative_log_likelihood",
    "brier_score",
    "expected_calibration_error",
    "reliability_curve",
    "ReliabilityCurve",
    "error_rate",
]


def _positive_indicator(y) -> tuple[np.ndarray, object]:
    """(t, positive_label): 0/1 float indicator of the positive class and that class's label."""
    arr = np.asarray(y)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr.ravel()
    if arr.ndim == 1 and arr.size > 0 and arr.dtype.kind in "biuf":
        for pair in ((0, 1), (-1, 1)):
            if np.all(np.isin(arr, pair)):
                return (arr == 1).astype(np.float64), 1
    y_pm, classes = check_labels(arr, arr.shape[0] if arr.ndim else 0)
    return (y_pm > 0).astype(np.float64), classes[1]


def _check_probabilities(p, n_labels: int) -> np.ndarray:
    """A finite 1-D float64 array of probabilities in [0, 1], one per label."""
    arr = check_vector(p, name="p", what="probability", plural="probabilities", n=n_labels)
    if arr.min() < 0.0 or arr.max() > 1.0:
        raise ValueError(f"p must lie in [0, 1]; got values in [{arr.min()}, {arr.max()}]")
    return arr


def _targets_and_probabilities(y, p) -> tuple[np.ndarray, np.ndarray]:
    t, _ = _positive_indicator(y)
    return t, _check_probabilities(p, t.shape[0])


def negative_log_likelihood(y, p) -> float:
    """Mean cross-entropy -(1/n) sum_i [t_i ln p_i + (1 - t_i) ln(1 - p_i)], t_i = 1 for positives.

    The probability given to the observed label is clipped below at the
    float64 machine epsilon, so a confident mistake costs about 36 nats
    instead of infinity (scikit-learn's ``log_loss`` does the same).
    """
    t, prob = _targets_and_probabilities(y, p)
    observed = np.where(t > 0, prob, 1.0 - prob)
    return float(-np.mean(np.log(np.clip(observed, np.finfo(np.float64).eps, 1.0))))


def brier_score(y, p) -> float:
    """Mean squared error (1/n) sum_i (p_i - t_i)^2 (Brier 1950)."""
    t, prob = _targets_and_probabilities(y, p)
    return float(np.mean((prob - t) ** 2))


class ReliabilityCurve(NamedTuple):
    """Per-bin summary of predicted probabilities; only non-empty bins are listed.

    mean_predicted: mean of p in each bin; observed_frequency: fraction of
    positives in each bin; counts: number of samples in each bin.
    """

    mean_predicted: np.ndarray
    observed_frequency: np.ndarray
    counts: np.ndarray


def reliability_curve(y, p, n_bins: int = 10, strategy: Literal["uniform", "quantile"] = "uniform") -> ReliabilityCurve:
    """Bin the predictions and compare the mean prediction with the observed frequency in each bin.

    Bins have equal width on [0, 1] (``strategy="uniform"``) or hold equal
    numbers of predictions (``"quantile"``); bin i holds edges[i] < p <=
    edges[i+1] (the first bin also p = edges[0]), the convention of
    scikit-learn's ``calibration_curve``, whose (prob_true, prob_pred) equal
    (observed_frequency, mean_predicted) here. Empty bins are left out.
    """
    t, prob = _targets_and_probabilities(y, p)
    n_bins = check_n_bins(n_bins)
    index = bin_index(prob, bin_edges(prob, n_bins, strategy, (0.0, 1.0)))
    counts = np.bincount(index, minlength=n_bins)
    filled = counts > 0
    return ReliabilityCurve(
        mean_predicted=np.bincount(index, weights=prob, minlength=n_bins)[filled] / counts[filled],
        observed_frequency=np.bincount(index, weights=t, minlength=n_bins)[filled] / counts[filled],
        counts=counts[filled],
    )


def expected_calibration_error(y, p, n_bins: int = 10, strategy: Literal["uniform", "quantile"] = "uniform") -> float:
    """ECE = sum_b (n_b / n) |mean p in bin b - fraction of positives in bin b|.

    Bins as in :func:`reliability_curve` (Naeini, Cooper & Hauskrecht 2015,
    with the bins of Guo et al. 2017 for ``strategy="uniform"``).
    """
    curve = reliability_curve(y, p, n_bins, strategy)
    gaps = np.abs(curve.mean_predicted - curve.observed_frequency)
    return float(np.sum(curve.counts * gaps) / np.sum(curve.counts))


def error_rate(y, prediction) -> float:
    """Fraction of misclassified samples.

    ``prediction`` holds either labels of the same kind as ``y`` or
    probabilities of the positive class; a probability >= 1/2 predicts the
    positive class (the rule under which bayesvm's probabilities agree with
    the sign of the SVM output).
    """
    t, positive = _positive_indicator(y)
    pred = np.asarray(prediction)
    if pred.ndim == 2 and pred.shape[1] == 1:
        pred = pred.ravel()
    if pred.shape == t.shape and np.all(np.isin(pred, np.unique(np.asarray(y)))):
        predicted_positive = pred == positive
    else:
        predicted_positive = _check_probabilities(pred, t.shape[0]) >= 0.5
    return float(np.mean(predicted_positive != (t > 0)))
