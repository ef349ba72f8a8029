"""The evidence at a selected point, re-estimated tightly, and the tests it must pass.

A search moves on cheap estimates (loose EP, reweighted SMC particles). At
the point it returns, the evidence is computed again with the reference
estimators, and three tests decide whether the point can be trusted:

* ln N(D): a fresh tempered-SMC estimate over the training inputs at the fit's
  fixed budget (:class:`bayesvm.normalization.budget.EvidenceBudget`); its runs
  must agree (otherwise it is biased low and the evidence
  biased high), and it must agree with the search's estimate within
  ``NORMALIZATION_TOLERANCE`` nats or three standard errors
  (:func:`bayesvm.normalization.agreement.within_error`);
* ln Q(D): EP run to full convergence;
* EP's posterior (what the estimator predicts with) must converge: in the
  small-C, huge-amplitude corner its sites can keep moving for ever, and
  the class probabilities are then meaningless.

Nothing here mutates its inputs: :func:`check_point` returns an
:class:`Evidence`, a :class:`TrustReport` and the fresh ln N(D)'s particles, and :func:`warn_untrusted`
turns a failed report into warnings.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

from .._precision import float64
from .._validation import TrainingData
from .._warnings import warn_user
from ..evidence.log_evidence import (Evidence, OneVsRestEvidence, one_vs_rest_evidence, point_cells,
                                     training_normalization)
from ..kernels import Kernel
from ..exceptions import BayesvmWarning, ConvergenceWarning, EvidenceBudgetWarning, UntrustedEvidenceWarning
from ..normalization.agreement import within_error
from ..normalization.annealing import AnnealingResult
from ..normalization.budget import EvidenceBudget

__all__ = ["NORMALIZATION_TOLERANCE", "TrustReport", "check_point", "trust_report", "warn_untrusted"]

#: the search's ln N(D) and the reference agree within this many nats (or three standard errors)
NORMALIZATION_TOLERANCE = 1.0


class TrustReport(NamedTuple):
    """What the tests at a selected point found.

    search_log_normalization: the search's estimate of ln N(D) there;
    reference_log_normalization, reference_se: the fresh tempered-SMC value;
    runs_agree: its independent runs agreed within the fit's fixed budget
    (:class:`bayesvm.normalization.budget.EvidenceBudget`);
    normalization_agrees: search and reference within tolerance;
    naive_converged, posterior_converged: EP for ln Q(D) at full tolerance.
    """

    search_log_normalization: float
    reference_log_normalization: float
    reference_se: float
    runs_agree: bool
    normalization_agrees: bool
    naive_converged: bool

    @property
    def trusted(self) -> bool:
        return self.runs_agree and self.normalization_agrees and self.naive_converged


@float64
def check_point(data: TrainingData, C: float, kernel: Kernel, search_log_normalization: float,
                *, random_state=0, inducing=None,
                budget: EvidenceBudget = EvidenceBudget()) -> tuple[Evidence | OneVsRestEvidence, TrustReport,
                                                                    AnnealingResult | None]:
    """The evidence at (C, kernel) by :func:`bayesvm.log_evidence`'s defaults, the tests of the module docstring,
    and on the full prior the tempered-SMC result behind the fresh ln N(D) with its final particles (theta
    over the padded inputs; None on the low-rank prior), on which a search can re-anchor its path.

    The same call a fixed-hyperparameter :class:`~bayesvm.BayesianSVC` makes, so
    a selected and a fixed estimator report the same estimator at the same point (keeping the particles, as the
    sampler's last resampling left them, changes no value and no work);
    ``inducing`` as in :func:`bayesvm.log_evidence` (the low-rank prior). ``data``: the validated training
    data; two classes give an :class:`Evidence`, k >= 3 classes the
    :class:`OneVsRestEvidence` of the k one-vs-rest problems, whose ln Q(D) must all converge.
    """
    with warnings.catch_warnings():  # failures are reported by the report, once
        warnings.simplefilter("ignore", BayesvmWarning)
        cells = None if inducing is not None else point_cells(data.X, kernel, C, weights=data.weights)  # one Gram matrix
        norm = None if cells is None else training_normalization(data, C, kernel, random_state=random_state,
                                                                 keep_particles=True, budget=budget, cells=cells)
        evidence = one_vs_rest_evidence(data, C, kernel, random_state=random_state, inducing=inducing,
                                        normalization_estimate=norm, budget=budget, cells=cells)
    evidence = evidence.problems[0] if len(evidence.problems) == 1 else evidence
    reference = None if norm is None else norm.diagnostics["annealing"]
    return evidence, trust_report(evidence, search_log_normalization), reference


def trust_report(evidence: Evidence | OneVsRestEvidence, search_log_normalization: float) -> TrustReport:
    """The tests of the module docstring for the fresh ``evidence`` at a point (:func:`check_point`'s) against the
    search's estimate of ln N(D) there (a search that has refined its path may hold a new one for the same point)."""
    problems = evidence.problems if isinstance(evidence, OneVsRestEvidence) else (evidence,)
    shared = problems[0]  # ln N(D) is one estimate for every problem
    agrees = within_error(search_log_normalization, shared.log_normalization, se=shared.log_normalization_se,
                          floor=NORMALIZATION_TOLERANCE)
    return TrustReport(float(search_log_normalization), shared.log_normalization, shared.log_normalization_se,
                       bool(shared.normalization_trusted), bool(agrees),
                       all(problem.naive_converged for problem in problems))


def warn_untrusted(report: TrustReport, C: float, amplitude: float) -> None:
    """Say which test failed at the selected point, in the user's terms."""
    where = f"at the selected point (C = {C:.3g}, amplitude = {amplitude:.3g})"
    if not report.runs_agree:
        warn_user(
            f"ln N(D)'s fixed budget ran out before its tempered-SMC runs agreed {where}: ln P(D) is likely "
            f"overstated and its error ({report.reference_se:.2f} nats) is that of a single run. The hyperparameters "
            "and probabilities stand; pass a larger evidence_budget, or call certify_evidence() on the fitted "
            "estimator (bayesvm select --certify), to estimate ln P(D) more precisely",
            EvidenceBudgetWarning,
        )
    elif not report.normalization_agrees:
        warn_user(
            f"the search's ln N(D) ({report.search_log_normalization:.2f}) and a fresh estimate "
            f"({report.reference_log_normalization:.2f} +- {report.reference_se:.2f}) disagree {where}: the point "
            "may not be the evidence maximum, and ln P(D) there may be overstated by more than its standard error. "
            "Pass a larger evidence_budget for a more precise search",
            UntrustedEvidenceWarning,
        )
    if not report.naive_converged:
        warn_user(
            f"EP's posterior did not converge {where}, so ln Q(D) and the class probabilities there are unreliable "
            "(the small-C, huge-amplitude corner). Fix C, or fix a smaller amplitude",
            ConvergenceWarning,
        )
