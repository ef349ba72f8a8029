"""The evidence of an SVM's hyperparameters at one point, ln P(D | C, K) = ln Q(D) - ln N(D).

The one-cell entry points into :mod:`bayesvm.evidence.approximations` (the
estimators and their names are described there): :func:`log_evidence` fits
the MAP SVM, computes ln Q(D) and ln N(D) and returns an :class:`Evidence`
with every term, the standard errors of the sampled parts and the fit;
:func:`naive_evidence` and :func:`log_normalization` compute one part
(theory: "Why C and k0 need the evidence" and "The normalisation factor").
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .._precision import float64, numpy_leaves
from .._validation import TrainingData, check_inputs, check_kernel, check_labels, check_positive, collapsed_training_data
from .._warnings import warn_user
from .approximations import (
    NAIVE_ESTIMATORS,
    NORMALIZATION_ESTIMATORS,
    STAND_IN_ESTIMATORS,
    Cells,
    Estimate,
    naive_estimator,
    normalization_estimator,
)
from ..inference.ep import EPResult
from .._linalg import distinct_rows
from ..exceptions import ConvergenceWarning, EvidenceBudgetWarning, UntrustedEvidenceWarning
from ..kernels import RBF, Kernel, gram_matrix
from ..normalization.budget import EvidenceBudget
from ..low_rank import inducing_inputs, low_rank_prior
from ..normalization.low_rank import annealed_log_normalization_low_rank
from ..inference.laplace import DETERMINANTS, NaiveEvidenceTerms
from ..normalization.draws import PRIOR_DRAWS, STAND_IN_INPUTS, normalization_inputs
from ..posterior import LowRankPosterior, Posterior, low_rank_posteriors
from ..solver.dual import MapSVM, fit_map_on_gram

__all__ = [
    "Evidence",
    "OneVsRestEvidence",
    "log_evidence",
    "log_evidence_one_vs_rest",
    "log_normalization",
    "log_naive_evidence",
    "naive_evidence",
    "evidences_at",
    "one_vs_rest_evidence",
    "point_cells",
    "training_normalization",
]

#: Laplace-style evidence is flagged when more than this share of the points is marginal: above it the Laplace
#: value lies several nats above the sampled reference (theory: "Where the Laplace form breaks"; documentation: evidence
#: accuracy).
LAPLACE_MARGINAL_SHARE = 0.075
#: the Laplace-style value's excess over tempered sampling against the share of marginal points, least squares:
#: excess ~= slope * share + intercept nats, residual sd in nats (documentation: evidence accuracy).
LAPLACE_OPTIMISM_SLOPE = 28.6
LAPLACE_OPTIMISM_INTERCEPT = 4.2
LAPLACE_OPTIMISM_RESIDUAL_SD = 4.2


@dataclass(frozen=True)
class Evidence:
    """ln P(D) = naive - log_normalization, with its parts.

    Attributes
    ----------
    total, total_se : ln P(D) and its standard error (from the sampled terms).
    naive, naive_se : ln Q(D), the naive evidence, and its standard error
        (0 for the deterministic approximations).
    terms : the parts of the Laplace-style ln Q(D) (None for the others).
    log_normalization, log_normalization_se, normalization_ess : ln N(D), its
        standard error and the effective sample size of its estimator (inf
        where it reports none: a deterministic estimator, the grid's pooled
        check; :meth:`summary` then leaves the row out).
    n_marginal : size of the marginal set at the MAP solution (None on the
        low-rank path, which fits no MAP SVM).
    approximation, determinant : how ln Q(D) was computed.
    fit : the MAP SVM (None on the low-rank path).
    low_rank : on the low-rank path, EP's posterior under the low-rank prior
        (:class:`~bayesvm.posterior.LowRankPosterior`); None otherwise.
    ep : with ``approximation="ep"``, EP's run for ln Q(D), converged fully, which
        :meth:`bayesvm.posterior.Posterior.from_fit` reuses; None otherwise.
    naive_converged : the ln Q(D) estimate is trusted (EP converged; finite).
    normalization_trusted : the ln N(D) estimate is trusted (the sampler's
        independent runs agree; EP converged; enough effective prior draws).
    posterior : Sollich's Gaussian posterior around the fit, built on first use.
    """

    total: float
    total_se: float
    naive: float
    naive_se: float
    terms: NaiveEvidenceTerms | None
    log_normalization: float
    log_normalization_se: float
    normalization_ess: float
    n_marginal: int | None
    approximation: str
    determinant: str
    normalization: str
    fit: MapSVM | None
    naive_converged: bool = True
    normalization_trusted: bool = True
    low_rank: LowRankPosterior | None = None
    ep: EPResult | None = None

    def __getstate__(self):
        # JAX arrays would unpickle in the precision of the moment (float32 with the flag off): store NumPy
        return numpy_leaves(self.__dict__)

    @cached_property
    def posterior(self) -> Posterior | LowRankPosterior:
        return self.low_rank if self.fit is None else Posterior.from_fit(self.fit)

    @property
    def n(self) -> int:
        return self.low_rank.n if self.fit is None else int(self.fit.X.shape[0])

    def summary(self) -> str:
        """A readable table of the evidence and its terms."""
        rows = [("ln P(D)  (total)", f"{self.total:12.3f} +- {self.total_se:.3f}")]
        rows.append((f"ln Q(D)  (naive, {self.approximation})", f"{self.naive:12.3f} +- {self.naive_se:.3f}"))
        if self.terms is not None:
            rows += [
                ("   n ln kappa(C)", f"{float(self.terms.log_kappa_term):12.3f}"),
                ("   -1/2 sum y a theta", f"{float(self.terms.quadratic_term):12.3f}"),
                ("   -C sum hinge", f"{float(self.terms.hinge_term):12.3f}"),
                (f"   -1/2 ln det ({self.determinant})", f"{float(self.terms.log_det_term):12.3f}"),
            ]
        rows.append((f"ln N(D)  (normalisation, {self.normalization})",
                     f"{self.log_normalization:12.3f} +- {self.log_normalization_se:.3f}"))
        if np.isfinite(self.normalization_ess):
            rows.append(("   effective samples", f"{self.normalization_ess:12.1f}"))
        if self.n_marginal is not None:
            rows.append(("marginal points", f"{self.n_marginal:8d} of {self.n}"))
        else:
            rows.append(("inducing inputs", f"{self.low_rank.n_inducing:8d} for {self.n} points"))
        width = max(len(name) for name, _ in rows)
        return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


@float64
def point_cells(X, kernel: Kernel, C: float, y=None, n: int | None = None, weights=None) -> Cells:
    """(C, kernel) as one cell on the inputs X with the rows' ``weights`` (None: 1 each): the one unit-amplitude,
    zero-offset Gram matrix that every estimate at the point (the MAP fits, ln Q(D) of each problem, ln N(D))
    shares."""
    X = np.asarray(X, dtype=np.float64)
    base = gram_matrix(kernel.replace(amplitude=1.0, offset=0.0), X)
    amplitude = float(kernel.amplitude)
    _, group = np.unique(X, axis=0, return_inverse=True)
    return Cells.at(base, float(kernel.offset) / amplitude, amplitude, C, y=y, n=n, rows=distinct_rows(X, weights),
                    weights=weights, group=group.ravel())


def _naive_estimate(cells: Cells, approximation: str, determinant: str, random_state) -> Estimate:
    """ln Q(D) of the one cell by the named approximation; warns where EP has not converged. EP converges its sites
    fully (``log_z_tol`` 0), so that its run also serves the posterior (``Evidence.ep``)."""
    estimator = naive_estimator(approximation, determinant=determinant, key=random_state, log_z_tol=0.0)
    estimate = estimator(cells).at(0)
    if approximation == "ep" and not estimate.trusted:
        warn_user("EP for ln Q(D) did not converge at these hyperparameters, so its value is unreliable; check it "
                  "with approximation='sampled'", ConvergenceWarning)
    return estimate


@float64
def naive_evidence(
    fit: MapSVM, approximation: str = "ep", *, determinant: str = "regularized", random_state=0
) -> Estimate:
    """ln Q(D) at a fitted MAP SVM's hyperparameters by the named approximation (one cell of
    :mod:`bayesvm.evidence.approximations`); the Laplace terms are in ``diagnostics["terms"]``."""
    return _naive_estimate(point_cells(fit.X, fit.kernel, fit.C, y=fit.y, weights=fit.weights), approximation,
                           determinant, random_state)


@float64
def log_naive_evidence(fit: MapSVM, *, determinant: str = "regularized") -> NaiveEvidenceTerms:
    """Sollich's Laplace-style ln Q(D) for a fitted MAP SVM, term by term (see :mod:`bayesvm.inference.laplace`)."""
    return NaiveEvidenceTerms(**naive_evidence(fit, "laplace", determinant=determinant).diagnostics["terms"])


