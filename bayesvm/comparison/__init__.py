"""Side-by-side comparison of the Bayesian SVM's probabilities with what users reach for today.

The question a user brings: are the evidence-based probabilities better than
what I use? Two classes (:mod:`~bayesvm.comparison.two_classes`):
:func:`compare_calibration` against Platt scaling and the other calibration
methods of :mod:`bayesvm.calibration` and two references. More than two
(:mod:`~bayesvm.comparison.multiclass`): :func:`compare_multiclass` against
the one-vs-rest wrapper, grid search + Platt and a GP classifier.
"""

from .multiclass import (
    MULTICLASS_LABELS,
    MULTICLASS_METHODS,
    MULTICLASS_METRICS,
    SVC_GRID,
    MulticlassComparison,
    MulticlassSplit,
    compare_multiclass,
    multiclass_scores,
)
from .two_classes import (
    METHOD_LABELS,
    METHODS,
    METRICS,
    CalibrationComparison,
    SplitResult,
    compare_calibration,
    cross_validated_C,
    median_heuristic_kernel,
)

__all__ = [
    "METHODS",
    "METHOD_LABELS",
    "METRICS",
    "MULTICLASS_LABELS",
    "MULTICLASS_METHODS",
    "MULTICLASS_METRICS",
    "SVC_GRID",
    "CalibrationComparison",
    "MulticlassComparison",
    "MulticlassSplit",
    "SplitResult",
    "compare_calibration",
    "compare_multiclass",
    "cross_validated_C",
    "median_heuristic_kernel",
    "multiclass_scores",
]
