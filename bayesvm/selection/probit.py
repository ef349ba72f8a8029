"""Hyperparameter selection for the GP classifier (probit likelihood) by its evidence.

The GP classifier's evidence is EP's ln Z alone (its likelihood is normalised: :mod:`bayesvm.evidence.probit`), so
the search is the Bayesian SVM's (:class:`bayesvm.selection.search.EvidenceAscent`: L-BFGS-B on the exact EP
gradient from the default starts within the default box, warm EP sites between evaluations) with its ln N(D)
path replaced by zero and its ln C coordinate held fixed: the probit has no C. The coordinates left are
(ln k0, ln k_b/k0, ln shape), or one ln length scale per feature (ARD). At the answer the end points are
re-evaluated best first by EP converged to full tolerance (:func:`bayesvm.evidence.probit.probit_evidence`), and the
first whose EP converged is returned: the one check a deterministic evidence needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .._precision import float64
from .._validation import TrainingData
from .._warnings import warn_user
from ..evidence.probit import ProbitEvidence, probit_evidence
from ..exceptions import ConvergenceWarning
from ..hyperparameters import SearchSpace, kernel_hyperparameters_at
from ..kernels import Kernel, is_ard
from ..normalization.agreement import clearly_above, combined_se
from .search import EvidenceAscent, SearchOptions, SearchResult, default_starts

__all__ = ["MODEL_CHOICE_MARGIN", "PROBIT_FIXABLE", "ProbitSelection", "evidence_prefers_probit", "probit_search_space",
           "select_probit"]

#: the hyperparameters a probit selection can hold fixed (besides the kernel's shape parameter)
PROBIT_FIXABLE = ("amplitude", "offset_ratio")


@dataclass(frozen=True)
class ProbitSelection:
    """The GP classifier's hyperparameters chosen by maximising its evidence, with the evidence at the answer.

    kernel: the chosen kernel (amplitude k0, offset k_b, shape); evidence: ln P(D) there by EP at full tolerance,
    with each problem's posterior (:class:`~bayesvm.evidence.probit.ProbitEvidence`); search: the record of the
    climbs (:class:`~bayesvm.selection.search.SearchResult`; its ln C coordinate is held at 0 and means nothing);
    n_checked: the end points re-evaluated before one converged.
    """

    kernel: Kernel
    evidence: ProbitEvidence
    search: SearchResult
    n_checked: int

    @property
    def log_evidence(self) -> float:
        return self.evidence.total

    @property
    def trusted(self) -> bool:
        """EP converged at the answer (the evidence has no sampled part to check)."""
        return self.evidence.naive_converged

    @property
    def hyperparameters(self) -> dict:
        """The chosen amplitude, offset and shape parameter (floats; per-feature length scales as an array)."""
        return {name: value for name, value in self.kernel.hyperparameters.items() if not isinstance(value, str)}

    def summary(self) -> str:
        chosen = ", ".join(f"{name} {np.array2string(np.asarray(value), precision=3)}"
                           for name, value in self.hyperparameters.items())
        return (f"GP classifier (probit) selected by its evidence: {chosen}\n{self.evidence.summary()}\n"
                f"search: {self.search.n_evaluations} evaluations, {self.search.ep_sweeps} EP sweeps, "
                f"{self.search.seconds:.1f} s")


def probit_search_space(X, template: Kernel, fixed: Mapping | None = None) -> SearchSpace:
    """The search's box for the probit GP: :meth:`bayesvm.hyperparameters.SearchSpace.default` with ln C held at 0
    (the probit has no C) and the hyperparameters of ``fixed`` held at their values: ``"amplitude"`` (k0),
    ``"offset_ratio"`` (k_b / k0) and the template's shape parameter (not with per-feature length scales)."""
    space = SearchSpace.default(X, template).fix(0, 0.0)
    fixed = {} if fixed is None else dict(fixed)
    shape_name = template.shape_parameter
    accepted = set(PROBIT_FIXABLE) | ({shape_name} if shape_name and not is_ard(template) else set())
    unknown = set(fixed) - accepted
    if unknown:
        raise ValueError(f"the probit GP's selection can hold {sorted(accepted)} fixed; got {sorted(unknown)}")
    for index, name in ((1, "amplitude"), (2, "offset_ratio"), (3, shape_name)):
        if name in fixed:
            value = float(np.asarray(fixed[name], dtype=np.float64))
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number to hold it fixed; got {fixed[name]!r}")
            space = space.fix(index, np.log(value))
    return space


@float64
def select_probit(data: TrainingData, template: Kernel, *, fixed: Mapping | None = None,
                  options: SearchOptions = SearchOptions(), progress=None) -> ProbitSelection:
    """The GP classifier's kernel hyperparameters maximising the evidence of validated ``data`` within the family
    ``template`` (module docstring): the summed evidence of the k one-vs-rest problems for k >= 3 classes, with
    shared hyperparameters. ``fixed``: hyperparameters held fixed (:func:`probit_search_space`); ``options``: the
    search's (:class:`~bayesvm.selection.search.SearchOptions`; its ln N(D) budget is not used); ``progress``: as
    :func:`bayesvm.selection.search.maximize_evidence`'s. Warns with :class:`bayesvm.ConvergenceWarning` where EP
    converged at none of the end points."""
    space = probit_search_space(data.X, template, fixed)
    starts = default_starts(space, data.X, template)
    ascent = EvidenceAscent.from_starts(data.X, data.Y, template, space=space, starts=starts, options=options,
                                        weights=data.weights, likelihood="probit", progress=progress)
    search = ascent.result()
    ranked = [step for step in search.ranked() if np.isfinite(step.log_evidence)]
    points = [step.x for step in ranked] or [starts[0]]  # nothing evaluated: the first start, checked as it is
    best = None
    for n_checked, x in enumerate(points, start=1):
        kernel = template.replace(**kernel_hyperparameters_at(template, x))
        evidence = probit_evidence(data, kernel, warn=False)
        best = best or (kernel, evidence, n_checked)
        if evidence.naive_converged:
            return ProbitSelection(kernel, evidence, search, n_checked)
    kernel, evidence, _ = best
    warn_user("EP for the GP classifier's evidence converged at none of the search's end points; the best one is "
              "returned, but its ln P(D) and posterior are unreliable", ConvergenceWarning)
    return ProbitSelection(kernel, evidence, search, len(points))


#: ``likelihood="auto"`` keeps the GP classifier where its evidence lies this many nats (beyond three standard errors
#: of the difference) above the SVM's: EP's ln Z of the probit lies up to 0.44 nats below annealing at large
#: amplitudes (documentation: expectation propagation), so a smaller lead is within what EP itself may misplace
MODEL_CHOICE_MARGIN = 1.0


def evidence_prefers_probit(hinge: tuple[float, float], probit: tuple[float, float]) -> bool:
    """Whether the GP classifier's ln P(D) lies clearly above the SVM's, each given as (value, standard error):
    above by :data:`MODEL_CHOICE_MARGIN` beyond three standard errors of the difference."""
    return clearly_above(probit[0], hinge[0], se=combined_se(probit[1], hinge[1]), margin=MODEL_CHOICE_MARGIN)
