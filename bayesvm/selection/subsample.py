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
class keeps its share; ``"auto"`` subsamples above :data:`DEFAULT_SELECTION_SIZE`
rows, with a :class:`~bayesvm.SubsampleWarning`.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.model_selection import train_test_split

from .._validation import TrainingData
from .._warnings import warn_user
from ..exceptions import SubsampleWarning

__all__ = ["DEFAULT_SELECTION_SIZE", "selection_subset"]

#: with ``selection_size="auto"`` the selection uses every row up to this many, a stratified subsample of this many
#: rows above. 250: the mean held-out NLL of a 500-row subsample on the benchmark sets in less time, with every
#: check passed (documentation: speed, "Selection on a subsample")
DEFAULT_SELECTION_SIZE = 250


def selection_subset(data: TrainingData, selection_size="auto", *, random_state=0,
                     selects: bool = True) -> tuple[TrainingData, np.ndarray | None]:
    """The rows the selection works on: ``(data, None)`` for all of them, or a stratified subsample and its row
    indices (sorted). Every class keeps at least two rows (the subsample grows by the few it takes).

    ``selection_size``: ``"auto"`` (all rows up to :data:`DEFAULT_SELECTION_SIZE`, a subsample of that many
    above, with a :class:`~bayesvm.SubsampleWarning`), None (all rows), or a number of rows. Every row is kept where
    fewer rows than classes would be left out (a stratified draw leaves a row of each class out).
    ``selects``: False where every hyperparameter is fixed and the subsample serves the evidence alone (the warning
    says so).
    """
    n = data.X.shape[0]
    if selection_size is None:
        return data, None
    automatic = isinstance(selection_size, str) and selection_size == "auto"
    is_count = isinstance(selection_size, numbers.Integral) and not isinstance(selection_size, bool)
    if not (automatic or is_count and selection_size >= 2):
        raise ValueError(f"selection_size must be 'auto', None or a number of rows >= 2; got {selection_size!r}")
    size = DEFAULT_SELECTION_SIZE if automatic else int(selection_size)
    labels = np.argmax(data.Y, axis=0) if data.Y.shape[0] > 1 else (data.Y[0] > 0).astype(int)
    if n - size < len(data.classes):  # the rows left out could not hold every class: a stratified draw fails
        return data, None
    if automatic:
        what = "the hyperparameters are selected" if selects else "the evidence is computed (when it is read)"
        warn_user(
            f"{n} training rows: {what} on a stratified subsample of {size} rows and the posterior is fitted on all "
            f"{n}; pass selection_size=None to use every row (slow) or a number of rows",
            SubsampleWarning,
        )
    try:
        rows, _ = train_test_split(np.arange(n), train_size=size, stratify=labels, random_state=random_state)
    except ValueError as error:  # a class too rare to stratify, or a subsample too small to hold every class
        raise ValueError(f"a stratified subsample of {size} of the {n} training rows is not possible ({error}); pass "
                         "selection_size=None to select on every row, or a larger number of rows") from None
    rows = np.sort(np.concatenate([rows, _rare_class_rows(labels, rows, random_state)]))
    return data.rows(rows), rows


def _rare_class_rows(labels: np.ndarray, rows: np.ndarray, random_state) -> np.ndarray:
    """Rows to add so that every class has at least two rows in the subsample: stratification rounds a class
    rarer than one row in the subsample's size down to none, and its one-vs-rest problem would then have no
    positive example."""
    rng = np.random.default_rng(random_state)
    counts = np.bincount(labels[rows], minlength=labels.max() + 1)
    extra = [rng.choice(np.setdiff1d(np.flatnonzero(labels == c), rows), size=2 - counts[c], replace=False)
             for c in np.flatnonzero(counts < 2)]
    return np.concatenate(extra) if extra else np.empty(0, dtype=rows.dtype)