@float64
def log_normalization(
    *,
    kernel: Kernel,
    C: float,
    n: int,
    inputs,
    method: str = "annealed",
    n_samples: int = PRIOR_DRAWS,
    max_inputs: int = STAND_IN_INPUTS,
    random_state=0,
    evidence_budget: float = 1.0,
) -> Estimate:
    """ln N(D) for n training points; ``method`` names both the integral and the estimator.

    Over the n training inputs (``inputs`` must be those n points; theory:
    "The single-draw identity"), ln N(D) ~= ln E_theta[prod_i nu(theta(x_i))]:
    ``"annealed"`` (default: tempered SMC, the reference estimator) or ``"ep"``
    (deterministic, but tens of nats low where the latents are strongly
    correlated; theory: "Expectation propagation").

    Over M stand-in inputs (``inputs`` subsampled to ``max_inputs``; theory:
    "The normalisation factor"), ln N(D) ~= ln E_theta[(mean_j nu(theta(x_j)))^n]:
    ``"annealed-stand-in"`` (tempered SMC) or ``"prior"`` (plain sampling
    with ``n_samples`` draws, biased low by many nats at realistic n).

    Returns the :class:`~bayesvm.evidence.approximations.Estimate` of the one cell
    (value, se, trusted, diagnostics such as the effective sample size
    ``"ess"``); warns when it is not to be trusted. ``random_state`` seeds the
    sampling estimators (fix it for common random numbers across hyperparameters).
    ``evidence_budget`` scales ``"annealed"``'s fixed work (:class:`bayesvm.normalization.budget.EvidenceBudget`).
    """
    if method not in NORMALIZATION_ESTIMATORS:
        raise ValueError(f"method must be one of {tuple(NORMALIZATION_ESTIMATORS)}; got {method!r}")
    kernel = check_kernel(kernel)
    C = check_positive(C, "C")
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer (the number of training points); got {n!r}")
    n_samples = int(check_positive(n_samples, "n_samples"))
    inputs = check_inputs(inputs, name="inputs")
    if method in STAND_IN_ESTIMATORS:
        inputs = normalization_inputs(inputs, "training", max_inputs=max_inputs, random_state=random_state)
    elif inputs.shape[0] != n:
        raise ValueError(
            f"method={method!r} integrates over the n training inputs: n = {n} but inputs has "
            f"{inputs.shape[0]} rows (use 'annealed-stand-in' for stand-in inputs)"
        )
    return _normalization_estimate(point_cells(inputs, kernel, C, n=int(n)), method, n_samples, random_state,
                                   option="method", budget=EvidenceBudget(evidence_budget))


