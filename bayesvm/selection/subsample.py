"""Subset-of-data selection: the hyperparameters chosen on a stratified random subsample of a large training set.

Every evaluation of the evidence costs at least O(n) per tempered-SMC particle
and EP sweep, and a search makes tens of them, so on tens of thousands of
rows a selection over all of them takes hours. The subset-of-data
approximation (Rasmussen & Williams 2006, "Gaussian Processes for Machine
Learning", section 8.3.1; Chalupka, Williams & Murray 2013, JMLR 14, found it
a strong baseline for choosing GP hyperparameters) chooses the hyperparameters
by the evidence of a random subsample of the rows and then fits the posterior
on all of them. The evidence it reports is the subsample's ln P(D_S), not the
full data's; with more rows the full evidence may prefer somewhat more
flexible settings (theory: "Large data: selection on a subsample").

:func:`selection_subset` draws the subsample, stratified by class so that every
class keeps its share; ``"auto"`` subsamples above :data:`AUTO_SUBSAMPLE_ABOVE`
rows, with a :class:`SubsampleNotice`.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
from sklearn.model_selection import train_test_split

from .._validation import TrainingData

__all__ = ["AUTO_SUBSAMPLE_ABOVE", "DEFAULT_SELECTION_SIZE", "SubsampleNotice", "selection_subset"]

#: with ``selection_size="auto"`` the selection uses every row up to this many, a subsample of
#: :data:`DEFAULT_SELECTION_SIZE` rows above. Measured on the 2-core development machine (adult, one cold process
#: each, docs/large-data.md): the search and its checks on every row took 24 s at 300 rows, 64 s at 500 and 294 s at
#: 1,000; on a subsample of 500, 750 and 1,000 of 20,000 rows 75, 224 and 268 s, with held-out NLL 0.346, 0.340
#: and 0.329 (grid search + Platt on 2,000 rows: 0.362)
AUTO_SUBSAMPLE_ABOVE = 1000
#: the rows ``"auto"`` selects on above :data:`AUTO_SUBSAMPLE_ABOVE`: a 20,000-row fit in about 1.5 minutes
DEFAULT_SELECTION_SIZE = 500


class SubsampleNotice(UserWarning):
    """The hyperparameters are selected on a subsample of the training rows because the training set is large."""


def selection_subset(data: TrainingData, selection_size="auto", *, random_state=0,
                     stacklevel: int = 2) -> tuple[TrainingData, np.ndarray | None]:
    """The rows the selection works on: ``(data, None)`` for all of them, or a stratified subsample and its row
    indices (sorted). Every class keeps at least two rows (the subsample grows by the few it takes).

    ``selection_size``: ``"auto"`` (all rows up to :data:`AUTO_SUBSAMPLE_ABOVE`, a subsample of
    :data:`DEFAULT_SELECTION_SIZE` above, with a :class:`SubsampleNotice`), None (all rows), or a number of rows
    (all of them when the training set is not larger). ``stacklevel``: the notice's, as in :func:`warnings.warn`
    (callers behind decorators raise it so that it points at the user's line).
    """
    n = data.X.shape[0]
    if selection_size is None:
        return data, None
    if isinstance(selection_size, str):
        if selection_size != "auto":
            raise ValueError(f"selection_size must be 'auto', None or a number of rows >= 2; got {selection_size!r}")
        if n <= AUTO_SUBSAMPLE_ABOVE:
            return data, None
        size = DEFAULT_SELECTION_SIZE
        warnings.warn(
            f"{n} training rows: the evidence, and the hyperparameters it selects, are computed on a stratified "
            f"random subsample of {size} rows (automatic above {AUTO_SUBSAMPLE_ABOVE}); the posterior is fitted on "
            f"all {n}. Pass selection_size=None to use every row (slow: a search's time grows about as n^2) or a "
            "number of rows",
            SubsampleNotice, stacklevel=stacklevel + 1,
        )
    elif (isinstance(selection_size, numbers.Integral) and not isinstance(selection_size, bool)
          and selection_size >= 2):
        size = int(selection_size)
    else:
        raise ValueError(f"selection_size must be 'auto', None or a number of rows >= 2; got {selection_size!r}")
    if size >= n:
        return data, None
    labels = np.argmax(data.Y, axis=0) if data.Y.shape[0] > 1 else (data.Y[0] > 0).astype(int)
    try:
        rows, _ = train_test_split(np.arange(n), train_size=size, stratify=labels, random_state=random_state)
    except ValueError as error:  # a class too rare to stratify, or a subsample too small to hold every class
        raise ValueError(f"a stratified subsample of {size} of the {n} training rows is not possible ({error}); pass "
                         "selection_size=None to select on every row, or a larger number of rows") from None
    rows = np.sort(np.concatenate([rows, _rare_class_rows(labels, rows, random_state)]))
    return TrainingData(data.X[rows], data.Y[:, rows], data.classes), rows


def _rare_class_rows(labels: np.ndarray, rows: np.ndarray, random_state) -> np.ndarray:
    """Rows to add so that every class has at least two rows in the subsample: stratification rounds a class
    rarer than one row in the subsample's size down to none, and its one-vs-rest problem would then have no
    positive example."""
    rng = np.random.default_rng(random_state)
    counts = np.bincount(labels[rows], minlength=labels.max() + 1)
    extra = [rng.choice(np.setdiff1d(np.flatnonzero(labels == c), rows), size=2 - counts[c], replace=False)
             for c in np.flatnonzero(counts < 2)]
    return np.concatenate(extra) if extra else np.empty(0, dtype=rows.dtype)
