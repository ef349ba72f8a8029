"""The search's answer: its end points checked best first, the path refined where a check contradicts it.

:func:`select_by_search` climbs the evidence from the starts
(:class:`bayesvm.selection.search.EvidenceAscent`), then re-evaluates the end
points, best first, with :func:`bayesvm.log_evidence`'s defaults (EP at full
tolerance, a fresh tempered-SMC ln N(D) with the full budget) and returns the
first that passes the tests of :mod:`bayesvm.selection.trust`. Where an end
point's fresh ln N(D) is itself trusted but contradicts the search's, the
path is re-anchored there on the check's own tempered-SMC particles (the
low-rank prior's: a new anchor with the check's slice moves) and the search
climbs again (theory: "Hyperparameter selection"). :class:`SearchSelection` is the
result.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .._json import finite_or_none
from .._precision import float64
from .._validation import TrainingData
from .._warnings import warn_user
from ..evidence.log_evidence import Evidence, OneVsRestEvidence
from ..exceptions import ConvergenceWarning, UntrustedEvidenceWarning
from ..hyperparameters import SearchSpace
from ..kernels import Kernel, is_ard
from ..normalization.agreement import clearly_above, combined_se
from ..normalization.annealing import AnnealingResult
from ..normalization.budget import EvidenceBudget
from .search import EvidenceAscent, SearchOptions, SearchResult
from .search_priors import FullPrior, InducingPrior
from .trust import NORMALIZATION_TOLERANCE, TrustReport, check_point, trust_report, warn_untrusted

__all__ = ["SearchSelection", "hyperparameter_dict", "select_by_search"]


#: nats by which one fresh ln P(D) must exceed another's, on top of three standard errors, to count as clearly higher
_CLEARLY_HIGHER_NATS = 1.0


def _clearly_above(evidence: Evidence, other: Evidence) -> bool:
    """ln P(D) above the other's by more than 1 nat plus three standard errors of their difference."""
    return clearly_above(evidence.total, other.total, se=combined_se(evidence.total_se, other.total_se),
                         margin=_CLEARLY_HIGHER_NATS)


def _sound(report: TrustReport) -> bool:
    """The fresh ln P(D) at the point stands on its own: its ln N(D)'s runs agree and EP for ln Q(D) converged (only
    the search's own ln N(D) there may disagree with it)."""
    return report.runs_agree and report.naive_converged


def _chosen(checked: list) -> tuple:
    """The checked end point to return, of ``checked`` (step, C, kernel, evidence, report) in the order checked.

    The last one checked when it passes every test, unless a point checked before it has a sound fresh ln P(D)
    (:func:`_sound`) clearly above it: the fresh value there is the reference estimators' own, and only the search's
    path disagreed, so that point is the better answer (returned with a warning that says so). Where none passes,
    the highest sound point, else the search's best."""
    sound = [c for c in checked if _sound(c[4])]
    if not sound:
        return checked[0]
    highest = max(sound, key=lambda c: c[3].total)
    if checked[-1][4].trusted and not _clearly_above(highest[3], checked[-1][3]):
        return checked[-1]
    return highest


def _warn_unverified_higher(checked: list, chosen: Evidence) -> None:
    """Say so where a point the search reached has a clearly higher fresh ln P(D) than the answer but that value
    itself is not sound (:func:`_sound`): the answer is the best verified point, not the highest the search saw."""
    for _, C, kernel, evidence, report in checked:
        if not _sound(report) and _clearly_above(evidence, chosen):
            reason = ("ln N(D)'s runs disagree there, so that value may be too high" if not report.runs_agree
                      else "EP for ln Q(D) did not converge there")
            warn_user(
                f"the search also reached C = {C:.3g}, amplitude = {float(kernel.amplitude):.3g} with a fresh ln P(D) "
                f"of {evidence.total:.1f} +- {evidence.total_se:.1f}, above the returned {chosen.total:.1f}, but its "
                f"checks failed ({reason}); the returned point is the best verified one. To compare the two on "
                f"held-out data, fit BayesianSVC(C={C:.3g}, amplitude={float(kernel.amplitude):.3g}, ...) as well",
                UntrustedEvidenceWarning,
            )
            return