def training_normalization(data: TrainingData, C: float, kernel: Kernel, *, random_state=0,
                           keep_particles: bool = False, budget: EvidenceBudget = EvidenceBudget(),
                           cells: Cells | None = None) -> Estimate:
    """ln N(D) over validated ``data``'s training inputs at a valid (C, kernel) by the default estimator (tempered
    SMC), as :func:`evidences_at` computes it; warns when it is not to be trusted. ``keep_particles``: its
    ``diagnostics["annealing"]`` is the sampler's result with its final particles (theta (R, N, M) over the inputs
    padded to :func:`bayesvm._linalg.problem_size`), the same value (a selection re-anchors its search path on them:
    :meth:`bayesvm.normalization.path.FullPathPrior.anchored`); ``budget``: its fixed work; ``cells``:
    :func:`point_cells` of the point where the caller has them already (one Gram matrix per point)."""
    cells = point_cells(data.X, kernel, C, weights=data.weights) if cells is None else cells
    return _normalization_estimate(cells, "annealed", 0, random_state, keep_particles=keep_particles, budget=budget)


def _normalization_estimate(cells: Cells, method: str, n_samples: int, random_state, keep_particles: bool = False,
                            option: str = "normalization",
                            budget: EvidenceBudget = EvidenceBudget()) -> Estimate:
    """ln N(D) of the one cell (its inputs: the training inputs, or stand-ins with ``cells.n`` the exponent) by the
    named estimator at ``budget``; warns when it is not to be trusted (:class:`bayesvm.EvidenceBudgetWarning` where
    the fixed budget of ``"annealed"`` ran out before its runs agreed). ``option``: the caller's name for the
    estimator's argument (``normalization`` in :func:`log_evidence`, ``method`` in :func:`log_normalization`),
    which the warning names."""
    estimate = normalization_estimator(method, key=random_state, n_samples=n_samples, budget=budget,
                                       keep_particles=keep_particles)(cells).at(0)
    if not estimate.trusted:
        warn_user(_UNTRUSTED_NORMALIZATION[method].format(option=option, **estimate.diagnostics),
                  EvidenceBudgetWarning if method.startswith("annealed") else UntrustedEvidenceWarning)
    return estimate


