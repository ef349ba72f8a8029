"""The warnings bayesvm raises, one class per thing a user may want to act on or filter.

Every warning the package raises is a :class:`BayesvmWarning`, so one filter silences or escalates all of them::

    import warnings
    import bayesvm

    warnings.simplefilter("error", bayesvm.UntrustedEvidenceWarning)  # stop where ln P(D) is not trusted
    warnings.simplefilter("ignore", bayesvm.SubsampleWarning)         # the selection's subsample is expected

Each message says what happened and names the parameter that changes it (documentation: user guide, "Warnings").
"""

from __future__ import annotations

from sklearn.exceptions import ConvergenceWarning as _SklearnConvergenceWarning

__all__ = [
    "BayesvmWarning",
    "ConvergenceWarning",
    "EvidenceBudgetWarning",
    "LowRankWarning",
    "SubsampleWarning",
    "UntrustedEvidenceWarning",
]


class BayesvmWarning(UserWarning):
    """The base class of every warning bayesvm raises."""


class UntrustedEvidenceWarning(BayesvmWarning):
    """ln P(D) (or one of its terms, ln Q(D) and ln N(D)) is not trusted at the stated accuracy: independent
    estimates disagree, or an approximation is used outside the range where it was validated."""


class EvidenceBudgetWarning(UntrustedEvidenceWarning):
    """ln N(D)'s fixed work budget ran out before its independent runs agreed: the value is returned with a
    widened standard error. A larger ``evidence_budget`` (or ``BayesianSVC.certify_evidence``) buys more work."""


class SubsampleWarning(BayesvmWarning):
    """The hyperparameters were chosen on a subsample of the training rows (``selection_size``); the posterior
    is still fitted on every row."""


class LowRankWarning(BayesvmWarning):
    """A low-rank (inducing-point) prior stands in for the full kernel matrix (``inducing``)."""


class ConvergenceWarning(BayesvmWarning, _SklearnConvergenceWarning):
    """An iterative solver (the MAP SVM's dual, EP, the evidence search) stopped before its tolerance was met.
    It is also scikit-learn's ``ConvergenceWarning``, so filters written for scikit-learn apply."""