@dataclass(frozen=True)
class SearchSelection:
    """Hyperparameters chosen by the quasi-Newton search, with the evidence there and how it was found.

    best: C, amplitude, offset, C_k0, offset_ratio and the shape parameter by
    name (per-feature length scales as an array); best_value, best_se: ln P(D) at them by the reference estimators
    (EP at full tolerance, a fresh tempered-SMC ln N(D)); best_kernel; evidence:
    the full :class:`~bayesvm.evidence.log_evidence.Evidence`, or for k >= 3 classes the
    :class:`~bayesvm.evidence.log_evidence.OneVsRestEvidence` of the k one-vs-rest problems (ln P(D) is then
    their sum); report: the tests at the
    point (:class:`~bayesvm.selection.trust.TrustReport`); search: the record of every
    evaluation; seconds: wall time per phase ("search", "check").
    """

    kernel_name: str
    shape_name: str | None
    best: dict
    best_value: float
    best_se: float
    best_kernel: Kernel
    evidence: Evidence | OneVsRestEvidence
    report: TrustReport
    search: SearchResult
    seconds: dict
    check_evaluations: int = 0
    method: str = "search"

    def summary_counts(self) -> dict:
        """The work done: evaluations, EP sweeps, factorisations, SMC anchors, the likelihood evaluations of ln N(D)'s
        sampler in the search and in the checks, starts, refinements of the path, per-phase seconds."""
        return {"evaluations": self.search.n_evaluations, "ep_sweeps": self.search.ep_sweeps,
                "factorizations": self.search.factorizations, "anchors": self.search.n_anchors,
                "normalization_evaluations_search": self.search.likelihood_evaluations,
                "normalization_evaluations_check": self.check_evaluations,
                "starts": len(self.search.ends) - self.search.n_refinements,
                "refinements": self.search.n_refinements, **{f"seconds_{k}": v for k, v in self.seconds.items()}}

    def to_dict(self) -> dict:
        """A JSON-ready record: the choice, the evidence, the tests and the work."""
        return {
            "method": self.method, "kernel": self.kernel_name,
            "best": {k: float(v) if np.ndim(v) == 0 else np.asarray(v, dtype=float).tolist() for k, v in self.best.items()},
            "log_evidence": self.best_value, "log_evidence_se": self.best_se,
            **_evidence_terms(self.evidence),
            "checks": {k: (bool(v) if isinstance(v, (bool, np.bool_)) else float(v))
                       for k, v in self.report._asdict().items()},
            "work": self.summary_counts(),
            "path": [{"start": s.start, "x": s.x.tolist(), "log_evidence": finite_or_none(s.log_evidence)}
                     for s in self.search.steps],
        }


def _evidence_terms(evidence: Evidence | OneVsRestEvidence) -> dict:
    """ln Q(D) and ln N(D) for a JSON record; per class (the one shared ln N(D) once) for k one-vs-rest problems."""
    if isinstance(evidence, Evidence):
        return {"log_naive_evidence": evidence.naive, "log_normalization": evidence.log_normalization}
    return {"classes": evidence.classes.tolist(),
            "log_naive_evidence": [problem.naive for problem in evidence.problems],
            "log_evidence_per_class": [problem.total for problem in evidence.problems],
            "log_normalization": evidence.problems[0].log_normalization}


def hyperparameter_dict(C: float, kernel: Kernel) -> dict:
    """C, amplitude, offset, C_k0, offset_ratio and the shape parameter (if any; per-feature length scales as a
    float64 array) by name."""
    amplitude, offset = float(kernel.amplitude), float(kernel.offset)
    out = {"C": C, "amplitude": amplitude, "offset": offset, "C_k0": C * amplitude, "offset_ratio": offset / amplitude}
    if kernel.shape_parameter is not None:
        shape = np.asarray(getattr(kernel, kernel.shape_parameter), dtype=np.float64)
        out[kernel.shape_parameter] = shape if is_ard(kernel) else float(shape)
    return out