#: what an untrusted ln N(D) means, by estimator, and what to pass instead ({option}: the caller's argument)
_UNTRUSTED_NORMALIZATION = {
    "annealed": "ln N(D)'s fixed budget ran out before its tempered-SMC runs agreed (effective number of runs "
                "{ess:.1f} of {n_runs}), so the value is likely biased low and its error is that of a single run; "
                "pass a larger evidence_budget (or call BayesianSVC.certify_evidence) to buy more work",
    "annealed-stand-in": "the tempered-SMC runs for ln N(D) over stand-in inputs disagree (effective number of runs "
                         "{ess:.1f} of {n_runs}), so the value is likely biased low and its error is that of a single "
                         "run; pass a larger evidence_budget, or {option}='annealed' (over the training inputs)",
    "ep": "EP for ln N(D) did not converge, so its value is unreliable; pass {option}='annealed' (the default)",
    "prior": "ln N(D) by plain prior sampling rests on {ess:.1f} effective draws of {n_samples}, so it is likely "
             "biased low by several nats; pass a larger n_samples or {option}='annealed' (the default)",
}


@float64
def log_evidence(
    X,
    y,
    *,
    C: float = 1.0,
    kernel: Kernel | None = None,
    approximation: str = "ep",
    determinant: str = "regularized",
    normalization: str = "annealed",
    normalization_inputs_from="training",
    n_samples: int = PRIOR_DRAWS,
    max_inputs: int = STAND_IN_INPUTS,
    random_state=0,
    inducing=None,
    evidence_budget: float = 1.0,
    sample_weight=None,
) -> Evidence:
    """ln P(D | C, kernel) for a data set.

    Parameters
    ----------
    X, y : training inputs and two-valued labels; rows with equal input and label are one row of their summed
        weight (exact: theory, "Weights and repeated rows"), so ``fit`` holds the distinct rows.
    C, kernel : hyperparameters (kernel default ``RBF()``).
    approximation : how ln Q(D) is computed: ``"ep"`` (default),
        ``"laplace"`` (Sollich's Laplace-style form; theory: "The naive
        evidence: a Laplace-style approximation") or
        ``"sampled"`` (see the module docstring).
    determinant : for ``"laplace"``: ``"regularized"`` det(I + L_m K_m)
        (default) or ``"raw"`` det(L_m K_m).
    normalization : estimator of ln N(D) (see :func:`log_normalization`);
        the default ``"annealed"`` is what the selection and
        :class:`~bayesvm.BayesianSVC` report.
    normalization_inputs_from : for the stand-in methods, the inputs standing
        in for Q(x): ``"training"``, ``"gaussian"``, ``"box"`` or an array (see
        :func:`bayesvm.normalization.draws.normalization_inputs`).
    n_samples, max_inputs, random_state : of the sampling estimators.
    inducing : None (the full n x n prior), or the low-rank prior through
        inducing inputs (theory: "Large data: a low-rank prior"): their number
        m (chosen by k-means on X, :func:`bayesvm.low_rank.inducing_inputs`) or
        an (m, d) array of them. Then ln Q(D) is EP and ln N(D) tempered SMC
        over the prior's m + 1 weights (:mod:`bayesvm.normalization.low_rank`),
        both O(n m^2); no MAP SVM is fitted (``fit`` is None) and the posterior
        is ``low_rank``.

    evidence_budget : a positive number scaling ln N(D)'s fixed work (the slice moves of tempered SMC;
        :class:`bayesvm.normalization.budget.EvidenceBudget`): the estimate never runs past a ceiling fixed
        from n, the prior's numerical rank and C before it starts, and where its runs have not agreed by then
        it warns with :class:`bayesvm.EvidenceBudgetWarning` and reports the spread of a single run as its
        error (documentation: normalisation, "Cost: a fixed budget").
    sample_weight : (n_samples,) non-negative weights, each row's likelihood term to that power (a row of weight 2
        is the row twice; 0: left out). Weighted rows take ``approximation`` "ep" or "laplace" and
        ``normalization="annealed"``.
    """
    if inducing is None:
        for name, value, accepted in (("approximation", approximation, NAIVE_ESTIMATORS),
                                      ("normalization", normalization, NORMALIZATION_ESTIMATORS),
                                      ("determinant", determinant, DETERMINANTS)):
            if value not in accepted:
                raise ValueError(f"{name} must be one of {tuple(accepted)}; got {value!r}")
    elif (approximation, normalization) != ("ep", "annealed"):
        raise ValueError("with inducing inputs the evidence is computed by EP (approximation='ep') and "
                         "tempered SMC (normalization='annealed') only")
    data, _ = collapsed_training_data(X, y, sample_weight)
    if data.classes.size > 2:
        check_labels(y, data.X.shape[0])  # raises: exactly two classes
    C, kernel = check_positive(C, "C"), check_kernel(RBF() if kernel is None else kernel, data.X.shape[1])
    budget = EvidenceBudget(evidence_budget)
    if inducing is not None:
        return _low_rank_evidences(data, C, kernel, inducing, random_state, budget)[0]
    return evidences_at(data, C, kernel, approximation=approximation, determinant=determinant,
                        normalization=normalization, normalization_inputs_from=normalization_inputs_from,
                        n_samples=n_samples, max_inputs=max_inputs, random_state=random_state, budget=budget)[0]


def evidences_at(data: TrainingData, C: float, kernel: Kernel, *, approximation: str = "ep",
                 determinant: str = "regularized", normalization: str = "annealed", normalization_inputs_from="training",
                 n_samples: int = PRIOR_DRAWS, max_inputs: int = STAND_IN_INPUTS, random_state=0,
                 normalization_estimate: Estimate | None = None,
                 budget: EvidenceBudget = EvidenceBudget(), cells: Cells | None = None) -> tuple[Evidence, ...]:
    """The :class:`Evidence` of each binary problem of validated ``data`` at a valid (C, kernel).

    One unit Gram matrix of the training inputs serves the problems' MAP fits, their ln Q(D) and the one ln N(D),
    which depends on the inputs only; the options are :func:`log_evidence`'s. ``normalization_estimate``: that
    ln N(D) where the caller has computed it already by the ``normalization`` estimator
    (:func:`training_normalization`); ``budget``: ln N(D)'s fixed work; ``cells``: :func:`point_cells` of the
    point where the caller has them already.
    """
    if data.weights is not None and (approximation == "sampled" or normalization != "annealed"):
        raise ValueError(f"weighted or repeated rows (sample_weight) take approximation='ep' or 'laplace' and "
                         f"normalization='annealed'; got approximation={approximation!r}, "
                         f"normalization={normalization!r}")
    cells = point_cells(data.X, kernel, C, weights=data.weights) if cells is None else cells
    K = cells.prior(0)
    fits = [fit_map_on_gram(K, data.X, problem.Y[0], problem.classes, C, kernel, weights=data.weights)
            for problem in data.problems]
    if normalization_estimate is not None:
        norm = normalization_estimate
    elif normalization in STAND_IN_ESTIMATORS:
        inputs = normalization_inputs(data.X, normalization_inputs_from, max_inputs=max_inputs,
                                      random_state=random_state)
        norm = _normalization_estimate(point_cells(inputs, kernel, C, n=data.X.shape[0]), normalization, n_samples,
                                       random_state, budget=budget)
    else:
        norm = _normalization_estimate(cells, normalization, n_samples, random_state, budget=budget)
    evidences = []
    for fit in fits:
        naive = _naive_estimate(cells._replace(y=np.asarray(fit.y, dtype=np.float64)), approximation, determinant,
                                random_state)
        evidences.append(_evidence_at_fit(fit, naive, norm, approximation, determinant, normalization))
    return tuple(evidences)