@float64
def select_by_search(data: TrainingData, template: Kernel, *, space: SearchSpace, starts: np.ndarray,
                     options: SearchOptions = SearchOptions(), prior: FullPrior | InducingPrior = FullPrior(),
                     random_state: int = 0, progress=None) -> SearchSelection:
    """Search, then re-evaluate the end points best first until one passes the tests of :mod:`bayesvm.selection.trust`.

    data: the validated training data (:func:`bayesvm._validation.training_data`). Two classes are one binary
    problem; k >= 3 classes are k one-vs-rest problems that share the hyperparameters, chosen by their summed
    evidence (:func:`~bayesvm.selection.search.maximize_evidence`; theory: "More than two classes"). Where an end
    point's fresh ln N(D) is itself trusted (its runs agree, EP converged) but contradicts the search's, the
    search's path was off there: up to ``options.refinements`` times the path is re-anchored at that point on the
    check's particles and the search climbs again from it (:meth:`~bayesvm.selection.search.EvidenceAscent.refine`),
    and its new end point joins the candidates. The answer is the first point that passes every test, or a point
    checked before it whose fresh ln P(D) is sound and clearly higher (:func:`_chosen`); a point that failed a test
    is returned with warnings that say which.
    """
    ascent = EvidenceAscent.from_starts(data.X, data.Y, template, space=space, starts=starts, options=options,
                                        prior=prior, random_state=random_state, progress=progress,
                                        weights=data.weights)
    for i, message in enumerate(ascent.messages):
        if message.startswith("skipped"):
            warn_user(f"start {i} of the search was {message}; the answer comes from the other starts",
                      ConvergenceWarning)
    check = _FreshChecks(data, prior, random_state, options.budget)
    refined_at: set[bytes] = set()
    while True:
        search = ascent.result()
        checked, refine_at = [], None
        for step in _candidates(search):
            checked.append(check(search, step))
            report = checked[-1][4]
            if report.trusted:
                break
            if _refinable(report) and step.x.tobytes() not in refined_at and len(refined_at) < options.refinements:
                refine_at = step
                break
        if refine_at is None:
            break
        refined_at.add(refine_at.x.tobytes())
        ascent.refine(refine_at.x, NORMALIZATION_TOLERANCE, check.reference(refine_at))
    step, C, kernel, evidence, report = _chosen(checked)
    if not report.trusted:
        warn_untrusted(report, C, float(kernel.amplitude))
    _warn_unverified_higher(checked, evidence)
    return SearchSelection(
        kernel_name=template.name, shape_name=template.shape_parameter, best=hyperparameter_dict(C, kernel),
        best_value=float(evidence.total), best_se=float(evidence.total_se), best_kernel=kernel, evidence=evidence,
        report=report, search=search, seconds={"search": search.seconds, "check": check.seconds},
        check_evaluations=check.likelihood_evaluations,
    )


def _candidates(search: SearchResult) -> list:
    """The end points the evidence could be evaluated at, best first (``RuntimeError`` if none)."""
    candidates = [s for s in search.ranked() if np.isfinite(s.log_evidence)]
    if not candidates:
        raise RuntimeError(
            "the evidence could not be evaluated at any start or at the candidates screened around them (EP did "
            "not converge with any of its fallbacks, tempered SMC's runs for ln N(D) disagreed, or the amplitude "
            "is beyond what float64 resolves): " + "; ".join(search.messages) + ". Fix some hyperparameters or "
            "move the bounds towards a smaller amplitude and a longer length scale"
        )
    return candidates


class _FreshChecks:
    """The tests at end points (:func:`bayesvm.selection.trust.check_point`), each point's fresh evidence computed
    once: a point met again (a refined path's climb can end where it began) is tested against that end's own
    ln N(D) (:func:`bayesvm.selection.trust.trust_report`). Keeps each fresh ln N(D)'s tempered-SMC result and
    particles (full prior) for a refinement there, and counts the seconds spent on fresh evidence."""

    def __init__(self, data: TrainingData, prior: FullPrior | InducingPrior, random_state,
                 budget: EvidenceBudget = EvidenceBudget()):
        self.data, self.prior, self.random_state, self.budget = data, prior, random_state, budget
        # end point -> (C, kernel, evidence by the reference estimators, its fresh ln N(D)'s tempered SMC)
        self.fresh: dict[bytes, tuple] = {}
        self.seconds = 0.0
        self.likelihood_evaluations = 0  # the fresh ln N(D)s' sampler work

    def __call__(self, search: SearchResult, step) -> tuple:
        """(step, C, kernel, evidence, report) at the end point ``step``."""
        point = step.x.tobytes()
        if point in self.fresh:
            C, kernel, evidence, _ = self.fresh[point]
            return step, C, kernel, evidence, trust_report(evidence, step.log_normalization)
        started = time.perf_counter()
        C, kernel = search.hyperparameters(step)
        evidence, report, reference = check_point(self.data, C, kernel, step.log_normalization,
                                                  random_state=self.random_state, budget=self.budget,
                                                  **self.prior.evidence_options)
        self.fresh[point] = (C, kernel, evidence, reference)
        self.likelihood_evaluations += 0 if reference is None else reference.likelihood_evaluations
        self.seconds += time.perf_counter() - started
        return step, C, kernel, evidence, report

    def reference(self, step) -> AnnealingResult | None:
        """The tempered-SMC result, particles included, behind the fresh ln N(D) at the checked end point ``step``
        (None on the low-rank prior)."""
        return self.fresh[step.x.tobytes()][3]


def _refinable(report: TrustReport) -> bool:
    """A fresh ln N(D) that is itself trusted (agreeing runs, EP converged) contradicts the search's path there."""
    return report.runs_agree and report.naive_converged and not report.normalization_agrees