def _evidence_at_fit(fit: MapSVM, naive: Estimate, norm: Estimate, approximation: str, determinant: str,
                     normalization: str) -> Evidence:
    """ln P(D) at the fit from its ln Q(D) (by ``approximation``) and ln N(D)."""
    n_marginal = int(fit.marginal.sum())
    terms = naive.diagnostics.get("terms")
    terms = None if terms is None else NaiveEvidenceTerms(**{k: np.asarray(v) for k, v in terms.items()})
    if approximation == "laplace":
        _warn_outside_range(terms, n_marginal, fit.X.shape[0], determinant)
    return Evidence(
        total=naive.value - norm.value,
        total_se=float(np.hypot(naive.se, norm.se)),
        naive=naive.value,
        naive_se=naive.se,
        terms=terms,
        log_normalization=norm.value,
        log_normalization_se=norm.se,
        normalization_ess=float(norm.diagnostics.get("ess", np.inf)),
        n_marginal=n_marginal,
        approximation=approximation,
        determinant=determinant,
        normalization=normalization,
        fit=fit,
        naive_converged=naive.trusted,
        normalization_trusted=norm.trusted,
        ep=naive.diagnostics.get("ep"),
    )


def _low_rank_evidences(data: TrainingData, C: float, kernel: Kernel, inducing, random_state,
                        budget: EvidenceBudget = EvidenceBudget()) -> tuple[Evidence, ...]:
    """The evidence of each binary problem of validated ``data`` on the FITC low-rank prior through the inducing
    inputs (:func:`log_evidence`'s ``inducing``: their number, or an array); ln N(D), which depends on X only, is
    estimated once for all of them."""
    X = data.X
    if isinstance(inducing, (int, np.integer)) and not isinstance(inducing, bool):
        Z = inducing_inputs(X, int(inducing), random_state=random_state, sample_weight=data.weights)
    else:
        Z = check_inputs(inducing, name="inducing", n_features=X.shape[1])
    norm, _ = annealed_log_normalization_low_rank(low_rank_prior(kernel, X, Z), C,
                                                  key=random_state, budget=budget, weights=data.weights)
    if not norm.runs_agree:
        warn_user(_UNTRUSTED_NORMALIZATION["annealed"].format(option="normalization", ess=norm.ess, n_runs=norm.n_runs),
                  EvidenceBudgetWarning)
    # one EP run per problem serves ln Q(D) and the posterior; the k problems share one low-rank prior
    fitted = low_rank_posteriors(data, C, kernel, Z)
    evidences = []
    for value, converged, posterior in zip(fitted.log_naive, fitted.converged, fitted.posteriors):
        if not converged:
            warn_user("EP for ln Q(D) on the low-rank prior did not converge, so its value is unreliable; compare "
                      "with more inducing inputs (inducing=...) or the full prior (inducing=None)", ConvergenceWarning)
        evidences.append(Evidence(
            total=float(value) - norm.value, total_se=norm.se, naive=float(value), naive_se=0.0, terms=None,
            log_normalization=norm.value, log_normalization_se=norm.se, normalization_ess=norm.ess, n_marginal=None,
            approximation="ep", determinant="regularized", normalization="annealed", fit=None,
            naive_converged=bool(converged), normalization_trusted=norm.runs_agree, low_rank=posterior,
        ))
    return tuple(evidences)


@dataclass(frozen=True)
class OneVsRestEvidence:
    """The evidence of k one-vs-rest binary problems on one set of inputs, at shared hyperparameters.

    ``problems[c]`` is the :class:`Evidence` of class ``classes[c]`` against the rest (two classes: one problem,
    ``classes[1]`` against ``classes[0]``). ``total`` = sum_c ln P(D_c) is the evidence of the k problems read as
    independent models (theory: "More than two classes"). At shared hyperparameters
    (``shared_normalization``) ln N(D), which depends on the inputs only, is one estimate for every problem,
    and the total is sum_c ln Q(D_c) - k ln N(D); with hyperparameters chosen per class each problem has its own.
    """

    classes: np.ndarray
    problems: tuple[Evidence, ...]
    shared_normalization: bool = True

    @property
    def total(self) -> float:
        return float(sum(e.total for e in self.problems))

    @property
    def total_se(self) -> float:
        """Independent errors add in quadrature; one shared ln N(D)'s error counts k times."""
        if not self.shared_normalization:
            return float(np.sqrt(sum(e.total_se**2 for e in self.problems)))
        naive_se = np.sqrt(sum(e.naive_se**2 for e in self.problems))
        return float(np.hypot(naive_se, len(self.problems) * self.problems[0].log_normalization_se))

    @property
    def trusted(self) -> bool:
        return all(e.naive_converged and e.normalization_trusted for e in self.problems)


@float64
def log_evidence_one_vs_rest(X, y, *, C: float = 1.0, kernel: Kernel | None = None, random_state=0,
                             inducing=None, evidence_budget: float = 1.0, sample_weight=None) -> OneVsRestEvidence:
    """ln P(D) of the one-vs-rest problems of a k-class data set at shared hyperparameters (EP and tempered SMC,
    :func:`log_evidence`'s defaults), with one ln N(D) for all k problems.

    X, y : training inputs and labels of two or more classes; C, kernel, random_state, inducing, evidence_budget : as
    in :func:`log_evidence`; sample_weight : as there. Two classes give one problem, the same numbers as
    :func:`log_evidence`.
    """
    data, _ = collapsed_training_data(X, y, sample_weight)
    C, kernel = check_positive(C, "C"), check_kernel(RBF() if kernel is None else kernel, data.X.shape[1])
    return one_vs_rest_evidence(data, C, kernel, random_state=random_state, inducing=inducing,
                                budget=EvidenceBudget(evidence_budget))


def one_vs_rest_evidence(data: TrainingData, C: float, kernel: Kernel, *, random_state=0, inducing=None,
                         normalization_estimate: Estimate | None = None,
                         budget: EvidenceBudget = EvidenceBudget(), cells: Cells | None = None) -> OneVsRestEvidence:
    """:func:`log_evidence_one_vs_rest` on validated data at a valid (C, kernel); ``normalization_estimate`` and
    ``cells`` as in :func:`evidences_at` (full prior only); ``budget``: ln N(D)'s fixed work."""
    if inducing is not None:
        if normalization_estimate is not None:
            raise ValueError("normalization_estimate is for the full prior; the low-rank prior estimates its own")
        return OneVsRestEvidence(data.classes, _low_rank_evidences(data, C, kernel, inducing, random_state, budget))
    return OneVsRestEvidence(data.classes, evidences_at(data, C, kernel, random_state=random_state,
                                                        normalization_estimate=normalization_estimate, budget=budget,
                                                        cells=cells))


def _warn_outside_range(terms: NaiveEvidenceTerms, n_marginal: int, n: int, determinant: str) -> None:
    if not np.isfinite(terms.value):
        remedy = "determinant='regularized'" if determinant != "regularized" else "approximation='ep' (the default)"
        warn_user(
            f"the {determinant} Laplace determinant is degenerate (singular K_m or a marginal alpha at a bound), so "
            f"ln Q(D) = {float(terms.value)}; pass {remedy}",
            UntrustedEvidenceWarning,
        )
    share = n_marginal / n
    if share > LAPLACE_MARGINAL_SHARE:
        warn_user(
            f"{n_marginal} of {n} points are marginal, where the Laplace-style ln Q(D) is too optimistic, by about "
            f"{LAPLACE_OPTIMISM_SLOPE * share + LAPLACE_OPTIMISM_INTERCEPT:.0f} +- {LAPLACE_OPTIMISM_RESIDUAL_SD:.0f} "
            "nats at this share; pass approximation='ep' (the default), or 'sampled' to check",
            UntrustedEvidenceWarning,
        )
